"""API keys: who may call what, and a key file that never widens access when it goes wrong.

Roles: `decision` (the decide routes), `feedback` (/v1/feedback) and `admin` (everything). A key
listed under several roles holds all of them. Keys come from the config and the environment (read
once, refused at start when malformed) and from an optional key file (lines `ROLE NAME=KEY`),
re-read when it changes, so keys rotate without a restart. The key file fails closed:

- an invalid line is refused on its own (logged with its line number, never its text); the
  file's valid lines still replace the old set, so a typo elsewhere cannot keep a revoked key alive;
- a file that is empty, unreadable or has no valid line keeps the last good set, and says so;
- a deleted file revokes every key it held;
- once the service has had keys it never becomes keyless again: with no key left, every request
  is refused (401), never admitted.

`status()` says what happened last (for /readyz), `on_problem` counts it (a metric).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from solvers.errors import InputError

log = logging.getLogger("halo.serve")

MIN_KEY_CHARS = 16
ROLES = ("decision", "feedback", "admin")
KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Largest key file read (a key file is a few lines; a huge one is a mistake or an attack).
MAX_KEY_FILE_BYTES = 1_048_576
KeyTable = dict[str, tuple[str, frozenset[str]]]  # key -> (name, roles)


class KeyConfigError(InputError, ValueError):
    """A configured API key that cannot be used (too short, bad name)."""


@dataclass(frozen=True)
class KeyIdentity:
    name: str
    roles: frozenset[str]

    def may(self, role: str) -> bool:
        return "admin" in self.roles or role in self.roles


def parse_entry(entry: str) -> tuple[str, str]:
    """(name, key) of `KEY` or `NAME=KEY`; raises KeyConfigError (without the key's text)."""
    name, sep, key = entry.strip().partition("=")
    if not sep:
        name, key = "", entry.strip()
    name = name.strip()
    if len(key) < MIN_KEY_CHARS:
        raise KeyConfigError(f"every API key must be at least {MIN_KEY_CHARS} characters")
    if name and not KEY_NAME.match(name):
        raise KeyConfigError("a key name is 1-64 characters from A-Z a-z 0-9 . _ - (starting with a letter or digit)")
    return name or "key-" + hashlib.sha256(key.encode()).hexdigest()[:8], key


def parse_keys(entries: Iterable[str], source: str, role: str = "decision") -> KeyTable:
    """`{key: (name, {role})}` from config entries; any bad entry refuses the whole source."""
    out: KeyTable = {}
    for raw in entries:
        if not raw.strip():
            continue
        try:
            name, key = parse_entry(raw)
        except KeyConfigError as exc:
            raise KeyConfigError(f"{source}: {exc}") from None
        _add(out, key, name, role)
    return out


def _add(table: KeyTable, key: str, name: str, role: str) -> None:
    old_name, roles = table.get(key, (name, frozenset()))
    table[key] = (old_name, roles | {role})


def merge_tables(*tables: KeyTable) -> KeyTable:
    out: KeyTable = {}
    for table in tables:
        for key, (name, roles) in table.items():
            for role in roles:
                _add(out, key, name, role)
    return out


@dataclass
class KeyFileRead:
    keys: KeyTable
    refused: list[str]  # "path:line: why", never the line's text


def read_key_file(path: str) -> KeyFileRead:
    """Every valid line of the file; invalid ones are listed in `refused`. Raises OSError when unreadable."""
    if os.stat(path).st_size > MAX_KEY_FILE_BYTES:
        raise OSError(f"{path} is over {MAX_KEY_FILE_BYTES} bytes")
    keys: KeyTable = {}
    refused: list[str] = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        role, _, entry = line.partition(" ")
        if role not in ROLES or not entry.strip():
            refused.append(f"{path}:{n}: want `ROLE NAME=KEY` with ROLE one of {', '.join(ROLES)}")
            continue
        try:
            name, key = parse_entry(entry)
        except KeyConfigError as exc:
            refused.append(f"{path}:{n}: {exc}")
            continue
        _add(keys, key, name, role)
    return KeyFileRead(keys, refused)


@dataclass
class KeyRing:
    """Keys from the config (`static`) plus the key file's, looked up in constant time per key."""

    static: KeyTable = field(default_factory=dict)
    key_file: str = ""
    on_problem: Callable[[str], None] | None = None
    _file_keys: KeyTable = field(default_factory=dict)
    _mtime: float = -1.0
    _checked: float = 0.0
    _ever_enabled: bool = False
    _status: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._status = {"key_file": self.key_file or None, "state": "ok", "detail": ""}
        if self.key_file:
            read = read_key_file(self.key_file)  # unreadable at start: the caller refuses to start
            if read.refused:
                raise KeyConfigError("; ".join(read.refused))
            self._file_keys = read.keys
            self._mtime = _mtime(self.key_file)
        self._ever_enabled = bool(self.static or self._file_keys)

    def _refresh(self) -> None:
        now = time.monotonic()
        if not self.key_file or now - self._checked < 1.0:
            return
        with self._lock:
            self._checked = now
            mtime = _mtime(self.key_file)
            if mtime == self._mtime:
                return
            self._mtime = mtime
            self._reload(mtime)

    def _reload(self, mtime: float) -> None:
        if mtime == -2.0:  # deleted: its keys are revoked
            self._file_keys = {}
            self._report("deleted", f"{self.key_file} is gone: its keys are revoked")
            return
        try:
            read = read_key_file(self.key_file)
        except (OSError, UnicodeDecodeError) as exc:
            self._report("unreadable", f"{self.key_file} unreadable ({type(exc).__name__}): last good keys kept")
            return
        if not read.keys:
            what = "empty" if not read.refused else "invalid"
            self._report(what, f"{self.key_file} has no valid key ({len(read.refused)} line(s) refused): "
                               "last good keys kept")
            return
        self._file_keys = read.keys
        self._ever_enabled = True
        if read.refused:
            self._report("lines_refused", "; ".join(read.refused[:5]) + " (other lines in force)")
        else:
            self._status = {"key_file": self.key_file, "state": "ok", "detail": f"{len(read.keys)} key(s)"}
            log.warning("API keys re-read from %s", self.key_file)

    def _report(self, problem: str, detail: str) -> None:
        self._status = {"key_file": self.key_file, "state": problem, "detail": detail}
        log.error("API key file: %s", detail)
        if self.on_problem is not None:
            self.on_problem(problem)

    @property
    def enabled(self) -> bool:
        """Keys are required: some are configured, or were once (fail closed)."""
        self._refresh()
        return self._ever_enabled or bool(self.static or self._file_keys)

    def status(self) -> dict[str, object]:
        self._refresh()
        return dict(self._status)

    def lookup(self, token: bytes) -> KeyIdentity | None:
        """The identity of a presented token, or None."""
        self._refresh()
        found: KeyIdentity | None = None
        # Compare against every key so timing does not reveal which one matched.
        for table in (self.static, self._file_keys):
            for key, (name, roles) in table.items():
                if hmac.compare_digest(token, key.encode()) and found is None:
                    found = KeyIdentity(name, roles)
        return found


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime_ns / 1e9
    except OSError:
        return -2.0
