"""What a task generator is: a domain, size knobs with bounds, calibrated difficulty levels,
and a function from (random source, sizes) to a problem with a natural-language rendering."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from solvers.params import SpecError, convert, read_pairs

LEVELS = ("easy", "medium", "hard", "extreme")
DATA = Path(__file__).resolve().parent.parent / "data"
DOMAINS = Path(__file__).resolve().parent / "domains"

Atom = tuple[str, ...]


def wordings(words: dict[str, tuple[str, ...]], unsaid: tuple[str, ...] = ()) -> Callable[[Atom, int], str]:
    """A Generator.phrase from format strings per predicate (one per wording variant); facts of an
    `unsaid` predicate render as "" because the introduction states them once."""

    def phrase(atom: Atom, variant: int) -> str:
        return "" if atom[0] in unsaid else words[atom[0]][variant].format(*atom[1:])

    return phrase


class GeneratorError(SpecError):
    """A generator asked for something it cannot make; the message says what and the bounds."""


@dataclass(frozen=True)
class Knob:
    name: str
    lo: int
    hi: int
    help: str


@dataclass
class Problem:
    """A problem as data: typed objects, initial facts and goal facts (each a tuple of names)."""

    name: str
    objects: list[tuple[str, str]]  # (name, type); type "object" for untyped domains
    init: list[Atom]
    goal: list[Atom]
    facts: dict[str, int] = field(default_factory=dict)  # extra difficulty measures the generator knows

    def to_pddl(self, domain_name: str) -> str:
        by_type: dict[str, list[str]] = {}
        for obj, typ in self.objects:
            by_type.setdefault(typ, []).append(obj)
        if set(by_type) == {"object"}:
            objs = "    " + " ".join(by_type["object"])
        else:
            objs = "\n".join(f"    {' '.join(names)} - {typ}" for typ, names in by_type.items())
        init = "\n".join(f"    ({' '.join(a)})" for a in self.init)
        goal = "\n".join(f"      ({' '.join(a)})" for a in self.goal)
        return (f"(define (problem {self.name})\n  (:domain {domain_name})\n  (:objects\n{objs}\n  )\n"
                f"  (:init\n{init}\n  )\n  (:goal\n    (and\n{goal}\n    )\n  )\n)\n")


@dataclass(frozen=True)
class Generator:
    name: str
    domain_name: str  # the (define (domain NAME)) of domain_file
    domain_file: Path
    summary: str
    knobs: tuple[Knob, ...]
    levels: dict[str, dict[str, tuple[int, int]]]  # level -> knob -> inclusive range drawn from
    make: Callable[[random.Random, dict[str, int]], Problem]
    phrase: Callable[[Atom, int], str]  # one fact in words; the int picks a wording variant
    intros: Sequence[str]
    source: str = ""  # where domain_file came from
    target_planner: str = "fd"  # "temporal" for durative actions: the gold plan is the temporal planner's

    def domain_text(self) -> str:
        return self.domain_file.read_text()

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise GeneratorError(f"{self.name} has no knob {name!r}; knobs: {', '.join(k.name for k in self.knobs)}")

    def sizes(self, rng: random.Random, level: str | None, overrides: dict[str, int]) -> dict[str, int]:
        """The knob values of one instance: the level's ranges (medium when none), then overrides."""
        if level is not None and level not in self.levels:
            raise GeneratorError(f"{self.name} has no level {level!r}; levels: {', '.join(self.levels)}")
        ranges = self.levels[level or "medium"]
        out = {k.name: rng.randint(*ranges[k.name]) for k in self.knobs}
        for name, value in overrides.items():
            knob = self.knob(name)
            if not knob.lo <= value <= knob.hi:
                raise GeneratorError(f"{self.name}: {name}={value} is out of range; {knob.help} "
                                     f"({knob.lo}..{knob.hi})")
            out[name] = value
        return out


def parse_sizes(text: str | None) -> dict[str, int]:
    """'blocks=5,towers=2' -> {'blocks': 5, 'towers': 2} (the generator checks the knobs' names and bounds)."""
    out: dict[str, int] = {}
    for pair in read_pairs(text or "", what="--size", error=GeneratorError):
        problem, value = convert(pair.key, pair.value, int)
        if problem:
            raise GeneratorError.of(text or "", problem, field=pair.key, what="--size")
        out[pair.key] = value
    return out


def random_towers(rng: random.Random, items: list[str], max_towers: int | None = None) -> list[list[str]]:
    """Split items (in random order) into stacks, bottom first."""
    order = items[:]
    rng.shuffle(order)
    towers: list[list[str]] = []
    for item in order:
        if towers and (max_towers is not None and len(towers) >= max_towers or rng.random() < 0.6):
            rng.choice(towers).append(item)
        else:
            towers.append([item])
    return towers
