# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/metrics.py: node_exporter textfiles, read back by a strict reader of
the exposition format (tests/prom_text.py); node-check --textfile end to end; the report build's
textfile_dir on a judged run (busbw per collective and per node pair, the class)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nccl_preflight.core import metrics, report_run
from nccl_preflight.node import files
from tests import prom_text
from tests.builders.bandwidth import MIB
from tests.builders.bandwidth import write_run as bandwidth_run
from tests.builders.node_check import HEALTHY, MISSING_IF, node_check_cmd
from tests.builders.pairwise import healthy, slow_node, write_run
from tests.builders.report import params
from tests.builders.slurm import command as slurm_command
from tests.builders.slurm import refused

HOSTILE = 'gpu"07\\a\nb'  # a quote, a backslash and a line feed: each must be escaped
RESULTS = [
    {"check": "interface", "status": "passed", "message": "fab0 up"},
    {"check": "gpu", "status": "failed", "message": 'gpu "0" lost\\'},
    {"check": "rdma", "status": "skipped", "message": "no RDMA device asked for"},
    {"check": "versions", "status": "error", "message": "torch crashed"},
]


# --------------------------------------------------------------------- the reader itself


@pytest.mark.parametrize(
    "text",
    [
        "nccl_x 1",  # no final line feed
        "nccl-x 1\n",  # a name with a dash
        '# TYPE a gauge\na{b="c"} 1\n# TYPE a gauge\n',  # TYPE twice
        'a{b="c"} 1\n# TYPE a gauge\n',  # TYPE after a sample
        'a{b="c\\t"} 1\n',  # an escape the format does not have
        'a{b="c"} 1\na{b="c"} 2\n',  # one label set twice
        'a{b="c"} 1\nd 1\na{b="e"} 1\n',  # one family in two groups
        "a 1 1700000000000\n",  # a timestamp
        'a{__b="c"} 1\n',  # a reserved label name
        'a{b="c" d="e"} 1\n',  # no comma
        "a one\n",  # not a number
    ],
)
def test_the_reader_refuses_what_the_format_does_not_allow(text: str) -> None:
    with pytest.raises(prom_text.FormatError):
        prom_text.parse(text)


def test_the_reader_takes_the_formats_own_example() -> None:
    text = (
        "# HELP http_requests_total The total number of HTTP requests.\n"
        "# TYPE http_requests_total counter\n"
        'http_requests_total{method="post",code="200"} 1027\n'
        'http_requests_total{method="post",code="400"}    3\n'
        '# A comment\nmsdos_file_access_time_seconds{path="C:\\\\DIR\\\\FILE.TXT",error="Cannot '
        'find file:\\n\\"FILE.TXT\\""} 1.458255915e9\nmetric_without_labels 12.47\n'
    )
    found = prom_text.parse(text)
    assert found["http_requests_total"].value(method="post", code="400") == 3
    error = 'Cannot find file:\n"FILE.TXT"'
    assert found["msdos_file_access_time_seconds"].value(path="C:\\DIR\\FILE.TXT", error=error)


# --------------------------------------------------------------------- the writer


def test_label_values_and_help_are_escaped_as_the_format_says() -> None:
    assert metrics.escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert metrics.escape_help("a\\b\nc") == "a\\\\b\\nc"
    family = metrics.Family("nccl_preflight_x", 'help "quoted" \\ and\nnext')
    family.add(1, node=HOSTILE)
    found = prom_text.parse(metrics.render([family]))
    assert found["nccl_preflight_x"].value(node=HOSTILE) == 1
    assert found["nccl_preflight_x"].help == 'help "quoted" \\ and\nnext'
    assert found["nccl_preflight_x"].type == "gauge"


@pytest.mark.parametrize(
    ("name", "labels"),
    [("nccl_preflight_x-y", {}), ("other_x", {}), ("nccl_preflight_x", {"__n": "a"})],
)
def test_a_name_the_format_or_the_project_refuses_is_never_written(
    name: str, labels: dict[str, str]
) -> None:
    family = metrics.Family(name, "help")
    family.add(1, **labels)
    with pytest.raises(metrics.MetricsError):
        metrics.render([family])


def test_a_label_set_twice_or_a_family_twice_is_refused() -> None:
    family = metrics.Family("nccl_preflight_x", "help")
    family.add(1, a="b")
    family.add(2, a="b")
    with pytest.raises(metrics.MetricsError, match="twice"):
        metrics.render([family])
    one, two = metrics.Family("nccl_preflight_x", "h"), metrics.Family("nccl_preflight_x", "h")
    one.add(1)
    two.add(1)
    with pytest.raises(metrics.MetricsError, match="two families"):
        metrics.render([one, two])


