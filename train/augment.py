"""Verdict-preserving augmentation of accepted trajectories.

Three transformations that cannot change whether a plan is valid:
- consistent renaming of the problem's objects everywhere they occur (specification, spec JSON,
  domain constants, problem, plan, validator and planner text, solution outline);
- reordering the conjuncts of a top-level (and ...) goal;
- reordering the initial facts.

One random variant is drawn per accepted episode and applied to all of its supervised states
(the same renaming on every step, so the history stays coherent). With `verify`, the variant
of the episode's final domain/problem/plan is re-checked with the real validator and the
variant is dropped if the verdict changed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace

from rollout.core.state import EpisodeState
from rollout.core.trajectory import EpisodeRecord
from rollout.pddl.sections import section, shuffle_init
from rollout.pddl.sexpr import SExprError, parse
from train.examples import Example, example_id_for

_IDENT = r"[A-Za-z][A-Za-z0-9_\-]*"
# Natural-language words that may also be object names; renaming them in prose would garble it.
_PROSE_SKIP = frozenset({"a", "an", "the", "on", "in", "at", "to", "of", "is", "it", "and", "or", "from", "by",
                         "with", "table", "hand", "left", "right", "up", "down"})


@dataclass(frozen=True)
class Variant:
    renames: dict[str, str]
    shuffle_seed: int
    tag: str


# ------------------------------------------------------------------ s-expressions


def _render(expr: list | str, depth: int = 0) -> str:
    if isinstance(expr, str):
        return expr
    if depth == 0:  # one section per line keeps the text readable for the encoder
        return "(" + " ".join(_render(e, 1) if isinstance(e, str) else "\n  " + _render(e, 1) for e in expr) + "\n)"
    return "(" + " ".join(_render(e, depth + 1) for e in expr) + ")"


def problem_objects(problem: str) -> list[str]:
    """Object names declared in (:objects ...), without type annotations."""
    try:
        objs = section(parse(problem), ":objects")
    except SExprError:
        return []
    if objs is None:
        return []
    names, skip = [], False
    for tok in objs[1:]:
        if not isinstance(tok, str):
            continue
        if tok == "-":
            skip = True
            continue
        if skip:
            skip = False
            continue
        names.append(tok)
    return names


def reorder_problem(problem: str, rng: random.Random) -> str:
    """Shuffle initial facts and top-level goal conjuncts; text that does not parse is returned as is."""
    try:
        define = parse(problem)
    except SExprError:
        return problem
    shuffle_init(define, rng)
    goal = section(define, ":goal")
    if goal is not None and len(goal) == 2 and isinstance(goal[1], list) and goal[1] and \
            isinstance(goal[1][0], str) and goal[1][0].lower() == "and" and len(goal[1]) > 2:
        conj = goal[1][1:]
        rng.shuffle(conj)
        goal[1][1:] = conj
    return _render(define)


# ------------------------------------------------------------------ renaming


def _pattern(names: list[str]) -> re.Pattern[str]:
    alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9_\-])({alts})(?![A-Za-z0-9_\-])", re.IGNORECASE)


def rename(text: str, renames: dict[str, str], *, prose: bool = False) -> str:
    if not text or not renames:
        return text
    table = {k.lower(): v for k, v in renames.items() if not (prose and k.lower() in _PROSE_SKIP)}
    if not table:
        return text
    return _pattern(list(table)).sub(lambda m: table[m.group(1).lower()], text)


def choose_renames(problem: str, domain: str, rng: random.Random, texts: list[str]) -> dict[str, str]:
    """Fresh names for the objects that can be renamed safely: not a domain symbol, and no
    collision with any identifier already present in the episode's texts."""
    objects = problem_objects(problem)
    domain_words = {w.lower() for w in re.findall(_IDENT, domain)}
    present = {w.lower() for t in texts for w in re.findall(_IDENT, t)}
    renames: dict[str, str] = {}
    numbers = list(range(10, 100))
    rng.shuffle(numbers)
    for name in objects:
        if name.lower() in domain_words or not numbers:
            continue
        prefix = re.sub(r"[0-9_\-]+$", "", name) or "obj"
        prefix = prefix if len(prefix) > 1 else "obj"
        while numbers:
            new = f"{prefix}{numbers.pop()}"
            if new.lower() not in present:
                renames[name] = new
                present.add(new.lower())
                break
    return renames


