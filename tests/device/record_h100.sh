#!/usr/bin/env bash
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# Everything one lent GPU machine can tell, in one device call: record_gpu.sh (nvidia-smi,
# the readers, the rank script with nccl), node_check_gpu.sh (node-check timed three times, the
# facts, the rank zipapp), then what the card itself is (nvidia-smi -q -x, NVLink capabilities
# and error counters, the NVIDIA PCI functions, the fabric manager, torch's device properties,
# NCCL's own topology dump and GRAPH log of one rank). Each stage is bounded and tarred apart, so
# a stage that hangs costs its own files only: $OUT gets rec.tar.gz, rec2.tar.gz, rec3.tar.gz,
# stages.txt (seconds per stage) - at most 8 files come back from a device call.
#
# The device call sends the session's checkout, not a helper's worktree: stage this tree first,
#   bash tests/device/record_h100.sh --stage .device-carry/h100   (then the same in that checkout)
# and run it from the staged copy (carry .device-carry/h100):
#   cd .device-carry/h100 && OUT=$OUT bash tests/device/record_h100.sh
set -u
HERE=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = --stage ]; then  # copy what the recordings need (links resolved) into $2
    DEST=${2:?--stage DIR}
    rm -rf "$DEST" && mkdir -p "$DEST/tests" "$DEST/.device-carry"
    (cd "$HERE" && tar --exclude=__pycache__ -chf - src/nccl_preflight files tests/device) |
        tar -C "$DEST" -xf -
    PYTHONPATH="$HERE/src" "${PYTHON:-python3}" "$HERE/bin/nccl-preflight" bundle \
        -o "$DEST/.device-carry/nccl-preflight.pyz" &&
        PYTHONPATH="$HERE/src" "${PYTHON:-python3}" "$HERE/src/nccl_preflight/core/zipapp.py" \
            "$HERE/files/nccl_check.py" -o "$DEST/.device-carry/nccl_check.pyz"
    exit
fi
OUT=${OUT:?set OUT}
cd "$HERE" || exit 1
export OUT PY=${PY:-python3}
STAGES="$OUT/stages.txt"
# shellcheck source=tests/device/stage.sh
. "$HERE/tests/device/stage.sh"
after_stage() { # a stage killed before its own tar leaves a folder: tar it, or its files would not come back
    for dir in rec rec2 rec3; do
        if [ -d "$OUT/$dir" ]; then
            tar -C "$OUT" -czf "$OUT/$dir-partial.tar.gz" "$dir" && rm -rf "${OUT:?}/$dir"
        fi
    done
}
if [ "${1:-}" = --extras ]; then
    R="$OUT/rec3"
    mkdir -p "$R"
    cap() { timeout -k 5 30 "${@:2}" >"$R/$1.out" 2>"$R/$1.err"; echo $? >"$R/$1.rc"; }
    smi=nvidia-smi
    cap smi-q-xml "$smi" -q -x
    cap smi-nvlink-c "$smi" nvlink -c
    cap smi-nvlink-e "$smi" nvlink -e
    cap smi-topo-p2p "$smi" topo -p2p r
    cap smi-fabric "$smi" -q -d FABRIC
    cap smi-power "$smi" --query-gpu=name,pci.device_id,pci.sub_device_id,power.max_limit,clocks.max.sm,clocks.max.mem --format=csv
    cap pci-nvidia bash -c 'for d in /sys/bus/pci/devices/*; do
        [ "$(cat "$d/vendor")" = 0x10de ] && echo "${d##*/} $(cat "$d/device") $(cat "$d/class")"; done'
    cap fabricmanager bash -c 'systemctl is-active nvidia-fabricmanager; command -v nv-fabricmanager'
    cap net-ifaces bash -c 'for i in /sys/class/net/*; do echo "${i##*/} $(cat "$i/operstate") $(cat "$i/mtu")"; done'
    cap hostname bash -c 'hostname; getent hosts "$(hostname)"'
    cap torch-device "$PY" -c 'import torch; p = torch.cuda.get_device_properties(0); print(p); print(torch.cuda.nccl.version())'
    mkdir -p "$R/run"
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,NET NCCL_TOPO_DUMP_FILE="$R/nccl-topo.xml" \
        timeout -k 10 90 "$PY" -m torch.distributed.run --standalone --nproc-per-node 1 \
        files/nccl_check.py --backend nccl --tests correctness --out-dir "$R/run" --timeout 60 \
        >"$R/nccl-graph.out" 2>"$R/nccl-graph.err"
    echo $? >"$R/nccl-graph.rc"
    tar -C "$OUT" -czf "$OUT/rec3.tar.gz" rec3 && rm -rf "$R"
    exit
fi
: >"$STAGES"
stage record_gpu 130 bash tests/device/record_gpu.sh
stage node_check_gpu 100 bash tests/device/node_check_gpu.sh
stage extras 80 bash "$HERE/tests/device/record_h100.sh" --extras
ls -la "$OUT"
cat "$STAGES"
