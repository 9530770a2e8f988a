"""The HTML audit report: the ten questions in order as a timeline, the reply's blocks in the
order the user saw them (each with its kind and author), a verdict that says what failed, and
every stored value shown literally, never as markup or template code. In headless Chromium the
blocks read in the reply's order and the page holds no script."""

from __future__ import annotations

import asyncio
import io
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from turnframe_runtime import Audit, AuditCheck, render_audit_html
from turnframe_test import DeskHarness, ScriptedNarrator, ScriptedReviewer
from turnframe_test.demo import EMBEDDED, run_demo
from turnframe_test.understandings import act

HEADINGS = [
    "What the user sent",
    "What was on file (cases loaded)",
    "What the assistant understood",
    "Model calls",
    "Which record each request was about",
    "Rules applied and who authorized each action",
    "What was changed",
    "Which event backs each receipt",
    "What the user was shown",
    "How far the turn got",
]
SNEAKY = "<script>alert(1)</script> {{ 7*7 }} Grace Hopper"
BLOCKS = """nodes => nodes.map(n => ({
    index: n.dataset.blockIndex,
    id: n.dataset.blockId,
    kind: n.dataset.kind,
    author: n.dataset.author,
    badge: n.querySelector(".badge." + n.dataset.author)?.textContent,
    text: n.innerText,
    top: n.getBoundingClientRect().top,
}))"""


async def _demo_audits(*positions: int) -> list[Audit]:
    """Audits of the scripted travel conversation's turns at `positions` (0-based)."""
    return [audit for audit, _ in await _demo_turns(*positions)]


async def _demo_turns(*positions: int) -> list[tuple[Audit, list[str]]]:
    """Each audit with the block ids of the turn as the runtime returned it."""
    desk = DeskHarness(outbox=EMBEDDED)
    turns = await run_demo(io.StringIO(), desk=desk)
    return [
        (
            await desk.runtime.audit(desk.account_id, turns[position].replay_token),
            [block.block_id for block in turns[position].blocks],
        )
        for position in positions
    ]


def _shown(block: dict[str, Any]) -> list[str]:
    """The words a block shows the user: its title, text or name, and its options' labels."""
    words = [block[key] for key in ("title", "text", "name") if block.get(key)]
    return words + [option["label"] for option in block.get("options", [])]


