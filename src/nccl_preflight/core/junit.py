# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Turn the collected files of one run (reports/<run-id>/) into JUnit for Jenkins.

Pure functions on the control machine. The input layout and the rank result JSON are the contracts
in docs/design.md; src/nccl_preflight/core/run_data.py reads them (re-exported here, the module's
interface). build_suites judges every rank into its testcases, once per report
(src/nccl_preflight/core/judged_run.py); write_report renders the judged run's suites, with
summary.md and pairwise.json beside them. The JUnit model and its XML (what the Jenkins xunit
schema accepts) are src/nccl_preflight/core/junit_cases.py's.

Scale (issue 37): every suite's XML is written once per file as text, no document tree; the
merged junit.xml holds every testcase with its failure or error in full, but a passed or skipped
testcase carries no system-out; junit/<file>.xml keeps it, and a rank's file names the rank's
own result and log in the run directory (SuiteFile.files) instead of copying its bandwidth rows.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nccl_preflight.node.files import write_atomically

from .bandwidth_expectation import expectation_suites
from .findings import (
    ERROR,
    FAILED,
    PASSED,
    SKIPPED,
    Case,
    Suite,
    SuiteFile,
    finding_id,
)
from .hints import MISSING, rank_hints
from .junit_cases import CASE_PAD, attr, suite_forms, testsuites
from .pairwise import pairwise_suites, write_pairwise
from .run_data import (  # noqa: F401 - part of this module's interface
    HostData,
    RunData,
    read_run,
    unreachable_check,
)
from .run_stop import INTERRUPTED_TEST, UNREACHABLE_CHECK, RunStop
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
    from .findings import JudgedRun

# --------------------------------------------------------------------------------------------
# Building suites
# --------------------------------------------------------------------------------------------


def _seconds(value: Any) -> float:
    """A duration from a rank's file; 0.0 when it is not a number (a broken or hostile node)."""
    try:
        return max(float(value or 0.0), 0.0)
    except (TypeError, ValueError):
        return 0.0


_IDENTITY = (
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
)


def rank_properties(result: dict[str, Any]) -> dict[str, str]:
    """Suite properties of one rank, in junit.xml and junit/rank-<R>.xml: identity, versions."""
    props = {key: str(result[key]) for key in _IDENTITY if result.get(key) is not None}
    for key, value in sorted((result.get("versions") or {}).items()):
        props[f"version.{key}"] = "" if value is None else str(value)
    return props


RESULT_FILE, LOG_FILE = "file.result", "file.log"  # a rank's own files, in junit/rank-<R>.xml


def rank_files(host: HostData, rank: int) -> tuple[tuple[str, str], ...]:
    """A rank's own files in the run directory, as junit/rank-<R>.xml names them (SuiteFile.files):
    ``file.result`` (<host>/rank-<R>.json: every test's details and every bandwidth row the rank
    measured) and ``file.log`` (<host>/rank-<R>.log), each where it was collected. The rows are
    not copied into the XML (issue 37: 77 a rank, 17 KB a file and most of the report step's
    time at 8,192 ranks)."""
    files = []
    if rank in host.ranks or rank in host.unreadable:
        files.append((RESULT_FILE, f"{host.host}/rank-{rank}.json"))
    if rank in host.rank_logs:
        files.append((LOG_FILE, f"{host.host}/rank-{rank}.log"))
    return tuple(files)


def rank_file_xml(files: tuple[tuple[str, str], ...]) -> str:
    """The <property> lines of a rank's own files (rank_files), for junit/rank-<R>.xml."""
    return "".join(
        f'{CASE_PAD}<property name="{name}" value="{attr(value)}"/>\n' for name, value in files
    )


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
) -> Suite:
    """The suite of a rank without a result: one error saying why (classify_missing)."""
    classname = f"nccl.{host_label(host.host)}.rank{rank}"
    kind, message = classify_missing(host, rank, stopped, reported_missing_by or [])
    fix = (hints or {}).get(MISSING) or ""
    case = Case("result", classname).error(message, clean_text(_log_for(host, rank)), kind, fix)
    props = {"host": host.host, "global_rank": str(rank), "status": kind}
    if host.node_rank is not None:
        props["node_rank"] = str(host.node_rank)
    return Suite(classname, [case], hostname=host.host, properties=props)


def _test_case(test: dict[str, Any], classname: str, hints: dict[str, str] | None) -> Case:
    """The testcase of one entry of a rank's ``tests``: its status, message, hint and details."""
    test_name = str(test.get("name") or "unnamed")
    took = test.get("duration_s")
    # A positive float as the rank script writes it (8,192 ranks x 23 tests), else _seconds.
    case = Case(
        test_name, classname, took if took.__class__ is float and took > 0 else _seconds(took)
    )
    status = test.get("status")
    if status == PASSED:
        return case
    details = test.get("details") or {}
    hint = details.get("hint") or (hints or {}).get(test_name)  # nccl_hints: the controller's fix
    fix = clean_text(str(hint)) if hint else ""
    message = clean_text(str(test.get("message") or ""))
    output = clean_text(json.dumps(details, indent=2, sort_keys=True)) if details else None
    if status == FAILED:
        return case.fail(_or(message, fix, "failed"), output, fix=fix)
    if status == ERROR:
        return case.error(_or(message, fix, "error"), output, fix=fix)
    if status == SKIPPED:
        return case.skip(_or(message, fix, "skipped"), output, fix=fix)
    return case.error(f"unknown test status {status!r}. {message}".strip(), output, fix=fix)


