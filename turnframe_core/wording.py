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
  scheduled.

Any id-shaped token (`rcp_…`, `int_…`, `evt_…`, `cmd_…`) must name a block of this turn, or an
event or option one of them carries. A negated clause ("nothing has been changed yet") and a
question pass; a promise conditioned on the user's answer ("once you confirm, I will send it")
passes while a card asks for that answer. Languages without rules here are not judged: their
prose is refused, so server copy stands in. Safe beats fluent: a rule that cannot tell refuses.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from pydantic import Field

from turnframe_core import codes
from turnframe_core._model import FrozenModel, NonEmptyStr
from turnframe_core.blocks import InteractionBlock, ReceiptBlock
from turnframe_core.events import ReceiptSeverity
from turnframe_core.ids import PREFIXES

__all__ = [
    "GUARDED_LANGUAGES",
    "ClaimClass",
    "TurnBacking",
    "WordingFinding",
    "check_wording",
    "ungrounded_values",
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
    ) -> TurnBacking:
        """The backing of `blocks`. A receipt whose `status_code` is in `follow_up_codes` says a
        follow-up is scheduled; one whose status code `receipt_claims` names backs those outcome
        classes only (a receipt no declaration names backs every outcome class)."""
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
            follow_up=follow_up,
            ids=frozenset(ids),
            outcomes=None if classes is None else frozenset(classes),
        )

    def backs(self, claim: ClaimClass) -> bool:
        if claim is ClaimClass.INTERACTION_VISIBILITY:
            return self.card
        if claim is ClaimClass.FUTURE_NOTIFICATION:
            return self.follow_up
        return self.outcome and (self.outcomes is None or claim in self.outcomes)


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
    #: common words: a text of several words with none of them is in another language
    common: frozenset[str]


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
    common: str,
    state: str | None = None,
    reach: int = 0,
) -> _Language:
    rules: list[_Rule] = []
    state_pattern = re.compile(state) if state else None
    for claim, words in outcome.items():
        rules.append(_rule(f"{claim.value}.stated", claim, words, state=state_pattern))
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
        clause_break=re.compile(rf"[,;:()\[\]\u2013\u2014\u2026]|\s-\s|\b(?:{conjunctions})\b"),
        common=frozenset(common.split()),
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
    " actually really any anything it them this that i we",
    question=r"do|does|did|is|are|was|were|have|has|had|can|could|shall|should|will|would|may"
    r"|might|must|what|which|who|whom|whose|when|where|why|how|want|need",
    condition=r"\b(?:if|once|when|after|as soon as)\s+you\s+(?:\w+\s+)?(?:confirm|approve|agree"
    r"|accept|choose|select|say|tap|click|press|reply|answer|decide|pick|give)",
    conjunctions=r"and|but|so|then|while|although|however|that|which|who",
    common="the a an to of and is are was were be it its you your i we my our for on in at this"
    " that with not no has have had will can do does what there here as or but so by from",
    state=r"\b(?:is|are|remains?|stays?) (?:still )?"
    + _any(r"booked|reserved|registered|scheduled|planned"),
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
            r"|prenoto|confermo|rimborso|aggiorno|ritiro)"
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
    carriers="è stato stata stati state ancora mai ha hanno sono era erano stato più l' lo la"
    " li le ne ci",
    question=r"vuoi|vuole|volete|posso|possiamo|devo|dovrei|preferisci|è|sono|hai|ha|avete"
    r"|quale|quali|quando|dove|come|perché|cosa|chi|quanto",
    condition=r"\b(?:se|quando|appena|una volta che|dopo che)\s+(?:\w+\s+)?(?:confermi|confermerai"
    r"|approvi|accetti|scegli|selezioni|rispondi|dici|tocchi|premi)",
    conjunctions=r"e|ma|quindi|poi|mentre|però|che|cui",
    common="il lo la i gli le un una di a da in con su per è sono non che e ma ti tuo tua mi"
    " il del della al alla ho hai ha questo questa ancora nulla se",
    state=_any(r"è|sono|resta|restano|rimane|rimangono")
    + r" (?:ancora )?"
    + _any(r"prenotat[oaie]|registrat[oaie]|programmat[oaie]|previst[oaie]"),
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
    carriers="wurde wurden ist sind hat haben hatte worden noch bisher bislang je",
    reach=4,
    question=r"möchten|möchtest|wollen|willst|soll|sollen|kann|können|darf|ist|sind|hast|haben"
    r"|hat|wurde|wird|welche|welcher|welches|wann|wo|wie|warum|was|wer",
    condition=r"\b(?:wenn|sobald|falls|nachdem)\s+sie\s+(?:\w+\s+){0,3}(?:bestätigen|zustimmen"
    r"|wählen|auswählen|antworten|tippen|klicken)",
    conjunctions=r"und|aber|also|dann|während|jedoch|sondern|die|der|das|dass",
    common="der die das den dem des ein eine einen und ist sind nicht ich sie wir es zu mit für"
    " von auf ihr ihre ihren noch nichts wurde haben hat wenn kann",
    state=_any(r"ist|sind|bleibt|bleiben")
    + r" (?:\S+ ){0,5}"
    + _any(r"gebucht\w*|reserviert\w*|geplant\w*")
    + r"(?! worden)",
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
    carriers="a ont été est sont encore pas jamais rien été l' les la le y en",
    question=r"voulez|veux|voudriez|dois|puis|pouvez|est-ce|avez|as|souhaitez|quel|quelle"
    r"|quels|quelles|quand|où|comment|pourquoi|qui|que|faut-il",
    condition=r"\b(?:si|s'|quand|dès que|une fois que|lorsque|après que)\s*vous\s+(?:\w+\s+)?"
    r"(?:confirmez|confirmerez|acceptez|accepterez|choisissez|validez|répondez|appuyez)",
    conjunctions=r"et|mais|donc|puis|alors|cependant|qui|que",
    common="le la les un une des de du et est sont ne pas que qui vous votre vos je nous il elle"
    " ce cette pour dans sur avec a au aux rien encore si",
    state=_any(r"est|sont|reste|restent")
    + r" (?:toujours )?"
    + _any(r"réservé\w*|enregistré\w*|prévu\w*|programmé\w*"),
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
            r"|listo(?=\s*[.!:]|\s*$)"
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
    " les me te",
    question=r"¿|quieres|quiere|queréis|puedo|podemos|debo|prefieres|es|son|has|ha|cuál|cuáles"
    r"|cuándo|dónde|cómo|por qué|qué|quién",
    condition=r"\b(?:si|cuando|en cuanto|una vez que|tan pronto como)\s+(?:\w+\s+)?(?:confirmes"
    r"|confirmas|aceptes|aceptas|elijas|eliges|respondas|respondes|pulses|toques)",
    conjunctions=r"y|pero|así que|luego|mientras|aunque|que",
    common="el la los las un una de del y es son no que en por para con tu tus te mi lo se ha"
    " he al está todavía nada si",
    state=_any(r"está|están|sigue|siguen")
    + r" (?:todavía )?"
    + _any(r"reservad[oa]s?|registrad[oa]s?|programad[oa]s?|previst[oa]s?"),
)

