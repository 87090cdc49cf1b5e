# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Pre-flight checks for Ascend NPUs and HCCL, judged on the control machine.

Appended by `nccl_npu_checks_add` to the pre-flight's results (roles/preflight, the judge task),
one result per check and host, from each host's observation: `facts.accelerators`
(src/nccl_preflight/node/accel_facts.py: npu-smi info), `facts.ip_local_port_range`, `python_facts`
(the pre-flight's torch probe: torch and torch_npu versions, torch.npu.is_available()).
Every check is skipped, with the reason, unless the run's backend is hccl.

- npu: NPU chips (npu-smi info) at least the ranks of the host; every chip's Health "OK";
  torch_npu importable by the node's Python, its version made for this torch (torch_npu's
  version starts with torch's X.Y.Z: Ascend/pytorch's release table pairs torch_npu 2.1.0.post8
  with torch 2.1.0), and torch.npu.is_available().
- npu_model: the same chip name and npu-smi (driver) version on every host, then the same NPU
  firmware (npu-smi info -t board: each chip's firmware_version) among the hosts where it was
  read; the odd host fails with the table; a host whose firmware is unknown says why.
- hccl_ports: HCCL's host ports (HCCL_IF_BASE_PORT, default 60000, and the 15 after it; CANN
  environment variable reference) must be reserved (net.ipv4.ip_local_reserved_ports) where they
  fall in the ephemeral range, as CANN asks, so that no outgoing connection takes them first.
- tcp_hccl_port: each host that would use hccl itself listens on HCCL_IF_BASE_PORT during the
  pre-flight (started by the facts call) and its ring peers connect to it like to the ring's
  ephemeral port (probe "hccl"); a firewall that drops it fails naming the host, address and
  port; a peer without an HCCL listener (nccl_backend auto, no Ascend NPU there) is named so.
"""

from __future__ import annotations

from nccl_preflight.core.preflight.result import (
    append_results,
    host_table,
    rank_order,
    reference_value,
    too_few_devices,
)
from nccl_preflight.core.preflight.result import check_result as _result

HCCL_DEFAULT_BASE_PORT = 60000
HCCL_PORTS = 16


def _skip(obs: dict) -> str:
    backend = obs.get("backend") or "unknown"
    return "" if backend == "hccl" else f"the backend is {backend}, no NPU check applies"


def _acc(obs: dict) -> dict:
    return (obs.get("facts") or {}).get("accelerators") or {}


def _release(version: str | None) -> str:
    """'2.13.0+cpu' -> '2.13.0'; '2.1.0.post8' -> '2.1.0'."""
    parts = []
    for part in (version or "").split("+")[0].split("."):
        if not part.isdigit():
            break
        parts.append(part)
    return ".".join(parts[:3])


def _torch_npu_problem(obs: dict, host: str) -> tuple[str, str] | None:
    py = obs.get("python_facts") or (obs.get("facts") or {}).get("python") or {}
    python = obs.get("python") or py.get("executable") or "python"
    probe = f'{python} -c "import torch, torch_npu; print(torch.__version__, torch_npu.__version__, torch.npu.is_available())"  (on {host})'  # noqa: E501
    torch_v, npu_v = py.get("torch_version"), py.get("npu_version")
    if not torch_v:
        return f"{host}: torch is not importable by {python}: {py.get('reason') or '?'}", probe
    if not npu_v:
        why = py.get("reason") or "import torch_npu failed"
        return f"{host}: torch_npu is not importable by {python} ({why})", probe
    if _release(npu_v) != _release(torch_v):
        return (
            f"{host}: torch_npu {npu_v} is not made for torch {torch_v} (torch_npu's version "
            f"starts with the torch version it was built for)",
            probe + "; install the torch_npu release for this torch",
        )
    if not py.get("npu_available"):
        why = py.get("reason") or "torch.npu.is_available() is False"
        return f"{host}: torch_npu {npu_v} sees no NPU: {why}", probe
    return None


def check_npu(obs: dict, host: str) -> dict:
    skip = _skip(obs)
    if skip:
        return _result("npu", host, "skipped", f"{host}: {skip}")
    acc = _acc(obs)
    chips = acc.get("npus") or []
    if not chips:
        reason = acc.get("npus_reason") or "npu-smi info lists no NPU"
        hint = f"npu-smi info  (on {host}); install/load the Ascend driver"
        return _result("npu", host, "failed", f"{host}: no NPU found: {reason}", hint)
    want = int(obs.get("nproc_per_node") or 1)
    few = too_few_devices("npu", host, len(chips), want, ("NPU chips", "NPU", "npu-smi info"))
    if few:
        return few
    sick = [c for c in chips if str(c.get("health")) != "OK"]
    if sick:
        names = ", ".join(
            f"NPU {c.get('npu')} chip {c.get('chip')} ({c.get('bus_id')}): {c.get('health')}"
            for c in sick
        )
        hint = f"npu-smi info -t health -i <NPU>  (on {host})"
        return _result("npu", host, "failed", f"{host}: unhealthy NPU chips: {names}", hint)
    problem = _torch_npu_problem(obs, host)
    if problem:
        return _result("npu", host, "failed", *problem)
    names = ", ".join(sorted({str(c.get("name")) for c in chips}))
    return _result(
        "npu", host, "passed", f"{host}: {len(chips)} NPU chips ({names}) for {want} ranks"
    )


def _model(obs: dict) -> str | None:
    acc = _acc(obs)
    chips = acc.get("npus") or []
    if not chips:
        return None
    names = " + ".join(sorted({str(c.get("name")) for c in chips}))
    return f"{names}, npu-smi {acc.get('npu_smi_version') or 'unknown'}"


def _firmware(obs: dict) -> str | None:
    """'7.1.0.7.220' (or 'a + b' on a host of mixed cards); None when any chip's is unknown."""
    chips = _acc(obs).get("npus") or []
    versions = [c.get("firmware_version") for c in chips]
    if not chips or any(not v for v in versions):
        return None
    return " + ".join(sorted({str(v) for v in versions}))


