#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Name the processes listening on a TCP port (reads /proc only)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_port_owner
short_description: Tell whether a TCP port is free and name the process that holds it
description:
  - Reads C(/proc/net/tcp) and C(/proc/net/tcp6) of the host's network namespace for sockets in
    LISTEN state on O(port), then C(/proc/<pid>/fd) to find the processes owning them.
  - Processes of other users are only visible to root; their sockets are still reported, with
    C(pid) null.
  - The pre-flight does the same look-up inside M(nccl_preflight_listen) (O(check_port)); this
    module is for a look by hand.
version_added: "0.1.0"
options:
  port:
    description: The TCP port to look at.
    type: int
    required: true
attributes:
  check_mode:
    support: full
    details: Only reads /proc.
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Look for a process already holding MASTER_PORT
  nccl_port_owner:
    port: 29500
  register: owner
"""

RETURN = r"""
free:
  description: True when nothing listens on the port.
  returned: always
  type: bool
  sample: false
listeners:
  description: The listening sockets on the port and their owners.
  returned: always
  type: list
  elements: dict
  sample:
    - address: 0.0.0.0
      port: 29500
      inode: 33531
      uid: 0
      pid: 4242
      comm: python3
      cmdline: python3 -m http.server 29500
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_preflight_proc import port_owner


def main() -> None:
    module = AnsibleModule(
        argument_spec={"port": {"type": "int", "required": True}},
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **port_owner(module.params["port"]))


if __name__ == "__main__":
    main()
