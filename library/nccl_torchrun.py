#!/usr/bin/python
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Ansible module: run torchrun for one node, detached and bounded in time; wait for it, end its
whole process tree and bring its results back in the same call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_torchrun
short_description: Run torchrun on one node in time bounds, end its process tree, return its results
description:
  - O(state=started) makes O(run_dir) when it is missing (mode O(run_dir_mode); it refuses a
    symbolic link, a non-directory or another user's directory, and sets the mode of one it
    finds exactly), writes O(env_content) to O(env_file) and O(script_content) to O(script) (when
    given), waits on node rank 0 until nothing accepts connections on O(master_addr):O(master_port)
    any more (a previous run's store may still be closing; at most O(port_wait_timeout) s), then
    starts a detached supervisor (double fork and C(setsid), standard streams to
    C(<run_dir>/torchrun.log), like Ansible's C(async_wrapper)) and returns at once, so every node
    starts together whatever C(forks) is.
  - The supervisor starts C(python -m torch.distributed.run) with static rendezvous in its own
    session, records every process of its tree (pid and start time) in C(<run_dir>/torchrun.pids),
    and ends every recorded process still alive after O(timeout) seconds (SIGTERM, then SIGKILL
    after O(kill_grace) seconds), or at once when it receives SIGTERM, SIGINT or SIGHUP. torchrun
    starts each worker in a new session, so killing its process group is not enough; the
    supervisor is a child subreaper, so orphaned workers stay in its tree. Then it joins the
    per-rank logs torchrun wrote under C(<run_dir>/logs) into C(<run_dir>/results/rank-<R>.log)
    (R = O(rank_offset) + local rank), writes C(<run_dir>/launch.json) and exits.
  - O(state=finished) waits on the node (one look every 0.2 s) until the supervisor exited, at most
    O(timeout) + O(kill_grace) + 30 seconds after the start; then it ends whatever is still alive
    (as O(state=stopped)). With O(stop_reason) it ends the run at once instead of waiting. It
    also ends the run at once when it receives SIGTERM, SIGINT or SIGHUP, or when whoever reads
    its result closed the pipe (Ctrl-C or a lost connection on the control machine).
  - O(state=stopped) ends whatever a run of the same O(run_dir) left running (first asking the
    supervisor to stop, then every recorded process), joins the logs and writes C(launch.json) if
    the supervisor could not. Safe to run at any time, also when nothing was started.
  - With O(collect), O(state=finished) and O(state=stopped) return C(results/rank-*.json),
    C(results/rank-*.log), C(torchrun.log), C(launch.json) and the ranks' NCCL logs
    (C(results/nccl.<pid>.log), named C(nccl-rank-<R>.log) by the pid in C(rank-<R>.json))
    as one gzip tar archive in
    RV(collected_archive) (logs longer than O(collect_log_max_bytes) keep their end, after a line
    that says how much was cut). This module's action plugin unpacks it into O(collect_to)
    on the control machine and drops it from the result.
  - With O(remove_run_dir), O(state=finished) and O(state=stopped) remove O(run_dir) once the
    results are packed and nothing of the run is alive.
  - Processes are only ever ended by their recorded pid (checked against the recorded start time,
    so a reused pid is never hit), never by name.
  - The node's environment is C(nccl.env) (O(env_file), shell-quoted C(KEY=value) lines; written
    from O(env_content) when given, else read as it is) plus O(environment); nothing passes through
    a shell.
options:
  state:
    description:
      - C(started) starts torchrun detached and returns; C(finished) waits for it to end;
        C(stopped) ends a run.
    type: str
    choices: [started, finished, stopped]
    default: finished
  run_dir:
    description:
      - The private run directory of this host (holds the script and nccl.env). O(state=started)
        makes it when it is missing; its parent must exist.
    type: path
    required: true
  run_dir_mode:
    description:
      - With O(state=started), the octal mode of O(run_dir), as a string; set exactly, also on a
        directory that already exists.
    type: str
    default: "0700"
  python:
    description:
      - The node's Python that has torch. Required with O(state=started).
      - Through the role's action plugin, O(state=started) runs as a small program of the
        standard library started with this Python (sent on the call's standard input, unpacked
        into a private temporary directory it removes), not as a module - the same options,
        checks and result, without Ansible's module start on the node. When that program cannot
        run, the module runs instead.
    type: path
  script:
    description:
      - The script torchrun runs in every worker. Required with O(state=started), unless
        O(script_zipapp) is given (default then C(<run_dir>/nccl_check.pyz)).
    type: path
  script_content:
    description:
      - Text written to O(script) (mode 0600) before the start, so the script needs no copy of its
        own. Not shown in the task's C(invocation).
    type: str
  script_zipapp:
    description:
      - Base64 of a zipapp (the rank script and the sibling modules it imports, built on the
        control machine), written to O(script) (mode 0600)
        before the start; torchrun runs it as it would run the C(.py) (C(python -u <script>
        args)). Not shown in the task's C(invocation). Mutually exclusive with O(script_content).
      - Set by this module's action plugin from O(script_src).
    type: str
  script_src:
    description:
      - Path of the rank script on the control machine (C(launch_script)). This module's
        action plugin bundles it and the modules beside it that it imports into one zipapp and
        passes it as O(script_zipapp); a file it cannot read or parse fails the task, naming
        the file, before anything is written on the node. Never seen by the node.
    type: path
  look_zipapp:
    description:
      - Base64 of a zipapp, written with O(state=started) to C(<run_dir>/look.pyz) (mode 0600) - the
        look of O(state=finished) as a plain Python program (the same code; the standard library
        only). Set by this module's action plugin on every start; the watch's looks then run
        C(python -I -S <run_dir>/look.pyz) instead of this module, sparing the ranks a module start
        per look. Not shown in the task's C(invocation).
    type: str
  script_args:
    description: Arguments for the script.
    type: list
    elements: str
    default: []
  nnodes:
    description: Number of nodes. Required with O(state=started).
    type: int
  node_rank:
    description: Rank of this node. Required with O(state=started).
    type: int
  nproc_per_node:
    description: Workers on this node. Required with O(state=started).
    type: int
  rank_offset:
    description: Global rank of this node's local rank 0 (to name the rank logs).
    type: int
    default: 0
  master_addr:
    description: The master's address on the fabric. Required with O(state=started).
    type: str
  master_port:
    description: MASTER_PORT. Required with O(state=started).
    type: int
  local_addr:
    description: This node's address on the fabric (torchrun C(--local-addr)).
    type: str
  rdzv_id:
    description: Rendezvous id; names torchrun's log sub-directory.
    type: str
    default: nccl-preflight
  env_file:
    description:
      - File of shell-quoted C(KEY=value) lines added to the environment.
      - With O(env_content), the file is written first; it must then be directly inside
        O(run_dir) (default C(<run_dir>/nccl.env)). Without it, the file must already exist.
    type: path
  env_content:
    description:
      - With O(state=started), the whole text of O(env_file), written atomically (a temporary file
        in O(run_dir), then a rename) with O(env_file_mode) before it is read; so nccl.env needs no
        call of its own.
    type: str
  env_file_mode:
    description: Octal mode of O(env_file) written from O(env_content), as a string.
    type: str
    default: "0600"
  environment:
    description: More environment for torchrun (wins over O(env_file)).
    type: dict
    default: {}
  timeout:
    description: Seconds torchrun may run before its whole tree is ended.
    type: int
    default: 300
  kill_grace:
    description: Seconds between SIGTERM and SIGKILL when ending the tree.
    type: int
    default: 5
  port_wait_timeout:
    description:
      - With O(state=started) on node rank 0, seconds to wait until MASTER_PORT is free; the task
        fails when it is still in use then. 0 does not wait.
    type: int
    default: 30
  warm_dir:
    description:
      - With O(state=started), the pre-flight's listener directory on this node. Where its
        listener process holds the torch probe started warm by M(nccl_facts) (the same Python),
        that process becomes the supervisor and the probe becomes torchrun, so torch is not
        imported again; otherwise torchrun starts in a new process.
    type: path
  warden:
    description:
      - With O(state=started), the run's warden watches this node (M(nccl_facts) O(tether)
        started it). The start holds the warden's pass while it starts torchrun, and is refused,
        starting nothing, once the warden ended the run because its control machine went away.
    type: bool
    default: false
  stop_reason:
    description:
      - With O(state=finished), end the run at once instead of waiting, and record this reason as
        C(stopped_by) in C(launch.json) (for example, another node could not start).
      - With O(state=stopped), the reason replaces C(stopped_by) of a run that was still alive;
        when no C(launch.json) exists (the run never started), it is recorded as its C(error).
    type: str
    default: ""
  collect:
    description: Return the run's results in RV(collected_archive).
    type: bool
    default: false
  collect_log_max_bytes:
    description: A log longer than this keeps only its last this many bytes in the archive.
    type: int
    default: 4194304
  collect_to:
    description:
      - Directory on the control machine to unpack the results into (C(rank-<R>.json),
        C(rank-<R>.log), C(torchrun.log), C(launch.json), C(nccl-rank-<R>.log)); sets
        O(collect).
      - Handled by this module's action plugin on the control machine, never by the node.
    type: path
  remove_run_dir:
    description:
      - With O(state=finished) or O(state=stopped), remove O(run_dir) once nothing of the run is
        alive and the results are packed.
    type: bool
    default: false
  watch_s:
    description:
      - With O(state=finished), look for at most this many seconds; when the run is still alive
        then, return at once with RV(running) true and RV(progress), ending nothing. 0 waits
        until the run ended (one call as long as the run).
      - Each such look leaves C(<run_dir>/watch.json); the supervisor ends the run when no look
        came for O(watch_stale_s) seconds (the control machine is gone).
    type: float
    default: 0
  watch_stale_s:
    description:
      - Seconds without a look after which the supervisor ends a watched run.
      - 0 leaves no mark. The watch passes 0 where the run's warden watches the control machine,
        so that a loaded control machine's slow looks end nothing.
    type: float
    default: 30
  watch_ifname:
    description:
      - With O(watch_s), a look that finds the run alive also returns RV(interface), this fabric
        interface's state and carrier now.
    type: str
  diagnose:
    description:
      - With O(state=finished), end nothing and return RV(diagnosis) at once, a stall's evidence
        on this node. Keys C(ifname) (the fabric interface whose state and carrier to read),
        C(probes) (a list of C({host, address, port}) to open a TCP connection to; refused counts
        as reachable), C(probe_timeout) (seconds, default 2), C(source) (address to bind).
      - Of a watched run (C(watch.json) exists) it counts as a look, renewing the mark for
        O(watch_stale_s).
    type: dict
  stop_details:
    description:
      - With O(stop_reason), recorded as C(stop) in C(launch.json) (what the watch knew, such as
        a stall's culprits, ranks, test and size).
    type: dict
  watch:
    description:
      - Handled by this module's action plugin on the control machine, never by the node; it
        calls this module with O(watch_s) until the run ended, prints the host's ranks' progress,
        ends the run when another host's run failed, when no rank advanced for the stall timeout
        (after a O(diagnose) call on every host), or when torchrun waits in its exit barrier for
        a host whose ranks failed. Keys C(host), C(report_dir) (holds every host's
        C(<host>/progress.json)), C(hosts) (node-rank order, each C(host), C(ranks), C(ifname),
        C(address), C(preflight_state), C(probes)), C(interval), C(stall_timeout) (0 - none),
        C(progress) (C(auto), C(terminal), C(log), C(off)), C(progress_interval), C(python) (the
        node's Python that runs C(<run_dir>/look.pyz) for each look; without it, or when that
        fails, a look is a call of this module).
    type: dict
  tether:
    description:
      - The action plugin's, with O(state=finished) - M(nccl_facts)' RV(tether) result for this
        node (C(ready), C(note)). With C(ready) the run's warden watches the node, so the looks
        of O(watch) leave no mark (O(watch_stale_s) 0), and a run whose directory is gone is
        reported lost in the warden's words, which its tether keeps at C(note) on the control
        machine.
    type: dict
  start:
    description:
      - Handled by this module's action plugin on the control machine. The options of
        O(state=started) as one dict, that call's options; with O(state=finished) torchrun is
        started with them first, in the same task (one call per node instead of two, right when
        every host runs the task at once). A node whose start fails says so to the other hosts'
        O(watch), which end their runs (the rendezvous cannot complete).
    type: dict
attributes:
  check_mode:
    support: none
    details: Starting or ending processes cannot be predicted; in check mode the task is skipped.
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Start the collectives on every node at once
  nccl_torchrun:
    state: started
    run_dir: "{{ nccl_env_run_dir }}"
    python: "{{ nccl_env_python }}"
    script_src: files/nccl_check.py  # shipped as <run_dir>/nccl_check.pyz
    script_args: ["--out-dir", "{{ nccl_env_run_dir }}/results"]
    nnodes: "{{ nccl_env_nnodes }}"
    node_rank: "{{ nccl_env_node_rank }}"
    nproc_per_node: "{{ nccl_env_nproc_per_node }}"
    rank_offset: "{{ nccl_env_rank_offset }}"
    master_addr: "{{ nccl_env_master_addr }}"
    master_port: "{{ nccl_env_master_port }}"
    local_addr: "{{ nccl_env_address }}"
    run_dir_mode: "0700"
    env_file: "{{ nccl_env_file }}"
    env_content: "{{ nccl_env_file_content }}"
    env_file_mode: "0600"
    timeout: 300

- name: Wait for the run to end on the node and bring its results to the control machine
  nccl_torchrun:
    state: finished
    run_dir: "{{ nccl_env_run_dir }}"
    rank_offset: "{{ nccl_env_rank_offset }}"
    collect_to: "reports/{{ nccl_run_id }}/{{ inventory_hostname }}"
    remove_run_dir: true
  register: launch_result

- name: Start torchrun and wait for it in one call per node (every host runs the task at once)
  nccl_torchrun:
    run_dir: "{{ nccl_env_run_dir }}"
    start: "{{ launch_start_options }}"  # the options of state=started above, as a dict
    collect_to: "reports/{{ nccl_run_id }}/{{ inventory_hostname }}"

- name: End everything the run left behind
  nccl_torchrun:
    run_dir: "{{ nccl_env_run_dir }}"
    state: stopped
"""

RETURN = r"""
torchrun_rc:
  description:
    - torchrun's exit status (negative = killed by that signal); null when unknown or still running.
    - Not named C(rc), so that a failed check does not fail the task; the report judges.
  returned: always
  type: int
  sample: 0
timed_out:
  description: Whether the run hit O(timeout).
  returned: always
  type: bool
stopped_by:
  description: Why the run was ended early (a signal name or O(stop_reason)), else null.
  returned: always
  type: str
stop:
  description:
    - What the watch knew when it ended the run (O(stop_details), as C(stop) in C(launch.json)),
      else null. A stall's C(culprits) name its cause (a link down, a peer that does not answer).
  returned: state=finished and state=stopped, once the run ended
  type: dict
killed_pids:
  description:
    - Recorded processes that were still alive at the end of the run and were ended (by the
      supervisor at the timeout or by this call); as C(killed_pids) in C(launch.json).
  returned: always
  type: list
  elements: int
ended_now:
  description: The processes this call itself had to end (a run still alive, or left over).
  returned: when O(state=finished) or O(state=stopped)
  type: list
  elements: int
run_dir_created:
  description: Whether this call made O(run_dir).
  returned: when O(state=started)
  type: bool
env_file:
  description: The environment file that was read (written from O(env_content) when given), or null.
  returned: when O(state=started)
  type: str
  sample: /tmp/nccl-preflight-20261122T010203-abc123-spark-1/nccl.env
cmd:
  description: The torchrun command line.
  returned: when O(state=started)
  type: list
  elements: str
script:
  description: The script torchrun runs (written from O(script_zipapp) or O(script_content)).
  returned: when O(state=started)
  type: str
  sample: /tmp/nccl-preflight-20261122T010203-abc123-spark-1/nccl_check.pyz
supervisor_pid:
  description: The detached process that runs and bounds torchrun.
  returned: when O(state=started)
  type: int
torchrun_pid:
  description: torchrun's pid.
  returned: when O(state=started)
  type: int
warm_start:
  description: torchrun is the pre-flight's held torch probe (O(warm_dir)).
  returned: when O(state=started)
  type: bool
start:
  description: The result of the start made first, with O(start) and O(state=finished).
  returned: when O(state=finished) with O(start)
  type: dict
rank_logs:
  description: The rank logs written under C(<run_dir>/results).
  returned: when O(state=finished) or O(state=stopped)
  type: list
  elements: str
launch_json:
  description: Path of launch.json on the node.
  returned: always
  type: str
collected:
  description: Names of the files in RV(collected_archive).
  returned: when O(collect)
  type: list
  elements: str
truncated:
  description: Names of the logs of which only the end was collected.
  returned: when O(collect)
  type: list
  elements: str
collected_archive:
  description:
    - Base64 of a gzip tar archive of the collected files, flat (no directories).
    - This module's action plugin removes it from the result after unpacking it.
  returned: when O(collect) and the action plugin did not take it
  type: str
collected_to:
  description: Where the action plugin unpacked the collected files on the control machine.
  returned: when O(collect_to)
  type: str
running:
  description: Whether the run is still alive (a look with O(watch_s) or O(diagnose) ended first).
  returned: when O(state=finished)
  type: bool
lost:
  description:
    - Why the run ended without its results, when O(state=finished) found O(run_dir) gone (its
      warden or its supervisor ended it and left nothing). The action plugin then fails the
      task with why and writes the host's C(launch.json) as lost (its ranks are errors).
  returned: when O(state=finished) found O(run_dir) gone
  type: str
progress:
  description:
    - Every rank's place, from its C(rank-<R>.json) (the progress contract of docs/design.md)
      C({rank, status, test, size, index, count, age_s}).
  returned: when O(state=finished)
  type: list
  elements: dict
rank_exits:
  description:
    - The ranks torchrun reported as failed, root cause first C({rank, local_rank, pid, exitcode,
      signal, text, root_cause}); a SIGKILL also has C(oom), the kernel's OOM-killer line or
      null, and C(text) says where to look when the kernel log is not readable.
  returned: when O(state=finished) or O(state=stopped)
  type: list
  elements: dict
workers_exited:
  description: Whether torchrun is alive with every worker exited (in its exit barrier).
  returned: when O(state=finished) and the run is still alive after O(watch_s)
  type: bool
interface:
  description: With O(watch_ifname), C({ifname, state, carrier, reason}) at the look.
  returned: when O(watch_ifname) and the run is still alive
  type: dict
diagnosis:
  description: With O(diagnose), C({interface {ifname, state, carrier, reason}, probes [...]}).
  returned: when O(diagnose)
  type: dict
run_dir_removed:
  description: Whether O(run_dir) was removed.
  returned: when O(state=finished) or O(state=stopped)
  type: bool
"""

from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_preflight.node.payload import guard_payload

# AnsiballZ's payload directory (in the system's temporary directory, not the run's): SIGTERM
# and SIGHUP end this process through the wrapper's cleanup from here on, and main() removes it
# first thing, so that no way out leaves it (node/payload.py).
_LEAVE_NO_PAYLOAD = guard_payload(globals().get("_modlib_path"))
from ansible.module_utils.nccl_preflight.node.processes import is_alive
from ansible.module_utils.nccl_preflight.node.run_look import RefusedRemoval, finish, finished
from ansible.module_utils.nccl_preflight.node.run_progress import (
    read_progress,
    stall_evidence,
    touch_watch,
)
from ansible.module_utils.nccl_preflight.node.start_call import (
    TORCHRUN_EXCLUSIVE,
    TORCHRUN_SPEC,
    StartRefused,
    start_run,
)
from ansible.module_utils.nccl_preflight.node.supervisor import (
    RESULTS_DIR,
    WATCH_FILE,
    read_pids,
    stop_run,
)


def run_started(module: AnsibleModule) -> dict[str, Any]:
    """state=started (node/start_call.py start_run); its refusal is the module's failure."""
    try:
        return start_run(module.params)
    except StartRefused as refused:
        module.fail_json(msg=refused.msg, **refused.details)
        raise  # not reached: fail_json ends the module


# ------------------------------------------------------------------------------------------------
# state=finished and state=stopped
# ------------------------------------------------------------------------------------------------


def finish_call(module: AnsibleModule, result: dict[str, Any]) -> dict[str, Any]:
    """What state=finished and state=stopped share at the end: collect, then remove."""
    params = module.params
    try:
        return finish(
            Path(params["run_dir"]),
            result,
            bool(params["collect"] or params["collect_to"]),
            params["collect_log_max_bytes"],
            params["remove_run_dir"],
        )
    except RefusedRemoval as exc:
        module.fail_json(msg=str(exc))


def run_finished(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    if params["diagnose"] is not None and not params["stop_reason"]:
        return diagnose_run(Path(params["run_dir"]), params["diagnose"], params["watch_stale_s"])
    try:
        return finished(params)
    except RefusedRemoval as exc:
        module.fail_json(msg=str(exc))


def diagnose_run(run_dir: Path, spec: dict[str, Any], stale_s: float) -> dict[str, Any]:
    """A stall's evidence on this node: the fabric interface now and a TCP probe of each peer.
    Of a watched run it is a look too: the watch mark is renewed for ``stale_s``."""
    if (run_dir / WATCH_FILE).is_file():
        touch_watch(run_dir / WATCH_FILE, stale_s)
    doc = read_pids(run_dir) or {}
    alive = bool(doc) and is_alive(doc.get("supervisor_pid") or 0, doc.get("supervisor_starttime"))
    diagnosis = stall_evidence(spec)  # up to probe_timeout per peer: the progress read after it
    return {
        "changed": False,
        "running": alive,
        "progress": read_progress(run_dir / RESULTS_DIR),
        "diagnosis": diagnosis,
    }


def run_stopped(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    run_dir = Path(params["run_dir"])
    reason = params["stop_reason"] or None
    result = stop_run(
        run_dir, params["kill_grace"], params["timeout"], params["rank_offset"], reason
    )
    return finish_call(module, result)


def main() -> None:
    _LEAVE_NO_PAYLOAD()
    module = AnsibleModule(
        argument_spec=TORCHRUN_SPEC,
        mutually_exclusive=TORCHRUN_EXCLUSIVE,
        supports_check_mode=False,
    )
    run = {"started": run_started, "finished": run_finished, "stopped": run_stopped}
    module.exit_json(**run[module.params["state"]](module))


if __name__ == "__main__":
    main()
