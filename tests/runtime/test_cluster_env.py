"""labsupport.runtime.cluster_env: rank and rendezvous from torchrun's or srun's variables.

The Slurm environments below are what srun gives its tasks (the one-node one was
copied from a real Slurm 22.05 job; the multi-node ones follow the same names).
tests/slurm/ runs the scripts on a real one-node Slurm.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from labsupport.runtime.cluster_env import (
    NotLaunched,
    expand_hostlist,
    export,
    first_host,
    from_environment,
    port_for_job,
    tasks_on_node,
)

# srun --ntasks=2 on one node called "vm", job 1: task 1
ONE_NODE = {
    "SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "vm", "SLURM_NODELIST": "vm",
    "SLURM_STEP_NODELIST": "vm", "SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_TASKS_PER_NODE": "2", "SLURM_NODEID": "0",
    "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "SLURM_STEP_ID": "0",
}  # fmt: skip


def two_nodes(procid: int, per_node: int = 8, job: str = "4123456") -> dict[str, str]:
    """srun with ``per_node`` tasks on each of node01 and node02: task ``procid``."""
    return {
        "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": "node[01-02]",
        "SLURM_STEP_NODELIST": "node[01-02]", "SLURM_NTASKS": str(2 * per_node),
        "SLURM_STEP_NUM_TASKS": str(2 * per_node), "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x2)",
        "SLURM_NODEID": str(procid // per_node), "SLURM_PROCID": str(procid),
        "SLURM_LOCALID": str(procid % per_node), "SLURM_STEP_ID": "0",
    }  # fmt: skip


def test_one_node_srun_task_gets_its_rank_and_meets_on_the_node():
    got = from_environment(ONE_NODE, use_scontrol=False)
    assert (got.rank, got.local_rank, got.world_size, got.local_world_size) == (1, 1, 2, 2)
    assert (got.master_addr, got.master_port, got.launcher) == ("vm", 15001, "slurm")


def test_two_nodes_every_task_agrees_on_the_first_host_and_the_port():
    seen = [from_environment(two_nodes(p), use_scontrol=False) for p in range(16)]
    assert [e.rank for e in seen] == list(range(16))
    assert [e.local_rank for e in seen] == list(range(8)) * 2  # the device on each node
    assert {(e.master_addr, e.master_port) for e in seen} == {("node01", 15000 + 3456)}
    assert {(e.world_size, e.local_world_size) for e in seen} == {(16, 8)}


def test_the_step_nodelist_beats_the_jobs_when_the_step_runs_on_fewer_nodes():
    env = dict(two_nodes(0), SLURM_STEP_NODELIST="node02", SLURM_JOB_NODELIST="node[01-02]")
    assert from_environment(env, use_scontrol=False).master_addr == "node02"


def test_uneven_tasks_per_node():
    assert [tasks_on_node("3,2(x2)", n) for n in range(3)] == [3, 2, 2]
    env = dict(two_nodes(3, per_node=3), SLURM_STEP_TASKS_PER_NODE="3,2", SLURM_NODEID="1")
    env.update(SLURM_LOCALID="0", SLURM_STEP_NUM_TASKS="5")
    assert from_environment(env, use_scontrol=False).local_world_size == 2
    with pytest.raises(ValueError, match="node 4"):
        tasks_on_node("8(x2)", 4)


@pytest.mark.parametrize(
    ("spec", "hosts"),
    [
        ("node[01-04]", ["node01", "node02", "node03", "node04"]),
        ("node[1,3-5]-ib", ["node1-ib", "node3-ib", "node4-ib", "node5-ib"]),
        ("n[099-101]", ["n099", "n100", "n101"]),
        ("rack[1-2]-n[01-02],login", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02", "login"]),
        ("gpu[08-09],cpu1,x[7]", ["gpu08", "gpu09", "cpu1", "x7"]),
        ("vm", ["vm"]),
        ("n[1-2],,m", ["n1", "n2", "m"]),
    ],
)
def test_host_lists_expand_as_scontrol_does(spec, hosts):
    assert expand_hostlist(spec) == hosts
    assert first_host(spec, use_scontrol=False) == hosts[0]


@pytest.mark.parametrize("spec", ["n[3-1]", "n[1-2", "n[a-b]", "n1]", "n[]", "n[[1]]"])
def test_a_bad_host_list_is_refused_with_its_text(spec):
    with pytest.raises(ValueError, match="bad host list"):
        expand_hostlist(spec)


def test_the_first_host_of_a_huge_range_comes_at_once():
    assert first_host("n[0-999999999]", use_scontrol=False) == "n0"


def _fake_scontrol(folder, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = folder / "scontrol"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_scontrol_is_asked_when_it_is_on_path(tmp_path, monkeypatch):
    _fake_scontrol(tmp_path, 'echo "from-scontrol"; echo other\n', monkeypatch)
    assert first_host("node[01-02]") == "from-scontrol"
    assert first_host("node[01-02]", use_scontrol=False) == "node01"


def test_a_failing_scontrol_falls_back_to_the_parser(tmp_path, monkeypatch):
    _fake_scontrol(tmp_path, 'echo "scontrol: fatal: no config" >&2; exit 1\n', monkeypatch)
    assert first_host("node[07-08]") == "node07"


def test_an_older_scontrol_that_names_no_host_falls_back_to_the_parser(tmp_path, monkeypatch):
    # Slurm 22.05 scontrol prints "Invalid hostlist" (stderr) for node[1-2]-ib, exit code 0
    _fake_scontrol(tmp_path, 'echo "Invalid hostlist: $3" >&2\n', monkeypatch)
    assert first_host("node[1,3-5]-ib") == "node1-ib"


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="no scontrol on PATH")
def test_the_parser_agrees_with_this_machines_scontrol():
    specs = ["node[01-04]", "n[099-101]", "rack[1-2]-n[01-02],login", "gpu[08-09],cpu1,x[7]"]
    try:
        subprocess.run(["scontrol", "show", "hostnames", "a"], check=True, capture_output=True,
                       timeout=10)  # fmt: skip
    except (subprocess.SubprocessError, OSError):
        pytest.skip("scontrol is on PATH but cannot run here (no slurm.conf)")
    for spec in specs:
        out = subprocess.run(["scontrol", "show", "hostnames", spec], capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
        assert expand_hostlist(spec) == out, spec


def test_the_port_is_15000_plus_the_job_ids_last_four_digits():
    assert port_for_job("7") == 15007
    assert port_for_job("4129999") == 24999
    assert port_for_job("12345_6") == 15000 + 3456  # an array task's id, if one gets here


def test_torchrun_wins_under_srun_torchrun():
    # srun starts one torchrun per node; its workers inherit the task's SLURM_PROCID (= node)
    env = dict(two_nodes(1, per_node=1), RANK="13", LOCAL_RANK="5", WORLD_SIZE="16",
               LOCAL_WORLD_SIZE="8", MASTER_ADDR="10.1.0.1", MASTER_PORT="29400")  # fmt: skip
    got = from_environment(env, use_scontrol=False)
    assert (got.rank, got.local_rank, got.world_size, got.local_world_size) == (13, 5, 16, 8)
    assert (got.master_addr, got.master_port, got.launcher) == ("10.1.0.1", 29400, "torchrun")


def test_an_exported_master_addr_wins_over_the_first_host_and_is_named_in_the_message():
    env = dict(ONE_NODE, MASTER_ADDR="192.0.2.1")
    got = from_environment(env, use_scontrol=False)
    assert (got.master_addr, got.master_port, got.rank) == ("192.0.2.1", 15001, 1)
    assert "192.0.2.1:15001 (address from MASTER_ADDR, port from SLURM_JOB_ID)" == got.rendezvous()


def test_torchrun_alone_without_local_variables_is_one_node():
    env = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    got = from_environment(env)
    assert (got.local_rank, got.local_world_size, got.launcher) == (1, 2, "torchrun")


def test_a_batch_script_without_srun_is_told_to_use_srun():
    batch = {k: v for k, v in ONE_NODE.items() if not k.startswith("SLURM_STEP")}
    batch.update(SLURM_PROCID="0", SLURM_LOCALID="0")  # what sbatch's own shell has
    with pytest.raises(NotLaunched, match=r"\(or salloc shell\) of Slurm job 1 .*srun python"):
        from_environment(batch)


def test_no_launcher_says_how_to_start():
    with pytest.raises(NotLaunched, match=r"torchrun --standalone.*\n.*srun --ntasks=2"):
        from_environment({"HOME": "/root"})


def test_bad_values_are_refused():
    with pytest.raises(NotLaunched, match="whole number"):
        from_environment(dict(ONE_NODE, SLURM_PROCID="x"), use_scontrol=False)
    with pytest.raises(NotLaunched, match="inconsistent"):
        from_environment(dict(ONE_NODE, SLURM_PROCID="2"), use_scontrol=False)
    with pytest.raises(NotLaunched, match="MASTER_PORT"):
        from_environment({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "h"})


def test_export_writes_torchruns_names_for_init_process_group():
    env = dict(two_nodes(9))
    got = export(env, use_scontrol=False)
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")} == {
        "RANK": "9", "LOCAL_RANK": "1", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"
    }  # fmt: skip
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("node01", "18456")
    assert got.sources["RANK"] == "SLURM_PROCID"
    again = from_environment(env)  # now torchrun's names are there, and say the same
    assert (again.launcher, again.torchrun_vars()) == ("torchrun", got.torchrun_vars())
