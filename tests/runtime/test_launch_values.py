"""cluster.run's values: a list, which a notebook does not show when every rank returned None."""

from __future__ import annotations

from IPython.core.formatters import DisplayFormatter

from labsupport.runtime.launch.values import RankValues


def test_a_list_of_none_shows_nothing_and_other_values_show_as_a_list():
    shown = DisplayFormatter().format
    assert shown(RankValues([None] * 4)) == ({}, {})
    assert shown(RankValues([0, 1, 4, 9]))[0] == {"text/plain": "[0, 1, 4, 9]"}
    assert shown(RankValues([None, 1]))[0] == {"text/plain": "[None, 1]"}
    assert RankValues([None] * 4) == [None] * 4 and isinstance(RankValues(), list)


def test_error_messages_wrap_at_spaces_to_fit_a_notebook():
    from labsupport.runtime.launch.errors import CollectiveTimeout, RankError, RemoteError

    long = "Rank 1 successfully reached monitoredBarrier, but received errors " * 3
    err = RankError({1: RemoteError(1, "RuntimeError", long, f"RuntimeError: {long}")})
    lines = str(err).splitlines()
    assert max(len(line) for line in lines) <= 100, lines
    assert "monitoredBarrier," in lines[0].split()  # words kept whole
    assert str(CollectiveTimeout(3, {0: "stack"})).startswith("rank 0 did not finish within 3 s")
    assert str(CollectiveTimeout(3, {0: "a", 2: "b"})).startswith("ranks 0, 2 did not finish")
