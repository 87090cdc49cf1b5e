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
  ranks_launched:
    description:
      - Ranks were launched - a run with no rank at all (no C(plan.json), no rank result) gets an
        error testcase saying that nothing was launched. Set false when only pre-flight ran.
      - A C(plan.json) always means ranks were launched.
    type: bool
    default: true
  update_latest:
    description: Point C(<report_root>/latest) at this run.
    type: bool
    default: true
  html:
    description: Write C(report.html) (the playbook passes C(report_html)).
    type: bool
    default: true
  html_template:
    description:
      - The jinja2 template of C(report.html) on the control machine (the playbook passes
        C(report_html_template)). Empty means the project's own, which ships with the code that
        renders it.
    type: path
    default: ""
  verdict_copy:
    description:
      - Also write C(verdict.json) to this path (bin/nccl-preflight reads it to exit with the
        class). Written in check mode too, as it is the answer to the caller, not a change.
    type: path
    default: ""
  textfile_dir:
    description:
      - Also write C(nccl_preflight_run.prom) in this directory, for node_exporter's textfile
        collector - the run's class (C(nccl_preflight_verdict)), busbw per collective and per
        node pair measured, the run's duration and last success time (kept from the file it
        replaces when the run did not pass), replaced atomically. Not in check mode nor for a
        O(run_check_mode) run. Empty means none.
    type: path
    default: ""
  started:
    description:
      - When the run started, unix seconds, for the run's duration in the O(textfile_dir) file;
        0 means unknown (no duration).
    type: float
    default: 0.0
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
console:
  description:
    - "The run's closing summary as plain aligned lines: verdict, hosts, failures with their
      fixes, bus bandwidth, where the report is."
    - "The project's console callback prints them after the play recap."
  returned: always
  type: list
  elements: str
exit_class:
  description: The class of the run, its most severe finding (README.md, "Exit codes").
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

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_preflight.node.payload import guard_payload

# AnsiballZ's payload directory (in the system's temporary directory, not the run's): SIGTERM
# and SIGHUP end this process through the wrapper's cleanup from here on, and main() removes it
# first thing, so that no way out leaves it (node/payload.py).
_LEAVE_NO_PAYLOAD = guard_payload(globals().get("_modlib_path"))

# The core room, as the installed package: this module never leaves the control machine (its
# action plugin, plugins/action/nccl_report.py, builds the report in-process instead).
from nccl_preflight.core.report_run import (  # noqa: F401 - resolve_run_dir: the tests' too
    ARGUMENT_SPEC,
    resolve_run_dir,
    run_report,
)


def main() -> None:
    _LEAVE_NO_PAYLOAD()
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    result = run_report(module.params, module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
