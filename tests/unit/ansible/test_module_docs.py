# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Every module in library/ documents itself in a form ansible-doc reads (DOCUMENTATION,
EXAMPLES and RETURN are YAML; one stray ': ' in a sentence and the module has no docs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
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
    # The modules an action runs as a node program share one text of its options
    # (plugins/doc_fragments/nccl_program.py).
    shared = ("nccl_facts", "nccl_preflight_start", "nccl_preflight_observe")
    texts = {
        json.dumps({k: docs[n]["doc"]["options"][k] for k in ("program_python", "run_id")})
        for n in shared
    }
    assert len(texts) == 1 and "interpreter-discovery" in texts.pop()


# A path inside the project (a file of src/, the old module_utils/, plugins/ or roles/) tells a
# user nothing: a module's documentation says what it does, not where its code lives (issue 26
# item 4). library/nccl_facts.py is being rewritten in its own branch of issue 26; its docs follow
# this rule there, and it leaves this set when that branch lands.
INTERNAL_PATH = re.compile(r"\b(src|module_utils|plugins|roles)/[\w./-]+")
INTERNAL_PATHS_LEFT: set[str] = set()


def test_no_module_documentation_names_a_path_inside_the_project() -> None:
    found = {}
    for name in MODULES:
        text = (ROOT / "library" / f"{name}.py").read_text(encoding="utf-8")
        docs = "".join(
            text.split(f'{part} = r"""', 1)[1].split('"""', 1)[0]
            for part in ("DOCUMENTATION", "EXAMPLES", "RETURN")
        )
        paths = sorted(set(m.group(0) for m in INTERNAL_PATH.finditer(docs)))
        if paths and name not in INTERNAL_PATHS_LEFT:
            found[name] = paths
    assert found == {}
