# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""library/nccl_torchrun.py with script_zipapp: the rank script and its sibling modules as one
zipapp (src/nccl_preflight/core/zipapp.py), written as <run_dir>/nccl_check.pyz and run by torchrun.

The module runs as Ansible runs it on a node (tests/unit/ansible/test_torchrun_module.py's helpers).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core.zipapp import build_zipapp
from tests.builders.torchrun import ENV_CONTENT, finish, finished_args, module_args, start_module


def zipapp_of(folder: Path, entry: str, siblings: dict[str, str]) -> bytes:
    """The zipapp the launch's action plugin ships, of entry (text) and its sibling modules."""
    folder.mkdir(exist_ok=True)
    for name, text in {"check.py": entry, **siblings}.items():
        (folder / name).write_text(text)
    return build_zipapp(folder / "check.py")


def zipapp_args(run_dir: Path, python: Path, data: bytes, **over: Any) -> dict[str, Any]:
    args = module_args(run_dir, python, script_zipapp=base64.b64encode(data).decode(), **over)
    del args["script"]  # the zipapp's own place: <run_dir>/nccl_check.pyz
    return args


def test_script_zipapp_is_written_as_nccl_check_pyz_and_never_echoed(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    data = zipapp_of(tmp_path / "src", "import part\n" + "x = 1\n" * 2000, {"part.py": "y = 2\n"})
    args = zipapp_args(run_dir, fake_python, data, environment={"FAKE_MODE": "ok"})
    started = finish(start_module(args, tmp_path))
    shipped = run_dir / "nccl_check.pyz"
    assert started.get("failed") is not True, started
    assert shipped.read_bytes() == data and shipped.stat().st_mode & 0o777 == 0o600
    assert started["script"] == str(shipped)
    assert started["cmd"][-3:] == [str(shipped), "--out-dir", str(run_dir / "results")]
    echoed = started["invocation"]["module_args"]["script_zipapp"]
    assert echoed != args["script_zipapp"] and len(json.dumps(started)) < 5000
    finish(start_module(finished_args(run_dir), tmp_path, "wait"))


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"script_zipapp": "not base64!"}, "script_zipapp is not base64"),
        ({"script_zipapp": base64.b64encode(b"print(1)\n").decode()}, "not a zip file"),
        ({"script_src": "/controller/files/nccl_check.py"}, "a path on the control machine"),
        (
            {"script_content": "print(1)\n", "script_zipapp": "UEsFBg=="},
            "mutually exclusive: script_content|script_zipapp",
        ),
    ],
)
def test_a_script_the_module_cannot_ship_fails_before_anything_is_written(
    tmp_path: Path, env_python: Path, over: dict[str, str], message: str
) -> None:
    new_dir = tmp_path / "nccl-preflight-new-node1"
    args = module_args(new_dir, env_python, env_content=ENV_CONTENT, **over)
    if "script_content" not in over:
        del args["script"]
    result = finish(start_module(args, tmp_path))
    assert result["failed"] is True and message in result["msg"], result
    assert not new_dir.exists()


@pytest.mark.torchrun
def test_real_torchrun_runs_the_zipapp_with_its_sibling(tmp_path: Path, run_dir: Path) -> None:
    """torchrun runs <run_dir>/nccl_check.pyz as the .py: the sibling module imports from the
    zip, the rank's exit status counts, and a crash's traceback in the rank log names the file
    inside the zip with its line and source."""
    entry = (
        "import os, sys\nimport part\nrank = int(os.environ['RANK'])\n"
        "print('hello from rank', rank, part.WORD, sys.argv[1:], flush=True)\n"
        "if rank == 1:\n    part.crash()\n"
    )
    part = "WORD = 'via the sibling'\n\ndef crash():\n    raise RuntimeError('rank 1 crashed')\n"
    data = zipapp_of(tmp_path / "src", entry, {"part.py": part})
    args = zipapp_args(
        run_dir,
        Path(sys.executable),
        data,
        nproc_per_node=2,
        rank_offset=0,
        master_port=29562,
        script_args=["--flag", "a b"],
        timeout=60,
    )
    started = finish(start_module(args, tmp_path, "start"))
    assert started.get("failed") is not True, started
    result = finish(
        start_module(finished_args(run_dir, rank_offset=0), tmp_path, "wait"), timeout=120
    )
    assert result["timed_out"] is False and result["torchrun_rc"] == 1
    rank0 = (run_dir / "results" / "rank-0.log").read_text()
    assert "hello from rank 0 via the sibling ['--flag', 'a b']" in rank0
    rank1 = (run_dir / "results" / "rank-1.log").read_text()
    shipped = run_dir / "nccl_check.pyz"
    assert f'File "{shipped}/check.py", line 6, in <module>\n    part.crash()' in rank1
    assert f'File "{shipped}/part.py", line 4, in crash\n' in rank1
    assert "RuntimeError: rank 1 crashed" in rank1 and "runpy" not in rank1
