"""What a sentence of server copy costs to render: a jinja2 template in the sandbox, translated
through a gettext catalog, with babel formatting, against the `str.format` of a Python string it
replaced (the baseline, measured in the same run).

Rows (µs per sentence, best of 5 rounds of N renders each, ratio to the baseline):
- str.format baseline: "Traveller's name set to {name}" formatted;
- template, en / it / de: `trip.name_set.title` through `TemplateCopy` (a copy reference built
  and reused, as the runtime does);
- template with money, it: a refund confirmation formatting 12.50 EUR with babel;
- first render in a new locale: what a process pays once per locale (environment and catalogs).

Run: `.venv/bin/python benchmarks/copy_render.py [--renders N]`.
"""

from __future__ import annotations

import argparse
import string
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from turnframe_runtime import TemplateCopy
from turnframe_test.copykit import write_catalog
from turnframe_test.sample.travel import TRIP_COPY


def _best(render: Callable[[], object], count: int) -> float:
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(count):
            render()
        rounds.append((time.perf_counter() - start) / count * 1e6)
    return min(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--renders", type=int, default=20_000)
    count = parser.parse_args().renders
    formatter = string.Formatter()
    params = {"name": "\u201cAda Lovelace\u201d"}
    base = _best(lambda: formatter.vformat("Traveller's name set to {name}", (), params), count)
    copy = TemplateCopy(TRIP_COPY)
    with tempfile.TemporaryDirectory() as root:
        refunds = write_catalog(
            Path(root),
            "refunds",
            {
                "refund.confirm": "{% trans amount=amount|money(currency), order=order %}"
                "Refund {{ amount }} for order {{ order }}?{% endtrans %}"
            },
            {"it": {"Refund %(amount)s for order %(order)s?": "Rimborsare %(amount)s, %(order)s?"}},
        )
        money = TemplateCopy(refunds, TRIP_COPY)
        money_params = {"amount": "12.50", "currency": "EUR", "order": "A-1"}
        rows = [("str.format baseline", base)]
        for locale in ("en", "it", "de"):
            copy.render("trip.name_set.title", locale, params)  # the locale's first render
            rows.append(
                (
                    f"template, {locale}",
                    _best(
                        lambda locale=locale: copy.render("trip.name_set.title", locale, params),
                        count,
                    ),
                )
            )
        money.render("refund.confirm", "it", money_params)
        rows.append(
            (
                "template with money, it",
                _best(lambda: money.render("refund.confirm", "it", money_params), count),
            )
        )
        start = time.perf_counter()
        TemplateCopy(TRIP_COPY).render("trip.name_set.title", "de", params)
        rows.append(("first render in a new locale", (time.perf_counter() - start) * 1e6))
    print(f"{'row':<32}{'µs/sentence':>14}{'ratio':>10}")
    for name, micros in rows:
        print(f"{name:<32}{micros:>14.2f}{micros / base:>10.1f}")


if __name__ == "__main__":
    main()
