# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The variables schema: every variable a user may set, in one place, for both front-ends.

Each ``Variable`` has its name, its type as an Ansible argument spec writes it (``type``,
``elements``, ``choices``), its default, its doc (one line: the comment above it in its role's
defaults file; ``details``, when one line cannot say it all, is what docs/variables.md shows),
whether it may differ between nodes (``per_node``: host_vars on the Ansible path,
``nccl_node_vars`` under Slurm) and what it means under Slurm (``slurm``: True, the Slurm config
takes it with the same meaning; False, it is a role's knob the Slurm config does not name; a
sentence, the config names it only to refuse it with that reason). ``derived``: the default is a
Jinja expression of other variables or of the run (``launch_check_timeout``,
``preflight_listen_timeout``), not a knob; the Slurm front-end works these out itself
(core/config.py ``preflight_values``).

What is made from it (``python docs/make_variables.py``, ``make variables``; a unit test fails when
a committed file differs): every role's defaults file (``FILES``: the file, its opening comment,
its groups; roles/nccl_defaults/defaults/main/*.yml and roles/<role>/defaults/main.yml) and
docs/variables.md. The roles' meta/argument_specs.yml are checked against it by a unit test
(tests/unit/tree/test_variables_schema.py). core/config.py validates the Slurm config by it, and the
Ansible path's roles/validate_inputs (plugins/filter/nccl_variables.py) the inventory's values.

A plain module, not a data file: the wheel and the node bundle carry it as they carry core/, and
a node reads it without PyYAML or importlib.resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Variable:
    """One variable: see the module's doc for the fields."""

    name: str
    type: str  # an argument spec's: str, path, int, float, bool, list, dict
    default: Any  # a Jinja expression when derived; None when it has no default
    doc: str  # one line: the comment above it in its role's defaults file
    elements: str | None = None
    choices: tuple[Any, ...] | None = None
    per_node: bool = False
    slurm: bool | str = True
    derived: bool = False
    details: str = ""  # the whole story, for docs/variables.md ("": the doc says it all)


@dataclass(frozen=True)
class Group:
    """Variables under one heading (``# --- title ---`` in the file; "" for none)."""

    title: str
    variables: tuple[Variable, ...]


@dataclass(frozen=True)
class DefaultsFile:
    """A role's defaults file: its path under roles/, its opening comment, its groups."""

    path: str
    header: str
    groups: tuple[Group, ...]


# Why a pre-flight variable has no meaning under Slurm: a config that sets one is refused with
# the reason, so that no value is silently ignored.
_MASTER = "the master is the allocation's first node, in Slurm's node order"
_LOCK = (
    "the Slurm front-end takes no lock file on the master: the nodes are the allocation's, "
    "and a MASTER_PORT another run holds is named by the master_port check"
)
_BECOME = (
    "the job steps run as the job's user, never with become; "
    "the firewall is read as that user (run the job as root to read it all)"
)
_RUN_DIR = (
    "each job step keeps its files in a private temporary directory of its own (mode "
    "0700), always removed when the step ends"
)
_FAIL = (
    "playbooks/validate.yml sets it false too: a failed check is recorded, "
    "the launch skipped, and the verdict's exit code says so"
)


def report_root(otherwise: str) -> str:
    """nccl_report_root's default: NCCL_PREFLIGHT_REPORT_ROOT (the installed command sets it),
    otherwise the Jinja expression ``otherwise`` (a checkout: reports/ beside playbooks/; the
    collection, core/collection.py: the working directory's)."""
    env = "lookup('ansible.builtin.env', 'NCCL_PREFLIGHT_REPORT_ROOT', default="
    return "{{ " + env + otherwise + ") }}"


# fmt: off
FILES: tuple[DefaultsFile, ...] = (
    DefaultsFile("nccl_defaults/defaults/main/checks.yml",
        "Checks: what counts as ready.", (
        Group("", (
            Variable("nccl_require_gpu", "bool", True,
                ("Every node must show an NVIDIA GPU, also when nccl_backend auto would fall "
                "back to gloo."),
                details=("Require GPUs: a node without a visible NVIDIA GPU fails the "
                "pre-flight check gpu, also when nccl_backend auto would fall back to gloo "
                "(src/nccl_preflight/core/preflight/gpu_presence.py). false (a CPU-only run), "
                "or a backend set to one that needs no GPU (gloo, hccl, ...): the GPU checks "
                "are skipped, with the reason.")),
            Variable("nccl_gpus_per_node", "int", 0,
                "NVIDIA GPUs every node must list (0: as many as the node with the most).",
                details=("NVIDIA GPUs every node must list (nvidia-smi), like NHC's "
                "check_gpu_count: a node with another count fails the check gpu. 0: not set; "
                "every node must then list as many as the node with the most (a node that lost "
                "one fails, named); node-check, judging one node, holds it to a count only "
                "when this is set.")),
            Variable("nccl_expected_versions", "dict", {},
                ("Golden versions every host must have ({torch: ..., nccl: ...}); empty: hosts "
                "compared."),
                details=("Golden versions every host must have, e.g. {torch: \"2.13.0\", nccl: "
                "\"2.27.5\"}. Empty: hosts are only compared with each other.")),
            Variable("nccl_gpu_health", "bool", True,
                ("Check GPU health: memory errors, Xid, PCIe, NVLink, Fabric Manager, topology, "
                "modes."),
                details=("GPU node health (src/nccl_preflight/core/preflight/gpu_checks.py): "
                "memory errors, Xid, PCIe link, NVLink, Fabric Manager, GPU-NIC topology, "
                "modes, torch's view. false: nccl_facts reads none of it and the gpu_* health "
                "checks are skipped, with the reason.")),
            Variable("nccl_dcgm_diag_level", "int", 0,
                ("DCGM diagnostics on every node where dcgmi is installed: 0 off, 1 quick ... 4 "
                "long."),
                details=("DCGM diagnostics on every node when dcgmi is installed: 0 = off, 1 = "
                "quick (seconds), 2 = medium (about 2 minutes), 3 and 4 = long (up to hours; "
                "they stress the GPUs). Killed after nccl_dcgm_diag_timeout seconds."),
                choices=(0, 1, 2, 3, 4)),
            Variable("nccl_dcgm_diag_timeout", "int", 300,
                "Seconds `dcgmi diag` may run on a node before it is killed and reported as not "
                "finished."),
            Variable("nccl_expect_net", "str", "auto",
                ("The network NCCL must use between nodes (auto: IB where an RDMA port is up, "
                "else socket)."),
                details=("Which network NCCL must use between nodes, read from every rank's "
                "NCCL log after the run: auto (IB, RoCE included, where a host has an active "
                "RDMA port on its fabric, else sockets), ib, socket or any. A rank on Socket "
                "where IB was expected fails its `transport` testcase."),
                choices=('auto', 'ib', 'socket', 'any')),
            Variable("nccl_pairwise", "str", "auto",
                ("Time node pairs rail by rail after the tests to name a slow node: auto, "
                "always or never."),
                details=("Pairwise rounds after the tests (which node, which rail): the nodes "
                "are paired round-robin, all pairs of a round at once, each pair timed rail by "
                "rail (local rank i with local rank i), and every suspect re-run with a fast "
                "node. auto: when a bandwidth test failed or a collective fell below "
                "nccl_expected_busbw x nccl_busbw_warn; always; never."),
                choices=('auto', 'always', 'never')),
            Variable("nccl_pair_min_ratio", "float", 0.8,
                "A node pair is slow below this ratio of the reference (median) pair.",
                details=("A node pair is slow below this ratio of the reference pair (the "
                "median node's median pair); a node whose pairs on a rail are mostly slow, and "
                "again with a fast node, is named.")),
            Variable("nccl_pair_rounds", "int", 16,
                ("First-pass pairwise rounds at most (0: every round of the round-robin "
                "tournament)."),
                details=("First-pass rounds at most (0: every round). The whole round-robin "
                "tournament (every node meets every other) when it has no more rounds than "
                "this, i.e. up to 16 nodes; beyond, this many of its rounds spread over it: "
                "each node meets 16 distinct partners (on an odd node count one node rests in "
                "each round: 15 for those), 16 rounds instead of N - 1 (1,023 at 1,024 nodes). "
                "A healthy node is a suspect only when 9 of its 16 pairs are slow; the second "
                "pass clears it.")),
            Variable("nccl_expected_busbw", "dict", {},
                ("Expected busbw (GB/s) per collective ({all_reduce: 40.0}); unlisted: link "
                "speed based."),
                details=("Expected bus bandwidth (GB/s) per collective, e.g. {all_reduce: "
                "40.0}. A collective not listed expects the slowest host's fabric link speed x "
                "nccl_busbw_efficiency (unknown speed: not judged).")),
            Variable("nccl_busbw_warn", "float", 0.8,
                "Warn when a collective's busbw is below this fraction of its expected busbw ..."),
            Variable("nccl_busbw_crit", "float", 0.5,
                "... and fail below this fraction."),
            Variable("nccl_busbw_efficiency", "float", 0.9,
                "The share of the link speed a collective's busbw can reach (nccl-tests' "
                "NCCL_TESTS_MIN_BW rule)."),
            Variable("nccl_busbw_min_bytes", "int", 33554432,
                "Judge the busbw expectation only at this message size (bytes) and above.",
                details=("Judge the expectation only at this size (bytes) and above, where "
                "bandwidth, not latency, decides; the report says so when the sweep "
                "(--max-bytes) never got there.")),
            Variable("nccl_baseline", "str", "",
                ("An earlier run (run id or directory) to compare with; a drop over 10% is "
                "named."),
                details=("An earlier run to compare with: its run id (under nccl_report_root) "
                "or its directory. Every collective and node pair that dropped more than 10% "
                "is named. Empty: no comparison.")),
        )),
    )),
    DefaultsFile("nccl_defaults/defaults/main/launch.yml",
        "Launch: what runs on the nodes.", (
        Group("", (
            Variable("nccl_backend", "str", "auto",
                ("Collective backend: auto (from the master's devices), nccl, gloo, hccl, xccl, "
                "mpi, ucc."),
                details=("Collective backend: auto (from the master's devices: nccl on NVIDIA "
                "GPUs, hccl on Ascend NPUs, xccl on Intel XPUs, else gloo; each host's "
                "nccl.env says what it found), nccl, gloo, hccl, xccl, mpi, ucc."),
                choices=('auto', 'nccl', 'gloo', 'hccl', 'xccl', 'mpi', 'ucc')),
            Variable("nccl_nproc_per_node", "int", 1,
                "Ranks per node when the hostfile gives no slots=N and no GPU is found.",
                per_node=True),
            Variable("nccl_python", "str", "",
                "The node's Python, the one with torch. Empty: the interpreter Ansible uses on "
                "that host."),
            Variable("nccl_run_timeout", "int", 300,
                "Seconds the whole torchrun phase may take before every rank is ended."),
            Variable("nccl_stall_timeout", "float", 30,
                ("Seconds without any rank advancing before the run is ended as a stall (0: no "
                "watch)."),
                details=("Seconds without any rank advancing (its test and message size stay "
                "the same) before the run is ended and diagnosed as a stall (fabric link state "
                "and carrier, a TCP probe of the ring); longer when the sizes before predict "
                "more. 0: no stall detection, only nccl_run_timeout.")),
            Variable("nccl_check_args", "list", [],
                ("Extra arguments for files/nccl_check.py (sizes, tests, dtype), checked before "
                "any node."),
                details=("Extra arguments for files/nccl_check.py (sizes, thresholds, tests, "
                "dtype), as a list; parsed by its own parser on the control machine before any "
                "node is touched (a wrong option: exit 12)."), elements="str"),
            Variable("nccl_run_root", "path", "/tmp",
                "Directory on each node under which the private run directory of a run is made "
                "(and removed)."),
            Variable("nccl_run_dir", "str",
                "{{ nccl_run_root }}/nccl-preflight-{{ nccl_run_id }}-{{ inventory_hostname }}",
                "This run's private directory on this host (mode 0700, removed at the end).",
                details=("The private run directory of this run on this host (mode 0700; "
                "removed at the end). Not a knob: derived here once so that every play and "
                "role agrees on it."),
                derived=True),
        )),
    )),
    DefaultsFile("nccl_defaults/defaults/main/network.yml",
        "Network: how the ranks find each other. Every variable here may be set per host in "
        "host_vars or per site in group_vars.", (
        Group("", (
            Variable("nccl_master_port", "int", 29500,
                "Port of the rendezvous store on the master (MASTER_PORT), 1024-65535."),
            Variable("nccl_socket_ifname", "str", "",
                ("Fabric interface for NCCL and Gloo (empty: from nccl_fabric_cidr or the "
                "master's route)."),
                details=("Fabric interface for NCCL and Gloo on a host. Empty: chosen from "
                "nccl_fabric_cidr, else the interface that routes to the master. Hosts may use "
                "different names (enp1s0f0np0, enp1s0f1np1)."), per_node=True),
            Variable("nccl_fabric_cidr", "str", "",
                "The fabric network as a CIDR (192.168.100.0/24). Empty: not used to choose the "
                "interface.", per_node=True),
            Variable("nccl_extra_env", "dict", {},
                "Extra environment for every rank, rendered into nccl.env (NCCL_IB_HCA, "
                "NCCL_IB_DISABLE, ...).", per_node=True),
            Variable("nccl_debug", "str", "INFO",
                "NCCL_DEBUG for the ranks (INFO lets the report name the transport NCCL used).",
                details=("NCCL_DEBUG for the ranks: VERSION, WARN, INFO, TRACE. INFO lets the "
                "report say which transport NCCL used (IB, GDRDMA, Socket, P2P, SHM, NVLS); "
                "every rank writes it to its own file (NCCL_DEBUG_FILE in the run directory, "
                "brought back as reports/<run-id>/<host>/nccl-rank-<R>.log), so the console "
                "stays readable. NCCL_DEBUG in nccl_extra_env wins over this.")),
            Variable("nccl_debug_subsys", "str", "INIT,NET,GRAPH",
                "NCCL_DEBUG_SUBSYS when NCCL_DEBUG is INFO or TRACE (empty: not set).",
                details=("NCCL_DEBUG_SUBSYS when NCCL_DEBUG is INFO or TRACE: what the "
                "transport verdict reads. Empty: not set.")),
        )),
    )),
    DefaultsFile("nccl_defaults/defaults/main/report.yml",
        "Report: what the control machine keeps.", (
        Group("", (
            Variable("nccl_report_root", "path",
                report_root("(playbook_dir ~ '/../reports') | realpath"),
                "Directory on the control machine for reports/<run-id>/ and reports/latest.",
                details=("Directory on the control machine for reports/<run-id>/ and "
                "reports/latest (the installed command's: ./reports)."),
                derived=True),
            Variable("nccl_fail_on_error", "bool", True,
                "Fail the play when anything failed (false: finish green; the JUnit says).",
                details=("Fail the play when anything failed. false: always finish green and "
                "let the pipeline read the JUnit.")),
            Variable("nccl_report_textfile_dir", "str", "",
                ("Also write nccl_preflight_run.prom here for node_exporter's textfile "
                "collector."),
                details=("Also write nccl_preflight_run.prom in this directory on the control "
                "machine for node_exporter's textfile collector "
                "(--collector.textfile.directory): the run's class, busbw per collective and "
                "per node pair, its duration and last success time "
                "(src/nccl_preflight/core/metrics.py). Empty: none. The slurm command's "
                "--textfile DIR sets it too.")),
        )),
    )),
    DefaultsFile("launch/defaults/main.yml",
        "Timing: nccl_run_timeout (project-wide) bounds the whole torchrun phase on every node.", (
        Group("", (
            Variable("launch_check_timeout", "int", None,
                ("Seconds each phase of the rank script may take (null: nccl_run_timeout minus "
                "a margin)."),
                details=("Seconds each phase of files/nccl_check.py may take (its --timeout: "
                "check-in, init, each test); its watchdog then records the stuck test and "
                "exits. Unset (null): nccl_run_timeout minus a margin "
                "(src/nccl_preflight/core/stage.py check_timeout, as under Slurm), so a rank "
                "stuck early records where it was stuck before the whole tree is ended at "
                "nccl_run_timeout."),
                slurm=False),
            Variable("launch_relaunch_pair_bytes", "str", None,
                "Bytes per exchange in the pairwise-only relaunch after a hang (null: 64K).",
                details=("Bytes each rank of a pair sends per exchange in the pairwise-only "
                "relaunch after a collective timed out or stalled (tasks/pairwise.yml; K, M, G "
                "suffixes). Unset (null): 64K (core/stage.py RELAUNCH_PAIR_BYTES). Small, so "
                "that a pair with a very slow node still ends within the ranks' --timeout "
                "instead of hanging the rest."),
                slurm=False),
            Variable("launch_relaunch_pair_iters", "int", None,
                "Timed exchanges per pair in that relaunch (null: 2).",
                details=("Timed exchanges per pair in that relaunch (after one warm-up "
                "exchange). Unset (null): 2 (core/stage.py RELAUNCH_PAIR_ITERS)."),
                slurm=False),
            Variable("launch_relaunch_timeout", "int", None,
                "Seconds the whole relaunch may take (null: nccl_run_timeout, at most 120).",
                details=("Seconds the whole relaunch may take; its ranks' --timeout is this "
                "minus a margin. Unset (null): the smaller of nccl_run_timeout and 120 "
                "(core/stage.py relaunch_timeout). It has no stall watch, so a link too dead "
                "even for the small payload ends it at this bound instead of doubling the "
                "run's time."),
                slurm=False),
            Variable("launch_kill_grace", "int", None,
                ("Seconds between SIGTERM and SIGKILL when a run's processes are ended (null: "
                "5)."),
                details=("Seconds between SIGTERM and SIGKILL when a run's processes are ended. "
                "Unset (null): 5 (core/stage.py KILL_GRACE_S, as under Slurm)."),
                slurm=False),
            Variable("launch_port_wait_timeout", "int", 30,
                "Seconds to wait on the master for MASTER_PORT to be free (a previous run's store "
                "closing).", slurm=False),
        )),
        Group("Paths", (
            Variable("launch_script", "path", "{{ role_path }}/../../files/nccl_check.py",
                ("The check every rank runs, shipped as a zipapp into the host's private run "
                "directory."),
                details=("The check every rank runs: with the modules beside it that it "
                "imports, one zipapp written into the host's private run directory as "
                "nccl_check.pyz by the start call."),
                derived=True, slurm=False),
            Variable("launch_collect_log_max_bytes", "int", 4194304,
                "A log longer than this (bytes) comes back with its end only.",
                details=("A log longer than this (bytes) comes back with its end only, after a "
                "line saying what was cut (rank-<R>.log, torchrun.log; NCCL_DEBUG=INFO can "
                "write a lot). The whole log stays on the node only with launch_keep_run_dir."),
                slurm=False),
            Variable("launch_keep_run_dir", "bool", False,
                "Keep each node's run directory after the results were fetched (for debugging by "
                "hand).", slurm=False),
        )),
        Group("Watching the run (docs/design.md, \"Watching a run\")", (
            Variable("launch_watch_interval", "float", 3,
                "Seconds between two looks at a node's ranks from the control machine.",
                details=("Seconds between two looks at a node's ranks from the control machine "
                "(each look is one short module call; between looks the progress is printed "
                "and the other nodes' state is read). Each look costs a Python start on the "
                "node and a worker's call on the control machine (about 0.3 CPU s together, "
                "BENCHMARKS.md); a rank killed on one node ends the others' runs within about "
                "one look, and a terminal shows a host's line at most every "
                "launch_progress_interval anyway."),
                slurm=False),
            Variable("launch_progress", "str", "auto",
                "Progress lines while the ranks run: auto, terminal, log or off.",
                details=("Progress lines while the ranks run: auto (terminal: a host's line "
                "when it changed, at most every launch_progress_interval seconds; not a "
                "terminal, as Jenkins: one line per host per test), terminal, log, or off."),
                choices=('auto', 'terminal', 'log', 'off'), slurm=False),
            Variable("launch_progress_interval", "float", 5,
                "Seconds between two progress lines of a host on a terminal.", slurm=False),
        )),
    )),
    DefaultsFile("nccl_env/defaults/main.yml",
        "Run directory: private to this run and this host, so a shared NFS home works. This role "
        "makes no call on the node: the first call of the pre-flight or the launch there makes "
        "the directory, and the launch's start call writes nccl.env into it; both take these "
        "modes from the host facts this role sets.", (
        Group("", (
            Variable("nccl_env_run_dir_mode", "str", "0700",
                "Mode of the run directory on the node (only the user running the check may enter "
                "it).", slurm=False),
            Variable("nccl_env_file_mode", "str", "0600",
                "Mode of nccl.env inside it (and of its copy in reports/<run-id>/<host>/).",
                slurm=False),
        )),
    )),
    DefaultsFile("preflight/defaults/main.yml",
        "Pre-flight: every check runs on every host; results go to "
        "nccl_report_root/<run-id>/preflight/<host>.json on the control machine.", (
        Group("Who is who", (
            Variable("preflight_master", "str", "{{ groups['nccl_master'][0] }}",
                "The host that holds MASTER_PORT (the first host of the hostfile).",
                derived=True, slurm=_MASTER),
        )),
        Group("Reachability over TCP", (
            Variable("preflight_full_mesh", "bool", False,
                "Probe every peer's ephemeral port instead of only the ring neighbour's (O(N^2): "
                "small clusters)."),
            Variable("preflight_probe_timeout", "float", 3,
                "Seconds each TCP connect may take before the peer is called unreachable."),
            Variable("preflight_listen_timeout", "int",
                "{{ 60 + 10 * (groups['nccl_nodes'] | length) }}",
                "Seconds the pre-flight's listeners live at most (bounds a run gone wrong).",
                details=("Seconds the short-lived listeners (a detached process on each host) "
                "live at most. They are stopped once every host's probes are done "
                "(tasks/main.yml), however forks batches the hosts, so this only bounds a run "
                "that went wrong (the control machine went away and the stop never came): it "
                "must stay well above the time between starting the listeners (the facts play) "
                "and the end of the probes, which grows with the number of hosts - 10 s per "
                "host covers every host's facts and probe calls one after another (forks 1); a "
                "32-host lab on 2 cores under load outlived a fixed 120 s."),
                derived=True),
            Variable("preflight_collect_wait", "float",
                "{{ 2 + 2 * preflight_probe_timeout | float }}",
                ("Seconds a probe call waits for its listeners to get every expected "
                "connection."),
                details=("Seconds the probe call waits, after this host's own probes, for its "
                "listeners to get every expected connection, when every host probes at once "
                "(no more hosts than forks; with more, it does not wait: a peer may only probe "
                "once this host's call ended). Listeners still waiting then are left running "
                "and stopped by one more call after every host's probes, so no value fails a "
                "healthy cluster: a lower one only costs that call on more hosts, a higher one "
                "waits longer for a probe that never comes (a firewall dropping it). A peer "
                "probing at once comes within its own probes' timeouts."),
                derived=True),
        )),
        Group("One validation per master and MASTER_PORT at a time", (
            Variable("preflight_lock", "bool", True,
                ("Take a lock on the master so that a second run of the same master and port is "
                "refused."),
                details=("Take a lock on the master before its listeners start; a second run of "
                "the same master and port is refused (check master_port_free names the run "
                "holding it). A lock whose keeper process is gone (killed, node rebooted) is "
                "taken over, and the run says so."),
                slurm=_LOCK),
            Variable("preflight_lock_path", "path",
                "{{ nccl_run_root }}/nccl-preflight-lock-{{ nccl_env_master_addr | "
                "regex_replace('[^0-9A-Za-z.-]', '_') if nccl_env_master_addr is defined else "
                "'{fabric_address}' }}-{{ nccl_master_port | int }}.json",
                ("The lock file on the master ({fabric_address} filled in with its fabric "
                "address)."),
                details=("The lock file on the master, beside the run directories "
                "(nccl_run_root). The facts play's call takes it, before roles/nccl_env sets "
                "nccl_env_master_addr: the module fills {fabric_address} in with the master's "
                "fabric address, chosen there as nccl_env chooses it."),
                derived=True, slurm=_LOCK),
            Variable("preflight_lock_lifetime", "float",
                "{{ preflight_listen_timeout | int + preflight_python_timeout | int + "
                "nccl_run_timeout | int + 300 }}",
                "Seconds the lock is held at most when the run's directory is never removed.",
                details=("Seconds the lock's keeper holds it at most, when this run's directory "
                "on the master is never removed (the control machine went away, or "
                "launch_keep_run_dir): the whole run's bounds."),
                derived=True, slurm=_LOCK),
        )),
        Group("Versions and devices seen by torch", (
            Variable("preflight_python_timeout", "float", 60,
                "Seconds the node's Python may take to import torch and report its versions.",
                details=("Seconds the node's Python may take to import torch and report its "
                "versions, CUDA and NCCL. It runs beside the listeners, so it costs nothing "
                "while it is faster than the probes.")),
        )),
        Group("Firewall (read only, never changed)", (
            Variable("preflight_become_firewall", "bool", False,
                "Read iptables/nftables with become; needed when ansible_user is not root.",
                slurm=_BECOME),
        )),
        Group("Versions", (
            Variable("preflight_expected_versions", "dict",
                "{{ nccl_expected_versions | default({}) }}",
                ("Golden versions ({python, torch, cuda, nccl, driver}); empty values only "
                "compared."),
                details=("Golden versions ({python, torch, cuda, nccl, driver}); empty values "
                "are only compared across hosts."),
                derived=True),
        )),
        Group("Clock (optional)", (
            Variable("preflight_clock_check", "bool", False,
                "Compare the hosts' clocks; skew is measured through one parallel task, so keep "
                "the bound loose."),
            Variable("preflight_clock_max_skew_s", "float", 5,
                "Largest accepted difference, in seconds, between a host's clock and the median "
                "of all hosts."),
        )),
        Group("Verdict", (
            Variable("preflight_fail", "bool", "{{ nccl_fail_on_error | default(true) }}",
                "Fail the play when a check failed; false: print the failures and let the report "
                "decide.", derived=True, slurm=_FAIL),
        )),
        Group("Files the checks write, all inside the host's private run directory", (
            Variable("preflight_run_dir", "path", "{{ nccl_env_run_dir }}/preflight",
                "Where the listeners and probes keep their files on the node (removed with the "
                "run directory).", derived=True, slurm=_RUN_DIR),
            Variable("preflight_remove_run_dir", "bool",
                "{{ not (launch_keep_run_dir | default(false) | bool) and (ansible_run_tags | "
                "intersect(['all', 'launch']) | length == 0 or 'launch' in ansible_skip_tags) }}",
                "Remove the run directory when the listeners stop and no launch follows.",
                details=("Remove the run directory in the listeners' stop when no launch "
                "follows in this run (--tags preflight, or --skip-tags launch): one call per "
                "host less than the clean-up play would make. -e launch_keep_run_dir=true "
                "keeps it."),
                derived=True, slurm=_RUN_DIR),
        )),
    )),
    DefaultsFile("report/defaults/main.yml",
        "Which run to report on.", (
        Group("", (
            Variable("report_run_id", "str",
                "{{ nccl_run_id | default(hostvars[groups['nccl_nodes'] | default(['localhost']) "
                "| first].nccl_run_id | default('latest')) }}",
                "The run id to report on (latest: the run reports/latest points at).",
                details=("The run id: the one validate_inputs fixed for this run (or -e "
                "nccl_run_id=...); `latest` is the run reports/latest points at."),
                derived=True, slurm=False),
            Variable("report_rebuild_only", "bool",
                "{{ ansible_run_tags | intersect(['all', 'preflight', 'launch']) | length == 0 }}",
                "Only rebuild the report from files collected earlier (--tags report).",
                details=("Only the report stage runs (--tags report): rebuild the JUnit from "
                "the files collected earlier, falling back to reports/latest when the freshly "
                "generated run id has no directory."),
                derived=True, slurm=False),
            Variable("report_ranks_launched", "bool",
                "{{ ansible_run_tags | intersect(['all', 'launch']) | length > 0 and "
                "groups['nccl_env_stopped'] | default([]) | length == 0 and not "
                "ansible_check_mode }}",
                "Whether ranks were launched (a run without any rank result is then an error).",
                details=("Ranks were launched (a run with no rank result is an error) when the "
                "launch stage ran. Not when the environment stage stopped the run (group "
                "nccl_env_stopped): nothing was launched, and the report says why per host; "
                "nor in check mode (--check), which launches nothing."),
                derived=True, slurm=False),
            Variable("report_max_problems", "int", 10,
                "At most this many problem lines in the failure message (all are in summary.md "
                "and the JUnit).", slurm=False),
            Variable("report_html", "bool", True,
                "Write reports/<run-id>/report.html (needs jinja2 and matplotlib).",
                details=("Write reports/<run-id>/report.html (one self-contained page: verdict, "
                "failures with their fix, pre-flight table, busbw plots; needs jinja2 and "
                "matplotlib on the control machine)."),
                slurm=False),
            Variable("report_html_template", "path", "",
                "The jinja2 template of report.html (empty: the project's own).",
                details=("The jinja2 template of report.html, rendered with autoescape by "
                "src/nccl_preflight/core/html.py. Empty: the project's own, "
                "src/nccl_preflight/core/templates/report.html.j2."),
                slurm=False),
            Variable("report_run_started", "float",
                "{{ nccl_run_started | default(hostvars[groups['nccl_nodes'] | "
                "default(['localhost']) | first].nccl_run_started | default(0)) }}",
                "When the run started (unix seconds), for the run's duration; 0: unknown.",
                details=("When the run started, unix seconds (validate_inputs fixes it with the "
                "run id), for the run's duration in nccl_report_textfile_dir's file; 0 (--tags "
                "report alone): unknown, no duration."),
                derived=True, slurm=False),
            Variable("report_verdict_copy", "str", "",
                "Also write verdict.json to this path on the control machine (empty: no copy).",
                details=("Also write verdict.json to this path on the control machine "
                "(bin/nccl-preflight sets it, then exits with the class); empty: only "
                "reports/<run-id>/verdict.json."),
                slurm=False),
        )),
    )),
    DefaultsFile("validate_inputs/defaults/main.yml",
        "Inventory: the groups the hostfile inventory plugin builds.", (
        Group("", (
            Variable("validate_inputs_nodes_group", "str", "nccl_nodes",
                "Group holding every node, in node-rank order.", slurm=False),
            Variable("validate_inputs_master_group", "str", "nccl_master",
                "Group holding the master (node rank 0) alone.", slurm=False),
        )),
    )),
)
# fmt: on

# Variables no role's defaults file holds, given elsewhere.
ELSEWHERE: tuple[Variable, ...] = (
    Variable(
        "nccl_run_id",
        "str",
        None,
        "The run's identifier (unset: a new one each run); letters, digits, '.', '_', '-'.",
        details=(
            "The run's identifier (-e nccl_run_id=..., the Slurm config's too); unset, "
            "each run makes a new one. Letters, digits, '.', '_' and '-' only: it names a "
            "directory."
        ),
    ),
    Variable(
        "nccl_slots",
        "int",
        None,
        "Ranks on this host: the hostfile's slots=N (the hostfile inventory plugin sets it).",
        per_node=True,
        slurm=False,
    ),
    Variable(
        "nccl_node_rank",
        "int",
        None,
        "This host's node rank, its line in the hostfile (set by the inventory plugin).",
        details=(
            "This host's node rank: its line in the hostfile (the hostfile inventory "
            "plugin sets it; never set it by hand)."
        ),
        slurm=False,
    ),
    Variable(
        "nccl_node_vars",
        "dict",
        {},
        "The Slurm config's per-node values: {Slurm hostlist: {variable: value}}.",
        details=(
            "The Slurm config's per-node values: {Slurm hostlist: {variable: value}}, for "
            "the per-node variables (the Ansible path gives them in host_vars)."
        ),
        slurm=True,
    ),
)

# The Slurm front-end's own: the Ansible path refuses it with the host_vars hint.
SLURM_ONLY = ("nccl_node_vars",)


def all_variables() -> tuple[Variable, ...]:
    """Every variable: the defaults files' in their order, then ELSEWHERE's."""
    found = [v for file in FILES for group in file.groups for v in group.variables]
    return (*found, *ELSEWHERE)


VARIABLES: dict[str, Variable] = {v.name: v for v in all_variables()}


def file_of(name: str) -> DefaultsFile | None:
    """The defaults file that holds ``name``'s default, else None."""
    for file in FILES:
        if any(v.name == name for group in file.groups for v in group.variables):
            return file
    return None
