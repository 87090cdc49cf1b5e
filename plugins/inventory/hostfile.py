# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
    name: hostfile
    short_description: Reads an MPI / DeepSpeed style hostfile, one node per line, in rank order
    description:
        - Reads files named C(hostfile) or C(*.hostfile), for example C(inventory/dgx/hostfile).
          Any other file name is declined, so an inventory directory may hold a hostfile next to
          C(group_vars/), C(host_vars/) and other inventory sources.
        - One node per line, in one of the forms C(HOST), C(HOST slots=N) (Open MPI, DeepSpeed)
          or C(HOST:N) (MPICH, Intel MPI). Open MPI's C(max_slots=N) is accepted and checked,
          then ignored.
        - C(#) starts a comment, on its own line or after a host. Blank lines are ignored.
        - HOST is an IPv4 address, an IPv6 address or a hostname (RFC 1123).
          A bare IPv6 address cannot carry C(:N), because C(fe80::1:4) is itself an address;
          write C([fe80::1]:4) or C(fe80::1 slots=4) instead. C([fe80::1]) without C(:N) is
          also accepted.
        - The order of the lines is the node rank. The plugin builds the group C(nccl_nodes)
          (every host, in hostfile order) and the group C(nccl_master) (the first host).
        - Each host gets C(nccl_node_rank) (int, 0 for the first line), C(nccl_slots)
          (int, only when the line gives slots) and C(ansible_host) (the address or name as
          written, without brackets or C(:N)).
        - A bad hostfile fails with C(file:line) and the problem - an unknown token, slots that
          are not a positive integer, the same host twice (naming both lines), or no host at all.
          Nothing is added to the inventory from a hostfile that has an error.
    author:
        - nccl-preflight contributors
    notes:
        - When a plugin fails, ansible-core tries the next enabled one. C(ini) accepts nearly any
          text, so with C(ini) enabled a bad hostfile may still load as plain hosts (for example
          with a host variable C(slots=0)) and no C(nccl_nodes) group; this plugin prints its
          error in any case. To make a bad hostfile stop the run, leave C(ini) out of
          C(enable_plugins) and set C(any_unparsed_is_failed = True) in the C([inventory])
          section of C(ansible.cfg).
"""

EXAMPLES = r"""
# inventory/dgx/hostfile -- two DGX Sparks, rank 0 is the master
#   192.168.100.10 slots=1
#   192.168.100.11 slots=1   # second node
#
# ansible-inventory -i inventory/dgx --graph
# ansible-playbook -i inventory/dgx playbooks/validate.yml

# MPICH / Intel MPI form, IPv6 in brackets, and a hostname without slots
#   node01:8
#   [fd00:100::12]:8
#   node03.cluster.example
"""

import ipaddress
import os
import re
from dataclasses import dataclass

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native, to_text
from ansible.plugins.inventory import BaseInventoryPlugin

MASTER_GROUP = "nccl_master"
NODES_GROUP = "nccl_nodes"

# RFC 1123 label: letters, digits, hyphen; 1-63 characters; no hyphen at either end.
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_-]*)=(?P<value>.*)$")
_BRACKETED = re.compile(r"^\[(?P<address>[^\]]+)\](?::(?P<slots>.*))?$")


@dataclass(frozen=True)
class HostfileEntry:
    """One node line of a hostfile."""

    host: str  # the address or name as written (no brackets, no :N)
    slots: int | None
    line: int  # 1-based line number
    rank: int  # 0-based node rank (order of the node lines)


class HostfileError(ValueError):
    """A hostfile problem; the message already names file:line."""


def _positive_int(text: str, what: str, where: str) -> int:
    if not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        raise HostfileError(f"{where}: {what} must be a positive integer, got {text!r}")
    return int(text)


def _check_host(host: str, where: str) -> str:
    """Return the identity used to detect duplicates, or raise HostfileError."""
    try:
        return "ip:" + ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    if ":" in host:
        raise HostfileError(
            f"{where}: {host!r} is not a valid IPv6 address; an IPv6 address with slots is "
            "written [ADDRESS]:N or ADDRESS slots=N"
        )
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise HostfileError(
            f"{where}: {host!r} is neither an IP address nor a valid hostname (RFC 1123: "
            "letters, digits and '-' in dot-separated labels of 1-63 characters)"
        )
    if all(label.isdigit() for label in labels):
        raise HostfileError(f"{where}: {host!r} is not a valid IPv4 address")
    return "name:" + host.lower()


def _split_host_token(token: str, where: str) -> tuple[str, str | None]:
    """Split HOST, HOST:N, [V6] or [V6]:N into (host, slots text or None)."""
    bracketed = _BRACKETED.match(token)
    if bracketed:
        address = bracketed.group("address")
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            raise HostfileError(
                f"{where}: {address!r} in brackets is not an IPv6 address"
            ) from None
        return address, bracketed.group("slots")
    if token.count(":") == 1:
        host, slots = token.split(":")
        return host, slots
    return token, None


def parse_hostfile(text: str, path: str = "hostfile") -> list[HostfileEntry]:
    """Parse hostfile text into entries in rank order.

    Raises HostfileError naming ``path:line`` on the first problem found.
    """
    entries: list[HostfileEntry] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        where = f"{path}:{number}"
        content = raw.split("#", 1)[0].strip()
        if not content:
            continue
        tokens = content.split()
        host, slots_text = _split_host_token(tokens[0], where)
        identity = _check_host(host, where)
        slots = None
        if slots_text is not None:
            slots = _positive_int(slots_text, f"slots in {tokens[0]!r}", where)
        max_slots = None
        for token in tokens[1:]:
            match = _KEY_VALUE.match(token)
            key = match.group("key") if match else None
            if key == "slots" and match:
                if slots is not None:
                    raise HostfileError(f"{where}: slots given twice for {host!r}")
                slots = _positive_int(match.group("value"), "slots", where)
            elif key in ("max_slots", "max-slots") and match:
                max_slots = _positive_int(match.group("value"), key, where)
            else:
                raise HostfileError(
                    f"{where}: unknown token {token!r} after host {host!r}; a line is HOST, "
                    "HOST slots=N or HOST:N, optionally followed by a # comment"
                )
        if max_slots is not None and slots is not None and max_slots < slots:
            raise HostfileError(f"{where}: max_slots={max_slots} is less than slots={slots}")
        if identity in seen:
            raise HostfileError(
                f"{where}: host {host!r} appears twice, on lines {seen[identity]} and {number} "
                f"of {path}; each node must appear once"
            )
        seen[identity] = number
        entries.append(HostfileEntry(host=host, slots=slots, line=number, rank=len(entries)))
    if not entries:
        raise HostfileError(
            f"{path}:1: no hosts; the hostfile has only comments or blank lines "
            "(write one HOST, HOST slots=N or HOST:N per line)"
        )
    return entries


class InventoryModule(BaseInventoryPlugin):
    NAME = "hostfile"

    def verify_file(self, path: str) -> bool:
        name = os.path.basename(path)
        if name != "hostfile" and not (name.endswith(".hostfile") and len(name) > 9):
            return False
        return super().verify_file(path)

    def parse(self, inventory, loader, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        try:
            with open(path, "rb") as handle:
                text = to_text(handle.read(), errors="surrogate_or_strict")
        except (OSError, UnicodeError) as exc:
            raise AnsibleParserError(f"{path}: cannot read the hostfile: {to_native(exc)}") from exc
        try:
            entries = parse_hostfile(text, path)
        except HostfileError as exc:
            # ansible-core then tries the next enabled plugin (ini accepts nearly any text) and
            # shows this failure only when no plugin parsed the file; print it now, so a bad
            # hostfile is never silently read some other way.
            self.display.error(f"hostfile plugin: {exc}")
            raise AnsibleParserError(str(exc)) from exc

        self.inventory.add_group(NODES_GROUP)
        self.inventory.add_group(MASTER_GROUP)
        for entry in entries:
            self.inventory.add_host(entry.host, group=NODES_GROUP)
            if entry.rank == 0:
                self.inventory.add_host(entry.host, group=MASTER_GROUP)
            self.inventory.set_variable(entry.host, "ansible_host", entry.host)
            self.inventory.set_variable(entry.host, "nccl_node_rank", entry.rank)
            if entry.slots is not None:
                self.inventory.set_variable(entry.host, "nccl_slots", entry.slots)
