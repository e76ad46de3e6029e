#!/usr/bin/env bash
# Make sure Slurm and MUNGE are there for `make test-slurm`.
#
# If slurmctld, slurmd, the client commands or munged are missing, install Debian's
# slurm-wlm and munge with apt-get when we are root; otherwise say so and carry on:
# the tests then skip, each saying why. Nothing is started or configured here (the
# tests start a private cluster in a scratch folder: tests/slurm/conftest.py).
set -euo pipefail
PATH="$PATH:/usr/sbin:/sbin"
missing=()
for cmd in slurmctld slurmd sbatch srun scontrol sinfo scancel munged; do
    command -v "$cmd" >/dev/null || missing+=("$cmd")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "make test-slurm: ${missing[*]} missing; installing Debian's slurm-wlm and munge with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # Installing does not start the daemons in a container (no init system); the tests
    # start their own, with their own configuration, and stop them at the end.
    apt-get install -y -q --no-install-recommends slurm-wlm munge
    echo "make test-slurm: installed $(dpkg-query -W -f '${Package} ${Version}' slurm-wlm)"
    exit 0
fi
echo "make test-slurm: Slurm is not installed (${missing[*]} missing) and this is not root" \
     "on a Debian-like machine, so the Slurm tests will be skipped." \
     "To run them: sudo apt-get install slurm-wlm munge, then run make test-slurm as root."
