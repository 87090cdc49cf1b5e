# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The Ansible collection nccl.preflight (src/nccl_preflight/core/collection.py): written from the
tree, built and installed with ansible-galaxy offline into a temporary path, then used as a site
would, from a directory outside the checkout with no ansible.cfg of the project: ansible-doc
documents every module, a site's playbook uses its roles and imports its playbook, and
`ansible-playbook nccl.preflight.validate` validates the lab, its reports in the working
directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from nccl_preflight.core.collection import CALLBACKS, FQCN, MODULES, write_collection
from tests.lab.harness import Lab

BIN = Path(sys.executable).parent
SITE_ROLE_PLAYBOOK = f"""---
- name: A site's own play that uses the collection's defaults role
  hosts: localhost
  gather_facts: false
  roles:
    - role: {FQCN}.nccl_defaults
  tasks:
    - name: Show one default
      ansible.builtin.debug:
        msg: "master port {{{{ nccl_master_port }}}}"
"""
SITE_IMPORT_PLAYBOOK = f"""---
- name: The collection's validation inside a site's playbook
  ansible.builtin.import_playbook: {FQCN}.validate
"""


@dataclass
class Installed:
    collections: Path
    work: Path

    def env(self) -> dict[str, str]:
        """A site's environment: the installed collection, its callbacks and hostfile plugin
        enabled, no ansible.cfg of the project."""
        env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}
        env |= {
            "ANSIBLE_COLLECTIONS_PATH": str(self.collections),
            "ANSIBLE_CALLBACKS_ENABLED": ",".join(f"{FQCN}.{c}" for c in CALLBACKS),
            "ANSIBLE_INVENTORY_ENABLED": f"{FQCN}.hostfile,host_list,script,auto,yaml,toml",
            "ANSIBLE_NOCOLOR": "1",
            "PWD": str(self.work),  # as a shell's cd sets it (the reports' default directory)
        }
        return env

    def run(self, program: str, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BIN / program), *argv],
            cwd=self.work,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("collection")
    source = write_collection(base / "source")
    galaxy = [str(BIN / "ansible-galaxy"), "collection"]
    build = [*galaxy, "build", str(source), "--output-path", str(base / "built")]
    subprocess.run(build, check=True, capture_output=True, timeout=300)
    (tarball,) = (base / "built").glob("nccl-preflight-*.tar.gz")
    install = [*galaxy, "install", "--offline", "-p", str(base / "collections"), str(tarball)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    work = base / "work"
    work.mkdir()
    return Installed(base / "collections", work)


def test_ansible_doc_documents_every_module_and_the_inventory_plugin(installed: Installed) -> None:
    for kind, name in [*(("module", m) for m in MODULES), ("inventory", "hostfile")]:
        done = installed.run("ansible-doc", "-t", kind, f"{FQCN}.{name}")
        assert done.returncode == 0, done.stderr
        assert f"{FQCN}.{name}" in done.stdout, done.stdout[:500]
        # every option of a module documented (the inventory plugin has none)
        assert kind != "module" or "OPTIONS" in done.stdout, done.stdout[:500]


def test_a_site_playbook_uses_its_roles_and_imports_its_playbook(installed: Installed) -> None:
    roles = installed.work / "site-roles.yml"
    roles.write_text(SITE_ROLE_PLAYBOOK)
    done = installed.run("ansible-playbook", str(roles), "-i", "localhost,", "-c", "local")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "master port 29500" in done.stdout, done.stdout[-3000:]
    imports = installed.work / "site-import.yml"
    imports.write_text(SITE_IMPORT_PLAYBOOK)
    done = installed.run("ansible-playbook", str(imports), "-i", "localhost,", "--list-tasks")
    assert done.returncode == 0, done.stdout + done.stderr
    # the validation's plays and its roles' tasks, from the collection
    assert "Work out each node's NCCL and Gloo environment" in done.stdout, done.stdout[-3000:]
    assert f"{FQCN}.launch : " in done.stdout, done.stdout[-3000:]


@pytest.mark.lab
def test_the_collections_playbook_validates_the_lab(installed: Installed, lab2: Lab) -> None:
    quick = ["--max-bytes", "16K", "--iters", "2", "--warmup", "1"]
    extra = {"nccl_master_port": 29548, "nccl_check_args": quick, "nccl_run_timeout": 90}
    extra["nccl_run_id"] = "collection-run"
    done = installed.run(
        "ansible-playbook",
        f"{FQCN}.validate",
        "-i",
        str(lab2.inventory_dir),
        "-e",
        json.dumps(extra),
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    report = installed.work / "reports" / "collection-run"
    assert (report / "verdict.json").is_file(), out[-6000:]
    assert json.loads((report / "verdict.json").read_text())["class"] == "passed", out[-3000:]
    assert (report / "junit.xml").is_file()
    assert "PASSED" in out  # the closing summary of the console callback
