"""The reference chat page in headless Chromium: typed words get a card, a click on its rebook
button gets a receipt, the airline's answer arrives as a turn the server writes, delivered by the
conversation's feed (one EventSource, no polling, no reload), and a reload shows the same blocks
(kinds, ids, authors, texts) in the same order, from the store."""

from __future__ import annotations

import pytest

BLOCKS = """nodes => nodes.map(n => ({
    turn: n.closest("section.turn").dataset.turnId,
    kind: n.dataset.kind,
    id: n.dataset.blockId,
    author: n.dataset.author,
    badge: n.querySelector(".badge." + n.dataset.author)?.textContent,
    text: n.textContent,
}))"""

#: at least n stored turns shown (the airline may answer before the click's own reply is seen)
STORED_TURNS = "n => document.querySelectorAll('section.turn[data-status]').length >= n"
#: n exchanges, each placed by its feed sequence
FED = "n => document.querySelectorAll('article.exchange[data-sequence]').length == n"
IDLE = "() => !document.querySelector('#composer button').disabled"


@pytest.mark.slow
def test_a_rebooking_clicked_in_the_page_is_answered_through_the_feed_and_reloads_the_same(
    browser, sqlite_chat_server
):
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(sqlite_chat_server.url + "/")
    page.wait_for_selector("body[data-loaded]")
    conversation = page.url.split("?c=", 1)[1]

    page.fill("#message", "rebook the outbound")
    page.press("#message", "Enter")
    rebook = page.locator('.block[data-kind="interaction"] button[data-option-id="opt_rebook"]')
    rebook.wait_for()
    page.wait_for_function(STORED_TURNS, arg=1)
    page.wait_for_function(IDLE)
    rebook.click()
    page.wait_for_function(STORED_TURNS, arg=2)
    page.wait_for_selector('section.turn[data-status] >> nth=1 >> .block[data-kind="receipt"]')
    # the airline's answer: written by the server after the click's reply, shown by the feed
    page.wait_for_function(STORED_TURNS, arg=3, timeout=30_000)
    page.wait_for_function(FED, arg=3)
    page.wait_for_function(IDLE)
    # a turn the page did not post may send one request (what the user said for it), at once
    page.wait_for_timeout(500)
    asked = len(requests)
    page.wait_for_timeout(3_500)  # longer than the 3 s the page used to poll at
    quiet = requests[asked:]
    streamed = page.eval_on_selector_all(".block", BLOCKS)
    order = page.eval_on_selector_all("article.exchange", "ns => ns.map(n => n.dataset.turnId)")
    said = page.locator(".user").all_inner_texts()

    page.reload()
    page.wait_for_selector("body[data-loaded]")
    page.wait_for_function(STORED_TURNS, arg=3)
    page.wait_for_function(FED, arg=3)  # the feed, read again from its start, placed them all
    reloaded = page.eval_on_selector_all(".block", BLOCKS)

    assert page.url.endswith(f"?c={conversation}")
    assert reloaded == streamed
    assert page.eval_on_selector_all("article.exchange", "ns => ns.map(n => n.dataset.turnId)") == (
        order
    )
    assert (
        page.locator(".user").all_inner_texts()
        == said
        == [
            "rebook the outbound",
            "chose “Rebook”",
        ]
    )
    assert [(b["kind"], b["author"]) for b in streamed] == [
        ("receipt", "server"),  # rebooking prepared
        ("transition", "model"),
        ("interaction", "server"),  # Rebook / Keep my flight
        ("receipt", "server"),  # sent to the airline
        ("transition", "model"),
        ("receipt", "server"),  # the airline's answer, in the turn the server wrote
        ("transition", "server"),
    ]
    assert all(b["badge"] == b["author"] for b in streamed)
    assert "airline rebooked the outbound flight" in streamed[5]["text"]
    assert len({b["turn"] for b in streamed}) == 3
    assert all(b["id"].startswith("blk_") for b in streamed)
    assert quiet == []  # nothing asked for while the page waits: the feed brings what comes
    before_reload = requests[: requests.index(page.url)]
    assert len([url for url in before_reload if "/feed" in url]) == 1  # one EventSource
