# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One cause, its consequences under it (issue 25, items 3 and 4).

The pre-flight's links (core/preflight/causes.py) on observations judged by the real
pre-flight judge, with firewall findings from the real iptables judge on the rules the lab's
faults insert; then the report: verdict.json's cause pointers, report.html's headline and folds,
summary.md's folds, and the JUnit's messages, also for a run stopped at the environment stage.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core.preflight.causes import nccl_preflight_causes
from nccl_preflight.core.preflight.host_checks import judge_host_checks
from nccl_preflight.node import firewall_common as fw
from nccl_preflight.node import firewall_iptables as ipt
from tests.builders.report import RunDir, case, page, report, suites
from tests.jenkins_schema import validate_report_junit

HOSTS = ["node1", "node2", "node3"]
ADDR = {"node1": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3"}
MASTER_PORT = 29500
RING_PORT = {"node1": 40001, "node2": 40002, "node3": 40003}
EPHEMERAL = (32768, 60999)


def firewall(host: str, rule: str) -> dict[str, Any]:
    """What nccl_preflight_observe's firewall read returns for ``host`` with one iptables rule."""
    chains = ":INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]"
    saved = f"*filter\n{chains}\n{rule}\nCOMMIT\n"
    ports = [("ephemeral range", [EPHEMERAL])]
    if host == "node1":
        ports.insert(0, ("MASTER_PORT", [(MASTER_PORT, MASTER_PORT)]))
    peers = [ADDR[h] for h in HOSTS if h != host]
    queries = fw.host_queries(peers, ports, ADDR[host], "fab0")
    findings = ipt.evaluate_iptables(ipt.parse_iptables_save(saved), queries)
    for f in findings:
        f["text"] = fw.describe_finding(f)
    return {"findings": findings, "tools": {"iptables": {"present": True, "read": True}}}


def probe(name: str, target: str, ok: bool = True, kind: str = "timeout") -> dict[str, Any]:
    port = MASTER_PORT if name == "master" else RING_PORT[target]
    return {
        "name": name,
        "host": target,
        "address": ADDR[target],
        "port": port,
        "ok": ok,
        "error": "" if ok else "timed out after 3 s",
        "error_kind": "" if ok else kind,
        "elapsed_ms": 3000,
    }


def observation(host: str, state: str = "up", **extra: Any) -> dict[str, Any]:
    iface = {"state": state, "mtu": 1500, "ipv4": [{"address": ADDR[host], "prefixlen": 24}]}
    return {
        "ifname": "fab0",
        "address": ADDR[host],
        "master_addr": ADDR["node1"],
        "master_port": MASTER_PORT,
        "backend": "gloo",
        "facts": {"interfaces": {"fab0": iface}},
        "probes": [],
        "firewall": {"findings": [], "tools": {"iptables": {"present": True, "read": True}}},
        "port_owner": {"free": True, "listeners": []} if host == "node1" else {},
        "python_facts": {"version": "3.11.9", "torch_version": "2.13.0"},
        **extra,
    }


def judged(observations: dict[str, dict], present: list[str] | None = None) -> dict:
    settings = {"master": "node1", "order": HOSTS, "require_gpu": False}
    results = judge_host_checks(observations, present or HOSTS, settings)
    return nccl_preflight_causes(results, observations)


def result(results: dict, host: str, check: str) -> dict[str, Any]:
    return next(r for r in results[host] if r["check"] == check)


def failed(results: dict) -> dict[tuple[str, str], Any]:
    """(host, check) -> cause of every failed result."""
    return {
        (h, r["check"]): r.get("cause")
        for h, rs in results.items()
        for r in rs or []
        if r["status"] == "failed"
    }


def ring(host: str) -> str:
    return HOSTS[(HOSTS.index(host) + 1) % len(HOSTS)]


def ephemeral_drop_on_node2() -> dict[str, dict]:
    """node2 drops its whole ephemeral range (the lab's fault): node1's probe of node2's ring
    listener times out, and so does every probe node2 makes (the replies are dropped)."""
    rule = "-A INPUT -p tcp -m tcp --dport 32768:60999 -j DROP"
    obs = {h: observation(h) for h in HOSTS}
    obs["node2"]["firewall"] = firewall("node2", rule)
    for h in HOSTS:
        down = h == "node2" or ring(h) == "node2"
        obs[h]["probes"] = [
            probe("master", "node1", ok=h != "node2"),
            probe("ring", ring(h), ok=not down),
        ]
    return obs


def test_probes_explained_by_a_firewall_dropping_the_ephemeral_range_point_at_it() -> None:
    results = judged(ephemeral_drop_on_node2())
    cause = {"host": "node2", "check": "firewall"}
    assert failed(results) == {
        ("node1", "tcp_ring"): cause,  # toward node2's ephemeral listener
        ("node2", "tcp_master_port"): cause,  # the replies to node2's own ephemeral ports
        ("node2", "tcp_ring"): cause,
        ("node2", "firewall"): None,  # the cause
    }


def test_probes_of_a_master_dropping_master_port_point_at_its_firewall() -> None:
    obs = {h: observation(h) for h in HOSTS}
    obs["node1"]["firewall"] = firewall("node1", "-A INPUT -p tcp -m tcp --dport 29500 -j DROP")
    for h in HOSTS:
        obs[h]["probes"] = [probe("master", "node1", ok=False), probe("ring", ring(h))]
    results = judged(obs)
    cause = {"host": "node1", "check": "firewall"}
    assert failed(results) == {
        ("node1", "firewall"): None,
        **{(h, "tcp_master_port"): cause for h in HOSTS},  # the master probes itself too
    }
    text = "\n".join(r["message"] for r in results["node2"] if r["status"] == "failed")
    assert "10.0.0.1:29500" in text  # the probe's own message is kept


def test_a_probe_toward_a_down_interface_points_at_that_interface() -> None:
    obs = {h: observation(h, state="down" if h == "node3" else "up") for h in HOSTS}
    obs["node2"]["probes"] = [probe("ring", "node3", ok=False, kind="unreachable")]
    results = judged(obs)
    assert result(results, "node3", "interface")["status"] == "failed"
    assert result(results, "node2", "tcp_ring")["cause"] == {"host": "node3", "check": "interface"}


def test_a_probe_from_a_missing_source_address_points_at_its_own_interface() -> None:
    obs = {h: observation(h) for h in HOSTS}
    obs["node2"]["facts"]["interfaces"]["fab0"]["ipv4"] = []  # the address is gone
    obs["node2"]["probes"] = [probe("ring", "node3", ok=False, kind="source")]
    results = judged(obs)
    assert result(results, "node2", "tcp_ring")["cause"] == {"host": "node2", "check": "interface"}


def test_a_probe_toward_a_host_that_dropped_out_points_at_its_reachability() -> None:
    obs = {h: observation(h) for h in HOSTS}
    obs["node2"]["probes"] = [probe("ring", "node3", ok=False)]
    results = judged(obs, present=["node1", "node2"])
    assert results["node3"] is None
    assert result(results, "node2", "tcp_ring")["cause"] == {
        "host": "node3",
        "check": "host reachable",
    }


@pytest.mark.parametrize(
    "rule",
    [
        "",  # no firewall at all: the path in between, nobody found here
        "-A INPUT -s 10.9.9.9/32 -p tcp -m tcp --dport 32768:60999 -j DROP",  # other sources
        "-A INPUT -p tcp -m tcp --dport 32768:40000 -j DROP",  # not the probed port 40003
    ],
    ids=["no-rule", "other-source", "other-ports"],
)
def test_a_probe_nothing_explains_stays_a_cause_of_its_own(rule: str) -> None:
    obs = {h: observation(h) for h in HOSTS}
    if rule:
        obs["node3"]["firewall"] = firewall("node3", rule)
    obs["node2"]["probes"] = [probe("ring", "node3", ok=False, kind="refused")]
    results = judged(obs)
    assert result(results, "node2", "tcp_ring")["status"] == "failed"
    assert "cause" not in result(results, "node2", "tcp_ring")


def test_an_uncertain_finding_explains_nothing() -> None:
    """node3's firewall fails for a port nobody probed; the probed one only *may* be dropped."""
    obs = {h: observation(h) for h in HOSTS}
    certain = firewall("node3", "-A INPUT -p tcp -m tcp --dport 32768:40000 -j DROP")
    maybe = firewall("node3", "-A INPUT -p tcp -j DROP")["findings"]
    certain["findings"] += [{**f, "certain": False} for f in maybe]
    obs["node3"]["firewall"] = certain
    obs["node2"]["probes"] = [probe("ring", "node3", ok=False)]
    results = judged(obs)
    assert result(results, "node3", "firewall")["status"] == "failed"
    assert "cause" not in result(results, "node2", "tcp_ring")


# --- the report --------------------------------------------------------------------------------


def write_preflight(run: RunDir, results: dict[str, list[dict] | None]) -> None:
    (run.dir / "preflight").mkdir(exist_ok=True)
    for host, items in results.items():
        if items is not None:
            doc = {"host": host, "results": items}
            (run.dir / "preflight" / f"{host}.json").write_text(json.dumps(doc))


def headline(run: RunDir) -> str:
    text = " ".join(page(run).text)
    return text.split("Failing:")[1].split(" run ")[0].strip()


def test_the_report_folds_the_probes_under_the_firewall_that_dropped_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, HOSTS, nproc=1)
    run.plan(launch_skipped="the pre-flight failed on node1, node2: fix those checks first")
    write_preflight(run, judged(ephemeral_drop_on_node2()))
    verdict = report(run, capsys)
    assert verdict["class"] == "preflight_failed" and verdict["exit_code"] == 10
    by_id = {f["id"]: f for f in verdict["findings"]}
    pointer = {"id": "node2/firewall", "host": "node2", "test": "firewall"}
    for fid in ("node1/tcp_ring", "node2/tcp_ring", "node2/tcp_master_port"):
        assert by_id[fid]["consequence"] and by_id[fid]["cause"] == pointer, by_id[fid]
        assert by_id[fid]["class"] == "preflight_failed"
    assert not by_id["node2/firewall"]["consequence"] and by_id["node2/firewall"]["cause"] is None
    # The ranks that never started point at the cause too, each at its own host's when it has one.
    ranks = [f for f in verdict["findings"] if f["rank"] is not None]
    assert len(ranks) == 3 and all(f["cause"] == pointer for f in ranks)
    assert [f["id"] for f in verdict["findings"] if not f["consequence"]] == ["node2/firewall"]
    assert headline(run) == "node2"
    html = (run.dir / "report.html").read_text()
    fold = html.split("consequence(s) of this firewall on node2")[1].split("</details>")[0]
    assert "tcp_ring" in fold and "node1" in fold and "tcp_master_port" in fold

    summary = (run.dir / "summary.md").read_text().split("Problems:", 1)[1]
    lines = summary.strip().splitlines()
    top = [line for line in lines if line.startswith("- ")]
    assert len(top) == 1 and top[0].startswith("- preflight.node2 firewall: node2: iptables")
    under = [line for line in lines if line.startswith("  - consequence: ")]
    assert any("preflight.node1 tcp_ring" in line for line in under)
    assert any("nccl.node3.rank2 result" in line for line in under)

    merged = suites(run.dir / "junit.xml")
    ring_failure = case(merged["preflight.node1"], "tcp_ring").find("failure")
    assert "(a consequence of node2's failed firewall check)" in ring_failure.get("message")
    error = case(merged["nccl.node1.rank0"], "result").find("error")
    assert error.get("message").startswith(
        "rank 0 on node1 never started: the run stopped at the pre-flight: node2 firewall: node2: "
        "iptables filter chain INPUT rule 1"
    )
    validate_report_junit(run.dir)


