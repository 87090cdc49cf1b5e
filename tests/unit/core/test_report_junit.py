# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/junit.py and library/nccl_report.py: JUnit and summary from
reports/<run-id>/.

Every written XML file is validated against the Jenkins xunit schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import nccl_report
import pytest
from ansible.module_utils.testing import patch_module_args

from nccl_preflight.core import junit_cases
from tests.jenkins_schema import validate_report_junit
from tests.verdict_schema import validate_verdict

# --- builders of reports/<run-id>/, per the contracts in docs/design.md --------------------------
# The rank documents have the shape files/nccl_check.py writes (fields recorded from a real run).
ROOT = Path(__file__).resolve().parents[3]

COLLECTIVES = ["checkin", "init", "all_reduce_sum", "broadcast", "all_gather", "reduce_scatter"]
BANDWIDTH = ["bandwidth_all_reduce", "bandwidth_all_gather"]


def bw_rows(world: int, scale: float) -> list[dict[str, Any]]:
    rows = []
    for size in (1024, 4096, 65536):
        algbw = scale * size / 65536
        rows.append(
            {
                "size_bytes": size,
                "count": size // 4,
                "type": "float32",
                "redop": "sum",
                "root": -1,
                "time_us": 12.5 * size / 1024,
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * 2 * (world - 1) / world,
                "wrong": 0,
            }
        )
    return rows


def rank_doc(
    host: str,
    rank: int,
    local_rank: int,
    node_rank: int,
    world: int,
    nproc: int,
    failed: dict[str, str] | None = None,
    bw_scale: float = 1.0,
    status: str | None = None,
    current_test: str | None = None,
    stop_after: str | None = None,
) -> dict[str, Any]:
    failed = failed or {}
    tests = []
    for name in COLLECTIVES + BANDWIDTH:
        if stop_after is not None and len(tests) and tests[-1]["name"] == stop_after:
            break
        test: dict[str, Any] = {
            "name": name,
            "status": "failed" if name in failed else "passed",
            "duration_s": 0.0123456,
            "message": failed.get(name, ""),
            "details": {"expected": 6.0, "got": 5.0, "hint": "check the fabric MTU"}
            if name in failed
            else {},
            "bandwidth": bw_rows(world, bw_scale) if name.startswith("bandwidth_") else [],
        }
        tests.append(test)
    finished = stop_after is None
    overall = status or ("failed" if failed else "passed")
    return {
        "schema": 1,
        "host": host,
        "global_rank": rank,
        "local_rank": local_rank,
        "node_rank": node_rank,
        "world_size": world,
        "local_world_size": nproc,
        "device": "cpu",
        "backend": "gloo",
        "dtype": "float32",
        "pid": 1000 + rank,
        "versions": {
            "python": "3.11.7",
            "torch": "2.13.0+cpu",
            "cuda": None,
            "nccl": None,
            "driver": None,
        },
        "env": {"GLOO_SOCKET_IFNAME": "fab0", "MASTER_ADDR": "10.77.0.1", "RANK": str(rank)},
        "status": overall if finished else "running",
        "current_test": current_test,
        "missing_ranks": [],
        "started_at": "2025-01-01T12:00:00.000+00:00",
        "finished_at": "2025-01-01T12:00:05.000+00:00" if finished else None,
        "tests": tests,
    }


def preflight_doc(host: str, failed: bool = False) -> dict[str, Any]:
    results = [
        {
            "check": "fabric_interface",
            "host": host,
            "status": "passed",
            "message": "fab0 up",
            "hint": "",
        },
        {
            "check": "gpu_present",
            "host": host,
            "status": "skipped",
            "message": "backend gloo needs no GPU",
            "hint": "",
        },
    ]
    if failed:
        results.append(
            {
                "check": "firewall_master_port",
                "host": host,
                "status": "failed",
                "message": f"{host} drops TCP 29500",
                "hint": "iptables -D INPUT -p tcp --dport 29500 -j DROP",
            }
        )
    return {"host": host, "results": results}


