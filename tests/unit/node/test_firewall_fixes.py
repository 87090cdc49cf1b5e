# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The fix a firewall finding prints is the fix (issue 17.6), on the recorded fixtures.

A host's own ranks and its own probe connect to its fabric address: that traffic arrives on `lo`,
from the host's own address, and a rule without `-i <fabric>` drops it as surely as a peer's.
host_queries asks for it, so the fix names the host too. ufw and firewalld accept everything on
`lo` before their rules, so there the host itself is not judged; their fixes are checked by
applying them to the status text the way the tool prints the new rule, then judging again. The
iptables and nft fixes are applied to a real kernel in tests/integration/test_firewall_fix_lab.py.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from nccl_preflight.node import firewall_common as fw
from nccl_preflight.node import firewall_firewalld as fwd
from nccl_preflight.node import firewall_iptables as ipt
from nccl_preflight.node import firewall_nft as nft
from nccl_preflight.node import firewall_ufw as ufw

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "firewall"
PEER = "10.77.0.12"
ME = "10.77.0.11"
PORTS = [("MASTER_PORT", [(29500, 29500)]), ("ephemeral range", [(32768, 60999)])]


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def host(peers: list[str] | None = None, address: str = ME) -> list[fw.Query]:
    return fw.host_queries(peers or [PEER], PORTS, address, "eth1")


def test_host_queries_ask_for_the_peers_on_the_fabric_and_the_host_itself_on_lo() -> None:
    queries = host()
    assert [(q.label, q.peers, q.ifname, q.address) for q in queries] == [
        ("MASTER_PORT", [PEER], "eth1", ME),
        ("MASTER_PORT", [ME], "lo", ME),
        ("ephemeral range", [PEER], "eth1", ME),
        ("ephemeral range", [ME], "lo", ME),
    ]
    assert [q.label for q in fw.host_queries([PEER], PORTS, "", "eth1")] == [
        "MASTER_PORT",
        "ephemeral range",
    ]


def test_iptables_policy_drop_fix_lets_in_the_peer_and_the_host_itself() -> None:
    # INPUT policy DROP, MASTER_PORT accepted from 10.77.0.0/24 (this host is in it), no `-i lo`
    # ACCEPT: the host's own ranks hit the policy on the ephemeral range.
    found = ipt.evaluate_iptables(ipt.parse_iptables_save(text("iptables-save-policy-drop.txt")),
                                  host())  # fmt: skip
    assert [(f["label"], f["peers"]) for f in found] == [("ephemeral range", [PEER, ME])]
    assert (
        found[0]["fix"]
        == f"iptables -I INPUT 1 -p tcp -s {PEER},{ME} --dport 32768:60999 -j ACCEPT"
    )


def test_iptables_loopback_accepted_first_keeps_the_fix_to_the_peer() -> None:
    # `-A INPUT -i lo -j ACCEPT` before the fence: the host's own traffic never reaches it.
    found = ipt.evaluate_iptables(ipt.parse_iptables_save(text("iptables-save-drops.txt")), host())
    assert {f["label"]: f["peers"] for f in found} == {
        "MASTER_PORT": [PEER],
        "ephemeral range": [PEER],
    }
    assert found[0]["fix"] == f"iptables -I NCCL-FENCE 1 -p tcp -s {PEER} --dport 29500 -j ACCEPT"


def test_ip6tables_fix_names_the_host_itself() -> None:
    parsed = ipt.parse_iptables_save(text("ip6tables-save-drop.txt"))
    [found] = ipt.evaluate_iptables(parsed, host(["fd00::12"], "fd00::11"), tool="ip6tables")
    assert (
        found["fix"] == "ip6tables -I INPUT 1 -p tcp -s fd00::12,fd00::11 --dport 29500 -j ACCEPT"
    )


def test_nft_fix_names_the_host_where_loopback_is_not_accepted_first() -> None:
    found = {f["table"]: f for f in nft.evaluate_nft(nft.parse_nft_json(text("nft-native.json")),
                                                     host())}  # fmt: skip
    # `ip other in2` rejects tcp/{29500,29501} from anybody, the host's own ranks included.
    assert found["ip other"]["peers"] == [PEER, ME]
    assert found["ip other"]["fix"] == (
        f"nft insert rule ip other in2 ip saddr {{ {PEER}, {ME} }} tcp dport 29500 accept"
    )
    # `inet fw` accepts iifname "lo" first: only the peer's ephemeral range is dropped there.
    assert found["inet fw"]["peers"] == [PEER]


def test_nft_fix_in_an_inet_table_writes_one_command_per_family() -> None:
    f = {"table": "inet fw", "chain": "input", "peers": [PEER, "fd00::12", ME]}
    assert nft.fix_command(f["table"], f["chain"], f["peers"], [(29500, 29500)]) == (
        f"nft insert rule inet fw input ip saddr {{ {PEER}, {ME} }} tcp dport 29500 accept && "
        "nft insert rule inet fw input ip6 saddr fd00::12 tcp dport 29500 accept"
    )


# --------------------------------------------------------------------------- ufw
UFW_FIX = re.compile(
    r"ufw (?:insert (\d+) )?allow proto tcp from (\S+) to any port (\S+)"
)  # fmt: skip


def apply_ufw(status: str, fix: str) -> str:
    """``status`` (ufw status verbose) as ufw prints it after running ``fix``: each command adds
    ``<port>/tcp ALLOW IN <peer>`` at the given rule number, or after the last rule."""
    lines = status.rstrip("\n").split("\n")
    first = lines.index(next(line for line in lines if line.startswith("--"))) + 1
    for cmd in fix.split(" && "):
        m = UFW_FIX.fullmatch(cmd)
        assert m, cmd
        line = f"{m.group(3)}/tcp".ljust(27) + "ALLOW IN".ljust(12) + m.group(2)
        at = first + int(m.group(1)) - 1 if m.group(1) else len(lines)
        lines.insert(at, line)
    return "\n".join(lines) + "\n"


