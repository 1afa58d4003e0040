"""Verifiable planning-task generators with difficulty levels (one module per domain).

REGISTRY is the one registration table: name -> "module:attr" of a base.Generator, loaded
lazily. Adding a domain is one module plus one line here.
"""

from __future__ import annotations

import importlib

from rollout.tasks.generators.base import LEVELS, Generator, GeneratorError

REGISTRY: dict[str, str] = {
    "blocksworld": "rollout.tasks.generators.blocksworld:GENERATOR",
    "logistics": "rollout.tasks.generators.logistics:GENERATOR",
    "depots": "rollout.tasks.generators.depots:GENERATOR",
    "hanoi": "rollout.tasks.generators.hanoi:GENERATOR",
    "gripper": "rollout.tasks.generators.gripper:GENERATOR",
    "miconic": "rollout.tasks.generators.miconic:GENERATOR",
    "visitall": "rollout.tasks.generators.visitall:GENERATOR",
    "childsnack": "rollout.tasks.generators.childsnack:GENERATOR",
    "satellite": "rollout.tasks.generators.satellite:GENERATOR",
    "rovers": "rollout.tasks.generators.rovers:GENERATOR",
    "floortile": "rollout.tasks.generators.floortile:GENERATOR",
}

# Published suites as generated sets: name -> [(domain, levels)], 30 tasks per level.
PRESETS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    # the HALO paper's classical family
    "classical": [("blocksworld", ("easy", "medium", "hard")), ("hanoi", ("easy", "medium", "hard", "extreme"))],
}


def get_generator(name: str) -> Generator:
    if name not in REGISTRY:
        raise GeneratorError(f"no generator {name!r}; known: {', '.join(REGISTRY)}")
    module, _, attr = REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), attr)


__all__ = ["LEVELS", "PRESETS", "REGISTRY", "Generator", "GeneratorError", "get_generator"]
