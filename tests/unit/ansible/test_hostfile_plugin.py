# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The hostfile inventory plugin: line forms, errors with file:line, and ansible-inventory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import hostfile
import pytest
from ansible.errors import AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def ansible_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def run_ansible(argv: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]],
        cwd=ROOT,
        env=ansible_env(**extra),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def load(tmp_path: Path, text: str, name: str = "hostfile") -> InventoryData:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    plugin = hostfile.InventoryModule()
    assert plugin.verify_file(str(path))
    inventory = InventoryData()
    plugin.parse(inventory, DataLoader(), str(path))
    return inventory


def host_vars(inventory: InventoryData, name: str) -> dict:
    return dict(inventory.get_host(name).vars)


def group_hosts(inventory: InventoryData, group: str) -> list[str]:
    return [h.name for h in inventory.groups[group].get_hosts()]


# --- pure parsing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "host", "slots"),
    [
        ("10.0.0.1", "10.0.0.1", None),
        ("10.0.0.1 slots=8", "10.0.0.1", 8),
        ("10.0.0.1:4", "10.0.0.1", 4),
        ("node-01", "node-01", None),
        ("node-01.cluster.example slots=2", "node-01.cluster.example", 2),
        ("node-01:16", "node-01", 16),
        ("localhost slots=2", "localhost", 2),
        ("fd00:100::12", "fd00:100::12", None),
        ("fe80::1:4", "fe80::1:4", None),  # a bare IPv6 address: ':4' is part of the address
        ("fd00::12 slots=3", "fd00::12", 3),
        ("[fd00::12]:4", "fd00::12", 4),
        ("[fd00::12]", "fd00::12", None),
        ("fe80::1%enp1s0f0np0 slots=1", "fe80::1%enp1s0f0np0", 1),
        ("   10.0.0.1    slots=2   ", "10.0.0.1", 2),
        ("10.0.0.1 slots=2 # trailing comment", "10.0.0.1", 2),
        ("10.0.0.1#comment right after", "10.0.0.1", None),
        ("10.0.0.1 slots=4 max_slots=8", "10.0.0.1", 4),
        ("\t10.0.0.1\tslots=4\t", "10.0.0.1", 4),
    ],
)
def test_every_valid_line_form(line: str, host: str, slots: int | None) -> None:
    (entry,) = hostfile.parse_hostfile(f"# header\n\n{line}\n", "hf")
    assert (entry.host, entry.slots, entry.line, entry.rank) == (host, slots, 3, 0)


def test_order_is_node_rank_and_lines_are_counted_with_comments_and_blanks() -> None:
    text = "# cluster\n\nb.example slots=1\n   # indented comment\nc.example\n\na.example:2\n"
    entries = hostfile.parse_hostfile(text, "hf")
    assert [(e.host, e.rank, e.line) for e in entries] == [
        ("b.example", 0, 3),
        ("c.example", 1, 5),
        ("a.example", 2, 7),
    ]


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("a\nb slots=0\n", "hf:2:", ["slots", "positive integer", "'0'"]),
        ("a\nb slots=-1\n", "hf:2:", ["positive integer", "'-1'"]),
        ("a\nb slots=two\n", "hf:2:", ["positive integer", "'two'"]),
        ("a\nb slots=\n", "hf:2:", ["positive integer"]),
        ("a\nb slots=1.5\n", "hf:2:", ["positive integer", "'1.5'"]),
        ("a\n\nb:0\n", "hf:3:", ["positive integer", "'0'"]),
        ("b:x\n", "hf:1:", ["positive integer", "'x'"]),
        ("b:\n", "hf:1:", ["positive integer"]),
        ("[fd00::1]:0\n", "hf:1:", ["positive integer"]),
        ("a\nb cpus=4\n", "hf:2:", ["unknown token", "'cpus=4'"]),
        ("a\nb slots 4\n", "hf:2:", ["unknown token", "'slots'"]),
        ("a b\n", "hf:1:", ["unknown token", "'b'"]),
        ("a slots=2 slots=3\n", "hf:1:", ["slots given twice"]),
        ("a:2 slots=3\n", "hf:1:", ["slots given twice"]),
        ("a slots=4 max_slots=2\n", "hf:1:", ["max_slots=2", "less than slots=4"]),
        ("x\ny\nnode_1\n", "hf:3:", ["'node_1'", "neither an IP address nor a valid hostname"]),
        ("-node\n", "hf:1:", ["neither an IP address nor a valid hostname"]),
        ("node-\n", "hf:1:", ["neither an IP address nor a valid hostname"]),
        ("a..b\n", "hf:1:", ["neither an IP address nor a valid hostname"]),
        (f"{'a' * 64}\n", "hf:1:", ["neither an IP address nor a valid hostname"]),
        ("10.0.0.256\n", "hf:1:", ["not a valid IPv4 address"]),
        ("10.0.0\n", "hf:1:", ["not a valid IPv4 address"]),
        ("fd00::1::2\n", "hf:1:", ["not a valid IPv6 address", "[ADDRESS]:N"]),
        ("[node1]:2\n", "hf:1:", ["in brackets is not an IPv6 address"]),
        ("[10.0.0.1]\n", "hf:1:", ["in brackets is not an IPv6 address"]),
        ("a/b\n", "hf:1:", ["neither an IP address nor a valid hostname"]),
        ("a;reboot\n", "hf:1:", ["neither an IP address nor a valid hostname"]),
    ],
)
def test_every_invalid_case_names_file_line_and_problem(
    text: str, where: str, words: list[str]
) -> None:
    with pytest.raises(hostfile.HostfileError) as info:
        hostfile.parse_hostfile(text, "hf")
    message = str(info.value)
    assert message.startswith(where), message
    for word in words:
        assert word in message, message


