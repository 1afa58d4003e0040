"""Search over agent choices: `search:prior=SPEC,width=W,max_calls=N[,value=DIR][,value_weight=X][,wall_s=S]
[,checks=K][,parallel=P][,memory=0|1]`.

A best-first search over the refinement loop's agent choices, on forks of the episode's
environment (rollout/loop/env.py). A node is the episode after some steps; its children are the
prior policy's top-ranked agents (at most `width`), then new samples of those that are LLM agents
(a deterministic agent asked again from one state answers the same), then the prior's lower-ranked
agents once each (what the greedy loop would try next), generated one at a time, best first: each
expansion costs one child, so a search that never branches costs what the greedy prior costs.
Nodes are ordered by what the verifier says of their state (empty < unparsable < no plan < a
plan the validator rejects < an accepted plan), how deep they are, and the rank of their next
child; with `value=DIR`, also by a value model's estimate of the chance the episode ends in
oracle success from the node's state (rollout/policies/search_value.py: `value_weight` times the
estimate is added). A child that changed nothing or reached a state seen before is pruned: the search goes on
from the parent with its next choice, so a wasted call does not also spend a step. With `memory=1` (the
default) a node's next child is the first of its leading children whose agent has changed nothing
least often in this episode at a state showing the same symptom, counting deterministic agents only
(a plan repairer that found nothing to fix at one such state tends to find nothing at the next; an
LLM agent's miss is one draw and says little about the next), not simply the next in rank. Before
accepting a plan, the search spends up to `checks` calls (default 2, 0: none) on independent
checks of the accepted PDDL against the task's words, where the world offers them; a check that
flags the PDDL sends the node to the agents it points at instead of accepting. A plan accepted on
the loop's last allowed step gets its checks too (the search holds the episode there rather than
letting the step limit accept it), and a flagged one has no steps left for repairs. The first
accepted node that passed its check ends the search. When the LLM-call or wall-time budget runs
out first, the best node found ends the episode as it stands: an accepted plan there gets fresh
checks (calls past the budget, at most `checks`), also when a check flagged it before (a check
has false alarms: a plan that passes a second look is an answer, where declining gives none), and
is declined (no answer) when one of them flags it.

`parallel=P` (default 1: one child at a time) expands up to P children at once, as concurrent
asyncio work on their own forks, under the job-wide LLM gate like every call: each round takes
the P best frontier entries the way the serial search takes one (a node goes back in the
frontier for its next child at once, so one node may give several), reserving each child's
calls before it starts so a round never takes more than the calls left (its first child starts
whenever calls are left, as in the serial search). Branch numbers are given at launch and the
children are added to the tree in launch order, so the tree, its numbering and the chosen path do
not depend on which child finishes first. An episode waits for a round as long as its slowest
child, not for the sum of them; the calls a round spends after its first child are spent before
the search sees that child's result.

The episode's records keep the whole tree: every explored step is a StepRecord (`step` numbers
the tree's steps in the order they were taken; `parent_step` is the step it followed, -1 at the
root; `branch` its parent's child rank; `on_path` marks the chosen path). Decisions the search
made are `decided_by="search"`; the rules layer's and the acceptance checks stay `"rule"`.
A search policy used outside an episode (`decide` on a lone state) decides as its prior.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import heapq
import itertools
import time
from dataclasses import dataclass, field, replace

from rollout.core.agent_table import AgentId, agent_info
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.core.trajectory import StepRecord
from rollout.loop.env import RefinementEnv
from rollout.policies.rules import is_syntax_error
from rollout.policies.scripted import DEFAULT_RULES, symptom
from rollout.policies.search_value import ValueEstimator, load_value
from solvers.params import SpecError, read_pairs, read_params

SEARCH_KEYS = ("prior", "width", "max_calls", "value", "value_weight", "wall_s", "checks", "parallel", "memory")
DEPTH_BONUS = 0.3  # a node one step deeper at the same verdict goes first (the search dives)
RANK_PENALTY = 0.5  # each rank down the prior's list costs this much priority
DEFAULT_VALUE_WEIGHT = 1.0  # value=DIR: priority gained per unit of estimated success (search_value.py)


class SearchSpecError(SpecError):
    """A search spec that cannot be used; the message names the parameter."""


def _positive(value: float) -> str:
    return "" if value > 0 else "must be more than 0"


@dataclass(frozen=True)
class SearchSpec:
    prior: str = "rules+scripted"
    width: int = field(default=3, metadata={"ge": 1})
    max_calls: int = field(default=20, metadata={"ge": 1})  # twice the loop's ten-step limit
    value: str | None = None  # a value model's directory (rollout/policies/search_value.py); None: none
    value_weight: float = field(default=DEFAULT_VALUE_WEIGHT, metadata={"check": _positive})
    wall_s: float = field(default=300.0, metadata={"check": _positive})
    checks: int = field(default=2, metadata={"ge": 0})
    parallel: int = field(default=1, metadata={"ge": 1})  # children expanded at once
    memory: int = field(default=1, metadata={"ge": 0, "le": 1})  # 1: deterministic agents that changed nothing go last


def parse_search_spec(text: str) -> SearchSpec:
    """`prior=SPEC,width=W,max_calls=N,wall_s=S,checks=K,parallel=P` -> SearchSpec (solvers.params).

    The prior is a policy spec and may hold commas of its own (`prior=scripted:noise=0.2,seed=3`):
    a pair whose key is not a search key belongs to the prior before it."""
    pairs = read_pairs(text, spec=text, what="search", error=SearchSpecError)
    keys = [pair.key for pair in pairs if pair.key in SEARCH_KEYS]
    if twice := [key for key in SEARCH_KEYS if keys.count(key) > 1]:
        raise SearchSpecError.of(text, f"{twice[0]!r} given twice", field=twice[0], known=SEARCH_KEYS, what="search")
    prior: list[str] = []
    own: list[str] = []
    in_prior = False
    for pair in pairs:
        if pair.key == "prior" or (in_prior and pair.key not in SEARCH_KEYS):
            prior = [pair.value] if pair.key == "prior" else [*prior, f"{pair.key}={pair.value}"]
            in_prior = True
        else:
            own.append(f"{pair.key}={pair.value}")
            in_prior = False
    spec = read_params(SearchSpec, ",".join(own), spec=text, what="search", error=SearchSpecError)
    if spec.value is None and "value_weight" in keys:
        raise SearchSpecError.of(text, "value_weight needs value=DIR (a value model)", field="value_weight",
                                 what="search")
    return replace(spec, prior=",".join(prior) or SearchSpec.prior)


# ---------------------------------------------------------------------------------- the value

# the last verdict's category (solvers.ErrorCategory) -> how far the state is from an accepted plan
_CATEGORY_VALUE = {"parse_error_domain": 1.0, "parse_error_problem": 1.0, "parse_error_plan": 1.0,
                   "input_error": 1.0, "check_failed": 1.0, "unsupported_requirement": 1.5,
                   "unsolvable_proved": 2.0, "no_plan_found": 2.0, "search_timeout": 2.0, "memory_limit": 2.0,
                   "solver_crash": 2.0, "plan_invalid": 3.0, "ok": 3.0}


def verdict_value(state: EpisodeState) -> float:
    """What the verifier says of a state, as a number: 0 empty, 1 unparsable, 1.5 a feature the
    planner lacks, 2 no plan, 3 a plan the validator rejects, 4 an accepted plan."""
    if not state.domain.strip():
        return 0.0
    if state.plan_valid:
        return 4.0
    if is_syntax_error(state):
        return 1.0
    return _CATEGORY_VALUE.get(state.error_category, 2.0)


def _state_key(state: EpisodeState) -> tuple[str, str, str]:
    return state.domain, state.problem, state.plan


# ---------------------------------------------------------------------------------- the tree

@dataclass
class _Node:
    env: RefinementEnv
    path: list[int]  # tree step numbers from the root to this node
    candidates: list[Decision] | None  # ranked children not yet taken (None: the prior not asked yet)
    head: int = 0  # how many of the candidates lead (memory=1 chooses among them; the rest follow in order)
    taken: int = 0  # children taken so far

    @property
    def state(self) -> EpisodeState:
        return _seen_state(self.env)

    @functools.cached_property
    def shown_symptom(self) -> str:
        """The scripted rules' name for the node's state (what `memory=1` keys on); a node's state never changes."""
        return symptom(self.state)

    def priority(self) -> float:
        depth = len(self.path)
        return verdict_value(self.state) + DEPTH_BONUS * depth - RANK_PENALTY * self.taken


