"""Rewrite references to rollout modules that moved in the issue-31 re-homing (dotted and path forms).

Run from a checkout's root after merging the move: `python scripts/rehome_rollout.py [PATH ...]`
rewrites every tracked text file (or the paths given) in place. Idempotent.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

MOVES = {
    "rollout.agent_table": "rollout.core.agent_table",
    "rollout.state": "rollout.core.state",
    "rollout.trajectory": "rollout.core.trajectory",
    "rollout.policy": "rollout.core.decision",
    "rollout.infra": "rollout.core.infra",
    "rollout.env": "rollout.loop.env",
    "rollout.episode": "rollout.loop.episode",
    "rollout.backends": "rollout.loop.backends",
    "rollout.evaluation": "rollout.loop.evaluation",
    "rollout.oracle": "rollout.loop.oracle",
    "rollout.report": "rollout.loop.report",
    "rollout.rules": "rollout.policies.rules",
    "rollout.decision_client": "rollout.policies.student_client",
    "rollout.backoff": "rollout.llm.backoff",
    "rollout.pddl.simulator": "rollout.pddl.state_space",
    "rollout.driver.plan": "rollout.driver.episode_set",
}
SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".cfg", ".txt", ".json", ""}


def _patterns() -> list[tuple[re.Pattern[str], str]]:
    pairs = []
    for old, new in MOVES.items():
        dotted = re.compile(r"(?<![\w.])" + re.escape(old) + r"(?![\w])")
        pairs.append((dotted, new))
        old_path, new_path = old.replace(".", "/"), new.replace(".", "/")
        path = re.compile(r"(?<![\w/])" + re.escape(old_path) + r"(?=\.py\b)")
        pairs.append((path, new_path))
    return pairs


def rewrite(text: str) -> str:
    for pattern, new in _patterns():
        text = pattern.sub(new, text)
    return text


def tracked_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout
    return [Path(n) for n in names.splitlines()]


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or tracked_files()
    changed = 0
    for path in paths:
        if path.suffix not in SUFFIXES or not path.is_file() or path.name == Path(__file__).name:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new = rewrite(text)
        if new != text:
            path.write_text(new)
            changed += 1
    print(f"rewrote {changed} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
