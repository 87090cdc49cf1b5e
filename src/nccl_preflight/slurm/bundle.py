# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The node bundle: ONE zipapp, ``nccl-preflight.pyz``, that runs the Slurm front-end's node side
with any python3 >= 3.9 and nothing installed: node-check (``bin/nccl-preflight bundle -o PATH``
writes it for an operator's nodes) and the slurm command's job steps (which send it on each
step's stdin). One builder, one list of what goes in (bundle_sources):

    __main__.py                              `node-step WHAT`: slurm/node_step.py main (the run's
                                             steps); anything else: nccl_preflight.slurm.cli.main
    nccl_preflight/{__init__,node/*,core/**,slurm/*}.py   the package (core's modules that need
                                             jinja2 or matplotlib import them lazily; the node
                                             side never reaches them)
    nccl_preflight/_vendor/**                PyYAML's pure-Python package with its LICENSE and
                                             _vendor/SOURCE.md (core/yaml_file.py reads the
                                             config with it: a node has no PyYAML); the
                                             variables' defaults and types are a module,
                                             core/variables.py
    nccl_check.pyz                           the rank script files/nccl_check.py and the siblings
                                             it imports, as the Ansible path ships it
                                             (core/zipapp.py), for the run's ranks

Built from the tree the package runs from (core/content.py: a checkout's src/ and files/,
or an installed package and its share/ copy of them); the bytes depend only on those files
(core/zipapp.py zip_bytes: sorted names, fixed times and modes). ``python3 nccl-preflight.pyz
node-check --config FILE`` is what a HealthCheckProgram or Prolog wrapper runs.

The slurm command's job steps get a smaller bundle of the same shape (build_node_bundle,
step_sources): only `node-step WHAT`, the modules it imports and nccl_check.pyz, no control
machine's code and no config data (about a third: srun sends it to every node, twice a run).
The run keeps it by its sources' content hash (build_node_bundle(cache_dir)).
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

from nccl_preflight.core.content import TREE, Tree
from nccl_preflight.core.zipapp import (
    bundle_modules,
    cached_build,
    package_closure,
    zip_bytes,
    zipapp_of,
)

ROOMS = ("node", "core", "slurm")
VENDORED = "_vendor"  # third-party code, every file of it (its licences and SOURCE.md too)
RANK_ZIPAPP = "nccl_check.pyz"  # slurm/node_step.py RANK_SCRIPT: a member of the bundle
BUNDLE_NAME = "nccl-preflight.pyz"
STEP_ENTRY = "nccl_preflight.slurm.node_step"  # what a job step runs: MAIN's `node-step WHAT`

MAIN = '''"""nccl-preflight's node bundle (built by src/nccl_preflight/slurm/bundle.py): the Slurm
front-end's commands, e.g. `python3 nccl-preflight.pyz node-check --config FILE`; `node-step
WHAT` is one task of the slurm command's job steps."""

import sys

if sys.argv[1:2] == ["node-step"]:
    from nccl_preflight.slurm.node_step import main

    sys.exit(main(sys.argv[2:]))

from nccl_preflight.slurm.cli import main

sys.exit(main(sys.argv[1:]))
'''


def _named(tree: Tree, paths: list[Path]) -> dict[str, bytes]:
    """{name as in a checkout (src/nccl_preflight/..., files/...): bytes}."""
    named = {}
    for p in paths:  # an installed package holds its content (share/): that is looked at first
        if p.is_relative_to(tree.content):
            named[p.relative_to(tree.content).as_posix()] = p.read_bytes()
        else:
            named[f"src/{p.relative_to(tree.source).as_posix()}"] = p.read_bytes()
    return named


def _rank_files(tree: Tree) -> dict[str, bytes]:
    return {f"files/{name}.py": source for name, source in bundle_modules(tree.rank_script).items()}


def bundle_sources(tree: Tree = TREE) -> dict[str, bytes]:
    """What the bundle is built from: {name as in a checkout: bytes}."""
    package = tree.package
    paths = [package / "__init__.py"]
    for room in ROOMS:
        paths += [p for p in sorted((package / room).rglob("*.py")) if "__pycache__" not in p.parts]
    paths += [
        p
        for p in sorted((package / VENDORED).rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    ]
    return {**_named(tree, paths), **_rank_files(tree)}


def _build(sources: dict[str, bytes]) -> bytes:
    """The bundle's bytes from bundle_sources' files."""
    files = {"__main__.py": MAIN.encode("utf-8")}
    rank: dict[str, bytes] = {}
    for name, data in sources.items():
        if name.startswith("src/"):
            files[name.removeprefix("src/")] = data
        elif name.startswith("files/"):
            rank[Path(name).stem] = data
    files[RANK_ZIPAPP] = zipapp_of(TREE.rank_script.stem, rank)
    return zip_bytes(files)


def build_bundle(tree: Tree = TREE) -> bytes:
    """The bytes of nccl-preflight.pyz from ``tree``'s package and files/."""
    return _build(bundle_sources(tree))


def step_sources(tree: Tree = TREE) -> dict[str, bytes]:
    """What the job steps' bundle is built from, as bundle_sources names them: STEP_ENTRY and
    every module of the package it imports (core/zipapp.py package_closure: the node room and
    the step itself, none of the control machine's), and the rank script's files. srun sends
    the bundle to every node on each step's stdin, so it carries only what a step runs."""
    return {**_named(tree, package_closure(tree.source, STEP_ENTRY)), **_rank_files(tree)}


def key_sources(tree: Tree = TREE) -> dict[str, bytes]:
    """What the steps' bundle can depend on, read without parsing: every ``*.py`` of the package
    and of files/ (a superset of step_sources, for cached_build's key: a run reads and hashes
    them, about 1 MB, instead of working out the imports)."""
    paths = sorted(tree.package.rglob("*.py"))
    paths += sorted((tree.content / "files").glob("*.py"))
    return _named(tree, [p for p in paths if "__pycache__" not in p.parts])


def build_node_bundle(cache_dir: str | os.PathLike[str] | None = None, tree: Tree = TREE) -> bytes:
    """The steps' bundle (step_sources: `node-step WHAT` only), for the slurm command's steps.

    With ``cache_dir`` (e.g. the report root's .bundle/), the bundle is kept there by the
    content hash of key_sources and read back while they are unchanged: a run then reads and
    hashes them (a few ms) instead of building (core/zipapp.cached_build, which the Ansible
    launch uses for the rank zipapp: a lock, an atomic write of mode 0600 in a directory of
    mode 0700, and only a file of this user read back)."""
    return cached_build(
        cache_dir,
        "node-step-bundle",
        key_sources(tree),
        lambda: _build(step_sources(tree)),
    )


def write_bundle(output: str | Path, tree: Tree = TREE) -> str:
    """Write the bundle (mode 0755); one line saying what was written."""
    data = build_bundle(tree)
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o755)
    count = len(zipfile.ZipFile(io.BytesIO(data)).namelist())
    return f"{path}: {len(data)} bytes, {count} files"
