"""Trip planning tasks as the benchmark defines them: N European cities, a stay length for
each, direct flights only, fixed-day events; a flight day counts for both cities, so the trip
lasts sum(stays) - (N - 1) days. The difficulty axis is N. Every task has exactly one plan
(checked by search), so the benchmark's exact-match scoring has one right answer."""

from __future__ import annotations

import random
from itertools import pairwise

from rollout.tasks.natural_plan.instance import NPInstance, plan_steps

CITIES = ("Lisbon", "Porto", "Madrid", "Seville", "Barcelona", "Valencia", "Paris", "Lyon", "Nice", "Brussels",
          "Amsterdam", "Berlin", "Munich", "Hamburg", "Vienna", "Prague", "Warsaw", "Krakow", "Budapest",
          "Zurich", "Geneva", "Milan", "Rome", "Venice", "Florence", "Naples", "Athens", "Dublin", "London",
          "Edinburgh", "Oslo", "Stockholm", "Helsinki", "Copenhagen", "Riga", "Tallinn", "Vilnius", "Bucharest",
          "Sofia", "Split", "Dubrovnik", "Salzburg", "Frankfurt", "Stuttgart", "Reykjavik", "Santorini")
CITY_COUNTS = {"easy": (3, 4), "medium": (5, 6), "hard": (7, 8)}
EVENTS = ("attend a workshop", "meet a friend", "go to a wedding", "visit relatives", "attend a conference",
          "see a concert", "join a tour")

DOMAIN = """(define (domain trip-planning)
  (:requirements :strips :typing)
  (:types city day)
  (:predicates (ready) (in ?c - city) (today ?d - day) (unvisited ?c - city) (visited ?c - city)
               (stay ?c - city ?first ?last - day) (direct ?a ?b - city) (first-day ?d - day))
  (:action begin-trip
    :parameters (?c - city ?first ?last - day)
    :precondition (and (ready) (first-day ?first) (unvisited ?c) (stay ?c ?first ?last))
    :effect (and (not (ready)) (in ?c) (not (unvisited ?c)) (visited ?c) (today ?last)))
  (:action fly-and-stay
    :parameters (?from ?to - city ?first ?last - day)
    :precondition (and (in ?from) (today ?first) (direct ?from ?to) (unvisited ?to) (stay ?to ?first ?last))
    :effect (and (not (in ?from)) (in ?to) (not (today ?first)) (today ?last)
                 (not (unvisited ?to)) (visited ?to)))
)
"""


def _starts(order: list[str], stays: dict[str, int]) -> dict[str, int]:
    day, out = 1, {}
    for city in order:
        out[city] = day
        day += stays[city] - 1
    return out


def _plans(cities: list[str], stays: dict[str, int], flights: set[frozenset[str]],
           events: dict[str, tuple[int, int]], limit: int = 2) -> list[list[str]]:
    """Every city order (up to `limit`) that respects flights and events."""
    found: list[list[str]] = []

    def fits(city: str, start: int) -> bool:
        window = events.get(city)
        return window is None or start <= window[0] and window[1] <= start + stays[city] - 1

    def extend(order: list[str], day: int) -> None:
        if len(found) >= limit:
            return
        if len(order) == len(cities):
            found.append(order[:])
            return
        for city in cities:
            if city in order or not fits(city, day) or order and frozenset((order[-1], city)) not in flights:
                continue
            order.append(city)
            extend(order, day + stays[city] - 1)
            order.pop()

    extend([], 1)
    return found


def _draw(rng: random.Random, n: int) -> tuple[list[str], dict[str, int], set[frozenset[str]],
                                               dict[str, tuple[int, int]]] | None:
    order = rng.sample(CITIES, n)
    stays = {c: rng.randint(2, 6) for c in order}
    flights = {frozenset(p) for p in pairwise(order)}
    for _ in range(rng.randint(0, n)):
        flights.add(frozenset(rng.sample(order, 2)))
    starts = _starts(order, stays)
    events: dict[str, tuple[int, int]] = {}
    for city in rng.sample(order, len(order)):
        if len(_plans(order, stays, flights, events)) == 1:
            return order, stays, flights, events
        first = starts[city]
        events[city] = (first, first + stays[city] - 1)
    return (order, stays, flights, events) if len(_plans(order, stays, flights, events)) == 1 else None


