# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""docs/verdict.schema.json, the JSON Schema users get for reports/<run-id>/verdict.json: equal
to the exit-code table (core/exit_classes.py) so the two cannot drift, met by the recorded runs'
verdicts (tests/fixtures/) and by every verdict the report tests build (tests/verdict_schema.py
validates those in test_report_verdict.report and tests/report_build.build_verdict), and strict
enough to refuse what verdict.py never writes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core import exit_classes
from nccl_preflight.core.verdict import VERDICT_SCHEMA
from tests.verdict_schema import SCHEMA, validate_verdict, verdict_problems

ROOT = Path(__file__).resolve().parents[3]
RECORDED = sorted((ROOT / "tests" / "fixtures").rglob("*verdict*.json"))


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text())


def test_the_schemas_classes_are_the_exit_class_table() -> None:
    doc = schema()
    table = exit_classes.code_table()
    assert doc["$defs"]["class"]["enum"] == list(table)  # every class, in the table's order
    assert set(table) == set(exit_classes.BY_NAME)
    assert doc["properties"]["exit_codes"]["required"] == list(table)
    exit_codes = doc["properties"]["exit_codes"]["properties"]
    assert {name: rule["const"] for name, rule in exit_codes.items()} == table
    pairs = [
        (rule["properties"]["class"]["const"], rule["properties"]["exit_code"]["const"])
        for rule in doc["$defs"]["class_and_code"]["oneOf"]
    ]
    assert dict(pairs) == table and len(pairs) == len(table)
    assert sorted(doc["$defs"]["exit_code"]["enum"]) == sorted(set(table.values()))
    assert doc["properties"]["schema"]["const"] == VERDICT_SCHEMA


def test_readme_links_the_schema() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "(docs/verdict.schema.json)" in readme


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_recorded_verdict_meets_the_schema(path: Path) -> None:
    validate_verdict(json.loads(path.read_text()))


def test_there_are_recorded_verdicts_to_check() -> None:
    assert len(RECORDED) >= 3, RECORDED


def a_verdict() -> dict[str, Any]:
    """A recorded verdict with a cause and a consequence (the as-is H100 VM run)."""
    path = ROOT / "tests" / "fixtures" / "validate_gpu" / "h100-vm-as-is-verdict.json"
    verdict = json.loads(path.read_text())
    assert [f["consequence"] for f in verdict["findings"]] == [False, True]
    return verdict


def broken(change: Any) -> list[str]:
    verdict = a_verdict()
    change(verdict)
    return verdict_problems(verdict)


def test_the_schema_refuses_what_verdict_py_never_writes() -> None:
    assert verdict_problems(a_verdict()) == []

    def set_item(path: str, value: Any) -> Any:
        def change(doc: dict[str, Any]) -> None:
            *parents, last = path.split("/")
            for part in parents:
                doc = doc[int(part)] if part.isdigit() else doc[part]
            doc[last] = value

        return change

    # a class the table does not have, in the run or a finding
    assert any(p.startswith("class: ") for p in broken(set_item("class", "slow")))
    assert broken(set_item("findings/0/class", "firewall"))
    # a code that is not its class's
    assert broken(set_item("exit_code", 12))
    assert broken(set_item("exit_codes/passed", 3))
    # a field missing, one added, one of the wrong type
    assert broken(lambda d: d.pop("run_id"))
    assert broken(set_item("findings/0/extra", 1))
    assert broken(set_item("findings/1/rank", "0"))
    assert broken(set_item("findings/1/cause", {"id": "x"}))
    assert broken(set_item("totals/tests", -1))
    assert broken(set_item("schema", 2))


def test_every_class_a_verdict_may_carry_is_valid_in_it() -> None:
    """A verdict of each class of the table (as verdict_document writes one: its own code and
    meaning) meets the schema; only bad_input never reaches verdict.json (the report play does
    not run), and the schema still names it, since exit_codes lists the whole table."""
    for name, code in exit_classes.code_table().items():
        verdict = copy.deepcopy(a_verdict())
        verdict.update(
            {"class": name, "exit_code": code, "meaning": exit_classes.BY_NAME[name].meaning}
        )
        verdict["classes"] = [] if name == "passed" else [name]
        for finding in verdict["findings"]:
            finding["class"] = name
        assert verdict_problems(verdict) == [], name
