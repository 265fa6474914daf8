"""Regenerate the README's screenshot of the web inspector from the live page.

    make screenshot          (or: .venv/bin/python tests/web_screenshot.py docs/web-inspector.png)

Serves the page on a free loopback port, opens it in Debian's Chromium through Playwright at a
1440x900 laptop viewport, loads the bundled example, compiles it, selects the
``rollback_target`` copy in the ledger (so its whole chain is highlighted) and saves a
full-page PNG. The browser tests run the same steps, so the picture cannot drift from the page.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1440, "height": 900}
DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "web-inspector.png"
SELECTED_ROW = '#ledger tbody tr[data-kind="state"][data-key="rollback_target"]'


def browser_problem() -> str | None:
    """Why the browser tests cannot run here, or ``None``."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


@contextlib.contextmanager
def launched_chromium() -> Iterator[Any]:
    """Debian's Chromium through Playwright, for a test's fixture: the test is skipped with the
    reason when it cannot run, and fails instead under ``TOMC_REQUIRE_BROWSER=1`` (CI)."""
    import pytest

    problem = browser_problem()
    if problem:
        if os.environ.get("TOMC_REQUIRE_BROWSER") == "1":
            pytest.fail(f"TOMC_REQUIRE_BROWSER=1 but {problem}")
        pytest.skip(f"browser tests need Chromium and Playwright: {problem}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


def capture_page(page, base_url: str, output: Path) -> None:
    """Drive an open Playwright ``page`` through the example and save the screenshot."""
    from playwright.sync_api import expect

    page.goto(base_url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    page.click("#load-example")
    expect(page.locator("#history")).not_to_have_value("")
    page.click("#compile")
    expect(page.locator("#results")).to_be_visible()
    page.click(f"{SELECTED_ROW} .row-select")
    expect(page.locator(f"{SELECTED_ROW}.selected")).to_have_count(1)
    page.evaluate("() => document.fonts.ready")
    output.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(output), full_page=True)


def capture(output: Path, *, browser=None) -> Path:
    """Serve the page, capture it into ``output`` and return the path.

    ``browser`` is an open Playwright browser to reuse (the tests pass theirs); without it,
    Chromium is launched and closed here.
    """
    if browser is None:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            try:
                return capture(output, browser=chromium)
            finally:
                chromium.close()
    from tomc.web._server import make_server

    with make_server("127.0.0.1", 0, quiet=True) as server:
        context = browser.new_context(viewport=VIEWPORT)
        try:
            capture_page(context.new_page(), server.url, output)
        finally:
            context.close()
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", nargs="?", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(
            f"screenshot: {CHROMIUM} is missing; install it with "
            "apt-get install chromium fonts-noto-cjk (as .ci/run does)",
            file=sys.stderr,
        )
        return 3
    try:
        import playwright  # noqa: F401
    except ImportError:
        print("screenshot: playwright is missing; run make lint first", file=sys.stderr)
        return 3
    path = capture(args.output)
    print(f"screenshot: wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
