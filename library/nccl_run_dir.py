#!/usr/bin/python
# Copyright (c) nccl-preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_run_dir
short_description: Make a run's private directory on a node and write its small files, in one call
description:
  - Creates O(path) (its parent must exist) with O(mode), owned by the user running the module, and
    writes every entry of O(files) into it atomically (a temporary file in the same directory, then
    a rename).
  - One module call instead of C(ansible.builtin.file) plus one C(ansible.builtin.template) or
    C(ansible.builtin.copy) per file, which cost a stat, a transfer and a module run each.
  - The directory is private; the module refuses a symbolic link at O(path), something that is not
    a directory, or a directory owned by another user (in a shared C(/tmp) somebody else could have
    made it first), and tightens the mode of a directory it finds with a wider one.
version_added: "0.1.0"
author:
  - nccl-preflight contributors
options:
  path:
    description:
      - Absolute path of the directory.
    type: path
    required: true
  mode:
    description:
      - Octal mode of the directory, as a string.
    type: str
    default: "0700"
  files:
    description:
      - Files to write inside O(path).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description:
          - File name inside O(path); no directory part, not C(.) or C(..).
        type: str
        required: true
      content:
        description:
          - The whole text of the file (UTF-8).
        type: str
        required: true
      mode:
        description:
          - Octal mode of the file, as a string.
        type: str
        default: "0600"
attributes:
  check_mode:
    support: full
    details: Reports what it would create or rewrite and changes nothing.
  diff_mode:
    support: none
notes:
  - Removing the directory is left to C(ansible.builtin.file) with C(state=absent).
"""

EXAMPLES = r"""
- name: Create the run directory private to this run and this host, with nccl.env in it
  ansible.legacy.nccl_run_dir:
    path: "/tmp/nccl-preflight-{{ nccl_run_id }}-{{ inventory_hostname }}"
    mode: "0700"
    files:
      - name: nccl.env
        content: "{{ lookup('ansible.builtin.template', 'nccl.env.j2') }}"
        mode: "0600"
"""

RETURN = r"""
path:
  description: The directory.
  returned: always
  type: str
  sample: /tmp/nccl-preflight-20261122T010203-abc123-spark-1
created:
  description: Whether the directory was created by this call.
  returned: always
  type: bool
written:
  description: Paths of the files created or rewritten (content or mode differed).
  returned: always
  type: list
  elements: str
  sample: [/tmp/nccl-preflight-20261122T010203-abc123-spark-1/nccl.env]
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_files import write_atomically
from ansible.module_utils.nccl_run_dir import (
    bad_file_name,
    file_is_current,
    make_private_dir,
    parse_mode,
    private_dir_problem,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "mode": {"type": "str", "default": "0700"},
            "files": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "content": {"type": "str", "required": True},
                    "mode": {"type": "str", "default": "0600"},
                },
            },
        },
        supports_check_mode=True,
    )
    path = module.params["path"]
    dir_mode = parse_mode(module.params["mode"])
    if dir_mode is None:
        module.fail_json(
            msg=f"mode {module.params['mode']!r} is not an octal mode such as 0700",
            path=path,
        )
    files = []
    for entry in module.params["files"]:
        file_mode = parse_mode(entry["mode"])
        if bad_file_name(entry["name"]) or file_mode is None:
            module.fail_json(
                msg=f"files entry {entry['name']!r} (mode {entry['mode']!r}) needs a plain file "
                "name without '/' and an octal mode such as 0600",
                path=path,
            )
        files.append((entry["name"], entry["content"].encode("utf-8"), file_mode))

    problem = private_dir_problem(path)
    if problem:
        module.fail_json(msg=problem, path=path)
    exists = os.path.lexists(path)
    current_mode = stat.S_IMODE(os.lstat(path).st_mode) if exists else None
    written = [
        os.path.join(path, name)
        for name, content, mode in files
        if not exists or not file_is_current(os.path.join(path, name), content, mode)
    ]
    changed = not exists or current_mode != dir_mode or bool(written)
    if module.check_mode:
        module.exit_json(changed=changed, path=path, created=not exists, written=written)

    try:
        make_private_dir(path, dir_mode)
    except FileExistsError:
        module.fail_json(
            msg=f"{path} appeared while this module was making it; rerun with another run id",
            path=path,
        )
    for name, content, mode in files:
        if os.path.join(path, name) in written:
            write_atomically(os.path.join(path, name), content, mode)
    module.exit_json(changed=changed, path=path, created=not exists, written=written)


if __name__ == "__main__":
    main()
