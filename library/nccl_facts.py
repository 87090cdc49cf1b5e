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
  - Returns everything under C(ansible_facts.nccl). Only reads; changes nothing on the node.
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
  preflight:
    description:
      - Also start the pre-flight in this call (one SSH session and Python start less per host),
        its result in RV(preflight).
        M(nccl_preflight_observe) O(nccl_preflight_observe#module:collect) collects it.
      - Makes O(preflight.run_dir) when given (a private directory of this user, never a symbolic
        link) and O(preflight.path) inside it (mode 0700) when missing, looks for a process already
        listening on O(preflight.check_port), takes the run lock (O(preflight.lock)), binds one TCP
        listener per entry of O(preflight.listeners) (MASTER_PORT on the master, a port the kernel
        picks from C(net.ipv4.ip_local_port_range) on every host) and hands them to a detached
        listener process (double fork, new session, standard streams to C(/dev/null) and
        C(<path>/listener.log)), so the module, and the SSH session that runs it, ends at once. The
        peers can connect as soon as it returns.
      - The listener process also runs O(preflight.python) with a short script that imports
        torch and prints the torch, CUDA, NCCL and torch_npu versions (what O(query_python)
        does); the collect returns them. Importing torch takes seconds; here it overlaps the
        environment play and the probes. Where O(query_xpu) asks torch (no NVIDIA GPU or Ascend
        NPU found, an Intel GPU on the PCI bus) with the same Python as O(preflight.python),
        this call runs that script instead (it also reads torch.xpu), so torch is imported once
        for both, and the listener process keeps its result (no C(python-probe.out) then).
      - The listener process accepts connections until each listener got its
        O(preflight.listeners[].expect) connections, C(<path>/listener.stop) appears,
        O(preflight.path) is removed, or O(preflight.timeout) seconds passed, whichever comes
        first. It then writes what it saw to C(<path>/listener.json) and exits; it never outlives
        O(preflight.timeout).
      - A listener that cannot bind (address not local, port in use) is reported in the result
        with its error; it does not fail the module, so the other checks still run.
      - Every file lives in O(preflight.path) - C(listener.pid), C(listener.stop),
        C(listener.json), C(listener.log), C(python-probe.out), C(python-probe.err).
      - Not given - nothing is started or made on the host.
    type: dict
    suboptions:
      path:
        description: The listener's private directory, inside the run directory; made (mode
          0700) when missing.
        type: path
        required: true
      run_dir:
        description:
          - The run's private directory on this node, made with O(preflight.run_dir_mode) when
            missing. Refused, and the pre-flight fails, when it is a symbolic link, not a
            directory, or owned by another user. Its parent must exist.
          - Not given - only O(preflight.path) is made.
        type: path
      run_dir_mode:
        description: Octal mode of O(preflight.run_dir), as a string.
        type: str
        default: "0700"
      python:
        description:
          - Python interpreter (absolute path or a name on PATH) to run the torch probe with.
          - Empty - the interpreter that runs this module.
        type: str
      python_timeout:
        description: Seconds the torch probe may take; it is killed after that.
        type: float
        default: 60
      listeners:
        description: The listeners to hold.
        type: list
        elements: dict
        default: []
        suboptions:
          name:
            description: A label for the listener (C(master), C(ring)).
            type: str
            required: true
          address:
            description:
              - The literal local address to bind.
              - C(fabric) - this host's fabric address, chosen from the facts just read with
                O(preflight.fabric) as the environment stage will choose it
                (the same choice of interface and address). Without a fabric address the listener
                is left out.
            type: str
            required: true
          port:
            description: The port; C(0) lets the kernel pick one from the ephemeral range.
            type: int
            default: 0
          expect:
            description: Stop this listener after this many accepted connections.
            type: int
            default: 1
          backend:
            description:
              - Hold this listener only where this node would use this backend (see
                O(preflight.backend)); empty - on every node.
            type: str
            default: ""
      check_port:
        description:
          - Before binding, look in C(/proc) for processes already listening on this TCP port;
            they are returned in RV(preflight) C(port_owner).
          - A listener of O(preflight.listeners) on this port is not started when the port is
            held, so nobody probes a foreign listener.
        type: int
      lock:
        description:
          - Take the run lock C(lock.path) before binding (on the master) and hand it to a detached
            keeper that holds it until O(preflight.run_dir) is removed or C(lock.lifetime) seconds
            passed. Held by another run - the listener on O(preflight.check_port) is not started and
            RV(preflight) C(lock) names that run. A lock whose keeper is gone is taken over. Needs
            O(preflight.run_dir). In check mode the lock is only looked at.
          - C({fabric_address}) in C(lock.path) is filled in with this host's fabric address;
            without one the lock is left out.
        type: dict
        suboptions:
          path: {description: The lock file., type: path, required: true}
          lifetime: {description: Seconds the keeper holds it at most., type: float, default: 3600}
          run_id: {description: This run's id, recorded in the lock., type: str, required: true}
          started_at: {description: When this run started, recorded., type: str, default: ""}
          control_host: {description: The control machine, recorded., type: str, default: ""}
          control_user: {description: Who runs the validation, recorded., type: str, default: ""}
      timeout:
        description:
          - Seconds the listener process lives at most, whatever it received; also bounds the
            torch probe.
          - Keep it well above the time between this call and the end of the probes.
        type: float
        default: 60
      stop_timeout:
        description: Seconds to wait for the listener of an earlier start in O(preflight.path)
          to exit before this one starts.
        type: float
        default: 10
      warm:
        description:
          - A launch follows in this run. The torch probe is started warm (it holds on after
            its answer), and once the listeners are collected the listener process waits, at
            most O(preflight.timeout) from its start, for M(nccl_torchrun) O(state=started)
            with O(nccl_torchrun#module:warm_dir). Then it becomes the run's supervisor and the
            probe becomes torchrun, so torch is imported once. It lets the probe go when the
            directory is removed.
        type: bool
        default: false
      warden:
        description:
          - The run's warden watches this node (started by this module's action plugin, see
            O(tether)). The start then holds the warden's pass while it starts anything, and is
            refused, starting nothing, once the warden ended the run because its control
            machine went away.
        type: bool
        default: false
      fabric:
        description: How this host's fabric address is chosen for C(fabric) listener addresses
          and the lock path, as the environment stage chooses it.
        type: dict
        default: {}
        suboptions:
          socket_ifname: {description: nccl_socket_ifname., type: str, default: ""}
          cidr: {description: nccl_fabric_cidr., type: str, default: ""}
      backend:
        description:
          - The backend set (the playbook passes C(nccl_backend)). A listener with a C(backend)
            (the C(hccl) one) is held only where this node would use that backend - the backend
            set, or with C(auto) the one this node's own facts call for (C(nccl) with NVIDIA
            GPUs, C(hccl) with Ascend NPUs).
        type: str
        default: auto
  program_python:
    description:
      - The node's Python, as the inventory names it (C(ansible_python_interpreter)). Given,
        this call runs as a small program of the standard library, sent on the call's standard
        input and started with this Python, instead of as a module - the same options, checks
        and result, without Ansible's module start on the node (about 0.3 CPU seconds a call)
        and without building a module payload on the control machine. It unpacks into a
        private temporary directory that it removes. When that program cannot run, the module
        runs instead.
      - Empty - the module runs (with Ansible's interpreter discovery, when it is on).
    type: str
    default: ""
  run_id:
    description: The run's identifier, in the name of O(program_python)'s temporary directory
      (C(nccl-preflight-<run_id>-*)).
    type: str
    default: ""
  tether:
    description:
      - This ansible-playbook run makes a run directory on the node. Before the facts, the
        action plugin starts the run's warden there - a small standard-library program in one
        more session of this host's connection (ssh or local) that lasts until ansible-playbook
        ends and beats every second. Whichever way the control machine goes away (Ctrl-C,
        SIGTERM, a kill, a lost connection), the warden ends every process the run started on
        the node and removes O(tether.run_dir) within seconds. When ansible-playbook ran to its
        end, it only ends what is still running and leaves the directory as the run left it.
      - Where no warden can be started (another connection type, a connection or C(become)
        that needs a password), RV(tether) says why, with a warning.
      - The module itself ignores it (the action plugin's option).
    type: dict
    suboptions:
      run_dir:
        description: The run's private directory on this node.
        type: path
      python:
        description: The Python that runs the warden when O(program_python) names none
          (the run's, C(nccl_python)); empty - C(python3).
        type: str
        default: ""
      note:
        description: Where on the control machine the tether keeps the warden's last answer
          (why it ended the run), for the launch's wait to report a run it ended as lost.
        type: path
attributes:
  check_mode:
    support: full
    details:
      - The module only reads, so check mode runs it in full.
      - O(preflight) in check mode only reads (MASTER_PORT's owner, the run lock, the torch probe
        in the foreground) and says in its C(msg) what it would start.
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

- name: Gather the facts and start the pre-flight's listeners and torch probe in the same call
  ansible.legacy.nccl_facts:
    query_python: false
    preflight:
      run_dir: /tmp/nccl-preflight-RUN-node1
      path: /tmp/nccl-preflight-RUN-node1/preflight
      check_port: 29500
      listeners:
        - {name: master, address: fabric, port: 29500, expect: 4}
        - {name: ring, address: fabric, port: 0, expect: 1}
      fabric: {cidr: 10.0.0.0/24}
      timeout: 100
  register: facts_and_listeners

- name: Show the interface that reaches the master
  ansible.builtin.debug:
    msg: "{{ ansible_facts.nccl.route.interface | default(ansible_facts.nccl.route_reason) }}"
"""

RETURN = r"""
preflight:
  description:
    - With O(preflight), what the start did - C(listeners) (one entry per listener - C(name),
      C(address), C(port), C(expect), C(error), C(accepted) empty, C(complete)), C(ports) (the
      bound port and the bind error of each listener, by name), C(port_owner) (what listens on
      O(preflight.check_port) - C(free), and C(listeners) with their owning processes; empty
      without it), C(pid) (the listener process), C(lock) (with O(preflight.lock) - C(path),
      C(acquired), C(refused), C(took_over), C(holder), C(stale), C(message)) and
      C(fabric_address).
    - C(failed) with C(msg) when the pre-flight could not start - the facts are still returned
      and this module does not fail for it.
    - In check mode C(msg) says what it would start, and C(python) holds the torch probe's
      result (run in the foreground).
  returned: with O(preflight)
  type: dict
  sample:
    listeners:
      - {name: master, address: 10.0.0.11, port: 29500, expect: 4, error: "", accepted: [],
         complete: false}
    ports: {master: {port: 29500, error: ""}, ring: {port: 41234, error: ""}}
    port_owner: {free: true, listeners: []}
    pid: 4242
    fabric_address: 10.0.0.11
tether:
  description:
    - With O(tether) (not in check mode), the run's warden on this node - C(ready), C(pid) (the
      tether's process on the control machine), C(warden_pid) (the warden on the node), or
      C(error) (why no warden watches this node).
  returned: with O(tether)
  type: dict
  sample: {ready: true, pid: 81234, warden_pid: 4240}
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

import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_preflight.node.facts_call import FACTS_SPEC, facts_and_start

# O(program_python), O(run_id) and O(tether) are the action plugin's (plugins/action/nccl_facts.py):
# the module itself is what runs when they are not given.
ACTION_OPTIONS = {
    "program_python": {"type": "str", "default": ""},
    "run_id": {"type": "str", "default": ""},
    "tether": {"type": "dict"},
}


def main() -> None:
    module = AnsibleModule(argument_spec={**FACTS_SPEC, **ACTION_OPTIONS}, supports_check_mode=True)
    result = facts_and_start(module.params, module.check_mode, module, sys.executable)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
