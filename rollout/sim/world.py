"""The simulated agent world: one SimWorld per episode stands in for the LLM agents.

It holds the task's gold PDDL and a hidden list of active faults. The drafted PDDL the loop
starts from is gold + sampled faults; simulated LLM agents remove faults of the classes they
target with a configurable probability, sometimes add new ones, and draw latency and token
counts from configurable distributions. The planner and validator stay real, so a policy only
ever sees real solver output; the fault list never leaves this object.
"""

from __future__ import annotations

import asyncio
import copy
import math
import random
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from rollout.agents.base import AcceptanceVerdict, AgentOutcome, BackendMisconfigured, Draft
from rollout.core.agent_table import AgentId, agent_name
from rollout.core.state import EpisodeState
from rollout.pddl.printer import to_text
from rollout.pddl.sections import section, sections, shuffle_init, typed_list
from rollout.pddl.sexpr import SExprError, parse, parse_shared
from rollout.sim.faults import CATALOG, PDDL_FAULTS, PLAN_FAULTS, Fault, corrupt_plan, render
from rollout.sim.size import size_excess, task_size
from rollout.sim.world_file import WORLD_KEYS, World, default_world, world_hash
from rollout.tasks.base import Task

_RENDERED: dict[tuple[str, str, str, tuple[tuple[str, str], ...]], tuple[str, str]] = {}
_RENDERED_MAX = 2048
# The world of the episode running in this asyncio task (each episode runs in its own task, which
# copies the context), so a simulated prompted orchestrator can answer from what the world knows.
_CURRENT_WORLD: ContextVar[SimWorld | None] = ContextVar("halo_sim_world", default=None)

GENERALIST_IDS = (AgentId.DEEP_THINK_PDDL,)


_W = default_world()
_D = _W.sim  # the default world's parameters (rollout/sim/default_world.yaml); nothing is set here


@dataclass
class SimConfig:
    """The simulated world's parameters (defaults: the default world file) and the run's latency_scale.

    What each parameter means is written beside it in rollout/sim/default_world.yaml. Size-aware
    drafting: a task larger than size_reference (rollout.sim.size.task_size: the geometric mean of
    objects, goal atoms and gold-plan steps) gets a draft with more faults and repairs that succeed
    less often, both growing with x = ln(size / size_reference) ** size_exponent; at or below the
    reference the world is exactly the size-blind one (same draws). Chosen by measurement
    (docs/tasks.md).
    """

    repair_prob: float = _D["repair_prob"]
    secondary_repair_prob: float = _D["secondary_repair_prob"]
    dynamic_repair_prob: float = _D["dynamic_repair_prob"]
    idle_fault_prob: float = _D["idle_fault_prob"]
    side_effect_prob: float = _D["side_effect_prob"]
    fault_count_weights: tuple[float, ...] = _D["fault_count_weights"]
    class_weights: dict[str, float] = field(default_factory=lambda: dict(_D["class_weights"]))
    plan_fault_prob: float = _D["plan_fault_prob"]
    empty_start_prob: float = _D["empty_start_prob"]
    no_draft_plan_prob: float = _D["no_draft_plan_prob"]
    rename_prob: float = _D["rename_prob"]
    hint_bonus: float = _D["hint_bonus"]
    size_reference: float = _D["size_reference"]
    size_exponent: float = _D["size_exponent"]
    size_extra_faults: float = _D["size_extra_faults"]
    size_repair_decay: float = _D["size_repair_decay"]
    latency_median_ms: float = _D["latency_median_ms"]
    latency_sigma: float = _D["latency_sigma"]
    latency_scale: float = 0.001  # a run setting, not the world's: real sleep = simulated latency x this
    reasoning_tokens_median: float = _D["reasoning_tokens_median"]
    model: str = _D["model"]
    # USD per million tokens (input, output)
    prices: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(_D["prices"]))
    generalist_rewrite_prob: float = _D["generalist_rewrite_prob"]
    emergency_fault_count_weights: tuple[float, ...] = _D["emergency_fault_count_weights"]
    reasoning_tokens_sigma: float = _D["reasoning_tokens_sigma"]
    prompt_base_tokens: int = _D["prompt_base_tokens"]
    check_detect_prob: float = _D["check_detect_prob"]
    check_false_alarm_prob: float = _D["check_false_alarm_prob"]
    # the simulated prompted teachers of this world (profile name -> parameters) and their prices
    teachers: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(_W.teachers))
    teacher_prices: dict[str, dict[str, float]] = field(default_factory=lambda: copy.deepcopy(_W.teacher_prices))
    # the paper-scale accounting constants of this world (rollout/sim/paper_calibration.py)
    paper_calibration: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(_W.paper_calibration))
    world_name: str = _W.name

    def world_params(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in WORLD_KEYS}

    @property
    def world_hash(self) -> str:
        """The hash of this world's parameters (rollout.sim.world_file.world_hash)."""
        return world_hash(self.world_params(), self.teachers, self.teacher_prices, self.paper_calibration)

    @classmethod
    def from_world(cls, world: World, **run_settings: Any) -> SimConfig:
        return cls(**copy.deepcopy(world.sim), teachers=copy.deepcopy(world.teachers),
                   teacher_prices=copy.deepcopy(world.teacher_prices),
                   paper_calibration=copy.deepcopy(world.paper_calibration), world_name=world.name, **run_settings)


