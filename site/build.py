"""Build the course's site: every solution notebook with its stored outputs, in English and
zh-CN, into one folder that reads offline.

    python site/build.py            # both languages into site/_build/html/ (after make slides)
    python site/build.py --lang en  # one language (quicker while editing)

What it does, with nothing executed and nothing fetched but one npm tarball, once:

1. lays out a Sphinx source folder per language in ``site/_build/src/<lang>/``: the
   solution notebooks (``notebooks/solutions/NN_*.ipynb``; for zh-CN the copies in
   ``notebooks/zh_CN/solutions/``, the English one where a copy is missing), found by glob,
   so a new notebook is published without an edit here; each with a line under its title
   that downloads its learner's copy and opens its deck; the landing page
   (``site/pages/<lang>/index.md``) with README's "two commands"; the references; the
   instructor's guide;
2. runs Sphinx (MyST-NB, the book theme; ``site/conf.py``) on both languages at once
   into ``site/_build/html/en/`` and ``site/_build/html/zh_CN/``;
3. copies the built decks (``slides/_build/``, from ``make slides``: offline reveal.js,
   with the MathJax the pages use too) into ``site/_build/html/slides/``, and writes the
   root ``index.html`` (to English, with a link to Chinese) and ``.nojekyll``.

The widgets' HTML manager (``@jupyter-widgets/html-manager``, which renders the widget state
stored in a notebook) comes from its npm registry tarball at a pinned version whose
sha512 integrity is checked, cached in ``slides/_build/cache/`` beside the decks' own
packages (``slides/build.py``): once fetched, a rebuild needs no network.
``python -m http.server -d site/_build/html`` serves the site; opening the files works too.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUILD = HERE / "_build"
SRC = BUILD / "src"
HTML = BUILD / "html"
DECKS = ROOT / "slides" / "_build"
LANGS = ("en", "zh_CN")
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"


def _slides_build():
    """slides/build.py as a module: its Package, fetch and unpack, and its cache."""
    spec = importlib.util.spec_from_file_location("slides_build", ROOT / "slides" / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


slides_build = _slides_build()


class ScopedPackage(slides_build.Package):
    """An npm package whose name has a scope (``@scope/name``): its tarball's address."""

    @property
    def url(self) -> str:
        """Where the registry serves a scoped package's tarball."""
        scope_free = self.name.rsplit("/", 1)[-1]
        return f"{slides_build.REGISTRY}/{self.name}/-/{scope_free}-{self.version}.tgz"


#: The HTML manager of ipywidgets 8 (widget protocol 2, @jupyter-widgets/controls 5), as
#: the registry publishes it (``npm view @jupyter-widgets/html-manager@1.0.15 dist.integrity``).
#: Only its AMD bundle and its fonts as woff2 and woff are kept (no source maps, no second
#: bundle, no older font formats: a browser that reads the bundle reads woff2).
HTML_MANAGER = ScopedPackage(
    "@jupyter-widgets/html-manager",
    "1.0.15",
    "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
    skip=(
        "/lib/",
        "/src/",
        ".map",
        "/embed.js",
        "/libembed-amd.js",
        ".d.ts",
        ".eot",
        ".ttf",
        ".svg",
    ),
)

#: Per language: where its solution notebooks, learners' copies, decks, README and guide are,
#: the heading of README's two commands, and the words of the line under a notebook's title.
SOURCES = {
    "en": {
        "solutions": ROOT / "notebooks" / "solutions",
        "learners": ROOT / "notebooks",
        "decks": DECKS,
        "readme": ROOT / "README.md",
        "two_commands": "Two commands",
        "guide": ROOT / "slides" / "INSTRUCTOR.md",
        "learner_copy": "Learner's copy (exercises to fill in)",
        "deck": "Deck",
        "source": "Solution notebook",
        "decks_title": "Decks",
        "decks_intro": "One deck per lesson, as HTML that works offline (reveal.js): "
        "arrows or space to move, `s` for the speaker notes, `f` for full screen. "
        "The instructor's guide says how a one-day workshop uses them.",
    },
    "zh_CN": {
        "solutions": ROOT / "notebooks" / "zh_CN" / "solutions",
        "learners": ROOT / "notebooks" / "zh_CN",
        "decks": DECKS / "zh_CN",
        "readme": ROOT / "README.zh-CN.md",
        "two_commands": "两条命令",
        "guide": ROOT / "slides" / "INSTRUCTOR.zh-CN.md",
        "learner_copy": "练习版（待完成的练习）",
        "deck": "幻灯片",
        "source": "答案版笔记本",
        "decks_title": "幻灯片",
        "decks_intro": "每一课一套幻灯片，离线可用的 HTML（reveal.js）：方向键或空格翻页，"
        "`s` 打开讲者备注，`f` 全屏。讲师指南说明一天的工作坊如何使用它们。",
    },
}