def test_ufw_host_itself_is_not_judged_and_a_default_deny_fix_appends_a_rule() -> None:
    status = text("ufw-status-verbose-ssh-only.txt")
    found = ufw.evaluate_ufw(ufw.parse_ufw_status(status), host())
    assert {f["label"]: f["peers"] for f in found} == {
        "MASTER_PORT": [PEER],
        "ephemeral range": [PEER],
    }
    # No rule matched, the default denied: appending works on any ruleset (`ufw insert 1`
    # fails on one without rules, and for an IPv6 rule above the IPv4 ones).
    assert found[0]["fix"] == f"ufw allow proto tcp from {PEER} to any port 29500"
    for f in found:
        status = apply_ufw(status, f["fix"])
    assert ufw.evaluate_ufw(ufw.parse_ufw_status(status), host()) == []


def test_ufw_deny_rule_fix_is_inserted_before_that_rule() -> None:
    status = text("ufw-status-numbered-sous-chefs.txt")
    q = fw.host_queries([PEER, "10.77.0.13"], [("MASTER_PORT", [(1234, 1234)])], ME, "eth1")
    [found] = ufw.evaluate_ufw(ufw.parse_ufw_status(status), q)
    assert (found["action"], found["position"]) == ("deny", 3)
    assert found["fix"] == (
        f"ufw insert 3 allow proto tcp from {PEER} to any port 1234 && "
        "ufw insert 3 allow proto tcp from 10.77.0.13 to any port 1234"
    )
    assert ufw.evaluate_ufw(ufw.parse_ufw_status(apply_ufw(status, found["fix"])), q) == []


# --------------------------------------------------------------------------- firewalld
def apply_firewalld(list_all: str, fix: str) -> str:
    """``list_all`` (firewall-cmd --list-all) after ``fix``'s runtime commands (the
    ``--permanent`` twins change the saved configuration, not what --list-all shows)."""
    for cmd in fix.split(" && "):
        argv = shlex.split(cmd)
        assert argv[0] == "firewall-cmd" and argv[-2].startswith("--zone="), cmd
        if "--permanent" in argv:
            continue
        option, _, value = argv[-1].partition("=")
        if option == "--add-port":
            list_all = re.sub(
                r"(?m)^(\s+ports:)(.*)$", lambda m, v=value: f"{m[1]}{m[2]} {v}", list_all
            )
        else:
            assert option == "--add-rich-rule", cmd
            list_all = list_all.rstrip("\n") + f"\n\t{value}\n"
    return list_all


def test_firewalld_rich_drop_fix_is_a_rich_accept_before_the_deny_rules() -> None:
    zone = text("firewalld-public-fabric-rules.txt")
    dropped = "198.19.7.13"  # `rule family="ipv4" source address="198.19.7.13" drop`
    q = fw.host_queries([dropped], PORTS, "198.19.7.11", "eth0")
    found = fwd.evaluate_firewalld(fwd.parse_firewalld_list_all(zone), q)
    assert [(f["label"], f["chain"], f["peers"]) for f in found] == [
        ("MASTER_PORT", "rich rules", [dropped]),
        ("ephemeral range", "rich rules", [dropped]),
    ]
    rule = (
        f'rule priority="-1" family="ipv4" source address="{dropped}" '
        'port port="29500" protocol="tcp" accept'
    )
    assert found[0]["fix"] == (
        f"firewall-cmd --zone=public --add-rich-rule='{rule}' && "
        f"firewall-cmd --permanent --zone=public --add-rich-rule='{rule}'"
    )
    # An --add-port would not do: firewalld puts deny rich rules before the zone's ports.
    for f in found:
        zone = apply_firewalld(zone, f["fix"])
    assert fwd.evaluate_firewalld(fwd.parse_firewalld_list_all(zone), q) == []


def test_firewalld_target_fix_opens_the_ports_and_the_host_itself_is_not_judged() -> None:
    zone = text("firewalld-public-default.txt")
    found = fwd.evaluate_firewalld(fwd.parse_firewalld_list_all(zone), host())
    assert [(f["chain"], f["peers"]) for f in found] == [("target", [PEER]), ("target", [PEER])]
    for f in found:
        zone = apply_firewalld(zone, f["fix"])
    assert fwd.evaluate_firewalld(fwd.parse_firewalld_list_all(zone), host()) == []


def test_ufw_ipv6_peer_fix_is_appended_and_its_rule_read_back_as_ipv6() -> None:
    """ufw prints a rule for one IPv6 address without "(v6)" (sous-chefs' rule 7 is one): the
    allow the fix adds must still count for the IPv6 peer."""
    numbered = ufw.parse_ufw_status(text("ufw-status-numbered-sous-chefs.txt"))
    assert [r["v6"] for r in numbered["rules"]] == [False] * 6 + [True] + [False] * 3
    status = text("ufw-status-verbose-ssh-only.txt")
    q = fw.host_queries(["fd00::12"], PORTS, "fd00::11", "eth1")
    found = ufw.evaluate_ufw(ufw.parse_ufw_status(status), q)
    assert [f["fix"] for f in found] == [
        "ufw allow proto tcp from fd00::12 to any port 29500",
        "ufw allow proto tcp from fd00::12 to any port 32768:60999",
    ]
    for f in found:
        status = apply_ufw(status, f["fix"])
    assert ufw.evaluate_ufw(ufw.parse_ufw_status(status), q) == []
