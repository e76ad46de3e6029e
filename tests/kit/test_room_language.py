"""The folder grader speaks each notebook's language: its metadata, not the machine's."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from labkit.room import grade_learner, notebook_language

from labsupport.runtime.check import PASS, CheckResult
from labsupport.runtime.language import ENV, _


def _language_on_ranks(answer, cluster, timeout) -> CheckResult:
    """A grader: what the learner's ranks say their language is, and a message in ours."""
    values = cluster.run(answer)
    return CheckResult(True, f"{PASS} " + _("Your function") + f" {list(values)}")


def _notebook(path: Path, language: str | None) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import os"),
        nbformat.v4.new_code_cell(
            "# Exercise 1.1: x\ndef f():\n    import os\n\n"
            "    return os.environ.get('LABSUPPORT_LANG')"
        ),
    ]
    if language:
        nb.metadata["labsupport"] = {"language": language}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_the_notebooks_metadata_names_its_language():
    nb = nbformat.v4.new_notebook()
    assert notebook_language(nb) == "en"
    nb.metadata["labsupport"] = {"language": "zh_CN"}
    assert notebook_language(nb) == "zh_CN"
    nb.metadata["labsupport"] = {"language": "klingon"}
    assert notebook_language(nb) == "en"


@pytest.mark.timeout(600)
def test_a_zh_notebook_is_graded_in_chinese_and_its_ranks_know_it(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("LANGUAGE", "zh_CN")  # the machine's language changes nothing
    exercises = {"1.1": ("f", _language_on_ranks)}
    zh = grade_learner(_notebook(tmp_path / "zh.ipynb", "zh_CN"), exercises, ranks=2, limit=240)
    assert zh.stopped is None, zh.log
    assert zh.results["1.1"].message == "PASS 你的函数 ['zh_CN', 'zh_CN']"
    en = grade_learner(_notebook(tmp_path / "en.ipynb", None), exercises, ranks=2, limit=240)
    assert en.results["1.1"].message == "PASS Your function ['en', 'en']"
    assert ENV not in os.environ  # the grading process is back as it was
