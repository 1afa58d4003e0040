"""Each rollout worker on its own CPUs: a machine-wide claim per CPU, held as an flock.

Ray reserves `num_cpus` for a worker in its books only; the kernel still moves the worker's
threads and its solver processes across every CPU. In the CPU-bound regime a worker is one
chain of hand-offs (event loop -> solver thread -> sandboxed worker -> planner and back), and
on a VM every hand-off to another CPU that has gone idle costs a wake-up of that CPU. Pinned,
both ends of a hand-off share a CPU that stays awake while its worker has work, so the machine
idles less during a job (figures: docs/results/2026-12-03-rollout-throughput.md).

A claim is a lock on `<claims dir>/cpu-<N>`, taken without blocking and held by an open file
for the worker's life: the kernel drops it when the process dies, however it dies, so a
replacement worker can take the same CPUs. Claims are per machine, not per Ray node (several
raylets on one machine share its CPUs) and not per job (a second job on a machine whose CPUs
are all claimed runs its workers unpinned). A worker that cannot claim all the CPUs it holds
stays unpinned: more workers than CPUs, or CPUs the process may not use, cost nothing. Nor does
a worker pin itself where its CPUs are a quota, not a set (a container limited to 4 CPUs' time
on a 64-CPU host): CPU 0 there is everyone's, and pinning to it would queue behind others.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


def default_claims_dir() -> Path:
    """$HALO_CPU_CLAIMS_DIR, else a folder in /dev/shm (a tmpfs every process of the machine sees)."""
    if os.environ.get("HALO_CPU_CLAIMS_DIR"):
        return Path(os.environ["HALO_CPU_CLAIMS_DIR"])
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return base / f"halo-cpu-claims-{os.getuid()}"


@dataclass
class CpuClaim:
    cpus: tuple[int, ...]
    fds: list[int] = field(default_factory=list, repr=False)  # one locked file per CPU

    def release(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the only descriptor drops its flock
        self.fds.clear()


def _try_lock(path: Path) -> int | None:
    """An open descriptor holding the file's lock, or None (held elsewhere, or not openable)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def quota_cpus() -> float | None:
    """The CPU time this process's cgroup may use, in CPUs (cgroup v2 cpu.max or v1 CFS quota);
    None without a quota."""
    candidates = ((Path("/sys/fs/cgroup/cpu.max"), None),
                  (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")))
    for quota_path, period_path in candidates:
        try:
            if period_path is None:
                quota, period = quota_path.read_text().split()[:2]
            else:
                quota, period = quota_path.read_text().strip(), period_path.read_text().strip()
        except (OSError, ValueError):
            continue
        if quota in ("max", "-1"):
            return None
        with contextlib.suppress(ValueError, ZeroDivisionError):
            return int(quota) / int(period)
    return None


def claim_cpus(count: int, claims_dir: Path | None = None) -> CpuClaim | None:
    """Claim `count` of the CPUs this process may run on, lowest free first; None (and nothing
    held) when fewer are free, or when the process's CPUs are a quota smaller than its CPU set.
    The caller pins itself to `claim.cpus` and keeps the claim."""
    allowed = sorted(os.sched_getaffinity(0))
    if count <= 0 or count > len(allowed):
        return None
    quota = quota_cpus()
    if quota is not None and quota < len(allowed):
        return None
    claims_dir = claims_dir or default_claims_dir()
    try:
        claims_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    taken: list[int] = []
    fds: list[int] = []
    for cpu in allowed:
        fd = _try_lock(claims_dir / f"cpu-{cpu}")
        if fd is None:
            continue
        taken.append(cpu)
        fds.append(fd)
        if len(taken) == count:
            return CpuClaim(tuple(taken), fds)
    CpuClaim((), fds).release()  # too few free: hold none
    return None


def pin_to_claimed_cpus(count: int, claims_dir: Path | None = None) -> CpuClaim | None:
    """Claim `count` CPUs and pin this process to them: every thread it has (Linux sets the
    affinity per thread), and so the threads and processes it starts later; None when they
    could not be claimed or the pinning failed."""
    claim = claim_cpus(count, claims_dir)
    if claim is None:
        return None
    cpus = set(claim.cpus)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:
        claim.release()
        return None
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(tid), cpus)
    return claim