class SimWorld:
    """Plays the LLM agents of one episode (rollout.agents.base.LLMStandIn) and drafts its start."""

    def __init__(self, task: Task, config: SimConfig | None = None, seed: int = 0, *, transport: Any = None) -> None:
        if not task.gold_domain or not task.gold_problem:
            raise ValueError(f"task {task.task_id}: the simulated world needs gold PDDL")
        self.task = task
        self.config = config or SimConfig()
        self.seed = seed
        # An OpenAI-protocol client (rollout.llm.OpenAIChatClient): each simulated call then also
        # travels over HTTP to a server that answers after the simulated latency.
        self.transport = transport
        self.rng = random.Random(f"sim|{seed}|{task.task_id}")
        # shared with every episode of the task: faults edit copies (see faults.render)
        self.gold_domain = parse_shared(task.gold_domain)
        self.gold_problem = parse_shared(task.gold_problem)
        self.size = task_size(self.gold_problem, task.gold_plan)
        self.size_excess = size_excess(self.size, self.config.size_reference, self.config.size_exponent)
        self.faults: list[Fault] = []
        self.rename: dict[str, str] = {}
        self.hint = False
        self.started_empty = False
        self.draft_plan = ""  # the drafted plan and the plan fault it carries ("" for none)
        self.draft_plan_fault = ""
        _CURRENT_WORLD.set(self)

    # ------------------------------------------------------------ draft

    def _sample_faults(self, weights: tuple[float, ...]) -> list[Fault]:
        n = self.rng.choices(range(len(weights)), weights=weights)[0]
        if self.size_excess > 0 and self.config.size_extra_faults > 0:
            n += _poisson(self.rng, self.config.size_extra_faults * self.size_excess)
        out: list[Fault] = []
        kinds = list(PDDL_FAULTS)
        while kinds and len(out) < n:
            kind = self.rng.choices(kinds, weights=[self.config.class_weights.get(k, 1.0) for k in kinds])[0]
            kinds.remove(kind)
            fault = self._make_fault(kind)
            if fault is not None:
                out.append(fault)
        return out

    def _make_fault(self, kind: str) -> Fault | None:
        params = CATALOG[kind].choose(self.gold_domain, self.gold_problem, self.rng)
        return None if params is None else Fault(kind, params)

    def _sample_rename(self) -> dict[str, str]:
        names: dict[str, str] = {}
        for kind in (":action", ":durative-action"):
            for action in sections(self.gold_domain, kind):
                name = str(action[1]).lower()
                names[name] = name.replace("-", "_") if "-" in name else f"do_{name}"
        objs = section(self.gold_problem, ":objects")
        reserved = _reserved_names(self.gold_domain)
        for obj, _ in typed_list((objs or [])[1:]):
            if obj.lower() not in reserved:
                names[obj.lower()] = f"{obj.lower()}_obj"
        return names

    def draft(self) -> Draft:
        """The PDDL (and plan) a drafting LLM wrote before the loop starts."""
        cfg = self.config
        if self.rng.random() < cfg.rename_prob:
            self.rename = self._sample_rename()
        if self.rng.random() < cfg.empty_start_prob:
            self.started_empty = True
            return Draft("", "", "")
        self.faults = self._sample_faults(cfg.fault_count_weights)
        domain, problem = self.render()
        plan = ""
        if self.task.gold_plan and self.rng.random() >= cfg.no_draft_plan_prob:
            steps = [s.strip() for s in self.task.gold_plan.splitlines() if s.strip()]
            if self.rng.random() < cfg.plan_fault_prob:
                kind = self.rng.choice(PLAN_FAULTS)
                corrupted = corrupt_plan(steps, kind, self.rng)
                if corrupted is not None:
                    steps, self.draft_plan_fault = corrupted, kind
            plan = "".join(self._rename_step(s) + "\n" for s in steps)
            self.draft_plan = plan
        return Draft(domain, problem, plan)

    def render(self) -> tuple[str, str]:
        # The same task with the same faults renders the same text (a fault left unfixed, the
        # clean task once all are fixed), in this episode and in others run by this process.
        key = (self.task.gold_domain, self.task.gold_problem, repr(self.faults), tuple(sorted(self.rename.items())))
        text = _RENDERED.get(key)
        if text is None:
            text = render(self.gold_domain, self.gold_problem, self.faults, self.rename)
            if len(_RENDERED) >= _RENDERED_MAX:
                _RENDERED.pop(next(iter(_RENDERED)))
            _RENDERED[key] = text
        return text

    def _rename_step(self, step: str) -> str:
        name, *args = step.strip("()").split()
        return "(" + " ".join(self.rename.get(t.lower(), t) for t in (name, *args)) + ")"

    @property
    def name_map(self) -> dict[str, str]:
        """Loop name -> gold name, for the oracle."""
        return {v: k for k, v in self.rename.items()}

    def active_fault_kinds(self) -> list[str]:
        """For tests and analysis only; policies never see this."""
        return [f.kind for f in self.faults]

    # ------------------------------------------------------------ fork

    def fork(self, resample: int | None = None) -> SimWorld:
        """An independent copy at this point: the same faults, hint and random stream, so the copy
        and the original answer the same calls the same way. The task, config and parsed gold
        PDDL are shared (never changed); the fault list and the random stream are copied.

        `resample=k`: the copy's calls are fresh samples instead (a real LLM asked again answers
        anew): its stream is seeded from the current one and k, so branch k of a search is the same
        sample whenever it is taken from the same point, and other branches are other samples."""
        twin = copy.copy(self)
        twin.rng = random.Random()
        twin.rng.setstate(self.rng.getstate())
        if resample is not None:
            twin.rng = random.Random(f"resample|{twin.rng.getrandbits(64)}|{resample}")
        twin.faults = list(self.faults)  # Fault objects are never changed, only added and removed
        return twin

    def activate(self) -> None:
        """Make this world the one a simulated prompted orchestrator in this asyncio task sees."""
        _CURRENT_WORLD.set(self)

    # ------------------------------------------------------------ acceptance check

    def check_acceptance(self, state: EpisodeState) -> AcceptanceVerdict:
        """An independent LLM check of the accepted PDDL against the task's words (one call).

        It flags a PDDL that still carries a fault with probability check_detect_prob, naming the
        agents that repair that fault's class, and flags a faithful PDDL with probability
        check_false_alarm_prob (then naming the repairers of a random fault class of meaning, not
        of syntax)."""
        cfg = self.config
        if self.faults:
            flagged = self.rng.random() < cfg.check_detect_prob
            kind = min(self.faults, key=lambda f: list(CATALOG).index(f.kind)).kind
        else:  # a false alarm names a fault of meaning (the PDDL parses: the validator accepted it)
            flagged = self.rng.random() < cfg.check_false_alarm_prob
            kind = self.rng.choice([k for k in PDDL_FAULTS if CATALOG[k].target != "text"])
        message = f"the PDDL differs from the task: {CATALOG[kind].description}" if flagged else \
            "the PDDL matches the task's words"
        outcome = self._account(state, AgentOutcome(state.domain, state.problem, message=message), 200)
        suspects = CATALOG[kind].repaired_by if flagged else ()
        return AcceptanceVerdict(passed=not flagged, suspects=tuple(suspects), outcome=outcome)

    # ------------------------------------------------------------ agents

    def apply_llm_agent(self, agent_id: int, state: EpisodeState, *, dynamic_profile: str | None = None
                        ) -> AgentOutcome:
        if agent_id == AgentId.NATURAL_LANGUAGE:
            text = render_benchmark_answer(self.task, state.plan, self.name_map) or render_natural_language(state.plan)
            return self._account(state, AgentOutcome(state.domain, state.problem, natural_language=text,
                                                     message="rendered the plan as instructions"), len(text))
        if agent_id == AgentId.EMERGENCY:
            self.faults = self._sample_faults(self.config.emergency_fault_count_weights)
            domain, problem = self.render()
            return self._finish(state, domain, problem, "wrote a fresh domain and problem")
        if agent_id == AgentId.EMERGENCY_SOLUTION:
            self.hint = True
            outline = render_natural_language(self.task.gold_plan or "") or "Work towards the goal step by step."
            out = AgentOutcome(state.domain, state.problem, proposed_solution=outline,
                               message="wrote a solution outline for later agents")
            return self._account(state, out, len(outline))

        bonus = self.config.hint_bonus if self.hint else 0.0
        self.hint = False
        repaired = self._try_repair(agent_id, bonus)
        if repaired is not None:
            msg = f"fixed: {CATALOG[repaired.kind].description}"
            if self.rng.random() < self.config.side_effect_prob:
                self._inject_any()
                msg += " (and changed something else)"
            domain, problem = self.render()
            return self._finish(state, domain, problem, msg)
        if agent_id in GENERALIST_IDS and not self.faults and self.rng.random() < self.config.generalist_rewrite_prob:
            # nothing wrong in the PDDL: the agent rewrites it anyway, which makes the loop replan
            domain, problem = self.render()
            problem = _reorder_init(problem, self.rng)
            return self._finish(state, domain, problem, "rewrote the problem file (no inconsistency found)")
        if self.rng.random() < self.config.idle_fault_prob:
            self._inject_any()
            domain, problem = self.render()
            return self._finish(state, domain, problem, "made a change that was not needed")
        return self._finish(state, state.domain, state.problem, "found nothing to change")

    def _try_repair(self, agent_id: int, bonus: float) -> Fault | None:
        cfg = self.config
        candidates: list[tuple[Fault, float]] = []
        for fault in self.faults:
            fc = CATALOG[fault.kind]
            if agent_id == AgentId.DYNAMIC:
                prob = cfg.dynamic_repair_prob
            elif fc.repaired_by and fc.repaired_by[0] == agent_id:
                prob = cfg.repair_prob
            elif agent_id in fc.repaired_by or agent_id in GENERALIST_IDS:
                prob = cfg.secondary_repair_prob
            else:
                continue
            prob = min(1.0, prob + bonus)
            if self.size_excess > 0:
                prob *= math.exp(-cfg.size_repair_decay * self.size_excess)
            candidates.append((fault, prob))
        if not candidates:
            return None
        # the fault the solvers report first (catalog order: syntax, domain, problem) is fixed first
        order = list(CATALOG)
        fault, prob = min(candidates, key=lambda c: order.index(c[0].kind))
        if self.rng.random() >= prob:
            return None
        self.faults.remove(fault)
        return fault

    def _inject_any(self) -> None:
        kinds = [k for k in PDDL_FAULTS if k not in {f.kind for f in self.faults}]
        self.rng.shuffle(kinds)
        for kind in kinds:
            fault = self._make_fault(kind)
            if fault is not None:
                self.faults.append(fault)
                return

    def _finish(self, state: EpisodeState, domain: str, problem: str, message: str) -> AgentOutcome:
        out = AgentOutcome(domain, problem, message=message)
        return self._account(state, out, len(domain) + len(problem))

    def _account(self, state: EpisodeState, out: AgentOutcome, output_chars: int) -> AgentOutcome:
        cfg = self.config
        prompt_chars = len(state.task_description) + len(state.domain) + len(state.problem) + len(state.plan) \
            + len(state.validator_errors) + len(state.planner_log)
        tokens_in = cfg.prompt_base_tokens + prompt_chars // 4
        reasoning = int(cfg.reasoning_tokens_median * math.exp(self.rng.gauss(0.0, cfg.reasoning_tokens_sigma)))
        tokens_out = output_chars // 4 + reasoning
        price_in, price_out = cfg.prices.get(cfg.model, (0.0, 0.0))
        out.llm_calls = 1
        out.tokens_in = tokens_in
        out.tokens_out = tokens_out
        out.cost_usd = (tokens_in * price_in + tokens_out * price_out) / 1e6
        out.latency_ms = cfg.latency_median_ms * math.exp(self.rng.gauss(0.0, cfg.latency_sigma)) \
            * (0.5 + tokens_out / 2000.0)
        return out

    def wall_delay_s(self, outcome: AgentOutcome) -> float:
        """How long the simulated call really waits (scaled down so CI stays fast)."""
        return outcome.latency_ms / 1000.0 * self.config.latency_scale

    async def wait(self, outcome: AgentOutcome, state: EpisodeState) -> AgentOutcome:
        """Spend the simulated call's time, drawing on the job's LLM budget like a real call."""
        from rollout.llm.budget import llm_gate

        tokens = outcome.tokens_in + outcome.tokens_out
        if self.transport is None:
            async with llm_gate().call(tokens) as call:
                call.tokens = tokens
                await asyncio.sleep(self.wall_delay_s(outcome))
            return outcome
        # A prompt of the simulated call's size, so the endpoint counts tokens as it would.
        messages = [{"role": "user", "content": "x" * max(0, outcome.tokens_in * 4 - 16)}]
        sim = {"latency_ms": outcome.latency_ms * self.config.latency_scale,
               "prompt_tokens": outcome.tokens_in, "completion_tokens": outcome.tokens_out}
        # An endpoint failure past the client's retries (LLMError) is an infrastructure failure
        # (rollout/core/infra.py): it ends the episode as one, it is not a failed step.
        await self.transport.chat(messages, purpose="sim", extra_body={"halo_sim": sim})
        return outcome


