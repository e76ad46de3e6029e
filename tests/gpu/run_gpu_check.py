"""``make test-gpu``: the CUDA and NCCL paths on a real NVIDIA machine (issue 36).

The course's CUDA and NCCL paths (backend "auto", the device from ``LOCAL_RANK``,
``torch.cuda.synchronize`` and CUDA events in the timing helper and the benchmark, the DDP
and ZeRO-1 versions, the capstone) were written from documentation and tested with fakes.
This script runs them on a lent NVIDIA machine in at most 5 minutes, and says what ran.

It never installs into the system: it runs with the machine's own Python and torch,
``labsupport`` from the repository (``PYTHONPATH=.``), and, when ``.whl/`` holds wheels and
Jupyter is missing, installs them with ``pip install --no-index --no-deps --target`` into a
temporary folder put on ``PYTHONPATH`` (``make gpu-wheels`` prepares ``.whl/`` where
there is network; see tests/gpu/README.md).

    make test-gpu PY=python3                     # on the machine; the report goes to $OUT
    python3 tests/gpu/run_gpu_check.py --out DIR # the same
    python tests/gpu/run_gpu_check.py --dry-run --out DIR   # here, on the CPU with gloo

Steps, in order of value; seconds expected on the machine / the step's timeout. A step
starts only if its expected time fits in what is left of the 290 s budget (else it is
reported "skipped"), and runs at most its timeout (or what is left, if less):

====  =================  ====  =====  ======================================================
 no   step               exp.  limit  what passes
====  =================  ====  =====  ======================================================
 1    doctor               5     60   "auto" picks nccl on cuda for 1 rank (gloo on cpu
                                      in the dry run); versions recorded
 2    timing              10     60   a kernel of known length (torch.cuda._sleep, 50 ms):
                                      CUDA events and time_iterations agree with
                                      device_clock (synchronized host clock) within 15 %;
                                      the host clock without synchronize sees < 20 %
 3    bench               20     90   torchrun, 1 rank, NCCL, 1K..64M: exit 0 (#wrong 0)
 4    bench-fault          8     60   the same with --inject-fault 3: exit 1 (#wrong seen)
 5    hello_ranks          8     60   torchrun, 1 rank, auto: "device cuda:0", sum right
 6    ddp_overlap         15     90   torchrun, 1 rank, nccl, --version bucket --check
 7    capstone-bucket     20    120   torchrun, 1 rank, nccl, --strategy bucket --check
 8    capstone-zero1      20    120   the same, --strategy zero1
 9    capstone-torch      20    120   the same, --strategy torch
 10   nb-nccl             15     90   a generated notebook: %%ranks -n 1 --backend nccl,
                                      a tensor on the rank's device, all_reduce
 11   auto-4-ranks        15     60   4 ranks "auto" with fewer GPUs than ranks: gloo on
                                      cpu for every rank, the reason names the GPU count
 12   nb-00               30    150   notebooks/solutions/00 executed (nbclient), no error
 13   nb-01               45    180   notebooks/solutions/01, the same
 14   alpha-beta          40    120   bench all_reduce, gloo, 8 and 16 ranks: α-β fit
                                      (reported, not stored)
 15   nb-06               60    240   notebooks/solutions/06, the same as 12
 16   nb-07               60    240   notebooks/solutions/07, the same as 12
====  =================  ====  =====  ======================================================

The dry run (``--dry-run``, run by ``make test`` through tests/gpu/test_gpu_check.py) runs
on the CPU with gloo every step whose CPU run takes under 10 s (the ``cpu_s`` below), with
smaller sizes; for the others it checks that each command parses (torchrun's and the
script's own parser) and that the files exist, without running them (nbval runs the
notebooks). The report, ``gpu-check.json`` and ``gpu-check.md`` (and ``gpu-check.log``, every
step's output, and ``bench.json``), is rewritten in ``--out`` after every step, so that a
run stopped at its limit still returns what ran. Exit status: 0 when no step failed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUDGET_S = 290.0
#: A step's output kept in the JSON report (the whole of it goes to the log).
TAIL = 3000
#: The notebooks' cells must never wait longer than this for one cell.
CELL_TIMEOUT = 240


@dataclass
class Step:
    """One check: its command (a list per mode), what it should take, and how it is judged."""

    name: str
    title: str
    expected_s: float
    timeout_s: float
    cpu_s: float  # its CPU run here, quiet machine: under 10 s, the dry run runs it
    gpu: list[str]
    cpu: list[str] | None = None  # the dry run's command (None: the same as gpu's)
    exit_code: int = 0
    expect: dict[str, str] = field(default_factory=dict)  # mode -> text the output must hold
    files: list[str] = field(default_factory=list)  # must exist (checked in every mode)


@dataclass
class Outcome:
    """What happened to one step."""

    name: str
    title: str
    status: str  # passed, failed, timeout, skipped, checked, not run
    seconds: float
    expected_s: float
    timeout_s: float
    command: str
    summary: str = ""
    output_tail: str = ""
    cpu_seconds: float = 0.0  # user + system time of its processes (the dry run's 10 s rule)


def _tr(args: str) -> list[str]:
    """``python -m torch.distributed.run`` (torchrun) with one rank on this machine."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1"] + (
        shlex.split(args)
    )


