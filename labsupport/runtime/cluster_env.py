"""Who am I in the job? Rank, local rank, world size and rendezvous address, from the launcher.

The course's scripts run under two launchers on a cluster, and each says who a
process is in its own words:

* ``torchrun`` sets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR
  and MASTER_PORT;
* Slurm's ``srun``, starting one task per device, sets SLURM_PROCID (the rank),
  SLURM_LOCALID (the local rank), SLURM_STEP_NUM_TASKS (the world size; also in
  SLURM_NTASKS), SLURM_STEP_TASKS_PER_NODE with SLURM_NODEID (the tasks on this
  node), SLURM_STEP_NODELIST (the hosts, compressed: ``node[01-04]``) and
  SLURM_JOB_ID. It says nothing about where the ranks should meet.

:func:`from_environment` reads either into one :class:`RankEnv`. When both are
set, torchrun's names win, one by one: under ``srun torchrun ...`` (one torchrun
per node) the workers inherit the srun task's SLURM_PROCID, which numbers the
*nodes*, and a MASTER_ADDR or MASTER_PORT you export yourself beats the guess
below. :func:`export` writes the answer back under torchrun's names, so that
``init_process_group`` (``env://``), ``labsupport.runtime.backend.rank_device`` and every
reader of LOCAL_RANK work the same under both launchers.

Where the ranks meet under Slurm: MASTER_ADDR is the first host of the step
(rank 0 runs there with srun's default block distribution), expanded with
``scontrol show hostnames`` when it is on PATH, else by :func:`expand_hostlist`.
MASTER_PORT is 15000 plus the last four digits of SLURM_JOB_ID (PyTorch
Lightning's rule): every task computes the same port without talking, jobs that
share a node get different ones, and it stays below Linux's ephemeral ports
(32768 and up). Two steps of one job running at the same time need their own
MASTER_PORT.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass

#: torchrun's variables, in the order :func:`export` writes them.
TORCHRUN_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)


class NotLaunched(RuntimeError):
    """Neither torchrun nor srun started this process (or srun's variables are incomplete)."""


@dataclass(frozen=True)
class RankEnv:
    """One process's place in the job, and where the job's ranks meet.

    ``launcher`` is "torchrun" or "slurm"; ``sources`` says, for each of
    torchrun's variable names, where its value came from (e.g. ``"SLURM_PROCID"``,
    ``"the first host of SLURM_STEP_NODELIST"``, or the name itself when it was set).
    """

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int
    launcher: str
    sources: Mapping[str, str]

    def torchrun_vars(self) -> dict[str, str]:
        """The same facts under torchrun's names, as strings."""
        values = (
            self.rank,
            self.local_rank,
            self.world_size,
            self.local_world_size,
            self.master_addr,
            self.master_port,
        )
        return {name: str(v) for name, v in zip(TORCHRUN_VARS, values, strict=True)}

    def rendezvous(self) -> str:
        """``host:port (from ...)``: where rank 0 listens, and why there (for error messages)."""
        where = f"{self.master_addr}:{self.master_port}"
        addr, port = self.sources["MASTER_ADDR"], self.sources["MASTER_PORT"]
        if addr == "MASTER_ADDR" and port == "MASTER_PORT":
            return f"{where} (MASTER_ADDR and MASTER_PORT, set before the job started)"
        return f"{where} (address from {addr}, port from {port})"


# ----------------------------------------------------------------------------- host lists

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets: ``a[1,2],b`` -> ``a[1,2]``, ``b``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth < 0 or depth > 1:
            raise ValueError(f"bad host list {text!r}: brackets do not match")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"bad host list {text!r}: a '[' is never closed")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _numbers(group: str, entry: str) -> Iterator[str]:
    """``01-03,7`` -> 01, 02, 03, 7 (zero-padded to the width of each range's first number)."""
    for item in group.split(","):
        m = _RANGE.match(item.strip())
        if m is None or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise ValueError(f"bad host list entry {entry!r}: {item!r} is not a range like 1-4")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        for n in range(int(lo), int(hi) + 1):
            yield f"{n:0{len(lo)}d}"


