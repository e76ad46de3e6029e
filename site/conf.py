"""Sphinx configuration of the course's site, shared by both languages.

``site/build.py`` runs Sphinx once per language on a source folder it lays out in
``site/_build/src/<lang>/`` (the solution notebooks with their stored outputs, the
pages of ``site/pages/<lang>/``, the references and the instructor's guide), with
``SITE_LANG`` naming the language. Nothing is executed (``nb_execution_mode = "off"``)
and nothing is loaded from the network when a page is read: MathJax is the decks'
copy (``slides/assets/``, beside the two languages), the widgets' manager and
require.js are in ``_static/``, the theme's fonts ship with the theme.
"""

from __future__ import annotations

import os

#: The languages of the site: Sphinx's language code, the HTML lang tag, the name a
#: reader of the other language recognises, and the book's title.
LANGUAGES = {
    "en": ("en", "English", "Collective communication, hands on"),
    "zh_CN": ("zh-CN", "中文", "集合通信动手实践"),
}
SITE_LANG = os.environ.get("SITE_LANG", "en")
if SITE_LANG not in LANGUAGES:
    raise ValueError(f"SITE_LANG={SITE_LANG!r}: expected one of {sorted(LANGUAGES)}")
#: The folder ``build.py`` unpacks the widgets' manager into (``_static/widgets/``).
WIDGETS_STATIC = os.environ.get("SITE_WIDGETS_STATIC", "")

project = LANGUAGES[SITE_LANG][2]
language = SITE_LANG
author = ""
copyright = "the course's authors, Apache-2.0"

extensions = ["myst_nb"]
exclude_patterns = ["learner", "fragments", "**.ipynb_checkpoints"]
templates_path = [os.path.join(os.path.dirname(__file__), "_templates")]
html_static_path = [os.path.join(os.path.dirname(__file__), "_static")]
if WIDGETS_STATIC:
    html_static_path.append(WIDGETS_STATIC)
html_css_files = ["course-site.css"]

# The notebooks as they are stored: outputs, widget state and all. No kernel.
nb_execution_mode = "off"
nb_merge_streams = True
# The widgets' state stored in a notebook renders with the widgets' HTML manager and
# require.js, both served from _static/ (MyST-NB's default loads them from CDNs).
# widgets-path.js tells the manager where its fonts are (else: beside the page).
nb_ipywidgets_js = {
    "widgets-path.js": {},
    "require.js": {},
    "widgets/embed-amd.js": {},
}
# A traceback stored by a cell that fails on purpose (notebook 09) is cut ("…") where
# IPython's traceback lexer expects more: Pygments then colours it loosely, and says so.
suppress_warnings = ["misc.highlighting_failure"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "html_image"]
# GitHub's anchors for headings (REFERENCES.md#cost-models-and-algorithms, as notebooks cite).
myst_heading_anchors = 3

# MathJax 2.7, the copy the decks bundle (slides/assets/ beside en/ and zh_CN/): relative
# to _static/. Its configuration is given here, since a local path takes no "?config=".
mathjax_path = "../../slides/assets/mathjax/MathJax.js"
mathjax2_config = {
    "config": ["TeX-AMS_CHTML-full.js"],
    "extensions": ["Safe.js"],
    "showMathMenu": False,
}

html_theme = "sphinx_book_theme"
html_title = project
# Each page links its notebook (under its title): no second copy in _sources/.
html_copy_source = False
html_show_sphinx = False
html_context = {
    # The theme's colours: light (stored plots have white backgrounds); its script
    # complains on the console when no mode is set.
    "default_mode": "light",
    "course_languages": [
        {"code": code, "tag": tag, "label": label, "current": code == SITE_LANG}
        for code, (tag, label, _) in LANGUAGES.items()
    ],
}
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "use_download_button": False,  # the line under each title downloads the notebooks
    "use_fullscreen_button": False,
    "article_header_end": ["lang-switch.html", "article-header-buttons.html"],
    "navigation_with_keys": False,
}
html_sidebars = {
    "**": [
        "navbar-logo.html",
        "lang-switch.html",
        "search-button-field.html",
        "sbt-sidebar-nav.html",
    ]
}
# Chinese words for the zh-CN search index: Sphinx uses jieba when it is installed.
html_search_language = "zh" if SITE_LANG == "zh_CN" else "en"
if SITE_LANG == "zh_CN":
    html_js_files = ["stemmer-zh.js"]
