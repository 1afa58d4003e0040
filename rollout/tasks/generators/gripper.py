"""Gripper: a robot with a few grippers carries balls between rooms."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DOMAINS, Atom, Generator, Knob, Problem, wordings


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    rooms = [f"room{i}" for i in range(1, sizes["rooms"] + 1)]
    balls = [f"ball{i}" for i in range(1, sizes["balls"] + 1)]
    grippers = [f"gripper{i}" for i in range(1, sizes["grippers"] + 1)]
    start = {b: rng.choice(rooms) for b in balls}
    init: list[Atom] = [("at-robby", rng.choice(rooms))] + [("free", g) for g in grippers]
    init += [("at", b, r) for b, r in start.items()]
    goal = [("at", b, rng.choice([r for r in rooms if r != start[b]])) for b in balls]
    objects = [(r, "room") for r in rooms] + [(b, "ball") for b in balls] + [(g, "gripper") for g in grippers]
    return Problem(f"gripper-{len(rooms)}-{len(balls)}", objects, init, goal)


_WORDS = {
    "at-robby": ("the robot is in {0}", "the robot stands in {0}"),
    "at": ("{0} is in {1}", "{0} lies in {1}"),
    "free": ("{0} is free", "{0} holds nothing"),
    "carry": ("{1} carries {0}", "{0} is held by {1}"),
}


phrase = wordings(_WORDS)


INTROS = (
    "A robot moves balls between rooms. It can move from any room to any other, pick up a ball in the "
    "room it is in with one of its free grippers, and drop a ball it carries in the room it is in. Each "
    "gripper holds one ball at a time.",
    "There is one robot with several grippers (each holds at most one ball). It may walk between rooms, "
    "grab a ball lying in its current room with an empty gripper, or put a held ball down where it stands.",
)

GENERATOR = Generator(
    name="gripper", domain_name="gripper-typed", domain_file=DOMAINS / "gripper.pddl",
    summary="a robot carries balls between rooms with a few grippers",
    knobs=(Knob("rooms", 2, 8, "number of rooms"), Knob("balls", 1, 60, "number of balls"),
           Knob("grippers", 1, 4, "grippers of the robot")),
    levels={"easy": {"rooms": (2, 4), "balls": (2, 4), "grippers": (1, 2)},
            "medium": {"rooms": (3, 4), "balls": (5, 7), "grippers": (2, 2)},
            "hard": {"rooms": (3, 5), "balls": (9, 12), "grippers": (2, 2)},
            "extreme": {"rooms": (4, 5), "balls": (15, 19), "grippers": (2, 2)}},
    make=make, phrase=phrase, intros=INTROS, source="written for HALO (rollout/tasks/generators/domains/)",
)
