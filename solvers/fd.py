"""Fast Downward: the fast worker path, the stock driver, and exit-code categorisation."""

from __future__ import annotations

import functools
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from solvers import locate
from solvers.errors import count_handled
from solvers.limits import Limits
from solvers.plans import parse_plan_text
from solvers.results import ErrorCategory, PlanResult
from solvers.sandbox import RunResult

# Fast Downward's exit codes (driver/returncodes.py of the wheel).
SUCCESS = 0
TRANSLATE_UNSOLVABLE = 10
SEARCH_UNSOLVABLE = 11
SEARCH_UNSOLVED_INCOMPLETE = 12
SEARCH_UNSOLVABLE_WITHIN_BOUND = 13
TRANSLATE_OUT_OF_MEMORY = 20
TRANSLATE_OUT_OF_TIME = 21
SEARCH_OUT_OF_MEMORY = 22
SEARCH_OUT_OF_TIME = 23
SEARCH_OUT_OF_MEMORY_AND_TIME = 24
TRANSLATE_CRITICAL_ERROR = 30
TRANSLATE_INPUT_ERROR = 31
SEARCH_CRITICAL_ERROR = 32
SEARCH_INPUT_ERROR = 33
SEARCH_UNSUPPORTED = 34
DRIVER_INPUT_ERROR = 36
DRIVER_UNSUPPORTED = 37

OPTIMAL_SEARCH = "astar(lmcut())"

_EXIT_CATEGORY = {
    TRANSLATE_UNSOLVABLE: ErrorCategory.UNSOLVABLE_PROVED,
    SEARCH_UNSOLVABLE: ErrorCategory.UNSOLVABLE_PROVED,
    SEARCH_UNSOLVED_INCOMPLETE: ErrorCategory.NO_PLAN_FOUND,
    SEARCH_UNSOLVABLE_WITHIN_BOUND: ErrorCategory.NO_PLAN_FOUND,
    TRANSLATE_OUT_OF_MEMORY: ErrorCategory.MEMORY_LIMIT,
    TRANSLATE_OUT_OF_TIME: ErrorCategory.SEARCH_TIMEOUT,
    SEARCH_OUT_OF_MEMORY: ErrorCategory.MEMORY_LIMIT,
    SEARCH_OUT_OF_TIME: ErrorCategory.SEARCH_TIMEOUT,
    SEARCH_OUT_OF_MEMORY_AND_TIME: ErrorCategory.MEMORY_LIMIT,
    SEARCH_CRITICAL_ERROR: ErrorCategory.SOLVER_CRASH,
    SEARCH_INPUT_ERROR: ErrorCategory.INPUT_ERROR,
    SEARCH_UNSUPPORTED: ErrorCategory.UNSUPPORTED_REQUIREMENT,
    DRIVER_INPUT_ERROR: ErrorCategory.INPUT_ERROR,
    DRIVER_UNSUPPORTED: ErrorCategory.UNSUPPORTED_REQUIREMENT,
}

_MESSAGES = {
    TRANSLATE_UNSOLVABLE: "the translator proved the task unsolvable",
    SEARCH_UNSOLVABLE: "the search proved the task unsolvable",
    SEARCH_UNSOLVED_INCOMPLETE: "the (incomplete) search found no plan",
    SEARCH_UNSOLVABLE_WITHIN_BOUND: "no plan within the cost bound",
    TRANSLATE_OUT_OF_MEMORY: "the translator ran out of memory",
    TRANSLATE_OUT_OF_TIME: "the translator ran out of time",
    SEARCH_OUT_OF_MEMORY: "the search ran out of memory",
    SEARCH_OUT_OF_TIME: "the search ran out of time",
    SEARCH_OUT_OF_MEMORY_AND_TIME: "the search ran out of memory and time",
    SEARCH_CRITICAL_ERROR: "the search crashed",
    SEARCH_INPUT_ERROR: "the search rejected its input or configuration",
    SEARCH_UNSUPPORTED: "the search configuration does not support this task",
}

# Translator messages that mean "a PDDL feature Fast Downward does not support".
_UNSUPPORTED_PATTERNS = (
    re.compile(r"Invalid requirement", re.I),
    re.compile(r"not supported", re.I),
    re.compile(r"unsupported", re.I),
    re.compile(r":durative-action", re.I),
)
_MEMORY_PATTERNS = re.compile(r"MemoryError|bad_alloc|out of memory|Memory limit", re.I)
_TEMPORAL_RE = re.compile(r"\(\s*:durative-action\b", re.I)


