# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Write, from the variables schema (src/nccl_preflight/core/variables.py), every role's defaults
file and docs/variables.md.

The schema is the one place a variable's type, default, allowed values and doc are written; the
defaults files (roles/nccl_defaults/defaults/main/*.yml, roles/<role>/defaults/main.yml: a
one-line comment and one default per variable) and the page are made from it. `make variables`
runs this; `tests/unit/tree/test_variables_doc.py` fails when a committed file differs from what
it writes.

    python docs/make_variables.py            # rewrite the defaults files and docs/variables.md
    python docs/make_variables.py --check    # exit 1 when one of them is out of date
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path) -> Any:
    """This tree's module at ``path`` (whatever package is installed: a worktree's own)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


CORE = ROOT / "src" / "nccl_preflight" / "core"
_SCHEMA = _load("nccl_preflight_variables_schema", CORE / "variables.py")
_FILES = _load("nccl_preflight_defaults_files", CORE / "defaults_files.py")
ELSEWHERE = _SCHEMA.ELSEWHERE
FILES = _SCHEMA.FILES
DefaultsFile = _SCHEMA.DefaultsFile
Variable = _SCHEMA.Variable
WIDTH = _FILES.WIDTH
defaults_text = _FILES.defaults_text
value_lines = _FILES.value_lines

OUTPUT = ROOT / "docs" / "variables.md"


def render_defaults(file: DefaultsFile) -> str:
    """The text of one defaults file (core/defaults_files.py: the collection writes its own)."""
    return defaults_text(file)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _type(variable: Variable) -> str:
    kind = variable.type
    if variable.elements:
        kind = f"{kind} of {variable.elements}"
    if variable.choices:
        kind += ": " + ", ".join(str(choice) for choice in variable.choices)
    return kind


def _meaning(variable: Variable) -> str:
    notes = []
    if variable.per_node:
        notes.append("Per node.")
    if variable.derived:
        notes.append("Derived from other variables: not a knob.")
    if isinstance(variable.slurm, str):
        notes.append(f"Not under Slurm: {variable.slurm}.")
    elif variable.slurm is False:
        notes.append("Ansible only.")
    return " ".join([variable.details or variable.doc, *(f"*{note}*" for note in notes)])


def _table(variables: tuple[Variable, ...]) -> list[str]:
    out = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for variable in variables:
        default = "" if variable.default is None else _default(variable.default)
        row = (f"`{variable.name}`", _type(variable), default, _cell(_meaning(variable)))
        out.append("| " + " | ".join(row) + " |")
    return [*out, ""]


def _default(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return f"`{_cell(text)}`" if text else '`""`'


def _section(file: DefaultsFile) -> str:
    role = file.path.split("/")[0]
    where = f"roles/{file.path}"
    if role == "nccl_defaults":
        return f"Project-wide: {file.header.split(':')[0]} ({where}, read by every play)"
    return f"Role {role} ({where})"


def render_page() -> str:
    """docs/variables.md."""
    out = [
        "# Variables",
        "",
        "Every variable, its type, default and meaning, generated from the variables schema",
        "(src/nccl_preflight/core/variables.py) by `make variables` (do not edit by hand). Set",
        "them in the inventory's group_vars or host_vars, or with `-e`; the slurm command and",
        "node-check take the project-wide and pre-flight ones in their `--config` file.",
        "*Per node*: may differ between hosts (host_vars; under Slurm, `nccl_node_vars`).",
        "",
    ]
    for file in FILES:
        out += [f"## {_section(file)}", "", file.header, ""]
        for group in file.groups:
            if group.title:
                out += [f"### {group.title}", ""]
            out += _table(group.variables)
    out += ["## Set elsewhere (no role default)", "", *_table(ELSEWHERE)]
    return "\n".join(out).rstrip("\n") + "\n"


def outputs(root: Path = ROOT) -> dict[Path, str]:
    """{file: the text the schema gives it}: every defaults file and docs/variables.md."""
    texts = {root / "roles" / file.path: render_defaults(file) for file in FILES}
    texts[root / OUTPUT.relative_to(ROOT)] = render_page()
    return texts


def stale(root: Path = ROOT) -> list[str]:
    """The files (relative to ``root``) whose committed text differs from the schema's."""
    found = []
    for path, text in outputs(root).items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            found.append(path.relative_to(root).as_posix())
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether they are current")
    args = parser.parse_args(argv)
    if args.check:
        for name in stale():
            print(f"{name} is out of date: run make variables")
        return 1 if stale() else 0
    for path, text in outputs().items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
