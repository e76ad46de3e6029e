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

    ``errors`` maps each failing rank to its :class:`RemoteError`; ``first`` is
    the rank whose failure came first (a rank that died counts first), since
    the others often fail *because* of it (their peer went away).
    ``stacks`` holds the Python stack of ranks that were still blocked
    (usually waiting in a collective for the rank that failed).
    """

    def __init__(
        self,
        errors: dict[int, RemoteError],
        stacks: dict[int, str] | None = None,
        restarted: bool = False,
        first: int | None = None,
    ) -> None:
        self.errors = dict(sorted(errors.items()))
        self.stacks = dict(sorted((stacks or {}).items()))
        self.restarted = restarted
        self.ranks = list(self.errors)
        self.first = first if first in self.errors else self.ranks[0]
        super().__init__(self._describe())

    def _describe(self) -> str:
        first = self.errors[self.first]
        summary = _first_line(first.message)
        parts = [f"rank {first.rank} raised {first.type_name}: {summary}"]
        # The other failing ranks, one line per distinct error (often all the same).
        by_error: dict[str, list[int]] = {}
        for rank, err in self.errors.items():
            if rank != self.first:
                by_error.setdefault(f"{err.type_name}: {_first_line(err.message)}", []).append(rank)
        for error, ranks in by_error.items():
            names = ", ".join(str(r) for r in ranks)
            if error == f"{first.type_name}: {summary}":
                parts.append(f"(rank{'s' if len(ranks) > 1 else ''} {names}: the same error)")
            else:
                parts.append(
                    f"(rank{'s' if len(ranks) > 1 else ''} {names} then failed too, most likely "
                    f"as a consequence: {error})"
                )
        parts.append(f"\n--- rank {first.rank}: remote traceback ---\n{first.traceback.rstrip()}")
        for rank, stack in self.stacks.items():
            parts.append(f"\n--- rank {rank} was still blocked here ---\n{stack.rstrip()}")
        return "\n".join(parts)


def _first_line(text: str, limit: int = 200) -> str:
    """The first line of an error message, cut to ``limit`` characters."""
    lines = text.strip().splitlines()
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


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
