"""Build the workshop decks into static reveal.js HTML that works offline.

    python slides/build.py            # assets + every deck + the offline check
    python slides/build.py assets     # fetch and unpack reveal.js, require.js, MathJax, jQuery
    python slides/build.py decks [slides/00_welcome.ipynb ...]
    python slides/build.py check [slides/_build/*.slides.html]

nbconvert's slides template loads reveal.js, require.js, jQuery and MathJax from
CDNs. Here each comes from its npm registry tarball, at a pinned version whose
sha512 integrity (the one the npm registry publishes) is checked before anything
is unpacked; the HTML then points at the local copies in ``slides/_build/assets/``.
Tarballs are cached in ``slides/_build/cache/``: once fetched, a rebuild needs no
network. Copy the whole ``slides/_build/`` folder to a USB stick and open any
``NN_name.slides.html``; press ``s`` for the speaker notes.

The decks are converted from their stored outputs (no kernel is started):
re-run them first with ``python -m labsupport.exercises execute slides/NN_name.ipynb``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import re
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD = HERE / "_build"
ASSETS = BUILD / "assets"
CACHE = BUILD / "cache"
TEMPLATE_DIR = HERE / "template"
REGISTRY = "https://registry.npmjs.org"


@dataclass(frozen=True)
class Package:
    """One npm package at a pinned version, with the integrity the registry publishes."""

    name: str
    version: str
    integrity: str  # "sha512-<base64>", from `npm view NAME@VERSION dist.integrity`
    skip: tuple[str, ...] = ()  # path fragments not unpacked (sources, other formats)

    @property
    def url(self) -> str:
        return f"{REGISTRY}/{self.name}/-/{self.name}-{self.version}.tgz"


# reveal.js 4.0.2 is the version nbconvert's reveal template is written for.
PACKAGES = (
    Package(
        "reveal.js",
        "4.0.2",
        "sha512-LWZSUenufF1gpD7npxJ7KfoQQFKgc1D6XrLTFgKlwWNP1BQ74hT48KONFWMAw+8R/QUeaScCLCLrBVHDfFIEiw==",
        skip=("/js/", "/css/", "/test/", "/examples/", ".map"),
    ),
    Package(
        "requirejs",
        "2.1.10",
        "sha512-4JqdTihK3kOnT387LxCHuJZ/9QsKg2EIl7LmaW35PIyM4LwCI2jwyy4fy6pbY/ZZH2JoY/QEcb5PzULFPP6gcQ==",
        skip=("/bin/",),
    ),
    Package(
        "jquery",
        "2.2.4",
        "sha512-lBHj60ezci2u1v2FqnZIraShGgEXq35qCzMv4lITyHGppTnA13rwR0MgwyNJh9TnDs3aXUvd1xjAotfraMHX/Q==",
        skip=("/src/", "/external/"),
    ),
    Package(
        "mathjax",
        "2.7.7",
        "sha512-OOl0B2/0tSJAtAZarXnQuLDBLgTNRqiI9VqHTQzPsxf4okT2iIpDrvaklK9x2QEMD1sDj4yRn11Ygci41DxMAQ==",
        # CommonHTML output and TeX input only (what TeX-AMS_CHTML-full loads), TeX fonts.
        skip=(
            "/unpacked/",
            "/test/",
            "/docs/",
            "/png/",
            "/eot/",
            "/svg/",
            "/jax/output/SVG/",
            "/jax/output/HTML-CSS/",
            "/jax/output/NativeMML/",
            "/jax/output/PreviewHTML/",
            "/jax/input/MathML/",
            "/jax/input/AsciiMath/",
            "/Asana-Math/",
            "/Gyre-Pagella/",
            "/Gyre-Termes/",
            "/Latin-Modern/",
            "/Neo-Euler/",
            "/STIX-Web/",
        ),  # fmt: skip
    ),
)

# Where the HTML finds each file, relative to slides/_build/.
URLS = {
    "reveal_url_prefix": "assets/reveal.js",
    "require_js_url": "assets/requirejs/require.js",
    "jquery_url": "assets/jquery/dist/jquery.min.js",
    # MathJax.js itself: latest.js would look for a newer MathJax on a CDN.
    "mathjax_url": "assets/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
}
THEME = "white"  # its fonts ship with reveal.js; "simple" imports Google Fonts


class BuildError(RuntimeError):
    """A deck or an asset could not be built; the message says what to do."""


def verify(data: bytes, integrity: str) -> None:
    """Raise BuildError unless ``data`` matches an npm ``sha512-...`` integrity string."""
    algorithm, _, expected = integrity.partition("-")
    if algorithm != "sha512":
        raise BuildError(f"unsupported integrity {integrity!r}: expected sha512-...")
    actual = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if actual != expected:
        raise BuildError(f"integrity mismatch: expected sha512-{expected}, got sha512-{actual}")


def fetch(package: Package) -> bytes:
    """The package's tarball, from the cache or the npm registry, integrity checked."""
    cached = CACHE / f"{package.name}-{package.version}.tgz"
    if cached.exists():
        data = cached.read_bytes()
    else:
        print(f"fetching {package.url}")
        try:
            with urllib.request.urlopen(package.url, timeout=120) as response:
                data = response.read()
        except OSError as err:
            raise BuildError(
                f"cannot download {package.url} ({err}). Build the assets once on a machine "
                f"with access to the npm registry, or copy its {CACHE} folder here."
            ) from err
    try:
        verify(data, package.integrity)
    except BuildError as err:
        cached.unlink(missing_ok=True)
        raise BuildError(f"{package.name}@{package.version}: {err}") from None
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(data)
    return data