class RunDir:
    """A reports/<run-id>/ directory built step by step."""

    def __init__(
        self, root: Path, hosts: list[str], nproc: int, run_id: str = "20250101T120000-abcdef"
    ):
        self.root = root
        self.run_id = run_id
        self.dir = root / run_id
        self.dir.mkdir(parents=True)
        self.hosts = hosts
        self.nproc = nproc
        self.world = nproc * len(hosts)

    def plan(self, unreachable: tuple[str, ...] = (), launch_skipped: str = "") -> RunDir:
        doc = {
            "run_id": self.run_id,
            "world_size": self.world,
            "master_addr": "10.77.0.1",
            "master_port": 29500,
            "backend": "gloo",
            "launch_skipped": launch_skipped,
            "hosts": [
                {
                    "host": h,
                    "node_rank": i,
                    "nproc_per_node": self.nproc,
                    "rank_offset": i * self.nproc,
                    "address": f"10.77.0.{i + 1}",
                    "ifname": "fab0",
                    "reachable": h not in unreachable,
                }
                for i, h in enumerate(self.hosts)
            ],
        }
        (self.dir / "plan.json").write_text(json.dumps(doc))
        return self

    def preflight(self, host: str, failed: bool = False) -> RunDir:
        (self.dir / "preflight").mkdir(exist_ok=True)
        (self.dir / "preflight" / f"{host}.json").write_text(
            json.dumps(preflight_doc(host, failed))
        )
        return self

    def host_dir(self, host: str) -> Path:
        path = self.dir / host
        path.mkdir(exist_ok=True)
        return path

    def launch(self, host: str, rc: int | None = 0, timed_out: bool = False) -> RunDir:
        doc = {
            "rc": rc,
            "timed_out": timed_out,
            "killed_pids": [4242] if timed_out else [],
            "timeout_s": 60,
            "stopped_by": None,
        }
        (self.host_dir(host) / "launch.json").write_text(json.dumps(doc))
        (self.host_dir(host) / "torchrun.log").write_text("torchrun says hello\n")
        return self

    def rank(
        self,
        host: str,
        local_rank: int,
        doc: dict[str, Any] | None = None,
        log: str | None = "rank log line\n",
        **kw: Any,
    ) -> RunDir:
        node_rank = self.hosts.index(host)
        rank = node_rank * self.nproc + local_rank
        if doc is None:
            doc = rank_doc(host, rank, local_rank, node_rank, self.world, self.nproc, **kw)
        if doc:
            (self.host_dir(host) / f"rank-{rank}.json").write_text(json.dumps(doc))
        if log is not None:
            (self.host_dir(host) / f"rank-{rank}.log").write_text(log)
        return self

    def all_passed(self) -> RunDir:
        self.plan()
        for host in self.hosts:
            self.preflight(host).launch(host)
            for local_rank in range(self.nproc):
                self.rank(host, local_rank)
        return self


# --- helpers -------------------------------------------------------------------------------------