def _odd_one(
    host: str, what: str, values: dict[str, str], mine: str, hint: str
) -> tuple[str, str, str] | None:
    """None when mine is the most common value, else (status, message, hint) with the table.
    ``values`` is in rank order: a tie goes to the earliest host."""
    order = list(values)
    ref = reference_value(values, order)
    if mine == ref:
        return None
    rows = host_table(values, order)
    message = f"{host}: {what} {mine} differ from the other hosts ({ref}); host -> NPU:\n{rows}"
    return "failed", message, hint


def check_npu_model(observations: dict, host: str, order: list[str]) -> dict:
    obs = observations[host]
    skip = _skip(obs)
    if skip:
        return _result("npu_model", host, "skipped", f"{host}: {skip}")
    mine = _model(obs)
    if mine is None:
        return _result("npu_model", host, "skipped", f"{host}: no NPU to compare (see check npu)")
    values = {h: m for h in order if (m := _model(observations.get(h) or {})) is not None}
    hint = "npu-smi info  (on every host); run on hosts with one NPU model and driver"
    odd = _odd_one(host, "NPU model and driver", values, mine, hint)
    if odd:
        return _result("npu_model", host, *odd)
    firmware = _firmware(obs)
    if firmware is None:
        why = _acc(obs).get("npu_firmware_reason") or "not read"
        return _result(
            "npu_model",
            host,
            "passed",
            f"{host}: {mine}, like the other hosts; firmware unknown: {why}",
        )
    known = {h: f for h in order if (f := _firmware(observations.get(h) or {})) is not None}
    hint = (
        "npu-smi info -t board -i <NPU>  (on every host); upgrade the NPU firmware to one "
        "version (Ascend-hdk-*-npu-firmware) on every host"
    )
    odd = _odd_one(host, "NPU firmware", known, firmware, hint)
    if odd:
        return _result("npu_model", host, *odd)
    return _result(
        "npu_model", host, "passed", f"{host}: {mine}, firmware {firmware}, like the other hosts"
    )


def _ranges(text: str) -> list[tuple[int, int]]:
    """'60000-60015,8080' -> [(60000, 60015), (8080, 8080)]; bad parts are ignored."""
    out = []
    for part in (text or "").replace(" ", "").split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.append((int(lo), int(hi or lo)))
    return out


def nccl_hccl_base_port(extra_env: dict | None) -> int:
    """HCCL_IF_BASE_PORT of nccl_extra_env, else HCCL's default 60000."""
    text = str((extra_env or {}).get("HCCL_IF_BASE_PORT") or HCCL_DEFAULT_BASE_PORT)
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else HCCL_DEFAULT_BASE_PORT


def no_hccl_listener(peer: str, peer_obs: dict | None) -> str:
    """Why ``peer`` holds no HCCL listener, or "" when it does (or its listeners are unknown).

    The facts call starts the listener only where the node would use hccl itself (docs/design.md,
    "Pre-flight on the nodes"): with nccl_backend auto, a node without Ascend NPUs has none."""
    listed = ((peer_obs or {}).get("listeners") or {}).get("listeners")
    if not listed or any(e.get("name") == "hccl" for e in listed):
        return ""
    acc = _acc(peer_obs or {})
    if (peer_obs or {}).get("facts", {}).get("gpus"):
        why = "it found NVIDIA GPUs and would use nccl"
    elif not acc.get("npus"):
        why = "it found no Ascend NPU and would not use hccl"
    else:
        why = "it would not use hccl"
    return f"{peer} has no HCCL listener: {why}; see backend_choice"