def _inner(name: str, arg: str) -> list[str]:
    """This script, running one of the INNER steps in a process of its own."""
    return [sys.executable, str(Path(__file__).resolve()), "--inner", name, arg]


def build_steps(out: Path) -> list[Step]:
    """The steps, in order of value (see the module's docstring)."""
    bench = "-m labsupport.runtime.bench"
    json_file = shlex.quote(str(out / "bench.json"))
    sums = "sum of ranks 0 (expected 0)"
    ddp = "examples/ddp_overlap.py --version bucket --check"
    steps = [
        Step(
            "doctor",
            "doctor(): what it detects and what auto picks",
            5,
            60,
            3,
            gpu=_inner("doctor", "gpu"),
            cpu=_inner("doctor", "cpu"),
        ),
        Step(
            "timing",
            "timing helper: CUDA events and synchronize vs a host clock",
            10,
            60,
            4,
            gpu=_inner("timing", "gpu"),
            cpu=_inner("timing", "cpu"),
        ),
        Step(
            "bench",
            "benchmark under torchrun, NCCL, 1 rank",
            20,
            90,
            6,
            gpu=_tr(f"{bench} -b 1K -e 64M -f 4 --backend nccl --json {json_file}"),
            cpu=_tr(f"{bench} -b 1K -e 16K -f 4 -n 3 -w 1 --backend gloo --json {json_file}"),
            expect={"gpu": "backend nccl", "cpu": "backend gloo"},
        ),
        Step(
            "bench-fault",
            "the benchmark sees a planted error (#wrong, exit 1)",
            8,
            60,
            5,
            gpu=_tr(f"{bench} -b 1K -e 4K -n 2 --backend nccl --inject-fault 3"),
            cpu=_tr(f"{bench} -b 1K -e 4K -n 2 --backend gloo --inject-fault 3"),
            exit_code=1,
        ),
        Step(
            "hello_ranks",
            "examples/hello_ranks.py under torchrun, auto",
            8,
            60,
            4,
            gpu=_tr("examples/hello_ranks.py --backend auto"),
            expect={"gpu": f"device cuda:0; {sums}", "cpu": f"device cpu; {sums}"},
            files=["examples/hello_ranks.py"],
        ),
        Step(
            "ddp_overlap",
            "examples/ddp_overlap.py --version bucket --check",
            15,
            90,
            8,
            gpu=_tr(f"{ddp} --backend nccl"),
            cpu=_tr(f"{ddp} --backend gloo --steps 2 --warmup 1 --hidden 64 --layers 2"),
            expect={"gpu": "nccl on cuda:0"},
            files=["examples/ddp_overlap.py"],
        ),
    ]
    for strategy in ("bucket", "zero1", "torch"):
        command = f"examples/capstone.py --strategy {strategy} --check"
        steps.append(
            Step(
                f"capstone-{strategy}",
                command,
                20,
                120,
                120,
                gpu=_tr(f"{command} --backend nccl"),
                expect={"gpu": "on cuda:0"},
                files=["examples/capstone.py"],
            )
        )
    steps += [
        Step(
            "nb-nccl",
            "a generated notebook: %%ranks -n 1 --backend nccl, all_reduce",
            15,
            90,
            9,
            gpu=_inner("nb-nccl", "gpu"),
            cpu=_inner("nb-nccl", "cpu"),
        ),
        Step(
            "auto-4-ranks",
            "4 ranks, auto, fewer GPUs than ranks",
            15,
            60,
            9,
            gpu=_inner("auto4", "gpu"),
            cpu=_inner("auto4", "cpu"),
        ),
        _notebook_step("00_welcome", 30, 150),
        _notebook_step("01_primitives", 45, 180),
        Step(
            "alpha-beta",
            "α-β fit of all_reduce on gloo, 8 and 16 ranks (not stored)",
            40,
            120,
            60,
            gpu=_inner("alpha-beta", "gpu"),
        ),
        _notebook_step("06_measuring_bandwidth", 60, 240),
        _notebook_step("07_overlap", 60, 240),
    ]
    return steps