def module_result(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        nccl_report.main()
    return json.loads(capsys.readouterr().out)


def build(run: RunDir, capsys: pytest.CaptureFixture[str], **kw: Any) -> dict[str, Any]:
    return module_result({"report_root": str(run.root), "run_id": run.run_id, **kw}, capsys)


def suites(path: Path) -> dict[str, ET.Element]:
    return {s.get("name"): s for s in ET.parse(path).getroot().iter("testsuite")}


def case(suite: ET.Element, name: str) -> ET.Element:
    found = [c for c in suite.iter("testcase") if c.get("name") == name]
    assert found, f"no testcase {name} in {suite.get('name')}"
    return found[0]


# --- all passed -------------------------------------------------------------------------------


def test_all_passed_gives_one_suite_per_rank_and_per_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=3).all_passed()
    result = build(run, capsys)
    assert result["verdict"] == "passed"
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    assert sorted(merged) == sorted(
        [f"nccl.node{1 + r // 3}.rank{r}" for r in range(6)]
        + ["preflight.node1", "preflight.node2"]
    )
    rank4 = merged["nccl.node2.rank4"]
    assert {c.get("classname") for c in rank4.iter("testcase")} == {"nccl.node2.rank4"}
    assert [c.get("name") for c in rank4.iter("testcase")] == [
        "checkin",
        "init",
        "all_reduce_sum",
        "broadcast",
        "all_gather",
        "reduce_scatter",
        "bandwidth_all_reduce",
        "bandwidth_all_gather",
        "transport",  # src/nccl_preflight/core/transport_report.py: NCCL is not used with gloo
    ]
    assert case(rank4, "transport").find("skipped").get("message") == (
        "rank 4 on node2 ran the gloo backend: NCCL is not used"
    )
    props = {p.get("name"): p.get("value") for p in rank4.iter("property")}
    assert props["version.torch"] == "2.13.0+cpu" and props["backend"] == "gloo"
    # The merged file is lean (issue 37): a rank's bandwidth rows and what a passed check saw
    # are in its own file under junit/ only.
    assert not any(name.startswith("bandwidth.") for name in props)
    own = suites(run.dir / "junit" / "rank-4.xml")["nccl.node2.rank4"]
    own_props = {p.get("name"): p.get("value") for p in own.iter("property")}
    assert own_props["version.torch"] == "2.13.0+cpu"
    assert own_props["bandwidth.all_reduce.65536"] == (
        "count=16384 type=float32 redop=sum root=-1 time_us=800 algbw_gbps=1 "
        "busbw_gbps=1.667 wrong=0"
    )
    pre = merged["preflight.node1"]
    assert case(pre, "fabric_interface").find("system-out") is None
    own_pre = suites(run.dir / "junit" / "preflight-node1.xml")["preflight.node1"]
    assert case(own_pre, "fabric_interface").find("system-out").text == "fab0 up"
    assert case(pre, "gpu_present").find("skipped").get("message") == "backend gloo needs no GPU"
    # junit-xml writes times with 6 decimals and disabled="0": neither survives.
    root = ET.parse(run.dir / "junit.xml").getroot()
    assert set(root.attrib) <= {"name", "time", "tests", "failures", "errors"}
    assert root.get("tests") == str(6 * 9 + 2 * 2) and root.get("failures") == "0"
    for suite in root.iter("testsuite"):
        assert "disabled" not in suite.attrib
        assert len(suite.get("time").split(".")[1]) <= 3
    # One file per rank and per host, each a valid document of its own.
    assert sorted(p.name for p in (run.dir / "junit").glob("*.xml")) == sorted(
        [f"rank-{r}.xml" for r in range(6)] + ["preflight-node1.xml", "preflight-node2.xml"]
    )
    assert os.readlink(run.root / "latest") == run.run_id
    summary = (run.dir / "summary.md").read_text()
    assert (
        "PASSED" in summary and "| node2 | 1 | 1 passed, 0 failed, 1 skipped | 3 | 0 |" in summary
    )
    assert "| bandwidth_all_reduce | 64 KiB | 6 |" in summary


# --- failures and errors ----------------------------------------------------------------------


def test_a_failed_collective_is_a_failure_with_its_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).plan()
    for host in run.hosts:
        run.preflight(host).launch(host, rc=1)
    run.rank("node1", 0)
    run.rank("node2", 0, failed={"all_reduce_sum": "rank 1 got 5.0 at index 3, expected 6.0"})
    result = build(run, capsys)
    assert result["verdict"] == "failed"
    assert result["totals"]["failures"] == 1 and result["totals"]["errors"] == 0
    validate_report_junit(run.dir)
    failure = case(suites(run.dir / "junit.xml")["nccl.node2.rank1"], "all_reduce_sum").find(
        "failure"
    )
    assert failure.get("message") == (
        "rank 1 got 5.0 at index 3, expected 6.0 Hint: check the fabric MTU"
    )
    assert json.loads(failure.text)["expected"] == 6.0
    assert any("nccl.node2.rank1 all_reduce_sum" in p for p in result["problems"])


