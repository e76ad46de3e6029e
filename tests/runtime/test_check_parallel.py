"""Notebook 12's graders: the row-parallel all-reduce and the layout pass right answers only."""

import pytest
import torch
import torch.distributed as dist

import labsupport as lab
from labsupport import parallel, topology

cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(__import__(__name__))  # workers cannot import tests/

from labsupport.runtime.check.parallel import (  # noqa: E402
    check_layout,
    check_row_parallel,
    communication,
)


class RightG(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class NoAllReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


class AllReduceBothWays(RightG):
    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class Stub(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError


@pytest.fixture(scope="module")
def cluster():
    with lab.Cluster(world_size=4, timeout=60) as c:
        yield c


def test_right_g_passes(cluster):
    assert check_row_parallel(RightG, cluster=cluster)


def test_g_without_all_reduce_fails_saying_partial_sums(cluster):
    result = check_row_parallel(NoAllReduce, cluster=cluster)
    assert not result and "partial sum" in result.message


def test_g_that_all_reduces_backward_too_fails_saying_so(cluster):
    result = check_row_parallel(AllReduceBothWays, cluster=cluster)
    assert not result and "4x too large" in result.message


def test_stub_is_todo(cluster):
    result = check_row_parallel(Stub, cluster=cluster)
    assert not result and result.status == "TODO"


W = parallel.Workload("GPT-3 6.7B", 32, 4096, 2048, 1024)
A2 = parallel.Cluster("Atlas 800T A2", topology.ascend_a2)


def test_best_layout_with_right_prediction_passes():
    (_, best), *_ = parallel.best(W, 128, A2)
    assert check_layout(lambda: best, lambda lay: communication(W, lay, A2), W, 128, A2)


def test_tp_inside_by_rule_of_thumb_fails_here():
    lay = parallel.Layout(16, 8, 1)
    result = check_layout(lambda: lay, lambda lay: communication(W, lay, A2), W, 128, A2)
    assert not result and "the best layout takes" in result.message


def test_wrong_prediction_fails():
    (_, best), *_ = parallel.best(W, 128, A2)
    result = check_layout(lambda: best, lambda lay: 2 * communication(W, lay, A2), W, 128, A2)
    assert not result and "predicted communication" in result.message


def test_layout_that_does_not_fit_fails():
    lay = parallel.Layout(128, 1, 1)  # 16 x 6.4e9 bytes on every NPU
    result = check_layout(lambda: lay, lambda lay: 1.0, W, 128, A2)
    assert not result and "does not fit" in result.message


def test_unfinished_layout_is_todo():
    def choose():
        raise NotImplementedError

    result = check_layout(choose, lambda lay: 1.0, W, 128, A2)
    assert result.status == "TODO"
