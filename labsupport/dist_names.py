"""The names of torch.distributed's communication functions: the one list the course keeps.

Start at :data:`CALLS`. The runtime's emulator wraps every one of them (so that torch's
own Python costs no emulated time), its trace records :data:`TRACED` by default, and
:data:`RENAMED` are the two old names the course keeps.
"""

from __future__ import annotations

import warnings

#: torch 2.13 renamed these two to ``all_gather_single`` / ``reduce_scatter_single``, but
#: torch_npu does not have the new names yet, so the course keeps the old ones everywhere
#: and silences torch's FutureWarning about them (:func:`quiet_renamed`).
RENAMED = ("all_gather_into_tensor", "reduce_scatter_tensor")

#: The collectives a trace records unless told others
#: (:func:`labsupport.runtime.trace.collectives`): the tensor collectives the training
#: code calls (DDP's all-reduces, ZeRO's reduce-scatter and all-gather, compression's
#: all-gathers). Deliberately fewer than :data:`CALLS`: point-to-point messages (a
#: schedule sends many per step) and barrier (it moves no data) would bury the
#: collectives on the timeline; pass ``names=`` to record any of the others.
TRACED = (
    "all_reduce",
    "broadcast",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all_single",
)

#: Every function of torch.distributed that moves data or waits for other ranks: the
#: traced collectives, the other collectives, barrier, point-to-point, and the
#: collectives of Python objects.
CALLS = (
    *TRACED,
    "all_to_all",
    "gather",
    "scatter",
    "barrier",
    "send",
    "recv",
    "isend",
    "irecv",
    "batch_isend_irecv",
    "all_gather_object",
    "gather_object",
    "scatter_object_list",
    "broadcast_object_list",
    "send_object_list",
    "recv_object_list",
)


def quiet_renamed() -> None:
    """Silence torch's FutureWarning for the :data:`RENAMED` collectives, in this process."""
    for name in RENAMED:
        warnings.filterwarnings("ignore", f".*{name}.* is deprecated", FutureWarning)
