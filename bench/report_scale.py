# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The report step at 128 / 512 / 1,024 nodes x 8 ranks (issue 37: goal <= 10 s and <= 1 GB at
1,024 x 8, a merged junit.xml <= 50 MB at 8,192 ranks, report.html open in <= 3 s).

    .venv/bin/python -m bench.report_scale [--nodes 128,512,1024] [--keep DIR] [--profile N]

A synthetic run directory made from two real runs of the embedded default
(`ansible-playbook playbooks/validate.yml -i inventory/local`: one host, two gloo ranks), recorded
in tests/fixtures/report_scale/: ``passed/`` as it came, ``wrong-rank1/`` with rank 1's
all_reduce corrupted (tests/integration/test_report_lab.py's CORRUPT_SITECUSTOMIZE through
nccl_python). Every rank of N hosts (gpu0001..) x 8 gets the passed run's rank-0.json and its log,
its identity rewritten (host, ranks, world size, the torchrun environment); one rank (local rank 1
of gpu0017) gets the wrong run's rank-1.json instead. Each host gets the passed run's pre-flight
results, launch.json, torchrun.log, nccl.env and progress.json under its own name (the wrong
host: the wrong run's).

Then the report step as the report play calls it (src/nccl_preflight/core/report_run.py
run_report with the role's options and report.html's template) in a fresh Python: the call's wall
and CPU time, the process's peak RSS, the files' sizes, the console's closing summary in lines,
and report.html's open time in headless Chromium (tests/browser.py: navigate to load event).
The machine's 1-minute load average before and after: other engineers share its 2 cores. Writes
bench/report_scale_results.json; BENCHMARKS.md's section is rendered from it
(bench/report_scale_report.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "report_scale"
RESULTS = ROOT / "bench" / "report_scale_results.json"
SIZES = (128, 512, 1024)
PER_NODE = 8
WRONG_NODE = 17  # gpu0017: the healthy hosts are gpu[0001-0016,0018-N]
WRONG_LOCAL = 1  # the real run's corrupted rank
SOURCE_HOST = "localhost"  # the inventory name of the recorded runs' one host
HOST_FILES = ("launch.json", "torchrun.log", "nccl.env", "progress.json")
_RANK_TAG = re.compile(r"\[rank \d+ on [^\]]+\]")


def host_name(index: int) -> str:
    """The name of the host with 1-based ``index``: gpu0001 .. gpu1024."""
    return f"gpu{index:04d}"


@dataclass(frozen=True)
class Source:
    """What a synthetic run is made of: the recorded runs' plan, host files and ranks."""

    plan: dict[str, Any]
    preflight: str  # preflight/localhost.json as text
    host_files: dict[str, str]  # HOST_FILES of the passed run
    wrong_host_files: dict[str, str]  # HOST_FILES of the wrong run
    rank: dict[str, Any]  # the passed run's rank-0.json
    logs: tuple[str, str]  # the passed run's rank-0.log (global rank 0's), rank-1.log (others')
    wrong_rank: dict[str, Any]  # the wrong run's rank-1.json
    wrong_rank_log: str


def read_source(
    passed: Path = FIXTURES / "passed", wrong: Path = FIXTURES / "wrong-rank1"
) -> Source:
    def files(run: Path) -> dict[str, str]:
        host = run / SOURCE_HOST
        return {n: (host / n).read_text() for n in HOST_FILES if (host / n).is_file()}

    ranks = passed / SOURCE_HOST
    return Source(
        plan=json.loads((passed / "plan.json").read_text()),
        preflight=(passed / "preflight" / f"{SOURCE_HOST}.json").read_text(),
        host_files=files(passed),
        wrong_host_files=files(wrong),
        rank=json.loads((ranks / "rank-0.json").read_text()),
        logs=((ranks / "rank-0.log").read_text(), (ranks / "rank-1.log").read_text()),
        wrong_rank=json.loads((wrong / SOURCE_HOST / f"rank-{WRONG_LOCAL}.json").read_text()),
        wrong_rank_log=(wrong / SOURCE_HOST / f"rank-{WRONG_LOCAL}.log").read_text(),
    )


def _address(index: int) -> str:
    return f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}"


def _rank_doc(template: dict[str, Any], host: str, node: int, local: int, nodes: int) -> str:
    """``template`` (a rank-<R>.json) as rank ``local`` of node ``node`` (0-based)."""
    rank = node * PER_NODE + local
    doc = dict(template)
    doc.update(
        host=host,
        global_rank=rank,
        local_rank=local,
        node_rank=node,
        world_size=nodes * PER_NODE,
        local_world_size=PER_NODE,
        pid=10000 + local,
    )
    env = dict(doc.get("env") or {})
    for key, value in (
        ("RANK", rank),
        ("LOCAL_RANK", local),
        ("GROUP_RANK", node),
        ("NODE_RANK", node),
        ("WORLD_SIZE", nodes * PER_NODE),
        ("LOCAL_WORLD_SIZE", PER_NODE),
    ):
        if key in env:
            env[key] = str(value)
    doc["env"] = env
    return json.dumps(doc, indent=1)


def _plan(source: Source, run_id: str, nodes: int) -> dict[str, Any]:
    plan = copy.deepcopy(source.plan)
    row = plan["hosts"][0]
    plan["hosts"] = [
        {
            **row,
            "host": host_name(i + 1),
            "address": _address(i + 1),
            "node_rank": i,
            "nproc_per_node": PER_NODE,
            "rank_offset": i * PER_NODE,
        }
        for i in range(nodes)
    ]
    plan.update(run_id=run_id, world_size=nodes * PER_NODE, master_addr=_address(1))
    return plan


def _launch(text: str, node: int) -> str:
    """launch.json with its rank_exits' ranks moved to ``node``'s."""
    doc = json.loads(text)
    for item in doc.get("rank_exits") or []:
        item["rank"] = node * PER_NODE + int(item.get("local_rank") or 0)
    return json.dumps(doc, indent=1)


def _host(source: Source, run_dir: Path, node: int, nodes: int, wrong: bool) -> None:
    """Host ``node`` (0-based): its pre-flight results, host files and ranks."""
    name = host_name(node + 1)
    host_dir = run_dir / name
    host_dir.mkdir()
    pre = source.preflight.replace(f'"{SOURCE_HOST}', f'"{name}').replace(
        SOURCE_HOST + ":", name + ":"
    )
    (run_dir / "preflight" / f"{name}.json").write_text(pre)
    for file, text in (source.wrong_host_files if wrong else source.host_files).items():
        text = _launch(text, node) if file == "launch.json" else text
        (host_dir / file).write_text(text.replace(SOURCE_HOST, name))
    for local in range(PER_NODE):
        rank = node * PER_NODE + local
        if wrong and local == WRONG_LOCAL:
            template, log = source.wrong_rank, source.wrong_rank_log
        else:
            template, log = source.rank, source.logs[0 if rank == 0 else 1]
        doc = _rank_doc(template, name, node, local, nodes)
        (host_dir / f"rank-{rank}.json").write_text(doc)
        log = _RANK_TAG.sub(f"[rank {rank} on {name}]", log)
        (host_dir / f"rank-{rank}.log").write_text(log)


def synthesize(source: Source, report_root: Path, nodes: int) -> dict[str, Any]:
    """reports/<run-id>/ of ``nodes`` hosts x PER_NODE ranks; -> what it holds."""
    run_id = f"scale-{nodes}x{PER_NODE}"
    run_dir = report_root / run_id
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "preflight").mkdir(parents=True)
    (run_dir / "plan.json").write_text(json.dumps(_plan(source, run_id, nodes), indent=1))
    wrong_node = min(WRONG_NODE, nodes) - 1
    for node in range(nodes):
        _host(source, run_dir, node, nodes, node == wrong_node)
    return {
        "run_id": run_id,
        "run_dir": str(run_dir),
        "nodes": nodes,
        "ranks": nodes * PER_NODE,
        "wrong_host": host_name(wrong_node + 1),
        "wrong_rank": wrong_node * PER_NODE + WRONG_LOCAL,
        "input_bytes": sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file()),
    }


