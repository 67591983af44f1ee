"""A headless chromium driven over the Chrome DevTools Protocol, for the chart's tests and PNGs.

Stdlib only: chromium is started with ``--remote-debugging-pipe`` and spoken to over two pipes
(fd 3: commands in, fd 4: replies and events out, each JSON message ended by a NUL byte), so no
websocket client is needed. Nothing here is imported by ``import roofline``.

    with Browser() as b:
        b.open("file:///tmp/roofline.html")
        b.wait_for("window.rooflineReady === true")
        b.evaluate("document.title")
        png = b.screenshot(clip={"x": 0, "y": 0, "width": 800, "height": 400})
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

from roofline.errors import RooflineError

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

#: Flags that keep a headless run quiet and offline-clean: no sync, no update checks, no
#: background requests, so any network request seen comes from the page itself.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # chromium refuses to run as root without it (CI containers)
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--allow-file-access-from-files",
)


def find_chromium() -> str | None:
    """Path of a chromium/chrome executable ($ROOFLINE_CHROMIUM first), or None."""
    env = os.environ.get("ROOFLINE_CHROMIUM")
    if env:
        return env if os.path.isfile(env) else shutil.which(env)
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless chromium with one page, driven synchronously over the CDP pipe."""

    def __init__(self, executable: str | None = None, width: int = 1280, height: int = 900, timeout_s: float = 60.0):
        self.executable = executable or find_chromium()
        if not self.executable:
            raise RooflineError("no chromium found: install it (Debian: apt-get install chromium) or set ROOFLINE_CHROMIUM")
        self.width, self.height, self.timeout_s = width, height, timeout_s
        self.events: list[dict] = []
        self._next_id = 0
        self._buf = b""
        self._proc = None
        self._profile = None
        self._log = None

    def _log_tail(self, lines: int = 5) -> str:
        try:
            text = open(os.path.join(self._profile, "chromium.log"), encoding="utf-8", errors="replace").read()
        except (OSError, TypeError):
            return ""
        tail = [ln for ln in text.splitlines() if ln.strip() and "dbus" not in ln][-lines:]
        return (": " + " | ".join(tail)) if tail else ""

    # ---- lifetime ----
    def __enter__(self) -> "Browser":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        self._profile = tempfile.mkdtemp(prefix="roofline-chromium-")
        self._log = open(os.path.join(self._profile, "chromium.log"), "wb")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        # fds 3 and 4 are open here (os.pipe took the lowest free ones), so keeping them is safe;
        # the child copies both ends above 4 first, so neither dup2 can clobber the other.
        def child_fds():  # the child reads commands on fd 3 and writes replies on fd 4
            r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        args = [self.executable, *CHROMIUM_FLAGS, "--remote-debugging-pipe",
                f"--user-data-dir={self._profile}", f"--window-size={self.width},{self.height}", "about:blank"]
        self._proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            preexec_fn=child_fds, pass_fds=(3, 4, to_chrome_r, from_chrome_w),
            start_new_session=True,  # its own process group: its helpers can be ended with it
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self.send("Page.enable")
            self.send("Runtime.enable")
            self.send("Network.enable")
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._proc is not None:
            try:
                self.call("Browser.close", timeout_s=5)
            except Exception:  # noqa: BLE001 - closing anyway
                pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                import signal

                try:
                    os.killpg(self._proc.pid, signal.SIGKILL)  # the group this Browser started
                except ProcessLookupError:
                    pass
                self._proc.wait()
            self._proc = None
            for fd in (self._to_chrome, self._from_chrome):
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._profile:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    # ---- protocol ----
    def _read_message(self, deadline: float) -> dict:
        import select

        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RooflineError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RooflineError(f"chromium closed the debugging pipe (did it crash?){self._log_tail()}")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: bool = False, timeout_s: float | None = None) -> dict:
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RooflineError(f"chromium: {method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def send(self, method: str, params: dict | None = None) -> dict:
        """A command to the page's session."""
        return self.call(method, params, session=True)

    # ---- page ----
    def open(self, url: str, wait_s: float | None = None) -> None:
        """Navigate and wait for the load event."""
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + (wait_s or self.timeout_s)
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._read_message(deadline))

    def evaluate(self, expression: str, await_promise: bool = True):
        """Evaluate a JS expression in the page and return its value (JSON-serialisable)."""
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": await_promise})
        if "exceptionDetails" in res:
            det = res["exceptionDetails"]
            text = det.get("exception", {}).get("description") or det.get("text")
            raise RooflineError(f"page script failed: {text}")
        return res.get("result", {}).get("value")

    def wait_for(self, condition: str, timeout_s: float = 30.0, poll_s: float = 0.05):
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(f"Boolean({condition})")
            if value:
                return value
            if time.monotonic() > deadline:
                raise RooflineError(f"page never reached: {condition}")
            time.sleep(poll_s)

    def screenshot(self, clip: dict | None = None) -> bytes:
        """PNG bytes of the viewport, or of ``clip`` ({x, y, width, height} in CSS pixels)."""
        params: dict = {"format": "png", "captureBeyondViewport": True}
        if clip:
            params["clip"] = {**clip, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])

    def requested_urls(self) -> list[str]:
        """Every URL the page asked for since the browser started (Network.requestWillBeSent)."""
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def console_errors(self) -> list[str]:
        out = []
        for e in self.events:
            if e.get("method") == "Runtime.exceptionThrown":
                d = e["params"]["exceptionDetails"]
                out.append(d.get("exception", {}).get("description") or d.get("text", ""))
            elif e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") == "error":
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in e["params"]["args"]))
        return out


# ---- PNG checks (stdlib + numpy; no Pillow) ----
def png_decode(png: bytes):
    """Pixels of an 8-bit RGB or RGBA PNG (what chromium writes) as a (height, width, channels) uint8 array."""
    import struct
    import zlib

    import numpy as np

    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise RooflineError("not a PNG file")
    pos, idat = 8, []
    width = height = channels = None
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise RooflineError(f"unsupported PNG: depth {depth}, colour type {color}, interlace {interlace}")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    stride = width * channels
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int64)
    for y in range(height):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int64)
        if f == 1:  # Sub: a running sum along each channel
            line = np.cumsum(line.reshape(width, channels), axis=0).reshape(-1) & 255
        elif f == 2:  # Up
            line = (line + prev) & 255
        elif f in (3, 4):  # Average, Paeth: sequential along the row
            cur, up = line.tolist(), prev.tolist()
            for i in range(stride):
                a = cur[i - channels] if i >= channels else 0
                b = up[i]
                if f == 3:
                    cur[i] = (cur[i] + ((a + b) >> 1)) & 255
                else:
                    c = up[i - channels] if i >= channels else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            line = np.array(cur, dtype=np.int64)
        out[y] = line
        prev = line
    return out.reshape(height, width, channels)


def png_colour_stats(png: bytes) -> dict:
    """Size, distinct colours and the fraction of non-white pixels: a blank image has one colour."""
    import numpy as np

    px = png_decode(png)[..., :3]
    flat = px.reshape(-1, 3)
    packed = (flat[:, 0].astype(np.int64) << 16) | (flat[:, 1].astype(np.int64) << 8) | flat[:, 2]
    return {
        "width": int(px.shape[1]),
        "height": int(px.shape[0]),
        "distinct_colours": int(np.unique(packed).size),
        "ink_fraction": float((flat.min(axis=1) < 230).mean()),
    }
