"""The "netem" process group: gloo underneath, every message timed by the link model.

``dist.init_process_group("netem", ...)`` (after :func:`register`) gives a
group whose point-to-point messages and collectives behave like gloo's, only
slower, as if they crossed the emulated network:

- ``send``/``isend`` stamp the message with the time it will have left the
  sender's link (:meth:`LinkClock.send`, from the call), send stamp and data
  as one gloo message, and return at once; ``recv``/``irecv`` add the queue on
  the receiving NIC (:meth:`LinkClock.receive`): the message's deadline.
- collectives run a real algorithm (:mod:`labsupport.runtime.emulator.algorithms`) on a
  background thread, one at a time in the order they were called (as a NCCL
  stream does), chaining the steps on the emulated clock without sleeping.

Every operation returns an :class:`~labsupport.runtime.emulator.work.EmulatedWork` whose
``wait()`` blocks until the data is here, then moves the caller's emulated
clock (:mod:`labsupport.runtime.emulator.clock`) to the operation's end. Times are all
emulated: an operation starts at the calling thread's emulated "now", and the
backend's own host work (packing, gloo over loopback) is hidden from it.
"""

from __future__ import annotations

import datetime
import math
import queue
import threading
from collections.abc import Callable

import torch
import torch.distributed as dist

from labsupport.netem.network import Network
from labsupport.runtime.emulator import algorithms as algo
from labsupport.runtime.emulator import clock
from labsupport.runtime.emulator.calls import hide_library_calls
from labsupport.runtime.emulator.state import STATE, Operation
from labsupport.runtime.emulator.wire import COLLECTIVE_TAG, Wire, nbytes_of
from labsupport.runtime.emulator.work import EmulatedWork, install_futures


