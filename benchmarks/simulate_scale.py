"""How long the topology simulator takes for a ring all-reduce, from 64 to 4096 ranks.

Prints, for each size, the time to build the schedule and to simulate it on
8 x N Ascend A2 servers (with and without congestion), the number of
transfers, and the time per million transfers. Targets (issue 11): 4096
ranks under 1 s, 1024 ranks under 0.2 s. Timings are the best of a few runs;
on a shared machine they are noisy.

How the cost grows: a ring's steps share one routing per phase (a
``Rotation``), so the cost grows with the number of steps, 2(p-1), plus p per
distinct step shape: far below linear in the 2p(p-1) transfers. The second
table is the generic path (every step its own arrays, as a hand-built
schedule has): steps are recognised by their contents, so the cost is about
linear in transfers (a hash of each step's columns) plus one routing per
distinct shape.

    python benchmarks/simulate_scale.py
"""

from __future__ import annotations

import time

from labsupport import schedules, topology


def best_of(fn, repeat: int = 3) -> float:  # noqa: ANN001
    """Shortest wall time of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    """Print the table."""
    print("ranks  transfers   build (s)  simulate (s)  +congestion (s)  total (s)  us/Mtransfer")
    for servers in (8, 32, 128, 512):
        p = 8 * servers
        topo = topology.ascend_a2(servers)
        sched = schedules.ring_all_reduce(p)
        build = best_of(lambda p=p: schedules.ring_all_reduce(p))
        sim = best_of(lambda s=sched, t=topo: topology.simulate_on_topology(s, t, 2**28))
        cong = best_of(
            lambda s=sched, t=topo: topology.simulate_on_topology(s, t, 2**28, congestion=True)
        )
        transfers = 2 * (p - 1) * p
        total = build + sim
        print(
            f"{p:5d}  {transfers:10,d}  {build:9.4f}  {sim:12.4f}  {cong:15.4f}  {total:9.4f}"
            f"  {1e6 * total / (transfers / 1e6):12.1f}"
        )
        if p in (1024, 4096):
            target = 0.2 if p == 1024 else 1.0
            verdict = "meets" if total < target else "MISSES"
            print(
                f"       {p} ranks: build + simulate {total:.3f} s {verdict} the {target} s target"
            )


def eager(sched: schedules.Schedule) -> schedules.Schedule:
    """The same schedule with every step stored as its own arrays (no shared Rotation)."""
    steps = tuple(
        schedules.Step(s.src, s.dst, s.start.copy(), s.stop, s.reduce) for s in sched.steps
    )
    return schedules.Schedule(
        sched.name, sched.collective, sched.world_size, sched.num_chunks, steps
    )


def generic() -> None:
    """Steps without a shared rule are routed one by one: cost about linear in transfers."""
    print("\nthe same rings with per-step arrays (the path any hand-built schedule takes):")
    print("ranks  transfers   simulate (s)  us/Mtransfer")
    for servers in (8, 32, 128):
        p = 8 * servers
        sched = eager(schedules.ring_all_reduce(p))
        topo = topology.ascend_a2(servers)
        sim = best_of(lambda s=sched, t=topo: topology.simulate_on_topology(s, t, 2**28))
        transfers = 2 * (p - 1) * p
        print(f"{p:5d}  {transfers:10,d}  {sim:12.4f}  {1e6 * sim / (transfers / 1e6):12.1f}")


if __name__ == "__main__":
    main()
    generic()
