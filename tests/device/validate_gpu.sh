#!/usr/bin/env bash
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# On a lent GPU machine: the whole validate.yml on the machine itself (tests/device/gpu-inventory:
# localhost over Ansible's local connection, nccl_backend auto), run by the machine's own python3
# (torch with CUDA) with ansible-core and junit-xml carried as pure-Python packages in
# .device-carry/site (copied from the control machine's venv: ansible, resolvelib, junit_xml);
# First as the machine is: its hostname resolves to 127.0.0.1 there, which the pre-flight failed
# (check hostname) before e506bce, stopping the run before the launch; a run of one host now
# only warns of it (TURNS=0 runs only this). Then, with /etc/hosts mapping the
# hostname to eth0's address (the fix the report prints; the file is restored at the end: the
# machine is the test bed, not the validator), torchrun by hand with the same rank script and
# validate.yml, alternating, for the overhead on a GPU node.
# $OUT gets validate.tar.gz (each run's log and the report directories) and times.txt.
# Usage: OUT=/tmp/x bash tests/device/validate_gpu.sh [TURNS]
set -u
OUT=${OUT:?set OUT}
TURNS=${1:-2}
PY=${PY:-python3}
W="$OUT/validate"
mkdir -p "$W"
export PYTHONPATH="$PWD/.device-carry/site:$PWD/src" ANSIBLE_CONFIG="$PWD/ansible.cfg"
export LC_ALL=C.UTF-8 PYTHONUNBUFFERED=1
PLAYBOOK='import sys; from ansible.cli.playbook import main; sys.argv[0] = "ansible-playbook"; sys.exit(main())'
now() { date +%s%N; }
playbook() {  # playbook NAME: one validate.yml run, timed
    local start
    start=$(now)
    timeout -k 10 300 "$PY" -c "$PLAYBOOK" playbooks/validate.yml -i tests/device/gpu-inventory \
        >"$W/validate-$1.log" 2>&1
    echo "turn $1 validate.yml rc=$? $((($(now) - start) / 1000000)) ms" >>"$OUT/times.txt"
}
playbook as-is
cp /etc/hosts "$W/etc-hosts.orig"
address=$("$PY" -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("192.0.2.200", 9)); print(s.getsockname()[0])')
printf '127.0.0.1 localhost\n%s %s\n' "$address" "$(hostname)" >/etc/hosts
for turn in $(seq 1 "$TURNS"); do
    start=$(now)
    NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=eth0 timeout -k 10 240 "$PY" -m torch.distributed.run \
        --standalone --nproc-per-node 1 files/nccl_check.py --backend nccl \
        --out-dir "$W/hand-$turn" --timeout 150 >"$W/hand-$turn.log" 2>&1
    echo "turn $turn by hand rc=$? $((($(now) - start) / 1000000)) ms" >>"$OUT/times.txt"
    playbook "$turn"
done
cp "$W/etc-hosts.orig" /etc/hosts
cp -r reports "$W/reports" 2>/dev/null
tar -C "$OUT" -czf "$OUT/validate.tar.gz" validate && rm -rf "$W"
cat "$OUT/times.txt"
