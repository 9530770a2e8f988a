"""Server copy: every sentence the server writes (receipts, notices, cards, fallbacks) comes from
one `ServerCopy`, and every rendered block stores which template, version, locale and catalog
rendered it, so a replay shows the stored text and never renders it again.

`CatalogCopy` is the built-in implementation (English and Italian catalogs, `str.format`
placeholders); a localized jinja2/babel implementation can replace it behind the same protocol.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from turnframe_core import codes
from turnframe_core._canonical import digest
from turnframe_core.blocks import CopyRef
from turnframe_core.errors import TurnframeError

__all__ = [
    "LIBRARY_CATALOGS",
    "CatalogCopy",
    "MissingCopy",
    "RenderedCopy",
    "ServerCopy",
    "as_data",
    "receipt_title",
]


class RenderedCopy:
    """A rendered sentence and the reference that says how it was rendered."""

    __slots__ = ("copy_ref", "text")

    def __init__(self, text: str, copy_ref: CopyRef) -> None:
        self.text = text
        self.copy_ref = copy_ref


class MissingCopy(TurnframeError):
    """A declared locale lacks templates; `missing` names every (locale, template id)."""

    code = codes.RUNTIME_MISSING_COPY

    def __init__(self, missing: Iterable[tuple[str, str]]) -> None:
        self.missing = tuple(sorted(missing))
        shown = ", ".join(f"{locale}:{template}" for locale, template in self.missing)
        super().__init__(f"missing server copy: {shown}")


class ServerCopy(Protocol):
    def render(self, template_id: str, locale: str, params: Mapping[str, Any]) -> RenderedCopy:
        """The sentence for `template_id` in `locale` (falling back to its language, then the
        default locale); raises `MissingCopy` if no catalog has it."""
        ...

    def missing(
        self, locales: Iterable[str], required: Iterable[str] = ()
    ) -> list[tuple[str, str]]:
        """Every (locale, template id) that rendering in a served locale could not find: the
        library's templates, the default locale's, and `required`, each looked up as `render`
        does (the locale, then its language) but never from the default locale, which is itself
        checked whole."""
        ...

    def has(self, template_id: str) -> bool:
        """Whether any catalog holds `template_id`."""
        ...


LIBRARY_CATALOGS: dict[str, dict[str, str]] = {
    "en": {
        codes.NOTICE_COMMAND_FAILED: "That did not go through, so nothing was changed.",
        codes.NOTICE_ACT_REFUSED: "{explanation}",
        codes.NOTICE_REVISION_CONFLICT: (
            "This record changed while the request was being prepared, so it was not applied."
        ),
        codes.NOTICE_VERIFICATION_IN_PROGRESS: (
            "The request was sent and its result is not confirmed yet. It is being verified."
        ),
        codes.NOTICE_OUTCOME_UNCERTAIN: (
            "It is not yet known whether that went through. It is being checked."
        ),
        codes.NOTICE_RESULT_UNCONFIRMED: (
            "The result of that could not be confirmed, so nothing is shown as done."
        ),
        codes.NOTICE_INTERACTION_UNAVAILABLE: (
            "The confirmation could not be prepared, so nothing is waiting for an answer."
        ),
        codes.NOTICE_CASE_REFRESH_UNAVAILABLE: (
            "The latest state could not be verified, so no follow-up was prepared."
        ),
        codes.NOTICE_NOTHING_SUBMITTED: "You asked not to submit anything, so nothing was sent.",
        codes.NOTICE_NOTHING_DELETED: "You asked not to delete anything, so nothing was removed.",
        codes.NOTICE_NO_EXTERNAL_EFFECTS: (
            "You asked to keep this internal, so nothing was sent outside."
        ),
        codes.NOTICE_ALREADY_ANSWERED: "You already answered this, so nothing was done again.",
        codes.NOTICE_STALE_INTERACTION: (
            "That choice was for an earlier version of the record, so nothing was done."
        ),
        codes.NOTICE_INTERACTION_CLOSED: "That choice is no longer open, so nothing was done.",
        codes.NOTICE_NOT_UNDERSTOOD: (
            "I could not read part of your message reliably, so nothing was changed for it."
        ),
        codes.NOTICE_MESSAGE_UNREADABLE: (
            "I could not read your message reliably, so nothing was changed."
        ),
        codes.NOTICE_INSTRUCTION_DECLINED: "You said no, so that was not carried out.",
        codes.NOTICE_PARTIAL_RESULT: "Part of your request went through and part did not.",
        codes.NOTICE_TURN_INTERRUPTED: (
            "This reply was interrupted. What was already recorded still stands."
        ),
        "turnframe.refusal.missing": "There is no such record here.",
        "turnframe.refusal.not_proposable": "That is not something this record offers now.",
        "turnframe.refusal.human_review_required": (
            "This needs a review by a person, so it was not done here."
        ),
        "turnframe.refusal.trusted_origin_required": (
            "This needs your explicit confirmation, so it was not done."
        ),
        "turnframe.card.confirm.title": "Please confirm: {summary}",
        "turnframe.card.confirm.confirm": "Confirm",
        "turnframe.card.confirm.decline": "Cancel",
        "turnframe.card.select.title": "Which one did you mean?",
        "turnframe.card.select.none": "None of these",
        "turnframe.answer.source_unavailable": (
            "I cannot answer that from the records available right now."
        ),
        "turnframe.answer.record": "{label}: {values}.",
        "turnframe.answer.nothing_known": "{label} holds no details yet.",
        "turnframe.transition.done": "Done: {items}.",
        "turnframe.transition.nothing_done": "Nothing was changed.",
        "turnframe.act.changed_nothing": "That is already so, so nothing needed to change.",
        "turnframe.receipt.recorded": "This was recorded.",
        "turnframe.transition.card": "Please choose below: {title}",
        "turnframe.transition.go_on": "Is there anything else?",
        "turnframe.transition.ask": "{question}",
        "turnframe.transition.next": "You could next: {steps}.",
    },
    "it": {
        codes.NOTICE_COMMAND_FAILED: "Non è andato a buon fine, quindi non è cambiato nulla.",
        codes.NOTICE_ACT_REFUSED: "{explanation}",
        codes.NOTICE_REVISION_CONFLICT: (
            "Il record è cambiato mentre la richiesta veniva preparata, "
            "quindi non è stata applicata."
        ),
        codes.NOTICE_VERIFICATION_IN_PROGRESS: (
            "La richiesta è stata inviata e l'esito non è ancora confermato. È in verifica."
        ),
        codes.NOTICE_OUTCOME_UNCERTAIN: (
            "Non si sa ancora se è andato a buon fine. È in verifica."
        ),
        codes.NOTICE_RESULT_UNCONFIRMED: (
            "Non è stato possibile confermarne l'esito, quindi nulla risulta fatto."
        ),
        codes.NOTICE_INTERACTION_UNAVAILABLE: (
            "Non è stato possibile preparare la conferma, quindi nulla attende una risposta."
        ),
        codes.NOTICE_CASE_REFRESH_UNAVAILABLE: (
            "Non è stato possibile verificare lo stato più recente, quindi nessun seguito è pronto."
        ),
        codes.NOTICE_NOTHING_SUBMITTED: "Hai chiesto di non inviare nulla, quindi nulla è partito.",
        codes.NOTICE_NOTHING_DELETED: (
            "Hai chiesto di non eliminare nulla, quindi nulla è stato rimosso."
        ),
        codes.NOTICE_NO_EXTERNAL_EFFECTS: (
            "Hai chiesto di restare interni, quindi nulla è stato inviato all'esterno."
        ),
        codes.NOTICE_ALREADY_ANSWERED: "Hai già risposto, quindi nulla è stato rifatto.",
        codes.NOTICE_STALE_INTERACTION: (
            "Quella scelta riguardava una versione precedente del record, "
            "quindi nulla è stato fatto."
        ),
        codes.NOTICE_INTERACTION_CLOSED: (
            "Quella scelta non è più aperta, quindi nulla è stato fatto."
        ),
        codes.NOTICE_NOT_UNDERSTOOD: (
            "Non ho potuto leggere con certezza parte del messaggio, "
            "quindi per essa nulla è cambiato."
        ),
        codes.NOTICE_MESSAGE_UNREADABLE: (
            "Non ho potuto leggere con certezza il messaggio, quindi nulla è cambiato."
        ),
        codes.NOTICE_INSTRUCTION_DECLINED: "Hai detto di no, quindi non è stato eseguito.",
        codes.NOTICE_PARTIAL_RESULT: "Parte della richiesta è andata a buon fine e parte no.",
        codes.NOTICE_TURN_INTERRUPTED: (
            "Questa risposta è stata interrotta. Ciò che era già registrato resta valido."
        ),
        "turnframe.refusal.missing": "Qui non esiste un record del genere.",
        "turnframe.refusal.not_proposable": "Questo record ora non offre questa operazione.",
        "turnframe.refusal.human_review_required": (
            "Serve la revisione di una persona, quindi qui non è stato fatto."
        ),
        "turnframe.refusal.trusted_origin_required": (
            "Serve una tua conferma esplicita, quindi non è stato fatto."
        ),
        "turnframe.card.confirm.title": "Conferma: {summary}",
        "turnframe.card.confirm.confirm": "Conferma",
        "turnframe.card.confirm.decline": "Annulla",
        "turnframe.card.select.title": "Quale intendevi?",
        "turnframe.card.select.none": "Nessuno di questi",
        "turnframe.answer.source_unavailable": (
            "Non posso rispondere con i dati disponibili in questo momento."
        ),
        "turnframe.answer.record": "{label}: {values}.",
        "turnframe.answer.nothing_known": "{label} non contiene ancora dettagli.",
        "turnframe.transition.done": "Fatto: {items}.",
        "turnframe.transition.nothing_done": "Non è cambiato nulla.",
        "turnframe.act.changed_nothing": "È già così, quindi non c'era nulla da cambiare.",
        "turnframe.receipt.recorded": "Questo è stato registrato.",
        "turnframe.transition.card": "Scegli qui sotto: {title}",
        "turnframe.transition.go_on": "Posso fare altro?",
        "turnframe.transition.ask": "{question}",
        "turnframe.transition.next": "Come prossimo passo puoi: {steps}.",
    },
}


class _Formatter(string.Formatter):
    """Named placeholders only; no attribute or index access into parameters."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        if not field_name.isidentifier():
            raise KeyError(field_name)
        return super().get_field(field_name, args, kwargs)


