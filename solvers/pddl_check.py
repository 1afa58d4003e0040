"""The strict static check of a domain/problem pair, run before any planner or validator.

Planners disagree on PDDL that is not well-formed (Kairos plans a problem that uses a predicate
the domain never declares; Fast Downward rejects it), so acceptance must not depend on which
one ran. This check is the common floor: every predicate, function, type, constant/object used
is declared, with the right arity and compatible types; the problem names its domain; the
:requirements cover what is used. Anything it does not understand it leaves to the planner
(syntax errors, unknown requirements, unsupported features keep the planner's own category),
so it only ever turns a would-be answer into a parse error on PDDL that is definitely wrong.
For a validation it also checks the plan's steps (`check_plan`: action, arity, objects, types).
When the check itself breaks it raises CheckFailed: the gate refuses, it never reads as "no error".
"""

from __future__ import annotations

import collections
import copy
import gc
import logging
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from solvers.results import ErrorCategory

# Stdlib only at import time: the sandboxed solver worker (solvers/_worker.py) loads this file by
# its path and runs the check there, next to the planner, under the sandbox.

VERSION = "4"  # part of the result cache's key: bump when the check's verdicts change
DOMAIN_FILE, PROBLEM_FILE, PLAN_FILE = "domain.pddl", "problem.pddl", "plan.txt"
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
# Builtin numeric functions; `total-cost` is not builtin (it must be declared under
# :action-costs), `total-time` is the metric's makespan.
_BUILTIN_FUNCTIONS = {"total-time"}
_COMPARISONS = {"<", ">", "<=", ">="}
_ASSIGN_OPS = {"increase", "decrease", "assign", "scale-up", "scale-down"}
_ARITH = {"+", "-", "*", "/"}

# What each requirement flag grants (PDDL 3.1 implications).
_IMPLIES: dict[str, set[str]] = {
    ":adl": {":strips", ":typing", ":negative-preconditions", ":disjunctive-preconditions", ":equality",
             ":existential-preconditions", ":universal-preconditions", ":conditional-effects"},
    ":quantified-preconditions": {":existential-preconditions", ":universal-preconditions"},
    ":fluents": {":numeric-fluents", ":object-fluents"},
    ":numeric-fluents": {":action-costs"},
    ":timed-initial-literals": {":durative-actions"},
    ":duration-inequalities": {":durative-actions"},
    ":continuous-effects": {":durative-actions"},
}


Tok = str  # tokens are plain interned strings; their positions live in the parent Node


class Node(list):
    """A parenthesised list; `at` is its own position, `pos[i]` that of child i (line << 32 | col).
    No per-token objects: a huge task is built and freed fast enough to keep the time limit."""

    __slots__ = ("at", "pos")

    def __init__(self, items: list | tuple = ()) -> None:
        super().__init__(items)
        self.at = -1  # offset in the text; -1: not from the text
        self.pos: list[int] = []


@dataclass(frozen=True)
class CheckError:
    file: str
    line: int
    col: int
    code: str
    message: str
    step: int = 0  # a plan step that cannot apply (file PLAN_FILE): its 1-based number
    action: str = ""  # and the step as written, "(name arg ...)"

    @property
    def category(self) -> ErrorCategory:
        from solvers.results import ErrorCategory

        if self.file == PLAN_FILE:
            return ErrorCategory.PLAN_INVALID  # the step cannot apply, as a validator says of it
        return ErrorCategory.PARSE_ERROR_DOMAIN if self.file == DOMAIN_FILE else ErrorCategory.PARSE_ERROR_PROBLEM

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> CheckError:
        return cls(str(data["file"]), int(data["line"]), int(data["col"]), str(data["code"]), str(data["message"]),
                   int(data.get("step", 0)), str(data.get("action", "")))

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def __str__(self) -> str:
        return f"{self.location}: {self.message} [{self.code}]"

    @property
    def diagnostic(self) -> str:
        """The line in Kairos' diagnostic format (`FILE:LINE:COL: error: MESSAGE [family.code]`,
        the same codes as `kairos check`), so readers of validator output see one format."""
        return f"{self.location}: error: {self.message} [{self.code}]"


class CheckTimeout(Exception):
    """The deadline passed during the check (a huge domain); the call is out of time."""


class CheckFailed(Exception):
    """The check itself broke (a bug in it, not in the task). The gate must refuse to judge: such
    a verdict is never cached, never read as "no error", and is counted and logged."""


