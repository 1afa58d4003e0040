"""Calendar scheduling tasks as the benchmark defines them: participants' busy slots over one
or more work days (9:00-17:00), a meeting length, and preferences that rule out times; find
the time that suits everyone. Difficulty axes: the number of people (one day) and the number
of days (two people), as in the benchmark. Each task has exactly one time that fits, so the
benchmark's exact-match scoring has one right answer."""

from __future__ import annotations

import random

from rollout.tasks.natural_plan.instance import NPInstance, pddl_name, plan_steps

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
NAMES = ("Alice", "Bruno", "Chloe", "Dmitri", "Elena", "Felix", "Greta", "Hassan", "Ines", "Jakob", "Keiko",
         "Lucas", "Mira", "Nikolai", "Omar", "Petra")
# level -> (people, days) choices: one day and more people, or two people and more days
SHAPES = {"easy": ((2, 1), (3, 1)), "medium": ((4, 1), (5, 1), (2, 2), (2, 3)),
          "hard": ((6, 1), (7, 1), (2, 4), (2, 5))}
OPEN, CLOSE = 9 * 2, 17 * 2  # half-hours since midnight
LENGTHS = (1, 2)  # half-hours: a meeting of 30 or 60 minutes

DOMAIN = """(define (domain calendar-scheduling)
  (:requirements :strips :typing)
  (:types person slot)
  (:predicates (open) (proposed ?s - slot) (suits ?who - person ?s - slot) (agreed ?who - person))
  (:action propose
    :parameters (?s - slot)
    :precondition (open)
    :effect (and (not (open)) (proposed ?s)))
  (:action accept
    :parameters (?who - person ?s - slot)
    :precondition (and (proposed ?s) (suits ?who ?s))
    :effect (agreed ?who))
)
"""


def hhmm(half_hours: int) -> str:
    return f"{half_hours // 2}:{'30' if half_hours % 2 else '00'}"


def slot_name(day: str, start: int) -> str:
    return f"{day[:3].lower()}-{start // 2:02d}{'30' if start % 2 else '00'}"


class _Calendar:
    def __init__(self, rng: random.Random, people: int, days: int) -> None:
        self.people = rng.sample(NAMES, people)
        self.days = list(DAYS[:days])
        self.length = rng.choice(LENGTHS)
        self.starts = [(d, s) for d in self.days for s in range(OPEN, CLOSE - self.length + 1)]
        self.gold = rng.choice(self.starts)
        self.busy = {p: set() for p in self.people}  # (day, half-hour) cells
        self.avoid: dict[str, tuple[str, int]] = {}  # person -> (day, not before/after this half-hour)
        gold_cells = {(self.gold[0], self.gold[1] + i) for i in range(self.length)}
        for p in self.people:
            self.busy[p] = {(d, h) for d in self.days for h in range(OPEN, CLOSE)
                            if (d, h) not in gold_cells and rng.random() < 0.3}
        if rng.random() < 0.5:
            self._add_preference(rng)
        for day, start in self.starts:
            if (day, start) != self.gold and self.fits(day, start):
                cells = [(day, start + i) for i in range(self.length) if (day, start + i) not in gold_cells]
                self.busy[rng.choice(self.people)].add(rng.choice(cells))

    def _add_preference(self, rng: random.Random) -> None:
        """One person would rather not meet on a day after (or before) some hour the gold slot respects."""
        who = rng.choice(self.people)
        day = rng.choice(self.days)
        if day != self.gold[0]:
            self.avoid[who] = (day, OPEN)  # the whole day
        elif self.gold[1] + self.length <= CLOSE - 2:
            self.avoid[who] = (day, self.gold[1] + self.length)  # not after the gold meeting's end

    def suits(self, who: str, day: str, start: int) -> bool:
        if any((day, start + i) in self.busy[who] for i in range(self.length)):
            return False
        avoid = self.avoid.get(who)
        return avoid is None or avoid[0] != day or start + self.length <= avoid[1] and avoid[1] != OPEN

    def fits(self, day: str, start: int) -> bool:
        return all(self.suits(p, day, start) for p in self.people)


