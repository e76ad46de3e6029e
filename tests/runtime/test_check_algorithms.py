"""Notebook 04's graders: recursive doubling on point-to-point, and the crossover size."""

from __future__ import annotations

import math

import pytest

import labsupport as lab
from labsupport.netem import Link, Network
from labsupport.runtime.check.algorithms import (
    check_crossover,
    check_recursive_doubling,
    crossover_reference,
    model_bytes,
)


def right_rd(tensor):
    import torch
    import torch.distributed as dist

    rank, p = dist.get_rank(), dist.get_world_size()
    incoming, mask = torch.empty_like(tensor), 1
    while mask < p:
        ops = [
            dist.P2POp(dist.isend, tensor, rank ^ mask),
            dist.P2POp(dist.irecv, incoming, rank ^ mask),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        tensor.add_(incoming)
        mask *= 2
    return tensor


def adds_in_place_while_sending(tensor):
    """Adds into the buffer it is still sending from: wrong sums on some ranks."""
    import torch.distributed as dist

    rank, p = dist.get_rank(), dist.get_world_size()
    mask = 1
    while mask < p:
        incoming = tensor.clone()
        dist.send(tensor, rank ^ mask) if rank & mask else dist.recv(incoming, rank ^ mask)
        if not rank & mask:
            tensor.add_(incoming)
        mask *= 2
    return tensor


def uses_the_collective(tensor):
    import torch.distributed as dist

    dist.all_reduce(tensor)
    return tensor


def sends_twice(tensor):
    """Right sums, but every buffer crosses the wire twice."""
    import torch.distributed as dist

    right_rd(tensor)
    rank = dist.get_rank()
    spare = tensor.clone()
    ops = [dist.P2POp(dist.isend, tensor, rank ^ 1), dist.P2POp(dist.irecv, spare, rank ^ 1)]
    for op in dist.batch_isend_irecv(ops):
        op.wait()
    for op in dist.batch_isend_irecv(ops):
        op.wait()
    return tensor


def two_steps_hard_coded(tensor):
    """Right on 4 ranks only: exchanges with rank ^ 1 and rank ^ 2, whatever the world size."""
    import torch
    import torch.distributed as dist

    rank, incoming = dist.get_rank(), torch.empty_like(tensor)
    for mask in (1, 2):
        ops = [
            dist.P2POp(dist.isend, tensor, rank ^ mask),
            dist.P2POp(dist.irecv, incoming, rank ^ mask),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        tensor.add_(incoming)
    return tensor


def stub(tensor):
    raise NotImplementedError("Exercise 04.1")


@pytest.fixture(scope="module")
def emulated():
    net = Network(intra=Link(0.0, 1e12))
    with lab.Cluster(4, network=net, timeout=60) as cluster:
        yield cluster


def test_a_right_recursive_doubling_passes_on_2_4_and_8_ranks(emulated, capsys):
    assert check_recursive_doubling(right_rd, emulated)
    out = capsys.readouterr().out
    assert "on 2, 4, 8 ranks" in out and "lg p whole buffers" in out and "fold" in out


def test_a_hard_coded_two_step_exchange_fails(emulated, capsys):
    """It is right on the 4 emulated ranks; 2 and 8 ranks show it is not recursive doubling."""
    assert check_recursive_doubling(two_steps_hard_coded, emulated, world_sizes=(4,))
    capsys.readouterr()
    result = check_recursive_doubling(two_steps_hard_coded, emulated)
    assert not result and result.implemented
    out = capsys.readouterr().out
    assert "with 8 ranks" in out  # wrong sums on 8 ranks, found before trying 2


def test_world_sizes_must_be_powers_of_two():
    with pytest.raises(ValueError, match="powers of two"):
        check_recursive_doubling(right_rd, world_sizes=(6,))


@pytest.mark.parametrize(
    "fn, words",
    [
        (adds_in_place_while_sending, "rank"),
        (uses_the_collective, "sent nothing"),
        (sends_twice, "whole buffers"),
        (stub, "not implemented yet"),
    ],
)
def test_wrong_recursive_doublings_fail_with_a_reason(emulated, capsys, fn, words):
    result = check_recursive_doubling(fn, emulated)
    assert not result
    assert words in capsys.readouterr().out


def test_bytes_are_counted_on_plain_gloo_too(capsys):
    with lab.Cluster(4, backend="gloo", timeout=60) as cluster:
        assert check_recursive_doubling(right_rd, cluster, world_sizes=(4,))
        assert not check_recursive_doubling(sends_twice, cluster, world_sizes=(4,))


def test_model_bytes_is_lg_p_whole_buffers():
    assert model_bytes(4, 1000) == 2000
    assert model_bytes(8, 64) == 3 * 64


def test_crossover_grader():
    def right(p, alpha, beta):
        lg = math.log2(p)
        d = (lg - 2 * (p - 1) / p) * beta
        return lg * alpha / d if d > 0 else math.inf

    assert crossover_reference(4, 1e-3, 1 / 50e6) == pytest.approx(4 * 1e-3 * 50e6)
    assert crossover_reference(2, 1e-3, 1e-9) == math.inf
    assert check_crossover(right)
    assert not check_crossover(lambda p, a, b: 4 * a / b)  # right for p = 4 only
    assert not check_crossover(lambda p, a, b: (_ for _ in ()).throw(NotImplementedError()))