@dataclass
class _Tree:
    """Every explored step, renumbered in the order taken, with its parent and branch."""

    records: list[StepRecord] = field(default_factory=list)
    llm_calls: int = 0
    solver_cpu_s: float = 0.0

    def add(self, new: list[StepRecord], parent: list[int], branch: int) -> list[int]:
        path = list(parent)
        for record in new:
            step = len(self.records)
            self.records.append(replace(record, step=step, parent_step=path[-1] if path else -1, branch=branch,
                                        on_path=False))
            self.llm_calls += record.llm_calls
            path.append(step)
        return path

    def mark_path(self, path: list[int]) -> list[StepRecord]:
        chosen = set(path)
        return [replace(r, on_path=True) if r.step in chosen else r for r in self.records]


# ---------------------------------------------------------------------------------- the children

async def ranked_children(prior: Policy, state: EpisodeState, width: int) -> tuple[list[Decision], int]:
    """The node's children, best first, and how many of them lead (the head `memory=1` may reorder).

    The head: the prior's decision, then its next-best agents, at most `width`, then each of those
    that is an LLM agent again (a new sample; a deterministic agent asked again from the same state
    answers the same). The tail: the prior's lower-ranked agents, once each, in rank order, so a
    node whose head is spent still has what the greedy loop would try next. The next-best agents
    come from the prior's scores where it has them (a trained linear policy), else from the
    scripted rules table for the state's symptom. NoOp is a child only on a plan the validator
    accepts, and then the only one."""
    first = await prior.adecide(state)
    if state.plan_valid:
        noop = (_as_search(first, 0, prior.name) if first.agent_id == AgentId.NOOP else
                Decision(AgentId.NOOP, "rule", reason="validator accepted the plan"))
        return [noop], 1
    ranked: list[int] = [first.agent_id]
    for agent in _alternatives(prior, state):
        if agent not in ranked and agent not in (AgentId.NOOP, AgentId.NATURAL_LANGUAGE):
            ranked.append(agent)
    out = [_as_search(first, 0, prior.name)]
    out += [Decision(a, "search", reason=f"search: the prior's rank {r + 1}") for r, a in enumerate(ranked[1:width], 1)]
    # then the same choices again: new samples of the same agents (a call that changed nothing is pruned)
    again = [replace(_free(d), reason=d.reason + " (asked again)")
             for d in out if _samples(d.agent_id)]  # the prior decided once: its cost is on the first child only
    tail = [Decision(a, "search", reason=f"search: the prior's rank {r + 1}")
            for r, a in enumerate(ranked[width:], width)]
    return out + again + tail, len(out) + len(again)


