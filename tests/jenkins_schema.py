# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The Jenkins xunit JUnit schema (tests/schemas/jenkins-junit.xsd, MIT, source in
tests/schemas/SOURCE.md) for the tests: a clone alone validates every JUnit it writes."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).resolve().parent / "schemas" / "jenkins-junit.xsd"


@cache
def jenkins_schema() -> Any:
    """The schema, parsed once per test process (it ships with the repository)."""
    import xmlschema

    return xmlschema.XMLSchema(str(SCHEMA))


def validate_report_junit(report_dir: Path) -> list[Path]:
    """Validate the merged junit.xml and every junit/*.xml of a report; return the files."""
    schema = jenkins_schema()
    files = [report_dir / "junit.xml", *sorted((report_dir / "junit").glob("*.xml"))]
    for path in files:
        schema.validate(str(path))
    return files
