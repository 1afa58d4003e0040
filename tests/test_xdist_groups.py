"""The README's test command (`-n 2 --dist loadgroup`) keeps a WHOLE_FOLDERS folder on one worker
and each other file on one worker (tests/conftest.py), checked on a small suite run for real."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

RECORDER = '''import os
from pathlib import Path

def test_{name}_{i}():
    with open(Path(__file__).parents[{up}] / "ran.txt", "a") as out:
        out.write(f"{{__file__}} {{os.environ['PYTEST_XDIST_WORKER']}}\\n")
'''


def _suite(root: Path) -> None:
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    tests = root / "tests"
    (tests / "serve").mkdir(parents=True)
    (tests / "conftest.py").write_text((Path(__file__).parent / "conftest.py").read_text())
    files = [tests / "serve" / f"test_s{k}.py" for k in range(4)] + [tests / f"test_f{k}.py" for k in range(4)]
    for path in files:
        up = 2 if path.parent.name == "serve" else 1
        path.write_text("\n".join(RECORDER.format(name=path.stem, i=i, up=up) for i in range(3)))


def test_a_whole_folder_and_each_file_run_on_one_worker(tmp_path: Path) -> None:
    _suite(tmp_path)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p",
                          "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    lines = (tmp_path / "ran.txt").read_text().splitlines()
    assert len(lines) == 24
    workers: dict[str, set[str]] = defaultdict(set)
    for line in lines:
        path, worker = line.split()
        group = "serve" if Path(path).parent.name == "serve" else path
        workers[group].add(worker)
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
    assert len(set().union(*workers.values())) == 2, "both workers got work"
