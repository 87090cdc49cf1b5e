# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The rank script and the sibling modules it imports, as one zipapp file for the nodes.

files/nccl_check.py (or a ``launch_script`` of one's own) may import modules that lie beside it
(``files/nccl_check_<part>.py``: torch and the standard library only). The nodes still get one
file: on the control machine, ``build_zipapp(entry)`` finds every such sibling the entry imports
(with ``ast``, never importing anything: ``import X`` and ``from X import ...`` at any depth of
the code, where ``X.py`` is in the entry's directory, and what those import in turn), and
returns the bytes of a zip file holding them and a ``__main__.py`` that runs the entry as
``__main__``. ``python -u nccl_check.pyz args`` (what torchrun runs) then behaves as
``python -u nccl_check.py args``: the same ``sys.argv`` after the script's name, argparse's
``prog``, exit status and output; tracebacks name ``.../nccl_check.pyz/nccl_check.py`` with
their line and source text. An entry that imports no sibling is a zipapp of one module. A
sibling may be a symbolic link (files/nccl_check_tables.py is one, to the node room's
collective_tables.py): the zip holds the file it points to, under the sibling's name.

The bytes depend only on the sources: names sorted, fixed timestamps and permissions.
Standard library only. Used by roles/launch/action_plugins/nccl_torchrun.py (state=started) and,
by hand, ``python src/nccl_preflight/core/zipapp.py files/nccl_check.py -o build/nccl_check.pyz``
(``make rank-script``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fcntl
import functools
import hashlib
import importlib.util
import io
import marshal
import os
import re
import sys
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

from nccl_preflight.node.files import write_atomically

# What Python runs first in a zip; also a name no sibling may take.
MAIN = "__main__"
SHEBANG = b"#!/usr/bin/env python3\n"
# The zip format's earliest date: the same sources give the same bytes.
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
FILE_MODE = 0o100644  # a regular file, rw-r--r--, in the zip's Unix attributes
COMPRESS_LEVEL = 9

MAIN_TEMPLATE = '''\
"""Runs {entry}.py of this zipapp as the script, as `python {entry}.py` would.

Built on the control machine by nccl-preflight (src/nccl_preflight/core/zipapp.py) from {entry}.py
and the sibling modules it imports: {modules}.
"""

import functools
import importlib.util
import linecache
import re
import runpy
import sys
import threading
import traceback

ENTRY = {entry!r}
SPEC = importlib.util.find_spec(ENTRY)
# The script runs as "__main__": given only its module globals, linecache would ask the zip for
# the source of "__main__" (this file). Seed it with the script's own source instead, so
# tracebacks and warnings show the script's lines.
linecache.cache[SPEC.origin] = (functools.partial(SPEC.loader.get_source, ENTRY),)


def excepthook(kind, value, tb):
    """An uncaught exception printed from the script's first frame on, as for the .py."""
    start = tb
    while start is not None and start.tb_frame.f_code.co_filename != SPEC.origin:
        start = start.tb_next
    traceback.print_exception(kind, value, start or tb)


def thread_excepthook(args):
    """An exception that ends a thread, as threading prints it, with the source lines."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else threading.get_ident()
    print(f"Exception in thread {{name}}:", file=sys.stderr, flush=True)
    traceback.print_exception(args.exc_type, args.exc_value, args.exc_traceback)
    sys.stderr.flush()


sys.excepthook = excepthook
threading.excepthook = thread_excepthook
runpy.run_module(ENTRY, run_name="__main__", alter_sys=True)
'''


class BundleError(ValueError):
    """The entry or a sibling cannot be read or parsed; the message names the file."""


def _parse(source: bytes, path: Path) -> ast.AST:
    """The syntax tree of ``source``; BundleError naming ``path`` when it does not parse."""
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise BundleError(
            f"cannot parse {path}, line {exc.lineno}: {exc.msg} "
            f"(what goes into a zipapp must be valid Python)"
        ) from None
    except ValueError as exc:  # null bytes, a bad coding declaration
        raise BundleError(f"cannot parse {path}: {exc}") from None


def imported_names(source: bytes, path: Path) -> set[str]:
    """The top-level names of the absolute imports anywhere in ``source`` (``import a.b`` and
    ``from a.b import c`` give ``a``). BundleError naming ``path`` when it does not parse."""
    tree = _parse(source, path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


# An import statement at the start of a logical line, anywhere (lazy imports in functions too):
# `from X import NAMES` (NAMES possibly in parentheses over several lines) or `import A, B`.
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n#;]*)", re.M)


def _package_imports(source: str, module: str, is_package: bool, top: str) -> set[str]:
    """The dotted names under ``top`` that ``module``'s source imports (relative imports
    resolved; ``from a import b`` gives ``a`` and ``a.b``). Read from the text, not parsed: an
    import-like line inside a string adds a name at most, and a name that is no module of the
    package is dropped by package_closure (a superset, never a missing module)."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for match in _IMPORT.finditer(source):
        for part in match.group(1).split(","):
            name = part.split(" as ")[0].strip()
            if name.split(".")[0] == top:
                found.add(name)
    for match in _FROM_IMPORT.finditer(source):
        base, names = match.group(1), match.group(2).strip("() \n")
        level = len(base) - len(base.lstrip("."))
        if level:
            parts = package.split(".")
            rest = base[level:]
            base = ".".join(parts[: len(parts) - (level - 1)] + ([rest] if rest else []))
        if base.split(".")[0] == top:
            found.add(base)
            for part in names.split(","):
                name = part.split(" as ")[0].strip()
                if name.isidentifier():
                    found.add(f"{base}.{name}")
    return found


def package_closure(src: Path, entry: str) -> list[Path]:
    """The files under ``src`` (the folder that holds the package) that module ``entry`` needs:
    itself, every module of its package it imports (transitively, lazy imports included) and
    the ``__init__.py`` of every package on the way; sorted."""
    top = entry.split(".")[0]
    seen: dict[str, Path] = {}
    pending = [entry]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        base = src.joinpath(*name.split("."))
        path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if not path.is_file():
            continue  # a name imported from a module (a function, a class), not a module
        seen[name] = path
        parts = name.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts))]
        source = read_source(path, "the module").decode("utf-8", "replace")
        pending += sorted(_package_imports(source, name, path.name == "__init__.py", top))
    return sorted(seen.values())


def read_source(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BundleError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def check_entry(entry: Path) -> None:
    stem = entry.stem
    if entry.suffix != ".py":
        raise BundleError(f"the rank script {entry} must be a .py file")
    if not stem.isidentifier() or stem == MAIN or stem in getattr(sys, "stdlib_module_names", ()):
        raise BundleError(
            f"the rank script {entry} cannot run from a zipapp under the module name {stem!r} "
            f"(not a Python identifier, or a name of the standard library): rename it"
        )


def bundle_modules(entry: Path) -> dict[str, bytes]:
    """{module name: source} of the entry and every sibling it imports, transitively.

    A sibling is ``<name>.py`` in the entry's directory for an imported top-level ``name``
    (never ``__main__``); other imports (torch, the standard library) are left to the node.
    """
    entry = Path(entry)
    check_entry(entry)
    folder = entry.parent
    found: dict[str, bytes] = {}
    pending = [(entry.stem, entry, "the rank script")]
    while pending:
        name, path, what = pending.pop()
        if name in found:
            continue
        found[name] = read_source(path, what)
        for imported in sorted(imported_names(found[name], path) - set(found) - {MAIN}):
            sibling = folder / f"{imported}.py"
            if sibling.is_file():
                pending.append((imported, sibling, f"the module {imported} (imported by {path})"))
    return found


def zip_bytes(files: dict[str, bytes]) -> bytes:
    """A deterministic zip of ``files`` (name -> bytes), after the shebang line."""
    out = io.BytesIO()
    out.write(SHEBANG)
    with zipfile.ZipFile(out, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, so external_attr holds the mode
            info.external_attr = FILE_MODE << 16
            archive.writestr(info, files[name], compresslevel=COMPRESS_LEVEL)
    return out.getvalue()


def with_bytecode(files: dict[str, bytes], archive: str) -> dict[str, bytes]:
    """``files`` with ``X.pyc`` beside each ``X.py``: this interpreter's bytecode of it at
    optimisation level 0, as a PEP 552 hash-based pyc not checked against its source (the zip
    holds both, made together). zipimport tries ``X.pyc`` first and takes it only when its magic
    number is this Python version's: a node with the same Python skips compiling every module on
    every run of the program (0.16 CPU s a facts call on the lab, 0.09 with these), any other
    Python compiles the sources as before. ``archive`` names the zipapp in tracebacks
    (``<archive>/<name>``: the path it runs from is not known here)."""
    out = dict(files)
    for name, source in files.items():
        if name.endswith(".py"):
            code = compile(source, f"{archive}/{name}", "exec", dont_inherit=True, optimize=0)
            flags = (1).to_bytes(4, "little")  # hash-based, not checked against the source
            header = importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(source)
            out[f"{name}c"] = header + marshal.dumps(code)
    return out


def build_zipapp(entry: str | os.PathLike[str]) -> bytes:
    """The zipapp of ``entry`` (the rank script's path on this machine) and its siblings."""
    entry = Path(entry)
    return zipapp_of(entry.stem, bundle_modules(entry))


def content_key(sources: Mapping[str, bytes]) -> str:
    """The content hash of ``sources`` (name -> bytes): equal sources, equal key."""
    digest = hashlib.sha256()
    for name in sorted(sources):
        digest.update(f"{name}\0{len(sources[name])}\0".encode())
        digest.update(sources[name])
    return digest.hexdigest()[:32]


def folder_sources(entry: str | os.PathLike[str]) -> dict[str, bytes]:
    """What the zipapp of ``entry`` can depend on: its name and every ``*.py`` beside it (a
    superset of the siblings it imports, read without parsing; for :func:`cached_build`'s key)."""
    entry = Path(entry)
    sources = {"entry": entry.name.encode()}
    with contextlib.suppress(OSError):
        for path in sorted(entry.parent.glob("*.py")):
            with contextlib.suppress(OSError):
                sources[path.name] = path.read_bytes()
    return sources


# A kept build of a name whose key is not the current one is removed when no run asked for it
# for this long: the cache keeps the builds of the source states of the last hour.
STALE_BUILD_S = 3600.0


def user_cache_dir() -> str | None:
    """Where the control machine keeps what it builds for the nodes between runs (the zipapps of
    the node programs, look.pyz, the rank script's): $NCCL_PREFLIGHT_CACHE_DIR, else
    $XDG_CACHE_HOME/nccl-preflight, else ~/.cache/nccl-preflight; None without a home (every
    run builds then)."""
    given = os.environ.get("NCCL_PREFLIGHT_CACHE_DIR")
    if given:
        return given
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, or relative: ignored, as the XDG spec says
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nccl-preflight") if os.path.isabs(base) else None


@functools.cache
def _builder_source() -> bytes:
    """This builder's own source, read once per process (a launch call builds three zipapps)."""
    return Path(__file__).read_bytes()


def build_key(sources: Mapping[str, bytes]) -> str:
    """The key of a build of ``sources``: their content, this Python's bytecode version (the
    pycs of :func:`with_bytecode`) and this builder's own source."""
    builder = {"python bytecode": importlib.util.MAGIC_NUMBER, "builder": _builder_source()}
    return content_key({**sources, **{f"\0{k}": v for k, v in builder.items()}})


def _remove_stale(folder: Path, name: str, kept: Path) -> None:
    """Remove ``name``'s builds other than ``kept`` (and their locks) older than STALE_BUILD_S."""
    now = time.time()
    for path in folder.glob(f"{name}-*"):
        if path.name.removesuffix(".lock") == kept.name:
            continue
        with contextlib.suppress(OSError):
            if now - path.lstat().st_mtime > STALE_BUILD_S:
                path.unlink()


def cached_build(
    cache_dir: str | os.PathLike[str] | None,
    name: str,
    sources: Mapping[str, bytes],
    build: Callable[[], bytes],
) -> bytes:
    """``build()``, kept in ``cache_dir`` as ``<name>-<build_key(sources)>`` and read back while
    ``sources`` (and the Python and this builder) are unchanged, by later runs too. Several
    processes asking at once build it once: the first builds under a lock, the others wait and
    read. The directory is made mode 0700, the file is written atomically, mode 0600, and only a
    file of this user is read back; older builds of ``name`` go after STALE_BUILD_S. Without
    ``cache_dir``, or one that cannot be used (read-only, not ours): ``build()``. An error of
    ``build()`` is raised and nothing is kept."""
    if cache_dir is None:
        return build()
    folder = Path(cache_dir)
    cached = folder / f"{name}-{build_key(sources)}"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = open(f"{cached}.lock", "a")  # noqa: SIM115 - closed below
    except OSError:
        return build()
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with contextlib.suppress(OSError):
                if not cached.is_symlink() and cached.stat().st_uid == os.getuid():
                    data = cached.read_bytes()
                    os.utime(cached)  # asked for now: not stale for another STALE_BUILD_S
                    return data
            data = build()
            with contextlib.suppress(OSError):
                write_atomically(cached, data, 0o600)
                _remove_stale(folder, name, cached)
            return data
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def zipapp_of(entry: str, modules: dict[str, bytes]) -> bytes:
    """The zipapp of the module ``entry`` among ``modules`` ({name: source}, bundle_modules')."""
    main = MAIN_TEMPLATE.format(entry=entry, modules=", ".join(f"{m}.py" for m in sorted(modules)))
    files = {f"{name}.py": source for name, source in modules.items()}
    files[f"{MAIN}.py"] = main.encode("utf-8")
    return zip_bytes(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Bundle a rank script and the modules beside it that it imports into one "
        "zipapp: `torchrun ... nccl_check.pyz ARGS` runs like `torchrun ... nccl_check.py ARGS`."
    )
    parser.add_argument("entry", help="the rank script, e.g. files/nccl_check.py")
    parser.add_argument("-o", "--output", required=True, help="the .pyz file to write")
    args = parser.parse_args(argv)
    try:
        data = build_zipapp(args.entry)
    except BundleError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(data)
    output.chmod(0o755)
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    print(f"{output}: {len(data)} bytes, {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
