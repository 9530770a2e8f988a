"""`turnframe eval`: a labelled corpus through an app's runtime, each case judged on what its
last turn shows and records, with a reason for every failure; a corpus that cannot be read is a
usage error that says where."""

from __future__ import annotations

import asyncio
import json
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, cast

import pytest

import turnframe_runtime.cli as cli
from turnframe_core import AssistantTurn, TurnInput
from turnframe_core.blocks import TransitionBlock
from turnframe_core.turn import TurnStatus
from turnframe_runtime import EvalCase, ModelPrice, TurnRuntime, load_corpus
from turnframe_runtime.evaluation import TokenCount, cost_of, parse_corpus, run_case, tokens_of
from turnframe_store import SqlStores
from turnframe_test.sample.eval_app import scripted_runtime

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "turnframe_test" / "sample" / "eval_corpus.jsonl"
APP = "turnframe_test.sample.eval_app:scripted_runtime"


@pytest.fixture(autouse=True)
def eval_command(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`turnframe eval` as pyproject.toml declares it, also where the installed metadata
    predates the command (a checkout not yet reinstalled)."""
    installed = cli.entry_points

    def with_eval(group: str) -> list[EntryPoint]:
        found = list(installed(group=group))
        if not any(e.name == "eval" for e in found):
            found.append(EntryPoint("eval", "turnframe_runtime.cli_eval:register", group))
        return found

    monkeypatch.setattr(cli, "entry_points", with_eval)
    yield


def turnframe_eval(*argv: str | Path) -> int:
    return cli.main(["eval", *map(str, argv)])


def a_case(**changes: Any) -> dict[str, Any]:
    """The sample corpus's first case (the user renames the traveller), with `changes`."""
    case: dict[str, Any] = json.loads(CORPUS.read_text(encoding="utf-8").splitlines()[0])
    return {**case, **changes}


@pytest.fixture
async def sample_runtime(tmp_path: Path) -> AsyncIterator[TurnRuntime]:
    """The sample app on a migrated SQLite file of its own, for `run_case`."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'eval.db'}"
    stores = await SqlStores.connect(url)
    await stores.migrate()
    await stores.aclose()
    runtime = await scripted_runtime(url)
    yield runtime
    await runtime.stores.aclose()


class Wrapped:
    """A runtime whose methods named in `overrides` are replaced (the rest are the runtime's)."""

    def __init__(self, runtime: TurnRuntime, **overrides: Any) -> None:
        self._runtime, self._overrides = runtime, overrides

    def __getattr__(self, name: str) -> Any:
        return self._overrides.get(name) or getattr(self._runtime, name)


def changing_turns(
    runtime: TurnRuntime, change: Callable[[AssistantTurn], AssistantTurn]
) -> TurnRuntime:
    """`runtime`, each turn it returns changed by `change` (as a port or a pipeline might)."""

    async def handle_turn(turn_input: TurnInput) -> AssistantTurn:
        return change(await runtime.handle_turn(turn_input))

    return cast(TurnRuntime, Wrapped(runtime, handle_turn=handle_turn))


def free_transition(text: str) -> Callable[[AssistantTurn], AssistantTurn]:
    """A turn whose transition a model wrote freely as `text` (no copy it was rendered from)."""

    def change(turn: AssistantTurn) -> AssistantTurn:
        blocks = tuple(
            TransitionBlock(block_id=b.block_id, text=text) if b.kind == "transition" else b
            for b in turn.blocks
        )
        return turn.model_copy(update={"blocks": blocks})

    return change


def sample_case(case_id: str) -> EvalCase:
    return next(c for c in load_corpus(CORPUS).cases if c.id == case_id)


def write_corpus(path: Path, *lines: dict[str, Any] | str) -> Path:
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n",
        encoding="utf-8",
    )
    return path


# --- the sample corpus -------------------------------------------------------------------------


def test_the_sample_corpus_has_at_least_forty_cases_in_english_italian_and_german() -> None:
    corpus = load_corpus(CORPUS)

    assert len(corpus.cases) >= 40
    assert {c.locale for c in corpus.cases} == {"en", "it", "de"}
    assert all(sum(c.locale == lang for c in corpus.cases) >= 13 for lang in ("en", "it", "de"))
    assert any(c.input.click for c in corpus.cases) and any(c.history for c in corpus.cases)


def test_the_sample_corpus_passes_through_the_scripted_app_in_text_json_and_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, page = tmp_path / "eval.json", tmp_path / "eval.html"

    code = turnframe_eval(CORPUS, "--app", APP, "--json", report, "--html", page)

    printed = capsys.readouterr().out
    cases = load_corpus(CORPUS).cases
    assert code == 0, printed
    assert printed.count("PASS ") == len(cases) and "FAIL" not in printed
    assert f"{len(cases)} cases: {len(cases)} passed, 0 failed; cost n/a" in printed
    data = json.loads(report.read_text())
    assert data["summary"] == {"cases": len(cases), "passed": len(cases), "failed": 0,
                               "cost_usd": None}  # fmt: skip
    assert [c["id"] for c in data["cases"]] == [c.id for c in cases]
    assert all(c["latency_ms"] >= 0 and c["input_tokens"] is None for c in data["cases"])
    html = page.read_text()
    assert all(f'data-case-id="{c.id}"' in html for c in cases)


def test_a_second_run_on_the_same_database_starts_every_case_afresh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "kept.db"
    url = f"sqlite+aiosqlite:///{db}"
    asyncio.run(_migrated(url))
    reports = [tmp_path / "first.json", tmp_path / "second.json"]

    codes = [turnframe_eval(CORPUS, "--app", APP, "--db", url, "--json", r) for r in reports]

    printed = capsys.readouterr().out
    assert codes == [0, 0], printed
    runs = [json.loads(r.read_text())["run"] for r in reports]
    assert runs[0] != runs[1]
    assert all(f"turnframe eval: run {run}\n" in printed for run in runs)


async def _migrated(url: str) -> None:
    stores = await SqlStores.connect(url)
    await stores.migrate()
    await stores.aclose()


# --- failing cases -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expect", "reason"),
    [
        (
            {"operations": [{"operation": "trip.set_email", "arguments": {"email": "a@b.c"}}]},
            'operations: expected [trip.set_email(email="a@b.c")], '
            'got [trip.set_name(name="Grace Hopper")]',
        ),
        ({"commands": []}, "commands: expected nothing, got [trip.set_name]"),
        ({"blocks": ["transition"]}, "blocks: expected [transition], got [receipt, transition]"),
        ({"questions": 1}, "questions: expected 1, got 0"),
        ({"locale": "de"}, "locale: the turn is in en, expected de"),
        ({"status": "failed"}, "status: expected failed, got completed"),
    ],
)
def test_a_broken_expectation_fails_the_run_and_says_why(
    expect: dict[str, Any], reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", a_case(expect=expect))

    code = turnframe_eval(corpus, "--app", APP)

    printed = capsys.readouterr().out
    assert code == 1
    assert "FAIL  en-name-set" in printed
    assert f"      - {reason}\n" in printed
    assert "1 cases: 0 passed, 1 failed" in printed


def test_an_argument_the_words_do_not_ground_fails_with_the_understanding_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = a_case()
    case["input"]["scripted"]["understanding"]["acts"][0]["arguments"] = {"name": "Grace Hoppr"}
    corpus = write_corpus(tmp_path / "c.jsonl", case)

    assert turnframe_eval(corpus, "--app", APP) == 1

    printed = capsys.readouterr().out
    assert 'operations: expected [trip.set_name(name="Grace Hopper")], got nothing' in printed
    assert "model failures: [understand:turnframe.understanding.rejected" in printed


def test_a_narration_the_server_cannot_render_fails_as_a_model_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = a_case()
    case["input"]["scripted"]["transition"] = [{"move": "introduce", "ref": "card#0"}]
    corpus = write_corpus(tmp_path / "c.jsonl", case)

    assert turnframe_eval(corpus, "--app", APP) == 1

    assert "model failures: [transition:" in capsys.readouterr().out


def test_a_click_on_a_card_the_conversation_never_showed_fails_the_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", a_case(input={"click": "opt_rebook"}))

    assert turnframe_eval(corpus, "--app", APP) == 1

    printed = capsys.readouterr().out
    assert "the judged turn: it clicks opt_rebook but no card of the conversation offers it" in (
        printed
    )


def test_the_html_report_escapes_what_a_reason_quotes(tmp_path: Path) -> None:
    expect = {"operations": [{"operation": "trip.set_name", "arguments": {"name": "<b>x</b>"}}]}
    corpus = write_corpus(tmp_path / "c.jsonl", a_case(expect=expect))
    page = tmp_path / "eval.html"

    assert turnframe_eval(corpus, "--app", APP, "--html", page) == 1

    html = page.read_text()
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html


async def test_model_prose_in_another_language_than_the_case_fails_the_locale(
    sample_runtime: TurnRuntime,
) -> None:
    english = changing_turns(
        sample_runtime, free_transition("Done: I have changed the traveller's name for you.")
    )

    result = await run_case(english, sample_case("it-name-set"), run="r1")

    assert result.reasons == ("locale: block 1 (transition) is model prose not written in it",)


async def test_model_prose_in_the_case_language_passes_the_locale(
    sample_runtime: TurnRuntime,
) -> None:
    italian = changing_turns(
        sample_runtime, free_transition("Fatto: ho cambiato il nome del viaggiatore per te.")
    )

    result = await run_case(italian, sample_case("it-name-set"), run="r1")

    assert result.passed, result.reasons


async def test_model_prose_in_a_language_the_guard_cannot_read_says_the_locale_is_unchecked(
    sample_runtime: TurnRuntime,
) -> None:
    prose = changing_turns(sample_runtime, free_transition("Pronto, o nome foi alterado."))
    case = EvalCase.model_validate(a_case(locale="pt", expect={"locale": "pt"}))

    result = await run_case(prose, case, run="r1")

    assert (
        "locale: block 1 (transition) is model prose in pt, which the wording guard cannot read"
        " (locale not checked)" in result.reasons
    ), result.reasons


async def test_a_turn_that_did_not_complete_fails_unless_the_case_expects_its_status(
    sample_runtime: TurnRuntime,
) -> None:
    failing = changing_turns(
        sample_runtime, lambda turn: turn.model_copy(update={"status": TurnStatus.FAILED})
    )
    case = EvalCase.model_validate(a_case())
    expecting = EvalCase.model_validate(a_case(expect={**a_case()["expect"], "status": "failed"}))

    failed = await run_case(failing, case, run="r1")
    expected = await run_case(failing, expecting, run="r2")

    assert failed.reasons == ("status: expected completed, got failed",)
    assert expected.passed, expected.reasons


async def test_a_replay_that_raises_fails_its_case_with_the_reason(
    sample_runtime: TurnRuntime,
) -> None:
    async def replay(*_: Any) -> Any:
        raise RuntimeError("the replay store is down")

    broken = cast(TurnRuntime, Wrapped(sample_runtime, replay=replay))

    result = await run_case(broken, EvalCase.model_validate(a_case()), run="r1")

    assert result.reasons == (
        "the judged turn's replay raised RuntimeError: the replay store is down",
    )


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{not json"], "c.jsonl line 1: not JSON"),
        (["[1, 2]"], "c.jsonl line 1: a line is a JSON object"),
        ([a_case(expect={"block": ["receipt"]})], "c.jsonl line 1: expect.block: Extra inputs"),
        (
            [a_case(input={"text": "hi", "click": "opt_rebook"})],
            "c.jsonl line 1: input: an input is either a text or a click",
        ),
        ([a_case(), "", a_case()], "c.jsonl line 3: case id 'en-name-set' is used twice"),
        ([a_case(id="has space")], "c.jsonl line 1: id: String should match pattern"),
        (
            [{"prices": {"m": {"input_per_million": -1, "output_per_million": 1}}}],
            "c.jsonl line 1: m.input_per_million: Input should be greater than or equal to 0",
        ),
        ([""], "c.jsonl: no cases"),
    ],
)
def test_a_corpus_that_cannot_be_read_is_a_usage_error_naming_the_line(
    lines: list[Any], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", *lines)

    assert turnframe_eval(corpus, "--app", APP) == 2

    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.startswith(f"turnframe eval: {message}"), printed.err
    assert printed.err.rstrip().endswith("[turnframe.eval.corpus_invalid]")
    assert printed.err.count("\n") == 1


def test_a_missing_corpus_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert turnframe_eval(tmp_path / "nowhere.jsonl", "--app", APP) == 2

    assert capsys.readouterr().err.startswith("turnframe eval: cannot read ")


@pytest.mark.parametrize(
    ("app", "message"),
    [
        (None, "--app MODULE:FACTORY (or TURNFRAME_APP) is needed"),
        ("turnframe_test.sample.no_such_module:app", "cannot load turnframe_test.sample."),
        ("turnframe_test.sample.eval_app:READY_TRIP", "cannot load"),
    ],
)
def test_an_app_that_cannot_be_loaded_is_a_usage_error(
    app: str | None,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("TURNFRAME_APP", raising=False)

    code = turnframe_eval(CORPUS, *(["--app", app] if app else []))

    assert code == 2
    assert capsys.readouterr().err.startswith(f"turnframe eval: {message}")


@pytest.mark.parametrize("flag", ["--json", "--html"])
def test_a_report_that_cannot_be_written_is_a_usage_error(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "c.jsonl", a_case())
    nowhere = tmp_path / "no_such_dir" / "report"

    assert turnframe_eval(corpus, "--app", APP, flag, nowhere) == 2

    printed = capsys.readouterr()
    assert printed.err.startswith(f"turnframe eval: cannot write {nowhere}: "), printed.err
    assert printed.err.count("\n") == 1 and "Traceback" not in printed.err
    assert printed.out == ""  # refused before a case ran (a real model's calls cost money)


# --- tokens and cost ---------------------------------------------------------------------------

PRICES = {
    "small": ModelPrice(input_per_million=0.5, output_per_million=2.0),
    "large": ModelPrice(input_per_million=3.0, output_per_million=15.0),
}


def test_tokens_are_summed_over_the_attempts_that_report_them() -> None:
    attempts = [
        {"model": "small", "input_tokens": 1000, "output_tokens": 200},
        {"model": "large", "input_tokens": 3000, "output_tokens": 100},
        {"model": "scripted"},
    ]

    assert tokens_of(attempts) == TokenCount(input_tokens=4000, output_tokens=300)


def test_cost_is_priced_per_model_and_unknown_without_tokens_or_a_price() -> None:
    priced = [
        {"model": "small", "input_tokens": 1000, "output_tokens": 200},
        {"model": "large", "input_tokens": 3000, "output_tokens": 100},
    ]

    assert cost_of(priced, PRICES) == pytest.approx(0.0009 + 0.0105)
    assert cost_of([{"model": "small"}], PRICES) is None
    assert cost_of([{"model": "other", "input_tokens": 1, "output_tokens": 1}], PRICES) is None
    assert tokens_of([{"model": "small"}]) is None


def test_a_corpus_may_carry_its_price_table_and_a_flag_adds_to_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = {"small": {"input_per_million": 0.5, "output_per_million": 2.0}}
    corpus = parse_corpus([json.dumps({"prices": table}), json.dumps(a_case())])
    assert corpus.prices == {"small": PRICES["small"]}
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"large": {"input_per_million": 3, "output_per_million": 15}}))
    path = write_corpus(tmp_path / "c.jsonl", {"prices": table}, a_case())

    assert turnframe_eval(path, "--app", APP, "--prices", prices) == 0

    assert "cost n/a" in capsys.readouterr().out  # scripted ports report no tokens


# --- packaging ---------------------------------------------------------------------------------


def test_the_command_is_declared_where_the_others_are() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]

    assert declared["turnframe.commands"]["eval"] == "turnframe_runtime.cli_eval:register"
