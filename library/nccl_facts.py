#!/usr/bin/python
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_facts
short_description: Gather what a node needs for torch.distributed - interfaces, routes, GPUs, torch
description:
  - Reads the node's network interfaces (state, MTU, speed, IPv4/IPv6 addresses, kind, RDMA devices
    under each), the interface and source address it would use to reach O(route_to), its hostname
    and what that resolves to, the local port range, its GPUs from C(nvidia-smi), and - through
    O(python) - the torch, CUDA, NCCL and torch_npu versions and device counts.
  - Returns everything under C(ansible_facts.nccl). Only reads; changes nothing on the node, as
    every C(*_facts) module. The pre-flight's listeners and torch probe are started by
    M(nccl_preflight_start), the run's warden by its action.
  - A missing tool (C(ip), C(nvidia-smi), torch) gives empty values plus a reason string, never
    a failure, so a play can decide what is fatal.
version_added: "0.1.0"
author:
  - nccl-preflight contributors
options:
  route_to:
    description:
      - An address (or a name, resolved on the node) to run C(ip -j route get) for, usually the
        master's address. The result is in C(nccl.route).
      - When empty, C(nccl.route) is empty and C(nccl.route_reason) says so.
    type: str
    default: ""
  python:
    description:
      - Path of the Python interpreter on the node that will run torch.
      - When empty, the interpreter running this module is used.
    type: str
    default: ""
  query_python:
    description:
      - Run O(python) with a short inline script to read torch, CUDA, NCCL and torch_npu versions.
    type: bool
    default: true
  nvidia_smi:
    description:
      - Name (looked up on PATH) or path of C(nvidia-smi).
    type: str
    default: nvidia-smi
  query_gpus:
    description:
      - Query GPUs with C(nvidia-smi
        --query-gpu=index,name,driver_version,memory.total,uuid,pci.bus_id
        --format=csv,noheader,nounits).
    type: bool
    default: true
  gpu_health:
    description:
      - When GPUs were found, also read their health into C(nccl.gpu_health) -
        C(nvidia-smi -q), C(nvidia-smi topo -m),
        C(nvidia-smi nvlink -s), Xid events of the kernel log, the Fabric Manager service.
    type: bool
    default: true
  dcgm_diag_level:
    description:
      - When above 0 and C(dcgmi) exists, run C(dcgmi diag -r <level> -j) (1 takes seconds,
        2 minutes, 3 and 4 far longer); 0 runs nothing.
    type: int
    default: 0
  dcgm_diag_timeout:
    description:
      - Seconds after which C(dcgmi diag) is killed (its result then says it timed out).
    type: int
    default: 300
  npu_smi:
    description:
      - Name (looked up on PATH) or path of Ascend's C(npu-smi); C(npu-smi info) fills
        C(nccl.accelerators.npus).
    type: str
    default: npu-smi
  query_xpu:
    description:
      - Ask the node's torch (O(python)) for Intel XPUs (C(torch.xpu)) and the torch_npu version,
        into C(nccl.accelerators). Imports torch (seconds); the playbook sets it for
        C(nccl_backend=auto). Asked only on hosts without NVIDIA GPUs or Ascend NPUs whose PCI
        bus has an Intel device of the display class (vendor 0x8086, class 0x03), or whose PCI
        bus cannot be read; elsewhere C(xpus_reason) says it was not asked.
    type: bool
    default: false
extends_documentation_fragment:
  - nccl_program
attributes:
  check_mode:
    support: full
    details:
      - The module only reads, so check mode runs it in full.
  diff_mode:
    support: none
  facts:
    support: full
notes:
  - Interface data comes from C(ip -j -d addr show) (iproute2 4.14 or later) plus C(/sys/class/net),
    RDMA devices from C(/sys/class/infiniband); C(fabric) from sysfs and /proc only.
  - On a unified-memory GPU such as the GB10 of a DGX Spark, C(nvidia-smi) reports the memory as
    C([N/A]); C(memory_total_mib) is then null.
"""

EXAMPLES = r"""
- name: Gather the NCCL facts of every node, with the route towards the master
  ansible.legacy.nccl_facts:
    route_to: "{{ hostvars[groups['nccl_master'][0]]['ansible_host'] }}"
    python: "{{ nccl_python | default('', true) }}"

- name: Interfaces and GPUs only, without starting Python
  ansible.legacy.nccl_facts:
    query_python: false

