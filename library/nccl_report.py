#!/usr/bin/python
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Ansible module: build the JUnit and summary of one run from its collected files."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_report
short_description: Build JUnit for Jenkins and a summary from the collected files of one run
description:
  - Runs on the control machine. Reads C(<report_root>/<run_id>/) (C(plan.json),
    C(preflight/<host>.json), C(<host>/rank-<R>.json), C(<host>/rank-<R>.log),
    C(<host>/torchrun.log), C(<host>/launch.json)) and writes C(junit/rank-<R>.xml),
    C(junit/preflight-<host>.xml), the merged C(junit.xml), C(summary.md), C(verdict.json)
    (the exit class of the run) and, with O(html_template), C(report.html); points
    C(<report_root>/latest) at the run.
  - One testsuite per rank (classname C(nccl.<host>.rank<R>), a testcase per collective) and one
    per host for pre-flight (classname C(preflight.<host>), a testcase per check). A rank without
    a result is an error testcase that says whether it crashed, hung or never started, with the
    tail of its log; an unreachable host is an error for that host.
  - Every file validates against the Jenkins xunit schema (jenkins-junit.xsd).
  - The module never fails because tests failed; it returns O(verdict) and the caller decides.
options:
  report_root:
    description: Directory holding one sub-directory per run and the C(latest) link.
    type: path
    required: true
  run_id:
    description:
      - The run to build. Empty or C(latest) means the run C(<report_root>/latest) points at.
    type: str
    default: latest
  fallback_to_latest:
    description:
      - When the directory of O(run_id) does not exist, build the run C(latest) points at
        instead (used when only the report stage runs, with a freshly generated run id).
    type: bool
    default: false
  expect_ranks:
    description:
      - A run with no rank at all (no C(plan.json), no rank result) gets an error testcase
        saying that nothing was launched. Set false when only pre-flight ran.
      - A C(plan.json) always means ranks were expected.
    type: bool
    default: true
  update_latest:
    description: Point C(<report_root>/latest) at this run.
    type: bool
    default: true
  html_template:
    description:
      - The jinja2 template of C(report.html) on the control machine (the report role passes
        C(roles/report/templates/report.html.j2)). Empty means no C(report.html).
    type: path
    default: ""
  verdict_copy:
    description:
      - Also write C(verdict.json) to this path (bin/nccl-preflight reads it to exit with the
        class). Written in check mode too, as it is the answer to the caller, not a change.
    type: path
    default: ""
  run_check_mode:
    description:
      - The run was C(ansible-playbook --check) - only the read-only checks ran. The summary,
        C(verdict.json) and C(report.html) say so, the merged JUnit's name ends with
        C((check mode)) and RV(check_mode) is true.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: In check mode the report is computed and returned but no file is written.
requirements:
  - junit-xml (on the control machine)
  - jinja2 and matplotlib (on the control machine, for report.html)
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Build the JUnit and the summary of this run
  nccl_report:
    report_root: "{{ nccl_report_root }}"
    run_id: "{{ nccl_run_id }}"
  delegate_to: localhost
  run_once: true
  register: report_result

- name: Rebuild the report of the newest run
  nccl_report:
    report_root: reports
    run_id: latest
"""

RETURN = r"""
run_id:
  description: The run that was reported.
  returned: always
  type: str
  sample: 20250101T120000-a1b2c3
report_dir:
  description: Directory of the run on the control machine.
  returned: always
  type: str
  sample: /srv/nccl-preflight/reports/20250101T120000-a1b2c3
junit:
  description: Path of the merged JUnit file.
  returned: always
  type: str
  sample: /srv/nccl-preflight/reports/20250101T120000-a1b2c3/junit.xml
files:
  description: Every file written (empty in check mode).
  returned: always
  type: list
  elements: str
check_mode:
  description: True when O(run_check_mode) marked the report as a check-mode run.
  returned: always
  type: bool
verdict:
  description: C(passed) when every testcase passed or was skipped, else C(failed).
  returned: always
  type: str
  sample: failed
totals:
  description: Counts over all suites.
  returned: always
  type: dict
  sample: {"tests": 40, "failures": 1, "errors": 2, "skipped": 3}
hosts:
  description: Per host, the pre-flight result and how many ranks passed and failed.
  returned: always
  type: list
  elements: dict
  sample: [{"host": "node1", "node_rank": 0, "reachable": true,
            "preflight": "10 passed, 0 failed, 2 skipped", "ranks_passed": 3,
            "ranks_failed": 0, "ranks": [0, 1, 2]}]
