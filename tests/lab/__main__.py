# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The lab's command line: python -m tests.lab {up,down,status,run,demo} ...

python -m tests.lab up --hosts 4 [--fabric-ifnames enp1s0f0np0,enp1s0f1np1] [--name dev] [--slurm]
python -m tests.lab status [--json]
python -m tests.lab run node01 [--name dev] -- ip -br addr
python -m tests.lab down [--name dev | --all]
python -m tests.lab demo [--hosts 4] [--keep]   # up, playbooks/validate.yml, report, down
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from collections.abc import Sequence

from tests.lab.harness import (
    PROJECT_ROOT,
    Lab,
    LabError,
    _pid_alive,
    down_all,
    lab_unavailable_reason,
    machine_unavailable_reason,
    state_root,
)

DEMO_FABRIC_IFNAMES = "enp1s0f0np0,enp1s0f1np1"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _pick(name: str | None) -> Lab:
    if name:
        return Lab.load(name)
    names = Lab.recorded()
    if len(names) == 1:
        return Lab.load(names[0])
    if not names:
        raise LabError("no lab is up; start one with `python -m tests.lab up --hosts 2`")
    raise LabError(f"several labs are up ({', '.join(names)}); choose one with --name")


def cmd_up(args: argparse.Namespace) -> int:
    lab = Lab(
        args.hosts,
        fabric_ifnames=args.fabric_ifnames,
        name=args.name,
        python=args.python,
        slots=args.slots,
        keep=True,  # the lab outlives this command; `down` removes it
        slurm=args.slurm,
    )
    lab.up()  # removes what it made if it fails or is interrupted
    print(lab.describe())
    print(f"  up in {lab.up_seconds:.2f}s")
    print(
        f"  try:  ansible-playbook -i {lab.inventory_dir} playbooks/validate.yml",
    )
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    if args.kept and not args.all:
        raise LabError("--kept goes with --all")
    if args.all:
        names = down_all(kept_only=args.kept)
        print(f"removed {len(names)} lab(s){': ' + ', '.join(names) if names else ''}")
        return 0
    lab = _pick(args.name)
    lab.down()
    print(f"removed lab {lab.name}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    rows = []
    for name in Lab.recorded():
        lab = Lab.load(name)
        sshd = lab._state.get("sshd_pids", {})
        rows.append(
            {
                "name": name,
                "status": lab._state.get("status"),
                "index": lab.index,
                "hosts": len(lab.hosts),
                "sshd_running": sum(1 for pid in sshd.values() if _pid_alive(pid)),
                "slurm_running": lab.slurm_running(),
                "owner_pid": lab._state.get("owner_pid"),
                "mgmt_cidr": lab.mgmt_cidr,
                "fabric_cidr": lab.fabric_cidr,
                "inventory": str(lab.inventory_dir),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no labs recorded in {state_root()}")
    for r in rows:
        owner = f"test session pid {r['owner_pid']}" if r["owner_pid"] else "kept (CLI)"
        daemons = f", {r['slurm_running']} Slurm daemons" if r["slurm_running"] is not None else ""
        print(
            f"{r['name']}: {r['status']}, {r['hosts']} hosts ({r['sshd_running']} sshd running"
            f"{daemons}), "
            f"mgmt {r['mgmt_cidr']}, fabric {r['fabric_cidr']}, {owner}\n"
            f"  inventory: {r['inventory']}"
        )
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    argv = args.argv
    if not argv:
        raise LabError("nothing to run: python -m tests.lab run HOST -- COMMAND [ARGS...]")
    lab = _pick(args.name)
    return subprocess.run(lab.netns_argv(args.host, argv), check=False).returncode


def cmd_demo(args: argparse.Namespace) -> int:
    playbook = PROJECT_ROOT / "playbooks" / "validate.yml"
    if not playbook.exists():
        raise LabError(f"{playbook} does not exist yet; nothing to demonstrate")
    lab = Lab(args.hosts, fabric_ifnames=args.fabric_ifnames, name=args.name, keep=args.keep)
    try:
        lab.up()
        print(lab.describe(), flush=True)
        print(f"\n$ ansible-playbook -i {lab.inventory_dir} playbooks/validate.yml\n", flush=True)
        rc = lab.ansible_playbook(playbook, *args.extra, capture=False).returncode
        latest = PROJECT_ROOT / "reports" / "latest"
        if latest.exists():
            print(f"\nreport: {latest.resolve()}")
            for name in ("summary.md", "junit.xml"):
                if (latest / name).exists():
                    print(f"  {latest / name}")
        print(f"\nansible-playbook exit status: {rc}")
        if args.keep:
            print(f"the lab stays up: python -m tests.lab down --name {lab.name}")
        return rc
    finally:
        if not args.keep:
            lab.down()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.lab", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="build a lab and leave it running")
    up.add_argument("--hosts", type=int, default=2, help="number of hosts (default 2)")
    up.add_argument(
        "--fabric-ifnames",
        default=None,
        help="comma-separated fabric interface names, cycled over the hosts (default fab0)",
    )
    up.add_argument("--name", default=None, help="lab name (default lab<index>)")
    up.add_argument(
        "--python",
        default=None,
        help="the hosts' ansible_python_interpreter (default: $NCCL_LAB_NODE_PYTHON, else "
        ".venv-node/bin/python: `make node-venv`)",
    )
    up.add_argument("--slots", type=int, default=1, help="slots=N in the hostfile (0: omit)")
    up.add_argument(
        "--slurm",
        action="store_true",
        help="also munged, slurmctld and one slurmd per host (tests/lab/slurm.py)",
    )
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", help="remove a lab (or every recorded lab)")
    g = down.add_mutually_exclusive_group()
    g.add_argument("--name", default=None)
    g.add_argument("--all", action="store_true", help="every lab recorded in the state root")
    down.add_argument(
        "--kept",
        action="store_true",
        help="with --all: only labs made by `up`, not those of running test sessions",
    )
    down.set_defaults(func=cmd_down)

    status = sub.add_parser("status", help="list recorded labs")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    run = sub.add_parser("run", help="run a command in a lab host: run HOST -- ARGV...")
    run.add_argument("host", help="node01, a hostname, an address or a 0-based rank")
    run.add_argument("--name", default=None)
    run.add_argument("argv", nargs="*", help="the command, after --")
    run.set_defaults(func=cmd_run)

    demo = sub.add_parser("demo", help="lab up, playbooks/validate.yml against it, report, down")
    demo.add_argument("--hosts", type=int, default=4)
    demo.add_argument("--fabric-ifnames", default=DEMO_FABRIC_IFNAMES)
    demo.add_argument("--name", default=None)
    demo.add_argument("--keep", action="store_true", help="leave the lab up afterwards")
    demo.add_argument("extra", nargs="*", help="extra ansible-playbook arguments (after --)")
    demo.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:  # everything after the first -- is the command of `run` (or `demo`)
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    if args.command == "run":
        args.argv = [*args.argv, *command]
    elif args.command == "demo":
        args.extra = [*args.extra, *command]
    elif command:
        build_parser().error(f"{args.command} takes no command after --")
    if getattr(args, "slots", None) == 0:
        args.slots = None
    if args.command == "run" and args.host.isdigit():
        args.host = int(args.host)
    reason = None
    if args.command in {"up", "demo"}:  # a new lab: its hosts' Python too
        reason = lab_unavailable_reason(getattr(args, "python", None))
    elif args.command in {"down", "run"}:
        reason = machine_unavailable_reason()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)  # so `finally` and up()'s own clean-up run
    try:
        return int(args.func(args))
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; whatever was being built has been removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
