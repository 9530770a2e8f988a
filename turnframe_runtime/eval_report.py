"""The report of a `turnframe eval` run: text for a terminal, JSON for a machine, one HTML page
for a person (`eval_templates/report.html.j2`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from turnframe_runtime.evaluation import CaseResult

__all__ = ["render_html", "render_text", "report_json"]

_TEMPLATES: Final = Path(__file__).resolve().parent / "eval_templates"
_ENVIRONMENT: Final = Environment(
    loader=FileSystemLoader(_TEMPLATES),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _tokens(result: CaseResult) -> str:
    if result.usage is None:
        return "n/a"
    return f"{result.usage.input_tokens}+{result.usage.output_tokens}"


def _cost(result: CaseResult) -> str:
    return "n/a" if result.cost_usd is None else f"${result.cost_usd:.6f}"


def _latency(result: CaseResult) -> str:
    return "n/a" if result.latency_ms is None else f"{result.latency_ms} ms"


def _summary(results: Sequence[CaseResult]) -> dict[str, Any]:
    failed = sum(not r.passed for r in results)
    costs = [r.cost_usd for r in results]
    return {
        "cases": len(results),
        "passed": len(results) - failed,
        "failed": failed,
        "cost_usd": None if not costs or None in costs else sum(c or 0.0 for c in costs),
    }


def render_text(results: Sequence[CaseResult], *, corpus: str, app: str) -> str:
    """One line per case (verdict, id, locale, latency, tokens in+out, cost), each reason
    under its failed case, and a summary line."""
    width = max(len(r.case_id) for r in results) if results else 0
    lines = [f"turnframe eval: {corpus} through {app}"]
    for r in results:
        lines.append(
            f"{'PASS' if r.passed else 'FAIL'}  {r.case_id:<{width}}  {r.locale:<5}"
            f"  {_latency(r):>8}  tokens {_tokens(r):>9}  cost {_cost(r)}"
        )
        lines.extend(f"      - {reason}" for reason in r.reasons)
    summary = _summary(results)
    total = "n/a" if summary["cost_usd"] is None else f"${summary['cost_usd']:.6f}"
    lines.append(
        f"{summary['cases']} cases: {summary['passed']} passed, {summary['failed']} failed;"
        f" cost {total}"
    )
    return "\n".join(lines) + "\n"


def report_json(results: Sequence[CaseResult], *, corpus: str, app: str) -> dict[str, Any]:
    """The run as JSON: the summary and, per case, its verdict, reasons and figures (a figure
    no port reported is null)."""
    return {
        "corpus": corpus,
        "app": app,
        "summary": _summary(results),
        "cases": [
            {
                "id": r.case_id,
                "locale": r.locale,
                "passed": r.passed,
                "reasons": list(r.reasons),
                "blocks": list(r.blocks),
                "latency_ms": r.latency_ms,
                "input_tokens": None if r.usage is None else r.usage.input_tokens,
                "output_tokens": None if r.usage is None else r.usage.output_tokens,
                "cost_usd": r.cost_usd,
            }
            for r in results
        ],
    }


def render_html(results: Sequence[CaseResult], *, corpus: str, app: str) -> str:
    """The run as one self-contained HTML page (every value autoescaped)."""
    template = _ENVIRONMENT.get_template("report.html.j2")
    return template.render(
        corpus=corpus,
        app=app,
        summary=_summary(results),
        rows=[
            {
                "result": r,
                "latency": _latency(r),
                "tokens": _tokens(r),
                "cost": _cost(r),
            }
            for r in results
        ],
    )