def test_values_are_written_as_the_format_reads_them() -> None:
    assert [metrics.number(v) for v in (1.0, 0, 2.5, 1.5e-05, 2.5e11)] == [
        "1",
        "0",
        "2.5",
        "1.5e-05",
        "250000000000",
    ]
    assert [metrics.number(float(v)) for v in ("nan", "inf", "-inf")] == ["NaN", "+Inf", "-Inf"]


def read(path: Path) -> dict[str, prom_text.Family]:
    return prom_text.parse(path.read_text(encoding="utf-8"))


def test_node_check_metrics_say_each_check_the_verdict_and_skipped_apart(tmp_path: Path) -> None:
    path = metrics.write_node_check(tmp_path, HOSTILE, RESULTS, "failed", 4.25, 1000.0)
    assert path == tmp_path / "nccl_preflight.prom"
    found = read(path)
    assert found["nccl_preflight_check"].by("check") == {"interface": 1, "gpu": 0, "versions": 0}
    assert found["nccl_preflight_check"].value(check="gpu", node=HOSTILE) == 0
    assert found["nccl_preflight_check_skipped"].by("check") == {"rdma": 1}
    verdict = found["nccl_preflight_node_check_verdict"].by("verdict")
    assert verdict == {"healthy": 0, "failed": 1, "unfinished": 0}
    assert found["nccl_preflight_node_check_duration_seconds"].value(node=HOSTILE) == 4.25
    # never healthy yet: no success time at all (not a made-up 0)
    assert "nccl_preflight_node_check_last_success_timestamp_seconds" not in found
    assert 'gpu \\"0\\"' not in path.read_text()  # messages are never labels
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)


def test_a_failing_node_keeps_its_last_success_time(tmp_path: Path) -> None:
    success = "nccl_preflight_node_check_last_success_timestamp_seconds"
    metrics.write_node_check(tmp_path, "n1", RESULTS[:1], "healthy", 1.0, 1000.5)
    assert read(tmp_path / metrics.NODE_FILE)[success].value(node="n1") == 1000.5
    metrics.write_node_check(tmp_path, "n1", RESULTS, "failed", 1.0, 2000.0)
    metrics.write_node_check(tmp_path, "n1", RESULTS, "unfinished", 1.0, 3000.0)
    found = read(tmp_path / metrics.NODE_FILE)
    assert found[success].value(node="n1") == 1000.5
    assert found["nccl_preflight_node_check_verdict"].value(node="n1", verdict="unfinished") == 1
    metrics.write_node_check(tmp_path, "n1", RESULTS[:1], "healthy", 1.0, 4000.0)
    assert read(tmp_path / metrics.NODE_FILE)[success].value(node="n1") == 4000.0


def test_a_check_not_judged_is_neither_passed_nor_failed(tmp_path: Path) -> None:
    path = metrics.write_node_check(
        tmp_path, "n1", RESULTS, "unfinished", 50.0, 1.0, not_judged=["versions"]
    )
    found = read(path)
    assert "versions" not in found["nccl_preflight_check"].by("check")
    assert "versions" not in found["nccl_preflight_check_skipped"].by("check")


