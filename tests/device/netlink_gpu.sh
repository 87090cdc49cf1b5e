#!/usr/bin/env bash
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
# On a lent GPU machine without iproute2: what node/netlink.py reads of its kernel (every
# interface, and the route to each of its own IPv4 addresses: no packet leaves), beside what
# sysfs says of the same interfaces; then node_check_gpu.sh (node-check, the facts, the rank
# zipapp) with this tree's bundle (.device-carry, as record_h100.sh --stage builds it).
# $OUT gets nl.tar.gz and rec2.tar.gz. Usage: OUT=/tmp/x bash tests/device/netlink_gpu.sh
set -u
OUT=${OUT:?set OUT}
PY=${PY:-python3}
R="$OUT/nl"
mkdir -p "$R"
{ command -v ip || echo "no ip on PATH"; ls /usr/sbin/ip /sbin/ip 2>&1; } >"$R/which-ip.txt"
for i in /sys/class/net/*; do
    echo "${i##*/} $(cat "$i/operstate") $(cat "$i/mtu") $(grep DEVTYPE "$i/uevent")"
done >"$R/sys-class-net.txt"
PYTHONPATH=src timeout 60 "$PY" - >"$R/netlink.json" 2>"$R/netlink.err" <<'PYEOF'
import json
from nccl_preflight.node import netlink
interfaces = netlink.interfaces()
routes = {a["address"]: netlink.route_get(a["address"])
          for i in interfaces.values() for a in i["ipv4"]}
print(json.dumps({"interfaces": interfaces, "routes": routes}, indent=1))
PYEOF
echo $? >"$R/netlink.rc"
tar -C "$OUT" -czf "$OUT/nl.tar.gz" nl && rm -rf "$R"
timeout -k 10 120 bash tests/device/node_check_gpu.sh
ls -la "$OUT"
