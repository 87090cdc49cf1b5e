# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Turn the collected files of one run (reports/<run-id>/) into JUnit for Jenkins and a summary.

Pure functions, used by library/nccl_report.py on the control machine. The input layout and the
rank result JSON are the contracts in docs/design.md. JUnit is built with junit-xml and then
trimmed to what the Jenkins xunit schema (jenkins-junit.xsd) accepts: no ``disabled`` or
``skipped`` on ``testsuites``, suite times with at most 3 decimals, no empty suites, no attribute
the schema does not know.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import xml.dom.minidom
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible.module_utils.nccl_expect import expectation_markdown, expectation_suites
from ansible.module_utils.nccl_files import write_atomically
from ansible.module_utils.nccl_hints import MISSING, rank_hints
from ansible.module_utils.nccl_pairwise import pairwise_markdown, pairwise_suites, write_pairwise
from ansible.module_utils.nccl_text import (  # noqa: F401 - part of this module's interface
    LOG_TAIL_CHARS,
    LOG_TAIL_LINES,
    clean_text,
    host_label,
    md_escape,
    safe_name,
    tail,
)
from ansible.module_utils.nccl_transport_report import (
    add_transport_cases,
    analyze_run,
    read_nccl_logs,
    transport_lines,
)

try:
    from junit_xml import TestCase, TestSuite
except ImportError as exc:  # the module reports it with missing_required_lib
    JUNIT_XML_IMPORT_ERROR: ImportError | None = exc
else:
    JUNIT_XML_IMPORT_ERROR = None

# What jenkins-junit.xsd allows on each element; anything else junit-xml writes is dropped.
_ALLOWED_ATTRS = {
    "testsuites": {"name", "time", "tests", "failures", "errors"},
    "testsuite": {
        "name",
        "tests",
        "failures",
        "errors",
        "group",
        "time",
        "skipped",
        "timestamp",
        "hostname",
        "id",
        "package",
        "file",
        "log",
        "url",
        "version",
    },
    "testcase": {"name", "time", "classname", "group"},
    "failure": {"type", "message"},
    "error": {"type", "message"},
    "skipped": {"type", "message"},
    "property": {"name", "value"},
}
_RANK_FILE = re.compile(r"^rank-(\d+)\.(json|log)$")


# --------------------------------------------------------------------------------------------
# Reading reports/<run-id>/
# --------------------------------------------------------------------------------------------


@dataclass
class HostData:
    """Everything collected from (or planned for) one host."""

    host: str
    node_rank: int | None = None
    nproc_per_node: int | None = None
    rank_offset: int | None = None
    address: str | None = None
    ifname: str | None = None
    reachable: bool = True
    preflight: dict[str, Any] | None = None
    ranks: dict[int, dict[str, Any]] = field(default_factory=dict)
    rank_logs: dict[int, str] = field(default_factory=dict)
    unreadable: dict[int, str] = field(default_factory=dict)
    torchrun_log: str | None = None
    launch: dict[str, Any] | None = None
    nccl_logs: dict[Any, str] = field(default_factory=dict)  # nccl-rank-<R>.log by rank

    def expected_ranks(self) -> list[int]:
        """Global ranks planned on this host, plus any that reported from it anyway."""
        planned: set[int] = set()
        if self.rank_offset is not None and self.nproc_per_node:
            planned = set(range(self.rank_offset, self.rank_offset + self.nproc_per_node))
        return sorted(planned | set(self.ranks) | set(self.rank_logs) | set(self.unreadable))


@dataclass
class RunData:
    run_id: str
    plan: dict[str, Any]
    hosts: list[HostData]
    report_dir: Path | None = None  # where read_run read it (<host>/pairwise/: nccl_pairwise)


def _seconds(value: Any) -> float:
    """A duration from a rank's file; 0.0 when it is not a number (a broken or hostile node)."""
    try:
        return max(float(value or 0.0), 0.0)
    except (TypeError, ValueError):
        return 0.0


