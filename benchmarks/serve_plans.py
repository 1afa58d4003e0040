"""Plan jobs under load: `python benchmarks/serve.py --plans [--jobs 200] [--latency-ms 2500]`.

One service (2 replicas on the one URL, a plan store in a temporary directory, the simulated
agents sleeping their latency in real time: `sim:realtime=1`, the real planner and validator in
the sandbox). First /v1/decide alone: a probe sends one decision every --probe-gap-ms for
--probe-s seconds (the baseline: half before the jobs, half after). Between the two halves
--jobs plan jobs are submitted at once and followed to their end while the same probe runs, each
as PlanClient.wait() follows a job (a poll when the service's Retry-After says the next step is
due, backing off up to 3 s while it is overdue);
submissions refused with 429/503 are retried after Retry-After with the same key, as the client
does. The clients and the probe stand for callers on other machines: each runs in a process of
its own, the probe in a session of its own (see _own_session), the jobs' clients in the idle
scheduling class in the service's session (`--clients-normal`: the normal class in a session of
their own; see _elsewhere).
Reported: jobs/s (jobs over the wall time from the first submission to the last end), outcomes,
LLM calls and dollars against the jobs' budgets, the runner's LLM gate (calls, tokens).
Targets (95% bounds, benchmarks/bounds.py):
1. /v1/decide p99 during the plan jobs <= 2x its p99 without them (bootstrap upper bound)
2. every job ends (succeeded or failed, none stuck) within --deadline-s, and no answer is a 5xx
Simulated-world figures (llm_backend=sim), never mixed with real-LLM ones. Exit 1 on a miss.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx

from benchmarks.bounds import quantile, ratio_upper
from benchmarks.http_load import Conn

TASKS = [f"planbench/blocksworld/instance-{i}" for i in range(2, 10)]
BUDGET = {"max_steps": 8, "max_llm_calls": 20, "max_usd": 1.0, "max_seconds": 600.0}
SUBMIT_TRIES = 5
POLLS = [0]  # GET /v1/plans/{id} requests the clients' process sent (reported as polls/s)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--plans", action="store_true", help="(selects this run from benchmarks/serve.py)")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=2500.0, help="median simulated LLM latency (real time)")
    parser.add_argument("--probe-s", type=float, default=20.0, help="baseline probe duration")
    parser.add_argument("--probe-gap-ms", type=float, default=20.0)
    parser.add_argument("--deadline-s", type=float, default=600.0)
    parser.add_argument("--submit-rate", type=float, default=100.0, help="job submissions per second")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--plan-cpus", type=int, nargs="*", default=[],
                        help="CPUs for the plan runner and its solvers (config plan_cpus; default any)")
    parser.add_argument("--clients-normal", dest="clients_idle", action="store_false",
                        help="run the jobs' clients in the normal scheduling class (default: idle class, "
                             "as if on other machines)")
    parser.add_argument("--follow", choices=("poll", "events", "none"), default="poll",
                        help="follow each job by polls (as PlanClient.wait()), by its events stream, or not at all "
                             "(none: submit, then read the jobs one at a time as they end; what the jobs' "
                             "execution costs the decisions without their clients' reads)")
    parser.add_argument("--trace", default="",
                        help="write every probe's start time (Unix s) and milliseconds, and the jobs' start and "
                             "end, to this JSON file (where in the run the tail falls)")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def start(args: argparse.Namespace, work: Path) -> Any:
    from benchmarks.serve import training_episodes
    from serve.config import ServeConfig
    from serve.launcher import start_service
    from serve.ports import free_port
    from train.fast_policy import train_fast_policy

    train_fast_policy(training_episodes(), work / "fast", name="bench-fast")
    cfg = ServeConfig(model=str(work / "fast"), port=free_port(), fast_port=free_port(), app_name="bench-plans",
                      num_replicas=args.replicas, replica_num_cpus=0, registry_name="reg-bench-plans",
                      plan_store=str(work / "store"), plan_llm=f"sim:realtime=1,latency_ms={args.latency_ms:g}",
                      plan_max_running=args.jobs, plan_max_jobs=max(256, args.jobs),
                      plan_max_jobs_per_key=max(256, args.jobs), max_inflight_per_client=1024,
                      max_ongoing_requests=256, max_queued_requests=2048, plan_cpus=list(args.plan_cpus))
    return start_service(cfg, num_cpus=args.num_cpus)


async def probe(host: str, port: int, gap_s: float, stop: Any, out: list[float], stamps: list[float]) -> int:
    """One /v1/decide at a time, every gap_s, until `stop` is set; milliseconds into `out` and each
    request's start (Unix time) into `stamps`; returns non-200s."""
    from benchmarks.serve import model_state

    conn, errors, i = Conn(host, port), 0, 0
    try:
        while not stop.is_set():
            body = json.dumps(model_state(i).to_dict()).encode()
            t0 = time.perf_counter()
            stamps.append(time.time())
            status, _ = await conn.post("/v1/decide", body)
            out.append((time.perf_counter() - t0) * 1000.0)
            errors += status != 200
            i += 1
            await asyncio.sleep(gap_s)
    finally:
        conn.close()
    return errors


