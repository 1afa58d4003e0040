"""Per-state advantages from forked episodes (`--advantage fork`): the estimate and its update.

At a sample of the states the model decided in an RL rollout (`fork_states` per episode), the
episode is forked (rollout/loop/env.py snapshot/restore) and each of the current policy's top
`fork_k` agents, plus the agent the sampler drew there, is tried in its own branch; every branch
is finished by the current policy's argmax behind the rules layer (what evaluation runs) and
scored like an episode (oracle success, the validator's verdict where the task has no gold
answer, minus the price per LLM call of the whole episode). The branches of one state start from
one snapshot and are not resampled: they share the simulated world's and the agents' random
streams (common random numbers), so two branches differ only through the agent tried and what
follows from it, and a branch is reproducible from its snapshot and agent.

Advantage of agent a at state s: A(a) = R(a) - the mean of R over the tried agents. The update is
the all-action policy gradient over the tried agents, sum_a A(a) grad log pi(a | s), averaged over
the batch's forked states, plus the L2 pull towards the supervised start. With the mean baseline
the advantages sum to 0, so the gradient on the state's scores is A / T itself: each tried agent's
score moves by its centred reward, whatever its probability now. That is what the argmax needs
(an alternative that beats it gains as fast as the argmax loses); the probability-weighted form
(the gradient of the sampler's expected return) would move an unlikely winner by pi(a) only.

A branch that ended on an infrastructure failure, or broke, is left out of its state's mean and
counted; a state with fewer than two scored branches carries no advantage. The branches' LLM
calls are training cost (reported per iteration as `fork_branch_calls`), not evaluation.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from rollout.core.agent_table import NUM_AGENTS
from rollout.core.decision import Decision, Policy
from rollout.core.infra import infra_reason
from rollout.core.state import EpisodeState
from rollout.loop.env import EnvSnapshot, RefinementEnv
from solvers.errors import count_handled
from train.rl import LinearWeights, softmax

BRANCH_REASON = "fork branch"


@dataclass
class Branch:
    """One tried agent at a forked state: its episode's reward and the calls after the fork."""

    agent: int
    reward: float = 0.0
    calls: int = 0
    infra_error: str = ""
    error: str = ""

    @property
    def scored(self) -> bool:
        return not (self.infra_error or self.error)


@dataclass
class ForkedState:
    """A model-decided state of a rollout, the agents tried there and their branches."""

    state: EpisodeState
    sampled: int  # the agent the sampler drew there
    argmax: int  # the current policy's argmax there
    branches: list[Branch] = field(default_factory=list)

    def rewards(self) -> dict[int, float]:
        """Each tried agent's mean reward over its scored branches (agents with none left out)."""
        sums: dict[int, list[float]] = {}
        for b in self.branches:
            if b.scored:
                sums.setdefault(b.agent, []).append(b.reward)
        return {a: sum(r) / len(r) for a, r in sums.items()}


def fork_advantages(rewards: dict[int, float]) -> dict[int, float]:
    """R(a) - mean over the tried agents' R; empty when fewer than two agents were scored."""
    if len(rewards) < 2:
        return {}
    mean = sum(rewards.values()) / len(rewards)
    return {a: r - mean for a, r in rewards.items()}


def tried_agents(scores: np.ndarray, sampled: int, k: int) -> list[int]:
    """The top-k agents by score (highest first, ties by agent id), then the sampled one if not among them."""
    ranked = sorted(range(len(scores)), key=lambda a: (-float(scores[a]), a))[:k]
    return ranked + ([sampled] if sampled not in ranked else [])


class ForkingSampler(Policy):
    """The rollouts' policy in fork mode: `inner` decides every step (run_episode hands it the
    env through `search_episode`), and the env is snapshotted before each step the model decided,
    for the branches run after the episode."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name, self.version = inner.name, inner.version
        self.snapshots: list[tuple[EnvSnapshot, int]] = []  # (before the step, the agent decided)
        self.env: RefinementEnv | None = None

    def _decide(self, state: EpisodeState) -> Decision:
        return self.inner.decide(state)

    async def search_episode(self, env: RefinementEnv) -> None:
        self.env = env
        while not env.done:
            assert env.state is not None
            decision = await self.inner.adecide(env.state)
            if decision.decided_by == "model":
                self.snapshots.append((env.snapshot(), int(decision.agent_id)))
            await env.step(decision)


def choose_states(n_model_states: int, n: int, seed: int) -> list[int]:
    """Which of an episode's model states to fork: n of them (all when fewer), drawn by `seed`."""
    return sorted(random.Random(seed).sample(range(n_model_states), min(n, n_model_states)))


