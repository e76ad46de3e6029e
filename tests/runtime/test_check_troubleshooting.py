"""Notebook 09's graders: each passes a fixed program, and fails the still-broken one
(a hang, a crash, a wrong value) with a message that says what is still wrong."""

import pytest
import torch
import torch.distributed as dist

cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(__import__(__name__))  # workers cannot import tests/

from labsupport.runtime.check import troubleshooting as T  # noqa: E402
from labsupport.runtime.launch import Cluster  # noqa: E402

SHORT = 4.0  # seconds a still-broken (hanging) version may take


@pytest.fixture(scope="module")
def cluster():
    with Cluster(world_size=4, backend="gloo", timeout=30) as running:
        yield running


def stub(values):
    raise NotImplementedError("Exercise 09.x")


# ----------------------------------------------------------- 09.1 global mean


def mean_fixed(values):
    both = torch.stack([values.sum(), torch.tensor(float(values.numel()))])
    dist.all_reduce(both)
    return both[0] / both[1]


def mean_returns_early(values):
    if values.numel() == 0:
        return torch.tensor(0.0)  # skips the collectives the others wait in
    total, count = values.sum(), torch.tensor(float(values.numel()))
    dist.all_reduce(total)
    dist.all_reduce(count)
    return total / count


def mean_of_means(values):
    local = values.mean() if values.numel() else torch.tensor(0.0)
    dist.all_reduce(local)
    return local / dist.get_world_size()  # not the mean over all values


def test_global_mean_passes_a_fix(cluster):
    assert T.check_global_mean(mean_fixed, cluster=cluster)


def test_global_mean_fails_the_early_return_with_where_ranks_wait(cluster, capsys):
    assert not T.check_global_mean(mean_returns_early, cluster=cluster, timeout=SHORT)
    out = capsys.readouterr().out
    assert "did not finish" in out and "all_reduce" in out
    assert "Every rank must call every collective" in out


def test_global_mean_fails_a_wrong_value_naming_the_ranks(cluster, capsys):
    assert not T.check_global_mean(mean_of_means, cluster=cluster)
    out = capsys.readouterr().out
    assert "wrong on all 4 ranks." in out


def test_global_mean_stub_is_not_implemented(cluster, capsys):
    result = T.check_global_mean(stub, cluster=cluster)
    assert not result and not result.implemented


# ----------------------------------------------------------- 09.2 variable lengths


def gather_fixed(values):
    size = dist.get_world_size()
    length = torch.tensor([values.numel()])
    lengths = [torch.empty_like(length) for _ in range(size)]
    dist.all_gather(lengths, length)
    padded = torch.zeros(int(max(lengths)))
    padded[: values.numel()] = values
    pieces = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(pieces, padded)
    return torch.cat([p[: int(n)] for p, n in zip(pieces, lengths, strict=True)])


def gather_unequal(values):
    pieces = [torch.empty_like(values) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, values)  # shapes differ between ranks
    return torch.cat(pieces)


def gather_padded_not_trimmed(values):
    padded = torch.zeros(dist.get_world_size())
    padded[: values.numel()] = values
    pieces = [torch.empty_like(padded) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, padded)
    return torch.cat(pieces)  # the padding is still in


def test_gather_variable_passes_a_fix(cluster):
    assert T.check_gather_variable(gather_fixed, cluster=cluster)


def test_gather_variable_fails_unequal_shapes_with_the_padding_hint(cluster, capsys):
    assert not T.check_gather_variable(gather_unequal, cluster=cluster, timeout=SHORT)
    out = capsys.readouterr().out
    assert "FAIL" in out and "gather the lengths first" in out


def test_gather_variable_fails_untrimmed_padding(cluster, capsys):
    assert not T.check_gather_variable(gather_padded_not_trimmed, cluster=cluster)
    assert "shape (10,)" in capsys.readouterr().out  # 1+2+3+4 values expected, 16 returned


# ----------------------------------------------------------- 09.3 pipeline


def pipeline_fixed(x):
    rank, size = dist.get_rank(), dist.get_world_size()
    if rank > 0:
        dist.recv(x, src=rank - 1)
    x = x * 2 + rank
    dist.send(x, dst=(rank + 1) % size)
    if rank == 0:
        dist.recv(x, src=size - 1)
    dist.broadcast(x, src=0)
    return x


def pipeline_never_received(x):
    rank, size = dist.get_rank(), dist.get_world_size()
    if rank > 0:
        dist.recv(x, src=rank - 1)
    x = x * 2 + rank
    dist.send(x, dst=(rank + 1) % size)  # the last stage's send to rank 0 is never matched
    dist.broadcast(x, src=0)
    return x


def test_pipeline_passes_a_fix(cluster):
    assert T.check_pipeline(pipeline_fixed, cluster=cluster)


def test_pipeline_fails_the_unmatched_send_showing_the_blocked_send(cluster, capsys):
    assert not T.check_pipeline(pipeline_never_received, cluster=cluster, timeout=SHORT)
    out = capsys.readouterr().out
    assert "rank 3:" in out and "waiting in send" in out
    assert "matching recv" in out
