"""The stored outputs of a translated notebook: the library's lines in the notebook's language.

A translated solution keeps the English outputs byte for byte (nbval checks the English
only), except what ``labsupport`` itself printed: a grader's message, the launcher's
``RankError`` / ``CollectiveTimeout`` summary, ``doctor()``'s report. Those are replaced by
their translation from the library's catalogue (``labsupport.po``), without re-running
anything:

* each msgid becomes a regular expression, its placeholders lazy groups, and a stored
  line (or run of lines, for a message of several lines) is translated only when it
  matches a whole message: a value the message was filled with is itself translated
  when it is a message (``"expected"`` in ``"expected 3, got 4"``), never when it is the
  learner's data (:data:`RAW`);
* only outputs that the library made are looked at, each recognised by what only the
  library emits: a grader's display (its HTML is ``<div class="labsupport-check">``,
  regenerated from the translated text), an error output whose exception is the
  launcher's, a stream from ``doctor()`` (from its ``labsupport doctor`` line on). A
  line the learner printed is never touched, however much it looks like a message.

The notebook also gets a first code cell that sets its language (:func:`language_cell`).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import nbformat

from i18n import catalog, library

#: Placeholders whose values are the learner's data or the machine's (never translated).
RAW = frozenset(
    "error summary example expected got expected_item got_item code case type keys version "
    "state expected_shape got_shape expected_dtype got_dtype backend device why".split()
)
#: Placeholders filled with one of the library's fixed words ("expected", "the ranks hold"):
#: matched against those words only, so a message made of little else is still recognised.
WORDS = frozenset({"want", "have"})
#: The exceptions of the launcher, whose message is a summary the learner reads.
LAUNCHER_ERRORS = ("RankError", "CollectiveTimeout", "CellInterrupted")
STATUS = ("PASS", "FAIL", "TODO")
DOCTOR = "labsupport doctor"
CELL_ID = "labsupport-language"
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_]\w*)?(![rsa])?(:[^{}]*)?\}")
_WORD = re.compile(r"[A-Za-z]{2,}")
#: A grader's "Label: problem": the answer's name (a class, maybe with its arguments), then a
#: message (``labsupport.runtime.check.messages.LABELLED``).
LABELLED = "{label}: {problem}"
_LABEL = re.compile(r"(?P<label>[A-Za-z_][\w.]*(?:\([^()]*\))?): (?P<problem>.+)", re.S)
#: Comments of the generated first cell, by language: what the notebook shows in Chinese
#: and what stays English.
CELL_COMMENT = {
    "zh_CN": (
        "# 中文版：评分器的结论和提示、启动器的错误摘要（RankError 等）、\n"
        "# doctor() 的报告和小部件的标签都显示中文（下面这行设定，各 rank 也一样）。\n"
        "# 仍是英文的：Python 的 traceback（回溯信息）、torch 自身的报错和警告、\n"
        "# 日志、代码和注释。\n"
    ),
}


@dataclass(frozen=True)
class Template:
    """One translated message, as a pattern that finds it and the text that replaces it."""

    msgid: str
    msgstr: str
    pattern: re.Pattern
    lines: int  # how many lines the message spans
    words: int  # English words outside the placeholders (how specific it is)
    anchor: str = ""  # its longest literal part: a text without it cannot match (fast)

    def fill(self, values: dict[str, str]) -> str:
        """The translation with the captured ``values`` in its placeholders."""

        def put(match: re.Match) -> str:
            if match.group(0) in ("{{", "}}"):
                return match.group(0)[0]
            return values[match.group(1)]

        return _FIELD.sub(put, self.msgstr)


def compile_template(msgid: str, msgstr: str, words_alternative: str = "") -> Template | None:
    """The :class:`Template` of one message (None for one without an English word, unless
    a placeholder of :data:`WORDS` pins it down: ``words_alternative``, the fixed words as
    a regex alternative)."""
    parts, seen, pos, pinned = [], set(), 0, False
    for match in _FIELD.finditer(msgid):
        parts.append(re.escape(msgid[pos : match.start()]))
        pos = match.end()
        if match.group(0) in ("{{", "}}"):
            parts.append(re.escape(match.group(0)[0]))
            continue
        name = match.group(1)
        if not name:
            return None  # positional fields: not a message of the library's form
        if name in seen:
            parts.append(f"(?P={name})")
        elif name in WORDS and words_alternative:
            parts.append(f"(?P<{name}>{words_alternative})")
            pinned = True
        else:
            parts.append(f"(?P<{name}>.+?)")
        seen.add(name)
    parts.append(re.escape(msgid[pos:]))
    literal = _FIELD.sub(" ", msgid)
    words = len(_WORD.findall(literal))
    if not words and not pinned:
        return None
    anchor = max(_FIELD.sub("\0", msgid).split("\0"), key=len)
    return Template(msgid, msgstr, re.compile("".join(parts)), msgid.count("\n") + 1, words, anchor)


class Translator:
    """Translates the library's stored lines with the catalogue's messages."""

    def __init__(self, translations: dict[str, str]) -> None:
        self.labelled = translations.get(LABELLED) or None
        fixed = sorted((k for k in translations if not _FIELD.search(k)), key=len, reverse=True)
        alternative = "|".join(map(re.escape, fixed))
        found = [
            compile_template(k, v, alternative) for k, v in translations.items() if v and k != v
        ]
        #: Longest and most specific first: a whole message before a part of one.
        self.templates = sorted(
            (t for t in found if t is not None),
            key=lambda t: (-t.lines, -len(_FIELD.sub("", t.msgid))),
        )

    # -------------------------------------------------------------- pieces

    def value(self, text: str) -> str:
        """A value a message was filled with: translated if it is a message itself."""
        for template in self.templates:
            if template.lines == 1:
                done = self._match(template, text)
                if done is not None:
                    return done
        return text

    def _match(self, template: Template, text: str) -> str | None:
        if template.anchor not in text:
            return None
        match = template.pattern.fullmatch(text)
        if match is None:
            return None
        values = {
            name: value if name in RAW else self.value(value)
            for name, value in match.groupdict().items()
        }
        return template.fill(values)

    def line(self, text: str, min_words: int = 1) -> str | None:
        """One line translated if it is a whole message (kept indent, status word, parens),
        or a message after the name of the answer it is about (``Label: message``)."""
        for candidate, wrap in _views(text):
            done = self._whole(candidate, min_words)
            if done is None and self.labelled and (labelled := _LABEL.fullmatch(candidate)):
                problem = self._whole(labelled["problem"], min_words)
                if problem is not None:
                    done = self.labelled.format(label=labelled["label"], problem=problem)
            if done is not None:
                return wrap(done)
        return None

    def _whole(self, text: str, min_words: int) -> str | None:
        for template in self.templates:
            if template.lines == 1 and template.words >= min_words:
                done = self._match(template, text)
                if done is not None:
                    return done
        return None

    def lines(self, text: str, min_words: int = 1, continued: bool = False) -> str:
        """``text`` with each line, or run of lines, that is a whole message translated.

        ``continued``: a line may go on in lines indented two spaces more (the launcher
        wraps its long lines so): such a run is matched as one line, and wrapped again.
        """
        rows = text.split("\n")
        out: list[str] = []
        i = 0
        while i < len(rows):
            done, used = self._run(rows, i, min_words, continued)
            if done is None:
                out.append(rows[i])
                i += 1
            else:
                out.append(done)
                i += used
        return "\n".join(out)

    def _run(
        self, rows: list[str], i: int, min_words: int, continued: bool
    ) -> tuple[str | None, int]:
        """The translation of the message starting at ``rows[i]``, and how many rows it took."""
        for template in self.templates:
            if template.lines > 1 and template.words >= min_words:
                block = "\n".join(rows[i : i + template.lines])
                for candidate, wrap in _views(block):
                    done = self._match(template, candidate)
                    if done is not None:
                        return wrap(done), template.lines
        done = self.line(rows[i], min_words)
        if done is not None:
            return done, 1
        if continued:
            indent = rows[i][: len(rows[i]) - len(rows[i].lstrip())] + "  "
            j = i + 1
            while j < len(rows) and rows[j].startswith(indent) and rows[j].strip():
                j += 1
            if j > i + 1:
                joined = " ".join([rows[i], *(r.strip() for r in rows[i + 1 : j])])
                done = self.line(joined, min_words)
                if done is not None:
                    from labsupport.runtime.launch.errors import MESSAGE_WIDTH
                    from labsupport.runtime.launch.errors import _wrap as wrap_line

                    return wrap_line(done, MESSAGE_WIDTH), j - i
        return None, 1

    # -------------------------------------------------------------- outputs

    def output(self, output: dict) -> dict:
        """One stored output, translated where the library made it (a copy; else itself)."""
        kind = output.get("output_type")
        if kind in ("display_data", "execute_result"):
            return self._display(output)
        if kind == "error" and output.get("ename") in LAUNCHER_ERRORS:
            return self._error(output)
        if kind == "stream":
            return self._stream(output)
        return output

    def _display(self, output: dict) -> dict:
        from labsupport.runtime.check.messages import as_html

        data = output.get("data", {})
        plain, html = _text(data.get("text/plain")), _text(data.get("text/html"))
        if 'class="labsupport-check"' not in html or as_html(plain) != html:
            return output  # not a grader's message (or not one this library would show)
        done = self.lines(plain)
        if done == plain:
            return output
        new = copy.deepcopy(output)
        new["data"]["text/plain"] = done
        new["data"]["text/html"] = as_html(done)
        return new

    def _error(self, output: dict) -> dict:
        evalue = output.get("evalue", "")
        done = self.lines(evalue, continued=True)
        if done == evalue:
            return output
        new = copy.deepcopy(output)
        new["evalue"] = done
        new["traceback"] = [t.replace(evalue, done) for t in output.get("traceback", [])]
        return new

    def _stream(self, output: dict) -> dict:
        text = _text(output.get("text"))
        head, found, report = text.partition(DOCTOR + "\n")
        if not found or (head and not head.endswith("\n")):
            return output  # only doctor()'s report, from its first line on
        done = self.lines(report)
        if done == report:
            return output
        new = copy.deepcopy(output)
        new["text"] = head + found + done
        return new


def _text(value: object) -> str:
    if isinstance(value, list):
        return "".join(value)
    return value if isinstance(value, str) else ""


def _views(text: str) -> list[tuple[str, object]]:
    """Ways to see a line as a message, the likeliest first: without a status word; whole;
    without a list item's dash or the parentheses around it (a launcher's note); without
    its indent."""
    stripped = text.lstrip(" ")
    indent = text[: len(text) - len(stripped)]
    views: list[tuple[str, object]] = []
    for status in STATUS:  # a grader's status word is never part of a message
        if stripped.startswith(status + " "):
            rest = stripped[len(status) + 1 :]
            views.append((rest, lambda t, s=status: f"{indent}{s} {t}"))
    views.append((text, lambda t: t))
    if stripped.startswith("- "):  # an item of a list (doctor()'s reasons)
        views.append((stripped[2:], lambda t: f"{indent}- {t}"))
    if stripped.startswith("(") and stripped.endswith(")") and "\n" not in stripped:
        views.append((stripped[1:-1], lambda t: f"{indent}({t})"))
    if indent:
        views.append((stripped, lambda t: indent + t))
    return views


@cache
def _translator_for(po_path: Path, mtime: float) -> Translator:
    cat = catalog.Catalogue(po_path)
    return Translator({m: e.msgstr for m, e in cat.entries.items() if e.done})


def translator(root: Path, lang: str) -> Translator:
    """The translator of ``lang``'s library catalogue (an empty one when there is none)."""
    path = (root / library.catalogue_path(lang)).resolve()
    if not path.exists():
        return Translator({})
    return _translator_for(path, path.stat().st_mtime)


