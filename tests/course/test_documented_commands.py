"""Every command the guides tell someone to type still runs, under its current name.

The commands are read from README.md, README.zh-CN.md, slides/INSTRUCTOR*.md (code blocks and
inline code spans) and examples/ (docstrings, comments and the sbatch scripts):

- ``python -m MODULE [SUB] ...`` (and ``torchrun ... -m MODULE``, ``launch -m MODULE`` in the
  sbatch scripts), for the course's own modules: ``python -m MODULE [SUB] --help`` exits 0,
  prints no "has moved to" (the guides use the new paths, not the old names' alias), and
  lists every option the guide gives it;
- ``python SCRIPT.py ...``, ``torchrun ... examples/X.py ...``, ``srun ... python X.py``: the
  same with ``python SCRIPT.py [SUB] --help``;
- ``make TARGET VAR=VALUE...``: ``make -n TARGET VAR=VALUE...`` (a dry run) exits 0, with the
  variables as written (some targets check them: COURSE_LANG, LAB_DIR);
- ``sbatch ... examples/slurm/X.sbatch ARGS``: the script exists, ``bash -n`` reads it, and
  ARGS are options of the program its ``launch`` line starts.

Each distinct command is one test, named by the command; the same command in two documents
(README.md and its Chinese copy) is run once.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
MARKDOWN = ["README.md", "README.zh-CN.md", "slides/INSTRUCTOR.md", "slides/INSTRUCTOR.zh-CN.md"]
EXAMPLES = sorted(
    str(p.relative_to(ROOT))
    for p in (ROOT / "examples").rglob("*")
    if p.is_file() and p.suffix in {".py", ".sbatch", ".sh"}
)
# Commands found at least, per document: a finder that finds nothing fails here. Raise a
# number when a document gains commands; lower it only when commands were really removed.
MINIMUM = {
    "README.md": 40,
    "README.zh-CN.md": 40,
    "slides/INSTRUCTOR.md": 33,
    "slides/INSTRUCTOR.zh-CN.md": 33,
    "examples/capstone.py": 3,
    "examples/ddp_overlap.py": 2,
    "examples/hello_ranks.py": 4,
    "examples/slurm/bench.sbatch": 6,
    "examples/slurm/ddp.sbatch": 6,
    "examples/slurm/hello_ranks.sbatch": 5,
    # Its only command is torch's own (python -m torch.distributed.run), not the course's.
    "examples/slurm/launch.sh": 0,
}
# Modules whose ``python -m`` lines are checked (torch's, pip's and jupyter's are not ours).
COURSE_MODULES = ("labsupport", "labkit", "i18n")
TIMEOUT = 120  # seconds for one --help: importing torch on a busy 2-core machine

_START = re.compile(r"(?<![\w./=,-])(?:(?:[\w.-]*/)*python3?|torchrun|launch|make|sbatch)(?=[ \t])")
_SUB = re.compile(r"[a-z][a-z0-9_-]*")
_TARGET = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_VARIABLE = re.compile(r"[A-Z][A-Z0-9_]*=")
_OPTION = re.compile(r"--?[A-Za-z][\w-]*")
_MODULE = re.compile(r"[A-Za-z_][\w.]*[\w]")  # "i18n" of "(python -m i18n),"


@dataclass(frozen=True)
class Command:
    """One documented command: what it runs, as the guide wrote it."""

    kind: str  # "module", "script", "make" or "sbatch"
    target: str  # the module, the script's path, the make target or the sbatch script
    args: tuple[str, ...]  # what the guide gives it after the target
    text: str = field(compare=False)  # the command as written (whitespace normalized)

    @property
    def sub(self) -> str | None:
        """The subcommand (``grade`` of ``labkit.capstone grade FOLDER``), if there is one."""
        if self.kind in ("module", "script") and self.args and _SUB.fullmatch(self.args[0]):
            return self.args[0]
        return None

    @property
    def options(self) -> list[str]:
        """The options the guide gives (``--json`` of ``--json ar.json``, ``-b`` of ``-b 8``)."""
        return [m.group() for a in self.args if (m := _OPTION.match(a)) and m.group() != "--help"]


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:  # an apostrophe in prose
        return text.split()


def _program(tokens: list[str], text: str) -> Command | None:
    """``-m MODULE ARGS`` or ``SCRIPT.py ARGS``, the program a launcher was given."""
    if tokens[0] == "-m" and len(tokens) > 1 and (module := _MODULE.match(tokens[1])):
        # "(python -m i18n), catalogues": punctuation after the name ends the command
        args = tokens[2:] if module.group() == tokens[1] else []
        return Command("module", module.group(), tuple(args), text)
    if tokens[0].endswith(".py"):
        return Command("script", tokens[0], tuple(tokens[1:]), text)
    return None


def parse(segment: str) -> list[Command]:
    """The commands in one line of shell or one code span (no comments, one command per ``&&``)."""
    found: list[Command | None] = []
    for start in _START.finditer(segment):
        tokens = _split(segment[start.start() :])
        text = " ".join(segment[start.start() :].split())
        word = tokens[0].rsplit("/", 1)[-1]
        if word in ("python", "python3") and len(tokens) > 1:
            found.append(_program(tokens[1:], re.sub(r"^\S*/python", "python", text)))
        elif word in ("torchrun", "launch"):  # the launcher's own options first, then the program
            i = next((i for i, t in enumerate(tokens) if t == "-m" or t.endswith(".py")), None)
            found.append(_program(tokens[i:], text) if i else None)
        elif word == "make" and len(tokens) > 1 and _TARGET.fullmatch(tokens[1]):
            variables = []
            for token in tokens[2:]:
                if not _VARIABLE.match(token):
                    break
                variables.append(token)
            found.append(Command("make", tokens[1], tuple(variables), text))
        elif word == "sbatch":
            i = next((i for i, t in enumerate(tokens) if t.endswith(".sbatch")), None)
            found.append(Command("sbatch", tokens[i], tuple(tokens[i + 1 :]), text) if i else None)
    return [
        c
        for c in found
        if c is not None and (c.kind != "module" or c.target.split(".")[0] in COURSE_MODULES)
    ]


def _shell_lines(text: str) -> list[str]:
    """Lines with continuations joined, comments cut, split at ``&&``, ``||`` and ``;``."""
    text = re.sub(r"\\\\?\n", " ", text)  # "\" and, in a docstring's source, "\\"
    segments = []
    for line in text.splitlines():
        line = re.sub(r"^\s*#+", "", line)  # a comment's text may hold a command
        line = re.sub(r"\s#.*$", "", line)
        segments += re.split(r"&&|\|\||;", line)
    return segments


def markdown_snippets(text: str) -> list[str]:
    """The code blocks' lines and the inline code spans of a Markdown document."""
    snippets = []
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type in ("fence", "code_block"):
            snippets += _shell_lines(token.content)
        elif token.type == "inline":
            snippets += [c.content for c in token.children or [] if c.type == "code_inline"]
    return snippets