def _read_json(path: Path) -> tuple[Any, str | None]:
    """(document, None) or (None, why it could not be read)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read {path}: {exc}"
    except json.JSONDecodeError as exc:
        return None, f"{path} is not valid JSON ({exc}); the rank was probably killed mid-write"


def _read_text(path: Path) -> str | None:
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def read_run(report_dir: Path) -> RunData:
    """Read plan.json, preflight/<host>.json and <host>/{rank-*.json,rank-*.log,...}."""
    plan: dict[str, Any] = {}
    if (report_dir / "plan.json").is_file():
        loaded, _ = _read_json(report_dir / "plan.json")
        if isinstance(loaded, dict):
            plan = loaded
    hosts: dict[str, HostData] = {}
    for entry in plan.get("hosts", []):
        data = HostData(
            host=str(entry["host"]),
            node_rank=entry.get("node_rank"),
            nproc_per_node=entry.get("nproc_per_node"),
            rank_offset=entry.get("rank_offset"),
            address=entry.get("address"),
            ifname=entry.get("ifname"),
            reachable=bool(entry.get("reachable", True)),
        )
        hosts[data.host] = data

    preflight_dir = report_dir / "preflight"
    if preflight_dir.is_dir():
        for path in sorted(preflight_dir.glob("*.json")):
            doc, _ = _read_json(path)
            if not isinstance(doc, dict):
                continue
            name = str(doc.get("host") or path.stem)
            hosts.setdefault(name, HostData(host=name)).preflight = doc

    reserved = {"preflight", "junit"}
    for sub in sorted(p for p in report_dir.iterdir() if p.is_dir() and p.name not in reserved):
        data = hosts.get(sub.name)
        if data is None:
            data = hosts[sub.name] = HostData(host=sub.name)
        for path in sorted(sub.iterdir()):
            match = _RANK_FILE.match(path.name)
            if match and match.group(2) == "json":
                doc, why = _read_json(path)
                if isinstance(doc, dict):
                    data.ranks[int(match.group(1))] = doc
                else:
                    data.unreadable[int(match.group(1))] = why or f"{path} holds no JSON object"
            elif match:
                data.rank_logs[int(match.group(1))] = _read_text(path) or ""
        data.torchrun_log = _read_text(sub / "torchrun.log")
        data.nccl_logs = read_nccl_logs(sub)
        launch, _ = (
            _read_json(sub / "launch.json") if (sub / "launch.json").is_file() else (None, None)
        )
        data.launch = launch if isinstance(launch, dict) else None
    run_id = str(plan.get("run_id") or report_dir.name)
    order = sorted(hosts.values(), key=lambda h: (h.node_rank is None, h.node_rank or 0, h.host))
    return RunData(run_id=run_id, plan=plan, hosts=order, report_dir=report_dir)


# --------------------------------------------------------------------------------------------
# Building suites
# --------------------------------------------------------------------------------------------


def _with_hint(message: str, hint: str | None) -> str:
    message = message or ""
    if hint:
        return f"{message} Hint: {hint}" if message else f"Hint: {hint}"
    return message


def _fmt_num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def rank_properties(result: dict[str, Any]) -> dict[str, str]:
    """Suite properties of one rank: identity, versions and every bandwidth row."""
    props: dict[str, str] = {}
    for key in (
        "host",
        "global_rank",
        "local_rank",
        "node_rank",
        "world_size",
        "local_world_size",
        "backend",
        "device",
        "status",
        "started_at",
        "finished_at",
    ):
        if result.get(key) is not None:
            props[key] = str(result[key])
    for key, value in sorted((result.get("versions") or {}).items()):
        props[f"version.{key}"] = "" if value is None else str(value)
    for test in result.get("tests") or []:
        for row in test.get("bandwidth") or []:
            collective = str(test.get("name")).removeprefix("bandwidth_")
            name = f"bandwidth.{collective}.{row.get('size_bytes')}"
            props[name] = " ".join(
                f"{key}={_fmt_num(row.get(key))}"
                for key in (
                    "count",
                    "type",
                    "redop",
                    "root",
                    "time_us",
                    "algbw_gbps",
                    "busbw_gbps",
                    "rank_time_us",
                    "rank_busbw_gbps",
                    "wrong",
                )
                if key in row
            )
    return props


def _launch_timeout(launch: dict[str, Any] | None) -> str:
    if launch and launch.get("timeout_s") is not None:
        return f" after {launch['timeout_s']} s"
    return ""


def classify_missing(
    host: HostData, rank: int, launch_skipped: str | None, reported_missing_by: list[int]
) -> tuple[str, str]:
    """Why a rank has no result: ("never started" | "hung" | "crashed", message)."""
    where = f"rank {rank} on {host.host}"
    seen = ""
    if reported_missing_by:
        by = ", ".join(str(r) for r in sorted(reported_missing_by))
        seen = f" Rank(s) {by} reported that it never checked in."
    if not host.reachable:
        return "never started", (
            f"{where} never started: the host was unreachable or failed before launch.{seen}"
        )
    if launch_skipped:
        return "never started", f"{where} never started: launch was skipped ({launch_skipped})."
    launch = host.launch
    if launch is None:
        return "never started", (
            f"{where} never started: no launch record was collected from {host.host} "
            f"(torchrun did not run there, or the host was lost during the run).{seen}"
        )
    if rank in host.unreadable:
        return "crashed", f"{where} left an unreadable result: {host.unreadable[rank]}.{seen}"
    if not host.rank_logs.get(rank):
        # Why the launch itself failed (error) or why it was ended early (stopped_by), if known.
        why = launch.get("error") or launch.get("stopped_by")
        return "never started", (
            f"{where} never started: torchrun on {host.host} started no worker for it "
            f"(torchrun rc {launch.get('rc')}{f'; {why}' if why else ''}; see torchrun.log)."
            f"{seen}"
        )
    if launch.get("timed_out"):
        return "hung", (
            f"{where} hung: no result{_launch_timeout(launch)}, its process tree was killed.{seen}"
        )
    if launch.get("stopped_by"):
        return "hung", (
            f"{where} hung: no result when the run was stopped ({launch['stopped_by']}); its "
            f"process tree was killed.{seen}"
        )
    return "crashed", (
        f"{where} crashed: it exited before writing its result (torchrun rc "
        f"{launch.get('rc')}).{seen}"
    )


def _log_for(host: HostData, rank: int) -> str:
    text = tail(host.rank_logs.get(rank))
    if text:
        return f"--- tail of rank-{rank}.log ---\n{text}"
    if host.torchrun_log:
        return f"--- tail of torchrun.log on {host.host} ---\n{tail(host.torchrun_log)}"
    return "(no log was collected)"


def rank_suite(
    host: HostData,
    rank: int,
    launch_skipped: str | None = None,
    reported_missing_by: list[int] | None = None,
    hints: dict[str, str] | None = None,
) -> TestSuite:
    """One testsuite for one rank: a testcase per test, or an error saying why there is none."""
    classname = f"nccl.{host_label(host.host)}.rank{rank}"
    name = classname
    result = host.ranks.get(rank)
    if result is None:
        kind, message = classify_missing(host, rank, launch_skipped, reported_missing_by or [])
        message = _with_hint(message, (hints or {}).get(MISSING))
        case = TestCase("result", classname=classname)
        case.add_error_info(
            message=message, output=clean_text(_log_for(host, rank)), error_type=kind
        )
        props = {"host": host.host, "global_rank": str(rank), "status": kind}
        if host.node_rank is not None:
            props["node_rank"] = str(host.node_rank)
        return TestSuite(name, [case], hostname=host.host, properties=props)

    cases: list[TestCase] = []
    names: set[str] = set()
    for test in result.get("tests") or []:
        test_name = str(test.get("name") or "unnamed")
        names.add(test_name)
        case = TestCase(
            test_name, classname=classname, elapsed_sec=_seconds(test.get("duration_s"))
        )
        details = test.get("details") or {}
        hint = details.get("hint") or (hints or {}).get(
            test_name
        )  # nccl_hints: the controller's fix
        message = clean_text(_with_hint(str(test.get("message") or ""), hint))
        output = clean_text(json.dumps(details, indent=2, sort_keys=True)) if details else None
        status = test.get("status")
        if status == "failed":
            case.add_failure_info(message=message or "failed", output=output)
        elif status == "error":
            case.add_error_info(message=message or "error", output=output)
        elif status == "skipped":
            case.add_skipped_info(message=message or "skipped", output=output)
        elif status != "passed":
            case.add_error_info(
                message=f"unknown test status {status!r}. {message}".strip(), output=output
            )
        cases.append(case)

    status = result.get("status")
    unfinished = status == "running" or not result.get("finished_at")
    launch = host.launch or {}
    ended = launch.get("timed_out") or launch.get("stopped_by")
    if ended and not unfinished and cases and cases[-1].errors:
        # The rank recorded its running test as an error when it was ended (SIGTERM): say why.
        error = cases[-1].errors[-1]
        why = (
            f"nccl_run_timeout ran out{_launch_timeout(launch)}"
            if launch.get("timed_out")
            else f"the run was stopped ({launch['stopped_by']})"
        )
        error["type"] = "hung"
        error["message"] = (
            f"rank {rank} on {host.host} hung in {cases[-1].name}: {why} and its process tree "
            f"was ended. The rank said: {error['message']}"
        )
    if unfinished:
        current = result.get("current_test") or "run"
        hung = bool(ended)
        kind = "hung" if hung else "crashed"
        message = (
            f"rank {rank} on {host.host} {kind} in {current}: its last result was written while "
            f"{current} was running"
            + (f" and nothing came{_launch_timeout(host.launch)}" if hung else "")
            + "."
        )
        # How it died, from torchrun's report (launch.json rank_exits, docs/design.md).
        died = next((e for e in launch.get("rank_exits") or [] if e.get("rank") == rank), None)
        if died and died.get("signal") and not hung:
            message += f" It was {died.get('text')}."
        message = _with_hint(message, (hints or {}).get(MISSING))
        case = TestCase(
            current if current not in names else f"{current} (not finished)", classname=classname
        )
        case.add_error_info(
            message=message, output=clean_text(_log_for(host, rank)), error_type=kind
        )
        cases.append(case)
    elif status in ("failed", "error") and not any(c.is_failure() or c.is_error() for c in cases):
        case = TestCase("run", classname=classname)
        why = result.get("message") or result.get("error") or f"the rank ended with status {status}"
        case.add_error_info(
            message=clean_text(f"rank {rank} on {host.host}: {why}"),
            output=clean_text(_log_for(host, rank)),
        )
        cases.append(case)
    if not cases:
        case = TestCase("run", classname=classname)
        case.add_error_info(
            message=f"rank {rank} on {host.host} reported no test at all (status {status}).",
            output=clean_text(_log_for(host, rank)),
        )
        cases.append(case)
    return TestSuite(
        name,
        cases,
        hostname=host.host,
        timestamp=result.get("started_at"),
        properties=rank_properties(result),
    )


def preflight_suite(host: HostData) -> TestSuite | None:
    """One testsuite per host: a testcase per pre-flight check (+ reachability)."""
    classname = f"preflight.{host_label(host.host)}"
    cases: list[TestCase] = []
    if not host.reachable:
        case = TestCase("host reachable", classname=classname)
        case.add_error_info(
            message=(
                f"{host.host} was unreachable or failed before launch: none of its ranks "
                f"ran. Check `ansible {host.host} -m ansible.builtin.ping` and the play "
                f"output above."
            ),
            error_type="unreachable",
        )
        cases.append(case)
    for item in (host.preflight or {}).get("results") or []:
        message = clean_text(_with_hint(str(item.get("message") or ""), item.get("hint")))
        # What a passed check saw ("fab0 up, mtu 9000") is worth reading too.
        case = TestCase(
            str(item.get("check") or "unnamed"),
            classname=classname,
            stdout=message if item.get("status") == "passed" and message else None,
        )
        status = item.get("status")
        if status == "failed":
            case.add_failure_info(message=message or "failed", output=message or None)
        elif status == "skipped":
            case.add_skipped_info(message=message or "skipped")
        elif status == "error":
            case.add_error_info(message=message or "error", output=message or None)
        elif status != "passed":
            case.add_error_info(message=f"unknown check status {status!r}. {message}".strip())
        cases.append(case)
    if not cases:
        return None
    return TestSuite(f"preflight.{host_label(host.host)}", cases, hostname=host.host)


@dataclass
class SuiteFile:
    path: str  # relative to the run directory, e.g. junit/rank-3.xml
    suite: TestSuite
    kind: str  # "rank" or "preflight"
    host: str
    rank: int | None = None


def build_suites(run: RunData, expect_ranks: bool = True) -> list[SuiteFile]:
    """Every suite of the run: per host the pre-flight suite, then one per rank."""
    launch_skipped = run.plan.get("launch_skipped") or None
    missing_by: dict[int, list[int]] = {}
    for host in run.hosts:
        for rank, result in host.ranks.items():
            for item in result.get("missing_ranks") or []:
                missing_by.setdefault(int(item["rank"]), []).append(rank)
    hints = rank_hints(run)
    files: list[SuiteFile] = []
    for host in run.hosts:
        pre = preflight_suite(host)
        if pre is not None:
            files.append(
                SuiteFile(
                    f"junit/preflight-{safe_name(host.host)}.xml", pre, "preflight", host.host
                )
            )
    for host in run.hosts:
        for rank in host.expected_ranks():
            suite = rank_suite(host, rank, launch_skipped, missing_by.get(rank), hints.get(rank))
            files.append(SuiteFile(f"junit/rank-{rank}.xml", suite, "rank", host.host, rank))
    add_transport_cases(run, files)  # a `transport` testcase per rank (nccl_transport_report)
    files += [SuiteFile(p, s, "pairwise", h) for p, s, h in pairwise_suites(run)]
    files += [SuiteFile(p, s, "bandwidth", h) for p, s, h in expectation_suites(run)]
    if (expect_ranks or run.plan) and not any(f.kind == "rank" for f in files):
        case = TestCase("ranks planned", classname="nccl.run")
        case.add_error_info(
            message=(
                f"run {run.run_id}: no rank was planned or reported (no plan.json and no "
                f"rank result); the launch stage did not run. Run the whole playbook: "
                f"ansible-playbook playbooks/validate.yml"
            ),
            error_type="never started",
        )
        files.append(SuiteFile("junit/run.xml", TestSuite("nccl.run", [case]), "run", ""))
    return files


# --------------------------------------------------------------------------------------------
# XML that jenkins-junit.xsd accepts
# --------------------------------------------------------------------------------------------


def _fmt_time(seconds: float) -> str:
    return f"{max(seconds, 0.0):.3f}"


def _suite_element(suite: TestSuite) -> ET.Element:
    element = suite.build_xml_doc()
    for node in element.iter():
        allowed = _ALLOWED_ATTRS.get(node.tag)
        if allowed is not None:
            for attr in [a for a in node.attrib if a not in allowed]:
                del node.attrib[attr]
        # Whatever a node sent (names, versions, messages, logs) is text without the control
        # characters XML 1.0 forbids; ElementTree escapes the markup.
        for attr, value in node.attrib.items():
            node.attrib[attr] = clean_text(str(value))
        if node.text:
            node.text = clean_text(node.text)
    element.set("time", _fmt_time(sum(c.elapsed_sec or 0.0 for c in suite.test_cases)))
    for case_el in element.iter("testcase"):
        if "time" in case_el.attrib:
            case_el.set("time", _fmt_time(float(case_el.get("time") or 0)))
    return element


def suites_to_xml(suites: list[TestSuite], name: str | None = None) -> str:
    """A <testsuites> document of the given (non-empty) suites."""
    root = ET.Element("testsuites")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    seconds = 0.0
    for suite in suites:
        if not suite.test_cases:
            raise ValueError(f"suite {suite.name} has no testcase; empty suites are not allowed")
        element = _suite_element(suite)
        for key in totals:
            totals[key] += int(element.get(key, "0"))
        seconds += float(element.get("time", "0"))
        root.append(element)
    if name:
        root.set("name", name)
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _fmt_time(seconds))
    raw = ET.tostring(root, encoding="unicode")
    return xml.dom.minidom.parseString(raw).toprettyxml(indent="  ", encoding="UTF-8").decode()


# --------------------------------------------------------------------------------------------
# Summary and verdict
# --------------------------------------------------------------------------------------------


def _counts(suite: TestSuite) -> dict[str, int]:
    return {
        "tests": len(suite.test_cases),
        "failures": sum(1 for c in suite.test_cases if c.is_failure()),
        "errors": sum(1 for c in suite.test_cases if c.is_error()),
        "skipped": sum(
            1
            for c in suite.test_cases
            if c.is_skipped() and not c.is_error() and not c.is_failure()
        ),
    }


def _suite_ok(suite: TestSuite) -> bool:
    counts = _counts(suite)
    return counts["failures"] == 0 and counts["errors"] == 0


def _problems(suite: TestSuite) -> list[str]:
    """One line per failed or erroneous testcase of the suite: every finding, not the first."""
    found = []
    for case in suite.test_cases:
        for info in case.errors + case.failures:
            if info.get("message"):
                first = str(info["message"]).splitlines()[0]
                found.append(f"{case.classname} {case.name}: {first}")
    return found


def bandwidth_table(run: RunData) -> list[dict[str, Any]]:
    """busbw per collective at its largest measured size, over the ranks that measured it."""
    per_test: dict[str, dict[int, list[tuple[int, float]]]] = {}
    for host in run.hosts:
        for rank, result in host.ranks.items():
            for test in result.get("tests") or []:
                for row in test.get("bandwidth") or []:
                    if row.get("busbw_gbps") is None or row.get("size_bytes") is None:
                        continue
                    per_test.setdefault(str(test.get("name")), {}).setdefault(
                        int(row["size_bytes"]), []
                    ).append((rank, float(row.get("rank_busbw_gbps", row["busbw_gbps"]))))
    table = []
    for name in sorted(per_test):
        size = max(per_test[name])
        values = per_test[name][size]
        slowest = min(values, key=lambda item: item[1])
        busbw = [value for _, value in values]
        table.append(
            {
                "collective": name,
                "size_bytes": size,
                "ranks": len(values),
                "busbw_min_gbps": min(busbw),
                "busbw_median_gbps": statistics.median(busbw),
                "busbw_max_gbps": max(busbw),
                "slowest_rank": slowest[0],
            }
        )
    return table


def _human_bytes(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:g} {unit}" if unit == "B" else f"{size:.4g} {unit}"
        size /= 1024  # type: ignore[assignment]
    return str(size)


def predicted_skip_lines(plan: dict[str, Any]) -> list[str]:
    """plan.json's predicted_skips (the support table of nccl_check.py), known before launch."""
    skips = plan.get("predicted_skips") or []
    if not skips:
        return []
    lines = ["", f"Skipped on every rank, as the support table predicts ({plan.get('backend')}):"]
    return lines + [""] + [f"- {s.get('test')}: skipped: {s.get('reason')}" for s in skips]