_failures = 0
_log = logging.getLogger("halo.pddl_check")


def failures() -> int:
    """How many times the check has broken in this process (see CheckFailed)."""
    return _failures


def note_failure(message: str) -> None:
    """Count and log one breakage of the check (here, or reported by the sandboxed worker)."""
    global _failures
    _failures += 1
    _log.error("%s", message)


def _broke(exc: BaseException, where: str) -> CheckFailed:
    message = f"the strict check broke on the {where}: {type(exc).__name__}: {exc}"[:500]
    if __name__ != "halo_pddl_check":  # in the worker, the client counts what it reports
        note_failure(message)
    return CheckFailed(message)


def _too_deep(file: str) -> CheckError:
    return CheckError(file, 1, 1, "parse.too_deep", "the file is nested too deeply to be a PDDL task")


def unbalanced(text: str, file: str) -> CheckError | None:
    """Where the parentheses of `text` stop balancing, by counting (no parse: safe on any input).
    For VAL, which reads no location into its syntax errors and crashes on a problem's."""
    depth, line, line_start, first_open = 0, 1, 0, (1, 1)
    for m in re.finditer(r";[^\n]*|[()\n]", text):
        char = m.group()
        if char == "\n":
            line, line_start = line + 1, m.end()
        elif char == "(":
            if depth == 0:
                first_open = (line, m.start() - line_start + 1)
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return CheckError(file, line, m.start() - line_start + 1, "parse.unexpected_token",
                                  "unexpected ')': nothing is open here")
    if depth > 0:
        return CheckError(file, *first_open, "parse.unclosed", f"'(' never closed ({depth} unclosed at the end)")
    return None


class _Fail(Exception):
    def __init__(self, error: CheckError):
        self.error = error


def _unbalanced_at_end(file: str) -> CheckError:
    """A fallback where the counting and the parse disagree on where the imbalance is."""
    return CheckError(file, 1, 1, "parse.unclosed", "the parentheses do not balance")


class _Skip(Exception):
    """The text is not something this check understands: leave the verdict to the planner."""


_LEXEME = re.compile(r";[^\n]*|[()]|[^\s()]+")


def _parse(text: str, deadline: float | None = None, file: str = DOMAIN_FILE) -> Node:
    """Nested lists of lower-cased tokens; each token and list knows its offset in the text (turned
    into line:col only for a diagnostic, by _Checker.line_col). Parentheses that do not balance are
    a definite error for every program (POPF dies on them, VAL names no place): _Fail, not _Skip."""
    if deadline is not None and time.monotonic() > deadline:
        raise CheckTimeout
    root = Node()
    stack = [root]
    parent = root
    intern = sys.intern
    tokens = 0
    for m in _LEXEME.finditer(text.lower()):
        tokens += 1
        if deadline is not None and not tokens & 4095 and time.monotonic() > deadline:
            raise CheckTimeout  # every 4,096 tokens: a flat 6M-word list has no parentheses to count
        value = m.group()
        first = value[0]
        if first == ";":
            continue
        if first == "(":
            node = Node()
            node.at = start = m.start()
            parent.append(node)
            parent.pos.append(start)
            stack.append(node)
            parent = node
        elif first == ")":
            if len(stack) == 1:
                raise _Fail(unbalanced(text, file) or _unbalanced_at_end(file))
            stack.pop()
            parent = stack[-1]
        elif "?" in value[1:]:  # the translator splits "?x" off a preceding word; so do we
            offset = 0
            start = m.start()
            for part in value.replace("?", " ?").split():
                offset = value.index(part, offset)
                parent.append(intern(part))
                parent.pos.append(start + offset)
        else:
            parent.append(intern(value))
            parent.pos.append(m.start())
    if len(stack) != 1:
        raise _Fail(unbalanced(text, file) or _unbalanced_at_end(file))
    if len(root) != 1 or not isinstance(root[0], Node):
        raise _Skip
    top = root[0]
    if not top or top[0] != "define":
        raise _Skip
    return top


def _pos(item: Tok | Node, node: Node | None = None) -> int:
    """The offset of `item` in its text (-1: unknown)."""
    if isinstance(item, Node):
        return item.at
    if node is not None:
        for i, child in enumerate(node):
            if child is item or (isinstance(child, str) and child == item):
                if i < len(node.pos):
                    return node.pos[i]
                break
        return node.at
    return -1


