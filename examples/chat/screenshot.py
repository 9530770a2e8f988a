"""`python -m examples.chat.screenshot [--out chat.png]`: start the chat app on a fresh SQLite
file, drive one exchange in headless Chromium (a question, a rebooking, its confirmation and the
airline's answer) and save a screenshot of the page.

Needs the `dev` extra (playwright) and a Chromium on the machine (Debian: `apt-get install
chromium`); playwright drives that browser, it downloads none.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from examples.chat.background import BackgroundServer

CHROMIUM = "/usr/bin/chromium"


def take(out: Path, chromium: str = CHROMIUM) -> Path:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        database = f"sqlite+aiosqlite:///{Path(folder) / 'chat.db'}"
        with BackgroundServer(database) as server:
            browser = playwright.chromium.launch(
                executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
            )
            try:
                page = browser.new_page(viewport={"width": 820, "height": 1100})
                page.goto(server.url + "/?c=conv_screenshot")
                page.wait_for_selector("body[data-loaded]")
                for text in ("what is on file?", "rebook the outbound"):
                    page.fill("#message", text)
                    page.press("#message", "Enter")
                    page.wait_for_function(
                        "() => !document.querySelector('#composer button').disabled"
                    )
                page.click('.block[data-kind="interaction"] button[data-option-id="opt_rebook"]')
                # the airline's answer arrives through the outbox as a turn the server writes
                page.wait_for_function(
                    "() => document.querySelectorAll('section.turn[data-status]').length >= 4",
                    timeout=20_000,
                )
                page.screenshot(path=str(out), full_page=True)
            finally:
                browser.close()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.chat.screenshot", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("chat.png"))
    parser.add_argument("--chromium", default=CHROMIUM, help=f"the browser (default {CHROMIUM})")
    args = parser.parse_args(argv)
    print(take(args.out, args.chromium))


if __name__ == "__main__":
    main()
