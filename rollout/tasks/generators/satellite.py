"""Satellite (temporal): satellites turn between directions, power and calibrate their
instruments, and take images in the modes the instruments support. Actions take time and may
overlap, so the gold plan comes from the temporal planner and is checked by the validator."""

from __future__ import annotations

import random

from rollout.tasks.generators.base import DATA, Atom, Generator, GeneratorError, Knob, Problem, wordings


def make(rng: random.Random, sizes: dict[str, int]) -> Problem:
    sats = [f"satellite{i}" for i in range(sizes["satellites"])]
    instruments = [f"instrument{i}" for i in range(sizes["instruments"])]
    modes = [f"mode{i}" for i in range(sizes["modes"])]
    stars = [f"star{i}" for i in range(max(1, sizes["directions"] // 3))]
    directions = stars + [f"phenomenon{i}" for i in range(sizes["directions"] - len(stars))]
    init: list[Atom] = []
    supported: set[str] = set()
    for i, inst in enumerate(instruments):
        sat = sats[i] if i < len(sats) else rng.choice(sats)  # every satellite carries one at least
        own = rng.sample(modes, rng.randint(1, min(2, len(modes))))
        supported.update(own)
        init += [("on_board", inst, sat), ("calibration_target", inst, rng.choice(stars))]
        init += [("supports", inst, m) for m in own]
    for sat in sats:
        init += [("power_avail", sat), ("pointing", sat, rng.choice(directions))]
    wanted = [(d, m) for d in directions for m in sorted(supported)]
    if sizes["images"] > len(wanted):
        raise GeneratorError(f"satellite: {sizes['images']} images asked for, but {len(directions)} directions "
                             f"x {len(supported)} supported modes allow only {len(wanted)}")
    goal = [("have_image", d, m) for d, m in rng.sample(wanted, sizes["images"])]
    objects = ([(s, "satellite") for s in sats] + [(i, "instrument") for i in instruments]
               + [(m, "mode") for m in modes] + [(d, "direction") for d in directions])
    return Problem(f"satellite-{len(sats)}-{len(instruments)}-{len(goal)}", objects, init, goal)


_WORDS = {
    "on_board": ("{0} is on board {1}", "{1} carries {0}"),
    "supports": ("{0} supports {1}", "{0} can take images in {1}"),
    "calibration_target": ("{0} is calibrated by pointing at {1}", "the calibration target of {0} is {1}"),
    "power_avail": ("{0} has power available", "{0} can power an instrument"),
    "pointing": ("{0} points at {1}", "{0} is aimed at {1}"),
    "power_on": ("{0} is switched on", "{0} is powered"),
    "calibrated": ("{0} is calibrated", "{0} has been calibrated"),
    "have_image": ("there is an image of {0} in {1}", "{0} has been imaged in {1}"),
}


phrase = wordings(_WORDS)


INTROS = (
    "Satellites observe directions in space. A satellite turns from one direction to another (5 time "
    "units); it powers one of its instruments at a time (switching on takes 2, off 1); a powered "
    "instrument must be calibrated by pointing the satellite at the instrument's calibration target (5) "
    "before it takes an image (7) of the direction the satellite points at, in a mode the instrument "
    "supports. Actions take time and may run in parallel: find a temporal plan.",
    "Several satellites carry instruments. Each instrument supports some imaging modes and has a star it "
    "is calibrated on. To take an image of a direction in a mode: switch on an instrument that supports "
    "the mode (only one per satellite can draw power), turn the satellite to the calibration star and "
    "calibrate, then turn to the direction and take the image. Turning takes 5 time units, switching on "
    "2, switching off 1, calibrating 5 and imaging 7; give start times and durations.",
)

GENERATOR = Generator(
    name="satellite", domain_name="satellite", domain_file=DATA / "temporal" / "satellite" / "domain.pddl",
    summary="satellites point, calibrate and image (temporal; the temporal planner)",
    knobs=(Knob("satellites", 1, 8, "number of satellites"),
           Knob("instruments", 1, 16, "instruments (one per satellite first, the rest anywhere)"),
           Knob("modes", 1, 6, "imaging modes"), Knob("directions", 2, 40, "directions (a third are stars)"),
           Knob("images", 1, 60, "goal images (direction, mode)")),
    levels={"easy": {"satellites": (1, 1), "instruments": (1, 2), "modes": (1, 2), "directions": (4, 6),
                     "images": (2, 3)},
            "medium": {"satellites": (1, 2), "instruments": (2, 3), "modes": (2, 3), "directions": (6, 8),
                       "images": (4, 6)},
            "hard": {"satellites": (2, 3), "instruments": (3, 5), "modes": (2, 3), "directions": (8, 12),
                     "images": (8, 10)},
            "extreme": {"satellites": (3, 4), "instruments": (5, 7), "modes": (3, 4), "directions": (12, 16),
                        "images": (13, 16)}},
    make=make, phrase=phrase, intros=INTROS, source="bundled IPC (temporal satellite)", target_planner="temporal",
)
