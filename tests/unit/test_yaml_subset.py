# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""core/yaml_subset.py reads what PyYAML reads, the same values, or refuses with SOURCE:LINE."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from nccl_preflight.core.yaml_subset import YamlSubsetError, load

ROOT = Path(__file__).resolve().parents[2]
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


def same(left: object, right: object) -> bool:
    """Equal, with NaN equal to NaN and bool never equal to int (PyYAML keeps them apart)."""
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return math.isnan(right)
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same, left, right))
    return left == right


def test_the_repository_has_variable_files_to_compare() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in VARIABLE_FILES}
    assert "roles/nccl_defaults/defaults/main/network.yml" in names
    assert "inventory/dgx/host_vars/192.168.100.11.yml" in names
    assert len(names) >= 15


@pytest.mark.parametrize("path", VARIABLE_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_variable_file_reads_as_pyyaml_reads_it(path: Path) -> None:
    text = path.read_text()
    document = load(text, str(path))
    assert same(document.value, yaml.safe_load(text))


def test_top_level_keys_carry_their_lines() -> None:
    document = load("---\n# c\na: 1\n\nb:\n  c: 2\nd: [1]\n", "f.yml")
    assert document.key_lines == {"a": 3, "b": 5, "d": 7}
    flow = load('# json is yaml\n{"a": 1,\n "b": {"c": 2},\n\n "d": [1]}\n', "f.json")
    assert flow.value == {"a": 1, "b": {"c": 2}, "d": [1]}
    assert flow.key_lines == {"a": 2, "b": 3, "d": 5}


EDGE_CASES = [
    "",
    "---\n",
    "# only a comment\n",
    "a:\n",
    "a: ~\nb: null\nc: Null\nd: NULL\ne: ''\n",
    "t: [true, True, TRUE, yes, Yes, YES, on, On, ON]\n",
    "f: [false, False, FALSE, no, No, NO, off, Off, OFF]\n",
    "s: [y, n, Y, N, tRuE, yES, 'true', \"no\"]\n",
    "i: [0, 12, -3, +4, 1_000, 0x1F, 0b101, 0755, 0o17, 08, 09.5, 007]\n",
    "f: [1.5, -2.25, 1., .5, 6.02e+23, 1e3, 1.0e3, 1E-2, 1.5E-2, .inf, -.Inf, +.INF, .NaN]\n",
    "v: 2.13.0\nw: 2.27.5\nx: '2.0'\ny: 3.10\n",
    "p: /tmp\nq: INIT,NET,GRAPH\nr: a b  c\ns: a#b\nt: a # comment\nu: 'x # y'\n",
    "cidr: 192.168.100.0/24\nip: 10.0.0.1\nport: 29500\nmode: '0700'\n",
    'q1: \'it\'\'s\'\nq2: "tab\\tnew\\nline \\" \\\\ \\x41 \\u00e9 \\U0001F600"\nq3: ""\n',
    "url: http://example.com:8080/a\nk: a:b\ncolon_end: 'a:'\n",
    "m:\n  a: 1\n  b:\n    c: [x, y]\n    d: {e: f, g: [1, 2], h: {i: j}}\n",
    "l:\n- a\n- b: 1\n  c: 2\n-\n  - x\n  - y\n- - p\n  - q\n- [1, 2]\n- {k: v}\n",
    "l:\n  - one\n  -   two\n  - - nested\n",
    "e: {}\nf: []\ng: { }\nh: [ ]\ni: {a: , b: null}\n",
    "flow: {a: 1,\n  b: [2,\n    3], c: 'x, y'}\nnext: 1\n",
    "args: ['--sizes', 1M, \"--dtype\", float16, -b, 8]\n",
    "'quoted key': 1\n\"dq key\": 2\n3: int key\ntrue: bool key\n",
    "a: |\n  line one\n   indented\n\n  last\nb: 1\n",
    "a: |-\n  x\n  y\n\n\nb: |+\n  p\n\n\nc: >\n  folded\n  text\n\n  para\n",
    "a: >-\n  {{ x\n     | f }}\nb: >-\n  one\n  two\n    more\n  three\n",
    "a: |\nb: >-\nc: 1\n",
    "a: |  # comment\n  text\n# trailing comment\nb: 2\n",
    "- top\n- list\n",
    "a: plain\n  continued\n\n  more\nb: 1\n",
    "l:\n  - one\n    - two\n  - three # c\n",
    "a: 'open\n  quote ''x''\n\n  end' # c\nb: \"two\n   lines #\" # c\n",
    "just a scalar\n",
    "---\na: 1\n...\n",
    "nested:\n  deeper:\n    deepest:\n      - 1\n      - two\n  back: 3\n",
    'ver: {torch: "2.13.0", nccl: 2.27.5}\n',
    "env: {NCCL_IB_HCA: 'mlx5_0:1', NCCL_IB_DISABLE: 0}\n",
    "neg: -1\nd: -x\nq: ?x\nc: :x\n",
]


@pytest.mark.parametrize("text", EDGE_CASES)
def test_edge_cases_read_as_pyyaml_reads_them(text: str) -> None:
    assert same(load(text, "edge.yml").value, yaml.safe_load(text))


REFUSED = [
    ("a: &x 1\nb: *x\n", "edge.yml:1: anchors and aliases"),
    ("a: 1\nb: *x\n", "edge.yml:2: anchors and aliases"),
    ("a: !!str 1\n", "edge.yml:1: tags (!!str)"),
    ("a: !unsafe '{{ x }}'\n", "edge.yml:1: tags (!unsafe)"),
    ("a:\n  <<: {b: 1}\n", "edge.yml:2: merge keys"),
    ("? a\n: 1\n", "edge.yml:1: complex keys"),
    ("%YAML 1.1\n---\na: 1\n", "edge.yml:1: directives"),
    ("a: 1\n---\nb: 2\n", "edge.yml:2: a second document"),
    ("a: 2002-12-14\n", "edge.yml:1: '2002-12-14' would be a date"),
    ("a: 1:30\n", "edge.yml:1: base-60 number '1:30'"),
    ("a: plain\n  b: c\n", "edge.yml:2: a ':' in a value continued over lines"),
    ("a: 'open\nb: 1\n", "edge.yml:1: a quoted value is not closed"),
    ('a: "open \\\n  more"\n', "edge.yml:1: an escaped line break"),
    ("a: |2\n  x\n", "edge.yml:1: block scalar header '|2'"),
    ("a:\n\tb: 1\n", "edge.yml:2: a tab in the indentation"),
    ("a: 1\na: 2\n", "edge.yml:2: 'a' is given twice (first on line 1)"),
    ("a: b: c\n", "edge.yml:1: a second ':' on the line"),
    ("a: [1, 2\nb: 3\n", "edge.yml:1: a flow collection is not closed"),
    ("a: {x: 1} y\n", "edge.yml:1: 'y' after a flow collection"),
    ('a: "\\q"\n', "edge.yml:1: the escape \\q"),
    ("a:\n  b:\n    c: 1\n   d: 2\n", "edge.yml:4: this line is indented more"),
    ("a: [x: 1]\n", "edge.yml:1: a 'key: value' pair inside [...]"),
    ("a: {b: 1, b: 2}\n", "edge.yml:1: 'b' is given twice"),
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_what_lies_outside_the_subset_is_refused_with_its_line(text: str, message: str) -> None:
    with pytest.raises(YamlSubsetError) as caught:
        load(text, "edge.yml")
    assert str(caught.value).startswith(message)