_FALLBACK_ALIASES = {
    "lama-first": ["--search", "let(hlm, eval_modify_costs(landmark_sum(lm_factory=lm_reasonable_orders_hps("
                   "lm_rhw()),pref=false),cost_type=one),let(hff, eval_modify_costs(ff(),cost_type=one),"
                   "lazy_greedy([hff,hlm],preferred=[hff,hlm],cost_type=one,reopen_closed=false)))"],
    "seq-opt-lmcut": ["--search", OPTIMAL_SEARCH],
}


@functools.lru_cache(maxsize=1)
def aliases() -> dict[str, list[str]]:
    """The stock driver's aliases (read from its file, so the configurations are identical)."""
    root = locate.fd_root()
    if root is None:
        return {}
    namespace: dict = {}
    try:
        source = (root / "driver" / "aliases.py").read_text()
    except OSError:
        return dict(_FALLBACK_ALIASES)
    # The module ends by listing portfolio files; only the ALIASES table is needed.
    source = source.split("PORTFOLIOS = {}", 1)[0].replace("from .util import DRIVER_DIR", "DRIVER_DIR = None")
    source = source.replace("PORTFOLIO_DIR = DRIVER_DIR / \"portfolios\"", "")
    try:
        exec(compile(source, str(root / "driver" / "aliases.py"), "exec"), namespace)  # noqa: S102
        return {name: list(args) for name, args in namespace["ALIASES"].items()}
    except Exception as exc:  # a future wheel with a different file: keep the two configurations we name
        count_handled("solvers.fd.aliases", exc)
        return dict(_FALLBACK_ALIASES)


def search_args(alias: str, search: str | None) -> list[str]:
    if search is not None:
        if not isinstance(search, str) or not search.strip() or search.lstrip().startswith("-"):
            raise ValueError(f"search must be a search expression such as {OPTIMAL_SEARCH!r}, got {search!r}")
        return ["--search", search]
    table = aliases()
    if alias in ("optimal", "astar-lmcut"):
        return ["--search", OPTIMAL_SEARCH]
    if alias not in table:
        raise ValueError(f"unknown Fast Downward alias {alias!r}; known: {', '.join(sorted(table))}")
    return table[alias]


def request(alias: str, search: str | None) -> dict:
    binary = locate.fd_search_binary()
    if binary is None:
        raise FileNotFoundError("Fast Downward not found: pip install up-fast-downward")
    return {"kind": "fd", "search_binary": str(binary), "search_args": search_args(alias, search)}


def _parse_error_side(output: str) -> ErrorCategory:
    marker = re.search(r"^HALO-failing-file: (domain|problem)$", output, re.M)
    if marker:
        return ErrorCategory.PARSE_ERROR_DOMAIN if marker.group(1) == "domain" else ErrorCategory.PARSE_ERROR_PROBLEM
    lowered = output.lower()
    # The translator names the file ("Could not parse problem file") for syntax errors and the
    # section ("Parsing problem" / "Parsing domain") for semantic ones.
    positions = {
        ErrorCategory.PARSE_ERROR_DOMAIN: max(lowered.rfind("parse domain file"), lowered.rfind("parsing domain\n"),
                                              lowered.rfind("parsing domain")),
        ErrorCategory.PARSE_ERROR_PROBLEM: max(lowered.rfind("parse problem file"),
                                               lowered.rfind("parsing problem")),
    }
    best = max(positions, key=lambda k: positions[k])
    if positions[best] < 0:
        return ErrorCategory.PARSE_ERROR_DOMAIN
    # "Parsing problem" may nest "Parsing domain name" (the problem's :domain); the problem wins.
    if "parsing problem" in lowered and best is ErrorCategory.PARSE_ERROR_DOMAIN and \
            "parse domain file" not in lowered:
        return ErrorCategory.PARSE_ERROR_PROBLEM
    return best


_PROGRESS_PREFIXES = ("[t=", "INFO", "Parsing", "Normalizing", "Instantiating", "Generating", "Building",
                      "Computing", "Processing", "Detecting", "Reordering", "Translator", "Simplif", "Writing",
                      "Done!", "Translating", "Checking", "Choosing", "Filtering", "Finding", "Preparing",
                      "Completing", "Handling", "Discovering")


def _error_lines(output: str, limit: int = 6) -> str:
    keep = [line for line in output.splitlines()
            if line.strip() and not line.startswith("HALO-") and not line.startswith(_PROGRESS_PREFIXES)]
    return "\n".join(keep[-limit:])