def check_tcp_hccl_port(obs: dict, host: str, observations: dict | None = None) -> dict:
    """This host's TCP probes of its ring peers' HCCL port (listener 'hccl', same as tcp_ring);
    a failed probe of a peer without an HCCL listener says so (:func:`no_hccl_listener`)."""
    skip = _skip(obs)
    if skip:
        return _result("tcp_hccl_port", host, "skipped", f"{host}: {skip}")
    probes = [p for p in obs.get("probes") or [] if p.get("name") == "hccl"]
    if not probes:
        skip_of = obs.get("probe_skip") or {}
        # hccl's own reason, else the ring's (check mode, a single host): probed alike
        why = skip_of.get("hccl") or skip_of.get("ring") or "no probe ran"
        return _result("tcp_hccl_port", host, "skipped", f"{host}: HCCL's port not tested: {why}")
    bad = [p for p in probes if not p.get("ok")]
    if not bad:
        done = ", ".join(f"{p['host']} {p['address']}:{p['port']}" for p in probes)
        return _result(
            "tcp_hccl_port",
            host,
            "passed",
            f"{host}: connected over TCP to HCCL's port (HCCL_IF_BASE_PORT) of {done}",
        )
    dropped = {"timeout": ": packets are dropped (a firewall on the peer or in between)"}
    observations = observations or {}
    missing = {p["host"]: no_hccl_listener(p["host"], observations.get(p["host"])) for p in bad}
    lines = [
        f"{host}: cannot open TCP to {p['host']} at {p['address']}:{p['port']} (HCCL's host "
        f"port, HCCL_IF_BASE_PORT {p['port']}) from {p.get('source') or 'the default address'}: "
        f"{p.get('error')}{dropped.get(str(p.get('error_kind')), '')}"
        + (f"; {missing[p['host']]}" if missing[p["host"]] else "")
        for p in bad
    ]
    hints = [
        f"nc -zv {p['address']} {p['port']}  (on {host}); allow TCP port {p['port']} from the "
        f"peers on {p['host']} (see its firewall check), or set HCCL_IF_BASE_PORT in "
        "nccl_extra_env to a port the firewall lets through"
        for p in bad
    ]
    return _result("tcp_hccl_port", host, "failed", "; ".join(lines), "; ".join(hints))


def check_hccl_ports(obs: dict, host: str, extra_env: dict) -> dict:
    skip = _skip(obs)
    if skip:
        return _result("hccl_ports", host, "skipped", f"{host}: {skip}")
    base = nccl_hccl_base_port(extra_env)
    first, last = base, base + HCCL_PORTS - 1
    where = f"HCCL's host ports {first}-{last} (HCCL_IF_BASE_PORT {base})"
    facts = obs.get("facts") or {}
    ephemeral = facts.get("ip_local_port_range") or []
    if len(ephemeral) != 2:
        return _result("hccl_ports", host, "skipped", f"{host}: {where}: ephemeral range unknown")
    lo, hi = int(ephemeral[0]), int(ephemeral[1])
    if last < lo or first > hi:
        return _result(
            "hccl_ports", host, "passed", f"{host}: {where} are outside the ephemeral {lo}-{hi}"
        )
    reserved = _ranges(_acc(obs).get("ip_local_reserved_ports") or "")
    free = [p for p in range(first, last + 1) if lo <= p <= hi]
    unreserved = [p for p in free if not any(a <= p <= b for a, b in reserved)]
    if not unreserved:
        return _result("hccl_ports", host, "passed", f"{host}: {where} are reserved")
    return _result(
        "hccl_ports",
        host,
        "failed",
        f"{host}: {where}: {len(unreserved)} of them lie in the ephemeral range {lo}-{hi} and "
        "are not reserved, so an outgoing connection can take one before HCCL binds it",
        f"sysctl -w net.ipv4.ip_local_reserved_ports={first}-{last}  (on {host}; CANN's "
        "HCCL_IF_BASE_PORT reference), or set HCCL_IF_BASE_PORT in nccl_extra_env outside it",
    )


def nccl_npu_checks_add(
    results_by_host: dict[str, list[dict] | None],
    observations: dict[str, dict],
    settings: dict | None = None,
) -> dict[str, list[dict] | None]:
    """results_by_host with npu, npu_model and hccl_ports appended; None stays None."""
    settings = settings or {}
    order = rank_order(observations, settings)
    extra = settings.get("extra_env_by_host") or {}

    def checks(host: str) -> list[dict]:
        obs = {**(observations.get(host) or {}), "host": host}
        return [
            check_npu(obs, host),
            check_npu_model(observations, host, order),
            check_hccl_ports(obs, host, extra.get(host) or settings.get("extra_env") or {}),
            check_tcp_hccl_port(obs, host, observations),
        ]

    return append_results(results_by_host, checks)
