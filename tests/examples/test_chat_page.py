"""The reference chat page in headless Chromium: typed words get a card, a click on its confirm
button gets a receipt, and a reload shows the same blocks (kinds, ids, authors, texts) in the
same order, from the store."""

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


@pytest.mark.slow
def test_a_card_clicked_in_the_page_gets_a_receipt_and_a_reload_shows_the_same_blocks(
    browser, sqlite_chat_server
):
    page = browser.new_page()
    page.goto(sqlite_chat_server.url + "/")
    page.wait_for_selector("body[data-loaded]")
    conversation = page.url.split("?c=", 1)[1]

    page.fill("#message", "cancel my trip")
    page.press("#message", "Enter")
    confirm = page.locator('.block[data-kind="interaction"] button[data-option-id="opt_confirm"]')
    confirm.wait_for()
    page.wait_for_selector("section.turn[data-status] >> nth=0")
    page.wait_for_function("() => !document.querySelector('#composer button').disabled")
    confirm.click()
    page.wait_for_selector('.block[data-kind="receipt"]')
    page.wait_for_function(
        "() => document.querySelectorAll('section.turn[data-status]').length == 2"
    )
    streamed = page.eval_on_selector_all(".block", BLOCKS)

    page.reload()
    page.wait_for_selector("body[data-loaded]")
    reloaded = page.eval_on_selector_all(".block", BLOCKS)

    assert page.url.endswith(f"?c={conversation}")
    assert reloaded == streamed
    kinds = [(b["kind"], b["author"]) for b in streamed]
    assert kinds == [
        ("transition", "model"),
        ("interaction", "server"),
        ("receipt", "server"),
        ("transition", "model"),
    ]
    receipt = next(b for b in streamed if b["kind"] == "receipt")
    assert receipt["badge"] == "server"
    assert "Trip withdrawn" in receipt["text"]
    assert all(b["id"].startswith("blk_") for b in streamed)
    assert page.locator(".user").all_inner_texts() == ["cancel my trip", "chose “Confirm”"]
