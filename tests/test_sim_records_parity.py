"""benchmarks/sim_records_parity.py finds a changed record and ignores what the clock decides
(hand-built dumps; the benchmark itself runs episodes in two trees for minutes)."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "sim_records_parity.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_sim_records_parity", BENCH)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _dump(module: ModuleType) -> dict:
    step = {"agent_id": 13, "decision_latency_ms": 0.2, "latency_ms": 1.5, "llm_calls": 0, "decided_by": "scripted",
            "state_json": json.dumps({"history": [2], "planner_log": "t=0.01s"})}
    record = {"task_id": "t", "seed": 0, "wall_s": 1.0, "created_at": 5.0, "solver_cpu_s": 0.1, "steps": [step]}
    dump = {"prompt": "p", "worlds": ["w"], "kinds": {"13": "deterministic", "0": "llm"}}
    for policy in module.POLICIES:
        dump[policy] = {"records": [copy.deepcopy(record)], "arrow": "agent_id: int64", "types": ["agent_id:int"]}
    return dump


def test_the_same_records_up_to_the_clock_are_no_difference() -> None:
    module = _load()
    base, head = _dump(module), _dump(module)
    first = head[module.POLICIES[0]]["records"][0]
    first["wall_s"], first["steps"][0]["latency_ms"] = 9.0, 7.0  # a deterministic agent's measured time
    first["steps"][0]["state_json"] = json.dumps({"history": [2], "planner_log": "t=0.02s"})
    assert module.differences(base, head) == []


def test_a_changed_agent_type_or_prompt_is_a_difference() -> None:
    module = _load()
    for change in ("agent", "types", "prompt", "llm_latency"):
        base, head = _dump(module), _dump(module)
        step = head[module.POLICIES[1]]["records"][0]["steps"][0]
        if change == "agent":
            step["agent_id"] = 14
        elif change == "types":
            head[module.POLICIES[1]]["types"] = ["agent_id:AgentId"]
        elif change == "prompt":
            head["prompt"] = "q"
        else:  # an LLM agent's latency is simulated: it must match
            step["agent_id"], step["latency_ms"] = 0, 2.5
            base_step = base[module.POLICIES[1]]["records"][0]["steps"][0]
            base_step["agent_id"] = 0
        assert len(module.differences(base, head)) == 1, change