def _notebook_step(stem: str, expected: float, limit: float) -> Step:
    path = f"notebooks/solutions/{stem}.ipynb"
    title = f"{path} executed with nbclient"
    return Step(
        f"nb-{stem[:2]}", title, expected, limit, 60, _inner("notebook", path), files=[path]
    )


# ----------------------------------------------------------------------------- running


def run_command(cmd: list[str], timeout: float, env: dict[str, str]) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group; kill the group at ``timeout``. (code, output)."""
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
        log.seek(0)
        return code, log.read()


def judge(step: Step, mode: str, code: int | None, output: str) -> tuple[str, str]:
    """(status, summary) of a step that ran."""
    if code is None:
        return "timeout", f"stopped at its {step.timeout_s:g} s limit"
    if code != step.exit_code:
        last = [line for line in output.splitlines() if line.strip()][-1:] or [""]
        return "failed", f"exit {code}, expected {step.exit_code}: {last[0][:300]}"
    want = step.expect.get(mode)
    if want and want not in output:
        return "failed", f"exit {code}, but the output lacks {want!r}"
    results = [line[len("RESULT ") :] for line in output.splitlines() if line.startswith("RESULT ")]
    return "passed", results[-1] if results else f"exit {code} as expected"


def parse_only(step: Step) -> tuple[str, str]:
    """The dry run's check of a step it does not run: files exist, the command parses."""
    missing = [f for f in step.files if not (ROOT / f).exists()]
    if missing:
        return "failed", f"missing: {', '.join(missing)}"
    cmd = step.gpu
    try:
        if cmd[1:3] == ["-m", "torch.distributed.run"]:
            from torch.distributed.run import get_args_parser

            args = get_args_parser().parse_args(cmd[3:])
            target, rest = args.training_script, args.training_script_args
            if target.endswith(".py"):
                _parse_script(ROOT / target, rest)
            elif target == "labsupport.runtime.bench":
                from labsupport.runtime.bench.__main__ import build_parser, options_from_args

                options_from_args(build_parser().parse_args(rest))
        elif "--inner" in cmd:
            name = cmd[cmd.index("--inner") + 1]
            if name not in INNER:
                return "failed", f"no inner step {name!r}"
            if name == "notebook":
                import nbformat

                nbformat.validate(nbformat.read(ROOT / cmd[-1], as_version=4))
    except SystemExit as exc:  # argparse's error
        return "failed", f"the command does not parse (exit {exc.code}): {shlex.join(cmd)}"
    except ValueError as exc:  # a value argparse took but the options refuse
        return "failed", f"the command does not parse ({exc}): {shlex.join(cmd)}"
    return "checked", "not run in the dry run (CPU run over 10 s); files exist, command parses"


