"""roles/validate_inputs and roles/nccl_env run by real ansible-playbook on local-connection hosts.

Two inventory hosts (both this machine, connection local) get the facts of two DGX Sparks cabled
on differently named ports; the role must render each its own nccl.env.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nccl_torchrun import parse_env_file

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = """
- name: Fake the facts of two DGX Sparks
  hosts: nccl_nodes
  gather_facts: false
  tasks:
    - name: Set ansible_facts.nccl from the test's JSON
      ansible.builtin.set_fact:
        ansible_facts:
          nccl: "{{ (lookup('ansible.builtin.file', facts_file) | from_json)[inventory_hostname] }}"

- name: Validate and render
  hosts: nccl_nodes
  gather_facts: false
  roles:
    - role: nccl_defaults
    - role: validate_inputs
    - role: nccl_env
"""


def interface(name: str, address: str) -> dict:
    return {
        "name": name,
        "state": "up",
        "mtu": 1500,
        "speed_mbps": 200000,
        "kind": None,
        "ipv4": [{"address": address, "prefixlen": 24}],
        "ipv6": [],
        "rdma_devices": [],
    }


def spark(fabric_ifname: str, fabric_addr: str, mgmt_addr: str) -> dict:
    return {
        "hostname": "spark",
        "hostname_addresses": [],
        "module_python": sys.executable,
        "interfaces": {
            "lo": interface("lo", "127.0.0.1"),
            "enP7s7": interface("enP7s7", mgmt_addr),
            fabric_ifname: interface(fabric_ifname, fabric_addr),
        },
        "route": {},
        "route_reason": "",
        "gpus": [{"index": 0, "name": "NVIDIA GB10"}],
        "gpus_reason": "",
    }


def run_playbook(tmp_path: Path, extra: dict, hostfile: str = "spark-1 slots=1\nspark-2\n"):
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hostfile").write_text(hostfile)
    (inventory / "group_vars" / "all.yml").write_text(
        "ansible_connection: local\n"
        f"ansible_python_interpreter: {sys.executable}\n"
        "nccl_fabric_cidr: 192.168.100.0/24\n"
        f"nccl_run_root: {tmp_path}\n"
    )
    facts = {
        "spark-1": spark("enp1s0f0np0", "192.168.100.10", "10.20.0.5"),
        "spark-2": spark("enp1s0f1np1", "192.168.100.11", "10.20.0.6"),
    }
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    playbook = ROOT / "playbooks" / f".test-env-{os.getpid()}.yml"
    playbook.write_text(PLAYBOOK)
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    extra_vars = {"facts_file": str(tmp_path / "facts.json"), "nccl_run_id": "t1", **extra}
    try:
        return subprocess.run(
            [
                str(Path(sys.executable).parent / "ansible-playbook"),
                str(playbook),
                "-i",
                str(inventory),
                "-e",
                json.dumps(extra_vars),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
    finally:
        playbook.unlink()


def read_env(path: Path) -> dict[str, str]:
    """nccl.env as the launch reads it (library/nccl_torchrun.py)."""
    return parse_env_file(path.read_text(), str(path))


def test_hosts_with_different_interface_names_get_their_own(tmp_path: Path) -> None:
    result = run_playbook(tmp_path, {"nccl_extra_env": {"NCCL_IB_HCA": "rocep1s0f0 $(x)"}})
    assert result.returncode == 0, result.stdout + result.stderr
    one = read_env(tmp_path / "nccl-preflight-t1-spark-1" / "nccl.env")
    two = read_env(tmp_path / "nccl-preflight-t1-spark-2" / "nccl.env")
    assert one["NCCL_SOCKET_IFNAME"] == one["GLOO_SOCKET_IFNAME"] == "enp1s0f0np0"
    assert two["NCCL_SOCKET_IFNAME"] == two["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1"
    # MASTER_ADDR is the master's fabric address, not its management address.
    assert one["MASTER_ADDR"] == two["MASTER_ADDR"] == "192.168.100.10"
    assert (one["NODE_RANK"], two["NODE_RANK"], one["NNODES"]) == ("0", "1", "2")
    # slots=1 for spark-1; spark-2 has no slots, so its one GPU decides.
    assert (one["NPROC_PER_NODE"], two["NPROC_PER_NODE"]) == ("1", "1")
    # A value with shell metacharacters stays one literal word when sourced.
    assert two["NCCL_IB_HCA"] == "rocep1s0f0 $(x)"
    mode = (tmp_path / "nccl-preflight-t1-spark-1").stat().st_mode & 0o777
    assert mode == 0o700
    env_path = tmp_path / "nccl-preflight-t1-spark-1" / "nccl.env"
    assert env_path.stat().st_mode & 0o777 == 0o600
    text = env_path.read_text()
    assert text.startswith("# ") and text.endswith("'\n"), text
    assert f"set -a; . {env_path}; set +a" in text


def test_sourcing_nccl_env_in_a_shell_gives_the_same_values(tmp_path: Path) -> None:
    result = run_playbook(tmp_path, {"nccl_extra_env": {"NCCL_IB_HCA": 'a\'b "c" `d`'}})
    assert result.returncode == 0, result.stdout + result.stderr
    env_file = tmp_path / "nccl-preflight-t1-spark-2" / "nccl.env"
    shown = subprocess.run(
        [
            "bash",
            "-c",
            'set -a; . "$1"; printf "%s|%s" "$NCCL_IB_HCA" "$MASTER_PORT"',
            "-",
            env_file,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == 'a\'b "c" `d`|29500'


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"nccl_socket_ifname": "eth0;reboot"}, "nccl_socket_ifname 'eth0;reboot'"),
        ({"nccl_master_port": 70000}, "nccl_master_port is 70000, outside 1024-65535"),
        ({"nccl_fabric_cidr": "192.168.100.0/33"}, "nccl_fabric_cidr '192.168.100.0/33'"),
        ({"nccl_backend": "infiniband"}, "nccl_backend"),
    ],
)
def test_bad_inputs_fail_before_any_host_is_touched(tmp_path: Path, extra: dict, named: str):
    result = run_playbook(tmp_path, extra)
    assert result.returncode != 0
    assert named in result.stdout + result.stderr
    # Nothing was rendered: no run directory exists.
    assert not list(tmp_path.glob("nccl-preflight-*"))
