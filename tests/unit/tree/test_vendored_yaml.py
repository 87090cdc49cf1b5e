# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/_vendor/yaml is PyYAML as released (SOURCE.md: which version, from where,
what was left out), with its MIT licence beside it; it needs the standard library alone; and it
is the package's one YAML reader (core/yaml_file.py), on the nodes and the control machine."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import yaml as installed_yaml

from nccl_preflight._vendor import yaml as vendored_yaml
from tests.builders.imports import imports_of

ROOT = Path(__file__).resolve().parents[3]
VENDOR = ROOT / "src" / "nccl_preflight" / "_vendor"
TREE = VENDOR / "yaml"
SOURCE = (VENDOR / "SOURCE.md").read_text(encoding="utf-8")


def listed_sums() -> dict[str, str]:
    """SOURCE.md's `sha256sum` lines: file name -> sha256."""
    return {
        name: digest
        for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", SOURCE, re.MULTILINE)
    }


def test_the_tree_is_the_release_source_md_names_byte_for_byte() -> None:
    sums = listed_sums()
    assert "scanner.py" in sums and "LICENSE" in sums
    present = {p.name for p in TREE.iterdir() if p.is_file()}
    assert present == set(sums), "a file added or removed without SOURCE.md"
    for name, digest in sums.items():
        assert hashlib.sha256((TREE / name).read_bytes()).hexdigest() == digest, name
    heading = re.search(r"^## yaml/ — PyYAML (\S+) \(MIT", SOURCE, re.MULTILINE)
    assert heading and heading.group(1) == vendored_yaml.__version__


def test_the_licence_beside_it_is_pyyamls_mit_licence() -> None:
    licence = (TREE / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("Copyright (c) 2017-2021 Ingy döt Net\n")
    assert "Permission is hereby granted, free of charge" in licence
    assert "The above copyright notice and this permission notice shall be included" in licence


def test_same_version_installed_here_same_files() -> None:
    """This venv's PyYAML (with libyaml) of the same version has the same pure-Python files."""
    if installed_yaml.__version__ != vendored_yaml.__version__:
        return  # another release installed: SOURCE.md's sums above still hold the copy
    installed = Path(installed_yaml.__file__).parent
    for path in sorted(TREE.glob("*.py")):
        assert path.read_bytes() == (installed / path.name).read_bytes(), path.name


def test_pure_python_no_libyaml_binding() -> None:
    assert not (TREE / "cyaml.py").exists()
    assert not [p for p in TREE.rglob("*") if p.suffix in (".so", ".pyd", ".c", ".pyx")]
    assert vendored_yaml.__with_libyaml__ is False
    assert not hasattr(vendored_yaml, "CSafeLoader")


def test_it_imports_the_standard_library_and_itself_only() -> None:
    """So the node bundle that carries it still needs nothing but the standard library (and
    torch): an absolute import of anything else, `yaml` included, would reach a node's own."""
    files = sorted(TREE.glob("*.py"))
    assert len(files) >= 15
    for path in files:
        for level, name in imports_of(path.read_text(encoding="utf-8")):
            assert level == 1 or name.split(".")[0] in sys.stdlib_module_names, (path.name, name)


def test_the_package_reads_yaml_through_the_vendored_copy_only() -> None:
    """One home: no module of the package imports an installed PyYAML (`yaml`), and only
    core/yaml_file.py imports the vendored one."""
    importers = []
    for path in sorted((ROOT / "src" / "nccl_preflight").rglob("*.py")):
        if TREE in path.parents:
            continue
        for level, name in imports_of(path.read_text(encoding="utf-8")):
            assert not (level == 0 and name.split(".")[0] == "yaml"), path
            if "_vendor" in name:
                importers.append(path.relative_to(ROOT).as_posix())
    assert sorted(set(importers)) == ["src/nccl_preflight/core/yaml_file.py"]


def test_a_python_without_site_packages_reads_a_config(tmp_path: Path) -> None:
    """`python -S -s -E` in src/: no site-packages, so no installed PyYAML; the package's own
    copy reads the file, and a YAML error still names its file and line."""
    config = tmp_path / "c.yml"
    config.write_text("nccl_backend: gloo\nnccl_master_port: [1\n")
    probe = (
        "import sys\nfrom nccl_preflight.core import config\n"
        "try:\n    config.load_config(sys.argv[1])\nexcept config.ConfigError as exc:\n"
        "    print(exc)\nimport importlib.util\nprint(importlib.util.find_spec('yaml'))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-s", "-E", "-c", probe, str(config)],
        capture_output=True,
        text=True,
        cwd=ROOT / "src",  # `-c` puts the working directory first on sys.path
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    error, installed = done.stdout.splitlines()
    assert error.startswith(f"{config}:3: while parsing a flow sequence (line 2): expected ','")
    assert installed == "None"  # no PyYAML to be found by that Python
