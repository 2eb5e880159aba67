"""Headless Debian Chromium opening a report from disk: a screenshot and the rendered DOM."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is missing: Debian's chromium package (.ci/setup --test installs it)",
)


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on ``page`` with a fresh profile (``--screenshot=…``, ``--dump-dom``)."""
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
        page.as_uri(),
    ]
    # The timeout only stops a hung browser from hanging the suite.
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done


def assert_not_blank(screenshot: Path, size: tuple[int, int]) -> None:
    """The screenshot has the window's size and is not a page of one colour with a few specks."""
    from PIL import Image

    assert screenshot.is_file()
    with Image.open(screenshot) as image:
        assert image.size == size
        colours = image.convert("RGB").getcolors(maxcolors=1 << 24)
    assert colours is not None and len(colours) > 50
    # The most common colour covers under 98% of the pixels.
    assert max(n for n, _ in colours) < 0.98 * size[0] * size[1]


# Writes how far the page reaches past the window's width into the DOM, once laid out.
_PROBE = (
    "<script>addEventListener('load', () => document.body.setAttribute('data-overflow', "
    "document.documentElement.scrollWidth - document.documentElement.clientWidth))</script>"
)


def page_overflow(page: Path, profile: Path, width: int) -> int:
    """How many CSS pixels ``page`` reaches past a window ``width`` pixels wide (0: it fits),
    measured by Chromium's layout. The report forbids scripts, so a copy beside the profile
    carries a probe script and a policy that lets it run."""
    html = page.read_text(encoding="utf-8")
    assert "default-src 'none';" in html and "</body>" in html
    html = html.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';")
    profile.mkdir(parents=True, exist_ok=True)
    probe = profile / f"probe-{page.name}"
    probe.write_text(html.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    dom = chromium(
        probe, profile / "profile", f"--window-size={width},900", "--virtual-time-budget=2000",
        "--dump-dom",
    ).stdout  # fmt: skip
    found = re.search(r'data-overflow="(-?\d+)"', dom)
    assert found, "the probe did not run"
    return int(found.group(1))
