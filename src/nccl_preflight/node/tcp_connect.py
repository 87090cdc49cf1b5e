# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's TCP probe of a planned peer, on the node (docs/design.md, "Pre-flight on the
nodes"): library/nccl_preflight_observe.py's ``targets`` and the Slurm step's observe
(src/nccl_preflight/slurm/node_step.py) both run it. Standard library only.

Not the stall's probe (run_progress.tcp_probe): there a refused connection already says that the
peer's TCP stack answers; here a refusal is retried for a while, since the peer's listener may
bind a moment after this node probes it.
"""

from __future__ import annotations

import errno
import socket
import time

# What a failed connect() says about the path, by errno (the `tcp_*` checks word each kind:
# src/nccl_preflight/core/preflight/host_checks.py).
ERROR_KINDS = {
    errno.ECONNREFUSED: "refused",
    errno.EHOSTUNREACH: "unreachable",
    errno.ENETUNREACH: "unreachable",
    errno.EADDRNOTAVAIL: "source",
}


def tcp_connect(address: str, port: int, source: str, timeout: float, refused_retry: float) -> dict:
    """One connection attempt from ``source`` (none: any address), retried every 0.2 s while
    refused for up to ``refused_retry`` seconds. Returns {ok, error, error_kind (refused,
    unreachable, source, timeout, error; "" when ok), elapsed_ms}."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    start = time.monotonic()
    retry_until = start + refused_retry
    while True:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            if source:
                sock.bind((source, 0))
            sock.connect((address, port))
            ok, error, kind = True, "", ""
        except TimeoutError:
            ok, error, kind = False, f"timed out after {timeout:g} s", "timeout"
        except OSError as exc:
            ok, error = False, exc.strerror or str(exc)
            kind = ERROR_KINDS.get(exc.errno or 0, "error")
        finally:
            sock.close()
        if ok or kind != "refused" or time.monotonic() >= retry_until:
            break
        time.sleep(0.2)
    return {
        "ok": ok,
        "error": error,
        "error_kind": kind,
        "elapsed_ms": int((time.monotonic() - start) * 1000),
    }
