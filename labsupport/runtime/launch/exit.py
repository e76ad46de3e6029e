"""How a rank's process ends once its group is destroyed (launcher ranks, torchrun scripts)."""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn


def exit_now(code: int | None) -> NoReturn:
    """End a rank's process with ``code`` once its group is destroyed: flush, then ``os._exit``.

    Why not let Python shut down: a gloo process group's worker thread can drop its
    last reference to a finished collective's tensors a moment after the collective
    returned; if Python has begun to shut down by then, taking the GIL ends that thread
    and the process aborts with "terminate called without an active exception"
    (SIGABRT; pytorch/pytorch#179291 describes the mechanism). ``destroy_process_group``
    does not stop those threads while anything still refers to the group, and torch
    itself keeps references to it once an optimizer has been built. This course's CI
    saw it in about one torchrun run in fifteen on a loaded 2-core machine. ``os._exit``
    skips the shutdown, so the exit code is the program's; call it only after
    ``destroy_process_group``.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
