# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One validation of the project's variables, for both front-ends, by the variables schema.

The Ansible front-end reads its variables from the inventory; the Slurm front-end (``--config
FILE``) from a YAML file with the same names, meanings and defaults. Both come from one place,
the variables schema (core/variables.py: name, type, default, allowed values, doc, per node or
run-wide, meaning under Slurm), from which the roles' defaults files are made
(docs/make_variables.py). ``load_config(path)`` gives that file's variables:

1. the defaults: the schema's, for the variables the Slurm config takes (the project-wide ones
   and the pre-flight's); a default that is derived (a Jinja expression of other variables:
   nccl_run_dir, nccl_report_root, preflight_listen_timeout, ...) is left out: the Slurm
   front-end works out the pre-flight's ones as the role's expressions do
   (``preflight_values``), gives its own directories, or the user sets them;
2. the user's file overlaid on them; a name the schema does not give the Slurm config is
   refused, with the nearest known name; a variable whose ``slurm`` is a reason
   (``NOT_UNDER_SLURM``: the master, the lock, become, the run directory, preflight_fail) is
   refused with the reason;
3. validated by core/inputs.py ``nccl_input_problems`` (what roles/validate_inputs runs through
   the ``nccl_input_problems`` filter, so both front-ends refuse a value in the same words), then
   by the schema's ``type``, ``elements`` and ``choices`` (the roles' meta/argument_specs.yml
   agree with them: tests/unit/tree/test_variables_schema.py). A value the type accepts is converted
   as Ansible converts it (``"29500"`` to 29500 for an int, ``yes`` to True for a bool, 2 to 2.0
   for a float, numbers in a list of str to strings).

