"""Old module paths (before the split into core, runtime and kit) that still import.

``import labsupport.check.ring`` still works: it prints where the module lives now
(``labsupport.runtime.check.ring``) and gives you that module. The table below is the
whole list; the CHANGELOG says what moved where. Removed in the next release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

_R = "labsupport.runtime"
#: Old name -> new name, for a module or a package (and then everything under it).
MOVED: dict[str, str] = {
    "labsupport.backend": f"{_R}.backend",
    "labsupport.cluster_env": f"{_R}.cluster_env",
    "labsupport.diagnose": f"{_R}.diagnose",
    "labsupport.magics": f"{_R}.magics",
    "labsupport.scripts": f"{_R}.scripts",
    "labsupport.torchrun": f"{_R}.torchrun",
    "labsupport.launch": f"{_R}.launch",
    "labsupport.bench.device": f"{_R}.device",
    "labsupport.bench": f"{_R}.bench",
    "labsupport.trace": f"{_R}.trace",
    "labsupport.viz": f"{_R}.viz",
    "labsupport.capstone": f"{_R}.capstone",
    "labsupport.check.notebooks": "labkit.notebooks",
    "labsupport.check.room": "labkit.room",
    "labsupport.check.watch": "labkit.watch",
    "labsupport.check.learner": "labkit.learner",
    "labsupport.check": f"{_R}.check",
    "labsupport.exercises": "labkit.exercises",
    "labsupport.ddp.model": f"{_R}.experiments.workload",
    "labsupport.ddp.run": f"{_R}.experiments.ddp_runs",
    "labsupport.ddp.plot": f"{_R}.viz.ddp",
    "labsupport.compress.run": f"{_R}.experiments.compression_runs",
    "labsupport.topology.__main__": f"{_R}.astra.__main__",
    "labsupport.topology.astra": f"{_R}.astra.files",
    "labsupport.topology.astra_collectives": f"{_R}.astra.collectives",
    "labsupport.topology.astra_mode": f"{_R}.astra.mode",
    "labsupport.topology.astra_network": f"{_R}.astra.network",
    "labsupport.topology.astra_streams": f"{_R}.astra.streams",
    "labsupport.topology.astra_system": f"{_R}.astra.system",
    **{
        f"labsupport.netem.{m}": f"{_R}.emulator.{m}"
        for m in ("algorithms", "backend", "calls", "clock", "cluster", "state", "wire", "work")
    },
}


#: Old commands whose module's code now lives elsewhere than its names: ``python -m OLD``
#: runs the new command (the graders stayed in the runtime, the command went to the kit).
COMMANDS: dict[str, str] = {"labsupport.check.capstone": "labkit.capstone"}


def _names(module: str, names: str) -> dict[str, str]:
    return dict.fromkeys(names.split(), module)


#: Names a core package exported before the split that now live in the runtime:
#: ``netem.set_network`` still works in this release, saying ``emulator.set_network``.
MOVED_NAMES: dict[str, dict[str, str]] = {
    "labsupport.netem": _names(
        f"{_R}.emulator",
        "compute current_network recording set_algorithm set_network traffic "
        "install_from_env register",
    ),
    "labsupport.ddp": {
        **_names(
            f"{_R}.experiments.workload",
            "Compute Config Workload baseline emulate_compute global_batch local_batch "
            "loss_fn make_model",
        ),
        **_names(
            f"{_R}.experiments.ddp_runs",
            "VERSIONS is_sharded_optimizer setup time_all_reduces time_compute time_steps "
            "traffic_per_step train train_step use_threads",
        ),
    },
    "labsupport.compress": _names(f"{_R}.experiments.compression_runs", "teacher_batch train"),
    "labsupport.topology": _names(
        f"{_R}.astra",
        "AstraResult SystemConfig from_astra_sim from_astra_system simulate_astra "
        "to_astra_sim to_astra_system",
    ),
    "labsupport.scaling": _names(
        f"{_R}.experiments.scaling_runs",
        "compute_and_comm emulated_steps first_ranks_group time_per_sample",
    ),
}


_TOLD: set[str] = set()


def _tell(old: str, new: str, how: str = "") -> None:
    """Say once per name where an old name went (runpy looks a name up twice)."""
    if old not in _TOLD:
        _TOLD.add(old)
        print(
            f"{old} has moved to {new}{how}: use that (the old name goes next release)",
            file=sys.stderr,
        )


def attribute(package: str, name: str) -> object:
    """A name ``package`` exported before the split: from its new module, saying where.

    A core package's ``__getattr__`` calls this, so that a saved notebook's
    ``netem.set_network(...)`` still runs for one release; any other name is an
    AttributeError, as without it.
    """
    module = MOVED_NAMES.get(package, {}).get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    parent, _, short = module.rpartition(".")
    _tell(f"{package}.{name}", f"{module}.{name}", f" (from {parent} import {short})")
    return getattr(importlib.import_module(module), name)


# Longest first, so that labsupport.check.room is found before labsupport.check; sorted
# once, since the finder asks for every labsupport module imported.
_LONGEST_FIRST = sorted(MOVED, key=len, reverse=True)


def new_name(old: str) -> str | None:
    """Where the module ``old`` lives now, or None if it did not move."""
    for before in _LONGEST_FIRST:
        if old == before or old.startswith(before + "."):
            return MOVED[before] + old[len(before) :]
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the target ran when it was imported

    def get_code(self, fullname: str) -> object:
        """The new module's code: ``python -m OLD.NAME`` runs the new one."""
        command = COMMANDS.get(fullname, self.target)
        spec = importlib.util.find_spec(command)
        return spec.loader.get_code(command)  # type: ignore[union-attr]


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds an old name and hands back the module at its new one, saying so once."""

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        new = new_name(fullname) if fullname.startswith("labsupport.") else None
        if new is None:
            return None
        _tell(fullname, COMMANDS.get(fullname, new))
        spec = importlib.util.find_spec(new)
        if spec is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _Alias(new), is_package=spec.submodule_search_locations is not None
        )


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once); ``import labsupport`` does it."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())  # before the path finder: one module, not two
