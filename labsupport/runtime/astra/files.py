"""Read and write ASTRA-sim analytical network configs (``network.yml``), so topologies carry over.

The file has one list per key, one entry per dimension::

    topology: [ Ring, Switch ]   # Ring, FullyConnected or Switch
    npus_count: [ 4, 2 ]         # 2 or more each
    bandwidth: [ 50.0, 10.0 ]    # GB/s, with ASTRA-sim's GB = 2**30 bytes
    latency: [ 500.0, 2500.0 ]   # ns per hop

(``Ring_Switch.yml`` of the ASTRA-sim tutorials, HOTI 2024 demo 4.) The reader refuses
what ASTRA-sim's parser refuses or misreads (astra-network-analytical,
``common/network-parser/NetworkParser.cpp``): a scalar where a list is needed, a
count that is not a whole number, ``tbd``, a dimension of one NPU, lists of
different lengths, and any other key; the error names the file, the key and the fix.
The writer writes only files ASTRA-sim runs: it drops dimensions of one NPU (they
carry no traffic, so times do not change) and refuses what the format cannot say.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

import yaml

from labsupport.topology.model import KINDS, Dim, Topology

_KEYS = ("topology", "npus_count", "bandwidth", "latency")
_HEADER = "# ASTRA-sim network config: bandwidth in GB/s (GB = 2^30 B), latency in ns per hop\n"


def from_astra_sim(config: str | PathLike | dict, name: str | None = None) -> Topology:
    """A :class:`Topology` from an ASTRA-sim network config: a YAML file's path, or its dict."""
    if isinstance(config, dict):
        data, source = config, "dict"
    else:
        path = Path(config)
        if not path.is_file():
            raise FileNotFoundError(f"no ASTRA-sim network config at {path}")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise ValueError(f"{path} is not YAML: {err}") from err
        source, name = str(path), name or path.stem
    if not isinstance(data, dict):
        raise ValueError(
            f"{source}: an ASTRA-sim network config is a mapping with the keys "
            f"{_KEYS}, not {type(data).__name__}"
        )
    missing = [k for k in _KEYS if k not in data]
    extra = [k for k in data if k not in _KEYS]
    if missing or extra:
        hint = ""
        if any(k in data for k in ("scheduling-policy", "all-reduce-implementation")):
            hint = " (this looks like a system config: read it with astra.from_astra_system)"
        what = f"{extra[0]} is not a key of" if extra else f"{missing[0]} is missing from"
        raise ValueError(
            f"{source}: {what} an ASTRA-sim network config, which needs the keys "
            f"{_KEYS} and no others{hint}"
        )
    columns = {k: _column(source, k, data[k]) for k in _KEYS}
    lengths = {k: len(v) for k, v in columns.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(
            f"{source}: {_KEYS} must list the same number of dimensions, got {lengths}"
        )
    dims = []
    for i, (kind, npus, bw, lat) in enumerate(zip(*columns.values(), strict=True)):
        if kind not in KINDS:
            raise ValueError(f"{source}: topology[{i}] is {kind!r}; ASTRA-sim knows {KINDS}")
        if isinstance(npus, bool) or not isinstance(npus, int):
            raise ValueError(f"{source}: npus_count[{i}] is {npus!r}; write a whole number of NPUs")
        if npus < 2:
            raise ValueError(
                f"{source}: npus_count[{i}] is {npus}; ASTRA-sim refuses a dimension "
                "of fewer than 2 NPUs ('npus_count should be larger than 1'): "
                "remove that dimension"
            )
        for key, value, low in (("bandwidth", bw, "> 0 GB/s"), ("latency", lat, ">= 0 ns")):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(
                    f"{source}: {key}[{i}] is {value!r}; ASTRA-sim needs a number "
                    f"{low} there (a placeholder such as tbd stops its parser)"
                )
        if bw <= 0 or lat < 0:
            raise ValueError(
                f"{source}: bandwidth[{i}] must be > 0 and latency[{i}] >= 0, got {bw} and {lat}"
            )
        dims.append(Dim(kind, npus, float(bw), float(lat)))
    return Topology(tuple(dims), name=name or "astra-sim", sources=(f"ASTRA-sim config {source}",))


def to_astra_sim(topo: Topology, path: str | PathLike | None = None) -> dict:
    """The ASTRA-sim network config of ``topo`` as a dict (and as YAML in ``path`` if given).

    Dimensions of one NPU are left out (ASTRA-sim refuses them; they carry nothing).
    A unidirectional Ring, or an ``uplink`` other than ``"rail"``, cannot be written.
    """
    if topo.uplink != "rail":
        raise ValueError(
            f'ASTRA-sim has no uplink="{topo.uplink}": its NPU i reaches NPU i of other servers'
        )
    if any(d.kind == "Ring" and not d.bidirectional for d in topo.dims):
        raise ValueError("ASTRA-sim's network.yml has no field for a unidirectional Ring")
    dims = [d for d in topo.dims if d.npus > 1]
    if not dims:
        raise ValueError(f"{topo.name} has a single NPU: ASTRA-sim needs 2 or more")
    config = {
        "topology": [d.kind for d in dims],
        "npus_count": [d.npus for d in dims],
        "bandwidth": [float(d.bandwidth) for d in dims],
        "latency": [float(d.latency) for d in dims],
    }
    if path is not None:
        body = yaml.safe_dump(config, sort_keys=False, default_flow_style=None)
        Path(path).write_text(_HEADER + body)
    return config


def _column(source: str, key: str, value: object) -> list:
    """One key's list; a scalar is refused, as ASTRA-sim's ``parse_vector`` cannot read it."""
    if not isinstance(value, list):
        raise ValueError(
            f"{source}: {key} is {value!r}; ASTRA-sim needs a list, one entry per "
            f"dimension: {key}: [ {value} ]"
        )
    return value
