# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/gpu_health_read.py: what nccl_facts reads for the GPU health, with the
tools answering from tests/fixtures/gpu/ (and real processes for dcgmi's time bound)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from nccl_preflight.node import gpu_health_read as read

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"


class FakeModule:
    """get_bin_path and run_command of an AnsibleModule, answering from recorded outputs."""

    def __init__(self, answers: dict[tuple[str, ...], tuple[int, str, str]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def get_bin_path(self, name: str, opt_dirs: list[str] | None = None) -> str | None:
        known = {argv[0] for argv in self.answers}
        return f"/usr/bin/{name}" if name in known else None

    def run_command(self, argv: list[str], **kwargs: object) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        key = (os.path.basename(argv[0]), *argv[1:])
        return self.answers.get(key, (127, "", f"{argv[0]}: not recorded"))


def recorded(name: str) -> tuple[int, str, str]:
    return 0, (FIXTURES / name).read_text(encoding="utf-8"), ""


SMI = {
    ("nvidia-smi", "-q"): recorded("q-h100x8.txt"),
    ("nvidia-smi", "topo", "-m"): recorded("topo-h100x8-nv18.txt"),
    ("nvidia-smi", "nvlink", "-s"): recorded("nvlink-a100x8.txt"),
}


def test_everything_read_from_the_recordings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    module = FakeModule(
        {
            **SMI,
            ("dmesg",): recorded("dmesg-xid-119.txt"),
            ("systemctl", "is-active", "nvidia-fabricmanager"): (0, "active\n", ""),
        }
    )
    got = read.read_gpu_health(module, "/usr/bin/nvidia-smi")
    assert len(got["query"]["gpus"]) == 8 and got["query_reason"] == ""
    assert got["topology"]["nics"][0] == "mlx5_0"
    assert len(got["nvlink"]) == 8
    assert got["kernel_log"]["source"] == "dmesg"
    assert [x["xid"] for x in got["kernel_log"]["xids"]] == [119] * 5
    assert got["fabric_manager"] == {"state": "active", "reason": ""}
    assert got["cuda_visible_devices"] == "0,1"
    assert got["dcgm"]["results"] is None and "is 0 (off)" in got["dcgm"]["reason"]
    assert ["dcgmi"] not in [c[:1] for c in module.calls]


def test_unreadable_parts_give_reasons() -> None:
    module = FakeModule(
        {
            ("nvidia-smi", "-q"): (15, "", "Unable to determine the device handle for GPU"),
            ("nvidia-smi", "topo", "-m"): recorded("q-h100x8.txt"),  # not a matrix
            ("dmesg",): (1, "", "dmesg: read kernel buffer failed: Operation not permitted"),
            ("journalctl", "-k", "-b", "-q", "--no-pager"): (1, "", "No journal files found"),
            ("systemctl", "is-active", "nvidia-fabricmanager"): (
                1,
                "",
                "System has not been booted with systemd as init system (PID 1).",
            ),
        }
    )
    got = read.read_gpu_health(module, "/usr/bin/nvidia-smi")
    assert got["query"] is None and "rc=15" in got["query_reason"]
    assert got["topology"] is None and "GPU0" in got["topology_reason"]
    assert got["nvlink"] is None and "rc=127" in got["nvlink_reason"]
    assert got["kernel_log"] is None
    assert "Operation not permitted" in got["kernel_log_reason"]
    assert "kernel.dmesg_restrict=1" in got["kernel_log_reason"]
    assert got["fabric_manager"]["state"] is None
    assert "not been booted with systemd" in got["fabric_manager"]["reason"]


def test_nvidia_smi_is_bounded_in_time(tmp_path: Path) -> None:
    """A real coreutils timeout around a real process that hangs like a wedged nvidia-smi."""
    import shutil
    import subprocess

    hang = tmp_path / "nvidia-smi"
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    timeout = shutil.which("timeout")
    if timeout is None:
        pytest.skip("coreutils timeout is not installed here")

    class Real(FakeModule):
        def get_bin_path(self, name: str, opt_dirs: list[str] | None = None) -> str | None:
            return timeout if name == "timeout" else None

        def run_command(self, argv: list[str], **kwargs: object) -> tuple[int, str, str]:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            return done.returncode, done.stdout, done.stderr

    start = time.monotonic()
    got = read.read_gpu_health(Real({}), str(hang), smi_timeout=1)
    assert time.monotonic() - start < 20
    assert got["query"] is None
    assert got["query_reason"] == f"{hang} -q did not answer within 1 s (a GPU hung?)"


def test_journal_when_dmesg_is_refused() -> None:
    module = FakeModule(
        {
            ("dmesg",): (1, "", "dmesg: read kernel buffer failed: Operation not permitted"),
            ("journalctl", "-k", "-b", "-q", "--no-pager"): recorded("dmesg-xid-31-48.txt"),
        }
    )
    log, reason = read.read_kernel_log(module)
    assert reason == "" and log["source"] == "journalctl -k -b -q --no-pager"
    assert [x["xid"] for x in log["xids"]] == [31, 48]


def test_fabric_manager_inactive() -> None:
    module = FakeModule({("systemctl", "is-active", "nvidia-fabricmanager"): (3, "inactive\n", "")})
    assert read.read_fabric_manager(module) == {"state": "inactive", "reason": ""}


def test_nvswitch_seen_in_sysfs(tmp_path: Path) -> None:
    devices = tmp_path / "bus" / "pci" / "devices"
    for name, vendor, klass in (
        ("0000:07:00.0", "0x10de", "0x030200"),  # a GPU
        ("0000:c4:00.0", "0x15b3", "0x068000"),  # not NVIDIA
    ):
        (devices / name).mkdir(parents=True)
        (devices / name / "vendor").write_text(vendor + "\n")
        (devices / name / "class").write_text(klass + "\n")
    assert read.nvswitch_present(str(tmp_path)) is False
    (devices / "0000:c5:00.0").mkdir()
    (devices / "0000:c5:00.0" / "vendor").write_text("0x10de\n")
    (devices / "0000:c5:00.0" / "class").write_text("0x068000\n")
    assert read.nvswitch_present(str(tmp_path)) is True
    assert read.nvswitch_present(str(tmp_path / "absent")) is False


def fake_dcgmi(tmp_path: Path, body: str) -> FakeModule:
    tool = tmp_path / "dcgmi"
    tool.write_text(f"#!{sys.executable}\n{body}\n")
    tool.chmod(0o755)
    module = FakeModule({})
    module.get_bin_path = lambda name, opt_dirs=None: str(tool) if name == "dcgmi" else None
    return module


def test_dcgm_diag_runs_and_is_parsed(tmp_path: Path) -> None:
    data = (FIXTURES / "dcgmi-diag-r1-fail.json").read_text()
    module = fake_dcgmi(
        tmp_path, f"import sys\nassert sys.argv[1:] == ['diag', '-r', '1', '-j']\nprint({data!r})"
    )
    got = read.run_dcgm_diag(module, 1, 30)
    assert got["level"] == 1 and not got["timed_out"]
    assert {r["test"]: r["status"] for r in got["results"]}["Persistence Mode"] == "Fail"


def test_dcgm_diag_is_killed_at_its_timeout(tmp_path: Path) -> None:
    module = fake_dcgmi(tmp_path, "import time\ntime.sleep(60)")
    start = time.monotonic()
    got = read.run_dcgm_diag(module, 2, 0.5)
    assert time.monotonic() - start < 10
    assert got["timed_out"] and got["results"] is None
    assert "did not finish within 0.5 s" in got["reason"]


def test_dcgm_absent_or_off() -> None:
    assert "dcgmi not found" in read.run_dcgm_diag(FakeModule({}), 1, 30)["reason"]
    assert read.run_dcgm_diag(FakeModule({}), 0, 30)["results"] is None