def _statement(order: list[str], stays: dict[str, int], flights: set[frozenset[str]],
               events: dict[str, tuple[int, int]], rng: random.Random) -> str:
    total = sum(stays.values()) - len(order) + 1
    sentences = [f"You plan to visit {len(order)} European cities for {total} days in total.",
                 "You only take direct flights to commute between cities."]
    for city in rng.sample(order, len(order)):
        sentences.append(f"You would like to spend {stays[city]} days in {city}.")
        if city in events:
            a, b = events[city]
            sentences.append(f"You are going to {rng.choice(EVENTS)} in {city} between day {a} and day {b}.")
    pairs = sorted(" and ".join(sorted(p)) for p in flights)
    return (" ".join(sentences) + "\n\nHere are the cities that have direct flights:\n" + ", ".join(pairs)
            + f".\n\nFind a trip plan of visiting the cities for {total} days by taking direct flights to "
            "commute between them.")


def _pddl(order: list[str], stays: dict[str, int], flights: set[frozenset[str]],
          events: dict[str, tuple[int, int]], name: str) -> tuple[str, str]:
    total = sum(stays.values()) - len(order) + 1
    days = [f"day{i}" for i in range(1, total + 1)]
    cities = sorted(c.lower() for c in order)
    init = ["(ready)", "(first-day day1)"] + [f"(unvisited {c})" for c in cities]
    init += [f"(direct {a.lower()} {b.lower()})" for p in flights for a, b in (tuple(p), tuple(p)[::-1])]
    for city in order:
        for start in range(1, total - stays[city] + 2):
            window = events.get(city)
            if window is None or start <= window[0] and window[1] <= start + stays[city] - 1:
                init.append(f"(stay {city.lower()} day{start} day{start + stays[city] - 1})")
    goal = [f"(visited {c})" for c in cities] + [f"(today day{total})"]
    problem = (f"(define (problem {name})\n  (:domain trip-planning)\n"
               f"  (:objects {' '.join(cities)} - city\n    {' '.join(days)} - day)\n"
               "  (:init\n    " + "\n    ".join(init) + ")\n  (:goal (and " + " ".join(goal) + ")))\n")
    return DOMAIN, problem


def _gold_plan(order: list[str], stays: dict[str, int]) -> str:
    starts = _starts(order, stays)
    first = order[0]
    lines = [f"(begin-trip {first.lower()} day1 day{stays[first]})"]
    for a, b in pairwise(order):
        lines.append(f"(fly-and-stay {a.lower()} {b.lower()} day{starts[b]} day{starts[b] + stays[b] - 1})")
    return "\n".join(lines) + "\n"


def generate(rng: random.Random, level: str, name: str) -> NPInstance | None:
    n = rng.randint(*CITY_COUNTS[level])
    drawn = _draw(rng, n)
    if drawn is None:
        return None
    order, stays, flights, events = drawn
    statement = _statement(order, stays, flights, events, rng)
    domain, problem = _pddl(order, stays, flights, events, name)
    plan = _gold_plan(order, stays)
    example = {"cities": "**".join(order), "durations": "**".join(str(stays[c]) for c in order),
               "num_cities": n, "prompt_0shot": statement, "golden_plan": ""}
    spec = {"num_cities": n, "total_days": sum(stays.values()) - n + 1, "stays": dict(sorted(stays.items())),
            "direct_flights": sorted(sorted(p) for p in flights),
            "events": {c: {"from_day": a, "to_day": b} for c, (a, b) in sorted(events.items())}}
    example["golden_plan"] = render_trip(plan, example)
    return NPInstance("trip_planning", level, example, domain, problem, plan, spec)


def render_trip(plan_text: str, example: dict) -> str:
    """A trip plan (gold names) in the benchmark's answer format."""
    display = {c.lower(): c for c in str(example["cities"]).split("**")}
    stays = [(args[-3] if name == "fly-and-stay" else args[0], args[-2], args[-1], args[0])
             for name, args in plan_steps(plan_text) if name in ("begin-trip", "fly-and-stay") and len(args) >= 3]
    total = sum(int(d) for d in str(example["durations"]).split("**")) - int(example["num_cities"]) + 1
    lines = [f"Here is the trip plan for visiting the {example['num_cities']} European cities for {total} days:", ""]
    for i, (city, first, last, origin) in enumerate(stays):
        a, b = first.removeprefix("day"), last.removeprefix("day")
        name = display.get(city, city)
        length = int(b) - int(a) + 1 if a.isdigit() and b.isdigit() else 0
        if i == 0:
            lines.append(f"**Day {a}-{b}:** Arriving in {name} and visit {name} for {length} days.")
        else:
            lines.append(f"**Day {a}:** Fly from {display.get(origin, origin)} to {name}.")
            lines.append(f"**Day {a}-{b}:** Visit {name} for {length} days.")
    return "\n".join(lines)
