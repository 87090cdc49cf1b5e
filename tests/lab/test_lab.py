# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The lab tests itself: topology, isolation, sshd, inventory, teardown, faults.

Tests marked `lab` need root (they skip with the reason otherwise); the others are plain unit
tests of the harness's argument handling and of the non-root path.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.builders.lab_host import assert_restored, snapshot
from tests.lab import base, harness, network
from tests.lab.__main__ import main as cli_main
from tests.lab.fixtures import LAB4_FABRIC_IFNAMES, require_lab
from tests.lab.harness import Lab, LabError, lab_unavailable_reason

ROOT = Path(__file__).resolve().parents[2]

# Prints what a TCP connect from inside a host sees: connected, refused, timeout or errno:<n>.
PROBE = """
import socket, sys
addr, port, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
try:
    s = socket.create_connection((addr, port), timeout=timeout)
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print(f"errno:{e.errno}")
else:
    data = b""
    if port == 22:  # an SSH server speaks first
        s.settimeout(timeout)
        try:
            data = s.recv(64)
        except OSError:
            pass
    print("banner" if data.startswith(b"SSH-") else "connected")
"""

BIND = """
import socket, sys
s = socket.socket()
try:
    s.bind(("0.0.0.0", int(sys.argv[1])))
except OSError as e:
    print(f"errno:{e.errno}")
else:
    print("bound")
"""

SINK = """
import socket, sys
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
while True:
    conn, _ = srv.accept()
    while conn.recv(1 << 16):
        pass
    conn.close()
"""

SEND = """
import socket, sys, time
data = b"x" * int(sys.argv[3])
t = time.monotonic()
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30) as s:
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
print(time.monotonic() - t)
"""


def probe(lab: Lab, src: int, addr: str, port: int, timeout: float = 1.0) -> str:
    out = lab.run(src, [sys.executable, "-c", PROBE, addr, str(port), str(timeout)])
    return out.stdout.strip()


# --------------------------------------------------------------------- no root needed


