"""What the dynamic loader needs to start a program, found by asking the loader.

The bubblewrap sandbox binds /usr and the root's library links read-only and nothing else of
the system. A program built outside /usr (VAL's `Validate` with `libVAL.so` beside it, found
through its RUNPATH `$ORIGIN`) or one whose libraries are symlinks out of /usr (Debian's BLAS
and LAPACK point into /etc/alternatives, which POPF's LP solver loads) needs more: its own
folder and every link on the way to each library. `ldd` runs the loader in its list-only mode
(LD_TRACE_LOADED_OBJECTS) and reports the path of every library it would map; each path's chain
of symlinks is then walked, and every link or file outside /usr is returned for a read-only bind.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

_LDD_LINE = re.compile(r"^\s*(?:\S+\s+=>\s+)?(?P<path>/\S+)\s+\(0x[0-9a-f]+\)\s*$")
BOUND_ROOTS = ("/usr/",)  # the sandbox binds these whole (solvers.sandbox.bwrap_argv)
MAX_LINKS = 40  # a symlink loop ends here


def _under_bound_root(path: str) -> bool:
    return any(path.startswith(root) for root in BOUND_ROOTS)


def libraries(binary: Path) -> list[str]:
    """The paths the loader maps for `binary` (empty when ldd is missing or refuses it)."""
    ldd = shutil.which("ldd", path="/usr/bin:/bin")
    if ldd is None:
        return []
    try:
        proc = subprocess.run([ldd, str(binary)], capture_output=True, timeout=20, stdin=subprocess.DEVNULL,
                              env={"PATH": "/usr/bin:/bin", "LANG": "C"})
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        m = _LDD_LINE.match(line)
        if m:
            found.append(m.group("path"))
    return found


def link_chain(path: str) -> list[str]:
    """`path`, each symlink it passes through and the file it ends at; folders on the way are
    resolved (a merged-usr /lib is the sandbox's own symlink into /usr)."""
    chain: list[str] = []
    current = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    for _ in range(MAX_LINKS):
        chain.append(current)
        if not os.path.islink(current):
            break
        target = os.readlink(current)
        joined = os.path.normpath(os.path.join(os.path.dirname(current), target))
        current = os.path.join(os.path.realpath(os.path.dirname(joined)), os.path.basename(joined))
    return chain


@functools.lru_cache(maxsize=32)
def _needs(binary: str, mtime_ns: int) -> tuple[str, ...]:  # noqa: ARG001  (mtime: a rebuilt binary is asked again)
    folder = os.path.dirname(binary)  # $ORIGIN libraries and the program itself
    paths = [folder]
    for library in libraries(Path(binary)):
        paths += [p for p in link_chain(library) if not _under_bound_root(p) and os.path.lexists(p)]
    # A path inside a folder bound whole is seen through it (and a bind cannot be made on it).
    return tuple(p for p in dict.fromkeys(paths) if p == folder or not p.startswith(folder + "/")
                 if not _under_bound_root(p + "/"))


def sandbox_binds(binary: Path) -> list[Path]:
    """Files and folders outside /usr the sandbox must bind read-only so `binary` can start: its
    own (resolved) folder and every link or library outside /usr its loader passes through."""
    resolved = os.path.realpath(binary)
    try:
        mtime = os.stat(resolved).st_mtime_ns
    except OSError:
        return []
    return [Path(p) for p in _needs(resolved, mtime)]
