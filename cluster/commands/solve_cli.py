"""`halo solve` and `halo validate`: one planner or validator call on files.

Kept to the standard library and `solvers` so a one-shot `halo solve` starts about as fast as
the stock Fast Downward driver: cluster/cli.py hands these two commands here before it imports
typer. The typer commands of cluster/commands/solve.py call the same functions.

Exit codes: 0 solved (and valid) / plan valid, 1 any other verdict or an input file refused
(category input_error), 2 a usage error. Nothing ever ends in a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

MAX_TIMEOUT_S = 86_400.0
MAX_FILE_MB = 1024.0


def planner_names() -> list[str]:
    """fd, temporal (POPF or Kairos, whichever is in force) and every other registered planner."""
    from solvers.planners import planning_names

    return planning_names()


def timeout_value(text: str) -> float:
    """A positive, finite number of seconds (inf and nan would disable the limit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]!r}") from None
    if not math.isfinite(value) or not 0.1 <= value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds from 0.1 to {MAX_TIMEOUT_S:g}, "
                                         f"got {text[:40]!r}")
    return value


def file_mb_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]!r}") from None
    if not math.isfinite(value) or not 0 < value <= MAX_FILE_MB:
        raise argparse.ArgumentTypeError(f"must be a number of MB from 0 to {MAX_FILE_MB:g}, got {text[:40]!r}")
    return value


def alias_names() -> list[str]:
    from solvers import fd

    return sorted({*fd.aliases(), "optimal"})


def alias_value(text: str) -> str:
    names = alias_names()
    if text not in names:
        raise argparse.ArgumentTypeError(f"unknown alias {text[:60]!r}; known: {', '.join(names)}")
    return text


def search_value(text: str) -> str:
    if not text.strip() or text.lstrip().startswith("-") or len(text) > 10_000:
        raise argparse.ArgumentTypeError("must be a Fast Downward search expression such as 'astar(lmcut())'")
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit 2 with the usage line, as argparse does
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def _common(parser: argparse.ArgumentParser) -> None:
    from solvers.inputs import DEFAULT_MAX_FILE_MB

    parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON")
    parser.add_argument("--timeout", type=timeout_value, default=10.0,
                        help="wall-clock limit of the whole call in seconds (default 10)")
    parser.add_argument("--max-file-mb", type=file_mb_value, default=DEFAULT_MAX_FILE_MB,
                        help=f"largest input file accepted (default {DEFAULT_MAX_FILE_MB:g} MB)")


def solve_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="halo solve", description="Plan a task; print the plan (and the validator's verdict).")
    parser.add_argument("domain", metavar="DOMAIN", help="PDDL domain file")
    parser.add_argument("problem", metavar="PROBLEM", help="PDDL problem file")
    names = planner_names()
    parser.add_argument("--planner", choices=names, default="fd", help=" | ".join(names))
    config = parser.add_mutually_exclusive_group()
    config.add_argument("--alias", type=alias_value, default=None,
                        help="Fast Downward configuration: lama-first (default), optimal (A* + LM-cut), "
                             "or any alias of the stock driver")
    config.add_argument("--search", type=search_value, default=None, help="a raw Fast Downward search string")
    parser.add_argument("--validate", action="store_true", help="check the plan with the validator")
    _common(parser)
    return parser


def validate_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="halo validate", description="Check a plan; print the typed verdict.")
    parser.add_argument("domain", metavar="DOMAIN", help="PDDL domain file")
    parser.add_argument("problem", metavar="PROBLEM", help="PDDL problem file")
    parser.add_argument("plan", metavar="PLAN", help="plan file (IPC format)")
    _common(parser)
    return parser


def _read(paths: list[tuple[str, str]], max_file_mb: float) -> tuple[list[str], str | None]:
    from solvers.inputs import InputFileError, read_text_file

    texts = []
    for path, role in paths:
        try:
            texts.append(read_text_file(path, max_bytes=int(max_file_mb * 1024 * 1024), role=role))
        except InputFileError as exc:
            return [], str(exc)
    return texts, None


def _emit(as_json: bool, data: dict, lines: list[str]) -> None:
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        print("\n".join(lines))


def _input_error(as_json: bool, key: str, message: str, extra: dict | None = None) -> int:
    data = {key: {"category": "input_error", "message": message}, **(extra or {})}
    _emit(as_json, data, [f"category: input_error  {message}"])
    return 1


def _verdict_lines(verdict: Any) -> list[str]:
    lines = [f"validator: {verdict.validator}  valid: {verdict.valid}  category: {verdict.category.value}"]
    if verdict.failing_step is not None:
        lines.append(f"failing step {verdict.failing_step}: {verdict.failing_action}")
    if verdict.unsatisfied:
        lines.append(f"unsatisfied precondition: {verdict.unsatisfied}")
    if verdict.unreached_goal:
        lines.append(f"unreached goal: {verdict.unreached_goal}")
    if not verdict.valid and verdict.message and not verdict.failing_step and not verdict.unreached_goal:
        where = f"{verdict.location}: " if verdict.location and not verdict.message.startswith(verdict.location) \
            else ""
        lines.append(f"{where}{verdict.message[:800]}")
    return lines


