"""One rank of a local group: the process that runs your cells.

The kernel (``cluster.py``) starts ``python -m labsupport.runtime.launch.worker`` once
per rank, with the usual torchrun variables (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT) set. The worker then

1. watches its stdin: it is a pipe from the kernel, so end-of-file means the
   kernel is gone (killed, crashed, closed) and the worker exits at once;
2. arms ``faulthandler`` so that SIGUSR1 writes every thread's Python stack to
   a file, which is how the kernel shows where a hung rank is blocked;
3. joins the process group, then serves requests from its control socket:
   run some source text, or call a pickled function, and send back the value
   or the traceback.

Everything a rank prints goes to its own stdout/stderr pipes, which the kernel
reads; after each request the worker writes an end marker to both so the
kernel knows it has all of that request's output.
"""

from __future__ import annotations

import ast
import ctypes
import datetime
import faulthandler
import io
import linecache
import os
import signal
import sys
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any

from labsupport.dist_names import quiet_renamed
from labsupport.runtime.language import follow
from labsupport.runtime.launch.stacks import tidy_traceback

END_MARKER = "\x1eLABSUPPORT-END-{}\x1e"


def _watch_lifeline() -> None:
    """Exit as soon as the kernel's end of our stdin pipe closes."""
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    os._exit(70)


def _init_process_group(rank: int, world_size: int) -> tuple[Any, Any]:
    """Join the group on 127.0.0.1; return (torch.distributed, this rank's device)."""
    import torch
    import torch.distributed as dist

    backend = os.environ["LABSUPPORT_BACKEND"]
    local_rank = int(os.environ["LOCAL_RANK"])
    if backend == "hccl":
        import torch_npu  # noqa: F401  (registers the "npu" device and the "hccl" backend)

        torch.npu.set_device(local_rank)
        device = torch.device("npu", local_rank)
    elif backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    timeout = datetime.timedelta(seconds=float(os.environ["LABSUPPORT_PG_TIMEOUT"]))
    port = int(os.environ["MASTER_PORT"])
    listen_fd = os.environ.get("LABSUPPORT_STORE_FD")
    # Rank 0 serves the rendezvous store on a socket the kernel already bound to
    # 127.0.0.1: left to itself, TCPStore would listen on every interface.
    store = dist.TCPStore(
        "127.0.0.1",
        port,
        world_size,
        is_master=rank == 0,
        timeout=timeout,
        wait_for_workers=False,
        master_listen_fd=int(listen_fd) if listen_fd else None,
    )
    if os.environ.get("LABSUPPORT_NETWORK"):  # an emulated network (labsupport.netem)
        from labsupport.runtime.emulator import install_from_env

        backend = install_from_env()
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
    return dist, device


def _flush_all() -> None:
    """Flush Python's and C's stdio buffers, so output reaches the pipes now."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def _mark_end(task_id: int) -> None:
    _flush_all()
    marker = ("\n" + END_MARKER.format(task_id) + "\n").encode()
    for fd in (1, 2):
        os.write(fd, marker)


def _open_figures() -> list[bytes]:
    """PNG bytes of every matplotlib figure left open by the cell; closes them."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    pngs = []
    for num in plt.get_fignums():
        buf = io.BytesIO()
        plt.figure(num).savefig(buf, format="png", bbox_inches="tight")
        pngs.append(buf.getvalue())
    plt.close("all")
    return pngs


def _to_cpu(value: Any) -> Any:
    """Copy device tensors (npu/cuda) to the CPU so the kernel can unpickle them."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu() if value.device.type != "cpu" else value
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(_to_cpu(v) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: _to_cpu(v) for k, v in value.items()}
    return value


def _exec_source(source: str, filename: str, namespace: dict[str, Any]) -> Any:
    """Run ``source`` like an IPython cell: the last bare expression is the value."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    tree = ast.parse(source, filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, filename, "exec"), namespace)
    if last is not None and source.rstrip().endswith(";"):  # IPython: ";" hides the value
        eval(compile(last, filename, "eval"), namespace)
        return None
    if last is not None:
        return eval(compile(last, filename, "eval"), namespace)
    return None


