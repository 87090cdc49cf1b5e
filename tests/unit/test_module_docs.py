# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Every module in library/ documents itself in a form ansible-doc reads (DOCUMENTATION,
EXAMPLES and RETURN are YAML; one stray ': ' in a sentence and the module has no docs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (ROOT / "library").glob("*.py"))


def test_ansible_doc_reads_every_module_with_its_check_mode_and_returns() -> None:
    # nccl_firewall, nccl_port_owner and nccl_preflight_listen went with issue 16.5.
    assert len(MODULES) >= 5
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "-M", "library", "--json", *MODULES],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
        check=False,
    )
    assert proc.returncode == 0 and "[ERROR]" not in proc.stderr, proc.stderr
    docs = json.loads(proc.stdout)
    assert sorted(docs) == MODULES
    for name in MODULES:
        doc = docs[name]["doc"]
        assert doc["module"] == name
        assert doc["attributes"]["check_mode"]["support"] in ("full", "partial", "none"), name
        assert docs[name]["return"], name
        # EXAMPLES parses as YAML too (ansible-doc passes it through as text).
        assert yaml.safe_load(docs[name]["examples"]), name
