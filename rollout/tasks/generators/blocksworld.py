"""Blocksworld (PlanBench's 4-operator domain): random towers to random towers."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DATA, Atom, Generator, Knob, Problem, random_towers, wordings


def _state(towers: list[list[str]]) -> list[Atom]:
    atoms: list[Atom] = []
    for tower in towers:
        atoms.append(("ontable", tower[0]))
        atoms += [("on", upper, lower) for lower, upper in zip(tower, tower[1:], strict=False)]
        atoms.append(("clear", tower[-1]))
    return atoms


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    blocks = [f"b{i}" for i in range(1, sizes["blocks"] + 1)]
    start = random_towers(rng, blocks)
    while True:
        target = random_towers(rng, blocks)
        goal = [a for a in _state(target) if a[0] == "on"]
        if goal and set(goal) - set(_state(start)):
            break
    init = [("handempty",), *_state(start)]
    return Problem(f"bw-{len(blocks)}", [(b, "object") for b in blocks], init, goal,
                   {"towers_start": len(start)})


_WORDS = {
    "on": ("the {0} block is on top of the {1} block", "block {0} sits on block {1}"),
    "ontable": ("the {0} block is on the table", "block {0} stands on the table"),
    "clear": ("the {0} block is clear", "nothing is on block {0}"),
    "holding": ("I am holding the {0} block", "block {0} is in my hand"),
    "handempty": ("the hand is empty", "my hand is free"),
}


phrase = wordings(_WORDS)


INTROS = (
    "I am arranging blocks into stacks on a table, one block at a time and with a single hand. "
    "My four actions are: pick up a block from the table, put down the block I hold onto the table, "
    "unstack a block from the top of another block, and stack the block I hold onto another block.\n"
    "Rules: the hand must be empty to pick up or unstack, and it holds at most one block. I may only "
    "pick up or unstack a block that is clear (no block on it, and not in my hand); a block I pick up "
    "must be on the table, and a block I unstack must really be on the block I take it from. I can put "
    "down or stack only the block I hold, and I can stack it only onto a clear block. After putting down "
    "or stacking, my hand is empty; the block underneath a stacked block is no longer clear.",
    "A table holds some blocks, piled in towers. One hand moves them: it can take a clear block off the "
    "table (pick-up) or off another block (unstack), and it can place the block it holds on the table "
    "(put-down) or on a clear block (stack). It carries one block at a time and must be empty before it "
    "takes a block. A block is clear when nothing is on it and it is not being held.",
)

GENERATOR = Generator(
    name="blocksworld", domain_name="blocksworld-4ops", domain_file=DATA / "planbench" / "blocksworld" / "domain.pddl",
    summary="towers of blocks rearranged with one hand (PlanBench blocksworld)",
    knobs=(Knob("blocks", 2, 40, "number of blocks"),),
    levels={"easy": {"blocks": (3, 5)}, "medium": {"blocks": (6, 7)}, "hard": {"blocks": (8, 11)},
            "extreme": {"blocks": (13, 17)}},
    make=make, phrase=phrase, intros=INTROS, source="bundled PlanBench blocksworld domain",
)
