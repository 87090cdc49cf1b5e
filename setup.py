# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The wheel's one addition to pyproject.toml: a copy of what the command runs beside the package
(ansible.cfg, playbooks/, roles/, library/, plugins/, files/, inventory/: core/content.py SHARED)
under nccl_preflight/share/, so that ``pip install .`` gives a command that works outside any
checkout. An editable install (make's ``pip install -e .``) copies nothing: the package then
finds the checkout itself."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def content_module():  # the module core/content.py, loaded by its path
    spec = importlib.util.spec_from_file_location(
        "nccl_preflight_content", HERE / "src" / "nccl_preflight" / "core" / "content.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


class BuildWithContent(build_py):
    """build_py, then the copy of SHARED into the built package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        content = content_module()
        content.copy_shared(HERE, Path(self.build_lib) / "nccl_preflight" / content.SHARE)


setup(cmdclass={"build_py": BuildWithContent})
