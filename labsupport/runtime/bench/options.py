"""What to benchmark: options in nccl-tests' spelling, checked, and the list of sizes.

Sizes take nccl-tests' suffixes K, M, G, which are powers of 1024 (1K = 1024
bytes); bandwidths are in GB/s with GB = 1e9 bytes, as in nccl-tests. The
suffix only picks the sizes: the table prints exact bytes.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import torch

from labsupport.reduce_ops import BY_NAME
from labsupport.runtime.bench.collectives import COLLECTIVES

#: nccl-tests' type names (and common aliases) -> torch dtypes.
DTYPES: dict[str, torch.dtype] = {
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int32": torch.int32,
    "int64": torch.int64,
    "half": torch.float16,
    "float": torch.float32,
    "double": torch.float64,
    "bfloat16": torch.bfloat16,
}
DTYPE_ALIASES = {
    "char": "int8",
    "int": "int32",
    "float16": "half",
    "fp16": "half",
    "float32": "float",
    "fp32": "float",
    "float64": "double",
    "fp64": "double",
    "bf16": "bfloat16",
}
AVERAGE_NAMES = {0: "rank 0", 1: "avg", 2: "min", 3: "max"}
#: A sweep longer than this is almost surely a typo (e.g. -i 1 with -e 1G).
MAX_SIZES = 1000

_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kKmMgG]?)[bB]?\s*$")
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str | int, what: str = "size") -> int:
    """Bytes for "64", "1K", "1.5M", "2G" (powers of 1024, as nccl-tests' -b/-e/-i)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = _SIZE.match(str(text))
        if not m:
            raise ValueError(
                f"invalid {what} {text!r}: give a number of bytes with an optional "
                "K, M or G suffix (powers of 1024, as in nccl-tests), e.g. 1K or 64M"
            )
        value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value < 0:
        raise ValueError(f"invalid {what} {text!r}: must not be negative")
    return value


def canonical_collective(name: str) -> str:
    """Collective names as the benchmark spells them: "AllReduce" -> "all_reduce".

    "allreduce" and "all-reduce" too; "send_recv" -> "sendrecv".
    """
    key = re.sub(r"[\s_\-/]", "", str(name)).lower()
    for canonical in COLLECTIVES:
        if key == canonical.replace("_", ""):
            return canonical
    raise ValueError(f"unknown collective {name!r}; choose one of: {', '.join(COLLECTIVES)}")


def canonical_dtype(name: str) -> str:
    """nccl-tests' name of a datatype ("float", "half", ...), accepting torch-style aliases."""
    key = str(name).lower().removeprefix("torch.")
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise ValueError(
            f"unknown or unsupported datatype {name!r}; choose one of: {', '.join(DTYPES)} "
            "(uint32/uint64 exist in nccl-tests but not in torch.distributed)"
        )
    return key


@dataclass
class BenchOptions:
    """One benchmark run. Field names are nccl-tests' long options.

    ``stepfactor`` multiplies the size at each step (nccl-tests' -f); when it is
    None, ``stepbytes`` (-i) is added instead if given, else the factor is 2.
    ``check`` is the number of verification runs per size (0: no check).
    ``average`` says how the time of each rank becomes the group's time:
    0 rank 0's, 1 the mean, 2 the min, 3 the max (nccl-tests' -a).
    """

    collective: str = "all_reduce"
    minbytes: int = 1024
    maxbytes: int = 16 * 1024**2
    stepfactor: float | None = None
    stepbytes: int | None = None
    iters: int = 20
    warmup_iters: int = 5
    check: int = 1
    datatype: str = "float"
    op: str = "sum"
    root: int = 0
    average: int = 1
    inject_fault: int = 0  # corrupt this many elements of rank 0's result before checking

    def __post_init__(self) -> None:
        self.collective = canonical_collective(self.collective)
        self.datatype = canonical_dtype(self.datatype)
        self.minbytes = parse_size(self.minbytes, "minbytes")
        self.maxbytes = parse_size(self.maxbytes, "maxbytes")
        if self.stepbytes is not None:
            self.stepbytes = parse_size(self.stepbytes, "stepbytes")
        self.validate()

    def validate(self) -> None:
        """Raise ValueError with a clear message for an impossible combination."""
        if self.minbytes > self.maxbytes:
            raise ValueError(
                f"minbytes ({self.minbytes}) is larger than maxbytes ({self.maxbytes})"
            )
        if self.stepfactor is not None and not self.stepfactor > 1:
            raise ValueError(
                f"stepfactor must be greater than 1 (it multiplies the size at each step); "
                f"got {self.stepfactor}. To add a fixed number of bytes, use -i/--stepbytes."
            )
        if self.stepfactor is None and self.stepbytes is not None and self.stepbytes < 1:
            raise ValueError(f"stepbytes must be at least 1; got {self.stepbytes}")
        if self.op not in BY_NAME:
            raise ValueError(f"unknown op {self.op!r}; choose one of: {', '.join(BY_NAME)}")
        if self.op == "avg" and not self.dtype.is_floating_point:
            raise ValueError(f"op avg needs a floating-point datatype, not {self.datatype}")
        for name, low in (("iters", 1), ("warmup_iters", 0), ("check", 0), ("root", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be a whole number >= {low}; got {value!r}")
        if self.average not in AVERAGE_NAMES:
            raise ValueError(
                f"average must be 0 (rank 0), 1 (avg), 2 (min) or 3 (max); got {self.average!r}"
            )
        if len(self.sizes()) > MAX_SIZES:
            raise ValueError(
                f"this sweep has more than {MAX_SIZES} sizes; use a larger -f/--stepfactor "
                "or -i/--stepbytes"
            )

    @property
    def dtype(self) -> torch.dtype:
        """The torch dtype of ``datatype``."""
        return DTYPES[self.datatype]

    def sizes(self) -> list[int]:
        """Requested sizes in bytes, from minbytes to maxbytes (inclusive), as nccl-tests steps."""
        sizes, size = [], self.minbytes
        factor = (
            self.stepfactor
            if self.stepfactor is not None
            else (None if self.stepbytes is not None else 2)
        )
        while size <= self.maxbytes and len(sizes) <= MAX_SIZES:
            sizes.append(size)
            if factor is not None:
                size = max(int(size * factor), size + 1)  # from 0, step to 1
            else:
                size += self.stepbytes
        return sizes

    def to_dict(self) -> dict:
        """The options as plain data (for the JSON file)."""
        return asdict(self)
