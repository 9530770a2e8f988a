"""The deterministic wording guard: model-written prose may not state an effect the turn does not
back.

The structural guard (`claims.py`) checks the facts a block cites; this one reads its words. It
runs on every model-written answer and transition after any review, and nothing configures it
away. A sentence that claims one of the forbidden classes passes only when the turn holds a block
that backs the class:

- creation, update, deletion, submission, acceptance, delivery, completion: a success receipt
  (of that class, where the workflow declares what its receipts back: `DeclaresReceiptClaims`);
- interaction visibility ("the button below"): an interaction block;
- future notification ("I will let you know"): a receipt whose status says a follow-up is
  scheduled, or a follow-up an earlier turn scheduled that is still pending.

Free prose must also name only values the turn holds (`ungrounded_values`): a receipt backs what
its own title and body say (a "rebooking sent" receipt grounds the airline it was sent to, not a
new departure time), while a class claim stays backed by a receipt of that class.

Any id-shaped token (`rcp_…`, `int_…`, any `word_…`) must name a block of this turn, or an event
or option one of them carries. A negated clause ("nothing has been changed yet") passes, and so
does a question, except what it asserts on the way ("now that it has been rebooked"); a promise
conditioned on the user's answer ("once you confirm, I will send it") passes while a card asks
for that answer. Languages without rules here are not judged: their prose is refused, so server
copy stands in. Safe beats fluent: a rule that cannot tell refuses.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from pydantic import Field

from turnframe_core import codes
from turnframe_core.blocks import InteractionBlock, NoticeBlock, ReceiptBlock
from turnframe_core.events import ReceiptSeverity
from turnframe_core.ids import PREFIXES
from turnframe_core.model import FrozenModel, NonEmptyStr

__all__ = [
    "DEFAULT_GUARD",
    "GUARDED_LANGUAGES",
    "ClaimClass",
    "GuardConfig",
    "TurnBacking",
    "WordingFinding",
    "check_wording",
    "ungrounded_values",
    "value_grounds",
]


class ClaimClass(StrEnum):
    """What a sentence may claim only with a block that backs it."""

    CREATION = "creation"
    UPDATE = "update"
    DELETION = "deletion"
    SUBMISSION = "submission"
    ACCEPTANCE = "acceptance"
    DELIVERY = "delivery"
    COMPLETION = "completion"
    INTERACTION_VISIBILITY = "interaction_visibility"
    FUTURE_NOTIFICATION = "future_notification"

    @property
    def is_outcome(self) -> bool:
        return self not in (ClaimClass.INTERACTION_VISIBILITY, ClaimClass.FUTURE_NOTIFICATION)


class WordingFinding(FrozenModel):
    """One thing the guard refused: the rule that matched, the class it claims (none for an id
    or a language without rules), the clause it matched in (shortened, folded to lower case) and
    where the match lies (`span`: offsets into the text, NFKC-normalised and lower-cased)."""

    code: NonEmptyStr
    rule: NonEmptyStr
    claim_class: ClaimClass | None = None
    excerpt: str = Field(default="", max_length=120)
    span: tuple[int, int] | None = None


@dataclass(frozen=True)
class TurnBacking:
    """What a turn's server blocks back: outcome claims (`outcomes`: which classes; None: every
    outcome class), a visible card, a scheduled follow-up, and the ids its prose may name."""

    outcome: bool = False
    card: bool = False
    follow_up: bool = False
    ids: frozenset[str] = frozenset()
    outcomes: frozenset[ClaimClass] | None = None

    @classmethod
    def of(
        cls,
        blocks: Iterable[Any],
        follow_up_codes: Iterable[str] = (),
        receipt_claims: Mapping[str, Iterable[ClaimClass]] | None = None,
        *,
        pending_follow_up: bool = False,
    ) -> TurnBacking:
        """The backing of `blocks`. A receipt whose `status_code` is in `follow_up_codes` says a
        follow-up is scheduled; one whose status code `receipt_claims` names backs those outcome
        classes only (a receipt no declaration names backs every outcome class).
        `pending_follow_up`: a follow-up an earlier turn scheduled is still pending, so "you'll
        hear back here" stays true in this turn though none of its blocks says so."""
        follow_ups = frozenset(follow_up_codes)
        outcome = card = follow_up = False
        classes: set[ClaimClass] | None = set()
        ids: set[str] = set()
        for block in blocks:
            block_id = getattr(block, "block_id", None)
            if isinstance(block_id, str):
                ids.add(block_id)
            if isinstance(block, ReceiptBlock):
                ids.add(block.receipt_id)
                ids.update(block.event_ids)
                if block.severity is ReceiptSeverity.SUCCESS:
                    follow_up = follow_up or block.status_code in follow_ups
                    declared = (receipt_claims or {}).get(block.status_code)
                    if declared is None:
                        outcome, classes = True, None
                    else:
                        backed = {c for c in declared if c.is_outcome}
                        outcome = outcome or bool(backed)
                        if classes is not None:
                            classes |= backed
            elif isinstance(block, InteractionBlock):
                card = True
                ids.add(block.interaction_id)
                ids.update(option.option_id for option in block.options)
        return cls(
            outcome=outcome,
            card=card,
            follow_up=follow_up or pending_follow_up,
            ids=frozenset(ids),
            outcomes=None if classes is None else frozenset(classes),
        )

    def backs(self, claim: ClaimClass) -> bool:
        if claim is ClaimClass.INTERACTION_VISIBILITY:
            return self.card
        if claim is ClaimClass.FUTURE_NOTIFICATION:
            return self.follow_up
        return self.outcome and (self.outcomes is None or claim in self.outcomes)


def value_grounds(
    blocks: Iterable[Any] = (), facts: Iterable[Any] = (), words: Iterable[str | None] = ()
) -> tuple[str, ...]:
    """The strings that ground the values a turn's free prose may name (`ungrounded_values`'s
    `grounds`): what its server `blocks` say (a success receipt's title and body: a receipt
    backs what it says, not what its class might; a notice's text; a card's title, body, option
    labels and review entries), every value its allowed `facts` hold (each scalar of the
    model), and `words` (the user's own message, the question an answer answers)."""
    grounds: list[str] = []
    for block in blocks:
        if isinstance(block, ReceiptBlock):
            if block.severity is ReceiptSeverity.SUCCESS:
                grounds += [block.title, block.body]
        elif isinstance(block, NoticeBlock):
            grounds.append(block.text)
        elif isinstance(block, InteractionBlock):
            grounds += [block.title, block.body or "", block.freeform_prompt or ""]
            grounds += [option.label for option in block.options]
            for entry in block.review_entries:
                grounds += [entry.label, entry.before or "", entry.after or ""]
    for fact in facts:
        _scalars(fact.model_dump(mode="json") if hasattr(fact, "model_dump") else fact, grounds)
    grounds += [word for word in words if word]
    return tuple(ground for ground in grounds if ground)


def _scalars(value: Any, into: list[str]) -> None:
    if isinstance(value, Mapping):
        for item in value.values():
            _scalars(item, into)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            _scalars(item, into)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        into.append(str(value))


# --- the rules ------------------------------------------------------------------------------------

_C = ClaimClass


@dataclass(frozen=True)
class _Rule:
    name: str
    claim: ClaimClass
    pattern: re.Pattern[str]
    #: a future form: passes in a sentence conditioned on the user's answer while a card asks it
    promise: bool = False
    #: a present-state reading ("is booked") that is not a claim unless marked as new ("now")
    state: re.Pattern[str] | None = None


@dataclass(frozen=True)
class _Language:
    rules: tuple[_Rule, ...]
    #: words that negate what follows them ("not", "nothing")
    negation: frozenset[str]
    #: words that may stand between a negation and what it negates ("has", "been", "yet")
    carriers: frozenset[str]
    #: how many other words may stand there too (German puts its participle last)
    reach: int
    #: a sentence opening as a question ("would", "¿")
    question: re.Pattern[str]
    #: a promise conditioned on the user's own answer ("once you confirm")
    condition: re.Pattern[str]
    clause_break: re.Pattern[str]
    #: a conjunction joining two clauses where the second may share the first's subject and
    #: auxiliaries ("was cancelled and rebooked"): it inherits them
    coordinator: re.Pattern[str]
    #: words inside a question that assert what follows them ("now that", "since")
    presupposes: re.Pattern[str]
    #: the words before an attributive participle ("the rebooked flight"): inside a question
    #: it still asserts
    attributive: re.Pattern[str]
    #: the language's ordinary words: the language check and the name check read them
    ordinary: frozenset[str]
    #: every rule at once: a clause none of them matches is passed over (cost, not meaning)
    any_rule: re.Pattern[str]


def _rule(name: str, claim: ClaimClass, pattern: str, **extra: Any) -> _Rule:
    return _Rule(name, claim, re.compile(pattern), **extra)


