"""Natural-language statements written from a generated problem, in several surface forms.

Each generator words single facts (with a few variants per predicate); this module picks a
domain introduction, a frame and a fact order, so two tasks rarely read alike. Frame 0 is the
PlanBench statement shape ("As initial conditions I have that, ... My goal is to have that ...").
"""

from __future__ import annotations

import random

from rollout.tasks.generators.base import Generator, Problem


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _words(gen: Generator, atoms: list[tuple[str, ...]], variant: int) -> list[str]:
    return [w for w in (gen.phrase(a, variant) for a in atoms) if w]


def render(gen: Generator, problem: Problem, rng: random.Random) -> str:
    variant = rng.randrange(2)
    frame = rng.randrange(3)
    intro = gen.intros[rng.randrange(len(gen.intros))]
    init = _words(gen, problem.init, variant)
    goal = _words(gen, problem.goal, variant)
    if rng.random() < 0.5:  # fact order is not meaning: vary it
        rng.shuffle(init)
    if frame == 0:
        body = (f"[STATEMENT]\nAs initial conditions I have that, {_join(init)}.\n"
                f"My goal is to have that {_join(goal)}.")
    elif frame == 1:
        body = (f"Here is the situation right now: {'; '.join(init)}.\n"
                f"I need to reach a state in which {_join(goal)}.")
    else:
        body = ("Starting state:\n" + "\n".join(f"- {s}" for s in init)
                + "\nTarget (all of these must hold at the end):\n" + "\n".join(f"- {s}" for s in goal))
    return f"{intro}\n\n{body}"
