# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""core/config.py: the defaults Ansible reads, a user's file on top, refused as Ansible refuses."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from nccl_preflight.core.config import SLURM_ONLY, ConfigError, defaults, load_config
from tests.playbook_run import ROOT, ansible_playbook

DEFAULT_FILES = sorted((ROOT / "roles" / "nccl_defaults" / "defaults" / "main").glob("*.yml"))
PREFLIGHT_DEFAULTS = ROOT / "roles" / "preflight" / "defaults" / "main.yml"


def write(tmp_path: Path, text: str, name: str = "nccl.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refusal(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value)


def local_inventory(tmp_path: Path) -> Path:
    """This machine alone, connection local, as node 0 and master."""
    inventory = tmp_path / "inventory.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(
        json.dumps(
            {
                "all": {
                    "vars": local,
                    "children": {
                        "nccl_nodes": {"hosts": {"localhost": {"nccl_node_rank": 0}}},
                        "nccl_master": {"hosts": {"localhost": {}}},
                    },
                }
            }
        )
    )
    return inventory


def run_play(tmp_path: Path, play: str, extra: dict) -> subprocess.CompletedProcess[str]:
    playbook = ROOT / "playbooks" / f".test-config-{tmp_path.name}.yml"
    playbook.write_text(play)
    try:
        return ansible_playbook(
            str(playbook),
            "-i",
            str(local_inventory(tmp_path)),
            "-e",
            json.dumps(extra),
            env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"},
        )
    finally:
        playbook.unlink()


DEFAULTS_PLAY = """
- name: Write the defaults every play reads
  hosts: nccl_nodes
  gather_facts: false
  roles:
    - role: nccl_defaults
  tasks:
    - name: Read the pre-flight's defaults as roles/facts does
      ansible.builtin.import_role:
        name: preflight
        tasks_from: settings.yml
    - name: Write them as JSON
      ansible.builtin.copy:
        content: "{{ dict(names | zip(query('ansible.builtin.vars', *names))) | to_json }}"
        dest: "{{ out }}"
        mode: "0600"
"""


# roles/preflight/defaults/main.yml's defaults that are Jinja expressions of other variables
PREFLIGHT_TEMPLATED = {
    "preflight_master",
    "preflight_listen_timeout",
    "preflight_collect_wait",
    "preflight_lock_path",
    "preflight_lock_lifetime",
    "preflight_expected_versions",
    "preflight_fail",
    "preflight_run_dir",
    "preflight_remove_run_dir",
}


def test_the_defaults_are_what_ansible_and_pyyaml_read_templates_left_out(tmp_path: Path) -> None:
    read = {}
    for path in [*DEFAULT_FILES, PREFLIGHT_DEFAULTS]:
        read.update(yaml.safe_load(path.read_text()))
    got = defaults()
    templated = {name for name, value in read.items() if "{{" in str(value)}
    assert templated == {"nccl_run_dir", "nccl_report_root", *PREFLIGHT_TEMPLATED}
    assert got == {name: value for name, value in read.items() if name not in templated}
    assert got["nccl_master_port"] == 29500 and got["nccl_require_gpu"] is True

    out = tmp_path / "defaults.json"
    result = run_play(tmp_path, DEFAULTS_PLAY, {"names": sorted(got), "out": str(out)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(out.read_text()) == got


def test_a_good_file_overlays_the_defaults_and_takes_ansibles_conversions(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "---\n# a site\nnccl_backend: gloo\nnccl_master_port: '12355'\nnccl_gpu_health: no\n"
        "nccl_fabric_cidr: 192.168.100.0/24\nnccl_check_args: [--sizes, 1M, --iters, 5]\n"
        "nccl_extra_env:\n  NCCL_IB_HCA: mlx5_0\nnccl_expected_versions: {torch: 2.13.0}\n"
        "nccl_busbw_warn: 1\n",
    )
    config = load_config(path)
    assert config == {
        **defaults(),
        **SLURM_ONLY,  # the slurm front-end's own (nccl_node_vars), with its default
        "nccl_backend": "gloo",
        "nccl_master_port": 12355,
        "nccl_gpu_health": False,
        "nccl_fabric_cidr": "192.168.100.0/24",
        "nccl_check_args": ["--sizes", "1M", "--iters", "5"],
        "nccl_extra_env": {"NCCL_IB_HCA": "mlx5_0"},
        "nccl_expected_versions": {"torch": "2.13.0"},
        "nccl_busbw_warn": 1.0,
        "nccl_stall_timeout": 30.0,
    }
    assert isinstance(config["nccl_busbw_warn"], float)


def test_an_empty_file_is_the_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "---\n# nothing set\n")) == {
        **defaults(),
        **SLURM_ONLY,
        "nccl_stall_timeout": 30.0,
    }


ERRORS = [
    ("a: 1\nnccl_master_prot: 29500\n", ":1: a: is not a known variable; see docs/variables.md"),
    (
        "nccl_backend: gloo\nnccl_master_prot: 29500\n",
        ":2: nccl_master_prot: is not a known variable; did you mean nccl_master_port?",
    ),
    ("nccl_master_port: 80\n", ":1: nccl_master_port: is 80, outside 1024-65535"),
    (
        "\nnccl_fabric_cidr: 10.0.0.1/8\n",
        ":2: nccl_fabric_cidr: '10.0.0.1/8' is not a CIDR: 10.0.0.1/8 has host bits set",
    ),
    ("nccl_gpu_health: maybe\n", ":1: nccl_gpu_health: is 'maybe', not a boolean (true or false)"),
    ("nccl_dcgm_diag_level: 7\n", ":1: nccl_dcgm_diag_level: is 7, not one of 0, 1, 2, 3, 4"),
    ("nccl_debug: [INFO]\n", ":1: nccl_debug: is ['INFO'], not a string"),
    ("nccl_check_args: [--x, {a: 1}]\n", ":1: nccl_check_args: is ['--x', {'a': 1}], not a list"),
    ("nccl_busbw_warn: 0.4\n", ":1: nccl_busbw_warn: nccl_busbw_crit (0.5) is above"),
    ("nccl_pairwise: sometimes\n", ":1: nccl_pairwise: is 'sometimes', not one of auto, always"),
    ("nccl_run_timeout: !vault x\n", ":1: could not determine a constructor for the tag '!vault'"),
    ("nccl_backend: [gloo\n", ":2: while parsing a flow sequence (line 1): expected ','"),
    ("- nccl_backend\n", ":1: the file must be a mapping of nccl_* variables to values"),
    ("nccl_backend: gloo\nnccl_backend: nccl\n", ":2: 'nccl_backend' is given twice"),
]


