"""How the suite splits across pytest-xdist workers (`-n 2 --dist loadgroup`, the README's command;
without `-n` the marks change nothing but the order).

A folder whose conftest holds session-wide fixtures (one Ray + Serve for tests/serve, trained
models for tests/train, ...) runs whole on one worker, so those are built once; every other test
file is its own group, since its fixtures live at most as long as the file. The largest groups
are handed out first, so the two workers finish close together.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# Folders with session-scoped fixtures shared across their files.
WHOLE_FOLDERS = ("serve", "train", "rollout_env", "solvers", "loop")
# Known long groups first (roughly by their share of the suite's time); the rest keep their order.
FIRST = ("serve", "train", "loop", "tests/driver/test_driver_ray.py", "tests/docs/test_docs_commands.py",
         "tests/driver/test_driver_cli.py", "tests/driver/test_infra_and_lease_ray.py", "rollout_env",
         "solvers")


def group_of(item: pytest.Item) -> str:
    relative = Path(str(item.path)).resolve().relative_to(HERE)
    if len(relative.parts) > 1 and relative.parts[0] in WHOLE_FOLDERS:
        return relative.parts[0]
    return f"tests/{relative.as_posix()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item), len(FIRST)))  # stable: the rest keep their order
