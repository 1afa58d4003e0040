"""How the suite splits across pytest-xdist workers (`-n 2 --dist loadgroup`, the README's command;
without `-n` only the order changes).

A folder whose conftest holds session-wide fixtures (one Ray + Serve for tests/serve, trained
models for tests/train, ...) runs whole on one worker, so those are built once; every other test
file is its own group, since its fixtures live at most as long as the file. Known long groups are
handed out first, so the two workers finish close together.

The groups are given to xdist by a scheduler of our own (`pytest_xdist_make_scheduler`), not by
`xdist_group` marks: xdist 3.8 applies a mark by rewriting `item._nodeid`, which pytest 9 no
longer reads, so under `--dist loadgroup` every test went out alone and a module's fixtures
(a model trained with Ray, a Serve application) were built again on each worker and after each
switch between files.
"""

from __future__ import annotations

import pytest

# Folders with session-scoped fixtures shared across their files.
WHOLE_FOLDERS = ("serve", "train", "rollout_env", "solvers", "loop")
# Known long groups first (roughly by their share of the suite's time); the rest keep their order.
FIRST = ("serve", "train", "loop", "tests/driver/test_driver_ray.py", "tests/docs/test_docs_commands.py",
         "tests/driver/test_driver_cli.py", "tests/driver/test_infra_and_lease_ray.py", "rollout_env",
         "solvers")


def group_of(nodeid: str) -> str:
    """The scheduling group of a test: its folder for WHOLE_FOLDERS, else its file (rootdir-relative)."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "tests" and parts[1] in WHOLE_FOLDERS:
        return parts[1]
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(FIRST)))  # stable: the rest keep their order


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under `--dist loadgroup`: one work unit per group_of, handed out in the items' order above."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False  # keep FIRST's order rather than the count of tests
    return GroupScheduling(config, log)