bandwidth:
  description: busbw per collective at its largest size, over ranks.
  returned: always
  type: list
  elements: dict
  sample: [{"collective": "all_reduce", "size_bytes": 65536, "ranks": 6,
            "busbw_min_gbps": 0.8, "busbw_median_gbps": 0.9, "busbw_max_gbps": 1.0,
            "slowest_rank": 4, "expected_gbps": 1.125, "percent_of_expected": 80.0,
            "judged_size": true}]
problems:
  description: The first line of every failure and error, with its classname.
  returned: always
  type: list
  elements: str
summary:
  description: The summary as Markdown (also written to summary.md).
  returned: always
  type: str
summary_lines:
  description: The summary split into lines, for display.
  returned: always
  type: list
  elements: str
exit_class:
  description: The class of the run (module_utils/nccl_exit_classes.py), most severe finding.
  returned: always
  type: str
  sample: wrong_data
exit_code:
  description: The exit code of that class (bin/nccl-preflight exits with it).
  returned: always
  type: int
  sample: 7
findings:
  description: Every finding with its class, host, rank, what and fix (as in verdict.json).
  returned: always
  type: list
  elements: dict
html:
  description: Path of report.html, empty when no template was given.
  returned: always
  type: str
"""

import os
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.nccl_junit import (
    JUNIT_XML_IMPORT_ERROR,
    build_suites,
    point_latest,
    read_run,
    summarize,
    write_report,
)
from ansible.module_utils.nccl_verdict import build_verdict, write_verdict


def resolve_run_dir(report_root: Path, run_id: str, fallback_to_latest: bool) -> Path | None:
    """The directory to report on, or None when there is none."""
    latest = report_root / "latest"
    if run_id and run_id != "latest":
        wanted = report_root / run_id
        if wanted.is_dir():
            return wanted
        if not fallback_to_latest:
            return None
    if latest.is_dir():
        return report_root / os.readlink(latest) if latest.is_symlink() else latest
    return None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "report_root": {"type": "path", "required": True},
            "run_id": {"type": "str", "default": "latest"},
            "fallback_to_latest": {"type": "bool", "default": False},
            "expect_ranks": {"type": "bool", "default": True},
            "update_latest": {"type": "bool", "default": True},
            "html_template": {"type": "path", "default": ""},
            "run_check_mode": {"type": "bool", "default": False},
            "verdict_copy": {"type": "path", "default": ""},
        },
        supports_check_mode=True,
    )
    if JUNIT_XML_IMPORT_ERROR is not None:
        module.fail_json(
            msg=missing_required_lib("junit-xml"), exception=str(JUNIT_XML_IMPORT_ERROR)
        )

    report_root = Path(module.params["report_root"])
    run_id = module.params["run_id"] or "latest"
    run_dir = resolve_run_dir(report_root, run_id, module.params["fallback_to_latest"])
    if run_dir is None:
        module.fail_json(
            msg=(
                f"no collected files for run {run_id} under {report_root} on the control machine; "
                f"run the whole playbook (ansible-playbook playbooks/validate.yml) or pass an "
                f"existing run: -e nccl_run_id=<one of the directories in {report_root}>"
            ),
            report_root=str(report_root),
            run_id=run_id,
        )

    run = read_run(run_dir)
    files = build_suites(run, expect_ranks=module.params["expect_ranks"])
    summary = summarize(run, files, check_mode=module.params["run_check_mode"])
    verdict = build_verdict(run, files, summary, check_mode=module.params["run_check_mode"])
    html = ""
    written: list[str] = []
    if not module.check_mode:
        written = write_report(run_dir, run, files, summary)
        written.append(str(write_verdict(run_dir, verdict)))
        if module.params["html_template"]:
            from ansible.module_utils.nccl_html import write_html  # imports matplotlib: only here

            html = str(
                write_html(run_dir, Path(module.params["html_template"]), run, summary, verdict)
            )
            written.append(html)
        if module.params["update_latest"]:
            point_latest(report_root, run_dir.name)
    if module.params["verdict_copy"]:
        write_verdict(Path(module.params["verdict_copy"]), verdict, name="")

    module.exit_json(
        changed=bool(written),
        run_id=run.run_id,
        report_dir=str(run_dir),
        junit=str(run_dir / "junit.xml"),
        files=written,
        verdict=summary["verdict"],
        check_mode=summary["check_mode"],
        totals=summary["totals"],
        hosts=summary["hosts"],
        bandwidth=summary["bandwidth"],
        problems=summary["problems"],
        summary=summary["markdown"],
        summary_lines=summary["markdown"].splitlines(),
        exit_class=verdict["class"],
        exit_code=verdict["exit_code"],
        findings=verdict["findings"],
        html=html,
    )


if __name__ == "__main__":
    main()
