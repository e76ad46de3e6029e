"""ASTRA-sim's input files: every shipped config loads (or is refused by name) and round-trips.

The shipped configs in tests/data/astra/shipped/ are copies of astra-sim/astra-sim's
(commit 518bd513) and its analytical backend's; SOURCES.txt says where each comes from.
"""

import json
from pathlib import Path

import pytest
import yaml

from labsupport import topology as T
from labsupport.runtime import astra
from labsupport.runtime.astra.system import KEYS

DATA = Path(__file__).resolve().parents[1] / "data" / "astra"
NETWORKS = sorted((DATA / "shipped" / "network").glob("*.yml"))
SYSTEMS = sorted((DATA / "shipped" / "system").glob("*.json"))
RING = {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}


def test_the_shipped_configs_are_all_here():
    assert len(NETWORKS) == 19 and len(SYSTEMS) == 14


@pytest.mark.parametrize("path", NETWORKS, ids=lambda p: p.name)
def test_every_shipped_network_round_trips_or_is_refused_by_name(path, tmp_path):
    original = yaml.safe_load(path.read_text())
    if "tbd" in path.read_text().split("#")[0] or path.name == "dgx_v100_8gpu.yml":
        # ASTRA-sim's own dgx_v100_8gpu.yml has bandwidth: [ tbd, tbd, tbd ]: it cannot run it.
        with pytest.raises(ValueError, match=r"dgx_v100_8gpu.yml: bandwidth\[0\] is 'tbd'"):
            astra.from_astra_sim(path)
        return
    topo = astra.from_astra_sim(path)
    written = astra.to_astra_sim(topo, tmp_path / path.name)
    assert written == original  # every value, e.g. 936.25 and 400 (== 400.0)
    again = astra.from_astra_sim(tmp_path / path.name)
    assert again.dims == topo.dims
    assert yaml.safe_load((tmp_path / path.name).read_text()) == original


@pytest.mark.parametrize("path", SYSTEMS, ids=lambda p: p.name)
def test_every_shipped_system_config_round_trips_key_for_key(path, tmp_path):
    original = json.loads(path.read_text())
    cfg = astra.from_astra_system(path)
    astra.to_astra_system(cfg, tmp_path / path.name)
    again = json.loads((tmp_path / path.name).read_text())
    assert again == original and list(again) == list(original)  # values and key order
    assert astra.from_astra_system(tmp_path / path.name) == cfg


def test_every_key_astra_sim_ships_is_listed_with_its_effect_and_source():
    shipped = {k for p in SYSTEMS for k in json.loads(p.read_text())}
    assert shipped <= set(KEYS)
    for key in shipped:
        effect, source = KEYS[key]
        assert effect.split(":")[0] in ("modelled", "no effect", "kept, not run"), key
        assert ".cc" in source, key
    assert KEYS["boost-mode"][0].startswith("no effect")
    assert KEYS["local-mem-bw"][0].startswith("modelled")


def test_a_custom_collective_loads_but_is_not_run():
    cfg = astra.from_astra_system(DATA / "shipped" / "system" / "custom_collective.json")
    with pytest.raises(ValueError, match="all-reduce-implementation-custom names a custom"):
        astra.simulate_astra(RING, cfg, "all_reduce", 2**20)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"npus_count": [8.7]}, r"npus_count\[0\] is 8.7; write a whole number"),
        ({"npus_count": [1]}, r"npus_count\[0\] is 1; ASTRA-sim refuses a dimension of fewer"),
        ({"topology": "Ring"}, r"topology is 'Ring'; ASTRA-sim needs a list.*topology: \[ Ring \]"),
        ({"bandwidth": ["tbd"]}, r"bandwidth\[0\] is 'tbd'; ASTRA-sim needs a number > 0"),
        ({"latency": [500.0, 1.0]}, ".* must list the same number of dimensions"),
        ({"topology": ["Torus"]}, r"topology\[0\] is 'Torus'"),
        ({"bidirectional": [True]}, "bidirectional is not a key of an ASTRA-sim network"),
    ],
)
def test_the_network_reader_refuses_what_astra_sim_refuses_naming_file_and_key(
    tmp_path, change, message
):
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump({**RING, **change}))
    with pytest.raises(ValueError, match=f"bad.yml: {message}"):
        astra.from_astra_sim(path)


