#!/usr/bin/python
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_report_file
short_description: Write one file of the run's report on the control machine
description:
  - Writes O(dest) on the control machine from O(content), or O(data) as indented JSON with sorted
    keys, making the missing parent directories. The write is atomic (a temporary file in the same
    directory, then a rename), so a reader never sees half a file.
  - Runs entirely in its action plugin on the control machine;
    no module is transferred or started, which is what makes it cheaper than
    M(ansible.builtin.file) plus M(ansible.builtin.copy) delegated to localhost.
version_added: "0.1.0"
author:
  - nccl-preflight contributors
options:
  dest:
    description:
      - Path of the file on the control machine.
    type: path
    required: true
  content:
    description:
      - The text of the file. Exactly one of O(content) and O(data).
    type: str
  data:
    description:
      - Any data; written as JSON (indent 4, sorted keys) followed by a newline.
    type: raw
  mode:
    description:
      - Octal mode of the file, as a string.
    type: str
    default: "0644"
  directory_mode:
    description:
      - Octal mode of the parent directories it creates.
    type: str
    default: "0755"
attributes:
  action:
    support: full
  check_mode:
    support: full
    details: Says whether the file would change and writes nothing.
  diff_mode:
    support: none
  delegation:
    support: none
    details: The file is always written on the control machine, whatever the task's host.
"""

EXAMPLES = r"""
- name: Write this host's pre-flight results on the control machine
  ansible.legacy.nccl_report_file:
    dest: "{{ nccl_report_root }}/{{ nccl_run_id }}/preflight/{{ inventory_hostname }}.json"
    data:
      host: "{{ inventory_hostname }}"
      results: "{{ preflight_results }}"
"""

RETURN = r"""
dest:
  description: The file written (or that would be written).
  returned: always
  type: str
  sample: /home/me/nccl-preflight/reports/20261122T010203-abc123/preflight/spark-1.json
"""
