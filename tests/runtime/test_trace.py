"""runtime.trace and lab.viz.plot_timeline: spans on real gloo ranks, one clock, the picture."""

from __future__ import annotations

import json

import matplotlib
import pytest

import labsupport as lab
from labsupport.runtime import trace
from labsupport.runtime.trace import Recorder, Span

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def cluster():
    with lab.Cluster(world_size=2, timeout=30) as c:
        yield c


def _train_steps(steps: int = 3, backward_s: float = 0.2) -> list:
    """On each rank: forward, an async all_reduce issued before backward, waited after it."""
    import time

    import torch
    import torch.distributed as dist

    from labsupport.runtime import trace

    trace.reset()
    grad = torch.ones(1000)
    for step in range(steps):
        dist.barrier()
        with trace.span("forward"):
            time.sleep(0.01)
        work = trace.comm(dist.all_reduce, grad, async_op=True, info=f"step {step}")
        with trace.span("backward"):
            time.sleep(backward_s)
        work.wait()
    return trace.spans()


@pytest.fixture(scope="module")
def trained(cluster):
    return cluster.run(_train_steps)


def _lane(spans, rank, lane):
    return [s for s in spans if s.rank == rank and s.lane == lane]


# ------------------------------------------------------------------------- recording
def test_compute_and_async_all_reduce_are_recorded_on_every_rank(trained):
    assert len(trained) == 2
    for rank, spans in enumerate(trained):
        assert {s.rank for s in spans} == {rank}
        compute, comm = _lane(spans, rank, "compute"), _lane(spans, rank, "comm")
        assert [s.name for s in compute] == ["forward", "backward"] * 3
        assert [(s.name, s.info) for s in comm] == [("all_reduce", f"step {i}") for i in range(3)]
        # compute regions follow each other without overlapping
        for a, b in zip(compute, compute[1:], strict=False):
            assert a.start_ns < a.end_ns <= b.start_ns
        for i, c in enumerate(comm):
            forward, backward = compute[2 * i], compute[2 * i + 1]
            assert forward.end_ns <= c.start_ns <= backward.start_ns  # issued before backward
            # completion comes from the Work's future, not from wait(): a small
            # all_reduce finishes long before the 200 ms backward does
            assert c.end_ns < backward.end_ns


def test_point_to_point_work_without_future_ends_at_wait(cluster):
    def p2p():
        import torch
        import torch.distributed as dist

        from labsupport.runtime import trace

        trace.reset()
        t = torch.arange(4.0)
        if dist.get_rank() == 0:
            work = trace.comm(dist.isend, t, dst=1)
        else:
            work = trace.comm(dist.irecv, t, src=0)
        assert len(trace.spans()) == 0  # not finished until somebody waits
        work.wait()  # (waiting twice on gloo p2p Work hangs: torch's, not ours)
        assert work.is_completed()  # the wrapper passes the rest through
        return trace.spans(), t.tolist()

    (s0, _), (s1, t1) = cluster.run(p2p)
    assert t1 == [0.0, 1.0, 2.0, 3.0]
    assert [(s.lane, s.name) for s in s0] == [("comm", "isend")]
    assert [(s.lane, s.name) for s in s1] == [("comm", "irecv")]


def test_gather_collects_every_rank_onto_one(cluster):
    def gathered():
        import torch.distributed as dist

        from labsupport.runtime import trace

        trace.reset()
        with trace.span("forward", info=f"on {dist.get_rank()}"):
            pass
        return trace.gather(dst=1)

    on0, on1 = cluster.run(gathered)
    assert on0 is None
    assert [(s.rank, s.info) for s in sorted(on1)] == [(0, "on 0"), (1, "on 1")]