def run_solve(args: argparse.Namespace) -> int:
    import solvers

    t0 = time.monotonic()
    if args.planner != "fd" and (args.alias or args.search):
        print("halo solve: error: --alias and --search choose a Fast Downward configuration; they need "
              "--planner fd", file=sys.stderr)
        return 2
    unavailable = _not_installed(args.planner)
    if unavailable:
        print(f"halo solve: error: {unavailable}", file=sys.stderr)
        return 2
    texts, error = _read([(args.domain, "pddl"), (args.problem, "pddl")], args.max_file_mb)
    if error:
        return _input_error(args.as_json, "plan", error, {"validation": None})
    domain, problem = texts
    _worker_ready(t0 + args.timeout)
    remaining = max(0.05, args.timeout - (time.monotonic() - t0))
    result = solvers.plan(domain, problem, planner=args.planner, alias=args.alias or "lama-first",
                          search=args.search, limits=solvers.Limits(timeout_s=remaining))
    verdict = None
    if args.validate and result.ok:
        remaining = max(0.05, args.timeout - (time.monotonic() - t0))
        verdict = solvers.validate(domain, problem, result.plan_text, limits=solvers.Limits(timeout_s=remaining))
    result.wall_s = time.monotonic() - t0
    notes = [f"planner: {result.planner}  category: {result.category.value}  cost: {result.cost}  "
             f"wall: {result.wall_s:.3f}s"]
    if not result.ok:
        notes.append(result.message[:800] or result.output_tail[-800:])
    if verdict is not None:
        notes += _verdict_lines(verdict)
    if args.as_json:
        _emit(True, {"plan": result.to_dict(), "validation": verdict and verdict.to_dict()}, [])
    else:  # the plan alone on stdout (`halo solve ... > plan.txt`), what is said about it on stderr
        print("\n".join(notes), file=sys.stderr)
        if result.ok:
            print(result.plan_text.rstrip("\n"))
    return 0 if result.ok and (verdict is None or verdict.valid) else 1


def _not_installed(planner: str) -> str | None:
    """Why a planner named on the command line cannot run here (fd and temporal always try)."""
    if planner in ("fd", "temporal"):
        return None
    from solvers.planners import PLANNERS

    tool = PLANNERS.get(planner)
    return None if tool.available() else f"planner {planner!r} is not installed here ({tool.install})"


def run_validate(args: argparse.Namespace) -> int:
    import solvers

    t0 = time.monotonic()
    texts, error = _read([(args.domain, "pddl"), (args.problem, "pddl"), (args.plan, "plan")], args.max_file_mb)
    if error:
        return _input_error(args.as_json, "validation", error)
    domain, problem, plan = texts
    _worker_ready(t0 + args.timeout)
    remaining = max(0.05, args.timeout - (time.monotonic() - t0))
    verdict = solvers.validate(domain, problem, plan, limits=solvers.Limits(timeout_s=remaining))
    verdict.wall_s = time.monotonic() - t0
    _emit(args.as_json, {"validation": verdict.to_dict()}, _verdict_lines(verdict))
    return 0 if verdict.valid else 1


COMMANDS: dict[str, tuple[Callable[[], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]] = {
    "solve": (solve_parser, run_solve),
    "validate": (validate_parser, run_validate),
}


def main(command: str, argv: list[str]) -> int:
    """Parse and run one command; every failure is an exit code and a message, never a traceback."""
    make_parser, run = COMMANDS[command]
    try:
        args = make_parser().parse_args(argv)
        return run(args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    except KeyboardInterrupt:
        print(f"halo {command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug of ours: say so in one line instead of a traceback
        print(f"halo {command}: internal error: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        return 3


def one_shot(command: str, argv: list[str]) -> int:
    """`halo solve|validate` as its own process. It makes one call (two with --validate), so it
    keeps one worker, lets it skip the translator warm-up, and starts it at once: the sandbox
    and the worker's Python come up on one core while this process imports, parses and reads
    its files on the other."""
    os.environ.setdefault("HALO_SOLVER_WARM_UP", "0")
    os.environ.setdefault("HALO_SOLVER_WORKERS", "1")
    if not {"-h", "--help"} & set(argv):
        _start_worker()
    code = main(command, argv)
    from solvers import pool

    levels = {p.level for p in list(pool._pools.values())}
    if levels <= {"bwrap"}:
        # Every worker runs under bwrap --die-with-parent, whose sandbox vanishes with this
        # process: skip the polite shutdown and the interpreter's teardown (a visible share of a call).
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    return code


_warming: Any = None  # the thread starting the one-shot worker


def _start_worker() -> None:
    global _warming
    import threading

    _warming = threading.Thread(target=_warm, daemon=True, name="halo-solve-warm")
    _warming.start()


def _warm() -> None:
    """Start the worker; straight inside bubblewrap when it is installed and not turned off
    (its start proves bwrap works, so no separate probe runs). If that fails, the call goes
    the usual way: probe, then the level in force."""
    with contextlib.suppress(Exception):
        from solvers import pool, sandbox

        level = "bwrap" if sandbox.bwrap_path() and not sandbox.bwrap_forced_off() else None
        pool.get_pool(level).warm(1)


def _worker_ready(deadline: float) -> None:
    if _warming is not None:
        _warming.join(max(0.0, deadline - time.monotonic()))
