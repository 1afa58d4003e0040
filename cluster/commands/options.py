"""A command's options declared once, as fields of small dataclasses, and the typer command built
from them.

    @dataclass(kw_only=True)
    class Inputs:
        tasks: str = option("planbench:all", "--tasks", help="task spec")
        seed: int = option(0, "--seed")

    def report(inputs: Inputs) -> None: ...          # a plain module-level function

    app.command("report")(command(report, Inputs))

The command's parameters are the groups' fields in order; typer parses them as usual and the
function gets one instance per group, so a config is built from a group in one step
(`SomeConfig(**asdict(group))`) instead of copying every option by hand.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import typer

R = TypeVar("R")
_INFO = "typer"  # the field metadata key that holds the typer.Option / typer.Argument


def option(default: Any, *param_decls: str, **kwargs: Any) -> Any:
    """A dataclass field parsed as `typer.Option(default, *param_decls, **kwargs)`; `...`: required."""
    info = typer.Option(default, *param_decls, **kwargs)
    if default is ...:
        return dataclasses.field(metadata={_INFO: info})
    return dataclasses.field(default=default, metadata={_INFO: info})


def argument(default: Any, **kwargs: Any) -> Any:
    """A dataclass field parsed as a positional `typer.Argument(default, **kwargs)`."""
    info = typer.Argument(default, **kwargs)
    if default is ...:
        return dataclasses.field(metadata={_INFO: info})
    return dataclasses.field(default=default, metadata={_INFO: info})


def command(run: Callable[..., R], *groups: type) -> Callable[..., R]:
    """A function typer can register: its parameters are the groups' fields; calling it calls
    `run(group_1(...), group_2(...), ...)`. Help text and name come from `run`."""
    params: list[inspect.Parameter] = []
    for group in groups:
        hints = typing.get_type_hints(group)
        for f in dataclasses.fields(group):
            params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.metadata[_INFO],
                                            annotation=hints[f.name]))
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"{run.__name__}: an option appears in two groups: {names}")

    @functools.wraps(run)
    def cli(**values: Any) -> R:
        return run(*(group(**{f.name: values[f.name] for f in dataclasses.fields(group)}) for group in groups))

    del cli.__wrapped__  # typer must see the signature below, not run's
    cli.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    cli.__annotations__ = {p.name: p.annotation for p in params}
    return cli
