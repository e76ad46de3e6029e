"""Split Markdown into the blocks a translator translates, and put it back together byte for byte.

A Markdown text (a notebook's markdown cell, or a whole ``.md`` file) is parsed with
markdown-it-py (the parser MyST and Jupyter Book use) and cut into top-level blocks:

* a paragraph; a heading (its ``#`` marks stay out of the text to translate);
* one item of a list (its marker ``-`` / ``1.`` and the continuation indent stay out);
* a whole table; a whole blockquote (its ``>`` prefixes stay out);
* a whole ``<details>`` ... ``</details>`` answer, and any other HTML block.

What is not prose stays as it is, untranslated: blank lines, fenced and indented code,
thematic breaks, HTML comments (the ``<!-- BEGIN SOLUTION -->`` markers), and blocks with
no words outside code, math and links.

``join(split(text))`` is ``text``, exactly: every line of the input belongs to one
segment, and a block whose markers cannot be taken off and put back unchanged keeps them
in its text instead (see :func:`_block`).

A block's ``msgid`` (what the catalogue holds) is its text without the English's hard
wraps (:func:`unwrap`): the lines of each paragraph, also inside a list item, a quote or
an answer, are joined by one space, so re-wrapping an English paragraph leaves its
catalogue entry as it is. What keeps its lines: code, tables, HTML, the lines of a list
(each item starts one), hard line breaks. A block the catalogue does not translate yet
shows its English text as written, with its lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt

_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]+|$)")
_MARKER = re.compile(r" {0,3}(?:[-+*]|\d{1,9}[.)])(?: {1,4}|$)")
_QUOTE = re.compile(r" {0,3}> ?")
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+?\$", re.DOTALL)
TEXT_IN_MATH = re.compile(r"\\(?:text|mathrm|textrm|operatorname)\{([^{}]*)\}")
_URL = re.compile(r"\]\([^)]*\)|https?://\S+")
_WORD = re.compile(r"[A-Za-z]{2,}|[\u3400-\u9fff]")


@dataclass(frozen=True)
class Block:
    """One translatable block: ``head`` + the text (each further line after ``indent``) + ``tail``.

    ``msgid`` is what the catalogue holds (the text, unwrapped); ``text`` the English as
    written (its lines; empty when it is the ``msgid``); ``line`` where the block starts
    (0-based, in the text that was split). :meth:`render` puts a translation back in the
    block's frame (heading marks, list marker, quote prefix, final newline).
    """

    kind: str
    msgid: str
    head: str = ""
    indent: str = ""
    tail: str = ""
    text: str = ""
    line: int = 0

    @property
    def english(self) -> str:
        """The block's English text, as written."""
        return self.text or self.msgid

    def render(self, text: str) -> str:
        """The block's Markdown with ``text`` in place of ``msgid``."""
        lines = text.split("\n")
        body = [lines[0]] + [
            (self.indent if line else self.indent.rstrip()) + line for line in lines[1:]
        ]
        return self.head + "\n".join(body) + self.tail


Segment = str | Block


@lru_cache(maxsize=1)
def parser() -> MarkdownIt:
    """CommonMark with tables (GitHub's pipe tables), as JupyterLab renders them."""
    return MarkdownIt("commonmark").enable("table")


def has_words(text: str) -> bool:
    """True if ``text`` has prose to translate outside code, math, comments and link targets."""
    text = COMMENT.sub(" ", text)
    text = CODE.sub(" ", text)
    text = MATH.sub(lambda m: " ".join(TEXT_IN_MATH.findall(m.group(0))) or " ", text)
    text = re.sub(r"<[^>]+>", " ", _URL.sub(" ", text))
    return bool(_WORD.search(text))


_HARD_BREAK = re.compile(r"(?: {2,}|\\)$")


def unwrap(text: str) -> str:
    """``text`` with each paragraph's soft line breaks replaced by one space.

    Paragraphs are found by markdown-it at any depth (in a list item, a quote, a
    ``<details>`` answer); each further line of a paragraph is joined to the one before,
    its indent or quote marks dropped, unless that line ends in a hard break (two spaces
    or a backslash). Code, tables, HTML blocks and the lines that start a list item or a
    block are not paragraph lines and stay as they are. When the joined text would not
    render as the original does (whitespace aside), ``text`` is returned unchanged.
    """
    if "\n" not in text or "\r" in text:
        return text
    lines = text.split("\n")
    joined: dict[int, int] = {}  # line -> the quote depth of its paragraph
    depth = 0
    for token in parser().parse(text):
        if token.type == "blockquote_open":
            depth += 1
        elif token.type == "blockquote_close":
            depth -= 1
        elif token.type == "paragraph_open" and token.map:
            start, end = token.map
            joined.update((line, depth) for line in range(start + 1, min(end, len(lines))))
    if not joined:
        return text
    out: list[str] = []
    for index, line in enumerate(lines):
        if index in joined and not _HARD_BREAK.search(out[-1]):
            prefix = re.match(rf"[ \t]*(?:>[ \t]*){{0,{joined[index]}}}", line)
            out[-1] = out[-1].rstrip(" \t") + " " + line[prefix.end() :]
        else:
            out.append(line)
    result = "\n".join(out)
    return result if _rendered(result) == _rendered(text) else text