def unpack(package: Package, data: bytes, into: Path) -> int:
    """Extract the tarball's ``package/`` folder into ``into/NAME`` (minus ``skip``); files."""
    target = into / package.name
    count = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile() or not member.name.startswith("package/"):
                continue
            relative = member.name[len("package/") :]
            if any(part in "/" + relative for part in package.skip) or ".." in relative:
                continue
            path = target / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            path.write_bytes(source.read())
            count += 1
    return count


def build_assets() -> None:
    """Fetch (or take from the cache), verify and unpack every package into ASSETS."""
    for package in PACKAGES:
        count = unpack(package, fetch(package), ASSETS)
        print(f"assets/{package.name}: {package.name}@{package.version}, {count} files")


def build_deck(notebook: Path, out_dir: Path = BUILD) -> Path:
    """Convert one deck (with its stored outputs) into ``out_dir/NAME.slides.html``."""
    import nbformat
    from nbconvert import SlidesExporter

    nb = nbformat.read(notebook, as_version=4)
    nb.metadata.pop("widgets", None)  # the widget manager would load from unpkg.com
    exporter = SlidesExporter(
        extra_template_basedirs=[str(TEMPLATE_DIR)],
        template_name="offline",
        reveal_theme=THEME,
        reveal_scroll=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        **URLS,
    )
    html, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem}})
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{notebook.stem}.slides.html"
    target.write_text(html, encoding="utf-8")
    return target