class EmulatedGroup(dist.ProcessGroup):
    """A process group on the emulated network (see the module docstring)."""

    def __init__(self, store, rank: int, size: int, timeout, global_ranks: list[int]) -> None:
        super().__init__(rank, size)
        inner = dist.ProcessGroupGloo(dist.PrefixStore("netem", store), rank, size, timeout)
        self.wire = Wire(inner, rank, global_ranks or list(range(size)))
        self._jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._serve, name="netem-collectives", daemon=True).start()

    # ----------------------------------------------------------------- plumbing
    def getBackendName(self) -> str:
        return "netem"

    def node_size(self) -> int:
        """Ranks per node, for the hierarchical algorithm (a subgroup counts as one node)."""
        net = STATE.network
        if net is None or self.size() != STATE.world_size:
            return self.size()
        return net.node_size(self.size())

    def expect(self, recvs: list[tuple[torch.Tensor, int]], tag: int = COLLECTIVE_TAG) -> list:
        """Post receives now, for :meth:`exchange` (see :meth:`Wire.expect`)."""
        return self.wire.expect(recvs, tag)

    def exchange(
        self,
        sends: list[tuple[torch.Tensor, int]],
        recvs: list[tuple[torch.Tensor, int]],
        at: float,
        tag: int = COLLECTIVE_TAG,
        posted: list | None = None,
    ) -> float:
        """Send and receive at once, from emulated time ``at`` (see :meth:`Wire.exchange`)."""
        return self.wire.exchange(sends, recvs, at, tag, posted)

    def _collective(
        self, fn: Callable[[float], float], result: list[torch.Tensor], calls: list[tuple]
    ) -> dist.Work:
        """Queue ``fn(start) -> end`` on the collective thread; a Work done at that end.

        It starts (in emulated time) when it was called or when the previous
        collective of this group ended, whichever is later. The thread does not
        sleep: it hands the end time to the Work and goes on with the next job.
        """
        with clock.hidden():
            called = clock.now()
            work = EmulatedWork(result, issued=called, operations=_log(calls, called))
            with STATE.lock:
                for log in STATE.recorders:
                    log.extend(calls)
            self._jobs.put((fn, work, called))
        return work

    def _serve(self) -> None:
        last_end = 0.0
        while True:
            fn, work, called = self._jobs.get()
            try:
                last_end = fn(max(called, last_end))
            except BaseException as exc:
                work.ready(-math.inf, exc)
            else:
                work.ready(last_end)

    # ----------------------------------------------------------------- point-to-point
    # No thread per message: the first wait() waits for gloo, then sleeps until arrival.
    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> dist.Work:
        with clock.hidden():
            called = clock.now()
            posted, done = self.wire.post(tensors[0], dst, tag, called)
            with STATE.lock:
                STATE.p2p_bytes_sent += nbytes_of(tensors[0])
            ops = _log([("send", "direct", nbytes_of(tensors[0]))], called)

        def settle() -> float:  # gloo has sent it: it has left our link at ``done``
            posted.wait()
            return done

        return EmulatedWork(tensors, settle, posted, issued=called, operations=ops)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> dist.Work:
        with clock.hidden():
            called = clock.now()
            posted = self.wire.start_receive(tensors[0], src, tag)
            ops = _log([("recv", "direct", nbytes_of(tensors[0]))], called)
        settle = lambda: self.wire.arrival(tensors[0], src, posted)  # noqa: E731
        return EmulatedWork(tensors, settle, posted[1], issued=called, operations=ops)

    def recv_anysource(self, tensors, tag):
        raise RuntimeError("the netem backend needs a source rank: call recv(tensor, src=...)")

    # ----------------------------------------------------------------- collectives
    # Each returns at once; the work runs on the collective thread (see _collective).
    # ``at`` is the emulated start time, each algorithm returns its end time.
    def _each(
        self, tensors: list[torch.Tensor], one: Callable, name: str, algorithm: str = "tree"
    ) -> dist.Work:  # one(t, at) -> end
        def run(at: float) -> float:
            for t in tensors:
                at = one(t, at)
            return at

        return self._collective(run, tensors, [(name, algorithm, nbytes_of(t)) for t in tensors])

    def allreduce(self, tensors, opts=None):
        op, a = opts.reduceOp, STATE.algorithm
        return self._each(
            tensors, lambda t, at: algo.all_reduce(self, t, op, a, at), "all_reduce", a
        )

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank
        return self._each(tensors, lambda t, at: algo.broadcast(self, t, root, at), "broadcast")

    def reduce(self, tensors, opts=None):
        root, op = opts.rootRank, opts.reduceOp
        return self._each(tensors, lambda t, at: algo.reduce(self, t, root, op, at), "reduce")

    def allgather(self, output_lists, inputs, opts=None):
        a = STATE.algorithm

        def run(at: float) -> float:
            for outs, inp in zip(output_lists, inputs, strict=True):
                flat = torch.empty(len(outs) * inp.numel(), dtype=inp.dtype)
                at = algo.all_gather(self, flat, inp, a, at)
                for out, piece in zip(outs, flat.chunk(len(outs)), strict=True):
                    out.copy_(piece.view_as(out))
            return at

        calls = [
            ("all_gather", a, nbytes_of(i) * len(o))
            for o, i in zip(output_lists, inputs, strict=True)
        ]
        return self._collective(run, [t for outs in output_lists for t in outs], calls)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        a = STATE.algorithm

        def run(at: float) -> float:
            for out, inp in zip(outputs, inputs, strict=True):
                at = algo.all_gather(self, out, inp, a, at)
            return at

        return self._collective(
            run, list(outputs), [("all_gather", a, nbytes_of(o)) for o in outputs]
        )

    def all_gather_single(self, output, input, opts=None):
        return self.allgather_into_tensor_coalesced([output], [input], opts)

    _allgather_base = all_gather_single

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        op, a = opts.reduceOp, STATE.algorithm

        def run(at: float) -> float:
            for out, inp in zip(outputs, inputs, strict=True):
                at = algo.reduce_scatter(self, out, inp, op, a, at)
            return at

        calls = [("reduce_scatter", a, nbytes_of(i)) for i in inputs]
        return self._collective(run, list(outputs), calls)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        flats = [torch.cat([t.reshape(-1) for t in ins]) for ins in input_lists]
        return self.reduce_scatter_tensor_coalesced(outputs, flats, opts)

    def reduce_scatter_single(self, output, input, opts=None):
        return self.reduce_scatter_tensor_coalesced([output], [input], opts)

    _reduce_scatter_base = reduce_scatter_single

    def alltoall(self, outputs, inputs, opts=None):
        calls = [("all_to_all", "pairwise", sum(nbytes_of(t) for t in inputs))]
        return self._collective(
            lambda at: algo.all_to_all(self, outputs, inputs, at), outputs, calls
        )

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        p = self.size()
        outs = list(output.split(output_split_sizes or [output.shape[0] // p] * p))
        ins = list(input.split(input_split_sizes or [input.shape[0] // p] * p))
        calls = [("all_to_all", "pairwise", nbytes_of(input))]
        return self._collective(lambda at: algo.all_to_all(self, outs, ins, at), [output], calls)

    alltoall_base = all_to_all_single

    def gather(self, output_lists, inputs, opts=None):
        root, outs = opts.rootRank, (output_lists[0] if output_lists else [])
        run = lambda at: algo.gather(self, outs, inputs[0], root, at)  # noqa: E731
        return self._collective(
            run, list(outs) or list(inputs), [("gather", "direct", nbytes_of(inputs[0]))]
        )

    def scatter(self, outputs, input_lists, opts=None):
        root, ins = opts.rootRank, (input_lists[0] if input_lists else [])
        calls = [("scatter", "direct", nbytes_of(outputs[0]))]
        return self._collective(
            lambda at: algo.scatter(self, outputs[0], ins, root, at), outputs, calls
        )

    def barrier(self, opts=None):
        calls = [("barrier", "dissemination", 1)]
        return self._collective(lambda at: algo.barrier(self, at), [torch.zeros(1)], calls)


def _log(calls: list[tuple[str, str, int]], called: float) -> list[Operation]:
    """The operations of one call, appended to every :func:`operations` log open now."""
    with STATE.lock:
        if not STATE.operation_logs:
            return []
        backward = torch._C._current_autograd_node() is not None
        thread = threading.current_thread().name
        ops = [Operation(n, a, b, called, backward, thread) for n, a, b in calls]
        for log in STATE.operation_logs:
            log.extend(ops)
    return ops


def _create(dist_opts, backend_opts) -> EmulatedGroup:
    """The backend creator torch calls (``extended_api=True``: it gets the global ranks)."""
    global_ranks = list(dist_opts.global_ranks_in_group)
    if not global_ranks and STATE.clock is None:
        raise RuntimeError(
            "netem: call labsupport.runtime.emulator.register(network) before init_process_group"
        )
    timeout = dist_opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    return EmulatedGroup(
        dist_opts.store, dist_opts.group_rank, dist_opts.group_size, timeout, global_ranks
    )


def register(network: Network, world_size: int) -> str:
    """Make ``"netem"`` a torch.distributed backend on ``network``; returns its name."""
    STATE.configure(network, world_size)
    clock.install()  # from now on this process reads the emulated clock
    hide_library_calls()  # torch.distributed's own Python costs no emulated time
    install_futures()  # torch.futures.wait_all and collect_all wait on emulated time
    if "netem" not in dist.Backend.backend_list:
        dist.Backend.register_backend("netem", _create, extended_api=True, devices=["cpu"])
    return "netem"
