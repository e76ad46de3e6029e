# Sourced by the sbatch scripts in this folder (from the repository's root, where the job
# starts): the environment notebooks 06 and 09 teach, and `launch PROGRAM ARGS...`, which
# starts PROGRAM on every device of the job in one of the two ways Slurm users launch:
#
#   LAUNCH=srun (default)  srun starts one task per device; each process reads its rank from
#                          srun's variables (labsupport.runtime.cluster_env). No torchrun.
#   LAUNCH=torchrun        srun starts one torchrun per node; torchrun starts the workers.
#
# PROGRAM is a script (examples/hello_ranks.py) or "-m module" (-m labsupport.runtime.bench).

# ---- the environment; each variable is from its backend's own documentation ----
# Threads per rank: the CPUs Slurm gave each task (torch would otherwise start one per core).
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
# Device visibility. The scripts ask for devices per node, so every task sees all of the
# node's devices and takes device LOCAL_RANK (= SLURM_LOCALID, or torchrun's LOCAL_RANK).
# Slurm sets CUDA_VISIBLE_DEVICES to the GPUs it allocated; it sets nothing for Ascend NPUs.
# With --gpus-per-task=1 instead, each task would see one GPU, numbered 0, and device
# LOCAL_RANK would not exist on local ranks 1-7.
#export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3   # CANN: only these NPUs, renumbered from 0
# Timeouts. torch's own (init_process_group's timeout: hello_ranks.py --timeout) bounds the
# rendezvous and, on gloo and with NCCL's watchdog, each collective; the job's --time
# bounds everything.
#export HCCL_CONNECT_TIMEOUT=600    # HCCL link set-up, s (120-7200, default 120)
#export HCCL_EXEC_TIMEOUT=1836      # HCCL: how long a collective waits for its peers, s
# Interfaces: which network the ranks' set-up and socket traffic takes between nodes.
#export GLOO_SOCKET_IFNAME=eth0     # gloo (torch)
#export NCCL_SOCKET_IFNAME==eth0    # NCCL ("=" an exact name, "^" to exclude, else prefixes)
#export NCCL_IB_HCA=mlx5_0,mlx5_1   # NCCL: which InfiniBand/RoCE adapters
#export HCCL_SOCKET_IFNAME==eth0    # HCCL: the host interface that reaches the root node
# Logs, to diagnose a failure (then remove them: NCCL warns its debugging variables can
# slow a job down or hang it):
#export NCCL_DEBUG=INFO
#export ASCEND_GLOBAL_LOG_LEVEL=1 ASCEND_SLOG_PRINT_TO_STDOUT=1

launch() {
    local nodes=$SLURM_JOB_NUM_NODES
    local per_node=${SLURM_NTASKS_PER_NODE:?"ask for --ntasks-per-node (one task per device), not --ntasks"}
    if [ "${LAUNCH:-srun}" = torchrun ]; then
        # (b) One torchrun per node (python -m torch.distributed.run is torchrun), each with
        # all of its node's CPUs and devices (a step gets all of the job's devices unless it
        # asks otherwise). The nodes meet through the c10d rendezvous on the first node, on
        # a port derived from the job id (15000 + its last four digits, as cluster_env does).
        local head port
        head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
        port=$((15000 + SLURM_JOB_ID % 10000))
        srun --ntasks="$nodes" --ntasks-per-node=1 --cpus-per-task="$SLURM_CPUS_ON_NODE" \
            python -m torch.distributed.run --nnodes="$nodes" --nproc-per-node="$per_node" \
            --rdzv-backend=c10d --rdzv-endpoint="$head:$port" --rdzv-id="$SLURM_JOB_ID" "$@"
    elif [ "${LAUNCH:-srun}" = srun ]; then
        # (a) One task per device (--cpus-per-task again: srun 22.05 to 23.02.4 does not inherit it).
        srun --cpus-per-task="${SLURM_CPUS_PER_TASK:-1}" python "$@"
    else
        echo "LAUNCH=$LAUNCH: choose srun (one task per device) or torchrun (one per node)" >&2
        return 2
    fi
}