def test_the_file_is_replaced_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new file is written beside the old one and renamed over it: when the rename fails
    the old file is there unchanged and no temporary file is left; when it succeeds the file
    is another inode (a reader holding the old one reads it whole)."""
    path = metrics.write_node_check(tmp_path, "n1", RESULTS[:1], "healthy", 1.0, 10.0)
    before, inode = path.read_bytes(), path.stat().st_ino
    seen: list[str] = []

    def failing_replace(source: str, target: str) -> None:
        seen.append(Path(source).read_text())  # the whole new file, beside the old one
        assert Path(source).parent == tmp_path and not source.endswith(".prom")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", failing_replace)
    with pytest.raises(OSError):
        metrics.write_node_check(tmp_path, "n1", RESULTS, "failed", 2.0, 20.0)
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == [metrics.NODE_FILE]
    assert prom_text.parse(seen[0])["nccl_preflight_check"].value(check="gpu", node="n1") == 0
    monkeypatch.undo()
    metrics.write_node_check(tmp_path, "n1", RESULTS, "failed", 2.0, 20.0)
    assert path.stat().st_ino != inode and sorted(os.listdir(tmp_path)) == [metrics.NODE_FILE]


def test_a_previous_file_that_is_not_ours_gives_no_success_time(tmp_path: Path) -> None:
    name = metrics.NODE_SUCCESS
    (tmp_path / metrics.NODE_FILE).write_text(f"{name}_other 5\n{name} junk\n")
    assert metrics.previous_value(tmp_path / metrics.NODE_FILE, name) is None
    (tmp_path / metrics.NODE_FILE).write_text(f'{name}_other 5\n{name}{{node="a b"}} 7.5\n')
    assert metrics.previous_value(tmp_path / metrics.NODE_FILE, name) == 7.5
    assert metrics.previous_value(tmp_path / "absent.prom", name) is None


# --------------------------------------------------------------------- node-check --textfile


def test_node_check_textfile_end_to_end_with_a_hostile_node_name(tmp_path: Path) -> None:
    """node-check --textfile on this machine (the fake torch probe of test_node_check): healthy,
    then the fabric interface gone; the node's name (SLURMD_NODENAME) carries a quote and a
    backslash; the failed run keeps the healthy run's success time."""
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    node = 'n"7\\x'
    done = node_check_cmd(tmp_path, HEALTHY, "--textfile", str(textfile), slurmd=node)
    assert done.returncode == 0, done.stdout + done.stderr
    found = read(textfile / "nccl_preflight.prom")
    checks = found["nccl_preflight_check"].by("check")
    assert checks["interface"] == 1 and set(checks.values()) == {1}
    assert found["nccl_preflight_check"].value(check="interface", node=node) == 1
    assert found["nccl_preflight_node_check_verdict"].value(node=node, verdict="healthy") == 1
    assert 0 < found["nccl_preflight_node_check_duration_seconds"].value(node=node) < 120
    success = found["nccl_preflight_node_check_last_success_timestamp_seconds"].value(node=node)
    done = node_check_cmd(tmp_path, MISSING_IF, "--textfile", str(textfile), slurmd=node)
    assert done.returncode == 1, done.stdout + done.stderr
    found = read(textfile / "nccl_preflight.prom")
    assert found["nccl_preflight_check"].value(check="interface", node=node) == 0
    assert found["nccl_preflight_node_check_verdict"].value(node=node, verdict="failed") == 1
    kept = found["nccl_preflight_node_check_last_success_timestamp_seconds"].value(node=node)
    assert kept == success
    assert sorted(os.listdir(textfile)) == ["nccl_preflight.prom"]


@pytest.mark.parametrize(
    ("where", "said"),
    [("absent", "not a directory"), ("relative", "give an absolute path")],
)
def test_a_textfile_directory_that_cannot_take_the_file_is_refused(
    tmp_path: Path, where: str, said: str
) -> None:
    directory = "textfile" if where == "relative" else str(tmp_path / "absent")
    done = node_check_cmd(tmp_path, HEALTHY, "--textfile", directory)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr and "--textfile" in done.stderr
    assert done.stdout == ""  # refused before anything ran


# --------------------------------------------------------------------- a run's metrics


def test_a_runs_metrics_carry_its_class_busbw_and_pairs(tmp_path: Path) -> None:
    """The pairwise run of test_judged_run (4 nodes, 2 rails, node 2 slow on rail 1): its class
    is 1 and every other 0, busbw per collective and per node pair in bytes per second."""
    run_dir = write_run(tmp_path, 4, 2, slow_node(2, rail=1), second=[(0, 2)])
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    p = {**params(run_dir), "html": False, "textfile_dir": str(textfile), "started": 1.0}
    result = report_run.run_report(p, check_mode=False)
    assert str(textfile / metrics.RUN_FILE) in result["files"]
    found = read(textfile / metrics.RUN_FILE)
    classes = found["nccl_preflight_verdict"].by("class")
    assert classes[result["exit_class"]] == 1 and sum(classes.values()) == 1
    assert set(classes) == {"passed", "no_verdict", "bad_input", "unreachable",
                            "preflight_failed", "wrong_data", "rank_lost", "bandwidth"}  # fmt: skip
    pairs = found["nccl_preflight_pair_busbw_bytes_per_second"]
    slow = pairs.value(node_a="10.0.0.1", node_b="10.0.0.3", rail="1", **{"pass": "1"})
    fast = pairs.value(node_a="10.0.0.1", node_b="10.0.0.2", rail="1", **{"pass": "1"})
    assert (slow, fast) == (2.5e9, 10e9)
    assert found["nccl_preflight_run_duration_seconds"].value() > 1e9  # since unix time 1
    assert "nccl_preflight_run_last_success_timestamp_seconds" not in found  # not passed


def test_busbw_per_collective_is_the_median_in_bytes_per_second_at_its_largest_size(
    tmp_path: Path,
) -> None:
    """Two ranks whose own all_reduce busbw is 0.9 and 0.5 GB/s at 64 MiB (0.1 at 1 MiB): the
    summary's median, 0.7 GB/s, is 7e8 bytes per second, labelled with the size."""
    run_dir = bandwidth_run(tmp_path, "r1", {"all_reduce": {MIB: 0.1, 64 * MIB: 0.5}})
    for node, own in ((0, 0.9), (1, 0.5)):
        path = run_dir / f"10.0.0.{node + 1}" / f"rank-{node}.json"
        doc = json.loads(path.read_text())
        doc["tests"][0]["bandwidth"][-1]["rank_busbw_gbps"] = own
        path.write_text(json.dumps(doc))
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    p = {**params(run_dir), "html": False, "textfile_dir": str(textfile)}
    result = report_run.run_report(p, check_mode=False)
    found = read(textfile / metrics.RUN_FILE)
    busbw = found["nccl_preflight_busbw_bytes_per_second"]
    size = str(64 * MIB)
    assert busbw.samples == {frozenset({("collective", "all_reduce"), ("size_bytes", size)}): 7e8}
    assert [r["busbw_median_gbps"] for r in result["bandwidth"]] == [pytest.approx(0.7)]


