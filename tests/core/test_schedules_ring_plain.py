"""The ring in plain code (schedules/ring.py) and the compact ring (schedules/compact.py) agree."""

import inspect

import pytest

from labsupport import schedules as sch
from labsupport.schedules import builders, compact, ring

SIZES = [1, 2, 3, 4, 5, 8, 16, 33, 64]
KINDS = ["ring_reduce_scatter", "ring_all_gather", "ring_all_reduce"]


def transfers(schedule):
    """Every (step, src, dst, chunk, reduce) of a schedule, read through the public iteration."""
    return [
        (i, t.src, t.dst, c, t.reduce)
        for i, step in enumerate(schedule.steps)
        for t in step
        for c in t.chunks
    ]


def header(schedule):
    s = schedule
    return (s.name, s.collective, s.world_size, s.num_chunks, s.root, s.note, len(s.steps))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("p", SIZES)
def test_the_plain_ring_and_the_compact_ring_send_the_same_chunks(kind, p):
    plain, fast = getattr(ring, kind)(p), getattr(compact, kind)(p)
    assert header(plain) == header(fast)
    assert transfers(plain) == transfers(fast)
    assert all(st.rotation is None for st in plain.steps)  # really built transfer by transfer


@pytest.mark.parametrize("kind", KINDS)
def test_the_public_ring_is_the_compact_one_under_its_old_names(kind):
    assert getattr(sch, kind) is getattr(compact, kind) is getattr(builders, kind)
    assert sch.BUILDERS[kind] is getattr(compact, kind)


def test_the_public_ring_of_4096_ranks_is_one_rotation_per_step():
    # Why it builds in milliseconds at any size: a step is one record of its rotation, not
    # p transfers (the time itself is benchmarks/simulate_scale.py's, measured side by side).
    steps = sch.ring_all_reduce(4096).steps
    assert len(steps) == 2 * (4096 - 1)
    assert all(st.rotation is not None for st in steps)


def test_the_rule_is_a_line_of_code_a_learner_can_find():  # notebook 03 points to these lines
    assert "chunk = (r - s - 1) % p" in inspect.getsource(ring.ring_reduce_scatter)
    assert "chunk = (r - s) % p" in inspect.getsource(ring.ring_all_gather)


# ---------------------------------------------------------------------------
# An independent check: replay the transfers on sets of contributions, written
# here from the definitions of the collectives, not with labsupport's replay.
# ---------------------------------------------------------------------------


class Refused(Exception):
    """The replay met a transfer no ring may make."""


def replay(schedule, start):
    """Each rank's chunks after the last step; ``start[r][c]`` is a set of input ranks."""
    held = [[set(chunk) for chunk in row] for row in start]
    for step in schedule.steps:
        sent = [[set(chunk) for chunk in row] for row in held]  # what ranks held as the step began
        for t in step:
            for c in t.chunks:
                if not sent[t.src][c]:
                    raise Refused(f"rank {t.src} sends chunk {c} before it holds any of it")
                if t.reduce and held[t.dst][c] & sent[t.src][c]:
                    raise Refused(f"rank {t.dst} would add an input to chunk {c} twice")
                held[t.dst][c] = held[t.dst][c] | sent[t.src][c] if t.reduce else sent[t.src][c]
    return held


def reduce_scatter_is_right(schedule, p):
    """After the reduce-scatter rank r holds chunk r summed over all p ranks."""
    held = replay(schedule, [[{r} for _ in range(p)] for r in range(p)])
    return all(held[r][r] == set(range(p)) for r in range(p))


def all_gather_is_right(schedule, p):
    """After the all-gather every rank holds chunk c as rank c had it (and only it)."""
    held = replay(schedule, [[{c} if c == r else set() for c in range(p)] for r in range(p)])
    return all(held[r][c] == {c} for r in range(p) for c in range(p))


def all_reduce_is_right(schedule, p):
    """After the all-reduce every rank holds every chunk summed over all p ranks."""
    held = replay(schedule, [[{r} for _ in range(p)] for r in range(p)])
    return all(chunk == set(range(p)) for row in held for chunk in row)


@pytest.mark.parametrize("p", SIZES)
def test_the_plain_ring_computes_its_collectives(p):
    assert reduce_scatter_is_right(ring.ring_reduce_scatter(p), p)
    assert all_gather_is_right(ring.ring_all_gather(p), p)
    assert all_reduce_is_right(ring.ring_all_reduce(p), p)
    sch.verify(ring.ring_all_reduce(p))  # and labsupport's own replay agrees


def ring_with_rule(p, rule, reduce):
    """A ring phase in which, at step s, rank r sends chunk ``rule(r, s, p)`` to rank r + 1."""
    steps = tuple(
        sch.Step.of(
            sch.Transfer(r, (r + 1) % p, range(rule(r, s, p), rule(r, s, p) + 1), reduce)
            for r in range(p)
        )
        for s in range(p - 1)
    )
    kind = "reduce_scatter" if reduce else "all_gather"
    return sch.Schedule("ring_with_rule", kind, p, p, steps)


def right(check, schedule, p):
    try:
        return check(schedule, p)
    except Refused:
        return False


RS_RULE, AG_RULE = (lambda r, s, p: (r - s - 1) % p), (lambda r, s, p: (r - s) % p)
WRONG_RULES = [lambda r, s, p: (r + s) % p, lambda r, s, p: (r - s + 1) % p]


@pytest.mark.parametrize("p", [3, 4, 5, 8])
def test_the_checks_catch_a_wrong_rule(p):
    # The checks above have teeth: each phase's rule passes, the other phase's
    # rule (one chunk off) and other plausible rules fail.
    assert right(reduce_scatter_is_right, ring_with_rule(p, RS_RULE, True), p)
    assert right(all_gather_is_right, ring_with_rule(p, AG_RULE, False), p)
    for wrong in [AG_RULE, *WRONG_RULES]:
        assert not right(reduce_scatter_is_right, ring_with_rule(p, wrong, True), p)
    for wrong in [RS_RULE, *WRONG_RULES]:
        assert not right(all_gather_is_right, ring_with_rule(p, wrong, False), p)
