"""The HALO comparison end to end, in the simulated agent world (benchmarks/halo_pipeline.py).

Stages, as in the paper's method: the simulated prompted teacher runs episodes on the training
tasks -> the verifier filter -> augmentation -> (the LLM-as-judge stage, skipped: it needs an
endpoint) -> the fast policy (and optionally a short SmolLM2 LoRA run) -> evaluation on
held-out tasks against the teacher, rules+random and the majority class, per benchmark family.
Then the ablations (filter, rules layer, augmentation) and the cross-domain hold-out.

The baseline row ("prompted teacher", `baseline`, default `teacher:model=sim`) is the paper's
prompted orchestrator: one LLM call per refinement decision, the full state in its prompt, no
hand-written rules layer in front of it. The training data come from `teacher` (default
`rules+teacher:model=sim`): the same prompted model behind the free rules layer, as the paper's
rollouts mark rule steps `is_hardcoded` and drop them from the supervised set; that policy is
kept as an extra row ("rules+teacher"). Must-show 1 is judged against the baseline row.

Costs: the teacher's orchestration cost is the API price of its own calls (its chat backend's
ledger); a trained policy's is its measured decision latency times a hardware price per hour.
Every figure here is simulated (llm_backend=sim); the paper's real-LLM figures are separate
rows labelled as published.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rollout.core.agent_table import AGENT_TABLE
from rollout.core.decision import Policy
from rollout.core.trajectory import EpisodeRecord
from rollout.loop.report import refinement_steps
from rollout.tasks.base import Task
from solvers.errors import InputError
from train.targets import mean_se

FAMILY_ORDER = ("planbench", "natural_plan", "classical", "temporal")
# domains kept out of training for the cross-domain table: two PlanBench-style, two classical
DEFAULT_HOLDOUT_DOMAINS = ("planbench/mystery_blocksworld", "planbench/obfuscated_deceptive_logistics",
                           "classical/childsnack", "classical/hanoi")
LLM_LABEL = "LLM policy (SmolLM2 LoRA)"
LLM_BASELINE_LABEL = "prompted teacher (LLM policy's tasks)"
_LLM_AGENTS = frozenset(a.agent_id for a in AGENT_TABLE if a.kind == "llm")

# The published results (docs/architecture.md): success %, LLM calls per episode, cost per task
# (USD); None: not published.
PUBLISHED: dict[str, list[tuple[str, float, float | None, float | None]]] = {
    "planbench": [("GPT-5-mini prompted", 91.6, 4.8, 0.18), ("Gemini-3-Flash prompted", 97.8, 3.7, 0.06),
                  ("trained policy", 94.9, 2.2, 0.004)],
    "natural_plan": [("GPT-5-mini prompted", 51.5, None, None), ("Gemini-3-Flash prompted", 91.7, None, None),
                     ("trained policy", 88.8, None, None)],
    "classical": [("GPT-5-mini prompted", 93.0, None, None), ("Gemini-3-Flash prompted", 93.0, None, None),
                  ("trained policy", 95.8, None, None)],
}


Log = Callable[[str], object]  # where the stages say what they do (print by default)


class PipelineError(InputError, ValueError):
    pass


@dataclass
class PipelineConfig:
    out: str
    tasks: str = "planbench:all:25,ipc:bundled"
    teacher: str = "rules+teacher:model=sim"  # generates the training data
    baseline: str = "teacher:model=sim"  # the prompted orchestrator the trained policy is compared with
    stronger: str = "teacher:model=sim,profile=stronger"  # the paper's second prompted row ("" leaves it out)
    vanilla: bool = True  # the vanilla-LLM baseline row (rollout/sim/vanilla.py)
    dynamic_ablation: bool = True  # the fast policy escalating repeats to the dynamic agent (a Table-2 row)
    train_seeds: int = 6  # teacher episodes per training task
    # episodes per held-out task and policy: 6 x 39 held-out tasks = 234 episodes, a standard error
    # of about 2 points on an oracle rate near 90% (78 episodes could not tell 2 points apart)
    eval_seeds: int = 6
    # episodes per task and policy in the cross-domain table; its in-distribution side is the held-out
    # split of the other domains (21 PlanBench tasks at the default size), so it needs the seeds
    cross_domain_seeds: int = 6
    # The cross-domain verdict pairs two policies on the held-out domains' few held-out tasks, and they
    # agree on most episodes, so a handful of discordant pairs decides it. Its seeds are raised per family
    # until it rests on at least this many pairs (0: cross_domain_seeds, as the table's other columns).
    cross_domain_min_pairs: int = 400
    # The Table-2 verdicts are non-inferiority bounds with 2- and 3-point margins; on a family's held-out
    # tasks x eval_seeds pairs the paired SE can be wide enough that a policy exactly as good as the
    # teacher fails them (docs/train.md). The trained policy and the two prompted teachers run on more
    # seeds per family until each family's verdicts rest on at least this many pairs (0: eval_seeds).
    table2_min_pairs: int = 1000
    held_out_fraction: float = 0.3
    holdout_domains: tuple[str, ...] = DEFAULT_HOLDOUT_DOMAINS
    hardware_usd_per_hour: float = 1.2  # what the trained policy's CPU/GPU costs per hour
    concurrency: int = 16
    augment_copies: int = 1
    # drop steps whose agent changed nothing, so a label is a decision that moved the episode (the
    # prompted teacher's systematic mistakes are mostly such wasted calls); ablated as "idle steps kept"
    drop_idle: bool = True
    # the step-level verifier filter for the main policy: keep only steps after which the validator
    # shows progress (train/examples.progress_step); off by default, ablated as its own row
    progress_only: bool = False
    # hindsight relabelling (train/examples.hindsight_labels): a step after which the validator shows no
    # progress is labelled with the agent that later made progress from the same verdict; off by default
    # (measured worse, docs/results/2026-12-03-worlds.md), ablated as its own row
    hindsight: bool = False
    # the fast policy's repeat limit (HashedLinearPolicy.tried_out): an agent already run this many times
    # in the episode is not chosen again (0: no limit); ablated as its own row
    max_tries: int = 0
    # the fast policy moves on from an agent that already ran with the plan still failing, to the next
    # cause by its learned prior, weighted by how often the teacher's choices left the verdict unchanged
    # (HashedLinearPolicy.next_ranked, fast_policy.retry_discount_from); ablated as its own row
    next_ranked: bool = True
    retry_prior: str = "fresh"  # the next-ranked move's prior (HashedLinearPolicy.retry_prior): fresh | model
    # DAgger-style aggregation (train/dagger.py): rounds of the fast policy running on the training tasks
    # (train_seeds fresh seeds each), the teacher labelling each model-decided state, retraining on the
    # union; 0: off. The policy without it is its own row ("fast policy without DAgger").
    dagger_rounds: int = 2
    dagger_check: str = "progress"  # which labels join: progress (the label's agent moved the verdict) | none (all)
    dagger_beta: float = 0.0  # P(the teacher's label runs instead of the student's choice), per state
    dagger_seeds: int = 0  # student episodes per training task and round (0: train_seeds)
    # expert iteration from the verifier after DAgger (train/rl_exit.py): the verifier-guided search with
    # the policy as its prior runs exit_group episodes per training task, the policy is refitted on the
    # accepted paths; 0: off. The policy before it is its own row ("fast policy without expert iteration").
    exit_iterations: int = 1
    exit_group: int = 2
    verify_augment: bool = True
    ablations: bool = True
    cross_domain: bool = True
    llm_policy: bool = False  # a short SmolLM2-135M LoRA run on CPU, evaluated in episodes
    llm_steps: int = 30
    llm_max_length: int = 512
    llm_eval_tasks: int = 0  # 0: all held-out tasks; the LLM policy's episodes are slow on CPU
    seed: int = 0
    llm: str = "sim"  # the simulated world every episode runs in ("sim:world=FILE": another world file)

    def check(self) -> None:
        if self.train_seeds < 1 or self.eval_seeds < 1 or self.cross_domain_seeds < 1:
            raise PipelineError("train_seeds, eval_seeds and cross_domain_seeds must be at least 1")
        if self.cross_domain_min_pairs < 0 or self.table2_min_pairs < 0:
            raise PipelineError(f"cross_domain_min_pairs and table2_min_pairs must be >= 0, got "
                                f"{self.cross_domain_min_pairs} and {self.table2_min_pairs}")
        if not 0.0 < self.held_out_fraction < 1.0:
            raise PipelineError(f"held_out_fraction must be in (0, 1), got {self.held_out_fraction}")
        if self.hardware_usd_per_hour < 0:
            raise PipelineError("hardware_usd_per_hour must be >= 0")
        if self.dagger_seeds < 0:
            raise PipelineError(f"dagger_seeds must be >= 0, got {self.dagger_seeds}")
        if self.exit_iterations < 0 or self.exit_group < 1:
            raise PipelineError(f"exit_iterations must be >= 0 and exit_group >= 1, got {self.exit_iterations} "
                                f"and {self.exit_group}")
        from train.dagger import DaggerError, DaggerSettings

        try:
            DaggerSettings(rounds=self.dagger_rounds, check=self.dagger_check, beta=self.dagger_beta).validate()
        except DaggerError as exc:
            raise PipelineError(str(exc)) from None
        from rollout.sim.spec import SimSpecError, absolute_world_spec, is_sim_spec, sim_config_for

        if not is_sim_spec(self.llm):
            raise PipelineError(f"llm: the pipeline runs in the simulated world (sim[:world=FILE]), got {self.llm!r}")
        self.llm = absolute_world_spec(self.llm)
        try:
            sim_config_for(self.llm)
        except SimSpecError as exc:
            raise PipelineError(str(exc)) from None


REPEAT_LIMIT_ABLATION = 2  # the repeat limit the ablation row tries when the main policy has none


@dataclass
class Row:
    """One line of the comparison table (one policy on one benchmark family)."""

    family: str
    policy: str
    source: str  # "simulated (llm_backend=sim)" or "published real-LLM"
    episodes: int | None
    oracle_success: float | None
    oracle_se: float | None  # binomial standard error of oracle_success
    validator_success: float | None
    avg_steps: float | None
    llm_calls: float | None  # per episode, the orchestrator's own calls included
    orchestrator_calls: float | None  # per episode
    orchestration_cost: float | None  # USD per task: API price (teacher) or latency x hardware (trained)
    total_cost: float | None  # USD per task: orchestration + the agents' simulated LLM calls
    rule_share: float | None
    decision_ms: float | None  # mean non-rule decision latency (the teacher's: simulated API latency)


COLUMNS = ("family", "policy", "source", "episodes", "oracle success", "± SE", "validator success", "avg steps",
           "LLM calls/episode", "orchestrator calls/episode", "orchestration cost/task", "total cost/task",
           "rule decisions", "decision ms")


@dataclass
class RunResult:
    records: list[EpisodeRecord]
    ledger: dict[str, float] | None  # the prompted orchestrator's calls (None: it makes none)


def split_tasks(tasks: list[Task], fraction: float, seed: int = 0) -> tuple[list[Task], list[Task]]:
    """(training tasks, held-out tasks), by a hash of the task ID, at least one held out per domain."""
    held = {t.task_id for t in tasks if zlib.crc32(f"{seed}|{t.task_id}".encode()) % 1000 < fraction * 1000}
    by_domain: dict[str, list[Task]] = {}
    for t in tasks:
        by_domain.setdefault(domain_key(t), []).append(t)
    for group in by_domain.values():
        if len(group) >= 2 and not any(t.task_id in held for t in group):
            held.add(min(group, key=lambda t: zlib.crc32(f"{seed}|{t.task_id}".encode())).task_id)
    return [t for t in tasks if t.task_id not in held], [t for t in tasks if t.task_id in held]


def domain_key(task: Task | EpisodeRecord) -> str:
    return f"{task.family}/{task.domain_name}"


def _inner(policy: Policy) -> Policy:
    return getattr(policy, "inner", policy)


def run_policy(tasks: list[Task], spec: str, seeds: list[int], run_id: str, concurrency: int,
               llm: str = "sim") -> RunResult:
    """Episodes of one policy spec over tasks x seeds in one event loop, with its LLM ledger; `llm`
    is the sim spec of the world they run in ("sim", "sim:world=FILE")."""
    from rollout.loop.episode import EpisodeConfig, run_episode
    from rollout.policies import make_policy
    from rollout.sim.spec import sim_config_for

    sim = sim_config_for(llm)
    policy = make_policy(spec, seed=seeds[0])

    async def go() -> list[EpisodeRecord]:
        sem = asyncio.Semaphore(concurrency)

        async def one(task: Task, seed: int) -> EpisodeRecord:
            async with sem:
                return await run_episode(task, policy, EpisodeConfig(seed=seed, run_id=run_id, sim=sim))

        return list(await asyncio.gather(*[one(t, s) for t in tasks for s in seeds]))

    try:
        records = asyncio.run(go())
    finally:
        policy.close()
    chat = getattr(_inner(policy), "chat", None)
    ledger = None
    if chat is not None and hasattr(chat, "records"):
        recs = chat.records
        ledger = {"calls": float(len(recs)), "cost_usd": sum(r.cost_usd for r in recs),
                  "latency_ms": sum(r.latency_ms for r in recs)}
    return RunResult(records, ledger)


def calls_by_source(records: list[EpisodeRecord]) -> dict[str, float]:
    """Where an episode's LLM calls come from: the orchestrator's own, the LLM agents the rules
    layer chose, the LLM agents the policy chose, the final natural-language rendering."""
    from rollout.core.agent_table import AgentId

    out = {"orchestrator": 0.0, "agents chosen by rules": 0.0, "agents chosen by the policy": 0.0,
           "natural-language rendering": 0.0}
    for r in records:
        for s in r.steps:
            agent_calls = 1 if s.llm_calls and s.agent_id in _LLM_AGENTS | {AgentId.NATURAL_LANGUAGE} else 0
            if s.agent_id == AgentId.NATURAL_LANGUAGE and s.is_hardcoded:
                out["natural-language rendering"] += agent_calls
            elif s.is_hardcoded:
                out["agents chosen by rules"] += agent_calls
            else:
                out["agents chosen by the policy"] += agent_calls
            out["orchestrator"] += s.llm_calls - agent_calls
    return {k: round(v / max(1, len(records)), 2) for k, v in out.items()}


def summarize_run(family: str, label: str, result: RunResult, usd_per_hour: float) -> Row:
    recs = result.records
    if not recs:
        raise PipelineError(f"no episodes for {label} on {family}")
    n = len(recs)
    graded = [r.success_oracle for r in recs if r.success_oracle is not None]
    decisions = [s for r in recs for s in r.steps[:refinement_steps(r)]]
    non_rule = [s for s in decisions if not s.is_hardcoded]
    if result.ledger is not None:
        calls = result.ledger["calls"]
        orch_calls, orch_cost = calls / n, result.ledger["cost_usd"] / n
        decision_ms = result.ledger["latency_ms"] / calls if calls else 0.0
    else:
        busy_ms = sum(s.decision_latency_ms for s in non_rule)
        orch_calls, orch_cost = 0.0, busy_ms / 3.6e6 * usd_per_hour / n
        decision_ms = busy_ms / len(non_rule) if non_rule else 0.0
    oracle = sum(graded) / len(graded) if graded else None
    se = math.sqrt(oracle * (1 - oracle) / len(graded)) if oracle is not None else None
    return Row(family, label, "simulated (llm_backend=sim)", n, oracle, se,
               sum(r.success_validator for r in recs) / n, sum(refinement_steps(r) for r in recs) / n,
               sum(r.total_llm_calls for r in recs) / n, orch_calls, orch_cost,
               sum(r.total_cost_usd for r in recs) / n + (0.0 if result.ledger else orch_cost),
               sum(s.is_hardcoded for s in decisions) / len(decisions) if decisions else 0.0, decision_ms)


def paired_difference(a: list[EpisodeRecord], b: list[EpisodeRecord]) -> dict[str, float]:
    """Oracle success of `a` minus `b` over the episodes both ran (same task, same seed), in points,
    with the paired standard error (the episodes share their simulated world, so pairing removes
    the task-to-task spread)."""
    ok_b = {(r.task_id, r.seed): r.success_oracle is True for r in b}
    diffs = [float(r.success_oracle is True) - ok_b[(r.task_id, r.seed)] for r in a if (r.task_id, r.seed) in ok_b]
    n = len(diffs)
    mean, se = mean_se(diffs)
    if n < 2:
        return {"episodes": float(n), "difference": 100 * sum(diffs) / max(1, n), "se": se}
    return {"episodes": float(n), "difference": round(100 * mean, 2), "se": round(100 * se, 2),
            "better": float(sum(d > 0 for d in diffs)), "worse": float(sum(d < 0 for d in diffs))}


def published_rows(families: list[str]) -> list[Row]:
    out = []
    for fam in families:
        for label, success, calls, cost in PUBLISHED.get(fam, []):
            out.append(Row(fam, label, "published real-LLM", None, success / 100, None, None, None, calls, None, None,
                           cost, 1 / 3 if fam == "planbench" else None, None))
    return out


def _fmt(value: float | int | str | None, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{100 * float(value):.1f}%"
    if kind == "usd":
        v = float(value)
        return f"${v:.2e}" if 0 < v < 1e-4 else f"${v:.4f}"
    if kind == "f2":
        return f"{float(value):.2f}"
    return str(value)


_KINDS = ("s", "s", "s", "s", "pct", "pct", "pct", "f2", "f2", "f2", "usd", "usd", "pct", "f2")


def format_table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        values = (r.family, r.policy, r.source, r.episodes, r.oracle_success, r.oracle_se, r.validator_success,
                  r.avg_steps,
                  r.llm_calls, r.orchestrator_calls, r.orchestration_cost, r.total_cost, r.rule_share,
                  r.decision_ms)
        lines.append("| " + " | ".join(_fmt(v, k) for v, k in zip(values, _KINDS, strict=True)) + " |")
    return "\n".join(lines)


@dataclass
class PipelineResult:
    config: dict
    stages: dict[str, object] = field(default_factory=dict)
    comparison: list[Row] = field(default_factory=list)
    ablations: list[Row] = field(default_factory=list)
    cross_domain: list[dict] = field(default_factory=list)
    targets: list[tuple[str, bool, str]] = field(default_factory=list)  # (target, met, figures)
    families: dict[str, dict[str, dict]] = field(default_factory=dict)  # Table 2: family -> policy -> row
    seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data, indent=1, default=str)


def _families(tasks: list[Task]) -> list[str]:
    present = {t.family for t in tasks}
    return [f for f in FAMILY_ORDER if f in present] + sorted(present - set(FAMILY_ORDER))


def _train_variant(episodes: list[EpisodeRecord], out: Path, name: str, *, check: str, augment: int,
                   cfg: PipelineConfig, tokenizer_dir: str = "", drop_idle: bool | None = None,
                   progress_only: bool | None = None, hindsight: bool | None = None,
                   max_tries: int | None = None, next_ranked: bool | None = None) -> tuple[Path, dict[str, int]]:
    from train.dataset import BuildConfig, build_examples, write_dataset
    from train.fast_policy import retry_discount_from, train_fast_policy_dir

    build = BuildConfig(check=check, augment_copies=augment, verify_augment=cfg.verify_augment, seed=cfg.seed,
                        tokenizer_dir=tokenizer_dir, drop_idle=cfg.drop_idle if drop_idle is None else drop_idle,
                        progress_only=cfg.progress_only if progress_only is None else progress_only,
                        hindsight=cfg.hindsight if hindsight is None else hindsight)
    examples, stages = build_examples(episodes, build)
    data_dir = out / "data" / name
    write_dataset(examples, stages, data_dir, config=build, sources=sorted({e.run_id for e in episodes}))
    model_dir = out / "models" / name
    if not tokenizer_dir:
        limit = cfg.max_tries if max_tries is None else max_tries
        moving = cfg.next_ranked if next_ranked is None else next_ranked
        discount = retry_discount_from(episodes, check) if moving else 0.0
        train_fast_policy_dir(data_dir, model_dir, name=name, max_tries=limit, retry_discount=discount,
                              retry_prior=cfg.retry_prior)
    return (data_dir if tokenizer_dir else model_dir), stages


def _evaluate(result: PipelineResult, families: list[str], tasks: list[Task], label: str, spec: str,
              seeds: list[int], cfg: PipelineConfig, rows: list[Row], min_pairs: int = 0) -> dict[str, RunResult]:
    """`label`'s episodes per task family on `tasks` x `seeds`, the seeds continued per Table-2 family
    until it has `min_pairs` episodes."""
    from train.table2 import table2_family

    t0 = time.perf_counter()
    runs: dict[str, RunResult] = {}
    sizes = Counter(table2_family(t.family) for t in tasks)
    for fam in families:
        fam_tasks = [t for t in tasks if t.family == fam]
        if not fam_tasks:
            continue
        fam_seeds = verdict_seeds(seeds, sizes[table2_family(fam)], min_pairs)
        runs[fam] = run_policy(fam_tasks, spec, fam_seeds, f"pipeline-eval-{label}", cfg.concurrency, cfg.llm)
        rows.append(summarize_run(fam, label, runs[fam], cfg.hardware_usd_per_hour))
    if len(runs) > 1:
        merged = RunResult([r for run in runs.values() for r in run.records], None)
        ledgers = [run.ledger for run in runs.values() if run.ledger is not None]
        if ledgers:
            merged.ledger = {k: sum(led[k] for led in ledgers) for k in ledgers[0]}
        rows.append(summarize_run("all", label, merged, cfg.hardware_usd_per_hour))
    result.seconds[f"eval {label}"] = round(time.perf_counter() - t0, 1)
    return runs


@dataclass
class TaskSplit:
    """Stage 0: the tasks with gold PDDL, split into training and held-out tasks, and the seeds."""

    tasks: list[Task]
    train: list[Task]
    held_out: list[Task]
    families: list[str]
    train_seeds: list[int]
    eval_seeds: list[int]


@dataclass
class FastPolicies:
    """Stage 2: the fast policy of each dataset variant ("fast" is the main one)."""

    models: dict[str, Path]

    @property
    def main(self) -> Path:
        return self.models["fast"]


@dataclass
class Evaluation:
    """Stage 3: every policy's episodes on the held-out tasks, by label and family."""

    specs: list[tuple[str, str]]  # (label, policy spec), in table order
    runs: dict[str, dict[str, RunResult]]  # label -> family -> run
    rows: list[Row]

    def records(self, label: str) -> list[EpisodeRecord]:
        return [r for run in self.runs[label].values() for r in run.records]

    def merged(self) -> dict[str, list[EpisodeRecord]]:
        return {label: self.records(label) for label in self.runs}