class _Elements(HTMLParser):
    """The attributes of every element carrying `data-block-index`, and the text of every element
    of class `user-text`, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[dict[str, str | None]] = []
        self.user_texts: list[str] = []
        self._in_user_text = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if "data-block-index" in found:
            self.blocks.append(found)
        if "user-text" in (found.get("class") or "").split():
            self._in_user_text = True
            self.user_texts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_user_text = False

    def handle_data(self, data: str) -> None:
        if self._in_user_text:
            self.user_texts[-1] += data


def _parsed(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    parser.close()
    return parser


async def test_the_report_shows_the_blocks_in_order_with_their_kinds_and_authors() -> None:
    [audit] = await _demo_audits(1)
    blocks = audit.what_was_returned["blocks"]
    assert [b["kind"] for b in blocks] == ["receipt", "transition", "interaction"]
    html = render_audit_html(audit)

    found = _parsed(html).blocks
    assert [b["data-block-index"] for b in found] == [str(i) for i in range(len(blocks))]
    assert [b["data-block-id"] for b in found] == [b["block_id"] for b in blocks]
    assert [(b["data-kind"], b["data-author"]) for b in found] == [
        (b["kind"], b["author"]) for b in blocks
    ]
    places = [html.index(f"<h2>{heading}</h2>") for heading in HEADINGS]
    assert places == sorted(places)
    assert "Verified: every digest matches" in html and "NOT verified" not in html
    for block in blocks:
        assert all(words in html for words in _shown(block))


async def test_the_report_is_self_contained() -> None:
    [audit] = await _demo_audits(0)
    html = render_audit_html(audit).lower()
    for reference in ("<script", "<link", "<img", "src=", "href=", "url(", "@import"):
        assert reference not in html


async def test_user_words_that_look_like_markup_or_template_code_show_literally() -> None:
    desk = DeskHarness()
    desk.ready_trip()
    turn = await desk.say(
        SNEAKY, act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    audit = await desk.runtime.audit(desk.account_id, turn.replay_token)
    assert audit.what_the_user_sent["input"]["text"] == SNEAKY
    html = render_audit_html(audit)

    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; {{ 7*7 }} Grace Hopper" in html
    assert _parsed(html).user_texts == [SNEAKY]


async def test_the_guard_findings_show_beside_the_model_prose_that_replaced_the_draft() -> None:
    narrator = ScriptedNarrator().transition_text("Sent! The airline accepted it.")
    narrator.transition_text("That could not be done, so nothing has changed.")
    desk = DeskHarness(narrator=narrator, reviewer=ScriptedReviewer.passing(), narration="free")
    desk.ready_trip(locked=True)
    turn = await desk.say(
        "Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace", name="Grace Hopper")
    )
    audit = await desk.runtime.audit(desk.account_id, turn.replay_token)
    html = render_audit_html(audit)

    found = _parsed(html).blocks
    assert [(b["data-kind"], b["data-author"]) for b in found] == [
        ("notice", "server"),
        ("transition", "model"),
    ]
    assert "That could not be done, so nothing has changed." in html
    assert "Sent! The airline accepted it." not in html
    for finding in audit.what_was_returned["prose_findings"]:
        assert finding["rule"] in html and finding["code"] in html
    assert "submission.stated" in html and "acceptance.stated" in html
    assert "refused</strong>: trip.locked" in html


async def test_a_failed_check_shows_not_verified_and_what_failed() -> None:
    [audit] = await _demo_audits(1)
    failing = audit.with_checks([AuditCheck(name="x", passed=False, detail="y")])
    assert not failing.verified
    html = render_audit_html(failing)

    assert "NOT verified" in html
    assert "<li>x: y</li>" in html
    assert "Verified: every digest matches" not in html


@pytest.fixture
def audited() -> list[tuple[Audit, list[str]]]:
    """Turns with receipts, an answer and a transition; a receipt, a transition and a card; a
    notice. (Made before the browser starts: playwright's sync API runs its own event loop.)"""
    return asyncio.run(_demo_turns(0, 1, 4))


def test_in_chromium_the_blocks_read_in_the_reply_order(
    audited: list[tuple[Audit, list[str]]], browser: Any, tmp_path: Path
) -> None:
    page = browser.new_page()
    audits = [audit for audit, _ in audited]
    for number, (audit, returned) in enumerate(audited):
        report = tmp_path / f"report{number}.html"
        report.write_text(render_audit_html(audit), encoding="utf-8")
        page.goto(report.as_uri())

        shown = page.eval_on_selector_all("[data-block-index]", BLOCKS)
        blocks = audit.what_was_returned["blocks"]
        assert [b["index"] for b in shown] == [str(i) for i in range(len(blocks))]
        assert [b["id"] for b in shown] == returned  # the order the runtime returned them in
        tops = [b["top"] for b in shown]
        assert tops == sorted(tops) and len(set(tops)) == len(tops)  # and on screen, top down
        assert [(b["kind"], b["author"], b["badge"]) for b in shown] == [
            (b["kind"], b["author"], b["author"]) for b in blocks
        ]
        for element, block in zip(shown, blocks, strict=True):
            words = _shown(block)
            assert words and all(w in element["text"] for w in words), (element, block)
        assert page.inner_text("#verdict").startswith("Verified: every digest matches")
        assert page.locator("script").count() == 0
        headings = page.locator("ol.timeline h2").all_inner_texts()
        assert headings == HEADINGS
    kinds = {b["kind"] for audit in audits for b in audit.what_was_returned["blocks"]}
    assert kinds == {"receipt", "notice", "answer", "transition", "interaction"}
