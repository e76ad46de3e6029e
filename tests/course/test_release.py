"""Releases an instructor can pin: pyproject's version has a CHANGELOG entry, and doctor() says
which version a laptop runs."""

from __future__ import annotations

import re
from pathlib import Path

from labsupport.runtime.backend import course_version, doctor_report

ROOT = Path(__file__).resolve().parents[2]


def _version() -> str:
    match = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert match, "pyproject.toml has no version"
    return match.group(1)


def test_the_changelog_has_the_version_and_lists_versions_newest_first():
    versions = re.findall(r"^## (\d+)\.(\d+)\.(\d+)\b", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert versions, "CHANGELOG.md has no '## X.Y.Z' sections"
    assert ".".join(versions[0]) == _version(), "the newest CHANGELOG section is not pyproject's"
    numbers = [tuple(int(n) for n in v) for v in versions]
    assert numbers == sorted(set(numbers), reverse=True)


def test_doctor_reports_the_installed_version():
    assert course_version() == _version(), "stale install: run `make .venv/.stamp-test`"
    assert doctor_report().splitlines()[1].split()[:2] == ["labsupport", _version()]
