# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node/payload.py: a module of ours removes AnsiballZ's payload directory first thing and still
imports from it; SIGTERM and SIGHUP end it through the wrapper's cleanup until then. The real
wrapper over the lab's SSH: tests/integration/test_interrupt_lab.py."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import time
import zipfile
from pathlib import Path

import pytest

from nccl_preflight.node.payload import (
    MemoryImporter,
    exit_on_stop_signals,
    guard_payload,
    leave_no_payload,
    payload_directory,
)

LAZY = "leakcheck_pkg"


def make_payload(tmp_path: Path, module: str = "nccl_torchrun") -> Path:
    """A payload as the wrapper makes it: <tmp>/ansible_<m>_payload_<x>/ansible_<m>_payload.zip,
    holding a package with a module only imported later (lazily)."""
    directory = tmp_path / f"ansible_{module}_payload_ab12cd"
    directory.mkdir()
    archive = directory / f"ansible_{module}_payload.zip"
    with zipfile.ZipFile(archive, "w") as payload:
        payload.writestr(f"{LAZY}/__init__.py", "NAME = 'package'\n")
        payload.writestr(f"{LAZY}/lazy.py", "from . import NAME\nVALUE = NAME + ' lazy'\n")
        payload.writestr("sitecustomize.py", "")
    return archive


@pytest.fixture
def clean_imports(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    yield
    for name in [n for n in sys.modules if n == LAZY or n.startswith(LAZY + ".")]:
        del sys.modules[name]


def test_payload_directory_is_only_the_wrappers_own(tmp_path: Path) -> None:
    archive = make_payload(tmp_path)
    assert payload_directory(str(archive)) == str(archive.parent)
    other = tmp_path / "mine"
    other.mkdir()
    assert payload_directory(str(other / "ansible_nccl_torchrun_payload.zip")) is None
    assert payload_directory(str(archive.parent / "something.zip")) is None


def test_the_payload_directory_goes_and_a_later_import_still_finds_its_module(
    tmp_path: Path, clean_imports: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = make_payload(tmp_path)
    monkeypatch.syspath_prepend(str(archive))  # as the wrapper puts it first
    importlib.import_module(LAZY)  # imported while the zip is there, as the module's imports
    assert leave_no_payload(str(archive)) is True
    assert not archive.parent.exists()
    lazy = importlib.import_module(f"{LAZY}.lazy")  # after the directory went
    assert lazy.VALUE == "package lazy"
    assert lazy.__file__ == f"{archive}/{LAZY}/lazy.py"
    assert isinstance(sys.meta_path[0], MemoryImporter)


def test_no_payload_outside_ansiballz_removes_nothing(tmp_path: Path) -> None:
    archive = make_payload(tmp_path)
    assert leave_no_payload(None) is False
    unshaped = tmp_path / "ansible_x_payload.zip"
    unshaped.write_bytes(archive.read_bytes())
    assert leave_no_payload(str(unshaped)) is False
    assert archive.exists() and unshaped.exists()


def test_sigterm_and_sighup_raise_systemexit_until_the_payload_is_gone(
    tmp_path: Path, clean_imports: None
) -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    archive = make_payload(tmp_path)
    release = guard_payload(str(archive))
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if before[sig] is signal.SIG_IGN:
                continue  # ignored where the test runs (nohup): it stays ignored
            with pytest.raises(SystemExit) as ended:
                os.kill(os.getpid(), sig)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:  # the handler runs at the next bytecode
                    time.sleep(0.01)
            assert ended.value.code == 128 + sig
    finally:
        assert release() is True
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_outside_ansiballz_the_signals_keep_their_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    restore = exit_on_stop_signals(None)
    assert signal.getsignal(signal.SIGTERM) is before
    restore()
    assert signal.getsignal(signal.SIGTERM) is before
