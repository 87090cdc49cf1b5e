# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""library/nccl_torchrun.py run as Ansible runs it on a node: its arguments, a fake torchrun (the
``fake_python`` fixture: tests/unit/conftest.py), a started run, a hanging one and what it left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.playbook_run import ROOT
from tests.polling import wait_or_fail

MODULE = ROOT / "library" / "nccl_torchrun.py"


# python -c RUN_AS_ANSIBLE <module> <args file>: AnsiballZ would ship the node room with it.
RUN_AS_ANSIBLE = (
    "import runpy, sys, ansible.module_utils as mu; "
    f"mu.__path__.append({str(ROOT / 'src')!r}); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


FAKE_TORCHRUN = textwrap.dedent(
    """\
    #!{python}
    # Stands in for `python -m torch.distributed.run ...`: argv is ignored except --log-dir.
    import os, signal, subprocess, sys, time
    mode = os.environ.get("FAKE_MODE", "hang")
    log_dir = sys.argv[sys.argv.index("--log-dir") + 1]
    nproc = int(sys.argv[sys.argv.index("--nproc-per-node") + 1])
    worker = (
        "import os, signal, subprocess, sys, time\\n"
        "if os.environ.get('FAKE_STUBBORN'):\\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\\n"
        "print('worker', sys.argv[1], 'up', flush=True)\\n"
        "print('worker', sys.argv[1], 'complains', file=sys.stderr, flush=True)\\n"
        "time.sleep(600 if sys.argv[2] == 'hang' else 0)\\n"
    )
    procs = []
    for local_rank in range(nproc):
        d = os.path.join(log_dir, "nccl-preflight_abc", "attempt_0", str(local_rank))
        os.makedirs(d, exist_ok=True)
        out = open(os.path.join(d, "stdout.log"), "w")
        err = open(os.path.join(d, "stderr.log"), "w")
        procs.append(subprocess.Popen([sys.executable, "-c", worker, str(local_rank), mode],
                                      stdout=out, stderr=err, start_new_session=True))
    print("fake torchrun started", [p.pid for p in procs], flush=True)
    if mode == "hang":
        time.sleep(600)
    for p in procs:
        p.wait()
    sys.exit(3 if mode == "fail" else 0)
    """
)


def tagged_processes(run_dir: Path) -> list[int]:
    """Live processes whose environment carries this run directory (the module tags them)."""
    marker = f"NCCL_PREFLIGHT_RUN_DIR={run_dir}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in environ.split(b"\0") and state not in "ZX":
            found.append(int(entry))
    return found


def module_args(run_dir: Path, python: Path, **over: Any) -> dict[str, Any]:
    args = {
        "state": "started",
        "run_dir": str(run_dir),
        "python": str(python),
        "script": str(run_dir / "check.py"),
        "script_args": ["--out-dir", str(run_dir / "results")],
        "nnodes": 1,
        "node_rank": 0,
        "nproc_per_node": 2,
        "rank_offset": 4,
        "master_addr": "127.0.0.1",
        "master_port": 29555,
        "local_addr": "127.0.0.1",
        "env_file": str(run_dir / "nccl.env"),
        "timeout": 30,
        "kill_grace": 2,
    }
    args.update(over)
    return args


def start_module(args: dict[str, Any], tmp_path: Path, name: str = "args") -> subprocess.Popen:
    args_file = tmp_path / f"{name}.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    # The module as Ansible runs it: its own process, our module_utils importable.
    return subprocess.Popen(
        [sys.executable, "-c", RUN_AS_ANSIBLE, str(MODULE), str(args_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def finish(proc: subprocess.Popen, timeout: float = 60) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert out.strip(), f"module printed nothing; stderr:\n{err}"
    return json.loads(out)


def start_hanging_run(
    tmp_path: Path, fake_python: Path, run_dir: Path, timeout: int
) -> dict[str, Any]:
    """state=started on a fake torchrun that hangs; returns once its 5 processes run
    (torchrun + 2 workers + 2 grandchildren)."""
    started = finish(
        start_module(
            module_args(run_dir, fake_python, timeout=timeout, environment={"FAKE_MODE": "hang"}),
            tmp_path,
        )
    )
    wait_or_fail(lambda: len(tagged_processes(run_dir)) == 5, what="the five processes")
    return started


def finished_args(run_dir: Path, **over: Any) -> dict[str, Any]:
    return {
        "state": "finished",
        "run_dir": str(run_dir),
        "rank_offset": 4,
        "kill_grace": 2,
        **over,
    }


ENV_KEYS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "EXTRA")


ENV_CONTENT = "# nccl.env of node1\nNCCL_SOCKET_IFNAME='enp 9'\nGLOO_SOCKET_IFNAME='enp 9'\n"


def rank_file(run_dir: Path, rank: int, **doc: object) -> None:
    results = run_dir / "results"
    results.mkdir(exist_ok=True)
    (results / f"rank-{rank}.json").write_text(json.dumps({"status": "running", **doc}))
