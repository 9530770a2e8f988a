"""`turnframe demo --locale it` and `--locale de` run the whole scripted conversation with every
server sentence in that language: no English sentence of the runtime's or the sample domain's
copy appears in what they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from turnframe_runtime import TemplateCopy
from turnframe_test.domains.travel import TRIP_COPY

_PLACEHOLDER = re.compile(r"%\(\w+\)s")


def _english_phrases() -> set[str]:
    """Every run of two or more words in the English source of all server copy."""
    copy = TemplateCopy(TRIP_COPY)
    phrases: set[str] = set()
    for template_id in copy.template_ids():
        for message in copy.messages(template_id):
            for text in filter(None, [message.msgid, message.plural]):
                for part in _PLACEHOLDER.split(text):
                    part = part.strip(" .,:;?!()")
                    if len(part.split()) >= 2:
                        phrases.add(part)
    return phrases


def _demo(tmp_path: Path, locale: str) -> str:
    turnframe = Path(sys.executable).parent / "turnframe"
    ran = subprocess.run(
        [str(turnframe), "demo", "--locale", locale],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


@pytest.mark.parametrize(
    ("locale", "said"),
    [
        ("it", ["Riprenotare il volo di andata?", "Data di viaggio impostata: 14 mar 2027"]),
        ("de", ["Hinflug umbuchen?", "Reisedatum auf 14.03.2027 gesetzt"]),
    ],
)
def test_the_demo_in_another_language_prints_no_english_server_text(
    tmp_path: Path, locale: str, said: list[str]
) -> None:
    printed = _demo(tmp_path, locale)
    english = sorted(p for p in _english_phrases() if p in printed)
    assert english == []
    # one-word English copy, where it would stand
    for word in ("Done:", "Rebook (opt_rebook)", "Keep my flight", "Confirm (", "Cancel ("):
        assert word not in printed
    for sentence in said:
        assert sentence in printed
    assert printed.count("── ") == 10  # every scripted turn ran


def test_the_english_phrases_would_be_found(tmp_path: Path) -> None:
    """The check above can fail: the English demo shows many of the same phrases."""
    printed = _demo(tmp_path, "en")
    assert len([p for p in _english_phrases() if p in printed]) >= 10


def test_a_locale_the_demo_does_not_speak_is_a_usage_error(tmp_path: Path) -> None:
    turnframe = Path(sys.executable).parent / "turnframe"
    ran = subprocess.run(
        [str(turnframe), "demo", "--locale", "xx"], cwd=tmp_path, capture_output=True, text=True
    )
    assert ran.returncode == 2 and "--locale" in ran.stderr
