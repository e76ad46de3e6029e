"""Graders: the generic ones (runtime.check) and notebook 01-02's (runtime.check.primitives).

Every grader must pass a right answer, fail typical wrong ones with a message that
names the rank and what differed, and never pass an unimplemented stub.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from labsupport.runtime import check
from labsupport.runtime.check import primitives as P
from labsupport.runtime.launch import Cluster


@pytest.fixture(scope="module")
def cluster():
    with Cluster(world_size=4, backend="gloo", timeout=30) as running:
        yield running


# ----------------------------------------------------------- comparison


def test_equal_structures_have_no_difference():
    value = [torch.tensor([1.0, 2.0]), (3, {"a": torch.tensor([4])})]
    assert (
        check.describe_difference(value, [torch.tensor([1.0, 2.0]), (3, {"a": torch.tensor([4])})])
        is None
    )


@pytest.mark.parametrize(
    "expected, got, words",
    [
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 5.0]), ["index 1", "2.0", "5.0"]),
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0]), ["shape (2,)", "shape (1,)"]),
        (torch.tensor([1, 2]), torch.tensor([1.0, 2.0]), ["dtype torch.int64", "torch.float32"]),
        ([torch.zeros(1)] * 3, [torch.zeros(1)] * 2, ["3 items", "got 2"]),
        ([torch.zeros(1), torch.ones(1)], [torch.zeros(1)] * 2, ["item 1"]),
        (torch.zeros(2), None, ["a tensor", "NoneType"]),
    ],
)
def test_a_difference_says_where_and_what(expected, got, words):
    message = check.describe_difference(expected, got)
    assert message is not None
    for word in words:
        assert word in message


def test_floats_are_compared_with_tolerance_unless_exact():
    a, b = torch.tensor([1.0]), torch.tensor([1.0 + 1e-7])
    assert check.describe_difference(a, b) is None
    assert check.describe_difference(a, b, exact=True) is not None


def test_results_print_their_message_and_are_truthy_only_when_passed(capsys):
    passed = check.check_function(lambda n: n * 2, lambda n: 2 * n, [(1,), (2,)], name="double")
    failed = check.check_function(lambda n: n + 2, lambda n: 2 * n, [(1,), (2,)], name="double")
    stub = check.check_function(_stub, lambda n: 2 * n, [(1,)], name="double")
    out = capsys.readouterr().out
    assert passed and not failed and not stub and not stub.implemented
    assert "double: right on all 2 cases" in out
    assert "double(1,): expected 2, got 3" in out
    assert "not implemented yet" in out


def test_a_prediction_can_be_a_plain_list(capsys):
    actual = [torch.tensor([1, 2]), torch.tensor([3, 4])]
    assert check.check_values([[1, 2], [3, 4]], actual)
    assert not check.check_values([[1, 2], [3, 5]], actual)
    assert not check.check_values([[1, 2]], actual)
    assert "rank 1: the ranks hold" in capsys.readouterr().out


_STATUS_WORDS = {"PASS", "FAIL", "TODO"}


def _shown_without_emoji(message: str) -> None:
    """The message starts with a status word and reads without an emoji font."""
    assert message.split(" ", 1)[0] in _STATUS_WORDS, message
    assert all(ord(ch) < 0x2600 for ch in message), f"a symbol needs an emoji font: {message!r}"


def test_every_status_is_a_word_with_a_coloured_html_form(capsys):
    passed = check.check_function(lambda n: 2 * n, lambda n: 2 * n, [(1,)], name="double")
    failed = check.check_function(lambda n: n + 2, lambda n: 2 * n, [(1,)], name="double")
    todo = check.check_function(_stub, lambda n: 2 * n, [(1,)], name="double")
    out = capsys.readouterr().out
    for result, word in ((passed, "PASS"), (failed, "FAIL"), (todo, "TODO")):
        assert result.status == word and result.message.startswith(word + " ")
        assert word + " double" in out
        _shown_without_emoji(result.message)
        html = check.as_html(result.message)
        assert f"{word}</span>" in html and "background:#" in html
    assert "&lt;b&gt;" in check.as_html("FAIL <b>x</b>")  # the message is escaped


def test_in_a_kernel_a_result_is_shown_as_html_with_the_plain_text_beside_it(monkeypatch):
    shown = []

    class FakeKernelShell:
        kernel = object()

    monkeypatch.setattr("IPython.get_ipython", lambda: FakeKernelShell())
    monkeypatch.setattr("IPython.display.display", lambda obj, raw: shown.append(obj))
    check.report(False, "FAIL x: wrong on rank 1 of 2.\n  rank 1: expected 1, got 2")
    [bundle] = shown
    assert bundle["text/plain"].startswith("FAIL x: wrong on rank 1 of 2.\n  rank 1:")
    assert "FAIL</span>" in bundle["text/html"] and "rank 1: expected 1" in bundle["text/html"]


def test_wrong_predictions_are_listed_one_line_per_rank(capsys):
    actual = [torch.tensor([1]), torch.tensor([2]), torch.tensor([3])]
    result = check.check_values([[1], [0], [0]], actual, name="P")
    lines = result.message.splitlines()
    assert lines[0] == "FAIL P: wrong on rank 1, 2 of 3."
    assert lines[1].startswith("  rank 1: the ranks hold") and lines[2].startswith("  rank 2:")


def _stub(*args):
    raise NotImplementedError("Exercise 99.1: a stub")


# --------------------------------------------------------- check_on_ranks


def _make_rows(rank, world_size):
    return (torch.arange(3.0) + 10 * rank,)


def _sum_reference(t):
    dist.all_reduce(t)
    return t


def _sum_wrong_on_rank_2(t):
    dist.all_reduce(t)
    if dist.get_rank() == 2:
        t[1] = -1
    return t


def _raises_on_rank_1(t):
    if dist.get_rank() == 1:
        raise ValueError("bad input")
    return t


def _recv_first(t):
    buf = torch.empty_like(t)
    dist.recv(buf, (dist.get_rank() - 1) % dist.get_world_size())
    return buf


def test_check_on_ranks_names_the_rank_that_differs(cluster, capsys):
    assert check.check_on_ranks(_sum_reference, _sum_reference, _make_rows, cluster=cluster)
    result = check.check_on_ranks(_sum_wrong_on_rank_2, _sum_reference, _make_rows, cluster=cluster)
    assert not result
    assert "rank 2: expected tensor([60., 64., 68.]), got tensor([60., -1., 68.])" in result.message


def test_check_on_ranks_reports_a_stub_an_exception_and_a_deadlock(cluster, capsys):
    stub = check.check_on_ranks(_stub, _sum_reference, _make_rows, cluster=cluster)
    assert not stub and "not implemented yet" in stub.message
    error = check.check_on_ranks(_raises_on_rank_1, _sum_reference, _make_rows, cluster=cluster)
    assert not error and "raised ValueError on rank 1: bad input" in error.message
    hang = check.check_on_ranks(_recv_first, _sum_reference, _make_rows, cluster=cluster, timeout=3)
    assert not hang and "did not finish within 3 s" in hang.message
    assert "in _recv_first" in hang.message and "waiting in recv" in hang.message
    assert [line.split(":")[0] for line in hang.message.splitlines()[1:]] == [
        f"  rank {r}" for r in range(4)
    ]  # one line per rank
    for result in (stub, error, hang):
        _shown_without_emoji(result.message)
    assert check.check_on_ranks(_sum_reference, _sum_reference, _make_rows, cluster=cluster)


# ------------------------------------------------------------- notebook 01


def _sequence():
    x = torch.tensor([float(dist.get_rank()), 1.0])
    dist.all_reduce(x)
    return x


def test_prediction(cluster):
    assert P.check_prediction(lambda p: [[6.0, 4.0]] * p, _sequence, cluster=cluster)
    assert not P.check_prediction(
        lambda p: [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0], [3.0, 1.0]], _sequence, cluster=cluster
    )
    assert not P.check_prediction(lambda p: [[6.0, 4.0]], _sequence, cluster=cluster)
    assert not P.check_prediction(_stub, _sequence, cluster=cluster)


def _all_gather_right(tensor):
    out = []
    for src in range(dist.get_world_size()):
        buf = tensor.clone() if src == dist.get_rank() else torch.empty_like(tensor)
        dist.broadcast(buf, src=src)
        out.append(buf)
    return out


def _all_gather_no_communication(tensor):
    return [tensor.clone() for _ in range(dist.get_world_size())]


def _all_gather_one_shared_buffer(tensor):
    buf, out = torch.empty_like(tensor), []
    for src in range(dist.get_world_size()):
        if src == dist.get_rank():
            buf.copy_(tensor)
        dist.broadcast(buf, src=src)
        out.append(buf)  # every entry is the same tensor: all show the last rank's data
    return out


def test_all_gather_with_broadcast(cluster):
    assert P.check_all_gather_with_broadcast(_all_gather_right, cluster=cluster)
    wrong = P.check_all_gather_with_broadcast(_all_gather_no_communication, cluster=cluster)
    assert not wrong and "rank 0: item 1" in wrong.message
    assert not P.check_all_gather_with_broadcast(_all_gather_one_shared_buffer, cluster=cluster)
    assert not P.check_all_gather_with_broadcast(_stub, cluster=cluster)


def _reduce_scatter_right(tensor):
    dist.all_reduce(tensor)
    return tensor.chunk(dist.get_world_size())[dist.get_rank()]


def _reduce_scatter_without_reducing(tensor):
    return tensor.chunk(dist.get_world_size())[dist.get_rank()]


def _reduce_scatter_always_chunk_0(tensor):
    dist.all_reduce(tensor)
    return tensor.chunk(dist.get_world_size())[0]


def test_reduce_scatter_with_all_reduce(cluster):
    assert P.check_reduce_scatter_with_all_reduce(_reduce_scatter_right, cluster=cluster)
    assert not P.check_reduce_scatter_with_all_reduce(
        _reduce_scatter_without_reducing, cluster=cluster
    )
    wrong = P.check_reduce_scatter_with_all_reduce(_reduce_scatter_always_chunk_0, cluster=cluster)
    assert not wrong and "rank 1:" in wrong.message
    assert not P.check_reduce_scatter_with_all_reduce(_stub, cluster=cluster)


def test_extra_bytes():
    assert P.check_extra_bytes(lambda n, p: (p - 1) / p * n)
    assert not P.check_extra_bytes(lambda n, p: 2 * (p - 1) / p * n)  # the whole all_reduce
    assert not P.check_extra_bytes(lambda n, p: n)  # forgot the (p-1)/p
    assert not P.check_extra_bytes(_stub)


# ------------------------------------------------------------- notebook 02


def _ring_right(tensor):
    rank, size = dist.get_rank(), dist.get_world_size()
    received = torch.empty_like(tensor)
    if rank % 2 == 0:
        dist.send(tensor, (rank + 1) % size)
        dist.recv(received, (rank - 1) % size)
    else:
        dist.recv(received, (rank - 1) % size)
        dist.send(tensor, (rank + 1) % size)
    return received


def _ring_wrong_direction(tensor):
    rank, size = dist.get_rank(), dist.get_world_size()
    received = torch.empty_like(tensor)
    request = dist.isend(tensor, (rank - 1) % size)
    dist.recv(received, (rank + 1) % size)
    request.wait()
    return received


def test_ring_exchange(cluster):
    assert P.check_ring_exchange(_ring_right, cluster=cluster)
    wrong = P.check_ring_exchange(_ring_wrong_direction, cluster=cluster)
    assert (
        not wrong
        and "rank 0: expected tensor([30., 31., 32.]), got tensor([10., 11., 12.])" in wrong.message
    )
    deadlock = P.check_ring_exchange(_recv_first, cluster=cluster, timeout=3)
    assert not deadlock and "deadlock" in deadlock.message
    lines = deadlock.message.splitlines()
    assert lines[0].startswith("FAIL Exercise 02.1") and lines[-1].startswith("  Hint: a rank")
    assert sum(line.startswith("  rank ") for line in lines) == 4  # one line per rank
    assert not P.check_ring_exchange(_stub, cluster=cluster)


def _groups_right(ranks_per_node):
    size = dist.get_world_size()
    nodes = [list(range(n, n + ranks_per_node)) for n in range(0, size, ranks_per_node)]
    cross = [list(range(local, size, ranks_per_node)) for local in range(ranks_per_node)]
    node_group, _ = dist.new_subgroups_by_enumeration(nodes)
    cross_group, _ = dist.new_subgroups_by_enumeration(cross)
    return node_group, cross_group


def _groups_inter_node_is_first_ranks(ranks_per_node):
    """The reference article's mistake: the "inter-node" group is ranks 0..nodes-1."""
    size = dist.get_world_size()
    nodes = [list(range(n, n + ranks_per_node)) for n in range(0, size, ranks_per_node)]
    node_group, _ = dist.new_subgroups_by_enumeration(nodes)
    cross_group = dist.new_group(list(range(size // ranks_per_node)))
    return node_group, cross_group


def _groups_swapped(ranks_per_node):
    node_group, cross_group = _groups_right(ranks_per_node)
    return cross_group, node_group


def test_node_groups(cluster):
    assert P.check_node_groups(_groups_right, cluster=cluster)
    wrong = P.check_node_groups(_groups_inter_node_is_first_ranks, cluster=cluster)
    assert (
        not wrong and "rank 0: ['cross-node group']: expected [0, 2], got [0, 1]" in wrong.message
    )
    assert not P.check_node_groups(_groups_swapped, cluster=cluster)
    assert not P.check_node_groups(_stub, cluster=cluster)