_FORMATTER = _Formatter()


class CatalogCopy:
    """Server copy from in-memory catalogs ({locale: {template_id: template}}); adopters add
    their domain's receipt templates with `with_catalogs`."""

    def __init__(
        self,
        catalogs: Mapping[str, Mapping[str, str]] | None = None,
        *,
        default_locale: str = "en",
        version: str = "1",
    ) -> None:
        merged: dict[str, dict[str, str]] = {}
        for source in (LIBRARY_CATALOGS, catalogs or {}):
            for locale, templates in source.items():
                merged.setdefault(locale, {}).update(templates)
        self._catalogs = merged
        self._default = default_locale
        self._version = version
        self._digests = {locale: digest(templates) for locale, templates in merged.items()}
        self._refs: dict[tuple[str, str], CopyRef] = {}

    def _locale_for(self, template_id: str, locale: str) -> str:
        for candidate in (locale, _language(locale), self._default):
            if template_id in self._catalogs.get(candidate, {}):
                return candidate
        raise MissingCopy([(locale, template_id)])

    def render(self, template_id: str, locale: str, params: Mapping[str, Any]) -> RenderedCopy:
        used = self._locale_for(template_id, locale)
        text = _FORMATTER.vformat(self._catalogs[used][template_id], (), dict(params))
        key = (template_id, used)
        ref = self._refs.get(key)
        if ref is None:
            ref = CopyRef(
                template_id=template_id,
                template_version=self._version,
                locale=used,
                catalog_digest=self._digests[used],
            )
            self._refs[key] = ref
        return RenderedCopy(text, ref)

    def has(self, template_id: str) -> bool:
        return any(template_id in templates for templates in self._catalogs.values())

    def missing(
        self, locales: Iterable[str], required: Iterable[str] = ()
    ) -> list[tuple[str, str]]:
        wanted = {
            *(t for catalog in LIBRARY_CATALOGS.values() for t in catalog),
            *self._catalogs.get(self._default, {}),
            *required,
        }
        gaps: set[tuple[str, str]] = set()
        for locale in {*locales, self._default}:
            have = [self._catalogs.get(c, {}) for c in dict.fromkeys((locale, _language(locale)))]
            gaps.update((locale, t) for t in wanted if not any(t in h for h in have))
        return sorted(gaps)