def test_a_rank_without_result_is_an_error_with_the_tail_of_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=2).plan()
    for host in run.hosts:
        run.launch(host, rc=1)
    run.rank("node1", 0).rank("node1", 1).rank("node2", 0)
    log = "".join(f"line {i}\n" for i in range(100)) + "Traceback: Segmentation fault\n"
    run.rank("node2", 1, doc={}, log=log)  # rank 3 wrote no JSON, only its log
    result = build(run, capsys)
    assert result["verdict"] == "failed"
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    assert len([n for n in merged if n.startswith("nccl.")]) == 4
    error = case(merged["nccl.node2.rank3"], "result").find("error")
    assert error.get("type") == "crashed"
    assert "rank 3 on node2 crashed" in error.get("message")
    assert "Segmentation fault" in error.text and "line 99" in error.text
    assert "line 10\n" not in error.text  # only the tail
    # The other ranks are all there and passed.
    assert all(
        merged[f"nccl.{h}.rank{r}"].get("errors") == "0"
        for h, r in (("node1", 0), ("node1", 1), ("node2", 2))
    )


def test_hung_and_never_started_ranks_say_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=2).plan()
    run.launch("node1", rc=-15, timed_out=True)
    # rank 0 hung inside broadcast: its last record says so
    run.rank("node1", 0, stop_after="all_reduce_sum", current_test="broadcast")
    run.rank("node1", 1, doc={}, log="waiting for the store\n")  # no JSON, killed at timeout
    # node2: torchrun ran but started no worker (no rank logs)
    (run.host_dir("node2") / "launch.json").write_text(
        json.dumps({"rc": 1, "timed_out": False, "killed_pids": []})
    )
    (run.host_dir("node2") / "torchrun.log").write_text("RendezvousConnectionError: refused\n")
    build(run, capsys)
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    hung = case(merged["nccl.node1.rank0"], "broadcast").find("error")
    assert hung.get("type") == "hung" and "hung in broadcast" in hung.get("message")
    assert case(merged["nccl.node1.rank0"], "all_reduce_sum").find("error") is None
    killed = case(merged["nccl.node1.rank1"], "result").find("error")
    assert killed.get("type") == "hung" and "after 60 s" in killed.get("message")
    never = case(merged["nccl.node2.rank2"], "result").find("error")
    assert never.get("type") == "never started"
    assert "RendezvousConnectionError" in never.text  # torchrun's log when the rank has none


def test_a_launch_that_could_not_start_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).plan()
    busy = "node1: MASTER_PORT 29500 on 10.0.0.1 is still in use after 30 s"
    (run.host_dir("node1") / "launch.json").write_text(
        json.dumps({"rc": None, "timed_out": False, "killed_pids": [], "error": busy})
    )
    stopped = "torchrun did not start on node1, so the rendezvous could not complete"
    (run.host_dir("node2") / "launch.json").write_text(
        json.dumps({"rc": -15, "timed_out": False, "killed_pids": [5], "stopped_by": stopped})
    )
    build(run, capsys)
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    master = case(merged["nccl.node1.rank0"], "result").find("error")
    assert master.get("type") == "never started" and busy in master.get("message")
    other = case(merged["nccl.node2.rank1"], "result").find("error")
    assert other.get("type") == "never started" and stopped in other.get("message")


def test_an_unreachable_host_is_an_error_for_that_host_and_its_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).plan(
        unreachable=("node2",), launch_skipped="node2 dropped out before launch"
    )
    run.preflight("node1")
    result = build(run, capsys)
    assert result["verdict"] == "failed"
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    host_error = case(merged["preflight.node2"], "host reachable").find("error")
    assert "node2 was unreachable" in host_error.get("message")
    assert "ansible node2 -m ansible.builtin.ping" in host_error.get("message")
    for name in ("nccl.node1.rank0", "nccl.node2.rank1"):
        assert case(merged[name], "result").find("error").get("type") == "never started"
    assert "UNREACHABLE" in (run.dir / "summary.md").read_text()


