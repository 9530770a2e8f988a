"""The start check sees every way a locale can lack copy: a plural form left empty, a translation
that drops or invents a placeholder, a template that does not parse; and it does not cry wolf
over a message with a context. Amounts are stated digit for digit."""

from __future__ import annotations

from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo

from turnframe_runtime import CopyGap, CopyRenderError, TemplateCopy
from turnframe_test.copykit import write_catalog


def _plural_catalog(root: Path, forms: tuple[str, str]) -> TemplateCopy:
    shop = write_catalog(
        root,
        "shop",
        {
            "shop.items": "{% trans count=count %}One item{% pluralize %}"
            "{{ count }} items{% endtrans %}"
        },
    )
    catalog = Catalog(locale="de", domain="shop")
    catalog.add(("One item", "%(count)s items"), forms)
    where = root / "locale" / "de" / "LC_MESSAGES"
    where.mkdir(parents=True)
    with (where / "shop.mo").open("wb") as handle:
        write_mo(handle, catalog)
    return TemplateCopy(shop)


def test_every_plural_form_must_be_translated(tmp_path: Path) -> None:
    half = _plural_catalog(tmp_path / "half", ("Ein Artikel", ""))
    assert half.missing(["de"]) == [CopyGap("de", "shop.items", "One item")]
    whole = _plural_catalog(tmp_path / "whole", ("Ein Artikel", "%(count)s Artikel"))
    assert whole.missing(["de"]) == []
    assert whole.render("shop.items", "de", {"count": 3}).text == "3 Artikel"
    assert whole.render("shop.items", "de", {"count": 1}).text == "Ein Artikel"


def test_a_translation_must_name_the_placeholders_its_source_does(tmp_path: Path) -> None:
    source = {"shop.refund": "{% trans amount=amount %}Refund {{ amount }}?{% endtrans %}"}
    dropped = write_catalog(
        tmp_path / "dropped", "shop", source, {"it": {"Refund %(amount)s?": "Rimborsare?"}}
    )
    assert TemplateCopy(dropped).missing(["it"]) == [
        CopyGap("it", "shop.refund", "Refund %(amount)s?", "placeholders differ")
    ]
    invented = write_catalog(
        tmp_path / "invented", "shop", source, {"it": {"Refund %(amount)s?": "%(total)s?"}}
    )
    [gap] = TemplateCopy(invented).missing(["it"])
    assert gap.problem == "placeholders differ"
    assert 'placeholders differ: "Refund %(amount)s?"' in str(gap)


def test_a_message_with_a_context_is_found_in_its_catalog(tmp_path: Path) -> None:
    door = write_catalog(
        tmp_path / "door", "door", {"door.close": '{% trans "door" %}Close{% endtrans %}'}
    )
    catalog = Catalog(locale="it", domain="door")
    catalog.add("Close", "Chiudi", context="door")
    where = tmp_path / "door" / "locale" / "it" / "LC_MESSAGES"
    where.mkdir(parents=True)
    with (where / "door.mo").open("wb") as handle:
        write_mo(handle, catalog)
    copy = TemplateCopy(door)
    assert copy.missing(["it"]) == []
    assert copy.render("door.close", "it", {}).text == "Chiudi"
    (where / "door.mo").unlink()
    assert TemplateCopy(door).missing(["it"]) == [CopyGap("it", "door.close", "Close")]


def test_a_catalog_written_in_another_language_does_not_exempt_the_librarys(tmp_path: Path) -> None:
    """An adopter writing its templates in French makes French its templates' own language,
    not the library's: the library's English templates still need French translations."""
    french = write_catalog(
        tmp_path / "fr", "boutique", {"boutique.hello": "{% trans %}Bonjour{% endtrans %}"},
        {"en": {"Bonjour": "Hello"}}, source_locale="fr",
    )  # fmt: skip
    gaps = TemplateCopy(french).missing(["en", "fr"])
    assert all(gap.locale == "fr" for gap in gaps)
    assert {gap.template_id for gap in gaps} >= {"turnframe.notice.command_failed"}
    assert "boutique.hello" not in {gap.template_id for gap in gaps}


def test_a_template_that_does_not_parse_is_named_at_start(tmp_path: Path) -> None:
    broken = write_catalog(tmp_path / "broken", "shop", {"shop.broken": "{% trans %}Hi{% endif %}"})
    gaps = [gap for gap in TemplateCopy(broken).missing(["en"]) if gap.template_id == "shop.broken"]
    assert [gap.problem for gap in gaps] == ["syntax error"]


@pytest.mark.parametrize(
    ("amount", "locale", "shown"),
    [("12.345", "it", "12,345\xa0€"), ("0.001", "de", "0,001\xa0€"), ("12.5", "en", "€12.50")],
)
def test_money_is_never_rounded(tmp_path: Path, amount: str, locale: str, shown: str) -> None:
    shop = write_catalog(tmp_path / "shop", "shop", {"shop.amount": "{{ amount|money('EUR') }}"})
    assert TemplateCopy(shop).render("shop.amount", locale, {"amount": amount}).text == shown


@pytest.mark.parametrize("amount", ["NaN", "Infinity", "-inf", "twelve", True])
def test_a_value_that_is_not_a_finite_number_cannot_be_money(tmp_path: Path, amount) -> None:
    shop = write_catalog(tmp_path / "shop", "shop", {"shop.amount": "{{ amount|money('EUR') }}"})
    with pytest.raises(CopyRenderError):
        TemplateCopy(shop).render("shop.amount", "it", {"amount": amount})
