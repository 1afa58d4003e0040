"""Logistics (PlanBench's STRIPS domain): packages between cities by truck and airplane."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DATA, Atom, Generator, GeneratorError, Knob, Problem, wordings


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    if sizes["cities"] * sizes["locations"] < 2:
        raise GeneratorError("logistics needs at least 2 locations in all (cities x locations), "
                             f"got {sizes['cities']} x {sizes['locations']}")
    cities = [f"c{i}" for i in range(sizes["cities"])]
    locs = {c: [f"l{i}-{j}" for j in range(sizes["locations"])] for i, c in enumerate(cities)}
    all_locs = [loc for c in cities for loc in locs[c]]
    airports = [locs[c][0] for c in cities]
    trucks = [f"t{i}" for i in range(len(cities))]
    planes = [f"a{i}" for i in range(sizes["airplanes"])]
    packages = [f"p{i}" for i in range(sizes["packages"])]
    init: list[Atom] = [("AIRPLANE", a) for a in planes] + [("CITY", c) for c in cities]
    init += [("TRUCK", t) for t in trucks]
    for c in cities:
        for loc in locs[c]:
            init += [("LOCATION", loc), ("in-city", loc, c)]
    init += [("AIRPORT", a) for a in airports] + [("OBJ", p) for p in packages]
    init += [("at", t, rng.choice(locs[c])) for t, c in zip(trucks, cities, strict=True)]
    start = {p: rng.choice(all_locs) for p in packages}
    init += [("at", p, start[p]) for p in packages]
    init += [("at", a, rng.choice(airports)) for a in planes]
    goal = [("at", p, rng.choice([loc for loc in all_locs if loc != start[p]])) for p in packages]
    objects = [(o, "object") for o in planes + cities + trucks + all_locs + packages]
    return Problem(f"logistics-c{len(cities)}-s{sizes['locations']}-p{len(packages)}-a{len(planes)}",
                   objects, init, goal)


_WORDS = {
    "at": ("{0} is at {1}", "{0} is located at {1}"),
    "in": ("{0} is in {1}", "{0} is inside {1}"),
    "in-city": ("{0} is in the city {1}", "{0} belongs to city {1}"),
    "AIRPORT": ("{0} is an airport", "there is an airport at {0}"),
    "AIRPLANE": ("{0} is an airplane", "{0} is a plane"),
    "TRUCK": ("{0} is a truck", "{0} is a truck"),
    "CITY": ("{0} is a city", "{0} is a city"),
    "LOCATION": ("{0} is a location", "{0} is a place"),
    "OBJ": ("{0} is a package", "{0} is a parcel"),
}


phrase = wordings(_WORDS)


INTROS = (
    "I have to move packages: inside a city with its truck, and between cities with airplanes. "
    "Every city has one truck and one airport location; a truck can drive between any two locations of "
    "its own city, and an airplane can fly between any two airports.\n"
    "Actions: load a package into a truck or an airplane at a location where both are; unload a package "
    "from a truck or an airplane, which leaves it at the vehicle's location; drive a truck from one "
    "location of a city to another of the same city; fly an airplane from one airport to another. A loaded "
    "package is in the vehicle and no longer at the location.",
    "This is a delivery problem. Trucks move within one city (between its locations), airplanes move "
    "between airports of different cities. A package travels only inside a vehicle: it is loaded where "
    "the package and the vehicle both are, and unloaded wherever the vehicle is at that moment.",
)

GENERATOR = Generator(
    name="logistics", domain_name="logistics-strips", domain_file=DATA / "planbench" / "logistics" / "domain.pddl",
    summary="packages delivered by trucks within cities and airplanes between them (PlanBench logistics)",
    knobs=(Knob("cities", 1, 12, "number of cities (one truck and one airport each)"),
           Knob("locations", 1, 8, "locations per city"),
           Knob("packages", 1, 40, "number of packages"),
           Knob("airplanes", 1, 6, "number of airplanes")),
    levels={"easy": {"cities": (2, 2), "locations": (1, 3), "packages": (1, 3), "airplanes": (1, 1)},
            "medium": {"cities": (2, 3), "locations": (2, 3), "packages": (3, 5), "airplanes": (1, 2)},
            "hard": {"cities": (3, 4), "locations": (2, 3), "packages": (6, 8), "airplanes": (1, 2)},
            "extreme": {"cities": (4, 5), "locations": (3, 3), "packages": (10, 13), "airplanes": (2, 3)}},
    make=make, phrase=phrase, intros=INTROS, source="bundled PlanBench logistics domain",
)