def _language(locale: str) -> str:
    """`en-GB` -> `en`: the fallback rendering uses before the default locale."""
    return locale.split("-")[0]


def receipt_title(template_id: str) -> str:
    """The template a receipt's title renders from: `<ReceiptSpec.template_id>.title`."""
    return f"{template_id}.title"


#: the longest value server copy quotes whole
MAX_QUOTED_CHARS = 60


def as_data(value: object) -> str:
    """A value from outside the server's own words (a user's, a domain's, a model's), fit to
    stand inside a sentence of server copy as data: one line, no control or direction marks, at
    most `MAX_QUOTED_CHARS` characters, and, unless it is one plain token (a word, an email
    address, a date, a number), inside quotation marks it cannot close."""
    text = str(value)
    kept = "".join(
        " " if ch.isspace() else ch
        for ch in text
        if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn")
    )
    text = " ".join(kept.split())
    if len(text) > MAX_QUOTED_CHARS:
        text = text[: MAX_QUOTED_CHARS - 1].rstrip() + "\u2026"
    if _PLAIN_TOKEN.fullmatch(text):
        return text
    text = "".join(
        "'" if ch in '"\u300c\u300d\u300e\u300f' or unicodedata.category(ch) in ("Pi", "Pf") else ch
        for ch in text
    )
    return f"\u201c{text}\u201d"


#: one token that cannot end a sentence: letters and digits, joined by @ . + - / _ between them
_PLAIN_TOKEN = re.compile(r"[^\W_]+(?:[@.+\-/_][^\W_]+)*")
