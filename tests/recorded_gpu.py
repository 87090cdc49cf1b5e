# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One recorded GPU machine's fixtures, as the project's code reads them: the recordings of a lent
GPU VM (tests/device/record_gpu.sh, node_check_gpu.sh, record_h100.sh; tests/fixtures/README.md,
"Recorded on a GPU machine") named by its tag (``h200-vm``, ``h100-vm``). Shared by
tests/unit/core/preflight/test_recorded_h200.py and test_recorded_h100.py."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core.preflight import gpu_checks
from nccl_preflight.node import gpu_health
from nccl_preflight.node.parse import parse_nvidia_smi_csv, parse_python_probe
from nccl_preflight.slurm import node_check
from tests.jenkins_schema import validate_report_junit
from tests.report_build import build_report, build_verdict

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# tests/device/gpu-node.yml: the config node_check_gpu.sh gives node-check on the machine.
DEVICE_CONFIG = {"nccl_socket_ifname": "eth0", "nccl_backend": "nccl"}
# The GPU health checks of a healthy lone GPU in these VMs: no NVLink, no NVSwitch, no RDMA NIC,
# DCGM not run.
LONE_HEALTHY_GPU = {
    "gpu_memory": "passed",
    "gpu_xid": "passed",
    "gpu_pcie": "passed",
    "gpu_nvlink": "skipped",
    "gpu_fabric": "skipped",
    "gpu_topology": "skipped",
    "gpu_modes": "passed",
    "gpu_visible": "passed",
    "gpu_dcgm": "skipped",
}


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Machine:
    """The fixtures of one machine: ``tag`` in their names, ``host`` its host name (NCCL's log
    prefix, the rank JSON's host), ``address`` its eth0 address."""

    tag: str
    host: str = "vm"
    address: str = "192.0.2.2"

    def readers(self) -> dict[str, Any]:
        """What the node room's readers made of the machine, on the machine
        (tests/device/node_readers.py)."""
        return json.loads(text(f"gpu/node-readers-{self.tag}.json"))

    def health(self, dmesg: str | None = None) -> dict[str, Any]:
        """facts.gpu_health as the node would send it: the parts parsed here from the raw
        recordings, the parts with no raw recording (fabric manager, DCGM; the kernel log where
        ``dmesg`` names no excerpt) as the readers reported them on the machine."""
        health = {
            **self.readers()["gpu_health"],
            "query": gpu_health.parse_smi_query(text(f"gpu/q-{self.tag}.txt")),
            "topology": gpu_health.parse_topology(text(f"gpu/topo-{self.tag}.txt")),
            "nvlink": gpu_health.parse_nvlink_status(text(f"gpu/nvlink-{self.tag}.txt")),
        }
        if dmesg:
            health["kernel_log"] = {"source": "dmesg", "xids": gpu_health.parse_xids(text(dmesg))}
        return health

    def observation(self, nproc: int = 1, dmesg: str | None = None) -> dict[str, Any]:
        """The pre-flight's observation of the machine as one host of a run of ``nproc`` ranks."""
        return {
            "host": self.host,
            "backend": "nccl",
            "ifname": "eth0",
            "nproc_per_node": nproc,
            "python": "/opt/torch/.venv/bin/python3",
            "python_facts": parse_python_probe(text(f"torch/probe-{self.tag}.json")),
            "facts": {
                "gpus": parse_nvidia_smi_csv(text(f"nvidia-smi/{self.tag}.csv")),
                "gpus_reason": "",
                "gpu_health": self.health(dmesg),
            },
        }

    def gpu_health_results(self, dmesg: str | None = None) -> dict[str, dict[str, Any]]:
        """The pre-flight's GPU health checks of the machine as the one host of a one-rank run,
        by check."""
        results = gpu_checks.nccl_gpu_health_results(
            {self.host: self.observation(dmesg=dmesg)},
            self.host,
            {"require_gpu": True, "order": [self.host]},
        )
        return {r["check"]: r for r in results}

    def run_dir(self, tmp_path: Path, case: str, nproc: int, logs: dict[int, str] | None) -> Path:
        """reports/<run-id>/ of this one host holding the recorded rank JSONs of ``case`` and,
        per rank, the NCCL log lines of its pid (a recording interleaves the ranks in one stdout;
        the launch writes each rank's NCCL_DEBUG_FILE apart)."""
        run = tmp_path / f"20261126T053100-{self.tag.replace('-', '')}"
        (run / self.host).mkdir(parents=True)
        plan = {
            "run_id": run.name,
            "world_size": nproc,
            "master_addr": "localhost",
            "master_port": 29500,
            "backend": "nccl",
            "launch_skipped": "",
            "hosts": [
                {
                    "host": self.host,
                    "node_rank": 0,
                    "nproc_per_node": nproc,
                    "rank_offset": 0,
                    "address": self.address,
                    "ifname": "eth0",
                    "reachable": True,
                }
            ],
        }
        (run / "plan.json").write_text(json.dumps(plan))
        launch = {
            "rc": 0 if nproc == 1 else 1,
            "timed_out": False,
            "timeout_s": 60,
            "stopped_by": None,
        }
        (run / self.host / "launch.json").write_text(json.dumps(launch))
        for rank in range(nproc):
            shutil.copy(FIXTURES / f"rank_json/{case}/rank-{rank}.json", run / self.host)
        for rank, log in (logs or {}).items():
            (run / self.host / f"nccl-rank-{rank}.log").write_text(log)
        return run

    def lines_of_pid(self, name: str, pid: int) -> str:
        """The lines of one process in a recorded log (NCCL's ``host:pid:tid`` prefix)."""
        return "".join(
            line for line in text(name).splitlines(keepends=True) if f"{self.host}:{pid}:" in line
        )

    def one_rank_run_suite(self, tmp_path: Path, case: str, log: str, pid: int) -> ET.Element:
        """Build the report of the recorded one-rank nccl run ``case`` (its NCCL log ``log``, of
        process ``pid``) and check what every one-rank run must say: passed, exit 0, no finding,
        valid JUnit with send/recv and the 7 bandwidth sweeps skipped for want of a second rank,
        the transport named. The rank's JUnit suite, for the caller's own assertions."""
        run = self.run_dir(tmp_path, case, 1, {0: self.lines_of_pid(log, pid)})
        assert build_report(run)["verdict"] == "passed"
        assert {f.name for f in validate_report_junit(run)} == {"junit.xml", "rank-0.xml"}
        suite = ET.parse(run / "junit" / "rank-0.xml").getroot().find("testsuite")
        assert suite is not None
        cases = suite.findall("testcase")
        skipped = {
            c.get("name"): c.find("skipped").get("message")  # type: ignore[union-attr]
            for c in cases
            if c.find("skipped") is not None
        }
        assert len(skipped) == 8
        assert skipped["send_recv"] == "send/recv needs at least 2 ranks"
        assert {skipped[n] for n in skipped if n.startswith("bandwidth_")} == {
            "bandwidth needs at least 2 ranks"
        }
        assert not suite.findall("testcase/failure") and not suite.findall("testcase/error")
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert (props["backend"], props["device"]) == ("nccl", "cuda:0")
        transport = next(c for c in cases if c.get("name") == "transport")
        assert f"rank 0 on {self.host}: network Socket chosen" in (
            transport.findtext("system-out") or ""
        )
        verdict = build_verdict(run)
        assert (verdict["class"], verdict["exit_code"], verdict["findings"]) == ("passed", 0, [])
        return suite

    def node_check(self, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[dict[str, Any]]]:
        """node-check's judgement, here, of node/facts.py's own facts of the machine
        (gpu/facts-<tag>.json, recorded by tests/device/node_check_gpu.sh) with its torch probe
        and the config it ran with there: (host, results) as check_node returns them."""
        recorded = json.loads(text(f"gpu/facts-{self.tag}.json"))
        monkeypatch.setattr(node_check, "gather", lambda runner, params, shared: recorded)
        monkeypatch.setenv("SLURMD_NODENAME", self.host)
        probe = json.dumps(recorded["python"])
        return node_check.check_node(
            DEVICE_CONFIG,
            runner=_Deadline(),  # type: ignore[arg-type]
            probe=lambda python, timeout: {"rc": 0, "stdout": probe, "stderr": "", "error": ""},
        )


class _Deadline:
    """All check_node asks of its runner once the facts are recorded: the time left."""

    def seconds_left(self) -> float:
        return 30.0
