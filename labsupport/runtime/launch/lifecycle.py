"""Which group of ranks a :class:`~labsupport.runtime.launch.Cluster` runs on, and its spare.

After a timeout, a death, or ranks left blocked by a failing peer, the group cannot go
on: a fresh one replaces it at once, and starts in the background while the error is
reported. A spare ("standby") group, started ahead, makes that replacement cost no
start-up (N torch imports). It doubles the ranks' memory, so it is kept only for gloo
groups: NPUs and GPUs take one process each, and there the new group starts as soon as
the old one is gone.
"""

from __future__ import annotations

from labsupport.runtime.backend import BackendChoice
from labsupport.runtime.launch.group import Group
from labsupport.runtime.launch.options import ClusterOptions
from labsupport.runtime.launch.process import WorkerProcess

#: A spare group doubles the ranks' memory (about 300 MB each): kept automatically
#: only for gloo groups up to this size. Never on NPUs/GPUs (one process per device).
STANDBY_MAX_RANKS = 4


def standby_policy(standby: bool | None, backend: str, world_size: int) -> bool | None:
    """What ``Cluster(standby=...)`` keeps: True, a spare from the start; None, one from the
    first failure on; False, none. Only gloo groups keep one, and unasked (None) only up
    to :data:`STANDBY_MAX_RANKS` ranks."""
    if backend != "gloo" or (standby is None and world_size > STANDBY_MAX_RANKS):
        return False
    return standby


def eager_standby(world_size: int) -> bool | None:
    """``standby`` for a group that should keep a spare from the start where the default
    would keep one after a failure (``%%ranks``: a learner's failures come early)."""
    return True if world_size <= STANDBY_MAX_RANKS else None


def _all_running(group: Group) -> bool:
    """True if no rank of a (standby) group has exited."""
    return all(w.proc.poll() is None for w in group.workers)


class Groups:
    """The current group of ranks and the spare; starts the current one and waits for it."""

    def __init__(self, options: ClusterOptions, choice: BackendChoice, standby: bool | None):
        self.options, self.choice = options, choice
        self.policy = standby_policy(standby, choice.backend, options.world_size)
        self.current: Group | None = Group(options, choice)
        self.current.wait_ready()
        self.spare: Group | None = Group(options, choice) if self.policy else None

    @property
    def alive(self) -> bool:
        """True while there is a current group and every one of its ranks is running."""
        return self.current is not None and self.current.alive

    @property
    def workers(self) -> list[WorkerProcess]:
        """The current ranks' processes."""
        return self.current.workers if self.current else []

    def shutdown(self) -> None:
        """Stop both groups."""
        for group in (self.current, self.spare):
            if group is not None:
                group.shutdown()
        self.current = self.spare = None

    def replace(self, failure: bool = True) -> str | None:
        """Swap in a new group now (the spare if there is one); do not wait for it.

        Returns None, or why no new group could be started (the next cell tries again).
        """
        if self.current is not None and self.choice.device_type != "cpu":
            self.current.close()  # free the devices before new ranks take them
        elif self.current is not None:
            self.current.retire()
        self.current, self.spare = self.spare, None
        if failure and self.policy is None:
            self.policy = True  # there was a failure: keep one ready from now on
        if self.current is not None and _all_running(self.current):
            return None
        if self.current is not None:
            self.current.retire()
            self.current = None
        try:
            self.current = Group(self.options, self.choice)
        except Exception as exc:  # never hide the error being reported
            return f"{type(exc).__name__}: {exc}"
        return None

    def ensure_ready(self) -> Group:
        """Wait for the current group (a start-up failure is raised here); refill the spare."""
        if self.current is None:  # an earlier restart could not even spawn the ranks
            self.current = Group(self.options, self.choice)
        try:
            self.current.wait_ready()
        except BaseException:
            self.current = None
            raise
        if self.policy and self.spare is None:
            self.spare = Group(self.options, self.choice)
        return self.current