def test_a_stop_at_the_environment_stage_lists_every_planned_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No plan.json: the environment stage wrote each host's finding and layout."""
    run = RunDir(tmp_path, ["node1", "node2"], nproc=2)
    (run.dir / "preflight").mkdir()
    why = "node2: no address in nccl_fabric_cidr 10.250.77.0/24; its interfaces: fab0 10.0.0.2/24"
    for i, host in enumerate(run.hosts):
        finding = {
            "check": "environment",
            "host": host,
            "status": "error" if host == "node2" else "skipped",
            "message": why + ". The run stopped at the environment stage: nothing was started "
            "on any host"
            if host == "node2"
            else "node1: not checked: the run stopped at the environment stage because of node2",
            "hint": "ip -br addr show  (on node2)" if host == "node2" else "",
        }
        layout = {"host": host, "node_rank": i, "nproc_per_node": 2, "rank_offset": 2 * i}
        doc = {"host": host, "results": [finding], "layout": layout}
        (run.dir / "preflight" / f"{host}.json").write_text(json.dumps(doc))
    verdict = report(run, capsys, ranks_launched=False)
    merged = suites(run.dir / "junit.xml")
    assert sorted(n for n in merged if n.startswith("nccl.")) == [
        "nccl.node1.rank0",
        "nccl.node1.rank1",
        "nccl.node2.rank2",
        "nccl.node2.rank3",
    ]
    for name in ("nccl.node1.rank0", "nccl.node2.rank3"):
        error = case(merged[name], "result").find("error")
        assert error.get("type") == "never started"
        assert f"never started: the run stopped at the environment stage: {why}." in error.get(
            "message"
        )
        # No rank ran: no fix of a hung or lost rank (its log, the timeout) is offered for it.
        assert "timeout" not in ET.tostring(merged[name], encoding="unicode")
        assert "rank-" not in (error.text or "") + error.get("message")
    validate_report_junit(run.dir)
    for written in ("summary.md", "report.html", "verdict.json"):
        assert "raise the timeout" not in (run.dir / written).read_text(), written
    assert verdict["class"] == "preflight_failed"
    pointer = {"id": "node2/environment", "host": "node2", "test": "environment"}
    ranks = [f for f in verdict["findings"] if f["rank"] is not None]
    assert len(ranks) == 4 and all(f["consequence"] and f["cause"] == pointer for f in ranks)
    assert headline(run) == "node2"