def test_a_passed_run_sets_its_success_time_a_failed_one_keeps_it(tmp_path: Path) -> None:
    good = write_run(tmp_path / "good", 2, 1, healthy(), second=[])
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    p = {**params(good), "html": False, "textfile_dir": str(textfile)}
    result = report_run.run_report(p, check_mode=False)
    assert result["exit_class"] == "passed", result["problems"]
    found = read(textfile / metrics.RUN_FILE)
    success = found[metrics.RUN_SUCCESS].value()
    assert found["nccl_preflight_verdict"].value(**{"class": "passed"}) == 1
    assert "nccl_preflight_run_duration_seconds" not in found  # no start time given
    bad = write_run(tmp_path / "bad", 4, 2, slow_node(2, rail=1), second=[(0, 2)])
    report_run.run_report({**params(bad), "html": False, "textfile_dir": str(textfile)}, False)
    found = read(textfile / metrics.RUN_FILE)
    assert found[metrics.RUN_SUCCESS].value() == success
    assert found["nccl_preflight_verdict"].value(**{"class": "passed"}) == 0


def test_a_check_mode_run_writes_no_metrics_and_a_bad_directory_is_a_warning(
    tmp_path: Path,
) -> None:
    run_dir = write_run(tmp_path, 2, 1, healthy(), second=[])
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    p = {**params(run_dir), "html": False, "textfile_dir": str(textfile)}
    report_run.run_report({**p, "run_check_mode": True}, check_mode=False)
    assert os.listdir(textfile) == []
    result = report_run.run_report({**p, "textfile_dir": str(tmp_path / "absent")}, False)
    assert "the run's metrics were not written" in result["warnings"][0]
    assert result["exit_class"] == "passed"  # the report stands


@pytest.mark.parametrize("given", ["option", "config"])
def test_slurm_refuses_a_metrics_directory_it_cannot_write_before_anything_runs(
    tmp_path: Path, given: str
) -> None:
    """--textfile DIR (or the config's nccl_report_textfile_dir) that is not a directory: exit
    12 (bad_input), one line naming the option or the variable, no allocation asked for."""
    absent = str(tmp_path / "absent")
    if given == "option":
        done = slurm_command(tmp_path, "-N", "2", "--textfile", absent)
        assert refused(done) == f"nccl-preflight slurm: --textfile {absent}: not a directory " \
            "(node_exporter's textfile directory)"  # fmt: skip
    else:
        done = slurm_command(tmp_path, "-N", "2", nccl_report_textfile_dir=absent)
        # checked with every variable (core/inputs.py), as validate_inputs does on the Ansible path
        said = refused(done)
        assert f"nccl.yml:3: nccl_report_textfile_dir: '{absent}' not a directory" in said, said
    assert not (tmp_path / "r").exists()


def test_prometheus_clients_own_parser_reads_both_files_as_ours_does(tmp_path: Path) -> None:
    """Prometheus' Python client (requirements-dev.txt) reads the node's file, hostile node name
    included, and the run's file with pairs: the same samples, labels and values as ours."""
    parser = pytest.importorskip("prometheus_client.parser")
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    node = 'n"7\\x'
    done = node_check_cmd(tmp_path, HEALTHY, "--textfile", str(textfile), slurmd=node)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = write_run(tmp_path / "run", 4, 2, slow_node(2, rail=1), second=[(0, 2)])
    p = {**params(run_dir), "html": False, "textfile_dir": str(textfile), "started": 1.0}
    report_run.run_report(p, check_mode=False)
    for name in ("nccl_preflight.prom", metrics.RUN_FILE):
        text = (textfile / name).read_text(encoding="utf-8")
        ours = {
            (family, labels, value)
            for family, found in prom_text.parse(text).items()
            for labels, value in found.samples.items()
        }
        theirs = {
            (s.name, frozenset(s.labels.items()), s.value)
            for f in parser.text_string_to_metric_families(text)
            for s in f.samples
        }
        assert theirs == ours and len(ours) > 3, name
    nodes = {dict(labels).get("node") for _, labels, _ in theirs | ours if "node" in dict(labels)}
    assert nodes <= {node}
