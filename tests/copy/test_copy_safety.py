"""Words from outside (a user's, a domain's) are data inside server copy: a value that looks like
template code or a gettext placeholder is shown literally, never run; and templates render in a
sandbox, so a template cannot reach into Python either."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnframe_core import AnswerBlock, ReceiptBlock
from turnframe_runtime import CopyRenderError, TemplateCopy
from turnframe_test.copykit import write_catalog
from turnframe_test.domains.travel import TRIP_COPY
from turnframe_test.understandings import act, question

CODE = ["{{ 7*7 }}", "{% raw %}", "{% endraw %}", "%(name)s", "{{ ''.__class__ }}", "{#"]


@pytest.mark.parametrize("locale", ["en", "it", "de"])
@pytest.mark.parametrize("value", CODE)
def test_a_parameter_that_looks_like_code_renders_literally(locale: str, value: str) -> None:
    copy = TemplateCopy(TRIP_COPY)
    rendered = copy.render("trip.name_set.title", locale, {"name": value})
    assert value in rendered.text
    assert "49" not in rendered.text and "<class" not in rendered.text


async def test_user_words_with_template_syntax_stay_literal_through_a_turn(desk) -> None:
    desk.trip(label="Trip {{ 7*7 }} {% raw %}")
    name = "Ada {% raw %} Byron"
    email = "x{{7*7}}@example.com"
    turn = await desk.say(
        f"I am {name}, email {email}. What do you have?",
        act("a1", "trip.set_name", "h1", name, name=name),
        act("a2", "trip.set_email", "h1", email, email=email),
        question("q1", "What do you have?", "h1"),
        locale="it",
    )
    titles = [b.title for b in turn.blocks if isinstance(b, ReceiptBlock)]
    assert titles == [
        "Nome del viaggiatore impostato: \u201cAda {% raw %} Byron\u201d",
        "Email impostata: \u201cx{{7*7}}@example.com\u201d",
    ]
    [answer] = [b for b in turn.blocks if isinstance(b, AnswerBlock)]
    assert "\u201cTrip {{ 7*7 }} {% raw %}\u201d" in answer.text
    assert "49" not in answer.text
    reloaded = await desk.runtime.load_turn(desk.account_id, turn.turn_id)
    assert reloaded.to_stored_json() == turn.to_stored_json()


def test_a_template_cannot_reach_into_python(tmp_path: Path) -> None:
    sneaky = write_catalog(
        tmp_path / "sneaky",
        "sneaky",
        {"sneaky.escape": "{{ ''.__class__.__mro__[1].__subclasses__() }}"},
    )
    with pytest.raises(CopyRenderError):
        TemplateCopy(sneaky).render("sneaky.escape", "en", {})


def test_a_missing_parameter_is_an_error_not_a_blank(tmp_path: Path) -> None:
    with pytest.raises(CopyRenderError):
        TemplateCopy(TRIP_COPY).render("trip.name_set.title", "en", {})
