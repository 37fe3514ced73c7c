"""This process's place in a job and its setup before the process group, without DeepSpeed.

:class:`World` (rank, world size, local rank, backend) is what codept.train.engine.init_distributed
returns. :func:`single_process_env` makes ``python recipes/<recipe>.py`` without a launcher a one-rank
job (RANK=0, WORLD_SIZE=1, a free local port); :func:`tune_cpu_allocator` sets glibc malloc's mmap and
trim thresholds (:data:`CPU_MALLOC_ENV`) so that ZeRO on CPU stops faulting in fresh pages every step.
init_distributed calls single_process_env, and tune_cpu_allocator on the CPU accelerator, before it
joins the process group.
Cost: one socket bind (single_process_env), two mallopt calls; imports neither torch nor deepspeed.
Limits: tune_cpu_allocator is glibc-only (a no-op elsewhere, or when the user set either variable of
CPU_MALLOC_ENV) and process-wide; single_process_env leaves a launched rank's environment (any
variable of LAUNCHER_ENV set) as the launcher set it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class World:
    rank: int
    world_size: int
    local_rank: int
    backend: str


# glibc malloc settings for CPU training processes (see tune_cpu_allocator); the names are glibc's
# environment variables with the same meaning, for child processes that should match.
CPU_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def tune_cpu_allocator() -> dict[str, str]:
    """Make glibc malloc keep freed memory for reuse in this process. Returns the settings applied: {}
    when none (not glibc, or the user set either variable of CPU_MALLOC_ENV, which glibc then applied).

    Why: ZeRO on CPU allocates and frees tensors the size of the flat gradient partition every step
    (flattened gradients, AdamW's temporaries on the flat fp32 partition, the fp64 copies of the grad
    norm). By default glibc serves such chunks with fresh mmap pages once they pass its dynamic mmap
    threshold, and trims freed memory off the top of the heap, so every step faulted ~30-120 MB of new
    zero pages in again: 7-45 k minor page faults per step for the debug_cpu model with ZeRO-2, up to
    5-10 % of a step (the torch loop of benchmarks/bench_engine.py: ~0-5 k). The mmap threshold fixed at
    glibc's maximum (32 MiB; smaller chunks come from the heap and are reused) and a 1 GiB trim
    threshold bring it to ~0. Cost: up to 1 GiB of freed heap stays with the process. Process-wide,
    so init_distributed calls it only on the CPU accelerator (a CPU training process)."""
    if any(k in os.environ for k in CPU_MALLOC_ENV):
        return {}
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # glibc; absent on macOS, a stub returning 0 on musl
    except (OSError, AttributeError):
        return {}
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    applied = {}
    for opt, key in ((m_mmap_threshold, "MALLOC_MMAP_THRESHOLD_"), (m_trim_threshold, "MALLOC_TRIM_THRESHOLD_")):
        if mallopt(opt, int(CPU_MALLOC_ENV[key])) == 1:
            applied[key] = CPU_MALLOC_ENV[key]
    return applied


LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")


def single_process_env() -> bool:
    """``python recipes/pretrain_code.py`` without a launcher: no RANK / WORLD_SIZE (nor MPI's or
    Slurm's variables) in the environment. DeepSpeed then falls back to MPI discovery, a traceback
    without mpi4py; instead this sets a one-rank job (RANK=0, WORLD_SIZE=1, a free local port).
    True when it did; a launched rank's environment is left as the launcher set it."""
    if any(k in os.environ for k in LAUNCHER_ENV):
        return False
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                      MASTER_ADDR=os.environ.get("MASTER_ADDR", "127.0.0.1"),
                      MASTER_PORT=os.environ.get("MASTER_PORT", str(port)))
    return True
