# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The allocation the slurm command asks for: salloc's own options with salloc's meanings, from
the command line, else salloc's input environment variables (SALLOC_*), else the defaults below;
every value checked before salloc runs (README "Run it under Slurm", docs/slurm.md).

- ``--exclusive`` is the default (also without GPUs): a validator that measures bandwidth wants
  the whole node, its every NIC and NVLink, with no other job's traffic in the figures and every
  CPU for its ranks. ``-s/--oversubscribe`` (salloc's own opposite) lets the job share nodes.
- ``--gpus-per-node``: an exclusive job holds every GPU of its nodes, but its steps see only the
  GPUs the job asked for by name (srun(1), --gres: "except those implicitly requested when a job
  is exclusive"), so the GPUs are always asked for: by default, when the run needs them (backend
  ``nccl``, or ``auto`` with ``nccl_require_gpu: true``), ``nccl_gpus_per_node`` when set, else
  the ranks per node (``nccl_nproc_per_node``); none for gloo or a CPU run, nor when SALLOC_GPUS,
  SALLOC_GRES, SALLOC_GPUS_PER_TASK or SALLOC_GPUS_PER_SOCKET asks for them another way.
  ``--gpus-per-node 0`` asks for none (a cluster without GPU GRES).
- Inside an allocation (SLURM_JOB_ID set) none of them can apply: given on the command line they
  are refused with the reason; the SALLOC_* variables are salloc's and no salloc runs.

Command line over environment over default, as salloc itself ranks them; every value goes onto
salloc's command line, which the command prints, so what was asked is what is shown.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import hostlist

# option dest -> (salloc's option, its input environment variable or "")
SALLOC_OPTIONS: dict[str, tuple[str, str]] = {
    "partition": ("--partition", "SALLOC_PARTITION"),
    "account": ("--account", "SALLOC_ACCOUNT"),
    "qos": ("--qos", "SALLOC_QOS"),
    "reservation": ("--reservation", "SALLOC_RESERVATION"),
    "constraint": ("--constraint", "SALLOC_CONSTRAINT"),
    "time": ("--time", "SALLOC_TIMELIMIT"),
    "nodelist": ("--nodelist", ""),
    "exclude": ("--exclude", ""),
    "gpus_per_node": ("--gpus-per-node", "SALLOC_GPUS_PER_NODE"),
    "exclusive": ("--exclusive", "SALLOC_EXCLUSIVE"),
    "oversubscribe": ("--oversubscribe", ""),
    "wait_allocation": ("--wait-allocation", ""),
}
# Other ways of asking salloc for GPUs: when one is set, no --gpus-per-node is added by default.
GPU_VARIABLES = ("SALLOC_GPUS", "SALLOC_GRES", "SALLOC_GPUS_PER_TASK", "SALLOC_GPUS_PER_SOCKET")
# --exclusive's values (Slurm's arg_set_exclusive: none = exclusive, user, mcs, oversubscribe).
EXCLUSIVE_VALUES = ("exclusive", "user", "mcs", "oversubscribe")
DEFAULT_WAIT_S = 600.0  # --wait-allocation
JOB_NAME = "nccl-preflight"
# The Slurm commands the run calls: with its own allocation, and inside the caller's.
OWN_COMMANDS = ("salloc", "squeue", "scancel", "scontrol", "srun")
INSIDE_COMMANDS = ("scontrol", "srun")

# Slurm's time formats (salloc(1) --time): minutes, minutes:seconds, hours:minutes:seconds,
# days-hours, days-hours:minutes, days-hours:minutes:seconds; UNLIMITED/INFINITE; 0 = no limit.
_TIME = re.compile(r"(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?)")
_GPUS = re.compile(r"(?:[A-Za-z0-9_.-]+:)?(\d+)")
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class OptionError(ValueError):
    """A value salloc would refuse (or that cannot apply): the message names the option."""


def time_seconds(text: str) -> float | None:
    """A Slurm time limit in seconds (None: no limit); OptionError when no format matches."""
    value = text.strip()
    if value.upper() in ("UNLIMITED", "INFINITE"):
        return None
    match = _TIME.fullmatch(value)
    if not match:
        raise OptionError(
            f"{text!r} is not a Slurm time: minutes, minutes:seconds, hours:minutes:seconds, "
            "days-hours, days-hours:minutes, days-hours:minutes:seconds, or UNLIMITED"
        )
    days, dh, dm, ds, a, b, c = (int(g) if g else 0 for g in match.groups())
    if match.group(1) is not None:
        seconds = ((days * 24 + dh) * 60 + dm) * 60 + ds
    elif match.group(7) is not None:  # hours:minutes:seconds
        seconds = (a * 60 + b) * 60 + c
    else:  # minutes[:seconds]
        seconds = a * 60 + b
    return float(seconds) if seconds else None  # 0: no limit (salloc(1))


def gpus_problem(text: str) -> str:
    """What is wrong with a --gpus-per-node value ([type:]count[,[type:]count...]), or ""."""
    if text.strip() == "0":
        return ""
    for item in text.split(","):
        match = _GPUS.fullmatch(item.strip())
        if not match or int(match.group(1)) < 1:
            return f"{text!r} is not [type:]count with a count of 1 or more (e.g. 8, a100:8), or 0"
    return ""


def name_problem(text: str) -> str:
    """What is wrong with a partition, account, QOS, reservation or constraint, or ""."""
    if not text:
        return "is empty"
    if text.startswith("-") or any(c.isspace() or not c.isprintable() for c in text):
        return f"{text!r} is not a Slurm name (no spaces or control characters, no leading '-')"
    return ""


def node_names(text: str) -> list[str]:
    """The nodes a --nodelist/--exclude value names: a Slurm hostlist, or (with a '/', as
    salloc reads it) a file of them; OptionError saying what is wrong."""
    source = text
    if "/" in text:
        try:
            source = ",".join(Path(text).read_text(encoding="utf-8").split())
        except (OSError, UnicodeDecodeError) as exc:
            raise OptionError(
                f"{text!r} (a file, as it holds a '/') cannot be read: {exc}"
            ) from None
    try:
        names = [name for part in source.split(",") if part for name in hostlist.expand(part)]
    except hostlist.HostlistError as exc:
        raise OptionError(f"{text!r} is not a Slurm hostlist: {exc}") from None
    bad = [name for name in names if not _NODE.fullmatch(name)]
    if not names or bad:
        raise OptionError(f"{text!r} names no node or a name Slurm would not have: {bad[:3]}")
    return names


@dataclass
class SallocRequest:
    """The run's own allocation as salloc will be asked for it."""

    nodes: int
    options: list[str] = field(default_factory=list)  # --partition=gpu, --exclusive, ...
    sources: dict[str, str] = field(default_factory=dict)  # option -> where its value came from
    wait_s: float = DEFAULT_WAIT_S  # 0: for ever

    def argv(self) -> list[str]:
        return [
            "salloc",
            "-N",
            str(self.nodes),
            "--no-shell",
            f"--job-name={JOB_NAME}",
            *self.options,
        ]


def _given(args: Any, environ: Mapping[str, str], dest: str) -> tuple[str | None, str]:
    """(value, where from): the command line's, else the SALLOC_* variable's, else (None, "")."""
    option, variable = SALLOC_OPTIONS[dest]
    value = getattr(args, dest, None)
    if value is not None:
        return str(value), option
    if variable and variable in environ:
        return environ[variable], variable
    return None, ""


def _exclusivity(args: Any, environ: Mapping[str, str]) -> tuple[str, str]:
    """(salloc's option, where from): --exclusive[=user|mcs] or --oversubscribe."""
    if getattr(args, "oversubscribe", False):
        if getattr(args, "exclusive", None) is not None:
            raise OptionError("--exclusive and --oversubscribe: choose one")
        return "--oversubscribe", "--oversubscribe"
    value, source = _given(args, environ, "exclusive")
    if value is None:
        return "--exclusive", "default"
    word = value.strip().lower() or "exclusive"  # SALLOC_EXCLUSIVE set empty: the flag
    if word not in EXCLUSIVE_VALUES:
        raise OptionError(f"{source} {value!r}: salloc takes {', '.join(EXCLUSIVE_VALUES)}")
    if word == "oversubscribe":
        return "--oversubscribe", source
    return ("--exclusive" if word == "exclusive" else f"--exclusive={word}"), source


def default_gpus(config: Mapping[str, Any]) -> str:
    """--gpus-per-node when nothing asks for GPUs: the run's need ("" = none)."""
    backend = str(config.get("nccl_backend") or "auto")
    needs = backend == "nccl" or (backend == "auto" and bool(config.get("nccl_require_gpu", True)))
    if not needs:
        return ""
    count = config.get("nccl_gpus_per_node") or config.get("nccl_nproc_per_node") or 1
    return str(count)


def _gpus(args: Any, environ: Mapping[str, str], config: Mapping[str, Any]) -> tuple[str, str]:
    value, source = _given(args, environ, "gpus_per_node")
    if value is None:
        if any(name in environ for name in GPU_VARIABLES):
            return "", ""
        return default_gpus(config), "default"
    problem = gpus_problem(value)
    if problem:
        raise OptionError(f"{source} {problem}")
    return ("" if value.strip() == "0" else value.strip()), source


def _named_options(args: Any, environ: Mapping[str, str], request: SallocRequest) -> None:
    """--partition, --account, --qos, --reservation, --constraint and --time."""
    for dest in ("partition", "account", "qos", "reservation", "constraint", "time"):
        value, source = _given(args, environ, dest)
        if value is None:
            continue
        if dest == "time":
            try:
                time_seconds(value)
            except OptionError as exc:
                raise OptionError(f"{source} {exc}") from None
        else:
            problem = name_problem(value)
            if problem:
                raise OptionError(f"{source} {problem}")
        option = SALLOC_OPTIONS[dest][0]
        request.options.append(f"{option}={value.strip()}")
        request.sources[option] = source


def _node_options(args: Any, request: SallocRequest) -> None:
    """--nodelist and --exclude: Slurm hostlists (or files), at most -N nodes named, none
    both wanted and excluded."""
    named: dict[str, list[str]] = {}
    for dest in ("nodelist", "exclude"):
        value = getattr(args, dest, None)
        if value is None:
            continue
        option = SALLOC_OPTIONS[dest][0]
        try:
            named[dest] = node_names(value)
        except OptionError as exc:
            raise OptionError(f"{option} {exc}") from None
        request.options.append(f"{option}={value}")
        request.sources[option] = option
    wanted, excluded = named.get("nodelist", []), set(named.get("exclude", []))
    if len(set(wanted)) > request.nodes:
        raise OptionError(
            f"--nodelist names {len(set(wanted))} nodes, more than -N {request.nodes} "
            "(salloc would allocate them all)"
        )
    both = sorted(set(wanted) & excluded)
    if both:
        raise OptionError(f"--nodelist and --exclude both name {', '.join(both)}")


def salloc_request(
    args: Any, environ: Mapping[str, str], config: Mapping[str, Any]
) -> SallocRequest:
    """The allocation to ask salloc for; OptionError naming the option or variable."""
    request = SallocRequest(int(args.nodes))
    wait = getattr(args, "wait_allocation", None)
    request.wait_s = DEFAULT_WAIT_S if wait is None else float(wait)
    _named_options(args, environ, request)
    _node_options(args, request)
    exclusive, source = _exclusivity(args, environ)
    request.options.append(exclusive)
    request.sources[exclusive.split("=")[0]] = source
    gpus, source = _gpus(args, environ, config)
    if gpus:
        request.options.append(f"--gpus-per-node={gpus}")
        request.sources["--gpus-per-node"] = source
    return request


def inside_allocation_problem(args: Any, job_id: str) -> str:
    """Inside job ``job_id``: the allocation options given on the command line, which cannot
    apply to an allocation that exists already, with the reason; "" when none was given."""
    given = [
        option
        for dest, (option, _) in SALLOC_OPTIONS.items()
        if getattr(args, dest, None) not in (None, False)
    ]
    if not given:
        return ""
    return (
        f"{', '.join(given)} cannot apply inside job {job_id} (SLURM_JOB_ID is set): the run "
        "uses that allocation as it is; ask for them where it is made (e.g. #SBATCH "
        f"{given[0]}=...), or run outside the job to let nccl-preflight take its own"
    )


def missing_commands(own: bool, environ: Mapping[str, str]) -> list[str]:
    """The Slurm commands the run will call that are not on the caller's PATH."""
    path = environ.get("PATH", "")
    return [
        name
        for name in (OWN_COMMANDS if own else INSIDE_COMMANDS)
        if shutil.which(name, path=path) is None
    ]
