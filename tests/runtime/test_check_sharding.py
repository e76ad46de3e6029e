"""Notebook 11's grader: a right ZeRO-3 forward passes; no prefetch, gather-and-wait and
never freeing fail, each saying what it found; an unfinished one says so."""

from __future__ import annotations

import pytest

from labsupport.runtime.check.sharding import check_zero3_forward
from labsupport.sharding import ZeRO3


class Right(ZeRO3):
    def before_forward(self, k):
        self.units[k].gather(async_op=False)
        if k + 1 < len(self.units):
            self.units[k + 1].gather(async_op=True)

    def after_forward(self, k):
        if k < len(self.units) - 1:
            self.units[k].free()


class NoPrefetch(Right):
    def before_forward(self, k):
        self.units[k].gather(async_op=False)


class GatherAndWait(Right):
    def before_forward(self, k):
        self.units[k].gather(async_op=False)
        if k + 1 < len(self.units):
            self.units[k + 1].gather(async_op=True)
            self.units[k + 1].wait()  # in flight for no time at all


class NeverFrees(Right):
    def after_forward(self, k):
        pass


class Unfinished(ZeRO3):
    def before_forward(self, k):
        raise NotImplementedError


def test_a_right_forward_passes():
    result = check_zero3_forward(Right)
    assert result, result.message


@pytest.mark.parametrize(
    ("wrong", "says"),
    [
        (NoPrefetch, "after unit 0's compute ended"),
        (GatherAndWait, "waited for at once"),
        (NeverFrees, "still held their gathered parameters"),
    ],
)
def test_wrong_forwards_fail_saying_why(wrong, says):
    result = check_zero3_forward(wrong)
    assert not result
    assert says in result.message, result.message


def test_an_unfinished_exercise_is_not_implemented_yet():
    result = check_zero3_forward(Unfinished)
    assert not result
    assert "not implemented" in result.message