class _Facts:
    """What the categorisation rules read from one run; each costly fact is computed at most once."""

    def __init__(self, run: RunResult) -> None:
        self.run, self.code, self.out = run, run.returncode, run.output
        self.phase = "search" if run.translated else "translator"
        self.sig = -run.returncode if run.returncode is not None and run.returncode < 0 else 0
        self.translator = run.returncode is not None and not run.translated  # it stopped in the translator
        self.critical = self.translator and run.returncode in (TRANSLATE_CRITICAL_ERROR, 1)

    @functools.cached_property
    def memory(self) -> bool:
        return bool(_MEMORY_PATTERNS.search(self.out[-4000:]))

    @functools.cached_property
    def detail(self) -> str:
        return _error_lines(self.out)

    @functools.cached_property
    def marker(self) -> str | None:
        """The file the translator failed on (our wrapper prints it), if it said."""
        found = re.search(r"^HALO-failing-file: (\w+)$", self.out, re.M)
        return found.group(1) if found else None

    def unsupported(self, patterns: tuple[re.Pattern[str], ...]) -> bool:
        return any(p.search(self.detail) for p in patterns)

    def exit_category(self) -> ErrorCategory | None:
        return _EXIT_CATEGORY.get(self.code) if self.code is not None else None


_Category = ErrorCategory | Callable[[_Facts], ErrorCategory]
_LIMIT_CRASHES = (ErrorCategory.INPUT_ERROR, ErrorCategory.UNSUPPORTED_REQUIREMENT, ErrorCategory.SOLVER_CRASH)


def _side(f: _Facts) -> ErrorCategory:
    return _parse_error_side(f.out)


def _by_exit(f: _Facts) -> ErrorCategory:
    return _EXIT_CATEGORY[f.code]  # type: ignore[index]


# (when, category, message), in order: the first rule whose `when` holds decides. A translator
# crash on a malformed task (KeyError on an undeclared predicate, an assertion on a bad type) is a
# modelling error in the PDDL, not a planner bug: it is a parse error of the file it mentions.
_RULES: tuple[tuple[Callable[[_Facts], bool], _Category, Callable[[_Facts], str]], ...] = (
    (lambda f: f.code is None and f.run.timed_out, ErrorCategory.SEARCH_TIMEOUT, lambda f: f.run.error),
    (lambda f: f.code is None, ErrorCategory.SOLVER_CRASH, lambda f: f.run.error),
    (lambda f: f.run.timed_out, ErrorCategory.SEARCH_TIMEOUT, lambda f: f"wall-clock limit hit in the {f.phase}"),
    (lambda f: f.code == SUCCESS, ErrorCategory.OK, lambda f: ""),
    # killed by a signal
    (lambda f: f.sig in (signal.SIGXCPU, signal.SIGKILL) and not f.memory, ErrorCategory.SEARCH_TIMEOUT,
     lambda f: f"CPU-time limit hit in the {f.phase} (signal {f.sig})"),
    (lambda f: f.sig != 0 and (f.memory or f.sig == signal.SIGKILL), ErrorCategory.MEMORY_LIMIT,
     lambda f: f"the {f.phase} ran out of memory (signal {f.sig})"),
    (lambda f: f.sig == signal.SIGXFSZ, ErrorCategory.SOLVER_CRASH,
     lambda f: f"the {f.phase} exceeded the output file size limit"),
    (lambda f: f.sig != 0, ErrorCategory.SOLVER_CRASH,
     lambda f: f"the {f.phase} died on signal {signal.Signals(f.sig).name}"),
    # stopped in the translator
    (lambda f: f.translator and f.code == TRANSLATE_INPUT_ERROR and f.unsupported(_UNSUPPORTED_PATTERNS[:3]),
     ErrorCategory.UNSUPPORTED_REQUIREMENT, lambda f: f.detail),
    (lambda f: f.translator and f.code == TRANSLATE_INPUT_ERROR, _side, lambda f: f.detail),
    (lambda f: f.critical and f.unsupported(_UNSUPPORTED_PATTERNS), ErrorCategory.UNSUPPORTED_REQUIREMENT,
     lambda f: f.detail),
    (lambda f: f.critical and f.memory, ErrorCategory.MEMORY_LIMIT, lambda f: f.detail),
    (lambda f: f.critical and f.marker == "unknown", ErrorCategory.SOLVER_CRASH,
     lambda f: f"the translator crashed: {f.detail}"),
    (lambda f: f.critical and (f.marker is not None or "error" in f.detail.lower()), _side, lambda f: f.detail),
    (lambda f: f.critical, ErrorCategory.SOLVER_CRASH, lambda f: f.detail),
    (lambda f: f.translator and f.exit_category() is not None, _by_exit, lambda f: _MESSAGES.get(f.code, "")),
    (lambda f: f.translator and f.code == 120, ErrorCategory.SOLVER_CRASH, lambda f: f.detail),
    (lambda f: f.translator, ErrorCategory.SOLVER_CRASH, lambda f: f"translator exit code {f.code}: {f.detail}"),
    # stopped in the search
    (lambda f: f.exit_category() in _LIMIT_CRASHES, _by_exit,
     lambda f: f"{_MESSAGES.get(f.code, '')}: {_error_lines(f.out, 4)}"),
    (lambda f: f.exit_category() is not None, _by_exit, lambda f: _MESSAGES.get(f.code, "")),
    (lambda f: f.code == 127, ErrorCategory.SOLVER_CRASH, lambda f: "the search binary could not be started"),
    (lambda f: True, ErrorCategory.SOLVER_CRASH, lambda f: f"search exit code {f.code}: {_error_lines(f.out, 4)}"),
)