# A resource the browser loads by itself: src/href attributes, CSS url() and @import.
_REFERENCE = re.compile(
    r"""(?:\b(?:src|href)\s*=\s*["']([^"']+)["'])|(?:url\(\s*["']?([^"')]+)["']?\s*\))"""
    r"""|(?:@import\s+["']([^"']+)["'])""",
    re.IGNORECASE,
)
_EXTERNAL = re.compile(r"^(?:https?:)?//", re.IGNORECASE)
_SCRIPT = re.compile(r"<script\b[^>]*>(.*?)</script\s*>", re.IGNORECASE | re.DOTALL)
# What a script loads by itself: ES modules (static `import ... from 'x'`, `import 'x'`,
# `export ... from 'x'`, dynamic `import('x')`) and require.js modules (the string
# literals of a `require(...)`, `requirejs(...)`, `define(...)` or `require.config(...)`
# call before its callback: the module list, and the `paths` of a configuration).
_ES_IMPORT = re.compile(
    r"""\b(?:import|export)\b[^'"`;()]*?\bfrom\s*(['"`])(.+?)\1"""
    r"""|\bimport\s*(['"`])(.+?)\3|\bimport\s*\(\s*(['"`])(.+?)\5""",
)
_AMD_CALL = re.compile(r"\b(?:require(?:js)?(?:\.config)?|define)\s*\(")
_AMD_END = re.compile(r"\bfunction\b|=>")
_STRING = re.compile(r"""(['"`])((?:https?:)?//[^'"`\s]+|[^'"`\s]+\.m?js)\1""")


def _script_references(script: str) -> list[str]:
    """URLs (or local .js paths) that a script's module loaders would fetch."""
    found = [m.group(2) or m.group(4) or m.group(6) for m in _ES_IMPORT.finditer(script)]
    calls = list(_AMD_CALL.finditer(script))
    for call, following in zip(calls, [*calls[1:], None], strict=False):
        callback = _AMD_END.search(script, call.end())
        end = min(
            callback.start() if callback else len(script),
            following.start() if following else len(script),
        )
        found += [m.group(2) for m in _STRING.finditer(script[call.end() : end])]
    return found


def external_references(html: str, base: Path | None = None) -> list[str]:
    """URLs of scripts, modules, styles, fonts and images that ``html`` would load from the
    network.

    Links in ``<a href>`` are left out (following one is the reader's choice). Inline
    scripts are read for what their module loaders fetch (:func:`_script_references`).
    With ``base``, local style sheets are read too (their @import and url() count), and a
    local file that does not exist is reported as ``missing: PATH``.
    """
    urls = [s for script in _SCRIPT.findall(html) for s in _script_references(script)]
    html = re.sub(r"<a\s[^>]*>", "", html, flags=re.IGNORECASE)
    urls[:0] = [next(g for g in m.groups() if g) for m in _REFERENCE.finditer(html)]
    found = []
    for url in urls:
        if url.startswith(("data:", "#", "about:", "javascript:")):
            continue
        if _EXTERNAL.match(url):
            found.append(url)
        elif base is not None:
            path = (base / url.split("?")[0].split("#")[0]).resolve()
            if not path.exists():
                found.append(f"missing: {url}")
            elif path.suffix == ".css":
                text = path.read_text(encoding="utf-8", errors="replace")
                found += external_references(text, path.parent)
    return found


def check(paths: list[Path]) -> list[str]:
    """Problems in built decks: external references, missing files, no speaker notes."""
    problems = []
    for path in paths:
        html = path.read_text(encoding="utf-8")
        problems += [f"{path.name}: {ref}" for ref in external_references(html, path.parent)]
        if '<aside class="notes">' not in html:
            problems.append(f"{path.name}: no speaker notes")
    return problems


def decks() -> list[Path]:
    """The decks, ``slides/NN_name.ipynb``, in order."""
    return sorted(HERE.glob("[0-9][0-9]_*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python slides/build.py", description=__doc__)
    commands = ["all", "assets", "decks", "check"]
    parser.add_argument("command", nargs="?", default="all", choices=commands)
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command in ("all", "assets"):
            build_assets()
        built = []
        if args.command in ("all", "decks"):
            for notebook in args.paths or decks():
                built.append(build_deck(notebook))
                print(f"wrote {built[-1]}")
        if args.command in ("all", "check"):
            targets = args.paths if args.command == "check" and args.paths else built
            targets = targets or sorted(BUILD.glob("*.slides.html"))
            problems = check(targets)
            for problem in problems:
                print(problem, file=sys.stderr)
            if problems:
                return 1
            print(f"{len(targets)} deck(s) load nothing from the network")
    except BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
