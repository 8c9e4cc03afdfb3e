"""A page opened in a real headless browser (Debian's chromium; .ci/run installs it, so in
CI it must run): the page is read with a probe script in it, which leaves what it found as
JSON in the root element's `data-probe` attribute, and chromium prints the DOM."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists()
                                        else None)


def probed(page: Path, profile: Path, window: str = "1280,2000") -> dict[str, Any]:
    """What the probe in `page` (a file) left in `data-probe`, the browser's own state in
    `profile`; skipped where chromium is missing, except in CI."""
    if CHROMIUM is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing in CI: .ci/run should have installed it")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--hide-scrollbars", f"--window-size={window}",
         f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    match = re.search(r'<html[^>]*\sdata-probe="([^"]*)"', result.stdout)
    assert match, result.stdout[:2000]
    probe: dict[str, Any] = json.loads(html.unescape(match.group(1)))
    return probe
