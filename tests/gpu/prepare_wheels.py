"""Prepare ``.whl/``: the Jupyter packages that ``make test-gpu`` needs on the lent GPU machine.

The lent NVIDIA machine (the tool library's ``device`` entry) has Python 3.12 and an image
with PyTorch, NumPy, matplotlib, pandas and more, but no Jupyter packages and no network.
This script, run here with network (``make gpu-wheels``), downloads cp312 manylinux wheels
of what notebooks need (ipython, ipykernel, nbformat, nbclient, jupyter_client, pyzmq,
tornado, traitlets, comm, and ipywidgets for notebook 07's slider) with their dependencies,
then deletes the wheels of packages the image already holds (IMAGE below), so that the
machine's own torch and numpy are the ones used. It prints each wheel with its size and the
total, which must fit the 64 MiB a call may carry, with the working tree.

On the machine, ``tests/gpu/run_gpu_check.py`` installs ``.whl/*.whl`` with
``pip install --no-index --no-deps --target <a temporary folder>`` (nothing into the
system) and puts that folder on ``PYTHONPATH``. ``.whl/`` is git-ignored.

    python3 tests/gpu/prepare_wheels.py            # into .whl/
    python3 tests/gpu/prepare_wheels.py --check    # also: does the set install offline on 3.12?
    python3 tests/gpu/prepare_wheels.py --keep --check --python312 /path/to/python3.12
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What the notebooks need on the machine beyond its image (their dependencies follow).
WANTED = [
    "ipython",
    "ipykernel",
    "nbformat",
    "nbclient",
    "jupyter_client",
    "pyzmq",
    "tornado",
    "traitlets",
    "comm",
    "ipywidgets",
]
#: The machine's target: Python 3.12 (CPython) on x86-64 Linux, glibc 2.17 or newer.
PLATFORM_ARGS = [
    "--only-binary=:all:",
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    "--abi",
    "cp312",
    *(
        arg
        for tag in (
            "manylinux_2_28_x86_64",
            "manylinux_2_27_x86_64",
            "manylinux_2_17_x86_64",
            "manylinux2014_x86_64",
            "manylinux1_x86_64",
            "any",
        )
        for arg in ("--platform", tag)
    ),
]
#: Packages the machine's image ('cuda') already holds, as the tool library's KINDS.md
#: listed them (read on such a machine on 2026-11-17): never carried, so that its own
#: torch, numpy, psutil ... are used. Names normalised (PEP 503).
IMAGE = set(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
    botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
    coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython
    diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic
    frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
    hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib
    jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator
    lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
    mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx
    ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
    nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
    nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
    nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
    opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
    pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf
    psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest
    pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
    pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core
    scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
    shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
    tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz
    torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers
    treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig
    werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
)
#: The file in ``.whl/`` that names the dependencies left to the image.
FROM_IMAGE = "FROM_IMAGE.txt"
#: The most a call may carry (working tree, wheels included), in bytes.
CARRY_LIMIT = 64 * 1024**2


def normalise(name: str) -> str:
    """PEP 503's normal form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(path: Path) -> str:
    """The distribution a wheel file holds (its name before the first '-')."""
    return normalise(path.name.split("-")[0])


def download(dest: Path, python: str = sys.executable) -> list[Path]:
    """Download WANTED with its dependencies into ``dest``; drop what the image has.

    The names dropped are written to ``dest/FROM_IMAGE`` (what the machine must provide).
    """
    dest.mkdir(exist_ok=True)
    for old in dest.glob("*.whl"):
        old.unlink()
    cmd = [python, "-m", "pip", "download", "--disable-pip-version-check", "-q"]
    subprocess.run([*cmd, *PLATFORM_ARGS, "-d", str(dest), *WANTED], check=True)
    kept, dropped = [], []
    for wheel in sorted(dest.glob("*.whl")):
        if wheel_name(wheel) in IMAGE:
            dropped.append(wheel_name(wheel))
            wheel.unlink()
        else:
            kept.append(wheel)
    (dest / FROM_IMAGE).write_text("\n".join(dropped) + "\n")
    return kept


def check_offline(dest: Path, python: str) -> None:
    """Install the set with ``python`` (a 3.12) offline into a temporary folder and import it.

    The image's packages these wheels need are downloaded beside them first (not into
    ``dest``; their names are in ``dest/FROM_IMAGE``), so that the check sees what the
    machine would see.
    """
    with tempfile.TemporaryDirectory() as tmp:
        image = Path(tmp) / "image"
        needed = (dest / FROM_IMAGE).read_text().split()
        subprocess.run(
            [python, "-m", "pip", "download", "-q", "--no-deps", *PLATFORM_ARGS, "-d", str(image)]
            + needed,
            check=True,
        )
        site = Path(tmp) / "site"
        wheels = [str(p) for p in sorted(dest.glob("*.whl")) + sorted(image.glob("*.whl"))]
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
            + ["--target", str(site), *wheels],
            check=True,
        )
        probe = (
            "import IPython, ipykernel, nbformat, nbclient, jupyter_client, zmq, tornado, "
            "traitlets, comm, ipywidgets; nb = nbformat.v4.new_notebook(cells=["
            "nbformat.v4.new_code_cell('print(6 * 7)')]); "
            "from jupyter_client.kernelspec import NATIVE_KERNEL_NAME as k; "
            "nbclient.NotebookClient(nb, kernel_name=k, timeout=60).execute(); "
            "print('offline install on', __import__('sys').version.split()[0], 'ran a cell:', "
            "nb.cells[0].outputs[0]['text'].strip())"
        )
        env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": tmp}
        subprocess.run([python, "-c", probe], check=True, env=env)


def main(argv: list[str] | None = None) -> int:
    """Download, print sizes; with --check, install offline with a Python 3.12."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", type=Path, default=ROOT / ".whl")
    p.add_argument("--check", action="store_true", help="install offline with --python312")
    p.add_argument("--python312", default=shutil.which("python3.12") or "python3.12")
    p.add_argument("--keep", action="store_true", help="use the wheels already in --dest")
    args = p.parse_args(argv)
    wheels = sorted(args.dest.glob("*.whl")) if args.keep else download(args.dest)
    total = 0
    for wheel in wheels:
        size = wheel.stat().st_size
        total += size
        print(f"{size / 1024:9.0f} KiB  {wheel.name}")
    print(f"{total / 1024**2:9.1f} MiB  in all, {len(wheels)} wheels, in {args.dest}")
    if total > CARRY_LIMIT // 2:
        print(
            f"more than half of the {CARRY_LIMIT // 1024**2} MiB a call may carry", file=sys.stderr
        )
        return 1
    if args.check:
        check_offline(args.dest, args.python312)
    return 0


if __name__ == "__main__":
    sys.exit(main())