class _Types:
    def __init__(self) -> None:
        self.parents: dict[str, set[str]] = {"object": set(), "number": set()}
        # Every argument of every init fact asks these; a domain declares a handful of types, and
        # the answers are kept until a declaration changes them.
        self._ancestors: dict[str, frozenset[str]] = {}
        self._answers: dict[tuple[bool, tuple[str, ...], tuple[str, ...]], bool] = {}

    def declare(self, name: str, parents: tuple[str, ...] = ()) -> None:
        self.parents.setdefault(name, set()).update(parents)
        self._ancestors.clear()
        self._answers.clear()

    def declared(self, name: str) -> bool:
        return name in self.parents

    def ancestors(self, name: str) -> frozenset[str]:
        found = self._ancestors.get(name)
        if found is None:
            seen, todo = {name}, [name]
            while todo:
                for parent in self.parents.get(todo.pop(), ()):
                    if parent not in seen:
                        seen.add(parent)
                        todo.append(parent)
            found = self._ancestors[name] = frozenset(seen | {"object"})
        return found

    def subtype(self, have: tuple[str, ...], want: tuple[str, ...]) -> bool:
        """Every type `have` may be is one of `want` or below it."""
        key = (True, have, want)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = all(any(w in self.ancestors(h) for w in want) for h in have)
        return answer

    def compatible(self, have: tuple[str, ...], want: tuple[str, ...]) -> bool:
        """Some value could satisfy both (a variable of a supertype narrowed by the atom is legal)."""
        key = (False, have, want)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = any(w in self.ancestors(h) or h in self.ancestors(w)
                                              for h in have for w in want)
        return answer


def _sections(top: Node, kind: str) -> dict[str, list[Node]]:
    """`(define (KIND name) (:section ...) ...)` grouped by section keyword; anything else is not ours
    to judge (_Skip leaves it to the planner)."""
    if len(top) < 2 or not isinstance(top[1], Node) or len(top[1]) != 2 or top[1][0] != kind:
        raise _Skip
    sections = [s for s in top[2:] if isinstance(s, Node) and s and isinstance(s[0], Tok)]
    if len(sections) != len(top) - 2:
        raise _Skip
    by_kind: dict[str, list[Node]] = {}
    for s in sections:
        by_kind.setdefault(str(s[0]), []).append(s)
    return by_kind


