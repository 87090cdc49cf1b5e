#!/usr/bin/env bash
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# On a lent GPU machine: the support table's gloo row for GPU tensors, called for real: the rank
# zipapp (.device-carry/nccl_check.pyz) with --backend gloo --device cuda, two ranks on the one
# GPU (--local-rank 0: gloo minds no shared device), correctness only, in float32 and int32.
# $OUT gets gloo-cuda.tar.gz: per type both ranks' JSON, the run's stdout/stderr and rc.
# Usage: OUT=/tmp/x bash tests/device/gloo_cuda_gpu.sh
set -u
OUT=${OUT:?set OUT}
PY=${PY:-python3}
R="$OUT/gloo-cuda"
mkdir -p "$R"
for dtype in float32 int32; do
    mkdir -p "$R/$dtype"
    timeout -k 10 120 "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 \
        .device-carry/nccl_check.pyz --backend gloo --device cuda --local-rank 0 \
        --tests correctness --dtype "$dtype" --out-dir "$R/$dtype" --timeout 60 \
        >"$R/$dtype/out.txt" 2>"$R/$dtype/err.txt"
    echo $? >"$R/$dtype/rc"
done
tar -C "$OUT" -czf "$OUT/gloo-cuda.tar.gz" gloo-cuda && rm -rf "$R"
