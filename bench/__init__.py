# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The benchmarks measure this checkout: its src/ comes first, for the bench and every Python it
starts, before a shared venv's editable install of another checkout.

`python -m bench.run` from the checkout root finds bench/ and tests/ here but nccl_preflight where
the venv's editable install points. When that is not this checkout's src/, the bench starts
itself again with src/ first on PYTHONPATH (what its children inherit too). No import path is
changed in code (tests/unit/tree/test_hygiene.py): under pytest, tests/conftest.py has put src/
first already and nothing happens here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _imports_this_checkout() -> bool:
    spec = importlib.util.find_spec("nccl_preflight")
    origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    return origin is not None and origin.is_relative_to(SRC)


def _first_on_pythonpath() -> str:
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SRC)]
    return os.pathsep.join([str(SRC), *rest])


if (SRC / "nccl_preflight").is_dir() and not _imports_this_checkout():
    if os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] == str(SRC):
        raise ImportError(f"nccl_preflight is not imported from {SRC} though PYTHONPATH has it")
    os.environ["PYTHONPATH"] = _first_on_pythonpath()
    os.execv(sys.executable, sys.orig_argv)
