# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The stage API: one function per decision between the stages, called by both front-ends.

The Ansible front-end calls these through plugins/filter/nccl_stage.py (roles/launch,
roles/preflight); the Slurm front-end (slurm/run.py ``SlurmRun``) calls them directly, with
the same variables. Each function takes ``knobs``, a mapping of the run's variables by their
names (nccl_*, launch_*, preflight_*): on the Ansible path the role passes the variables it
has (roles/launch/vars/main.yml ``launch_stage_knobs``), under Slurm the loaded config
(core/config.py load_config). A variable that is absent or None takes its default from the one
place defaults live (core/config.py ``defaults()``); a name without a default there is an
error naming it, never a silent guess.

Decisions here: the timeouts of a launch (``check_timeout``, ``relaunch_timeout``,
``kill_grace``), what makes
``nccl_pairwise=auto`` run the pairwise rounds (``pair_triggers``), the rank script's argv of
the main launch (``rank_args``) and of the pairwise-only relaunch (``relaunch_rank_args``),
why the launch is skipped (``skip_reason``) and the plan document, plan.json
(``plan_document``, with nccl_baseline as the report reads it: ``baseline_dir``), and the
pre-flight judge's settings (``preflight_settings``); the environment stage: the rank layout
(``rank_layout``), the run's backend (``run_backend``) and each node's environment
(``node_environment``: its fabric interface and address, the rendezvous and the ranks'
variables, nccl.env's), ``node_environments`` all three for every node at once (the Slurm
front-end; roles/nccl_env takes the same three in its own tasks, one per host where it can).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from nccl_preflight.core.config import defaults
from nccl_preflight.core.env_file import env_file_path, rank_environment
from nccl_preflight.core.layout import nccl_rank_layout
from nccl_preflight.core.pair_triggers import nccl_pair_trigger_args, nccl_pair_triggers
from nccl_preflight.core.pairwise_relaunch import nccl_relaunch_check_args
from nccl_preflight.core.preflight.backend_checks import nccl_backend_choice
from nccl_preflight.core.support import nccl_predicted_skips, predicted_skips
from nccl_preflight.node.supervisor import RESULTS_PLACEHOLDER

# The rank script's --out-dir under Slurm: the node puts its own run directory's results/ in
# place of it (slurm/node_step.py launch). Its one home is the node room, which replaces it.
RESULTS_DIR = RESULTS_PLACEHOLDER

# The pairwise-only relaunch (roles/launch/tasks/pairwise_run.yml, SlurmRun.launch): its bound
# is at most nccl_run_timeout and RELAUNCH_TIMEOUT_S (launch_relaunch_timeout overrides it);
# each rank of a pair sends RELAUNCH_PAIR_BYTES per exchange (launch_relaunch_pair_bytes),
# RELAUNCH_PAIR_ITERS timed exchanges per pair (launch_relaunch_pair_iters). Small, so that a
# pair with a very slow node still ends within the ranks' --timeout instead of hanging the rest.
RELAUNCH_TIMEOUT_S = 120
RELAUNCH_PAIR_BYTES = "64K"
RELAUNCH_PAIR_ITERS = 2
# The ranks' own watchdog (--timeout) ends a phase this long before the launch's bound, at
# least CHECK_MARGIN_MIN_S, else CHECK_MARGIN_SHARE of it: a rank stuck early records where
# it was stuck before the whole tree is ended.
CHECK_MARGIN_MIN_S = 5
CHECK_MARGIN_SHARE = 0.1
# Seconds between SIGTERM and SIGKILL when a run's processes are ended (launch_kill_grace).
KILL_GRACE_S = 5


class StageError(ValueError):
    """A variable a stage needs has no value and no default (its name is in the message)."""


def knob(knobs: Mapping[str, Any], name: str) -> Any:
    """The variable ``name`` of ``knobs``, else its default (core/config.py defaults())."""
    value = knobs.get(name)
    if value is not None:
        return value
    plain = defaults()
    if plain.get(name) is None:
        raise StageError(f"{name}: no value given and no default")
    return plain[name]


def _given(knobs: Mapping[str, Any], name: str) -> Any:
    """An optional override: its value, or None when unset or empty."""
    value = knobs.get(name)
    return None if value is None or value == "" else value


def _given_or(knobs: Mapping[str, Any], name: str, default: Any) -> Any:
    given = _given(knobs, name)
    return default if given is None else given


def kill_grace(knobs: Mapping[str, Any]) -> int:
    """Seconds between SIGTERM and SIGKILL when a run's processes are ended: launch_kill_grace
    when set, else KILL_GRACE_S."""
    return int(_given_or(knobs, "launch_kill_grace", KILL_GRACE_S))


