# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A run of playbooks/validate.yml on a lab, and reading what it left: the run id, the run
directory on each host, the processes still running, the launch records and the JUnit suites.

Used by the lab tests that launch ranks (tests/integration/test_launch_lab.py,
test_run_faults_lab.py, test_support_lab.py), so that each asserts what the run did, not how to
start it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.jenkins_schema import validate_report_junit
from tests.lab.harness import Lab

# Small and quick: a 2-core CI machine runs all of this.
QUICK = ["--max-bytes", "16K", "--iters", "2", "--warmup", "1"]
# How long a fault waits for a rank to reach its phase, counted from the play's start: on 2 cores
# at load 22 torchrun started 94-99 s into the play, torch's import took 20 s more. A wait that
# is still going when the play ended gives up then (`during`), so this bound costs nothing.
PHASE_WAIT_S = 480


def paused_before_barrier(rank: int = 0) -> list[str]:
    """nccl_check_args of a quick correctness run whose rank `rank` stops before barrier (as if
    stuck): the ranks in barrier wait for it, so nothing finishes by itself."""
    return [*QUICK, "--tests", "correctness", "--pause-before", f"barrier@{rank}"]


def inventory_with_unreachable_host(lab: Lab, tmp_path: Path, last_octet: int) -> tuple[Path, str]:
    """A copy of the lab's inventory plus a node at ``last_octet`` of the lab's own management
    network, where nothing answers (slots=1); -> (the inventory, that node's address)."""
    inventory = tmp_path / "inventory"
    shutil.copytree(lab.inventory_dir, inventory)
    ghost = lab.hosts[0].mgmt_addr.rsplit(".", 1)[0] + f".{last_octet}"
    with open(inventory / "hostfile", "a") as hostfile:
        hostfile.write(f"{ghost} slots=1\n")
    return inventory, ghost


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def run_dir(run_id: str, host: Any) -> Path:
    """The run's private directory on a host (the lab hosts share this machine's /tmp)."""
    return Path(f"/tmp/nccl-preflight-{run_id}-{host.inventory_name}")


def rank_record(run_id: str, host: Any, rank: int) -> Path:
    """The result file a rank keeps rewriting in its host's run directory while it runs."""
    return run_dir(run_id, host) / "results" / f"rank-{rank}.json"


def leftovers(run_id: str) -> list[str]:
    """Processes anywhere on this machine (every lab host shares it) with the run id in argv."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, UnicodeDecodeError):
            continue
        if run_id in argv and state not in "ZX":
            found.append(f"{entry}: {argv[:200]}")
    return found


def payload_dirs(tmp: Path | str) -> list[str]:
    """AnsiballZ's payload directories of the project's modules (``ansible_<module>_payload_*``,
    library/) in a node's temporary directory ``tmp``. Only a directory private to the test
    (a TMPDIR of its own for the node's sessions) says whose they are: the lab hosts share
    /tmp with every other run on this machine."""
    return sorted(str(path) for path in Path(tmp).glob("ansible_nccl_*_payload_*"))


def assert_nothing_left(run_id: str, hosts: Iterable[Any], node_tmp: Iterable[Path] = ()) -> None:
    """No process of the run runs anywhere, no host keeps its run directory, and no node's
    temporary directory of ``node_tmp`` (the hosts' own TMPDIR) keeps a module's payload."""
    assert leftovers(run_id) == []
    for host in hosts:
        assert not run_dir(run_id, host).exists(), "the run directory must be removed"
    for tmp in node_tmp:
        assert payload_dirs(tmp) == [], "a module's AnsiballZ payload directory must be removed"


def playbook(
    lab: Lab,
    run_id: str,
    reports: Path,
    extra: dict[str, Any],
    *args: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """playbooks/validate.yml on the lab with the run id, the report root and `extra` as -e."""
    variables = {"nccl_run_id": run_id, "nccl_report_root": str(reports), **extra}
    return lab.ansible_playbook(
        "playbooks/validate.yml", "-e", json.dumps(variables), *args, env=env, timeout=600
    )


def launch(lab: Lab, *args: Any, **options: Any) -> subprocess.CompletedProcess[str]:
    """The playbook's launch alone (--tags launch, no pre-flight); arguments as for playbook."""
    return playbook(lab, *args, "--tags", "launch", **options)


class _Action(threading.Thread):
    """The thread of a `during` action; `over` is set once the body ended."""

    def __init__(self, action: Callable[[], None]) -> None:
        super().__init__(target=action, daemon=True)
        self.over = threading.Event()

    def run(self) -> None:
        try:
            super().run()
        except AssertionError:
            # A wait that gave up because the body ended: the body's own asserts say what
            # did not happen (the fault never came).
            if not self.over.is_set():
                raise


def body_ended() -> bool:
    """In a `during` action: whether the body already ended (a fault must not come after the
    undo, into the next test on the same lab)."""
    me = threading.current_thread()
    return isinstance(me, _Action) and me.over.is_set()


@contextlib.contextmanager
def during(action: Callable[[], None], undo: list[Callable[[], None]] | None = None) -> Iterator:
    """Run `action` in a thread while the body runs (a fault injected mid-run); afterwards tell
    it the body ended (its waits give up), wait for it and call every undo it left in `undo`,
    even when the body failed."""
    thread = _Action(action)
    thread.start()
    try:
        yield thread
    finally:
        thread.over.set()
        thread.join(timeout=30)
        for step in undo or []:
            step()


def kill_at(
    lab: Lab, run_id: str, host: Any, rank: int, test: str, timeout: float, killed: dict[str, Any]
) -> Callable[[], None]:
    """An action for `during`: once the rank is at `test`, SIGKILL it (lab.kill), writing its pid
    and the time of the kill into `killed`."""
    record = rank_record(run_id, host, rank)

    def kill() -> None:
        doc = wait_for_record(record, test, timeout=timeout)
        killed["at"] = time.time()
        killed["pid"] = int(doc["pid"])
        lab.kill(host, killed["pid"])

    return kill


def wait_for_record(path: Path, test: str, timeout: float) -> dict[str, Any]:
    """Wait until a rank's result file says it is at `test`; return the record."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not body_ended():
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            doc = {}
        if doc.get("current_test") == test:
            return doc
        time.sleep(0.2)
    raise AssertionError(f"{path} never reached {test}")


def launch_records(report: Path, hosts: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """launch.json of every host, collected into the report, by inventory name."""
    return {
        h.inventory_name: json.loads((report / h.inventory_name / "launch.json").read_text())
        for h in hosts
    }


def finished_epoch(launch: dict[str, Any]) -> float:
    """When a host's run ended (launch.json's finished_at), as epoch seconds."""
    return datetime.fromisoformat(launch["finished_at"]).timestamp()


def rank_suites(junit: Path) -> dict[str, ET.Element]:
    """The rank suites (nccl.*) of a JUnit file, by name."""
    root = ET.parse(junit).getroot()
    return {
        s.get("name"): s for s in root.iter("testsuite") if s.get("name", "").startswith("nccl.")
    }


def validate(report_dir: Path) -> None:
    """Every JUnit file of the report against the Jenkins schema that ships in tests/schemas/
    (tests/jenkins_schema.py)."""
    assert validate_report_junit(report_dir), report_dir


def label(host: Any) -> str:
    """A host's part of a JUnit classname (nccl.<label>.rank<R>)."""
    return host.inventory_name.replace(".", "_")