def _language(
    outcome: Mapping[ClaimClass, str],
    future_outcome: Mapping[ClaimClass, str],
    notify: str,
    visible: str,
    negation: str,
    carriers: str,
    question: str,
    condition: str,
    conjunctions: str,
    coordinators: str,
    presupposes: str,
    attributive: str,
    ordinary: str,
    state: str | None = None,
    content: Mapping[ClaimClass, str] | None = None,
    reach: int = 0,
) -> _Language:
    rules: list[_Rule] = []
    state_pattern = re.compile(state) if state else None
    for claim, words in outcome.items():
        rules.append(_rule(f"{claim.value}.stated", claim, words, state=state_pattern))
    for claim, words in (content or {}).items():
        rules.append(_rule(f"{claim.value}.content", claim, words))
    for claim, words in future_outcome.items():
        rules.append(_rule(f"{claim.value}.promised", claim, words, promise=True))
    rules.append(_rule("future_notification.promised", _C.FUTURE_NOTIFICATION, notify))
    rules.append(_rule("interaction_visibility.named", _C.INTERACTION_VISIBILITY, visible))
    return _Language(
        rules=tuple(rules),
        negation=frozenset(negation.split()),
        carriers=frozenset(carriers.split()),
        reach=reach,
        question=re.compile(rf"^\W*(?:{question})\b"),
        condition=re.compile(condition),
        clause_break=re.compile(
            rf"[;()\[\]\u2013\u2014\u2026]|[,:](?!\d)|\s-\s|\b(?:{conjunctions}|{coordinators})\b"
        ),
        coordinator=re.compile(rf"\s*\b(?:{coordinators})\b\s*"),
        presupposes=re.compile(rf"\b(?:{presupposes})\b"),
        attributive=re.compile(attributive),
        ordinary=frozenset(ordinary.split()),
        any_rule=re.compile("|".join(f"(?:{rule.pattern.pattern})" for rule in rules)),
    )


def _any(alternatives: str) -> str:
    """`alternatives` ("a|b c|d") as whole words."""
    return rf"\b(?:{alternatives})\b"


_EN_FIRST_PERSON_FUTURE = (
    r"\b(?:i|we)(?:'ll| will| shall|'m going to| am going to|'re going to| are going to)"
    r"\s+(?:\w+\s+){0,3}"
)
_EN = _language(
    outcome={
        _C.CREATION: _any(r"created|added|(?:re)?booked|set up|registered|reserved"),
        _C.UPDATE: _any(
            r"updated|changed|modified|edited|amended|corrected|replaced|moved|rescheduled"
            r"|switched|saved|now set"
        ),
        _C.DELETION: _any(r"deleted|removed|cancell?ed|withdrawn|erased|cleared|dropped"),
        _C.SUBMISSION: _any(r"submitted|sent|filed|forwarded|passed on|lodged|placed"),
        _C.ACCEPTANCE: _any(
            r"accepted|approved|confirmed|granted|authori[sz]ed|validated|verified"
        ),
        _C.DELIVERY: _any(
            r"delivered|dispatched|shipped|(?:re)?issued|refunded|paid|transferred|emailed"
            r"|on (?:its|their) way"
        ),
        _C.COMPLETION: _any(
            r"(?<!you're )(?<!you are )done|all set|completed|(?:is|are|now) complete|finished"
            r"|processed|handled|taken care of|sorted|finali[sz]ed|success(?:ful(?:ly)?)?"
            r"|went through|gone through|executed"
        ),
    },
    future_outcome={
        _C.COMPLETION: _EN_FIRST_PERSON_FUTURE
        + _any(
            r"create|add|book|rebook|update|change|modify|delete|remove|cancel|submit|send|file"
            r"|forward|approve|confirm|deliver|issue|refund|process|complete|finish"
            r"|take care of|handle|set|withdraw|reserve|register|save|move|reschedule|pay"
            r"|transfer|email|book you|accept|go ahead|proceed"
        ),
        _C.UPDATE: r"\b(?:will|is going to|are going to) be\s+(?:\w+\s+)?"
        + _any(r"\w+ed|sent|done|paid"),
        _C.SUBMISSION: r"\b(?:i|we)(?:'m| am|'re| are) (?:now |just )?"
        + _any(
            r"creating|adding|(?:re)?booking|updating|changing|modifying|deleting|removing"
            r"|cancell?ing|submitting|sending|filing|forwarding|approving|confirming|issuing"
            r"|refunding|processing|completing|withdrawing|paying|transferring|handling"
        ),
    },
    notify=_any(
        _EN_FIRST_PERSON_FUTURE[2:]
        + r"(?:let you know|notify|inform|tell you|update you|keep you|get back|follow up"
        r"|reach out|email you|message you|text you|contact you|send you|alert you|remind you"
        r"|be in touch|write to you|circle back|ping you|call you)"
        r"|you(?:'ll| will)\s+(?:\w+\s+)?(?:be notified|be informed|be emailed|be contacted"
        r"|be told|receive|get an?|hear)"
        r"|stay tuned|keep an eye on your (?:inbox|email)"
        r"|expect (?:an?|the|our|my) (?:email|message|notification|update|call|text|reply)"
    ),
    visible=_any(
        r"below|buttons?|tap|click|press|(?<!credit )(?<!debit )(?<!boarding )card|options? shown"
    ),
    negation="not n't never nothing none neither nor without cannot unable no",
    carriers="has have had been be being was were is are yet ever still already just got gotten"
    " can could would should will shall may might must"
    " actually really any anything it them this that i we",
    question=r"do|does|did|is|are|was|were|have|has|had|can|could|shall|should|will|would|may"
    r"|might|must|what|which|who|whom|whose|when|where|why|how|want|need",
    condition=r"\b(?:if|once|when|after|as soon as)\s+you\s+(?:\w+\s+)?(?:confirm|approve|agree"
    r"|accept|choose|select|say|tap|click|press|reply|answer|decide|pick|give)",
    conjunctions=r"but|so|then|while|although|however|that|which|who",
    attributive=r"\b(?:the|your|this|that|these|those|my|our|their|its)\s+"
    r"(?:(?:newly|recently|just|already)\s+)?$",
    coordinators=r"and|or|nor",
    presupposes=r"now that|since|because|given that|seeing that|after|as you know|considering",
    ordinary="the a an to of and or is are was were be been being it its it's you your yours"
    " you're you've you'll i i'm i'll i've i'd me my we we're we've our us they their them he she"
    " his her this that these those there here what which who when where why how if then than so"
    " but not no yes ok okay please thanks thank hello hi hey sorry sure just only also still yet"
    " already now soon today tomorrow below above next new old one all any anything something"
    " nothing everything else more most some each every other another can could will would shall"
    " should may might must do does did done have has had get got let know see help need want like"
    " look check find make take give go come keep change confirm choose pick select answer reply"
    " tell ask send book cancel with without for on in at by from up about into over after before"
    " as via per again here's there's that's what's let's don't can't won't isn't aren't haven't"
    " hasn't didn't doesn't great good right fine well understood",
    state=r"\b(?:is|are|remains?|stays?) (?:still )?"
    + _any(r"booked|reserved|registered|scheduled|planned")
    + r"|\b(?:your|the|my|our|their|this|that|its) (?:(?:originally|currently|already|previously)"
    r" )?(?:booked|reserved|scheduled|planned)\b"
    r"|\byou(?:'ve| have| had|'d)? (?:(?!(?:been|are|were|got|get|be)\b)\w+ )?"
    r"(?:booked|reserved|scheduled|planned)\b"
    r"|\bas (?:booked|planned|scheduled)\b",
    content={
        _C.UPDATE: r"\b(?:your|the)\s+(?:brand\s+)?(?:new|updated|revised|amended|rebooked|changed)"
        r"\b(?=\s+[^\W\d_])|\b(?:is|are|'s|'re)\s+now\b"
        r"|\byou(?:'re| are)\s+(?:on|in|booked on|moved to|set for|down for)\b(?=.*\bnow\b)"
        r"|\bnow\s+(?:departs?|leaves?|arrives?|lands?|starts?|runs?|shows?|reads?|is|are|has"
        r"|have)\b",
        _C.DELETION: r"\b(?:is|are|'s|'re)\s+(?:now\s+)?(?:off|gone|history|void|scrapped"
        r"|no more)\b|\bcalled off\b|\bscrapped\b|\bvoided\b"
        r"|\bno longer\s+(?:on|valid|active|booked|happening|exists?|there|scheduled|reserved"
        r"|going ahead|in place)\b",
        _C.COMPLETION: r"\bgood to go\b|\bthere you go\b|\bthere you have it\b"
        r"|\ball (?:done|good|sorted)\b|\byou(?:'re| are) (?:covered|sorted)\b",
        _C.ACCEPTANCE: r"\bgreen[- ]?light\b|\bgreenlit\b|\bgot the (?:ok|okay|go-ahead)\b"
        r"|\bgave (?:it )?the go-ahead\b",
        _C.DELIVERY: r"\b(?:in|into) your (?:inbox|account|mailbox)\b",
    },
)