@pytest.mark.parametrize(
    ("text", "first", "second", "host"),
    [
        ("10.0.0.1\n10.0.0.2\n# x\n10.0.0.1 slots=2\n", 1, 4, "10.0.0.1"),
        ("Node1\nnode1:2\n", 1, 2, "node1"),
        ("fd00::1\n[fd00:0::1]:4\n", 1, 2, "fd00:0::1"),
    ],
)
def test_same_host_twice_names_both_lines(text: str, first: int, second: int, host: str) -> None:
    with pytest.raises(hostfile.HostfileError) as info:
        hostfile.parse_hostfile(text, "hf")
    message = str(info.value)
    assert message.startswith(f"hf:{second}:"), message
    assert f"lines {first} and {second}" in message
    assert repr(host) in message


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n   \n# another\n"])
def test_empty_hostfile_is_an_error(text: str) -> None:
    with pytest.raises(hostfile.HostfileError, match=r"^hf:1: no hosts"):
        hostfile.parse_hostfile(text, "hf")


# --- the plugin class on a real InventoryData -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "wanted"),
    [
        ("hostfile", True),
        ("dgx.hostfile", True),
        ("hosts.ini", False),
        ("hostfile.ini", False),
        ("myhostfile", False),
        ("hosts", False),
        (".hostfile", False),
    ],
)
def test_verify_file_accepts_only_hostfile_names(tmp_path: Path, name: str, wanted: bool) -> None:
    path = tmp_path / name
    path.write_text("10.0.0.1\n", encoding="utf-8")
    assert hostfile.InventoryModule().verify_file(str(path)) is wanted


def test_verify_file_declines_a_missing_hostfile(tmp_path: Path) -> None:
    assert hostfile.InventoryModule().verify_file(str(tmp_path / "hostfile")) is False


def test_plugin_builds_groups_ranks_slots_and_ansible_host(tmp_path: Path) -> None:
    inventory = load(
        tmp_path,
        "# two sparks and friends\n192.168.100.10 slots=1\nspark-2:1\n[fd00::3]:2\nnode4\n",
    )
    assert group_hosts(inventory, "nccl_nodes") == ["192.168.100.10", "spark-2", "fd00::3", "node4"]
    assert group_hosts(inventory, "nccl_master") == ["192.168.100.10"]
    first = host_vars(inventory, "192.168.100.10")
    assert first["nccl_node_rank"] == 0
    assert first["nccl_slots"] == 1
    assert first["ansible_host"] == "192.168.100.10"
    assert host_vars(inventory, "spark-2")["nccl_node_rank"] == 1
    assert host_vars(inventory, "fd00::3")["ansible_host"] == "fd00::3"
    assert host_vars(inventory, "fd00::3")["nccl_slots"] == 2
    last = host_vars(inventory, "node4")
    assert last["nccl_node_rank"] == 3
    assert "nccl_slots" not in last
    assert isinstance(last["nccl_node_rank"], int)


def test_plugin_raises_parser_error_and_adds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "site.hostfile"
    path.write_text("10.0.0.1\n10.0.0.2 slots=0\n", encoding="utf-8")
    inventory = InventoryData()
    with pytest.raises(AnsibleParserError, match=rf"{path}:2: slots must be a positive integer"):
        hostfile.InventoryModule().parse(inventory, DataLoader(), str(path))
    assert "10.0.0.1" not in inventory.hosts
    assert "nccl_nodes" not in inventory.groups


# --- through ansible-inventory / ansible-playbook with the repository's ansible.cfg ----------


def make_inventory_dir(root: Path, hostfile_text: str) -> Path:
    inv = root / "dgx"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "host_vars").mkdir()
    (inv / "hostfile").write_text(hostfile_text, encoding="utf-8")
    (inv / "group_vars" / "all.yml").write_text(
        "---\nnccl_master_port: 12355\nnccl_fabric_cidr: 192.168.100.0/24\n", encoding="utf-8"
    )
    (inv / "group_vars" / "nccl_master.yml").write_text(
        "---\nplaced_on_master: true\n", encoding="utf-8"
    )
    (inv / "host_vars" / "spark-b.yml").write_text(
        "---\nnccl_socket_ifname: enp1s0f1np1\n", encoding="utf-8"
    )
    return inv


