"""Towers of Hanoi (the IPC STRIPS domain): a random legal arrangement of discs on pegs to
another one. Disc d1 is the smallest; every peg is larger than every disc."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DATA, Atom, Generator, Knob, Problem, wordings


def _arrangement(rng: random.Random, discs: list[str], pegs: list[str], stacked: str | None) -> dict[str, str]:
    """disc -> what it sits on. Discs go largest first onto a peg (all on `stacked` when given)."""
    top = {p: p for p in pegs}
    below: dict[str, str] = {}
    for disc in reversed(discs):
        peg = stacked or rng.choice(pegs)
        below[disc] = top[peg]
        top[peg] = disc
    return below


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    discs = [f"d{i}" for i in range(1, sizes["discs"] + 1)]
    pegs = [f"peg{i}" for i in range(1, sizes["pegs"] + 1)]
    tower = sizes["tower"] == 1  # the classic task: the whole tower from the first peg to the last
    start = _arrangement(rng, discs, pegs, pegs[0] if tower else None)
    while True:
        target = _arrangement(rng, discs, pegs, pegs[-1] if tower else None)
        if target != start:
            break
    init: list[Atom] = [("smaller", p, d) for p in pegs for d in discs]
    init += [("smaller", big, small) for i, small in enumerate(discs) for big in discs[i + 1:]]
    covered = set(start.values())
    init += [("clear", x) for x in pegs + discs if x not in covered]
    init += [("on", d, s) for d, s in start.items()]
    goal = [("on", d, s) for d, s in target.items()]
    return Problem(f"hanoi-{len(discs)}-{len(pegs)}", [(o, "object") for o in pegs + discs], init, goal)


_WORDS = {
    "on": ("{0} is on {1}", "{0} rests on {1}"),
    "clear": ("{0} is clear", "nothing is on {0}"),
}


phrase = wordings(_WORDS, unsaid=("smaller",))  # stated once in the introduction: discs are numbered by size


INTROS = (
    "This is the Towers of Hanoi. There are pegs (peg1, peg2, ...) and discs d1, d2, ...; d1 is the "
    "smallest disc and a higher number means a larger disc. Each peg is larger than any disc.\n"
    "The only action moves one clear disc (nothing on it) from what it is on to a clear peg or a clear "
    "disc, and only onto something larger than the disc itself.",
    "Discs of different sizes are stacked on pegs; disc dN is larger than every disc with a smaller number, "
    "and any disc fits on an empty peg. Move one top disc at a time onto a peg or onto a larger top disc; "
    "never put a disc on a smaller one.",
)

GENERATOR = Generator(
    name="hanoi", domain_name="hanoi", domain_file=DATA / "ipc" / "hanoi" / "domain.pddl",
    summary="discs moved between pegs, never onto a smaller disc (IPC hanoi)",
    knobs=(Knob("discs", 1, 12, "number of discs"), Knob("pegs", 3, 6, "number of pegs"),
           Knob("tower", 0, 1, "1: the classic whole-tower task; 0: random arrangement to random arrangement")),
    levels={"easy": {"discs": (3, 4), "pegs": (3, 3), "tower": (0, 0)},
            "medium": {"discs": (5, 5), "pegs": (3, 3), "tower": (0, 0)},
            "hard": {"discs": (6, 6), "pegs": (3, 3), "tower": (0, 0)},
            "extreme": {"discs": (7, 8), "pegs": (3, 3), "tower": (0, 0)}},
    make=make, phrase=phrase, intros=INTROS, source="bundled IPC hanoi domain",
)
