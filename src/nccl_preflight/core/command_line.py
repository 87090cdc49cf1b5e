# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""An unknown word on a command line, named with the closest known one ("did you mean").

argparse (before Python 3.14) says "unrecognized arguments" or "invalid choice" and leaves the
user to find the typo; and when a required option is missing too it only says that. Here the
words are read first, the way argparse reads them (an option's value is skipped, ``--`` ends the
options, a long option may be abbreviated where the parser allows it, a negative number is a
value), and the first unknown option is named with the nearest known one (difflib). Any parser
works: the Slurm front-end's (slurm/cli.py) and ansible-playbook's (bin/nccl-preflight).
Standard library only: the node bundle runs it.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable, Sequence

NUMBER = re.compile(r"^-(\d+|\d*\.\d+)$")  # a value, as argparse takes it


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """The hint "; did you mean X?" (X: the closest of ``known``, by difflib), or "" when none
    is close."""
    close = difflib.get_close_matches(word, sorted(set(known)), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _looks_like_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not NUMBER.match(token)


def _values(action: argparse.Action, rest: Sequence[str]) -> int:
    """How many of ``rest`` (the words after the option) argparse gives the option as values;
    -1: all the remaining words (argparse.REMAINDER)."""
    nargs = action.nargs
    if nargs == argparse.REMAINDER:
        return -1
    if nargs == 0:
        return 0
    if isinstance(nargs, int):
        return min(nargs, len(rest))
    taken = 0
    for token in rest:
        if _looks_like_option(token) or token == "--":
            break
        taken += 1
        if nargs in (None, argparse.OPTIONAL):
            break
    return taken


def _long(parser: argparse.ArgumentParser, name: str) -> argparse.Action | None:
    """The action of a long option, abbreviated or not (None: unknown or ambiguous)."""
    actions = parser._option_string_actions
    if name in actions:
        return actions[name]
    if not parser.allow_abbrev:
        return None
    hits = {actions[o] for o in actions if o.startswith("--") and o.startswith(name)}
    return hits.pop() if len(hits) == 1 else None


def _ambiguous(parser: argparse.ArgumentParser, name: str) -> bool:
    actions = parser._option_string_actions
    return parser.allow_abbrev and len({actions[o] for o in actions if o.startswith(name)}) > 1


def _short(parser: argparse.ArgumentParser, token: str) -> tuple[argparse.Action | None, bool]:
    """The action of a single-dash word (-N, -N2, -vvv, -N=2) and whether its value is
    attached to it."""
    actions = parser._option_string_actions
    name, equals, _ = token.partition("=")
    if token in actions:
        return actions[token], False
    if equals and name in actions:
        return actions[name], True
    action = actions.get(token[:2])
    if action is None:
        return None, False
    if action.nargs != 0:
        return action, True  # -N2: the value attached
    for letter in token[2:]:  # -vvv, -bK: flags together; one that takes a value ends them
        nxt = actions.get("-" + letter)
        if nxt is None:
            return None, False
        if nxt.nargs != 0:
            return nxt, True
    return action, True


def unknown_option(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """The refusal ("unknown option --tgas; did you mean --tags?") of the first word of ``argv``
    that ``parser`` would refuse as an unknown option, "" when there is none (an ambiguous
    abbreviation is left to argparse, which names the candidates)."""
    known = list(parser._option_string_actions)
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            return ""
        if not _looks_like_option(token):
            continue
        if token.startswith("--"):
            name, equals, _ = token.partition("=")
            action, attached = _long(parser, name), bool(equals)
            if action is None and _ambiguous(parser, name):
                return ""
        else:
            name = token.partition("=")[0]
            action, attached = _short(parser, token)
        if action is None:
            return f"unknown option {name}{did_you_mean(name, known)}"
        if not attached:
            taken = _values(action, argv[i:])
            if taken < 0:
                return ""
            i += taken
    return ""
