"""Opening pages as a person would: Debian's chromium, headless (a helper of the browser tests).

Install it with `apt-get install -y chromium`; without it the tests that need it are skipped
with that reason. `dump_dom` and `screenshot` open a page once; `DevTools` keeps a browser
open and drives it (type into a field, click, read the page, take a screenshot) over the
Chrome DevTools Protocol on a pipe, so no extra package is needed.
"""

import base64
import io
import json
import os
import re
import shutil
import subprocess
import time

import numpy as np
import pytest

CHROMIUM = next((path for path in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if path), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium installed (Debian: apt-get install -y chromium); the browser tests need it"
)
WINDOW = (1280, 1000)


def _chromium(profile_dir, *arguments, timeout=120) -> str:
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--user-data-dir={profile_dir}",
        "--virtual-time-budget=10000",
        *arguments,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True).stdout


def dump_dom(url: str, profile_dir) -> str:
    """The page's DOM after its scripts ran."""
    return _chromium(profile_dir, "--dump-dom", url)


def screenshot(url: str, path, profile_dir) -> np.ndarray:
    """The page as displayed, [height, width, 3] uint8."""
    _chromium(profile_dir, f"--screenshot={path}", url)
    with open(path, "rb") as file:
        return _png_pixels(file.read())


def _png_pixels(png: bytes) -> np.ndarray:
    from matplotlib import image

    return (image.imread(io.BytesIO(png), format="png")[..., :3] * 255).round().astype(np.uint8)


class DevTools:
    """A headless Chromium showing `url`, driven over --remote-debugging-pipe (JSON + NUL on its fds 3 and 4)."""

    def __init__(self, url: str, profile_dir):
        to_chromium, self._commands = os.pipe()
        self._answers, from_chromium = os.pipe()

        def map_fds():  # in the child: commands on fd 3, answers on fd 4
            os.dup2(to_chromium, 10)  # through fds above 4, as either pipe end may itself be fd 3 or 4
            os.dup2(from_chromium, 11)
            os.dup2(10, 3)
            os.dup2(11, 4)

        self.process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile_dir}",
                url,
            ],
            preexec_fn=map_fds,
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chromium)
        os.close(from_chromium)
        self._buffer, self._last_id, self._session = b"", 0, None
        page = next(target for target in self.call("Target.getTargets")["targetInfos"] if target["type"] == "page")
        self._session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]

    def call(self, method: str, **params) -> dict:
        """Sends one command and returns its result (events in between are skipped)."""
        self._last_id += 1
        message = {"id": self._last_id, "method": method, "params": params}
        if self._session:
            message["sessionId"] = self._session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._answers, 1 << 20)
                assert chunk, "chromium closed its DevTools pipe"
                self._buffer += chunk
            text, self._buffer = self._buffer.split(b"\0", 1)
            answer = json.loads(text)
            if answer.get("id") == self._last_id:
                assert "error" not in answer, f"{method}: {answer['error']}"
                return answer["result"]

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        answer = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        return answer["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 120):
        """Polls until the expression is truthy; returns its value."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                value = self.evaluate(expression)
            except AssertionError:  # the page is between two documents (a form was sent)
                value = None
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"the page never made {expression!r} true in {timeout} s")

    def type_into(self, selector: str, text: str):
        """Focuses the field and types `text` into it, as keyboard input."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def click(self, selector: str):
        """A left click in the middle of the element."""
        x, y = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            f".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self) -> np.ndarray:
        return _png_pixels(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def canvas_geometry(dom: str) -> dict:
    """Where the page drew the heat-map inside its canvas: left, top, cell, rows, columns."""
    match = re.search(r'<canvas id="heatmap"[^>]*data-geometry="([^"]*)"', dom)
    assert match, "the page drew no heat-map"
    return json.loads(match.group(1).replace("&quot;", '"'))


def heat_map_cells(image: np.ndarray, geometry: dict) -> np.ndarray:
    """The colour at the centre of each heat-map cell, [rows, columns, 3], found in a screenshot.

    The heat-map and its legend are the only viridis-coloured pixels of the page, and both start
    at the heat-map's top edge, the heat-map at the left: their bounding box gives its corner.
    """
    from matplotlib import colormaps

    viridis = (colormaps["viridis"](np.linspace(0, 1, 256))[:, :3] * 255).astype(np.float32)
    rows, columns = np.nonzero(np.ptp(image.astype(np.int16), axis=-1) > 40)  # coloured, not grey
    pixels = image[rows, columns].astype(np.float32)
    is_viridis = np.min(((pixels[:, None, :] - viridis[None, ::2, :]) ** 2).sum(-1), axis=1) < 15**2
    rows, columns = rows[is_viridis], columns[is_viridis]
    assert rows.size, "no heat-map colours in the screenshot"
    top, left, cell = rows.min(), columns.min(), geometry["cell"]
    centres_y = top + (np.arange(geometry["rows"]) + 0.5) * cell
    centres_x = left + (np.arange(geometry["columns"]) + 0.5) * cell
    return image[centres_y.astype(int)[:, None], centres_x.astype(int)[None, :]]
