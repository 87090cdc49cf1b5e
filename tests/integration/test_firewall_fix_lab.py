# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The firewall fix the report prints is the fix (issue 17.6): on the lab with the whole playbook,
and for every recorded iptables/nft ruleset in a kernel of its own.

A user reads "allow it (on <host>): <command>" in the failed run, runs that command verbatim on
that host, and runs the validation again: it must pass, pre-flight and launch alike. The master
drops MASTER_PORT and the second host drops its ephemeral range, with two ranks per host, so the
hosts' own ranks connect to their own fabric address (traffic arriving on `lo`) as well.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from nccl_preflight.node import firewall_common as fw
from nccl_preflight.node import firewall_iptables as ipt
from nccl_preflight.node import firewall_nft as nft
from tests.builders.lab_runs import FIX
from tests.lab.harness import Lab, lab_unavailable_reason

pytestmark = pytest.mark.lab

MASTER_PORT = 29500
QUICK = ["--max-bytes", "16K", "--iters", "2", "--warmup", "1", "--tests", "correctness"]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "firewall"


def validate(lab: Lab, reports: Path) -> tuple[str, int, str, dict[str, dict[str, dict]]]:
    """The whole playbook; -> (run id, exit status, output, {host: {check: result}})."""
    run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
    variables = {
        "nccl_run_id": run_id,
        "nccl_report_root": str(reports),
        "nccl_slots": 2,
        "nccl_check_args": QUICK,
        "nccl_run_timeout": 90,
    }
    proc = lab.ansible_playbook("playbooks/validate.yml", "-e", json.dumps(variables), timeout=600)
    results = {}
    for h in lab.hosts:
        path = reports / run_id / "preflight" / f"{h.inventory_name}.json"
        results[h.inventory_name] = {r["check"]: r for r in json.loads(path.read_text())["results"]}
    return run_id, proc.returncode, proc.stdout + proc.stderr, results


def test_the_printed_firewall_fixes_applied_verbatim_make_the_rerun_pass(
    lab2: Lab, tmp_path: Path
) -> None:
    master, other = lab2.hosts
    saved = {h.name: lab2.run(h, ["iptables-save"]).stdout for h in lab2.hosts}
    low, high = map(
        int, lab2.run(other, ["cat", "/proc/sys/net/ipv4/ip_local_port_range"]).stdout.split()
    )
    applied: list[tuple[str, str]] = []  # (host, the command that takes a fix out again)
    try:
        lab2.firewall_drop(master, MASTER_PORT)
        lab2.firewall_drop(other, (low, high))

        _, rc, output, results = validate(lab2, tmp_path)
        assert rc != 0 and "Pre-flight failed" in output, output[-4000:]
        fixes = []
        for checks in results.values():
            assert checks["firewall"]["status"] == "failed", checks["firewall"]
            hint = checks["firewall"]["hint"]
            assert f"fix: {hint}" in output  # printed as the report gives it
            fixes += FIX.findall(hint)
        by_host = {host: cmd for host, cmd in fixes}
        assert set(by_host) == {master.inventory_name, other.inventory_name}, fixes
        # Each fix lets in the other host and the host itself (its own ranks and probe).
        assert (
            f"{other.fabric_addr},{master.fabric_addr} --dport {MASTER_PORT} "
            in (by_host[master.inventory_name])
        )
        assert (
            f"{master.fabric_addr},{other.fabric_addr} --dport {low}:{high} "
            in (by_host[other.inventory_name])
        )

        for host, cmd in fixes:  # verbatim, on the host it names
            assert re.fullmatch(r"iptables -I \S+ \d+ [^;&|]+", cmd), cmd
            applied.append((host, re.sub(r"-I (\S+) \d+", r"-D \1", cmd)))
            lab2.run(host, ["sh", "-c", cmd])

        run_id, rc, output, results = validate(lab2, tmp_path)
        failed = {
            (host, check): r["message"]
            for host, checks in results.items()
            for check, r in checks.items()
            if r["status"] == "failed"
        }
        assert failed == {}
        assert rc == 0, output[-6000:]
        summary = (tmp_path / run_id / "summary.md").read_text()
        assert "PASSED" in summary, summary
        # The drops are still there: the fixes let the job's traffic in before them.
        for h in lab2.hosts:
            assert "nccl-lab-fault" in lab2.run(h, ["iptables-save"]).stdout
    finally:
        # The lab is shared: take the applied fixes out again (iptables-restore of an empty
        # iptables-save would leave them).
        for host, undo in applied:
            lab2.run(host, ["sh", "-c", undo], check=False)
        lab2.reset_faults()
        for h in lab2.hosts:
            lab2.run(h, ["iptables-restore"], input=saved[h.name])
    assert [lab2.run(h, ["iptables-save"]).stdout.count("-A ") for h in lab2.hosts] == [
        saved[h.name].count("-A ") for h in lab2.hosts
    ]


# --------------------------------------------------------------------------- every recorded ruleset
PEERS = ["10.77.0.12", "10.77.0.13"]
ME = "10.77.0.11"


def judge(netns: str, fixture_kind: str) -> list[dict]:
    """The findings for PEERS and this host (ME, on eth1) of what the kernel of ``netns`` holds."""
    ports = [("MASTER_PORT", [(MASTER_PORT, MASTER_PORT)]), ("ephemeral range", [(32768, 60999)])]
    run = ["ip", "netns", "exec", netns]
    if fixture_kind == "nft":
        queries = fw.host_queries(PEERS, ports, ME, "eth1")
        out = subprocess.run([*run, "nft", "-j", "list", "ruleset"], check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
        return nft.evaluate_nft(nft.parse_nft_json(out), queries)
    tool = "ip6tables" if fixture_kind == "ip6tables" else "iptables"
    peers, me = (["fd00::12"], "fd00::11") if tool == "ip6tables" else (PEERS, ME)
    out = subprocess.run([*run, f"{tool}-save"], check=True, capture_output=True, text=True).stdout
    return ipt.evaluate_iptables(ipt.parse_iptables_save(out),
                                 fw.host_queries(peers, ports, me, "eth1"), tool=tool)  # fmt: skip


@pytest.mark.parametrize(
    ("fixture", "kind"),
    [
        ("iptables-save-drops.txt", "iptables"),
        ("iptables-save-policy-drop.txt", "iptables"),
        ("ip6tables-save-drop.txt", "ip6tables"),
        ("nft-native.txt", "nft"),
    ],
)
def test_each_recorded_ruleset_passes_once_its_fixes_ran_in_a_kernel(
    fixture: str, kind: str
) -> None:
    """Load a recorded ruleset into a throw-away network namespace, run every fix its findings
    print there, verbatim, and read and judge the ruleset again: nothing is left."""
    reason = lab_unavailable_reason()
    if reason:
        pytest.skip(reason)
    netns = f"pffix{os.getpid()}{secrets.token_hex(2)}"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    try:
        loader = {"iptables": "iptables-restore", "ip6tables": "ip6tables-restore"}
        argv = [loader[kind]] if kind in loader else ["nft", "-f", "-"]
        subprocess.run(["ip", "netns", "exec", netns, *argv], check=True, text=True,
                       input=(FIXTURES / fixture).read_text())  # fmt: skip
        found = judge(netns, kind)
        assert [f for f in found if f["certain"]], found  # each fixture drops something
        for f in found:
            subprocess.run(["ip", "netns", "exec", netns, "sh", "-c", f["fix"]], check=True)
        assert judge(netns, kind) == []
    finally:
        subprocess.run(["ip", "netns", "del", netns], check=False)
