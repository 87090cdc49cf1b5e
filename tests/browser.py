# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Open a page in headless Chromium (Debian's `chromium`) and report what a person would see.

Through the DevTools protocol (websocket-client): every console error, uncaught exception and
failed load, whether a text is on the first screen, and a PNG screenshot of that screen.
The browser runs with a new empty profile and every background service off; it loads only the
file given.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WIDTH, HEIGHT = 1280, 800
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    f"--window-size={WIDTH},{HEIGHT}",
]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser_unavailable_reason() -> str | None:
    """Why no page can be opened here, or None."""
    if chromium() is None:
        return "no chromium here (make test installs Debian's chromium when run as root)"
    try:
        import websocket  # noqa: F401
    except ImportError:
        return "websocket-client is not installed (pip install -r requirements-dev.txt)"
    return None


@dataclass
class PageView:
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads
    first_screen_text: str = ""  # the text of every element at least partly on the first screen
    title: str = ""
    png: bytes = b""
    load_s: float = 0.0  # from Page.navigate to the load event


class _Session:
    def __init__(self, url: str):
        import websocket

        self.ws = websocket.create_connection(url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        wanted = self.next_id
        self.ws.send(json.dumps({"id": wanted, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout} s")
            self.events.append(json.loads(self.ws.recv()))


def _errors(events: list[dict[str, Any]]) -> list[str]:
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params") or {}
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            found.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            found.append(f"exception: {details.get('text')} {details.get('exception', {})}")
        elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
            entry = params["entry"]
            found.append(f"log {entry.get('source')}: {entry.get('text')} {entry.get('url', '')}")
        elif method == "Network.loadingFailed":
            found.append(f"load failed: {params.get('errorText')}")
    return found


_FIRST_SCREEN_JS = """
(() => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const box = range.getBoundingClientRect();
    const style = getComputedStyle(node.parentElement);
    if (box.width > 0 && box.height > 0 && box.top < window.innerHeight && box.bottom > 0
        && style.visibility !== 'hidden' && style.color !== style.backgroundColor) {
      out.push(node.textContent.trim());
    }
  }
  return out.join('\\n');
})()
"""


def open_page(path: Path, timeout: float = 60.0) -> PageView:
    """Load file://path in a fresh headless Chromium and look at it."""
    exe = chromium()
    assert exe is not None, browser_unavailable_reason()
    with tempfile.TemporaryDirectory(prefix="nccl-chromium-") as profile:
        proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            return _look(Path(profile), path, timeout)
        finally:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)


def _devtools_port(profile: Path, timeout: float) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.is_file() and marker.read_text().strip():
            return int(marker.read_text().splitlines()[0])
        time.sleep(0.1)
    raise TimeoutError(f"chromium wrote no {marker} within {timeout} s")


def _look(profile: Path, path: Path, timeout: float) -> PageView:
    port = _devtools_port(profile, timeout)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
        targets = json.load(answer)
    page = next(t for t in targets if t.get("type") == "page")
    session = _Session(page["webSocketDebuggerUrl"])
    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            session.call(f"{domain}.enable")
        session.call(
            "Emulation.setDeviceMetricsOverride",
            width=WIDTH,
            height=HEIGHT,
            deviceScaleFactor=1,
            mobile=False,
        )
        session.events.clear()
        began = time.monotonic()
        session.call("Page.navigate", url=path.resolve().as_uri())
        session.wait_for("Page.loadEventFired", timeout)
        loaded = time.monotonic() - began
        time.sleep(0.3)  # late console messages
        view = PageView(load_s=loaded)
        result = session.call("Runtime.evaluate", expression=_FIRST_SCREEN_JS, returnByValue=True)
        view.first_screen_text = str(result.get("result", {}).get("value") or "")
        title = session.call("Runtime.evaluate", expression="document.title", returnByValue=True)
        view.title = str(title.get("result", {}).get("value") or "")
        shot = session.call("Page.captureScreenshot", format="png")
        view.png = base64.b64decode(shot["data"])
        view.errors = _errors(session.events)
        return view
    finally:
        session.ws.close()


def distinct_colours(png: bytes) -> int:
    """How many colours the screenshot has (1 = blank)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    return len(colours) if colours is not None else 1 << 20
