#!/usr/bin/env bash
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# On a lent GPU machine: the pre-flight's observation as the Ansible action sends it (a zipapp of
# node/observe_call.py on stdin through core/stdin_ship.py's BOOT, the options after it as one
# JSON line), run with the machine's own python3: TCP to a listener on loopback and to a port
# nobody listens on, the firewall read for MASTER_PORT and the ephemeral range on lo. Records the
# answer, the Python, the CPU seconds and what BOOT left in /tmp (nothing is expected).
# $OUT gets observe.json, observe.err, observe.txt. Usage: OUT=/tmp/x bash tests/device/observe_gpu.sh
set -u
OUT=${OUT:?set OUT}
PY=${PY:-python3}
OPEN_PORT=29577
CLOSED_PORT=29578
"$PY" -c "import socket, time
s = socket.socket(); s.bind(('127.0.0.1', $OPEN_PORT)); s.listen(8); time.sleep(60)" &
LISTENER=$!
sleep 1
PYTHONPATH=src "$PY" - "$OUT/stream.bin" "$OPEN_PORT" "$CLOSED_PORT" <<'PYEOF'
import sys
from pathlib import Path
from nccl_preflight.core.stdin_ship import program_stream, program_zipapp
from nccl_preflight.node.observe_call import OBSERVE_ENTRY
low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
params = {
    "targets": [
        {"name": "master", "host": "self", "address": "127.0.0.1", "port": int(sys.argv[2])},
        {"name": "ring", "host": "self", "address": "127.0.0.1", "port": int(sys.argv[3])},
    ],
    "source": "127.0.0.1", "timeout": 2.0, "refused_retry": 0.0,
    "firewall": {
        "peers": ["127.0.0.1"], "address": "127.0.0.1", "ifname": "lo",
        "ports": [{"label": "MASTER_PORT", "low": int(sys.argv[2]), "high": None},
                  {"label": "ephemeral range", "low": low, "high": high}],
    },
    "collect": None,
}
request = {"params": params, "check_mode": False}
Path(sys.argv[1]).write_bytes(program_stream(program_zipapp(OBSERVE_ENTRY, None), request))
PYEOF
BOOT=$(PYTHONPATH=src "$PY" -c "from nccl_preflight.core.stdin_ship import BOOT; print(BOOT)")
{
    echo "python: $("$PY" -c 'import sys; print(sys.version.split()[0], sys.executable)')"
    echo "host: $(hostname), uid $(id -u)"
    echo "before: $(ls -d /tmp/nccl-preflight-devrun-* 2>/dev/null | wc -l) BOOT directories"
} >"$OUT/observe.txt"
start=$(date +%s%N)
"$PY" - "$BOOT" "$OUT/stream.bin" >"$OUT/observe.json" 2>"$OUT/observe.err" <<'PYEOF'
import resource, subprocess, sys
with open(sys.argv[2], "rb") as stream:
    done = subprocess.run([sys.executable, "-c", sys.argv[1], "devrun", "observe"], stdin=stream)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"rc {done.returncode}, CPU {usage.ru_utime + usage.ru_stime:.3f} s", file=sys.stderr)
PYEOF
{
    echo "wall: $((($(date +%s%N) - start) / 1000000)) ms"
    echo "after: $(ls -d /tmp/nccl-preflight-devrun-* 2>/dev/null | wc -l) BOOT directories"
} >>"$OUT/observe.txt"
kill "$LISTENER" 2>/dev/null
rm -f "$OUT/stream.bin"
cat "$OUT/observe.txt" "$OUT/observe.err"