def test_ranks_share_one_clock_and_durations_include_waiting(cluster):
    def late_rank_one():
        import time

        import torch
        import torch.distributed as dist

        from labsupport.runtime import trace

        trace.reset()
        for _ in range(3):
            trace.comm(dist.barrier)
        if dist.get_rank() == 1:
            time.sleep(0.3)  # rank 0 waits for it inside the all_reduce
        trace.comm(dist.all_reduce, torch.ones(10))
        return trace.spans()

    calls = trace.compare_ends(trace.merge(cluster.run(late_rank_one)))
    barriers = [c for c in calls if c.name == "barrier"]
    assert len(barriers) == 3 and all(c.ranks == (0, 1) for c in barriers)
    # no clock correction was applied: ends of a barrier agree within a few ms
    assert min(c.end_spread_ns for c in barriers) < 5e6
    (reduce,) = [c for c in calls if c.name == "all_reduce"]
    waited = reduce.durations_ns[0] - reduce.durations_ns[1]
    assert waited > 0.2e9  # rank 0's span is mostly waiting
    assert reduce.end_spread_ns < 0.1e9  # ... but both ranks end together
    table = trace.format_ends(calls)
    assert "all_reduce #0" in table and "end spread" in table


def test_align_puts_zero_at_the_first_start_or_on_an_anchor():
    spans = [Span(0, "comm", "barrier", 1000, 2000), Span(1, "comm", "barrier", 5000, 7000),
             Span(1, "compute", "forward", 7000, 9000)]  # fmt: skip
    aligned = trace.align(spans)
    assert min(s.start_ns for s in aligned) == 0
    assert [s.duration_ns for s in aligned] == [1000, 2000, 2000]
    on_barrier = trace.align(spans, anchor="barrier")
    ends = {s.rank: s.end_ns for s in on_barrier if s.name == "barrier"}
    assert ends[0] == ends[1]
    with pytest.raises(ValueError, match="no span named 'step'"):
        trace.align(spans, anchor="step")


# --------------------------------------------------------------------- the recorder
def test_span_works_as_decorator_and_begin_end_pairs():
    rec = Recorder()

    @rec.span("optimizer")
    def step(x):
        return x + 1

    assert step(1) == 2 and step(2) == 3
    assert lab.trace is trace and lab.trace.span.__self__ is trace.default()  # lab.trace works
    rec.begin("backward")
    rec.end("backward", info="hook")
    assert [(s.name, s.info) for s in rec.spans(rank=3)] == [
        ("optimizer", ""), ("optimizer", ""), ("backward", "hook")]  # fmt: skip
    assert all(s.rank == 3 for s in rec.spans(rank=3))
    rec.reset()
    assert len(rec) == 0


def test_futures_are_watched_and_reset_drops_work_still_in_flight():
    import torch

    rec = Recorder()
    done, stale = torch.futures.Future(), torch.futures.Future()
    issued = trace.now_ns()
    assert rec.watch(done, "all_reduce", issued, info="bucket 0") is done
    rec.watch(stale, "all_reduce", issued)
    assert len(rec) == 0  # nothing until the future completes
    done.set_result(torch.zeros(1))
    assert [(s.lane, s.info) for s in rec.spans()] == [("comm", "bucket 0")]
    rec.reset()
    stale.set_result(torch.zeros(1))  # issued before reset: not part of the new trace
    assert len(rec) == 0


def test_bad_input_gives_clear_errors(tmp_path):
    rec = Recorder()
    with pytest.raises(RuntimeError, match=r"no such span was begun.*trace.begin\('backward'\)"):
        rec.end("backward")
    rec.begin("forward")
    with pytest.raises(RuntimeError, match="already open"):
        rec.begin("forward")
    with pytest.raises(ValueError, match="ends .* before it starts"):
        rec.add("x", 10, 5)
    with pytest.raises(TypeError, match="expected a trace.Span"):
        trace.merge([["not a span"]])
    with pytest.raises(TypeError, match="expected a trace.Span"):
        trace.merge([[Span(0, "compute", "forward", 0, 1), 42]])
    with pytest.raises(ValueError, match="no spans to draw"):
        lab.viz.plot_timeline([])
    uneven = [Span(0, "comm", "all_reduce", 0, 1), Span(0, "comm", "all_reduce", 2, 3),
              Span(1, "comm", "all_reduce", 0, 1)]  # fmt: skip
    with pytest.raises(ValueError, match="different number of times"):
        trace.compare_ends(uneven)
    p2p = [Span(0, "comm", "isend", 0, 1), Span(1, "comm", "irecv", 0, 1)]
    assert trace.compare_ends(p2p) == []  # not collectives: nothing to line up
    with pytest.raises(FileNotFoundError, match="does not exist"):
        trace.write_chrome(uneven, tmp_path / "missing" / "t.json")
    assert not (tmp_path / "missing").exists()