_IT = _language(
    outcome={
        _C.CREATION: _any(r"creat[oaie]|aggiunt[oaie]|(?:ri)?prenotat[oaie]|registrat[oaie]"),
        _C.UPDATE: _any(
            r"aggiornat[oaie]|modificat[oaie]|cambiat[oaie]|impostat[oaie]|salvat[oaie]"
            r"|corrett[oaie]|spostat[oaie]|sostituit[oaie]"
        ),
        _C.DELETION: _any(
            r"eliminat[oaie]|cancellat[oaie]|rimoss[oaie]|annullat[oaie]|ritirat[oaie]"
        ),
        _C.SUBMISSION: _any(
            r"inviat[oaie]|spedit[oaie]|trasmess[oaie]|inoltrat[oaie]|presentat[oaie]"
        ),
        _C.ACCEPTANCE: _any(
            r"accettat[oaie]|approvat[oaie]|confermat[oaie]|autorizzat[oaie]|convalidat[oaie]"
        ),
        _C.DELIVERY: _any(
            r"consegnat[oaie]|recapitat[oaie]|emess[oaie]|rimborsat[oaie]|pagat[oaie]"
            r"|bonificat[oaie]"
        ),
        _C.COMPLETION: _any(
            r"(?<!il )(?<!i )(?<!dei )fatt[oaie]|completat[oaie]|conclus[oaie]|finit[oaie]"
            r"|terminat[oaie]|eseguit[oaie]|elaborat[oaie]|sistemat[oaie]|tutto pronto"
            r"|tutto a posto|andat[oaie] a buon fine"
        ),
    },
    future_outcome={
        _C.COMPLETION: _any(
            r"invierò|invieremo|(?:ri)?prenoterò|(?:ri)?prenoteremo|aggiornerò|aggiorneremo"
            r"|modificherò|cambierò|cancellerò|eliminerò|annullerò|confermerò|completerò|creerò"
            r"|rimborserò|procederò|sistemerò|ritirerò|ritireremo|pagherò|salverò|sposterò"
            r"|sto (?:\w+ando|\w+endo)|stiamo (?:\w+ando|\w+endo)"
            r"|(?:ora |adesso )?(?:annullo|invio|inoltro|modifico|cancello|elimino|riprenoto"
            r"|prenoto|confermo|rimborso|(?<!ti )(?<!vi )aggiorno|ritiro)"
        ),
        _C.UPDATE: _any(r"sarà|saranno|verrà|verranno")
        + r"\s+(?:\w+\s+)?\w+(?:at|ut|it|ss|ost)[oaie]\b",
    },
    notify=_any(
        r"(?:ti|vi|la|le) (?:farò|faremo) sapere"
        r"|(?:ti|vi|la|le) (?:avviserò|avviseremo|aggiornerò|aggiorneremo|informerò|informeremo"
        r"|contatterò|contatteremo|scriverò|scriveremo|ricontatterò|terrò|terremo)"
        r"|riceverai|riceverà|riceverete|sarai (?:avvisat[oa]|informat[oa]|contattat[oa])"
        r"|notificherò|notificheremo|resta sintonizzat[oa]"
    ),
    visible=_any(r"qui sotto|qua sotto|in basso|pulsanti?|bottone|tasto|tocca|clicca|premi|scheda"),
    negation="non nulla niente nessun nessuno nessuna mai né senza",
    carriers="è stato stata stati state ancora mai ho hai ha abbiamo avete hanno sono era erano"
    " essere può potrà potrebbe possono potranno viene verrà venire"
    " più l' lo la"
    " li le ne ci",
    question=r"vuoi|vuole|volete|posso|possiamo|devo|dovrei|preferisci|è|sono|hai|ha|avete"
    r"|quale|quali|quando|dove|come|perché|cosa|chi|quanto",
    condition=r"\b(?:se|quando|appena|una volta che|dopo che)\s+(?:\w+\s+)?(?:confermi|confermerai"
    r"|approvi|accetti|scegli|selezioni|rispondi|dici|tocchi|premi)",
    conjunctions=r"ma|quindi|poi|mentre|però|che|cui",
    attributive=r"\b(?:il|lo|la|i|gli|le|l'|del|dello|della|dei|degli|delle|al|allo|alla|ai"
    r"|agli|alle|tuo|tua|tuoi|tue)\s*[^\W\d_]+\s+$",
    coordinators=r"e|ed|o|oppure|né",
    presupposes=r"ora che|adesso che|visto che|dato che|poiché|siccome|dopo che|dal momento che"
    r"|giacché",
    ordinary="il lo la i gli le un una uno di a da in con su per tra fra è e ed o sono non che ma"
    " ti tuo tua tuoi tue mi me te del della dello dei delle al alla allo ai alle nel nella sul"
    " sulla ho hai ha abbiamo avete hanno questo questa questi queste quello quella ancora nulla"
    " niente se sì no grazie prego favore ciao buongiorno buonasera scusa dispiace certo ecco qui"
    " qua lì sotto sopra ora adesso poi già solo anche più meno molto tutto tutti come quando dove"
    " perché cosa chi quale posso puoi può vuoi vuole vorrei serve devo deve fare fai fa"
    " confermare conferma confermi scegli scegliere rispondi vedere vedi lei suo sua suoi sue"
    " vostro vostra ci si ne c'è sia essere stato stata altro altra prossimo bene ok okay",
    state=_any(r"è|sono|resta|restano|rimane|rimangono")
    + r" (?:ancora )?"
    + _any(r"prenotat[oaie]|registrat[oaie]|programmat[oaie]|previst[oaie]")
    + r"|\b(?:il|lo|la|i|gli|le|un|una|uno|tuo|tua|tuoi|tue|suo|sua|suoi|sue|vostro|vostra)\s+"
    r"(?!(?:ho|hai|ha|abbiamo|avete|hanno|è|sono|siamo|siete|stat[oaie]|già|appena)\b)"
    r"[^\W\d_]+\s+(?:(?:già|originariamente)\s+)?(?:prenotat|programmat|previst|registrat)[oaie]\b"
    r"|\bl'(?!(?:ho|hai|ha|abbiamo|avete|hanno)\b)[^\W\d_]+\s+(?:prenotat|programmat|previst)[oaie]\b"
    r"|\b(?:hai|avevi|avete|avevate) (?:già )?(?:prenotat|programmat|previst|registrat)[oaie]\b"
    r"|\bcome (?:da )?(?:prenotat|programmat|previst)[oaie]\b",
    content={
        _C.UPDATE: r"\b(?:il tuo|la tua|i tuoi|le tue|il suo|la sua|i suoi|le sue|il|la|i|le|lo"
        r"|l')\s*nuov[oaie]\b|\b(?:ora|adesso)\s+(?:sei|siete|è|sono|parte|partono|risulta"
        r"|risultano)\b|\b(?:sei|siete|è|sono|risulta)\s+(?:ora|adesso)\b",
        _C.DELETION: r"\bsalta\b|\bsaltat[oaie]\b|\bnon c'è più\b|\bnon (?:è|sono) più (?:valid"
        r"|attiv|previst|prenotat|in programma)\w*|\bnon si (?:fa|farà) più\b",
        _C.COMPLETION: r"\b(?:sei|siamo|siete) a posto\b|\bè andata\b|\btutto ok\b"
        r"|\btutto risolto\b",
        _C.ACCEPTANCE: r"\bvia libera\b",
        _C.DELIVERY: r"\bnella tua (?:casella|email|posta)\b|\bsul tuo conto\b|\bin arrivo\b",
    },
)

