"""Depots (PlanBench's typed domain): crates restacked across depots and distributors with
hoists and trucks."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DATA, Atom, Generator, Knob, Problem, wordings


def _stacks(rng: random.Random, crates: list[str], pallets: list[str]) -> dict[str, list[str]]:
    stacks: dict[str, list[str]] = {p: [] for p in pallets}
    for crate in rng.sample(crates, len(crates)):
        stacks[rng.choice(pallets)].append(crate)
    return stacks


def _on_atoms(stacks: dict[str, list[str]]) -> list[Atom]:
    out: list[Atom] = []
    for pallet, pile in stacks.items():
        below = pallet
        for crate in pile:
            out.append(("on", crate, below))
            below = crate
    return out


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    depots = [f"depot{i}" for i in range(sizes["depots"])]
    dists = [f"distributor{i}" for i in range(sizes["distributors"])]
    places = depots + dists
    trucks = [f"truck{i}" for i in range(sizes["trucks"])]
    pallets = [f"pallet{i}" for i in range(max(sizes["pallets"], len(places)))]
    hoists = [f"hoist{i}" for i in range(len(places))]
    crates = [f"crate{i}" for i in range(sizes["crates"])]
    # every place has a pallet and a hoist; extra pallets go to random places
    pallet_at = {p: places[i] if i < len(places) else rng.choice(places) for i, p in enumerate(pallets)}
    init: list[Atom] = [("at", p, pallet_at[p]) for p in pallets]
    init += [("at", t, rng.choice(places)) for t in trucks]
    init += [("at", h, places[i]) for i, h in enumerate(hoists)] + [("available", h) for h in hoists]
    start = _stacks(rng, crates, pallets)
    for pallet, pile in start.items():
        init += [("at", c, pallet_at[pallet]) for c in pile]
        init.append(("clear", pile[-1] if pile else pallet))
    init += _on_atoms(start)
    while True:
        goal = [a for a in _on_atoms(_stacks(rng, crates, pallets)) if rng.random() < 0.8]
        if goal and set(goal) - set(init):
            break
    objects = [(o, "depot") for o in depots] + [(o, "distributor") for o in dists]
    objects += [(o, "truck") for o in trucks] + [(o, "pallet") for o in pallets]
    objects += [(o, "crate") for o in crates] + [(o, "hoist") for o in hoists]
    return Problem(f"depot-{len(places)}-{len(trucks)}-{len(crates)}", objects, init, goal)


_WORDS = {
    "at": ("{0} is at {1}", "{0} stands at {1}"),
    "on": ("{0} is on {1}", "{0} is stacked on {1}"),
    "in": ("{0} is in {1}", "{0} is loaded in {1}"),
    "lifting": ("{0} is lifting {1}", "{0} holds {1}"),
    "available": ("{0} is available", "{0} is free"),
    "clear": ("{0} is clear", "nothing is on top of {0}"),
}


phrase = wordings(_WORDS)


INTROS = (
    "Crates sit in stacks on pallets at depots and distributors. Each place has a hoist; trucks carry "
    "crates between places.\nActions: drive a truck from one place to another; lift a clear crate off a "
    "surface (a pallet or another crate) with an available hoist at the same place; drop the crate a hoist "
    "is lifting onto a clear surface at the hoist's place; load the crate a hoist is lifting into a truck "
    "at that place; unload a crate from a truck with an available hoist at the truck's place, after which "
    "the hoist is lifting it. A hoist lifts one crate at a time; a surface with something on it is not clear.",
    "I manage a depot network. Hoists (one per place) pick crates off pallets or other crates and put them "
    "down on clear surfaces, or load them into and unload them from trucks standing at the same place; "
    "trucks drive freely between places. A crate that is lifted or in a truck is not at any place.",
)

GENERATOR = Generator(
    name="depots", domain_name="depots", domain_file=DATA / "planbench" / "depots" / "domain.pddl",
    summary="crates restacked across places with hoists and trucks (PlanBench depots)",
    knobs=(Knob("depots", 1, 6, "number of depots"), Knob("distributors", 1, 6, "number of distributors"),
           Knob("trucks", 1, 6, "number of trucks"), Knob("pallets", 1, 12, "pallets (at least one per place)"),
           Knob("crates", 1, 30, "number of crates")),
    levels={"easy": {"depots": (1, 1), "distributors": (1, 1), "trucks": (1, 2), "pallets": (2, 3),
                     "crates": (2, 3)},
            "medium": {"depots": (1, 2), "distributors": (1, 2), "trucks": (1, 2), "pallets": (3, 4),
                       "crates": (3, 4)},
            "hard": {"depots": (2, 2), "distributors": (1, 2), "trucks": (2, 2), "pallets": (4, 4),
                     "crates": (4, 5)},
            "extreme": {"depots": (2, 3), "distributors": (2, 2), "trucks": (2, 3), "pallets": (5, 6),
                        "crates": (6, 7)}},
    make=make, phrase=phrase, intros=INTROS, source="bundled PlanBench depots domain",
)