def _expand_entry(entry: str) -> Iterator[str]:
    """One entry, any number of bracket groups: ``r[1-2]n[1-2]`` -> r1n1, r1n2, r2n1, r2n2."""
    m = re.match(r"^([^\[\]]*)\[([^\]]*)\](.*)$", entry)
    if m is None:
        if "]" in entry:
            raise ValueError(f"bad host list entry {entry!r}: a ']' without '['")
        yield entry
        return
    head, group, rest = m.groups()
    for number in _numbers(group, entry):
        for tail in _expand_entry(rest):
            yield f"{head}{number}{tail}"


def iter_hostlist(spec: str) -> Iterator[str]:
    """The hosts of a Slurm host list, in order, one at a time (see :func:`expand_hostlist`)."""
    for entry in _split_top(spec):
        yield from _expand_entry(entry)


def expand_hostlist(spec: str) -> list[str]:
    """Expand a Slurm host list: ``node[01-04]``, ``node[1,3-5]-ib``, ``r[1-2]n[1-2],login``.

    The pure-Python reading of ``scontrol show hostnames``: entries separated by
    commas, each with any number of ``[...]`` groups of numbers and ranges, kept
    zero-padded to the width of a range's first number (``n[099-101]`` gives
    n099, n100, n101). A text after the last group (``-ib``) needs Slurm 23.02.5
    or newer in ``scontrol`` itself; here it always works. Raises ValueError for
    a list that is not one.
    """
    return list(iter_hostlist(spec))