_DE = _language(
    outcome={
        _C.CREATION: _any(
            r"erstellt\w*|angelegt\w*|hinzugefügt\w*|(?:um)?gebucht\w*|eröffnet\w*"
            r"|registriert\w*|reserviert\w*|eingerichtet\w*"
        ),
        _C.UPDATE: _any(
            r"aktualisiert\w*|geändert\w*|bearbeitet\w*|gesetzt\w*|gespeichert\w*|korrigiert\w*"
            r"|verschoben\w*|ersetzt\w*|angepasst\w*|eingetragen\w*"
        ),
        _C.DELETION: _any(
            r"gelöscht\w*|entfernt\w*|storniert\w*|abgesagt\w*|zurückgezogen\w*|annulliert\w*"
        ),
        _C.SUBMISSION: _any(
            r"eingereicht\w*|gesendet\w*|gesandt\w*|versendet\w*|verschickt\w*|übermittelt\w*"
            r"|weitergeleitet\w*|abgeschickt\w*|angefragt\w*|beantragt\w*"
        ),
        _C.ACCEPTANCE: _any(
            r"akzeptiert\w*|angenommen\w*|genehmigt\w*|bestätigt\w*|freigegeben\w*|bewilligt\w*"
        ),
        _C.DELIVERY: _any(
            r"zugestellt\w*|geliefert\w*|ausgeliefert\w*|ausgestellt\w*|(?:zurück)?erstattet\w*"
            r"|überwiesen\w*|bezahlt\w*"
        ),
        _C.COMPLETION: _any(
            r"erledigt\w*|fertig\w*|abgeschlossen\w*|beendet\w*|ausgeführt\w*|verarbeitet\w*"
            r"|durchgeführt\w*|geschafft|geklappt|erfolgreich"
        ),
    },
    future_outcome={
        _C.COMPLETION: r"\b(?:ich|wir) werden?\b.*"
        + _any(
            r"erstellen|hinzufügen|(?:um)?buchen|aktualisieren|ändern|löschen|entfernen"
            r"|stornieren|einreichen|senden|schicken|weiterleiten|bestätigen|erledigen|erstatten"
            r"|abschließen|ausführen|zurückziehen|bezahlen|verschieben|speichern"
        )
        + r"|\b(?:ich|wir) (?:\w+ ){0,3}?(?:storniere|stornieren|buche|buchen|sende|senden"
        r"|schicke|schicken|lösche|löschen|ändere|ändern|aktualisiere|bestätige|erstatte"
        r"|ziehe|überweise|leite)\b",
        _C.UPDATE: _any(r"wird|werden") + r".*\b\w*(?:ge\w+t|iert)\w*\b",
    },
    notify=_any(
        r"(?:ich|wir)\b[^.]*\bbescheid|benachrichtig\w*|auf dem laufenden"
        r"|(?:ich|wir) melden? (?:mich|uns)"
        r"|(?:ich|wir) werden? (?:sie|dich|euch|ihnen|dir) \w*\s*"
        r"(?:informieren|kontaktieren|erinnern|schreiben)"
        r"|(?:sie|du) (?:erhalten|erhältst|bekommen|bekommst|wirst|werden)"
        r" (?:eine|einen|nachricht|informiert|benachrichtigt)"
    ),
    visible=_any(
        r"unten|unterhalb|schaltfläche\w*|button\w*|knopf|karte|tippen|tippe|klicken|klicke"
        r"|drücken|drücke"
    ),
    negation="nicht kein keine keinen keinem keiner keines nichts nie niemals weder ohne",
    carriers="wurde wurden ist sind hat haben hatte worden noch bisher bislang je kann können"
    " konnte wird werden würde sein",
    reach=4,
    question=r"möchten|möchtest|wollen|willst|soll|sollen|kann|können|darf|ist|sind|hast|haben"
    r"|hat|wurde|wird|welche|welcher|welches|wann|wo|wie|warum|was|wer",
    condition=r"\b(?:wenn|sobald|falls|nachdem)\s+sie\s+(?:\w+\s+){0,3}(?:bestätigen|zustimmen"
    r"|wählen|auswählen|antworten|tippen|klicken)",
    conjunctions=r"aber|also|dann|während|jedoch|sondern|die|der|das|dass",
    attributive=r"\b(?:der|die|das|den|dem|des|ihr\w*|dein\w*|diese\w*)\s+"
    r"(?:(?:bereits|schon|soeben|neu)\s+)?$",
    coordinators=r"und|oder|sowie",
    presupposes=r"jetzt wo|nun da|nachdem|da|weil|seit|zumal",
    ordinary="der die das den dem des ein eine einen einem einer und oder ist sind nicht ich sie"
    " wir es zu mit für von auf ihr ihre ihren ihrem ihrer ihnen noch nichts wurde wurden haben"
    " hat hast habe wenn kann können möchten möchtest bitte danke gern gerne hallo guten tag ja"
    " nein ok okay hier da dort unten oben jetzt nun schon nur auch mehr alles etwas kein keine"
    " wie was wer wo wann warum welche welcher welches bei nach vor aus über unter im in am an um"
    " bis so dann aber doch sich mich mir dich dir uns euch ihm sein seine wird werden soll sollen"
    " will wollen muss müssen darf bestätigen wählen sehen helfen gibt als dass weil ob gut klar",
    state=_any(r"ist|sind|bleibt|bleiben")
    + r" (?:\S+ ){0,5}"
    + _any(r"gebucht\w*|reserviert\w*|geplant\w*")
    + r"(?! worden)"
    + r"|\b(?:gebucht|reserviert|geplant|vorgesehen)(?:e|en|em|er|es)\b"
    r"|\bwie (?:ursprünglich )?(?:gebucht|reserviert|geplant|vorgesehen)\b",
    content={
        _C.UPDATE: r"\b(?:ihr|ihre|ihren|ihrem|ihrer|ihres|dein|deine|deinen|deinem|deiner|der"
        r"|die|das|den|dem)\s+neue\w*\b|\b(?:sind|ist|bist|seid|fliegen|fliegst|fahren|fährst"
        r"|geht|gehen|startet|starten)\s+(?:\w+\s+)?(?:jetzt|nun|nunmehr|ab sofort)\b"
        r"|\b(?:jetzt|nun)\s+(?:sind|ist|bist|geht|gilt|startet)\b",
        _C.DELETION: r"\bfällt\s+(?:(?!nicht\b)\w+\s+){0,3}aus\b|\bentfällt\b|\bentfallen\b"
        r"|\bhinfällig\b|\bgeplatzt\b|\babgeblasen\b|\bfindet\s+(?:\w+\s+){0,2}nicht\s+(?:mehr\s+)?"
        r"statt\b|\bgibt es nicht mehr\b|\bnicht mehr gültig\b",
        _C.COMPLETION: r"\bstartklar\b|\bunter dach und fach\b|\bin trockenen tüchern\b",
        _C.ACCEPTANCE: r"\bgrünes licht\b",
        _C.DELIVERY: r"\b(?:in|auf) ihrem (?:postfach|posteingang|konto)\b|\bunterwegs\b",
    },
)

_FR = _language(
    outcome={
        _C.CREATION: _any(r"créé\w*|ajouté\w*|réservé\w*|enregistré\w*|inscrit\w*"),
        _C.UPDATE: _any(
            r"mis à jour|mise à jour|modifié\w*|changé\w*|défini\w*|corrigé\w*|déplacé\w*"
            r"|remplacé\w*|sauvegardé\w*"
        ),
        _C.DELETION: _any(r"supprimé\w*|effacé\w*|retiré\w*|annulé\w*"),
        _C.SUBMISSION: _any(r"soumis\w*|envoyé\w*|transmis\w*|expédié\w*|déposé\w*"),
        _C.ACCEPTANCE: _any(r"accepté\w*|approuvé\w*|confirmé\w*|validé\w*|autorisé\w*"),
        _C.DELIVERY: _any(r"livré\w*|remis\w*|émis\w*|remboursé\w*|payé\w*|versé\w*"),
        _C.COMPLETION: _any(
            r"c'est fait|terminé\w*|fini\w*|complété\w*|effectué\w*|traité\w*|réglé\w*"
            r"|accompli\w*|abouti"
        ),
    },
    future_outcome={
        _C.COMPLETION: _any(
            r"j'enverrai|je réserverai|je modifierai|j'annulerai|je supprimerai|je confirmerai"
            r"|je créerai|je mettrai à jour|je rembourserai|je soumettrai|je traiterai"
            r"|je m'occuperai|je retirerai|je paierai|je déplacerai|nous enverrons|nous modifierons"
            r"|nous annulerons|nous confirmerons|nous retirerons"
            r"|(?:je|nous) (?:vais|allons) (?:\w+ )?(?:annuler|envoyer|modifier|supprimer"
            r"|confirmer|réserver|rembourser|transmettre|mettre à jour|retirer|traiter)"
            r"|j'annule|j'envoie|je modifie|je supprime|je confirme|je réserve|je rembourse"
            r"|je transmets|je mets à jour|je retire|je traite"
        ),
        _C.UPDATE: _any(r"sera|seront") + r"\s+(?:\w+\s+)?\w+(?:é|i|is|it)e?s?\b",
    },
    notify=_any(
        r"(?:je|nous) vous (?:tiendrai|tiendrons|préviendrai|préviendrons|informerai"
        r"|informerons|avertirai|notifierai|recontacterai|écrirai|dirai|ferai savoir"
        r"|ferons savoir)"
        r"|vous (?:\w+ )?(?:recevrez|serez (?:\w+ )?(?:informé|notifié|prévenu|averti)\w*)"
        r"|je reviendrai vers vous|nous reviendrons vers vous|au courant"
    ),
    visible=_any(
        r"ci-dessous|en dessous|plus bas|bouton\w*"
        r"|carte(?! bancaire)(?! de crédit)(?! d'embarquement)|appuyez|cliquez|touchez"
    ),
    negation="ne n' pas rien aucun aucune jamais ni sans plus",
    carriers="a ont été est sont encore pas jamais rien été l' les la le y en être peut pourra"
    " pourrait sera serait",
    question=r"voulez|veux|voudriez|dois|puis|pouvez|est-ce|avez|as|souhaitez|quel|quelle"
    r"|quels|quelles|quand|où|comment|pourquoi|qui|que|faut-il",
    condition=r"\b(?:si|s'|quand|dès que|une fois que|lorsque|après que)\s*vous\s+(?:\w+\s+)?"
    r"(?:confirmez|confirmerez|acceptez|accepterez|choisissez|validez|répondez|appuyez)",
    conjunctions=r"mais|donc|puis|alors|cependant|qui|que",
    attributive=r"\b(?:le|la|les|l'|du|des|au|aux|votre|vos|ton|ta|tes|ce|cette)\s*"
    r"[^\W\d_]+\s+$",
    coordinators=r"et|ou|ni",
    presupposes=r"maintenant que|puisque|vu que|étant donné que|comme|après que|dès lors que"
    r"|depuis que",
    ordinary="le la les un une des de du d' et est sont ne n' pas que qui vous votre vos je j' nous"
    " il elle ils elles ce c' cette ces pour dans sur avec a au aux rien encore si oui non merci"
    " bonjour bonsoir s'il plaît svp désolé bien sûr voici voilà ici là dessous maintenant déjà"
    " seulement aussi plus tout tous toute toutes quoi quand où comment pourquoi quel quelle puis"
    " peux pouvez voulez souhaitez faut confirmer confirmez choisir choisissez répondre voir aide"
    " aider autre prochain mon ma mes ton ta tes son sa ses leur leurs me m' te t' se s' y en l'"
    " ou mais donc car d'accord ok",
    state=_any(r"est|sont|reste|restent")
    + r" (?:toujours )?"
    + _any(r"réservé\w*|enregistré\w*|prévu\w*|programmé\w*")
    + r"|\b(?:le|la|les|l'|votre|vos|ton|ta|tes|un|une|ce|cette)\s*"
    r"(?!(?:a|ai|as|avons|avez|ont|été|est|sont|déjà|bien)\b)[^\W\d_]+\s+"
    r"(?:(?:initialement|déjà)\s+)?(?:réservé|prévu|programmé|enregistré)e?s?\b"
    r"|\bvous avez (?:déjà |initialement )?(?:réservé|prévu|programmé)e?s?\b"
    r"|\b(?:tel|telle|tels|telles) que (?:réservé|prévu|programmé)e?s?\b",
    content={
        _C.UPDATE: r"\b(?:votre|vos|ton|ta|tes|le|la|les)\s+nouve(?:au|aux|l|lle|lles)\b"
        r"|\b(?:vous êtes|tu es|vous voilà|te voilà|c'est)\s+(?:maintenant|désormais|dorénavant)\b"
        r"|\bdésormais\b|\bdorénavant\b",
        _C.DELETION: r"\btombé\w*\s+à l'eau\b|\bn'(?:a|aura) (?:pas|plus) lieu\b|\bn'existe plus\b"
        r"|\bn'est plus (?:valable|valide|actif|active|prévue?|réservée?)s?\b",
        _C.COMPLETION: r"\bc'est bon\b|\btout est (?:en ordre|réglé|bon)\b|\bvous êtes paré\w*",
        _C.ACCEPTANCE: r"\bfeu vert\b",
        _C.DELIVERY: r"\bdans votre (?:boîte|messagerie|compte)\b|\ben route\b"
        r"|\bsur votre compte\b",
    },
)

