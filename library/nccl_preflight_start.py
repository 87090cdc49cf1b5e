#!/usr/bin/python
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The run's start on one node: its warden, then the pre-flight's listeners and torch probe."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_preflight_start
short_description: Start a node's warden and the pre-flight's listeners and torch probe
description:
  - The call after M(nccl_facts) (which only reads) on every node of a run that makes a run
    directory there. Its action plugin first starts the run's warden (O(tether)); the module then
    starts the pre-flight (O(preflight)) - the run directory, the listeners on this host's fabric
    address and the torch probe, on the master also who holds MASTER_PORT and the run lock.
  - What to start is worked out on the control machine from the node's facts (the filter
    C(nccl_preflight_start)); this call only starts it.
version_added: "0.2.0"
author:
  - nccl-preflight contributors
options:
  preflight:
    description:
      - The pre-flight's start, its result in RV(preflight).
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
        torch and prints the torch, CUDA, NCCL and torch_npu versions (what
        M(nccl_facts) O(nccl_facts#module:query_python) does); the collect returns them.
        Importing torch takes seconds; here it overlaps the environment play and the probes.
      - The listener process accepts connections until each listener got its
        O(preflight.listeners[].connections) connections, C(<path>/listener.stop) appears,
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
              - The literal local address to bind (the role gives this host's fabric address,
                worked out from its facts on the control machine, as the environment stage
                will choose it).
            type: str
            required: true
          port:
            description: The port; C(0) lets the kernel pick one from the ephemeral range.
            type: int
            default: 0
          connections:
            description: Stop this listener after this many accepted connections.
            type: int
            default: 1
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
      fabric_address:
        description: This host's fabric address (returned as RV(preflight) C(fabric_address)).
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
extends_documentation_fragment:
  - nccl_program
attributes:
  check_mode:
    support: full
    details:
      - In check mode O(preflight) only reads (MASTER_PORT's owner, the run lock, the torch probe
        in the foreground) and says in its C(msg) what it would start; no warden is started.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Start this node's pre-flight listeners and torch probe, after its warden
  nccl_preflight_start:
    preflight:
      run_dir: /tmp/nccl-preflight-RUN-node1
      path: /tmp/nccl-preflight-RUN-node1/preflight
      check_port: 29500
      listeners:
        - {name: master, address: 10.0.0.11, port: 29500, connections: 4}
        - {name: ring, address: 10.0.0.11, port: 0, connections: 1}
      fabric_address: 10.0.0.11
      timeout: 100
    tether:
      run_dir: /tmp/nccl-preflight-RUN-node1
  register: started
"""

RETURN = r"""
preflight:
  description:
    - With O(preflight), what the start did - C(listeners) (one entry per listener - C(name),
      C(address), C(port), C(connections), C(error), C(accepted) empty, C(complete)), C(ports) (the
      bound port and the bind error of each listener, by name), C(port_owner) (what listens on
      O(preflight.check_port) - C(free), and C(listeners) with their owning processes; empty
      without it), C(pid) (the listener process), C(lock) (with O(preflight.lock) - C(path),
      C(acquired), C(refused), C(took_over), C(holder), C(stale), C(message)) and
      C(fabric_address).
    - C(failed) with C(msg) when the pre-flight could not start - this module does not fail for
      it (the pre-flight's judge names it).
    - In check mode C(msg) says what it would start, and C(python) holds the torch probe's
      result (run in the foreground).
  returned: with O(preflight)
  type: dict
  sample:
    listeners:
      - {name: master, address: 10.0.0.11, port: 29500, connections: 4, error: "", accepted: [],
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
"""

import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_preflight.node.payload import guard_payload

# AnsiballZ's payload directory (in the system's temporary directory, not the run's): SIGTERM
# and SIGHUP end this process through the wrapper's cleanup from here on, and main() removes it
# first thing, so that no way out leaves it (node/payload.py).
_LEAVE_NO_PAYLOAD = guard_payload(globals().get("_modlib_path"))
from ansible.module_utils.nccl_preflight.node.preflight_start_call import (
    START_CALL_SPEC,
    start_call,
)

# O(program_python), O(run_id) and O(tether) are the action plugin's
# (plugins/action/nccl_preflight_start.py): the module itself is what runs when they are not given.
ACTION_OPTIONS = {
    "program_python": {"type": "str", "default": ""},
    "run_id": {"type": "str", "default": ""},
    "tether": {"type": "dict"},
}


def main() -> None:
    _LEAVE_NO_PAYLOAD()
    module = AnsibleModule(
        argument_spec={**START_CALL_SPEC, **ACTION_OPTIONS}, supports_check_mode=True
    )
    module.exit_json(**start_call(module.params, module.check_mode, sys.executable))


if __name__ == "__main__":
    main()
