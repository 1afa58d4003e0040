"""Meeting planning tasks as the benchmark defines them: you start somewhere at 9:00AM, friends
are each at one place during a window and want at least some minutes with you, travel times
between places are given; meet as many as you can. The difficulty axis is the number of
people. The gold plan meets the most people possible (found by search); the benchmark scores
an answer by its number of valid meetings, so any schedule meeting that many is right.

Times live on a 5-minute grid (travel times are multiples of 5), so the PDDL needs one `tick`
object per 5 minutes of the day; the benchmark's own data uses 1-minute travel times."""

from __future__ import annotations

import random
from itertools import pairwise

from rollout.tasks.natural_plan.instance import NPInstance, pddl_name, plan_steps

PLACES = ("Harbor Point", "Old Town", "Market Square", "Riverside", "Hill Park", "North Beach", "Union Yard",
          "Chinatown", "Golden Mile", "Sunset Bay", "Mission Row", "Castle Hill", "Dockside", "Lake View",
          "Museum Quarter")
PEOPLE = ("Anna", "Ben", "Carla", "David", "Emma", "Farid", "Grace", "Hugo", "Iris", "Jonas", "Kate", "Liam",
          "Maya", "Noah", "Olga", "Pablo", "Quinn", "Rosa")
PEOPLE_COUNTS = {"easy": (1, 3), "medium": (4, 5), "hard": (6, 7)}
DAY_START = 9 * 60
TICK = 5
SPANS = tuple(range(TICK, 6 * TICK + 1, TICK))  # the travel times a task may have, in minutes

DOMAIN = """(define (domain meeting-planning)
  (:requirements :strips :typing)
  (:types place person tick span)
  (:predicates (at ?p - place) (now ?t - tick) (next ?a ?b - tick) (distance ?from ?to - place ?d - span)
               (later ?t1 - tick ?d - span ?t2 - tick)
               (window ?who - person ?where - place ?begin ?end - tick) (free ?who - person) (met ?who - person))
  (:action travel
    :parameters (?from ?to - place ?d - span ?depart ?arrive - tick)
    :precondition (and (at ?from) (now ?depart) (distance ?from ?to ?d) (later ?depart ?d ?arrive))
    :effect (and (not (at ?from)) (at ?to) (not (now ?depart)) (now ?arrive)))
  (:action wait
    :parameters (?t1 ?t2 - tick)
    :precondition (and (now ?t1) (next ?t1 ?t2))
    :effect (and (not (now ?t1)) (now ?t2)))
  (:action meet
    :parameters (?who - person ?where - place ?begin ?end - tick)
    :precondition (and (at ?where) (now ?begin) (free ?who) (window ?who ?where ?begin ?end))
    :effect (and (not (free ?who)) (met ?who) (not (now ?begin)) (now ?end)))
)
"""


def clock_text(minutes: int) -> str:
    """Minutes since midnight -> '9:05AM' (the benchmark's time format)."""
    hour, minute = divmod(minutes, 60)
    return f"{(hour - 1) % 12 + 1}:{minute:02d}{'AM' if hour < 12 else 'PM'}"


def tick_name(minutes: int) -> str:
    return f"t{minutes // 60:02d}{minutes % 60:02d}"


def tick_minutes(name: str) -> int | None:
    digits = name.removeprefix("t")
    return int(digits[:2]) * 60 + int(digits[2:]) if len(digits) == 4 and digits.isdigit() else None


