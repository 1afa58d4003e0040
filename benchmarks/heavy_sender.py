"""A hostile client in its own process: while FLAG exists, posts crafted 0.5 MB states (each with
PDDL the replica has not seen, so no cache helps) to URL/v1/decide with KEY, two at a time; prints
how many were answered and how many refused when FLAG is removed and STOP appears. FLAG.ready
appears once its bodies are made.

Usage: python benchmarks/heavy_sender.py URL KEY FLAG STOP
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.heavy_states import heavy_state  # noqa: E402


def wait_until_ready(flag: Path, timeout_s: float = 300.0) -> None:
    """Wait for the sender started with FLAG to have made its bodies (FLAG.ready)."""
    deadline = time.monotonic() + timeout_s
    while not Path(f"{flag}.ready").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the heavy sender made no bodies within {timeout_s:.0f} s")
        time.sleep(0.1)


def bodies(tag: str, n: int) -> list[bytes]:
    base = heavy_state()
    return [json.dumps({**base, "domain": base["domain"].replace("heavy", f"heavy-{tag}-{i}")}).encode()
            for i in range(n)]


def main(url: str, key: str, flag: str, stop: str) -> None:
    codes: Counter[int] = Counter()
    prepared = bodies(str(os.getpid()), 400)
    Path(f"{flag}.ready").touch()  # the bodies are made: the caller may start the loud phase
    headers = {"Authorization": f"Bearer {key}", "content-type": "application/json"}
    lock = threading.Lock()
    count = [0]

    def sender() -> None:
        with httpx.Client(timeout=60) as client:
            while not os.path.exists(stop):
                if not os.path.exists(flag):
                    time.sleep(0.005)
                    continue
                with lock:
                    body = prepared[count[0] % len(prepared)]
                    count[0] += 1
                r = client.post(f"{url}/v1/decide", content=body, headers=headers)
                with lock:
                    codes[r.status_code] += 1
                if r.status_code == 429:
                    time.sleep(0.05)

    threads = [threading.Thread(target=sender) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({str(k): v for k, v in codes.items()}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
