# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""core/yaml_file.py reads what PyYAML's safe_load reads, gives each top-level key's line, and
refuses what is not YAML, or a key given twice, with SOURCE:LINE."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import yaml

from nccl_preflight.core.yaml_file import YamlFileError, load

ROOT = Path(__file__).resolve().parents[3]
VARIABLE_FILES = sorted(
    path
    for pattern in (
        "roles/*/defaults/**/*.yml",
        "roles/*/meta/argument_specs.yml",
        "inventory/*/group_vars/**/*.yml",
        "inventory/*/host_vars/**/*.yml",
        "examples/**/*.y*ml",
    )
    for path in ROOT.glob(pattern)
)


def test_the_repository_has_variable_files_to_read() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in VARIABLE_FILES}
    assert "roles/nccl_defaults/defaults/main/network.yml" in names
    assert "inventory/dgx/host_vars/192.168.100.11.yml" in names
    assert len(names) >= 15


@pytest.mark.parametrize("path", VARIABLE_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_variable_file_reads_as_pyyaml_reads_it(path: Path) -> None:
    """No key of the repository's own files is given twice: each reads, as safe_load reads it."""
    text = path.read_text()
    assert load(text, str(path)).value == yaml.safe_load(text)


def test_top_level_keys_carry_their_lines() -> None:
    document = load("---\n# c\na: 1\n\nb:\n  c: 2\nd: [1]\n", "f.yml")
    assert document.key_lines == {"a": 3, "b": 5, "d": 7}
    flow = load('# json is yaml\n{"a": 1,\n "b": {"c": 2},\n\n "d": [1]}\n', "f.json")
    assert flow.value == {"a": 1, "b": {"c": 2}, "d": [1]}
    assert flow.key_lines == {"a": 2, "b": 3, "d": 5}
    assert load("- a\n", "l.yml").key_lines == {}
    assert load("", "e.yml").value is None and load("# c\n", "e.yml").value is None


def test_a_merge_key_sets_its_keys_and_a_later_key_overrides_them() -> None:
    """`<<: *base` then a key of base is an override (YAML's merge), not a key given twice; the
    merged keys carry the line where they are written."""
    document = load("base: &b {x: 1, y: 2}\n<<: *b\ny: 3\n", "m.yml")
    assert document.value == {"base": {"x": 1, "y": 2}, "x": 1, "y": 3}
    assert document.key_lines == {"base": 1, "x": 1, "y": 3}


def test_yaml_1_1_types_as_ansible_reads_them() -> None:
    document = load("a: yes\nb: 'no'\nc: 0x1F\nd: 2.13.0\ne: 1.5\nf: ~\ng: 0700\n", "t.yml")
    assert document.value == {
        **{"a": True, "b": "no", "c": 31, "d": "2.13.0", "e": 1.5, "f": None},
        "g": 0o700,  # YAML 1.1's octal, as Ansible reads a file mode left unquoted
    }


REFUSED = [
    ("a: 1\na: 2\n", "edge.yml:2: 'a' is given twice (first on line 1)"),
    ("a: {b: 1, b: 2}\n", "edge.yml:1: 'b' is given twice (first on line 1)"),
    ("a:\n  b:\n    c: 1\n    c: 2\n", "edge.yml:4: 'c' is given twice (first on line 3)"),
    ("- {x: 1}\n- x: 1\n  x: 2\n", "edge.yml:3: 'x' is given twice (first on line 2)"),
    ("a: [1, 2\nb: 3\n", "edge.yml:2: while parsing a flow sequence (line 1): expected ','"),
    ("a:\n\tb: 1\n", "edge.yml:2: while scanning for the next token: found character '\\t'"),
    ("a: 1\n---\nb: 2\n", "edge.yml:2: expected a single document in the stream (line 1)"),
    ("a: !vault x\n", "edge.yml:1: could not determine a constructor for the tag '!vault'"),
    ("a: b: c\n", "edge.yml:1: mapping values are not allowed here"),
    ("a: 'open\nb: 1\n", "edge.yml:3: while scanning a quoted scalar (line 1)"),
    ("a:\n  b:\n    c: 1\n   d: 2\n", "edge.yml:4: while parsing a block mapping (line 2)"),
    ("a: *nope\n", "edge.yml:1: found undefined alias 'nope'"),
    ("? [a]\n: 1\n", "edge.yml:1: while constructing a mapping: found unhashable key"),
    ("a: 1\nb: \x01\n", "edge.yml:2: unacceptable character #x0001"),
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_what_is_refused_names_its_line(text: str, message: str) -> None:
    with pytest.raises(YamlFileError) as caught:
        load(text, "edge.yml")
    assert str(caught.value).startswith(message)
    # safe_load refuses the same, but a key given twice (it keeps the last one)
    twice = "given twice" in message
    with contextlib.nullcontext() if twice else pytest.raises(yaml.YAMLError):
        yaml.safe_load(text)