def _parse_script(path: Path, argv: list[str]) -> None:
    """Load an example (its ``main`` is guarded) and run its ``parse(argv)``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_gpu_check_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.parse(argv)


def child_env(extra_path: str | None) -> dict[str, str]:
    """Our environment, with the repository (and the wheels' folder) on ``PYTHONPATH``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg", LABSUPPORT_LIVE_AFTER="inf")
    parts = [str(ROOT), *([extra_path] if extra_path else []), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in parts if p)
    return env


def install_wheels(wheels: Path) -> tuple[str | None, str]:
    """Jupyter's packages: already importable, or installed from ``wheels`` into a temp folder."""
    try:
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401

        return None, "Jupyter packages importable, nothing installed"
    except ImportError:
        pass
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found:
        return None, f"no Jupyter packages and no wheels in {wheels}: notebook steps will fail"
    target = tempfile.mkdtemp(prefix="gpu-check-site-")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--target",
        target,
        *map(str, found),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, f"pip install of {len(found)} wheels failed: {done.stderr[-500:]}"
    sys.path.insert(0, target)
    return target, f"{len(found)} wheels from {wheels} installed into {target} (PYTHONPATH)"


class Report:
    """The report, rewritten (JSON and Markdown) after every step."""

    def __init__(self, out: Path, mode: str) -> None:
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.data: dict = {
            "mode": mode,
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"python": platform.python_version(), "platform": platform.platform()},
            "budget_s": BUDGET_S,
            "steps": [],
        }
        (out / "gpu-check.log").write_text("")

    def log(self, name: str, command: str, output: str) -> None:
        with open(self.out / "gpu-check.log", "a", encoding="utf-8") as f:
            f.write(f"\n===== {name}: {command}\n{output}")

    def add(self, outcome: Outcome) -> None:
        self.data["steps"].append(asdict(outcome))
        self.write()

    def write(self) -> None:
        steps = self.data["steps"]
        self.data["elapsed_s"] = round(sum(s["seconds"] for s in steps), 1)
        self.data["failed"] = [s["name"] for s in steps if s["status"] in ("failed", "timeout")]
        (self.out / "gpu-check.json").write_text(json.dumps(self.data, indent=2) + "\n")
        (self.out / "gpu-check.md").write_text(self.markdown())

    def markdown(self) -> str:
        d, m = self.data, self.data["machine"]
        lines = [
            f"# make test-gpu ({d['mode']}), {d['started']}",
            "",
            *(f"- {k}: {v}" for k, v in m.items()),
            f"- wheels: {d.get('wheels', '-')}",
            f"- elapsed: {d['elapsed_s']} s of a {d['budget_s']:g} s budget; "
            f"failed: {', '.join(d['failed']) or 'none'}",
            "",
            "| step | status | s | CPU s | expected | limit | result |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for s in d["steps"]:
            summary = s["summary"].replace("|", "/").replace("\n", " ")[:400]
            lines.append(
                f"| {s['name']} | {s['status']} | {s['seconds']:.1f} | {s['cpu_seconds']:.1f} | "
                f"{s['expected_s']:g} | {s['timeout_s']:g} | {summary} |"
            )
        return "\n".join(lines) + "\n"


def run_all(
    steps: list[Step], mode: str, report: Report, env: dict[str, str], budget: float = BUDGET_S
) -> int:
    """Run (or, in the dry run, check) every step in order; 0 when none failed."""
    start = time.monotonic()
    for step in steps:
        left = budget - (time.monotonic() - start)
        cmd = step.cpu if mode == "cpu" and step.cpu is not None else step.gpu
        outcome = Outcome(
            step.name, step.title, "", 0.0, step.expected_s, step.timeout_s, shlex.join(cmd)
        )
        missing = [f for f in step.files if not (ROOT / f).exists()]
        t0 = time.monotonic()
        if missing:
            outcome.status, outcome.summary = "failed", f"missing: {', '.join(missing)}"
        elif mode == "cpu" and step.cpu_s >= 10:
            outcome.status, outcome.summary = parse_only(step)
        elif mode == "gpu" and step.expected_s > left:
            outcome.status = "skipped"
            outcome.summary = f"{left:.0f} s left of the budget, {step.expected_s:g} s expected"
        else:
            used = _children_cpu()
            code, output = run_command(cmd, min(step.timeout_s, max(left, 1.0)), env)
            outcome.cpu_seconds = round(_children_cpu() - used, 1)
            outcome.status, outcome.summary = judge(step, mode, code, output)
            outcome.output_tail = output[-TAIL:]
            report.log(step.name, outcome.command, output)
        outcome.seconds = round(time.monotonic() - t0, 2)
        if step.name == "doctor" and outcome.status == "passed":
            report.data["machine"].update(json.loads(outcome.summary).get("versions", {}))
        report.add(outcome)
        print(
            f"{outcome.name:16} {outcome.status:8} {outcome.seconds:6.1f} s "
            f"(CPU {outcome.cpu_seconds:5.1f} s)  "
            f"{outcome.summary[:160]}",
            flush=True,
        )
    return 1 if report.data["failed"] else 0


def _children_cpu() -> float:
    """User and system seconds of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# ------------------------------------------------------------------ the inner steps


def _result(**values: object) -> None:
    print("RESULT " + json.dumps(values, default=str), flush=True)


def inner_doctor(mode: str) -> int:
    """doctor(), the versions, and what auto picks for 1 rank and for 4."""
    import torch

    from labsupport.runtime import backend

    backend.doctor()
    versions = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        versions.update(
            device=props.name,
            capability=f"{props.major}.{props.minor}",
            memory_gib=round(props.total_memory / 1024**3, 1),
            nccl=".".join(map(str, torch.cuda.nccl.version())),
        )
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        versions["driver"] = smi.stdout.strip() if smi.returncode == 0 else "nvidia-smi failed"
    else:
        versions["device"] = f"CPU: {platform.processor() or platform.machine()}, " + (
            f"{os.cpu_count()} cores, kernels {torch.backends.cpu.get_cpu_capability()}"
        )
    one = backend.detect_backend(1)
    wanted = ("nccl", "cuda") if mode == "gpu" else ("gloo", "cpu")
    _result(versions=versions, auto_1_rank=str(one), auto_4_ranks=str(backend.detect_backend(4)))
    if (one.backend, one.device_type) != wanted:
        print(f"auto picked {one} for 1 rank; expected {wanted[0]} on {wanted[1]}")
        return 1
    return 0


def _known_kernel(device: str, seconds: float):
    """(a callable that keeps ``device`` busy ``seconds`` long, the GPU's cycles per second).

    On a GPU, ``torch.cuda._sleep(cycles)`` (a spin of that many clock cycles), calibrated
    here after a warm-up that raises the clocks; on the CPU, ``time.sleep`` (and None).
    """
    import torch

    from labsupport.runtime.bench.timing import device_clock

    if device == "cpu":
        return lambda: time.sleep(seconds), None
    torch.cuda._sleep(int(2e8))  # clocks up (idle clocks are a few hundred MHz)
    probe = int(5e7)
    start = device_clock(device)
    torch.cuda._sleep(probe)
    rate = probe / (device_clock(device) - start)  # cycles per second
    cycles = int(rate * seconds)
    return lambda: torch.cuda._sleep(cycles), rate


def inner_timing(mode: str) -> int:
    """The timing helper's device path against the host clock on a kernel of known length.

    The reference is ``device_clock`` around one kernel (synchronize, host clock, kernel,
    synchronize, host clock; the median of 3); CUDA events (``IterationClock``) and
    ``time_iterations``, with and without a barrier between iterations, must agree with it
    within 15 % (50 % in the dry run, where both clocks are the host's), and the host
    clock read without synchronize must see under 20 % of it (the launch, not the kernel).
    """
    import statistics

    import torch
    import torch.distributed as dist

    from labsupport.runtime.bench.timing import device_clock, time_iterations
    from labsupport.runtime.device import IterationClock, set_device, synchronize

    device = "cuda:0" if mode == "gpu" else "cpu"
    length = 0.05
    set_device(device)
    kernel, rate = _known_kernel(device, length)
    found: dict[str, float] = {}
    if mode == "gpu":
        t0 = time.perf_counter()
        kernel()
        found["host_no_sync"] = time.perf_counter() - t0  # the queueing only
        synchronize(device)
    host = []
    for _ in range(3):
        start = device_clock(device)
        kernel()
        host.append(device_clock(device) - start)
    found["device_clock"] = statistics.median(host)
    clock = IterationClock(device, 3)
    clock.mark()
    for _ in range(3):
        kernel()
        clock.mark()
    synchronize(device)
    found["events_median"] = statistics.median(clock.intervals())
    with tempfile.TemporaryDirectory() as tmp:
        backend = "nccl" if mode == "gpu" else "gloo"
        dist.init_process_group(backend, init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            step = lambda i: kernel()  # noqa: E731
            found["time_iterations_each"] = time_iterations(step, 3, device=device).median
            found["time_iterations_back_to_back"] = time_iterations(
                step, 3, device=device, each=False
            ).median
        finally:
            dist.destroy_process_group()
    # The reference: the host clock around one kernel, with synchronize before and after.
    # On the CPU both are the host clock, and a busy machine oversleeps: a loose bound there.
    ref, within = found["device_clock"], 0.15 if mode == "gpu" else 0.5
    bad = [
        f"{k} {v * 1e3:.2f} ms"
        for k, v in found.items()
        if k not in ("host_no_sync", "device_clock") and abs(v - ref) > within * ref
    ]
    if abs(ref - length) > 0.5 * length:
        bad.append(f"the kernel took {ref * 1e3:.2f} ms by the host clock, not about 50 ms")
    if found.get("host_no_sync", 0) > 0.2 * ref:
        bad.append(
            f"host clock without synchronize saw {found['host_no_sync'] * 1e3:.2f} ms "
            "(a CUDA kernel should return at once)"
        )
    summary = {k: f"{v * 1e3:.3f} ms" for k, v in found.items()}
    _result(
        kernel=f"{length * 1e3:g} ms",
        device=device,
        torch=torch.__version__,
        sm_clock_ghz=None if rate is None else round(rate / 1e9, 3),
        **summary,
    )
    if bad:
        print(f"against the synchronized host clock ({ref * 1e3:.2f} ms): " + "; ".join(bad))
        return 1
    return 0


NCCL_CELL = """\
%%ranks -n 1 --backend {backend}
t = torch.full((4,), float(rank + 1), device=device)
dist.all_reduce(t)
assert t.device.type == "{device_type}", t.device
assert dist.get_backend() == "{backend}", dist.get_backend()
assert t.tolist() == [1.0] * 4, t
print("all_reduce on", t.device, "with", dist.get_backend(), "->", t.tolist())
"""


def _kernel_manager():
    """ipykernel started with this very interpreter (as labkit.exercises and nbval do)."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager

    class _CurrentEnv(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(
                argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                display_name="current environment",
                language="python",
            )

    return KernelManager(kernel_name="current-env", kernel_spec_manager=_CurrentEnv())


def _execute(nb, folder: Path) -> None:
    from nbclient import NotebookClient

    NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        km=_kernel_manager(),
        record_timing=False,
        resources={"metadata": {"path": str(folder)}},
    ).execute()


def _text(nb) -> str:
    return "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )


def inner_nb_nccl(mode: str) -> int:
    """A generated notebook whose %%ranks cell all-reduces a tensor on the rank's device."""
    import nbformat

    backend, device_type = ("nccl", "cuda") if mode == "gpu" else ("gloo", "cpu")
    cells = [
        "%load_ext labsupport",
        NCCL_CELL.format(backend=backend, device_type=device_type),
        "%ranks shutdown",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    _execute(nb, ROOT / "notebooks")
    text = _text(nb)
    print(text)
    want = f"all_reduce on {device_type}{':0' if mode == 'gpu' else ''} with {backend}"
    if want not in text:
        print(f"expected {want!r} in the cell's output")
        return 1
    _result(cell=want)
    return 0


def inner_auto4(mode: str) -> int:
    """4 ranks with backend "auto" where there are fewer GPUs than ranks."""
    import torch

    from labsupport.runtime.launch import Cluster

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with Cluster(world_size=4, backend="auto", timeout=60) as cluster:
        seen = cluster.run(_rank_placement)
        reason = cluster.choice.reason
    print(cluster.choice, *seen, sep="\n")
    why = (
        f"NCCL needs one GPU per rank and this machine has {gpus} GPU(s) for 4 ranks"
        if gpus
        else "no CUDA GPU is visible"
    )
    ok = gpus < 4 and all(s == ("gloo", "cpu", 6.0) for s in seen) and why in reason
    _result(
        gpus=gpus,
        backend=cluster.choice.backend,
        reason=reason,
        ranks=[f"{b} on {d}" for b, d, _ in seen],
    )
    if not ok:
        print(f"expected gloo on cpu on every rank (sum 6.0) and {why!r} in the reason")
        return 1
    return 0


def _rank_placement() -> tuple[str, str, float]:
    import torch
    import torch.distributed as dist

    from labsupport.runtime.backend import rank_device

    t = torch.tensor([float(dist.get_rank())], device=rank_device())
    dist.all_reduce(t)
    return str(dist.get_backend()), str(t.device), t.item()


def inner_notebook(path: str) -> int:
    """Execute one notebook top to bottom (outputs not compared, every cell must run)."""
    import nbformat

    nb = nbformat.read(ROOT / path, as_version=4)
    _execute(nb, (ROOT / path).parent)
    _result(notebook=path, code_cells=sum(c.cell_type == "code" for c in nb.cells))
    return 0


def inner_alpha_beta(mode: str) -> int:
    """The α-β fit of notebook 06 on this machine's cores: all_reduce over gloo, 8 and 16 ranks."""
    from labsupport.runtime import bench
    from labsupport.runtime.launch import Cluster

    fits = {}
    for p in (8, 16):
        if p > (os.cpu_count() or 1):
            continue
        with Cluster(world_size=p, backend="gloo", timeout=60) as cluster:
            sweep = bench.benchmark(
                cluster,
                "all_reduce",
                as_frame=False,
                show=False,
                minbytes="1K",
                maxbytes="4M",
                stepfactor=4,
                iters=20,
                warmup_iters=5,
            )
        fit = bench.fit_alpha_beta(sweep, in_place=True, time="median_us")
        print(p, "ranks:", fit)
        fits[f"{p} ranks"] = (
            f"alpha {fit.alpha * 1e6:.1f} us, bandwidth "
            f"{fit.bandwidth / 1e9:.2f} GB/s, residual {fit.residual:.0%}"
        )
    _result(**fits)
    return 0 if fits else 1


INNER = {
    "doctor": inner_doctor,
    "timing": inner_timing,
    "nb-nccl": inner_nb_nccl,
    "auto4": inner_auto4,
    "notebook": inner_notebook,
    "alpha-beta": inner_alpha_beta,
}


def main(argv: list[str] | None = None) -> int:
    """Run the steps (or one inner step, with --inner); write the report; 0 if none failed."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-check"))
    p.add_argument("--dry-run", action="store_true", help="here: CPU, gloo, short steps only")
    p.add_argument("--only", default=None, help="comma-separated step names (default all)")
    p.add_argument("--wheels", type=Path, default=ROOT / ".whl")
    p.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for all steps")
    p.add_argument("--inner", nargs=2, metavar=("STEP", "ARG"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.inner:
        sys.path.insert(0, str(ROOT))
        return INNER[args.inner[0]](args.inner[1])
    mode = "cpu" if args.dry_run else "gpu"
    report = Report(args.out.resolve(), "dry run (CPU, gloo)" if args.dry_run else "GPU")
    site, said = install_wheels(args.wheels)
    report.data["wheels"] = said
    print(said, flush=True)
    steps = build_steps(args.out.resolve())
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {s.name for s in steps}
        if unknown:
            p.error(f"no step {sorted(unknown)}; steps: {', '.join(s.name for s in steps)}")
        steps = [s for s in steps if s.name in names]
    code = run_all(steps, mode, report, child_env(site), args.budget)
    print(f"report: {args.out / 'gpu-check.md'} ({report.data['elapsed_s']} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
