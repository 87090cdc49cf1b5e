#!/usr/bin/env bash
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# On a lent GPU machine: the rank zipapp (.device-carry/nccl_check.pyz) with the nccl backend,
# world size 1, every collective's correctness in each element type the script offers (what NCCL
# does with AVG or PRODUCT on an integer or a bfloat16, no recording says). $OUT gets
# dtypes.tar.gz: per type its rank-0.json, the run's stdout/stderr and rc.
# Usage: OUT=/tmp/x bash tests/device/dtypes_gpu.sh [BACKEND]   (BACKEND: nccl, or gloo here)
set -u
OUT=${OUT:?set OUT}
PY=${PY:-python3}
BACKEND=${1:-nccl}
R="$OUT/dtypes"
mkdir -p "$R"
for dtype in float32 float64 float16 bfloat16 int32 int64 int8 uint8; do
    mkdir -p "$R/$dtype"
    timeout -k 10 90 "$PY" -m torch.distributed.run --standalone --nproc-per-node 1 \
        .device-carry/nccl_check.pyz --backend "$BACKEND" --tests correctness --dtype "$dtype" \
        --out-dir "$R/$dtype" --timeout 60 >"$R/$dtype/out.txt" 2>"$R/$dtype/err.txt"
    echo $? >"$R/$dtype/rc"
done
tar -C "$OUT" -czf "$OUT/dtypes.tar.gz" dtypes && rm -rf "$R"
