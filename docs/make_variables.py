# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Write docs/variables.md: every role variable with its default and meaning, in groups.

The table is generated from the roles' defaults files, so it cannot drift from them: each
variable's meaning is the comment block right above it, and a group is a file (or a
`# --- Title ---` line inside one). `tests/unit/tree/test_variables_doc.py` fails when the committed
page differs from what this script writes, and when a variable has no comment.

    python docs/make_variables.py            # rewrite docs/variables.md
    python docs/make_variables.py --check    # exit 1 when docs/variables.md is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "variables.md"
_VAR_RE = re.compile(r"^([a-z_][a-z0-9_]*):(.*)$")
_GROUP_RE = re.compile(r"^#\s*-{3,}\s*(.+?)\s*-*\s*$")


@dataclass
class Variable:
    name: str
    default: str
    meaning: str


@dataclass
class Group:
    title: str
    source: str
    variables: list[Variable] = field(default_factory=list)


def defaults_files(root: Path = ROOT) -> list[Path]:
    """Project-wide defaults first (roles/nccl_defaults), then each role's own, by name."""
    shared = sorted((root / "roles" / "nccl_defaults" / "defaults" / "main").glob("*.yml"))
    own = sorted(
        p for p in (root / "roles").glob("*/defaults/main.yml") if "nccl_defaults" not in p.parts
    )
    return shared + own


def _first_comment(lines: list[str]) -> str:
    """The file's opening comment, first sentence: the title of its first group."""
    for line in lines:
        if line.startswith("#"):
            text = line.lstrip("#").strip()
            return text.split(": ")[0].rstrip(".") if text else ""
    return ""


def _value(first: str, rest: list[str]) -> str:
    """A default as written: one line, or the folded lines of a block scalar joined."""
    first = first.strip()
    if first in {">-", ">", "|", "|-"} or (not first and rest):
        return " ".join(part.strip() for part in rest)
    return first


def parse_defaults(path: Path, root: Path = ROOT) -> list[Group]:
    """Groups of variables in one defaults file, each with the comment above it as its meaning."""
    lines = path.read_text(encoding="utf-8").splitlines()
    source = path.relative_to(root).as_posix()
    groups = [Group(_first_comment(lines) or source, source)]
    comment: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if match := _GROUP_RE.match(line):
            groups.append(Group(match.group(1), source))
            comment = []
        elif line.startswith("#"):
            comment.append(line.lstrip("#").strip())
        elif match := _VAR_RE.match(line):
            continuation: list[str] = []
            while i < len(lines) and lines[i].startswith((" ", "\t")):
                continuation.append(lines[i])
                i += 1
            value = _value(match.group(2), continuation)
            groups[-1].variables.append(Variable(match.group(1), value, " ".join(comment)))
            comment = []
        elif not line.strip():
            comment = []
    return [g for g in groups if g.variables]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _section(source: str) -> str:
    """`roles/launch/defaults/main.yml` -> `Role launch (roles/launch/defaults/main.yml)`."""
    role = Path(source).parts[1]
    if role == "nccl_defaults":
        return "Project-wide (roles/nccl_defaults/defaults/main/, read by every play)"
    return f"Role {role} ({source})"


def render(groups: list[Group]) -> str:
    out = [
        "# Variables",
        "",
        "Every role variable, its default and what it means, generated from the roles'",
        "defaults files by `python docs/make_variables.py` (do not edit by hand). Set them in",
        "the inventory's group_vars or host_vars, or with `-e`. Project-wide variables",
        "(`nccl_*`) are read by every role; a role's own carry its prefix.",
        "",
    ]
    section = ""
    for group in groups:
        if _section(group.source) != section:
            section = _section(group.source)
            out += [f"## {section}", ""]
        out += [f"### {group.title}", ""]
        out += ["| variable | default | meaning |", "|---|---|---|"]
        for var in group.variables:
            default = f"`{_cell(var.default)}`" if var.default else ""
            out.append(f"| `{var.name}` | {default} | {_cell(var.meaning)} |")
        out.append("")
    return "\n".join(out)


def all_groups(root: Path = ROOT) -> list[Group]:
    return [group for path in defaults_files(root) for group in parse_defaults(path, root)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether it is up to date")
    args = parser.parse_args(argv)
    text = render(all_groups())
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run python docs/make_variables.py")
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