_ES = _language(
    outcome={
        _C.CREATION: _any(r"cread[oa]s?|añadid[oa]s?|agregad[oa]s?|reservad[oa]s?|registrad[oa]s?"),
        _C.UPDATE: _any(
            r"actualizad[oa]s?|modificad[oa]s?|cambiad[oa]s?|guardad[oa]s?|establecid[oa]s?"
            r"|corregid[oa]s?|movid[oa]s?|reemplazad[oa]s?"
        ),
        _C.DELETION: _any(
            r"eliminad[oa]s?|borrad[oa]s?|suprimid[oa]s?|cancelad[oa]s?|anulad[oa]s?"
            r"|retirad[oa]s?"
        ),
        _C.SUBMISSION: _any(r"enviad[oa]s?|presentad[oa]s?|remitid[oa]s?|tramitad[oa]s?"),
        _C.ACCEPTANCE: _any(
            r"aceptad[oa]s?|aprobad[oa]s?|confirmad[oa]s?|autorizad[oa]s?|validad[oa]s?"
        ),
        _C.DELIVERY: _any(
            r"entregad[oa]s?|emitid[oa]s?|reembolsad[oa]s?|pagad[oa]s?|transferid[oa]s?"
        ),
        _C.COMPLETION: _any(
            r"(?<!el )(?<!los )hech[oa]s?|completad[oa]s?|terminad[oa]s?|finalizad[oa]s?"
            r"|procesad[oa]s?|ejecutad[oa]s?|resuelt[oa]s?|todo listo|ya está listo"
            r"|listo(?=\s*[.!:,;]|\s*$)"
        ),
    },
    future_outcome={
        _C.COMPLETION: _any(
            r"enviaré|enviaremos|reservaré|cambiaré|modificaré|cancelaré|eliminaré|confirmaré"
            r"|crearé|actualizaré|reembolsaré|tramitaré|procesaré|me encargaré|retiraré|pagaré"
            r"|moveré|guardaré"
            r"|(?:estoy|estamos) (?:\w+ando|\w+iendo)"
            r"|(?:voy|vamos) a (?:\w+ )?(?:cancelar|enviar|modificar|cambiar|eliminar|confirmar"
            r"|reservar|reembolsar|tramitar|retirar|procesar)"
            r"|(?<!el )(?<!un )(?<!del )(?:ya |ahora )?(?:cancelo|envío|modifico|elimino"
            r"|reservo|confirmo|reembolso|tramito|retiro)"
        ),
        _C.UPDATE: _any(r"será|serán") + r"\s+(?:\w+\s+)?\w+(?:ad|id|ert|uest)[oa]s?\b",
    },
    notify=_any(
        r"(?:te|le|os|les) (?:avisaré|avisaremos|informaré|informaremos|notificaré|contactaré"
        r"|escribiré|mantendré|mantendremos|lo haré saber|haré saber)"
        r"|recibirás|recibirá|recibiréis|serás (?:notificad[oa]|informad[oa]|avisad[oa])"
        r"|me pondré en contacto|nos pondremos en contacto"
    ),
    visible=_any(
        r"abajo|debajo|botón|botones|tarjeta(?! de crédito)(?! de débito)|toca|pulsa|haz clic"
        r"|presiona"
    ),
    negation="no nada ningún ninguna ninguno nunca jamás ni sin",
    carriers="se ha han he hemos sido fue fueron está están todavía aún nada lo la los las le"
    " les me te ser puede podrá podría será sería",
    question=r"¿|quieres|quiere|queréis|puedo|podemos|debo|prefieres|es|son|has|ha|cuál|cuáles"
    r"|cuándo|dónde|cómo|por qué|qué|quién",
    condition=r"\b(?:si|cuando|en cuanto|una vez que|tan pronto como)\s+(?:\w+\s+)?(?:confirmes"
    r"|confirmas|aceptes|aceptas|elijas|eliges|respondas|respondes|pulses|toques)",
    conjunctions=r"pero|así que|luego|mientras|aunque|que",
    attributive=r"\b(?:el|la|los|las|del|al|tu|tus|su|sus|este|esta)\s+[^\W\d_]+\s+$",
    coordinators=r"y|e|o|u|ni",
    presupposes=r"ahora que|ya que|puesto que|dado que|como|después de que|visto que|desde que",
    ordinary="el la los las un una unos unas de del y e o u es son no que en por para con tu tus"
    " te mi mis lo se ha he has al está están estás todavía nada si sí gracias hola favor perdón"
    " siento claro aquí ahí allí abajo arriba ahora ya solo también más menos muy todo todos"
    " todas qué cuál cuándo dónde cómo quién puedo puedes puede quieres quiere quisiera debo"
    " confirmar confirma elegir elige responder ver ayuda ayudar otro otra próximo su sus usted"
    " ustedes le les me nos os pero porque como cuando bien vale ok",
    state=_any(r"está|están|sigue|siguen")
    + r" (?:todavía )?"
    + _any(r"reservad[oa]s?|registrad[oa]s?|programad[oa]s?|previst[oa]s?")
    + r"|\b(?:el|la|los|las|tu|tus|su|sus|un|una|este|esta)\s+"
    r"(?!(?:he|has|ha|hemos|han|sido|está|es|ya)\b)[^\W\d_]+\s+(?:(?:ya|originalmente)\s+)?"
    r"(?:reservad|programad|previst|registrad)[oa]s?\b"
    r"|\b(?:has|habías|habéis) (?:ya )?(?:reservad|programad|previst|registrad)[oa]s?\b"
    r"|\b(?:tal )?como (?:estaba )?(?:reservad|programad|previst)[oa]s?\b",
    content={
        _C.UPDATE: r"\b(?:tu|tus|su|sus|el|la|los|las)\s+nuev[oa]s?\b"
        r"|\b(?:ahora|ya)\s+(?:estás|está|estáis|están|sales|sale)\b"
        r"|\b(?:estás|está|están)\s+(?:ahora|ya)\b",
        _C.DELETION: r"\bse (?:cae|cayó|ha caído|suspende|suspendió)\b|\bqueda sin efecto\b"
        r"|\bya no (?:existe|está|es válid[oa]|hay|sigue|va)\b|\bsuspendid[oa]s?\b|\bse acabó\b",
        _C.COMPLETION: r"\btodo en orden\b|\bya quedó\b|\bqueda(?:s)? (?:listo|lista|resuelto"
        r"|resuelta)\b",
        _C.ACCEPTANCE: r"\bluz verde\b|\bvisto bueno\b",
        _C.DELIVERY: r"\ben tu (?:bandeja|correo|cuenta)\b|\ben camino\b",
    },
)

_LANGUAGES: Final[Mapping[str, _Language]] = {
    "en": _EN, "it": _IT, "de": _DE, "fr": _FR, "es": _ES,
}  # fmt: skip
#: The languages whose prose the guard can judge; any other language falls back to server copy.
GUARDED_LANGUAGES: Final = frozenset(_LANGUAGES)


@dataclass(frozen=True)
class GuardConfig:
    """How the guard reads languages, for an adopter whose prose it misreads.

    `ordinary_words`: words, by language code ("en"), added to that language's ordinary words:
    the language check counts them, and capitalised they are not taken for names (a product's
    name). `min_words`: a text of at least this many words, none of them ordinary in the turn's
    language, is refused as another language. `unchecked_languages`: languages whose language
    check is off (their claim rules and value grounding still run)."""

    ordinary_words: Mapping[str, frozenset[str]] = field(default_factory=dict)
    min_words: int = 3
    unchecked_languages: frozenset[str] = frozenset()

    def ordinary(self, language: str) -> frozenset[str]:
        words = self.ordinary_words.get(language)
        return frozenset(w.lower() for w in words) if words else frozenset()


#: the defaults: every guarded language checked, no words added
DEFAULT_GUARD: Final = GuardConfig()

