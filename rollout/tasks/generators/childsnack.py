"""Childsnack (the IPC domain): make sandwiches in the kitchen, carry them on trays to the
tables and serve every waiting child; allergic children need gluten-free sandwiches."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DATA, Atom, Generator, GeneratorError, Knob, Problem, wordings


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    n = sizes["children"]
    allergic_n = max(0, min(n, round(n * sizes["allergic_pct"] / 100)))
    # gluten-free portions: enough for the allergic children unless a size asks for fewer
    # (then the task has no plan, and the generator's solvability check drops it)
    gf = min(n, allergic_n + sizes["extra_gluten_free"]) if sizes["gluten_free"] < 0 else sizes["gluten_free"]
    if gf > n:
        raise GeneratorError(f"childsnack: gluten_free={gf} exceeds the {n} bread portions")
    children = [f"child{i}" for i in range(1, n + 1)]
    bread = [f"bread{i}" for i in range(1, n + 1)]
    content = [f"content{i}" for i in range(1, n + 1)]
    sandwiches = [f"sandw{i}" for i in range(1, n + 1)]
    trays = [f"tray{i}" for i in range(1, sizes["trays"] + 1)]
    tables = [f"table{i}" for i in range(1, sizes["tables"] + 1)]
    allergic = set(rng.sample(children, allergic_n))
    init: list[Atom] = [("at", t, rng.choice(["kitchen", "kitchen", *tables])) for t in trays]
    init += [("at_kitchen_bread", b) for b in bread] + [("at_kitchen_content", c) for c in content]
    init += [("no_gluten_bread", b) for b in rng.sample(bread, gf)]
    init += [("no_gluten_content", c) for c in rng.sample(content, gf)]
    for child in children:
        init.append(("allergic_gluten" if child in allergic else "not_allergic_gluten", child))
        init.append(("waiting", child, rng.choice(tables)))
    init += [("notexist", s) for s in sandwiches]
    goal = [("served", c) for c in children]
    objects = [(c, "child") for c in children] + [(b, "bread-portion") for b in bread]
    objects += [(c, "content-portion") for c in content] + [(t, "tray") for t in trays]
    objects += [(t, "place") for t in tables] + [(s, "sandwich") for s in sandwiches]
    return Problem(f"childsnack-{n}-{len(trays)}", objects, init, goal, {"allergic": allergic_n})


_WORDS = {
    "at": ("{0} is at {1}", "{0} stands at {1}"),
    "at_kitchen_bread": ("{0} is in the kitchen", "the kitchen has {0}"),
    "at_kitchen_content": ("{0} is in the kitchen", "the kitchen has {0}"),
    "at_kitchen_sandwich": ("{0} is in the kitchen", "{0} is ready in the kitchen"),
    "no_gluten_bread": ("{0} is gluten-free", "{0} contains no gluten"),
    "no_gluten_content": ("{0} is gluten-free", "{0} contains no gluten"),
    "no_gluten_sandwich": ("{0} is gluten-free", "{0} contains no gluten"),
    "ontray": ("{0} is on {1}", "{1} carries {0}"),
    "allergic_gluten": ("{0} is allergic to gluten", "{0} must not eat gluten"),
    "not_allergic_gluten": ("{0} is not allergic to gluten", "{0} can eat gluten"),
    "served": ("{0} has been served", "{0} got a sandwich"),
    "waiting": ("{0} is waiting at {1}", "{0} sits at {1}"),
    "notexist": ("{0} has not been made yet", "{0} is still to be made"),
}


phrase = wordings(_WORDS)


INTROS = (
    "Children wait at tables for a sandwich. In the kitchen I can make a sandwich from one bread portion "
    "and one content portion (it is gluten-free when both portions are), put a sandwich onto a tray that "
    "is in the kitchen, move a tray between the kitchen and the tables, and serve a sandwich from a tray "
    "to a child waiting where the tray is. Children allergic to gluten accept only gluten-free sandwiches.",
    "I run a school canteen. Sandwiches are made in the kitchen, each from a bread and a filling portion; "
    "only gluten-free bread with a gluten-free filling makes a gluten-free sandwich. Trays carry "
    "sandwiches from the kitchen to the tables, where a sandwich on a tray can be given to a child sitting "
    "there. An allergic child may only be served a gluten-free sandwich.",
)

GENERATOR = Generator(
    name="childsnack", domain_name="child-snack", domain_file=DATA / "ipc" / "childsnack" / "domain.pddl",
    summary="sandwiches made, carried on trays and served, some gluten-free (IPC childsnack)",
    knobs=(Knob("children", 1, 30, "number of children (and of bread, content and sandwich slots)"),
           Knob("trays", 1, 6, "number of trays"), Knob("tables", 1, 6, "number of tables"),
           Knob("allergic_pct", 0, 100, "percentage of children allergic to gluten"),
           Knob("gluten_free", -1, 30, "gluten-free bread and content portions (-1: one per allergic child "
                "plus extra_gluten_free)"),
           Knob("extra_gluten_free", 0, 30, "gluten-free portions beyond the allergic children's")),
    levels={"easy": {"children": (2, 3), "trays": (1, 2), "tables": (1, 3), "allergic_pct": (0, 50),
                     "gluten_free": (-1, -1), "extra_gluten_free": (0, 2)},
            "medium": {"children": (3, 4), "trays": (1, 2), "tables": (2, 3), "allergic_pct": (20, 50),
                       "gluten_free": (-1, -1), "extra_gluten_free": (0, 2)},
            "hard": {"children": (5, 6), "trays": (2, 2), "tables": (2, 3), "allergic_pct": (30, 50),
                     "gluten_free": (-1, -1), "extra_gluten_free": (0, 2)},
            "extreme": {"children": (7, 9), "trays": (2, 3), "tables": (3, 3), "allergic_pct": (30, 50),
                        "gluten_free": (-1, -1), "extra_gluten_free": (0, 2)}},
    make=make, phrase=phrase, intros=INTROS, source="bundled IPC childsnack domain",
)
