"""A steady trickle of decision requests in a background thread, recording every outcome."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx
from serve_synthetic import SYMPTOMS, symptom_state


@dataclass
class Outcome:
    at: float
    status: int  # 0: transport error
    version: str = ""
    symptom: int = 0
    agent_id: int = -1
    error: str = ""
    started: float = 0.0


@dataclass
class Trickle:
    url: str
    headers: dict[str, str]
    workers: int = 2
    pause_s: float = 0.01
    outcomes: list[Outcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in range(self.workers)]

    def _run(self, worker: int) -> None:
        i = worker
        with httpx.Client(base_url=self.url, headers=self.headers, timeout=30) as client:
            while not self._stop.is_set():
                symptom = i % len(SYMPTOMS)
                i += self.workers
                started = time.monotonic()
                try:
                    r = client.post("/v1/decide", json=symptom_state(symptom, task=i % 9).to_dict())
                    body = r.json() if r.status_code == 200 else {}
                    out = Outcome(time.monotonic(), r.status_code, body.get("policy_version", ""), symptom,
                                  body.get("agent_id", -1), "" if r.status_code == 200 else r.text[:200], started)
                except httpx.HTTPError as exc:
                    out = Outcome(time.monotonic(), 0, symptom=symptom, error=str(exc), started=started)
                with self._lock:
                    self.outcomes.append(out)
                time.sleep(self.pause_s)

    def __enter__(self) -> Trickle:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)

    def snapshot(self) -> list[Outcome]:
        with self._lock:
            return list(self.outcomes)

    def failures(self) -> list[Outcome]:
        return [o for o in self.snapshot() if o.status != 200]

    def wait_for(self, n: int, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        start = len(self.snapshot())
        while len(self.snapshot()) < start + n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"trickle made fewer than {n} requests in {timeout_s}s")
            time.sleep(0.02)
