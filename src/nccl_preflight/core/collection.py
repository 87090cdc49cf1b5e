# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The Ansible collection ``nccl.preflight``, written from the tree the package runs from
(core/content.py), for ``ansible-galaxy collection build``:

    python -m nccl_preflight.core.collection DIR     # DIR/galaxy.yml ... (make collection)

    roles/*              the roles; their module and filter names written in full
                         (nccl.preflight.nccl_facts, | nccl.preflight.nccl_rank_layout)
    playbooks/validate.yml   the playbook, its roles in full: ansible-playbook
                         nccl.preflight.validate, or import_playbook from a site's own
    plugins/modules/     library/'s modules, their doc fragments in full; the node room they
                         ship with them, under plugins/module_utils/nccl_preflight/ (what
                         ansible.cfg's module_utils gives a checkout)
    plugins/action|filter|callback|inventory|doc_fragments/   plugins/'s, and roles/launch's
                         action plugin
    files/               the rank script (roles/launch's launch_script: role_path/../../files)

The control machine's side of the plugins imports the installed package (``pip install
nccl-preflight``), as in a checkout. What a collection cannot carry is ansible.cfg: a site's own
configuration enables the callbacks and the hostfile inventory plugin (README, "As an Ansible
collection"). Reports go to the working directory's reports/ unless nccl_report_root says.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from nccl_preflight import __version__
from nccl_preflight.core.content import TREE, Tree
from nccl_preflight.core.defaults_files import defaults_text
from nccl_preflight.core.variables import FILES, report_root

NAMESPACE, NAME = "nccl", "preflight"
FQCN = f"{NAMESPACE}.{NAME}"


# The project's modules (library/), callbacks (plugins/callback/) and doc fragments
# (plugins/doc_fragments/), as the tree has them.
def _stems(*parts: str) -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in TREE.content.joinpath(*parts).glob("*.py")))


MODULES = _stems("library")
CALLBACKS = _stems("plugins", "callback")
DOC_FRAGMENTS = _stems("plugins", "doc_fragments")
NODE_IMPORT = "ansible.module_utils.nccl_preflight."
COLLECTION_IMPORT = f"ansible_collections.{NAMESPACE}.{NAME}.plugins.module_utils.nccl_preflight."
# Where the collection's reports go by default: the working directory's reports/ (a checkout's
# go beside its playbooks/).
COLLECTION_REPORT_ROOT = "lookup('ansible.builtin.env', 'PWD') ~ '/reports'"
COLLECTION_DEFAULTS = {"nccl_report_root": report_root(COLLECTION_REPORT_ROOT)}

GALAXY = f"""---
namespace: {NAMESPACE}
name: {NAME}
version: {__version__}
readme: README.md
authors:
  - nccl-preflight contributors
description: Prove a multi-node cluster is ready for torch.distributed before training starts.
license:
  - MIT
tags: [nccl, gpu, hpc, slurm, torch]
build_ignore:
  - "*.pyc"
  - "__pycache__"
"""
RUNTIME = '---\nrequires_ansible: ">=2.17.0"\n'
README = f"""# {FQCN}

nccl-preflight's roles, modules and plugins as an Ansible collection. The control machine needs
the Python package too (`pip install nccl-preflight`: the plugins' code). Run

    ansible-playbook {FQCN}.validate -i HOSTFILE

with, in your ansible.cfg (or the ANSIBLE_* variables):

    [defaults]
    callbacks_enabled = {", ".join(f"{FQCN}.{c}" for c in CALLBACKS)}
    [inventory]
    enable_plugins = {FQCN}.hostfile, host_list, script, auto, yaml, toml

or `- ansible.builtin.import_playbook: {FQCN}.validate` in a playbook of your own.
"""


def filter_names(tree: Tree) -> list[str]:
    """The filters of plugins/filter/, read from their modules' source (no Ansible import)."""
    names: set[str] = set()
    for path in sorted((tree.content / "plugins" / "filter").glob("*.py")):
        names |= set(re.findall(r'"(nccl_[a-z0-9_]+)":', path.read_text(encoding="utf-8")))
    return sorted(names, key=len, reverse=True)


def qualify(text: str, filters: list[str]) -> str:
    """``text`` (a role's YAML or template) with the project's modules and filters in full."""
    modules = "|".join(MODULES)
    text = re.sub(rf"^(\s*(?:- )?)({modules}):", rf"\1{FQCN}.\2:", text, flags=re.M)
    names = "|".join(filters)
    return re.sub(rf"\|(\s*)({names})\b", rf"|\1{FQCN}.\2", text)


def _copy_yaml_tree(source: Path, target: Path, filters: list[str]) -> None:
    shutil.copytree(
        source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*_plugins")
    )
    for path in target.rglob("*"):
        if path.suffix in (".yml", ".yaml", ".j2") and path.is_file():
            path.write_text(qualify(path.read_text(encoding="utf-8"), filters), encoding="utf-8")


def qualify_fragments(text: str) -> str:
    """A module's source with the project's doc fragments in full: a collection's modules find
    a fragment by its full name only (ansible-doc has no collection to search)."""
    names = "|".join(DOC_FRAGMENTS)
    block = re.compile(r"^extends_documentation_fragment:\n(?:  - .*\n)+", re.M)
    return block.sub(
        lambda m: re.sub(rf"^(  - )({names})$", rf"\1{FQCN}.\2", m.group(0), flags=re.M), text
    )


def _copy_plugins(tree: Tree, target: Path) -> None:
    plugins = target / "plugins"
    for module in sorted((tree.content / "library").glob("*.py")):
        text = module.read_text(encoding="utf-8").replace(NODE_IMPORT, COLLECTION_IMPORT)
        text = qualify_fragments(text)
        (plugins / "modules").mkdir(parents=True, exist_ok=True)
        (plugins / "modules" / module.name).write_text(text, encoding="utf-8")
    utils = plugins / "module_utils" / "nccl_preflight"
    utils.mkdir(parents=True)
    shutil.copy2(tree.package / "__init__.py", utils / "__init__.py")
    shutil.copytree(
        tree.package / "node", utils / "node", ignore=shutil.ignore_patterns("__pycache__")
    )
    for kind in ("action", "filter", "callback", "inventory", "doc_fragments"):
        shutil.copytree(
            tree.content / "plugins" / kind,
            plugins / kind,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    for action in sorted((tree.content / "roles").glob("*/action_plugins/*.py")):
        shutil.copy2(action, plugins / "action" / action.name)
    inventory = plugins / "inventory" / "hostfile.py"
    text = inventory.read_text(encoding="utf-8")
    inventory.write_text(
        text.replace('NAME = "hostfile"', f'NAME = "{FQCN}.hostfile"'), encoding="utf-8"
    )


def write_collection(target: Path, tree: Tree = TREE) -> Path:
    """The collection's source directory ``target`` (made; it must not exist); -> ``target``."""
    if target.exists():
        raise FileExistsError(f"{target} exists: give a new directory")
    filters = filter_names(tree)
    target.mkdir(parents=True)
    (target / "galaxy.yml").write_text(GALAXY, encoding="utf-8")
    (target / "meta").mkdir()
    (target / "meta" / "runtime.yml").write_text(RUNTIME, encoding="utf-8")
    (target / "README.md").write_text(README, encoding="utf-8")
    if (tree.content / "LICENSE").is_file():  # a checkout's (a wheel's is in its dist-info)
        shutil.copy2(tree.content / "LICENSE", target / "LICENSE")
    _copy_yaml_tree(tree.content / "roles", target / "roles", filters)
    for file in FILES:  # written from the schema, with the collection's own defaults
        if any(v.name in COLLECTION_DEFAULTS for g in file.groups for v in g.variables):
            text = defaults_text(file, COLLECTION_DEFAULTS)
            (target / "roles" / file.path).write_text(text, encoding="utf-8")
    (target / "playbooks").mkdir()
    playbook = qualify(tree.playbook.read_text(encoding="utf-8"), filters)
    playbook = re.sub(r"^(\s*- role: )(\w+)$", rf"\1{FQCN}.\2", playbook, flags=re.M)
    (target / "playbooks" / "validate.yml").write_text(playbook, encoding="utf-8")
    shutil.copytree(
        tree.content / "files",
        target / "files",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    _copy_plugins(tree, target)
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m nccl_preflight.core.collection DIR", file=sys.stderr)
        return 2
    print(write_collection(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