def _own_session() -> None:
    """A client process in the normal scheduling class starts a session of its own, so that with
    the kernel's autogroups on, its CPU is not scheduled inside the service's group (Ray's
    processes run in the benchmark's session) and the service's own priorities (the plan runner
    below the replicas) are what decides there."""
    os.setsid()


def _elsewhere() -> None:
    """The plan jobs' 200 clients would not run on the service's node at all: in the idle
    scheduling class their polling takes only CPU time the service leaves, instead of competing
    with the replicas as an equal (the probe keeps the normal class: its latency is the figure).
    In the service's session: with the kernel's autogroups, a session of their own would be a
    scheduling group beside the service's, whose time slice a replica that wakes must wait out
    whatever the class of the processes in it (perf sched showed it; solvers/_worker.py)."""
    if hasattr(os, "SCHED_IDLE"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    else:
        _own_session()


def _probe_process(host: str, port: int, gap_s: float, stop: Any, results: Any) -> None:
    _own_session()
    out: list[float] = []
    stamps: list[float] = []
    errors = asyncio.run(probe(host, port, gap_s, stop, out, stamps))
    results.put((out, errors, stamps))


class Prober:
    """The probe in a process of its own: the benchmark's own HTTP client (submissions, polls) must
    not delay the probe's requests inside one event loop and show up as the service's latency."""

    def __init__(self, host: str, port: int, gap_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._stop, self._results = ctx.Event(), ctx.Queue()
        self._proc = ctx.Process(target=_probe_process, args=(host, port, gap_s, self._stop, self._results))
        self._proc.start()
        self.stamps: list[float] = []

    def finish(self) -> tuple[list[float], int]:
        self._stop.set()
        out, errors, self.stamps = self._results.get(timeout=120)
        self._proc.join(timeout=30)
        return out, errors


def _bodies(n: int) -> list[dict[str, Any]]:
    return [{"task_description": "Arrange the blocks as the task says.", "task_id": TASKS[i % len(TASKS)],
             "seed": i // len(TASKS), "budget": BUDGET} for i in range(n)]


@dataclass
class Reply:
    status_code: int
    headers: dict[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else {}


class Caller:
    """One job's caller on a connection of its own (benchmarks/http_load.Conn): httpx's pool spent
    a CPU of this machine on 200 callers' bookkeeping, beside the service being measured."""

    def __init__(self, host: str, port: int) -> None:
        self.conn = Conn(host, port)

    async def get(self, path: str) -> Reply:
        return Reply(*await self.conn.request("GET", path))

    async def post(self, path: str, json_body: dict[str, Any], headers: dict[str, str]) -> Reply:
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode()
        return Reply(*await self.conn.request("POST", path, json.dumps(json_body).encode(), extra))

    def close(self) -> None:
        self.conn.close()


async def submit(caller: Caller, i: int, body: dict[str, Any], deadline: float) -> Reply:
    """One submission, retried after Retry-After on 429/503 with the same key (as serve.client does)."""
    from serve.plan_client import retry_after_s

    for _ in range(SUBMIT_TRIES):
        r = await caller.post("/v1/plans", body, {"Idempotency-Key": f"bench-{i}"})
        if r.status_code not in (429, 503) or time.monotonic() >= deadline:
            break
        hint = retry_after_s(r.headers)
        await asyncio.sleep(1.0 if hint is None else hint)
    return r


async def follow(caller: Caller, job_id: str, deadline: float) -> tuple[dict[str, Any] | None, int]:
    """The job followed as PlanClient.wait() follows it (a poll when the service's Retry-After says
    the next step is due, backing off up to 3 s while nothing changes: serve/plan_client.py
    next_poll_s): (the final job or None, 5xx answers)."""
    from serve.plan_client import POLL_MIN_S, next_poll_s, retry_after_s

    seen, pause, server_errors = ("", -1), POLL_MIN_S, 0
    while time.monotonic() < deadline:
        r = await caller.get(f"/v1/plans/{job_id}")
        POLLS[0] += 1
        server_errors += r.status_code >= 500
        view = r.json() if r.status_code == 200 else {}
        if view.get("status") in ("succeeded", "failed", "cancelled"):
            return view, server_errors
        now = (view.get("status", ""), len(view.get("steps", [])))
        pause, seen = next_poll_s(pause, now != seen, hint_s=retry_after_s(r.headers)), now
        await asyncio.sleep(pause)
    return None, server_errors


async def follow_events(client: httpx.AsyncClient, caller: Caller, job_id: str, deadline: float,
                        ) -> tuple[dict[str, Any] | None, int]:
    """The job followed by its events stream (server-sent events) to its `end` event; by polls
    (follow) when the stream is refused or breaks."""
    try:
        async with client.stream("GET", f"/v1/plans/{job_id}/events",
                                 timeout=max(1.0, deadline - time.monotonic())) as r:
            if r.status_code == 200:
                kind = ""
                async for line in r.aiter_lines():
                    if line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("data: ") and kind == "end":
                        return json.loads(line[6:]), 0
            errors = int(r.status_code >= 500)
    except httpx.HTTPError:
        errors = 0
    final, more = await follow(caller, job_id, deadline)
    return final, errors + more


async def collect(caller: Caller, ids: list[str], deadline: float) -> tuple[dict[str, dict[str, Any]], int]:
    """--follow none: the submitted jobs read one at a time in submission order, waiting 2 s on one
    that has not ended (about one request a second while the jobs run)."""
    finals: dict[str, dict[str, Any]] = {}
    errors = 0
    for job_id in ids:
        while time.monotonic() < deadline:
            r = await caller.get(f"/v1/plans/{job_id}")
            POLLS[0] += 1
            errors += r.status_code >= 500
            view = r.json() if r.status_code == 200 else {}
            if view.get("status") in ("succeeded", "failed", "cancelled"):
                finals[job_id] = view
                await asyncio.sleep(0.01)
                break
            await asyncio.sleep(2.0)
    return finals, errors


async def run_jobs(url: str, args: argparse.Namespace) -> tuple[dict[str, dict[str, Any]], float, int]:
    """args.jobs clients, arriving at args.submit_rate a second: each submits its job and follows it
    to its end, as PlanClient.plan() does: (final jobs, seconds, 5xx answers + failed submissions)."""
    finals: dict[str, dict[str, Any]] = {}
    submitted: list[str] = []
    failures = 0
    t0 = time.monotonic()
    deadline = t0 + args.deadline_s

    u = urlparse(url)
    host, port = u.hostname or "127.0.0.1", u.port or 80

    async def one(streams: httpx.AsyncClient, i: int, body: dict[str, Any]) -> None:
        nonlocal failures
        caller = Caller(host, port)  # each job's caller on its own connection, as callers elsewhere would be
        try:
            await asyncio.sleep(i / args.submit_rate)
            r = await submit(caller, i, body, deadline)
            failures += r.status_code != 202
            if r.status_code != 202:
                return
            job_id = r.json()["id"]
            if args.follow == "none":
                submitted.append(job_id)
                return
            final, errors = await (follow_events(streams, caller, job_id, deadline) if args.follow == "events"
                                   else follow(caller, job_id, deadline))
            failures += errors
            if final is not None:
                finals[final["id"]] = final
        finally:
            caller.close()

    limits = httpx.Limits(max_connections=args.jobs)  # --follow events: a stream holds its connection
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as streams:
        await asyncio.gather(*(one(streams, i, body) for i, body in enumerate(_bodies(args.jobs))))
    if submitted:
        reader = Caller(host, port)
        try:
            collected, errors = await collect(reader, submitted, deadline)
        finally:
            reader.close()
        finals.update(collected)
        failures += errors
    return finals, time.monotonic() - t0, failures


def _clients_process(url: str, args: argparse.Namespace, results: Any) -> None:
    if args.clients_idle:
        _elsewhere()
    else:
        _own_session()
    finals, seconds, failures = asyncio.run(run_jobs(url, args))
    results.put((finals, seconds, failures, POLLS[0]))


def clients(url: str, args: argparse.Namespace) -> tuple[dict[str, dict[str, Any]], float, int, int]:
    """run_jobs in a process (and session) of its own, like the probe."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    proc = ctx.Process(target=_clients_process, args=(url, args, results))
    proc.start()
    try:
        return results.get(timeout=args.deadline_s + 120)  # type: ignore[no-any-return]
    finally:
        proc.join(timeout=30)


def probe_for(host: str, port: int, gap_s: float, seconds: float, out: list[float], trace: list[list[float]]) -> int:
    prober = Prober(host, port, gap_s)
    time.sleep(seconds)
    samples, errors = prober.finish()
    out.extend(samples)
    trace.extend([t, ms] for t, ms in zip(prober.stamps, samples, strict=True))
    return errors


def measure(args: argparse.Namespace, svc: Any) -> dict[str, Any]:
    """The baseline (half before the jobs, half after: background drift hits both sides), and the
    probe while the jobs run."""
    u = urlparse(svc.fast_url)
    host, port, gap = u.hostname or "127.0.0.1", u.port or 80, args.probe_gap_ms / 1000
    base: list[float] = []
    trace: dict[str, Any] = {"base": []}
    errors = probe_for(host, port, gap, args.probe_s / 2, base, trace["base"])
    prober = Prober(host, port, gap)
    trace["jobs_start"] = time.time()
    finals, seconds, server_errors, polls = clients(svc.fast_url, args)
    trace["jobs_end"] = time.time()
    during, during_errors = prober.finish()
    trace["during"] = [[t, ms] for t, ms in zip(prober.stamps, during, strict=True)]
    errors += during_errors + probe_for(host, port, gap, args.probe_s / 2, base, trace["base"])
    if args.trace:
        Path(args.trace).write_text(json.dumps(trace))
    return {"base": base, "during": during, "finals": finals, "seconds": seconds,
            "server_errors": server_errors, "probe_errors": errors, "polls": polls}


def report(args: argparse.Namespace, m: dict[str, Any], gate: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    finals = list(m["finals"].values())
    outcomes = {s: sum(j["status"] == s for j in finals) for s in ("succeeded", "failed", "cancelled")}
    calls, usd = sum(j["llm_calls"] for j in finals), sum(j["cost_usd"] for j in finals)
    p99_x = ratio_upper(m["during"], m["base"], 0.99)
    figures = {
        "jobs": args.jobs, "ended": len(finals), "outcomes": outcomes, "seconds": round(m["seconds"], 1),
        "jobs_per_s": round(len(finals) / m["seconds"], 3) if m["seconds"] else 0.0,
        "validated": sum(bool(j["validated"]) for j in finals),
        "llm_calls": calls, "llm_calls_budget": args.jobs * BUDGET["max_llm_calls"],
        "cost_usd": round(usd, 4), "usd_budget": args.jobs * BUDGET["max_usd"], "llm_gate": gate,
        "decide_ms": {"base_p50": quantile(m["base"], 0.5), "base_p99": quantile(m["base"], 0.99),
                      "during_p50": quantile(m["during"], 0.5), "during_p99": quantile(m["during"], 0.99),
                      "base_n": len(m["base"]), "during_n": len(m["during"])},
        "polls": m["polls"], "polls_per_s": round(m["polls"] / m["seconds"], 1) if m["seconds"] else 0.0,
        "p99_ratio_upper": round(p99_x, 3), "server_errors": m["server_errors"], "probe_errors": m["probe_errors"]}
    checks = {"decide p99 during plans <= 2x without (95% upper bound)": p99_x <= 2.0,
              f"all {args.jobs} jobs end within {args.deadline_s:g} s": len(finals) == args.jobs,
              "no 5xx and no failed probe": m["server_errors"] == 0 and m["probe_errors"] == 0}
    return figures, [name for name, ok in checks.items() if not ok]


def print_report(figures: dict[str, Any], missed: list[str]) -> None:
    d = figures["decide_ms"]
    print(f"\nPlan jobs under load (simulated world, real-time LLM latency; {figures['jobs']} jobs)\n")
    print(f"jobs ended {figures['ended']}/{figures['jobs']} in {figures['seconds']} s: "
          f"{figures['jobs_per_s']} jobs/s; outcomes {figures['outcomes']}; validated plans {figures['validated']}")
    print(f"LLM calls {figures['llm_calls']} of {figures['llm_calls_budget']} budgeted "
          f"({100 * figures['llm_calls'] / max(1, figures['llm_calls_budget']):.1f}%); "
          f"${figures['cost_usd']} of ${figures['usd_budget']:g}; runner gate {figures['llm_gate']}")
    print(f"job polls (GET /v1/plans/{{id}}): {figures['polls']}, {figures['polls_per_s']}/s")
    print(f"/v1/decide without plans: p50 {d['base_p50']:.2f} ms, p99 {d['base_p99']:.2f} ms (n={d['base_n']}); "
          f"during: p50 {d['during_p50']:.2f} ms, p99 {d['during_p99']:.2f} ms (n={d['during_n']})")
    print(f"p99 ratio, 95% upper bound: {figures['p99_ratio_upper']}x (target <= 2x); "
          f"5xx: {figures['server_errors']}, probe errors: {figures['probe_errors']}")
    print("\nall targets met" if not missed else "\nmissed: " + "; ".join(missed))


def main() -> int:
    import ray
    from ray import serve

    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="halo-bench-plans-"))
    svc = start(args, work)
    try:
        m = measure(args, svc)
        gate = ray.get(svc.plan_runner.stats.remote(), timeout=30)
        figures, missed = report(args, m, gate)
        print_report(figures, missed)
        if args.json:
            print(json.dumps({**figures, "missed": missed, "passed": not missed}, default=str))
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0 if not missed else 1
