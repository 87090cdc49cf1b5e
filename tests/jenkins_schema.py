# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The Jenkins xunit JUnit schema (../shared/schemas beside the repository) for the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT.parent / "shared" / "schemas" / "jenkins-junit.xsd"


def jenkins_schema() -> Any:
    """The schema, or skip the calling test when ../shared is not beside the repository."""
    if not SCHEMA.is_file():
        pytest.skip(f"Jenkins JUnit schema not found at {SCHEMA} (../shared beside the repo)")
    import xmlschema

    return xmlschema.XMLSchema(str(SCHEMA))


def validate_report_junit(report_dir: Path) -> list[Path]:
    """Validate the merged junit.xml and every junit/*.xml of a report; return the files."""
    schema = jenkins_schema()
    files = [report_dir / "junit.xml", *sorted((report_dir / "junit").glob("*.xml"))]
    for path in files:
        schema.validate(str(path))
    return files
