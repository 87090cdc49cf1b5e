# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# Sourced by the device scripts (record_h100.sh, record_warm.sh): `stage NAME SECONDS CMD...` runs
# CMD bounded by `timeout`, appends its rc and wall time to $STAGES, then calls after_stage when
# the script defines one (record_h100.sh tars what a killed stage left).
stage() {
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s%N)
    timeout -k 10 "$limit" "$@"
    rc=$?
    echo "$name rc=$rc $((($(date +%s%N) - start) / 1000000)) ms" >>"$STAGES"
    if declare -F after_stage >/dev/null; then after_stage; fi
}