def categorize(run: RunResult) -> tuple[ErrorCategory, str]:
    """Map one worker run of translate+search to a category and a short message (the first rule
    of _RULES that holds)."""
    facts = _Facts(run)
    for when, category, message in _RULES:
        if when(facts):
            return (category if isinstance(category, ErrorCategory) else category(facts)), message(facts)
    raise AssertionError("the last rule always holds")  # pragma: no cover


def best_plan_file(files: dict[str, bytes]) -> bytes | None:
    """sas_plan, or for anytime configurations the last (best) of sas_plan.1, sas_plan.2, ..."""
    if "sas_plan" in files:
        return files["sas_plan"]
    numbered = sorted((int(name.rsplit(".", 1)[1]), name) for name in files
                      if name.startswith("sas_plan.") and name.rsplit(".", 1)[1].isdigit())
    return files[numbered[-1][1]] if numbered else None


def to_result(run: RunResult, planner: str = "fd") -> PlanResult:
    category, message = categorize(run)
    plan_bytes = best_plan_file(run.files)
    # Anytime configurations end on a limit after finding plans; a found plan still counts.
    if plan_bytes is not None and category in (ErrorCategory.OK, ErrorCategory.SEARCH_TIMEOUT,
                                               ErrorCategory.MEMORY_LIMIT):
        steps, cost = parse_plan_text(plan_bytes.decode("utf-8", "replace"))
        return PlanResult(ErrorCategory.OK, planner, steps, cost if cost is not None else float(len(steps)),
                          message=message, output_tail=run.output[-4000:], wall_s=run.wall_s, cpu_s=run.cpu_s)
    if category is ErrorCategory.OK:
        category, message = ErrorCategory.SOLVER_CRASH, "the search reported success but wrote no plan"
    return PlanResult(category, planner, message=message, output_tail=run.output[-4000:], wall_s=run.wall_s,
                      cpu_s=run.cpu_s)


def is_temporal(domain: str) -> bool:
    return bool(_TEMPORAL_RE.search(domain))


def run_stock_driver(domain: str, problem: str, *, alias: str = "lama-first", search: str | None = None,
                     limits: Limits = Limits()) -> PlanResult:
    """The stock `fast-downward.py` driver, unsandboxed: the speed baseline of the benchmark."""
    driver = locate.fd_driver()
    if driver is None:
        raise FileNotFoundError("Fast Downward not found: pip install up-fast-downward")
    with tempfile.TemporaryDirectory(prefix="halo-fd-stock-") as tmp:
        Path(tmp, "domain.pddl").write_text(domain)
        Path(tmp, "problem.pddl").write_text(problem)
        argv = [sys.executable, str(driver), "--plan-file", "sas_plan"]
        argv += ["domain.pddl", "problem.pddl", "--search", search] if search else \
            ["--alias", alias, "domain.pddl", "problem.pddl"]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, cwd=tmp, capture_output=True, timeout=limits.timeout_s + 5,
                                  env={"PATH": "/usr/bin:/bin", "HOME": tmp})
        except subprocess.TimeoutExpired:
            return PlanResult(ErrorCategory.SEARCH_TIMEOUT, "fd-stock", wall_s=time.monotonic() - t0)
        wall = time.monotonic() - t0
        files = {p.name: p.read_bytes() for p in Path(tmp).glob("sas_plan*")}
        output = (proc.stdout + proc.stderr).decode("utf-8", "replace")
        run = RunResult(proc.returncode, output=output, wall_s=wall, files=files, level="none",
                        translated="Running search" in output)
        result = to_result(run, "fd-stock")
        result.wall_s = wall
        return result
