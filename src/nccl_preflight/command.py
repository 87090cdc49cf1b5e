# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The ``nccl-preflight`` command: a run of the validate playbook that exits with the class of the
run, not ansible-playbook's status, and the Slurm front-end's commands.

    nccl-preflight -i INVENTORY [any ansible-playbook option ...]
    nccl-preflight {slurm,node-check,bundle} [option ...]   (nccl_preflight/slurm/cli.py)
    nccl-preflight --help | --version                       (the same)

The installed command (``pip install .``: pyproject's console script) runs the playbook of the
package's own copy (core/content.py); a checkout's bin/nccl-preflight runs its checkout's.

ansible-playbook only knows 0, 2 and 4. The report play writes the class of the run to
reports/<run-id>/verdict.json; this command asks it for a copy (-e report_verdict_copy=...),
passes everything else through unchanged and exits with the class's code (the table:
core/exit_classes.py, README "Exit codes", --help). When the playbook stopped before its report
play, no node was touched: the inventory or a variable was refused (bad_input), unless
ansible-playbook was interrupted or ended in an unforeseen way (no_verdict). A first word that is
not an option (a command) is the Slurm front-end's: no arguments, an unknown command (nodecheck)
or an option ansible-playbook does not know (--tgas) exits 2 with the nearest known one, before
anything runs. Ansible is imported only to read its options, from the Python that runs this.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from nccl_preflight.core import exit_classes
from nccl_preflight.core.content import PLAYBOOK, TREE

# ansible-playbook's statuses that mean "refused what it was given" before any play ran, or a
# failed host in a play that fails hosts: only roles/validate_inputs does, before any node is
# touched (every later play records its findings and the report play gives the verdict).
REFUSED = {1, 2, 4, 5}
# What nccl_preflight/slurm/cli.py answers: its commands, a first word that is not an option
# (an unknown command), no word at all, and the top level's own options; every other command line
# is ansible-playbook's.
OWN_OPTIONS = {"-h", "--help", "--version"}
# What the control machine's commands need beyond the package: the slurm command builds the report
# (JUnit, report.html) where it runs, as the report play does; node-check and bundle need nothing.
CONTROL_PACKAGES = {"slurm": ("junit_xml", "jinja2")}
# Where an installed command's reports go unless the inventory says (nccl_report_root's default,
# roles/nccl_defaults): the working directory's reports/, not the package's copy of playbooks/.
REPORT_ROOT_ENV = "NCCL_PREFLIGHT_REPORT_ROOT"


def lacking(argv: list[str]) -> list[str]:
    """The packages the command line ``argv`` needs that this Python cannot import."""
    needs = CONTROL_PACKAGES.get(argv[0], ()) if argv else ()
    return [name for name in needs if importlib.util.find_spec(name) is None]


def ansible_playbook(root: Path) -> str:
    """A checkout venv's ansible-playbook, else the one beside this Python, else PATH's."""
    for candidate in (
        root / ".venv" / "bin" / "ansible-playbook",
        Path(sys.executable).parent / "ansible-playbook",
    ):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("ansible-playbook")
    if found is None:
        sys.exit(
            "nccl-preflight: ansible-playbook not found: pip install nccl-preflight's "
            "requirements (ansible-core), or run make demo in a checkout"
        )
    return found


def run(argv: list[str], root: Path, verdict_copy: Path) -> int:
    """ansible-playbook with the caller's arguments; SIGTERM and SIGHUP are passed on to it."""
    env = dict(os.environ)
    env.setdefault("ANSIBLE_CONFIG", str(root / "ansible.cfg"))
    if root == TREE.content and TREE.installed:
        env.setdefault(REPORT_ROOT_ENV, str(Path.cwd() / "reports"))
    cmd = [
        ansible_playbook(root),
        str(root.joinpath(*PLAYBOOK)),
        *argv,
        "-e",
        json.dumps({"report_verdict_copy": str(verdict_copy)}),
    ]
    child = subprocess.Popen(cmd, env=env)

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:  # Ctrl-C reached ansible-playbook too: wait for its clean-up
            continue


def unknown_ansible_option(argv: list[str], root: Path) -> str:
    """The refusal ("unknown option --tgas; did you mean --tags?") when ansible-playbook would
    refuse an option of ``argv`` (read with its own parser, so that its 140 lines of usage do not
    bury the typo), else "". Only where the ansible-playbook that runs is this Python's: another
    one may know other options, and refuses them itself."""
    if Path(ansible_playbook(root)).parent != Path(sys.executable).parent:
        return ""
    try:
        from ansible.cli.playbook import PlaybookCLI

        cli = PlaybookCLI(["ansible-playbook", str(root.joinpath(*PLAYBOOK))])
        cli.init_parser()
    except (Exception, SystemExit):  # not this Python's ansible: ansible-playbook will say
        return ""
    from nccl_preflight.core.command_line import unknown_option

    return unknown_option(cli.parser, argv)


def verdict_of(status: int, verdict: object) -> tuple[exit_classes.ExitClass | None, str]:
    """The class of a run that ansible-playbook ended with ``status``, from the report play's
    ``verdict`` copy (None when it wrote none), and where it came from; (None, "") when nothing
    was judged (no report play ran and ansible-playbook succeeded)."""
    if isinstance(verdict, dict) and verdict.get("class") in exit_classes.BY_NAME:
        return exit_classes.BY_NAME[verdict["class"]], f"run {verdict.get('run_id')}"
    if status == 0:
        return None, ""
    if status in REFUSED:
        where = f"ansible-playbook exited {status} before its report play (see the error above)"
        return exit_classes.BY_NAME["bad_input"], where
    return exit_classes.NO_VERDICT, f"ansible-playbook exited {status}"


def main(argv: list[str] | None = None, root: Path | None = None) -> int:
    """``argv`` (default: this process's); ``root``: the tree holding the playbook (default: the
    package's, core/content.py)."""
    argv = sys.argv[1:] if argv is None else argv
    root = TREE.content if root is None else root
    missing = lacking(argv)
    if missing:
        sys.exit(
            f"nccl-preflight: {sys.executable} lacks {', '.join(missing)}: pip install "
            "nccl-preflight's requirements in it"
        )
    if not argv or not argv[0].startswith("-") or argv[0] in OWN_OPTIONS:
        from nccl_preflight.slurm import cli

        return cli.main(argv)
    unknown = unknown_ansible_option(argv, root)
    if unknown:
        print(
            f"nccl-preflight: error: {unknown} (the run takes ansible-playbook's options: "
            "ansible-playbook --help; nccl-preflight --help)",
            file=sys.stderr,
        )
        return int(exit_classes.USAGE.code)
    with tempfile.TemporaryDirectory(prefix="nccl-preflight-") as tmp:
        copy = Path(tmp) / "verdict.json"
        status = run(argv, root, copy)
        verdict = None
        if copy.is_file():
            try:
                verdict = json.loads(copy.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                verdict = None
    chosen, where = verdict_of(status, verdict)
    if chosen is None:
        # No report play ran (--tags facts, --syntax-check, --list-hosts): nothing was judged.
        print("nccl-preflight: no verdict (the report stage did not run); exit 0", file=sys.stderr)
        return 0
    print(
        f"nccl-preflight: {chosen.name} (exit {chosen.code}): {chosen.meaning}; {where}",
        file=sys.stderr,
    )
    return int(chosen.code)


def console_script() -> None:
    """pyproject's ``nccl-preflight`` entry point."""
    sys.exit(main())
