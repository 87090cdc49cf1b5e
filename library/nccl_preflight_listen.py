#!/usr/bin/python
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Hold short-lived TCP listeners for the pre-flight reachability probes, in a detached process.

The pre-flight's start and collect as a module of its own (module_utils/nccl_preflight_calls.py);
playbooks/validate.yml runs the same two functions inside its facts call (nccl_facts option
preflight) and its probe call (nccl_tcp_probe option collect), one SSH session less each. No
playbook calls this module: it is those two functions' documented options (which nccl_facts and
nccl_tcp_probe refer to) and the entry through which their tests run them with the same argument
spec (tests/unit/test_preflight_listener.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_preflight_listen
short_description: Start and stop the short-lived TCP listeners that peers probe in the pre-flight
description:
  - With O(state=started), makes O(run_dir) when given (with the checks of
    C(module_utils/nccl_run_dir) - a private directory of this user, never a symbolic link) and
    O(path) inside it (mode 0700) when missing, optionally looks for a process
    already listening on O(check_port), binds one TCP listener per entry of O(listeners)
    (MASTER_PORT on the master, a port the kernel picks from C(net.ipv4.ip_local_port_range) on
    every host) and hands them to a detached listener process (double fork, new session, standard
    streams to C(/dev/null) and C(<path>/listener.log)), so the module, and the SSH session that
    runs it, ends at once. It returns the bound ports; the peers can connect as soon as it returns.
  - With O(python), the listener process also runs that interpreter with a short script that
    imports torch and prints the torch, CUDA, NCCL and torch_npu versions (what M(nccl_facts) does
    with O(nccl_facts#module:query_python)); O(state=stopped) returns them in RV(python). Importing
    torch takes seconds; here it overlaps the probes instead of adding to them.
  - The listener process accepts connections until each listener got its
    O(listeners[].expect) connections, C(<path>/listener.stop) appears, O(path) is removed, or
    O(timeout) seconds passed, whichever comes first. It then writes what it saw to
    C(<path>/listener.json) and exits; it never outlives O(timeout).
  - With O(state=stopped), writes C(<path>/listener.stop), waits up to O(stop_timeout) seconds for
    the listener process to exit (kills it after that; it first waits for the O(python) script,
    up to O(python_timeout)) and returns what it saw, and this host's clock.
  - A listener that cannot bind (address not local, port in use) is reported in the result with
    its error; it does not fail the module, so the other checks still run.
  - Every file lives in O(path) - C(listener.pid), C(listener.stop), C(listener.json),
    C(listener.log), C(python-probe.out), C(python-probe.err).
version_added: "0.1.0"
options:
  state:
    description: Start the listeners, or stop them and collect what they saw.
    type: str
    choices: [started, stopped]
    default: started
  path:
    description:
      - The listener's private directory, inside the run directory. O(state=started) makes it
        (mode 0700) when missing.
    type: path
    required: true
  run_dir:
    description:
      - The run's private directory on this node, made with O(run_dir_mode) when missing
        (O(state=started)). Refused, and the module fails, when it is a symbolic link, not a
        directory, or owned by another user. Its parent must exist.
      - Not given - only O(path) is made.
    type: path
  run_dir_mode:
    description: Octal mode of O(run_dir), as a string.
    type: str
    default: "0700"
  python:
    description:
      - Python interpreter (absolute path or a name on PATH) to run the torch probe with, beside
        the listeners (O(state=started)); its result comes back with O(state=stopped).
      - Not given - no probe; RV(python) is not returned.
    type: str
  python_timeout:
    description: Seconds the O(python) probe may take; it is killed after that.
    type: float
    default: 60
  listeners:
    description: The listeners to hold (O(state=started)).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: A label for the listener (C(master), C(ring)).
        type: str
        required: true
      address:
        description: The literal local address to bind.
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
          - Used by M(nccl_facts) O(nccl_facts#module:preflight) only (its C(backend) option) -
            the listener is held only where the node uses this backend; ignored here.
        type: str
        default: ""
  check_port:
    description:
      - Before binding, look in C(/proc) for processes already listening on this TCP port
        (O(state=started)); they are returned in RV(port_owner).
      - A listener of O(listeners) on this port is not started when the port is held, so nobody
        probes a foreign listener.
    type: int
  timeout:
    description:
      - Seconds the listener process lives at most (O(state=started)), whatever it received.
      - Keep it well above the time between starting the listeners and the end of the probes.
      - Also bounds the O(python) probe.
    type: float
    default: 60
  lock:
    description:
      - With O(state=started), take the run lock C(lock.path) before binding (on the master; see
        C(module_utils/nccl_run_lock)) and hand it to a detached keeper that holds it until
        O(run_dir) is removed or C(lock.lifetime) seconds passed. Held by another run - the
        listener on O(check_port) is not started and RV(lock) names that run. A lock whose keeper
        is gone is taken over. Needs O(run_dir). In check mode the lock is only looked at.
    type: dict
    suboptions:
      path: {description: The lock file., type: path, required: true}
      lifetime: {description: Seconds the keeper holds it at most., type: float, default: 3600}
      run_id: {description: This run's id, recorded in the lock., type: str, required: true}
      started_at: {description: When this run started, recorded., type: str, default: ""}
      control_host: {description: The control machine, recorded., type: str, default: ""}
      control_user: {description: Who runs the validation, recorded., type: str, default: ""}
  remove_run_dir:
    description:
      - With O(state=stopped), remove this directory (the run's private directory, which holds
        O(path)) and everything in it once the listener's result is read, also when the module
        fails. Only this user's own directory is removed, never through a symbolic link.
      - For a pre-flight that no launch follows - the stop is then the last call on the host.
    type: path
  wait:
    description:
      - With O(state=stopped), first wait up to this many seconds for the listener process to end
        by itself (every expected connection came) before writing the stop file; RV(waited) says
        whether it did. C(0) - stop at once.
    type: float
    default: 0
  stop_timeout:
    description:
      - Seconds O(state=stopped) waits for the listener process to exit after writing the stop
        file; after that the process is killed and the module fails.
      - With O(python), keep it above O(python_timeout): the listener process waits for the probe.
    type: float
    default: 10
attributes:
  check_mode:
    support: partial
    details:
      - In check mode O(state=started) only reads - O(check_port), O(lock), and the O(python)
        probe run in the foreground (C(python -B)) - and says in C(msg) what it would change; no
        directory is made, no lock taken, no listener held.
      - In check mode O(state=stopped) only reads the clock; no stop file is written.
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Start the listeners (MASTER_PORT on the master, an ephemeral port)
  nccl_preflight_listen:
    state: started
    run_dir: /tmp/nccl-preflight-RUN-node1
    path: /tmp/nccl-preflight-RUN-node1/preflight
    python: /usr/bin/python3
    check_port: 29500
    listeners:
      - {name: master, address: 10.0.0.11, port: 29500, expect: 4}
      - {name: ring, address: 10.0.0.11, port: 0, expect: 1}
    timeout: 100
  register: listen

- name: Stop them once every peer has probed, and collect who connected
  nccl_preflight_listen:
    state: stopped
    path: /tmp/nccl-preflight-RUN-node1/preflight
    stop_timeout: 70
  register: listened
"""

RETURN = r"""
listeners:
  description:
    - One entry per listener. With O(state=started), C(accepted) is empty; with
      O(state=stopped) it lists the peer address of each accepted connection.
    - Empty when nothing was started (check mode), or with O(state=stopped) when the listener
      process could not be collected (the module then fails).
  returned: always
  type: list
  elements: dict
  sample:
    - name: master
      address: 10.0.0.11
      port: 29500
      expect: 2
      error: ""
      accepted: ["10.0.0.12", "10.0.0.11"]
      complete: true
ports:
  description: The bound port and the bind error of each listener, by name.
  returned: O(state=started)
  type: dict
  sample: {master: {port: 29500, error: ""}, ring: {port: 41234, error: ""}}
port_owner:
  description:
    - What listens on O(check_port) (C(free), and C(listeners) with their owning processes);
      empty when O(check_port) is not given.
  returned: O(state=started)
  type: dict
  sample:
    free: false
    listeners:
      - {address: 0.0.0.0, port: 29500, inode: 33531, uid: 0, pid: 4242, comm: python3,
         cmdline: python3 -m http.server 29500}
pid:
  description: The listener process; null when no listener could bind (no process started).
  returned: always
  type: int
ended:
  description:
    - Why the listener process ended - C(complete) (every listener got its connections),
      C(stop file), C(timeout), C(run directory removed), or C(nothing bound) (no process was
      started).
  returned: O(state=stopped), when the listener's result was read
  type: str
  sample: complete
timed_out:
  description: True when the timeout or the stop file closed a listener before its expected
    connections came.
  returned: O(state=stopped), when the listener's result was read
  type: bool
killed:
  description: True when the listener process did not exit within O(stop_timeout) and was killed.
  returned: O(state=stopped), when a listener process was found
  type: bool
python:
  description:
    - What the O(python) probe reported, as RV(nccl_facts#module:ansible_facts.nccl.python) -
      C(executable), C(version), C(torch_version), C(cuda_available), C(cuda_version),
      C(nccl_version), C(device_count), C(npu_available), C(npu_version) and C(reason) (why a value
      is empty - torch missing, the probe failed or ran out of time).
  returned: O(state=stopped), when the listener was started with O(python) and its result was
    read; O(state=started) with O(python) in check mode
  type: dict
  sample:
    executable: /usr/bin/python3
    version: "3.12.3"
    torch_version: "2.13.0+cu130"
    cuda_available: true
    cuda_version: "13.0"
    nccl_version: "2.28.3"
    device_count: 8
    npu_available: false
    npu_version: null
    reason: ""
lock:
  description:
    - With O(lock), C(path), C(acquired), C(refused) (another run holds it, or it could not be
      taken), C(took_over) (a stale lock), C(holder) (the record of the run holding it - this
      one when acquired - run_id, started_at, control_host, control_user, keeper_pid,
      keeper_start_time, locked_at, run_dir), C(stale) and C(message).
  returned: O(state=started) with O(lock)
  type: dict
run_dir_removed:
  description: Whether O(remove_run_dir) is gone (C(remove_error) says why not).
  returned: O(state=stopped) with O(remove_run_dir), outside check mode
  type: bool
waited:
  description:
    - With O(wait), C(seconds) and C(ended_alone) (the listener got every connection in time).
  returned: O(state=stopped) with O(wait), when the listener's result was read
  type: dict
clock:
  description:
    - This host's clock (seconds since the epoch, C(time.time())) when the module started.
    - Returned also when the module fails, so the clock check does not depend on the listeners.
  returned: O(state=stopped)
  type: float
  sample: 1763776800.123456
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_preflight_calls import START_SPEC, STOP_SPEC, start, stop


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["started", "stopped"], "default": "started"},
            **START_SPEC,
            **STOP_SPEC,
        },
        supports_check_mode=True,
    )
    p = module.params
    call = start if p["state"] == "started" else stop
    result = call(p, module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
