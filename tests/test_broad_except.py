"""No broad handler swallows: every `except Exception`, `except BaseException` or bare `except` in
the packages logs, counts or re-raises (read from the AST of every module).

What counts, anywhere in the handler's body (nested functions aside):
- re-raises: a `raise` statement (the same exception, or another one chained to it);
- logs: a call of a logger method (`log.warning(...)`, `self._log.exception(...)`, `logging.error(...)`)
  or `warnings.warn(...)`;
- counts: `solvers.errors.count_handled(where, exc)` (which also logs at debug level), a metrics
  counter's `.inc(...)`, or an
  increment by a literal `x += 1` (a counter the code reports: `stats.errors[kind] += 1`, `self.failures += 1`).
A handler that can do none of these goes in ALLOWED with the reason.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("solvers", "rollout", "train", "serve", "cluster")
BROAD = {"Exception", "BaseException"}
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}
COUNTER_CALLS = {"count_handled", "note_failure", "inc"}  # inc: a metrics counter (serve.metrics)

# (file, enclosing function) -> why its broad handler can neither log, count nor re-raise.
ALLOWED: dict[tuple[str, str], str] = {
    ("solvers/pool.py", "_Spawner._loop"):
        "the spawner thread hands the exception to the waiting caller, which raises it (start)",
    # The sandboxed solver worker runs stdlib only, without logging: what it catches goes back to
    # the client as the call's answer (or its stderr), where solvers.pool reports it.
    ("solvers/_worker.py", "_translate_then_search"):
        "the translator's crash on hostile input is printed into the planner's output: the call's result",
    ("solvers/_worker.py", "_child"):
        "the sandboxed child writes what failed to its stderr and exits: it must never return into the worker",
    ("solvers/_worker.py", "_warm_translator"):
        "a warm-up: when it fails the first call pays the translator's import instead; nothing is lost",
    ("solvers/_worker.py", "main"):
        "a broken request is answered {ok: false, error} to the client (solvers.pool turns it into the "
        "RunResult's error); the worker stays up",
    ("cluster/commands/solve_cli.py", "main"):
        "the one-shot `halo solve` edge: an internal error becomes one line on stderr and an exit code "
        "(importing logging would cost the one-shot call its start-up time)",
}


@dataclass(frozen=True)
class Swallower:
    file: str
    line: int
    function: str


def _is_broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((isinstance(t, ast.Name) and t.id in BROAD) or (isinstance(t, ast.Attribute) and t.attr in BROAD)
               for t in types)


def _receiver_name(node: ast.expr) -> str:
    """The name a chain like `logging.getLogger(__name__)` or `self.log` starts from."""
    while isinstance(node, ast.Attribute | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _is_log_call(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in LOG_METHODS:
        return False
    receiver = func.value
    name = receiver.attr if isinstance(receiver, ast.Attribute) else _receiver_name(receiver)
    return "log" in name.lower() or name == "warnings"


def _is_counter_call(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in COUNTER_CALLS


def _is_increment(node: ast.AST) -> bool:
    """`x += 1` (a literal count: adding a computed value back is bookkeeping, not a count)."""
    return (isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add)
            and isinstance(node.value, ast.Constant) and type(node.value.value) is int)


def _own_nodes(body: list[ast.stmt]) -> list[ast.AST]:
    """Every node of the handler's body, not counting nested functions and classes (they run elsewhere)."""
    found: list[ast.AST] = []
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        found.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            todo.extend(ast.iter_child_nodes(node))
    return found


def handles_visibly(handler: ast.ExceptHandler) -> bool:
    """Whether a handler's body re-raises, logs or counts."""
    for node in _own_nodes(handler.body):
        if isinstance(node, ast.Raise):
            return True
        if _is_increment(node):
            return True
        if isinstance(node, ast.Call) and (_is_log_call(node) or _is_counter_call(node)):
            return True
    return False


def swallowers(source: str, file: str = "<synthetic>") -> list[Swallower]:
    """The broad handlers of a module that neither log, count nor re-raise."""
    found: list[Swallower] = []

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = [*scope, child.name]
            if isinstance(child, ast.ExceptHandler) and _is_broad(child) and not handles_visibly(child):
                found.append(Swallower(file, child.lineno, ".".join(scope) or "<module>"))
            visit(child, inner)

    visit(ast.parse(source), [])
    return found


def _package_modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_no_broad_handler_swallows() -> None:
    found = [s for path in _package_modules()
             for s in swallowers(path.read_text(), str(path.relative_to(ROOT)))
             if (s.file, s.function) not in ALLOWED]
    assert not found, "broad handlers that neither log, count nor re-raise:\n" + "\n".join(
        f"  {s.file}:{s.line} in {s.function}" for s in found)


def test_every_allowance_is_still_needed() -> None:
    live = {(s.file, s.function) for path in _package_modules()
            for s in swallowers(path.read_text(), str(path.relative_to(ROOT)))}
    assert set(ALLOWED) <= live, f"allowances with no broad handler left: {sorted(set(ALLOWED) - live)}"


def _check(code: str) -> list[Swallower]:
    return swallowers(textwrap.dedent(code))


@pytest.mark.parametrize("code", [
    "try:\n    f()\nexcept Exception:\n    pass\n",
    "try:\n    f()\nexcept:\n    return_value = None\n",
    "try:\n    f()\nexcept (ValueError, BaseException) as exc:\n    result = str(exc)\n",
    "try:\n    f()\nexcept builtins.Exception:\n    time.sleep(1)\n",
    # a raise inside a nested function does not re-raise this exception
    "try:\n    f()\nexcept Exception:\n    def later():\n        raise\n",
    # `.error(` on something that is not a logger is not a log
    "try:\n    f()\nexcept Exception as exc:\n    self.result.error(exc)\n",
    # a decrement is not a count, nor is adding a value back
    "try:\n    f()\nexcept Exception:\n    budget -= 1\n",
    "try:\n    f()\nexcept Exception:\n    self._correction += correction\n",
])
def test_the_checker_finds_swallowers(code: str) -> None:
    assert len(_check(code)) == 1


@pytest.mark.parametrize("code", [
    "try:\n    f()\nexcept Exception:\n    cleanup()\n    raise\n",
    "try:\n    f()\nexcept Exception as exc:\n    raise Wrapped(str(exc)) from exc\n",
    "try:\n    f()\nexcept Exception:\n    log.warning('f failed')\n",
    "try:\n    f()\nexcept BaseException:\n    self._log.exception('f failed')\n",
    "try:\n    f()\nexcept Exception:\n    logging.getLogger(__name__).error('f failed')\n",
    "try:\n    f()\nexcept Exception:\n    warnings.warn('f failed')\n",
    "try:\n    f()\nexcept Exception as exc:\n    count_handled('here', exc)\n",
    "try:\n    f()\nexcept Exception:\n    stats.errors['f'] += 1\n",
    # narrow handlers are not this test's business
    "try:\n    f()\nexcept ValueError:\n    pass\n",
])
def test_the_checker_passes_visible_handlers(code: str) -> None:
    assert _check(code) == []


def test_the_checker_names_the_function() -> None:
    code = """
    class Pool:
        def run(self):
            try:
                f()
            except Exception:
                return None
    """
    assert _check(code) == [Swallower("<synthetic>", 6, "Pool.run")]