#: the library's ids and any other id written the way they are (`word_…`: `bkg_01J9`)
_ID_TOKEN = re.compile(
    rf"(?<![0-9a-z])(?:(?:{'|'.join(PREFIXES)})[_\-]|[a-z]{{2,6}}_(?=[0-9a-z]))"
    r"[0-9a-z_\-\u2026.]*"
)
#: a sentence ends at . ! ? (and their full-width forms) before a space or a letter, or at a
#: line or paragraph break; "14. März" goes on
_SENTENCE_END = re.compile(
    r"(?<=[.!?\u2026\u3002\uff0e\uff01\uff1f])(?<![0-9]\.)(?:\s+|(?=[^\W\d_]))|[\n\u2028\u2029]+"
)
_TRAILING = "\"')]}\u00bb\u201d\u2019 \t"
#: a word, an English contraction kept whole ("haven't", "it's", "nothing's"), or an elided
#: article or negation kept with its apostrophe ("l'", "n'")
_WORD = re.compile(r"[^\W_]+'(?:t|s|re|ve|ll|d|m)(?![^\W_])|[^\W_]+'?|'")
#: emphasis marks a writer may put inside a word ("can*c*elled"); they are read through
_EMPHASIS = re.compile(r"[*~`|\\]")
_MARKUP = re.compile(r"<[a-z/!][^>]*>|&#?[0-9a-z]+;")
#: a question that carries an assertion inside it ("did you know it was cancelled?")
_EMBEDS = re.compile(
    r"\b(?:know|knew|noticed?|seen|saw|heard|aware|reali[sz]ed?|sapevi|sai|saputo|visto"
    r"|weißt|wussten|gesehen|gehört|saviez|savez|su|vu|sabías|sabes|visto)\b"
)
_NOW = re.compile(
    r"\b(?:now|new|ora|adesso|nuov[oaie]|jetzt|nun|soeben|neue\w*|maintenant|nouve\w*|ahora"
    r"|ya|nuev[oa]s?)\b"
)


def _language_of(locale: str) -> str:
    return locale.split("-")[0].split("_")[0].lower()


def _normalised(text: str) -> str:
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u02bc", "'")
    return _EMPHASIS.sub("", text).lower()


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 120 else text[:119] + "\u2026"


def _finding(
    code: str,
    rule: str,
    excerpt: str,
    claim: ClaimClass | None,
    span: tuple[int, int] | None,
) -> WordingFinding:
    return WordingFinding(
        code=code, rule=rule, claim_class=claim, excerpt=_excerpt(excerpt), span=span
    )


def check_wording(
    text: str, locale: str, backing: TurnBacking, config: GuardConfig = DEFAULT_GUARD
) -> list[WordingFinding]:
    """Every claim in `text` (written in `locale`) that nothing in the turn backs, and every
    reason the text cannot be judged; empty when the text may be shown."""
    code = _language_of(locale)
    language = _LANGUAGES.get(code)
    if language is None:
        return [_finding(codes.CLAIM_UNJUDGED_LANGUAGE, "language.unjudged", locale, None, None)]
    folded = _normalised(text)
    findings = _unreadable(text, folded, code, language, config)
    ids = {known.lower() for known in backing.ids}
    for match in _ID_TOKEN.finditer(folded):
        token = match.group(0).rstrip(".-_")
        if token not in ids:
            findings.append(
                _finding(codes.CLAIM_UNKNOWN_ID, "id.unknown", token, None, match.span())
            )
    # Every language's rules, the turn's own first: a claim in another language is one too.
    rule_sets = [language, *(other for other in _LANGUAGES.values() if other is not language)]
    for start, end in _segments(_SENTENCE_END, folded, 0, len(folded)):
        for rules in rule_sets:
            findings.extend(_sentence_findings(folded, start, end, rules, backing))
    return _first_per_span(findings)


def _unreadable(
    text: str, folded: str, code: str, language: _Language, config: GuardConfig
) -> list[WordingFinding]:
    """What keeps the rules from reading the text as a person would: hidden or private
    characters, markup or entities, letters of another script, or words of another language."""
    found: list[WordingFinding] = []
    unusual = [ch for ch in set(text) if ch > "~" or (ch < " " and ch not in "\n\r\t")]
    if any(
        unicodedata.category(ch) in ("Cf", "Co", "Cn", "Cs")
        or (unicodedata.category(ch) == "Cc" and ch not in "\n\r\t")
        for ch in unusual
    ):
        found.append(_finding(codes.CLAIM_UNREADABLE_TEXT, "text.hidden", "", None, None))
    if _MARKUP.search(folded):
        found.append(_finding(codes.CLAIM_UNREADABLE_TEXT, "text.markup", "", None, None))
    if any(
        ch.isalpha() and not unicodedata.name(ch, "").startswith("LATIN")
        for ch in {ch for ch in set(folded) if ch > "~"}
    ):
        found.append(_finding(codes.CLAIM_UNREADABLE_TEXT, "text.script", "", None, None))
    if code not in config.unchecked_languages and _foreign(folded, code, language, config):
        found.append(_finding(codes.CLAIM_UNJUDGED_LANGUAGE, "language.mismatch", "", None, None))
    return found


def _foreign(folded: str, code: str, language: _Language, config: GuardConfig) -> bool:
    """Whether `folded` reads as another language: enough words and none ordinary in the turn's
    language, or far more ordinary in another guarded language than in the turn's."""
    words = [w for w in _WORD.findall(_ID_TOKEN.sub(" ", folded)) if not w.isdigit()]
    if len(words) < max(config.min_words, 1):
        return False
    extra = config.ordinary(code)
    own = sum(map(language.ordinary.__contains__, words))
    if extra:
        own += sum(1 for w in words if w in extra and w not in language.ordinary)
    if own == 0:
        return True
    return any(
        sum(map(other.ordinary.__contains__, words)) > 2 * own + 2
        for other in _LANGUAGES.values()
        if other is not language
    )


def _first_per_span(findings: list[WordingFinding]) -> list[WordingFinding]:
    """One finding per matched span (two languages' rules may match the same words)."""
    seen: set[tuple[int, int] | None] = set()
    kept: list[WordingFinding] = []
    for finding in findings:
        if finding.span is not None and finding.span in seen:
            continue
        seen.add(finding.span)
        kept.append(finding)
    return kept


