"""A content-addressed cache of planner and validator results, per process, optionally on disk.

The key is a SHA-256 of everything that decides the answer: what was asked (plan or validate),
the planner and its configuration, the planner's version, and the exact domain, problem (and
plan) text. Only answers that do not depend on the time or memory limit are kept: a plan found,
a parse error, an unsupported feature, a proof of unsolvability, a validator's verdict. A
timeout, a memory limit or a crash is never cached. Fast Downward is deterministic here
(PYTHONHASHSEED is fixed in the workers), so a hit is the answer the call would have given.

Off unless HALO_SOLVER_CACHE is set ("1": in memory; a directory: in memory and on disk there),
or turned on with `configure(...)`. A hit costs no solver CPU: it is returned with cpu_s = 0.
Threads asking for one key at once share one computation (`ResultCache.compute_once`).
"""

from __future__ import annotations

import collections
import contextlib
import copy
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from solvers.results import ErrorCategory, PlanResult, PlanStep, ValidationResult

CACHEABLE = frozenset({
    ErrorCategory.OK, ErrorCategory.PARSE_ERROR_DOMAIN, ErrorCategory.PARSE_ERROR_PROBLEM,
    ErrorCategory.PARSE_ERROR_PLAN, ErrorCategory.UNSUPPORTED_REQUIREMENT, ErrorCategory.UNSOLVABLE_PROVED,
    ErrorCategory.PLAN_INVALID, ErrorCategory.INPUT_ERROR,
})
DEFAULT_ENTRIES = 4096
Result = TypeVar("Result", PlanResult, ValidationResult)


class ResultCache:
    def __init__(self, entries: int = DEFAULT_ENTRIES, directory: str | None = None):
        self.entries = entries
        self.directory = Path(directory) if directory else None
        if self.directory:
            self.directory.mkdir(parents=True, exist_ok=True)
        self._items: collections.OrderedDict[str, PlanResult | ValidationResult] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._flights: dict[str, threading.Event] = {}  # keys being computed now, by another thread
        self.hits = self.misses = self.stores = 0

    @staticmethod
    def key(*parts: str) -> str:
        import hashlib  # loads OpenSSL: not on the path of a call with the cache off

        digest = hashlib.sha256()
        for part in parts:
            data = part.encode("utf-8", "surrogateescape")
            digest.update(len(data).to_bytes(8, "big"))
            digest.update(data)
        return digest.hexdigest()

    def _find(self, key: str) -> PlanResult | ValidationResult | None:
        """A copy of the stored answer (cpu_s 0: a hit costs no solver CPU), or None; not counted."""
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
        if found is None and self.directory is not None:
            found = self._load(key)
            if found is not None:
                self._remember(key, found)
        if found is None:
            return None
        hit = copy.deepcopy(found)
        hit.cpu_s = 0.0
        return hit

    def _count(self, *, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def compute_once(self, key: str, compute: Callable[[], Result]) -> tuple[Result, bool]:
        """The cached answer for `key`, else `compute()`'s, stored: (the answer, whether it was a hit).
        Threads asking for one key at once share one computation: the first computes, the others
        wait and take its answer as a hit (a search's concurrent children often reach one PDDL). A
        waiter whose key was not stored (a timeout is never cached) asks again, and so computes
        unless another waiter already does. Each call counts one hit or one miss."""
        while True:
            found = self._find(key)
            if found is not None:
                self._count(hit=True)
                return found, True  # type: ignore[return-value]
            with self._lock:
                flight = self._flights.get(key)
                if flight is None and key not in self._items:  # not stored since the lookup above
                    flight = self._flights[key] = threading.Event()
                    break
            if flight is not None:
                flight.wait()
        self._count(hit=False)
        try:
            result = compute()
            self.put(key, result)
            return result, False
        finally:
            with self._lock:
                del self._flights[key]
            flight.set()

    def put(self, key: str, result: PlanResult | ValidationResult) -> None:
        if result.category not in CACHEABLE:
            return
        if isinstance(result, PlanResult) and result.ok and result.message:
            return  # an anytime search's best plan when a limit hit: depends on the limit
        stored = copy.deepcopy(result)
        self._remember(key, stored)
        with self._lock:
            self.stores += 1
        if self.directory is not None:
            self._save(key, stored)

    def _remember(self, key: str, result: PlanResult | ValidationResult) -> None:
        with self._lock:
            self._items[key] = result
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)

    def _path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / key[:2] / f"{key}.json"

    def _save(self, key: str, result: PlanResult | ValidationResult) -> None:
        import tempfile

        data = {"type": type(result).__name__, "result": result.to_dict()}
        path = self._path(key)
        with contextlib.suppress(OSError):
            path.parent.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh)
            os.replace(tmp, path)  # atomic: concurrent processes never read half a file

    def _load(self, key: str) -> PlanResult | ValidationResult | None:
        try:
            data = json.loads(self._path(key).read_text())
            return _from_dict(data["type"], data["result"])
        except (OSError, ValueError, KeyError, TypeError):
            return None  # absent, or unreadable: a miss, never an error

    def stats(self) -> dict[str, Any]:
        with self._lock:
            asked = self.hits + self.misses
            return {"enabled": True, "hits": self.hits, "misses": self.misses, "stores": self.stores,
                    "entries": len(self._items), "hit_rate": self.hits / asked if asked else 0.0,
                    "directory": str(self.directory) if self.directory else None}


def _from_dict(kind: str, data: dict) -> PlanResult | ValidationResult:
    data = dict(data)
    data["category"] = ErrorCategory(data["category"])
    if kind == "PlanResult":
        if data.get("plan") is not None:
            data["plan"] = [PlanStep(s["name"], tuple(s["args"]), s.get("start"), s.get("duration"))
                            for s in data["plan"]]
        return PlanResult(**data)
    if kind == "ValidationResult":
        return ValidationResult(**data)
    raise ValueError(kind)


_cache: ResultCache | None = None
_configured = False
_lock = threading.Lock()


def configure(enabled: bool = True, *, directory: str | None = None, entries: int = DEFAULT_ENTRIES) -> None:
    """Turn this process's cache on (optionally backed by `directory`) or off. Replaces the
    environment's setting."""
    global _cache, _configured
    with _lock:
        _cache = ResultCache(entries, directory) if enabled else None
        _configured = True


def current() -> ResultCache | None:
    global _cache, _configured
    with _lock:
        if not _configured:
            setting = os.environ.get("HALO_SOLVER_CACHE", "").strip()
            if setting and setting.lower() not in ("0", "off", "false", "no"):
                directory = None if setting.lower() in ("1", "on", "true", "yes", "memory") else setting
                _cache = ResultCache(DEFAULT_ENTRIES, directory)
            _configured = True
        return _cache


def stats() -> dict[str, Any]:
    """Hits, misses and hit rate of this process's cache ({"enabled": False} when it is off)."""
    cache = current()
    return cache.stats() if cache is not None else {"enabled": False, "hits": 0, "misses": 0, "hit_rate": 0.0}


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    if _cache is not None:
        _cache._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