def commands_in(path: str) -> list[Command]:
    """Every command found in one document, in order, repeats included."""
    text = (ROOT / path).read_text(encoding="utf-8")
    snippets = markdown_snippets(text) if path.endswith(".md") else _shell_lines(text)
    return [c for s in snippets for c in parse(s)]


def _unique() -> list[tuple[Command, list[str]]]:
    where: dict[Command, list[str]] = {}
    for path in MARKDOWN + EXAMPLES:
        for command in commands_in(path):
            where.setdefault(command, []).append(path)
    return list(where.items())


UNIQUE = _unique()


def _commands_of_markdown(text: str) -> list[Command]:
    return [c for s in markdown_snippets(text) for c in parse(s)]


def _id(command: Command) -> str:
    return command.text if len(command.text) <= 80 else command.text[:77] + "..."


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT, env=env, check=False
    )


@functools.cache
def _help(kind: str, target: str, sub: str | None) -> subprocess.CompletedProcess:
    program = ["-m", target] if kind == "module" else [target]
    return _run([sys.executable, *program, *([sub] if sub else []), "--help"])


def _check_program(command: Command, args: tuple[str, ...], where: str) -> None:
    program = Command(command.kind, command.target, args, command.text)
    if program.kind == "script":
        assert (ROOT / program.target).is_file(), f"{where}: no file {program.target}"
    done = _help(program.kind, program.target, program.sub)
    shown = " ".join(filter(None, [program.target, program.sub, "--help"]))
    assert done.returncode == 0, f"{where}: {shown} exited {done.returncode}:\n{done.stderr}"
    assert "has moved to" not in done.stderr, f"{where}: an old path:\n{done.stderr}"
    missing = [
        o
        for o in program.options
        if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", done.stdout)
    ]
    assert not missing, f"{where}: {shown} does not list {missing}:\n{done.stdout}"


def _launched_by(sbatch: str) -> Command:
    text = (ROOT / sbatch).read_text(encoding="utf-8")
    lines = re.findall(r"^\s*(launch\s.*)$", text, flags=re.MULTILINE)
    assert len(lines) == 1, f"{sbatch}: expected one `launch` line, found {lines}"
    (program,) = parse(lines[0])
    return program


# ---- the finder itself ----


