"""The one reader of `name:key=value,...` specs and the one error every spec raises.

A spec is a name, then optionally a colon and its parameters: `scripted:noise=0.2,seed=3`,
`sim:realtime=1,latency_ms=800`, `teacher:model=sim,profile=stronger`. `split_spec` separates the
name; `read_params` turns the parameters into a typed dataclass, whose fields are the valid keys
and whose annotations give the types (str, int, float, bool, each optionally `| None`; a field's
metadata may add `ge`, `le` or a `check`); `read_pairs` gives the raw pairs where the keys are not
fixed in advance (a generator's size knobs) or where `key!=value` excludes (a generated set's
filters). Nothing else in the project splits `key=value` text (tests/test_one_spec_parser.py).

Every problem is a `SpecError` (or the subclass the caller names), one line of one shape:
`<what> '<spec>': <problem> (known: <valid keys>)`, carrying the spec, the key and the valid keys.
The owners of the specs (rollout.llm.spec, rollout.policies, rollout.tasks, rollout.sim.spec)
build their typed specs with it. This module sits in the bottom layer, beside the shared Registry,
so every layer can use it; it imports only the error hierarchy (solvers/errors.py).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from solvers.errors import InputError

P = TypeVar("P")
E = TypeVar("E", bound="SpecError")

_TRUE = frozenset({"1", "true"})
_FALSE = frozenset({"0", "false"})


class SpecError(InputError, ValueError):
    """A spec that cannot be read: which spec, which key, what is wrong, the valid keys.

    Subclasses name the spec's owner (PolicySpecError, SimSpecError, TaskSpecError, ...); as
    InputErrors the command line answers each with exit code 2 and its one line.
    """

    spec: str = ""
    field: str = ""
    problem: str = ""
    known: tuple[str, ...] = ()
    what: str = ""

    @classmethod
    def of(cls: type[E], spec: str, problem: str, *, field: str = "", known: Sequence[str] = (),
           what: str = "") -> E:
        """The one shape: `<what> '<spec>': <problem> (known: k1, k2)`."""
        head = f"{what} {spec!r}" if what else repr(spec)
        line = f"{head}: {problem}" if spec else (f"{what}: {problem}" if what else problem)
        if known:
            line += f" (known: {', '.join(known)})"
        error = cls(line)
        error.spec, error.field, error.problem, error.known, error.what = spec, field, problem, tuple(known), what
        return error

    def within(self, spec: str, *, what: str = "", cls: type[E] | None = None) -> E:
        """The same problem said of the whole spec this one was part of (a policy's parameters
        -> the policy spec); a plain-message error keeps its message as the problem."""
        return (cls or type(self)).of(spec, self.problem or str(self), field=self.field, known=self.known,
                                      what=what or self.what)


class Pair(NamedTuple):
    key: str
    value: str
    negated: bool = False  # `key!=value` (only where the caller allows it)


def split_spec(spec: str) -> tuple[str, str]:
    """`name:rest` -> (name, rest); `name` alone -> (name, "")."""
    name, _, rest = spec.strip().partition(":")
    return name.strip(), rest


def is_param(piece: str) -> bool:
    """Whether `piece` is a `key=value` parameter rather than a spec of its own (`teacher:model=x`):
    a comma-separated list of specs continues the previous spec's parameters with it."""
    key, eq, _ = piece.partition("=")
    return bool(eq) and ":" not in key


def read_pairs(text: str, *, known: Sequence[str] | None = None, sep: str = ",", negatable: bool = False,
               spec: str = "", what: str = "", error: type[SpecError] = SpecError) -> list[Pair]:
    """`k=v,k=v` -> pairs in order; a part without `=` or a value, or a key outside `known`
    (when given), is `error`. `spec` names the whole spec in the message (default: `text`)."""
    spec = spec or text
    known_keys = tuple(known) if known is not None else ()
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(sep))):
        key, eq, value = (s.strip() for s in part.partition("="))
        negated = negatable and key.endswith("!")
        key = key[:-1].rstrip() if negated else key
        if not eq or not key or not value:
            raise error.of(spec, f"{part!r} must look like key=value", field=key, known=known_keys, what=what)
        pairs.append(Pair(key, value, negated))
    if known is not None:
        unknown = list(dict.fromkeys(p.key for p in pairs if p.key not in known_keys))
        if unknown:
            words = "parameter" if len(unknown) == 1 else "parameters"
            raise error.of(spec, f"unknown {words} {', '.join(map(repr, unknown))}", field=unknown[0],
                           known=known_keys, what=what)
    return pairs


def keys_of(cls: type) -> tuple[str, ...]:
    """The keys a parameter dataclass accepts: its fields, in order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def read_params(cls: type[P], text: str, *, spec: str = "", what: str = "",
                error: type[SpecError] = SpecError) -> P:
    """`k=v,k=v` -> `cls(k=typed v, ...)`: the dataclass's fields are the valid keys, its
    annotations the types; a key given twice keeps the last value. A ValueError of `cls` itself
    (a check across fields) is `error` too."""
    spec = spec or text
    known = keys_of(cls)
    hints = typing.get_type_hints(cls)
    meta = {f.name: f.metadata for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for pair in read_pairs(text, known=known, spec=spec, what=what, error=error):
        problem, value = _typed(pair, hints[pair.key], meta[pair.key])
        if problem:
            raise error.of(spec, problem, field=pair.key, known=known, what=what)
        values[pair.key] = value
    try:
        return cls(**values)
    except ValueError as exc:
        raise error.of(spec, str(exc), known=known, what=what) from None


def convert(key: str, raw: str, kind: type) -> tuple[str, Any]:
    """("", value) for `raw` read as `kind` (str, int, float or bool), else (the problem, None)."""
    if kind is str:
        return "", raw
    if kind is bool:
        word = raw.lower()
        if word in _TRUE | _FALSE:
            return "", word in _TRUE
        return f"{key} must be 0 or 1 (or true/false), got {raw!r}", None
    if kind is int:
        try:
            return "", int(raw)
        except ValueError:
            return f"{key} must be an integer, got {raw!r}", None
    if kind is float:
        try:
            return "", float(raw)
        except ValueError:
            return f"{key} must be a number, got {raw!r}", None
    raise TypeError(f"a spec parameter cannot be of type {kind!r} ({key})")


def _typed(pair: Pair, annotation: Any, meta: typing.Mapping[str, Any]) -> tuple[str, Any]:
    problem, value = convert(pair.key, pair.value, _plain(annotation))
    if problem:
        return problem, None
    if "ge" in meta and not value >= meta["ge"]:  # `not >=`: NaN fails too
        return f"{pair.key} must be >= {meta['ge']}, got {pair.value!r}", None
    if "le" in meta and not value <= meta["le"]:
        return f"{pair.key} must be <= {meta['le']}, got {pair.value!r}", None
    check: Callable[[Any], str] | None = meta.get("check")
    if check is not None and (problem := check(value)):
        return f"{pair.key} {problem}, got {pair.value!r}", None
    return "", value


def _plain(annotation: Any) -> type:
    """`T | None` -> T."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


__all__ = ["Pair", "SpecError", "convert", "is_param", "keys_of", "read_pairs", "read_params", "split_spec"]
