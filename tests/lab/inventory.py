# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What Ansible sees of the lab: the hostfile inventory with its group_vars, the hosts' /etc/hosts
text, and ansible-playbook run against that inventory (a mixin of tests/lab/harness.py's Lab)."""

from __future__ import annotations

import json
import os
import subprocess

from tests.playbook_run import ansible_playbook


class LabInventory:
    """The inventory of a Lab and ansible-playbook over it."""

    def default_hosts_text(self) -> str:
        """The lab's /etc/hosts for every host: hostnames -> fabric addresses."""
        lines = [
            "127.0.0.1\tlocalhost",  # no ::1: IPv6 is off inside the lab
            f"# nccl-preflight lab {self.name}: hostnames resolve to fabric addresses",
        ]
        lines += [f"{h.fabric_addr}\t{h.hostname}" for h in self.hosts]
        lines += [f"{h.mgmt_addr}\t{h.hostname}-mgmt" for h in self.hosts]
        return "\n".join(lines) + "\n"

    def _write_inventory(self) -> None:
        inv = self.inventory_dir
        (inv / "group_vars").mkdir(parents=True)
        slots = f" slots={self.slots}" if self.slots is not None else ""
        (inv / "hostfile").write_text("".join(f"{h.mgmt_addr}{slots}\n" for h in self.hosts))
        common = " ".join(self.ssh_options())
        values = {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.ssh_key),
            "ansible_ssh_common_args": common,
            # Lab hosts get fresh host keys with every lab: checking is off for this inventory only.
            "ansible_host_key_checking": False,
            "ansible_python_interpreter": self.python,
            "nccl_fabric_cidr": self.fabric_cidr,
            # The lab has no GPU: its runs are CPU runs on gloo, said so explicitly (under the
            # defaults, nccl_backend auto and nccl_require_gpu true, a GPU-less node fails).
            "nccl_backend": "gloo",
            "nccl_require_gpu": False,
        }
        body = "".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items())
        (inv / "group_vars" / "all.yml").write_text(
            f"---\n# Written by tests/lab for lab {self.name}; removed by "
            f"`python -m tests.lab down --name {self.name}`.\n"
            "# The lab has no GPU: a CPU run on gloo (nccl_require_gpu: false, said so).\n"
            f"{body}"
        )

    def ansible_playbook(
        self,
        playbook: str | os.PathLike[str],
        *args: str,
        env: dict[str, str] | None = None,
        timeout: float = 900,
        capture: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """ansible-playbook -i <inventory_dir> <playbook> *args, from the project root.

        Does not raise on a non-zero exit: the caller asserts on returncode/stdout.
        capture=False lets the output through to the terminal (stdout/stderr are then None).
        """
        return ansible_playbook(
            "-i",
            str(self.inventory_dir),
            str(playbook),
            *args,
            timeout=timeout,
            env=env,
            capture=capture,
        )
