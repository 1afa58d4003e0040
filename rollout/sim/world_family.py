"""Families of worlds: worlds drawn by perturbing the default one inside documented ranges.

A result that holds only in the world its features and defaults were tuned on says little; the
same comparison over a family of perturbed worlds says how much of it is a property of those
constants. `draw_worlds(n, seed)` draws n worlds; world i depends only on (seed, i). The ranges
(RANGES, also in docs/rollout.md):

- every teacher accuracy (per situation class) and each teacher's quality: + U(-0.15, +0.15);
  systematic share: + U(-0.15, +0.15); all clipped to [0.02, 0.99];
- each teacher's confusion target per situation class: redrawn among plausible agents (the agents
  the default tables name as a repairer or a confusion for situations of the same kind, plan
  faults or the rest, other than the right one);
- each PDDL fault class weight: x exp(U(ln 0.5, ln 2)) (x 0.5 to x 2, log-uniform);
- repair rates (primary, secondary, dynamic): + U(-0.15, +0.15), clipped to [0.05, 0.99];
- size decay (size_repair_decay) and extra faults per size unit (size_extra_faults): x 0.5 to x 2.

Everything else (latencies, prices, the draft's other rates) stays the default world's.
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any

from rollout.core.agent_table import AgentId
from rollout.sim.faults import CATALOG
from rollout.sim.world_file import EMPTY, STALE, VALID, WORLD_FILE_VERSION, World, default_world, parse_world

RANGES: dict[str, str] = {
    "teachers.*.accuracy.*, teachers.*.quality, teachers.*.systematic": "+ U(-0.15, 0.15), clipped to [0.02, 0.99]",
    "teachers.*.confusion.*": "redrawn among plausible agents (not the right one)",
    "world.class_weights.*": "x 0.5 to x 2 (log-uniform)",
    "world.repair_prob, secondary_repair_prob, dynamic_repair_prob": "+ U(-0.15, 0.15), clipped to [0.05, 0.99]",
    "world.size_repair_decay, world.size_extra_faults": "x 0.5 to x 2 (log-uniform)",
}
_PLAN_AGENT = {"swapped_args": 13, "misordered_steps": 14, "duplicated_step": 15, "missing_steps": 17,
               "trailing_steps": 16}


def right_agent(situation: str) -> int:
    """The agent that fixes a situation class (as rollout.sim.teacher_chat.repairing_agent decides)."""
    if situation == EMPTY:
        return AgentId.EMERGENCY
    if situation == VALID:
        return AgentId.NOOP
    if situation == STALE:
        return 1
    if situation.startswith("plan:"):
        return _PLAN_AGENT[situation.removeprefix("plan:")]
    return CATALOG[situation].repaired_by[0]


def plausible_agents(world: World, situation: str) -> list[int]:
    """A prompted model's candidates for a situation: the agents the tables name as a repairer or a
    confusion for situations of the same kind (plan faults vs the rest), other than the right one."""
    plan = situation.startswith("plan:")
    agents = {a for fc in CATALOG.values() if (fc.target == "plan") == plan for a in fc.repaired_by}
    agents |= {a for t in world.teachers.values() for cls, a in t["confusion"].items()
               if cls.startswith("plan:") == plan}
    return sorted(int(a) for a in agents - {AgentId.NOOP, right_agent(situation)})  # plain ints: written to YAML


def _shift(rng: random.Random, value: float, span: float, low: float, high: float) -> float:
    return round(min(high, max(low, value + rng.uniform(-span, span))), 4)


def _scale(rng: random.Random, value: float) -> float:
    return round(value * math.exp(rng.uniform(math.log(0.5), math.log(2.0))), 4)


def _perturb_teacher(rng: random.Random, teacher: dict[str, Any], base: World) -> dict[str, Any]:
    out = copy.deepcopy(teacher)
    for key in ("quality", "systematic"):
        out[key] = _shift(rng, out[key], 0.15, 0.02, 0.99)
    out["accuracy"] = {cls: _shift(rng, p, 0.15, 0.02, 0.99) for cls, p in sorted(out["accuracy"].items())}
    out["confusion"] = {cls: rng.choice(plausible_agents(base, cls)) for cls in sorted(out["confusion"])}
    return out


def perturb(base: World, rng: random.Random, name: str) -> World:
    """One world of the family: `base` perturbed inside RANGES."""
    sim = copy.deepcopy(base.sim)
    sim["class_weights"] = {k: _scale(rng, w) for k, w in sorted(sim["class_weights"].items())}
    for key in ("repair_prob", "secondary_repair_prob", "dynamic_repair_prob"):
        sim[key] = _shift(rng, sim[key], 0.15, 0.05, 0.99)
    for key in ("size_repair_decay", "size_extra_faults"):
        sim[key] = _scale(rng, sim[key])
    teachers = {n: _perturb_teacher(rng, t, base) for n, t in sorted(base.teachers.items())}
    return parse_world(to_document(World(name, sim, teachers, copy.deepcopy(base.teacher_prices),
                                           copy.deepcopy(base.paper_calibration))), name)


def draw_worlds(n: int, seed: int, base: World | None = None) -> list[World]:
    """n worlds of the family drawn with `seed` (world i depends only on seed and i)."""
    if n < 1:
        raise ValueError(f"--worlds must be at least 1, got {n}")
    base = base or default_world()
    return [perturb(base, random.Random(f"world-family|{seed}|{i}"), f"family-s{seed}-w{i}") for i in range(n)]


def to_document(world: World) -> dict[str, Any]:
    """The world as a world-file document (what parse_world reads back to the same hash)."""
    sim = {k: list(v) if isinstance(v, tuple) else v for k, v in world.sim.items()}
    sim["prices"] = {m: list(p) for m, p in world.sim["prices"].items()}
    return {"version": WORLD_FILE_VERSION, "name": world.name, "world": sim, "teachers": world.teachers,
            "teacher_prices": world.teacher_prices, "paper_calibration": world.paper_calibration}


def to_yaml(world: World) -> str:
    import yaml

    header = f"# a world of a family drawn by rollout/sim/world_family.py; hash {world.hash}\n"
    return header + yaml.safe_dump(to_document(world), sort_keys=False)


__all__ = ["RANGES", "draw_worlds", "perturb", "plausible_agents", "right_agent", "to_document", "to_yaml"]
