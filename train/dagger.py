"""DAgger-style data aggregation for the fast policy (after Ross, Gordon & Bagnell, AISTATS 2011).

Behaviour cloning trains the fast policy on the states the teacher visited. Once the student's own
choice fails, it reaches states the teacher's episodes rarely contain (its own history, its own
failed repairs) and errs more there: the compounding error. DAgger asks the teacher what it would
do in the states the student reaches, and trains on the union.

One round here: the current fast policy (rules first, then the model) runs episodes on the
training tasks; at every model-decided step the same prompted teacher that produced the data is
asked which agent it would choose in exactly that state. Its answer is a label only: the student's
choice is what runs (`beta` = 0; with `beta` > 0 the teacher's choice runs with that probability,
drawn per state from a stream of its own). The labels of all those steps, whatever the episode's
outcome, join the training set (the label comes from the teacher, not from the student's success;
the states where the student failed are the ones it most needs), and the policy is trained again.

`check="progress"` is the verifier filter for labels: the teacher's agent is run once on a fork of
the episode at that state (RefinementEnv.fork: the same world and random streams, so exactly what
running it there would have done) and the label is kept only if the validator's verdict then
changed or the plan validated (train/examples.progress_step's signal). The teacher's data are
filtered by their episodes' verdicts; a label that was never executed has none, and this gives it one.

Asking the teacher neither changes the student's episode (the teacher's answers are seeded per
state from their own stream, the world's and the agents' streams are untouched, a fork copies
them) nor charges it: the labelling calls are a training-data cost, counted per round
(`DaggerRound.label_calls`), not in any evaluated episode.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rollout.core.agent_table import NUM_AGENTS
from rollout.core.decision import MODEL, Decision, Policy
from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord, is_infra_failure
from rollout.loop.env import RefinementEnv
from rollout.tasks.base import Task
from solvers.errors import InputError
from train.dataset import DatasetCard
from train.examples import Example, example_id_for, validator_verdict

DAGGER_CHECKS = ("none", "progress")  # which teacher labels join the data (module doc)
DAGGER_AUGMENTATION = "dagger"  # Example.augmentation of a teacher label on a student's state
DAGGER_SEED_BASE = 30_000  # round r runs the training tasks with seeds 30_000 + 1_000 r + k


class DaggerError(InputError, ValueError):
    pass


@dataclass(frozen=True)
class TeacherLabel:
    """The teacher's answer at one model-decided step of a student episode."""

    step: int
    state_json: str  # the state both were asked about (the step record's state_json)
    agent_id: int  # the teacher's choice: the label
    decided_by: str  # "teacher", or "fallback" when its answers were unusable
    student_agent: int  # what the student chose (and, with beta 0, what ran)
    llm_calls: int  # the labelling call(s): a training-data cost, not the episode's
    cost_usd: float
    progress: bool | None = None  # check="progress": the label's agent moved the verdict on a fork


async def label_moves_verdict(env: RefinementEnv, state_json: str, agent_id: int) -> bool:
    """Run `agent_id` once on a fork of `env` (the same world and streams) and say whether the
    validator's verdict changed or the plan validated; `env` itself is left as it was."""
    twin = env.fork()
    try:
        twin.activate()
        result = await twin.step(Decision(agent_id, "teacher", reason="DAgger label check"))
        after = result.state
        return bool(after.plan_valid) or validator_verdict(after.to_json()) != validator_verdict(state_json)
    finally:
        twin.close()
        env.activate()


class LabellingStudent(Policy):
    """Runs `student`'s episode and asks `teacher` for a label at each model-decided step.

    `run_episode` hands it the environment (the `search_episode` hook), so it can check a label on
    a fork; the episode's record is the student's (its name, version and decisions)."""

    def __init__(self, student: Policy, teacher: Policy, *, check: str = "none", beta: float = 0.0,
                 key: str = "") -> None:
        if check not in DAGGER_CHECKS:
            raise DaggerError(f"dagger check must be one of {', '.join(DAGGER_CHECKS)}, got {check!r}")
        if not 0.0 <= beta <= 1.0:
            raise DaggerError(f"dagger beta must be in [0, 1], got {beta}")
        self.student, self.teacher, self.check, self.beta, self.key = student, teacher, check, beta, key
        self.name, self.version = student.name, student.version
        self.model_version = getattr(student, "model_version", "")
        self.labels: list[TeacherLabel] = []

    def _decide(self, state: EpisodeState) -> Decision:
        return self.student.decide(state)

    async def adecide(self, state: EpisodeState) -> Decision:
        return await self.student.adecide(state)

    async def search_episode(self, env: RefinementEnv) -> None:
        while not env.done:
            state = env.state
            assert state is not None
            state_json = state.to_json()
            decision = await self.student.adecide(state)
            if decision.decided_by == MODEL:
                decision = await self._label(env, state, state_json, decision)
            await env.step(decision)

    async def _label(self, env: RefinementEnv, state: EpisodeState, state_json: str, decision: Decision) -> Decision:
        answer = await self.teacher.adecide(state)
        if state.to_json() != state_json:
            raise DaggerError("asking the teacher changed the episode's state")
        progress = await label_moves_verdict(env, state_json, answer.agent_id) if self.check == "progress" else None
        self.labels.append(TeacherLabel(state.step, state_json, int(answer.agent_id), answer.decided_by,
                                        int(decision.agent_id), answer.llm_calls, answer.cost_usd, progress))
        if self.beta and random.Random(f"dagger-beta|{self.key}|{state.step}").random() < self.beta:
            return answer
        return decision

    def close(self) -> None:
        self.student.close()


