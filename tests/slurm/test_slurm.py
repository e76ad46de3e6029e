"""The sbatch scripts of examples/slurm/ on a real one-node Slurm (see conftest.py).

Each script runs with 2 tasks of one CPU each, on gloo, both ways Slurm users launch:
srun starting one task per device (the ranks read srun's variables through
labsupport.runtime.cluster_env), and srun starting one torchrun per node. What is checked
is what a user reads in the job's output: every rank joined, the sum is right,
the benchmark's #wrong is 0, the weights match one process; and that ranks that
cannot meet fail within their timeout, each saying where they were to meet.
Multi-node jobs, NPUs and GPUs cannot be tried here.
"""

from __future__ import annotations

import json
import re
import socket

import pytest

LAUNCHES = ["srun", "torchrun"]
#: What hello_ranks.py says started it (labsupport.runtime.cluster_env's ``launcher``).
STARTED_BY = {"srun": "slurm", "torchrun": "torchrun"}


@pytest.mark.parametrize("launch", LAUNCHES)
def test_hello_ranks_every_rank_joins_and_the_sum_is_right(slurm, launch):
    job = slurm.sbatch("examples/slurm/hello_ranks.sbatch", export={"LAUNCH": launch})
    assert job.returncode == 0, job.output[-3000:]
    for rank in (0, 1):
        line = (
            f"RANK {rank} of WORLD_SIZE 2 on {socket.gethostname()}: LOCAL_RANK {rank}, "
            f"device cpu; sum of ranks 1 (expected 1); started by {STARTED_BY[launch]}"
        )
        assert line in job.output, job.output[-3000:]


@pytest.mark.parametrize("launch", LAUNCHES)
def test_the_benchmark_sweep_is_right_and_saved_as_json_for_notebook_06(slurm, launch, tmp_path):
    saved = tmp_path / "ar_1x2.json"
    sizes = ["-b", "1K", "-e", "64K", "-f", "4", "-n", "5", "-w", "2"]
    job = slurm.sbatch("examples/slurm/bench.sbatch", *sizes,
                       export={"LAUNCH": launch, "JSON": str(saved)})  # fmt: skip
    assert job.returncode == 0, job.output[-3000:]
    rows = [line.split() for line in job.output.splitlines() if re.match(r"^\s+\d+\s+\d+", line)]
    assert [int(r[0]) for r in rows] == [1024, 4096, 16384, 65536], job.output[-3000:]
    assert all(r[8] == r[12] == "0" for r in rows)  # #wrong, out-of-place and in-place
    assert "# Out of bounds values : 0 OK" in job.output
    data = json.loads(saved.read_text())
    assert data["nranks"] == 2 and data["backend"] == "gloo"
    assert len(data["results"]) == 8 and all(r["wrong"] == 0 for r in data["results"])


@pytest.mark.parametrize("launch", LAUNCHES)
def test_the_ddp_example_trains_and_matches_one_process(slurm, launch):
    job = slurm.sbatch("examples/slurm/ddp.sbatch", "--version", "bucket", "--steps", "2",
                       "--check", export={"LAUNCH": launch})  # fmt: skip
    assert job.returncode == 0, job.output[-3000:]
    assert "bucket: 2 ranks (gloo on cpu)" in job.output
    assert "same as one process at every step" in job.output


def test_the_capstone_starts_under_srun_without_torchrun(slurm):
    job = slurm.sbatch("--wrap", "srun python examples/capstone.py --steps 2 --timed 1 --check")
    assert job.returncode == 0, job.output[-3000:]
    assert "bucket: 2 ranks on cpu" in job.output
    assert "same as one process at every step" in job.output


def test_a_script_run_by_the_batch_shell_without_srun_is_told_to_use_srun(slurm):
    job = slurm.sbatch("--wrap", "python examples/hello_ranks.py")
    assert job.returncode != 0
    said = f"batch script (or salloc shell) of Slurm job {job.job_id} (SLURM_NTASKS=2)"
    assert said in job.output, job.output[-3000:]
    assert "srun python" in job.output


def test_ranks_that_cannot_meet_fail_within_their_timeout_saying_where(slurm):
    # A MASTER_ADDR left in the environment wins over Slurm's first host (torchrun's
    # variables win), and 192.0.2.1 (TEST-NET-1, RFC 5737) is nobody's address.
    timeout = 10
    job = slurm.sbatch("--time=3", "examples/slurm/hello_ranks.sbatch", "--timeout", str(timeout),
                       export={"MASTER_ADDR": "192.0.2.1"})  # fmt: skip
    assert job.returncode != 0
    for rank in (0, 1):
        said = re.search(rf"RANK {rank} of 2 \(slurm\): the ranks did not all meet at "
                         r"192\.0\.2\.1:\d+ \(address from MASTER_ADDR, port from SLURM_JOB_ID\) "
                         r"within (\d+) s \(--timeout 10\)", job.output)  # fmt: skip
        assert said, job.output[-3000:]
        # torch's store client tries again after a failed try if its deadline has not passed,
        # and a try itself may take the whole timeout: about twice --timeout on a busy machine
        assert int(said.group(1)) <= 3 * timeout, said.group(0)
    assert job.seconds < 180  # well before the job's --time=3 (minutes)


def test_the_host_list_parser_agrees_with_this_slurms_scontrol(slurm):
    from labsupport.runtime.cluster_env import expand_hostlist

    specs = ["node[01-04]", "n[099-101]", "rack[1-2]-n[01-02],login", "gpu[08-09],cpu1,x[7]"]
    for spec in specs:
        hosts = slurm.run(["scontrol", "show", "hostnames", spec]).stdout.split()
        assert expand_hostlist(spec) == hosts, spec
    # A text after the last bracket ("-ib") needs scontrol from Slurm 23.02.5 on; the
    # parser reads it either way, as the newer scontrol does.
    # (22.05 prints "Invalid hostlist" and no host; first_host then asks the parser).
    suffixed = slurm.run(["scontrol", "show", "hostnames", "node[1,3-5]-ib"], check=False)
    if suffixed.stdout.split():
        assert expand_hostlist("node[1,3-5]-ib") == suffixed.stdout.split()
