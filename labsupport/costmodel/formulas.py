"""Closed forms of the α-β-γ model: the time of each algorithm, named ``<schedule builder>_time``.

Start at :func:`ring_all_reduce_time`; :data:`CLOSED_FORMS` lists them all, by builder.
"""

from __future__ import annotations

from collections.abc import Callable
from math import ceil, log2

from labsupport.schedules import BUILDERS, double_binary_tree_all_reduce

# Notation: α is the latency of one message (s), β the time per byte on a link (s/B), γ
# the time per byte to reduce (s/B); ``n`` is the buffer size in bytes, ``p`` the number
# of ranks, lg = log2. The forms are those of Thakur, Rabenseifner & Gropp (2005),
# "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), and of
# HCCL's algorithm documentation (hicann/hccl ``docs/en/user_guide/coll_algo_intro``);
# see REFERENCES.md, "Cost models and algorithms".

# ``ports``: "one" (the classic model: in a step a rank sends one stream and receives one,
# so its messages queue) or "all" (a full mesh, as HCCS inside an A2 server or NVSwitch: a
# rank drives all its links at once). It matters only where a rank sends several messages
# in one step: the direct (mesh) algorithms and the naive root.
PORTS = ("one", "all")


def _lg(p: int) -> int:
    """Steps of a binomial tree: ceil(lg p)."""
    return ceil(log2(p)) if p > 1 else 0


def _fold(p: int) -> tuple[int, bool]:
    """(q, folded): q = 2**floor(lg p), the group the extra ranks fold into."""
    q = 1 << (int(p).bit_length() - 1)
    return q, q != p


def _check_ports(ports: str) -> None:
    if ports not in PORTS:
        raise ValueError(f"ports must be one of {PORTS}, not {ports!r}")


# ---------------------------------------------------------------------------
# Rings, the naive root, direct (mesh). For all-gather and reduce-scatter, n is
# the whole buffer (p times one rank's piece), as nccl-tests counts it.
# ---------------------------------------------------------------------------


def ring_all_reduce_time(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Ring (reduce-scatter + all-gather): 2(p-1)α + 2n(p-1)/p·β + n(p-1)/p·γ."""
    return 2 * (p - 1) * alpha + 2 * n * (p - 1) / p * beta + n * (p - 1) / p * gamma


def ring_reduce_scatter_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Ring reduce-scatter: (p-1)α + n(p-1)/p·(β+γ)."""
    return (p - 1) * alpha + n * (p - 1) / p * (beta + gamma)


def ring_all_gather_time(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Ring all-gather: (p-1)α + n(p-1)/p·β."""
    return (p - 1) * alpha + n * (p - 1) / p * beta


def whole_buffer_ring_all_reduce_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Ring that passes the whole buffer around (old PyTorch tutorial): (p-1)(α + nβ + nγ)."""
    return (p - 1) * (alpha + n * beta + n * gamma)


def naive_all_reduce_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0, *, ports: str = "one"
) -> float:
    """Reduce to a root, then send back.

    One port: 2(p-1)α + 2(p-1)nβ + (p-1)nγ (the root takes p-1 buffers one at a
    time, then sends p-1). All ports: 2(α + nβ) + (p-1)nγ. Not in the MPICH paper.
    """
    _check_ports(ports)
    links = p - 1 if ports == "one" else min(1, p - 1)
    return 2 * links * (alpha + n * beta) + (p - 1) * n * gamma


def direct_reduce_scatter_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0, *, ports: str = "one"
) -> float:
    """Direct (mesh) reduce-scatter: every rank sends piece j straight to rank j.

    All ports (HCCL's Mesh): α + n/p·β + n(p-1)/p·γ. One port: (p-1)α + n(p-1)/p·(β+γ),
    the ring's time: on one port a mesh algorithm gains nothing.
    """
    _check_ports(ports)
    if p == 1:
        return 0.0
    rounds = p - 1 if ports == "one" else 1
    return rounds * (alpha + n / p * beta) + n * (p - 1) / p * gamma


def direct_all_gather_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0, *, ports: str = "one"
) -> float:
    """Direct (mesh) all-gather: all ports α + n/p·β (HCCL's Mesh); one port (p-1)(α + n/p·β)."""
    return direct_reduce_scatter_time(n, p, alpha, beta, 0.0, ports=ports)


def direct_all_reduce_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0, *, ports: str = "one"
) -> float:
    """Direct reduce-scatter then all-gather: all ports 2α + 2n/p·β + n(p-1)/p·γ (HCCL's Mesh)."""
    return direct_reduce_scatter_time(n, p, alpha, beta, gamma, ports=ports) + (
        direct_all_gather_time(n, p, alpha, beta, ports=ports)
    )


# ---------------------------------------------------------------------------
# Trees.
# ---------------------------------------------------------------------------


def binomial_broadcast_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Binomial-tree broadcast: ⌈lg p⌉·(α + nβ)."""
    return _lg(p) * (alpha + n * beta)


def binomial_reduce_time(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Binomial-tree reduce: ⌈lg p⌉·(α + nβ + nγ)."""
    return _lg(p) * (alpha + n * beta + n * gamma)