@dataclass
class LabelledEpisode:
    record: EpisodeRecord
    labels: list[TeacherLabel]


def labelled_episodes(tasks: list[Task], student_spec: str, teacher_spec: str, seeds: list[int], run_id: str,
                      concurrency: int, llm: str = "sim", *, check: str = "none",
                      beta: float = 0.0) -> list[LabelledEpisode]:
    """The student's episodes over tasks x seeds in the world `llm` names, each with the teacher's
    labels at its model-decided steps (one student and one teacher shared, as run_policy does)."""
    from rollout.loop.episode import EpisodeConfig, run_episode
    from rollout.policies import make_policy
    from rollout.sim.spec import sim_config_for

    sim = sim_config_for(llm)
    student, teacher = make_policy(student_spec, seed=seeds[0]), make_policy(teacher_spec, seed=seeds[0])

    async def go() -> list[LabelledEpisode]:
        sem = asyncio.Semaphore(concurrency)

        async def one(task: Task, seed: int) -> LabelledEpisode:
            async with sem:
                policy = LabellingStudent(student, teacher, check=check, beta=beta, key=f"{task.task_id}|{seed}")
                record = await run_episode(task, policy, EpisodeConfig(seed=seed, run_id=run_id, sim=sim))
                return LabelledEpisode(record, policy.labels)

        return list(await asyncio.gather(*[one(t, s) for t in tasks for s in seeds]))

    try:
        return asyncio.run(go())
    finally:
        student.close()
        teacher.close()


@dataclass
class DaggerRound:
    """What one round gathered (the figures the pipeline reports)."""

    round: int
    episodes: int = 0
    episodes_dropped: int = 0  # infrastructure failures and broken episodes: no labels taken
    student_oracle: float = 0.0  # the student's oracle success on the training tasks
    labelled_steps: int = 0
    label_calls: int = 0  # the teacher's labelling calls (training-data cost)
    label_cost_usd: float = 0.0
    agreement: float = 0.0  # share of labels equal to the student's choice
    labels_unchecked_dropped: int = 0  # check="progress": labels whose agent did not move the verdict
    labels_out_of_vocabulary: int = 0
    duplicates_dropped: int = 0
    examples_added: int = 0

    @property
    def calls_per_label(self) -> float:
        return self.label_calls / self.labelled_steps if self.labelled_steps else 0.0


def label_examples(labelled: list[LabelledEpisode], check: str, summary: DaggerRound,
                   seen: set[str] | None = None) -> list[Example]:
    """Examples (state the student reached, teacher's label) from every labelled step of every
    episode, whatever its outcome; `check="progress"` keeps the labels whose agent moved the verdict."""
    seen = seen if seen is not None else set()
    out: list[Example] = []
    labels = [lab for le in labelled for lab in le.labels]
    summary.episodes += len(labelled)
    summary.labelled_steps += len(labels)
    summary.label_calls += sum(lab.llm_calls for lab in labels)
    summary.label_cost_usd += sum(lab.cost_usd for lab in labels)
    summary.agreement = sum(lab.agent_id == lab.student_agent for lab in labels) / len(labels) if labels else 0.0
    graded = [le.record.success_oracle is True for le in labelled]
    summary.student_oracle = sum(graded) / len(graded) if graded else 0.0
    for le in labelled:
        ep = le.record
        if is_infra_failure(ep) or ep.error:
            summary.episodes_dropped += 1
            continue
        for lab in le.labels:
            if not 0 <= lab.agent_id < NUM_AGENTS:
                summary.labels_out_of_vocabulary += 1
                continue
            if check == "progress" and not lab.progress:
                summary.labels_unchecked_dropped += 1
                continue
            key = example_id_for(lab.state_json, lab.agent_id, DAGGER_AUGMENTATION)
            if key in seen:
                summary.duplicates_dropped += 1
                continue
            seen.add(key)
            out.append(Example(key, ep.episode_id, ep.run_id, ep.task_id, ep.family, ep.domain_name, lab.step,
                               lab.state_json, lab.agent_id, lab.decided_by, ep.llm_backend,
                               augmentation=DAGGER_AUGMENTATION))
    summary.examples_added = len(out)
    return out


