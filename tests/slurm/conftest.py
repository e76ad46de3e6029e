"""A real one-node Slurm cluster on this machine, for the sbatch scripts in examples/slurm/.

Run with ``make test-slurm`` (``make test`` leaves this folder out). It needs root
(slurmd starts the jobs as their user) and Slurm and MUNGE installed; the Makefile
installs Debian's ``slurm-wlm`` and ``munge`` with apt-get when it runs as root
(tests/slurm/ensure_slurm.sh). Elsewhere every test here is skipped, saying why.

The ``slurm`` fixture starts, for the session, everything in a scratch folder and
nothing system-wide: ``munged`` with its own key and socket, ``slurmctld`` and
``slurmd`` with a generated ``slurm.conf`` (one node named ``localhost`` with this
machine's CPUs as ``slurmd -C`` reports them, free ports, no accounting, no
cgroups). Jobs run as root, from the repository's root, with this checkout's
``.venv/bin`` first on PATH. At the end it cancels what is left, stops the three
daemons it started (by their process ids) and checks that no job process is left.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Where Debian puts the daemons; root's PATH has it, other users' often not.
SBIN = "/usr/sbin"
COMMANDS = ("slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo", "scancel", "munged")
#: Variables of an outer launcher that must not leak into the test jobs.
_OUTER = re.compile(r"^(SLURM_|SBATCH_|SRUN_|SALLOC_)|^(RANK|LOCAL_RANK|WORLD_SIZE|"
                    r"LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_.*)$")  # fmt: skip


def _which(cmd: str) -> str | None:
    return shutil.which(cmd, path=os.pathsep.join([os.environ.get("PATH", ""), SBIN]))


def why_not_here() -> str | None:
    """Why a local Slurm cannot run here, or None."""
    if not sys.platform.startswith("linux"):
        return "a local Slurm cluster needs Linux"
    if os.geteuid() != 0:
        return ("needs root (slurmd starts jobs as their user): run `make test-slurm` as root, "
                "which also installs Debian's slurm-wlm and munge")  # fmt: skip
    missing = [c for c in COMMANDS if _which(c) is None]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} not found): `make test-slurm` as "
                "root on Debian or Ubuntu installs slurm-wlm and munge with apt-get")  # fmt: skip
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _node_hardware() -> str:
    """This machine's CPU layout from ``slurmd -C`` (NodeName and memory left out)."""
    out = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, timeout=30,
                         check=True).stdout  # fmt: skip
    keep = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
    fields = dict(re.findall(r"(\w+)=(\S+)", out.splitlines()[0]))
    return " ".join(f"{k}={fields[k]}" for k in keep if k in fields)


@dataclass
class Job:
    """A finished batch job: id, sbatch's exit code, seconds from submission, output file."""

    job_id: str
    returncode: int
    seconds: float
    output: str