def tree_all_reduce_time(n: float, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Binomial reduce then binomial broadcast: 2⌈lg p⌉·(α + nβ) + ⌈lg p⌉·nγ.

    The sum of the binomial reduce and broadcast rows of Thakur et al. (2005).
    """
    return 2 * _lg(p) * (alpha + n * beta) + _lg(p) * n * gamma


def double_binary_tree_all_reduce_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0, *, blocks: int = 4
) -> float:
    """NCCL's double binary tree, pipelined in ``blocks`` blocks per tree (one port).

    Every step moves one block of n/(2b) per rank: S·(α + n/(2b)·β) + S↑·n/(2b)·γ,
    with S = 4b + 4 lg p - 6 steps for p a power of two >= 4 (S↑ = S/2 of them
    reducing): 4b to stream the 2b blocks up and down, and 4 lg p - 6 to fill
    and drain the two trees. As b grows the time tends to 2nβ, the ring's
    bandwidth, while the latency term grows only with lg p. For other p the
    step counts are read off the trees (``schedules.double_binary_tree_all_reduce``).
    """
    if p == 1:
        return 0.0
    b = blocks
    if p & (p - 1) == 0:
        steps = 2 * b if p == 2 else 4 * b + 4 * int(log2(p)) - 6
        up = steps // 2
    else:
        sched = double_binary_tree_all_reduce(p, b)
        steps, up = len(sched), sum(1 for st in sched.steps if st.reduce.all())
    piece = n / (2 * b)
    return steps * (alpha + piece * beta) + up * piece * gamma


# ---------------------------------------------------------------------------
# Recursive doubling and halving; for p not a power of two, folded (MPICH, HCCL's RHD).
# ---------------------------------------------------------------------------


def recursive_doubling_all_reduce_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Recursive doubling all-reduce: lg p·(α + nβ + nγ).

    For p not a power of two, with q = 2^⌊lg p⌋: lg q·(α + nβ + nγ) plus the
    fold, 2α + 2nβ + nγ (the extra ranks add their buffer in first and get the
    result back last).
    """
    q, folded = _fold(p)
    fold = folded * (2 * alpha + 2 * n * beta + n * gamma)
    return log2(q) * (alpha + n * beta + n * gamma) + fold


def recursive_halving_reduce_scatter_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Recursive halving reduce-scatter (p a power of two): lg p·α + n(p-1)/p·(β+γ)."""
    return log2(p) * alpha + n * (p - 1) / p * (beta + gamma)


def recursive_doubling_all_gather_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Recursive doubling all-gather (p a power of two): lg p·α + n(p-1)/p·β."""
    return log2(p) * alpha + n * (p - 1) / p * beta


def rabenseifner_all_reduce_time(
    n: float, p: int, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Rabenseifner (halving RS, doubling AG): 2 lg p·α + 2n(p-1)/p·β + n(p-1)/p·γ.

    For p not a power of two, with q = 2^⌊lg p⌋ (HCCL's RHD documentation):
    (2 lg q + 2)α + (2(q-1)/q + 2)nβ + ((q-1)/q + 1)nγ.
    """
    q, folded = _fold(p)
    inner = 2 * log2(q) * alpha + 2 * n * (q - 1) / q * beta + n * (q - 1) / q * gamma
    return inner + folded * (2 * alpha + 2 * n * beta + n * gamma)


ClosedForm = Callable[..., float]

#: The closed form of each shipped schedule builder, by the builder's name (``X_time``
#: costs ``schedules.X``), read off the one registry, :data:`labsupport.schedules.BUILDERS`.
#: Each equals what :func:`labsupport.costmodel.cost` counts for that schedule, for every
#: p the schedule accepts (tests/core/test_costmodel.py, which also fails for a builder that has
#: no closed form here).
CLOSED_FORMS: dict[str, ClosedForm] = {
    name: form for name in BUILDERS if (form := globals().get(f"{name}_time")) is not None
}


# ---------------------------------------------------------------------------
# Two levels: α, β inside a node, α', β' between nodes.
# ---------------------------------------------------------------------------


def hierarchical_all_reduce_time(
    n: float,
    p: int,
    alpha: float,
    beta: float,
    gamma: float = 0.0,
    *,
    ranks_per_node: int,
    inter_alpha: float | None = None,
    inter_beta: float | None = None,
    intra: str = "direct",
    inter: str = "ring",
) -> float:
    """Two-level all-reduce: reduce-scatter in each node, all-reduce across, all-gather.

    With k = ranks_per_node and m = p / k nodes, α, β within a node and α', β'
    between nodes (default: the same)::

        inside, intra="direct" (a full mesh: every link at once, HCCL's Mesh):
            2(α + n/k·β) + (k-1)/k·nγ
        inside, intra="ring":
            2(k-1)(α + n/k·β) + (k-1)/k·nγ
        across, inter="ring" (a ring all-reduce of n/k):
            2(m-1)α' + 2(n/k)(m-1)/m·β' + (n/k)(m-1)/m·γ
        across, inter="halving_doubling" (Rabenseifner on n/k, HCCL's H-D_R):
            2 lg m·α' + 2(n/k)(m-1)/m·β' + (n/k)(m-1)/m·γ   (m a power of two;
            else the fold of :func:`rabenseifner_all_reduce_time`)

    What HCCL runs on multi-server A2 systems and ASTRA-sim calls localBWAware.
    Both inter algorithms send the same bytes across; halving-doubling needs
    2 lg m latencies instead of 2(m-1), which is what decides at many servers.
    """
    k = ranks_per_node
    m = p // k
    a2 = alpha if inter_alpha is None else inter_alpha
    b2 = beta if inter_beta is None else inter_beta
    if intra not in ("direct", "ring"):
        raise ValueError(f"intra must be 'direct' or 'ring', not {intra!r}")
    rounds = (1 if intra == "direct" else k - 1) if k > 1 else 0
    within = 2 * rounds * (alpha + n / k * beta) + (k - 1) / k * n * gamma
    if inter not in ("ring", "halving_doubling"):
        raise ValueError(f"inter must be 'ring' or 'halving_doubling', not {inter!r}")
    form = ring_all_reduce_time if inter == "ring" else rabenseifner_all_reduce_time
    across = form(n / k, m, a2, b2, gamma) if m > 1 else 0.0
    return within + across
