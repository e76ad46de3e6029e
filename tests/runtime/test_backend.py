"""Backend choice: hccl -> nccl -> gloo, tested with fake machines."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from dataclasses import replace

import pytest
import torch

from labsupport.runtime import backend as B

CPU_ONLY = B.Environment(
    python="3.11",
    torch_version="2.13.0",
    torch_npu_installed=False,
    torch_npu_version=None,
    torch_npu_error=None,
    npu_count=0,
    cuda_count=0,
    nccl_available=False,
    gloo_available=True,
    cpu_cores=2,
    cann_env=None,
)
ASCEND_8 = replace(CPU_ONLY, torch_npu_installed=True, torch_npu_version="2.13.0", npu_count=8)
GPU_4 = replace(CPU_ONLY, cuda_count=4, nccl_available=True)
NPU_NO_CANN = replace(
    CPU_ONLY,
    torch_npu_installed=True,
    torch_npu_error="ImportError: libhccl.so: cannot open shared object file",
)


def test_auto_prefers_hccl_when_every_rank_gets_an_npu():
    choice = B.choose_backend(8, "auto", ASCEND_8)
    assert (choice.backend, choice.device_type) == ("hccl", "npu")


def test_auto_falls_back_to_gloo_when_npus_are_too_few_and_says_why():
    choice = B.choose_backend(16, "auto", ASCEND_8)
    assert choice.backend == "gloo"
    assert "one NPU per rank" in choice.reason and "8 NPU(s) for 16 ranks" in choice.reason


def test_auto_picks_nccl_with_enough_gpus_else_gloo():
    assert B.choose_backend(4, "auto", GPU_4).backend == "nccl"
    fallback = B.choose_backend(8, "auto", GPU_4)
    assert fallback.backend == "gloo" and "4 GPU(s) for 8 ranks" in fallback.reason


def test_one_gpu_and_four_ranks_fall_back_to_gloo_on_the_cpu_and_say_why():
    """The lent machine of issue 36 (one GPU, 16 cores) with notebook 00's 4 ranks.

    The course does not run gloo with CUDA tensors (every rank on cuda:0): torch documents
    only broadcast and all_reduce for gloo on GPUs, and the notebooks use send/recv,
    all_gather and reduce_scatter too. So every rank stays on the CPU, and doctor() says
    that one rank would get the GPU.
    """
    one_gpu = replace(CPU_ONLY, cuda_count=1, nccl_available=True, cpu_cores=16)
    choice = B.choose_backend(4, "auto", one_gpu)
    assert (choice.backend, choice.device_type) == ("gloo", "cpu")
    assert "NCCL needs one GPU per rank and this machine has 1 GPU(s) for 4 ranks" in choice.reason
    assert B.choose_backend(1, "auto", one_gpu).backend == "nccl"
    report = B.doctor_report(one_gpu)
    assert "world size  1 recommended here" in report and "auto picks  nccl on cuda" in report
    with pytest.raises(B.BackendUnavailable, match="1 GPU"):
        B.choose_backend(4, "nccl", one_gpu)


def test_torch_npu_without_cann_explains_the_fix_and_auto_uses_gloo():
    choice = B.choose_backend(4, "auto", NPU_NO_CANN)
    assert choice.backend == "gloo"
    assert "set_env.sh" in choice.reason
    # both places CANN puts its script: the older ascend-toolkit/ and the newer cann/
    assert "/usr/local/Ascend/ascend-toolkit/set_env.sh" in choice.reason
    assert "/usr/local/Ascend/cann/set_env.sh" in choice.reason
    with pytest.raises(B.BackendUnavailable, match="libhccl.so"):
        B.choose_backend(4, "hccl", NPU_NO_CANN)
    assert "set_env.sh" in B.doctor_report(NPU_NO_CANN)


def test_explicit_backends_that_cannot_run_say_what_is_missing():
    with pytest.raises(B.BackendUnavailable, match="torch_npu is not installed"):
        B.choose_backend(2, "hccl", CPU_ONLY)
    with pytest.raises(B.BackendUnavailable, match="no CUDA GPU"):
        B.choose_backend(2, "nccl", CPU_ONLY)
    with pytest.raises(B.BackendUnavailable, match="gloo"):
        B.choose_backend(2, "gloo", replace(CPU_ONLY, gloo_available=False))


def test_explicit_names_are_case_insensitive_and_unknown_names_list_the_valid_ones():
    assert B.choose_backend(2, "GLOO", CPU_ONLY).backend == "gloo"
    with pytest.raises(ValueError, match="auto, hccl, nccl, gloo"):
        B.choose_backend(2, "mpi", CPU_ONLY)


def test_recommended_world_size():
    assert B.recommended_world_size(CPU_ONLY) == 4
    assert B.recommended_world_size(replace(CPU_ONLY, cpu_cores=16)) == 8
    assert B.recommended_world_size(ASCEND_8) == 8
    assert B.recommended_world_size(GPU_4) == 4


def test_doctor_reports_the_machine_and_the_choice(capsys):
    B.doctor()
    out = capsys.readouterr().out
    for word in ("torch", "torch_npu", "CUDA GPUs", "gloo", "CPU cores", "auto picks"):
        assert word in out
    assert "auto picks  gloo" in out  # this machine has no accelerator
    # one reason a line: no line wraps mid-word in a notebook (122 columns at 1400 px)
    assert max(len(line) for line in out.splitlines() if "python" not in line) <= 100


# ---------------------------------------------------------------- probing with fake modules
@pytest.fixture
def fake_torch_npu(monkeypatch):
    """A stand-in torch_npu that imports and reports 8 NPUs."""
    module = types.ModuleType("torch_npu")
    module.__version__ = "2.13.0"
    module.__spec__ = importlib.machinery.ModuleSpec("torch_npu", None)
    monkeypatch.setitem(sys.modules, "torch_npu", module)
    monkeypatch.setattr(torch, "npu", types.SimpleNamespace(device_count=lambda: 8), raising=False)
    return module


def test_probe_sees_a_working_torch_npu(fake_torch_npu):
    env = B.probe_environment()
    assert env.torch_npu_version == "2.13.0" and env.npu_count == 8
    assert B.choose_backend(4, "auto", env).backend == "hccl"


class _BrokenFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds torch_npu but fails to load it, as without the CANN libraries."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch_npu":
            return importlib.machinery.ModuleSpec("torch_npu", self)
        return None

    def create_module(self, spec):
        raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")

    def exec_module(self, module):  # pragma: no cover - never reached
        pass


def test_probe_reports_a_torch_npu_that_does_not_import(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenFinder(), *sys.meta_path])
    env = B.probe_environment()
    assert env.torch_npu_installed and "libhccl.so" in env.torch_npu_error
    assert B.choose_backend(4, "auto", env).backend == "gloo"


def test_probe_counts_cuda_devices(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert B.probe_environment().cuda_count == 2


def test_rank_device_follows_the_launcher_variables(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "3")
    # ("npu" only parses once torch_npu has registered it, so cuda stands in here)
    monkeypatch.setenv("LABSUPPORT_DEVICE_TYPE", "cuda")
    assert B.rank_device() == torch.device("cuda", 3)
    monkeypatch.setenv("LABSUPPORT_DEVICE_TYPE", "cpu")
    assert B.rank_device() == torch.device("cpu")


def test_autoload_guard_only_acts_for_torch_npu_without_cann(tmp_path):
    """A fresh interpreter with a fake, broken torch_npu on its path still imports labsupport."""
    import subprocess

    pkg = tmp_path / "torch_npu"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('libhccl.so: cannot open shared object')\n")
    code = (
        "import os, labsupport, labsupport.runtime.backend as B\n"
        "print(os.environ.get('TORCH_DEVICE_BACKEND_AUTOLOAD'))\n"
        "print('set_env.sh' in B.doctor_report())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "TORCH_DEVICE"))}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["0", "True"]
    env["ASCEND_TOOLKIT_HOME"] = "/usr/local/Ascend/ascend-toolkit/latest"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "None"  # with CANN announced, torch's autoload is left alone


def test_tool_modules_load_on_first_use():
    import labsupport as lab

    assert callable(lab.viz.show_ranks)
    assert lab.schedules.ring_all_reduce(4).world_size == 4
    assert callable(lab.bench.fit_alpha_beta)
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        lab.nonsense  # noqa: B018