def _or(message: str, fix: str, default: str) -> str:
    """A testcase's message: ``default`` when it has neither a message nor a fix."""
    return message or ("" if fix else default)


def _say_why_ended(cases: list[Case], host: HostData, rank: int) -> None:
    """The rank recorded its running test as an error when it was ended (SIGTERM): say why."""
    launch = host.launch or {}
    case = cases[-1]
    why = (
        f"nccl_run_timeout ran out{_launch_timeout(launch)}"
        if launch.get("timed_out")
        else f"the run was stopped ({launch['stopped_by']})"
    )
    case.kind = "hung"
    case.message = (
        f"rank {rank} on {host.host} hung in {case.name}: {why} and its process tree "
        f"was ended. The rank said: {case.message}"
    )


def _unfinished_case(
    host: HostData,
    rank: int,
    result: dict[str, Any],
    names: set[str],
    hints: dict[str, str] | None,
) -> Case:
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
    fix = (hints or {}).get(MISSING) or ""
    name = current if current not in names else f"{current} (not finished)"
    case = Case(name, f"nccl.{host_label(host.host)}.rank{rank}")
    return case.error(message, clean_text(_log_for(host, rank)), kind, fix)


def _run_error_case(host: HostData, rank: int, message: str) -> Case:
    """A ``run`` testcase: the rank as a whole went wrong, with the tail of its log."""
    case = Case("run", f"nccl.{host_label(host.host)}.rank{rank}")
    return case.error(message, clean_text(_log_for(host, rank)))


