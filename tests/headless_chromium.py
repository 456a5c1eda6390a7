"""Opening pages as a person would: Debian's chromium, headless (a helper of the browser tests).

Install it with `apt-get install -y chromium`; without it the tests that need it are skipped
with that reason.
"""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

CHROMIUM = next((path for path in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if path), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium installed (Debian: apt-get install -y chromium); the browser tests need it")
WINDOW = (1280, 1000)


def _chromium(profile_dir, *arguments, timeout=120) -> str:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--force-device-scale-factor=1", f"--window-size={WINDOW[0]},{WINDOW[1]}",
               f"--user-data-dir={profile_dir}", "--virtual-time-budget=10000", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True).stdout


def dump_dom(url: str, profile_dir) -> str:
    """The page's DOM after its scripts ran."""
    return _chromium(profile_dir, "--dump-dom", url)


def screenshot(url: str, path, profile_dir) -> np.ndarray:
    """The page as displayed, [height, width, 3] uint8."""
    from matplotlib import image

    _chromium(profile_dir, f"--screenshot={path}", url)
    return (image.imread(str(path))[..., :3] * 255).round().astype(np.uint8)


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
    is_viridis = np.min(((pixels[:, None, :] - viridis[None, ::2, :]) ** 2).sum(-1), axis=1) < 15 ** 2
    rows, columns = rows[is_viridis], columns[is_viridis]
    assert rows.size, "no heat-map colours in the screenshot"
    top, left, cell = rows.min(), columns.min(), geometry["cell"]
    centres_y = top + (np.arange(geometry["rows"]) + 0.5) * cell
    centres_x = left + (np.arange(geometry["columns"]) + 0.5) * cell
    return image[centres_y.astype(int)[:, None], centres_x.astype(int)[None, :]]
