# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""verdict.json's JSON Schema (docs/verdict.schema.json, draft 2020-12) for the tests: every
verdict a test builds or reads is checked against the file users are given
(tests/unit/core/test_verdict_schema.py keeps the file equal to core/exit_classes.py)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "verdict.schema.json"


@cache
def verdict_validator() -> Any:
    """A jsonschema validator of the schema, itself checked against the draft's metaschema."""
    import jsonschema

    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def verdict_problems(verdict: Any) -> list[str]:
    """Every way ``verdict`` breaks the schema, as "path: message" (empty: valid)."""
    errors = sorted(verdict_validator().iter_errors(verdict), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '.'}: {e.message}" for e in errors]


def validate_verdict(verdict: dict[str, Any]) -> dict[str, Any]:
    """``verdict``, after an AssertionError naming every problem when it breaks the schema."""
    problems = verdict_problems(verdict)
    assert not problems, "verdict.json breaks docs/verdict.schema.json:\n" + "\n".join(problems)
    return verdict
