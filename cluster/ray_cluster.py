"""Start Ray in-process (sized to the machine, lean) or join an existing cluster.

The dashboard more than doubles an idle local cluster's memory, so it is off unless asked for;
the object store is capped (episodes are small) so an idle local cluster stays light. Without
the dashboard nothing reads Ray's own metrics or task events, so a lean cluster does not
collect them either (what that saves in a rollout job: docs/results/2026-12-03-rollout-throughput.md).
A cluster joined by address keeps its own settings.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_OBJECT_STORE_MB = 512
# task_events_report_interval_ms 0: the workers do not record task events at all.
LEAN_SYSTEM_CONFIG = {"enable_metrics_collection": False, "task_events_report_interval_ms": 0}


@dataclass(frozen=True)
class RayHandle:
    address: str
    cpus: int
    started_here: bool  # True: this process started a local cluster and shuts it down
    dashboard_url: str | None = None
    watchdog_pid: int | None = None  # cluster/ray_watchdog.py, for a cluster started here


def machine_cpus() -> int:
    """CPUs this process may use (cgroup/affinity aware where the OS tells)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def session_pids() -> list[int]:
    """The pids of the processes Ray's node started in this driver (GCS, raylet, monitors);
    empty where this Ray version does not say (the watchdog then watches all our children)."""
    import ray

    try:
        processes = ray._private.worker._global_node.all_processes  # noqa: SLF001
        return [info.process.pid for infos in processes.values() for info in infos if info.process]
    except AttributeError:
        return []


def start_watchdog(session_dir: str) -> int:
    """Start cluster/ray_watchdog.py for this driver's local session: if the driver dies without
    `ray.shutdown()` (SIGKILL), the session's processes are killed by pid. Returns its pid."""
    script = Path(__file__).with_name("ray_watchdog.py")
    argv = [sys.executable, "-s", str(script), str(os.getpid()), session_dir, *map(str, session_pids())]
    proc = subprocess.Popen(argv,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
                            close_fds=True, cwd="/")
    return proc.pid


def start_or_join(address: str | None = None, *, num_cpus: int | None = None, dashboard: bool = False,
                  object_store_mb: int | None = DEFAULT_OBJECT_STORE_MB, quiet: bool = True,
                  watchdog: bool = True) -> RayHandle:
    """`address` (or RAY_ADDRESS) joins a running cluster; otherwise a local one starts in-process,
    with a watchdog (unless `watchdog=False`) that kills its processes if this driver is killed."""
    import ray

    if ray.is_initialized():
        ctx = ray.get_runtime_context()
        return RayHandle(ctx.gcs_address, int(ray.cluster_resources().get("CPU", 0)), started_here=False)
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        info = ray.init(address=address, log_to_driver=not quiet, configure_logging=not quiet)
        return RayHandle(info.address_info.get("gcs_address", address), int(ray.cluster_resources().get("CPU", 0)),
                         started_here=False, dashboard_url=info.dashboard_url or None)
    from serve.config import apply_serve_latency_env

    apply_serve_latency_env()  # this cluster may host the decision service (`halo loop`)
    cpus = num_cpus or machine_cpus()
    kwargs: dict[str, object] = {"num_cpus": cpus, "include_dashboard": dashboard, "log_to_driver": not quiet}
    if object_store_mb:
        kwargs["object_store_memory"] = object_store_mb * 1024 * 1024
    if not dashboard:
        kwargs["_system_config"] = dict(LEAN_SYSTEM_CONFIG)
    info = ray.init(address="local", **kwargs)
    session_dir = info.address_info.get("session_dir", "")
    return RayHandle(info.address_info.get("gcs_address", ""), cpus, started_here=True,
                     dashboard_url=info.dashboard_url or None,
                     watchdog_pid=start_watchdog(session_dir) if watchdog and session_dir else None)


def shutdown(handle: RayHandle) -> None:
    import ray

    if handle.started_here and ray.is_initialized():
        ray.shutdown()
    if handle.watchdog_pid:  # its job is done: nothing of the session is left to kill
        with contextlib.suppress(ProcessLookupError):
            os.kill(handle.watchdog_pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(handle.watchdog_pid, 0)


def local_cluster_rss_mb() -> float:
    """Resident memory of the Ray processes this driver started (GCS, raylet, workers), in MB."""
    import psutil

    total = 0
    for child in psutil.Process().children(recursive=True):
        try:
            total += child.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total / (1024 * 1024)
