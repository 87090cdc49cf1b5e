# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The tables of the rank script live once (src/nccl_preflight/node/collective_tables.py): the
control machine imports them, the rank script imports the same file as nccl_check_tables (the
link files/nccl_check_tables.py), and the zipapp the launch ships holds it; neither a checkout's
run by hand nor the zipapp needs the package installed."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from nccl_preflight.core.zipapp import build_zipapp
from nccl_preflight.node import collective_tables
from tests.check.support import SCRIPT, env, load_part

SHIPPED = SCRIPT.with_name("nccl_check_tables.py")


def test_the_rank_script_imports_the_file_the_control_machine_imports() -> None:
    assert SHIPPED.is_symlink() and SHIPPED.samefile(collective_tables.__file__)
    assert Path(load_part("nccl_check_tables").__file__).samefile(collective_tables.__file__)


def test_the_zipapp_ships_the_tables_the_control_machine_reads() -> None:
    archive = zipfile.ZipFile(io.BytesIO(build_zipapp(SCRIPT)))
    shipped = archive.read("nccl_check_tables.py")
    assert shipped == Path(collective_tables.__file__).read_bytes()


def test_the_control_machine_reads_the_tables_without_torch() -> None:
    code = (
        "import sys\n"
        "from nccl_preflight.core import support\n"
        "assert support.predicted_skips('gloo', ['--device', 'cuda'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert (proc.returncode, proc.stdout) == (0, "[]\n"), proc.stderr


def without_the_package(tmp: Path) -> dict[str, str]:
    """env() where `import nccl_preflight` fails, as on a node with torch and nothing else."""
    blocker = tmp / "no-package" / "nccl_preflight"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ImportError("no nccl_preflight on a node")\n')
    path = os.pathsep.join(filter(None, [str(blocker.parent), os.environ.get("PYTHONPATH", "")]))
    blocked = {**env(), "PYTHONPATH": path}
    probe = [sys.executable, "-c", "import nccl_preflight"]
    assert subprocess.run(probe, env=blocked, capture_output=True, check=False).returncode == 1
    return blocked


def test_the_checkout_and_the_zipapp_run_without_the_package(tmp_path: Path) -> None:
    pyz = tmp_path / "nccl_check.pyz"
    pyz.write_bytes(build_zipapp(SCRIPT))
    expected = "\n".join(collective_tables.ALL_TESTS) + "\n"
    for script in (SCRIPT, pyz):
        proc = subprocess.run(
            [sys.executable, str(script), "--list-tests"],
            capture_output=True,
            text=True,
            env=without_the_package(tmp_path / script.suffix),
            cwd=tmp_path,
            check=False,
            timeout=120,
        )
        assert (proc.returncode, proc.stdout) == (0, expected), (script, proc.stderr)