def apply_to_state(state: EpisodeState, variant: Variant) -> EpisodeState:
    r = variant.renames
    problem = rename(state.problem, r)
    problem = reorder_problem(problem, random.Random(variant.shuffle_seed))
    return replace(
        state,
        task_description=rename(state.task_description, r, prose=True),
        spec_json=rename(state.spec_json, r, prose=True) if state.spec_json else state.spec_json,
        domain=rename(state.domain, r), problem=problem, plan=rename(state.plan, r),
        validator_errors=rename(state.validator_errors, r), planner_log=rename(state.planner_log, r),
        proposed_solution=rename(state.proposed_solution, r, prose=True),
    )


def apply_to_artifacts(domain: str, problem: str, plan: str, variant: Variant) -> tuple[str, str, str]:
    r = variant.renames
    new_problem = reorder_problem(rename(problem, r), random.Random(variant.shuffle_seed))
    return rename(domain, r), new_problem, rename(plan, r)


def draw_variant(ep: EpisodeRecord, rng: random.Random, index: int) -> Variant:
    last = ep.steps[-1] if ep.steps else None
    problem = (last.problem_after if last else "") or ""
    domain = (last.domain_after if last else "") or ""
    if not problem and ep.steps:
        first = EpisodeState.from_json(ep.steps[0].state_json)
        problem, domain = first.problem, first.domain
    texts = [s.state_json for s in ep.steps] + [problem, domain, ep.final_plan]
    renames = choose_renames(problem, domain, rng, texts)
    return Variant(renames, rng.randrange(1 << 30), f"aug{index}:rename{len(renames)}+reorder")


def verdict_kept(ep: EpisodeRecord, variant: Variant) -> bool:
    """Re-validate the variant of the episode's final artefacts; True if still accepted."""
    import solvers

    last = ep.steps[-1] if ep.steps else None
    if last is None or not (last.domain_after and last.problem_after):
        return True  # nothing replayable to check: the textual transformations alone are used
    plan = ep.final_plan or last.plan_after
    if not plan.strip():
        return True
    domain, problem, plan2 = apply_to_artifacts(last.domain_after, last.problem_after, plan, variant)
    original = solvers.validate(last.domain_after, last.problem_after, plan)
    changed = solvers.validate(domain, problem, plan2)
    return original.valid == changed.valid


def augment_examples(train: list[Example], episodes: list[EpisodeRecord], *, copies: int = 1, seed: int = 0,
                     verify: bool = True) -> tuple[list[Example], int]:
    """Variants of training examples (never validation ones); returns (new examples, rejected episodes)."""
    by_episode: dict[str, list[Example]] = {}
    for e in train:
        by_episode.setdefault(e.episode_id, []).append(e)
    eps = {ep.episode_id: ep for ep in episodes if ep.episode_id in by_episode}
    rng = random.Random(seed)
    out: list[Example] = []
    rejected = 0
    for ep_id in sorted(by_episode):
        ep = eps[ep_id]
        for k in range(copies):
            variant = draw_variant(ep, rng, k)
            if verify and not verdict_kept(ep, variant):
                rejected += 1
                continue
            for e in by_episode[ep_id]:
                state_json = apply_to_state(e.state, variant).to_json()
                if state_json == e.state_json:
                    continue
                out.append(replace(e, example_id=example_id_for(state_json, e.agent_id, variant.tag),
                                   state_json=state_json, augmentation=variant.tag))
    return out, rejected