class _Checker:
    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.file = DOMAIN_FILE
        self.text = ""  # of the file being checked, for line:col of a diagnostic
        self.types = _Types()
        self.typing = False
        self.predicates: dict[str, list[tuple[str, ...]]] = {}
        self.functions: dict[str, list[tuple[str, ...]]] = {}
        self.constants: dict[str, tuple[str, ...]] = {}
        self.objects: dict[str, tuple[str, ...]] = {}
        self.requirements: set[str] = set()
        self.used: dict[str, tuple[int, int, str]] = {}
        self.domain_name = ""
        self.in_effect = False
        self.actions: dict[str, list[tuple[str, ...]]] = {}  # name -> parameter types, for plan steps

    def for_problem(self, deadline: float | None) -> _Checker:
        """A copy for one problem; the cached domain state is never changed."""
        other = copy.copy(self)
        other.deadline = deadline
        other.objects, other.used, other.requirements = {}, dict(self.used), set(self.requirements)
        return other

    def tick(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise CheckTimeout

    # ------------------------------------------------------------ helpers

    def line_col(self, offset: int) -> tuple[int, int]:
        if offset < 0:
            return 1, 1
        return self.text.count("\n", 0, offset) + 1, offset - self.text.rfind("\n", 0, offset)

    def fail(self, at: Tok | Node, code: str, message: str, node: Node | None = None) -> None:
        line, col = self.line_col(_pos(at, node))
        raise _Fail(CheckError(self.file, line, col, code, message))

    def use(self, requirement: str, at: Tok | Node, node: Node | None = None) -> None:
        if requirement not in self.used:
            line, col = self.line_col(_pos(at, node))
            self.used[requirement] = (line, col, self.file)

    def type_name(self, item: Tok | Node, node: Node) -> tuple[str, ...]:
        if isinstance(item, Node):
            if not item or item[0] != "either" or not all(isinstance(x, Tok) for x in item[1:]):
                raise _Skip
            names = tuple(str(x) for x in item[1:])
            for x in item[1:]:
                self.check_type_declared(x, node)
            return names
        self.check_type_declared(item, node)
        return (str(item),)

    def check_type_declared(self, tok: Tok | Node, node: Node) -> None:
        self.use(":typing", tok, node)
        if not self.types.declared(tok):
            self.fail(tok, "semantic.unknown_type", f"undeclared type '{tok}'", node)

    def typed_list(self, items: list, node: Node, *, declare_types: bool = False) -> list[tuple[Tok, tuple[str, ...]]]:
        out: list[tuple[Tok, tuple[str, ...]]] = []
        pending: list[Tok] = []
        i = 0
        while i < len(items):
            if not i & 4095:
                self.tick()
            item = items[i]
            if item == "-":
                if i + 1 >= len(items):
                    raise _Skip
                target = items[i + 1]
                if declare_types:
                    parents = (str(target),) if isinstance(target, Tok) else tuple(str(x) for x in target[1:])
                    for name in pending:
                        self.types.declare(name, parents)
                    for parent in parents:
                        self.types.declare(parent)
                    kind: tuple[str, ...] = parents
                else:
                    kind = self.type_name(target, node)
                out += [(name, kind) for name in pending]
                pending = []
                i += 2
                continue
            if not isinstance(item, Tok):
                raise _Skip
            pending.append(item)
            i += 1
        if declare_types:
            for name in pending:
                self.types.declare(name)
        out += [(name, ("object",)) for name in pending]
        return out

    def variables(self, item: object, node: Node) -> dict[str, tuple[str, ...]]:
        return dict(self.signature(item, node))

    def signature(self, item: object, node: Node) -> list[tuple[str, tuple[str, ...]]]:
        """Parameters in order; a name may repeat in a declaration (logistics' `(in ?obj ?obj)`)."""
        if not isinstance(item, Node):
            raise _Skip
        found = []
        for name, kind in self.typed_list(list(item), node):
            if not name.startswith("?"):
                raise _Skip
            found.append((str(name), kind))
        return found

    def kinds(self, item: Node, node: Node) -> list[tuple[str, ...]]:
        return [kind for _, kind in self.signature(Node(item), node)]

    # ------------------------------------------------------------ terms and atoms

    def term_type(self, tok: object, env: dict[str, tuple[str, ...]], node: Node) -> tuple[str, ...] | None:
        if isinstance(tok, Node):
            return None  # an object fluent: beyond this check
        assert isinstance(tok, Tok)
        if tok.startswith("?"):
            if tok not in env:
                self.fail(tok, "semantic.unbound_variable", f"variable '{tok}' is not a parameter here", node)
            return env[tok]
        if _NUMBER.match(tok):
            return None
        if tok in self.constants:
            return self.constants[tok]
        if tok in self.objects:
            return self.objects[tok]
        what = "constant" if self.file == DOMAIN_FILE else "object"
        self.fail(tok, "semantic.unknown_object", f"undeclared {what} '{tok}'", node)
        return None

    def args(self, node: Node, signature: list[tuple[str, ...]], kind: str, env: dict) -> None:
        head, args = node[0], node[1:]
        if len(args) != len(signature):
            self.fail(head, "semantic.arity_mismatch",
                      f"{kind} '{head}' takes {len(signature)} argument(s), got {len(args)}", node)
        for arg, want in zip(args, signature, strict=True):
            have = self.term_type(arg, env, node)
            if have is None or not self.typing:
                continue
            ok = self.types.compatible(have, want) if str(arg).startswith("?") else self.types.subtype(have, want)
            if not ok:
                self.fail(arg, "semantic.type_mismatch", f"argument '{arg}' of {kind} '{head}' is of type "
                          f"{'/'.join(have)}, not {'/'.join(want)}", node)

    def atom(self, node: Node, env: dict) -> None:
        head = node[0]
        if not isinstance(head, Tok):
            raise _Skip
        if head not in self.predicates:
            self.fail(head, "semantic.unknown_predicate", f"undeclared predicate '{head}'", node)
        self.args(node, self.predicates[head], "predicate", env)

    def fexp(self, item: object, env: dict, node: Node) -> None:
        """A numeric expression."""
        if isinstance(item, Tok):
            if item.startswith("?"):
                self.term_type(item, env, node)
            elif item != "#t" and not _NUMBER.match(item):
                self.fail(item, "semantic.bad_number", f"'{item}' is not a number or a function term", node)
            return
        if not isinstance(item, Node) or not item:
            raise _Skip
        head = item[0]
        if not isinstance(head, Tok):
            raise _Skip
        if head in _ARITH and len(item) >= 2:
            for sub in item[1:]:
                self.fexp(sub, env, item)
            return
        self.function_term(item, env)

    def function_term(self, node: Node, env: dict) -> None:
        head = node[0]
        if not isinstance(head, Tok):
            raise _Skip
        if head in _BUILTIN_FUNCTIONS and len(node) == 1:
            return
        if head not in self.functions:
            self.fail(head, "semantic.unknown_function", f"undeclared function '{head}'", node)
        self.use(":action-costs" if head == "total-cost" else ":numeric-fluents", head, node)
        self.args(node, self.functions[head], "function", env)

    # ------------------------------------------------------------ formulas and effects

    def gd(self, node: object, env: dict) -> None:
        if not isinstance(node, Node):
            raise _Skip
        if not node:
            return  # "()" is the empty condition
        head = node[0]
        if not isinstance(head, Tok):
            raise _Skip
        if head == "and":
            for sub in node[1:]:
                self.gd(sub, env)
        elif head == "or" or head == "imply":
            self.use(":disjunctive-preconditions", head, node)
            for sub in node[1:]:
                self.gd(sub, env)
        elif head == "not" and len(node) == 2:
            inner = node[1]
            if isinstance(inner, Node) and inner and isinstance(inner[0], Tok) and inner[0] in self.predicates:
                self.use(":negative-preconditions", head, node)
            elif isinstance(inner, Node) and inner and inner[0] not in ("=", *_COMPARISONS):
                self.use(":disjunctive-preconditions", head, node)
            self.gd(inner, env)
        elif head in ("exists", "forall") and len(node) == 3:
            self.use(":existential-preconditions" if head == "exists" else ":universal-preconditions", head, node)
            self.gd(node[2], {**env, **self.variables(node[1], node)})
        elif head == "preference" and len(node) in (2, 3):
            self.gd(node[-1], env)
        elif head in ("at", "over") and len(node) == 3 and node[1] in ("start", "end", "all") \
                and isinstance(node[2], Node):
            self.gd(node[2], env)
        elif head in _COMPARISONS and len(node) == 3:
            self.use(":numeric-fluents", head, node)
            self.fexp(node[1], env, node)
            self.fexp(node[2], env, node)
        elif head == "=" and len(node) == 3:
            if isinstance(node[1], Tok) and isinstance(node[2], Tok) and not _NUMBER.match(node[2]) \
                    and node[1] != "?duration":
                self.use(":equality", head, node)
                self.term_type(node[1], env, node)
                self.term_type(node[2], env, node)
            else:
                self.use(":numeric-fluents", head, node)
                self.fexp(node[1], env, node)
                self.fexp(node[2], env, node)
        else:
            self.atom(node, env)

    def effect(self, node: object, env: dict) -> None:
        if not isinstance(node, Node):
            raise _Skip
        if not node:
            return
        head = node[0]
        if not isinstance(head, Tok):
            raise _Skip
        if head == "and":
            for sub in node[1:]:
                self.effect(sub, env)
        elif head == "not" and len(node) == 2 and isinstance(node[1], Node):
            self.atom(node[1], env)
        elif head == "forall" and len(node) == 3:
            self.use(":conditional-effects", head, node)
            self.effect(node[2], {**env, **self.variables(node[1], node)})
        elif head == "when" and len(node) == 3:
            self.use(":conditional-effects", head, node)
            self.gd(node[1], env)
            self.effect(node[2], env)
        elif head in ("at",) and len(node) == 3 and node[1] in ("start", "end") and isinstance(node[2], Node):
            self.effect(node[2], env)
        elif head in _ASSIGN_OPS and len(node) == 3 and isinstance(node[1], Node):
            self.function_term(node[1], env)
            self.fexp(node[2], env, node)
        else:
            self.atom(node, env)

    # ------------------------------------------------------------ sections

    def domain(self, top: Node) -> None:
        self.file = DOMAIN_FILE
        by_kind = _sections(top, "domain")
        self.domain_name = str(top[1][1])
        for s in by_kind.get(":requirements", []):
            self.requirements.update(str(x) for x in s[1:])
        for s in by_kind.get(":types", []):
            self.typing = True
            self.use(":typing", s[0], s)
            self.typed_list(list(s[1:]), s, declare_types=True)
        for s in by_kind.get(":constants", []):
            for name, kind in self.typed_list(list(s[1:]), s):
                self.constants[str(name)] = kind
        for s in by_kind.get(":predicates", []):
            for p in s[1:]:
                if not isinstance(p, Node) or not p or not isinstance(p[0], Tok):
                    raise _Skip
                self.predicates[str(p[0])] = self.kinds(p[1:], p)
        for s in by_kind.get(":functions", []):
            items = [x for x in s[1:]]
            i = 0
            while i < len(items):
                f = items[i]
                if f == "-":  # the result type ("number", or an object type for object fluents)
                    i += 2
                    continue
                if not isinstance(f, Node) or not f or not isinstance(f[0], Tok):
                    raise _Skip
                self.functions[str(f[0])] = self.kinds(f[1:], f)
                i += 1
        for s in by_kind.get(":derived", []):
            self.use(":derived-predicates", s[0], s)
            if len(s) != 3 or not isinstance(s[1], Node) or not s[1]:
                raise _Skip
            head = s[1]
            if head[0] not in self.predicates:
                self.predicates[str(head[0])] = self.kinds(head[1:], head)
        for s in by_kind.get(":derived", []):
            head = s[1]
            env = self.variables(Node(head[1:]), head)
            if self.kinds(head[1:], head) != self.predicates[str(head[0])]:
                self.fail(head[0], "semantic.arity_mismatch",
                          f"derived predicate '{head[0]}' does not match its declaration", head)
            self.gd(s[2], env)
        for kind in (":action", ":durative-action"):
            for s in by_kind.get(kind, []):
                self.action(s, durative=kind == ":durative-action")

    def action(self, s: Node, durative: bool) -> None:
        self.tick()
        if durative:
            self.use(":durative-actions", s[0], s)
        if len(s) < 2 or not isinstance(s[1], Tok) or len(s) % 2:
            raise _Skip
        fields = {str(s[i]): s[i + 1] for i in range(2, len(s), 2)}
        params = self.signature(fields.get(":parameters", Node()), s)
        self.actions[str(s[1])] = [kind for _, kind in params]
        env = dict(params)
        if durative:
            env["?duration"] = ("number",)
            if ":duration" in fields:
                self.gd(fields[":duration"], env)
        pre = fields.get(":condition" if durative else ":precondition")
        if pre is not None:
            self.gd(pre, env)
        if ":effect" in fields:
            self.effect(fields[":effect"], env)

    def problem(self, top: Node) -> None:
        self.file = PROBLEM_FILE
        by_kind = _sections(top, "problem")
        for s in by_kind.get(":domain", []):
            if len(s) == 2 and isinstance(s[1], Tok) and s[1] != self.domain_name:
                self.fail(s[1], "semantic.domain_name_mismatch",
                          f"the problem is for domain '{s[1]}', but the domain is '{self.domain_name}'", s)
        for s in by_kind.get(":requirements", []):
            self.requirements.update(str(x) for x in s[1:])
        for s in by_kind.get(":objects", []):
            for name, kind in self.typed_list(list(s[1:]), s):
                self.objects[str(name)] = kind
        for s in by_kind.get(":init", []):
            for i, fact in enumerate(s[1:]):
                if not i % 1024:
                    self.tick()
                self.init_fact(fact)
        for s in by_kind.get(":goal", []):
            if len(s) != 2:
                raise _Skip
            self.gd(s[1], {})
        for s in by_kind.get(":metric", []):
            if len(s) == 3 and s[1] in ("minimize", "maximize"):
                self.metric(s[2])

    def metric(self, item: object) -> None:
        if isinstance(item, Node) and item and not isinstance(item[0], Tok):
            raise _Skip
        if isinstance(item, Node) and item and item[0] == "is-violated":
            return
        if isinstance(item, Node) and item and item[0] in _ARITH:
            for sub in item[1:]:
                self.metric(sub)
            return
        if isinstance(item, Node) and item:
            self.function_term(item, {})

    def init_fact(self, fact: object) -> None:
        if not isinstance(fact, Node) or not fact:
            raise _Skip
        head = fact[0]
        if head == "at" and len(fact) == 3 and isinstance(fact[1], Tok) and _NUMBER.match(fact[1]) \
                and isinstance(fact[2], Node):
            self.init_fact(fact[2])  # a timed initial literal
        elif head == "not" and len(fact) == 2 and isinstance(fact[1], Node):
            self.atom(fact[1], {})
        elif head == "=" and len(fact) == 3 and isinstance(fact[1], Node):
            self.function_term(fact[1], {})
        else:
            self.atom(fact, {})

    def requirements_cover(self) -> None:
        granted = set(self.requirements) | {":strips"}
        for flag in list(granted):
            granted |= _IMPLIES.get(flag, set())
        for flag in list(granted):
            granted |= _IMPLIES.get(flag, set())
        for flag, (line, col, file) in self.used.items():
            if flag not in granted:
                raise _Fail(CheckError(file, line, col, "semantic.missing_requirement",
                                       f"uses {flag.lstrip(':')} but :requirements does not declare {flag}"))


# Requirements whose absence Fast Downward, VAL and the IPC files themselves tolerate (many
# competition domains use `=` or `not` without declaring them): the check does not demand them.
LENIENT_REQUIREMENTS = frozenset({":equality", ":negative-preconditions", ":typing", ":action-costs",
                                  ":disjunctive-preconditions", ":existential-preconditions",
                                  ":universal-preconditions", ":conditional-effects", ":numeric-fluents"})


_DOMAINS: collections.OrderedDict[str, _Checker | CheckError | None] = collections.OrderedDict()
_DOMAINS_LOCK = threading.Lock()
_DOMAIN_CACHE_SIZE = 1024
# Verdicts per (domain, problem): a refinement step plans and then validates the same pair, and a
# rollout worker meets the same pair again in later steps; a verdict is a few hundred bytes.
_PAIRS: collections.OrderedDict[tuple[str, str], CheckError | None] = collections.OrderedDict()
_PAIR_CACHE_SIZE = 4096


def _domain_state(domain: str, deadline: float | None) -> _Checker | CheckError | None:
    """The checked domain (cached by its text: a rollout checks the same domain again and again)."""
    with _DOMAINS_LOCK:
        if domain in _DOMAINS:
            _DOMAINS.move_to_end(domain)
            return _DOMAINS[domain]
    checker = _Checker(deadline)
    state: _Checker | CheckError | None = checker
    checker.text = domain
    try:
        checker.domain(_parse(domain, deadline))
    except _Fail as exc:
        state = exc.error
    except CheckTimeout:
        raise
    except _Skip:  # beyond this check: the planner judges
        state = None
    except RecursionError:
        state = _too_deep(DOMAIN_FILE)
    except Exception as exc:  # a bug here: refuse to judge, remember nothing
        raise _broke(exc, "domain") from exc
    checker.deadline = None
    with _DOMAINS_LOCK:
        _DOMAINS[domain] = state
        while len(_DOMAINS) > _DOMAIN_CACHE_SIZE:
            _DOMAINS.popitem(last=False)
    return state


def check(domain: str, problem: str, deadline: float | None = None) -> CheckError | None:
    """The first definite error of the pair, or None (well-formed, or beyond this check).
    Raises CheckTimeout when time.monotonic() passes `deadline` (a timeout is not remembered) and
    CheckFailed when the check itself breaks (not remembered either)."""
    known, verdict = recall(domain, problem)
    if known:
        return verdict
    verdict = _check_pair(domain, problem, deadline)
    remember(domain, problem, verdict)
    return verdict


_UNKNOWN = object()


def recall(domain: str, problem: str) -> tuple[bool, CheckError | None]:
    """(True, verdict) when this process has judged the pair before, else (False, None)."""
    with _DOMAINS_LOCK:
        verdict = _PAIRS.get((domain, problem), _UNKNOWN)
        if verdict is _UNKNOWN:
            return False, None
        _PAIRS.move_to_end((domain, problem))
        return True, verdict  # type: ignore[return-value]


def remember(domain: str, problem: str, verdict: CheckError | None) -> None:
    """Keep a verdict reached here or elsewhere (in the sandboxed worker) for the pair."""
    with _DOMAINS_LOCK:
        _PAIRS[(domain, problem)] = verdict
        _PAIRS.move_to_end((domain, problem))
        while len(_PAIRS) > _PAIR_CACHE_SIZE:
            _PAIRS.popitem(last=False)


def _check_pair(domain: str, problem: str, deadline: float | None) -> CheckError | None:
    gc_was_on = gc.isenabled()
    gc.disable()  # the parse makes many small objects and no cycles; collections only cost time
    try:
        state = _domain_state(domain, deadline)
        if not isinstance(state, _Checker):
            return state
        checker = state.for_problem(deadline)
        checker.text = problem
        checker.problem(_parse(problem, deadline, PROBLEM_FILE))
        checker.used = {k: v for k, v in checker.used.items() if k not in LENIENT_REQUIREMENTS}
        checker.requirements_cover()
    except _Fail as exc:
        return exc.error
    except (CheckTimeout, CheckFailed):
        raise
    except _Skip:
        return None
    except RecursionError:
        return _too_deep(PROBLEM_FILE)
    except Exception as exc:  # a bug here: refuse to judge, remember nothing
        raise _broke(exc, "problem") from exc
    finally:
        if gc_was_on:
            gc.enable()
    return None


# ------------------------------------------------------------------ plan steps

_PLAN_STEP = re.compile(r"^\s*(?:[-+]?[0-9.]+(?:[eE][-+]?\d+)?\s*:\s*)?\(\s*(?P<body>[^()]*?)\s*\)")
# The checked problem of recent pairs (its objects), for the steps of the plans validated on it.
_PROBLEMS: collections.OrderedDict[tuple[str, str], _Checker] = collections.OrderedDict()
_PROBLEM_CACHE_SIZE = 64


def _problem_state(domain: str, problem: str, deadline: float | None) -> _Checker | None:
    with _DOMAINS_LOCK:
        found = _PROBLEMS.get((domain, problem))
    if found is not None:
        return found
    state = _domain_state(domain, deadline)
    if not isinstance(state, _Checker):
        return None
    checker = state.for_problem(deadline)
    checker.text = problem
    try:
        checker.problem(_parse(problem, deadline, PROBLEM_FILE))
    except (_Skip, _Fail, RecursionError):
        return None
    checker.deadline = None
    with _DOMAINS_LOCK:
        _PROBLEMS[(domain, problem)] = checker
        while len(_PROBLEMS) > _PROBLEM_CACHE_SIZE:
            _PROBLEMS.popitem(last=False)
    return checker


def _step_error(checker: _Checker, name: str, args: list[str]) -> tuple[str, str] | None:
    """(code, what is wrong) with one plan step, in the words Kairos' validator uses."""
    if name not in checker.actions:
        return "validate.unknown_action", f"the domain has no action '{name}'"
    kinds = checker.actions[name]
    if len(args) != len(kinds):
        return "validate.wrong_arity", f"'{name}' takes {len(kinds)} argument(s), {len(args)} given"
    for arg, want in zip(args, kinds, strict=True):
        have = checker.constants.get(arg) or checker.objects.get(arg)
        if have is None:
            return "validate.unknown_object", f"unknown object '{arg}'"
        if checker.typing and not checker.types.subtype(have, want):
            return "validate.type_mismatch", (f"argument '{arg}' of '{name}' is of type {'/'.join(have)}, "
                                          f"not {'/'.join(want)}")
    return None


def _plan_steps(checker: _Checker, plan_text: str, deadline: float | None) -> CheckError | None:
    number = 0
    for line_number, raw in enumerate(plan_text.splitlines(), 1):
        if not line_number & 1023 and deadline is not None and time.monotonic() > deadline:
            raise CheckTimeout
        line = raw.split(";", 1)[0]
        if not line.strip():
            continue
        m = _PLAN_STEP.match(line)
        if m is None or not m.group("body"):
            return None  # not a step: the validator says where the plan cannot be read
        number += 1
        name, *args = m.group("body").lower().split()
        wrong = _step_error(checker, name, args)
        if wrong is not None:
            action = "(" + " ".join((name, *args)) + ")"
            return CheckError(PLAN_FILE, line_number, m.start("body"), wrong[0],
                              f"step {number} {action}: {wrong[1]}", number, action)
    return None


def check_plan(domain: str, problem: str, plan_text: str, deadline: float | None = None) -> CheckError | None:
    """The pair's first definite error, else the first plan step that cannot apply whatever the
    state: an action the domain lacks, a wrong number of arguments, an undeclared object, an
    argument of the wrong type (a file PLAN_FILE error; the validator then need not run)."""
    verdict = check(domain, problem, deadline)
    if verdict is not None:
        return verdict
    try:
        checker = _problem_state(domain, problem, deadline)
        return None if checker is None else _plan_steps(checker, plan_text, deadline)
    except (CheckTimeout, CheckFailed):
        raise
    except Exception as exc:  # a bug here: refuse to judge
        raise _broke(exc, "plan") from exc
