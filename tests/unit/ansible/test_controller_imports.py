# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One way for the controller-side plugins to load the project's code: a normal import.

Every action, callback, filter and inventory plugin (plugins/, roles/*/*_plugins/) imports
``nccl_preflight.core.<module>`` or ``nccl_preflight.node.<module>``, the package the venv installs
(docs/design.md, "Layout"). Loaded in a fresh interpreter the way Ansible loads a plugin (by its
file path, without tests/conftest.py's set-up), every project module ends up under its package
name from src/nccl_preflight/, never as ``ansible.module_utils.nccl_preflight.*`` (the name the
modules ship it under to a node), nor under another name; no plugin touches ``sys.path`` or
``ansible.module_utils.__path__``, and none imports a sibling plugin file.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "src" / "nccl_preflight"
PLUGINS = sorted([*ROOT.glob("plugins/*/*.py"), *ROOT.glob("roles/*/*_plugins/*.py")])
PLUGIN_STEMS = {p.stem for p in PLUGINS}

# Load every plugin as ansible's PluginLoader._load_module_source does, then report where each
# project module was imported from, and what sys.path and ansible.module_utils.__path__ hold.
LOADER = """
import importlib.util, json, sys
from pathlib import Path
import ansible.module_utils
root, plugins = Path(sys.argv[1]), sys.argv[2:]
before = list(ansible.module_utils.__path__)
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
package = str(root / "src" / "nccl_preflight")
loaded = {
    name: module.__file__
    for name, module in list(sys.modules.items())
    if (getattr(module, "__file__", None) or "").startswith(package + "/")
}
print(json.dumps({
    "errors": errors,
    "loaded": loaded,
    "sys_path": sys.path,
    "module_utils_path_grew": list(ansible.module_utils.__path__) != before,
}))
"""


def load_plugins() -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", LOADER, str(ROOT), *map(str, PLUGINS)],
        capture_output=True,
        text=True,
        cwd="/",  # nothing of the project on sys.path by accident
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_every_plugin_loads_the_project_as_the_nccl_preflight_package_only() -> None:
    assert len(PLUGINS) >= 8  # the glob found the plugins (actions, callbacks, filters, inventory)
    seen = load_plugins()
    assert seen["errors"] == {}
    # The plugins do use both rooms (the report's run, the fabric choice, the atomic write, ...).
    assert {
        "nccl_preflight.core.report_run",
        "nccl_preflight.core.preflight.result",
        "nccl_preflight.node.fabric_choice",
        "nccl_preflight.node.files",
    } <= set(seen["loaded"])
    elsewhere = {n: f for n, f in seen["loaded"].items() if n.split(".")[0] != "nccl_preflight"}
    assert elsewhere == {}, "project code loaded under another name (a path step or importlib)"
    assert seen["module_utils_path_grew"] is False
    for folder in ("plugins", "library", "module_utils", "roles"):
        assert not [p for p in seen["sys_path"] if p.startswith(str(ROOT / folder))], folder


def _imported_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def plugin_import_offences(where: str, source: str) -> list[str]:
    """What in a plugin's source is not the one way: a path step, importlib, the project through
    ``ansible.module_utils`` or a sibling plugin imported by its file name."""
    names = _imported_names(ast.parse(source))
    offences = [f"{where} imports {n}" for n in sorted(names) if n.split(".")[0] == "importlib"]
    offences += [
        f"{where} imports {n}" for n in sorted(names) if n.startswith("ansible.module_utils.nccl")
    ]
    offences += [f"{where} imports the plugin {n}" for n in sorted(names & PLUGIN_STEMS)]
    offences += [
        f"{where}: {line.strip()}"
        for line in source.splitlines()
        if "sys.path" in line or "__path__" in line
    ]
    return offences


def test_no_plugin_imports_project_code_any_other_way() -> None:
    """The same rule read from the source, so a plugin that is not loaded above still counts."""
    offences = []
    for path in PLUGINS:
        offences += plugin_import_offences(str(path.relative_to(ROOT)), path.read_text())
    assert offences == []


def test_the_source_rule_names_each_back_door() -> None:
    prelude = (
        "import sys\nimport ansible.module_utils\n"
        "ansible.module_utils.__path__.append('/x')\n"
        "sys.path.append('/y')\n"
        "from ansible.module_utils.nccl_preflight.node.files import write_atomically\n"
        "from nccl_run_owner import started_at\n"
        "import importlib.util\n"
    )
    assert plugin_import_offences("p.py", prelude) == [
        "p.py imports importlib.util",
        "p.py imports ansible.module_utils.nccl_preflight.node.files",
        "p.py imports the plugin nccl_run_owner",
        "p.py: ansible.module_utils.__path__.append('/x')",
        "p.py: sys.path.append('/y')",
    ]
    assert plugin_import_offences("p.py", "from nccl_preflight.core import verdict\n") == []
