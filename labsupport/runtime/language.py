"""The language labsupport speaks to a learner: English, or a translation (gettext).

What a learner reads when stuck is translated: the graders' PASS/FAIL lines and hints,
the summaries of ``RankError`` and ``CollectiveTimeout``, ``doctor()``'s report and the
widgets' labels. Exceptions for misuse of the API, log lines, ``--help``, numbers,
identifiers and tracebacks stay English.

The language follows the *notebook*, not the machine: one JupyterLab serves the English
and the Chinese editions, so ``LANG`` and ``LANGUAGE`` are never read. A Chinese notebook's
first cell calls ``lab.set_language("zh_CN")``; torchrun and scripts set
``LABSUPPORT_LANG=zh_CN``. :func:`set_language` also sets that variable, so graders
started afterwards speak the same language, and the launcher sends it with every cell to
the ranks (:func:`follow`), so ranks started before it (a standby group) follow too.

In code, a message is a whole sentence with named placeholders, marked with :func:`_`::

    from labsupport.runtime.language import _

    _("{name} did not finish within {timeout:g} s.").format(name=name, timeout=t)

:func:`N_` marks a message kept in a table and translated where it is used. The catalogue
is ``i18n/zh_CN/LC_MESSAGES/labsupport.po`` (``python -m i18n update`` extracts the
messages and compiles ``locale/<lang>/LC_MESSAGES/labsupport.mo`` beside this module).
"""

from __future__ import annotations

import contextlib
import gettext
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ENV = "LABSUPPORT_LANG"
"""The environment variable that names the language (``zh_CN``; unset or ``en``: English)."""

DOMAIN = "labsupport"
LOCALE_DIR = Path(__file__).with_name("locale")
LANGUAGES = ("en", "zh_CN")
"""The languages the course is written in; English is the source."""

_ALIASES = {"zh": "zh_CN", "zh-cn": "zh_CN", "zh_cn": "zh_CN", "zh-hans": "zh_CN", "en_us": "en"}


def _normalise(language: str | None) -> str:
    if not language:
        return "en"
    name = _ALIASES.get(language.strip().lower().replace(".utf-8", ""), language.strip())
    if name not in LANGUAGES:
        raise ValueError(
            f"labsupport speaks {', '.join(LANGUAGES)}, not {language!r}: "
            f'call set_language("zh_CN") or set_language("en").'
        )
    return name


def set_language(language: str | None) -> None:
    """Speak ``language`` (``"zh_CN"``, ``"en"``; ``None``: English) from now on.

    Here, on the ranks of every cluster (each cell a cluster runs carries the kernel's
    language, so ranks started earlier, a standby group's too, follow), and in every
    process started afterwards (a grader's, torchrun's: through ``LABSUPPORT_LANG``).
    Returns nothing, so that a notebook cell ending with it shows no output.
    """
    os.environ[ENV] = _normalise(language)


@contextlib.contextmanager
def speaking(language: str | None) -> Iterator[None]:
    """Speak ``language`` inside a ``with`` block (a folder grader, notebook by notebook)."""
    previous = os.environ.get(ENV)
    set_language(language)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = previous


def get_language() -> str:
    """The language in use: ``LABSUPPORT_LANG`` (set by :func:`set_language`), else English."""
    try:
        return _normalise(os.environ.get(ENV))
    except ValueError:
        return "en"  # a bad variable must not break a grader; set_language says what is wrong


@cache
def _catalogue(language: str) -> gettext.NullTranslations:
    return gettext.translation(DOMAIN, LOCALE_DIR, languages=[language], fallback=True)


def _(message: str) -> str:
    """``message`` in the current language (itself in English, or when not translated)."""
    language = get_language()
    if language == "en" or not message:  # gettext("") would be the catalogue's header
        return message
    return _catalogue(language).gettext(message)


def follow(language: str) -> None:
    """On a rank: speak the language the kernel sent with a cell (quietly English if unknown)."""
    try:
        os.environ[ENV] = _normalise(language)
    except ValueError:
        os.environ[ENV] = "en"


def N_(message: str) -> str:
    """Mark ``message`` for translation without translating it (translate it where used)."""
    return message
