# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Turn the collected files of one run (reports/<run-id>/) into JUnit for Jenkins.

Pure functions on the control machine. The input layout and the rank result JSON are the contracts
in docs/design.md; src/nccl_preflight/core/run_data.py reads them (re-exported here, the module's
interface). build_suites judges every rank into its testcases, once per report
(src/nccl_preflight/core/judged_run.py); write_report renders the judged run's suites, with
summary.md and pairwise.json beside them. JUnit is built with junit-xml and then trimmed to what
the Jenkins xunit schema (jenkins-junit.xsd) accepts: no ``disabled`` or ``skipped`` on
``testsuites``, suite times with at most 3 decimals, no empty suites, no attribute the schema does
not know.
"""

from __future__ import annotations

import json
import os
import xml.dom.minidom
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nccl_preflight.node.files import write_atomically

from .bandwidth_expectation import expectation_suites
from .hints import MISSING, rank_hints
from .pairwise import pairwise_suites, write_pairwise
from .run_data import (  # noqa: F401 - part of this module's interface
    HostData,
    RunData,
    read_run,
    unreachable_check,
)
from .run_stop import INTERRUPTED_TEST, RunStop
from .summary import predicted_skip_lines  # noqa: F401 - part of this module's interface
from .text import (  # noqa: F401 - part of this module's interface
    LOG_TAIL_CHARS,
    LOG_TAIL_LINES,
    clean_text,
    host_label,
    md_escape,
    safe_name,
    tail,
)
from .transport_report import add_transport_cases

if TYPE_CHECKING:
    from .judged_run import JudgedRun

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


# --------------------------------------------------------------------------------------------
# Building suites
# --------------------------------------------------------------------------------------------


def _seconds(value: Any) -> float:
    """A duration from a rank's file; 0.0 when it is not a number (a broken or hostile node)."""
    try:
        return max(float(value or 0.0), 0.0)
    except (TypeError, ValueError):
        return 0.0


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
    host: HostData, rank: int, stopped: str | None, reported_missing_by: list[int]
) -> tuple[str, str]:
    """Why a rank has no result: ("never started" | "hung" | "crashed", message).

    ``stopped``: "the run stopped at <stage>: <cause>" when a stage stopped the run before any
    rank started (stop_text)."""
    where = f"rank {rank} on {host.host}"
    seen = ""
    if reported_missing_by:
        by = ", ".join(str(r) for r in sorted(reported_missing_by))
        seen = f" Rank(s) {by} reported that it never checked in."
    if stopped:
        return "never started", f"{where} never started: {stopped}."
    if not host.reachable:
        return "never started", (
            f"{where} never started: the host was unreachable or failed before launch.{seen}"
        )
    launch = host.launch
    if launch is None:
        return "never started", (
            f"{where} never started: no launch record was collected from {host.host} "
            f"(torchrun did not run there, or the host was lost during the run).{seen}"
        )
    if launch.get("cut_short"):  # slurm/run.py cut_short: the node's step never answered
        return "hung", (
            f"{where} sent no result back: the run was cut short ({launch.get('stopped_by')}) "
            f"before {host.host}'s launch step answered.{seen}"
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


def _missing_rank_suite(
    host: HostData,
    rank: int,
    stopped: str | None,
    reported_missing_by: list[int] | None,
    hints: dict[str, str] | None,
) -> TestSuite:
    """The suite of a rank without a result: one error saying why (classify_missing)."""
    classname = f"nccl.{host_label(host.host)}.rank{rank}"
    kind, message = classify_missing(host, rank, stopped, reported_missing_by or [])
    message = _with_hint(message, (hints or {}).get(MISSING))
    case = TestCase("result", classname=classname)
    case.add_error_info(message=message, output=clean_text(_log_for(host, rank)), error_type=kind)
    props = {"host": host.host, "global_rank": str(rank), "status": kind}
    if host.node_rank is not None:
        props["node_rank"] = str(host.node_rank)
    return TestSuite(classname, [case], hostname=host.host, properties=props)


def _test_case(test: dict[str, Any], classname: str, hints: dict[str, str] | None) -> TestCase:
    """The testcase of one entry of a rank's ``tests``: its status, message, hint and details."""
    test_name = str(test.get("name") or "unnamed")
    case = TestCase(test_name, classname=classname, elapsed_sec=_seconds(test.get("duration_s")))
    details = test.get("details") or {}
    hint = details.get("hint") or (hints or {}).get(test_name)  # nccl_hints: the controller's fix
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
    return case


def _say_why_ended(cases: list[TestCase], host: HostData, rank: int) -> None:
    """The rank recorded its running test as an error when it was ended (SIGTERM): say why."""
    launch = host.launch or {}
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


def _unfinished_case(
    host: HostData,
    rank: int,
    result: dict[str, Any],
    names: set[str],
    hints: dict[str, str] | None,
) -> TestCase:
    """The error of a rank whose last result was written while a test was still running."""
    launch = host.launch or {}
    current = result.get("current_test") or "run"
    hung = bool(launch.get("timed_out") or launch.get("stopped_by"))
    kind = "hung" if hung else "crashed"
    if launch.get("stopped_by") and not launch.get("timed_out"):
        after = f" when the run was stopped ({launch['stopped_by']})"
    else:
        after = f" and nothing came{_launch_timeout(host.launch)}" if hung else ""
    message = (
        f"rank {rank} on {host.host} {kind} in {current}: its last result was written while "
        f"{current} was running{after}."
    )
    # How it died, from torchrun's report (launch.json rank_exits, docs/design.md).
    died = next((e for e in launch.get("rank_exits") or [] if e.get("rank") == rank), None)
    if died and died.get("signal") and not hung:
        message += f" It was {died.get('text')}."
    message = _with_hint(message, (hints or {}).get(MISSING))
    case = TestCase(
        current if current not in names else f"{current} (not finished)",
        classname=f"nccl.{host_label(host.host)}.rank{rank}",
    )
    case.add_error_info(message=message, output=clean_text(_log_for(host, rank)), error_type=kind)
    return case


def _run_error_case(host: HostData, rank: int, message: str) -> TestCase:
    """A ``run`` testcase: the rank as a whole went wrong, with the tail of its log."""
    case = TestCase("run", classname=f"nccl.{host_label(host.host)}.rank{rank}")
    case.add_error_info(message=message, output=clean_text(_log_for(host, rank)))
    return case


def rank_suite(
    host: HostData,
    rank: int,
    stopped: str | None = None,
    reported_missing_by: list[int] | None = None,
    hints: dict[str, str] | None = None,
) -> TestSuite:
    """One testsuite for one rank: a testcase per test, or an error saying why there is none
    (``stopped``: classify_missing)."""
    result = host.ranks.get(rank)
    if result is None:
        return _missing_rank_suite(host, rank, stopped, reported_missing_by, hints)
    classname = f"nccl.{host_label(host.host)}.rank{rank}"
    tests = result.get("tests") or []
    cases = [_test_case(test, classname, hints) for test in tests]
    names = {str(test.get("name") or "unnamed") for test in tests}

    status = result.get("status")
    unfinished = status == "running" or not result.get("finished_at")
    launch = host.launch or {}
    ended = launch.get("timed_out") or launch.get("stopped_by")
    if ended and not unfinished and cases and cases[-1].errors:
        _say_why_ended(cases, host, rank)
    if unfinished:
        cases.append(_unfinished_case(host, rank, result, names, hints))
    elif status in ("failed", "error") and not any(c.is_failure() or c.is_error() for c in cases):
        why = result.get("message") or result.get("error") or f"the rank ended with status {status}"
        cases.append(_run_error_case(host, rank, clean_text(f"rank {rank} on {host.host}: {why}")))
    if not cases:
        message = f"rank {rank} on {host.host} reported no test at all (status {status})."
        cases.append(_run_error_case(host, rank, message))
    return TestSuite(
        classname,
        cases,
        hostname=host.host,
        timestamp=result.get("started_at"),
        properties=rank_properties(result),
    )


def stop_text(stop: RunStop | None) -> str | None:
    """ "the run stopped at <stage>: <cause>" of ``stop`` (src/nccl_preflight/core/run_stop.py),
    or None."""
    return f"the run stopped at {stop.stage}: {stop.cause}" if stop else None


def _of(item: dict[str, Any]) -> str:
    """What a consequence's failure is a consequence of (core/preflight/causes.py)."""
    cause = item.get("cause") or {}
    if not cause or item.get("status") not in ("failed", "error"):
        return ""
    return f" (a consequence of {cause.get('host')}'s failed {cause.get('check')} check)"


def preflight_suite(host: HostData, unreachable_hint: str = "") -> TestSuite | None:
    """One testsuite per host: a testcase per pre-flight check (+ reachability, with
    ``unreachable_hint``: run_data.unreachable_check, the front-end's way to see why)."""
    classname = f"preflight.{host_label(host.host)}"
    cases: list[TestCase] = []
    if not host.reachable:
        case = TestCase("host reachable", classname=classname)
        case.add_error_info(
            message=(
                f"{host.host} was unreachable or failed before launch: none of its ranks "
                f"ran. {unreachable_hint}"
            ),
            error_type="unreachable",
        )
        cases.append(case)
    for item in (host.preflight or {}).get("results") or []:
        what = str(item.get("message") or "") + _of(item)
        message = clean_text(_with_hint(what, item.get("hint")))
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


def build_suites(
    run: RunData,
    *,
    stop: RunStop | None,
    transport: dict[str, Any],
    pairwise: dict[str, Any] | None,
    expectations: dict[str, Any],
    expect_ranks: bool = True,
) -> list[SuiteFile]:
    """Every suite of the run: per host the pre-flight suite, then one per rank (with its
    ``transport`` testcase), the pairwise and the bandwidth suites. The run's other judgements
    come in: ``stop`` (run_stop), ``transport`` (analyze_run), ``pairwise`` (pairwise_document),
    ``expectations`` (bandwidth_expectation.evaluate)."""
    stopped = stop_text(stop)
    missing_by: dict[int, list[int]] = {}
    for host in run.hosts:
        for rank, result in host.ranks.items():
            for item in result.get("missing_ranks") or []:
                missing_by.setdefault(int(item["rank"]), []).append(rank)
    hints = rank_hints(run, stopped=stop is not None)
    files: list[SuiteFile] = []
    for host in run.hosts:
        pre = preflight_suite(host, unreachable_check(run, host.host))
        if pre is not None:
            files.append(
                SuiteFile(
                    f"junit/preflight-{safe_name(host.host)}.xml", pre, "preflight", host.host
                )
            )
    for host in run.hosts:
        for rank in host.expected_ranks():
            suite = rank_suite(host, rank, stopped, missing_by.get(rank), hints.get(rank))
            files.append(SuiteFile(f"junit/rank-{rank}.xml", suite, "rank", host.host, rank))
    add_transport_cases(transport, files)  # a `transport` testcase per rank
    files += [SuiteFile(p, s, "pairwise", h) for p, s, h in pairwise_suites(pairwise)]
    files += [SuiteFile(p, s, "bandwidth", h) for p, s, h in expectation_suites(expectations)]
    run_cases = []
    interrupted = str(run.plan.get("interrupted") or "")
    if interrupted:  # cut short from outside (slurm/run.py cut_short): the run has no verdict
        case = TestCase(INTERRUPTED_TEST, classname="nccl.run")
        case.add_error_info(
            message=f"run {run.run_id} was cut short before it ended: {interrupted}",
            error_type=INTERRUPTED_TEST,
        )
        run_cases.append(case)
    elif (expect_ranks or run.plan) and not any(f.kind == "rank" for f in files):
        case = TestCase("ranks planned", classname="nccl.run")
        case.add_error_info(
            message=(
                f"run {run.run_id}: no rank was planned or reported (no plan.json and no "
                f"rank result); the launch stage did not run. Run the whole playbook: "
                f"ansible-playbook playbooks/validate.yml"
            ),
            error_type="never started",
        )
        run_cases.append(case)
    if run_cases:
        files.append(SuiteFile("junit/run.xml", TestSuite("nccl.run", run_cases), "run", ""))
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


def write_report(report_dir: Path, judged: JudgedRun, markdown: str) -> list[str]:
    """Write the judged run's junit/*.xml, junit.xml, summary.md (``markdown``) and
    pairwise.json; return the written paths."""
    files = judged.suites
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
            name=f"nccl-preflight {judged.run.run_id}"
            + (" (check mode)" if judged.check_mode else ""),
        ),
    )
    _write_atomic(report_dir / "summary.md", markdown)
    written += [str(report_dir / "junit.xml"), str(report_dir / "summary.md")]
    written += write_pairwise(report_dir, judged.pairwise)
    return written
