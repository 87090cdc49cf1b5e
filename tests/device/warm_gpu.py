# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""On a lent GPU machine: the warm start (node/warm_torchrun.py) with the nccl backend.

What no recording gives: the held torch probe, started as both front-ends start it
(listener.start_python_probe with a ready file), becomes torchrun through the supervisor
(supervisor.start_or_adopt) and runs the rank zipapp with nccl on the one GPU (world size 1).

- the probe's own JSON (torch, CUDA, NCCL as the held process saw them);
- nvidia-smi's compute processes while the probe holds and while the rank runs: the holder
  (torchrun's process) must own no CUDA context, only the rank;
- the NCCL log of the rank: the launch's variables (NCCL_SOCKET_IFNAME, NCCL_DEBUG, laid over
  the probe's environment after it imported torch) must reach NCCL in the rank;
- launch.json (warm_start), rank-0.json;
- the same run started cold, and the seconds from the launch call to torchrun's exit, warm and
  cold, alternating.

Usage (the machine's own python3, the checkout's src on PYTHONPATH):
  PYTHONPATH=src python3 tests/device/warm_gpu.py SCRIPT OUT_DIR [--backend nccl] [--ifname eth0]
The script's process is the supervisor (a subreaper): run it alone, never inside a test process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from nccl_preflight.node.listener import finish_python_probe, start_python_probe
from nccl_preflight.node.run_start import build_argv
from nccl_preflight.node.supervisor import LAUNCH_FILE, RESULTS_DIR, Supervision, start_or_adopt

PORT = 29731


def compute_apps() -> list[str]:
    """nvidia-smi's compute processes now (pid, memory), or why there is no answer."""
    if shutil.which("nvidia-smi") is None:
        return ["no nvidia-smi"]
    done = subprocess.run(
        [
            "nvidia-smi",
            "--query-compute-apps=pid,process_name,used_memory",
            "--format=csv,noheader",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return [line for line in done.stdout.splitlines() if line.strip()] or [
        f"none (rc {done.returncode})"
    ]


def poll_apps(seen: dict[str, list[str]], stop: threading.Event) -> None:
    """Every compute-process line nvidia-smi showed while the run ran, with its first second."""
    start = time.monotonic()
    while not stop.is_set():
        for line in compute_apps():
            seen.setdefault(line, []).append(f"{time.monotonic() - start:.1f}")
        stop.wait(0.5)


def launch(args: argparse.Namespace, warm: bool, tag: str) -> dict:
    """One launch of the rank script, warm or cold; -> what it showed."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"warm-{tag}-"))
    (run_dir / RESULTS_DIR).mkdir()
    started = time.monotonic()
    held: dict = {}
    agent = None
    if warm:
        ready = str(run_dir / "probe.ready")
        agent, error = start_python_probe(str(run_dir), args.python, ready)
        held = finish_python_probe(
            str(run_dir), args.python, agent, error, time.monotonic() + 120, ready
        )
        held["apps_while_held"] = compute_apps()
    go_at = time.monotonic()
    params = {
        "python": args.python,
        "nnodes": 1,
        "node_rank": 0,
        "nproc_per_node": 1,
        "master_addr": "127.0.0.1",
        "master_port": PORT,
        "local_addr": "127.0.0.1",
        "rdzv_id": tag,
        "run_dir": str(run_dir),
        "script": os.path.abspath(args.script),
        "script_args": [
            "--backend",
            args.backend,
            "--out-dir",
            str(run_dir / RESULTS_DIR),
            "--timeout",
            "60",
            *args.tests,
        ],
    }
    env = {
        **os.environ,
        "NCCL_SOCKET_IFNAME": args.ifname,
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV",
        "NCCL_DEBUG_FILE": str(run_dir / RESULTS_DIR / "nccl.%p.log"),
    }
    run = Supervision(build_argv(params), run_dir, 120, 5)
    run.write_pids()
    seen: dict[str, list[str]] = {}
    stop = threading.Event()
    poller = threading.Thread(target=poll_apps, args=(seen, stop), daemon=True)
    poller.start()
    start_or_adopt(run, env, agent)
    holder_pid = run.proc.pid if run.proc is not None else None
    run.watch(time.monotonic() + 120)
    ran_s = time.monotonic() - go_at
    stop.set()
    poller.join()
    run.end(0)
    launch_doc = json.loads((run_dir / LAUNCH_FILE).read_text())
    results = run_dir / RESULTS_DIR
    nccl_logs = sorted(p.name for p in results.glob("nccl.*.log"))
    shutil.copytree(run_dir, Path(args.out_dir) / tag, dirs_exist_ok=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    return {
        "tag": tag,
        "warm": warm,
        "probe": held,
        "probe_s": round(go_at - started, 2),
        "launch_to_exit_s": round(ran_s, 2),
        "torchrun_pid": holder_pid,
        "compute_apps_during_run": seen,
        "warm_start": launch_doc.get("warm_start"),
        "launch": launch_doc,
        "nccl_logs": nccl_logs,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("script")
    parser.add_argument("out_dir")
    parser.add_argument("--python", default="python3")
    parser.add_argument("--backend", default="nccl")
    parser.add_argument("--ifname", default="eth0")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument(
        "--full", action="store_true", help="the whole rank script, not correctness only"
    )
    args = parser.parse_args()
    args.tests = [] if args.full else ["--tests", "correctness"]
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    records = []
    for turn in range(args.turns):
        for warm in (True, False):
            tag = f"{'warm' if warm else 'cold'}-{turn}"
            records.append(launch(args, warm, tag))
            print(
                json.dumps({k: records[-1][k] for k in ("tag", "launch_to_exit_s", "warm_start")}),
                flush=True,
            )
    (Path(args.out_dir) / "warm-gpu.json").write_text(json.dumps(records, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