def test_ansible_inventory_loads_dir_with_group_and_host_vars(tmp_path: Path) -> None:
    inv = make_inventory_dir(
        tmp_path, "# rank order\nspark-a slots=1  # master\nspark-b:1\n10.9.8.7\n"
    )
    result = run_ansible(["ansible-inventory", "-i", str(inv), "--list"])
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["nccl_nodes"]["hosts"] == ["spark-a", "spark-b", "10.9.8.7"]
    assert data["nccl_master"]["hosts"] == ["spark-a"]
    hostvars = data["_meta"]["hostvars"]
    assert hostvars["spark-a"]["nccl_node_rank"] == 0
    assert hostvars["spark-a"]["nccl_slots"] == 1
    assert hostvars["spark-a"]["placed_on_master"] is True
    assert "placed_on_master" not in hostvars["spark-b"]
    assert hostvars["spark-b"]["nccl_node_rank"] == 1
    assert hostvars["spark-b"]["nccl_socket_ifname"] == "enp1s0f1np1"
    assert "nccl_socket_ifname" not in hostvars["spark-a"]
    assert hostvars["10.9.8.7"]["nccl_node_rank"] == 2
    assert "nccl_slots" not in hostvars["10.9.8.7"]
    for host in ("spark-a", "spark-b", "10.9.8.7"):
        assert hostvars[host]["nccl_master_port"] == 12355
        assert hostvars[host]["nccl_fabric_cidr"] == "192.168.100.0/24"


def test_hosts_ini_in_the_same_dir_is_not_claimed_by_hostfile(tmp_path: Path) -> None:
    inv = make_inventory_dir(tmp_path, "spark-a\n")
    (inv / "hosts.ini").write_text("[other]\nlegacy-host slots=3\n", encoding="utf-8")
    # ini named explicitly: this test is about hostfile declining the file, not about ansible.cfg
    result = run_ansible(
        ["ansible-inventory", "-i", str(inv), "--list", "-vvv"],
        ANSIBLE_INVENTORY_ENABLED="hostfile,ini",
    )
    assert result.returncode == 0, result.stderr
    assert "hostfile declined parsing" in result.stdout + result.stderr
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert data["nccl_nodes"]["hosts"] == ["spark-a"]
    assert data["other"]["hosts"] == ["legacy-host"]
    legacy = data["_meta"]["hostvars"]["legacy-host"]
    assert "nccl_node_rank" not in legacy
    assert "nccl_slots" not in legacy


BAD = "# site\nspark-a slots=1\nspark-b slots=0\n"


def test_bad_hostfile_error_is_visible_with_the_repository_config(tmp_path: Path) -> None:
    """With ini enabled after hostfile, ini may still read the file; our error must show."""
    inv = make_inventory_dir(tmp_path, BAD)
    result = run_ansible(["ansible-inventory", "-i", str(inv), "--list"])
    assert f"{inv / 'hostfile'}:3: slots must be a positive integer, got '0'" in result.stderr
    if result.returncode == 0:
        # another plugin read the file: it must not look like a valid nccl inventory
        assert "nccl_nodes" not in json.loads(result.stdout)


def test_bad_hostfile_fails_without_ini_and_with_any_unparsed_is_failed(tmp_path: Path) -> None:
    inv = make_inventory_dir(tmp_path, BAD)
    strict = {
        "ANSIBLE_INVENTORY_ENABLED": "hostfile,host_list,script,auto,yaml,toml",
        "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True",
    }
    result = run_ansible(["ansible-inventory", "-i", str(inv), "--list"], **strict)
    assert result.returncode != 0
    assert f"{inv / 'hostfile'}:3: slots must be a positive integer" in result.stderr

    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "---\n- name: Nothing\n  hosts: nccl_nodes\n  gather_facts: false\n  tasks: []\n",
        encoding="utf-8",
    )
    result = run_ansible(
        ["ansible-playbook", "-i", str(inv), str(playbook), "--syntax-check"], **strict
    )
    assert result.returncode != 0
    assert f"{inv / 'hostfile'}:3: slots must be a positive integer" in result.stderr


def test_duplicate_host_through_ansible_inventory_names_both_lines(tmp_path: Path) -> None:
    inv = make_inventory_dir(tmp_path, "spark-a\nspark-b\n\nspark-a:2\n")
    result = run_ansible(
        ["ansible-inventory", "-i", str(inv), "--list"],
        ANSIBLE_INVENTORY_ENABLED="hostfile",
        ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="True",
    )
    assert result.returncode != 0
    assert f"{inv / 'hostfile'}:4: host 'spark-a' appears twice, on lines 1 and 4" in (
        result.stderr
    )


def test_ansible_doc_renders_the_plugin_documentation() -> None:
    result = run_ansible(["ansible-doc", "-t", "inventory", "hostfile"])
    assert result.returncode == 0, result.stderr
    assert "plugins/inventory/hostfile.py" in result.stdout
    assert "nccl_master" in result.stdout
    assert "[fe80::1]:4" in result.stdout
