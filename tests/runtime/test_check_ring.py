"""The ring all-reduce grader passes a right answer and fails the classic mistakes kindly."""

import pytest
import torch
import torch.distributed as dist

cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(__import__(__name__))  # workers cannot import tests/

from labsupport.runtime.check.ring import check_ring_allreduce  # noqa: E402


def _exchange(send, recv, right, left):
    ops = [dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def ring(tensor, gather_adds=False):
    rank, p = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % p, (rank - 1) % p
    chunks = tensor.view(-1).tensor_split(p)
    for s in range(p - 1):
        incoming = torch.empty_like(chunks[(rank - s - 2) % p])
        _exchange(chunks[(rank - s - 1) % p], incoming, right, left)
        chunks[(rank - s - 2) % p].add_(incoming)
    for s in range(p - 1):
        if gather_adds:
            incoming = torch.empty_like(chunks[(rank - s - 1) % p])
            _exchange(chunks[(rank - s) % p], incoming, right, left)
            chunks[(rank - s - 1) % p].add_(incoming)
        else:
            _exchange(chunks[(rank - s) % p], chunks[(rank - s - 1) % p], right, left)
    return tensor


def ring_gather_adds(tensor):
    return ring(tensor, gather_adds=True)


def ring_receives_first(tensor):
    rank, p = dist.get_rank(), dist.get_world_size()
    chunks = tensor.tensor_split(p)
    for s in range(p - 1):
        incoming = torch.empty_like(chunks[(rank - s - 2) % p])
        dist.recv(incoming, (rank - 1) % p)  # everyone waits here: nobody sends
        dist.send(chunks[(rank - s - 1) % p], (rank + 1) % p)
        chunks[(rank - s - 2) % p].add_(incoming)
    return tensor


def whole_buffer_added(tensor):
    rank, p = dist.get_rank(), dist.get_world_size()
    for _ in range(p - 1):
        incoming = torch.empty_like(tensor)
        _exchange(tensor.clone(), incoming, (rank + 1) % p, (rank - 1) % p)
        tensor += incoming
    return tensor


def whole_buffer_passed_on(tensor):
    """The old tutorial's ring: right sums, but p-1 whole buffers sent per rank."""
    rank, p = dist.get_rank(), dist.get_world_size()
    passing, total = tensor.clone(), tensor.clone()
    for _ in range(p - 1):
        incoming = torch.empty_like(tensor)
        _exchange(passing, incoming, (rank + 1) % p, (rank - 1) % p)
        total += incoming
        passing = incoming
    tensor.copy_(total)
    return tensor


def ring_returning_a_new_tensor(tensor):
    """A right ring, but on a copy: the argument is left as it was."""
    return ring(tensor.clone())


def ring_losing_a_contribution(tensor):
    """Phase 1 overwrites instead of adding: contributions are lost, sums too small."""
    rank, p = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % p, (rank - 1) % p
    chunks = tensor.view(-1).tensor_split(p)
    for s in range(p - 1):
        _exchange(chunks[(rank - s - 1) % p], chunks[(rank - s - 2) % p], right, left)
    for s in range(p - 1):
        _exchange(chunks[(rank - s) % p], chunks[(rank - s - 1) % p], right, left)
    return tensor


def with_all_reduce(tensor):
    dist.all_reduce(tensor)
    return tensor


def ring_with_chunk(tensor):
    """Cuts with Tensor.chunk, which gives fewer than p chunks for some lengths."""
    rank, p = dist.get_rank(), dist.get_world_size()
    chunks = tensor.chunk(p)
    for s in range(p - 1):
        incoming = torch.empty_like(chunks[(rank - s - 2) % p])
        _exchange(chunks[(rank - s - 1) % p], incoming, (rank + 1) % p, (rank - 1) % p)
        chunks[(rank - s - 2) % p].add_(incoming)
    for s in range(p - 1):
        _exchange(
            chunks[(rank - s) % p], chunks[(rank - s - 1) % p], (rank + 1) % p, (rank - 1) % p
        )
    return tensor


def stub(tensor):
    raise NotImplementedError("Exercise: ring all-reduce")


@pytest.fixture(scope="module")
def cluster():
    lab = pytest.importorskip("labsupport")
    with lab.Cluster(4, backend="gloo", timeout=60) as c:
        yield c


def test_a_right_ring_passes_on_several_world_sizes(cluster, capsys):
    import labsupport as lab

    result = check_ring_allreduce(ring, cluster, world_sizes=(1, 4))
    assert result.passed, result.message
    assert "1, 4 ranks" in capsys.readouterr().out
    assert lab.current_cluster() is cluster  # the temporary 1-rank group did not replace it


def _count_then_send_plainly():
    from labsupport.runtime.check.ring import counting_sends

    rank, p = dist.get_rank(), dist.get_world_size()
    x = torch.ones(5)
    for _ in range(2):
        with counting_sends() as sent:
            _exchange(x, torch.empty(5), (rank + 1) % p, (rank - 1) % p)
    _exchange(x[:2], torch.empty(2), (rank + 1) % p, (rank - 1) % p)  # not counted, still works
    return sent[0]


def test_counting_sends_counts_and_then_leaves_send_as_it_was(cluster):
    assert cluster.run(_count_then_send_plainly) == [5, 5, 5, 5]


@pytest.mark.parametrize(
    "fn, words",
    [
        (ring_gather_adds, ["wrong sums with 4 ranks", "float32 tensor", "above 4", "must copy"]),
        (whole_buffer_added, ["with 4 ranks", "above 4", "counted a contribution twice"]),
        (ring_losing_a_contribution, ["below 4", "lost a contribution"]),
        (ring_returning_a_new_tensor, ["new tensor", "unchanged", "in-place"]),
        (whole_buffer_passed_on, ["right sums", "sent 9 elements", "whole buffer"]),
        (with_all_reduce, ["sent nothing", "point-to-point"]),
        (ring_with_chunk, ["IndexError", "4 ranks", "tensor_split(p) always"]),
    ],
)
def test_mistakes_fail_with_a_message_that_says_where(cluster, fn, words):
    result = check_ring_allreduce(fn, cluster, world_sizes=(4,))
    assert not result.passed
    for w in words:
        assert w in result.message, result.message


def test_a_ring_that_receives_first_hangs_and_is_reported(cluster):
    result = check_ring_allreduce(ring_receives_first, cluster, world_sizes=(4,), timeout=4)
    assert not result.passed
    assert "did not finish within 4 s" in result.message and "recv" in result.message
    lines = result.message.splitlines()
    assert "Every rank is blocked in a receive" in lines[1]  # the diagnosis comes first
    for rank in range(4):  # then one line per rank, each naming the learner's own line
        assert any(line.startswith(f"   rank {rank}: line ") for line in lines), lines
    assert cluster.run(lambda: 1) == [1, 1, 1, 1]  # the cluster is usable again


def test_an_unimplemented_stub_is_not_implemented_yet(cluster):
    result = check_ring_allreduce(stub, cluster, world_sizes=(4,))
    assert not result.passed and not result.implemented
    assert "not implemented yet" in result.message