def test_the_finder_reads_code_blocks_spans_and_shell_comments():
    sample = (
        "Run `python -m labkit.capstone grade path/to/folder`, or `make lab LAB_DIR=slides`;\n"
        "`make` alone and `torchrun` alone are words, not commands.\n\n"
        "```bash\n"
        "make lab    # set up\n"
        'git clone x && cd y && make test PIP_EXTRA="--extra-index-url https://e.org/cpu"\n'
        "torchrun --nnodes=2 --master_addr=<server 0 address> \\\n"
        "    --master_port=29500 -m labsupport.runtime.bench -b 8 --json ar.json\n"
        ".venv/bin/python -m labkit.exercises execute slides/NN_name.ipynb\n"
        "python -m torch.distributed.run --nnodes=2 x.py\n"
        "i18n/   the zh-CN edition: the tool (python -m i18n), catalogues\n"
        "srun python examples/hello_ranks.py --timeout 60  # one task per device\n"
        "sbatch --export=ALL,LAUNCH=torchrun examples/slurm/ddp.sbatch --version torch\n"
        "```\n"
    )
    found = [(c.kind, c.target, c.sub, c.args) for c in _commands_of_markdown(sample)]
    assert found == [
        ("module", "labkit.capstone", "grade", ("grade", "path/to/folder")),
        ("make", "lab", None, ("LAB_DIR=slides",)),
        ("make", "lab", None, ()),
        ("make", "test", None, ("PIP_EXTRA=--extra-index-url https://e.org/cpu",)),
        ("module", "labsupport.runtime.bench", None, ("-b", "8", "--json", "ar.json")),
        ("module", "labkit.exercises", "execute", ("execute", "slides/NN_name.ipynb")),
        ("module", "i18n", None, ()),
        ("script", "examples/hello_ranks.py", None, ("--timeout", "60")),
        ("sbatch", "examples/slurm/ddp.sbatch", None, ("--version", "torch")),
    ]
    bench = _commands_of_markdown(sample)[4]
    assert bench.options == ["-b", "--json"]
    assert bench.text.startswith("torchrun --nnodes=2 --master_addr=<server 0 address> --master")


def test_the_finder_reads_a_docstring_and_its_backslashes():
    source = (
        '"""Run it::\n\n'
        "    torchrun --standalone --nproc_per_node=4 examples/capstone.py --strategy torch \\\\\n"
        "        --network slow-ethernet        # on the emulated network\n"
        '"""\n'
        "# capstone.py starts the same way: launch examples/capstone.py --strategy bucket.\n"
    )
    found = [(c.kind, c.target, c.options) for s in _shell_lines(source) for c in parse(s)]
    assert found == [
        ("script", "examples/capstone.py", ["--strategy", "--network"]),
        ("script", "examples/capstone.py", ["--strategy"]),
    ]


@pytest.mark.parametrize(
    "line",
    ["python -m labsupport.bench -b 8", "make lab COURSE_LANG=fr", "make no-such-target"],
)
def test_the_checks_fail_an_old_path_and_a_make_line_that_make_refuses(line):
    (command,) = parse(line)
    with pytest.raises(AssertionError):
        test_documented_command(command, ["a sample"])


def test_every_file_of_examples_has_a_minimum():
    assert sorted(p for p in MINIMUM if p.startswith("examples/")) == EXAMPLES


@pytest.mark.parametrize("path", MARKDOWN + EXAMPLES)
def test_the_finder_finds_the_commands_of(path):
    found = commands_in(path)
    assert len(found) >= MINIMUM[path], [c.text for c in found]


# ---- the commands ----


@pytest.mark.parametrize(("command", "where"), UNIQUE, ids=[_id(c) for c, _ in UNIQUE])
def test_documented_command(command: Command, where: list[str]):
    where_text = ", ".join(dict.fromkeys(where))
    if command.kind == "module":
        from labsupport._moved import new_name

        new = new_name(command.target)
        assert new is None, f"{where_text}: {command.text!r} uses an old path: {new}"
        _check_program(command, command.args, where_text)
    elif command.kind == "script":
        _check_program(command, command.args, where_text)
    elif command.kind == "make":
        if shutil.which("make") is None:
            pytest.skip("no make on this machine")
        done = _run(["make", "-n", command.target, *command.args])
        assert done.returncode == 0, f"{where_text}: make -n {command.text[5:]}:\n{done.stderr}"
    else:
        assert (ROOT / command.target).is_file(), f"{where_text}: no file {command.target}"
        done = _run(["bash", "-n", command.target])
        assert done.returncode == 0, f"{where_text}: bash -n {command.target}:\n{done.stderr}"
        if command.args:  # they go to the program its launch line starts
            program = _launched_by(command.target)
            _check_program(program, command.args, f"{where_text} ({command.target})")
