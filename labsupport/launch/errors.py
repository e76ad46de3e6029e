"""The exceptions a cell on N ranks can end with."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteError:
    """An exception raised on one rank, carried back as text."""

    rank: int
    type_name: str
    message: str
    traceback: str


class LabError(RuntimeError):
    """Base class of the launcher's errors."""


class RankError(LabError):
    """One or more ranks raised (or died) while running a cell.

    ``errors`` maps each failing rank to its :class:`RemoteError`;
    ``stacks`` holds the Python stack of ranks that were still blocked
    (usually waiting in a collective for the rank that failed).
    """

    def __init__(
        self,
        errors: dict[int, RemoteError],
        stacks: dict[int, str] | None = None,
        restarted: bool = False,
    ) -> None:
        self.errors = dict(sorted(errors.items()))
        self.stacks = dict(sorted((stacks or {}).items()))
        self.restarted = restarted
        self.ranks = list(self.errors)
        super().__init__(self._describe())

    def _describe(self) -> str:
        kinds = sorted({e.type_name for e in self.errors.values()})
        ranks = ", ".join(str(r) for r in self.ranks)
        head = f"rank{'s' if len(self.ranks) > 1 else ''} {ranks} raised {', '.join(kinds)}"
        first = next(iter(self.errors.values()))
        parts = [f"{head}: {first.message}"]
        for err in self.errors.values():
            parts.append(f"\n--- rank {err.rank}: remote traceback ---\n{err.traceback.rstrip()}")
        for rank, stack in self.stacks.items():
            parts.append(f"\n--- rank {rank} was still blocked here ---\n{stack.rstrip()}")
        return "\n".join(parts)


class CollectiveTimeout(LabError, TimeoutError):
    """A cell did not finish on every rank within the timeout (a hang, often a deadlock).

    ``stacks`` maps each blocked rank to its Python stack at the moment of the
    timeout, so you can see where it waits (``dist.recv``, ``all_reduce`` ...).
    """

    def __init__(self, timeout: float, stacks: dict[int, str], restarted: bool = True) -> None:
        self.timeout = timeout
        self.stacks = dict(sorted(stacks.items()))
        self.ranks = list(self.stacks)
        self.restarted = restarted
        ranks = ", ".join(str(r) for r in self.ranks)
        parts = [
            f"ranks {ranks} did not finish within {timeout:g} s: each rank's stack shows "
            "where it is blocked (a rank waiting for a peer that never sends is a deadlock)."
        ]
        for rank, stack in self.stacks.items():
            parts.append(f"\n--- rank {rank} stack ---\n{stack.rstrip()}")
        super().__init__("\n".join(parts))