async def run_branch(template: RefinementEnv, snap: EnvSnapshot, agent: int, finisher: Policy,
                     price_per_call: float, replicate: int = 0) -> Branch:
    """Restore `snap` in a fresh env (same backend, limits and step budget as `template`), step
    `agent`, finish with `finisher`; the branch's reward and calls after the fork. Replicate 0
    replays the snapshot's random streams; replicate r > 0 draws the world's calls afresh from
    a stream seeded by the snapshot's and r (the same for every agent: still common random
    numbers across the agents of one replicate)."""
    env = RefinementEnv(template.backend, limits=template.limits, max_steps=template.max_steps,
                        render_natural_language=template.render_natural_language)
    branch = Branch(agent)
    try:
        env.restore(snap)
        if replicate:
            env, restored = env.fork(resample=replicate), env
            restored.close()
        env.activate()
        result = await env.step(Decision(agent, "model", reason=BRANCH_REASON))
        while not result.done:
            result = await env.step(await finisher.adecide(result.state))
    except Exception as exc:  # noqa: BLE001  (a failed branch is counted, not scored)
        count_handled("rl fork branch", exc)
        branch.infra_error = infra_reason(exc)
        if not branch.infra_error:
            branch.error = f"{type(exc).__name__}: {exc}"
    finally:
        env.close()
    branch.calls = sum(s.llm_calls for s in env.steps[len(snap.steps):])
    if branch.scored and env.end is not None:
        end = env.end
        success = end.success_oracle if end.success_oracle is not None else end.success_validator
        branch.reward = float(bool(success)) - price_per_call * sum(s.llm_calls for s in env.steps)
    elif branch.scored:
        branch.error = "the branch ended without an end"
    return branch


async def fork_state(template: RefinementEnv, snap: EnvSnapshot, sampled: int, finisher: Policy,
                     scores: np.ndarray, k: int, price_per_call: float, samples: int = 1) -> ForkedState:
    """Every tried agent's branches from one snapshot, one after another: `samples` replicates
    each (run_branch); an agent's reward is the mean over its scored replicates."""
    assert snap.state is not None
    agents = tried_agents(scores, sampled, k)
    forked = ForkedState(snap.state, sampled, agents[0])
    for replicate in range(samples):
        for agent in agents:
            forked.branches.append(await run_branch(template, snap, agent, finisher, price_per_call, replicate))
    return forked


def fork_gradient(params: LinearWeights, forked: Iterable[ForkedState], temperature: float
                  ) -> tuple[LinearWeights, np.ndarray, np.ndarray, int]:
    """(params extended to the states' buckets, d/dW, d/db, states used) of the mean over forked
    states with advantages of sum_a A(a) log pi(a | s) (see the module's docstring)."""
    used = [(params.bucket_ids(f.state), fork_advantages(f.rewards())) for f in forked]
    used = [(ids, adv) for ids, adv in used if adv]
    params = params.extended(b for ids, _ in used for b in ids)
    grad_w, grad_b = np.zeros_like(params.weights), np.zeros(NUM_AGENTS)
    for ids, adv in used:
        rows = params.rows(ids)
        p = softmax(params.scores(rows) / temperature)
        a = np.zeros(NUM_AGENTS)
        for agent, value in adv.items():
            a[agent] = value
        g = (a - p * a.sum()) / (temperature * len(used))
        np.add.at(grad_w, rows, g)
        grad_b += g
    return params, grad_w, grad_b, len(used)


def fork_update(params: LinearWeights, start: LinearWeights, forked: list[ForkedState], *, lr: float,
                pull: float, temperature: float) -> LinearWeights:
    """One gradient-ascent step on the forked states' all-action objective minus pull/2 *
    ||theta - theta_start||^2 (with no state carrying an advantage, only the pull acts)."""
    params, grad_w, grad_b, _ = fork_gradient(params, forked, temperature)
    w0 = start.aligned_to(params)
    return LinearWeights(params.buckets, params.weights + lr * (grad_w - pull * (params.weights - w0)),
                         params.bias + lr * (grad_b - pull * (params.bias - start.bias)), params.n_buckets)


def fork_figures(forked: list[ForkedState]) -> dict[str, float]:
    """Per-iteration figures of the forks: states, branches, their LLM calls (training cost), the
    branches excluded, the share of states whose tried agents did not all score alike, and the share
    where some tried agent beat the argmax."""
    branches = [b for f in forked for b in f.branches]
    informative = beaten = 0
    for f in forked:
        rewards = f.rewards()
        if len(rewards) >= 2 and max(rewards.values()) - min(rewards.values()) > 1e-9:
            informative += 1
        if f.argmax in rewards and max(rewards.values()) > rewards[f.argmax] + 1e-9:
            beaten += 1
    n = max(len(forked), 1)
    return {"fork_states": float(len(forked)), "fork_branches": float(len(branches)),
            "fork_branch_calls": float(sum(b.calls for b in branches)),
            "fork_infra_excluded": float(sum(bool(b.infra_error) for b in branches)),
            "fork_broken_excluded": float(sum(bool(b.error) for b in branches)),
            "fork_informative": informative / n, "fork_argmax_beaten": beaten / n}