class _World:
    def __init__(self, rng: random.Random, n: int) -> None:
        self.start = rng.choice(PLACES)
        self.people = rng.sample(PEOPLE, n)
        self.where = {p: rng.choice([x for x in PLACES if x != self.start]) for p in self.people}
        places = [self.start, *sorted(set(self.where.values()))]
        self.travel = {a: {b: TICK * rng.randint(1, 6) for b in places if b != a} for a in places}
        self.window: dict[str, tuple[int, int]] = {}
        self.minutes: dict[str, int] = {}
        for p in self.people:
            begin = DAY_START + 15 * rng.randint(0, 24)
            length = 15 * rng.randint(4, 12)
            self.window[p] = (begin, begin + length)
            self.minutes[p] = 15 * rng.randint(1, min(8, length // 15))

    def best_schedule(self) -> list[tuple[str, int, int]]:
        """(person, arrival, meeting start) for the largest set of people that can be met, earliest times."""
        best: list[tuple[str, int, int]] = []

        def extend(place: str, now: int, done: list[tuple[str, int, int]]) -> None:
            nonlocal best
            if len(done) > len(best):
                best = done[:]
            for p in self.people:
                if any(p == d[0] for d in done):
                    continue
                arrive = now + (self.travel[place][self.where[p]] if self.where[p] != place else 0)
                begin = max(arrive, self.window[p][0])
                if begin + self.minutes[p] <= self.window[p][1]:
                    extend(self.where[p], begin + self.minutes[p], [*done, (p, arrive, begin)])

        extend(self.start, DAY_START, [])
        return best


def _statement(w: _World) -> str:
    lines = [f"You are visiting the city for the day and want to meet as many friends as possible. You arrive "
             f"at {w.start} at {clock_text(DAY_START)}.", "", "Travel distances (in minutes):"]
    for a, row in w.travel.items():
        lines += [f"{a} to {b}: {m}." for b, m in row.items()]
    lines += ["", "CONSTRAINTS:"]
    for p in w.people:
        a, b = w.window[p]
        lines.append(f"{p} will be at {w.where[p]} from {clock_text(a)} to {clock_text(b)}. You'd like to meet "
                     f"{p} for a minimum of {w.minutes[p]} minutes.")
    lines += ["", "Find the best schedule: meet as many friends as possible, within their time and place."]
    return "\n".join(lines)


def _gold(w: _World, schedule: list[tuple[str, int, int]]) -> tuple[str, list[str]]:
    """The PDDL plan and the benchmark-format answer sentences of one schedule."""
    steps, words = [], [f"You start at {w.start} at {clock_text(DAY_START)}."]
    place, now = w.start, DAY_START
    for person, arrive, begin in schedule:
        target = w.where[person]
        if target != place:
            steps.append(f"(travel {pddl_name(place)} {pddl_name(target)} m{arrive - now} {tick_name(now)} "
                         f"{tick_name(arrive)})")
            words.append(f"You travel to {target} in {arrive - now} minutes and arrive at {clock_text(arrive)}.")
        for t in range(arrive, begin, TICK):
            steps.append(f"(wait {tick_name(t)} {tick_name(t + TICK)})")
        if begin > arrive:
            words.append(f"You wait until {clock_text(begin)}.")
        end = begin + w.minutes[person]
        steps.append(f"(meet {pddl_name(person)} {pddl_name(target)} {tick_name(begin)} {tick_name(end)})")
        words.append(f"You meet {person} for {w.minutes[person]} minutes from {clock_text(begin)} to "
                     f"{clock_text(end)}.")
        place, now = target, end
    return "\n".join(steps) + "\n", words


def _problem(w: _World, goal_people: list[str], name: str) -> str:
    last = max(b for _, b in w.window.values())
    ticks = list(range(DAY_START, last + 1, TICK))
    init = [f"(at {pddl_name(w.start)})", f"(now {tick_name(DAY_START)})"]
    init += [f"(next {tick_name(a)} {tick_name(b)})" for a, b in pairwise(ticks)]
    for a, row in w.travel.items():
        init += [f"(distance {pddl_name(a)} {pddl_name(b)} m{m})" for b, m in row.items()]
    init += [f"(later {tick_name(t)} m{m} {tick_name(t + m)})" for m in SPANS for t in ticks if t + m <= last]
    for p in w.people:
        a, b = w.window[p]
        init.append(f"(free {pddl_name(p)})")
        init += [f"(window {pddl_name(p)} {pddl_name(w.where[p])} {tick_name(t)} {tick_name(t + w.minutes[p])})"
                 for t in range(a, b - w.minutes[p] + 1, TICK)]
    places = sorted({pddl_name(x) for x in w.travel})
    goal = " ".join(f"(met {pddl_name(p)})" for p in goal_people)
    return (f"(define (problem {name})\n  (:domain meeting-planning)\n"
            f"  (:objects {' '.join(places)} - place\n    {' '.join(pddl_name(p) for p in w.people)} - person\n"
            f"    {' '.join(tick_name(t) for t in ticks)} - tick\n    {' '.join(f'm{m}' for m in SPANS)} - span)\n"
            "  (:init\n    " + "\n    ".join(init) + f")\n  (:goal (and {goal})))\n")


def generate(rng: random.Random, level: str, name: str) -> NPInstance | None:
    w = _World(rng, rng.randint(*PEOPLE_COUNTS[level]))
    schedule = w.best_schedule()
    if not schedule:
        return None  # nobody can be met: a corrupted answer could not score lower than the gold one
    plan, words = _gold(w, schedule)
    constraints: list[list] = [[w.start, clock_text(DAY_START)]]
    constraints += [[p, w.where[p], f"{clock_text(w.window[p][0])} to {clock_text(w.window[p][1])}", w.minutes[p]]
                    for p in w.people]
    example = {"num_people": len(w.people), "constraints": constraints, "dist_matrix": w.travel,
               "prompt_0shot": _statement(w), "golden_plan": words}
    spec = {"num_people": len(w.people), "constraints": constraints, "dist_matrix": w.travel}
    return NPInstance("meeting_planning", level, example, DOMAIN, _problem(w, [p for p, _, _ in schedule], name),
                      plan, spec)


def render_meeting(plan_text: str, example: dict) -> str:
    """A meeting plan (gold names) in the benchmark's answer format, as one SOLUTION text."""
    start_place, start_time = example["constraints"][0]
    display = {pddl_name(str(x)): str(x) for x in example["dist_matrix"]}
    display.update({pddl_name(str(c[0])): str(c[0]) for c in example["constraints"][1:]})
    words = [f"You start at {start_place} at {start_time}."]
    waiting_until: int | None = None
    for name, args in plan_steps(plan_text):
        times = [tick_minutes(a) for a in args[-2:]]
        if len(args) < 2 or None in times:
            continue
        begin, end = times
        if name == "wait":
            waiting_until = end
            continue
        if waiting_until is not None:
            words.append(f"You wait until {clock_text(waiting_until)}.")
            waiting_until = None
        if name == "travel" and len(args) == 5:
            words.append(f"You travel to {display.get(args[1], args[1])} in {end - begin} minutes and arrive at "
                         f"{clock_text(end)}.")
        elif name == "meet" and len(args) == 4:
            words.append(f"You meet {display.get(args[0], args[0])} for {end - begin} minutes from "
                         f"{clock_text(begin)} to {clock_text(end)}.")
    return "SOLUTION: " + " ".join(words)
