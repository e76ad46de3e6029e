"""Regenerate reference.json: ASTRA-sim's own times for the cases the tests compare against.

    python tests/data/astra/make_reference.py ASTRA_SIM/build/astra_analytical/build/bin [--new]

Needs ASTRA-sim's analytical binaries (see README.md: how they were built here); CI never
runs this, it reads the stored reference.json. For every case it writes one Chakra
execution trace per NPU holding a single collective node (as chakra's generator.py
``generate_comm_coll_node`` does, protobuf encoded by hand below), runs the binary and
keeps each NPU's ``sys[i] finished, N cycles``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).parent
COMM_TYPE = {"all_reduce": 0, "all_gather": 2, "all_to_all": 6, "reduce_scatter": 7}
FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")
MIB = 2**20
ALGOS = (
    "ring",
    "direct",
    "halvingDoubling",
    "doubleBinaryTree",
    "oneRing",
    "oneDirect",
    "oneHalvingDoubling",
)


# -- Chakra ET: varint-length-delimited GlobalMetadata, then one Node ----------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(num: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):  # varint (wire type 0)
        return _varint(num << 3) + _varint(payload)
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def et_file(collective: str, nbytes: int) -> bytes:
    """GlobalMetadata(version 0.0.4); Node(id 0, COMM_COLL_NODE, is_cpu_op, comm_type, comm_size).

    The node also has empty ``inputs``/``outputs`` string lists: with ``track-local-mem``
    ASTRA-sim's LocalMemUsageTracker.cc:50,109 throws without them, drops the event and
    never finishes (the shipped hgx_h100_{8,16,32}gpu.json turn it on).
    """
    meta = _field(1, b"0.0.4")
    node = _field(2, collective.upper().encode()) + _field(3, 7)
    node += _field(10, _field(1, b"is_cpu_op") + _field(27, 0))
    node += _field(10, _field(1, b"comm_type") + _field(9, COMM_TYPE[collective]))
    node += _field(10, _field(1, b"comm_size") + _field(9, nbytes))
    for name in (b"inputs", b"outputs"):  # empty tensor lists: track-local-mem reads them
        node += _field(10, _field(1, name) + _field(30, b""))
    return _varint(len(meta)) + meta + _varint(len(node)) + node


def run(
    bin_dir: Path, network: Path, system: Path, collective: str, nbytes: int, aware: bool
) -> list[int] | str:
    """Each NPU's finish time in ns, or ASTRA-sim's error output when it finished none."""
    exe = bin_dir / f"AstraSim_Analytical_Congestion_{'Aware' if aware else 'Unaware'}"
    npus = 1
    for n in yaml.safe_load(network.read_text())["npus_count"]:
        npus *= n
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "mem_trace").mkdir()
        for i in range(npus):
            (tmp / f"coll.{i}.et").write_bytes(et_file(collective, nbytes))
        (tmp / "mem.json").write_text('{"memory-type": "NO_MEMORY_EXPANSION"}')
        cmd = [
            str(exe),
            f"--workload-configuration={tmp / 'coll'}",
            f"--system-configuration={system.resolve()}",
            f"--remote-memory-configuration={tmp / 'mem.json'}",
            f"--network-configuration={network.resolve()}",
            f"--logging-folder={tmp / 'log'}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=3600)
    found = dict(FINISHED.findall(proc.stdout))
    if len(found) != npus:
        return f"rc {proc.returncode}: " + (proc.stdout + proc.stderr).strip()[-300:]
    return [int(found[str(i)]) for i in range(npus)]


# -- the course's own inputs: networks and neutral system configs ---------------------------
NETWORKS = {
    "Ring_6.yml": ("Ring", 6, 50.0, 500.0),
    "Switch_6.yml": ("Switch", 6, 100.0, 250.0),
    "FullyConnected_8.yml": ("FullyConnected", 8, 50.0, 500.0),
    "Ring_Switch.yml": (["Ring", "Switch"], [4, 2], [50.0, 10.0], [500.0, 2500.0]),
    "FullyConnected_8_Switch_1.yml": (
        ["FullyConnected", "Switch"],
        [8, 1],
        [50.0, 25.0],
        [0.0, 0.0],
    ),  # what to_astra_sim wrote for a 1 x 8 preset
}


def neutral(algos: list[str], optimization: str = "localBWAware") -> dict:
    return {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 1,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 1,
        **{
            f"{c}-implementation": algos
            for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
        },
        "collective-optimization": optimization,
        "local-mem-bw": 10**9,
    }


def listed(v: object) -> list:
    return v if isinstance(v, list) else [v]


def write_inputs() -> None:
    inputs = HERE / "inputs"
    inputs.mkdir(exist_ok=True)
    for name, (kind, n, bw, lat) in NETWORKS.items():
        cfg = {
            "topology": listed(kind),
            "npus_count": listed(n),
            "bandwidth": listed(bw),
            "latency": listed(lat),
        }
        (inputs / name).write_text(yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None))
    for dims in (1, 2, 3):
        for algo in ALGOS:
            if algo.startswith("one") and dims == 1:
                continue
            algos = [algo] if algo.startswith("one") else [algo] * dims
            # one* makes a single logical dimension, where baseline = localBWAware
            multi = dims > 1 and not algo.startswith("one")
            for opt in ("localBWAware", "baseline") if multi else ("localBWAware",):
                name = f"neutral_{dims}d_{algo}{'_baseline' if opt == 'baseline' else ''}.json"
                (inputs / name).write_text(json.dumps(neutral(algos, opt), indent=4) + "\n")
    for name, system in {  # the system layer at work: chunks, active chunks, delays, reductions
        "chunks4_active2_1d_ring.json": {
            **neutral(["ring"]),
            "endpoint-delay": 10,
            "active-chunks-per-dimension": 2,
            "preferred-dataset-splits": 4,
            "local-mem-bw": 50,
        },
        "chunks3_2d_direct_ring.json": {
            **neutral(["direct", "ring"]),
            "endpoint-delay": 7,
            "preferred-dataset-splits": 3,
            "local-mem-bw": 100,
        },
        "chunks4_active2_1d_ring_fifo.json": {
            **neutral(["ring"]),
            "scheduling-policy": "FIFO",
            "active-chunks-per-dimension": 2,
            "preferred-dataset-splits": 4,
            "local-mem-bw": 50,
        },
        "window2_1d_direct.json": {**neutral(["direct2"]), "preferred-dataset-splits": 2},
        "endpoint_delay_0.json": {**neutral(["ring"]), "endpoint-delay": 0},
    }.items():
        (inputs / name).write_text(json.dumps(system, indent=4) + "\n")


def cases() -> list[dict]:
    shipped, inputs = "shipped/network/", "inputs/"
    one_d = [
        shipped + "Ring_8npus.yml",
        shipped + "HGX-H100-validated.yml",
        shipped + "FullyConnected.yml",
        shipped + "Switch.yml",
        inputs + "Ring_6.yml",
        inputs + "Switch_6.yml",
        inputs + "FullyConnected_8.yml",
    ]
    multi = {
        2: [
            shipped + "hgx_h100_16gpu.yml",
            shipped + "tpu_v3_32_2dtorus.yml",
            inputs + "Ring_Switch.yml",
        ],
        3: [shipped + "Ring_FullyConnected_Switch.yml"],
    }
    out, sysdir_ = [], "shipped/system/"

    def add(net, sysc, coll="all_reduce", sizes=(MIB, 64 * MIB), aware=(False,)):
        for size in sizes:
            for a in aware:
                out.append(
                    {
                        "network": net,
                        "system": sysc,
                        "collective": coll,
                        "nbytes": size,
                        "congestion_aware": a,
                    }
                )

    for net in one_d:
        power_of_two = "_6" not in net
        for algo in ALGOS[:4]:
            if algo in ("halvingDoubling", "doubleBinaryTree") and not power_of_two:
                continue
            add(net, f"inputs/neutral_1d_{algo}.json", aware=(False, True))
            for coll in ("all_gather", "reduce_scatter", "all_to_all"):
                if algo == "doubleBinaryTree" or (
                    algo == "halvingDoubling" and coll == "all_to_all"
                ):
                    continue
                add(net, f"inputs/neutral_1d_{algo}.json", coll, sizes=(MIB,), aware=(False, True))
        add(net, "inputs/chunks4_active2_1d_ring.json", aware=(False, True))
        add(net, "inputs/chunks4_active2_1d_ring_fifo.json", sizes=(MIB,), aware=(False, True))
        add(net, "inputs/window2_1d_direct.json", aware=(False, True))
    add(
        inputs + "Ring_6.yml",
        "inputs/neutral_1d_ring.json",
        sizes=(1_000_003,),
        aware=(False, True),
    )
    for dims, nets in multi.items():
        for net in nets:
            for algo in ALGOS:
                for opt in ("",) if algo.startswith("one") else ("", "_baseline"):
                    add(net, f"inputs/neutral_{dims}d_{algo}{opt}.json")
            for algo in ("ring", "direct", "halvingDoubling", "oneRing"):
                for coll in ("all_gather", "reduce_scatter"):
                    add(net, f"inputs/neutral_{dims}d_{algo}.json", coll, sizes=(MIB,))
    add(inputs + "Ring_Switch.yml", "inputs/chunks3_2d_direct_ring.json")
    # fewer algorithms than dimensions: ASTRA-sim runs the collective in dimension 0 only
    add(inputs + "Ring_Switch.yml", "inputs/neutral_1d_ring.json", sizes=(MIB,))
    # what ASTRA-sim cannot run: the mode refuses it too
    add(inputs + "Ring_6.yml", "inputs/endpoint_delay_0.json", sizes=(MIB,))
    add(inputs + "FullyConnected_8_Switch_1.yml", "inputs/neutral_1d_ring.json", sizes=(MIB,))
    add(shipped + "dgx_v100_8gpu.yml", sysdir_ + "dgx_v100_8gpu.json", sizes=(MIB,))
    sysdir = "shipped/system/"
    for sysc, nets in {
        "HGX-H100-validated.json": ["HGX-H100-validated.yml"],
        "Ring_4chunks.json": ["Ring_4npus.yml", "Ring_8npus.yml", "Ring_16npus.yml"],
        "system_cfg.json": ["network_cfg.yml"],
        "hgx_h100_2gpu.json": ["hgx_h100_2gpu.yml"],
        "hgx_h100_4gpu.json": ["hgx_h100_4gpu.yml"],
        "hgx_h100_8gpu.json": ["hgx_h100_8gpu.yml"],
        "hgx_h100_16gpu.json": ["hgx_h100_16gpu.yml"],
        "hgx_h100_32gpu.json": ["hgx_h100_32gpu.yml"],
        "tpu_v3_8.json": ["tpu_v3_8.yml"],
        "tpu_v3_32_ring.json": ["tpu_v3_32_ring.yml"],
        "tpu_v3_32_2dtorus.json": ["tpu_v3_32_2dtorus.yml"],
        "dgx_v100_4gpu.json": ["dgx_v100_4gpu.yml"],
        "dgx_v100_8gpu.json": ["Ring_FullyConnected_Switch.yml"],
    }.items():
        for net in nets:
            one = len(yaml.safe_load((HERE / shipped / net).read_text())["npus_count"]) == 1
            add(shipped + net, sysdir + sysc, aware=(False, True) if one else (False,))
            if sysc in ("HGX-H100-validated.json", "hgx_h100_16gpu.json", "tpu_v3_8.json"):
                for coll in ("all_gather", "reduce_scatter", "all_to_all"):
                    add(shipped + net, sysdir + sysc, coll, sizes=(MIB,))
    return out


def _key(case: dict) -> tuple:
    return tuple(case[k] for k in ("network", "system", "collective", "nbytes", "congestion_aware"))


def main(bin_dir: str, only_new: bool = False) -> None:
    """Run every case (or, with ``--new``, those reference.json lacks) and write it."""
    write_inputs()
    stored = {}
    if only_new and (HERE / "reference.json").is_file():
        stored = {_key(c): c for c in json.loads((HERE / "reference.json").read_text())["cases"]}
    results = []
    for i, case in enumerate(cases()):
        if _key(case) in stored:
            results.append(stored[_key(case)])
            continue
        got = run(
            Path(bin_dir),
            HERE / case["network"],
            HERE / case["system"],
            case["collective"],
            case["nbytes"],
            case["congestion_aware"],
        )
        print(i, case, got if isinstance(got, str) else max(got), flush=True)
        results.append(
            {**case, "finish_ns": got}
            if isinstance(got, list)
            else {**case, "astra_sim_error": got}
        )
    meta = json.loads((HERE / "astra_sim_build.json").read_text())
    (HERE / "reference.json").write_text(json.dumps({**meta, "cases": results}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], only_new="--new" in sys.argv)
