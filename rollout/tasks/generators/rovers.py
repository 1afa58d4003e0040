"""Rovers (temporal): rovers drive between waypoints, take soil and rock samples, calibrate their
cameras and take images, and send each result to the lander from a waypoint that can see it.
Actions take time and may overlap, so the gold plan comes from the temporal planner and is
checked by the validator."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DATA, Atom, Generator, GeneratorError, Knob, Problem, wordings

LANDER = "general"


def _connected_edges(rng: random.Random, nodes: list[str], extra: float) -> tuple[set[tuple[str, str]], set]:
    """A random spanning tree over nodes (so every waypoint is reachable) plus extra edges."""
    order = nodes[:]
    rng.shuffle(order)
    tree = {tuple(sorted((w, rng.choice(order[:i])))) for i, w in enumerate(order) if i}
    others = {(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1:]} - tree
    return tree, {e for e in sorted(others) if rng.random() < extra}


def _both_ways(pred: str, prefix: tuple[str, ...], edges: set[tuple[str, str]]) -> list[Atom]:
    return [(pred, *prefix, a, b) for x, y in sorted(edges) for a, b in ((x, y), (y, x))]


def _check(sizes: dict[str, int]) -> None:
    if sizes["soil"] + sizes["rock"] + sizes["images"] == 0:
        raise GeneratorError("rovers: a task needs at least one goal (soil + rock + images >= 1)")
    if sizes["images"] > sizes["objectives"] * sizes["modes"]:
        raise GeneratorError(f"rovers: {sizes['images']} images asked for, but {sizes['objectives']} objectives "
                             f"x {sizes['modes']} modes allow only {sizes['objectives'] * sizes['modes']}")
    for kind in ("soil", "rock"):
        if sizes[kind] > sizes["waypoints"]:
            raise GeneratorError(f"rovers: {sizes[kind]} {kind} samples asked for, but {sizes['waypoints']} "
                                 "waypoints hold at most one each")


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    _check(sizes)
    wps = [f"waypoint{i}" for i in range(sizes["waypoints"])]
    rovers = [f"rover{i}" for i in range(sizes["rovers"])]
    objectives = [f"objective{i}" for i in range(sizes["objectives"])]
    modes = ["colour", "high_res", "low_res"][:sizes["modes"]]
    tree, extra = _connected_edges(rng, wps, 0.25)
    seen_only = {e for e in _connected_edges(rng, wps, 0.2)[1] if e not in tree | extra}
    init: list[Atom] = _both_ways("visible", (), tree | extra | seen_only)
    init += [("at_lander", LANDER, rng.choice(wps)), ("channel_free", LANDER)]
    # each capability a goal needs is carried by some rover; the others are drawn
    kit = {r: {k for k in ("soil", "rock", "imaging") if rng.random() < 0.5} for r in rovers}
    for kind, wanted in (("soil", sizes["soil"]), ("rock", sizes["rock"]), ("imaging", sizes["images"])):
        if wanted and not any(kind in k for k in kit.values()):
            kit[rng.choice(rovers)].add(kind)
    supported: set[str] = set()
    cameras: list[str] = []
    for r in rovers:
        store = f"{r}store"
        init += [("at", r, rng.choice(wps)), ("available", r), ("store_of", store, r), ("empty", store)]
        init += [(f"equipped_for_{k}_analysis" if k != "imaging" else "equipped_for_imaging", r)
                 for k in ("soil", "rock", "imaging") if k in kit[r]]
        # every rover can cross the spanning tree; some of the other visible edges too
        init += _both_ways("can_traverse", (r,), tree | {e for e in sorted(extra) if rng.random() < 0.5})
        if "imaging" in kit[r]:
            cam = f"camera{len(cameras)}"
            cameras.append(cam)
            own = rng.sample(modes, rng.randint(1, min(2, len(modes))))
            supported.update(own)
            init += [("on_board", cam, r), ("calibration_target", cam, rng.choice(objectives))]
            init += [("supports", cam, m) for m in own]
    for o in objectives:
        init += [("visible_from", o, w) for w in rng.sample(wps, rng.randint(1, max(1, len(wps) // 2)))]
    goal: list[Atom] = []
    for kind in ("soil", "rock"):
        targets = rng.sample(wps, sizes[kind])
        spare = [w for w in wps if w not in targets and rng.random() < 0.3]
        init += [(f"at_{kind}_sample", w) for w in sorted(targets + spare, key=wps.index)]
        goal += [(f"communicated_{kind}_data", w) for w in targets]
    # a draw whose cameras support too few modes for the images asked for gets more modes
    spare_modes = [m for m in modes if m not in supported]
    rng.shuffle(spare_modes)
    while cameras and len(objectives) * len(supported) < sizes["images"]:
        mode = spare_modes.pop()
        supported.add(mode)
        init.append(("supports", rng.choice(cameras), mode))
    wanted = [(o, m) for o in objectives for m in sorted(supported)]
    goal += [("communicated_image_data", o, m) for o, m in rng.sample(wanted, sizes["images"])]
    objects = ([(LANDER, "lander")] + [(m, "mode") for m in modes] + [(r, "rover") for r in rovers]
               + [(f"{r}store", "store") for r in rovers] + [(w, "waypoint") for w in wps]
               + [(c, "camera") for c in cameras] + [(o, "objective") for o in objectives])
    return Problem(f"rovers-{len(rovers)}-{len(wps)}-{len(goal)}", objects, init, goal)


_WORDS = {
    "visible": ("{1} can be seen from {0}", "there is a line of sight from {0} to {1}"),
    "at_lander": ("the lander {0} stands at {1}", "{0}, the lander, is at {1}"),
    "channel_free": ("the radio channel of {0} is free", "{0} is not receiving anything"),
    "at": ("{0} is at {1}", "{0} stands at {1}"),
    "available": ("{0} is available", "{0} is not busy"),
    "store_of": ("{0} is the store of {1}", "{1} keeps its samples in {0}"),
    "empty": ("{0} is empty", "{0} holds no sample"),
    "full": ("{0} is full", "{0} holds a sample"),
    "equipped_for_soil_analysis": ("{0} can analyse soil", "{0} carries a soil kit"),
    "equipped_for_rock_analysis": ("{0} can analyse rock", "{0} carries a rock kit"),
    "equipped_for_imaging": ("{0} can take images", "{0} is equipped for imaging"),
    "can_traverse": ("{0} can drive from {1} to {2}", "{0} is able to travel from {1} to {2}"),
    "on_board": ("{0} is mounted on {1}", "{1} carries {0}"),
    "calibration_target": ("{0} is calibrated on {1}", "the calibration target of {0} is {1}"),
    "supports": ("{0} supports {1}", "{0} can shoot in {1}"),
    "calibrated": ("{0} on {1} is calibrated", "{1}'s {0} has been calibrated"),
    "visible_from": ("{0} is visible from {1}", "{0} can be observed from {1}"),
    "at_soil_sample": ("there is a soil sample at {0}", "soil can be sampled at {0}"),
    "at_rock_sample": ("there is a rock sample at {0}", "rock can be sampled at {0}"),
    "have_soil_analysis": ("{0} has analysed the soil of {1}", "{0} holds the soil analysis of {1}"),
    "have_rock_analysis": ("{0} has analysed the rock of {1}", "{0} holds the rock analysis of {1}"),
    "have_image": ("{0} has an image of {1} in {2}", "{0} holds a {2} picture of {1}"),
    "communicated_soil_data": ("the soil data of {0} has been sent to the lander",
                               "the lander has received the soil analysis of {0}"),
    "communicated_rock_data": ("the rock data of {0} has been sent to the lander",
                               "the lander has received the rock analysis of {0}"),
    "communicated_image_data": ("an image of {0} in {1} has been sent to the lander",
                                "the lander has received a {1} image of {0}"),
}


phrase = wordings(_WORDS)


INTROS = (
    "Rovers explore a planet. A rover drives between waypoints it can traverse (5 time units), takes a "
    "soil (10) or rock (8) sample at its waypoint if it has the kit and its store is empty, empties its "
    "store (1), calibrates a camera while its calibration target is visible (5), and takes an image of an "
    "objective in a mode the camera supports (7; the camera then needs calibrating again). Results are "
    "sent to the lander from a waypoint that can see the lander's, one at a time (10 for samples, 15 for "
    "images). Actions take time and may run in parallel: find a temporal plan.",
    "Several planetary rovers must collect data for a lander. Each rover has its own routes, its own kit "
    "(soil, rock, imaging) and one sample store. Driving takes 5 time units, soil sampling 10, rock "
    "sampling 8, dropping a sample 1, calibrating 5, imaging 7; sending data to the lander, from a "
    "waypoint in sight of it, takes 10 (15 for an image) and the lander listens to one rover at a time. "
    "Give start times and durations.",
)

GENERATOR = Generator(
    name="rovers", domain_name="Rover", domain_file=DATA / "temporal" / "rovers" / "domain.pddl",
    summary="rovers sample soil and rock, take images and report to a lander (temporal; the temporal planner)",
    knobs=(Knob("rovers", 1, 6, "number of rovers"), Knob("waypoints", 3, 25, "waypoints (always connected)"),
           Knob("objectives", 1, 10, "objectives to image"), Knob("modes", 1, 3, "camera modes"),
           Knob("soil", 0, 20, "soil samples to report"), Knob("rock", 0, 20, "rock samples to report"),
           Knob("images", 0, 30, "images (objective, mode) to report")),
    levels={"easy": {"rovers": (1, 1), "waypoints": (3, 5), "objectives": (1, 2), "modes": (1, 2),
                     "soil": (0, 1), "rock": (0, 1), "images": (1, 1)},
            "medium": {"rovers": (1, 2), "waypoints": (5, 7), "objectives": (2, 3), "modes": (2, 3),
                       "soil": (1, 2), "rock": (1, 2), "images": (1, 2)},
            "hard": {"rovers": (2, 3), "waypoints": (7, 10), "objectives": (3, 4), "modes": (2, 3),
                     "soil": (2, 3), "rock": (2, 3), "images": (2, 3)},
            "extreme": {"rovers": (3, 4), "waypoints": (10, 14), "objectives": (4, 6), "modes": (3, 3),
                        "soil": (3, 5), "rock": (3, 5), "images": (3, 5)}},
    make=make, phrase=phrase, intros=INTROS, source="bundled IPC (temporal rovers)", target_planner="temporal",
)
