# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One way for the controller-side plugins to load the project's module_utils.

Every action, filter and inventory plugin (plugins/, roles/*/*_plugins/) that uses module_utils/
adds that folder to ``ansible.module_utils.__path__`` and imports ``ansible.module_utils.nccl_*``,
the names the modules use on a node. Loaded in a fresh interpreter the way Ansible loads a plugin
(by its file path, without tests/conftest.py's set-up), no module_utils file may end up under
another name (importlib by path, or a top-level import through ``sys.path``), and no plugin may
put module_utils/ on ``sys.path``. A filter's own folder on ``sys.path`` (for its sibling filter
files such as nccl_check_result.py) stays: Ansible gives filter files no package to import from.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE_UTILS = ROOT / "module_utils"
PLUGINS = sorted([*ROOT.glob("plugins/*/*.py"), *ROOT.glob("roles/*/*_plugins/*.py")])
PROJECT_UTILS = {p.stem for p in MODULE_UTILS.glob("*.py")}

# Load every plugin as ansible's PluginLoader._load_module_source does, then report where each
# module_utils file was imported from and what sys.path holds.
LOADER = """
import importlib.util, json, sys
from pathlib import Path
root, plugins = Path(sys.argv[1]), sys.argv[2:]
errors = {}
for index, path in enumerate(plugins):
    name = f"ansible.plugins.loaded_{index}_{Path(path).stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        errors[path] = repr(exc)
utils = str(root / "module_utils")
loaded = {
    name: module.__file__
    for name, module in list(sys.modules.items())
    if (getattr(module, "__file__", None) or "").startswith(utils + "/")
}
print(json.dumps({"errors": errors, "loaded": loaded, "sys_path": sys.path}))
"""


def test_every_plugin_loads_module_utils_as_ansible_module_utils_only() -> None:
    assert len(PLUGINS) >= 15  # the glob found the plugins
    proc = subprocess.run(
        [sys.executable, "-c", LOADER, str(ROOT), *map(str, PLUGINS)],
        capture_output=True,
        text=True,
        cwd="/",  # nothing of the project on sys.path by accident
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["errors"] == {}
    # The plugins do use module_utils (nccl_report's run, nccl_fabric_choice, nccl_files, ...).
    assert {"ansible.module_utils.nccl_fabric_choice", "ansible.module_utils.nccl_files"} <= set(
        seen["loaded"]
    )
    elsewhere = {
        n: f for n, f in seen["loaded"].items() if not n.startswith("ansible.module_utils.")
    }
    assert elsewhere == {}, "module_utils loaded under another name (sys.path or importlib)"
    assert str(MODULE_UTILS) not in seen["sys_path"]


def _imported_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_plugin_imports_module_utils_any_other_way() -> None:
    """The same rule read from the source, so a plugin that is not loaded above still counts."""
    for path in PLUGINS:
        source = path.read_text()
        names = _imported_names(ast.parse(source))
        where = path.relative_to(ROOT)
        assert not {n for n in names if n.split(".")[0] == "importlib"}, where
        assert not names & PROJECT_UTILS, f"{where} imports module_utils through sys.path"
        for line in source.splitlines():
            assert not ("sys.path" in line and "module_utils" in line), f"{where}: {line}"
        if {n for n in names if n.startswith("ansible.module_utils.nccl_")} or (
            "from ansible.module_utils import nccl_" in source
        ):
            assert "ansible.module_utils.__path__.append(" in source, where
