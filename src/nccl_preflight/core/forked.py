# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The report step's second core: a share of its work in a forked child of this process.

The report of 1,024 nodes x 8 ranks reads 8,192 rank files and writes as many again (issue 37
item 1: <= 10 s on the 2-core machines the control machine often is). A forked child shares
the parent's memory as it was (nothing to send it); it sends back its result pickled through a
pipe and ends with os._exit (no atexit, no flushed buffers, no finally of the parent's). Any
way it fails (an exception, a signal, a result that does not unpickle) the parent does that
share itself: a second core makes the step faster, never different.

The child runs none of the front-ends' signal handlers: they are reset to the defaults before
it runs (the Slurm command's SIGINT handler cancels the allocation, which
is the parent's to do), with the signals blocked across the fork so that none reaches a handler
in between.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# The signals whose Python handlers the child must not run (the front-ends install these).
RESET_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)


def usable() -> bool:
    """This process can fork and has a second core to give the child."""
    return hasattr(os, "fork") and (os.cpu_count() or 1) >= 2


class Forked:
    """``fn()`` in a forked child, started at once; :meth:`result` waits for it."""

    def __init__(self, fn: Callable[[], Any]):
        self._read_end, write_end = os.pipe()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, RESET_SIGNALS)
        try:
            self._pid = os.fork()
        except OSError:
            self._pid = -1
        if self._pid == 0:  # the child: never returns
            _child(fn, write_end, mask)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(write_end)

    @property
    def pid(self) -> int:
        """The child's pid (-1 when no child was started or it was ended)."""
        return self._pid

    def result(self) -> tuple[bool, Any]:
        """(True, what ``fn`` returned) or (False, None) when the child did not give it."""
        chunks = []
        pipe = os.fdopen(self._read_end, "rb")
        self._read_end = -1  # the file object closes it: cancel must not close it again
        try:
            with pipe:
                while chunk := pipe.read(1 << 20):
                    chunks.append(chunk)
        except OSError:
            chunks = []
        except BaseException:
            self.cancel()
            raise
        if self._pid <= 0:
            return False, None
        _, status = os.waitpid(self._pid, 0)
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or not chunks:
            return False, None
        try:
            return True, pickle.loads(b"".join(chunks))
        except Exception:  # a result that does not unpickle is redone here
            return False, None

    def cancel(self) -> None:
        """End the child now (the parent is going another way) and reap it."""
        if self._pid > 0:
            try:
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
            except OSError:
                pass
            self._pid = -1
        if self._read_end >= 0:
            with contextlib.suppress(OSError):
                os.close(self._read_end)
            self._read_end = -1


def _child(fn: Callable[[], Any], write_end: int, mask: Any) -> None:
    code = 1
    try:
        for sig in RESET_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        data = memoryview(pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL))
        while data:
            data = data[os.write(write_end, data) :]
        code = 0
    except BaseException:  # whatever it was, the parent redoes the share
        code = 1
    finally:
        os._exit(code)


def split_map(
    fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], child_share: float, least: int
) -> list[R]:
    """``fn(items)`` as ``fn(head) + fn(tail)``, the tail (``child_share`` of the items) in a
    forked child while this process does the head; all of it here when there are fewer than
    ``least`` items, one core, or no fork. ``fn`` maps a sequence to a list of one result per
    item, in order."""
    if len(items) < least or not usable():
        return fn(items)
    cut = len(items) - int(len(items) * child_share)
    head, tail = items[:cut], items[cut:]
    child = Forked(lambda: fn(tail))
    try:
        mine = fn(head)
    except BaseException:
        child.cancel()
        raise
    given, theirs = child.result()
    return mine + (theirs if given else fn(tail))
