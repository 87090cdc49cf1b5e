#!/usr/bin/env bash
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# On a lent GPU machine: what needs two ranks and so no nccl run on one GPU can show, on CUDA
# tensors through gloo (two ranks on the one GPU, --local-rank 0): the bandwidth sweep of every
# collective to 16 MiB, and the pairwise rounds (two torchrun agents as two nodes). $OUT gets gloo-sweep.tar.gz: both ranks' JSON,
# stdout/stderr and rc of each run. Usage: OUT=/tmp/x bash tests/device/gloo_cuda_sweep_gpu.sh
set -u
OUT=${OUT:?set OUT}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
R="$OUT/gloo-sweep"
run() { # run NAME ARGS...: the rank zipapp under torchrun, two ranks, gloo on $DEVICE
    local name=$1
    shift
    mkdir -p "$R/$name"
    timeout -k 10 150 "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 \
        .device-carry/nccl_check.pyz --backend gloo --device "$DEVICE" --local-rank 0 \
        --out-dir "$R/$name" --timeout 120 "$@" >"$R/$name/out.txt" 2>"$R/$name/err.txt"
    echo $? >"$R/$name/rc"
}
[ "${1:-}" = pairwise ] || run bandwidth --tests bandwidth --max-bytes 16M
# The pairwise rounds pair nodes: two torchrun agents here, one rank each, as two nodes.
mkdir -p "$R/pairwise"
for node in 0 1; do
    timeout -k 10 150 "$PY" -m torch.distributed.run --nnodes 2 --node-rank "$node" \
        --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29761 --local-addr 127.0.0.1 \
        .device-carry/nccl_check.pyz --backend gloo --device "$DEVICE" --local-rank 0 \
        --out-dir "$R/pairwise" --timeout 120 --tests barrier --pairwise always \
        --ranks-per-node 1,1 >"$R/pairwise/out-$node.txt" 2>"$R/pairwise/err-$node.txt" &
done
wait
tar -C "$OUT" -czf "$OUT/gloo-sweep.tar.gz" gloo-sweep && rm -rf "$R"
