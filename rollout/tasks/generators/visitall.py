"""Visitall: a robot on a grid (some cells may be blocked) must visit a set of cells."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DOMAINS, Atom, Generator, GeneratorError, Knob, Problem, wordings


def _cell(x: int, y: int) -> str:
    return f"cell-{x}-{y}"


def _reachable(start: tuple[int, int], open_cells: set[tuple[int, int]]) -> set[tuple[int, int]]:
    seen, todo = {start}, [start]
    while todo:
        x, y = todo.pop()
        for nxt in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if nxt in open_cells and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    width, height = sizes["width"], sizes["height"]
    if width * height < 2:
        raise GeneratorError("visitall needs a grid of at least 2 cells")
    cells = [(x, y) for x in range(width) for y in range(height)]
    while True:  # blocked cells may wall the robot in: draw again (a free neighbour always exists unblocked)
        blocked = set(rng.sample(cells, min(len(cells) - 2, len(cells) * sizes["blocked_pct"] // 100)))
        start = rng.choice([c for c in cells if c not in blocked])
        open_cells = _reachable(start, {c for c in cells if c not in blocked})  # only reachable cells exist
        others = sorted(open_cells - {start})
        if others:
            break
    goal_n = max(1, len(others) * sizes["goal_pct"] // 100)
    targets = rng.sample(others, goal_n)
    init: list[Atom] = [("at-robot", _cell(*start)), ("visited", _cell(*start))]
    for x, y in sorted(open_cells):
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if (nx, ny) in open_cells:
                init.append(("connected", _cell(x, y), _cell(nx, ny)))
    goal = [("visited", _cell(*t)) for t in sorted(targets)]
    return Problem(f"visitall-{width}x{height}", [(_cell(*c), "cell") for c in sorted(open_cells)], init, goal,
                   {"cells": len(open_cells)})


_WORDS = {
    "at-robot": ("the robot is at {0}", "the robot stands on {0}"),
    "visited": ("{0} has been visited", "the robot has been to {0}"),
    "connected": ("one can step from {0} to {1}", "{0} leads to {1}"),
}


phrase = wordings(_WORDS)


INTROS = (
    "A robot walks on a grid of cells named cell-X-Y. In one move it steps from its cell to a connected "
    "neighbouring cell, and every cell it enters counts as visited.",
    "Think of a floor plan made of square cells (cell-X-Y); only the listed connections can be walked. "
    "The robot moves one connection at a time and marks each cell it reaches as visited.",
)

GENERATOR = Generator(
    name="visitall", domain_name="visitall-typed", domain_file=DOMAINS / "visitall.pddl",
    summary="a robot on a grid with blocked cells visits a set of target cells",
    knobs=(Knob("width", 1, 20, "grid width"), Knob("height", 1, 20, "grid height"),
           Knob("blocked_pct", 0, 40, "percentage of cells blocked"),
           Knob("goal_pct", 1, 100, "percentage of reachable cells to visit")),
    levels={"easy": {"width": (2, 4), "height": (2, 3), "blocked_pct": (0, 10), "goal_pct": (30, 60)},
            "medium": {"width": (3, 4), "height": (3, 4), "blocked_pct": (0, 15), "goal_pct": (60, 90)},
            "hard": {"width": (5, 6), "height": (5, 6), "blocked_pct": (0, 15), "goal_pct": (80, 100)},
            "extreme": {"width": (7, 9), "height": (7, 9), "blocked_pct": (0, 15), "goal_pct": (90, 100)}},
    make=make, phrase=phrase, intros=INTROS, source="written for HALO (rollout/tasks/generators/domains/)",
)