@pytest.mark.parametrize(("text", "message"), ERRORS)
def test_each_kind_of_error_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    assert refusal(path).startswith(f"{path}{message}")


def test_every_problem_is_told_at_once_in_line_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "nccl_pairwise: sometimes\nnccl_master_port: 1\nnccl_gpu_helth: true\nnccl_python: py\n",
    )
    lines = refusal(path).splitlines()
    assert [line.split(": ")[0] for line in lines] == [f"{path}:{n}" for n in (1, 2, 3, 4)]
    assert lines[2].endswith("did you mean nccl_gpu_health?")


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    assert refusal(missing) == f"{missing}: cannot be read: No such file or directory"


# Values the roles' argument specs accept (so roles/validate_inputs reaches nccl_input_problems)
# and nccl_input_problems refuses.
BAD_VALUES = {
    "nccl_master_port": 80,
    "nccl_socket_ifname": "eth 0",
    "nccl_fabric_cidr": "10.0.0.1/8",
    "nccl_run_timeout": 0,
    "nccl_extra_env": {"1BAD": "x"},
    "nccl_python": "bin/python",
    "nccl_pair_min_ratio": 1.5,
    "nccl_busbw_crit": 0.9,
    "nccl_expected_busbw": {"bogus": 1.0},
}
VALIDATE_PLAY = """
- name: Validate as validate.yml does
  hosts: nccl_nodes
  gather_facts: false
  roles:
    - role: nccl_defaults
    - role: validate_inputs
"""


def test_ansible_and_the_config_refuse_the_same_values_in_the_same_words(tmp_path: Path) -> None:
    result = run_play(tmp_path, VALIDATE_PLAY, BAD_VALUES)
    assert result.returncode != 0
    failed = re.search(r"FAILED! => (\{.*\})$", result.stdout, re.MULTILINE)
    assert failed, result.stdout + result.stderr
    message = json.loads(failed.group(1))["msg"]
    ansible_sentences = message.split("localhost: ")[1:]
    ansible_sentences = [sentence.removesuffix("; ") for sentence in ansible_sentences]
    assert len(ansible_sentences) == len(BAD_VALUES), message

    # The same values as a file, one per line (JSON is YAML): each refusal names its line.
    path = write(
        tmp_path,
        "{\n" + ",\n".join(json.dumps(dict([item]))[1:-1] for item in BAD_VALUES.items()) + "\n}\n",
    )
    lines = {name: number for number, name in enumerate(BAD_VALUES, start=2)}
    config_lines = refusal(path).splitlines()
    assert len(config_lines) == len(ansible_sentences)
    for sentence in ansible_sentences:
        name = sentence.split()[0]
        said = f"{path}:{lines[name]}: {name}: {sentence[len(name) :].lstrip()}"
        assert said in config_lines, (said, config_lines)


PROBE = """import json, sys
from nccl_preflight.core import config
assert config.__file__.startswith(sys.argv[0]), config.__file__
try:
    config.load_config(sys.argv[1])
except config.ConfigError as exc:
    print(json.dumps([config.__file__, config.defaults(), str(exc)]))
"""


def bundle(tmp_path: Path) -> Path:
    """A zipapp as the node bundle lays it out: the package alone (the variables schema is one of
    its modules: no roles/ data), and a __main__.py that loads the config named on its command
    line."""
    archive = tmp_path / "bundle.pyz"
    package = ROOT / "src" / "nccl_preflight"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("__main__.py", PROBE)
        for source in package.rglob("*.py"):
            zipped.write(source, source.relative_to(package.parent).as_posix())
    return archive


def test_inside_a_bundle_the_package_alone_gives_defaults_and_checks(tmp_path: Path) -> None:
    archive = bundle(tmp_path)
    config = write(tmp_path, "nccl_backend: gloo\nnccl_dcgm_diag_level: 9\n")
    result = subprocess.run(
        [sys.executable, "-I", str(archive), str(config)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    module, got_defaults, error = json.loads(result.stdout)
    assert module.startswith(str(archive))
    assert got_defaults == defaults()
    assert error == f"{config}:2: nccl_dcgm_diag_level: is 9, not one of 0, 1, 2, 3, 4"


def test_the_run_id_may_be_given_and_must_name_a_directory(tmp_path: Path) -> None:
    """nccl_run_id has no default (each run makes one) but may be set, as -e nccl_run_id does."""
    good = write(tmp_path, "nccl_run_id: 20261126T060000-abc123\n")
    assert load_config(good)["nccl_run_id"] == "20261126T060000-abc123"
    assert "nccl_run_id" not in load_config(write(tmp_path, "{}\n", "empty.yaml"))
    bad = write(tmp_path, "nccl_master_port: 29500\nnccl_run_id: ../x\n", "bad.yaml")
    assert refusal(bad).startswith(f"{bad}:2: nccl_run_id: '../x' is not an identifier")