_LANGUAGES: Final[Mapping[str, _Language]] = {
    "en": _EN, "it": _IT, "de": _DE, "fr": _FR, "es": _ES,
}  # fmt: skip
#: The languages whose prose the guard can judge; any other language falls back to server copy.
GUARDED_LANGUAGES: Final = frozenset(_LANGUAGES)

_ID_TOKEN = re.compile(rf"(?<![0-9a-z])(?:{'|'.join(PREFIXES)})[_\-][0-9a-z_\-\u2026.]*")
#: a sentence ends at . ! ? (and their full-width forms) before a space or a letter, or at a
#: line or paragraph break; "14. März" goes on
_SENTENCE_END = re.compile(
    r"(?<=[.!?\u2026\u3002\uff0e\uff01\uff1f])(?<![0-9]\.)(?:\s+|(?=[^\W\d_]))|[\n\u2028\u2029]+"
)
_TRAILING = "\"')]}\u00bb\u201d\u2019 \t"
_WORD = re.compile(r"[^\W_]+'?|'")
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


def check_wording(text: str, locale: str, backing: TurnBacking) -> list[WordingFinding]:
    """Every claim in `text` (written in `locale`) that nothing in the turn backs, and every
    reason the text cannot be judged; empty when the text may be shown."""
    language = _LANGUAGES.get(locale.split("-")[0].split("_")[0].lower())
    if language is None:
        return [_finding(codes.CLAIM_UNJUDGED_LANGUAGE, "language.unjudged", locale, None, None)]
    folded = _normalised(text)
    findings = _unreadable(text, folded, language)
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


