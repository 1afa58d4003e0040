"""A store made before the search-tree columns (schema 1) takes episodes that carry them (schema 2):
the table gains the columns, the new values are kept, the older rows read the defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from rollout.core.trajectory import SEARCH_TREE_STEP_FIELDS, STEP_SCHEMA
from rollout.store import TrajectoryStore
from rollout.store.steps_table import PARTITION, TABLE_DIR, episodes_to_arrow
from tests.trajectories import make_episodes


def test_an_older_table_gains_the_new_columns_and_keeps_their_values(tmp_path: Path) -> None:
    old_schema = pa.schema([f for f in STEP_SCHEMA if f.name not in SEARCH_TREE_STEP_FIELDS])
    older = episodes_to_arrow(make_episodes("run-old", 3)).select(old_schema.names)
    write_deltalake(str(tmp_path / TABLE_DIR), older, partition_by=[PARTITION])
    store = TrajectoryStore(tmp_path)
    assert len(store.read_episodes(["run-old"])) == 3
    tree = make_episodes("run-new", 3)
    for ep in tree:
        ep.steps = [dataclasses.replace(s, parent_step=s.step - 1, branch=1, on_path=False) for s in ep.steps]
    assert store.write_episodes("run-new", tree) == 3
    back = {e.episode_id: e for e in TrajectoryStore(tmp_path).read_episodes()}
    assert [back[e.episode_id].steps for e in tree] == [e.steps for e in tree]
    old_steps = [s for e in back.values() if e.run_id == "run-old" for s in e.steps]
    assert old_steps and {(s.parent_step, s.branch, s.on_path) for s in old_steps} == {(-1, 0, True)}