def _segments(separator: re.Pattern[str], text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The non-blank spans of `text[start:end]` between matches of `separator`."""
    spans: list[tuple[int, int]] = []
    at = start
    for match in separator.finditer(text, start, end):
        spans.append((at, match.start()))
        at = match.end()
    spans.append((at, end))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _clauses(language: _Language, text: str, start: int, end: int) -> list[tuple[int, int, bool]]:
    """The clauses of a sentence, each with whether a bare coordinator ("and", "or") joins it to
    the one before (so it may share that one's subject and auxiliaries)."""
    clauses: list[tuple[int, int, bool]] = []
    previous_end: int | None = None
    for a, b in _segments(language.clause_break, text, start, end):
        joined = previous_end is not None and (
            language.coordinator.fullmatch(text, previous_end, a) is not None
        )
        clauses.append((a, b, joined))
        previous_end = b
    return clauses


def _sentence_findings(
    text: str, start: int, end: int, language: _Language, backing: TurnBacking
) -> list[WordingFinding]:
    if language.any_rule.search(text, start, end) is None:
        return []  # no rule of this language matches anywhere in the sentence
    sentence = text[start:end]
    # A sentence asked as a question ("should it be cancelled?") claims nothing, except what it
    # asserts on the way: after "now that"/"since", or as an attributive ("the rebooked flight").
    asked = (
        sentence.rstrip(_TRAILING).endswith("?")
        and language.question.search(sentence.lstrip()) is not None
        and not _EMBEDS.search(sentence)
    )
    conditioned = language.condition.search(text, start, end) is not None
    findings: list[WordingFinding] = []
    inherited = ""  # the subject and auxiliaries a following joined clause shares
    for clause_start, clause_end, joined in _clauses(language, text, start, end):
        own = inherited if joined else ""
        first = clause_end
        candidates = (
            language.rules if language.any_rule.search(text, clause_start, clause_end) else ()
        )
        for rule in candidates:
            for match in rule.pattern.finditer(text, clause_start, clause_end):
                first = min(first, match.start())
                if asked and not _asserted_in_question(language, text, start, match):
                    continue
                if _negated(language, text[clause_start : match.start()], own):
                    continue  # "nothing has been changed", "I have not sent it"
                if rule.promise and _negates(language, text[match.start() : clause_end]):
                    continue  # "ich ziehe sie nicht zurück": a verb-second negation follows
                if rule.promise and conditioned and backing.card:
                    continue  # "once you confirm, I will send it", beside the card that asks
                if rule.state is not None and _state_reading(
                    rule.state, text, (start, end), (clause_start, clause_end), match
                ):
                    continue
                if backing.backs(rule.claim):
                    continue
                findings.append(
                    _finding(
                        _CODES[rule.claim],
                        rule.name,
                        text[clause_start:clause_end],
                        rule.claim,
                        match.span(),
                    )
                )
                break
        prefix = text[clause_start:first]
        inherited = f"{own} {prefix}" if _only_carriers(language, prefix) else prefix
    return findings


def _asserted_in_question(language: _Language, text: str, start: int, match: re.Match[str]) -> bool:
    return (
        language.presupposes.search(text, start, match.start()) is not None
        or language.attributive.search(text, max(start, match.start() - 40), match.start())
        is not None
    )


def _base(word: str) -> str:
    """A contraction's first word ("it's" → "it"); an elision keeps its apostrophe ("l'")."""
    head, mark, _ = word.partition("'")
    return head if mark and len(word) > len(head) + 1 else word


def _negated(language: _Language, before: str, inherited: str = "") -> bool:
    """Whether the words just before a match negate it: a negation, with only auxiliaries and
    the like (and, where the language puts its verb last, a few more words) in between. "The
    flight you didn't want has been cancelled" is not negated; "it has not been sent" is; a
    clause joined by "and" with no subject of its own reads its predecessor's ("nothing was
    cancelled and rebooked")."""
    others = 0
    for word in reversed(_WORD.findall(before)):
        if word.endswith("n't") or _base(word) in language.negation:
            return True
        if _base(word) in language.carriers:
            continue
        others += 1
        if others > language.reach:
            return False
    return others == 0 and bool(inherited) and _negated(language, inherited)


def _negates(language: _Language, text: str) -> bool:
    return any(w.endswith("n't") or _base(w) in language.negation for w in _WORD.findall(text))


def _only_carriers(language: _Language, text: str) -> bool:
    return all(_base(w) in language.carriers for w in _WORD.findall(text))


def _state_reading(
    state: re.Pattern[str],
    text: str,
    sentence: tuple[int, int],
    clause: tuple[int, int],
    match: re.Match[str],
) -> bool:
    """ "is booked" describes how things stand (the reading may span a clause break: "tel que
    réservé"), unless the clause says it became so now."""
    for reading in state.finditer(text, *sentence):
        if reading.start() <= match.start() and match.end() <= reading.end():
            return _NOW.search(text, *clause) is None
    return False


_CODES: Final[Mapping[ClaimClass, str]] = {
    _C.CREATION: codes.CLAIM_PROSE_CREATION,
    _C.UPDATE: codes.CLAIM_PROSE_UPDATE,
    _C.DELETION: codes.CLAIM_PROSE_DELETION,
    _C.SUBMISSION: codes.CLAIM_PROSE_SUBMISSION,
    _C.ACCEPTANCE: codes.CLAIM_PROSE_ACCEPTANCE,
    _C.DELIVERY: codes.CLAIM_PROSE_DELIVERY,
    _C.COMPLETION: codes.CLAIM_PROSE_COMPLETION,
    _C.INTERACTION_VISIBILITY: codes.CLAIM_PROSE_INTERACTION_VISIBILITY,
    _C.FUTURE_NOTIFICATION: codes.CLAIM_PROSE_FUTURE_NOTIFICATION,
}


# --- value grounding ------------------------------------------------------------------------------

#: month and weekday names by language (the turn's language only: Italian "mai" is "never")
_MONTHS: Final[Mapping[str, tuple[str, ...]]] = {
    "en": ("january|jan", "february|feb", "march|mar", "april|apr", "may", "june|jun", "july|jul",
           "august|aug", "september|sept|sep", "october|oct", "november|nov", "december|dec"),
    "it": ("gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto",
           "settembre", "ottobre", "novembre", "dicembre"),
    "de": ("januar|jänner", "februar", "märz", "april", "mai", "juni", "juli", "august",
           "september", "oktober", "november", "dezember"),
    "fr": ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre",
           "octobre", "novembre", "décembre"),
    "es": ("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
           "septiembre|setiembre", "octubre", "noviembre", "diciembre"),
}  # fmt: skip
_WEEKDAYS: Final[Mapping[str, tuple[str, ...]]] = {
    "en": ("monday|mon", "tuesday|tue|tues", "wednesday|wed", "thursday|thu|thurs",
           "friday|fri", "saturday|sat", "sunday|sun"),
    "it": ("lunedì|lunedi", "martedì|martedi", "mercoledì|mercoledi", "giovedì|giovedi",
           "venerdì|venerdi", "sabato", "domenica"),
    "de": ("montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag|sonnabend",
           "sonntag"),
    "fr": ("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"),
    "es": ("lunes", "martes", "miércoles|miercoles", "jueves", "viernes", "sábado|sabado",
           "domingo"),
}  # fmt: skip
#: English calendar words that are ordinary words in lower case ("may", "march", "sun")
_CAPITALISED_ONLY: Final = frozenset(
    re.findall(
        r"\w+",
        "jan feb mar apr jun jul aug sep sept oct nov dec may march mon tue tues wed thu thurs"
        " fri sat sun",
    )
)
#: German capitalises every noun: there a capitalised word is taken for a name only after a
#: preposition that takes a place with no article ("nach Paris", "aus Wien") or a title ("Frau
#: Rossi"); a name elsewhere in German prose is not seen
_DE_NAME_AFTER: Final = re.compile(
    r"\b(?:nach|aus|ab|bis|via|herrn?|frau|hr|fr)\.?\s+$", re.IGNORECASE
)
_CURRENCY = (
    r"[€$£¥₹]|eur|usd|gbp|chf|jpy|euros?|dollars?|pounds?|francs?|franken|franchi|sterline?"
    r"|dólares?|libras?"
)
_NUMBER = r"\d{1,3}(?:[,.'\u00a0\u202f]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?"
#: every value-like token but emails and links; a token matches the first alternative that
#: takes it (a word only when it opens with a capital: the rest are never values)
_VALUE: Final = re.compile(
    rf"""(?P<iso>(?<![\d.])\d{{4}}-\d{{1,2}}-\d{{1,2}}(?!\d))
    |(?P<time>(?<![\d.,:])\d{{1,2}}(?:[:h]\d{{2}}|\.\d{{2}}(?=\s*(?:uhr|[ap]\.?m)))
        (?:\s*[ap]\.?m\.?|\s*uhr)?(?!\d)
        |(?<![\d.,:])\d{{1,2}}(?:\s*[ap]\.?m\.?(?!\w)|\s*uhr\b|h(?!\w)))
    |(?P<numdate>(?<![\d.,/])\d{{1,2}}[./]\d{{1,2}}(?:[./](?:\d{{4}}|\d{{2}})(?!\d)|\.(?!\d)|/(?!\d)
        |(?=[\s,;)!?]|$)))
    |(?P<code>(?<![\w@])(?=[a-z]*[-_/.]?\d)(?=\d*[-_/.]?[a-z])[a-z0-9]+(?:[-_/][a-z0-9]+)*(?![\w@])
        |(?<![\w@])(?!(?:eur|usd|gbp|chf|jpy)\s)(?-i:[A-Z]{{2,3}})\s\d{{2,5}}(?!\w))
    |(?P<number>(?<![\w.,])(?:{_NUMBER})(?:st|nd|rd|th|º|ª|°|%|er|e)?(?!\w))
    |(?P<word>(?<![\w@])(?-i:[A-Z\u00c0-\u00d6\u00d8-\u00de\u0100-\u017f])[^\W\d_]*(?:['-][^\W\d_]+)*)""",
    re.IGNORECASE | re.VERBOSE,
)
#: `_VALUE` without its capitalised words: a ground's words are all keyed at once, so matching
#: them one by one there would only be skipped
_GROUND_VALUE: Final = re.compile(
    _VALUE.pattern[: _VALUE.pattern.index("\n    |(?P<word>")], re.IGNORECASE | re.VERBOSE
)
#: a currency just before or after a number makes it an amount ("€120", "120 EUR")
_CURRENCY_BEFORE: Final = re.compile(rf"(?:{_CURRENCY})\s?$", re.IGNORECASE)
_CURRENCY_AFTER: Final = re.compile(rf"\s?(?:{_CURRENCY})(?!\w)", re.IGNORECASE)
#: emails and links, sought only in a text that has an "@" or a "://" or "www."
_LINK: Final = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\bhttps?://[^\s<>\"]+|\bwww\.[^\s<>\"]+")
_LETTERS: Final = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")
#: "3rd", "1er", "10kg", "2h": a number with its suffix or unit, not a code ("14C" is one)
_SUFFIXED = re.compile(r"(\d+)(?:st|nd|rd|th|er|e|º|ª|[a-zµ%]{1,3})")
_SEPARATORS = re.compile(r"[-_/.\s]")
_DIGITS = re.compile(_NUMBER)
#: what may stand just before a capitalised word that opens a sentence, an item or a quotation
_OPENS = frozenset(".!?:;\n\u2026\u00bf\u00a1\"'\u201c\u2018\u201e\u00ab([*-\u2022\u2013\u2014>#")


@dataclass(frozen=True)
class _Calendar:
    months: Mapping[str, int]
    weekdays: Mapping[str, int]
    #: a day and month written out ("14 March", "March 14th", "14. März", "14 de marzo")
    date: re.Pattern[str]
    #: a month or weekday named alone ("venerdì", "Friday")
    words: re.Pattern[str]


def _calendar(language: str) -> _Calendar:
    months = {w: i for i, ws in enumerate(_MONTHS[language], 1) for w in ws.split("|")}
    weekdays = {w: i for i, ws in enumerate(_WEEKDAYS[language]) for w in ws.split("|")}
    names = "|".join(sorted(months, key=len, reverse=True))
    return _Calendar(
        months=months,
        weekdays=weekdays,
        date=re.compile(
            rf"(?<![\d.,])(?P<d1>\d{{1,2}})(?:st|nd|rd|th|º|er|\.)?\s+(?:de\s+|of\s+)?"
            rf"(?P<m1>{names})\b\.?(?:,?\s+(?:de\s+)?(?P<y1>\d{{4}}))?"
            rf"|\b(?P<m2>{names})\b\.?\s+(?:the\s+)?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?(?!\d)"
            rf"(?:,?\s+(?P<y2>\d{{4}}))?",
            re.IGNORECASE,
        ),
        words=re.compile(
            rf"(?<![\w-])(?:{'|'.join(sorted([*months, *weekdays], key=len, reverse=True))})"
            r"(?![\w-])",
            re.IGNORECASE,
        ),
    )


_CALENDARS: Final[Mapping[str, _Calendar]] = {language: _calendar(language) for language in _MONTHS}


def _number_keys(raw: str) -> set[str]:
    """What a written number may mean: "1,200" and "1.200" are 1200 (or 1.2), "07" is 7,
    "120.00" is 120."""
    digits = raw.replace("\u00a0", "").replace("\u202f", "").replace("'", "")
    keys: set[str] = set()
    for thousands, decimal in ((",", "."), (".", ",")):
        body = digits
        grouped = rf"\d{{1,3}}(?:\{thousands}\d{{3}})+(?:\{decimal}\d+)?"
        if thousands in body and re.fullmatch(grouped, body):
            body = body.replace(thousands, "")
        body = body.replace(decimal, ".")
        if not re.fullmatch(r"\d+(?:\.\d+)?", body):
            continue
        whole, _, fraction = body.partition(".")
        fraction = fraction.rstrip("0")
        keys.add("n:" + (whole.lstrip("0") or "0") + ("." + fraction if fraction else ""))
    return keys


_CLOCK = re.compile(r"(\d{1,2})(?:\s*[:h.]\s*(\d{2}))?\s*(?:([ap])\.?m)?", re.IGNORECASE)


def _time_keys(raw: str) -> set[str]:
    clock = _CLOCK.match(raw)
    if clock is None:
        return set()
    hour, minute = int(clock.group(1)), int(clock.group(2) or 0)
    half = (clock.group(3) or "").lower()
    if half == "p" and hour < 12:
        hour += 12
    elif half == "a" and hour == 12:
        hour = 0
    return {f"t:{hour}:{minute:02d}"} if hour < 25 and minute < 60 else set()


def _date_keys(day: int, month: int, year: int | None, grounds: bool) -> set[str]:
    """A date's keys; in the grounds also its day, month and year alone and its weekday (a
    ground "2025-03-14" grounds "Friday", "March" and "the 14th")."""
    if not (1 <= day <= 31 and 1 <= month <= 12):
        return set()
    if year is not None and year < 100:
        year += 2000
    keys = {f"d:{month}-{day}"} | ({f"d:{year}-{month}-{day}"} if year is not None else set())
    if grounds:
        keys |= {f"n:{day}", f"m:{month}"}
        if year is not None:
            keys.add(f"n:{year}")
            with contextlib.suppress(ValueError):  # "31 February"
                keys.add(f"w:{datetime.date(year, month, day).weekday()}")
    return keys


def _is_name(text: str, start: int, raw: str, code: str, ordinary: frozenset[str]) -> bool:
    """Whether a word is a name: capitalised, not opening a sentence (or an item, a quotation),
    not an ordinary word of the language, not "I"; in German only where a name stands."""
    if not raw[0].isupper():
        return False
    lowered = raw.lower()
    if raw.isupper() and len(raw) >= 3:
        return lowered not in ordinary  # a code written as a word ("PNR", "XQZTRM")
    if lowered in ordinary or lowered == "i" or lowered.startswith("i'"):
        return False
    before = text[:start].rstrip(" \t")
    if not before or before[-1] in _OPENS or before[-1].isdigit():
        return False
    if code == "de":
        return _DE_NAME_AFTER.search(text, max(0, start - 8), start) is not None
    return True


@dataclass(frozen=True)
class _Value:
    kind: str
    span: tuple[int, int]
    keys: frozenset[str]


def _values(text: str, code: str, ordinary: frozenset[str], grounds: bool) -> list[_Value]:
    """The value-like tokens of NFKC-normalised `text`, each with the keys that match it. In
    grounds every word is one (a name the user wrote in lower case still grounds it)."""
    calendar = _CALENDARS.get(code)
    found: list[_Value] = []
    taken: list[tuple[int, int]] = []

    def take(kind: str, match: re.Match[str], keys: set[str]) -> None:
        found.append(_Value(kind, match.span(), frozenset(keys)))
        taken.append(match.span())

    if "@" in text or "://" in text or "www." in text:
        for match in _LINK.finditer(text):
            take("email" if "@" in match.group(0) else "url", match,
                 {"x:" + match.group(0).lower().rstrip(".,;:!?)")})  # fmt: skip
    if calendar is not None:
        for match in calendar.date.finditer(text):
            written = match.group("m1") or match.group("m2")
            if written.lower() in _CAPITALISED_ONLY and not written[0].isupper():
                continue
            year = match.group("y1") or match.group("y2")
            day = int(match.group("d1") or match.group("d2"))
            month = calendar.months[written.lower()]
            take("date", match, _date_keys(day, month, int(year) if year else None, grounds))
        for match in calendar.words.finditer(text):
            raw, lowered = match.group(0), match.group(0).lower()
            if _overlaps(match.start(), taken) or (
                lowered in _CAPITALISED_ONLY and not raw[0].isupper()
            ):
                continue
            weekday = calendar.weekdays.get(lowered)
            take("date", match, {f"w:{weekday}" if weekday is not None
                                 else f"m:{calendar.months[lowered]}"})  # fmt: skip
    for match in (_GROUND_VALUE if grounds else _VALUE).finditer(text):
        start = match.start()
        if _overlaps(start, taken):
            continue
        kind, raw = match.lastgroup or "word", match.group(0)
        keys: set[str]
        if kind == "iso":
            year, month, day = (int(part) for part in raw.split("-"))
            kind, keys = "date", _date_keys(day, month, year, grounds)
        elif kind == "numdate":
            parts = [int(part) for part in re.split(r"[./]", raw) if part]
            year_part = parts[2] if len(parts) > 2 else None
            kind = "date"
            keys = (
                _date_keys(parts[0], parts[1], year_part, grounds)
                | _date_keys(parts[1], parts[0], year_part, grounds)
                | _number_keys(raw.rstrip("./"))
            )
        elif kind == "time":
            keys = _time_keys(raw)
        elif kind == "code":
            suffixed = _SUFFIXED.fullmatch(raw)
            if suffixed is not None:
                kind, keys = "number", _number_keys(suffixed.group(1))
            else:
                keys = {"c:" + _SEPARATORS.sub("", raw.lower())}
        elif kind == "number":
            keys = _number_keys(_DIGITS.match(raw).group(0))  # type: ignore[union-attr]
            before = _CURRENCY_BEFORE.search(text, max(0, start - 8), start)
            after = _CURRENCY_AFTER.match(text, match.end())
            if before or after:
                kind = "amount"
                span = (before.start() if before else start, after.end() if after else match.end())
                found.append(_Value(kind, span, frozenset(keys)))
                taken.append(span)
                continue
        elif grounds:
            continue  # every word of the grounds is keyed below
        elif _CURRENCY_BEFORE.fullmatch(raw):
            continue  # "EUR" before its amount
        elif _is_name(text, start, raw, code, ordinary):
            lowered = raw.lower()
            kind = "code" if raw.isupper() else "name"
            keys = {"a:" + lowered, "c:" + _SEPARATORS.sub("", lowered)}
        else:
            continue
        if keys:
            found.append(_Value(kind, match.span(), frozenset(keys)))
    if grounds:
        words = {"a:" + word for word in _LETTERS.findall(text.lower())}
        found.append(_Value("word", (0, len(text)), frozenset(words)))
    return found


def _overlaps(start: int, taken: list[tuple[int, int]]) -> bool:
    return any(a <= start < b for a, b in taken)


@functools.lru_cache(maxsize=1024)
def _ground_keys(ground: str, code: str) -> frozenset[str]:
    """One ground's keys: cached, since a conversation's facts and blocks repeat turn to turn."""
    normalised = unicodedata.normalize("NFKC", ground)
    return frozenset(
        key for value in _values(normalised, code, frozenset(), True) for key in value.keys
    )


def ungrounded_values(
    text: str, locale: str, grounds: Iterable[str], config: GuardConfig = DEFAULT_GUARD
) -> list[WordingFinding]:
    """Every value-like token in `text` that no string of `grounds` holds: numbers, dates,
    weekdays and months, times, amounts, codes and ids, emails and links, capitalised names.

    `grounds` are what the turn may state: its allowed facts' values, its receipts' titles and
    bodies, its notices' texts, its cards' titles and labels, the user's own words. Tokens are
    compared after normalisation (case, NFKC, thousands separators, leading zeros, "2 pm" is
    "14:00", "14 March" is "2025-03-14"). A finding names the kind of value (`rule`:
    "value.time", ...) and where it lies (`span`: offsets into the NFKC-normalised text), never
    the value itself."""
    code = _language_of(locale)
    language = _LANGUAGES.get(code)
    ordinary = (language.ordinary if language else frozenset()) | config.ordinary(code)
    normalised = unicodedata.normalize("NFKC", text)
    unfound = _values(normalised, code, ordinary, False)
    for ground in grounds:  # read only until every value is found (most prose names few)
        if not unfound:
            break
        keys = _ground_keys(ground, code)
        unfound = [value for value in unfound if not value.keys & keys]
    return [
        _finding(codes.CLAIM_UNGROUNDED_VALUE, f"value.{value.kind}", "", None, value.span)
        for value in unfound
    ]
