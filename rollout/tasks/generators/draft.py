"""One candidate task, drawn deterministically from (generator, level, seed, index): problem
text, natural-language statement, sizes and canonical hash. Cheap: no planner runs here."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from rollout.tasks.generators import get_generator
from rollout.tasks.generators.canonical import canonical_hash
from rollout.tasks.generators.nl import render

GENERATOR_VERSION = "1"


@dataclass(frozen=True)
class Candidate:
    domain: str
    level: str  # easy..extreme, or "custom" when --size overrides a level's knobs
    seed: int
    index: int
    sizes_json: str
    problem: str
    description: str
    canonical_hash: str
    objects: int
    init_facts: int
    goal_atoms: int


def draft(domain: str, level: str | None, seed: int, index: int, overrides: dict[str, int]) -> Candidate:
    gen = get_generator(domain)
    label = "custom" if overrides or level is None else level
    rng = random.Random(f"{domain}|{label}|{GENERATOR_VERSION}|{seed}|{index}")  # str seeds are stable
    sizes = gen.sizes(rng, level, overrides)
    problem = gen.make(rng, sizes)
    problem.name = f"{problem.name}-s{seed}-i{index}"
    return Candidate(
        domain=domain, level=label, seed=seed, index=index, sizes_json=json.dumps(sizes, sort_keys=True),
        problem=problem.to_pddl(gen.domain_name), description=render(gen, problem, rng),
        canonical_hash=canonical_hash(gen.domain_name, problem.objects, problem.init, problem.goal),
        objects=len(problem.objects), init_facts=len(problem.init), goal_atoms=len(problem.goal),
    )
