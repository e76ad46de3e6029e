"""Which communication backend can this machine run, and why.

Three backends matter to the course:

* ``hccl`` - Huawei's collective library for Ascend NPUs, reached through the
  ``torch_npu`` plug-in (device type ``"npu"``);
* ``nccl`` - NVIDIA's collective library for CUDA GPUs (device type ``"cuda"``);
* ``gloo`` - the CPU backend that ships with every PyTorch build (``"cpu"``).

``"auto"`` picks the first that can run ``world_size`` local ranks, in that
order. Both device backends want one device per rank: NCCL refuses two ranks
on one GPU since NCCL 2.5 ("Duplicate GPU detected"), and HCCL is deployed one
process per NPU, so the launcher never shares a device between ranks and
falls back to gloo instead (saying why).

The probing (:func:`probe_environment`) is separate from the decision
(:func:`choose_backend`) so that the decision can be tested with a fake
environment on a machine that has neither an NPU nor a GPU.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import sys
from dataclasses import dataclass
from typing import Any

from labsupport.runtime.language import _

#: Backends the launcher knows, and the device type each one drives.
DEVICE_TYPES: dict[str, str] = {"hccl": "npu", "nccl": "cuda", "gloo": "cpu"}
VALID_BACKENDS: tuple[str, ...] = ("auto", "hccl", "nccl", "gloo")

#: The largest local group the launcher starts. Every rank is a full Python
#: interpreter with torch loaded (about 300 MB of memory each), and more ranks
#: than a few per core only take turns on the CPU, so larger local groups teach
#: nothing that 32 do not. On a real cluster, use torchrun instead.
MAX_WORLD_SIZE = 32


class BackendUnavailable(RuntimeError):
    """An explicitly requested backend cannot run here; the message says what is missing."""


@dataclass(frozen=True)
class Environment:
    """What :func:`probe_environment` found on this machine."""

    python: str
    torch_version: str
    torch_npu_installed: bool
    torch_npu_version: str | None
    torch_npu_error: str | None
    npu_count: int
    cuda_count: int
    nccl_available: bool
    gloo_available: bool
    cpu_cores: int
    cann_env: str | None

    @property
    def npu_usable(self) -> bool:
        """True when torch_npu imported and sees at least one NPU."""
        return self.torch_npu_version is not None and self.npu_count > 0


@dataclass(frozen=True)
class BackendChoice:
    """The backend chosen for a group, the device type it drives, and why."""

    backend: str
    device_type: str
    reason: str

    def __str__(self) -> str:
        return f"{self.backend} ({self.device_type}): {self.reason}"


def avoid_broken_autoload() -> bool:
    """Keep ``import torch`` working when torch_npu is installed but CANN is not set up.

    torch auto-loads device plug-ins; a torch_npu that cannot find CANN's
    libraries then makes plain ``import torch`` fail. When torch is not yet
    imported, torch_npu is installed, and no CANN environment is announced,
    set ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` (torch's own switch) so that
    torch imports and :func:`doctor` can explain the problem. Returns True
    when it did so.
    """
    if "torch" in sys.modules or "TORCH_DEVICE_BACKEND_AUTOLOAD" in os.environ:
        return False
    if _cann_env() is not None or importlib.util.find_spec("torch_npu") is None:
        return False
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    return True


def _cann_env() -> str | None:
    """The CANN install that ``set_env.sh`` announced, if any."""
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        if os.environ.get(var):
            return os.environ[var]
    return None


def probe_environment() -> Environment:
    """Look at this machine: torch, torch_npu/CANN, device counts, gloo, cores."""
    import torch
    import torch.distributed as dist

    npu_installed = importlib.util.find_spec("torch_npu") is not None
    npu_version = npu_error = None
    npu_count = 0
    if npu_installed:
        try:
            torch_npu = importlib.import_module("torch_npu")
            npu_version = getattr(torch_npu, "__version__", "unknown")
            npu_count = int(torch.npu.device_count())  # torch_npu adds torch.npu
        except Exception as exc:  # ImportError without CANN, RuntimeError from drivers
            npu_error = f"{type(exc).__name__}: {exc}"
    cuda_count = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    dist_ok = dist.is_available()
    return Environment(
        python=platform.python_version(),
        torch_version=torch.__version__,
        torch_npu_installed=npu_installed,
        torch_npu_version=npu_version,
        torch_npu_error=npu_error,
        npu_count=npu_count,
        cuda_count=cuda_count,
        nccl_available=dist_ok and dist.is_nccl_available(),
        gloo_available=dist_ok and dist.is_gloo_available(),
        cpu_cores=os.cpu_count() or 1,
        cann_env=_cann_env(),
    )


def validate_world_size(world_size: object) -> int:
    """Return ``world_size`` if it is an int in 1..MAX_WORLD_SIZE, else raise a clear error."""
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise TypeError(
            f"world_size must be a whole number of ranks, like 4; got {world_size!r} "
            f"({type(world_size).__name__})."
        )
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1; got {world_size}.")
    if world_size > MAX_WORLD_SIZE:
        raise ValueError(
            f"world_size={world_size} is above the local cap of {MAX_WORLD_SIZE}: every rank is "
            "a Python process with torch loaded (~300 MB), and ranks beyond a few per core only "
            "take turns on the CPU. For bigger groups, simulate them (labsupport.schedules) or "
            "run on a cluster with torchrun."
        )
    return world_size


def _why_not_hccl(world_size: int, env: Environment) -> str | None:
    """None when HCCL can run ``world_size`` ranks, else the reason it cannot."""
    if not env.torch_npu_installed:
        return _("torch_npu is not installed (only needed on Ascend machines)")
    if env.torch_npu_error is not None:
        return _(
            "torch_npu is installed but does not import ({error}); on an Ascend "
            "machine, source CANN's set_env.sh first (/usr/local/Ascend/ascend-toolkit/"
            "set_env.sh, or /usr/local/Ascend/cann/set_env.sh on newer CANN, for a root "
            "install); elsewhere, uninstall torch-npu"
        ).format(error=env.torch_npu_error)
    if env.npu_count < world_size:
        return _(
            "HCCL needs one NPU per rank and this machine has {count} NPU(s) for {world_size} ranks"
        ).format(count=env.npu_count, world_size=world_size)
    return None


def _why_not_nccl(world_size: int, env: Environment) -> str | None:
    """None when NCCL can run ``world_size`` ranks, else the reason it cannot."""
    if env.cuda_count == 0:
        return _("no CUDA GPU is visible")
    if not env.nccl_available:
        return _("this torch build has no NCCL support")
    if env.cuda_count < world_size:
        return _(
            "NCCL needs one GPU per rank and this machine has {count} GPU(s) for {world_size} ranks"
        ).format(count=env.cuda_count, world_size=world_size)
    return None


def _why_not_gloo(env: Environment) -> str | None:
    return None if env.gloo_available else _("this torch build has no gloo support")


def choose_backend(
    world_size: int, requested: str = "auto", env: Environment | None = None
) -> BackendChoice:
    """Decide the backend for ``world_size`` local ranks (pure, given ``env``).

    Raises ``ValueError`` for an unknown name and :class:`BackendUnavailable`
    when an explicitly requested backend cannot run here.
    """
    validate_world_size(world_size)
    if not isinstance(requested, str) or requested.lower() not in VALID_BACKENDS:
        raise ValueError(
            f"unknown backend {requested!r}; choose one of: {', '.join(VALID_BACKENDS)}."
        )
    requested = requested.lower()
    env = env if env is not None else probe_environment()
    reasons = {
        "hccl": _why_not_hccl(world_size, env),
        "nccl": _why_not_nccl(world_size, env),
        "gloo": _why_not_gloo(env),
    }
    if requested != "auto":
        why = reasons[requested]
        if why is not None:
            raise BackendUnavailable(f"backend {requested!r} cannot run here: {why}.")
        return BackendChoice(requested, DEVICE_TYPES[requested], _("requested explicitly"))
    # The reasons are joined with "; " (doctor() shows one per line): a translation uses "；".
    skipped = []
    for name in ("hccl", "nccl", "gloo"):
        if reasons[name] is None:
            why = _("{backend} can run {world_size} rank(s)").format(
                backend=name, world_size=world_size
            )
            if skipped:
                why += "; " + "; ".join(skipped)
            return BackendChoice(name, DEVICE_TYPES[name], why)
        skipped.append(_("not {backend}: {reason}").format(backend=name, reason=reasons[name]))
    raise BackendUnavailable("no backend can run here: " + "; ".join(skipped))


def detect_backend(world_size: int = 4, backend: str = "auto") -> BackendChoice:
    """What ``backend`` ("auto" by default) resolves to for ``world_size`` ranks here."""
    return choose_backend(world_size, backend, probe_environment())


def recommended_world_size(env: Environment) -> int:
    """A world size that runs well here: one rank per device, else 4 on CPU (8 on big CPUs)."""
    if env.npu_usable:
        return min(env.npu_count, MAX_WORLD_SIZE)
    if env.cuda_count > 0 and env.nccl_available:
        return min(env.cuda_count, MAX_WORLD_SIZE)
    return 8 if env.cpu_cores >= 8 else 4


def course_version() -> str:
    """The installed course's version (pyproject.toml's, as pip installed it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("labsupport")
    except PackageNotFoundError:
        return _("unknown (not installed: run `make lab`)")


def doctor_report(env: Environment | None = None) -> str:
    """The text that :func:`doctor` prints."""
    env = env if env is not None else probe_environment()
    # Each line is one message: the labels (left column) stay English in every language.
    if not env.torch_npu_installed:
        npu = _("  torch_npu   not installed (fine: only needed on Ascend machines)")
    elif env.torch_npu_error:
        npu = _("  torch_npu   installed but not importable: {error}").format(
            error=env.torch_npu_error
        )
    else:
        npu = f"  torch_npu   {env.torch_npu_version}, {env.npu_count} NPU(s)"
    n = recommended_world_size(env)
    choice = choose_backend(n, "auto", env)
    if choice.device_type == "cpu":
        size = _("  world size  {count} recommended here (ranks share the CPU cores)")
    else:
        size = _("  world size  {count} recommended here")
    lines = [
        "labsupport doctor",
        _("  labsupport  {version} (CHANGELOG.md says what changed)").format(
            version=course_version()
        ),
        f"  python      {env.python} ({sys.executable})",
        f"  torch       {env.torch_version}",
        npu,
        f"  CANN        {env.cann_env}"
        if env.cann_env
        else _("  CANN        not set up (no ASCEND_TOOLKIT_HOME / ASCEND_HOME_PATH)"),
        f"  CUDA GPUs   {env.cuda_count}",
        _("  gloo        available") if env.gloo_available else _("  gloo        MISSING"),
        f"  CPU cores   {env.cpu_cores}",
        size.format(count=n),
        _("  auto picks  {backend} on {device}, because:").format(
            backend=choice.backend, device=choice.device_type
        ),
        *(f"              - {reason}" for reason in choice.reason.split("; ")),  # no mid-word wraps
    ]
    if env.torch_npu_installed and env.torch_npu_error:
        lines.append(
            _(
                "  fix         source <CANN>/set_env.sh before starting Jupyter, or "
                "`pip uninstall torch-npu` on machines without an NPU"
            )
        )
    return "\n".join(lines)


def doctor() -> None:
    """Print an environment report: versions, devices, and what "auto" would pick and why."""
    print(doctor_report())


def rank_device() -> Any:
    """This rank's ``torch.device``: the same answer under ``%%ranks`` and under torchrun.

    npu/cuda ``LOCAL_RANK`` for the hccl/nccl backends, else the CPU.
    """
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device_type = os.environ.get("LABSUPPORT_DEVICE_TYPE")
    if device_type is None and dist.is_available() and dist.is_initialized():
        device_type = DEVICE_TYPES.get(str(dist.get_backend()), "cpu")
    if device_type in (None, "cpu"):
        return torch.device("cpu")
    return torch.device(device_type, local_rank)
