"""Floortile: robots on a grid paint tiles in given colours. A robot paints only the tile just
above or below it and may not step onto a painted tile, so a plan that paints in the wrong order
walls itself in. Row 0 is never painted: the robots start there."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DOMAINS, Atom, Generator, GeneratorError, Knob, Problem, wordings

COLOURS = ("white", "black", "grey")


def tile(row: int, col: int) -> str:
    return f"tile_{row}-{col}"


def _grid(rows: int, cols: int) -> list[Atom]:
    facts: list[Atom] = []
    for r in range(rows + 1):
        for c in range(cols):
            if r < rows:
                facts += [("up", tile(r + 1, c), tile(r, c)), ("down", tile(r, c), tile(r + 1, c))]
            if c + 1 < cols:
                facts += [("right", tile(r, c + 1), tile(r, c)), ("left", tile(r, c), tile(r, c + 1))]
    return facts


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    rows, cols, robots = sizes["rows"], sizes["columns"], sizes["robots"]
    if robots > cols:
        raise GeneratorError(f"floortile: {robots} robots asked for, but the start row has only {cols} tiles "
                             "(columns); use robots <= columns")
    colours = list(COLOURS[:sizes["colors"]])
    names = [f"robot{i + 1}" for i in range(robots)]
    painted = [tile(r, c) for r in range(1, rows + 1) for c in range(cols)]
    goal_tiles = sorted(rng.sample(painted, max(1, round(len(painted) * sizes["paint_pct"] / 100))),
                        key=painted.index)
    start = rng.sample(range(cols), robots)
    init: list[Atom] = _grid(rows, cols)
    init += [("robot-at", r, tile(0, c)) for r, c in zip(names, start, strict=True)]
    occupied = {tile(0, c) for c in start}
    init += [("clear", t) for t in [tile(0, c) for c in range(cols)] + painted if t not in occupied]
    init += [("robot-has", r, rng.choice(colours)) for r in names]
    init += [("available-color", c) for c in colours]
    goal = [("painted", t, rng.choice(colours)) for t in goal_tiles]
    objects = ([(r, "robot") for r in names] + [(tile(r, c), "tile") for r in range(rows + 1) for c in range(cols)]
               + [(c, "color") for c in colours])
    return Problem(f"floortile-{rows}x{cols}-r{robots}", objects, init, goal)


_WORDS = {
    "robot-at": ("{0} stands on {1}", "{0} is on {1}"),
    "up": ("{0} is just above {1}", "{0} lies directly above {1}"),
    "down": ("{0} is just below {1}", "{0} lies directly below {1}"),
    "right": ("{0} is just right of {1}", "{0} is the right-hand neighbour of {1}"),
    "left": ("{0} is just left of {1}", "{0} is the left-hand neighbour of {1}"),
    "clear": ("{0} is clear", "{0} is free and unpainted"),
    "painted": ("{0} is painted {1}", "{0} has {1} paint"),
    "robot-has": ("{0} holds {1} paint", "{0} paints in {1}"),
    "available-color": ("{0} paint is available", "robots can switch to {0}"),
}


phrase = wordings(_WORDS)


INTROS = (
    "Robots paint the floor tiles of a grid. A robot moves up, down, left or right onto a neighbouring "
    "tile that is clear (not painted and not occupied), paints the clear tile just above or just below "
    "it in the colour it holds, and may switch to any available colour. A painted tile can no longer be "
    "stepped on, so paint in an order that leaves the robots a way to the remaining tiles.",
    "Some tiles of a floor must end up painted in given colours. Each robot carries one colour at a time "
    "and can change it to any colour that is available. It can only paint the tile directly above or "
    "below the tile it stands on, only if that tile is still clear, and it can only walk onto clear "
    "tiles (one robot per tile, never onto paint).",
)

GENERATOR = Generator(
    name="floortile", domain_name="floortile", domain_file=DOMAINS / "floortile.pddl",
    summary="robots paint grid tiles from the tile below or above, never stepping on paint",
    knobs=(Knob("rows", 1, 10, "rows to paint (above the start row)"), Knob("columns", 1, 10, "columns"),
           Knob("robots", 1, 4, "robots (at most the number of columns)"),
           Knob("colors", 1, 3, "available colours"), Knob("paint_pct", 1, 100, "% of the tiles to paint")),
    levels={"easy": {"rows": (1, 2), "columns": (2, 3), "robots": (1, 2), "colors": (2, 2), "paint_pct": (50, 100)},
            "medium": {"rows": (2, 3), "columns": (3, 3), "robots": (1, 2), "colors": (2, 2),
                       "paint_pct": (60, 90)},
            "hard": {"rows": (3, 3), "columns": (3, 4), "robots": (2, 2), "colors": (2, 2), "paint_pct": (60, 80)},
            "extreme": {"rows": (4, 4), "columns": (4, 4), "robots": (2, 2), "colors": (2, 2),
                        "paint_pct": (50, 70)}},
    make=make, phrase=phrase, intros=INTROS, source="written for HALO (rollout/tasks/generators/domains/)",
)
