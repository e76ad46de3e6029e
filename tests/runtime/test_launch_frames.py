"""Stack frames are read in one place (labsupport.runtime.launch.frames) and described there."""

from __future__ import annotations

from labsupport.runtime import diagnose
from labsupport.runtime.check.ring import _user_line
from labsupport.runtime.launch import CollectiveTimeout, frames
from labsupport.runtime.viz.waitfor import blocked_calls

STACK = """Stack (most recent call last):
  File "<rank-cell-3>", line 8, in exchange
    dist.recv(t, src=(rank - 1) % world_size)
  File "torch/distributed/distributed_c10d.py", line 2799, in recv
    pg.recv([tensor], src, tag).wait()"""


def test_a_stack_reads_into_frames_and_formats_back_unchanged():
    parsed = frames.parse_frames(STACK)
    assert [(f.filename, f.lineno, f.name) for f in parsed] == [
        ("<rank-cell-3>", 8, "exchange"),
        ("torch/distributed/distributed_c10d.py", 2799, "recv"),
    ]
    assert parsed[0].line == "dist.recv(t, src=(rank - 1) % world_size)"
    assert frames.format_frames(parsed) == STACK


def test_every_reader_finds_the_same_line_of_your_code():
    mine = "dist.recv(t, src=(rank - 1) % world_size)"
    assert frames.where(STACK) == f"line 8 in exchange: `{mine}`, waiting in recv"
    assert diagnose.where(STACK) == f"line 8 `{mine}`, waiting in recv"
    assert _user_line(STACK) == (f"line 8 in exchange: {mine} (waiting in recv)", "recv")
    assert blocked_calls({1: STACK}, 4)[1].peer == 0
    assert frames.where("no frames here") == "(no stack)"


def test_errors_carry_their_stacks_as_frames():
    err = CollectiveTimeout(1.0, {2: STACK})
    assert [f.name for f in err.frames[2]] == ["exchange", "recv"]
