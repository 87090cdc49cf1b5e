#!/usr/bin/env bash
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# Record what no fixture can invent, on a real GPU machine (one GPU is enough), into $OUT:
# the raw inputs the node room parses (nvidia-smi -q, topo -m, nvlink -s, the --query-gpu CSV,
# the torch probe), what the node readers make of them, and the rank script run with the nccl
# backend under torchrun (world size 1) with NCCL_DEBUG=INFO: its log and rank JSON.
# Usage (repository root): OUT=/tmp/rec bash tests/device/record_gpu.sh
# Nothing is installed; everything is written under $OUT (one tarball: rec.tar.gz).
set -u
OUT=${OUT:?set OUT}
R="$OUT/rec"
mkdir -p "$R"
PY=${PY:-python3}
cap() { # cap NAME CMD... : stdout, stderr and rc of CMD into $R/NAME.{out,err,rc}
    local name=$1; shift
    timeout -k 5 60 "$@" >"$R/$name.out" 2>"$R/$name.err"; echo $? >"$R/$name.rc"
}
{ date -u; uname -a; cat /etc/os-release 2>/dev/null | head -3; nproc; } >"$R/machine.txt" 2>&1
cap smi nvidia-smi
cap smi-q nvidia-smi -q
cap smi-topo nvidia-smi topo -m
cap smi-nvlink nvidia-smi nvlink -s
cap smi-csv nvidia-smi --query-gpu=index,name,driver_version,memory.total,uuid,pci.bus_id --format=csv,noheader,nounits
cap driver-version cat /proc/driver/nvidia/version
cap modules grep -E '^(nvidia|nvidia_peermem|nv_peer_mem|ib_|mlx)' /proc/modules
cap ib-sysfs ls -la /sys/class/infiniband
cap ip-addr ip -j addr show
cap ulimit-l bash -c 'ulimit -l; ulimit -n'
cap nccl-conf cat /etc/nccl.conf
cap dmesg dmesg
cap torch-import-time bash -c "time $PY -c 'import torch'"
PYTHONPATH=src cap probe "$PY" -c "from nccl_preflight.node.parse import PYTHON_PROBE; exec(PYTHON_PROBE)"
PYTHONPATH=src cap node-readers "$PY" tests/device/node_readers.py
# The rank script, nccl backend, one GPU: every collective verified, then the sweep.
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV
mkdir -p "$R/run"
timeout -k 10 240 "$PY" -m torch.distributed.run --standalone --nproc-per-node 1 files/nccl_check.py \
    --backend nccl --verbose --out-dir "$R/run" --timeout 60 >"$R/nccl-check.out" 2>"$R/nccl-check.err"
echo $? >"$R/nccl-check.rc"
# Two ranks on one GPU: what NCCL and the rank script say (a layout mistake users make).
mkdir -p "$R/run-dup"
timeout -k 10 90 "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 files/nccl_check.py \
    --backend nccl --device cuda --local-rank 0 --tests correctness --out-dir "$R/run-dup" --timeout 30 \
    >"$R/nccl-check-dup.out" 2>"$R/nccl-check-dup.err"
echo $? >"$R/nccl-check-dup.rc"
tar -C "$OUT" -czf "$OUT/rec.tar.gz" rec && rm -rf "$R"
ls -la "$OUT"