- name: Show the interface that reaches the master
  ansible.builtin.debug:
    msg: "{{ ansible_facts.nccl.route.interface | default(ansible_facts.nccl.route_reason) }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts under the key C(nccl).
  returned: always
  type: complex
  contains:
    nccl:
      description: What the node offers to torch.distributed.
      returned: always
      type: complex
      contains:
        hostname:
          description: C(socket.gethostname()) on the node.
          type: str
          returned: always
          sample: spark-a
        hostname_addresses:
          description: What the hostname resolves to (getaddrinfo), in order, without duplicates.
          type: list
          elements: str
          returned: always
          sample: ["127.0.1.1"]
        hostname_reason:
          description: Why hostname_addresses is empty, else an empty string.
          type: str
          returned: always
          sample: ""
        module_python:
          description: The interpreter running this module (C(sys.executable)).
          type: str
          returned: always
          sample: /usr/bin/python3
        interfaces:
          description: Network interfaces by name.
          type: dict
          returned: always
          sample:
            enp1s0f0np0:
              name: enp1s0f0np0
              state: up
              mtu: 9000
              speed_mbps: 200000
              kind: null
              ipv4: [{address: 192.168.100.10, prefixlen: 24}]
              ipv6: [{address: "fe80::5a:1ff:fe00:1", prefixlen: 64, scope: link}]
              rdma_devices: [rocep1s0f0]
        interfaces_reason:
          description: Why interfaces is empty (for example C(ip) not found), else an empty string.
          type: str
          returned: always
          sample: ""
        route:
          description:
            - How the node reaches O(route_to), from C(ip -j route get); empty when unknown.
          type: dict
          returned: always
          sample: {destination: 192.168.100.11, interface: enp1s0f0np0, source: 192.168.100.10}
        route_reason:
          description: Why route is empty, else an empty string.
          type: str
          returned: always
          sample: ""
        ip_local_port_range:
          description: C(net.ipv4.ip_local_port_range); empty when unreadable.
          type: list
          elements: int
          returned: always
          sample: [32768, 60999]
        gpus:
          description: GPUs from nvidia-smi, in its order.
          type: list
          elements: dict
          returned: always
          sample:
            - index: 0
              name: NVIDIA H100 80GB HBM3
              driver_version: "550.90.07"
              memory_total_mib: 81559
              uuid: GPU-4b2c3a1e-5d6f-7a8b-9c0d-1e2f3a4b5c6d
              pci_bus_id: "00000000:19:00.0"
        gpus_reason:
          description: Why gpus is empty or missing data (nvidia-smi not found, failed, ...).
          type: str
          returned: always
          sample: "nvidia-smi not found on PATH"
        gpu_health:
          description:
            - The GPUs' health, only with
              O(gpu_health) and GPUs found; otherwise empty. Each part is null with a
              C(<part>_reason) when it could not be read.
          type: dict
          returned: always
          sample:
            query: {driver_version: "535.183.01", gpus: [{bus_id: "00000000:53:00.0"}]}
            query_reason: ""
            topology: {nics: [mlx5_0], gpus: [{index: 0, nics: {mlx5_0: PIX}}]}
            nvlink: [{index: 0, links: [{link: 0, up: true, gbps: 26.562}]}]
            kernel_log: {source: dmesg, xids: []}
            nvswitch: false
            fabric_manager: {state: active, reason: ""}
            cuda_visible_devices: null
            dcgm: {level: 0, results: null, reason: nccl_dcgm_diag_level is 0 (off)}
        accelerators:
          description:
            - Ascend NPUs from C(npu-smi info), one entry per chip (a device of torch_npu), and
              Intel XPUs from the node's torch (O(query_xpu)); C(npus_reason) and
              C(xpus_reason) say why a list is empty.
          type: dict
          returned: always
          sample:
            npus: [{npu: 0, chip: 0, phy_id: null, name: 910B2, health: OK,
                    bus_id: "0000:C1:00.0", hbm_used_mb: 3382, hbm_total_mb: 65536}]
            npus_reason: ""
            npu_smi_version: "25.2.0"
            xpus: []
            xpus_reason: query_xpu is false
            torch_npu_version: null
            ip_local_reserved_ports: "60000-60015"
        python:
          description: What the node's Python reports; every key is always present.
          type: dict
          returned: always
          sample:
            executable: /opt/venv/bin/python
            version: "3.12.3"
            torch_version: "2.13.0+cu130"
            cuda_available: true
            cuda_version: "13.0"
            nccl_version: "2.28.3"
            device_count: 1
            npu_available: false
            npu_version: null
            reason: ""
        fabric:
          description:
            - What the node offers NCCL below IP, from sysfs and /proc
              (docs/design.md). C(rdma) every RDMA device
              and port (state, phys_state, rate, link_layer, netdevs, RoCE GIDs with type and
              address); C(gpudirect) (peer-memory module, dma-buf); C(limits) (RLIMIT_MEMLOCK,
              /dev/shm, ephemeral ports) as this session has them; C(nccl_config) (nccl.conf
              files and the NCCL_* environment); C(ssh_address).
          type: dict
          returned: always
          sample:
            rdma: []
            rdma_reason: "no RDMA device: /sys/class/infiniband does not exist"
            gpudirect: {nvidia_loaded: false, peermem: null, memory_peers: [], dmabuf: null,
                        dmabuf_reason: "the NVIDIA driver is not loaded",
                        kernel: "6.1.0-27-amd64", driver_version: null, open_module: null}
            limits: {memlock_soft: 8388608, memlock_hard: 8388608,
                     shm: {path: /dev/shm, size_bytes: 67108864, free_bytes: 67108864, reason: ""},
                     ip_local_port_range: [32768, 60999]}
            nccl_config: {files: [], env: {}, effective: {}}
            ssh_address: 192.168.100.10
"""


from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_preflight.node.payload import guard_payload

# AnsiballZ's payload directory (in the system's temporary directory, not the run's): SIGTERM
# and SIGHUP end this process through the wrapper's cleanup from here on, and main() removes it
# first thing, so that no way out leaves it (node/payload.py).
_LEAVE_NO_PAYLOAD = guard_payload(globals().get("_modlib_path"))
from ansible.module_utils.nccl_preflight.node.facts_call import FACTS_SPEC, read_facts

# O(program_python) and O(run_id) are the action plugin's (plugins/action/nccl_facts.py): the
# module itself is what runs when they are not given.
ACTION_OPTIONS = {
    "program_python": {"type": "str", "default": ""},
    "run_id": {"type": "str", "default": ""},
}


def main() -> None:
    _LEAVE_NO_PAYLOAD()
    module = AnsibleModule(argument_spec={**FACTS_SPEC, **ACTION_OPTIONS}, supports_check_mode=True)
    result = read_facts(module.params, module)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