# ------------------------------------------------------------- collectives, unchanged code
def _hooked_backward() -> tuple:
    """On each rank: a hook issues an async all-reduce during backward; wait afterwards."""
    import torch
    import torch.distributed as dist

    from labsupport.runtime import trace

    trace.reset()
    w = torch.nn.Parameter(torch.ones(3))
    works = []
    w.register_post_accumulate_grad_hook(
        lambda p: works.append(dist.all_reduce(p.grad, async_op=True))
    )
    with trace.collectives() as outer:
        with trace.collectives(["all_reduce"]) as inner:
            (w * 2).sum().backward()
            works[0].wait()
            dist.broadcast(torch.zeros(5), 0)  # blocking, outside backward; not in `inner`
    restored = dist.all_reduce.__module__ == "torch.distributed.distributed_c10d"
    spans = [s for s in trace.spans() if s.lane == "comm"]
    return outer, inner, restored, spans, w.grad.tolist()


def test_collectives_records_what_was_called_when_and_whether_it_was_waited(cluster):
    outer, inner, restored, spans, grad = cluster.run(_hooked_backward)[0]
    assert restored and grad == [4.0, 4.0, 4.0]  # 2 ranks summed the gradient 2
    call = inner[0]
    assert (call.name, call.numel, call.nbytes) == ("all_reduce", 3, 12)
    assert call.async_op and call.in_backward and not call.waited_in_backward
    assert call.waited_ns >= call.issued_ns and call.outstanding_at(call.issued_ns)
    assert [c.name for c in outer] == ["all_reduce", "broadcast"] and outer[0] is call
    blocking = outer[1]
    assert not blocking.async_op and not blocking.in_backward and blocking.waited_ns is not None
    assert sorted(s.name for s in spans) == ["all_reduce", "broadcast"]  # one span each


def test_collectives_refuses_names_torch_does_not_have():
    with pytest.raises(ValueError, match="no collective named all_reduce_fast"):
        with trace.collectives(["all_reduce_fast"]):
            pass