def under(bound: Any) -> int:
    """The ranks' --timeout for a launch bounded by ``bound`` seconds."""
    bound = int(bound)
    return bound - max(CHECK_MARGIN_MIN_S, int(bound * CHECK_MARGIN_SHARE))


def check_timeout(knobs: Mapping[str, Any]) -> int:
    """The main launch's --timeout of every rank: launch_check_timeout when set, else a
    little under nccl_run_timeout (``under``)."""
    given = _given(knobs, "launch_check_timeout")
    if given is not None:
        return int(given)
    return under(knob(knobs, "nccl_run_timeout"))


def relaunch_timeout(knobs: Mapping[str, Any]) -> int:
    """Seconds the whole pairwise-only relaunch may take: launch_relaunch_timeout when set,
    else the smaller of nccl_run_timeout and RELAUNCH_TIMEOUT_S."""
    given = _given(knobs, "launch_relaunch_timeout")
    if given is not None:
        return int(given)
    return min(int(knob(knobs, "nccl_run_timeout")), RELAUNCH_TIMEOUT_S)


def pair_triggers(
    knobs: Mapping[str, Any], hosts: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """What makes nccl_pairwise=auto run the pairwise rounds (core/pair_triggers.py), from
    plan.json's host rows and nccl_expected_busbw, nccl_busbw_warn, nccl_busbw_efficiency."""
    return nccl_pair_triggers(
        list(hosts or []),
        knobs.get("nccl_expected_busbw") or {},
        knob(knobs, "nccl_busbw_warn"),
        knob(knobs, "nccl_busbw_efficiency"),
    )


def ranks_per_node(layout: Mapping[str, Any]) -> str:
    """--ranks-per-node: every node's count in node-rank order (core/layout.py's layout)."""
    return ",".join(str(row["nproc_per_node"]) for row in layout["hosts"])


def _head(layout: Mapping[str, Any], backend: str, out_dir: str, timeout: int) -> list[str]:
    """The options every launch sets (core/rank_args.py FRONT_END_OPTIONS)."""
    return [
        *("--out-dir", str(out_dir), "--backend", str(backend)),
        *("--timeout", str(timeout), "--ranks-per-node", ranks_per_node(layout)),
    ]


def _check_args(knobs: Mapping[str, Any]) -> list[str]:
    return [str(arg) for arg in knobs.get("nccl_check_args") or []]


def pairwise_args(knobs: Mapping[str, Any], triggers: list[dict[str, Any]]) -> list[str]:
    """The pairwise rounds' options of the main launch (nccl_check_args, after them, win)."""
    return [
        *("--pairwise", str(knob(knobs, "nccl_pairwise"))),
        *("--pair-min-ratio", str(knob(knobs, "nccl_pair_min_ratio"))),
        *("--pair-rounds", str(knob(knobs, "nccl_pair_rounds"))),
        *("--pair-trigger-min-bytes", str(knob(knobs, "nccl_busbw_min_bytes"))),
        *nccl_pair_trigger_args(list(triggers or [])),
    ]


def rank_args(
    knobs: Mapping[str, Any],
    layout: Mapping[str, Any],
    backend: str,
    out_dir: str,
    triggers: list[dict[str, Any]],
) -> list[str]:
    """The rank script's argv of the main launch: the front-end's options, the pairwise
    rounds' (``pairwise_args``), then nccl_check_args (the last of an option wins)."""
    head = _head(layout, backend, out_dir, check_timeout(knobs))
    return [*head, *pairwise_args(knobs, triggers), *_check_args(knobs)]


def relaunch_rank_args(
    knobs: Mapping[str, Any], layout: Mapping[str, Any], backend: str, out_dir: str
) -> list[str]:
    """The rank script's argv of the pairwise-only relaunch: nccl_check_args without what the
    relaunch sets (core/pairwise_relaunch.py), then only barrier and the pairwise rounds with a
    small payload, its --timeout a little under ``relaunch_timeout``."""
    pair_bytes = _given_or(knobs, "launch_relaunch_pair_bytes", RELAUNCH_PAIR_BYTES)
    pair_iters = _given_or(knobs, "launch_relaunch_pair_iters", RELAUNCH_PAIR_ITERS)
    return [
        *_head(layout, backend, out_dir, under(relaunch_timeout(knobs))),
        *nccl_relaunch_check_args(_check_args(knobs)),
        *("--tests", "barrier", "--pairwise", "always"),
        *("--pair-bytes", str(pair_bytes), "--pair-iters", str(pair_iters)),
        *("--pair-min-ratio", str(knob(knobs, "nccl_pair_min_ratio"))),
        *("--pair-rounds", str(knob(knobs, "nccl_pair_rounds"))),
    ]


def skip_reason(order: list[str], absent: list[str], failed: list[str]) -> str:
    """Why the launch is skipped ("" when it runs): a node of the run dropped out before it
    (a static rendezvous needs every node), or the pre-flight failed on ``failed``."""
    if absent:
        return (
            f"static rendezvous needs all {len(order)} nodes, but {', '.join(absent)} dropped "
            "out before launch (unreachable or failed)"
        )
    if failed:
        return (
            f"the pre-flight failed on {', '.join(failed)}: a launch would only wait for "
            "nccl_run_timeout; fix those checks first"
        )
    return ""


def baseline_dir(knobs: Mapping[str, Any], report_root: str) -> str:
    """nccl_baseline as the report reads it: "" when unset, a directory as given, a run id
    under ``report_root`` (nccl_report_root)."""
    baseline = str(knobs.get("nccl_baseline") or "")
    if not baseline or os.path.isabs(baseline):
        return baseline
    return f"{report_root}/{baseline}"


def plan_document(
    knobs: Mapping[str, Any],
    *,
    run_id: str,
    hosts: list[dict[str, Any]],
    layout: Mapping[str, Any],
    master_addr: str,
    master_port: Any,
    backend: str,
    skipped: str,
    report_root: str,
    script_text: str | None = None,
    front_end: str | None = None,
) -> dict[str, Any]:
    """plan.json: the ranks every host is expected to run and what the report judges them
    with. ``hosts``: the rows of core/launch_hosts.py plan_host; ``script_text``: the launch
    script when it is one's own (None: the project's, files/nccl_check.py); ``front_end``:
    "slurm" under Slurm, None (no key) on the Ansible path (core/run_data.py)."""
    check_args = _check_args(knobs)
    if script_text is None:
        skips = predicted_skips(backend, check_args)
    else:
        skips = nccl_predicted_skips(script_text, backend, check_args)
    plan: dict[str, Any] = {
        "run_id": str(run_id),
        "hosts": list(hosts),
        "world_size": int(layout["world_size"]),
        "master_addr": str(master_addr),
        "master_port": int(master_port),
        "backend": str(backend),
        "run_timeout_s": int(knob(knobs, "nccl_run_timeout")),
        "check_args": check_args,
        "pair_triggers": pair_triggers(knobs, hosts),
        "launch_skipped": str(skipped).strip(),
        "bandwidth": {
            "expected_busbw": dict(knobs.get("nccl_expected_busbw") or {}),
            "warn": float(knob(knobs, "nccl_busbw_warn")),
            "crit": float(knob(knobs, "nccl_busbw_crit")),
            "efficiency": float(knob(knobs, "nccl_busbw_efficiency")),
            "min_bytes": int(knob(knobs, "nccl_busbw_min_bytes")),
            "baseline": baseline_dir(knobs, report_root),
        },
        "predicted_skips": skips,
    }
    if front_end:
        plan["front_end"] = front_end
    return plan


def preflight_settings(
    knobs: Mapping[str, Any],
    order: list[str],
    master: str,
    extra_env_by_host: Mapping[str, Any],
) -> dict[str, Any]:
    """The pre-flight judge's settings (core/preflight/judge.py): the nodes in node-rank order,
    the master, and the run's variables the checks read (nccl_require_gpu, nccl_gpus_per_node,
    nccl_extra_env, nccl_backend and the pre-flight's preflight_* worked out for the run);
    ``extra_env_by_host``: each node's own nccl_extra_env (the fabric checks read it)."""
    return {
        "master": str(master),
        "order": [str(node) for node in order],
        "require_gpu": bool(knob(knobs, "nccl_require_gpu")),
        "gpus_per_node": int(knob(knobs, "nccl_gpus_per_node")),
        "expected_versions": dict(knob(knobs, "preflight_expected_versions")),
        "clock_check": bool(knob(knobs, "preflight_clock_check")),
        "clock_max_skew_s": float(knob(knobs, "preflight_clock_max_skew_s")),
        "full_mesh": bool(knob(knobs, "preflight_full_mesh")),
        # NCCL_IB_HCA, NCCL_IB_DISABLE, CUDA_VISIBLE_DEVICES for the GPU health checks
        "extra_env": dict(knobs.get("nccl_extra_env") or {}),
        # auto, or the backend set: the backend_choice check compares the hosts' own choices
        "requested_backend": str(knob(knobs, "nccl_backend")),
        "extra_env_by_host": {str(node): dict(extra_env_by_host.get(node) or {}) for node in order},
    }


def run_backend(knobs: Mapping[str, Any], master_facts: Mapping[str, Any] | None) -> str:
    """The one backend of every rank: the master's choice (nccl_backend; auto: what the
    master's devices call for, core/preflight/backend_checks.py). Each node's own choice is
    in plan.json."""
    return str(
        nccl_backend_choice(dict(master_facts or {}), str(knob(knobs, "nccl_backend")))["backend"]
    )


def _own(knobs: Mapping[str, Any], mine: Mapping[str, Any], name: str) -> Any:
    """A node's own value of ``name`` (its host_vars, nccl_node_vars), else the run's."""
    value = mine.get(name)
    return knob(knobs, name) if value is None else value


def rank_layout(
    knobs: Mapping[str, Any],
    order: list[str],
    knobs_by_node: Mapping[str, Mapping[str, Any] | None],
    facts_by_node: Mapping[str, Mapping[str, Any] | None],
) -> dict[str, Any]:
    """The one rank layout (core/layout.py) of the nodes in node-rank ``order``: a node's
    nccl_slots (the hostfile's slots=), else the devices its backend choice counts (a node
    without facts, unreachable, counts none), else its nccl_nproc_per_node."""
    requested = str(knob(knobs, "nccl_backend"))
    mine = {node: knobs_by_node.get(node) or {} for node in order}
    devices = [
        nccl_backend_choice(dict(facts_by_node[node]), requested)["devices"]
        if facts_by_node.get(node) is not None
        else None
        for node in order
    ]
    return nccl_rank_layout(
        order,
        [mine[node].get("nccl_slots") for node in order],
        devices,
        [_own(knobs, mine[node], "nccl_nproc_per_node") for node in order],
    )


def node_environment(
    knobs: Mapping[str, Any],
    node: str,
    layout: Mapping[str, Any],
    *,
    choice: Mapping[str, Any] | None,
    facts: Mapping[str, Any] | None,
    master_address: str,
    backend: str,
    run_dir: str | None,
) -> dict[str, Any]:
    """The environment of ``node``, from its own variables (``knobs``: nccl_master_port,
    nccl_python, nccl_debug, nccl_debug_subsys, nccl_extra_env), its fabric choice
    (node/fabric_choice.py: ifname, address, reason; None when it has none), its facts, its row
    of ``layout``, the master's fabric address and the run's backend (``run_backend``):

        ifname, ifname_reason, address   the fabric interface, why, the node's address on it
        master_addr, master_port         the static rendezvous (MASTER_ADDR on the fabric)
        nnodes, node_rank, nproc_per_node, world_size, rank_offset   from the layout
        backend, python                  the run's backend; nccl_python, else the interpreter
                                         that read the node's facts, else python3
        run_dir, file                    the node's run directory and its nccl.env ("" when the
                                         node sets its own)
        env                              the ranks' variables (core/env_file.py
                                         rank_environment: nccl.env's, NCCL_DEBUG_FILE only
                                         with a run_dir)
    """
    choice, row = choice or {}, layout["by_host"][node]
    python = _given(knobs, "nccl_python") or (facts or {}).get("module_python") or "python3"
    record: dict[str, Any] = {
        "ifname": str(choice.get("ifname") or ""),
        "ifname_reason": str(choice.get("reason") or ""),
        "address": str(choice.get("address") or ""),
        "master_addr": str(master_address or ""),
        "master_port": int(knob(knobs, "nccl_master_port")),
        "nnodes": int(layout["nnodes"]),
        "node_rank": int(row["node_rank"]),
        "nproc_per_node": int(row["nproc_per_node"]),
        "world_size": int(layout["world_size"]),
        "rank_offset": int(row["rank_offset"]),
        "backend": str(backend),
        "python": str(python),
        "run_dir": str(run_dir or ""),
        "file": env_file_path(run_dir) if run_dir else "",
    }
    record["env"] = rank_environment(
        record,
        debug=knob(knobs, "nccl_debug"),
        debug_subsys=knobs.get("nccl_debug_subsys"),
        extra_env=knobs.get("nccl_extra_env") or {},
        run_dir=run_dir or None,
    )
    return record


def node_environments(
    knobs: Mapping[str, Any],
    order: list[str],
    knobs_by_node: Mapping[str, Mapping[str, Any] | None],
    facts_by_node: Mapping[str, Mapping[str, Any] | None],
    choices: Mapping[str, Mapping[str, Any] | None],
    run_dirs: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The layout and every node's environment (``node_environment``), the master the first of
    ``order``; ``knobs``: the run's variables, ``knobs_by_node``: each node's own laid over them
    (a node without facts or choice was not reached: its environment is still laid out)."""
    layout = rank_layout(knobs, order, knobs_by_node, facts_by_node)
    master = order[0]
    backend = run_backend(knobs, facts_by_node.get(master))
    master_address = str((choices.get(master) or {}).get("address") or "")
    by_node = {
        node: node_environment(
            {**knobs, **(knobs_by_node.get(node) or {})},
            node,
            layout,
            choice=choices.get(node),
            facts=facts_by_node.get(node),
            master_address=master_address,
            backend=backend,
            run_dir=(run_dirs or {}).get(node),
        )
        for node in order
    }
    return layout, by_node
