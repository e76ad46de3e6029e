"""%%ranks in a real IPython shell: options, values, and the line commands."""

from __future__ import annotations

import re

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import labsupport as lab
from labsupport.runtime.magics import parse_env, parse_show


@pytest.fixture(scope="module")
def shell():
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "labsupport")
    yield ip
    ip.run_line_magic("ranks", "shutdown")


def test_plain_cell_starts_four_ranks_and_shows_values_per_rank(shell, capsys):
    shell.run_cell_magic("ranks", "", "print('hi', rank)\nrank * 10")
    out = capsys.readouterr().out
    assert "[labsupport] started 4 gloo ranks on cpu\n" in out  # one short line
    for r in range(4):
        assert f"[rank {r}] hi {r}" in out
        assert f"[rank {r}] Out: {r * 10}" in out


def test_show_prints_only_chosen_ranks(shell, capsys):
    shell.run_cell_magic("ranks", "--show 1", "print('x', rank)\nrank")
    out = capsys.readouterr().out
    assert "[rank 1] x 1" in out and "[rank 0]" not in out and "[rank 2]" not in out


def test_group_options_replace_the_cluster_and_env_reaches_ranks(shell, capsys):
    shell.run_cell_magic("ranks", "-n 2 --env COURSE_X=42", "import os\nos.environ['COURSE_X']")
    out = capsys.readouterr().out
    assert "replacing" in out and "[rank 1] Out: '42'" in out and "[rank 2]" not in out
    assert lab.current_cluster().world_size == 2
    shell.run_cell_magic("ranks", "", "world_size")  # a plain cell keeps the current cluster
    assert "[rank 1] Out: 2" in capsys.readouterr().out


def test_a_figure_made_on_a_rank_is_displayed(shell, capsys):
    shell.run_cell_magic(
        "ranks", "--show 0", "import matplotlib.pyplot as plt\nif rank == 0:\n    plt.plot([1, 2])"
    )
    assert "Image" in capsys.readouterr().out  # IPython's plain-text stand-in for the PNG


def test_line_commands(shell, capsys):
    shell.run_line_magic("ranks", "status")
    assert "Cluster(world_size=2" in capsys.readouterr().out
    shell.run_line_magic("ranks", "restart")
    assert "restarted" in capsys.readouterr().out
    shell.run_line_magic("ranks", "shutdown")
    assert lab.current_cluster() is None
    shell.run_line_magic("ranks", "status")
    assert "no cluster running" in capsys.readouterr().out
    with pytest.raises(ValueError, match="status, restart or shutdown"):
        shell.run_line_magic("ranks", "reboot")


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="rank numbers"):
        parse_show("zero", 4)
    with pytest.raises(ValueError, match="no rank 7"):
        parse_show("0,7", 4)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_env(["NOEQUALS"])
    assert parse_env(["A=1", "B=x=y"]) == {"A": "1", "B": "x=y"}
    assert parse_show("all", 4) is None


def test_options_are_documented_and_checked_by_ipython(shell):
    doc = shell.find_cell_magic("ranks").__doc__
    assert "--timeout TIMEOUT" in doc and "--show SHOW" in doc  # what %%ranks? shows
    with pytest.raises(UsageError, match="invalid int value: 'notanumber'"):
        shell.run_cell_magic("ranks", "-n notanumber", "1")


def test_unknown_option_names_the_usage(shell):
    with pytest.raises(UsageError, match="unrecognized arguments: --frobnicate"):
        shell.run_cell_magic("ranks", "--frobnicate", "1")


def test_a_failing_cell_shows_the_message_without_launcher_frames(shell, capsys):
    result = shell.run_cell(
        "%%ranks -n 2\nif rank == 1:\n    raise KeyError('nope')\ndist.barrier()"
    )
    assert isinstance(result.error_in_exec, lab.RankError)  # the cell still fails
    shown = capsys.readouterr()
    text = shown.out + shown.err
    assert "rank 1 raised KeyError" in text
    assert re.search(r'"<%%ranks cell \d+>", line 2', text)  # the learner's own line
    # the restart note comes after the error it refers to, inside its message
    assert text.index("raise KeyError") < text.index("the ranks were restarted")
    assert "[labsupport] cluster restarted" not in text
    assert "_dispatch" not in text and "cluster.py" not in text


def test_a_failing_cell_leaves_its_error_in_sys_last_value(shell):
    """Like any IPython error, a LabError stays in sys.last_value (notebook 02 reads it)."""
    import sys

    result = shell.run_cell("%%ranks -n 2\nif rank == 0:\n    raise ValueError('kept')")
    assert isinstance(result.error_in_exec, lab.RankError)
    assert sys.last_value is result.error_in_exec