@dataclass
class LocalSlurm:
    """A one-node Slurm in ``folder``; :meth:`sbatch` submits a job and waits for it."""

    folder: Path
    env: dict[str, str] = field(default_factory=dict)
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)
    jobs: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ start, stop
    def start(self) -> None:
        f = self.folder
        for sub in ("munge", "state", "spool", "jobs"):
            (f / sub).mkdir(mode=0o711)
        key = f / "munge" / "munge.key"
        key.write_bytes(os.urandom(128))  # what `mungekey --create` writes: 1024 random bits
        key.chmod(0o600)
        socket_path = f / "munge" / "munge.socket"
        self._daemon("munged", [_which("munged"), "--foreground", "--force",
                                f"--key-file={key}", f"--socket={socket_path}",
                                f"--pid-file={f / 'munge' / 'munged.pid'}",
                                f"--log-file={f / 'munge' / 'munged.log'}",
                                f"--seed-file={f / 'munge' / 'munged.seed'}"])  # fmt: skip
        self._wait(lambda: socket_path.exists(), 20, "munged did not create its socket")
        ctld_port, slurmd_port = _free_ports(2)
        conf = f / "slurm.conf"
        conf.write_text(SLURM_CONF.format(
            folder=f, ctld_port=ctld_port, slurmd_port=slurmd_port, socket=socket_path,
            hardware=_node_hardware()))  # fmt: skip
        path = os.pathsep.join([str(REPO / ".venv" / "bin"), os.environ.get("PATH", ""), SBIN])
        self.env = {k: v for k, v in os.environ.items() if not _OUTER.match(k)}
        self.env.update(SLURM_CONF=str(conf), PATH=path, PYTHONUNBUFFERED="1")
        from labsupport.runtime.launch.options import loopback_interface

        self.env["GLOO_SOCKET_IFNAME"] = loopback_interface() or "lo"  # everything on loopback
        self._daemon("slurmctld", [_which("slurmctld"), "-D", "-f", str(conf)])
        self._daemon("slurmd", [_which("slurmd"), "-D", "-f", str(conf), "-N", "localhost"])
        self._wait(self._idle, 60, "the node did not become idle")

    def _daemon(self, name: str, cmd: list[str]) -> None:
        log = (self.folder / f"{name}.out").open("w")
        self.daemons[name] = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env or None, start_new_session=True
        )

    def _idle(self) -> bool:
        out = self.run(["sinfo", "-h", "-N", "-o", "%T"], check=False).stdout.split()
        return out == ["idle"]

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.daemons.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited at start:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"{what} within {timeout:g} s:\n{self.logs()}")

    def logs(self) -> str:
        """The end of each daemon's log (for failure messages)."""
        parts = []
        for path in sorted(self.folder.glob("*.out")) + sorted(self.folder.glob("*.log")):
            parts.append(f"--- {path.name}\n" + path.read_text(errors="replace")[-1500:])
        return "\n".join(parts)

    def stop(self) -> list[str]:
        """Cancel our jobs, stop the daemons we started; describe any job process left."""
        if self.jobs and "slurmctld" in self.daemons:
            self.run(["scancel", *self.jobs], check=False)
            self._wait_quietly(lambda: not self.run(["squeue", "-h"], check=False).stdout.strip())
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.daemons.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return self._left_over()

    def _wait_quietly(self, ready, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not ready():
            time.sleep(0.5)

    def _left_over(self, grace: float = 10) -> list[str]:
        """Kill and describe what of this cluster is still alive (slurmstepd, our SLURM_CONF).

        A step's slurmstepd can still be on its way out when slurmd has stopped (seen in CI:
        two with an empty command line, the sign of a process exiting): each gets ``grace``
        seconds to end. A zombie has already exited (in a container whose PID 1 does not
        reap, it can stay one): it is not counted as running.
        """
        import psutil

        ours, found = self.env.get("SLURM_CONF"), []
        for proc in psutil.process_iter(["pid", "name", "cmdline"]):
            try:
                mine = proc.info["name"] == "slurmstepd" or proc.environ().get("SLURM_CONF") == ours
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if mine and proc.pid != os.getpid():
                found.append(proc)
        _, alive = psutil.wait_procs(found, timeout=grace)
        left = []
        for proc in alive:
            try:
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                cmdline = " ".join(proc.cmdline())[:120]
                proc.kill()  # described, then gone: nothing of the test stays behind
            except psutil.NoSuchProcess:
                continue
            left.append(f"{proc.pid} {cmdline}")
        return left

    # ------------------------------------------------------------------ using it
    def run(self, cmd: list[str], check: bool = True, timeout: float = 60) -> Any:
        """A Slurm command against this cluster (a ``subprocess.CompletedProcess``)."""
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=check)  # fmt: skip

    def sbatch(self, *args: str, export: dict[str, str] | None = None, tasks: int = 2,
               timeout: float = 300) -> Job:  # fmt: skip
        """``sbatch --wait`` with ``tasks`` tasks of one CPU on the node, from the repo's root."""
        name = f"job{len(self.jobs)}"
        cmd = ["sbatch", "--wait", "--parsable", f"--chdir={REPO}", f"--job-name={name}",
               f"--output={self.folder / 'jobs' / '%x-%j.out'}", "--nodes=1",
               f"--ntasks-per-node={tasks}", "--cpus-per-task=1"]  # fmt: skip
        if export:
            cmd.append("--export=" + ",".join(["ALL", *(f"{k}={v}" for k, v in export.items())]))
        start = time.monotonic()
        proc = subprocess.Popen([*cmd, *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        job_id = proc.stdout.readline().strip().split(";")[0]  # --parsable: the id, at once
        self.jobs.append(job_id)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.run(["scancel", job_id], check=False)
            proc.kill()
            proc.wait()
            pytest.fail(f"job {job_id} ({' '.join(args)}) still running after {timeout:g} s")
        seconds = time.monotonic() - start
        out = self.folder / "jobs" / f"{name}-{job_id}.out"
        text = out.read_text(errors="replace") if out.exists() else f"(no output file {out})"
        return Job(job_id, proc.returncode, seconds, text + proc.stderr.read())


#: The cluster: one node, no accounting, no cgroups (linuxproc tracks the processes), and
#: MinJobAge=10 so that `sbatch --wait` polls every 8 s instead of backing off to 32 s.
SLURM_CONF = """\
ClusterName=labsupport-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket}
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=10
NodeName=localhost NodeAddr=127.0.0.1 {hardware} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSlurm]:
    why = why_not_here()
    if why:
        pytest.skip(f"no local Slurm: {why}")
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        left = cluster.stop()
    if left:
        pytest.fail(f"processes left running after the cluster stopped: {left}")
