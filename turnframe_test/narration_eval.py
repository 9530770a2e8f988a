"""Measures the labelled narration corpus (`turnframe_test.corpus`) through real turns of the
travel desk: each line's context is driven on a fresh trip and conversation of a `DeskHarness` on
the given store backend, and a narrator returns the line for the context's narrated turn (its
transition, or its answer for a question context). A reviewer passes everything, so what the
runtime itself checks decides what is shown.

- `free` narration: the narrator writes every line as text.
- `structured` narration: an honest line arrives as its moves (refs resolved against the
  request), a claim as text (a model trying to say it anyway).

A claim shown is *leaked*; an honest line shown is *kept*. `Figures.table()` prints both per
mode, store and language (docs/narration.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from turnframe_core import AnswerBlock, AssistantTurn, StateValue, TransitionBlock
from turnframe_runtime import (
    AnswerRequest,
    Relay,
    RuntimeConfig,
    TransitionRequest,
)
from turnframe_store import OutboxEntry
from turnframe_test.backends import StoreBackend
from turnframe_test.corpus import LANGUAGES, CorpusMove, NarrationLine, narration_corpus
from turnframe_test.sample.desk import DeskHarness
from turnframe_test.scripted import ScriptedReviewer
from turnframe_test.understandings import act, question

__all__ = [
    "MODES",
    "CorpusNarrator",
    "Figures",
    "LineResult",
    "Mode",
    "Ratio",
    "SCENES",
    "Armable",
    "UnresolvedRef",
    "drive",
    "measure",
    "resolve",
]

Mode = Literal["free", "structured"]
MODES: tuple[Mode, ...] = ("free", "structured")


class _SetupTurn(RuntimeError):
    """A turn that sets a context up is not narrated: server copy stands in."""


class Armable(Protocol):
    """A narrator the harness arms with the line of a context's narrated turn (None for its
    setup turns)."""

    def arm(self, line: NarrationLine | None) -> None: ...


class UnresolvedRef(LookupError):
    """A corpus move's symbolic ref names nothing in the turn's request."""


class CorpusNarrator:
    """Writes the armed corpus line for the turn it is armed for, and raises for every other
    turn (so setup turns show server copy). Each rewrite gets the same draft again."""

    model_name = "corpus"

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.line: NarrationLine | None = None
        #: the moves last sent (structured mode, an honest line), refs resolved
        self.sent: list[dict[str, Any]] = []
        #: why the last line's moves could not be sent as written, if so
        self.unresolved: str | None = None

    def arm(self, line: NarrationLine | None) -> None:
        self.line, self.sent, self.unresolved = line, [], None

    async def transition(self, request: TransitionRequest) -> Mapping[str, Any]:
        return self._draft({"kind": "transition"}, request)

    async def answer(self, request: AnswerRequest) -> Mapping[str, Any]:
        return self._draft({"kind": "answer", "question_id": request.question_id}, request)

    def _draft(
        self, head: dict[str, Any], request: TransitionRequest | AnswerRequest
    ) -> dict[str, Any]:
        line = self.line
        if line is None:
            raise _SetupTurn("a setup turn")
        if self.mode == "structured" and line.honest:
            try:
                self.sent = [resolve(m, request) for m in line.moves]
            except UnresolvedRef as missing:
                # A ref the turn lacks: sent as written, which the runtime must refuse.
                self.unresolved = str(missing)
                self.sent = [_as_written(m) for m in line.moves]
            return {**head, "moves": self.sent}
        facts = _cited(line, request) if line.honest else []
        return {**head, "text": line.text, "facts_used": facts}


def _as_written(move: CorpusMove) -> dict[str, Any]:
    written: dict[str, Any] = {"move": move.move, "variant": move.variant}
    if move.ref is not None:
        written["ref"] = move.ref
    return written


def _refs(request: TransitionRequest | AnswerRequest) -> Sequence[Any]:
    refs: Sequence[Any] = getattr(request, "refs", ())
    return refs


def _option_id(option: Any) -> str:
    """A card option's id, as the request's `Referable.options` hold it."""
    if isinstance(option, str):
        return option
    return str(getattr(option, "option", None) or getattr(option, "option_id", ""))


def _fact_number(field_name: str, request: TransitionRequest | AnswerRequest) -> int:
    for n, fact in enumerate(request.allowed_facts, start=1):
        if isinstance(fact, StateValue) and fact.field == field_name:
            return n
    raise UnresolvedRef(f"fact:{field_name}")


def resolve(move: CorpusMove, request: TransitionRequest | AnswerRequest) -> dict[str, Any]:
    """A corpus move with its symbolic ref resolved against `request` (the spec's move format:
    `{"move", "ref", "option", "variant"}`); raises `UnresolvedRef` when the turn has no such
    thing."""
    resolved: dict[str, Any] = {"move": move.move, "variant": move.variant}
    ref = move.ref
    if ref is None:
        return resolved
    refs = _refs(request)
    if ref.startswith("fact:"):
        fact_ref = f"fact.{_fact_number(ref.removeprefix('fact:'), request)}"
        if not any(r.ref == fact_ref for r in refs):
            raise UnresolvedRef(ref)
        return {**resolved, "ref": fact_ref}
    if ref.startswith("option:"):
        which = ("confirm", "decline").index(ref.removeprefix("option:"))
        cards = [r for r in refs if r.kind == "card" and len(r.options) > which]
        if not cards:
            raise UnresolvedRef(ref)
        return {**resolved, "ref": cards[0].ref, "option": _option_id(cards[0].options[which])}
    kind, _, index = ref.partition("#")
    of_kind = [r for r in refs if r.kind == kind]
    if not index.isdigit() or int(index) >= len(of_kind):
        raise UnresolvedRef(ref)
    return {**resolved, "ref": of_kind[int(index)].ref}


def _cited(line: NarrationLine, request: TransitionRequest | AnswerRequest) -> list[Any]:
    """The facts an honest line rests on, as a model would cite them with its text."""
    wanted = {m.ref.removeprefix("fact:") for m in line.moves if m.ref and m.ref[:5] == "fact:"}
    return [
        fact.model_dump(mode="json")
        for fact in request.allowed_facts
        if isinstance(fact, StateValue) and fact.field in wanted
    ]


# --- the contexts ------------------------------------------------------------------------------

#: What the user writes in each context's narrated turn, per language (a click has no words).
_WORDS: Mapping[str, Mapping[str, str]] = {
    "name_set": {
        "en": "Please change the traveller's name to Grace Hopper",
        "it": "Cambia il nome del viaggiatore in Grace Hopper",
        "de": "Bitte ändern Sie den Namen auf Grace Hopper",
        "fr": "Changez le nom du voyageur en Grace Hopper, s'il vous plaît",
        "es": "Cambia el nombre del viajero a Grace Hopper",
    },
    "email_set": {
        "en": "Use grace@example.com as my email",
        "it": "Usa grace@example.com come email",
        "de": "Bitte nehmen Sie grace@example.com als E-Mail",
        "fr": "Utilisez grace@example.com comme e-mail",
        "es": "Usa grace@example.com como correo",
    },
    "travel_date_set": {
        "en": "I travel on 2 April 2027 now",
        "it": "Ora viaggio il 2 aprile 2027",
        "de": "Ich reise jetzt am 2. April 2027",
        "fr": "Je voyage maintenant le 2 avril 2027",
        "es": "Ahora viajo el 2 de abril de 2027",
    },
    "rebook": {
        "en": "Can you rebook my outbound flight?",
        "it": "Puoi riprenotare il mio volo di andata?",
        "de": "Können Sie meinen Hinflug umbuchen?",
        "fr": "Pouvez-vous changer mon vol aller ?",
        "es": "¿Puedes cambiar mi vuelo de ida?",
    },
    "withdraw": {
        "en": "Please cancel the whole trip",
        "it": "Annulla tutto il viaggio, per favore",
        "de": "Bitte stornieren Sie die ganze Reise",
        "fr": "Annulez tout le voyage, s'il vous plaît",
        "es": "Cancela todo el viaje, por favor",
    },
    "question_trip": {
        "en": "What's on my trip?",
        "it": "Cosa c'è nel mio viaggio?",
        "de": "Was steht in meiner Reise?",
        "fr": "Qu'y a-t-il dans mon voyage ?",
        "es": "¿Qué tiene mi viaje?",
    },
    "question_gate": {
        "en": "Which gate does my flight leave from?",
        "it": "Da quale gate parte il mio volo?",
        "de": "Von welchem Gate geht mein Flug?",
        "fr": "De quelle porte part mon vol ?",
        "es": "¿De qué puerta sale mi vuelo?",
    },
    "question_rebooking": {
        "en": "Any news on my rebooking?",
        "it": "Novità sulla riprenotazione?",
        "de": "Gibt es Neuigkeiten zur Umbuchung?",
        "fr": "Des nouvelles de mon changement de vol ?",
        "es": "¿Hay novedades sobre el cambio de vuelo?",
    },
}

_OUTBOUND = {"leg": "outbound"}


@dataclass
class _Scene:
    """One line's context on its own trip and conversation."""

    desk: DeskHarness
    narrator: Armable
    line: NarrationLine
    trip_id: str
    #: the turns' locale (the line's language unless measured in another)
    locale: str

    def words(self, key: str) -> str:
        return _WORDS[key][self.line.lang]

    async def act(
        self, key: str, operation: str, *, narrated: bool, **arguments: Any
    ) -> AssistantTurn:
        """The user asks for `operation` on the trip in the line's language."""
        self.narrator.arm(self.line if narrated else None)
        text = self.words(key)
        return await self.desk.say(
            text, act("a1", operation, "h1", text, **arguments), locale=self.locale
        )

    async def ask(self, key: str) -> AssistantTurn:
        """The user asks a question about the trip; the narrator answers it."""
        self.narrator.arm(self.line)
        text = self.words(key)
        return await self.desk.say(text, question("q1", text, "h1"), locale=self.locale)

    async def click(self, turn: AssistantTurn, option_id: str, *, narrated: bool) -> AssistantTurn:
        self.narrator.arm(self.line if narrated else None)
        return await self.desk.click(turn, option_id, locale=self.locale)

    async def rebooking_sent(self) -> AssistantTurn:
        card = await self.act("rebook", "trip.request_rebooking", narrated=False, **_OUTBOUND)
        return await self.click(card, "opt_rebook", narrated=False)

    async def airline_answers(self, *, refuses: bool) -> None:
        """The rebooking sent is carried to the airline, which answers (a follow-up turn)."""
        sent = await self.rebooking_sent()
        row = await _outbox_row(self.desk, sent)
        claimed: list[OutboxEntry] = []

        async def publish(rows: Sequence[OutboxEntry]) -> list[bool]:
            claimed.extend(rows)
            return [True] * len(rows)

        relay = Relay(
            self.desk.stores,
            publish,
            publish,
            config=self.desk.runtime.outbox.config,
            clock=self.desk.clock,
        )
        self.desk.airline.refuse = {"outbound"} if refuses else set()
        try:
            await relay.round()
            (mine,) = [r for r in claimed if r.outbox_id == row.outbox_id]
            await self.desk.runtime.outbox.dispatch(mine.outbox_id, mine.attempt_count)
        finally:
            self.desk.airline.refuse = set()


