"""A template of the plainest shape renders through a precompiled plan instead of a jinja2
context (`turnframe_runtime.copy._plan`): the plan writes exactly what the sandboxed template
writes, for every template of the library's and the sample domain's catalogs, in every locale,
with their sample parameters and with each parameter set to every constant the template
compares it with; where a plan cannot render, jinja2 does, and fails as it always failed."""

from __future__ import annotations

import decimal
import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from babel.numbers import format_currency
from jinja2 import meta, nodes

from turnframe_runtime import CopyRenderError, TemplateCopy
from turnframe_runtime.copy import as_params
from turnframe_runtime.copy._plan import plan
from turnframe_test.copykit import write_catalog
from turnframe_test.sample.travel import TRIP_COPY

LOCALES = ("en", "it", "de", "it-CH")


def _outcome(render: Any, params: Mapping[str, Any]) -> tuple[str, str]:
    try:
        return ("text", render(dict(params)))
    except Exception as error:
        return ("error", type(error).__name__)


def _variants(copy: TemplateCopy, template_id: str) -> list[dict[str, Any]]:
    """The declared samples, and each with every parameter set in turn to each constant the
    template holds, to a blank, text to fold, a number, an amount and a date (so every branch
    is taken), or left out; and no parameters at all."""
    env: Any = copy._locale("en").env
    tree = env.parse(copy._shared.sources[template_id])
    names = sorted(meta.find_undeclared_variables(tree) - {"gettext"})
    constants = {node.value for node in tree.find_all(nodes.Const) if isinstance(node.value, str)}
    declared = copy._declared_samples().get(template_id) or [dict.fromkeys(names, "sample")]
    found = [as_params(sample) for sample in declared]
    values = [*sorted(constants), "", "x y", "a\n  b ", 3, decimal.Decimal("12.50"), "2027-03-14"]
    for sample, name, value in itertools.product(declared, names, values):
        found.append(as_params({**sample, name: value}))
        found.append({**sample, name: value})  # as a caller may pass it, not made data
    for sample, name in itertools.product(declared, names):
        found.append(as_params({key: v for key, v in sample.items() if key != name}))
    found.append({})
    return found


@pytest.mark.parametrize("locale", LOCALES)
def test_every_plan_writes_what_jinja2_writes(locale: str) -> None:
    copy = TemplateCopy(TRIP_COPY)
    local = copy._locale(copy.negotiate(locale))
    planned = rendered = 0
    for template_id in copy.template_ids():
        found = plan(local.env, copy._shared.sources[template_id], local.gettext)
        if found is None:
            continue
        planned += 1
        template = local.env.get_template(template_id)
        for params in _variants(copy, template_id):
            by_plan = _outcome(found, params)
            if by_plan[0] == "text":  # a plan that renders writes what jinja2 writes
                rendered += 1
                assert by_plan == _outcome(template.render, params), (template_id, params)
            # a plan that gives up leaves the template to jinja2 (the next test)
    # nearly every template is plain enough to have a plan, and plans render most variants
    assert planned >= len(copy.template_ids()) - 2
    assert rendered > 500


def test_the_copy_renders_with_plans_as_it_did_with_jinja2_alone() -> None:
    """`TemplateCopy.render` (plans first) against the templates rendered by jinja2 and folded
    as `render` folds them, for every template, locale and variant."""
    copy = TemplateCopy(TRIP_COPY)
    for locale, template_id in itertools.product(LOCALES, copy.template_ids()):
        template = copy._locale(copy.negotiate(locale)).env.get_template(template_id)
        for params in _variants(copy, template_id):
            expected = _outcome(template.render, params)
            try:
                got = ("text", copy.render(template_id, locale, params).text)
            except CopyRenderError as error:
                got = ("error", type(error.__cause__).__name__)
            if expected[0] == "text":
                expected = ("text", re.sub(r"[ \t\r\n\f\v]+", " ", expected[1]).strip(" "))
            assert got == expected, (template_id, locale, params)


def _one(tmp_path: Path, source: str) -> TemplateCopy:
    return TemplateCopy(write_catalog(tmp_path, "probe", {"probe": source}))


def test_a_template_that_reads_attributes_has_no_plan_and_the_sandbox_still_refuses(
    tmp_path: Path,
) -> None:
    copy = _one(tmp_path, "{{ name.__class__.__mro__ }}")
    with pytest.raises(CopyRenderError, match="SecurityError"):
        copy.render("probe", "en", {"name": "x"})
    assert copy._shared.ready[("probe", "en")][0] is None


def test_a_missing_parameter_fails_as_it_did(tmp_path: Path) -> None:
    copy = _one(tmp_path, "{% trans %}Hello {{ name }}{% endtrans %}")
    assert copy.render("probe", "en", {"name": "Ada"}).text == "Hello Ada"
    assert copy._shared.ready[("probe", "en")][0] is not None
    with pytest.raises(CopyRenderError, match="UndefinedError"):
        copy.render("probe", "en", {})


def test_a_parameter_named_like_a_global_is_left_to_jinja2(tmp_path: Path) -> None:
    """A parameter `gettext` shadows the global in jinja2's context; a plan does not guess."""
    copy = _one(tmp_path, "{% trans %}Hello {{ name }}{% endtrans %}")
    with pytest.raises(CopyRenderError, match="TypeError"):  # jinja2 calls the string
        copy.render("probe", "en", {"name": "Ada", "gettext": "not callable"})


def test_a_global_the_parameters_lack_is_resolved_by_jinja2(tmp_path: Path) -> None:
    copy = _one(tmp_path, "{% if range is defined %}yes{% else %}no{% endif %}")
    assert copy.render("probe", "en", {}).text == "yes"
    assert copy.render("probe", "en", {"range": None}).text == "yes"


def test_a_percent_sign_formats_as_the_i18n_extension_formats_it(tmp_path: Path) -> None:
    copy = _one(tmp_path, "{% trans %}100% of {{ n }}{% endtrans %}")
    template = copy._locale("en").env.get_template("probe")
    assert copy.render("probe", "en", {"n": 3}).text == template.render(n=3)


def test_amounts_are_formatted_digit_for_digit_whatever_the_cache_holds(tmp_path: Path) -> None:
    copy = _one(tmp_path, "{% trans a=amount|money('EUR') %}Pay {{ a }}{% endtrans %}")
    first = copy.render("probe", "it", {"amount": "12.5"}).text
    second = copy.render("probe", "it", {"amount": "12.51"}).text
    third = copy.render("probe", "it", {"amount": decimal.Decimal("12.513")}).text
    assert [first, second, third] == [
        "Pay " + format_currency(decimal.Decimal(a), "EUR", locale="it", decimal_quantization=False)
        for a in ("12.5", "12.51", "12.513")
    ]
    assert third == "Pay 12,513\xa0€"