def language_cell(lang: str, deck: bool) -> nbformat.NotebookNode:
    """The generated first code cell of a translated notebook: it sets the language."""
    source = CELL_COMMENT.get(lang, "") + f'import labsupport as lab\n\nlab.set_language("{lang}")'
    cell = nbformat.v4.new_code_cell(source)
    cell["id"] = CELL_ID
    if deck:  # set-up, not a slide
        cell.metadata["slideshow"] = {"slide_type": "skip"}
    return cell


def uses_labsupport(nb: nbformat.NotebookNode) -> bool:
    """True if a code cell of ``nb`` uses labsupport (then its language matters)."""
    return any(c.cell_type == "code" and "labsupport" in c.source for c in nb.cells)


def localize(
    nb: nbformat.NotebookNode, lang: str, translate: Translator, deck: bool = False
) -> nbformat.NotebookNode:
    """``nb`` (a translated copy) with its language cell first and the library's outputs
    translated; done once (a notebook that has its language cell already, or does not use
    labsupport, is returned as is)."""
    if any(c.get("id") == CELL_ID for c in nb.cells) or not uses_labsupport(nb):
        return nb
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.get("outputs"):
            cell.outputs = [nbformat.from_dict(translate.output(o)) for o in cell.outputs]
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    nb.cells.insert(first, language_cell(lang, deck))
    return nb