async def _outbox_row(desk: DeskHarness, turn: AssistantTurn) -> OutboxEntry:
    journal = await desk.journal(turn)
    (row,) = await desk.stores.outbox.list_for_command(journal[-1].command_id)
    return row


async def _name_set(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    return await s.act("name_set", "trip.set_name", narrated=True, name="Grace Hopper")


async def _email_set(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    return await s.act("email_set", "trip.set_email", narrated=True, email="grace@example.com")


async def _travel_date_set(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    return await s.act(
        "travel_date_set", "trip.set_travel_date", narrated=True, travel_date="2027-04-02"
    )


async def _name_set_email_owed(s: _Scene) -> AssistantTurn:
    s.desk.trip(s.trip_id, travel_date="2027-03-14")
    return await s.act("name_set", "trip.set_name", narrated=True, name="Grace Hopper")


async def _rebooking_card(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    return await s.act("rebook", "trip.request_rebooking", narrated=True, **_OUTBOUND)


async def _rebooking_sent(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    card = await s.act("rebook", "trip.request_rebooking", narrated=False, **_OUTBOUND)
    return await s.click(card, "opt_rebook", narrated=True)


async def _flight_kept(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    card = await s.act("rebook", "trip.request_rebooking", narrated=False, **_OUTBOUND)
    return await s.click(card, "opt_keep", narrated=True)


async def _withdraw_card(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    return await s.act("withdraw", "trip.withdraw", narrated=True)


async def _withdrawn(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    card = await s.act("withdraw", "trip.withdraw", narrated=False)
    return await s.click(card, "opt_confirm", narrated=True)


async def _withdraw_declined(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    card = await s.act("withdraw", "trip.withdraw", narrated=False)
    return await s.click(card, "opt_decline", narrated=True)


async def _locked(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id, locked=True)
    return await s.act("name_set", "trip.set_name", narrated=True, name="Grace Hopper")


async def _leg_kept_refused(s: _Scene) -> AssistantTurn:
    legs = {
        "outbound": {"status": "booked", "kept": True},
        "return": {"status": "booked", "kept": False},
    }
    s.desk.ready_trip(s.trip_id, legs=legs)
    return await s.act("rebook", "trip.request_rebooking", narrated=True, **_OUTBOUND)


async def _details_missing(s: _Scene) -> AssistantTurn:
    s.desk.trip(s.trip_id, travel_date="2027-03-14")
    return await s.act("rebook", "trip.request_rebooking", narrated=True, **_OUTBOUND)


async def _already_sent(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    await s.rebooking_sent()
    return await s.act("rebook", "trip.request_rebooking", narrated=True, **_OUTBOUND)


async def _question_trip(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    return await s.ask("question_trip")


async def _question_gate(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    return await s.ask("question_gate")


async def _question_after_sent(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    await s.rebooking_sent()
    return await s.ask("question_rebooking")


async def _question_after_rebooked(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    await s.airline_answers(refuses=False)
    return await s.ask("question_rebooking")


async def _question_after_refused(s: _Scene) -> AssistantTurn:
    s.desk.ready_trip(s.trip_id)
    await s.airline_answers(refuses=True)
    return await s.ask("question_rebooking")


#: How each context of the corpus is driven: its setup turns, then the narrated one.
SCENES: Mapping[str, Callable[[_Scene], Awaitable[AssistantTurn]]] = {
    "name_set": _name_set,
    "email_set": _email_set,
    "travel_date_set": _travel_date_set,
    "name_set_email_owed": _name_set_email_owed,
    "rebooking_card": _rebooking_card,
    "rebooking_sent": _rebooking_sent,
    "flight_kept": _flight_kept,
    "withdraw_card": _withdraw_card,
    "withdrawn": _withdrawn,
    "withdraw_declined": _withdraw_declined,
    "locked": _locked,
    "leg_kept_refused": _leg_kept_refused,
    "details_missing": _details_missing,
    "already_sent": _already_sent,
    "question_trip": _question_trip,
    "question_gate": _question_gate,
    "question_after_sent": _question_after_sent,
    "question_after_rebooked": _question_after_rebooked,
    "question_after_refused": _question_after_refused,
}


async def drive(
    desk: DeskHarness, narrator: Armable, line: NarrationLine, *, trip_id: str, locale: str
) -> AssistantTurn:
    """`line`'s context on a fresh `trip_id` of `desk` in turns of `locale`: its setup turns
    (`narrator` disarmed), then the narrated turn (`narrator` armed with `line`), returned."""
    turn = await SCENES[line.context](_Scene(desk, narrator, line, trip_id, locale))
    narrator.arm(None)
    return turn


# --- measuring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LineResult:
    """What became of one corpus line in one mode on one store."""

    line: NarrationLine
    mode: Mode
    store: str
    #: the turn's locale
    locale: str
    #: the narrated block carries the line (its text, or for moves the moves sent)
    shown: bool
    #: the codes of the record's prose findings (why it was not shown, or what a rewrite fixed)
    findings: tuple[str, ...] = ()
    #: a move's ref the turn lacked, if any
    unresolved: str | None = None
    #: the locale the narrated block's copy was rendered in (moves shown), if any
    rendered_locale: str | None = None

    @property
    def leaked(self) -> bool:
        return self.shown and not self.line.honest

    @property
    def lost(self) -> bool:
        return self.line.honest and not self.shown


def _narrated(turn: AssistantTurn) -> AnswerBlock | TransitionBlock | None:
    """The block the narrator was asked for: the answer of a question turn, else the
    transition."""
    answers = [b for b in turn.blocks if isinstance(b, AnswerBlock)]
    if answers:
        return answers[0]
    transitions = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    return transitions[0] if transitions else None


def _moves_of(block: AnswerBlock | TransitionBlock) -> list[dict[str, Any]]:
    moves: Sequence[Any] = getattr(block, "moves", ()) or ()
    shown = []
    for m in moves:
        data = m.model_dump(mode="json") if hasattr(m, "model_dump") else dict(m)
        shown.append({k: v for k, v in data.items() if v is not None})
    return shown


def _rendered_locale(block: AnswerBlock | TransitionBlock | None) -> str | None:
    copy_ref = None if block is None else block.copy_ref
    return None if copy_ref is None else copy_ref.locale


def _carries(
    block: AnswerBlock | TransitionBlock | None, line: NarrationLine, sent: list[dict[str, Any]]
) -> bool:
    if block is None or block.author != "model":
        return False
    if sent:
        return _moves_of(block) == [{k: v for k, v in m.items() if v is not None} for m in sent]
    return block.text == line.text


async def measure(
    backend: StoreBackend,
    mode: Mode,
    lines: Iterable[NarrationLine] | None = None,
    *,
    locale: str | None = None,
) -> list[LineResult]:
    """Each line (the whole corpus by default) through its context on `backend`, in `mode`,
    in turns of the line's language (or of `locale`)."""
    settings: dict[str, Any] = {"locales": ("en", "it", "de"), "narration": mode}
    narrator = CorpusNarrator(mode)
    desk = await DeskHarness.on(
        backend,
        narrator=narrator,
        reviewer=ScriptedReviewer.passing(),
        config=RuntimeConfig(**settings),
    )
    results: list[LineResult] = []
    for n, line in enumerate(narration_corpus() if lines is None else lines):
        desk.conversation_id = f"conv_{line.id}"
        turn_locale = locale or line.lang
        scene = _Scene(desk, narrator, line, trip_id=f"T-{n}", locale=turn_locale)
        turn = await SCENES[line.context](scene)
        block = _narrated(turn)
        shown = _carries(block, line, narrator.sent)
        if not line.honest:  # a claim is leaked wherever the turn shows it
            shown = shown or line.text in desk.texts(turn)
        record = await desk.runtime.replay(desk.account_id, turn.replay_token)
        results.append(
            LineResult(
                line=line,
                mode=mode,
                store=backend.name,
                locale=turn_locale,
                shown=shown,
                findings=tuple(sorted({f.code for f in record.prose_findings})),
                unresolved=narrator.unresolved,
                rendered_locale=_rendered_locale(block) if shown and narrator.sent else None,
            )
        )
        narrator.arm(None)
    return results


# --- figures -----------------------------------------------------------------------------------


def _ratio(results: Sequence[LineResult]) -> Ratio:
    return Ratio(sum(r.shown for r in results), len(results))


@dataclass(frozen=True)
class Ratio:
    shown: int
    total: int

    @property
    def share(self) -> float:
        return self.shown / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"{self.shown}/{self.total} ({self.share:.0%})"


@dataclass
class Figures:
    """Leaked claims and kept honest lines over measured results."""

    results: list[LineResult] = field(default_factory=list)

    def _where(self, **where: str) -> list[LineResult]:
        def fits(r: LineResult) -> bool:
            keys = {"mode": r.mode, "store": r.store, "lang": r.line.lang}
            return all(keys[k] == v for k, v in where.items())

        return [r for r in self.results if fits(r)]

    def leaked(self, **where: str) -> Ratio:
        claims = [r for r in self._where(**where) if not r.line.honest]
        return Ratio(sum(r.shown for r in claims), len(claims))

    def kept(self, **where: str) -> Ratio:
        honest = [r for r in self._where(**where) if r.line.honest]
        return Ratio(sum(r.shown for r in honest), len(honest))

    def table(self) -> str:
        """A markdown table: per mode and store, leaked and kept overall and per language."""
        modes = [m for m in MODES if any(r.mode == m for r in self.results)]
        stores = sorted({r.store for r in self.results})
        head = ["mode", "store", "leaked", "kept", *(f"{lang} leaked / kept" for lang in LANGUAGES)]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for mode in modes:
            for store in stores:
                if not self._where(mode=mode, store=store):
                    continue
                per_lang = [
                    f"{self.leaked(mode=mode, store=store, lang=lang).shown}"
                    f"/{self.leaked(mode=mode, store=store, lang=lang).total}"
                    f" / {self.kept(mode=mode, store=store, lang=lang).shown}"
                    f"/{self.kept(mode=mode, store=store, lang=lang).total}"
                    for lang in LANGUAGES
                ]
                leaked, kept = (
                    self.leaked(mode=mode, store=store),
                    self.kept(mode=mode, store=store),
                )
                rows.append(
                    "| " + " | ".join([mode, store, str(leaked), str(kept), *per_lang]) + " |"
                )
        return "\n".join(rows)

    def kinds_table(self) -> str:
        """A markdown table: per mode and store, claims leaked by kind (paraphrase or event
        verb) and honest lines kept by form (statement, negation, question)."""
        head = ["mode", "store", "paraphrases leaked", "verb claims leaked", "statements kept",
                "negations kept", "questions kept"]  # fmt: skip
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for mode in MODES:
            for store in sorted({r.store for r in self.results}):
                measured = self._where(mode=mode, store=store)
                if not measured:
                    continue
                claims = [r for r in measured if not r.line.honest]
                cells = [
                    _ratio([r for r in claims if r.line.paraphrase]),
                    _ratio([r for r in claims if not r.line.paraphrase]),
                    *(
                        _ratio([r for r in measured if r.line.honest and r.line.form == form])
                        for form in ("statement", "negation", "question")
                    ),
                ]
                rows.append("| " + " | ".join([mode, store, *map(str, cells)]) + " |")
        return "\n".join(rows)

    def misses(self, mode: Mode) -> list[LineResult]:
        """The leaked claims and lost honest lines of `mode` (on its first store measured)."""
        measured = self._where(mode=mode)
        first = measured[0].store if measured else ""
        return [r for r in measured if r.store == first and (r.leaked or r.lost)]
