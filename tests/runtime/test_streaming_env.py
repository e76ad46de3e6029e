"""$LABSUPPORT_LIVE_AFTER: stored outputs and nbval print in rank order, never live."""

from __future__ import annotations

from labsupport.runtime.launch.streaming import RankPrinter


def _went_live(monkeypatch, value: str | None, ran_for: float) -> bool:
    if value is None:
        monkeypatch.delenv("LABSUPPORT_LIVE_AFTER", raising=False)
    else:
        monkeypatch.setenv("LABSUPPORT_LIVE_AFTER", value)
    printer = RankPrinter([], None)
    printer.started -= ran_for  # as if the cell had run this long
    printer.poll()
    return printer.live


def test_a_long_cell_goes_live_by_default(monkeypatch):
    assert not _went_live(monkeypatch, None, 0.1)
    assert _went_live(monkeypatch, None, 5.0)


def test_inf_keeps_output_in_rank_order(monkeypatch):
    assert not _went_live(monkeypatch, "inf", 3600.0)
