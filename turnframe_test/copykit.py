"""Server copy on disk for tests and adopters: a catalog written as `scripts/copy-catalogs` would
leave it (templates as `<template id>.j2`, each locale's messages compiled to a `.mo`), and a
copy of an existing catalog with some templates left out."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo

from turnframe_runtime.copy import CopyCatalog

__all__ = ["catalog_copy", "write_catalog"]


def write_catalog(
    root: Path,
    domain: str,
    templates: Mapping[str, str],
    translations: Mapping[str, Mapping[str, str]] | None = None,
    *,
    source_locale: str = "en",
) -> CopyCatalog:
    """A catalog under `root`: `templates` (template id -> jinja2 source) and, per locale,
    `translations` (msgid -> msgstr) compiled with babel."""
    (root / "templates").mkdir(parents=True, exist_ok=True)
    for template_id, source in templates.items():
        (root / "templates" / f"{template_id}.j2").write_text(source, encoding="utf-8")
    for locale, messages in (translations or {}).items():
        name = locale.replace("-", "_")
        catalog = Catalog(locale=name, domain=domain)
        for msgid, msgstr in messages.items():
            catalog.add(msgid, msgstr)
        where = root / "locale" / name / "LC_MESSAGES"
        where.mkdir(parents=True, exist_ok=True)
        with (where / f"{domain}.mo").open("wb") as handle:
            write_mo(handle, catalog)
    return CopyCatalog(domain, root / "templates", root / "locale", source_locale)


def catalog_copy(
    catalog: CopyCatalog,
    root: Path,
    *,
    without_templates: Iterable[str] = (),
    without_locales: Iterable[str] = (),
) -> CopyCatalog:
    """`catalog`'s files copied under `root`, leaving out some templates or whole locales."""
    skipped = {f"{t}.j2" for t in without_templates}
    shutil.copytree(
        catalog.templates, root / "templates", ignore=lambda _d, names: skipped & set(names)
    )
    locales = {locale.replace("-", "_") for locale in without_locales}
    if catalog.locales.is_dir():
        shutil.copytree(
            catalog.locales, root / "locale", ignore=lambda _d, names: locales & set(names)
        )
    return CopyCatalog(catalog.domain, root / "templates", root / "locale", catalog.source_locale)