class SiteError(RuntimeError):
    """The site cannot be built; the message says what to do."""


def notebooks() -> list[str]:
    """The course's notebooks, by name, in the course's order (their numbers)."""
    found = sorted(p.stem for p in (ROOT / "notebooks" / "solutions").glob(NOTEBOOK_GLOB))
    if not found:
        raise SiteError("no notebooks/solutions/NN_*.ipynb to publish")
    return found


def section(markdown: str, heading: str) -> str:
    """The ``## heading`` section of a Markdown text, its heading included."""
    match = re.search(rf"^## {re.escape(heading)}[ \t]*\n.*?(?=^## |\Z)", markdown, re.M | re.S)
    if not match:
        raise SiteError(f"no '## {heading}' section to put on the landing page")
    return match.group(0).rstrip() + "\n"


#: A link to REFERENCES.md from a notebook, however deep: the site's references page.
_REFERENCES = re.compile(r"\]\((?:\.\./)+REFERENCES\.md(#[^)\s]*)?\)")
#: The guide's link to its other language's file: the other language's page.
_GUIDE_LINK = re.compile(r"\[([^\]]*)\]\((INSTRUCTOR(?:\.zh-CN)?\.md)\)")


def _relink(markdown: str) -> str:
    """A notebook's or the guide's relative links, rewritten for the site's pages."""
    markdown = _REFERENCES.sub(lambda m: f"](references.md{m.group(1) or ''})", markdown)
    return _GUIDE_LINK.sub(
        lambda m: (
            f'<a href="../{"zh_CN" if "zh-CN" in m.group(2) else "en"}/instructor.html">'
            f"{m.group(1)}</a>"
        ),
        markdown,
    )


def _title_line(lang: str, name: str, src: Path) -> str:
    """The line under a notebook's title: its learner's copy, its solution, its deck."""
    words = SOURCES[lang]
    parts = []
    learner = words["learners"] / f"{name}.ipynb"
    if not learner.exists():  # a notebook not yet translated: the English learner's copy
        learner = SOURCES["en"]["learners"] / f"{name}.ipynb"
    if learner.exists():
        shutil.copy2(learner, src / "learner" / f"{name}.ipynb")
        parts.append(f"{{download}}`{words['learner_copy']} <learner/{name}.ipynb>`")
    parts.append(f"{{download}}`{words['source']} <{name}.ipynb>`")
    deck = words["decks"] / f"{name}.slides.html"
    if deck.exists():
        prefix = "../slides/" + ("zh_CN/" if lang == "zh_CN" else "")
        parts.append(f'<a href="{prefix}{name}.slides.html">{words["deck"]}</a>')
    return " · ".join(parts)


def lay_out_notebook(lang: str, name: str, src: Path) -> None:
    """Copy one solution notebook into ``src`` with site links and a line under its title."""
    path = SOURCES[lang]["solutions"] / f"{name}.ipynb"
    if not path.exists():
        path = SOURCES["en"]["solutions"] / f"{name}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    line = _title_line(lang, name, src)
    placed = False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = _relink("".join(cell["source"]))
        if not placed:
            text, placed = re.subn(r"^(# .*)$", rf"\1\n\n{line}\n", text, count=1, flags=re.M)
        cell["source"] = text
    if not placed:
        raise SiteError(f"{path}: no '# title' in a Markdown cell to put the downloads under")
    (src / f"{name}.ipynb").write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")


def title(notebook: Path) -> str:
    """A notebook's title: the text of its first ``# heading``."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        found = re.search(r"^# (.+)$", "".join(cell["source"]), re.M)
        if cell["cell_type"] == "markdown" and found:
            return found.group(1).strip()
    return notebook.stem


def decks_page(lang: str) -> str:
    """The page that lists the decks (those built), each under its lesson's title."""
    words = SOURCES[lang]
    lines = [f"# {words['decks_title']}", "", words["decks_intro"], ""]
    prefix = "../slides/" + ("zh_CN/" if lang == "zh_CN" else "")
    for name in notebooks():
        if (words["decks"] / f"{name}.slides.html").exists():
            notebook = words["solutions"] / f"{name}.ipynb"
            if not notebook.exists():
                notebook = SOURCES["en"]["solutions"] / f"{name}.ipynb"
            label = title(notebook)
            lines.append(f'- <a href="{prefix}{name}.slides.html">{name[:2]}: {label}</a>')
    return "\n".join(lines) + "\n"