class SimWorldMissing(BackendMisconfigured):
    """Something that only works inside the simulated agent world was used outside it."""


def current_world() -> SimWorld | None:
    """The simulated world of the episode running in this asyncio task, if any."""
    return _CURRENT_WORLD.get()


def _reserved_names(domain: list) -> set[str]:
    out: set[str] = set()
    preds = section(domain, ":predicates")
    for p in (preds or [])[1:]:
        if isinstance(p, list) and p:
            out.add(str(p[0]).lower())
    types = section(domain, ":types")
    out.update(t.lower() for t, _ in typed_list((types or [])[1:]))
    consts = section(domain, ":constants")
    out.update(c.lower() for c, _ in typed_list((consts or [])[1:]))
    return out


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (Knuth's product of uniforms; the means here are a few units)."""
    limit, k, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        k += 1
        product *= rng.random()
    return k


def _reorder_init(problem_text: str, rng: random.Random) -> str:
    try:
        problem = parse(problem_text)
    except SExprError:
        return problem_text
    shuffle_init(problem, rng)
    return to_text(problem) + "\n"


def render_benchmark_answer(task: Task, plan_text: str, name_map: dict[str, str]) -> str:
    """A task with a benchmark's answer format (Natural Plan): the plan written in that format."""
    if not task.gold_answer or not plan_text.strip():
        return ""
    from rollout.loop.oracle import gold_names, map_plan
    from rollout.tasks.natural_plan.answers import render_answer

    try:
        return render_answer(task.gold_answer, map_plan(plan_text, gold_names(task), name_map))
    except ValueError:
        return ""


def render_natural_language(plan_text: str) -> str:
    lines = []
    for i, line in enumerate((s.strip() for s in plan_text.splitlines() if s.strip().startswith("(")), 1):
        name, *args = line.strip("()").split()
        verb = name.replace("-", " ").replace("_", " ")
        lines.append(f"{i}. {verb.capitalize()} {', '.join(args)}.".replace(" .", "."))
    return "\n".join(lines)


__all__ = ["AcceptanceVerdict", "Draft", "SimConfig", "SimWorld", "SimWorldMissing", "agent_name", "current_world",
           "render_natural_language"]