def _samples(agent_id: int) -> bool:
    """Whether asking the agent again from the same state is a new draw (an LLM agent), not a repeat."""
    return _kind(agent_id) == "llm"


def _deterministic(agent_id: int) -> bool:
    """A plan repairer whose answer is a function of the state (what `memory=1` counts)."""
    return _kind(agent_id) == "deterministic"


def _kind(agent_id: int) -> str:
    try:
        return agent_info(agent_id).kind
    except KeyError:
        return "none"


def _free(decision: Decision) -> Decision:
    """The decision without what deciding it cost (the prior is paid once per node)."""
    return replace(decision, llm_calls=0, tokens_in=0, tokens_out=0, cost_usd=0.0)


def _as_search(decision: Decision, rank: int, prior_name: str) -> Decision:
    if decision.decided_by == "rule":
        return decision
    return replace(decision, decided_by="search", reason=f"search: the prior's rank {rank + 1} ({prior_name}: "
                                                         f"{decision.reason})"[:300])


def _alternatives(prior: Policy, state: EpisodeState) -> list[int]:
    inner = getattr(prior, "inner", prior)  # RulesFirst wraps the policy that ranks
    scores = getattr(inner, "scores", None)
    if callable(scores):
        values = list(scores(state))
        return sorted(range(len(values)), key=lambda a: -values[a])
    return list(DEFAULT_RULES.get(symptom(state), ())) + list(DEFAULT_RULES["unknown"])


def suspect_children(suspects: tuple[int, ...], width: int) -> tuple[list[Decision], int]:
    """After a failed acceptance check: the agents the check pointed at (agent 1 last), then those
    of them that are LLM agents again (new samples); all lead (see ranked_children)."""
    ids = list(dict.fromkeys((*suspects, 1)))[:max(1, width)]
    first = [Decision(a, "search", reason="search: the acceptance check flagged the PDDL") for a in ids]
    again = [replace(d, reason=d.reason + " (asked again)") for d in first if _samples(d.agent_id)]
    return first + again, len(first) + len(again)


