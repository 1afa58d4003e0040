"""Miconic: one elevator picks passengers up at their floors and drops them at their
destinations. Floor f0 is the lowest; (above f_i f_j) holds when f_j is higher than f_i."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DOMAINS, Atom, Generator, GeneratorError, Knob, Problem, wordings


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    if sizes["floors"] < 2:
        raise GeneratorError("miconic needs at least 2 floors (a passenger travels between two)")
    floors = [f"f{i}" for i in range(sizes["floors"])]
    people = [f"p{i}" for i in range(sizes["passengers"])]
    init: list[Atom] = [("above", lo, hi) for i, lo in enumerate(floors) for hi in floors[i + 1:]]
    init.append(("lift-at", rng.choice(floors)))
    for p in people:
        start, end = rng.sample(floors, 2)
        init += [("origin", p, start), ("destin", p, end)]
    goal = [("served", p) for p in people]
    objects = [(f, "floor") for f in floors] + [(p, "passenger") for p in people]
    return Problem(f"miconic-{len(floors)}-{len(people)}", objects, init, goal)


_WORDS = {
    "origin": ("{0} waits at floor {1}", "passenger {0} is waiting on {1}"),
    "destin": ("{0} wants to go to floor {1}", "the destination of {0} is {1}"),
    "boarded": ("{0} is in the lift", "{0} has boarded"),
    "served": ("{0} has been served", "{0} has arrived at their destination"),
    "lift-at": ("the lift is at floor {0}", "the elevator stands at {0}"),
}


phrase = wordings(_WORDS, unsaid=("above",))  # floors are numbered bottom-up; said in the introduction


INTROS = (
    "An elevator serves a building whose floors are f0 (lowest), f1, f2 and so on upwards. It can go up or "
    "down from its floor to any other floor. At the lift's floor a waiting passenger may board, and a "
    "boarded passenger whose destination is that floor may leave; a passenger who left there is served.",
    "I control one lift. Floors are numbered from the ground floor f0 upwards; the lift travels directly "
    "between any two floors. Passengers get in at the floor where they wait and get out at their "
    "destination floor, which counts as serving them.",
)

GENERATOR = Generator(
    name="miconic", domain_name="miconic-typed", domain_file=DOMAINS / "miconic.pddl",
    summary="one elevator carries passengers from their floors to their destinations",
    knobs=(Knob("floors", 2, 40, "number of floors"), Knob("passengers", 1, 40, "number of passengers")),
    levels={"easy": {"floors": (2, 4), "passengers": (1, 3)}, "medium": {"floors": (4, 5), "passengers": (3, 5)},
            "hard": {"floors": (6, 8), "passengers": (6, 8)}, "extreme": {"floors": (10, 14), "passengers": (11, 15)}},
    make=make, phrase=phrase, intros=INTROS, source="written for HALO (rollout/tasks/generators/domains/)",
)
