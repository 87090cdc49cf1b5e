# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One source of defaults and one validation of the project's variables, for both front-ends.

The Ansible front-end reads its variables from the inventory; the Slurm front-end (``--config
FILE``) from a YAML file with the same names, meanings and defaults. ``load_config(path)`` gives
that file's variables:

1. the defaults: roles/nccl_defaults/defaults/main/*.yml, the very files every play reads, and
   the pre-flight's own, roles/preflight/defaults/main.yml, read with core/yaml_file.py (PyYAML's
   SafeLoader from the package's vendored copy: a node reads them as Ansible does); a default
   that is a Jinja template (``{{`` or ``{%``: nccl_run_dir, nccl_report_root,
   preflight_listen_timeout, ...) is left out: the Slurm front-end works out the pre-flight's
   ones as the role's expressions do (``preflight_values``), gives its own directories, or the
   user sets them;
2. the user's file overlaid on them; a name that is not one of the defaults' (the project-wide
   variables and the pre-flight's, docs/variables.md) is refused, with the nearest known name; a
   pre-flight variable that has no meaning under Slurm (``NOT_UNDER_SLURM``: the master, the lock,
   become, the run directory, preflight_fail) is refused with the reason;
3. validated by core/inputs.py ``nccl_input_problems`` (what roles/validate_inputs runs through
   the ``nccl_input_problems`` filter, so both front-ends refuse a value in the same words), then
   by the ``type``, ``elements`` and ``choices`` that the roles' meta/argument_specs.yml declare
   for these variables (read as data, as Ansible's ``validate_argument_spec`` reads them). A value
   the spec's type accepts is converted as Ansible converts it (``"29500"`` to 29500 for an int,
   ``yes`` to True for a bool, 2 to 2.0 for a float, numbers in a list of str to strings).

Every problem is raised at once as ``ConfigError``, one line each, ``FILE:LINE: nccl_x: problem``
(the line of the name in the user's file, else the line of its default in the defaults file),
before anything runs.

Where the data files are (``roles_dir()``): the roles/ of the tree the package runs from
(core/content.py: a checkout's, or an installed package's share/ copy); inside the node bundle
(slurm/bundle.py), the package data directory ``nccl_preflight/core/config_data/roles/``, read
through ``importlib.resources``. The bundle copies into it, under their paths relative to roles/:
``nccl_defaults/defaults/main/*.yml``, ``preflight/defaults/main.yml`` and
``*/meta/argument_specs.yml``. When that directory is present it wins over the checkout.
"""

from __future__ import annotations

import copy
import difflib
import functools
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nccl_preflight.core import hostlist
from nccl_preflight.core.content import TREE
from nccl_preflight.core.inputs import nccl_input_problems
from nccl_preflight.core.yaml_file import YamlFileError, load

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

BUNDLE_DATA = "config_data"  # nccl_preflight/core/config_data/roles/... inside the bundle
DEFAULTS_DIR = ("nccl_defaults", "defaults", "main")
PREFLIGHT_DEFAULTS = ("preflight", "defaults", "main.yml")  # the pre-flight role's own knobs
_NAME = re.compile(r"\bnccl_[a-z0-9_]+")
_TRUE = ("yes", "on", "1", "true", "y", "t")  # Ansible's boolean(): module_utils/parsing
_FALSE = ("no", "off", "0", "false", "n", "f")


class ConfigError(ValueError):
    """One line per problem: ``FILE:LINE: nccl_x: problem``."""


def roles_dir() -> Traversable:
    """The roles/ whose defaults and argument specs are read: the bundle's, else the checkout's."""
    bundled = resources.files("nccl_preflight.core") / BUNDLE_DATA / "roles"
    if bundled.is_dir():
        return bundled
    return TREE.content / "roles"


def _child(root: Traversable, *parts: str) -> Traversable:
    for part in parts:
        root = root / part
    return root


def _shown(file: Traversable) -> str:
    """A data file's name in messages: roles/... for the checkout's, the full name otherwise."""
    text = str(file)
    where = text.rfind("roles/")
    return text[where:] if where >= 0 else text


def defaults_files() -> list[Traversable]:
    """roles/nccl_defaults/defaults/main/*.yml, in name order (the order Ansible reads them),
    then roles/preflight/defaults/main.yml."""
    directory = _child(roles_dir(), *DEFAULTS_DIR)
    found = sorted(
        (file for file in directory.iterdir() if file.name.endswith((".yml", ".yaml"))),
        key=lambda file: file.name,
    )
    return [*found, _child(roles_dir(), *PREFLIGHT_DEFAULTS)]


def argument_spec_files() -> list[Traversable]:
    """roles/*/meta/argument_specs.yml, in role name order."""
    found = [_child(role, "meta", "argument_specs.yml") for role in roles_dir().iterdir()]
    return sorted((file for file in found if file.is_file()), key=lambda file: str(file))


# Project-wide variables with no default: the run's identifier (Ansible: -e nccl_run_id=...;
# unset, each run makes a new one), letters, digits, '.', '_' and '-' only (it names a directory).
RUN_NAMES = {"nccl_run_id": re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")}


@functools.lru_cache(maxsize=1)
def _defaults_and_places() -> tuple[dict[str, Any], dict[str, str], frozenset[str]]:
    """(defaults without templates, name -> "FILE:LINE" of its default, every default's name)."""
    values: dict[str, Any] = {}
    places: dict[str, str] = {}
    for file in defaults_files():
        shown = _shown(file)
        document = load(file.read_text(encoding="utf-8"), shown)
        for name, value in (document.value or {}).items():
            places[name] = f"{shown}:{document.key_lines[name]}"
            values[name] = value
    names = frozenset(values) | frozenset(RUN_NAMES)
    kept = {name: value for name, value in values.items() if not _templated(value)}
    return kept, places, names


def _templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def defaults() -> dict[str, Any]:
    """The variables' defaults (project-wide and the pre-flight's), Jinja-templated ones left
    out (a fresh copy)."""
    return copy.deepcopy(_defaults_and_places()[0])


def known_names() -> frozenset[str]:
    """Every variable a config may name (templated defaults included; NOT_UNDER_SLURM's are
    named only to be refused with their reason)."""
    return _defaults_and_places()[2]


@functools.lru_cache(maxsize=1)
def argument_specs() -> dict[str, dict[str, Any]]:
    """name -> {type, elements, choices} for the project-wide variables, from every role's spec."""
    specs: dict[str, dict[str, Any]] = {}
    for file in argument_spec_files():
        document = load(file.read_text(encoding="utf-8"), _shown(file))
        for entry in (document.value or {}).get("argument_specs", {}).values():
            for name, option in (entry.get("options") or {}).items():
                if name in known_names():
                    spec = specs.setdefault(name, {})
                    for field in ("type", "elements", "choices"):
                        if field in option:
                            spec.setdefault(field, option[field])
    return specs


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


# The Slurm front-end's own variables (no role has them: Ansible's inventory gives per-host values
# through host_vars), with their defaults.
SLURM_ONLY: dict[str, Any] = {"nccl_node_vars": {}}
# What may differ between nodes under Slurm (nccl_node_vars); the rest is one value for the run.
NODE_VARIABLES = (
    "nccl_socket_ifname",
    "nccl_fabric_cidr",
    "nccl_extra_env",
    "nccl_nproc_per_node",
)


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
            converted, problem = _typed(item, argument_specs().get(name, {}))
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


# The pre-flight's variables (roles/preflight/defaults/main.yml) that the Slurm front-ends have
# no use for, and why: a config that sets one is refused, so that no value is silently ignored.
NOT_UNDER_SLURM = {
    "preflight_master": "the master is the allocation's first node, in Slurm's node order",
    **dict.fromkeys(
        ("preflight_lock", "preflight_lock_path", "preflight_lock_lifetime"),
        "the Slurm front-end takes no lock file on the master: the nodes are the allocation's, "
        "and a MASTER_PORT another run holds is named by the master_port check",
    ),
    "preflight_become_firewall": "the job steps run as the job's user, never with become; "
    "the firewall is read as that user (run the job as root to read it all)",
    **dict.fromkeys(
        ("preflight_run_dir", "preflight_remove_run_dir"),
        "each job step keeps its files in a private temporary directory of its own (mode "
        "0700), always removed when the step ends",
    ),
    "preflight_fail": "playbooks/validate.yml sets it false too: a failed check is recorded, "
    "the launch skipped, and the verdict's exit code says so",
}
# The pre-flight's variables the Slurm front-end honours, with the Ansible path's meaning
# (preflight_values gives them, worked out for a run).
UNDER_SLURM = (
    "preflight_full_mesh",
    "preflight_probe_timeout",
    "preflight_listen_timeout",
    "preflight_collect_wait",
    "preflight_python_timeout",
    "preflight_expected_versions",
    "preflight_clock_check",
    "preflight_clock_max_skew_s",
)


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
# report_*, ... are the role's to check).
POLICED = re.compile(r"\b(?:nccl|preflight)_[a-z0-9_]+\b")
ANSIBLE_SOURCES = ("roles", "playbooks", "plugins", "library")


@functools.lru_cache(maxsize=1)
def ansible_names() -> frozenset[str]:
    """Every nccl_*/preflight_* name the Ansible front-end takes: the defaults' (known_names)
    and every one its roles, playbook and plugins read or set (an optional input such as
    nccl_expect_net, the hostfile's nccl_slots, a fact of the run)."""
    names = set(known_names())
    for folder in ANSIBLE_SOURCES:
        for path in sorted((TREE.content / folder).rglob("*")):
            if path.suffix in (".yml", ".yaml", ".j2", ".py") and path.is_file():
                names |= set(POLICED.findall(path.read_text(encoding="utf-8")))
    return frozenset(names)


def unknown_variables(names: Iterable[str]) -> list[str]:
    """The names of ``names`` (a host's variables) that look like the project's (POLICED) and
    that it does not know (ansible_names), sorted: each a typo or a name that went away."""
    known = ansible_names()
    return sorted({n for n in names if isinstance(n, str) and POLICED.fullmatch(n)} - known)


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
    near = difflib.get_close_matches(name, sorted(known_names()), n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}?" if near else "see docs/variables.md for the variables"
    return f"is not a known variable; {hint}"


def _order(problem: tuple[str, str]) -> tuple[str, int, str]:
    file, _, line = problem[0].rpartition(":")
    return (file, int(line) if line.isdigit() else 0, problem[1])


def _validation_problems(values: dict[str, Any], places: dict[str, str]) -> list[tuple[str, str]]:
    """(FILE:LINE, "nccl_x: problem") for nccl_input_problems' sentences, then the specs'."""
    default_places = _defaults_and_places()[1]
    problems = []
    named = set()
    for sentence in nccl_input_problems(values):
        mentioned = _NAME.findall(sentence)
        name = next((n for n in mentioned if n in places), mentioned[0] if mentioned else "")
        named.update(mentioned)
        rest = sentence[len(name) :].lstrip() if sentence.startswith(name) else sentence
        place = places.get(name) or default_places.get(name, "?")
        problems.append((place, f"{name}: {rest}"))
    for name, spec in argument_specs().items():
        if name in named or name not in values:
            continue
        converted, problem = _typed(values[name], spec)
        if problem:
            place = places.get(name) or default_places.get(name, "?")
            problems.append((place, f"{name}: {problem}"))
        else:
            values[name] = converted
    return problems


def spec_problems(values: Mapping[str, Any], refused: Iterable[str] = ()) -> list[str]:
    """One line per variable of ``values`` (a host's: what the inventory and -e set) that the
    roles' argument specs refuse (type, elements, choices, converted as Ansible converts), in
    the Slurm config's words ("nccl_pairwise is 'sometimes', not one of auto, always, never");
    a variable that one of the ``refused`` sentences already names is left out."""
    named = {name for sentence in refused for name in _NAME.findall(sentence)}
    problems = []
    for name, spec in argument_specs().items():
        if name in values and name not in named:
            problem = _typed(values[name], spec)[1]
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
        if token in _TRUE or token in _FALSE:
            return token in _TRUE, ""
        return value, wrong
    if kind == "list":
        return value, "" if isinstance(value, list) else wrong
    if kind == "dict":
        return value, "" if isinstance(value, dict) else wrong
    return value, ""
