# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A module of ours leaves no AnsiballZ payload directory on a node, whatever way it ends.

ansible-core's AnsiballZ wrapper unpacks a module's payload (``ansible_<module>_payload.zip``, the
module and every ``ansible.module_utils`` file it imports) into a directory of the node's system
temporary directory (``tempfile.mkdtemp(prefix="ansible_<module>_payload_")``: ``$TMPDIR`` or
``/tmp``, not the run's private directory nor ``remote_tmp``), puts the zip first on
``sys.path`` and removes the directory in a ``finally`` once the module returns. A module process
that dies by a signal never gets there: SIGTERM or SIGHUP with Python's default handlers (a node
shutting down, systemd-logind ending the SSH session, a terminal's hangup where Ansible runs
modules on a tty, a lab torn down) or SIGKILL (after a stop timeout, the OOM killer) leave the
directory for good, and a validator must not change what it validates.

So each of library/'s modules, first thing:

- :func:`guard_payload` (right after ``ansible.module_utils.basic``, before the module's other
  imports): SIGTERM and SIGHUP raise SystemExit, so the wrapper's ``finally`` removes the
  directory while the module imports;
- the call it returns (:func:`leave_no_payload`, first thing in ``main()``): reads the payload
  zip into memory, serves later imports from there (:class:`MemoryImporter`: a lazy import still
  finds its module) and removes the payload directory at once, then gives the signals their
  handlers back. From then on no way out, SIGKILL included, leaves anything of
  the payload; the wrapper's own removal finds nothing to do.

What is left open: a signal in the moments before the module's own code runs (the wrapper
unpacking the zip, ansible-core's loader importing ``basic``), and SIGKILL before ``main()``.

Outside AnsiballZ (a test that runs ``main()`` in its own process, a plain program such as
node/start_call.py) there is no payload (``_modlib_path``, the path the wrapper hands the module
in its globals, is missing) and both do nothing. Standard library only.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import io
import os
import shutil
import signal
import sys
import zipfile
from collections.abc import Callable
from types import CodeType
from typing import Any

# The signals whose default action ends the process without running any ``finally``, and that a
# node sends on its own (SIGINT already raises KeyboardInterrupt; SIGKILL cannot be caught).
EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
Restore = Callable[[], None]


def _nothing() -> None:
    return None


def _exit_now(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def exit_on_stop_signals(modlib_path: str | None) -> Restore:
    """Under AnsiballZ (``modlib_path`` given): SIGTERM and SIGHUP raise SystemExit from here on.
    -> what gives them back their handlers of before."""
    if not modlib_path:
        return _nothing
    before = {sig: signal.getsignal(sig) for sig in EXIT_SIGNALS}
    for sig, handler in before.items():
        if handler is not signal.SIG_IGN:  # a node that ignores one (nohup) keeps ignoring it
            signal.signal(sig, _exit_now)

    def restore() -> None:
        for sig, handler in before.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    return restore


def payload_directory(modlib_path: str) -> str | None:
    """The directory AnsiballZ made for ``modlib_path`` (``<tmp>/ansible_<m>_payload_<x>/
    ansible_<m>_payload.zip``), or None when the path is not shaped so (never remove another)."""
    name = os.path.basename(modlib_path)
    directory = os.path.dirname(os.path.realpath(modlib_path))
    stem = name[: -len(".zip")]
    if not (name.startswith("ansible_") and name.endswith("_payload.zip")):
        return None
    if not os.path.basename(directory).startswith(stem + "_"):
        return None
    return directory


class MemoryImporter(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """Imports the payload's modules from memory: the zip's bytes, read before the zip went
    (each module is only inflated when it is imported)."""

    def __init__(self, archive: str, data: bytes) -> None:
        self.archive = archive
        self.payload = zipfile.ZipFile(io.BytesIO(data))
        self.names = {name for name in self.payload.namelist() if name.endswith(".py")}

    def _entry(self, fullname: str) -> tuple[str, bool]:
        base = fullname.replace(".", "/")
        for name, package in ((f"{base}/__init__.py", True), (f"{base}.py", False)):
            if name in self.names:
                return name, package
        raise ImportError(f"no module named {fullname!r} in the payload", name=fullname)

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        try:
            name, package = self._entry(fullname)
        except ImportError:
            return None
        spec = importlib.util.spec_from_loader(fullname, self, is_package=package)
        if spec is not None:
            spec.origin = f"{self.archive}/{name}"
            spec.has_location = True
        return spec

    def is_package(self, fullname: str) -> bool:
        return self._entry(fullname)[1]

    def get_source(self, fullname: str) -> str:
        return self.payload.read(self._entry(fullname)[0]).decode("utf-8")

    def get_code(self, fullname: str) -> CodeType:
        name = self._entry(fullname)[0]
        source = self.payload.read(name)
        return compile(source, f"{self.archive}/{name}", "exec", dont_inherit=True)


def guard_payload(modlib_path: str | None) -> Callable[[], bool]:
    """exit_on_stop_signals now; -> the call for the start of ``main()``: leave_no_payload."""
    restore = exit_on_stop_signals(modlib_path)
    return lambda: leave_no_payload(modlib_path, restore)


def leave_no_payload(modlib_path: str | None, restore: Restore = _nothing) -> bool:
    """Remove AnsiballZ's payload directory of ``modlib_path`` now, its modules kept importable
    from memory; then ``restore`` the signals (exit_on_stop_signals). -> whether it removed one."""
    try:
        directory = payload_directory(modlib_path) if modlib_path else None
        if directory is None or not os.path.isdir(directory):
            return False
        with open(modlib_path, "rb") as payload:
            importer = MemoryImporter(str(modlib_path), payload.read())
        sys.meta_path.insert(0, importer)
        sys.path_importer_cache.pop(str(modlib_path), None)
        shutil.rmtree(directory, ignore_errors=True)
        return not os.path.exists(directory)
    finally:
        restore()