@dataclass
class DaggerSettings:
    rounds: int = 1
    check: str = "none"
    beta: float = 0.0
    teacher: str = "rules+teacher:model=sim"  # the policy asked for labels (the one that made the data)
    concurrency: int = 16
    llm: str = "sim"
    seed: int = 0

    def validate(self) -> DaggerSettings:
        if self.rounds < 0:
            raise DaggerError(f"dagger rounds must be >= 0, got {self.rounds}")
        if self.check not in DAGGER_CHECKS:
            raise DaggerError(f"dagger check must be one of {', '.join(DAGGER_CHECKS)}, got {self.check!r}")
        if not 0.0 <= self.beta <= 1.0:
            raise DaggerError(f"dagger beta must be in [0, 1], got {self.beta}")
        return self


def round_seeds(settings: DaggerSettings, round_index: int, count: int) -> list[int]:
    """Round r's seeds on the training tasks: fresh draws of the world, apart from the teacher's
    (10_000 + k) and the evaluation's (20_000 + k)."""
    return [settings.seed + DAGGER_SEED_BASE + 1_000 * round_index + k for k in range(count)]


@dataclass
class DaggerResult:
    model_dir: Path
    rounds: list[DaggerRound] = field(default_factory=list)

    def stages(self) -> dict[str, object]:
        return {f"round {r.round}": {**asdict(r), "calls per label": round(r.calls_per_label, 3)} for r in self.rounds}


def run_dagger(base_data: Path, base_model: Path, tasks: list[Task], seeds_per_round: int, out: Path,
               settings: DaggerSettings, log: Callable[[str], object] = print) -> DaggerResult:
    """`settings.rounds` rounds from the fast policy at `base_model` (trained on `base_data`): label
    the student's states, aggregate, retrain; the last round's model and every round's figures."""
    from train.dataset import load_examples

    settings.validate()
    card = DatasetCard.load(base_data)
    base = load_examples(base_data)
    split_of = {e.task_id: e.split for e in base}
    added: list[Example] = []
    seen: set[str] = set()
    result = DaggerResult(base_model)
    for r in range(1, settings.rounds + 1):
        seeds = round_seeds(settings, r, seeds_per_round)
        log(f"DAgger round {r}: the student on {len(tasks)} training tasks x {len(seeds)} seeds, "
            f"labels from {settings.teacher} (check: {settings.check})")
        labelled = labelled_episodes(tasks, f"rules+model:{result.model_dir}", settings.teacher, seeds,
                                     f"dagger-round-{r}", settings.concurrency, settings.llm,
                                     check=settings.check, beta=settings.beta)
        summary = DaggerRound(r)
        new = label_examples(labelled, settings.check, summary, seen)
        for e in new:  # a task keeps its side of the teacher data's train/validation split
            e.split = split_of.get(e.task_id, "train")
        added += new
        result.rounds.append(summary)
        result.model_dir = _retrain(base, added, card, base_model, out / f"round-{r}", summary)
    return result


def _retrain(base: list[Example], added: list[Example], card: DatasetCard, base_model: Path, out: Path,
             summary: DaggerRound) -> Path:
    """The teacher's examples plus every label so far -> a dataset and a fast policy with the base
    model's decision settings (repeat limit, next-ranked move)."""
    from train.dataset import BuildConfig, write_dataset
    from train.fast_policy import train_fast_policy_dir
    from train.manifest import Manifest

    extra = Manifest.load(base_model).extra
    stages = {**card.stages, f"DAgger labels added (round {summary.round})": summary.examples_added,
              "DAgger labels in all": sum(e.augmentation == DAGGER_AUGMENTATION for e in added)}
    config = BuildConfig(**{k: v for k, v in card.config.items() if k in BuildConfig.__dataclass_fields__})
    write_dataset(base + added, stages, out / "data", config=config,
                  sources=[*card.sources, f"dagger-round-{summary.round}"])
    train_fast_policy_dir(out / "data", out / "model", name=f"fast-dagger-{summary.round}",
                          max_tries=int(extra.get("max_tries", 0)),
                          retry_discount=float(extra.get("retry_discount", 0.0)),
                          retry_prior=str(extra.get("retry_prior", "fresh")))
    return out / "model"


__all__ = ["DAGGER_AUGMENTATION", "DAGGER_CHECKS", "DaggerError", "DaggerResult", "DaggerRound", "DaggerSettings",
           "LabelledEpisode", "LabellingStudent", "TeacherLabel", "label_examples", "label_moves_verdict",
           "labelled_episodes", "round_seeds", "run_dagger"]
