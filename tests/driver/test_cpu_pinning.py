"""Workers on CPUs of their own: machine-wide claims between real processes, released when a
claimer dies however it dies; no pinning where CPUs are a quota or none are free."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rollout.driver import cpu_pinning

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = sorted(os.sched_getaffinity(0))
QUOTA = cpu_pinning.quota_cpus()

# A claimer process: claims one CPU, pins itself, prints its claim and its affinity, then holds
# the claim until its input closes.
CLAIMER = """
import os, subprocess, sys, threading
from pathlib import Path
from rollout.driver.cpu_pinning import pin_to_claimed_cpus
go, seen = threading.Event(), []
early = threading.Thread(target=lambda: (go.wait(), seen.append(sorted(os.sched_getaffinity(0)))))
early.start()  # a thread that exists before the pinning (Linux pins per thread)
claim = pin_to_claimed_cpus(1, Path(sys.argv[1]))
go.set()
early.join()
child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                       capture_output=True, text=True).stdout.strip()
mine = sorted(os.sched_getaffinity(0))
assert seen[0] == mine and child == str(mine), (seen, child, mine)
print(list(claim.cpus) if claim else None, mine, flush=True)
sys.stdin.read()
"""


def _claimer(claims: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", CLAIMER, str(claims)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc, proc.stdout.readline().strip()


def _stop(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(timeout=30)


@pytest.mark.skipif(len(ALLOWED) < 2 or (QUOTA is not None and len(ALLOWED) > QUOTA),
                    reason="needs 2 CPUs that are a set, not a quota")
def test_processes_claim_distinct_cpus_and_a_killed_one_s_cpu_is_free_again(tmp_path):
    claims = tmp_path / "claims"
    held = [_claimer(claims) for _ in ALLOWED]
    try:
        got = [line for _, line in held]
        assert got == [f"[{cpu}] [{cpu}]" for cpu in ALLOWED]  # each pinned to its own, lowest free first
        extra, line = _claimer(claims)
        assert line == f"None {ALLOWED}"  # none free: runs unpinned, on every CPU
        _stop(extra)
        victim, _ = held[0]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        replacement, line = _claimer(claims)
        held[0] = (replacement, line)
        assert line == f"[{ALLOWED[0]}] [{ALLOWED[0]}]"
    finally:
        for proc, _ in held:
            if proc.poll() is None:
                _stop(proc)


def test_a_claim_is_all_or_nothing_and_release_frees_it(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_pinning, "quota_cpus", lambda: None)
    assert cpu_pinning.claim_cpus(len(ALLOWED) + 1, tmp_path) is None
    claim = cpu_pinning.claim_cpus(len(ALLOWED), tmp_path)
    assert claim is not None and claim.cpus == tuple(ALLOWED)
    assert cpu_pinning.claim_cpus(1, tmp_path) is None  # flock conflicts within a process too
    claim.release()
    again = cpu_pinning.claim_cpus(1, tmp_path)
    assert again is not None and again.cpus == (ALLOWED[0],)
    again.release()


def test_no_pinning_where_the_cpus_are_a_quota_smaller_than_the_cpu_set(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_pinning, "quota_cpus", lambda: len(ALLOWED) - 0.5)
    assert cpu_pinning.claim_cpus(1, tmp_path) is None
    monkeypatch.setattr(cpu_pinning, "quota_cpus", lambda: float(len(ALLOWED)))
    claim = cpu_pinning.claim_cpus(1, tmp_path)
    assert claim is not None
    claim.release()


def test_quota_is_read_from_cgroup_v2_and_v1(tmp_path, monkeypatch):
    v2 = tmp_path / "cpu.max"
    real_path = cpu_pinning.Path

    def fake_path(p: str) -> Path:
        mapping = {"/sys/fs/cgroup/cpu.max": v2, "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": tmp_path / "q",
                   "/sys/fs/cgroup/cpu/cpu.cfs_period_us": tmp_path / "p"}
        return real_path(mapping.get(p, p))

    monkeypatch.setattr(cpu_pinning, "Path", fake_path)
    assert cpu_pinning.quota_cpus() is None  # neither file
    v2.write_text("400000 100000\n")
    assert cpu_pinning.quota_cpus() == 4.0
    v2.write_text("max 100000\n")
    assert cpu_pinning.quota_cpus() is None
    v2.unlink()
    (tmp_path / "q").write_text("150000\n")
    (tmp_path / "p").write_text("100000\n")
    assert cpu_pinning.quota_cpus() == 1.5
