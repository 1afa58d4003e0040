"""Sandbox levels and the generic sandboxed runner.

Levels, strongest first:
  "bwrap"   the worker runs inside one long-lived bubblewrap sandbox: no network (all
            namespaces unshared, own pid namespace), read-only system directories (only /usr,
            the Python runtime, the planner files), a private tmpfs /tmp wiped after every call,
            dies with its parent; each call's child also gets the rlimits below.
  "rlimits" no bubblewrap here: each call's child gets its own directory, a scrubbed
            environment, RLIMIT_CPU/AS/FSIZE/NOFILE/CORE, its own process group and a wall-clock
            kill of it, and the worker's seccomp filter (no terminal input, native ABI only:
            solvers/_worker.py); the worker is a child subreaper and kills what a call left.
  "none"    no limits at all (benchmarks only: the baseline of the sandbox-overhead ratio).

`run(argv, files=..., limits=...)` runs one command through that machinery. Arguments are a
list (never a shell string); files are written into the call's own directory, the command runs
there, and `collect` names files to bring back.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

LEVELS = ("bwrap", "rlimits", "none")


@dataclass
class RunResult:
    """What one sandboxed command did."""

    returncode: int | None  # negative: killed by that signal; None: the worker failed
    output: str = ""  # stdout and stderr together, head and tail kept
    timed_out: bool = False
    wall_s: float = 0.0
    # CPU seconds of the solver processes for this call: the confined child (planner, validator)
    # plus the sandboxed worker's own work for it (reading the request, file staging, fork,
    # output collection, answering; see solvers/_worker.py).
    cpu_s: float = 0.0
    maxrss_kb: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    level: str = "rlimits"
    error: str = ""  # set when the worker itself failed (then returncode is None)
    leftover_processes: int = 0
    translated: bool = False
    # The strict check's verdict when the request asked for it (solvers/pddl_check.py, run by the
    # worker before the program): {"passed": True}, {"error": CheckError fields} or {"timed_out": True}.
    static_check: dict = field(default_factory=dict)


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def python_runtime() -> tuple[str, list[str]]:
    """The real interpreter binary (not the venv's symlink) and the directories it needs."""
    exe = os.path.realpath(sys.executable)
    dirs = {os.path.realpath(sys.base_prefix)}
    if not exe.startswith("/usr/"):
        dirs.add(os.path.dirname(os.path.dirname(exe)))
    return exe, sorted(d for d in dirs if not d.startswith("/usr"))


# Inside bubblewrap, calls run under this private tmpfs, which never holds a host path.
SANDBOX_WORK_ROOT = "/halo-work"


# What a root worker keeps inside bubblewrap: enough to hand each call to the unprivileged
# call uid (setuid/setgid, chown of the call directory) and to read, kill and clean up after it.
_ROOT_WORKER_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_FOWNER", "CAP_KILL", "CAP_DAC_OVERRIDE")


def _unshare_flags() -> list[str]:
    """Every namespace. As root, all but the user namespace: bubblewrap's own one maps only uid 0,
    so no call could become an unprivileged uid in it, and RLIMIT_NPROC binds no root."""
    if os.geteuid() != 0:
        return ["--unshare-all"]
    caps = [arg for cap in _ROOT_WORKER_CAPS for arg in ("--cap-add", cap)]
    return ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try", *caps]


def _made_folders(ro_paths: list[str]) -> list[str]:
    """The folders bubblewrap creates above the read-only binds (as root it makes them 0700, which
    would hide e.g. a runtime under /root from the unprivileged call uid), shallowest first."""
    bound = ["/usr", *ro_paths]
    folders = {str(parent) for path in ro_paths for parent in Path(path).parents} - {"/", "/tmp"}
    inside = [f for f in folders if not any(f == b or f.startswith(b.rstrip("/") + "/") for b in bound)]
    return sorted(inside, key=lambda f: (f.count("/"), f))


DEFAULT_CALL_UID = 65534  # "nobody"


def call_uid() -> int | None:
    """The uid a root worker runs each call as (HALO_SANDBOX_UID, default 65534; its gid is the
    same number); None when this process is not root or HALO_SANDBOX_UID=0 keeps calls root."""
    if os.geteuid() != 0:
        return None
    raw = os.environ.get("HALO_SANDBOX_UID", "").strip()
    if not raw:
        return DEFAULT_CALL_UID
    if not raw.isdigit():
        raise ValueError(f"HALO_SANDBOX_UID must be a numeric uid, got {raw!r}")
    return int(raw) or None


def bwrap_argv(ro_paths: list[str], *, chdir: str = SANDBOX_WORK_ROOT, new_session: bool = True) -> list[str]:
    """The bubblewrap prefix: nothing shared but read-only system and runtime paths. Without
    `new_session` the sandbox stays in the caller's session: only for a command that refuses
    terminal input itself (the solver worker's seccomp filter)."""
    argv = [bwrap_path() or "bwrap", *_unshare_flags(), "--die-with-parent",
            *(["--new-session"] if new_session else []), "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
        path = Path("/", name)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
             "--ro-bind-try", "/etc/localtime", "/etc/localtime"]
    # The private tmpfs mounts come before the read-only binds: a checkout or venv that lives
    # under /tmp (CI clones often do) must stay visible above the fresh /tmp.
    argv += ["--tmpfs", "/tmp", "--tmpfs", SANDBOX_WORK_ROOT]
    for path in ro_paths:
        argv += ["--ro-bind", path, path]
    if os.geteuid() == 0:
        for folder in _made_folders(ro_paths):
            argv += ["--chmod", "0755", folder]
    # /tmp stays read-only: calls write only under their own directory in SANDBOX_WORK_ROOT.
    argv += ["--remount-ro", "/tmp", "--proc", "/proc", "--dev", "/dev", "--clearenv",
             "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", SANDBOX_WORK_ROOT, "--setenv", "LANG", "C.UTF-8",
             "--setenv", "PYTHONHASHSEED", "0",
             "--chdir", chdir, "--"]
    return argv


@functools.lru_cache(maxsize=1)
def _probe_bwrap() -> bool:
    if bwrap_path() is None:
        return False
    exe, dirs = python_runtime()
    probe = f"import os; os.listdir('/tmp'); open('{SANDBOX_WORK_ROOT}/probe', 'w').close()"
    argv = bwrap_argv(dirs) + [exe, "-I", "-S", "-c", probe]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=20, env={"PATH": "/usr/bin:/bin"},
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


_bwrap_proven = False


def note_bwrap_works() -> None:
    """A worker came up inside bubblewrap: that is the probe's question answered, so the
    process need not start a probe sandbox of its own (a one-shot `halo solve` saves it)."""
    global _bwrap_proven
    _bwrap_proven = True


def bwrap_forced_off() -> bool:
    return os.environ.get("HALO_SANDBOX", "").strip().lower() in ("rlimits", "none")


def sandbox_level() -> str:
    """The level in force for solver calls: "bwrap" when bubblewrap works here, else "rlimits".
    HALO_SANDBOX=rlimits forces the weaker level (e.g. inside a container that forbids userns)."""
    if bwrap_forced_off():
        return "rlimits"
    if _bwrap_proven:
        return "bwrap"
    return "bwrap" if _probe_bwrap() else "rlimits"


def scrubbed_env(home: str = "/tmp") -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
