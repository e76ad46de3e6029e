"""ZeRO-3's step on paper: when its all-gathers and reduce-scatters travel, prefetching or not.

Start at :func:`zero3_step`. One link, one message at a time (the emulated network's
rule): a collective starts when it is issued *and* the link has finished the previous one.
"""

from __future__ import annotations


def zero3_step(
    layers: int, f: float, b: float, gather: float, scatter: float, prefetch: bool = True
) -> float:
    """Seconds of one ZeRO-3 step of ``layers`` equal units (the optimizer's step left out).

    ``f``, ``b``: one unit's forward and backward compute; ``gather``, ``scatter``: one
    unit's all-gather and reduce-scatter on the network. Without prefetch a unit's
    all-gather is issued when the unit starts and waited for at once; with it, issued when
    the unit before it starts (forward; the unit after it, in backward), and the last unit
    is not freed between forward and backward. Reduce-scatters are issued as each unit's
    backward ends and waited for at the end of backward.
    """
    link = 0.0  # when the link is free again

    def send(at: float, seconds: float) -> float:  # returns when this collective ends
        nonlocal link
        link = max(at, link) + seconds
        return link

    t, ready = 0.0, send(0.0, gather)  # unit 0's parameters: nothing to hide them behind
    for k in range(layers):  # forward
        t = max(t, ready)  # wait for unit k's parameters
        if prefetch and k + 1 < layers:
            ready = send(t, gather)  # the next unit's travel while unit k computes
        t += f
        if not prefetch and k + 1 < layers:
            ready = send(t, gather)
    ready = t if prefetch else send(t, gather)  # the last unit: kept, or gathered again
    done = t
    for k in reversed(range(layers)):  # backward
        t = max(t, ready)
        if prefetch and k > 0:
            ready = send(t, gather)
        t += b
        done = send(t, scatter)  # this unit's gradients leave as its backward ends
        if not prefetch and k > 0:
            ready = send(t, gather)
    return max(t, done)


def hidden_by_prefetch(layers: int, f: float, b: float, gather: float, scatter: float) -> float:
    """Seconds per step that prefetching hides: the step without it minus the step with it."""
    return zero3_step(layers, f, b, gather, scatter, False) - zero3_step(
        layers, f, b, gather, scatter, True
    )