def test_a_system_config_given_as_network_says_so(tmp_path):
    path = tmp_path / "sys.yml"
    path.write_text(yaml.safe_dump({"scheduling-policy": "LIFO", "all-reduce-implementation": []}))
    with pytest.raises(ValueError, match="looks like a system config: read it with"):
        astra.from_astra_sim(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"endpoint_delay": 10},
            r"endpoint_delay is not a key ASTRA-sim reads \(did you mean "
            r"'endpoint-delay'\?\)",
        ),
        ({"all-reduce-implementation": "ring"}, r"all-reduce-implementation must be a list"),
        (
            {"all-reduce-implementation": ["ring", "tree"]},
            r"all-reduce-implementation\[1\] is 'tree'",
        ),
        ({"preferred-dataset-splits": 2.5}, r"preferred-dataset-splits is 2.5; it must be a whole"),
        ({"active-chunks-per-dimension": 0}, r"active-chunks-per-dimension is 0"),
        ({"collective-optimization": "fast"}, r"collective-optimization is 'fast'"),
        ({"model-shared-bus": 1}, r"model-shared-bus = 1 is not modelled"),
        ({"local-mem-bw": "tbd"}, r"local-mem-bw is 'tbd'"),
    ],
)
def test_the_system_reader_refuses_by_name(tmp_path, change, message):
    path = tmp_path / "sys.json"
    path.write_text(json.dumps({**astra.SystemConfig.neutral().values, **change}))
    with pytest.raises(ValueError, match=f"sys.json: {message}"):
        astra.from_astra_system(path)


def test_what_a_run_needs_and_astra_sim_leaves_undefined_is_refused():
    values = dict(astra.SystemConfig.neutral().values)
    del values["local-mem-bw"]
    with pytest.raises(ValueError, match="has no local-mem-bw, and ASTRA-sim needs it"):
        astra.simulate_astra(RING, values, "all_reduce", 2**20)
    with pytest.raises(ValueError, match="has no all-gather-implementation"):
        astra.simulate_astra(RING, {"all-reduce-implementation": ["ring"]}, "all_gather", 2**20)
    with pytest.raises(ValueError, match="power-of-two number of NPUs, got 6"):
        six = {**RING, "npus_count": [6]}
        astra.simulate_astra(
            six, astra.SystemConfig.neutral("halvingDoubling"), "all_reduce", 2**20
        )
    two_d = {
        "topology": ["Ring", "Switch"],
        "npus_count": [4, 2],
        "bandwidth": [50.0, 10.0],
        "latency": [500.0, 2500.0],
    }
    with pytest.raises(ValueError, match="congestion-aware backend runs 1-dimensional networks"):
        astra.simulate_astra(
            two_d, astra.SystemConfig.neutral("ring", "ring"), "all_reduce", 2**20, True
        )


def test_the_writer_never_writes_a_file_astra_sim_refuses(tmp_path):
    # The 1 x 8 preset has a second dimension of 1 NPU; ASTRA-sim refuses npus_count 1.
    one_server = T.presets["ascend-a2-1x8"]
    assert one_server.shape == (8, 1)
    written = astra.to_astra_sim(one_server, tmp_path / "a2.yml")
    assert written["npus_count"] == [8] and written["topology"] == ["FullyConnected"]
    assert astra.from_astra_sim(tmp_path / "a2.yml").npus == 8
    text = (tmp_path / "a2.yml").read_text()
    assert text.startswith("# ASTRA-sim network config") and "npus_count: [8]" in text
