# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Where the files that the package runs beside lie: ansible.cfg, playbooks/, roles/, library/,
plugins/, files/ (the rank script) and inventory/ (``SHARED``), the one place that knows.

In a checkout (the package in src/, installed editable or on PYTHONPATH) they are the checkout's.
In an installed wheel (``pip install .``) setup.py's build step copied them into the package,
under ``nccl_preflight/share/`` (``copy_shared``), laid out as in the checkout, so every path
between them holds; only ansible.cfg's ``module_utils`` (the checkout's src/) is rewritten to
the directory the package is installed in. The node bundle has neither (``Tree.complete`` is
False there).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # src/nccl_preflight, or site-packages/...
SHARE = "share"  # the copy's directory inside an installed package
# What a run needs beside the package, relative to the checkout's root.
SHARED = ("ansible.cfg", "playbooks", "roles", "library", "plugins", "files", "inventory")
PLAYBOOK = ("playbooks", "validate.yml")
# ansible.cfg's line naming the directory that holds the package (Ansible's module_utils path).
MODULE_UTILS_LINE = "module_utils = src\n"
INSTALLED_MODULE_UTILS_LINE = "module_utils = ../..\n"  # share/ -> nccl_preflight/ -> its parent


@dataclass(frozen=True)
class Tree:
    """The package's directory and the directory holding ``SHARED``."""

    package: Path
    content: Path

    @property
    def source(self) -> Path:
        """The directory the package's modules are named from (a checkout's src/)."""
        return self.package.parent

    @property
    def playbook(self) -> Path:
        return self.content.joinpath(*PLAYBOOK)

    @property
    def rank_script(self) -> Path:
        return self.content / "files" / "nccl_check.py"

    @property
    def installed(self) -> bool:
        """Whether the content is an installed copy (reports then go to the working directory,
        not beside the playbooks)."""
        return self.content == self.package / SHARE

    @property
    def complete(self) -> bool:
        """Whether the roles and the rank script are there (not so inside the node bundle)."""
        return (self.content / "roles").is_dir() and self.rank_script.is_file()


def find_tree(package: Path = PACKAGE) -> Tree:
    """The checkout's tree when ``package`` lies in one, else the installed copy's."""
    checkout = package.parents[1]
    if package.parent.name == "src" and checkout.joinpath(*PLAYBOOK).is_file():
        return Tree(package, checkout)
    return Tree(package, package / SHARE)


TREE = find_tree()


def _skip(_directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".retry"))}


def copy_shared(checkout: Path, target: Path) -> list[Path]:
    """Copy ``checkout``'s ``SHARED`` into ``target`` (a package's share/), links followed;
    -> the files written. ansible.cfg's module_utils names the installed package's parent."""
    written: list[Path] = []
    for name in SHARED:
        source, copy = checkout / name, target / name
        if source.is_dir():
            shutil.copytree(source, copy, ignore=_skip, dirs_exist_ok=True)
            written += sorted(p for p in copy.rglob("*") if p.is_file())
        else:
            copy.parent.mkdir(parents=True, exist_ok=True)
            text = source.read_text(encoding="utf-8")
            if name == "ansible.cfg":
                if MODULE_UTILS_LINE not in text:
                    raise ValueError(f"{source}: no line {MODULE_UTILS_LINE.strip()!r}")
                text = text.replace(MODULE_UTILS_LINE, INSTALLED_MODULE_UTILS_LINE)
            copy.write_text(text, encoding="utf-8")
            written.append(copy)
    return written