def first_host(spec: str, use_scontrol: bool = True) -> str:
    """The first host of a Slurm host list: ``scontrol show hostnames`` if on PATH, else ours."""
    if use_scontrol and shutil.which("scontrol"):
        try:
            out = subprocess.run(
                ["scontrol", "show", "hostnames", spec],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.split()
            if out:
                return out[0]
        except (OSError, subprocess.SubprocessError):
            pass  # no slurm.conf here, or an older scontrol: read it ourselves
    for host in iter_hostlist(spec):
        return host
    raise ValueError(f"the host list {spec!r} names no host")


def tasks_on_node(tasks_per_node: str, node_id: int) -> int:
    """The tasks on node ``node_id`` from Slurm's ``2(x3),1`` form (2 on nodes 0-2, 1 on 3)."""
    counts: list[int] = []
    for item in tasks_per_node.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if m is None:
            raise ValueError(f"bad tasks-per-node value {tasks_per_node!r}")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    if not 0 <= node_id < len(counts):
        raise ValueError(f"node {node_id} is not among the {len(counts)} of {tasks_per_node!r}")
    return counts[node_id]


def port_for_job(job_id: str) -> int:
    """15000 + the last four digits of the job id: the same on every task of the job."""
    digits = re.sub(r"\D", "", job_id)
    if not digits:
        raise ValueError(f"SLURM_JOB_ID {job_id!r} has no digits")
    return 15000 + int(digits[-4:])


# ----------------------------------------------------------------------------- the environment


def _first(env: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    for name in names:
        if env.get(name, "").strip():
            return name, env[name].strip()
    return None


def _slurm_values(env: Mapping[str, str], use_scontrol: bool) -> dict[str, tuple[str, str]]:
    """torchrun's names -> (value, where it came from), from an srun task's variables."""
    if "SLURM_STEP_NUM_TASKS" not in env:  # srun sets it for its tasks; the batch script has none
        tasks = env.get("SLURM_NTASKS", "1")
        raise NotLaunched(
            f"this is the batch script (or salloc shell) of Slurm job {env['SLURM_JOB_ID']} "
            f"(SLURM_NTASKS={tasks}), not a task started by srun: start one task per device "
            "with `srun python ...` (or one torchrun per node: see examples/slurm/)"
        )
    missing = [n for n in ("SLURM_PROCID", "SLURM_LOCALID") if n not in env]
    hosts = _first(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
    if hosts is None:
        missing.append("SLURM_STEP_NODELIST")
    if missing:
        raise NotLaunched(f"srun's variables are incomplete here: {', '.join(missing)} not set")
    out = {
        "RANK": (env["SLURM_PROCID"], "SLURM_PROCID"),
        "LOCAL_RANK": (env["SLURM_LOCALID"], "SLURM_LOCALID"),
        "WORLD_SIZE": (env["SLURM_STEP_NUM_TASKS"], "SLURM_STEP_NUM_TASKS"),
    }
    per_node = _first(env, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
    if per_node is not None:
        node = int(env.get("SLURM_NODEID", "0"))
        local = tasks_on_node(per_node[1], node)
        out["LOCAL_WORLD_SIZE"] = (str(local), f"{per_node[0]} (node {node})")
    if not env.get("MASTER_ADDR", "").strip():  # yours wins: no need to ask scontrol
        out["MASTER_ADDR"] = (first_host(hosts[1], use_scontrol), f"the first host of {hosts[0]}")
    out["MASTER_PORT"] = (str(port_for_job(env["SLURM_JOB_ID"])), "SLURM_JOB_ID")
    return out


def from_environment(
    environ: Mapping[str, str] | None = None, *, use_scontrol: bool = True
) -> RankEnv:
    """Read this process's rank and rendezvous from torchrun's or srun's variables.

    torchrun's names win over Slurm's, one by one. Without torchrun's
    LOCAL_RANK and LOCAL_WORLD_SIZE (nor Slurm's), the job is taken to be one
    node (LOCAL_RANK = RANK, LOCAL_WORLD_SIZE = WORLD_SIZE). Raises
    :class:`NotLaunched`, saying how to start the script, when neither launcher
    is there (or a Slurm batch script runs it without srun).
    """
    env = os.environ if environ is None else environ
    got: dict[str, tuple[str, str]] = {}
    launcher = "torchrun" if "RANK" in env else None
    if launcher is None and "SLURM_JOB_ID" in env:
        got = _slurm_values(env, use_scontrol)
        launcher = "slurm"
    if launcher is None:
        script = sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") else "SCRIPT"
        raise NotLaunched(
            "not started by torchrun or srun (neither RANK nor SLURM_JOB_ID is set).\n"
            "Start it as\n"
            f"  torchrun --standalone --nproc_per_node=2 {script} ...   (one machine)\n"
            f"  srun --ntasks=2 python {script} ...   (in a Slurm job)"
        )
    for name in TORCHRUN_VARS:  # torchrun's names win
        if env.get(name, "").strip():
            got[name] = (env[name].strip(), name)
    if "WORLD_SIZE" in got:
        got.setdefault("LOCAL_WORLD_SIZE", (got["WORLD_SIZE"][0], "WORLD_SIZE (one node)"))
    if "RANK" in got:
        got.setdefault("LOCAL_RANK", (got["RANK"][0], "RANK (one node)"))
    missing = [n for n in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if n not in got]
    if missing:
        raise NotLaunched(
            f"{', '.join(missing)} not set: torchrun sets all of them; under Slurm, start "
            "the script with srun (which sets SLURM_PROCID and the rest)"
        )
    try:
        ints = {n: int(got[n][0]) for n in TORCHRUN_VARS if n != "MASTER_ADDR"}
    except ValueError as exc:
        raise NotLaunched(f"a launcher variable is not a whole number: {exc}") from None
    rank, world = ints["RANK"], ints["WORLD_SIZE"]
    if not 0 <= rank < world or not 0 <= ints["LOCAL_RANK"] < ints["LOCAL_WORLD_SIZE"]:
        raise NotLaunched(f"inconsistent launcher variables: {dict(sorted(ints.items()))}")
    return RankEnv(
        rank=rank,
        local_rank=ints["LOCAL_RANK"],
        world_size=world,
        local_world_size=ints["LOCAL_WORLD_SIZE"],
        master_addr=got["MASTER_ADDR"][0],
        master_port=ints["MASTER_PORT"],
        launcher=launcher,
        sources={name: got[name][1] for name in TORCHRUN_VARS},
    )


def export(
    environ: MutableMapping[str, str] | None = None, *, use_scontrol: bool = True
) -> RankEnv:
    """:func:`from_environment`, then write its answer under torchrun's names into ``environ``.

    Call it first thing in a script: afterwards ``dist.init_process_group(backend)``
    and everything that reads RANK or LOCAL_RANK work under srun as under torchrun.
    """
    env = os.environ if environ is None else environ
    found = from_environment(env, use_scontrol=use_scontrol)
    env.update(found.torchrun_vars())
    return found