def _intervals(cells: set[tuple[str, int]], day: str) -> list[str]:
    hours = sorted(h for d, h in cells if d == day)
    out: list[list[int]] = []
    for h in hours:
        if out and out[-1][1] == h:
            out[-1][1] = h + 1
        else:
            out.append([h, h + 1])
    return [f"{hhmm(a)} to {hhmm(b)}" for a, b in out]


def _statement(c: _Calendar) -> str:
    length = "half an hour" if c.length == 1 else "one hour"
    days = c.days[0] if len(c.days) == 1 else ", ".join(c.days[:-1]) + f" or {c.days[-1]}"
    names = ", ".join(c.people[:-1]) + f" and {c.people[-1]}"
    lines = [f"You are an expert at scheduling meetings. TASK: You need to schedule a meeting for {names} for "
             f"{length} between the work hours of 9:00 to 17:00 on {days}.", "",
             "Here are the existing schedules for everyone during the days:"]
    for p in c.people:
        parts = [f"on {d} during {', '.join(iv)}" for d in c.days if (iv := _intervals(c.busy[p], d))]
        lines.append(f"{p} is busy " + ("; ".join(parts) if parts else "at no time") + ";")
    for p, (day, after) in c.avoid.items():
        when = "at all" if after == OPEN else f"after {hhmm(after)}"
        lines.append(f"{p} would rather not meet on {day} {when}.")
    lines += ["", "Find a time that works for everyone's schedule and constraints.", "SOLUTION:"]
    return "\n".join(lines)


def _problem(c: _Calendar, name: str) -> str:
    slots = [slot_name(d, s) for d, s in c.starts]
    init = ["(open)"] + [f"(suits {pddl_name(p)} {slot_name(d, s)})"
                         for p in c.people for d, s in c.starts if c.suits(p, d, s)]
    goal = " ".join(f"(agreed {pddl_name(p)})" for p in c.people)
    return (f"(define (problem {name})\n  (:domain calendar-scheduling)\n"
            f"  (:objects {' '.join(pddl_name(p) for p in c.people)} - person\n    {' '.join(slots)} - slot)\n"
            "  (:init\n    " + "\n    ".join(init) + f")\n  (:goal (and {goal})))\n")


def generate(rng: random.Random, level: str, name: str) -> NPInstance | None:
    people, days = rng.choice(SHAPES[level])
    c = _Calendar(rng, people, days)
    if [s for s in c.starts if c.fits(*s)] != [c.gold]:
        return None
    day, start = c.gold
    gold_slot = slot_name(day, start)
    plan = f"(propose {gold_slot})\n" + "".join(f"(accept {pddl_name(p)} {gold_slot})\n" for p in c.people)
    example = {"num_days": days, "num_people": people, "duration": 1, "meeting_minutes": 30 * c.length,
               "prompt_0shot": _statement(c),
               "golden_plan": f"Here is the proposed time: {day}, {hhmm(start)} - {hhmm(start + c.length)} "}
    spec = {"num_days": days, "num_people": people, "meeting_minutes": 30 * c.length, "days": c.days,
            "busy": {p: {d: _intervals(c.busy[p], d) for d in c.days} for p in c.people},
            "preferences": {p: {"day": d, "not_after": hhmm(a) if a != OPEN else "any time"}
                            for p, (d, a) in c.avoid.items()}}
    return NPInstance("calendar_scheduling", level, example, DOMAIN, _problem(c, name), plan, spec)


def render_calendar(plan_text: str, example: dict) -> str:
    """The proposed slot of a plan (gold names) in the benchmark's answer format."""
    proposed = [args[0] for name, args in plan_steps(plan_text) if name == "propose" and args]
    if not proposed:
        return "No time was proposed."
    day_abbrev, _, clock = proposed[-1].partition("-")
    day = next((d for d in DAYS if d[:3].lower() == day_abbrev), day_abbrev)
    if len(clock) != 4 or not clock.isdigit():
        return f"Here is the proposed time: {proposed[-1]}"
    start = int(clock[:2]) * 2 + (1 if clock[2:] == "30" else 0)
    length = int(example.get("meeting_minutes", 30)) // 30
    return f"Here is the proposed time: {day}, {hhmm(start)} - {hhmm(start + length)} "
