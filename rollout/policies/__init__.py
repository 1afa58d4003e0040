"""Orchestrator policies and the `make_policy(spec)` factory.

Specs: "random", "scripted", "rules+<spec>" (the rules layer first), with optional
parameters after a colon, e.g. "scripted:noise=0.2,seed=3" (`PolicySpec`). Other parts register
more specs with `register_policy_factory("teacher", factory)` (an entry in the shared POLICIES
registry); the factory gets the text after the prefix and reads `key=value` parameters into a
dataclass with `solvers.params.read_params` (the one spec parser). A factory may also be named
by a "module:attr" string, imported on first use (specs whose code lives in a later layer, such
as the trained `model:DIR` and `majority:DIR`, registered here so every command has them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rollout.core.decision import Policy
from rollout.policies.rules import RulesFirst
from solvers.params import SpecError, is_param, read_params, split_spec
from solvers.registry import Registry, UnknownName

PolicyFactory = Callable[[str, int], Policy]  # (params text after "name:", default seed)

POLICIES: Registry[PolicyFactory] = Registry("policy")


class PolicySpecError(SpecError):
    pass


@dataclass(frozen=True)
class PolicySpec:
    """A parsed --policy spec: `[rules+]NAME[:PARAMS]`; NAME is a key of POLICIES, PARAMS the
    text its factory reads."""

    text: str
    name: str
    params: str = ""
    rules_first: bool = False

    @classmethod
    def parse(cls, spec: str) -> PolicySpec:
        text = spec.strip()
        if text.startswith("rules+"):
            inner = cls.parse(text[len("rules+"):])
            return cls(text, inner.name, inner.params, rules_first=True)
        name, params = split_spec(text)
        if name not in POLICIES:
            raise PolicySpecError.of(text, f"unknown policy {name!r}; prefix any with 'rules+'", field="name",
                                     known=POLICIES.names(), what="--policy")
        return cls(text, name, params)

    @property
    def inner(self) -> str:
        """The spec without its rules layer."""
        return self.text[len("rules+"):] if self.rules_first else self.text

    def error(self, exc: Exception) -> PolicySpecError:
        """`exc` (a factory's complaint) said of this spec, in the one spec-error shape."""
        if isinstance(exc, SpecError):
            return exc.within(self.text, what="--policy", cls=PolicySpecError)
        return PolicySpecError.of(self.text, str(exc), what="--policy")


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


@dataclass(frozen=True)
class RandomParams:
    seed: int | None = None  # None: the run's seed


@dataclass(frozen=True)
class ScriptedParams:
    noise: float = 0.1
    seed: int | None = None  # None: the run's seed


def _random_factory(params: str, seed: int) -> Policy:
    from rollout.policies.random import RandomPolicy

    p = read_params(RandomParams, params)
    return RandomPolicy(seed=seed if p.seed is None else p.seed)


def _scripted_factory(params: str, seed: int) -> Policy:
    from rollout.policies.scripted import ScriptedPolicy

    p = read_params(ScriptedParams, params)
    return ScriptedPolicy(noise=p.noise, seed=seed if p.seed is None else p.seed)


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


def make_policy(spec: str | PolicySpec, *, seed: int = 0) -> Policy:
    parsed = spec if isinstance(spec, PolicySpec) else PolicySpec.parse(spec)
    if parsed.rules_first:
        return RulesFirst(make_policy(parsed.inner, seed=seed))
    factory = _resolve(parsed.name)
    if factory is None:  # unregistered since the spec was parsed
        raise PolicySpecError.of(parsed.text, f"unknown policy {parsed.name!r}", field="name",
                                 known=POLICIES.names(), what="--policy")
    try:
        return factory(parsed.params, seed)
    except ValueError as exc:
        raise parsed.error(exc) from exc


def split_policy_list(text: str) -> list[str]:
    """`A,B,C` -> the specs; a `key=value` piece continues the previous spec's parameters
    (`teacher:model=sim,profile=stronger,scripted` is two specs)."""
    specs: list[str] = []
    for piece in (s.strip() for s in text.split(",")):
        if specs and is_param(piece):
            specs[-1] += "," + piece
        elif piece:
            specs.append(piece)
    return specs


def policy_specs() -> list[str]:
    return POLICIES.names()


__all__ = ["POLICIES", "PolicySpec", "PolicySpecError", "make_policy", "policy_specs", "register_policy_factory",
           "split_policy_list"]
