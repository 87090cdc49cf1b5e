# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""plugins/callback/nccl_preload.py loads every filter plugin in the calling process.

Run in a fresh Python so no earlier test has loaded the filters: before the callback's
playbook start none of the project's filter modules is imported, after it every file in
plugins/filter is (the workers Ansible forks then inherit them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import importlib.util, json, sys
from ansible.plugins.loader import filter_loader, init_plugin_loader
init_plugin_loader()
filter_loader.add_directory("plugins/filter")
def loaded():
    return sorted({m.split(".")[3].rsplit("_", 1)[0] for m in sys.modules
                   if m.startswith("ansible.plugins.filter.nccl_")})
before = loaded()
spec = importlib.util.spec_from_file_location("nccl_preload", "plugins/callback/nccl_preload.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module.CallbackModule().v2_playbook_on_start(None)
print(json.dumps({"before": before, "after": loaded()}))
"""


def test_playbook_start_loads_every_project_filter() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    files = sorted(p.stem for p in (ROOT / "plugins" / "filter").glob("nccl_*.py"))
    assert seen["before"] == []
    assert seen["after"] == files


def test_ansible_cfg_enables_the_callback_path() -> None:
    lines = (ROOT / "ansible.cfg").read_text().splitlines()
    assert "callback_plugins = plugins/callback" in [line.strip() for line in lines]
