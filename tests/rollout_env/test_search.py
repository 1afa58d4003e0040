"""Search over agent choices (rollout/policies/search.py): the spec, the records' tree, the budget,
infrastructure failures, and the dataset builder reading only the chosen path."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from rollout.core.agent_table import AgentId, agent_info
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord
from rollout.llm.errors import LLMConnectionError
from rollout.loop.env import RefinementEnv
from rollout.loop.episode import EpisodeConfig, run_episode
from rollout.policies import PolicySpecError, make_policy, policy_specs
from rollout.policies.scripted import symptom
from rollout.policies.search import (
    SearchPolicy,
    SearchSpec,
    _Search,
    parse_search_spec,
    ranked_children,
    suspect_children,
)
from rollout.sim import SimConfig
from rollout.sim.backend import SimAgents
from rollout.store import TrajectoryStore
from rollout.tasks import Task

FAST = SimConfig(latency_scale=0.0)
SPEC = "search:prior=rules+scripted,width=3,max_calls=12"


pytestmark = pytest.mark.usefixtures("solver_cache")


def _search(task: Task, seed: int, spec: str = SPEC, config: EpisodeConfig | None = None) -> EpisodeRecord:
    config = config or EpisodeConfig(seed=seed, sim=FAST, run_id="search-test")
    return asyncio.run(run_episode(task, make_policy(spec, seed=seed), config))


# ---------------------------------------------------------------------------------- the spec

def test_the_spec_is_parsed_with_a_prior_that_has_commas_of_its_own() -> None:
    spec = parse_search_spec("prior=rules+scripted:noise=0.2,seed=3,width=2,max_calls=9,checks=0,wall_s=5")
    assert spec == SearchSpec(prior="rules+scripted:noise=0.2,seed=3", width=2, max_calls=9, wall_s=5.0, checks=0)
    assert parse_search_spec("") == SearchSpec()
    assert "search" in policy_specs()
    policy = make_policy("search:prior=scripted:noise=0.0,width=2")
    assert isinstance(policy, SearchPolicy) and policy.prior.name == "scripted" and policy.prior.noise == 0.0


@pytest.mark.parametrize(("spec", "message"), [
    ("search:width=0", "width must be >= 1, got '0'"),
    ("search:max_calls=lots", "max_calls must be an integer, got 'lots'"),
    ("search:depth=3", "unknown parameter 'depth'"),
    ("search:width=2,width=3", "'width' given twice"),
    ("search:value=./models/nowhere", "no such directory"),
    ("search:value_weight=2", "value_weight needs value=DIR"),
    ("search:prior=search:width=2", "a search cannot be the prior of a search"),
    ("search:prior=nosuch", "unknown policy 'nosuch'"),
    ("search:wall_s=-1", "wall_s must be more than 0, got '-1'"),
])
def test_a_bad_spec_is_one_clear_line(spec: str, message: str) -> None:
    with pytest.raises(PolicySpecError, match=message) as info:
        make_policy(spec)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------- the records

def _check_tree(record: EpisodeRecord) -> None:
    steps = record.steps
    assert [s.step for s in steps] == list(range(len(steps)))
    for s in steps:
        assert -1 <= s.parent_step < s.step
        assert s.decided_by in ("search", "rule")
    path = [s for s in steps if s.on_path]
    # an empty path: the search ended on the starting state (every branch it tried was pruned)
    assert (path and path[0].parent_step == -1) or not record.success_validator
    for before, after in zip(path, path[1:], strict=False):
        assert after.parent_step == before.step  # the chosen path is one chain from the root
    if record.success_validator:
        assert path[-1].agent_name == "AgentNaturalLanguage" and path[-1].plan_after == record.final_plan
    assert record.total_llm_calls == sum(s.llm_calls for s in steps)  # every branch's calls are counted


def test_search_episodes_keep_the_tree_and_mark_one_chosen_path(tasks: dict[str, Task], tmp_path: Path) -> None:
    records = [_search(t, seed) for t in list(tasks.values())[:6] for seed in (0, 1)]
    assert not any(r.error or r.infra_error for r in records)
    for record in records:
        _check_tree(record)
        if record.success_validator:  # every answer passed its two checks, at the step limit too
            checks = _checks_on_path(record)
            assert checks and [f for st, f in checks if st == checks[-1][0]][-2:] == [False, False]
    assert any(any(not s.on_path for s in r.steps) for r in records)  # some searches did branch
    assert any(s.decision_reason.startswith("acceptance check") for r in records for s in r.steps)
    store = TrajectoryStore(tmp_path / "store")
    store.write_episodes("search-test", records)
    back = {r.episode_id: r for r in store.read_episodes(["search-test"])}
    assert [back[r.episode_id].steps for r in records] == [r.steps for r in records]


def test_the_same_search_twice_is_the_same_tree(tasks: dict[str, Task]) -> None:
    task = list(tasks.values())[2]
    first, second = _search(task, 4), _search(task, 4)
    key = [(s.step, s.parent_step, s.branch, s.on_path, s.agent_id, s.domain_after, s.plan_after) for s in first.steps]
    assert key == [(s.step, s.parent_step, s.branch, s.on_path, s.agent_id, s.domain_after, s.plan_after)
                   for s in second.steps]
    assert (first.success_oracle, first.total_llm_calls) == (second.success_oracle, second.total_llm_calls)


@pytest.mark.parametrize(("max_calls", "checks"), [(1, 0), (3, 2), (6, 1)])
def test_the_llm_call_budget_bounds_the_search(tasks: dict[str, Task], max_calls: int, checks: int) -> None:
    spec = f"search:prior=rules+scripted,width=3,max_calls={max_calls},checks={checks}"
    for task in list(tasks.values())[:6]:
        record = _search(task, 2, spec)
        # the budget is checked before each expansion (one agent call); past it come at most the
        # closing acceptance checks and the rendering of an accepted plan
        assert record.total_llm_calls <= max_calls + checks + 1, (task.task_id, record.total_llm_calls)
        _check_tree(record)


def test_the_wall_time_budget_bounds_the_search(tasks: dict[str, Task]) -> None:
    record = _search(list(tasks.values())[0], 3, "search:prior=rules+scripted,max_calls=100,wall_s=0.000001")
    assert len([s for s in record.steps if s.agent_name != "AgentNaturalLanguage"]) <= 1 + 2  # one step, 2 checks


def _checks_on_path(record: EpisodeRecord) -> list[tuple[tuple[str, str, str], bool]]:
    """(the PDDL and plan checked, whether the check flagged them) for each acceptance check on the chosen path."""
    return [((s.domain_after, s.problem_after, s.plan_after), s.agent_message.startswith("the PDDL differs"))
            for s in record.steps if s.on_path and s.decision_reason.startswith("acceptance check")]


def _with_checks(seed: int, detect: float, false_alarm: float) -> EpisodeConfig:
    sim = SimConfig(latency_scale=0.0, check_detect_prob=detect, check_false_alarm_prob=false_alarm)
    return EpisodeConfig(seed=seed, sim=sim, run_id="search-test")


def test_a_plan_every_check_flags_is_never_the_answer(tasks: dict[str, Task]) -> None:
    spec = "search:prior=rules+scripted,width=2,max_calls=6,checks=2"
    runs = [(task, seed) for task in list(tasks.values())[:4] for seed in (0, 1)]
    records = [_search(task, seed, spec, _with_checks(seed, 1.0, 1.0)) for task, seed in runs]
    assert not any(r.success_validator for r in records)
    # the closing checks ran again on a plan flagged before (a second look, and it flagged again)
    assert any(len({state for state, _ in _checks_on_path(r)}) < len(_checks_on_path(r)) for r in records)


def test_a_flagged_plan_that_passes_fresh_checks_at_the_close_is_the_answer(tasks: dict[str, Task]) -> None:
    spec = "search:prior=rules+scripted,width=2,max_calls=6,checks=2"
    records = [_search(t, seed, spec, _with_checks(seed, 0.5, 0.5)) for t in list(tasks.values()) for seed in range(4)]
    rescued = 0
    for record in records:
        _check_tree(record)
        checks = _checks_on_path(record)
        if record.success_validator:
            final = [flagged for state, flagged in checks if state == checks[-1][0]]
            assert final[-2:] == [False, False], record.episode_id  # the answer passed its last two checks
            rescued += True in final
    assert rescued, "no flagged plan passed its fresh checks at the close in 24 episodes"


# ---------------------------------------------------------------------------------- infra failures

class FailingEndpoint:
    """The LLM endpoint (a double for a frontier API): answers `ok` calls, then is unreachable."""

    def __init__(self, ok: int) -> None:
        self.ok = ok

    async def chat(self, messages: list[dict[str, str]], *, purpose: str, extra_body: dict | None = None) -> str:
        if self.ok <= 0:
            raise LLMConnectionError("connection refused", attempts=4)
        self.ok -= 1
        return "ok"


def test_an_endpoint_failing_mid_search_is_an_infra_failure_not_an_outcome(tasks: dict[str, Task]) -> None:
    task = next(t for t in tasks.values() if "depots" in t.task_id)
    config = EpisodeConfig(seed=1, sim=None, backend=SimAgents(FAST, transport=FailingEndpoint(ok=3)))
    record = _search(task, 1, config=config)
    assert record.infra_error.startswith("llm:connection_error") and record.error == ""
    from rollout.loop.report import summarize

    assert summarize("search", [record]).infra_failures == 1


# ---------------------------------------------------------------------------------- the dataset

def test_the_dataset_builder_reads_only_the_chosen_path(tasks: dict[str, Task]) -> None:
    from train.examples import FilterCounts, select_examples

    records = [_search(t, seed) for t in list(tasks.values())[:6] for seed in (0, 1)]
    accepted = [r for r in records if r.success_validator]
    branched = [r for r in accepted if any(not s.on_path for s in r.steps)]
    assert branched, "no accepted episode branched; pick other tasks"
    counts = FilterCounts()
    examples = select_examples(records, "validator", counts)
    on_path = {(r.episode_id, s.state_json, s.agent_id) for r in accepted for s in r.steps if s.on_path}
    assert examples and all((e.episode_id, e.state_json, e.agent_id) in on_path for e in examples)
    assert counts.steps_off_path == sum(1 for r in accepted for s in r.steps if not s.on_path)


# ---------------------------------------------------------------------------------- resampled forks

def test_a_resampled_fork_is_a_fresh_sample_and_repeatable(tasks: dict[str, Task]) -> None:
    async def go() -> None:
        env = RefinementEnv(SimAgents(FAST))
        await env.reset(next(iter(tasks.values())), 0)
        same = env.fork(resample=1)._world.rng.getstate()
        assert env.fork(resample=1)._world.rng.getstate() == same  # branch 1 from here is one sample
        assert env.fork(resample=2)._world.rng.getstate() != same  # branch 2 is another
        assert env.fork()._world.rng.getstate() == env._world.rng.getstate()  # a plain fork replays

    asyncio.run(go())


# ---------------------------------------------------------------------------------- the CLI

def test_halo_episode_takes_a_search_spec_and_shows_the_tree() -> None:
    from typer.testing import CliRunner

    from cluster.cli import app

    result = CliRunner().invoke(app, ["episode", "--task", "planbench/depots/instance-14", "--tasks",
                                      "planbench:depots:20", "--policy", "search:prior=rules+scripted,max_calls=12",
                                      "--seed", "1"])
    assert result.exit_code in (0, 1), result.output  # 1: no plan the validator accepts
    assert "policy search[rules+scripted]" in result.output and "by search" in result.output
    assert " <-[" in result.output  # steps of the tree name their parent
    bad = CliRunner().invoke(app, ["episode", "--task", "planbench/depots/instance-14", "--tasks",
                                   "planbench:depots:20", "--policy", "search:width=0"])
    assert bad.exit_code != 0 and "width must be >= 1, got '0'" in bad.output and "Traceback" not in bad.output


# ---------------------------------------------------------------------------------- memory

class _ScoredPrior(Policy):
    """A prior that ranks agents by fixed scores (as a trained linear policy does)."""

    name = "scored"
    decides_inline = True

    def __init__(self, order: list[int]) -> None:
        self.order = order

    def scores(self, state: EpisodeState) -> list[float]:
        values = [0.0] * 22
        for rank, agent in enumerate(self.order):
            values[agent] = float(len(self.order) - rank)
        return values

    def _decide(self, state: EpisodeState) -> Decision:
        return Decision(self.order[0], "model", reason="the highest score")


def test_children_lead_with_the_priors_best_then_new_samples_then_its_lower_ranks() -> None:
    state = EpisodeState(task_description="stack the blocks", domain="(define (domain d))",
                         problem="(define (problem p))", plan="", error_category="plan_invalid")
    # 13 (variable swapper) is deterministic: asked again from the same state it answers the same
    prior = _ScoredPrior([AgentId.SYNTAX_PDDL, AgentId.VARIABLE_SWAPPER, AgentId.EMERGENCY, AgentId.HALLUCINATIONS])
    children, head = asyncio.run(ranked_children(prior, state, 2))
    assert [d.agent_id for d in children] == [AgentId.SYNTAX_PDDL, AgentId.VARIABLE_SWAPPER, AgentId.SYNTAX_PDDL,
                                              AgentId.EMERGENCY, AgentId.HALLUCINATIONS] + [
        a for a in range(22) if a not in (AgentId.SYNTAX_PDDL, AgentId.VARIABLE_SWAPPER, AgentId.EMERGENCY,
                                          AgentId.HALLUCINATIONS, AgentId.NOOP, AgentId.NATURAL_LANGUAGE)]
    assert head == 3 and "(asked again)" in children[2].reason
    flagged, lead = suspect_children((AgentId.VARIABLE_SWAPPER, AgentId.HALLUCINATIONS), 3)
    assert [d.agent_id for d in flagged] == [AgentId.VARIABLE_SWAPPER, AgentId.HALLUCINATIONS, AgentId.DEEP_THINK_PDDL,
                                             AgentId.HALLUCINATIONS, AgentId.DEEP_THINK_PDDL] and lead == 5


def test_a_search_never_asks_a_deterministic_agent_twice_from_one_state(tasks: dict[str, Task]) -> None:
    records = [_search(task, seed, "search:prior=rules+scripted,width=3,max_calls=24")
               for task in tasks.values() for seed in (0, 1)]
    asked: Counter[tuple[str, str, str, int]] = Counter()
    for record in records:
        for s in record.steps:
            if s.decided_by == "search" and agent_info(s.agent_id).kind == "deterministic":
                state = EpisodeState.from_json(s.state_json)
                asked[(record.episode_id, state.domain + state.problem, state.plan, s.agent_id)] += 1
    assert asked and max(asked.values()) == 1, asked.most_common(3)
    assert parse_search_spec("memory=0").memory == 0 and SearchSpec().memory == 1
    with pytest.raises(PolicySpecError, match="memory must be <= 1"):
        make_policy("search:memory=2")


def test_the_memory_counts_what_deterministic_agents_found_nothing_to_do(tasks: dict[str, Task]) -> None:
    async def go(task: Task, seed: int) -> tuple[Counter[tuple[str, int]], int]:
        env = RefinementEnv(SimAgents(FAST))
        await env.reset(task, seed)
        run = _Search(make_policy("search:prior=rules+scripted,max_calls=24"), env)
        await run.run()
        llm_misses = sum(1 for s in env.steps if agent_info(s.agent_id).kind == "llm" and s.llm_calls
                         and s.agent_message.startswith("found nothing"))
        env.close()
        return run.futile, llm_misses

    runs = [asyncio.run(go(task, seed)) for task in tasks.values() for seed in (0, 1)]
    counted = [agent for futile, _ in runs for (_, agent), n in futile.items() if n]
    assert counted and all(agent_info(a).kind == "deterministic" for a in counted), [
        a for a in counted if agent_info(a).kind != "deterministic"]
    assert sum(misses for _, misses in runs) > 0  # LLM agents did find nothing, and were not counted


def test_memory_takes_the_least_futile_child_and_carries_the_priors_cost(tasks: dict[str, Task]) -> None:
    async def go() -> None:
        env = RefinementEnv(SimAgents(FAST))
        await env.reset(list(tasks.values())[0], 0)
        policy = make_policy("search:prior=rules+scripted,memory=1")
        run = _Search(policy, env)
        ranked = [Decision(7, "search", llm_calls=1, tokens_in=50, tokens_out=5, cost_usd=0.01),
                  Decision(9, "search"), Decision(10, "search")]
        node = run._node(env, [], (list(ranked), len(ranked)))
        run.futile[(symptom(node.state), 7)] = 1
        taken = run._take(node)
        assert (taken.agent_id, taken.llm_calls, taken.tokens_in, taken.cost_usd) == (9, 1, 50, 0.01)
        assert [(d.agent_id, d.llm_calls) for d in node.candidates] == [(7, 0), (10, 0)]
        assert run._take(node).agent_id == 10  # 7 changed nothing here once: last
        tail = run._node(env, [], ([Decision(7, "search"), Decision(9, "search")], 1))  # 9: a lower rank
        assert run._take(tail).agent_id == 7 and tail.head == 0  # the memory reorders the lead only
        env.close()

    asyncio.run(go())