# ---------------------------------------------------------------------------------- the search

class SearchPolicy(Policy):
    """Best-first search over agent choices (module docstring); `run_episode` hands it the env."""

    name = "search"

    def __init__(self, spec: SearchSpec, prior: Policy, *, concurrent: bool = True,
                 value: ValueEstimator | None = None) -> None:
        self.spec = spec
        self.prior = prior
        self.value = value  # the value model of `value=DIR`; None: the verdicts alone order the frontier
        # False: a round's children run one after another (the same tree, slower; tests compare)
        self.concurrent = concurrent
        self.name = f"search[{prior.name}]"
        parallel = f"-p{spec.parallel}" if spec.parallel > 1 else ""
        memory = "-md" if spec.memory else ""
        self.version = f"w{spec.width}-c{spec.max_calls}-k{spec.checks}{parallel}{memory}-{prior.version}"
        if value is not None:
            self.version += f"-v{value.name}@{value.version}x{spec.value_weight:g}"
        self.decides_inline = prior.decides_inline

    def _decide(self, state: EpisodeState) -> Decision:
        return self.prior.decide(state)

    async def adecide(self, state: EpisodeState) -> Decision:
        return await self.prior.adecide(state)

    def close(self) -> None:
        self.prior.close()

    async def search_episode(self, env: RefinementEnv) -> None:
        """Search from `env` (just reset) and leave in it the tree's records and the chosen end."""
        if env.done:
            return
        run = _Search(self, env)
        await run.run()


@dataclass
class _Unit:
    """One child being expanded: launched (branch and calls reserved) in launch order, run on its
    own fork, merged into the tree in launch order, so completion order changes nothing."""

    node: _Node  # the parent
    env: RefinementEnv  # the child's fork
    decision: Decision
    branch: int
    checked: bool  # a NoOp on an accepted plan: the acceptance checks come first
    checks: list[list[StepRecord]] = field(default_factory=list)  # each check's records
    suspects: tuple[int, ...] | None = None  # set when a check flagged the PDDL
    steps: list[StepRecord] = field(default_factory=list)  # the step's records (none when flagged)
    solver_cpu_s: float = 0.0


