"""The ASTRA-sim-compatible mode gives ASTRA-sim's own times for ASTRA-sim's own inputs.

tests/data/astra/reference.json holds each NPU's "sys[i] finished, N cycles" from
ASTRA-sim's analytical binaries (commit, backend and build in astra_sim_build.json and
README.md), for every case there: Ring, FullyConnected, Switch, 2-D and 3-D networks;
ring, direct, halvingDoubling, doubleBinaryTree and the one* algorithms; 1 MiB and
64 MiB; both backends; neutral system layers and the system configs ASTRA-sim ships.
CI compares against these stored figures and never builds ASTRA-sim.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from labsupport import schedules as sch
from labsupport import topology as T
from labsupport.runtime import astra
from labsupport.runtime.astra.__main__ import main, parse_size

DATA = Path(__file__).resolve().parents[1] / "data" / "astra"
REFERENCE = json.loads((DATA / "reference.json").read_text())
CASES = [c for c in REFERENCE["cases"] if "finish_ns" in c]
UNAWARE_TOLERANCE, AWARE_TOLERANCE = 1e-3, 1e-2  # the targets: 0.1 % and 1 % (1-D)


def _id(case: dict) -> str:
    net, system = Path(case["network"]).stem, Path(case["system"]).stem
    aware = "aware" if case["congestion_aware"] else "unaware"
    return f"{net}-{system}-{case['collective']}-{case['nbytes']}-{aware}"


def _run(case: dict) -> astra.AstraResult:
    return astra.simulate_astra(
        DATA / case["network"],
        DATA / case["system"],
        case["collective"],
        case["nbytes"],
        case["congestion_aware"],
    )


def test_the_reference_covers_what_the_issue_asks_for():
    algos = {
        a
        for c in CASES
        for a in json.loads((DATA / c["system"]).read_text())["all-reduce-implementation"]
    }
    assert {
        "ring",
        "direct",
        "halvingDoubling",
        "doubleBinaryTree",
        "oneRing",
        "oneDirect",
        "oneHalvingDoubling",
    } <= algos
    dims = {len(astra.from_astra_sim(DATA / c["network"]).dims) for c in CASES}
    assert dims == {1, 2, 3}
    assert {c["nbytes"] for c in CASES} >= {2**20, 2**26}
    assert {c["congestion_aware"] for c in CASES} == {False, True}
    assert {c["collective"] for c in CASES} == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
    }
    shipped = {c["system"] for c in CASES if c["system"].startswith("shipped/")}
    assert len(shipped) == 13  # every shipped system config but the custom collective


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_npu_finishes_when_astra_sim_says(case):
    got = _run(case).finish_ns
    want = np.array(case["finish_ns"])
    tolerance = AWARE_TOLERANCE if case["congestion_aware"] else UNAWARE_TOLERANCE
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=0)


@pytest.mark.parametrize("case", [c for c in REFERENCE["cases"] if "astra_sim_error" in c], ids=_id)
def test_what_astra_sim_cannot_run_is_refused(case):
    with pytest.raises(ValueError):
        _run(case)


def test_the_command_prints_astra_sims_lines_and_the_breakdown(capsys):
    case = next(
        c
        for c in CASES
        if c["network"].endswith("hgx_h100_16gpu.yml")
        and c["system"].endswith("hgx_h100_16gpu.json")
        and c["nbytes"] == 2**26
    )
    code = main(
        [
            "astra",
            str(DATA / case["network"]),
            str(DATA / case["system"]),
            "--collective",
            "all_reduce",
            "--size",
            "64M",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[:16] == [f"sys[{i}] finished, {t} cycles" for i, t in enumerate(case["finish_ns"])]
    assert "dim 0 (Switch of 8, ring)" in out[17] and "dim 1 (Ring of 2, ring)" in out[18]
    assert out[19].startswith("  busiest link: ")


def test_the_command_says_what_is_wrong_and_exits_2(capsys, tmp_path):
    bad = tmp_path / "net.yml"
    bad.write_text("topology: Ring\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\n")
    system = DATA / "inputs" / "neutral_1d_ring.json"
    assert main(["astra", str(bad), str(system), "--size", "1M"]) == 2
    assert "topology is 'Ring'; ASTRA-sim needs a list" in capsys.readouterr().err
    assert parse_size("64M") == parse_size("64MiB") == 2**26 and parse_size("1MB") == 10**6


def test_a_course_topology_moves_to_astra_sim_files_and_back_with_the_same_times(tmp_path):
    """Course -> ASTRA-sim files -> course: the course's simulator and this mode agree."""
    course = T.two_level(2, 4, (500e-9, 50 * T.GIB), (2500e-9, 10 * T.GIB))
    astra.to_astra_sim(course, tmp_path / "net.yml")
    astra.to_astra_system(astra.SystemConfig.neutral("ring", "ring"), tmp_path / "sys.json")
    back = astra.from_astra_sim(tmp_path / "net.yml")
    assert back.dims == course.dims
    n = 2**26
    ours = T.simulate_on_topology(sch.hierarchical_all_reduce(8, 4, intra="ring"), back, n).time
    theirs = astra.simulate_astra(tmp_path / "net.yml", tmp_path / "sys.json", "all_reduce", n).time
    assert theirs == pytest.approx(ours, rel=1e-3)
    one_server = T.Topology(course.dims[:1])
    ours = T.simulate_on_topology(sch.ring_all_reduce(4), one_server, n).time
    theirs = astra.simulate_astra(one_server, astra.SystemConfig.neutral(), "all_reduce", n).time
    assert theirs == pytest.approx(ours, rel=1e-3)


def test_a_message_across_dimensions_pays_only_the_first_that_differs():
    """oneRing on Ring(4) x Switch(2): NPU 3 -> 4 differs in both, ASTRA-sim charges dim 0."""
    ring_switch = astra.from_astra_sim(DATA / "inputs" / "Ring_Switch.yml")
    res = astra.simulate_astra(
        ring_switch, astra.SystemConfig.neutral("oneRing"), "all_reduce", 2**26
    )
    step = 500 + (2**26 // 8) / (50 * 2**30 / 1e9)  # a 1-hop Ring message of size/8
    assert res.finish_ns.max() == pytest.approx(14 * step + 15, rel=1e-6)  # 14 steps, 15 hand-ons


def test_fewer_algorithms_than_dimensions_run_in_those_only_and_the_report_says_so():
    case = next(
        c
        for c in CASES
        if c["network"].endswith("Ring_Switch.yml") and c["system"].endswith("neutral_1d_ring.json")
    )
    res = _run(case)
    assert res.finish_ns.tolist() == case["finish_ns"]
    assert "note: only the first 1 of 2 dimensions take part" in res.report()
