"""How long `halo serve` takes to start and to stop, with the replicas' drain before and after the
change that bounds it, in one run.

Start: from launching `halo serve --model M` to its "serving ..." line (/readyz answered).
Stop: from SIGINT (Ctrl-C) to the process' exit. "before" runs with Ray Serve's default drain of a
direct-ingress replica (RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S=30, kept so a load balancer
can drop the replica first); "after" runs with the default `halo serve` now sets when it owns Ray.

    python benchmarks/serve_lifecycle.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HALO = str(Path(sys.executable).with_name("halo"))


def one_round(model: Path, port: int, extra_env: dict[str, str]) -> tuple[float, float, str, str]:
    env = {**os.environ, "HALO_SERVE_TIMINGS": "1", **extra_env}
    t0 = time.monotonic()
    proc = subprocess.Popen([HALO, "serve", "--model", str(model), "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    assert proc.stdout is not None
    phases = ""
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("start-up: "):
            phases = line.strip()
        if line.startswith("serving "):
            break
    else:
        raise SystemExit(f"halo serve exited with {proc.wait()} before serving:\n{''.join(seen[-20:])}")
    started = time.monotonic() - t0
    t1 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        rest = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stop_line = next((line for line in rest.splitlines() if line.startswith("stopped in")), "")
    return started, time.monotonic() - t1, phases, stop_line


def main() -> int:
    from tests.serve.serve_synthetic import MAP_V1, train_version

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--port", type=int, default=18_431)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "fast"
        train_version(model, MAP_V1, "v1")
        variants = {"before (Serve's 30 s drain)": {"RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "30"},
                    "after (halo serve's default)": {}}
        print(f"{'variant':<30} {'start s (each)':<22} {'stop s (each)':<22} median start / stop")
        for v, (name, env) in enumerate(variants.items()):
            runs = [one_round(model, args.port + 10 * v + i, env) for i in range(args.rounds)]  # a port each: no
            # waiting for the last round's socket to close
            starts, stops = [r[0] for r in runs], [r[1] for r in runs]
            print(f"{name:<30} {', '.join(f'{s:.1f}' for s in starts):<22} "
                  f"{', '.join(f'{s:.1f}' for s in stops):<22} "
                  f"{statistics.median(starts):.1f} / {statistics.median(stops):.1f}", flush=True)
            for _, _, phases, stop_line in runs:
                print(f"    {phases}; stop_service {stop_line.removeprefix('stopped in ') or '-'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
