# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""On a lent GPU machine: a whole run's node calls as the Ansible front-end sends them, each a
program on stdin through BOOT (core/stdin_ship.py), none a module start, with the nccl backend.

1. the facts call (node/facts_call.py) with GPU health and the pre-flight's start, warm: the run
   directory, the master listener on the fabric address, the torch probe held for torchrun;
2. the observation (node/observe_call.py): TCP to that listener, then the collect of the
   listener and the probe (the probe's torch, CUDA, NCCL);
3. torchrun's start (node/start_call.py) with the rank zipapp and look.pyz, warm (the held probe
   becomes torchrun), NCCL_SOCKET_IFNAME and NCCL_DEBUG in nccl.env;
4. the watch's looks (``python -I -S <run dir>/look.pyz``) until the run ended, collecting its
   results and removing the run directory.

What no recording had: the programs under the machine's own Python (not the lab's) with a GPU,
a CUDA torch and NCCL. The zipapps carry bytecode of the Python that built them (this one here).
The programs run with an environment without PYTHONPATH: only what the zipapp carries.

Usage: PYTHONPATH=src python3 tests/device/programs_gpu.py OUT_DIR [--ifname eth0]
Writes OUT_DIR/programs.json (every answer, archives left out, with wall and CPU seconds),
OUT_DIR/collected/ (the run's collected files) and prints a summary line per call.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import resource
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from nccl_preflight.core.preflight.start import nccl_preflight_start
from nccl_preflight.core.stdin_ship import program_command, program_stream, program_zipapp
from nccl_preflight.core.zipapp import build_zipapp, with_bytecode, zip_bytes
from nccl_preflight.node.facts_call import FACTS_ENTRY, FACTS_SPEC
from nccl_preflight.node.observe_call import OBSERVE_ENTRY, OBSERVE_SPEC
from nccl_preflight.node.run_look import LOOK_ZIPAPP, zipapp_files
from nccl_preflight.node.start_call import START_ENTRY, TORCHRUN_SPEC

PORT = 29741
RANK_SCRIPT = Path(__file__).resolve().parents[2] / "files" / "nccl_check.py"


def with_defaults(spec: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` completed with ``spec``'s defaults, suboptions too (what Ansible's
    ArgumentSpecValidator does on the control machine; no Ansible here)."""
    params: dict[str, Any] = {}
    for name, option in spec.items():
        value = given.get(name, option.get("default"))
        if value is not None and "options" in option:
            if option.get("type") == "list":
                value = [with_defaults(option["options"], item) for item in value]
            else:
                value = with_defaults(option["options"], value)
        params[name] = value
    return params


def node_env() -> dict[str, str]:
    """The environment a program gets over SSH: this one without PYTHONPATH."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def call(python: str, entry: str, request: dict[str, Any], calls: list[dict[str, Any]]) -> Any:
    """One program call through BOOT; -> its answer (the last stdout line as JSON)."""
    argv = program_command(python, "devprog", entry.rsplit(".", 1)[-1])
    stream = program_stream(program_zipapp(entry, None), request)
    cpu, start = cpu_seconds(), time.monotonic()
    done = subprocess.run(argv, input=stream, capture_output=True, env=node_env(), timeout=300)
    answer: Any = None
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if lines:
        try:
            answer = json.loads(lines[-1])
        except ValueError:
            answer = None
    calls.append(
        {
            "program": entry,
            "rc": done.returncode,
            "wall_s": round(time.monotonic() - start, 3),
            "cpu_s": round(cpu_seconds() - cpu, 3),
            "stderr": done.stderr.decode(errors="replace")[-4000:],
            "answer": answer,
        }
    )
    print(json.dumps({k: calls[-1][k] for k in ("program", "rc", "wall_s", "cpu_s")}), flush=True)
    return answer


def look(python: str, run_dir: Path, calls: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """The watch's looks until the run ended; the last one collects and removes the run dir."""
    options = {
        "state": "finished", "run_dir": str(run_dir), "rank_offset": 0, "timeout": 180,
        "kill_grace": 5, "collect": True, "remove_run_dir": True, "watch_s": 5.0,
        "watch_stale_s": 30.0,
    }  # fmt: skip
    argv = [python, "-I", "-S", str(run_dir / LOOK_ZIPAPP), json.dumps(options)]
    looks = 0
    while True:
        cpu, start = cpu_seconds(), time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, env=node_env(), timeout=200)
        looks += 1
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if not result.get("running", False) or looks > 40:
            break
    archive = result.pop("collected_archive", "")
    if archive:
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(archive))) as tar:
            tar.extractall(out / "collected", filter="data")
    calls.append(
        {
            "program": "look.pyz", "rc": done.returncode, "looks": looks,
            "wall_s": round(time.monotonic() - start, 3), "cpu_s": round(cpu_seconds() - cpu, 3),
            "stderr": done.stderr[-4000:], "answer": result,
        }
    )  # fmt: skip
    print(json.dumps({"program": "look.pyz", "rc": done.returncode, "looks": looks}), flush=True)
    return result


def fabric_address() -> str:
    """The IPv4 address of the route to an outside address (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.200", 9))
        return probe.getsockname()[0]


def start_request(args: argparse.Namespace, run_dir: Path, address: str) -> dict[str, Any]:
    env = (
        f"NCCL_SOCKET_IFNAME={args.ifname}\nNCCL_DEBUG=INFO\nNCCL_DEBUG_SUBSYS=INIT,NET,ENV\n"
        f"NCCL_DEBUG_FILE={run_dir}/results/nccl.%p.log\nMASTER_ADDR={address}\n"
    )
    look_zip = zip_bytes(with_bytecode(zipapp_files(), LOOK_ZIPAPP))
    given = {
        "state": "started", "run_dir": str(run_dir), "python": args.python,
        "script_zipapp": base64.b64encode(build_zipapp(RANK_SCRIPT)).decode("ascii"),
        "look_zipapp": base64.b64encode(look_zip).decode("ascii"),
        "script_args": ["--out-dir", f"{run_dir}/results", "--backend", args.backend,
                        "--timeout", "90", "--ranks-per-node", "1"],
        "nnodes": 1, "node_rank": 0, "nproc_per_node": 1, "master_addr": address,
        "master_port": PORT, "local_addr": address, "rdzv_id": "nccl-preflight-devprog",
        "env_file": f"{run_dir}/nccl.env", "env_content": env, "timeout": 180,
        "warm_dir": f"{run_dir}/preflight",
    }  # fmt: skip
    return {"params": with_defaults(TORCHRUN_SPEC, given)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--ifname", default="eth0")
    parser.add_argument("--address", default="", help="the fabric address (default: eth0's)")
    parser.add_argument("--backend", default="nccl", help="gloo: a trial run without a GPU")
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.gettempdir()) / "nccl-preflight-devprog"
    address = args.address or fabric_address()
    calls: list[dict[str, Any]] = []
    preflight = nccl_preflight_start(
        "vm", master="vm", nodes=["vm"], run_dir=str(run_dir), run_dir_mode="0700",
        python=args.python, python_timeout=120, master_port=PORT, socket_ifname=args.ifname,
        fabric_cidr="", backend=args.backend, listen_timeout=120, full_mesh=False, extra_env={},
        lock=None, warm=True,
    )  # fmt: skip
    facts = {"route_to": address, "query_python": False, "gpu_health": True, "preflight": preflight}
    call(
        args.python,
        FACTS_ENTRY,
        {"params": with_defaults(FACTS_SPEC, facts), "check_mode": False},
        calls,
    )
    observe = {
        "targets": [{"name": "master", "host": "vm", "address": address, "port": PORT}],
        "source": address, "timeout": 5.0,
        "collect": {"path": f"{run_dir}/preflight", "wait": 130.0, "leave_unfinished": True,
                    "stop_timeout": 130.0},
    }  # fmt: skip
    call(
        args.python,
        OBSERVE_ENTRY,
        {"params": with_defaults(OBSERVE_SPEC, observe), "check_mode": False},
        calls,
    )
    call(args.python, START_ENTRY, start_request(args, run_dir, address), calls)
    look(args.python, run_dir, calls, out)
    leftovers = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    document = {
        "python": f"{sys.version.split()[0]} {sys.executable}",
        "address": address,
        "calls": calls,
        "run_dir_left": run_dir.exists(),
        "processes_left": [line for line in leftovers.splitlines() if "nccl-preflight" in line
                           and "programs_gpu" not in line],
        "boot_dirs_left": sorted(p.name for p in run_dir.parent.glob("nccl-preflight-devprog-*")),
    }  # fmt: skip
    (out / "programs.json").write_text(json.dumps(document, indent=1, default=str))
    print(
        json.dumps({k: document[k] for k in ("run_dir_left", "processes_left", "boot_dirs_left")})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
