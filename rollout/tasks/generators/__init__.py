"""Verifiable planning-task generators with difficulty levels (one module per domain).

REGISTRY (the shared solvers.registry.Registry) is the one registration table: name ->
"module:attr" of a base.Generator, loaded lazily. Adding a domain is one module plus one line here.
"""

from __future__ import annotations

from rollout.tasks.generators.base import LEVELS, Generator, GeneratorError
from solvers.registry import Registry, UnknownName

REGISTRY: Registry[Generator] = Registry("generator")
REGISTRY.register("blocksworld", "rollout.tasks.generators.blocksworld:GENERATOR")
REGISTRY.register("logistics", "rollout.tasks.generators.logistics:GENERATOR")
REGISTRY.register("depots", "rollout.tasks.generators.depots:GENERATOR")
REGISTRY.register("hanoi", "rollout.tasks.generators.hanoi:GENERATOR")
REGISTRY.register("gripper", "rollout.tasks.generators.gripper:GENERATOR")
REGISTRY.register("miconic", "rollout.tasks.generators.miconic:GENERATOR")
REGISTRY.register("visitall", "rollout.tasks.generators.visitall:GENERATOR")
REGISTRY.register("childsnack", "rollout.tasks.generators.childsnack:GENERATOR")
REGISTRY.register("satellite", "rollout.tasks.generators.satellite:GENERATOR")
REGISTRY.register("rovers", "rollout.tasks.generators.rovers:GENERATOR")
REGISTRY.register("floortile", "rollout.tasks.generators.floortile:GENERATOR")

# Published suites as generated sets: name -> [(domain, levels)], 30 tasks per level.
PRESETS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    # the HALO paper's classical family
    "classical": [("blocksworld", ("easy", "medium", "hard")), ("hanoi", ("easy", "medium", "hard", "extreme"))],
}


def get_generator(name: str) -> Generator:
    if name not in REGISTRY:
        raise GeneratorError(f"no generator {name!r}; known: {', '.join(REGISTRY)}")
    try:
        return REGISTRY.get(name)
    except UnknownName as exc:  # a registered "module:attr" that does not import
        raise GeneratorError(str(exc)) from exc


__all__ = ["LEVELS", "PRESETS", "REGISTRY", "Generator", "GeneratorError", "get_generator"]