Every problem is raised at once as ``ConfigError``, one line each, ``FILE:LINE: nccl_x: problem``
(the line of the name in the user's file, else the defaults file of the value), before anything
runs. The schema is a module of the package: the node bundle and the wheel carry it, no data file.
"""

from __future__ import annotations

import copy
import difflib
import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nccl_preflight.core import hostlist
from nccl_preflight.core import variables as schema
from nccl_preflight.core.inputs import nccl_input_problems
from nccl_preflight.core.yaml_file import YamlFileError, load

_NAME = re.compile(r"\bnccl_[a-z0-9_]+")
TRUE_WORDS = ("yes", "on", "1", "true", "y", "t")  # Ansible's boolean(): module_utils/parsing
_FALSE = ("no", "off", "0", "false", "n", "f")


class ConfigError(ValueError):
    """One line per problem: ``FILE:LINE: nccl_x: problem``."""


# Project-wide variables with no default: the run's identifier (Ansible: -e nccl_run_id=...;
# unset, each run makes a new one), letters, digits, '.', '_' and '-' only (it names a directory).
RUN_NAMES = {"nccl_run_id": re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")}
# The Slurm front-end's own variables (no role has them: Ansible's inventory gives per-host values
# through host_vars), with their defaults.
SLURM_ONLY: dict[str, Any] = {name: schema.VARIABLES[name].default for name in schema.SLURM_ONLY}
# What may differ between nodes under Slurm (nccl_node_vars); the rest is one value for the run.
NODE_VARIABLES = tuple(v.name for v in schema.VARIABLES.values() if v.per_node and v.slurm is True)
# The variables the Slurm config names only to refuse them, and why: no value is silently ignored.
NOT_UNDER_SLURM = {v.name: v.slurm for v in schema.VARIABLES.values() if isinstance(v.slurm, str)}
# The pre-flight's variables the Slurm front-end honours, with the Ansible path's meaning
# (preflight_values gives them, worked out for a run).
UNDER_SLURM = tuple(
    v.name
    for v in schema.VARIABLES.values()
    if v.slurm is True and (schema.file_of(v.name) or schema.FILES[0]).path.startswith("preflight/")
)


@functools.lru_cache(maxsize=1)
def known_names() -> frozenset[str]:
    """Every variable a config may name (derived ones included; NOT_UNDER_SLURM's are named only
    to be refused with their reason; SLURM_ONLY's apart)."""
    return frozenset(
        v.name
        for v in schema.VARIABLES.values()
        if v.slurm is not False and v.name not in SLURM_ONLY
    )


def defaults() -> dict[str, Any]:
    """The variables' defaults (project-wide and the pre-flight's), derived ones left out (a
    fresh copy)."""
    return {
        name: copy.deepcopy(schema.VARIABLES[name].default)
        for name in sorted(known_names(), key=list(schema.VARIABLES).index)
        if not schema.VARIABLES[name].derived and schema.VARIABLES[name].default is not None
    }


def _default_place(name: str) -> str:
    """Where ``name``'s default is written: its defaults file, else the schema."""
    file = schema.file_of(name)
    return f"roles/{file.path}" if file else "src/nccl_preflight/core/variables.py"


def _spec(name: str) -> dict[str, Any]:
    """{type, elements, choices} of a schema variable, as an argument spec writes them."""
    variable = schema.VARIABLES[name]
    spec: dict[str, Any] = {"type": variable.type}
    if variable.elements:
        spec["elements"] = variable.elements
    if variable.choices is not None:
        spec["choices"] = list(variable.choices)
    return spec


def load_config(path: str | Path) -> dict[str, Any]:
    """The defaults overlaid with the YAML file at ``path``, validated; ConfigError otherwise."""
    shown = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot be read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{shown}: is not UTF-8 text: {exc}") from exc
    try:
        document = load(text, shown)
    except YamlFileError as exc:
        raise ConfigError(str(exc)) from exc
    if document.value is None:
        document.value = {}
    if not isinstance(document.value, dict):
        raise ConfigError(f"{shown}:1: the file must be a mapping of nccl_* variables to values")
    places = {name: f"{shown}:{line}" for name, line in document.key_lines.items()}
    problems = [
        (places[name], f"{name}: {_unknown(name)}")
        for name in document.value
        if name not in known_names() and name not in SLURM_ONLY
    ]
    problems += [
        (places[name], f"{name}: does not apply under Slurm: {NOT_UNDER_SLURM[name]}")
        for name in document.value
        if name in NOT_UNDER_SLURM
    ]
    given = {k: v for k, v in document.value.items() if k in known_names() or k in SLURM_ONLY}
    values = {**defaults(), **SLURM_ONLY, **given}
    problems += _validation_problems(values, places)
    if "nccl_node_vars" in given:
        place = places["nccl_node_vars"]
        values["nccl_node_vars"], node_problems = _node_vars(given["nccl_node_vars"])
        problems += [(place, f"nccl_node_vars: {problem}") for problem in node_problems]
    problems += [
        (places[name], f"{name}: {values[name]!r} is not an identifier ({pattern.pattern})")
        for name, pattern in RUN_NAMES.items()
        if name in values and not _identifier(values[name], pattern)
    ]
    if problems:
        problems.sort(key=_order)
        raise ConfigError("\n".join(f"{place}: {problem}" for place, problem in problems))
    return values


def _node_vars(value: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """nccl_node_vars checked ({Slurm hostlist: {variable: value}}): (its values converted as
    the argument specs say, the problems in words)."""
    if not isinstance(value, dict):
        return {}, [f"is {value!r}, not a mapping of Slurm hostlists (gpu[001-016]) to variables"]
    checked: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for pattern, variables in value.items():
        where = f"{pattern!r}"
        try:
            hostlist.expand(str(pattern))
        except hostlist.HostlistError as exc:
            problems.append(f"{where}: not a Slurm hostlist: {exc}")
            continue
        if not isinstance(variables, dict):
            problems.append(f"{where}: is {variables!r}, not a mapping of nccl_* variables")
            continue
        checked[str(pattern)] = {}
        for name, item in variables.items():
            if name not in NODE_VARIABLES:
                why = "one value for the whole run" if name in known_names() else _unknown(name)
                problems.append(f"{where}: {name}: {why} (per node: {', '.join(NODE_VARIABLES)})")
                continue
            converted, problem = _typed(item, _spec(name))
            if problem:
                problems.append(f"{where}: {name}: {problem}")
            checked[str(pattern)][name] = converted
    return checked, problems


@functools.lru_cache(maxsize=256)
def _members(pattern: str) -> frozenset[str]:
    return frozenset(hostlist.expand(pattern))


def node_values(config: dict[str, Any], node: str) -> dict[str, Any]:
    """The config as it applies to ``node``: nccl_node_vars' values of every hostlist that
    names it laid over the run's, in the file's order (a later match wins)."""
    values = dict(config)
    for pattern, variables in (config.get("nccl_node_vars") or {}).items():
        if node in _members(pattern):
            values.update(variables)
    return values


def preflight_values(config: dict[str, Any], node_count: int) -> dict[str, Any]:
    """UNDER_SLURM's variables for a run of ``node_count`` nodes: the config's value where it
    has one (load_config: the user's, else the role's plain default), else the role's default
    that is a Jinja expression of other variables, worked out here as
    roles/preflight/defaults/main.yml writes it (tests/unit/core/test_config.py renders the role's
    expressions and compares):

        preflight_listen_timeout     60 + 10 x node_count            (groups['nccl_nodes'])
        preflight_collect_wait       2 + 2 x preflight_probe_timeout
        preflight_expected_versions  nccl_expected_versions, else {}
    """
    plain = defaults()
    values = {name: config.get(name, plain.get(name)) for name in UNDER_SLURM}
    values = {name: value for name, value in values.items() if value is not None}
    values.setdefault("preflight_listen_timeout", 60 + 10 * node_count)
    values.setdefault("preflight_collect_wait", 2 + 2 * float(values["preflight_probe_timeout"]))
    values.setdefault(
        "preflight_expected_versions", dict(config.get("nccl_expected_versions") or {})
    )
    return values


def _identifier(value: Any, pattern: re.Pattern[str]) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


# The names the project polices in an inventory: its own prefixes (a role's knobs launch_*,
# report_*, ... are the role's to check, by its argument spec).
POLICED = re.compile(r"\b(?:nccl|preflight)_[a-z0-9_]+\b")
# Names that went away -> the name that took their place: refused with the new name wherever
# they are set, their prefix policed or not (docs/variables.md has only the new one).
RENAMED = {"report_expect_ranks": "report_ranks_launched"}


@functools.lru_cache(maxsize=1)
def ansible_names() -> frozenset[str]:
    """Every nccl_*/preflight_* name an inventory may set on the Ansible front-end: the schema's
    (derived ones and those the hostfile inventory plugin sets, nccl_node_rank and nccl_slots,
    included), except the Slurm config's own."""
    return frozenset(
        name for name in schema.VARIABLES if POLICED.fullmatch(name) and name not in SLURM_ONLY
    )


def unknown_variables(names: Iterable[str]) -> list[str]:
    """The names of ``names`` (a host's variables) that look like the project's (POLICED) and
    that it does not know (ansible_names), and those RENAMED, sorted: each a typo or a name that
    went away."""
    known = ansible_names()
    given = {n for n in names if isinstance(n, str)}
    return sorted(({n for n in given if POLICED.fullmatch(n)} - known) | (given & set(RENAMED)))


def unknown_problem(name: str, where: str = "") -> str:
    """``FILE:LINE: name: is not a known variable; did you mean X?`` (``where``: the place the
    value came from, when known), the Slurm config's words for the same fault."""
    why = _unknown(name)
    if name in SLURM_ONLY:  # the inventory's host_vars say the same on the Ansible path
        why = "is the Slurm config's; give each host its own values in its host_vars"
    return f"{where + ': ' if where else ''}{name}: {why}"


def _unknown(name: Any) -> str:
    if not isinstance(name, str):
        return "is not a variable name"
    if name in RENAMED:
        return f"was renamed {RENAMED[name]}"
    near = difflib.get_close_matches(name, sorted(known_names()), n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}?" if near else "see docs/variables.md for the variables"
    return f"is not a known variable; {hint}"


def _order(problem: tuple[str, str]) -> tuple[str, int, str]:
    file, _, line = problem[0].rpartition(":")
    return (file, int(line) if line.isdigit() else 0, problem[1])


def _validation_problems(values: dict[str, Any], places: dict[str, str]) -> list[tuple[str, str]]:
    """(FILE:LINE, "nccl_x: problem") for nccl_input_problems' sentences, then the specs'."""
    problems = []
    named = set()
    for sentence in nccl_input_problems(values):
        mentioned = _NAME.findall(sentence)
        name = next((n for n in mentioned if n in places), mentioned[0] if mentioned else "")
        named.update(mentioned)
        rest = sentence[len(name) :].lstrip() if sentence.startswith(name) else sentence
        place = places.get(name) or _default_place(name)
        problems.append((place, f"{name}: {rest}"))
    for name in known_names():
        if name in named or name not in values or name in RUN_NAMES:
            continue
        converted, problem = _typed(values[name], _spec(name))
        if problem:
            place = places.get(name) or _default_place(name)
            problems.append((place, f"{name}: {problem}"))
        else:
            values[name] = converted
    return problems


@functools.lru_cache(maxsize=1)
def spec_names() -> tuple[str, ...]:
    """Every variable of the schema that an inventory may give a value the schema's types then
    check (spec_problems): the Ansible front-end's names and the roles' own knobs, sorted."""
    return tuple(sorted(set(schema.VARIABLES) - SLURM_ONLY.keys()))


def spec_problems(values: Mapping[str, Any], refused: Iterable[str] = ()) -> list[str]:
    """One line per variable of the schema in ``values`` (a host's: what the inventory and -e
    set; the roles' own knobs, launch_*, report_*, included: no role checks its argument spec at
    its start) that the schema refuses (type, elements, choices, converted as Ansible converts),
    in the Slurm config's words ("nccl_pairwise is 'sometimes', not one of auto, always, never");
    a variable that one of the ``refused`` sentences already names is left out."""
    named = {name for sentence in refused for name in _NAME.findall(sentence)}
    problems = []
    for name in spec_names():
        if name in values and name not in named:
            problem = _typed(values[name], _spec(name))[1]
            if problem:
                problems.append(f"{name} {problem}")
    return problems


def _typed(value: Any, spec: dict[str, Any]) -> tuple[Any, str]:
    """The value as the spec's type converts it, and "" ; or (value, what is wrong)."""
    kind = spec.get("type", "raw")
    converted, problem = _convert(value, kind)
    if problem:
        return value, problem
    if kind == "list" and spec.get("elements"):
        elements = [_convert(item, spec["elements"]) for item in converted]
        if any(problem for _, problem in elements):
            return value, f"is {value!r}, not a list of {_KINDS[spec['elements']]}s"
        converted = [item for item, _ in elements]
    choices = spec.get("choices")
    if choices is not None and converted not in choices:
        return value, f"is {value!r}, not one of {', '.join(map(str, choices))}"
    return converted, ""


_KINDS = {
    "str": "string",
    "path": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean (true or false)",
    "list": "list",
    "dict": "mapping",
}


def _convert(value: Any, kind: str) -> tuple[Any, str]:
    """Ansible's conversion for an argument spec type (module_utils/common/validation.py)."""
    noun = _KINDS.get(kind, kind)
    wrong = f"is {value!r}, not {'an' if noun[:1] in 'aeiou' else 'a'} {noun}"
    if kind in ("str", "path"):
        if isinstance(value, str):
            return value, ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value), ""
        return value, wrong
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value, ""
        if isinstance(value, str) and re.fullmatch(r"[-+]?[0-9]+", value.strip()):
            return int(value), ""
        return value, wrong
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return value, wrong
        try:
            return float(value), ""
        except ValueError:
            return value, wrong
    if kind == "bool":
        if isinstance(value, bool):
            return value, ""
        token = str(value).strip().lower() if isinstance(value, (str, int)) else None
        if token in TRUE_WORDS or token in _FALSE:
            return token in TRUE_WORDS, ""
        return value, wrong
    if kind == "list":
        return value, "" if isinstance(value, list) else wrong
    if kind == "dict":
        return value, "" if isinstance(value, dict) else wrong
    return value, ""
