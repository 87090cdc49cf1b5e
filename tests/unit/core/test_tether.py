# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/tether.py and BOOT's end of a program whose reader went away
(src/nccl_preflight/core/stdin_ship.py): the control machine's side of a run's warden.

The tether runs for real, with a local shell standing in for ssh (the facts plugin builds the
same command line for a local connection): it starts the warden through BOOT, passes its answer
back and holds it while a process standing in for ansible-playbook lives. When that process goes
(killed), the warden ends the run on the "node"; a release leaves the run directory and ends the
tether. The lab's tests (tests/integration/test_interrupt_lab.py) do the same over real SSH.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from nccl_preflight.core.stdin_ship import BOOT, program_stream
from nccl_preflight.core.tether import alive, release, start_tether, warden_command
from nccl_preflight.core.zipapp import zip_bytes
from tests.polling import wait_or_fail

BOUND_S = 60.0
SLEEP = "import time; time.sleep(300)"


def local_tether(tmp_path: Path, run_dir: Path, main_pid: int, run_id: str) -> dict:
    """start_tether as the facts plugin calls it for a local connection."""
    command = shlex.join(warden_command(sys.executable, run_id))
    env = f"TMPDIR={shlex.quote(str(tmp_path))}"  # BOOT's directory, to look for it afterwards
    argv = ["/bin/sh", "-c", f"{env} {command}"]
    return start_tether(argv, str(run_dir), run_id, main_pid, str(tmp_path / "cache"))


def boot_dirs(tmp_path: Path, run_id: str) -> list[str]:
    return glob.glob(str(tmp_path / f"nccl-preflight-{run_id}-*"))


def test_ansible_playbook_gone_ends_the_run_on_the_node(
    tmp_path: Path, main_process: subprocess.Popen, node_run: tuple[Path, subprocess.Popen]
) -> None:
    run_dir, listener = node_run
    tether = local_tether(tmp_path, run_dir, main_process.pid, "t1")
    assert tether["ready"] is True, tether
    assert alive(tether["pid"]) and alive(tether["warden_pid"])
    assert boot_dirs(tmp_path, "t1"), "the warden runs from BOOT's directory"
    time.sleep(2.5)  # heartbeats keep it: nothing ends while ansible-playbook lives
    assert run_dir.is_dir() and listener.poll() is None
    main_process.kill()  # ansible-playbook SIGKILLed (or ended, whichever way)
    began = time.monotonic()
    wait_or_fail(lambda: not run_dir.exists() and listener.poll() is not None, timeout=BOUND_S)
    print(f"the run ended {time.monotonic() - began:.2f} s after ansible-playbook")
    wait_or_fail(lambda: not alive(tether["pid"]) and not alive(tether["warden_pid"]), BOUND_S)
    wait_or_fail(lambda: not boot_dirs(tmp_path, "t1"), timeout=BOUND_S)


def test_a_killed_tether_ends_the_run_as_a_gone_playbook_does(
    tmp_path: Path, main_process: subprocess.Popen, node_run: tuple[Path, subprocess.Popen]
) -> None:
    run_dir, listener = node_run
    tether = local_tether(tmp_path, run_dir, main_process.pid, "t2")
    assert tether["ready"] is True, tether
    os.kill(tether["pid"], signal.SIGKILL)  # the whole control side killed: its pipe closes
    wait_or_fail(lambda: not run_dir.exists() and listener.poll() is not None, timeout=BOUND_S)
    wait_or_fail(lambda: not alive(tether["warden_pid"]), timeout=BOUND_S)


def test_a_release_keeps_the_run_directory_and_ends_the_tether(
    tmp_path: Path, main_process: subprocess.Popen, node_run: tuple[Path, subprocess.Popen]
) -> None:
    run_dir, listener = node_run
    tether = local_tether(tmp_path, run_dir, main_process.pid, "t3")
    assert tether["ready"] is True, tether
    assert release([tether["pid"]], wait=BOUND_S) == []
    assert not alive(tether["warden_pid"])
    assert (run_dir / "preflight" / "listener.pid").is_file(), "launch_keep_run_dir keeps it"
    wait_or_fail(lambda: listener.poll() is not None, timeout=BOUND_S)
    wait_or_fail(lambda: not boot_dirs(tmp_path, "t3"), timeout=BOUND_S)


def test_a_warden_that_cannot_start_is_an_error_and_leaves_nothing(
    tmp_path: Path, main_process: subprocess.Popen
) -> None:
    argv = ["/bin/sh", "-c", shlex.join(warden_command("/nonexistent/python9", "t4"))]
    tether = start_tether(argv, str(tmp_path / "run"), "t4", main_process.pid, None, timeout=20)
    assert tether.get("ready") is not True and "python9" in tether["error"], tether


# ------------------------------------------------------------------------------------------------
# BOOT: a program whose reader went away
# ------------------------------------------------------------------------------------------------

HANGUP_MAIN = """
import os, signal, sys, time
def on_hup(signum, frame):
    open(os.environ["MARK"], "w").write("SIGHUP\\n")
    sys.exit(0)
signal.signal(signal.SIGHUP, on_hup)
print("ready", flush=True)
time.sleep(300)
"""


def test_boot_ends_a_program_whose_reader_went_away_and_removes_its_directory(
    tmp_path: Path,
) -> None:
    """The SSH session of a control machine that was interrupted closed its end of the output
    pipe: BOOT sends SIGHUP to the program and removes its directory."""
    mark = tmp_path / "hangup"
    zipapp = zip_bytes({"__main__.py": HANGUP_MAIN.encode()})
    boot = subprocess.Popen(
        [sys.executable, "-c", BOOT, "b1", "x"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmp_path), "MARK": str(mark)},
    )
    assert boot.stdin is not None and boot.stdout is not None
    boot.stdin.write(program_stream(zipapp, {}))
    boot.stdin.flush()
    assert boot.stdout.readline() == b"ready\n"
    assert boot_dirs(tmp_path, "b1")
    boot.stdout.close()  # the reader goes away
    boot.wait(timeout=BOUND_S)
    assert mark.read_text() == "SIGHUP\n"
    assert not boot_dirs(tmp_path, "b1")


def test_boot_still_runs_a_program_to_its_end_while_its_output_is_read(tmp_path: Path) -> None:
    zipapp = zip_bytes({"__main__.py": b"import sys\nprint(sys.stdin.readline().strip())\n"})
    done = subprocess.run(
        [sys.executable, "-c", BOOT, "b2", "x"],
        input=program_stream(zipapp, {"hello": 1}),
        capture_output=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        timeout=BOUND_S,
        check=False,
    )
    assert done.returncode == 0 and json.loads(done.stdout) == {"hello": 1}, done.stderr
    assert not boot_dirs(tmp_path, "b2")


def test_a_release_never_signals_a_process_that_is_not_a_tether(
    main_process: subprocess.Popen,
) -> None:
    """A tether that ended early (its session dropped) leaves its pid to be reused: SIGUSR1, whose
    default is to terminate, must not reach whatever runs under it now."""
    assert release([main_process.pid], wait=1) == [main_process.pid]
    time.sleep(0.5)
    assert main_process.poll() is None
