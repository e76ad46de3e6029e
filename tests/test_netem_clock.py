"""The emulated clock of a thread: how late it woke from a wait is not charged to the network."""

from __future__ import annotations

import threading
import time

from labsupport.netem.work import emulated_now, wake_at


def _in_thread(fn):  # noqa: ANN001, ANN202 - runs fn in a fresh thread (fresh thread-local state)
    out = {}
    t = threading.Thread(target=lambda: out.update(value=fn()))
    t.start()
    t.join()
    return out["value"]


def test_a_fresh_thread_runs_on_the_wall_clock() -> None:
    gap = _in_thread(lambda: time.monotonic() - emulated_now())
    assert abs(gap) < 0.001


def test_a_late_wake_up_is_taken_off_the_next_start() -> None:
    def late() -> float:
        since = time.monotonic()
        time.sleep(0.05)  # the thread "wakes" 50 ms after its deadline
        wake_at(since + 0.001, since)
        return time.monotonic() - emulated_now()

    assert 0.04 < _in_thread(late) < 0.2


def test_a_deadline_already_past_when_waiting_began_is_no_lateness() -> None:
    def busy_then_wait() -> float:
        deadline = time.monotonic()
        time.sleep(0.05)  # computing: the work was done long ago, wait() returns at once
        wake_at(deadline, time.monotonic())
        return time.monotonic() - emulated_now()

    assert _in_thread(busy_then_wait) < 0.01


def test_lateness_belongs_to_the_thread_that_waited() -> None:
    def late_here_then_ask_another() -> float:
        since = time.monotonic()
        time.sleep(0.03)
        wake_at(since, since)
        return _in_thread(lambda: time.monotonic() - emulated_now())

    assert abs(_in_thread(late_here_then_ask_another)) < 0.001
