"""A headless Debian chromium driven over the Chrome DevTools protocol (aiohttp's websocket client).

One browser per test session; each page check opens a fresh tab, records console messages,
exceptions and log entries (failed loads, CSP violations), waits for the page's #diag to say it
has drawn, counts the plotly traces in the DOM and saves a full-page screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import aiohttp
from patience import HANG_S

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-quic", "--disable-extensions",
                  "--disable-default-apps", "--no-default-browser-check", "--mute-audio", "--hide-scrollbars",
                  "--window-size=1400,1000", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0")


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, profile_dir: Path):
        exe = find_chromium()
        if exe is None:
            raise RuntimeError("chromium not found: apt-get install -y chromium")
        self.profile = Path(profile_dir)
        self.profile.mkdir(parents=True, exist_ok=True)
        self.log = open(self.profile / "chromium.log", "wb")
        # Chromium writes its singleton socket folder (org.chromium.Chromium.*) under TMPDIR and leaves it
        # behind when killed: under the profile it goes with the test's own temporary folder.
        tmp = self.profile / "tmp"
        tmp.mkdir(exist_ok=True)
        self.proc = subprocess.Popen([exe, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, "TMPDIR": str(tmp)})
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + HANG_S  # chromium exiting ends the wait first
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not start (see {self.profile / 'chromium.log'})")
            time.sleep(0.1)
        port, path = port_file.read_text().split("\n")[:2]
        self.ws_url = f"ws://127.0.0.1:{port.strip()}{path.strip()}"
        self.loop = asyncio.new_event_loop()
        self.session = self.loop.run_until_complete(self._aiohttp())
        self.ws = self.loop.run_until_complete(self.session.ws_connect(self.ws_url, max_msg_size=0))
        self._ids = itertools.count(1)

    async def _aiohttp(self):
        return aiohttp.ClientSession()

    async def _send(self, method: str, params: dict | None = None, session_id: str | None = None,
                    events: list | None = None, timeout: float = HANG_S) -> dict:
        msg_id = next(self._ids)
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session_id:
            msg["sessionId"] = session_id
        await self.ws.send_str(json.dumps(msg))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"CDP {method} timed out")
            raw = await self.ws.receive(timeout=left)
            if raw.type != aiohttp.WSMsgType.TEXT:
                raise RuntimeError(f"CDP socket closed during {method}")
            data = json.loads(raw.data)
            if data.get("id") == msg_id:
                if "error" in data:
                    raise RuntimeError(f"CDP {method}: {data['error']}")
                return data.get("result", {})
            if events is not None and "method" in data:
                events.append(data)

    async def _drain(self, events: list, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                raw = await self.ws.receive(timeout=left)
            except TimeoutError:
                return
            if raw.type != aiohttp.WSMsgType.TEXT:
                return
            data = json.loads(raw.data)
            if "method" in data:
                events.append(data)

    def check_page(self, url: str, page: str, screenshot: Path | None = None, timeout: float = HANG_S,
                   then=None) -> dict:
        return self.loop.run_until_complete(self._check_page(url, page, screenshot, timeout, then))

    async def _check_page(self, url, page, screenshot, timeout, then):
        events: list = []
        target = await self._send("Target.createTarget", {"url": "about:blank"}, events=events)
        tid = target["targetId"]
        sid = (await self._send("Target.attachToTarget", {"targetId": tid, "flatten": True}, events=events))["sessionId"]
        try:
            for domain in ("Runtime", "Log", "Page"):
                await self._send(f"{domain}.enable", session_id=sid, events=events)
            await self._send("Page.navigate", {"url": url}, session_id=sid, events=events)
            expr = ("(() => { const d = document.getElementById('diag'); return d ? "
                    "JSON.stringify(Object.assign({}, d.dataset)) : null; })()")
            deadline = time.monotonic() + timeout
            diag = None
            while time.monotonic() < deadline:
                res = await self._send("Runtime.evaluate", {"expression": expr, "returnByValue": True},
                                       session_id=sid, events=events)
                value = res.get("result", {}).get("value")
                diag = json.loads(value) if value else None
                if diag and diag.get("ready") == "1" and diag.get("page") == page:
                    break
                await self._drain(events, 0.2)
            await self._drain(events, 0.5)  # late errors (async draws, resource loads)
            extra = None
            if then is not None:
                extra = await then(self, sid, events)
            dom = await self._evaluate(sid, events, """(() => {
                const charts = [...document.querySelectorAll('.js-plotly-plot')].map((el) => ({
                  id: el.id,
                  traces: el.querySelectorAll('g.trace').length,
                  drawn: [...el.querySelectorAll('g.trace path, g.trace .point')].filter((p) =>
                      (p.getAttribute('d') || '').length > 4 || p.classList.contains('point')).length,
                }));
                const d = document.getElementById('diag');
                return { charts, traces: document.querySelectorAll('.js-plotly-plot .trace').length,
                         nodes: document.querySelectorAll('.dag-node').length,
                         errorsInDom: [...d.querySelectorAll('.diag-error')].map((p) => p.textContent),
                         diag: Object.assign({}, d.dataset), title: document.title,
                         text: document.getElementById('main').innerText.slice(0, 2000) };
            })()""")
            if screenshot is not None:
                metrics = await self._send("Page.getLayoutMetrics", session_id=sid, events=events)
                size = metrics.get("cssContentSize") or metrics.get("contentSize")
                shot = await self._send("Page.captureScreenshot", {
                    "format": "png", "captureBeyondViewport": True,
                    "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 6000), "scale": 1}},
                    session_id=sid, events=events)
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            errors = _errors(events)
            return {"diag": diag, "dom": dom, "errors": errors, "extra": extra, "events": len(events)}
        finally:
            try:
                await self._send("Target.closeTarget", {"targetId": tid})
            except Exception:
                pass

    async def _evaluate(self, sid, events, expression: str):
        res = await self._send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                    "awaitPromise": True}, session_id=sid, events=events)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res.get("result", {}).get("value")

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                self.loop.run_until_complete(self.ws.close())
            if getattr(self, "session", None) is not None:
                self.loop.run_until_complete(self.session.close())
        except Exception:
            pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        if getattr(self, "loop", None) is not None and not self.loop.is_closed():
            self.loop.close()
        self.log.close()


def _errors(events: list) -> list[str]:
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            out.append(f"console.{p['type']}: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
            entry = p["entry"]
            out.append(f"log.{entry['level']}: {entry.get('text')} {entry.get('url', '')}")
    return out