@dataclass
class Ablations:
    """Stage 4: the fast policy's variants on the held-out tasks, each against the main one."""

    rows: list[Row]
    paired: dict[str, dict[str, float]]  # label -> main minus it


def run_pipeline(cfg: PipelineConfig, log: Log = print) -> PipelineResult:
    """The stages in order; every stage's figures land in the result (and OUT/pipeline.json)."""
    cfg.check()
    out = Path(cfg.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    result = PipelineResult(config=asdict(cfg))
    split = split_stage(cfg, result)
    episodes = teacher_stage(cfg, split, out, result, log)
    fast = fast_policy_stage(cfg, episodes, out, result, log)
    if cfg.dagger_rounds:
        fast = dagger_stage(cfg, split, fast, out, result, log)
    if cfg.exit_iterations:
        fast = exit_stage(cfg, split, fast, out, result, log)
    evaluation = evaluation_stage(cfg, split, episodes, fast, out, result, log)
    if cfg.ablations:
        ablations = ablation_stage(cfg, split, fast, evaluation, result, log)
        result.ablations = ablations.rows
        result.stages[ABLATION_PAIRED_KEY] = ablations.paired
    if cfg.cross_domain:
        log(f"[5/6] cross-domain hold-out: training without {', '.join(cfg.holdout_domains)}")
        xd_seeds = [cfg.seed + 20_000 + k for k in range(cfg.cross_domain_seeds)]
        result.cross_domain = _cross_domain(episodes, split.tasks, split.held_out, xd_seeds, out, cfg, result,
                                            fast.models["fast-supervised"])
    log("[6/6] targets")
    from train.table2 import TABLE2_PAIRED_KEY, table2_targets

    result.targets = check_targets(result) + table2_targets(result.families, result.stages.get(TABLE2_PAIRED_KEY, {}))
    (out / "pipeline.json").write_text(result.to_json())
    return result


def split_stage(cfg: PipelineConfig, result: PipelineResult) -> TaskSplit:
    from rollout.sim.spec import sim_config_for
    from rollout.tasks.loaders import load_tasks

    sim = sim_config_for(cfg.llm)
    result.stages["simulated world"] = {"name": sim.world_name, "hash": sim.world_hash, "spec": cfg.llm}
    tasks = [t for t in load_tasks(cfg.tasks) if t.gold_domain and t.gold_problem]
    if not tasks:
        raise PipelineError(f"no task with gold PDDL in {cfg.tasks!r}")
    train_tasks, eval_tasks = split_tasks(tasks, cfg.held_out_fraction, cfg.seed)
    if not train_tasks or not eval_tasks:
        raise PipelineError(f"{len(tasks)} tasks cannot be split into training and held-out tasks")
    known = {domain_key(t) for t in tasks}
    missing = set(cfg.holdout_domains) - known if cfg.cross_domain else set()
    if missing:
        raise PipelineError(f"hold-out domain(s) {', '.join(sorted(missing))} not in the tasks "
                            f"(have: {', '.join(sorted(known))})")
    result.stages["tasks"] = {"all": len(tasks), "train": len(train_tasks), "held out": len(eval_tasks)}
    return TaskSplit(tasks, train_tasks, eval_tasks, _families(tasks),
                     train_seeds=[cfg.seed + 10_000 + k for k in range(cfg.train_seeds)],
                     eval_seeds=[cfg.seed + 20_000 + k for k in range(cfg.eval_seeds)])


def teacher_stage(cfg: PipelineConfig, split: TaskSplit, out: Path, result: PipelineResult,
                  log: Log) -> list[EpisodeRecord]:
    """Stage 1: the teacher's episodes on the training tasks, also written to OUT/store."""
    from rollout.store import TrajectoryStore

    log(f"[1/6] teacher rollouts: {len(split.train)} tasks x {len(split.train_seeds)} seeds with {cfg.teacher}")
    t0 = time.perf_counter()
    teacher_run = run_policy(split.train, cfg.teacher, split.train_seeds, "pipeline-teacher", cfg.concurrency,
                             cfg.llm)
    episodes = teacher_run.records
    result.seconds["teacher rollouts"] = round(time.perf_counter() - t0, 1)
    TrajectoryStore(str(out / "store")).write_episodes("pipeline-teacher", episodes)
    result.stages["teacher episodes"] = {
        "episodes": len(episodes), "validator-accepted": sum(e.success_validator for e in episodes),
        "oracle-correct": sum(e.success_oracle is True for e in episodes),
        "teacher API cost (USD)": round(teacher_run.ledger["cost_usd"], 4) if teacher_run.ledger else 0.0}
    return episodes


def fast_policy_stage(cfg: PipelineConfig, episodes: list[EpisodeRecord], out: Path, result: PipelineResult,
                      log: Log) -> FastPolicies:
    log("[2/6] verifier filter + augmentation -> fast policy; LLM-as-judge skipped (no endpoint configured)")
    t0 = time.perf_counter()
    aug, idle, prog = cfg.augment_copies, cfg.drop_idle, cfg.progress_only
    variants = {"fast": ("validator", aug, idle, prog)}
    if cfg.ablations:
        variants |= {"fast-unfiltered": ("none", aug, idle, prog),
                     "fast-oracle": ("oracle", aug, idle, prog),
                     "fast-progress-toggled": ("validator", aug, idle, not prog),
                     "fast-no-augment": ("validator", 0, idle, prog),
                     "fast-idle-toggled": ("validator", aug, not idle, prog)}
    toggled = {"fast-hindsight-toggled": {"hindsight": not cfg.hindsight},
               "fast-repeat-limit-toggled": {"max_tries": 0 if cfg.max_tries else REPEAT_LIMIT_ABLATION},
               "fast-next-ranked-toggled": {"next_ranked": not cfg.next_ranked}}
    models: dict[str, Path] = {}
    for name, (check, augment, drop_idle, progress_only) in variants.items():
        models[name], stages = _train_variant(episodes, out, name, check=check, augment=augment, cfg=cfg,
                                              drop_idle=drop_idle, progress_only=progress_only)
        result.stages[f"dataset {name}"] = stages
    for name, setting in toggled.items() if cfg.ablations else ():
        models[name], result.stages[f"dataset {name}"] = _train_variant(episodes, out, name, check="validator",
                                                                        augment=aug, cfg=cfg, **setting)
    result.stages["judge"] = "skipped: no LLM-as-judge endpoint configured"
    result.seconds["datasets + fast policies"] = round(time.perf_counter() - t0, 1)
    models["fast-supervised"] = models["fast"]  # the cross-domain table's reference recipe, whatever follows
    return FastPolicies(models)


NO_DAGGER_LABEL = "fast policy without DAgger"


def dagger_stage(cfg: PipelineConfig, split: TaskSplit, fast: FastPolicies, out: Path, result: PipelineResult,
                 log: Log) -> FastPolicies:
    """Stage 2b: DAgger rounds from the main fast policy (train/dagger.py); the result is the main policy,
    the one before it is kept for its own row."""
    from train.dagger import DaggerSettings, run_dagger

    t0 = time.perf_counter()
    settings = DaggerSettings(rounds=cfg.dagger_rounds, check=cfg.dagger_check, beta=cfg.dagger_beta,
                              teacher=cfg.teacher, concurrency=cfg.concurrency, llm=cfg.llm, seed=cfg.seed)
    dagger = run_dagger(out / "data" / "fast", fast.main, split.train, cfg.dagger_seeds or cfg.train_seeds,
                        out / "dagger", settings, log=lambda msg: log(f"[2b] {msg}"))
    result.stages["DAgger (teacher labels on the student's states; labelling calls are a data cost)"] = \
        dagger.stages()
    result.seconds["DAgger rounds"] = round(time.perf_counter() - t0, 1)
    return FastPolicies({**fast.models, "fast": dagger.model_dir, "fast-no-dagger": fast.main})


NO_EXIT_LABEL = "fast policy without expert iteration"
EXIT_STAGE_KEY = "expert iteration (search episodes on the training tasks; their calls are a data cost)"


def exit_stage(cfg: PipelineConfig, split: TaskSplit, fast: FastPolicies, out: Path, result: PipelineResult,
               log: Log) -> FastPolicies:
    """Stage 2c: expert iteration from the verifier (train/rl_exit.py) from the main fast policy; the
    result is the main policy, the one before it is kept for its own row."""
    from train.rl_loop import RLSettings, run_rl

    t0 = time.perf_counter()
    log(f"[2c] expert iteration: {cfg.exit_iterations} x {len(split.train)} training tasks x {cfg.exit_group} "
        "search episodes")
    settings = RLSettings(tasks="pipeline training split", iterations=cfg.exit_iterations,
                          tasks_per_iter=len(split.train), group=cfg.exit_group, advantage="exit", seed=cfg.seed,
                          concurrency=cfg.concurrency, llm=cfg.llm)
    model_dir = out / "models" / "fast-exit"
    manifest = run_rl(settings, fast.main, model_dir, log=lambda msg: log(f"[2c] {msg}"), tasks=split.train)
    keys = ("oracle_success", "validator_success", "llm_calls", "episodes", "infra_excluded", "exit_examples")
    result.stages[EXIT_STAGE_KEY] = {k: manifest.metrics.get(f"rl_last_{k}") for k in keys}
    result.seconds["expert iteration"] = round(time.perf_counter() - t0, 1)
    return FastPolicies({**fast.models, "fast": model_dir, "fast-no-exit": fast.main})


def _eval_specs(cfg: PipelineConfig, fast: FastPolicies) -> list[tuple[str, str]]:
    """(label, policy spec) of every row of the comparison, the LLM policy's aside."""
    main = fast.main
    specs = [("fast policy", f"rules+model:{main}"), ("prompted teacher", cfg.baseline)]
    if "fast-no-dagger" in fast.models:
        specs.append((NO_DAGGER_LABEL, f"rules+model:{fast.models['fast-no-dagger']}"))
    if "fast-no-exit" in fast.models:
        specs.append((NO_EXIT_LABEL, f"rules+model:{fast.models['fast-no-exit']}"))
    if cfg.stronger:
        specs.append(("stronger teacher", cfg.stronger))
    if cfg.dynamic_ablation:
        specs.append(("fast policy + dynamic agent", f"rules+dyn:model:{main}"))
    if cfg.teacher != cfg.baseline:
        specs.append(("rules+teacher", cfg.teacher))
    return specs + [("rules+random", "rules+random"), ("majority class", f"rules+majority:{main}")]


def evaluation_stage(cfg: PipelineConfig, split: TaskSplit, episodes: list[EpisodeRecord], fast: FastPolicies,
                     out: Path, result: PipelineResult, log: Log) -> Evaluation:
    """Stage 3 (and 3b, the optional LLM policy): the comparison on the held-out tasks, its paired
    differences and Table 2."""
    from train.table2 import STRONGER, TRAINED, WEAKER, attach_table2

    eval_tasks = split.held_out
    more = f" (the trained policy and the teachers: to {cfg.table2_min_pairs} per family)" \
        if cfg.table2_min_pairs else ""
    log(f"[3/6] evaluation on {len(eval_tasks)} held-out tasks x {len(split.eval_seeds)} seeds{more}")
    specs = _eval_specs(cfg, fast)
    subset = cfg.llm_eval_tasks and cfg.llm_eval_tasks < len(eval_tasks)
    if cfg.llm_policy:
        log("[3b] short SmolLM2-135M LoRA run on CPU")
        llm_dir = _train_llm_policy(episodes, out, cfg, result)
        specs.insert(1, (LLM_LABEL, f"rules+model:{llm_dir}"))
        if subset:  # the LLM policy's episodes are slow on CPU: it runs on a subset, the baseline beside it
            specs.insert(2, (LLM_BASELINE_LABEL, cfg.baseline))
    llm_subset = eval_tasks[:: max(1, len(eval_tasks) // cfg.llm_eval_tasks)][: cfg.llm_eval_tasks] if subset \
        else eval_tasks
    evaluation = Evaluation(specs, {}, [])
    for label, spec in specs:
        tasks = llm_subset if label in (LLM_LABEL, LLM_BASELINE_LABEL) else eval_tasks
        min_pairs = cfg.table2_min_pairs if label in (TRAINED, WEAKER, STRONGER) else 0
        evaluation.runs[label] = _evaluate(result, split.families, tasks, label, spec, split.eval_seeds, cfg,
                                           evaluation.rows, min_pairs)
    result.comparison = evaluation.rows + published_rows(split.families)
    merged = evaluation.merged()
    result.stages["LLM calls per episode by source"] = {label: calls_by_source(recs) for label, recs in merged.items()}
    result.stages[PAIRED_KEY] = {label: paired_difference(merged[label], merged["prompted teacher"])
                                 for label in ("fast policy", LLM_LABEL, NO_DAGGER_LABEL, NO_EXIT_LABEL,
                                               "rules+random", "majority class") if label in merged}
    result.stages[FAST_PAIRED_KEY] = {label: paired_difference(merged[label], merged["fast policy"])
                                      for label in (NO_DAGGER_LABEL, NO_EXIT_LABEL, "rules+random", "majority class")
                                      if label in merged}
    attach_table2(result, dict(specs), merged, eval_tasks, split.eval_seeds, cfg.hardware_usd_per_hour, cfg.vanilla)
    return evaluation


def ablation_stage(cfg: PipelineConfig, split: TaskSplit, fast: FastPolicies, evaluation: Evaluation,
                   result: PipelineResult, log: Log) -> Ablations:
    """Stage 4: filter, rules layer, augmentation; the main row reuses stage 3's episodes."""
    log("[4/6] ablations: filter, rules layer, augmentation")
    models, main_label = fast.models, "validator-filtered (main)"
    ab_specs = [("unfiltered", f"rules+model:{models['fast-unfiltered']}"),
                ("oracle-filtered", f"rules+model:{models['fast-oracle']}"),
                ("no step verifier filter" if cfg.progress_only else "step verifier filter (progress only)",
                 f"rules+model:{models['fast-progress-toggled']}"),
                ("no augmentation", f"rules+model:{models['fast-no-augment']}"),
                ("idle steps kept" if cfg.drop_idle else "idle steps dropped",
                 f"rules+model:{models['fast-idle-toggled']}"),
                ("no hindsight relabelling" if cfg.hindsight else "hindsight relabelling",
                 f"rules+model:{models['fast-hindsight-toggled']}"),
                ("no repeat limit" if cfg.max_tries else f"repeat limit {REPEAT_LIMIT_ABLATION}",
                 f"rules+model:{models['fast-repeat-limit-toggled']}"),
                ("no move to the next-ranked agent" if cfg.next_ranked else "move to the next-ranked agent",
                 f"rules+model:{models['fast-next-ranked-toggled']}"),
                ("no rules layer", f"model:{fast.main}")]
    rows: list[Row] = []
    main_runs = evaluation.runs["fast policy"]
    for fam, run in main_runs.items():
        rows.append(summarize_run(fam, main_label, run, cfg.hardware_usd_per_hour))
    main_records = evaluation.records("fast policy")
    if len(main_runs) > 1:
        rows.append(summarize_run("all", main_label, RunResult(main_records, None), cfg.hardware_usd_per_hour))
    paired: dict[str, dict[str, float]] = {}
    for label, spec in ab_specs:
        runs = _evaluate(result, split.families, split.held_out, label, spec, split.eval_seeds, cfg, rows)
        paired[label] = paired_difference(main_records, [r for run in runs.values() for r in run.records])
    return Ablations(rows, paired)


XD_PAIRED = "trained with the domains minus without (paired)"  # the cross-domain row's verdict figure


def _cross_domain(episodes: list[EpisodeRecord], tasks: list[Task], eval_tasks: list[Task], seeds: list[int],
                  out: Path, cfg: PipelineConfig, result: PipelineResult, seen_model: Path) -> list[dict]:
    """Per Table-2 family, the policy trained without the held-out domains (the stage-2 recipe on the
    other domains' teacher episodes): its success in distribution and on the held-out domains, and,
    the verdict's figure, on the held-out domains' held-out tasks paired with the same recipe trained
    with those domains (`seen_model`), so the domains' own difficulty does not enter the gap."""
    from train.table2 import table2_family

    held = set(cfg.holdout_domains)
    in_domain = [e for e in episodes if domain_key(e) not in held]
    model, stages = _train_variant(in_domain, out, "fast-cross-domain", check="validator",
                                   augment=cfg.augment_copies, cfg=cfg)
    result.stages["dataset fast-cross-domain"] = stages
    spec, rows = f"rules+model:{model}", []
    held_out_ids = {t.task_id for t in eval_tasks}
    # per Table-2 family: the generated classical sets are the classical family's, as in Table 2
    for fam in sorted({table2_family(f) for f in _families(tasks)}):
        ind = [t for t in eval_tasks if table2_family(t.family) == fam and domain_key(t) not in held]
        ood = [t for t in tasks if table2_family(t.family) == fam and domain_key(t) in held]
        if not ind or not ood:
            continue
        unseen = [t for t in ood if t.task_id in held_out_ids]  # no policy trained on these
        teacher_ood = run_policy(ood, cfg.teacher, seeds, "pipeline-xdomain-teacher", cfg.concurrency, cfg.llm).records
        a = run_policy(ind, spec, seeds, "pipeline-xdomain-in", cfg.concurrency, cfg.llm).records
        b = run_policy(ood, spec, seeds, "pipeline-xdomain-out", cfg.concurrency, cfg.llm).records
        pair_seeds = verdict_seeds(seeds, len(unseen), cfg.cross_domain_min_pairs)
        seen = run_policy(unseen, f"rules+model:{seen_model}", pair_seeds, "pipeline-xdomain-seen", cfg.concurrency,
                          cfg.llm).records if unseen else []
        # `b` holds the unseen tasks at `seeds`; only the verdict's further seeds are new episodes
        more = pair_seeds[len(seeds):]
        b_more = run_policy(unseen, spec, more, "pipeline-xdomain-out", cfg.concurrency,
                            cfg.llm).records if unseen and more else []
        rows.append({"family": fam, "held-out domains": ", ".join(sorted({t.domain_name for t in ood})),
                     "in-distribution episodes": len(a), "in-distribution oracle": _oracle(a),
                     "held-out-domain episodes": len(b), "held-out-domain oracle": _oracle(b),
                     "gap (points)": round(100 * (_oracle(a) - _oracle(b)), 1),
                     "teacher on held-out domains": _oracle(teacher_ood),
                     "verdict seeds": len(pair_seeds), XD_PAIRED: paired_difference(seen, b + b_more)})
    return rows


def verdict_seeds(seeds: list[int], tasks: int, min_pairs: int) -> list[int]:
    """`seeds`, continued in the same sequence until `tasks` x seeds reaches `min_pairs`."""
    needed = -(-min_pairs // tasks) if tasks else 0
    return seeds + [seeds[-1] + k for k in range(1, needed - len(seeds) + 1)]


def _oracle(records: list[EpisodeRecord]) -> float:
    graded = [r.success_oracle for r in records if r.success_oracle is not None]
    return sum(graded) / len(graded) if graded else 0.0


def _train_llm_policy(episodes: list[EpisodeRecord], out: Path, cfg: PipelineConfig, result: PipelineResult) -> Path:
    from train.trainer import TrainConfig, train_llm

    t0 = time.perf_counter()
    data_dir, stages = _train_variant(episodes, out, "llm", check="validator", augment=cfg.augment_copies, cfg=cfg,
                                      tokenizer_dir="smollm2")
    model_dir = out / "models" / "llm"
    train_cfg = TrainConfig(data_dir=str(data_dir), base_model="smollm2", out=str(model_dir), max_steps=cfg.llm_steps,
                            warmup_steps=max(1, cfg.llm_steps // 10), lr=3e-4, batch_size=2, grad_accum=1,
                            max_length=cfg.llm_max_length, max_val_examples=32, threads_per_worker=2, seed=cfg.seed)
    import ray

    # our own small in-process Ray: ray.init() would join any cluster another process started here
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        manifest = train_llm(train_cfg)
    finally:
        if started:
            ray.shutdown()
    result.stages["llm policy"] = {k: manifest.metrics.get(k) for k in ("global_step", "val_loss", "val_accuracy")}
    result.seconds["llm policy training"] = round(time.perf_counter() - t0, 1)
    return model_dir


PAIRED_KEY = "oracle success minus the prompted teacher's, same episodes (points, paired SE)"
ABLATION_PAIRED_KEY = "ablations: main minus each, same episodes (points, paired SE)"


# a verdict on fewer episodes than this fails ("too few episodes"), whatever its figures
MIN_EPISODES = 20
FAST_PAIRED_KEY = "oracle success minus the fast policy's, same episodes (points, paired SE)"


def results_table(result: PipelineResult) -> dict[str, dict[str, float | None]]:
    """The named rows the targets read: "<family>/<policy>" (simulated rows), "paired/<label>" (minus
    the prompted teacher), "paired-fast/<label>" (minus the fast policy), "ablation/<label>" (main
    minus it) and "cross-domain/<family>" (in-distribution minus held-out domains, two-sample SE)."""
    table: dict[str, dict[str, float | None]] = {}
    for r in result.comparison:
        if r.source.startswith("sim"):
            table[f"{r.family}/{r.policy}"] = {"oracle": r.oracle_success, "episodes": r.episodes,
                                               "llm_calls": r.llm_calls, "orchestration_cost": r.orchestration_cost}
    for prefix, key in (("paired", PAIRED_KEY), ("paired-fast", FAST_PAIRED_KEY), ("ablation", ABLATION_PAIRED_KEY)):
        for label, diff in (result.stages.get(key) or {}).items():  # type: ignore[union-attr]
            table[f"{prefix}/{label}"] = dict(diff)
    for row in result.cross_domain:
        table[f"cross-domain/{row['family']}"] = dict(row[XD_PAIRED])
    return table


def pipeline_targets(result: PipelineResult) -> list:
    """The issue's targets as typed checks on named rows (train.targets)."""
    from train.targets import DifferenceBound, RatioAtMost

    fam = "all" if any(r.family == "all" for r in result.comparison if r.source.startswith("sim")) else next(
        (r.family for r in result.comparison if r.source.startswith("sim")), "all")
    teacher, n = f"{fam}/prompted teacher", MIN_EPISODES
    trained = [("fast policy", teacher)]
    if result.config.get("llm_policy"):
        sub = LLM_BASELINE_LABEL if result.config.get("llm_eval_tasks") else "prompted teacher"
        trained.append((LLM_LABEL, f"{fam}/{sub}"))
    out: list = []
    for label, ref in trained:
        out += [DifferenceBound(f"{label}: oracle success not below the prompted teacher's (lower 95% bound of "
                                "the paired difference >= -2 points)", f"paired/{label}", -2.0, min_episodes=n),
                RatioAtMost(f"{label}: LLM calls/episode <= 0.55x the prompted teacher's", f"{fam}/{label}", ref,
                            "llm_calls", 0.55, min_episodes=n),
                RatioAtMost(f"{label}: orchestration cost/task <= 1/45 the prompted teacher's", f"{fam}/{label}", ref,
                            "orchestration_cost", 1 / 45, min_episodes=n)]
    for label in ("rules+random", "majority class"):
        for prefix, other in (("paired", "teacher"), ("paired-fast", "fast policy")):
            out.append(DifferenceBound(f"{label} clearly below the {other} (upper 95% bound <= -5 points)",
                                       f"{prefix}/{label}", -5.0, direction="below", min_episodes=n))
    if result.config.get("ablations"):
        out.append(DifferenceBound("verifier filter: validator-filtered above unfiltered (lower 95% bound of the "
                                   "paired difference > 0)", "ablation/unfiltered", 0.0, min_episodes=n,
                                   strict=True))
    if result.config.get("cross_domain"):
        from train.table2 import table2_family

        for family in sorted({table2_family(d.split("/")[0]) for d in result.config.get("holdout_domains", ())}):
            bound = 5.0 if family == "planbench" else 8.0
            out.append(DifferenceBound(f"cross-domain {family}: held-out domains within {bound:g} points of the "
                                       "policy trained with them (upper 95% bound, paired)", f"cross-domain/{family}",
                                       bound,
                                       direction="below", min_episodes=n))
    return out


def check_targets(result: PipelineResult) -> list[tuple[str, bool, str]]:
    """The issue's "must show" targets, each with the figures it was judged on; a target whose rows
    are missing, NaN, zero or too small fails (train.targets)."""
    from train.targets import judge

    return [(v.name, v.passed, v.figures) for v in judge(pipeline_targets(result), results_table(result))]


def format_cross_domain(rows: list[dict]) -> str:
    if not rows:
        return "(no family has both in-distribution and held-out-domain tasks)"
    head = ["family", "held-out domains", "in-distribution oracle (episodes)", "held-out-domain oracle (episodes)",
            "gap (points)", "teacher on held-out domains", "held-out tasks of those domains: trained with them minus "
            "without (paired, points)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        d = r[XD_PAIRED]
        paired = f"{d['difference']:+.1f} ± {d['se']:.1f} ({int(d['episodes'])})" if d.get("episodes") else "-"
        lines.append(f"| {r['family']} | {r['held-out domains']} | {100 * r['in-distribution oracle']:.1f}% "
                     f"({r['in-distribution episodes']}) | {100 * r['held-out-domain oracle']:.1f}% "
                     f"({r['held-out-domain episodes']}) | {r['gap (points)']:+.1f} | "
                     f"{100 * r['teacher on held-out domains']:.1f}% | {paired} |")
    return "\n".join(lines)


def format_report(result: PipelineResult) -> str:
    from train.table2 import format_table2

    world = result.stages.get("simulated world") or {}
    parts = ["## Table 2, row by row (SIMULATED rows beside the paper's published real-LLM rows; "
             "counting rules in train/accounting.py)", "", format_table2(result.families), ""]
    parts += ["## Comparison on held-out tasks (SIMULATED, llm_backend=sim, world "
              f"{world.get('name', '?')} {world.get('hash', '?')}; published rows are real-LLM figures "
             "from the paper, not comparable run for run)", "", format_table(result.comparison)]
    if result.ablations:
        parts += ["", "## Ablations (fast policy, held-out tasks, SIMULATED)", "", format_table(result.ablations)]
    if result.cross_domain:
        parts += ["", "## Cross-domain hold-out (fast policy trained without the held-out domains, SIMULATED)", "",
                  format_cross_domain(result.cross_domain)]
    parts += ["", "## Stages", "", "```", json.dumps(result.stages, indent=1), "```", "",
              "## Targets", ""]
    parts += [f"- {'PASS' if ok else 'FAIL'}: {name} ({figures})" for name, ok, figures in result.targets]
    return "\n".join(parts)