class _Search:
    def __init__(self, policy: SearchPolicy, root: RefinementEnv) -> None:
        self.policy, self.spec, self.root = policy, policy.spec, root
        root.hold_valid_at_limit = True  # a plan accepted at the step limit still gets its checks
        self.tree = _Tree(solver_cpu_s=root.solver_cpu_s)
        self.frontier: list[tuple[float, int, _Node]] = []
        self.counter = itertools.count()
        self.seen: set[tuple[str, str, str]] = set()
        self.best: _Node | None = None  # the best open node (the fallback answer)
        self.failed_end: _Node | None = None  # the first branch that ended unaccepted (the last resort)
        self.flagged: set[tuple[str, str, str]] = set()  # accepted states an acceptance check flagged
        self.deadline = time.monotonic() + self.spec.wall_s
        self.values: dict[tuple[str, str, str], float] = {}  # the value model's estimates, per state
        # (symptom, agent) -> how often that agent changed nothing at a state showing that symptom
        self.futile: collections.Counter[tuple[str, int]] = collections.Counter()

    def out_of_budget(self) -> bool:
        return self.tree.llm_calls >= self.spec.max_calls or time.monotonic() >= self.deadline

    async def run(self) -> None:
        root = self._node(self.root, [])
        self.seen.add(_state_key(root.state))
        self._push(root)
        chosen: _Node | None = None
        while self.frontier and chosen is None and not self.out_of_budget():
            units = await self._launch()
            await self._run_units(units)
            for unit in units:  # launch order: the tree does not depend on which child finished first
                chosen = chosen or self._merge(unit)
        if chosen is None:
            chosen = self.best or self.failed_end or root
            if not chosen.env.done:
                chosen = await self._close(chosen)
        self._adopt(chosen)

    def _suspects(self, env: RefinementEnv, suspects: tuple[int, ...]) -> tuple[list[Decision], int]:
        """The children of a flagged plan: the agents the check named, while steps are left."""
        return suspect_children(suspects, self.spec.width) if env.steps_left > 0 else ([], 0)

    def _rank(self, node: _Node) -> tuple[float, int]:
        """How good an answer the node's state would be now: a flagged plan below an unflagged one."""
        value = verdict_value(node.state)
        if _state_key(node.state) in self.flagged:
            value -= 0.5
        return value, len(node.path)

    def _priority(self, node: _Node) -> float:
        """The node's priority: the search's own, plus the weighted value estimate with `value=DIR`."""
        priority = node.priority()
        model = self.policy.value
        if model is not None:
            key = _state_key(node.state)
            if key not in self.values:
                self.values[key] = model.predict(node.state)
            priority += self.spec.value_weight * self.values[key]
        return priority

    def _push(self, node: _Node) -> None:
        if not node.env.done and (node.candidates is None or node.candidates):
            heapq.heappush(self.frontier, (-self._priority(node), next(self.counter), node))
        if not node.env.done and (self.best is None or self._rank(node) > self._rank(self.best)):
            self.best = node

    def _node(self, env: RefinementEnv, path: list[int],
              children: tuple[list[Decision], int] | None = None) -> _Node:
        """A node; its children are ranked when it is first expanded (the prior is asked then, so a
        prior whose decisions cost calls is paid only for nodes the search expands)."""
        if children is None:
            return _Node(env, path, None)
        return _Node(env, path, children[0], head=children[1])

    def _cost(self, decision: Decision) -> int:
        """The most LLM calls a child can spend: its agent call (or its acceptance checks and the
        rendering of an accepted plan) plus what the prior's decision cost."""
        checked = decision.agent_id == AgentId.NOOP and self.spec.checks
        return (self.spec.checks + 1 if checked else 1) + decision.llm_calls

    async def _launch(self) -> list[_Unit]:
        """Up to `parallel` children, best first, each taken as the serial search would take it
        (the node goes back in the frontier for its next child at once). The first starts whenever
        calls are left (as in a serial search); each further one only if its calls, reserved with
        those of the ones before it, fit in max_calls."""
        units: list[_Unit] = []
        reserved = 0
        while self.frontier and len(units) < self.spec.parallel and time.monotonic() < self.deadline:
            _, _, node = heapq.heappop(self.frontier)
            if node.candidates is None:
                node.env.activate()
                node.candidates, node.head = await ranked_children(self.policy.prior, node.state, self.spec.width)
            if not node.candidates:
                continue
            cost = self._cost(node.candidates[0])
            if units and self.tree.llm_calls + reserved + cost > self.spec.max_calls:
                self._push(node)
                break
            decision = self._take(node)
            branch, node.taken = node.taken, node.taken + 1
            self._push(node)  # back in the frontier for its next child, if it has one
            env = node.env.fork(resample=branch)  # each child's calls are samples of their own
            checked = bool(decision.agent_id == AgentId.NOOP and self.spec.checks)
            units.append(_Unit(node, env, decision, branch, checked))
            reserved += cost
        return units

    def _take(self, node: _Node) -> Decision:
        """The node's next child: the first in rank order, or with `memory=1` the first of the
        leading children whose agent has changed nothing least often in this episode at a state of
        the same symptom (only deterministic agents are counted: see the module docstring). The
        prior's decision cost, carried by the first candidate, goes with whichever child is taken first."""
        candidates = node.candidates
        assert candidates
        index = 0
        if self.spec.memory and self.futile and node.head > 1:
            sym = node.shown_symptom
            index = min(range(node.head), key=lambda i: (self.futile[(sym, candidates[i].agent_id)], i))
        decision = candidates.pop(index)
        node.head = max(0, node.head - 1)
        if index and candidates[0].llm_calls:
            first = candidates[0]
            decision = replace(decision, llm_calls=first.llm_calls, tokens_in=first.tokens_in,
                               tokens_out=first.tokens_out, cost_usd=first.cost_usd)
            candidates[0] = _free(first)
        return decision

    async def _run_units(self, units: list[_Unit]) -> None:
        """Run the launched children: concurrently (each in its own asyncio task, under the job's
        LLM gate like any call), or one after another when the policy is serial."""
        if not self.policy.concurrent or len(units) < 2:
            for unit in units:
                await self._run_unit(unit)
            return
        tasks = [asyncio.ensure_future(self._run_unit(unit)) for unit in units]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _run_unit(self, unit: _Unit) -> None:
        """The child's work on its own fork; nothing of the tree is touched here."""
        env = unit.env
        env.activate()
        cpu = env.solver_cpu_s
        if unit.checked:
            unit.checks, unit.suspects = await self._acceptance_checks(env)
        if unit.suspects is None:
            before = len(env.steps)
            await env.step(unit.decision)
            unit.steps = env.steps[before:]
        unit.solver_cpu_s = env.solver_cpu_s - cpu

    def _merge(self, unit: _Unit) -> _Node | None:
        """Add a finished child to the tree; returns the accepted node that ends the search, else None."""
        path = self._add_checks(unit.checks, unit.node.path, unit.branch)
        self.tree.solver_cpu_s += unit.solver_cpu_s
        if unit.suspects is not None:
            self.flagged.add(_state_key(unit.node.state))
            self._push(self._node(unit.env, path, self._suspects(unit.env, unit.suspects)))
            return None
        path = self.tree.add(unit.steps, path, 0 if unit.checks else unit.branch)
        env = unit.env
        if env.done:
            node = _Node(env, path, [])
            if env.end is not None and env.end.success_validator:
                return node
            self.failed_end = self.failed_end or node
            return None
        key = _state_key(_seen_state(env))
        if key == _state_key(unit.node.state) and _deterministic(unit.decision.agent_id):
            self.futile[(unit.node.shown_symptom, unit.decision.agent_id)] += 1
        if key in self.seen:
            return None  # pruned: the step changed nothing, or reached a state already explored
        self.seen.add(key)
        self._push(self._node(env, path))
        return None

    async def _acceptance_checks(self, env: RefinementEnv
                                 ) -> tuple[list[list[StepRecord]], tuple[int, ...] | None]:
        """Up to `checks` independent acceptance checks on `env`, stopping at the first that flags
        the PDDL: (each check's records, None when all passed or the world offers none, else the
        agents the flagging check named). The tree is not touched (see _add_checks)."""
        records: list[list[StepRecord]] = []
        for _ in range(self.spec.checks):
            before = len(env.steps)
            verdict = await env.check_acceptance()
            if verdict is None:
                break
            records.append(env.steps[before:])
            if not verdict.passed:
                return records, verdict.suspects
        return records, None

    def _add_checks(self, checks: list[list[StepRecord]], parent: list[int], branch: int) -> list[int]:
        """The checks' records into the tree after `parent` (the first at `branch`); the path after them."""
        path = parent
        for i, records in enumerate(checks):
            path = self.tree.add(records, path, branch if i == 0 else 0)
        return path

    async def _checks(self, env: RefinementEnv, parent: list[int], branch: int
                      ) -> tuple[list[int], tuple[int, ...] | None]:
        """The acceptance checks run and added to the tree: (the path after them, the suspects)."""
        cpu = env.solver_cpu_s
        checks, suspects = await self._acceptance_checks(env)
        self.tree.solver_cpu_s += env.solver_cpu_s - cpu
        return self._add_checks(checks, parent, branch), suspects

    async def _close(self, node: _Node) -> _Node:
        """Out of budget: the episode ends on the best node's state. A plan the validator accepts
        gets fresh acceptance checks first (at most `checks` calls past the budget), flagged before
        or not, and is declined (no answer) when one of them flags it."""
        env, accept = node.env, True
        if node.state.plan_valid and self.spec.checks:
            # a plan a check flagged earlier gets fresh checks: all must pass for it to be the answer
            node.path, suspects = await self._checks(env, node.path, 0)
            accept = suspects is None
        before, cpu = len(env.steps), env.solver_cpu_s
        await env.end_now(accept=accept)
        node.path = self.tree.add(env.steps[before:], node.path, 0)
        self.tree.solver_cpu_s += env.solver_cpu_s - cpu
        return node

    def _adopt(self, chosen: _Node) -> None:
        end = chosen.env.end
        assert end is not None
        self.root.adopt(self.tree.mark_path(chosen.path), end, self.tree.solver_cpu_s)


def _seen_state(env: RefinementEnv) -> EpisodeState:
    state = env.state
    assert state is not None
    return state


def search_factory(params: str, seed: int) -> Policy:
    """`search:prior=SPEC,...` (the policy registry's factory; rollout/policies)."""
    from rollout.policies import make_policy

    spec = parse_search_spec(params)
    if spec.prior.startswith("search"):
        raise SearchSpecError("prior: a search cannot be the prior of a search")
    value = load_value(spec.value) if spec.value is not None else None  # a one-line ValueError when not one
    return SearchPolicy(spec, make_policy(spec.prior, seed=seed), value=value)
