# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/listener.py.serve and the connections the kernel completed before the
end.

A peer's connect() succeeds once the kernel put the connection in the listening socket's backlog,
whether or not the listener process ran since. On a loaded node the stop file (or the deadline)
can come before the listener was scheduled to accept: the connection the peer saw succeed must
still be counted, or the pre-flight reports a path that worked as closed. Real sockets on
loopback, serve() in this process: the order is fixed, not left to the scheduler.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nccl_preflight.node import listener as nccl_listener


@pytest.fixture
def clients() -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    yield made
    for sock in made:
        sock.close()


def bound(expect: int) -> tuple[list[dict], dict[str, socket.socket], int]:
    entries, socks = nccl_listener.bind_all(
        [{"name": "ring", "address": "127.0.0.1", "port": 0, "connections": expect}]
    )
    assert entries[0]["error"] == "", entries
    return entries, socks, entries[0]["port"]


def connect(port: int, clients: list[socket.socket]) -> None:
    """A peer's connection, completed by the kernel (in the backlog), not yet accepted."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    clients.append(sock)


def test_a_connection_waiting_when_the_stop_file_appears_is_counted(
    tmp_path: Path, clients: list[socket.socket]
) -> None:
    entries, socks, port = bound(expect=2)
    connect(port, clients)
    stop_file = tmp_path / nccl_listener.STOP_FILE
    stop_file.touch()  # before serve() ever looked: what a loaded node's scheduler may do
    ended = nccl_listener.serve(entries, socks, time.monotonic() + 60, str(stop_file))
    assert ended == "stop file"
    assert (entries[0]["accepted"], entries[0]["complete"]) == (["127.0.0.1"], False)


def test_a_connection_waiting_at_the_deadline_is_counted(
    tmp_path: Path, clients: list[socket.socket]
) -> None:
    entries, socks, port = bound(expect=2)
    connect(port, clients)
    ended = nccl_listener.serve(entries, socks, time.monotonic() - 1, None)
    assert ended == "timeout"
    assert entries[0]["accepted"] == ["127.0.0.1"]


def test_every_expected_connection_waiting_at_the_stop_is_complete_not_stopped(
    tmp_path: Path, clients: list[socket.socket]
) -> None:
    entries, socks, port = bound(expect=2)
    connect(port, clients)
    connect(port, clients)
    stop_file = tmp_path / nccl_listener.STOP_FILE
    stop_file.touch()
    ended = nccl_listener.serve(entries, socks, time.monotonic() + 60, str(stop_file))
    assert ended == "complete"
    assert (entries[0]["accepted"], entries[0]["complete"]) == (["127.0.0.1"] * 2, True)
    # serve() closed the listening socket: nothing waits on the port any more.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_nothing_waiting_at_the_stop_is_nothing_accepted(tmp_path: Path) -> None:
    entries, socks, _ = bound(expect=1)
    stop_file = tmp_path / nccl_listener.STOP_FILE
    stop_file.touch()
    started = time.monotonic()
    ended = nccl_listener.serve(entries, socks, started + 60, str(stop_file))
    assert ended == "stop file" and entries[0]["accepted"] == []
    assert time.monotonic() - started < 5  # the drain does not wait for connections
