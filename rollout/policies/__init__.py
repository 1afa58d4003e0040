"""Orchestrator policies and the `make_policy(spec)` factory.

Specs: "random", "scripted", "rules+<spec>" (the rules layer first), with optional
parameters after a colon, e.g. "scripted:noise=0.2,seed=3". Other parts register more specs
with `register_policy_factory("teacher", factory)` (an entry in the shared POLICIES registry);
the factory gets the text after the prefix. A factory may also be named by a "module:attr"
string, imported on first use (specs whose code lives in a later layer, such as the trained
`model:DIR` and `majority:DIR`, registered here so every command has them).
"""

from __future__ import annotations

from collections.abc import Callable

from rollout.core.decision import Policy
from rollout.policies.rules import RulesFirst
from solvers.errors import InputError
from solvers.registry import Registry, UnknownName

PolicyFactory = Callable[[str, int], Policy]  # (params text after "name:", default seed)

POLICIES: Registry[PolicyFactory] = Registry("policy")


class PolicySpecError(InputError, ValueError):
    pass


def register_policy_factory(prefix: str, factory: PolicyFactory | str) -> None:
    """Make `make_policy("<prefix>[:params]")` build a policy with `factory(params, seed)`
    (`factory` may be "module:attr", imported when the spec is first used)."""
    POLICIES.register(prefix, factory)


def _resolve(name: str) -> PolicyFactory | None:
    if name not in POLICIES:
        return None
    try:
        return POLICIES.get(name)
    except UnknownName as exc:
        raise PolicySpecError(str(exc)) from exc


def _params(text: str, known: tuple[str, ...]) -> dict[str, str]:
    """`k=v,k=v` -> dict; an unknown key is refused (a typo must not fall back to a default)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise PolicySpecError(f"policy parameter {part!r} must look like key=value")
        out[key.strip()] = value.strip()
    unknown = sorted(set(out) - set(known))
    if unknown:
        raise PolicySpecError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(known) or 'none'}")
    return out


def _random_factory(params: str, seed: int) -> Policy:
    from rollout.policies.random import RandomPolicy

    p = _params(params, ("seed",))
    return RandomPolicy(seed=int(p.get("seed", seed)))


def _scripted_factory(params: str, seed: int) -> Policy:
    from rollout.policies.scripted import ScriptedPolicy

    p = _params(params, ("noise", "seed"))
    return ScriptedPolicy(noise=float(p.get("noise", 0.1)), seed=int(p.get("seed", seed)))


def _student_factory(params: str, seed: int) -> Policy:
    from rollout.policies.http_student import student_factory

    return student_factory(params, seed)


def _teacher_factory(params: str, seed: int) -> Policy:
    from rollout.policies.teacher import teacher_factory

    return teacher_factory(params, seed)


register_policy_factory("random", _random_factory)
register_policy_factory("scripted", _scripted_factory)
register_policy_factory("student", _student_factory)  # student:URL -> the served policy over HTTP
register_policy_factory("teacher", _teacher_factory)  # teacher:model=...,base_url=... -> prompted LLM
register_policy_factory("model", "train.policy_specs:model_factory")  # model:DIR -> a trained artifact
register_policy_factory("majority", "train.policy_specs:majority_factory")  # majority:DIR -> its majority class
register_policy_factory("dyn", "rollout.policies.dynamic_escalation:dynamic_factory")  # dyn:SPEC -> escalates repeats


def make_policy(spec: str, *, seed: int = 0) -> Policy:
    spec = spec.strip()
    if spec.startswith("rules+"):
        return RulesFirst(make_policy(spec[len("rules+"):], seed=seed))
    name, _, params = spec.partition(":")
    factory = _resolve(name)
    if factory is None:
        raise PolicySpecError(f"unknown policy {spec!r}; known: {', '.join(POLICIES.names())} "
                              "(prefix any with 'rules+')")
    try:
        return factory(params, seed)
    except ValueError as exc:
        raise PolicySpecError(f"policy {spec!r}: {exc}") from exc


def policy_specs() -> list[str]:
    return POLICIES.names()


__all__ = ["POLICIES", "PolicySpecError", "make_policy", "policy_specs", "register_policy_factory"]
