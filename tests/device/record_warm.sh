#!/usr/bin/env bash
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# One device call for the warm start on a GPU (tests/device/warm_gpu.py): the held torch probe
# becoming torchrun with the nccl backend, warm and cold alternating (correctness only, three
# turns, then the whole rank script once each), nvidia-smi's compute processes meanwhile; then
# node_check_gpu.sh (node-check, the facts, the rank zipapp) on the same machine. Needs
# .device-carry (bin/nccl-preflight bundle -o .device-carry/nccl-preflight.pyz and the rank
# zipapp, as record_h100.sh --stage builds them). $OUT gets warm.tar.gz, rec2.tar.gz, stages.txt.
# Usage: OUT=/tmp/x bash tests/device/record_warm.sh
set -u
OUT=${OUT:?set OUT}
PY=${PY:-python3}
STAGES="$OUT/stages.txt"
: >"$STAGES"
# shellcheck source=tests/device/stage.sh
. "$(dirname "$0")/stage.sh"
W="$OUT/warm"
mkdir -p "$W"
{ nvidia-smi -L; "$PY" --version; "$PY" -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'; } \
    >"$W/machine.txt" 2>&1
export PYTHONPATH=src
stage warm_correctness 150 "$PY" tests/device/warm_gpu.py .device-carry/nccl_check.pyz "$W/correctness" \
    --python "$PY" --turns 3 >"$W/correctness.out" 2>"$W/correctness.err"
stage warm_full 120 "$PY" tests/device/warm_gpu.py .device-carry/nccl_check.pyz "$W/full" \
    --python "$PY" --turns 1 --full >"$W/full.out" 2>"$W/full.err"
tar -C "$OUT" -czf "$OUT/warm.tar.gz" warm && rm -rf "$W"
stage node_check_gpu 100 bash tests/device/node_check_gpu.sh
[ -d "$OUT/rec2" ] && tar -C "$OUT" -czf "$OUT/rec2-partial.tar.gz" rec2 && rm -rf "$OUT/rec2"
ls -la "$OUT"
cat "$STAGES"
