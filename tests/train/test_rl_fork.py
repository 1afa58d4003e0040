"""Per-state advantages from forked episodes (train/rl_fork.py): the estimate and its update on
hand-built states, and branches of real episodes (the simulated world, real planners and
validator) that share the world's random streams and are reproducible, with infrastructure
failures and broken branches left out."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from rl_start import fit_rl_start

from rollout.core.agent_table import NUM_AGENTS
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.loop.env import RefinementEnv
from solvers.errors import InfraError
from train.rl import LinearWeights, softmax
from train.rl_fork import (
    BRANCH_REASON,
    Branch,
    ForkedState,
    choose_states,
    fork_advantages,
    fork_figures,
    fork_gradient,
    fork_state,
    fork_update,
    run_branch,
    tried_agents,
)

TASKS = "planbench:blocksworld:4"


@pytest.fixture(autouse=True)
def solver_cache():
    """The solvers' result cache on (a planner's log carries its own timings: only a second answer
    from the cache is the same text)."""
    import solvers

    solvers.configure_cache(True)
    yield
    solvers.configure_cache(False)


def _state() -> EpisodeState:
    return EpisodeState(task_description="put the green block on the table")


def _params(seed: int = 0) -> LinearWeights:
    empty = LinearWeights(np.zeros(0, dtype=np.int64), np.zeros((0, NUM_AGENTS)), np.zeros(NUM_AGENTS))
    buckets = np.array(sorted(set(empty.bucket_ids(_state()))), dtype=np.int64)
    rng = np.random.default_rng(seed)
    return LinearWeights(buckets, rng.normal(scale=0.1, size=(len(buckets), NUM_AGENTS)), rng.normal(size=NUM_AGENTS))


def _probs(params: LinearWeights, state: EpisodeState) -> np.ndarray:
    return softmax(params.scores(params.rows(params.bucket_ids(state))))


def test_an_alternative_that_beats_the_argmax_gets_a_positive_advantage_and_takes_over():
    params, state = _params(1), _state()
    p0 = _probs(params, state)
    ranked = [int(a) for a in np.argsort(-p0)]
    argmax, alt, third = ranked[:3]
    forked = ForkedState(state, sampled=alt, argmax=argmax,
                         branches=[Branch(argmax, -0.1), Branch(alt, 0.9), Branch(third, -0.1)])
    adv = fork_advantages(forked.rewards())
    assert adv[alt] == pytest.approx(2 / 3) and adv[argmax] == pytest.approx(-1 / 3)
    assert sum(adv.values()) == pytest.approx(0.0)
    after = fork_update(params, params, [forked], lr=0.05, pull=0.0, temperature=1.0)
    p1 = _probs(after, state)
    assert p1[alt] > p0[alt] and p1[argmax] < p0[argmax]
    before_scores = params.scores(params.rows(params.bucket_ids(state)))
    after_scores = after.scores(after.rows(after.bucket_ids(state)))
    untried = [a for a in range(NUM_AGENTS) if a not in (argmax, alt, third)]
    np.testing.assert_allclose(after_scores[untried], before_scores[untried])  # no signal: unchanged
    for _ in range(20):
        after = fork_update(after, params, [forked], lr=0.05, pull=0.0, temperature=1.0)
    assert int(np.argmax(_probs(after, state))) == alt  # the winner becomes what evaluation picks


def test_the_gradient_matches_finite_differences_of_the_all_action_objective():
    params, state = _params(2), _state()
    forked = [ForkedState(state, 4, 4, [Branch(4, 1.0), Branch(7, 0.0), Branch(2, 0.5)]),
              ForkedState(state, 3, 3, [Branch(3, 0.2), Branch(9, 0.2)])]  # all equal: carries nothing
    temperature = 0.7

    def objective(bias: np.ndarray) -> float:
        p = LinearWeights(params.buckets, params.weights, bias, params.n_buckets)
        logp = np.log(softmax(p.scores(p.rows(p.bucket_ids(state))) / temperature))
        return (0.5 * logp[4] - 0.5 * logp[7] + 0.0 * logp[2]) / 2  # both states count in the mean

    _, _, grad_b, used = fork_gradient(params, forked, temperature)
    assert used == 2
    eps, unit = 1e-6, np.eye(NUM_AGENTS)
    numeric = [(objective(params.bias + eps * unit[k]) - objective(params.bias - eps * unit[k])) / (2 * eps)
               for k in range(NUM_AGENTS)]
    np.testing.assert_allclose(grad_b, numeric, atol=1e-6)


def test_infra_failed_and_broken_branches_are_left_out_of_the_mean_and_counted():
    state = _state()
    forked = ForkedState(state, 2, 1, [Branch(1, 1.0, calls=3), Branch(2, 0.0, calls=4),
                                       Branch(5, 1.0, calls=2, infra_error="llm: connection_error"),
                                       Branch(6, 1.0, calls=1, error="ValueError: bug")])
    assert forked.rewards() == {1: 1.0, 2: 0.0}
    assert fork_advantages(forked.rewards()) == {1: 0.5, 2: -0.5}
    alone = ForkedState(state, 2, 1, [Branch(1, 1.0), Branch(2, 0.0, infra_error="llm: timeout")])
    assert fork_advantages(alone.rewards()) == {}  # one scored branch: no baseline, no advantage
    params = _params(3)
    unchanged = fork_update(params, params, [alone], lr=1.0, pull=0.0, temperature=1.0)
    np.testing.assert_array_equal(unchanged.bias, params.bias)
    figures = fork_figures([forked, alone])
    assert figures["fork_branches"] == 6 and figures["fork_branch_calls"] == 10
    assert figures["fork_infra_excluded"] == 2 and figures["fork_broken_excluded"] == 1
    assert figures["fork_informative"] == 0.5 and figures["fork_argmax_beaten"] == 0.0


def test_an_agents_reward_is_the_mean_over_its_scored_replicates():
    forked = ForkedState(_state(), 2, 1, [Branch(1, 1.0), Branch(2, 0.0), Branch(1, 0.0), Branch(2, 0.0),
                                          Branch(1, 1.0, infra_error="llm: timeout")])
    assert forked.rewards() == {1: 0.5, 2: 0.0}
    assert fork_advantages(forked.rewards()) == {1: 0.25, 2: -0.25}


def test_tried_agents_are_the_top_k_then_the_sampled_one_and_state_choice_is_seeded():
    scores = np.zeros(NUM_AGENTS)
    scores[[5, 3, 8]] = [3.0, 2.0, 1.0]
    assert tried_agents(scores, 3, 3) == [5, 3, 8]
    assert tried_agents(scores, 10, 2) == [5, 3, 10]
    assert choose_states(5, 2, 11) == choose_states(5, 2, 11) and len(choose_states(5, 2, 11)) == 2
    assert choose_states(1, 3, 0) == [0]


# ---------------------------------------------------------------- real episodes (simulated world)

@pytest.fixture(scope="module")
def start_dir(tmp_path_factory) -> Path:
    """A supervised fast policy fitted on rules+scripted episodes (the RL start)."""
    return fit_rl_start(tmp_path_factory.mktemp("fork") / "start", TASKS, "fork-test")


@pytest.fixture(scope="module")
def start(start_dir) -> LinearWeights:
    return LinearWeights.load(start_dir)


async def _sampled_episode(task, params: LinearWeights, seed: int):
    from rollout.loop.episode import EpisodeConfig, run_episode
    from rollout.policies.rules import RulesFirst
    from rollout.sim.spec import sim_config_for
    from train.rl import SampledLinearPolicy
    from train.rl_fork import ForkingSampler

    sampler = ForkingSampler(RulesFirst(SampledLinearPolicy(params, 1.0, seed)))
    record = await run_episode(task, sampler, EpisodeConfig(seed=seed, sim=sim_config_for("sim:scale=0")))
    return sampler, record


def _finisher(params: LinearWeights) -> Policy:
    from rollout.policies.rules import RulesFirst
    from train.fast_policy import HashedLinearPolicy

    return RulesFirst(HashedLinearPolicy(params.buckets, params.weights, params.bias, params.n_buckets))


def _steps_json(steps, clock: bool = True) -> list[str]:
    """The records as JSON; clock=False masks what a stopwatch measured (the decision's latency,
    and the latency of a step no LLM took part in; a simulated LLM step's latency must match)."""
    rows = [asdict(s) for s in steps]
    for row in rows if not clock else ():
        row["decision_latency_ms"] = "measured"
        if not row["llm_calls"]:
            row["latency_ms"] = "measured"
    return [json.dumps(row, sort_keys=True) for row in rows]


def _model_snapshots(start: LinearWeights):
    from rollout.tasks import load_tasks

    for task in load_tasks(TASKS):
        for seed in range(6):
            sampler, record = asyncio.run(_sampled_episode(task, start, seed))
            assert not record.error and not record.infra_error
            for snap, sampled in sampler.snapshots:
                yield sampler.env, snap, sampled, record


def test_branches_share_the_snapshots_streams_and_are_reproducible(start, monkeypatch):
    import rollout.loop.env as env_module

    captured: list[RefinementEnv] = []
    real_close = env_module.RefinementEnv.close

    def keep(self):  # the branch's records stay readable after close: keep the env to compare them
        captured.append(self)
        real_close(self)

    monkeypatch.setattr(env_module.RefinementEnv, "close", keep)
    template, snap, sampled, record = next(_model_snapshots(start))
    finisher = _finisher(start)
    other = (sampled + 1) % 10
    runs = [asyncio.run(run_branch(template, snap, a, finisher, 0.02)) for a in (sampled, other, sampled)]
    first, _, again = captured[-3:]
    prefix = len(snap.steps)
    assert first.steps[prefix].decision_reason == BRANCH_REASON and first.steps[prefix].agent_id == sampled
    # the same agent from the same snapshot, after another branch ran from it: the same records
    assert _steps_json(first.steps, clock=False) == _steps_json(again.steps, clock=False)
    assert (runs[0].reward, runs[0].calls) == (runs[2].reward, runs[2].calls)
    # a resampled replicate is reproducible too
    asyncio.run(run_branch(template, snap, sampled, finisher, 0.02, replicate=1))
    asyncio.run(run_branch(template, snap, sampled, finisher, 0.02, replicate=1))
    one, one_again = captured[-3], captured[-1]  # each run also closes the env it forked from
    assert one.steps[prefix].agent_id == sampled and len(one.steps) > prefix
    assert _steps_json(one.steps, clock=False) == _steps_json(one_again.steps, clock=False)
    assert _steps_json(first.steps[:prefix]) == _steps_json(record.steps[:prefix])  # the episode's own prefix
    # common random numbers: the branch of the sampled agent draws what the episode drew at that
    # step (a resampled world would draw afresh)
    mine, theirs = asdict(first.steps[prefix]), asdict(record.steps[prefix])
    outcome = ("domain_after", "problem_after", "plan_after", "plan_valid", "agent_ok", "agent_message",
               "llm_calls", "tokens_in", "tokens_out", "latency_ms")
    assert theirs["llm_calls"] > 0 and {k: mine[k] for k in outcome} == {k: theirs[k] for k in outcome}
    assert runs[0].scored and runs[1].scored


def test_a_real_state_where_an_alternative_wins_moves_the_policy_towards_it(start):
    """Forks of real episodes until one state's tried agents score differently; the update on
    that state raises the probability of its best agent (with common random numbers a second fork
    of the state gives the same rewards)."""
    finisher = _finisher(start)
    for template, snap, sampled, _ in _model_snapshots(start):
        assert snap.state is not None
        scores = finisher.inner.scores(snap.state)
        forked = asyncio.run(fork_state(template, snap, sampled, finisher, scores, 3, 0.02))
        rewards = forked.rewards()
        if len(rewards) >= 2 and max(rewards.values()) - min(rewards.values()) > 0.5:
            break
    else:
        pytest.fail("no forked state whose agents differ in success")
    again = asyncio.run(fork_state(template, snap, sampled, finisher, scores, 3, 0.02))
    assert again.rewards() == rewards and [b.calls for b in again.branches] == [b.calls for b in forked.branches]
    best = max(rewards, key=rewards.__getitem__)
    assert fork_advantages(rewards)[best] > 0
    after = fork_update(start, start, [forked], lr=0.05, pull=0.0, temperature=1.0)
    assert _probs(after, forked.state)[best] > _probs(start, forked.state)[best]


class _Failing(Policy):
    """A finisher whose decision service fails (infra) or whose code breaks (a bug)."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def _decide(self, state: EpisodeState) -> Decision:
        raise self.exc


def test_a_branch_whose_finisher_fails_is_an_excluded_branch_not_an_outcome(start):
    template, snap, sampled, _ = next(_model_snapshots(start))
    # NoOp on a failing plan does not end the episode, so the finisher is asked for the next step
    infra = asyncio.run(run_branch(template, snap, 11, _Failing(InfraError("down", kind="student:unreachable")),
                                   0.02))
    broken = asyncio.run(run_branch(template, snap, 11, _Failing(ValueError("bug")), 0.02))
    if snap.state is not None and snap.state.plan_valid:
        pytest.skip("the first model state already has a valid plan: NoOp ends the branch")
    assert infra.infra_error.startswith("student:unreachable") and not infra.scored
    assert broken.error.startswith("ValueError") and not broken.infra_error and not broken.scored
    forked = ForkedState(snap.state, sampled, sampled, [infra, broken, Branch(3, 1.0), Branch(4, 0.0)])
    assert set(forked.rewards()) == {3, 4}


def test_fork_iteration_reports_branch_cost_and_moves_the_policy(start_dir, tmp_path):
    from train.rl_loop import RLSettings, run_rl

    settings = RLSettings(tasks=TASKS, iterations=1, tasks_per_iter=4, group=1, concurrency=2, seed=3,
                          advantage="fork", fork_k=2, fork_states=2)
    run_rl(settings, start_dir, tmp_path / "rl", log=lambda _: None)
    history = json.loads((tmp_path / "rl" / "rl_history.json").read_text())[0]
    assert history["fork_states"] > 0 and history["fork_branches"] >= 2 * history["fork_states"]
    assert history["fork_branch_calls"] > 0 and history["fork_infra_excluded"] == 0
    assert history["distance_to_start"] > 0
