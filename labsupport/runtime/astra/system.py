"""Read and write ASTRA-sim system configs (``system.json``): how a collective is cut and run.

The file says, per collective, which algorithm runs in each dimension, and how the
NPUs' system layer behaves (ASTRA-sim's ``examples/system/native_collectives/
HGX-H100-validated.json``)::

    {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 2,
     "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"], ...,
     "collective-optimization": "localBWAware", "local-mem-bw": 3350, "boost-mode": 0}

Every key ASTRA-sim reads is listed in :data:`KEYS` with what it does to a collective's
time and the source line that says so (astra-sim/astra-sim at commit 518bd513; ``Sys.cc``
is ``astra-sim/system/Sys.cc``); any other key is refused by name. A file keeps its
keys, order and values, so it is written back unchanged. Units: ``local-mem-bw`` is
decimal GB/s (x 10**9, ``Sys.cc:389``), unlike the network's GB = 2**30 bytes.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
ALGORITHMS = (
    "ring",
    "direct",
    "halvingDoubling",
    "doubleBinaryTree",
    "oneRing",
    "oneDirect",
    "oneHalvingDoubling",
)
_IMPL = {c: c.replace("_", "-") + "-implementation" for c in COLLECTIVES}
_SHARED_BUS = (
    "used only by the shared-bus model (MemBus.cc:42-62), off unless model-shared-bus is 1"
)

#: key -> (what it does to a collective's time, where ASTRA-sim says so)
KEYS: dict[str, tuple[str, str]] = {
    "scheduling-policy": (
        "modelled: a collective's priority against other collectives' "
        "(all its chunks share one, so one collective alone is unaffected)",
        "Sys.cc:325-336, 680, 1021-1034, 1040-1118",
    ),
    "collective-optimization": (
        "modelled: baseline runs the collective in every dimension; "
        "localBWAware reduce-scatters up the dimensions, all-reduces "
        "the last and all-gathers back",
        "Sys.cc:337-347, 768-939",
    ),
    "active-chunks-per-dimension": (
        "modelled: chunks running at once in a dimension",
        "Sys.cc:351-353, 229-234",
    ),
    "preferred-dataset-splits": (
        "modelled: chunks per collective (at least #NPUs bytes each)",
        "Sys.cc:380-382, 1009-1019",
    ),
    "endpoint-delay": (
        "modelled: ns each time an NPU hands a packet on (default 10, >= 1)",
        "Sys.cc:199, 366-369; MemBus.cc:52-62",
    ),
    "local-mem-bw": (
        "modelled: a reduced packet costs 3 x bytes / (local-mem-bw x 10**9) s",
        "Sys.cc:387-390; PacketBundle.cc:53-63",
    ),
    **{
        k: ("modelled: the algorithm in each dimension", "CollectiveImplLookup.cc:97-129")
        for k in _IMPL.values()
    },
    "boost-mode": ("no effect: ASTRA-sim never reads it", "Sys.cc:312-431 has no such key"),
    "roofline-enabled": ("no effect: times compute nodes only", "Sys.cc:391-397; Workload.cc:175"),
    "peak-perf": ("no effect: the roofline's compute peak", "Sys.cc:383-386"),
    "track-local-mem": ("no effect: writes a memory-usage trace", "Sys.cc:414-422"),
    "local-mem-trace-filename": ("no effect: that trace's file name", "Sys.cc:423-425"),
    "trace-enabled": ("no effect: debug log lines", "Sys.cc:398-405; Workload.cc:154"),
    **{
        k: ("no effect: " + _SHARED_BUS, "Sys.cc:348-365")
        for k in ("L", "o", "g", "G", "local-reduction-delay")
    },
    "model-shared-bus": (
        "0 accepted (no effect); 1, a LogGP memory bus, is not modelled",
        "Sys.cc:370-379; LogGP.cc",
    ),
    "replay-only": (
        "0 accepted (no effect); 1 replays recorded durations instead",
        "Sys.cc:406-413; Workload.cc:168",
    ),
    **{
        k.replace("-implementation", "-implementation-custom"): (
            "kept, not run: a custom collective is a Chakra ET program",
            "CollectiveImplLookup.cc:133-181",
        )
        for k in _IMPL.values()
    },
    "per-node-custom-implementation": (
        "kept, not run: custom collectives per ET node",
        "CollectiveImplLookup.cc:184-194",
    ),
}


@dataclass(frozen=True)
class SystemConfig:
    """An ASTRA-sim system config: its keys and values as in the file, checked."""

    values: dict
    name: str = "system"
    source: str = field(default="dict", compare=False)

    def __post_init__(self) -> None:
        for key, value in self.values.items():
            _check(self.source, key, value)

    @classmethod
    def neutral(
        cls, *algorithms: str, collective_optimization: str = "localBWAware"
    ) -> SystemConfig:
        """A system layer that adds next to nothing: 1 chunk, 1 at a time, 1 ns per hand-on.

        ``local-mem-bw`` is 10**9 GB/s so a reduction costs 0 ns below 10**9 bytes.
        ``algorithms`` are per dimension (default one ``ring``), for every collective.
        """
        impl = list(algorithms or ("ring",))
        values = {
            "scheduling-policy": "LIFO",
            "endpoint-delay": 1,
            "active-chunks-per-dimension": 1,
            "preferred-dataset-splits": 1,
            **{k: impl for k in _IMPL.values()},
            "collective-optimization": collective_optimization,
            "local-mem-bw": 10**9,
        }
        return cls(values, name="neutral")

    def implementations(self, collective: str) -> list[str]:
        """The algorithm per dimension for ``collective`` (``all_reduce``, ...)."""
        key = _IMPL[collective_name(collective)]
        custom = key.replace("-implementation", "-implementation-custom")
        for k in (custom, "per-node-custom-implementation"):
            if k in self.values:
                raise ValueError(
                    f"{self.source}: {k} names a custom collective (a Chakra ET program, "
                    f"{KEYS[k][1]}); the ASTRA-sim mode runs native collectives only: "
                    f"remove {k} and give {key}"
                )
        if key not in self.values:
            raise ValueError(
                f"{self.source} has no {key}: ASTRA-sim stops with 'No collective "
                f"implementation found' (CollectiveImplLookup.cc:233); add e.g. "
                f'"{key}": ["ring"]'
            )
        return list(self.values[key])

    def get(self, key: str) -> object:
        """A value the run needs; refuse where ASTRA-sim would leave it undefined."""
        defaults = {"endpoint-delay": 10, "active-chunks-per-dimension": 1}  # Sys.cc:199, 189
        if key in self.values:
            return self.values[key]
        if key in defaults:
            return defaults[key]
        why = {
            "preferred-dataset-splits": "it divides by it (Sys.cc:1010)",
            "local-mem-bw": "a reduction divides by it (PacketBundle.cc:57)",
            "scheduling-policy": "it is left uninitialised (Sys.hh:305)",
            "collective-optimization": "it is left uninitialised (Sys.hh:325)",
        }[key]
        raise ValueError(f"{self.source} has no {key}, and ASTRA-sim needs it: {why}")


def collective_name(name: str) -> str:
    """``all_reduce`` from ``all-reduce``, ``AllReduce`` or ``all_reduce``."""
    key = name.replace("-", "_").lower()
    key = {
        "allreduce": "all_reduce",
        "allgather": "all_gather",
        "reducescatter": "reduce_scatter",
        "alltoall": "all_to_all",
    }.get(key, key)
    if key not in COLLECTIVES:
        raise ValueError(f"collective {name!r} is not one of {COLLECTIVES}")
    return key


def from_astra_system(config: str | PathLike | dict, name: str | None = None) -> SystemConfig:
    """A :class:`SystemConfig` from an ASTRA-sim system ``.json`` (path) or its dict."""
    if isinstance(config, dict):
        return SystemConfig(dict(config), name or "system", "dict")
    path = Path(config)
    if not path.is_file():
        raise FileNotFoundError(f"no ASTRA-sim system config at {path}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path} is not JSON ({err}): an ASTRA-sim system config is a "
            'JSON object such as {"preferred-dataset-splits": 4, ...}'
        ) from err
    if not isinstance(data, dict):
        raise ValueError(
            f"{path}: an ASTRA-sim system config is a JSON object, not {type(data).__name__}"
        )
    return SystemConfig(data, name or path.stem, str(path))


def to_astra_system(config: SystemConfig, path: str | PathLike | None = None) -> dict:
    """The config as a dict, and as JSON in ``path`` if given (keys in their order)."""
    values = dict(config.values)
    if path is not None:
        body = ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in values.items())
        Path(path).write_text("{\n" + body + "\n}\n")  # one key a line, as ASTRA-sim's own
    return values


def _check(source: str, key: str, value: object) -> None:
    """Refuse what ASTRA-sim refuses or would misread, naming the file, the key and the fix."""
    where = f"{source}: {key}"
    if key not in KEYS:
        near = difflib.get_close_matches(key, KEYS, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ValueError(f"{where} is not a key ASTRA-sim reads{hint}; the keys are {list(KEYS)}")
    choices = {
        "scheduling-policy": ("LIFO", "FIFO", "EXPLICIT"),
        "collective-optimization": ("baseline", "localBWAware"),
    }
    if key in choices and value not in choices[key]:
        raise ValueError(f"{where} is {value!r}; ASTRA-sim accepts {choices[key]} ({KEYS[key][1]})")
    counts = ("active-chunks-per-dimension", "preferred-dataset-splits", "endpoint-delay")
    if key in counts and (not _is_int(value) or value < 1):
        why = " (at 0 ASTRA-sim aborts: EventQueue.cpp:33 asserts)" if value == 0 else ""
        raise ValueError(f"{where} is {value!r}; it must be a whole number >= 1{why}")
    if key in ("local-mem-bw", "peak-perf") and (not _is_number(value) or value <= 0):
        raise ValueError(f"{where} is {value!r}; it must be a number > 0 (decimal GB/s or TFLOPS)")
    if key in ("model-shared-bus", "replay-only") and value != 0:
        raise ValueError(f"{where} = {value!r} is not modelled ({KEYS[key][1]}); set it to 0")
    if key.endswith("-implementation"):
        if not isinstance(value, list) or not value:
            raise ValueError(
                f'{where} must be a list, one algorithm per dimension, e.g. ["ring"]; got {value!r}'
            )
        for i, algo in enumerate(value):
            if not _valid_algorithm(algo):
                raise ValueError(
                    f"{where}[{i}] is {algo!r}; ASTRA-sim knows {ALGORITHMS} "
                    "(and directN / oneDirectN with a window N)"
                )
    if key.endswith("-implementation-custom") and not (
        isinstance(value, list) and len(value) == 1 and isinstance(value[0], str)
    ):
        raise ValueError(
            f"{where} must list exactly one Chakra ET path (CollectiveImplLookup.cc:136-139)"
        )


def _valid_algorithm(name: object) -> bool:
    if not isinstance(name, str):
        return False
    for prefix in ("direct", "oneDirect"):  # CollectiveImplLookup.cc:28-39: a window after it
        digits = name[len(prefix) :]
        if name.startswith(prefix) and digits.isdigit() and 0 < int(digits) and len(digits) <= 5:
            return True
    return name in ALGORITHMS


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def window(algorithm: str) -> int:
    """The window of ``directN``/``oneDirectN``: peers sent to at once (-1: all of them)."""
    for prefix in ("oneDirect", "direct"):
        if algorithm.startswith(prefix) and algorithm[len(prefix) :].isdigit():
            return int(algorithm[len(prefix) :])
    return -1