def _rendered(text: str) -> str:
    """The HTML of ``text``, every run of whitespace one space."""
    return re.sub(r"\s+", " ", parser().render(text)).strip()


def _ranges(lines: list[str]) -> list[tuple[str, int, int]]:
    """(kind, first line, end line) of each top-level block, in order, blank lines trimmed."""
    tokens = parser().parse("".join(lines))
    found: list[tuple[str, int, int]] = []
    details_end = -1
    for index, token in enumerate(tokens):
        if token.map is None or token.nesting == -1:
            continue
        start, end = token.map
        if token.level == 1 and token.type == "list_item_open":
            found.append(("list item", start, end))
        if token.level != 0 or start < details_end:
            continue
        kind = {
            "paragraph_open": "paragraph",
            "heading_open": "heading",
            "table_open": "table",
            "blockquote_open": "blockquote",
            "html_block": "html",
        }.get(token.type)
        if kind == "html" and token.content.lstrip().lower().startswith("<details"):
            kind, end = "details", _details_end(tokens, index, lines)
            details_end = end
        if kind:
            found.append((kind, start, end))
    trimmed = []
    for kind, start, end in found:
        while end > start and not lines[end - 1].strip():
            end -= 1
        trimmed.append((kind, start, end))
    return trimmed


def _details_end(tokens: list, index: int, lines: list[str]) -> int:
    """The line after the ``</details>`` closing the ``<details>`` opened at ``tokens[index]``."""
    depth = 0
    for token in tokens[index:]:
        if token.level != 0 or token.map is None or token.nesting == -1:
            continue
        source = "".join(lines[token.map[0] : token.map[1]]).lower()
        depth += source.count("<details") - source.count("</details>")
        if depth <= 0:
            return token.map[1]
    return len(lines)  # never closed: the rest of the text is the answer


def _block(kind: str, source: str, line: int = 0) -> Block | str:
    """The block for ``source`` (its lines, from ``line`` on), or ``source`` itself if it has
    nothing to translate."""
    if kind in ("html", "details") and not COMMENT.sub("", source).strip():
        return source
    if not has_words(source):
        return source
    tail = "\n" if source.endswith("\n") else ""
    text = source[: len(source) - len(tail)]
    plain = Block(kind, unwrap(text), tail=tail, text=text, line=line)
    head, indent = "", ""
    if kind == "heading" and "\n" not in text:
        match = _HEADING.match(text)
        head = match.group(0) if match else ""
    elif kind == "list item":
        match = _MARKER.match(text)
        head = match.group(0) if match else ""
        indent = " " * len(head)
    elif kind == "blockquote":
        match = _QUOTE.match(text)
        head = indent = match.group(0) if match else ""
    if not head:
        return plain
    lines = text[len(head) :].split("\n")
    rest = [_unindent(line, indent) for line in lines[1:]]
    if None in rest:
        return plain  # a lazy continuation line: keep the markers in the text
    body = "\n".join([lines[0], *rest])
    framed = Block(kind, unwrap(body), head, indent, tail, body, line)
    return framed if framed.render(body) == source and body.strip() else plain


def _unindent(line: str, indent: str) -> str | None:
    if line.startswith(indent):
        return line[len(indent) :]
    return "" if line == indent.rstrip() else None


def split(text: str) -> list[Segment]:
    """Cut ``text`` into translatable :class:`Block` s and the verbatim strings between them."""
    lines = text.splitlines(keepends=True)
    segments: list[Segment] = []
    position = 0
    for kind, start, end in _ranges(lines):
        if start < position:
            continue  # inside a block already taken (a details answer)
        if start > position:
            segments.append("".join(lines[position:start]))
        segments.append(_block(kind, "".join(lines[start:end]), start))
        position = end
    if position < len(lines):
        segments.append("".join(lines[position:]))
    return _merge_strings(segments)


def _merge_strings(segments: list[Segment]) -> list[Segment]:
    merged: list[Segment] = []
    for segment in segments:
        if isinstance(segment, str) and merged and isinstance(merged[-1], str):
            merged[-1] += segment
        elif segment != "":
            merged.append(segment)
    return merged


def blocks(text: str) -> list[Block]:
    """The translatable blocks of ``text``, in order."""
    return [s for s in split(text) if isinstance(s, Block)]


def join(segments: list[Segment], translate: Callable[[Block], str | None] | None = None) -> str:
    """Put the segments back together, each block's text replaced by ``translate(block)``
    (the English as written where there is no ``translate`` or it gives None)."""
    out = []
    for segment in segments:
        if isinstance(segment, Block):
            text = translate(segment) if translate else None
            out.append(segment.render(segment.english if text is None else text))
        else:
            out.append(segment)
    return "".join(out)
