# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/firewall_<tool>.py on recorded firewall outputs
(tests/fixtures/firewall/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_preflight.node import firewall_common as fw
from nccl_preflight.node import firewall_firewalld as fwd
from nccl_preflight.node import firewall_iptables as ipt
from nccl_preflight.node import firewall_nft as nft
from nccl_preflight.node import firewall_ufw as ufw

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "firewall"
PEER = "10.77.0.12"
ME = "10.77.0.11"
EPHEMERAL = (32768, 60999)


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def queries(peers: list[str] | None = None, master: bool = True, ifname: str = "eth1"):
    peers = peers or [PEER]
    out = [
        fw.Query(peers=peers, ports=[EPHEMERAL], label="ephemeral range", ifname=ifname, address=ME)
    ]
    if master:
        out.insert(
            0,
            fw.Query(
                peers=peers, ports=[(29500, 29500)], label="MASTER_PORT", ifname=ifname, address=ME
            ),
        )
    return out


def test_port_interval_arithmetic() -> None:
    assert fw.ports_subtract([(1, 10)], [(3, 4), (8, 20)]) == [(1, 2), (5, 7)]
    assert fw.ports_intersect([(1, 10), (20, 30)], [(5, 25)]) == [(5, 10), (20, 25)]
    assert fw.ports_union([(1, 2)], [(3, 5), (9, 9)]) == [(1, 5), (9, 9)]
    assert fw.ports_complement([(0, 100)]) == [(101, 65535)]
    assert fw.ports_text([(29500, 29500), (32768, 60999)], ":") == "29500,32768:60999"


def test_iptables_user_chain_drop_and_reject_are_named_with_chain_rule_and_fix() -> None:
    parsed = ipt.parse_iptables_save(text("iptables-save-drops.txt"))
    assert parsed["variant"] == "nf_tables"
    found = {f["label"]: f for f in ipt.evaluate_iptables(parsed, queries())}
    master = found["MASTER_PORT"]
    assert (master["tool"], master["table"], master["chain"], master["position"]) == (
        "iptables",
        "filter",
        "NCCL-FENCE",
        1,
    )
    assert master["action"] == "drop" and master["certain"] and master["peers"] == [PEER]
    assert master["fix"] == f"iptables -I NCCL-FENCE 1 -p tcp -s {PEER} --dport 29500 -j ACCEPT"
    eph = found["ephemeral range"]
    assert eph["action"] == "reject" and eph["position"] == 2 and eph["ports_text"] == "32768-60999"
    line = fw.describe_finding(eph)
    assert "iptables filter chain NCCL-FENCE rule 2" in line and "rejects tcp/32768-60999" in line


def test_iptables_rules_for_other_sources_do_not_count() -> None:
    parsed = ipt.parse_iptables_save(text("iptables-save-drops.txt"))
    # The fence chain is only entered from 10.77.0.0/24.
    assert ipt.evaluate_iptables(parsed, queries(peers=["192.0.2.5"])) == []


def test_iptables_policy_drop_catches_only_what_no_rule_accepts() -> None:
    parsed = ipt.parse_iptables_save(text("iptables-save-policy-drop.txt"))
    found = ipt.evaluate_iptables(parsed, queries())
    assert [f["label"] for f in found] == ["ephemeral range"]  # 29500 is accepted from the peer
    assert found[0]["rule"] == ":INPUT DROP (chain policy)" and found[0]["position"] is None
    # From outside 10.77.0.0/24 MASTER_PORT falls to the policy as well.
    outside = ipt.evaluate_iptables(parsed, queries(peers=["192.0.2.5"]))
    assert {f["label"] for f in outside} == {"MASTER_PORT", "ephemeral range"}


def test_empty_iptables_and_ipv6_rules_do_not_hit_ipv4_peers() -> None:
    assert ipt.evaluate_iptables(ipt.parse_iptables_save(""), queries()) == []
    v6 = ipt.parse_iptables_save(text("ip6tables-save-drop.txt"))
    assert ipt.evaluate_iptables(v6, queries(), tool="ip6tables") == []
    hit = ipt.evaluate_iptables(v6, queries(peers=["fd00::12"]), tool="ip6tables")
    assert [(f["label"], f["fix"].split()[0]) for f in hit] == [("MASTER_PORT", "ip6tables")]


def test_nft_native_two_base_chains_each_reported() -> None:
    parsed = nft.parse_nft_json(text("nft-native.json"))
    found = {(f["table"], f["chain"]): f for f in nft.evaluate_nft(parsed, queries())}
    assert set(found) == {("ip other", "in2"), ("inet fw", "input")}
    reject = found[("ip other", "in2")]
    assert reject["action"] == "reject" and reject["ports_text"] == "29500"
    assert "tcp dport { 29500, 29501 }" in reject["rule"]
    drop = found[("inet fw", "input")]
    assert drop["ports_text"] == "32768-60999" and drop["label"] == "ephemeral range"
    assert (
        drop["fix"] == f"nft insert rule inet fw input ip saddr {PEER} tcp dport 32768-60999 accept"
    )
    assert "handle" in fw.describe_finding(drop)


def test_nft_named_set_accepts_master_port_but_policy_drops_the_rest_for_others() -> None:
    parsed = nft.parse_nft_json(text("nft-native.json"))
    other_peer = "10.77.0.13"  # in @peers, not the one the ephemeral drop names
    found = [
        f for f in nft.evaluate_nft(parsed, queries(peers=[other_peer])) if f["table"] == "inet fw"
    ]
    assert [(f["label"], f["rule"]) for f in found] == [
        ("ephemeral range", "policy drop of chain input")
    ]


def test_nft_accepting_the_fabric_and_empty_ruleset_pass() -> None:
    assert (
        nft.evaluate_nft(nft.parse_nft_json(text("nft-native-allow-fabric.json")), queries()) == []
    )
    assert nft.evaluate_nft(nft.parse_nft_json(text("nft-empty.json")), queries()) == []


def test_iptables_nft_tables_are_reported_once_as_iptables() -> None:
    parsed = nft.parse_nft_json(text("nft-iptables-nft-drops.json"))
    skip = nft.iptables_owned_nft_tables("nf_tables", parsed)
    assert skip == {("ip", "filter")}
    assert nft.evaluate_nft(parsed, queries(), skip_tables=skip) == []
    # Without the skip, the xt multiport match is not understood: "may reject", not certain.
    found = {f["label"]: f for f in nft.evaluate_nft(parsed, queries())}
    assert found["MASTER_PORT"]["certain"] is True
    assert found["ephemeral range"]["certain"] is False
    assert "may reject" in fw.describe_finding(found["ephemeral range"])


def test_ufw_default_deny_with_only_ssh_blocks_both_ranges() -> None:
    parsed = ufw.parse_ufw_status(text("ufw-status-verbose-ssh-only.txt"))
    assert parsed["active"] and parsed["default_incoming"] == "deny"
    assert [r["to"] for r in parsed["rules"]] == ["22/tcp", "22/tcp"]
    found = ufw.evaluate_ufw(parsed, queries())
    assert {f["label"] for f in found} == {"MASTER_PORT", "ephemeral range"}
    assert all(f["chain"] == "default incoming policy" for f in found)
    # Appended, not `ufw insert 1` (which fails on a ruleset without rules): see
    # test_firewall_fixes.py.
    assert found[0]["fix"] == f"ufw allow proto tcp from {PEER} to any port 29500"


def test_ufw_allow_from_the_fabric_passes_and_inactive_ufw_is_no_firewall() -> None:
    allowed = ufw.parse_ufw_status(text("ufw-status-verbose-fabric-allowed.txt"))
    assert ufw.evaluate_ufw(allowed, queries(peers=["198.19.7.12"])) == []
    assert len(ufw.evaluate_ufw(allowed, queries(peers=["198.19.8.12"]))) == 2
    inactive = ufw.parse_ufw_status(text("ufw-status-inactive.txt"))
    assert not inactive["active"] and ufw.evaluate_ufw(inactive, queries()) == []


@pytest.mark.parametrize(
    ("port", "peer", "expected"),
    [
        (1234, PEER, ("deny", 3)),  # DENY before the later multi-port ALLOW: first match wins
        (1235, PEER, ("reject", 4)),
        (5050, PEER, None),  # 5000:5100 allowed
        (1050, PEER, None),  # 1000:1100 allowed
        (29500, "192.168.99.99", ("reject", 6)),  # everything from that source is rejected
        (29500, PEER, None),  # no default policy printed: nothing to fall to
    ],
)
def test_ufw_numbered_rules_first_match_wins(port, peer, expected) -> None:
    parsed = ufw.parse_ufw_status(text("ufw-status-numbered-sous-chefs.txt"))
    assert len(parsed["rules"]) == 10
    q = [fw.Query(peers=[peer], ports=[(port, port)], label="MASTER_PORT", address=ME)]
    found = ufw.evaluate_ufw(parsed, q)
    assert [(f["action"], f["position"]) for f in found] == ([expected] if expected else [])


def test_ufw_owns_its_chains_and_the_built_in_policies_not_other_rules() -> None:
    ufw_rules = ipt.parse_iptables_save(text("iptables-save-ufw-custom-drop.txt"))
    found = ipt.evaluate_iptables(ufw_rules, queries())
    assert [(f["chain"], f["position"], ufw.ufw_owns(f)) for f in found] == [
        ("INPUT", 1, False),  # inserted before ufw's chains: not ufw's
        ("ufw-not-local", 5, True),
    ]
    policy = ipt.evaluate_iptables(ipt.parse_iptables_save(text("iptables-save-policy-drop.txt")),
                                  queries())  # fmt: skip
    assert [(f["position"], ufw.ufw_owns(f)) for f in policy] == [(None, True)]


def test_firewalld_default_target_rejects_ports_not_opened() -> None:
    parsed = fwd.parse_firewalld_list_all(text("firewalld-public-default.txt"))
    assert parsed["zone"] == "public" and parsed["target"] == "default"
    assert parsed["services"] == ["dhcpv6-client", "ssh"] and parsed["ports"] == []
    found = fwd.evaluate_firewalld(parsed, queries())
    assert {f["label"] for f in found} == {"MASTER_PORT", "ephemeral range"}
    assert found[0]["fix"].startswith("firewall-cmd --zone=public --add-port=29500/tcp")
    assert "firewalld zone public chain target" in fw.describe_finding(found[0])


def services(*names: str) -> dict[str, dict]:
    """The recorded ``firewall-cmd --info-service`` of each name (firewalld 1.3.3)."""
    return {n: fwd.parse_firewalld_service_info(text(f"firewalld-service-{n}.txt")) for n in names}


def test_firewalld_service_info_recorded() -> None:
    assert services("ssh")["ssh"] == {"name": "ssh", "ports": [(22, 22)], "includes": []}
    # The site's own service: tcp ports only (its 29500/udp does not open TCP).
    assert services("nccl")["nccl"]["ports"] == [(29500, 29500), EPHEMERAL]
    samba = services("samba", "samba-client")
    assert samba["samba"] == {"name": "samba", "ports": [(139, 139), (445, 445)],
                              "includes": ["samba-client"]}  # fmt: skip
    assert samba["samba-client"]["includes"] == ["netbios-ns"]
    ports, unknown = fwd.firewalld_service_ports(["samba", "ssh"], {**samba, **services("ssh")})
    assert ports == [(22, 22), (139, 139), (445, 445)] and unknown == ["netbios-ns"]


def test_firewalld_ports_of_the_zones_services_are_open() -> None:
    parsed = fwd.parse_firewalld_list_all(text("firewalld-public-service-nccl.txt"))
    assert parsed["services"] == ["dhcpv6-client", "nccl", "ssh"] and parsed["ports"] == []
    known = services("dhcpv6-client", "nccl", "ssh")
    assert fwd.evaluate_firewalld(parsed, queries(), known) == []
    # The same zone, the nccl service unreadable: the target may reject, but that is not certain.
    unsure = fwd.evaluate_firewalld(parsed, queries(), services("dhcpv6-client", "ssh"))
    assert {f["label"] for f in unsure} == {"MASTER_PORT", "ephemeral range"}
    assert all(f["certain"] is False for f in unsure)
    assert "services not read: nccl" in unsure[0]["rule"]


def test_firewalld_services_that_do_not_open_the_port_leave_a_certain_finding() -> None:
    parsed = fwd.parse_firewalld_list_all(text("firewalld-public-default.txt"))
    found = fwd.evaluate_firewalld(parsed, queries(), services("dhcpv6-client", "ssh"))
    assert [(f["label"], f["certain"]) for f in found] == [
        ("MASTER_PORT", True),
        ("ephemeral range", True),
    ]
    assert "services: dhcpv6-client, ssh)" in found[0]["rule"]


def test_firewalld_reject_target_recorded_on_centos() -> None:
    parsed = fwd.parse_firewalld_list_all(text("firewalld-public-reject.txt"))
    assert parsed["target"] == "%%REJECT%%" and parsed["services"] == ["http", "nrpe", "ssh"]
    assert [f["action"] for f in fwd.evaluate_firewalld(parsed, queries(master=False))] == [
        "reject"
    ]


def test_firewalld_ports_and_rich_rules() -> None:
    parsed = fwd.parse_firewalld_list_all(text("firewalld-public-fabric-rules.txt"))
    assert parsed["ports"] == [(29500, 29500)] and len(parsed["rich"]) == 2
    assert fwd.evaluate_firewalld(parsed, queries(peers=["198.19.7.12"])) == []
    # firewalld puts deny rich rules before ports and accept rules: 198.19.7.13 is dropped even
    # on the open MASTER_PORT.
    dropped = fwd.evaluate_firewalld(parsed, queries(peers=["198.19.7.13"]))
    assert [(f["label"], f["chain"], f["position"], f["action"]) for f in dropped] == [
        ("MASTER_PORT", "rich rules", 2, "drop"),
        ("ephemeral range", "rich rules", 2, "drop"),
    ]
    outsider = fwd.evaluate_firewalld(parsed, queries(peers=["198.19.9.1"]))
    assert [(f["label"], f["chain"]) for f in outsider] == [("ephemeral range", "target")]