def test_a_large_lab_raises_the_neighbour_table_and_puts_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel's one neighbour table overflows past about 20 hosts (dmesg: "neighbor table
    overflow", the hosts' connections fail): a lab raises gc_thresh2/3 when it needs more, never
    lowers them, and puts back what it replaced unless someone changed it since."""
    monkeypatch.setattr(network, "NEIGH", tmp_path)
    (tmp_path / "gc_thresh2").write_text("512\n")
    (tmp_path / "gc_thresh3").write_text("1024\n")
    assert network.neigh_below(6) == {}  # 6 hosts fit the defaults: nothing to change
    replaced = network.neigh_below(32)
    network.raise_neigh_table(replaced, 32)
    need = network.neigh_needed(32)
    assert replaced == {"gc_thresh2": 512, "gc_thresh3": 1024} and need > 2 * 32 * 32
    assert int((tmp_path / "gc_thresh3").read_text()) == need
    assert int((tmp_path / "gc_thresh2").read_text()) == need // 2
    network.restore_neigh_table(replaced, 32)
    assert [(tmp_path / n).read_text() for n in ("gc_thresh2", "gc_thresh3")] == ["512\n", "1024\n"]
    # Changed by someone else while the lab was up: left as they made it.
    network.raise_neigh_table(replaced, 32)
    (tmp_path / "gc_thresh3").write_text("65536\n")
    network.restore_neigh_table(replaced, 32)
    assert (tmp_path / "gc_thresh3").read_text() == "65536\n"


def test_unavailable_reason_names_root_when_not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NCCL_LAB", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    reason = lab_unavailable_reason()
    assert reason is not None and "needs root" in reason
    with pytest.raises(pytest.skip.Exception, match="needs root"):
        require_lab()
    with pytest.raises(LabError, match="needs root"):
        Lab(2).up()


def test_without_a_node_python_the_lab_says_how_to_build_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(base, "machine_unavailable_reason", lambda: None)
    monkeypatch.setenv(base.NODE_PYTHON_ENV, str(tmp_path / "no-such-venv" / "bin" / "python"))
    assert Lab(2).python == str(tmp_path / "no-such-venv" / "bin" / "python")
    reason = lab_unavailable_reason()
    assert reason is not None and "no-such-venv" in reason and "make node-venv" in reason
    with pytest.raises(pytest.skip.Exception, match=r"requirements-node\.txt alone"):
        require_lab()
    with pytest.raises(LabError, match="make node-venv"):
        Lab(2).up()
    assert lab_unavailable_reason(sys.executable) is None  # an explicit, existing one will do
    monkeypatch.delenv(base.NODE_PYTHON_ENV)
    assert base.node_python() == str(ROOT / ".venv-node" / "bin" / "python")


def test_lab_can_be_disabled_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_LAB", "0")
    assert "disabled by NCCL_LAB=0" in (lab_unavailable_reason() or "")


def test_cli_refuses_without_root(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NCCL_LAB", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli_main(["up", "--hosts", "2"]) == 2
    assert "needs root" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fabric_ifnames": ["enp1s0f0np0xyzw"]}, None),  # 15 characters: fine
        ({"fabric_ifnames": ["enp1s0f0np0xyzwv"]}, "not valid"),  # 16: the kernel refuses
        ({"fabric_ifnames": ["lo"]}, "not valid"),
        ({"fabric_ifnames": ["mgmt0"]}, "also a fabric"),
        ({"fabric_ifnames": "a,b,c"}, "1..2 names"),
        ({"name": "Bad_Name"}, "lab name"),
        ({"slots": 0}, "slots"),
    ],
)
def test_lab_arguments_are_checked(kwargs: dict[str, object], message: str | None) -> None:
    if message is None:
        Lab(2, **kwargs)  # type: ignore[arg-type]
    else:
        with pytest.raises(ValueError, match=message):
            Lab(2, **kwargs)  # type: ignore[arg-type]


def test_fabric_ifnames_are_cycled_over_hosts() -> None:
    assert Lab(5, fabric_ifnames="a,b").fabric_ifnames == ["a", "b", "a", "b", "a"]
    assert Lab(2).fabric_ifnames == [harness.DEFAULT_FABRIC_IFNAME] * 2


# --------------------------------------------------------------------- topology


@pytest.mark.lab
def test_hosts_reach_each_other_over_the_fabric_only(lab4: Lab) -> None:
    for src in lab4.hosts:
        routes = json.loads(lab4.run(src, ["ip", "-j", "-4", "route"]).stdout)
        # exactly the two connected networks: no default route, no other path anywhere
        assert {(r["dst"], r["dev"]) for r in routes} == {
            (lab4.mgmt_cidr, src.mgmt_ifname),
            (lab4.fabric_cidr, src.fabric_ifname),
        }
        for dst in lab4.hosts:
            if dst is src:
                continue
            route = json.loads(lab4.run(src, ["ip", "-j", "route", "get", dst.fabric_addr]).stdout)
            assert route[0]["dev"] == src.fabric_ifname
            assert route[0]["prefsrc"] == src.fabric_addr
        # a closed port answers with a reset: the peer's fabric address is reachable
        peer = lab4.hosts[(src.rank + 1) % len(lab4.hosts)]
        assert probe(lab4, src.rank, peer.fabric_addr, 9) == "refused"
    outside = lab4.run(0, ["ip", "route", "get", "192.0.2.1"], check=False)
    assert outside.returncode != 0 and "unreachable" in outside.stderr


@pytest.mark.lab
def test_fabric_interface_names_are_per_host(lab4: Lab) -> None:
    for h, expected in zip(lab4.hosts, LAB4_FABRIC_IFNAMES * 2, strict=True):
        assert h.fabric_ifname == expected
        links = json.loads(lab4.run(h, ["ip", "-j", "link"]).stdout)
        assert {link["ifname"] for link in links} == {"lo", "mgmt0", expected}
        addrs = json.loads(lab4.run(h, ["ip", "-j", "-4", "addr", "show", expected]).stdout)
        assert [a["local"] for a in addrs[0]["addr_info"]] == [h.fabric_addr]


@pytest.mark.lab
def test_control_machine_is_on_management_only(lab2: Lab) -> None:
    addrs = json.loads(subprocess.check_output(["ip", "-j", "-4", "addr"], text=True))
    mine = [a["local"] for link in addrs for a in link["addr_info"]]
    assert lab2.control_addr in mine
    assert not [a for a in mine if a.startswith(lab2.fabric_cidr.rsplit(".", 1)[0] + ".")]
    assert not [a for a in mine if a.startswith("198.19.")]


@pytest.mark.lab
def test_sshd_answers_only_on_management_addresses(lab2: Lab) -> None:
    h1, h2 = lab2.hosts
    assert harness._ssh_banners([h1.mgmt_addr, h2.mgmt_addr]) == {h1.mgmt_addr, h2.mgmt_addr}
    assert probe(lab2, 1, h1.mgmt_addr, 22) == "banner"
    assert probe(lab2, 1, h1.fabric_addr, 22) == "refused"
    assert probe(lab2, 0, "127.0.0.1", 22) == "refused"
    listening = lab2.run(0, ["ss", "-Hltn", "sport", "= :22"]).stdout.split()
    assert f"{h1.mgmt_addr}:22" in listening
    assert [w for w in listening if w.endswith(":22")] == [f"{h1.mgmt_addr}:22"]


@pytest.mark.lab
def test_hostnames_are_distinct_and_resolve_to_fabric(lab4: Lab) -> None:
    seen = []
    for h in lab4.hosts:
        peer = lab4.hosts[(h.rank + 1) % len(lab4.hosts)]
        out = lab4.ssh(h, f"hostname && getent hosts {peer.hostname}").stdout.split()
        assert out[:2] == [h.hostname, peer.fabric_addr]  # the peer's name -> its fabric address
        assert lab4.run(h, ["hostname"]).stdout.strip() == h.hostname
        seen.append(out[0])
    assert len(set(seen)) == len(lab4.hosts)
    assert os.uname().nodename not in seen


@pytest.mark.lab
def test_inventory_works_with_ansible(lab2: Lab) -> None:
    inv = lab2.inventory_dir
    assert (inv / "hostfile").read_text().splitlines() == [
        f"{h.mgmt_addr} slots=1" for h in lab2.hosts
    ]
    gv = yaml.safe_load((inv / "group_vars" / "all.yml").read_text())
    assert gv["ansible_user"] == "root"
    assert gv["ansible_python_interpreter"] == lab2.python == harness.node_python()
    assert gv["nccl_fabric_cidr"] == lab2.fabric_cidr
    assert gv["nccl_backend"] == "gloo" and gv["nccl_require_gpu"] is False
    assert Path(gv["ansible_ssh_private_key_file"]).is_file()
    assert "UserKnownHostsFile=/dev/null" in gv["ansible_ssh_common_args"]
    assert str(lab2.state_dir) in gv["ansible_ssh_common_args"]  # ControlPath in the lab dir
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "all",
            "-i",
            str(inv),
            "-m",
            "ansible.builtin.command",
            "-a",
            "hostname",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for h in lab2.hosts:
        answer = rf"^{re.escape(h.mgmt_addr)} \| CHANGED \| rc=0 >>\n{h.hostname}$"
        assert re.search(answer, out.stdout, re.M), out.stdout


# --------------------------------------------------------------------- lifecycle


@pytest.mark.lab
def test_second_lab_coexists_and_teardown_restores_machine(lab2: Lab) -> None:
    before = snapshot()
    other = Lab(2, fabric_ifnames="enp1s0f0np0")
    with other:
        assert other.index != lab2.index
        assert other.fabric_cidr != lab2.fabric_cidr
        assert not {h.netns for h in other.hosts} & {h.netns for h in lab2.hosts}
        assert snapshot() != before
        for lab in (lab2, other):
            assert lab.ssh(1, "hostname").stdout.strip() == lab.hosts[1].hostname
        # no path between labs
        assert probe(other, 0, lab2.hosts[1].fabric_addr, 9).startswith("errno:")
        pids = list(other._state["sshd_pids"].values())
    assert not [p for p in pids if harness._pid_alive(p)]
    assert_restored(before, snapshot(), other.index, other.name)
    other.down()  # idempotent


@pytest.mark.lab
@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_failed_or_interrupted_up_removes_everything(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    require_lab()
    before = snapshot()

    def fail(self: Lab) -> None:
        assert self.hosts and harness._netns_names()  # something was really built
        raise exc

    monkeypatch.setattr(Lab, "_write_inventory", fail)
    lab = Lab(2)
    with pytest.raises(type(exc)):
        lab.up()
    assert_restored(before, snapshot(), lab.index, lab.name)
    assert not lab.state_dir.exists()


@pytest.mark.lab
def test_cli_up_status_run_down() -> None:
    require_lab()
    before = snapshot()
    name = f"cli{os.getpid() % 100000}"
    py = [sys.executable, "-m", "tests.lab"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*py, *args], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
        )

    index = None
    up = cli("up", "--hosts", "2", "--name", name, "--fabric-ifnames", "enp1s0f1np1")
    try:
        assert up.returncode == 0, up.stderr
        status = json.loads(cli("status", "--json").stdout)
        mine = [s for s in status if s["name"] == name]
        assert mine and mine[0]["sshd_running"] == 2 and mine[0]["owner_pid"] is None
        index = mine[0]["index"]
        run = cli("run", "node02", "--name", name, "--", "ip", "-br", "link", "show", "up")
        assert run.returncode == 0 and "enp1s0f1np1" in run.stdout
        assert cli("run", "node01", "--name", name, "--", "false").returncode == 1
        again = cli("up", "--hosts", "1", "--name", name)
        assert again.returncode == 2 and "exists already" in again.stderr
    finally:
        down = cli("down", "--name", name)
    assert down.returncode == 0, down.stderr
    assert_restored(before, snapshot(), index, name)
    assert name not in Lab.recorded()


@pytest.mark.lab
def test_lab_of_a_killed_session_is_reaped() -> None:
    require_lab()
    name = f"reap{os.getpid() % 100000}"
    script = (
        "import os, signal, sys\n"
        "from tests.lab.harness import Lab\n"
        "Lab(1, name=sys.argv[1]).up()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    dead = subprocess.run(
        [sys.executable, "-c", script, name], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert dead.returncode == -signal.SIGKILL, dead.stderr
    assert name in Lab.recorded()
    leftover = Lab.load(name)
    sshd = leftover.sshd_pid(0)
    assert harness._pid_alive(sshd)
    with Lab(1):  # any new lab reaps labs whose owner died
        assert name not in Lab.recorded()
        assert not harness._pid_alive(sshd)


# --------------------------------------------------------------------- faults


@pytest.mark.lab
def test_firewall_drop_port_and_range(lab2: Lab) -> None:
    h1, h2 = lab2.hosts
    with lab2.hold_port(h2, 29400):
        assert probe(lab2, 0, h2.fabric_addr, 29400) == "connected"
        undo = lab2.firewall_drop(h2, 29400)
        try:
            assert probe(lab2, 0, h2.fabric_addr, 29400, timeout=0.5) == "timeout"
        finally:
            undo()
        assert probe(lab2, 0, h2.fabric_addr, 29400) == "connected"
        undo = lab2.firewall_drop(h2, (29390, 29410), source=h1.fabric_addr)
        try:
            assert probe(lab2, 0, h2.fabric_addr, 29400, timeout=0.5) == "timeout"
            assert probe(lab2, 0, h2.mgmt_addr, 29400) == "connected"  # other source address
        finally:
            undo()
        assert probe(lab2, 0, h2.fabric_addr, 29400) == "connected"
    assert "nccl-lab-fault" not in lab2.run(h2, ["iptables-save"]).stdout


@pytest.mark.lab
def test_hold_port_occupies_the_port_until_released(lab2: Lab) -> None:
    held = lab2.hold_port(1, 29401)
    try:
        assert harness._pid_alive(held.pid)
        assert lab2.run(1, [sys.executable, "-c", BIND, "29401"]).stdout.strip() == "errno:98"
        assert lab2.run(0, [sys.executable, "-c", BIND, "29401"]).stdout.strip() == "bound"
    finally:
        held.release()
    assert not harness._pid_alive(held.pid)
    assert lab2.run(1, [sys.executable, "-c", BIND, "29401"]).stdout.strip() == "bound"


@pytest.mark.lab
def test_link_down_cuts_the_fabric_and_link_up_restores_it(lab2: Lab) -> None:
    h1, h2 = lab2.hosts
    undo = lab2.link_down(h2)
    try:
        link = json.loads(lab2.run(h2, ["ip", "-j", "link", "show", h2.fabric_ifname]).stdout)
        assert "UP" not in link[0]["flags"]
        assert probe(lab2, 1, h1.fabric_addr, 9) == "errno:101"  # network unreachable
        assert probe(lab2, 0, h2.fabric_addr, 9, timeout=0.5) in {"timeout", "errno:113"}
        assert probe(lab2, 0, h2.mgmt_addr, 22) == "banner"  # management unaffected
    finally:
        undo()
    assert probe(lab2, 0, h2.fabric_addr, 9, timeout=3) == "refused"


@pytest.mark.lab
def test_rate_limit_slows_the_fabric(lab2: Lab) -> None:
    h1, h2 = lab2.hosts
    sink = lab2.popen(
        h2, [sys.executable, "-c", SINK, h2.fabric_addr, "29402"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"

        def send(nbytes: int) -> float:
            cmd = [sys.executable, "-c", SEND, h2.fabric_addr, "29402", str(nbytes)]
            return float(lab2.run(h1, cmd).stdout)

        fast = send(1_000_000)
        undo = lab2.rate_limit(h1, "8mbit")
        try:
            qdisc = lab2.run(h1, ["tc", "qdisc", "show", "dev", h1.fabric_ifname]).stdout
            assert "tbf" in qdisc and "8Mbit" in qdisc
            slow = send(1_000_000)  # 8 Mbit at 8 Mbit/s: about a second
        finally:
            undo()
        assert "tbf" not in lab2.run(h1, ["tc", "qdisc", "show", "dev", h1.fabric_ifname]).stdout
        assert slow > 0.6, (fast, slow)
        assert fast < slow / 4, (fast, slow)
    finally:
        lab2.kill(h2, sink.pid)
        sink.wait(timeout=10)


@pytest.mark.lab
def test_set_mtu_is_visible_and_undone(lab2: Lab) -> None:
    h = lab2.hosts[0]

    def mtu() -> int:
        return json.loads(lab2.run(h, ["ip", "-j", "link", "show", h.fabric_ifname]).stdout)[0][
            "mtu"
        ]

    assert mtu() == 1500
    undo = lab2.set_mtu(h, 1400)
    try:
        assert mtu() == 1400
        assert lab2.ssh(h, ["cat", f"/sys/class/net/{h.fabric_ifname}/mtu"]).stdout.strip() == (
            "1400"
        )
    finally:
        undo()
    assert mtu() == 1500


@pytest.mark.lab
def test_kill_only_kills_processes_of_that_host(lab2: Lab) -> None:
    proc = lab2.popen(1, ["sleep", "60"])
    try:
        with pytest.raises(LabError, match="does not run in lab host"):
            lab2.kill(0, proc.pid)
        with pytest.raises(LabError, match="does not run in lab host"):
            lab2.kill(1, os.getpid())
        assert proc.poll() is None
        lab2.kill(1, proc.pid)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.lab
def test_kill_sshd_then_restart_it(lab2: Lab) -> None:
    h = lab2.hosts[1]
    old = lab2.sshd_pid(h)
    lab2.kill(h, old)
    deadline = time.monotonic() + 5
    while harness._ssh_banners([h.mgmt_addr]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert probe(lab2, 0, h.mgmt_addr, 22) == "refused"
    new = lab2.restart_sshd(h)
    assert new != old
    assert lab2.ssh(h, "hostname").stdout.strip() == h.hostname


@pytest.mark.lab
def test_hosts_file_is_per_host_and_restored(lab2: Lab) -> None:
    h1, h2 = lab2.hosts
    text = lab2.default_hosts_text() + f"{h2.fabric_addr}\tstorage-peer\n"
    undo = lab2.write_hosts_file(h1, text)
    try:
        assert lab2.ssh(h1, "getent hosts storage-peer").stdout.split()[0] == h2.fabric_addr
        assert lab2.run(h1, ["getent", "hosts", "storage-peer"]).stdout.split()[0] == (
            h2.fabric_addr
        )
        assert lab2.ssh(h2, "getent hosts storage-peer", check=False).returncode == 2
    finally:
        undo()
    assert lab2.ssh(h1, "getent hosts storage-peer", check=False).returncode == 2


@pytest.mark.lab
def test_fake_python_reports_another_torch(lab2: Lab) -> None:
    real = importlib.metadata.version("torch")
    fake = lab2.fake_python(lab2.hosts[1], torch_version="2.12.0")
    assert real != "2.12.0"
    code = "import torch; print(torch.__version__, torch.version.__version__, torch.ones(1) + 1)"
    out = lab2.ssh(1, [fake, "-c", code], timeout=120).stdout.split()
    assert out[:2] == ["2.12.0", "2.12.0"]
    assert "tensor([2.])" in " ".join(out)  # the real torch underneath still works


@pytest.mark.lab
def test_hosts_run_a_node_python_with_torch_and_without_numpy(lab2: Lab) -> None:
    """The lab's hosts run the nodes' interpreter (requirements-node.txt alone): every lab run
    proves the node side needs torch and the standard library, nothing else (issue 25)."""
    code = (
        "import importlib.util, torch\n"
        "print(torch.__version__, *(importlib.util.find_spec(m) is None for m in NOT_ON_NODES))"
    ).replace("NOT_ON_NODES", repr(("numpy", "matplotlib", "ansible", "junit_xml")))
    out = lab2.ssh(1, [lab2.python, "-c", code], timeout=120).stdout.split()
    assert out == [importlib.metadata.version("torch"), "True", "True", "True", "True"]
    numpy = lab2.ssh(1, [lab2.python, "-c", "import numpy"], check=False, timeout=120)
    assert numpy.returncode == 1 and "ModuleNotFoundError" in numpy.stderr


@pytest.mark.lab
def test_reset_faults_undoes_everything(lab2: Lab) -> None:
    h = lab2.hosts[0]
    lab2.set_mtu(h, 1300)
    lab2.firewall_drop(h, 29403)
    lab2.link_down(h)
    held = lab2.hold_port(h, 29404)
    lab2.reset_faults()
    link = json.loads(lab2.run(h, ["ip", "-j", "link", "show", h.fabric_ifname]).stdout)[0]
    assert link["mtu"] == 1500 and "UP" in link["flags"]
    assert "nccl-lab-fault" not in lab2.run(h, ["iptables-save"]).stdout
    assert not harness._pid_alive(held.pid)
    assert probe(lab2, 1, h.fabric_addr, 9, timeout=3) == "refused"


@pytest.mark.lab
def test_down_all_kept_spares_labs_of_running_sessions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    require_lab()
    monkeypatch.setenv(harness.STATE_ROOT_ENV, str(tmp_path / "labs"))  # only this test's labs
    kept, owned = Lab(1, keep=True), Lab(1)
    try:
        kept.up()
        owned.up()
        assert harness.down_all(kept_only=True) == [kept.name]
        assert Lab.recorded() == [owned.name]
        assert harness._ssh_banners([owned.hosts[0].mgmt_addr]) == {owned.hosts[0].mgmt_addr}
        assert harness.down_all() == [owned.name]
        assert Lab.recorded() == []
    finally:
        kept.down()
        owned.down()
