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
        # The other failing ranks: one line per kind of error, with one example.
        by_type: dict[str, list[int]] = {}
        for rank, err in self.errors.items():
            if rank != self.first:
                by_type.setdefault(err.type_name, []).append(rank)
        for type_name, ranks in by_type.items():
            names = f"rank{'s' if len(ranks) > 1 else ''} {', '.join(str(r) for r in ranks)}"
            example = _first_line(self.errors[ranks[0]].message, limit=120)
            if type_name == first.type_name and example == _first_line(first.message, 120):
                parts.append(f"({names}: the same error)")
            else:
                parts.append(f"({names} also raised {type_name}, e.g. rank {ranks[0]}: {example})")
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