# ----------------------------------------------------------------------- Chrome JSON
def test_chrome_trace_has_one_process_per_rank_and_one_event_per_span(trained, tmp_path):
    spans = trace.align(trace.merge(trained))
    path = trace.write_chrome(spans, tmp_path / "timeline.json")
    data = json.loads(path.read_text())
    events = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(spans) == 18
    assert {e["pid"] for e in events} == {0, 1}
    names = {e["pid"]: e["args"]["name"] for e in data["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}  # fmt: skip
    assert names == {0: "rank 0", 1: "rank 1"}
    first = min(events, key=lambda e: e["ts"])
    assert first["ts"] == 0 and first["dur"] == pytest.approx(spans[0].duration_ns / 1e3)
    lanes = {(e["pid"], e["cat"]): e["tid"] for e in events}
    assert lanes[(0, "compute")] != lanes[(0, "comm")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["timeline.json"]


def test_chrome_write_is_atomic(tmp_path):
    path = tmp_path / "t.json"
    trace.write_chrome([Span(0, "compute", "forward", 0, 1000)], path)
    before = path.read_text()
    with pytest.raises(TypeError):  # fails while writing the JSON
        trace.write_chrome([Span(0, "compute", "forward", 0, 1000, info=object())], path)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


# ------------------------------------------------------------------------- the picture
def test_plot_has_a_row_per_rank_and_lane_and_a_legend(trained):
    import matplotlib.pyplot as plt

    ax = lab.viz.plot_timeline(trained, title="overlap")  # a list per rank is fine too
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["rank 0 compute", "rank 0 comm", "rank 1 compute", "rank 1 comm"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "forward", "all_reduce", "backward"]  # fmt: skip
    plt.close(ax.figure)


def test_overlapping_collectives_get_their_own_row():
    import matplotlib.pyplot as plt

    spans = [Span(0, "comm", "all_reduce", 0, 100, "bucket 0"),
             Span(0, "comm", "all_reduce", 50, 150, "bucket 1"),  # in flight together
             Span(0, "comm", "all_reduce", 200, 300, "bucket 2"),
             Span(0, "compute", "backward", 0, 300)]  # fmt: skip
    ax = lab.viz.plot_timeline(spans)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["rank 0 compute", "rank 0 comm", "rank 0 comm 2"]
    plt.close(ax.figure)
    tids = {e["tid"] for e in trace.to_chrome(spans)["traceEvents"] if e["ph"] == "X"}
    assert len(tids) == 3


# ------------------------------------------------------------------ torch.profiler
def test_profiler_events_land_inside_the_marker_span_on_the_same_clock(cluster, tmp_path):
    def profiled(path):
        import torch
        import torch.distributed as dist
        from torch.profiler import ProfilerActivity, profile

        from labsupport.runtime import trace

        trace.reset()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            trace.comm(dist.all_reduce, torch.ones(100_000), async_op=True).wait()
        prof.export_chrome_trace(f"{path}.{dist.get_rank()}.json")
        return trace.spans()

    markers = cluster.run(profiled, str(tmp_path / "prof"))
    for rank in (0, 1):
        got = trace.from_profiler(tmp_path / f"prof.{rank}.json", rank=rank)
        (gloo,) = [s for s in got if s.lane == "gloo"]
        (c10d,) = [s for s in got if s.lane == "c10d"]
        assert gloo.name == "gloo:all_reduce" and c10d.name == "c10d::allreduce_"
        (mine,) = markers[rank]
        slack = 1_000_000  # 1 ms: two clocks read at slightly different moments
        assert mine.start_ns - slack <= c10d.start_ns <= gloo.start_ns
        assert gloo.end_ns <= mine.end_ns + slack
    with pytest.raises(ValueError, match="not a Chrome trace"):
        trace.from_profiler({"events": []}, rank=0)


def test_backend_ops_reads_each_backends_profile():
    """The profiler's events are named after the backend in use: gloo:, nccl:, hccl:."""
    from types import SimpleNamespace

    def event(name, shapes):
        return SimpleNamespace(name=name, input_shapes=shapes)

    events = [
        event("c10d::reduce_scatter_tensor_", [[1024], [4096]]),
        event("gloo:all_reduce", [[4096]]),
        event("nccl:_reduce_scatter_base", [[1024], [4096]]),
        event("record_param_comms", [[4096]]),
        event("hccl:reduce_scatter", [[4096]]),
        event("hccl:all_reduce", []),  # no shapes recorded
    ]
    assert trace.backend_ops(events, "gloo") == [("gloo:all_reduce", 4096)]
    assert trace.backend_ops(events, "nccl") == [("nccl:_reduce_scatter_base", 1024)]
    assert trace.backend_ops(events, "hccl") == [
        ("hccl:reduce_scatter", 4096),
        ("hccl:all_reduce", None),
    ]
    assert trace.backend_ops(events, "mpi") == []


def test_the_traced_and_the_hidden_calls_are_the_core_lists():
    from labsupport import dist_names
    from labsupport.runtime.emulator import calls

    assert trace.TRACED is dist_names.TRACED and calls.CALLS is dist_names.CALLS
    assert set(dist_names.TRACED) < set(dist_names.CALLS)  # a trace records fewer, on purpose
    assert set(dist_names.RENAMED) <= set(dist_names.TRACED)
    import torch.distributed as dist

    assert [n for n in dist_names.CALLS if not callable(getattr(dist, n, None))] == []