def test_preflight_failures_carry_the_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed().preflight("node2", failed=True)
    result = build(run, capsys)
    assert result["verdict"] == "failed" and result["totals"]["failures"] == 1
    validate_report_junit(run.dir)
    failure = case(suites(run.dir / "junit.xml")["preflight.node2"], "firewall_master_port")
    message = failure.find("failure").get("message")
    assert message == ("node2 drops TCP 29500 Hint: iptables -D INPUT -p tcp --dport 29500 -j DROP")
    assert "| node2 | 1 | 1 passed, 1 failed, 1 skipped |" in result["summary"]


def test_every_finding_of_a_host_is_a_problem_not_only_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).all_passed()
    doc = preflight_doc("node2", failed=True)
    doc["results"].append(
        {
            "check": "mtu",
            "host": "node2",
            "status": "failed",
            "message": "node2: MTU 1400 on fab0 differs from the other hosts (1500)",
            "hint": "ip link set dev fab0 mtu 1500",
        }
    )
    (run.dir / "preflight" / "node2.json").write_text(json.dumps(doc))
    result = build(run, capsys)
    assert result["totals"]["failures"] == 2
    named = [p for p in result["problems"] if p.startswith("preflight.node2 ")]
    assert [p.split(":")[0] for p in named] == [
        "preflight.node2 firewall_master_port",
        "preflight.node2 mtu",
    ]


def test_a_truncated_rank_file_is_an_error_not_a_crash_of_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1"], nproc=1).plan().launch("node1", rc=-9)
    (run.host_dir("node1") / "rank-0.json").write_text('{"schema": 1, "tests": [')
    (run.host_dir("node1") / "rank-0.log").write_text("\x1b[31mred\x1b[0m killed\n")
    build(run, capsys)
    validate_report_junit(run.dir)
    error = case(suites(run.dir / "junit.xml")["nccl.node1.rank0"], "result").find("error")
    assert "not valid JSON" in error.get("message")
    assert "\x1b" not in error.text and "killed" in error.text


def test_host_names_with_dots_keep_the_jenkins_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["10.0.0.1"], nproc=1).all_passed()
    build(run, capsys)
    validate_report_junit(run.dir)
    names = suites(run.dir / "junit.xml")
    assert set(names) == {"nccl.10_0_0_1.rank0", "preflight.10_0_0_1"}
    assert (run.dir / "junit" / "preflight-10.0.0.1.xml").is_file()


# --- the module's options -----------------------------------------------------------------------


def test_report_only_rebuilds_latest_when_the_run_id_is_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1"], nproc=1).all_passed()
    build(run, capsys)
    (run.dir / "junit.xml").unlink()
    result = module_result(
        {
            "report_root": str(tmp_path),
            "run_id": "20990101T000000-ffffff",
            "fallback_to_latest": True,
        },
        capsys,
    )
    assert result["run_id"] == run.run_id and (run.dir / "junit.xml").is_file()
    missing = module_result(
        {"report_root": str(tmp_path), "run_id": "20990101T000000-ffffff"}, capsys
    )
    assert missing["failed"] is True
    assert "no collected files for run 20990101T000000-ffffff" in missing["msg"]
    assert "-e nccl_run_id=" in missing["msg"]


def test_check_mode_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = RunDir(tmp_path, ["node1"], nproc=1).all_passed()
    result = build(run, capsys, _ansible_check_mode=True)
    assert result["changed"] is False and result["verdict"] == "passed"
    assert not (run.dir / "junit.xml").exists() and not (tmp_path / "latest").exists()


def test_preflight_only_run_is_judged_on_preflight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(tmp_path, ["node1"], nproc=1).preflight("node1")
    assert build(run, capsys, expect_ranks=False)["verdict"] == "passed"
    validate_report_junit(run.dir)
    result = build(run, capsys, expect_ranks=True)
    assert result["verdict"] == "failed"
    assert "launch stage did not run" in result["problems"][0]