def _children_cpu() -> float:
    """CPU seconds of this process's reaped children: the report step's forked ones
    (src/nccl_preflight/core/forked.py)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def child(params: dict[str, Any]) -> dict[str, Any]:
    """The report step in this (fresh) Python, as the report play's action calls it."""
    started = time.perf_counter()
    from nccl_preflight.core.report_run import run_report

    imported, imported_cpu = time.perf_counter(), time.process_time()
    if params.pop("_profile", False):
        import cProfile
        import pstats

        profile = cProfile.Profile(time.process_time)
        result = profile.runcall(run_report, params, False)
        stats = pstats.Stats(profile, stream=sys.stderr)
        stats.sort_stats(os.environ.get("PROFILE_SORT", "tottime"))
        stats.print_stats(int(os.environ.get("PROFILE_LINES", "45")))
    else:
        result = run_report(params, False)
    return {
        "report_s": time.perf_counter() - imported,
        "report_cpu_s": time.process_time() - imported_cpu,
        "children_cpu_s": _children_cpu(),
        "import_s": imported - started,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "exit_class": result.get("exit_class"),
        "findings": [[f["class"], f["host"], f["rank"], f["test"]] for f in result["findings"]],
        "console": result.get("console"),
    }


def report_params(report_root: Path, run_id: str) -> dict[str, Any]:
    """run_report's options as the report play passes them, for ``run_id`` under
    ``report_root``."""
    return {
        "report_root": str(report_root),
        "run_id": run_id,
        "fallback_to_latest": False,
        "ranks_launched": True,
        "update_latest": True,
        "html": True,
        "run_check_mode": False,
        "verdict_copy": "",
    }


