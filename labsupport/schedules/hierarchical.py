"""Two-level (hierarchical) all-reduce: reduce-scatter in each node, all-reduce across, all-gather.

This is what HCCL runs on multi-server Ascend systems (intra-server
reduce-scatter, inter-server all-reduce, intra-server all-gather) and what
ASTRA-sim calls ``localBWAware``. The builder lives with the others in
:mod:`labsupport.schedules.builders` (its phases are :class:`Rotation` rules,
so it scales to thousands of ranks); this module keeps the import path
``labsupport.schedules.hierarchical.hierarchical_all_reduce`` working.
"""

from __future__ import annotations

from labsupport.schedules.builders import hierarchical_all_reduce

__all__ = ["hierarchical_all_reduce"]