def _format_exception(exc: BaseException) -> str:
    """The traceback of ``exc`` without this module's own frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return tidy_traceback("".join(traceback.format_exception(type(exc), exc, tb)))


def _register_sources(sources: dict[str, str]) -> None:
    """Keep the source of cells that have no file, so tracebacks can show their lines."""
    for filename, source in sources.items():
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


def _error_payload(exc: BaseException) -> dict[str, str]:
    """What the kernel needs to show an exception raised by a cell."""
    if isinstance(exc, SystemExit):
        code = exc.code if exc.code is not None else 0
        return {
            "type": "SystemExit",
            "message": f"the cell called sys.exit({code!r}): exit code {code!r} (the rank "
            "keeps running; to end a cell early, use an if, a return or an exception)",
            "traceback": _format_exception(exc),
        }
    return {"type": type(exc).__name__, "message": str(exc), "traceback": _format_exception(exc)}


def _pickled_value(value: Any) -> tuple[str, Any]:
    """("ok", pickled value), or ("error", why it cannot be sent back)."""
    import cloudpickle

    try:
        return "ok", cloudpickle.dumps(_to_cpu(value))
    except Exception as exc:
        kind = type(value).__name__
        return "error", {
            "type": "UnpicklableValue",
            "message": f"the cell's value (a {kind}) cannot be sent back to the notebook "
            f"({type(exc).__name__}: {exc}). Return plain data instead (a number, a string, "
            "a tensor, or x.tolist()), or print it on the rank.",
            "traceback": "",
        }


def _send_reply(conn: Connection, reply: tuple) -> None:
    """Send a reply that an interrupt (SIGINT) cannot cut in half."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        _mark_end(reply[1])
        conn.send(reply)
    finally:
        if hasattr(signal, "pthread_sigmask"):
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            except KeyboardInterrupt:  # an interrupt that came too late for the cell
                pass


def _serve(conn: Connection, namespace: dict[str, Any]) -> None:
    """Answer requests until told to stop or the kernel goes away."""
    import cloudpickle

    while True:
        try:
            request = conn.recv()
        except KeyboardInterrupt:  # an interrupt that arrived between two cells
            continue
        except (EOFError, OSError):
            return
        kind, task_id = request[0], request[1]
        if kind == "shutdown":
            return
        if len(request) > 4:  # the kernel's language (lab.set_language), sent with each cell
            follow(request[4])
        try:
            if kind == "exec":
                value = _exec_source(request[2], request[3], namespace)
            else:  # "call"
                _register_sources(request[3])
                fn, args, kwargs = cloudpickle.loads(request[2])
                value = fn(*args, **kwargs)
            status, payload = _pickled_value(value)
        except BaseException as exc:
            status, payload = "error", _error_payload(exc)
        try:
            figures = _open_figures()
        except Exception:  # a broken figure must not lose the result
            figures = []
        try:
            _send_reply(conn, ("result", task_id, status, payload, figures))
        except KeyboardInterrupt:
            pass


def main() -> None:
    """Entry point of one rank (started by :class:`labsupport.Cluster`)."""
    quiet_renamed()  # the old collective names the course keeps (see labsupport.dist_names)
    threading.Thread(target=_watch_lifeline, name="lifeline", daemon=True).start()
    sys.stdin = open(os.devnull)
    stack_file = open(os.environ["LABSUPPORT_STACK_FILE"], "w")
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    conn = Connection(int(os.environ["LABSUPPORT_CTL_FD"]))
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    conn.send(("hello", rank, os.getpid(), threading.get_ident()))
    try:
        dist, device = _init_process_group(rank, world_size)
    except BaseException as exc:
        _mark_end(0)
        conn.send(("init_error", rank, _format_exception(exc)))
        return
    import torch

    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "rank": rank,
        "world_size": world_size,
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "device": device,
        "torch": torch,
        "dist": dist,
    }
    _mark_end(0)
    conn.send(("ready", rank, str(device)))
    try:
        _serve(conn, namespace)
    finally:
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:
                pass
    from labsupport.runtime.launch.exit import exit_now

    exit_now(0)  # skip Python's shutdown: faster, and no gloo abort at exit (see exit_now)


if __name__ == "__main__":
    main()