def _unreadable(text: str, folded: str, language: _Language) -> list[WordingFinding]:
    """What keeps the rules from reading the text as a person would: hidden or private
    characters, markup or entities, letters of another script, or words of another language."""
    found: list[WordingFinding] = []
    if any(
        unicodedata.category(ch) in ("Cf", "Co", "Cn", "Cs")
        or (unicodedata.category(ch) == "Cc" and ch not in "\n\r\t")
        for ch in text
    ):
        found.append(_finding(codes.CLAIM_UNREADABLE_TEXT, "text.hidden", "", None, None))
    if _MARKUP.search(folded):
        found.append(_finding(codes.CLAIM_UNREADABLE_TEXT, "text.markup", "", None, None))
    if any(ch.isalpha() and not unicodedata.name(ch, "").startswith("LATIN") for ch in folded):
        found.append(_finding(codes.CLAIM_UNREADABLE_TEXT, "text.script", "", None, None))
    words = [w for w in _WORD.findall(_ID_TOKEN.sub(" ", folded)) if not w.isdigit()]
    if len(words) >= 3 and not any(w in language.common for w in words):
        found.append(_finding(codes.CLAIM_UNJUDGED_LANGUAGE, "language.mismatch", "", None, None))
    return found


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


def _sentence_findings(
    text: str, start: int, end: int, language: _Language, backing: TurnBacking
) -> list[WordingFinding]:
    sentence = text[start:end]
    if (
        sentence.rstrip(_TRAILING).endswith("?")
        and language.question.search(sentence.lstrip())
        and not _EMBEDS.search(sentence)
    ):
        return []  # a sentence asked as a question ("should it be cancelled?") claims nothing
    clauses = _segments(language.clause_break, text, start, end)
    conditioned = language.condition.search(text, start, end) is not None
    findings: list[WordingFinding] = []
    for clause_start, clause_end in clauses:
        for rule in language.rules:
            for match in rule.pattern.finditer(text, clause_start, clause_end):
                if _negated(language, text[clause_start : match.start()]):
                    continue  # "nothing has been changed", "I have not sent it"
                if rule.promise and conditioned and backing.card:
                    continue  # "once you confirm, I will send it", beside the card that asks
                if rule.state is not None and _state_reading(
                    rule.state, text, clause_start, clause_end, match
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
    return findings


def _negated(language: _Language, before: str) -> bool:
    """Whether the words just before a match negate it: a negation, with only auxiliaries and
    the like (and, where the language puts its verb last, a few more words) in between. "The
    flight you didn't want has been cancelled" is not negated; "it has not been sent" is."""
    others = 0
    for word in reversed(_WORD.findall(before)):
        if word in language.negation or word.endswith("n't"):
            return True
        if word in language.carriers:
            continue
        others += 1
        if others > language.reach:
            return False
    return False


def _state_reading(
    state: re.Pattern[str], text: str, start: int, end: int, match: re.Match[str]
) -> bool:
    """ "is booked" describes how things stand, unless the clause says it became so now."""
    for reading in state.finditer(text, start, end):
        if reading.start() <= match.start() and match.end() <= reading.end():
            return _NOW.search(text, start, end) is None
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


def ungrounded_values(
    text: str, locale: str, grounds: Sequence[str]
) -> list[WordingFinding]:  # H2 replaces
    """Every value-like token of `text` that occurs in none of `grounds` (free narration)."""
    return []