def summarize(run: RunData, files: list[SuiteFile], check_mode: bool = False) -> dict[str, Any]:
    """Host table, bandwidth table, problems, verdict; and the same as Markdown.

    ``check_mode``: the run was ``ansible-playbook --check`` (only reads on the nodes); the
    summary says so and carries ``check_mode: true``."""
    hosts = []
    problems: list[str] = []
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for item in files:
        for key, value in _counts(item.suite).items():
            totals[key] += value
        problems += _problems(item.suite)
    for host in run.hosts:
        pre = next((f.suite for f in files if f.kind == "preflight" and f.host == host.host), None)
        ranks = [f for f in files if f.kind == "rank" and f.host == host.host]
        if pre is None:
            pre_text = "not run"
        else:
            c = _counts(pre)
            passed = c["tests"] - c["failures"] - c["errors"] - c["skipped"]
            pre_text = (
                f"{passed} passed, {c['failures'] + c['errors']} failed, {c['skipped']} skipped"
            )
        hosts.append(
            {
                "host": host.host,
                "node_rank": host.node_rank,
                "reachable": host.reachable,
                "preflight": pre_text,
                "ranks_passed": sum(1 for f in ranks if _suite_ok(f.suite)),
                "ranks_failed": sum(1 for f in ranks if not _suite_ok(f.suite)),
                "ranks": [f.rank for f in ranks],
            }
        )
    failed = totals["failures"] + totals["errors"] > 0 or not files
    bandwidth = bandwidth_table(run)

    lines = [
        f"# nccl-preflight run {run.run_id}: {'FAILED' if failed else 'PASSED'}"
        + (" (check mode)" if check_mode else ""),
        "",
        *(
            [
                "Check mode (--check): a dry run. Only the read-only checks ran; nothing was "
                "started or written on the nodes and no rank was launched.",
                "",
            ]
            if check_mode
            else []
        ),
        f"world size {run.plan.get('world_size', '?')}, backend {run.plan.get('backend', '?')}, "
        f"master {run.plan.get('master_addr', '?')}:{run.plan.get('master_port', '?')}; "
        f"{totals['tests']} tests, {totals['failures']} failures, {totals['errors']} errors, "
        f"{totals['skipped']} skipped",
        "",
        "| host | node rank | pre-flight | ranks passed | ranks failed |",
        "|---|---|---|---|---|",
    ]
    for row in hosts:
        node_rank = "" if row["node_rank"] is None else row["node_rank"]
        pre = row["preflight"] if row["reachable"] else f"UNREACHABLE; {row['preflight']}"
        lines.append(
            f"| {md_escape(row['host'])} | {node_rank} | {md_escape(pre)} | "
            f"{row['ranks_passed']} | {row['ranks_failed']} |"
        )
    if bandwidth:
        lines += [
            "",
            "Bus bandwidth at the largest size (GB/s, each rank's own time):",
            "",
            "| collective | size | ranks | min | median | max | slowest rank |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in bandwidth:
            lines.append(
                f"| {md_escape(row['collective'])} | {_human_bytes(row['size_bytes'])} | "
                f"{row['ranks']} | "
                f"{row['busbw_min_gbps']:.3f} | {row['busbw_median_gbps']:.3f} | "
                f"{row['busbw_max_gbps']:.3f} | {row['slowest_rank']} |"
            )
    lines += transport_lines(run)
    lines += expectation_markdown(run) + pairwise_markdown(run)
    lines += predicted_skip_lines(run.plan)
    if problems:
        lines += ["", "Problems:", ""] + [f"- {md_escape(p)}" for p in problems]
    return {
        "verdict": "failed" if failed else "passed",
        "check_mode": check_mode,
        "totals": totals,
        "hosts": hosts,
        "bandwidth": bandwidth,
        "problems": problems,
        "transport": analyze_run(run)["hosts"],
        "markdown": "\n".join(lines) + "\n",
    }


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text)


def point_latest(report_root: Path, run_id: str) -> None:
    """reports/latest -> <run-id> (relative), replaced atomically."""
    link = report_root / "latest"
    tmp = report_root / f".latest.{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(run_id, tmp)
    os.replace(tmp, link)


def write_report(
    report_dir: Path, run: RunData, files: list[SuiteFile], summary: dict[str, Any]
) -> list[str]:
    """Write junit/*.xml, junit.xml and summary.md; return the written paths."""
    written = []
    junit_dir = report_dir / "junit"
    if junit_dir.is_dir():
        for old in junit_dir.glob("*.xml"):
            old.unlink()
    for item in files:
        _write_atomic(report_dir / item.path, suites_to_xml([item.suite]))
        written.append(str(report_dir / item.path))
    _write_atomic(
        report_dir / "junit.xml",
        suites_to_xml(
            [f.suite for f in files],
            name=f"nccl-preflight {run.run_id}"
            + (" (check mode)" if summary.get("check_mode") else ""),
        ),
    )
    _write_atomic(report_dir / "summary.md", summary["markdown"])
    written += [str(report_dir / "junit.xml"), str(report_dir / "summary.md")]
    written += write_pairwise(report_dir, run)
    return written
