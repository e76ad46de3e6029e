"""Read and write ASTRA-sim analytical network configs (``network.yml``), so topologies carry over.

The file has one list per key, one entry per dimension::

    topology: [ Ring, Switch ]   # Ring, FullyConnected or Switch
    npus_count: [ 4, 2 ]
    bandwidth: [ 50.0, 10.0 ]    # GB/s, with ASTRA-sim's GB = 2**30 bytes
    latency: [ 500.0, 2500.0 ]   # ns per hop

(``Ring_Switch.yml`` of the ASTRA-sim tutorials, HOTI 2024 demo 4.)
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

import yaml

from labsupport.topology.model import KINDS, Dim, Topology

_KEYS = ("topology", "npus_count", "bandwidth", "latency")


def from_astra_sim(config: str | PathLike | dict, name: str | None = None) -> Topology:
    """A :class:`Topology` from an ASTRA-sim network config: a YAML file's path, or its dict."""
    if isinstance(config, dict):
        data, source = config, "dict"
    else:
        path = Path(config)
        if not path.is_file():
            raise FileNotFoundError(f"no ASTRA-sim network config at {path}")
        data, source = yaml.safe_load(path.read_text()), str(path)
        name = name or path.stem
    if not isinstance(data, dict) or any(k not in data for k in _KEYS):
        raise ValueError(
            f"an ASTRA-sim network config needs the keys {_KEYS}; {source} has "
            f"{sorted(data) if isinstance(data, dict) else type(data).__name__}"
        )
    columns = [_as_list(data[k]) for k in _KEYS]
    if len({len(c) for c in columns}) != 1:
        raise ValueError(
            f"{source}: {_KEYS} must list the same number of dimensions, got "
            f"{[len(c) for c in columns]}"
        )
    dims = []
    for kind, npus, bw, lat in zip(*columns, strict=True):
        if kind not in KINDS:
            raise ValueError(f"{source}: topology {kind!r} is not one of {KINDS}")
        dims.append(Dim(kind, int(npus), float(bw), float(lat)))
    return Topology(tuple(dims), name=name or "astra-sim", sources=(f"ASTRA-sim config {source}",))


def to_astra_sim(topo: Topology, path: str | PathLike | None = None) -> dict:
    """The ASTRA-sim network config of ``topo`` as a dict (and as YAML in ``path`` if given).

    A unidirectional Ring cannot be written: the YAML format has no field for it.
    """
    if topo.uplink != "rail":
        raise ValueError(
            f'ASTRA-sim has no uplink="{topo.uplink}": its NPU i reaches NPU i of other servers'
        )
    if any(d.kind == "Ring" and not d.bidirectional for d in topo.dims):
        raise ValueError("ASTRA-sim's network.yml has no field for a unidirectional Ring")
    config = {
        "topology": [d.kind for d in topo.dims],
        "npus_count": [d.npus for d in topo.dims],
        "bandwidth": [float(d.bandwidth) for d in topo.dims],
        "latency": [float(d.latency) for d in topo.dims],
    }
    if path is not None:
        header = "# ASTRA-sim network config: bandwidth in GB/s (GB = 2^30 B), latency in ns\n"
        body = "".join(f"{k}: [ {', '.join(map(str, v))} ]\n" for k, v in config.items())
        Path(path).write_text(header + body)
    return config


def _as_list(value: object) -> list:
    return list(value) if isinstance(value, list | tuple) else [value]
