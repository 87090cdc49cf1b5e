#!/usr/bin/env bash
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# On a lent GPU machine: node-check from the node bundle (bin/nccl-preflight bundle -o
# .device-carry/nccl-preflight.pyz) with the machine's own python3, timed; every fact the node
# room gathers without Ansible (node/facts.py); the rank script as the Ansible path ships it (one
# zipapp, .device-carry/nccl_check.pyz) under torchrun with the nccl backend, bandwidth sweep to
# 256 MiB. Everything lands in $OUT/rec2.tar.gz. Usage: OUT=/tmp/x bash tests/device/node_check_gpu.sh
set -u
OUT=${OUT:?set OUT}
R="$OUT/rec2"
mkdir -p "$R"
PY=${PY:-python3}
C=.device-carry
for i in 1 2 3; do  # three timed runs (the first pays the cold caches)
    /usr/bin/time -f "%e s wall, %U s user" -o "$R/node-check-time-$i.txt" \
        "$PY" "$C/nccl-preflight.pyz" node-check --config tests/device/gpu-node.yml \
        >"$R/node-check-$i.out" 2>"$R/node-check-$i.err"
    echo $? >"$R/node-check-$i.rc"
done
"$PY" "$C/nccl-preflight.pyz" node-check --config tests/device/gpu-node.yml --json \
    >"$R/node-check.json" 2>"$R/node-check-json.err"
PYTHONPATH=src timeout 120 "$PY" - >"$R/facts.json" 2>"$R/facts.err" <<'PYEOF'
import json
from nccl_preflight.node.facts import gather
from nccl_preflight.node.runner import SubprocessRunner
print(json.dumps(gather(SubprocessRunner(timeout=60), {"python": "python3", "query_python": True}), indent=1, default=str))
PYEOF
mkdir -p "$R/run"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET timeout -k 10 200 "$PY" -m torch.distributed.run \
    --standalone --nproc-per-node 1 "$C/nccl_check.pyz" --backend nccl --out-dir "$R/run" \
    --timeout 60 --max-bytes 256M >"$R/zipapp-run.out" 2>"$R/zipapp-run.err"
echo $? >"$R/zipapp-run.rc"
tar -C "$OUT" -czf "$OUT/rec2.tar.gz" rec2 && rm -rf "$R"
