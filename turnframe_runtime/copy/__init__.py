"""Server copy: every sentence the server writes (receipts, notices, cards, refusals, fallback
prose) is a jinja2 template rendered in a sandbox, its words translated through gettext catalogs
managed with babel, its numbers, money and dates formatted by babel for the turn's locale.

A template is a file `<template id>.j2` of a `CopyCatalog`; its messages live in the catalog's
compiled `<locale>/LC_MESSAGES/<domain>.mo`. Every rendering names the template, its version (a
digest of its source), the locale it was rendered in and a digest of that locale's catalog, so a
stored block never needs rendering again: replay shows the stored text, and `drift` compares it
with what today's templates, catalogs and babel would write.

A turn's locale is negotiated among the locales the runtime serves: `it-CH` renders in `it-CH`
if served, else in `it`, else in the default locale; the locale actually used is the one the
block records.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import gettext
import json
import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from babel import Locale, UnknownLocaleError
from babel.dates import format_date, format_datetime
from babel.numbers import format_currency, format_decimal, format_percent
from babel.support import Translations
from jinja2 import FunctionLoader, StrictUndefined, TemplateNotFound, TemplateSyntaxError, meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from turnframe_core import codes
from turnframe_core.blocks import CopyRef
from turnframe_core.canonical import digest
from turnframe_core.errors import TurnframeError
from turnframe_core.replay import CopyRender
from turnframe_runtime import observe
from turnframe_runtime.copy._plan import Plan, plan

__all__ = [
    "LIBRARY_COPY",
    "CopyCatalog",
    "CopyDrift",
    "CopyGap",
    "CopyRenderError",
    "MissingCopy",
    "RecordingCopy",
    "RenderedCopy",
    "ServerCopy",
    "TemplateCopy",
    "as_data",
    "as_params",
    "library_copy",
    "drift",
    "locale_chain",
    "receipt_title",
]

_HERE = Path(__file__).resolve().parent
_LOG = logging.getLogger(__name__)


class RenderedCopy:
    """A rendered sentence and the reference that says how it was rendered."""

    __slots__ = ("copy_ref", "text")

    def __init__(self, text: str, copy_ref: CopyRef) -> None:
        self.text = text
        self.copy_ref = copy_ref


class CopyGap(NamedTuple):
    """One thing a served locale lacks: a template (`message` None), one of its messages (not
    translated, or, with `problem`, translated with other placeholders), or a template that does
    not compile (`problem` "syntax error", `message` the error)."""

    locale: str
    template_id: str
    message: str | None = None
    problem: str | None = None

    def __str__(self) -> str:
        if self.message is None:
            return f"{self.locale}:{self.template_id} (no template)"
        if self.problem is not None:
            return f'{self.locale}:{self.template_id}: {self.problem}: "{self.message}"'
        return f'{self.locale}:{self.template_id} lacks "{self.message}"'


class MissingCopy(TurnframeError):
    """Served locales lack copy; `missing` names every gap (locale, template id, message)."""

    code = codes.RUNTIME_MISSING_COPY

    def __init__(self, missing: Iterable[CopyGap | tuple[str, ...]]) -> None:
        self.missing = tuple(sorted(CopyGap(*gap) for gap in missing))
        shown = ", ".join(str(gap) for gap in self.missing)
        super().__init__(f"missing server copy: {shown}")


class CopyRenderError(TurnframeError):
    """A template could not render with the parameters it was given (a missing or unusable
    parameter, or a template it includes that no catalog holds); the caller falls back to copy
    that needs none."""

    code = codes.COPY_RENDER_FAILED


class ServerCopy(Protocol):
    def render(self, template_id: str, locale: str, params: Mapping[str, Any]) -> RenderedCopy:
        """The sentence for `template_id` in the negotiated `locale`; raises `MissingCopy` when
        no catalog has the template, `CopyRenderError` when `params` do not fit it."""
        ...

    def missing(
        self,
        locales: Iterable[str],
        required: Iterable[str] = (),
        samples: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> list[CopyGap]:
        """Every gap that rendering in a served locale could meet: a template that does not
        exist (among every template the catalogs hold, and `required`), a message of one that
        the locale's catalogs do not translate, or a template that does not render: with each
        set of sample parameters declared for it (its catalog's `samples.json`, and `samples`,
        a workflow's), or, with none declared, one that includes or imports a template no
        catalog holds."""
        ...

    def has(self, template_id: str) -> bool:
        """Whether any catalog holds `template_id`."""
        ...

    def serving(self, locales: Iterable[str]) -> ServerCopy:
        """This copy, negotiating only among `locales` (and the default locale)."""
        ...


@dataclass(frozen=True)
class CopyCatalog:
    """One source of server copy: jinja2 templates `<template id>.j2` under `templates`, and the
    gettext catalogs of gettext domain `domain` compiled under `locales`
    (`<locale>/LC_MESSAGES/<domain>.mo`, as `pybabel compile` writes them). Templates are
    written in `source_locale`: it needs no catalog."""

    domain: str
    templates: Path
    locales: Path
    source_locale: str = "en"

    def template_sources(self) -> dict[str, str]:
        return {
            path.name[: -len(".j2")]: path.read_text(encoding="utf-8")
            for path in sorted(self.templates.glob("*.j2"))
        }

    def samples(self) -> dict[str, Sequence[Mapping[str, Any]]]:
        """The sample parameters this catalog declares for its templates, in
        `<templates>/samples.json` (template id -> a set of parameters or a list of them): the
        start check renders each template with each (`TemplateCopy.missing`)."""
        path = self.templates / "samples.json"
        if not path.is_file():
            return {}
        declared = json.loads(path.read_text(encoding="utf-8"))
        return {
            template_id: params if isinstance(params, list) else [params]
            for template_id, params in declared.items()
        }

    def catalog_locales(self) -> set[str]:
        if not self.locales.is_dir():
            return set()
        return {
            _tag(path.name)
            for path in self.locales.iterdir()
            if (path / "LC_MESSAGES" / f"{self.domain}.mo").is_file()
        }


#: the runtime's own copy (English source; catalogs for Italian and German)
LIBRARY_COPY = CopyCatalog("turnframe", _HERE / "templates", _HERE / "locale")


@functools.cache
def library_copy() -> TemplateCopy:
    """The library's copy alone, read once per process (a runtime given no copy serves it)."""
    return TemplateCopy()


def _tag(name: str) -> str:
    """`it_CH` or `it-ch` -> `it-CH` (the form turns carry)."""
    try:
        return str(Locale.parse(name.replace("-", "_"))).replace("_", "-")
    except (ValueError, UnknownLocaleError):
        return name.replace("_", "-")


def locale_chain(requested: str, default: str) -> tuple[str, ...]:
    """The locales rendering tries, in order: `it-CH`, `it`, then `default`."""
    tag = _tag(requested)
    parts = tag.split("-")
    chain = ["-".join(parts[:n]) for n in range(len(parts), 0, -1)]
    return tuple(dict.fromkeys([*chain, _tag(default)]))


@dataclass
class _LocaleCopy:
    """What rendering in one locale needs: its environment, its merged catalog (gettext keys:
    a msgid, `context\x04msgid`, or (msgid, plural index)) with its number of plural forms, and
    the catalog's digest."""

    env: ImmutableSandboxedEnvironment
    messages: dict[Any, Any]
    plurals: int
    catalog_digest: str
    #: the function the i18n extension translates a message with
    gettext: Callable[[str], str]
    #: compiled templates, by id (sources never change while a copy lives)
    templates: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Message:
    """One message a template uses, as its catalog keys it."""

    msgid: str
    context: str | None = None
    plural: str | None = None

    @property
    def key(self) -> str:
        return self.msgid if self.context is None else f"{self.context}\x04{self.msgid}"


@dataclass
class _Shared:
    sources: dict[str, str]
    #: the language each template is written in (its catalog's `source_locale`)
    written_in: dict[str, str]
    versions: dict[str, str]
    envs: dict[str, _LocaleCopy] = field(default_factory=dict)
    #: by (template id, served locale): the template's plan (None: jinja2 renders it) and the
    #: reference its renderings carry
    ready: dict[tuple[str, str], tuple[Plan | None, CopyRef]] = field(default_factory=dict)
    messages: dict[str, tuple[_Message, ...]] = field(default_factory=dict)
    negotiated: dict[tuple[str, frozenset[str]], str] = field(default_factory=dict)
    #: the catalogs' declared sample parameters (read once)
    samples: dict[str, Sequence[Mapping[str, Any]]] | None = None
    #: a digest of every template source (what an include or import may reach)
    sources_digest: str = ""


class TemplateCopy:
    """Server copy from jinja2 templates and babel catalogs: the library's own (`LIBRARY_COPY`),
    overridden and extended by an adopter's catalogs given first (a template id an adopter's
    catalog holds replaces the library's; their messages are looked up in every catalog, the
    adopter's first)."""

    def __init__(
        self,
        *catalogs: CopyCatalog,
        default_locale: str = "en",
        locales: Iterable[str] | None = None,
    ) -> None:
        self._catalogs = (*catalogs, LIBRARY_COPY)
        self._default = _tag(default_locale)
        sources: dict[str, str] = {}
        written_in: dict[str, str] = {}
        for catalog in reversed(self._catalogs):  # the first catalog given wins
            own = catalog.template_sources()
            sources.update(own)
            written_in.update(dict.fromkeys(own, _tag(catalog.source_locale)))
        versions = {tid: digest(src).split(":")[1][:16] for tid, src in sources.items()}
        self._shared = _Shared(
            sources=sources,
            written_in=written_in,
            versions=versions,
            sources_digest=digest(versions),
        )
        self._served = self._available() if locales is None else self._restricted(locales)

    def _available(self) -> frozenset[str]:
        found = {self._default}
        for catalog in self._catalogs:
            found.add(_tag(catalog.source_locale))
            found.update(catalog.catalog_locales())
        return frozenset(found)

    def _restricted(self, locales: Iterable[str]) -> frozenset[str]:
        return frozenset({self._default, *(_tag(locale) for locale in locales)})

    def serving(self, locales: Iterable[str]) -> TemplateCopy:
        served = TemplateCopy.__new__(TemplateCopy)
        served._catalogs = self._catalogs
        served._default = self._default
        served._shared = self._shared
        served._served = self._restricted(locales)
        return served

    def negotiate(self, requested: str) -> str:
        """The served locale a turn in `requested` renders in."""
        key = (requested, self._served)
        found = self._shared.negotiated.get(key)
        if found is None:
            chain = locale_chain(requested, self._default)
            found = next((c for c in chain if c in self._served), self._default)
            self._shared.negotiated[key] = found
        return found

    def has(self, template_id: str) -> bool:
        return template_id in self._shared.sources

    def template_ids(self) -> list[str]:
        return sorted(self._shared.sources)

    def render(self, template_id: str, locale: str, params: Mapping[str, Any]) -> RenderedCopy:
        used = self.negotiate(locale)
        ready = self._shared.ready.get((template_id, used))
        if ready is None:
            if template_id not in self._shared.sources:
                raise MissingCopy([CopyGap(used, template_id)])
            ready = self._ready(template_id, used)
        found, ref = ready
        values = dict(params)
        text: str | None = None
        if found is not None:
            try:
                text = found(values)
            except Exception:  # jinja2 renders it, or raises what it always raised
                text = None
        if text is None:
            text = self._rendered(template_id, used, values)
        return RenderedCopy(_folded(text), ref)

    def _ready(self, template_id: str, used: str) -> tuple[Plan | None, CopyRef]:
        """What rendering `template_id` in the served locale `used` needs every time: its plan
        (None: jinja2 renders it) and its reference."""
        copy = self._locale(used)
        ready = (
            plan(copy.env, self._shared.sources[template_id], copy.gettext),
            CopyRef(
                template_id=template_id,
                template_version=self._shared.versions[template_id],
                locale=used,
                catalog_digest=copy.catalog_digest,
            ),
        )
        self._shared.ready[(template_id, used)] = ready
        return ready

    def _rendered(self, template_id: str, used: str, values: dict[str, Any]) -> str:
        """The template rendered by jinja2 in its sandbox."""
        copy = self._locale(used)
        try:
            template = copy.templates.get(template_id)
            if template is None:
                template = copy.templates[template_id] = copy.env.get_template(template_id)
            text: str = template.render(values)
        except TemplateNotFound as exc:
            raise CopyRenderError(
                f"template {template_id!r} includes {exc.name!r}, which no catalog holds"
            ) from exc
        except Exception as exc:  # a template's failure is the caller's to fall back from
            raise CopyRenderError(
                f"template {template_id!r} cannot render with {sorted(values)}: "
                f"{type(exc).__name__}"
            ) from exc
        return text

    def messages(self, template_id: str) -> tuple[_Message, ...]:
        """The gettext messages `template_id` uses (raises `TemplateSyntaxError` for a template
        that does not parse)."""
        found = self._shared.messages.get(template_id)
        if found is None:
            env: Any = self._locale(self._default).env  # the i18n extension adds the method
            found = tuple(
                _message(function, message)
                for _line, function, message in env.extract_translations(
                    self._shared.sources[template_id]
                )
            )
            self._shared.messages[template_id] = found
        return found

    def missing(
        self,
        locales: Iterable[str],
        required: Iterable[str] = (),
        samples: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> list[CopyGap]:
        gaps: set[CopyGap] = set()
        declared = {**self._declared_samples(), **(samples or {})}
        wanted = sorted({*self._shared.sources, *required})
        for locale in sorted({self._default, *(_tag(x) for x in locales)}):
            chain = locale_chain(locale, locale)
            for template_id in wanted:
                if template_id not in self._shared.sources:
                    gaps.add(CopyGap(locale, template_id))
                    continue
                try:
                    messages = self.messages(template_id)  # parses it
                except TemplateSyntaxError as error:
                    gaps.add(CopyGap(locale, template_id, str(error), "syntax error"))
                    continue
                unrendered = self._unrendered(locale, template_id, declared.get(template_id))
                if unrendered is not None:
                    gaps.add(CopyGap(locale, template_id, unrendered, "does not render"))
                if self._shared.written_in[template_id] in chain:
                    continue  # the template's own language (a region may override, not lack)
                gaps.update(self._untranslated(locale, template_id, messages))
        return sorted(gaps)

    def _declared_samples(self) -> dict[str, Sequence[Mapping[str, Any]]]:
        """The sample parameters the catalogs declare (`<templates>/samples.json`: template id
        -> one set of parameters or a list of them), the first catalog's over the others'."""
        found = self._shared.samples
        if found is None:
            found = {}
            for catalog in reversed(self._catalogs):
                found.update(catalog.samples())
            self._shared.samples = found
        return found

    def _unrendered(
        self, locale: str, template_id: str, samples: Sequence[Mapping[str, Any]] | None
    ) -> str | None:
        """Why the template does not render in `locale` (None: it does): with each of
        `samples`; without any, with a plain value for each name it uses, where only a
        template it includes or imports that no catalog holds counts (the types of its
        parameters are unknown). Judged once per process for the same inputs."""
        copy = self._locale(locale)
        samples_key = json.dumps(samples, sort_keys=True, default=str)
        key = (self._shared.sources_digest, template_id, locale, copy.catalog_digest, samples_key)
        if key in _RENDER_CHECKS:
            return _RENDER_CHECKS[key]
        env: Any = copy.env
        found: str | None = None
        try:
            template = env.get_template(template_id)
            if samples is None:
                names = meta.find_undeclared_variables(env.parse(self._shared.sources[template_id]))
                template.render(dict.fromkeys(names, "sample"))
            else:
                for params in samples:
                    template.render(as_params(params))
        except TemplateNotFound as missing:
            found = f"it includes {missing.name!r}, which no catalog holds"
        except Exception as error:
            if samples is not None or isinstance(error, TemplateSyntaxError):
                found = f"{type(error).__name__}: {error}"[:300]
        _RENDER_CHECKS[key] = found
        return found

    def _untranslated(
        self, locale: str, template_id: str, messages: Iterable[_Message]
    ) -> Iterable[CopyGap]:
        copy = self._locale(locale)
        have = copy.messages
        for message in messages:
            if message.plural is None:
                forms = [(message.msgid, have.get(message.key))]
            else:  # every plural form the locale has
                forms = [
                    (text, have.get((message.key, index)))
                    for index, text in zip(
                        range(copy.plurals),
                        [message.msgid, *[message.plural] * copy.plurals],
                        strict=False,
                    )
                ]
            if message.plural is not None and _filled_from_source(message, forms):
                forms = [(message.msgid, None)]  # babel fills an empty form with the source
            for source, translated in forms:
                if not translated:
                    yield CopyGap(locale, template_id, message.msgid)
                elif not _same_placeholders(message, source, translated):
                    yield CopyGap(locale, template_id, message.msgid, "placeholders differ")

    # --- environments -----------------------------------------------------------------------

    def _locale(self, locale: str) -> _LocaleCopy:
        copy = self._shared.envs.get(locale)
        if copy is None:
            copy = self._build(locale)
            self._shared.envs[locale] = copy
        return copy

    def _build(self, locale: str) -> _LocaleCopy:
        translations: gettext.NullTranslations = gettext.NullTranslations()
        messages: dict[Any, Any] = {}
        plurals = 2
        # The language's catalogs, then the region's over them (a region always wins); at each
        # level the adopter's over the library's.
        names = [part.replace("-", "_") for part in reversed(locale_chain(locale, locale))]
        merged: Translations | None = None
        for name in names:
            for catalog in reversed(self._catalogs):
                path = catalog.locales / name / "LC_MESSAGES" / f"{catalog.domain}.mo"
                if not path.is_file():
                    continue
                with path.open("rb") as handle:
                    loaded = Translations(handle, domain=catalog.domain)
                messages.update(_catalog_of(loaded))
                plurals = _plural_count(loaded, plurals)
                if merged is None:
                    merged = loaded
                else:
                    merged.merge(loaded)
        if merged is not None:
            translations = merged
        env = ImmutableSandboxedEnvironment(
            loader=FunctionLoader(self._source),
            extensions=["jinja2.ext.i18n"],
            undefined=StrictUndefined,
            autoescape=False,
            auto_reload=False,
        )
        env.install_gettext_translations(translations, newstyle=True)  # type: ignore[attr-defined]
        # what the i18n extension translates with (`InternationalizationExtension._install`)
        gettext_function = getattr(translations, "ugettext", None) or translations.gettext
        env.filters.update(_filters(locale))
        return _LocaleCopy(
            env=env,
            messages=messages,
            plurals=plurals,
            gettext=gettext_function,
            catalog_digest=digest(
                {"locale": locale, "messages": sorted(_printable(messages).items())}
            ),
        )

    def _source(self, template_id: str) -> tuple[str, None, Callable[[], bool]] | None:
        source = self._shared.sources.get(template_id)
        if source is None:
            raise TemplateNotFound(template_id)
        return source, None, lambda: True


_ASCII_SPACE = re.compile(r"[ \t\r\n\f\v]+")


def _folded(text: str) -> str:
    """A template's own line breaks and indentation folded to single spaces, and no space at
    either end; a no-break space babel writes (between an amount and its currency) stays. (A
    text with nothing to fold, the usual sentence, skips the pattern: a control character is
    never printable, so a text that is, without two spaces in a row, has nothing to fold.)"""
    if "  " in text or not text.isprintable():
        text = _ASCII_SPACE.sub(" ", text)
    return text.strip(" ")


#: the start check's verdicts, for every copy of the process: by the sources every template
#: reaches, template, locale, catalog and samples (the same inputs render the same way)
_RENDER_CHECKS: dict[tuple[str, str, str, str, str], str | None] = {}
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
_PLURALS = re.compile(r"nplurals\s*=\s*(\d+)")


def _message(function: str, extracted: Any) -> _Message:
    """A message as the extractor gives it (a string, or a tuple padded with None for one with
    variables) under the gettext function it was marked with."""
    texts = [extracted] if isinstance(extracted, str) else [p for p in extracted if p is not None]
    if function == "pgettext":
        return _Message(msgid=texts[1], context=texts[0])
    if function == "npgettext":
        return _Message(msgid=texts[1], context=texts[0], plural=texts[2])
    if function == "ngettext":
        return _Message(msgid=texts[0], plural=texts[1])
    return _Message(msgid=texts[0])


def _filled_from_source(message: _Message, forms: list[tuple[str, Any]]) -> bool:
    """A plural form that reads as the English source while the first form is translated: what
    `pybabel compile` writes for a form left empty in the .po."""
    first = forms[0][1] if forms else None
    return (
        bool(first)
        and first != message.msgid
        and any(translated == message.plural for _source, translated in forms[1:])
    )


def _same_placeholders(message: _Message, source: str, translated: str) -> bool:
    """A translation names the placeholders its source does: all of them (a dropped one would
    silently drop a value, an amount say), none other (which could not render). A plural form
    may leave out the count, as "one item" does."""
    names = set(_PLACEHOLDER.findall(translated))
    if message.plural is None:
        return names == set(_PLACEHOLDER.findall(source))
    return names <= set(_PLACEHOLDER.findall(message.msgid + message.plural))


def _plural_count(translations: gettext.GNUTranslations, default: int) -> int:
    forms = translations.info().get("plural-forms", "")
    found = _PLURALS.search(forms)
    return int(found.group(1)) if found else default


def _catalog_of(translations: gettext.GNUTranslations) -> dict[Any, Any]:
    catalog: dict[Any, Any] = getattr(translations, "_catalog", {})
    return {key: value for key, value in catalog.items() if key != ""}


def _printable(messages: Mapping[Any, Any]) -> dict[str, str]:
    return {
        key if isinstance(key, str) else f"{key[0]}\x00{key[1]}": value
        for key, value in messages.items()
    }


# --- babel formatting ---------------------------------------------------------------------------


def _filters(locale: str) -> dict[str, Callable[..., str]]:
    """Filters a template formats values with, in the locale it renders in. Numbers, amounts
    and percentages are formatted once per distinct value (`_remembered`): babel's formatting is
    a pure function of the exact decimal (its digits and exponent, kept by its text), the
    currency and the decimal context, and it costs several times a whole sentence."""
    where = Locale.parse(locale.replace("-", "_"))

    # Never rounded: a card states the amount it confirms, digit for digit.
    @_remembered
    def formatted_number(value: decimal.Decimal) -> str:
        return format_decimal(value, locale=where, decimal_quantization=False)

    @_remembered
    def formatted_money(value: decimal.Decimal, currency: str) -> str:
        return format_currency(value, currency, locale=where, decimal_quantization=False)

    @_remembered
    def formatted_percent(value: decimal.Decimal) -> str:
        return format_percent(value, locale=where)

    def number(value: Any) -> str:
        return formatted_number(_exact(value), _context())

    def money(value: Any, currency: str) -> str:
        return formatted_money(_exact(value), _context(), str(currency))

    def percent(value: Any) -> str:
        return formatted_percent(_exact(value), _context())

    def date(value: Any, format: str = "medium") -> str:
        return format_date(_date(value), format=format, locale=where)

    def datetime(value: Any, format: str = "medium") -> str:
        moment = value
        if isinstance(value, int | float) and not isinstance(value, bool):
            moment = _dt.datetime.fromtimestamp(value / 1000, tz=_dt.UTC)
        elif isinstance(value, str):
            moment = _dt.datetime.fromisoformat(value)
        if not isinstance(moment, _dt.datetime):
            raise TypeError("not a date and time")
        return format_datetime(moment, format=format, locale=where)

    return {
        "data": as_data,
        "number": number,
        "money": money,
        "percent": percent,
        "date": date,
        "datetime": datetime,
    }


#: how many distinct values each formatting filter of a locale remembers
_FORMATTED_VALUES = 1024


def _remembered(format: Callable[..., str]) -> Callable[..., str]:
    """`format` of a number (and, for money, a currency) remembered by the number's exact text
    (`_exact`), the decimal context (`_context`) and the currency's text."""

    @functools.lru_cache(maxsize=_FORMATTED_VALUES)
    def remembered(text: str, context: tuple[int, str | None], *args: str) -> str:
        return format(decimal.Decimal(text), *args)

    return remembered


def _exact(value: Any) -> str:
    """The number as text that gives back the same Decimal: digits, exponent and sign."""
    return str(_decimal(value))


def _context() -> tuple[int, str | None]:
    """What babel's decimal arithmetic depends on in the thread's decimal context."""
    context = decimal.getcontext()
    return context.prec, context.rounding


def _decimal(value: Any) -> decimal.Decimal:
    if isinstance(value, bool):
        raise TypeError("a truth value is not a number")
    if isinstance(value, decimal.Decimal):
        number = value
    elif isinstance(value, int | str):
        number = decimal.Decimal(str(value).strip())
    elif isinstance(value, float):
        number = decimal.Decimal(repr(value))
    else:
        raise TypeError("not a number")
    if not number.is_finite():
        raise ValueError("not a finite number")
    return number


def _date(value: Any) -> _dt.date:
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    if isinstance(value, str):
        return _dt.date.fromisoformat(value.strip())
    raise TypeError("not a date")


# --- helpers ------------------------------------------------------------------------------------


def receipt_title(template_id: str) -> str:
    """The template a receipt's title renders from: `<ReceiptSpec.template_id>.title`."""
    return f"{template_id}.title"


def as_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters for a template, each fit to stand in server copy: numbers as numbers (a
    template formats them), anything else as data (`as_data`)."""
    return {
        key: value
        if isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool)
        else as_data(value)
        for key, value in params.items()
    }


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


_JSON_SCALARS = (str, int, bool, type(None))


def _json_data(params: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters as JSON data for the record (anything else, a Decimal or a date, as text)."""
    if all(isinstance(v, _JSON_SCALARS) for v in params.values()):
        return dict(params)
    loaded: dict[str, Any] = json.loads(json.dumps(dict(params), default=str))
    return loaded


class RecordingCopy:
    """One turn's server copy: renders through `copy` and hands each rendering (template,
    parameters, text, reference) to `record`, for the turn's replay record."""

    def __init__(self, copy: ServerCopy, record: Callable[[CopyRender], None]) -> None:
        self._copy = copy
        self._record = record

    def render(self, template_id: str, locale: str, params: Mapping[str, Any]) -> RenderedCopy:
        """As the copy renders it; a failure is logged and counted (`copy.fallback`, by
        template id and code) before it reaches the caller, which falls back from it."""
        try:
            rendered = self._copy.render(template_id, locale, params)
        except (MissingCopy, CopyRenderError) as failure:
            observe.count("copy.fallback", template=template_id, code=failure.code)
            observe.event(
                _LOG, "copy.fallback", logging.WARNING, template_id=template_id, code=failure.code
            )
            raise
        self._record(
            CopyRender(
                template_id=template_id,
                params=_json_data(params),
                text=rendered.text,
                copy_ref=rendered.copy_ref,
            )
        )
        return rendered

    def missing(
        self,
        locales: Iterable[str],
        required: Iterable[str] = (),
        samples: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> list[CopyGap]:
        return self._copy.missing(locales, required, samples)

    def has(self, template_id: str) -> bool:
        return self._copy.has(template_id)

    def serving(self, locales: Iterable[str]) -> ServerCopy:
        return RecordingCopy(self._copy.serving(locales), self._record)


# --- drift: stored copy against today's rendering ------------------------------------------------


@dataclass(frozen=True)
class CopyDrift:
    """A stored sentence of server copy that today's copy would not write the same way: its
    text differs (`current_text` None: it can no longer be rendered), or the template or the
    catalog it came from has changed since (`text_changed` False: same words, other source)."""

    template_id: str
    locale: str
    stored_text: str
    current_text: str | None
    stored_version: str
    current_version: str | None
    stored_catalog: str
    current_catalog: str | None

    @property
    def text_changed(self) -> bool:
        return self.current_text != self.stored_text


def drift(copy: ServerCopy, renders: Iterable[CopyRender]) -> list[CopyDrift]:
    """Re-render each recorded sentence (a replay record's `copy_renders`) from the same
    template and parameters, in the locale it was rendered in, with today's templates, catalogs
    and babel; report every one that differs. It reads only: replay never calls it, and it
    writes nothing."""
    found: list[CopyDrift] = []
    for render in renders:
        stored = render.copy_ref
        current: RenderedCopy | None
        try:
            current = copy.serving([stored.locale]).render(
                render.template_id, stored.locale, render.params
            )
        except (MissingCopy, CopyRenderError):
            current = None
        now = current.copy_ref if current is not None else None
        same = (
            now is not None
            and current is not None
            and current.text == render.text
            and now.template_version == stored.template_version
            and now.catalog_digest == stored.catalog_digest
        )
        if not same:
            found.append(
                CopyDrift(
                    template_id=render.template_id,
                    locale=stored.locale,
                    stored_text=render.text,
                    current_text=current.text if current is not None else None,
                    stored_version=stored.template_version,
                    current_version=now.template_version if now is not None else None,
                    stored_catalog=stored.catalog_digest,
                    current_catalog=now.catalog_digest if now is not None else None,
                )
            )
    return found