def rank_suite(
    host: HostData,
    rank: int,
    stopped: str | None = None,
    reported_missing_by: list[int] | None = None,
    hints: dict[str, str] | None = None,
) -> Suite:
    """One testsuite for one rank: a testcase per test, or an error saying why there is none
    (``stopped``: classify_missing)."""
    result = host.ranks.get(rank)
    if result is None:
        return _missing_rank_suite(host, rank, stopped, reported_missing_by, hints)
    classname = f"nccl.{host_label(host.host)}.rank{rank}"
    tests = result.get("tests") or []
    cases = []
    for test in tests:
        # A passed test as the rank script writes it (8,192 ranks x 23 tests): its name and a
        # positive float duration, nothing else to judge; any other through _test_case.
        name, took = test.get("name"), test.get("duration_s")
        if (
            test.get("status") == PASSED
            and name.__class__ is str
            and name
            and took.__class__ is float
            and took > 0
        ):
            cases.append(Case(name, classname, took))
        else:
            cases.append(_test_case(test, classname, hints))

    status = result.get("status")
    unfinished = status == "running" or not result.get("finished_at")
    launch = host.launch or {}
    ended = launch.get("timed_out") or launch.get("stopped_by")
    if ended and not unfinished and cases and cases[-1].status == ERROR:
        _say_why_ended(cases, host, rank)
    if unfinished:
        names = {str(test.get("name") or "unnamed") for test in tests}
        cases.append(_unfinished_case(host, rank, result, names, hints))
    elif status in (FAILED, ERROR) and not any(c.bad for c in cases):
        why = result.get("message") or result.get("error") or f"the rank ended with status {status}"
        cases.append(_run_error_case(host, rank, clean_text(f"rank {rank} on {host.host}: {why}")))
    if not cases:
        message = f"rank {rank} on {host.host} reported no test at all (status {status})."
        cases.append(_run_error_case(host, rank, message))
    return Suite(
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


def _check_case(item: dict[str, Any], host: str, classname: str) -> Case:
    """The testcase of one pre-flight check result (a failure or error gives the finding
    ``host/check``: verdict.findings)."""
    what = clean_text(str(item.get("message") or "") + _of(item))
    fix = clean_text(str(item.get("hint") or ""))
    said = f"{what} Hint: {fix}" if what and fix else what or (f"Hint: {fix}" if fix else "")
    status = item.get("status")
    name = str(item.get("check") or "unnamed")
    # What a passed check saw ("fab0 up, mtu 9000") is worth reading too (junit/ keeps it); a
    # failure's text repeats its message and fix.
    case = Case(name, classname, stdout=said if status == PASSED and said else None)
    if status == FAILED:
        case.fail(_or(what, fix, "failed"), said or None, fix=fix)
    elif status == SKIPPED:
        return case.skip(_or(what, fix, "skipped"), fix=fix)
    elif status == ERROR:
        case.error(_or(what, fix, "error"), said or None, fix=fix)
    elif status != PASSED:
        case.error(f"unknown check status {status!r}. {what}".strip(), fix=fix)
    if case.bad:
        case.finding = finding_id(host, name)
    return case


def preflight_suite(host: HostData, unreachable_hint: str = "") -> Suite | None:
    """One testsuite per host: a testcase per pre-flight check (+ reachability, with
    ``unreachable_hint``: run_data.unreachable_check, the front-end's way to see why)."""
    classname = f"preflight.{host_label(host.host)}"
    cases: list[Case] = []
    if not host.reachable:
        message = (
            f"{host.host} was unreachable or failed before launch: none of its ranks "
            f"ran. {unreachable_hint}"
        )
        case = Case(UNREACHABLE_CHECK, classname).error(message, kind="unreachable")
        case.finding = finding_id(host.host, UNREACHABLE_CHECK)
        cases.append(case)
    results = (host.preflight or {}).get("results") or []
    cases += [_check_case(item, host.host, classname) for item in results]
    if not cases:
        return None
    return Suite(classname, cases, hostname=host.host)


def build_suites(
    run: RunData,
    *,
    stop: RunStop | None,
    transport: dict[str, Any],
    pairwise: dict[str, Any] | None,
    expectations: dict[str, Any],
    ranks_launched: bool = True,
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
            path = f"junit/rank-{rank}.xml"
            files.append(SuiteFile(path, suite, "rank", host.host, rank, rank_files(host, rank)))
    add_transport_cases(transport, files)  # a `transport` testcase per rank
    files += [SuiteFile(p, s, "pairwise", h) for p, s, h in pairwise_suites(pairwise)]
    files += [SuiteFile(p, s, "bandwidth", h) for p, s, h in expectation_suites(expectations)]
    run_cases = []
    interrupted = str(run.plan.get("interrupted") or "")
    if interrupted:  # cut short from outside (slurm/run.py cut_short): the run has no verdict
        message = f"run {run.run_id} was cut short before it ended: {interrupted}"
        run_cases.append(Case(INTERRUPTED_TEST, "nccl.run").error(message, kind=INTERRUPTED_TEST))
    elif (ranks_launched or run.plan) and not any(f.kind == "rank" for f in files):
        message = (
            f"run {run.run_id}: no rank was planned or reported (no plan.json and no "
            f"rank result); the launch stage did not run. Run the whole playbook: "
            f"ansible-playbook playbooks/validate.yml"
        )
        run_cases.append(Case("ranks planned", "nccl.run").error(message, kind="never started"))
    if run_cases:
        files.append(SuiteFile("junit/run.xml", Suite("nccl.run", run_cases), "run", ""))
    return files


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


def _write_new(path: str | Path, text: str) -> None:
    """A new file (in a directory of this process's own), three system calls."""
    data = memoryview(text.encode("utf-8"))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def _swap_in(new: Path, junit_dir: Path) -> None:
    """``new`` becomes ``junit_dir``, the old one removed: junit/ holds this report's files
    only, never some of the last one's."""
    old = junit_dir.with_name(f".junit.old.{os.getpid()}")
    if junit_dir.is_dir():
        os.rename(junit_dir, old)
    os.rename(new, junit_dir)
    shutil.rmtree(old, ignore_errors=True)


def write_report(report_dir: Path, judged: JudgedRun, markdown: str) -> list[str]:
    """Write the judged run's junit/*.xml (each suite in full, a rank's naming its own files:
    SuiteFile.files; into a new directory put in place of junit/ when every file is written),
    junit.xml (every suite, lean: junit_cases), summary.md (``markdown``) and pairwise.json;
    return the written paths."""
    written = []
    new = report_dir / f".junit.new.{os.getpid()}"
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir(parents=True)
    lean: list[str] = []
    totals = {"tests": 0, "failures": 0, "errors": 0}
    seconds = 0.0
    into, here = str(new), str(report_dir)  # 9,216 files: strings, not Path objects
    for item in judged.suites:
        suite = item.suite
        named = rank_file_xml(item.files) if item.files else ""
        counts = suite.counts()
        took = suite.seconds
        full, short = suite_forms(suite, named, counts, took)
        mine = {key: counts[key] for key in totals}
        name = os.path.join(into, os.path.basename(item.path))
        _write_new(name, testsuites([full], mine, took))
        written.append(os.path.join(here, item.path))
        lean.append(short)
        for key, value in mine.items():
            totals[key] += value
        seconds += round(took, 3)
    _swap_in(new, report_dir / "junit")
    name = f"nccl-preflight {judged.run.run_id}" + (" (check mode)" if judged.check_mode else "")
    _write_atomic(report_dir / "junit.xml", testsuites(lean, totals, seconds, name))
    _write_atomic(report_dir / "summary.md", markdown)
    written += [str(report_dir / "junit.xml"), str(report_dir / "summary.md")]
    written += write_pairwise(report_dir, judged.pairwise)
    return written
