# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The node bundle: ONE zipapp, ``nccl-preflight.pyz``, that runs the Slurm front-end's node side
with any python3 >= 3.9 and nothing installed (``bin/nccl-preflight bundle -o PATH``).

    __main__.py                              nccl_preflight.slurm.cli.main(sys.argv[1:])
    nccl_preflight/{__init__,node/*,core/**,slurm/*}.py   the package (core's modules that need
                                             jinja2, matplotlib or PyYAML import them lazily;
                                             the node side never reaches them)
    nccl_preflight/core/config_data/roles/   the defaults (nccl_defaults/defaults/main/*.yml) and
                                             argument specs (*/meta/argument_specs.yml) that
                                             core/config.py reads through importlib.resources
    nccl_preflight/slurm/rank/*.py           the rank script files/nccl_check.py and the siblings
                                             it imports (core/zipapp.py finds them), for the run

Built from this checkout's files (not from an installed copy); the bytes depend only on them
(core/zipapp.py zip_bytes: sorted names, fixed times and modes). ``python3 nccl-preflight.pyz
node-check --config FILE`` is what a HealthCheckProgram or Prolog wrapper runs.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from nccl_preflight.core.zipapp import bundle_modules, zip_bytes

PACKAGE = Path(__file__).resolve().parents[1]  # src/nccl_preflight
CHECKOUT = PACKAGE.parents[1]
ROOMS = ("node", "core", "slurm")
CONFIG_DATA = "nccl_preflight/core/config_data/roles"  # core/config.py BUNDLE_DATA's place
RANK_DIR = "nccl_preflight/slurm/rank"
RANK_SCRIPT = CHECKOUT / "files" / "nccl_check.py"
BUNDLE_NAME = "nccl-preflight.pyz"

MAIN = '''"""nccl-preflight's node bundle (built by src/nccl_preflight/slurm/bundle.py): the Slurm
front-end's commands, e.g. `python3 nccl-preflight.pyz node-check --config FILE`."""

import sys

from nccl_preflight.slurm.cli import main

sys.exit(main(sys.argv[1:]))
'''


def package_files(package: Path = PACKAGE) -> dict[str, bytes]:
    """{name in the zip: bytes} of the package's Python files: its __init__ and the rooms."""
    files = {"nccl_preflight/__init__.py": (package / "__init__.py").read_bytes()}
    for room in ROOMS:
        for path in sorted((package / room).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files[f"nccl_preflight/{path.relative_to(package).as_posix()}"] = path.read_bytes()
    return files


def config_files(roles: Path) -> dict[str, bytes]:
    """The defaults and the argument specs, under their paths relative to roles/."""
    paths = sorted((roles / "nccl_defaults" / "defaults" / "main").glob("*.yml"))
    paths += sorted(roles.glob("*/meta/argument_specs.yml"))
    return {f"{CONFIG_DATA}/{p.relative_to(roles).as_posix()}": p.read_bytes() for p in paths}


def rank_files(entry: Path = RANK_SCRIPT) -> dict[str, bytes]:
    """The rank script and the modules beside it that it imports."""
    return {f"{RANK_DIR}/{name}.py": source for name, source in bundle_modules(entry).items()}


def build_bundle(checkout: Path = CHECKOUT) -> bytes:
    """The bytes of nccl-preflight.pyz from ``checkout``'s src/, roles/ and files/."""
    files = package_files(checkout / "src" / "nccl_preflight")
    files.update(config_files(checkout / "roles"))
    files.update(rank_files(checkout / "files" / "nccl_check.py"))
    files["__main__.py"] = MAIN.encode("utf-8")
    return zip_bytes(files)


def write_bundle(output: str | Path, checkout: Path = CHECKOUT) -> str:
    """Write the bundle (mode 0755); one line saying what was written."""
    data = build_bundle(checkout)
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o755)
    count = len(zipfile.ZipFile(io.BytesIO(data)).namelist())
    return f"{path}: {len(data)} bytes, {count} files"
