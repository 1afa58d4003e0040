"""Every command block of README.md and docs/*.md, extracted and run as written, in order, in a
fresh working directory that holds what a clone holds (the examples, the benchmarks, the venv).

A command that cannot run here, or that takes minutes, is listed in SKIP with the reason; every
other command must exit 0. Each command's time goes to the test's output (`-s`) and to
$HALO_DOCS_TIMES (JSON) when set. A new docs command is run by default: to leave it out, add it
to SKIP with a reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(bash|sh|shell)\n(.*?)^```", re.S | re.M)
COMMAND_TIMEOUT_S = 600

# substring of a command -> why it is not run here
SKIP: dict[str, str] = {
    "./scripts/setup.sh": "the set-up itself (about 3 minutes); this test runs in its result",
    "python -m pytest": "the test suite itself",
    "s3://bucket": "needs a real S3 bucket (tests/store and tests/cli cover s3:// on moto_server)",
    "s3://halo-data": "needs a real S3 bucket",
    "ray://": "needs a running Ray cluster",
    "--address auto": "needs a running Ray cluster",
    "halo serve": "a service that runs until Ctrl-C (tests/serve start and stop it)",
    "curl ": "needs a running service (tests/serve/test_client.py runs the Python client example)",
    "halo loop --config": "runs until Ctrl-C (tests/loop run the loop end to end)",
    "halo loop status": "reads the log of the loop the command before starts",
    "python benchmarks/": "a benchmark: minutes to half an hour (each prints its own figures)",
    "--count 5000": "slow: 5,000 hard logistics tasks, each verified by the planner",
    "--count 313": "slow: 4,000+ generated tasks",
    "gen10k": "needs the 10k-task set the slow commands above make",
    "--episodes 10016": "slow: 10,016 episodes",
    "--run RUN ": "RUN is a placeholder",
    "RUN_ID": "RUN_ID is a placeholder",
    "--base-model smollm2": "slow: LoRA training on the CPU (minutes)",
    "--episodes 1280": "slow: 1,280 episodes (362 s here on 2 loaded cores)",
    "--from halo-data/teach": "slow: re-validates ~900 augmented variants (over 600 s here); needs the run above",
    "--data halo-data/datasets/teach": "needs the dataset the slow command above builds",
    "halo eval --policy halo-data/models/fast --tasks planbench:all": "slow: 300 tasks x 3 episodes x 4 policies",
    "docker ": "needs docker and a registry",
    "helm ": "needs a Kubernetes cluster",
    # rendering needs no cluster: run where kubectl is installed (the first matching entry wins)
    "kubectl kustomize": "" if shutil.which("kubectl") else "kubectl is not installed",
    "kubectl ": "needs a Kubernetes cluster",
    "VERSION=$(": "only feeds the docker commands",
}


def commands(text: str) -> list[str]:
    """A block's commands: continuation lines joined, comments and blank lines dropped."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        line = re.sub(r"\s+#.*$", "", line) if "#" in line and not line.rstrip().endswith("\\") else line
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        out.append((pending + line.strip()).strip())
        pending = ""
    return out


def doc_blocks() -> list[tuple[str, int, list[str]]]:
    return [(str(doc.relative_to(ROOT)), i, commands(m.group(2)))
            for doc in DOCS for i, m in enumerate(FENCE.finditer(doc.read_text()))]


def skip_reason(command: str) -> str:
    return next((why for what, why in SKIP.items() if what in command), "")


def workspace(tmp: Path) -> Path:
    """What a fresh clone gives a user (read-only parts linked, not copied)."""
    for name in ("examples", "benchmarks", "scripts", "tests", "k8s", ".venv", "pyproject.toml"):
        (tmp / name).symlink_to(ROOT / name)
    return tmp


@pytest.mark.parametrize("doc", [str(d.relative_to(ROOT)) for d in DOCS])
def test_doc_commands_run_as_written(doc: str, tmp_path: Path) -> None:
    work = workspace(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "COLUMNS": "100"}
    env.pop("HALO_STORE_URL", None)
    times: list[dict[str, object]] = []
    for _, index, block in [b for b in doc_blocks() if b[0] == doc]:
        for command in block:
            reason = skip_reason(command)
            if reason:
                times.append({"doc": doc, "block": index, "command": command, "skipped": reason})
                continue
            t0 = time.monotonic()
            done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT_S)
            took = time.monotonic() - t0
            times.append({"doc": doc, "block": index, "command": command, "seconds": round(took, 1)})
            print(f"[docs] {doc} block {index}: {took:6.1f}s  {command}", flush=True)
            assert done.returncode == 0, f"{doc}: `{command}` exited {done.returncode}\n{done.stdout[-3000:]}" \
                                         f"\n{done.stderr[-3000:]}"
    for entry in times:
        if "skipped" in entry:
            print(f"[docs] {doc} block {entry['block']}: skipped ({entry['skipped']})  {entry['command']}")
    if os.environ.get("HALO_DOCS_TIMES"):
        path = Path(os.environ["HALO_DOCS_TIMES"])
        previous = json.loads(path.read_text()) if path.exists() else []
        path.write_text(json.dumps(previous + times, indent=1))


def test_extraction_sees_every_block() -> None:
    blocks = doc_blocks()
    assert len(blocks) >= 15 and all(block for _, _, block in blocks)
    assert commands("halo a \\\n   --b c   # note\n# only a comment\nhalo d") == ["halo a --b c", "halo d"]


def test_every_skip_entry_still_matches_a_command() -> None:
    commands_run = [command for _, _, block in doc_blocks() for command in block]
    stale = [what for what in SKIP if not any(what in command for command in commands_run)]
    assert not stale, f"SKIP entries no docs command uses any more: {stale}"