def lay_out(lang: str) -> Path:
    """The Sphinx source folder of one language, laid out anew."""
    src = SRC / lang
    shutil.rmtree(src, ignore_errors=True)
    (src / "learner").mkdir(parents=True)
    (src / "fragments").mkdir()
    words = SOURCES[lang]
    for page in (HERE / "pages" / lang).glob("*.md"):
        shutil.copy2(page, src / page.name)
    readme = words["readme"].read_text(encoding="utf-8")
    (src / "fragments" / "two-commands.md").write_text(
        section(readme, words["two_commands"]), encoding="utf-8"
    )
    references = (ROOT / "REFERENCES.md").read_text(encoding="utf-8")
    preface = (HERE / "pages" / lang / "references-preface.txt").read_text(encoding="utf-8")
    references = re.sub(r"^(# .*)$", rf"\1\n\n{preface.strip()}\n", references, count=1, flags=re.M)
    (src / "references.md").write_text(references, encoding="utf-8")
    (src / "decks.md").write_text(decks_page(lang), encoding="utf-8")
    guide = _relink(words["guide"].read_text(encoding="utf-8"))
    (src / "instructor.md").write_text(guide, encoding="utf-8")
    for name in notebooks():
        lay_out_notebook(lang, name, src)
    return src


def widgets_static() -> Path:
    """``_static/widgets/`` (the HTML manager) and ``_static/require.js``, in one folder."""
    folder = BUILD / "static"
    shutil.rmtree(folder, ignore_errors=True)
    (ROOT / "slides" / "_build" / "cache" / "@jupyter-widgets").mkdir(parents=True, exist_ok=True)
    try:
        data = slides_build.fetch(HTML_MANAGER)
    except slides_build.BuildError as err:
        raise SiteError(str(err)) from None
    slides_build.unpack(HTML_MANAGER, data, folder / "npm")
    shutil.move(folder / "npm" / HTML_MANAGER.name / "dist", folder / "widgets")
    shutil.rmtree(folder / "npm")
    require = DECKS / "assets" / "requirejs" / "require.js"
    shutil.copy2(require, folder / "require.js")
    return folder


def sphinx(langs: list[str], static: Path) -> None:
    """Run Sphinx on every language at once (one process each), failing on any warning."""
    running = []
    for lang in langs:
        env = dict(os.environ, SITE_LANG=lang, SITE_WIDGETS_STATIC=str(static))
        command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going"]
        command += ["-c", str(HERE), "-d", str(BUILD / "doctrees" / lang)]
        # Into _build/sphinx/<lang>/html/: MyST-NB writes the images it takes out of the
        # outputs beside that folder (jupyter_execute/), one per language, never published.
        command += [str(SRC / lang), str(BUILD / "sphinx" / lang / "html")]
        log = open(BUILD / f"sphinx-{lang}.log", "w", encoding="utf-8")
        running.append((lang, subprocess.Popen(command, env=env, stdout=log, stderr=log), log))
    failed = []
    for lang, proc, log in running:
        proc.wait()
        log.close()
        if proc.returncode:
            failed.append(lang)
            print((BUILD / f"sphinx-{lang}.log").read_text(encoding="utf-8"), file=sys.stderr)
    if failed:
        raise SiteError(f"Sphinx failed for {', '.join(failed)} (its log is above)")
    for lang in langs:
        shutil.rmtree(HTML / lang, ignore_errors=True)
        # Without the theme's source maps (7 MiB a language; only a browser's developer
        # tools ask for them).
        built = BUILD / "sphinx" / lang / "html"
        shutil.copytree(built, HTML / lang, ignore=shutil.ignore_patterns("*.map", ".buildinfo"))


ROOT_INDEX = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="0; url=en/index.html">
<title>Collective communication, hands on</title></head>
<body><p><a href="en/index.html">English</a> ·
<a href="zh_CN/index.html" lang="zh-CN" hreflang="zh-CN">中文</a></p></body></html>
"""


def copy_decks() -> None:
    """The built decks and their assets (MathJax too) into ``html/slides/``."""
    if not list(DECKS.glob("*.slides.html")):
        raise SiteError(f"no decks in {DECKS}: run `make slides` first (`make site` does)")
    target = HTML / "slides"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(DECKS, target, ignore=shutil.ignore_patterns("cache"))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python site/build.py", description=__doc__)
    parser.add_argument("--lang", action="append", choices=LANGS, help="default: both")
    args = parser.parse_args(argv)
    langs = args.lang or list(LANGS)
    start = time.monotonic()
    try:
        HTML.mkdir(parents=True, exist_ok=True)
        copy_decks()
        static = widgets_static()
        for lang in langs:
            lay_out(lang)
        sphinx(langs, static)
    except SiteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    (HTML / "index.html").write_text(ROOT_INDEX, encoding="utf-8")
    (HTML / ".nojekyll").write_text("", encoding="utf-8")  # _static/ is served as it is
    size = sum(p.stat().st_size for p in HTML.rglob("*") if p.is_file())
    print(
        f"site: {', '.join(langs)} in {HTML.relative_to(ROOT)}/ "
        f"({size / 2**20:.0f} MiB, {time.monotonic() - start:.0f} s); "
        f"read it with: python -m http.server -d {HTML.relative_to(ROOT)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