def report_step(report_root: Path, run_id: str, profile: bool = False) -> dict[str, Any]:
    """run_report on ``run_id`` in a fresh Python with the worktree's src first."""
    params = {**report_params(report_root, run_id), "_profile": profile}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "bench.report_scale", "--child", json.dumps(params)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the report step exited {done.returncode}: {done.stderr[-3000:]}")
    if profile:
        print(done.stderr, file=sys.stderr)
    return json.loads(done.stdout.splitlines()[-1])


def floor(run_dir: Path) -> dict[str, float]:
    """The floor, in this (fresh) Python: reading and parsing every rank's JSON, nothing else."""
    cpu, wall = time.process_time(), time.perf_counter()
    for host in os.scandir(run_dir):
        if host.is_dir():
            for entry in os.scandir(host.path):
                if entry.name.startswith("rank-") and entry.name.endswith(".json"):
                    with open(entry.path, encoding="utf-8") as file:
                        json.loads(file.read())
    return {"parse_cpu_s": time.process_time() - cpu, "parse_s": time.perf_counter() - wall}


def parse_floor(run_dir: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.report_scale", "--floor", str(run_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return json.loads(done.stdout)


def file_sizes(run_dir: Path) -> dict[str, Any]:
    junit = [p for p in (run_dir / "junit").glob("*.xml")]
    sizes = {
        name: (run_dir / name).stat().st_size
        for name in ("junit.xml", "report.html", "summary.md", "verdict.json")
        if (run_dir / name).is_file()
    }
    sizes["junit_files"] = len(junit)
    sizes["junit_dir_bytes"] = sum(p.stat().st_size for p in junit)
    sizes["summary_lines"] = len((run_dir / "summary.md").read_text().splitlines())
    return sizes


def open_time(page: Path) -> dict[str, Any]:
    """report.html in headless Chromium: seconds from navigate to the load event."""
    from tests.browser import browser_unavailable_reason, open_page

    reason = browser_unavailable_reason()
    if reason:
        return {"skipped": reason}
    try:
        view = open_page(page, timeout=120)
    except Exception as exc:  # a browser that does not answer on a loaded machine
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"load_s": view.load_s, "errors": view.errors[:5]}


def measure(source: Source, report_root: Path, nodes: int) -> dict[str, Any]:
    load = os.getloadavg()[0]
    made = synthesize(source, report_root, nodes)
    step = report_step(report_root, made["run_id"])
    said = {k: step[k] for k in ("report_s", "report_cpu_s", "peak_rss_mb")}
    print(json.dumps({"nodes": nodes, **said}), file=sys.stderr, flush=True)
    run_dir = Path(made.pop("run_dir"))
    console = step.pop("console") or []
    found = step.pop("findings")
    return {
        **made,
        **step,
        "findings": {
            "count": len(found),
            "where": sorted({f"{h} rank {r}" for _, h, r, _ in found}),
        },
        "console_lines": len(console),
        "console": console,
        "files": file_sizes(run_dir),
        "html": open_time(run_dir / "report.html"),
        "floor": parse_floor(run_dir),
        "load_1min_before": round(load, 2),
        "load_1min_after": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", default=",".join(map(str, SIZES)))
    parser.add_argument("--keep", type=Path, help="write the run directories here and keep them")
    parser.add_argument("--profile", type=int, help="cProfile the report step at this many nodes")
    parser.add_argument("--no-save", action="store_true", help="print, do not write the results")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # report_step's fresh Python
    parser.add_argument("--floor", type=Path, help=argparse.SUPPRESS)  # parse_floor's
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    if args.floor:
        print(json.dumps(floor(args.floor)))
        return 0
    source = read_source()
    where = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-scale-"))
    try:
        if args.profile:
            made = synthesize(source, where, args.profile)
            print(json.dumps(report_step(where, made["run_id"], profile=True), indent=1))
            return 0
        sizes = [int(n) for n in args.nodes.split(",") if n.strip()]
        doc = {
            "measured": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "per_node": PER_NODE,
            "sizes": {},
        }
        for nodes in sizes:
            doc["sizes"][str(nodes)] = measure(source, where, nodes)
            print(json.dumps(doc["sizes"][str(nodes)]), file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(where, ignore_errors=True)
    print(json.dumps(doc, indent=1))
    if not args.no_save:
        kept = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
        doc["before"] = kept.get("before")  # the step before issue 37, measured once
        RESULTS.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
