# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The vendored Jenkins JUnit schema is the file its SOURCE.md names, and it rejects what the
xunit plugin rejects (so a JUnit that validates in the tests validates in Jenkins)."""

from __future__ import annotations

import hashlib
import re

import pytest

from tests.jenkins_schema import SCHEMA, jenkins_schema


def test_schema_is_the_recorded_file() -> None:
    source = (SCHEMA.parent / "SOURCE.md").read_text()
    recorded = re.search(r"sha256 of saved file: `([0-9a-f]{64})`", source)
    assert recorded, "tests/schemas/SOURCE.md names no sha256"
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == recorded.group(1)


def test_schema_rejects_an_unknown_testsuites_attribute() -> None:
    import xmlschema

    good = (
        '<testsuites><testsuite name="s" tests="1" failures="0" errors="0">'
        '<testcase name="c"/></testsuite></testsuites>'
    )
    jenkins_schema().validate(good)
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        jenkins_schema().validate(good.replace("<testsuites>", '<testsuites skipped="0">'))