def test_suite_xml_refuses_an_empty_suite() -> None:
    with pytest.raises(ValueError, match="empty suites are not allowed"):
        junit_cases.document([junit_cases.Suite("nccl.x.rank0", [])])


# --- real output of files/nccl_check.py ---------------------------------------------------------


@pytest.mark.torchrun
def test_real_nccl_check_output_gives_a_valid_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three ranks of the real check under torchrun; the report must agree with its exit status."""
    run = RunDir(tmp_path, ["node1"], nproc=3).plan()
    out = run.host_dir("node1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "3",
            str(ROOT / "files" / "nccl_check.py"),
            "--out-dir",
            str(out),
            "--backend",
            "gloo",
            "--max-bytes",
            "4096",
            "--iters",
            "1",
            "--warmup",
            "0",
            "--timeout",
            "30",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    (out / "torchrun.log").write_text(proc.stdout + proc.stderr)
    (out / "launch.json").write_text(
        json.dumps({"rc": proc.returncode, "timed_out": False, "killed_pids": []})
    )
    result = build(run, capsys)
    validate_report_junit(run.dir)
    merged = suites(run.dir / "junit.xml")
    assert sorted(merged) == ["nccl.node1.rank0", "nccl.node1.rank1", "nccl.node1.rank2"]
    assert (result["verdict"] == "passed") == (proc.returncode == 0), result["problems"]
    # three healthy ranks on loopback pass: a check that fails here is a bug, not a finding
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    names = {c.get("name") for c in merged["nccl.node1.rank0"].iter("testcase")}
    assert {"all_reduce_sum", "bandwidth_all_reduce"} <= names
    assert "bandwidth_all_reduce" in {row["collective"] for row in result["bandwidth"]}


def test_a_rank_ended_at_the_timeout_is_hung_in_its_running_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nccl_check records the running test as an error when SIGTERM ends it; the timeout says
    that the rank hung there."""
    run = RunDir(tmp_path, ["node1"], nproc=1).plan().launch("node1", rc=1, timed_out=True)
    doc = rank_doc("node1", 0, 0, 0, 1, 1, status="error", current_test="broadcast")
    doc["tests"] = doc["tests"][:4]
    doc["tests"][-1].update(status="error", message="rank 0 on node1 was stopped by SIGTERM")
    run.rank("node1", 0, doc=doc)
    build(run, capsys)
    validate_report_junit(run.dir)
    error = case(suites(run.dir / "junit.xml")["nccl.node1.rank0"], "broadcast").find("error")
    assert error.get("type") == "hung"
    assert error.get("message").startswith(
        "rank 0 on node1 hung in broadcast: nccl_run_timeout ran out after 60 s"
    )
    said = "The rank said: rank 0 on node1 was stopped by SIGTERM Hint: rank 0 on node1 stopped in"
    assert said in error.get("message")  # nccl_hints adds the fix: where it stopped, what to read


def test_under_slurm_an_unreachable_host_is_explained_in_slurms_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """plan.json's front_end "slurm" (the slurm command writes it): no Ansible ping advice."""
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).plan(
        unreachable=("node2",), launch_skipped="node2 dropped out before launch"
    )
    plan = json.loads((run.dir / "plan.json").read_text())
    (run.dir / "plan.json").write_text(json.dumps({**plan, "front_end": "slurm"}))
    run.preflight("node1")
    build(run, capsys)
    validate_report_junit(run.dir)
    message = case(suites(run.dir / "junit.xml")["preflight.node2"], "host reachable")
    text = message.find("error").get("message")
    assert "srun -w node2 -N 1" in text and "sinfo -n node2" in text and "ansible" not in text
    verdict = validate_verdict(json.loads((run.dir / "verdict.json").read_text()))
    (finding,) = [f for f in verdict["findings"] if f["test"] == "host reachable"]
    assert finding["host"] == "node2" and finding["fix"].startswith("sinfo -n node2")
    assert "ansible" not in finding["fix"]
