"""Checks a command runs before Ray starts: is everything the job will need there and answering?

Each check either passes or raises `Unreachable` (exit 3) / `UsageError` (exit 2) with one line
that names the fix. They cost a second or two in all: the LLM endpoint gets one tiny request
(max_tokens=1, one attempt), the student service one GET /readyz, the store one listing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from pathlib import Path

from cluster.errors import Unreachable, UsageError

PROBE_TIMEOUT_S = 10.0


def preflight_rollout(llm: str, policy: str, store_url: str) -> None:
    """Everything `halo rollout` (and `halo report`, `halo eval`) depends on, before Ray starts."""
    check_llm_spec(llm)
    check_policy_services(policy)
    check_store(store_url)
    check_planners()


# ---- the LLM endpoint -------------------------------------------------------------------------


def check_llm_spec(llm: str) -> None:
    """--llm openai:MODEL[@URL]: the URL resolves and answers a one-token request; sim with
    base_url=URL: that endpoint answers."""
    from rollout.llm.spec import LLMSpec
    from rollout.sim.spec import SimSpec

    try:
        spec = LLMSpec.parse(llm)
        sim = SimSpec.parse(spec) if spec.is_sim else None
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if sim is not None:
        if sim.base_url:
            probe_llm(sim.base_url, sim.model, what=f"--llm {llm}")
        return
    probe_llm(spec.base_url, spec.model, what=f"--llm {llm}")


def probe_llm(base_url: str | None, model: str | None, *, what: str) -> None:
    from rollout.llm import OpenAIChatClient, config_from_env
    from rollout.llm.errors import LLMError

    try:
        config = config_from_env(model, base_url, max_attempts=1, timeout_s=PROBE_TIMEOUT_S, max_tokens=1)
    except ValueError as exc:
        raise UsageError(f"{what}: {exc} (e.g. --llm openai:MODEL@http://HOST:PORT/v1)") from exc
    client = OpenAIChatClient(config)

    async def ask() -> None:
        try:
            await client.chat([{"role": "user", "content": "Reply with OK."}], purpose="preflight")
        finally:
            await _aclose(client)

    try:
        _run(ask())
    except LLMError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.kind
        raise Unreachable(f"LLM endpoint {config.base_url} ({config.model}) does not answer a chat request "
                          f"({exc.kind}: {first[:200]}); start it or fix the URL in {what}") from exc


async def _aclose(client: object) -> None:
    close = getattr(client, "aclose", None) or getattr(client, "close", None)
    if close is None:
        return
    result = close()
    if asyncio.iscoroutine(result):
        await result


def _run(coro: object) -> None:
    """asyncio.run, also from a thread that already runs a loop (a test's, a notebook's)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coro)  # type: ignore[arg-type]
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coro).result()  # type: ignore[arg-type]


# ---- services the policy calls -----------------------------------------------------------------


def policy_service_urls(policy: str) -> tuple[list[str], list[tuple[str | None, str | None]]]:
    """The student service URLs and the teacher endpoints (base URL, model) a policy spec names."""
    from rollout.policies import PolicySpec
    from rollout.policies.teacher import teacher_endpoint
    from solvers.params import SpecError

    students: list[str] = []
    teachers: list[tuple[str | None, str | None]] = []
    spec = PolicySpec.parse(policy)
    if spec.name == "student":
        students.append(spec.params.strip())
    elif spec.name == "teacher":
        try:
            endpoint = teacher_endpoint(spec.params)
        except SpecError as exc:
            raise spec.error(exc) from None
        if endpoint is not None:  # None: the simulated teacher, no endpoint
            teachers.append(endpoint)
    return students, teachers


def check_policy_services(policy: str) -> None:
    students, teachers = policy_service_urls(policy)
    for url in students:
        check_student(url)
    for base_url, model in teachers:
        probe_llm(base_url, model, what=f"--policy {policy}")


def check_student(url: str) -> None:
    import httpx

    probe = url.rstrip("/") + "/readyz"
    try:
        response = httpx.get(probe, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise Unreachable(f"the decision service at {url} does not answer ({type(exc).__name__}: {exc}); "
                          f"start it with `halo serve --model ...` or fix the URL in student:URL") from exc
    if response.status_code != 200:
        raise Unreachable(f"the decision service at {url} is not ready (GET /readyz answered "
                          f"{response.status_code}: {response.text[:120]!r}); wait for it or check `halo serve`")


# ---- the store ------------------------------------------------------------------------------------


def check_store(url: str) -> None:
    """A local store's directory can be created; an S3 store has credentials and answers a listing."""
    from rollout.store.location import parse_location

    try:
        location = parse_location(url)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if not location.is_s3:
        _check_local_dir(Path(location.url))
        return
    if not _has_s3_credentials(location.option):
        raise Unreachable(f"store {location.url}: no S3 credentials (set AWS_ACCESS_KEY_ID and "
                          f"AWS_SECRET_ACCESS_KEY, and AWS_ENDPOINT_URL for MinIO or another S3-compatible "
                          f"service)")
    _probe_s3(location)


def _check_local_dir(path: Path) -> None:
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and (not existing.is_dir() or not os.access(existing, os.W_OK)):
        raise Unreachable(f"store {path}: {existing} is not a writable directory; pass --store DIR "
                          f"(or set HALO_STORE_URL) to one you can write")


def _has_s3_credentials(option: object) -> bool:
    get = option  # StoreLocation.option
    if get("AWS_ACCESS_KEY_ID") and get("AWS_SECRET_ACCESS_KEY"):  # type: ignore[operator]
        return True
    env = os.environ
    if any(env.get(k) for k in ("AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "HALO_S3_INSTANCE_ROLE")):
        return True
    files = [env.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials",
             env.get("AWS_CONFIG_FILE") or "~/.aws/config"]
    return any(Path(f).expanduser().is_file() for f in files)


def _probe_s3(location: object) -> None:
    import pyarrow.fs as pafs

    fs = location.filesystem()  # type: ignore[attr-defined]
    base = location.fs_path("")  # type: ignore[attr-defined]
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(fs.get_file_info, pafs.FileSelector(base.rstrip("/"), allow_not_found=True)).result(
                timeout=3 * PROBE_TIMEOUT_S)
    except concurrent.futures.TimeoutError as exc:
        raise Unreachable(f"store {location.url}: no answer within {3 * PROBE_TIMEOUT_S:.0f}s; check "  # type: ignore[attr-defined]
                          f"AWS_ENDPOINT_URL and the network") from exc
    except OSError as exc:
        first = str(exc).strip().splitlines()[0][:200]
        raise Unreachable(f"store {location.url} refused a listing ({first}); check the bucket name, the "  # type: ignore[attr-defined]
                          f"credentials and AWS_ENDPOINT_URL") from exc


# ---- planners ---------------------------------------------------------------------------------------


def check_planners() -> None:
    """The required planners and validator are installed (`halo doctor` says more)."""
    import solvers
    from cluster.commands.doctor import install_hints

    found = solvers.versions()
    install, required = install_hints()
    missing = [name for name in required if name not in found]
    if missing:
        fixes = "; ".join(f"{name}: {install.get(name, 'see halo doctor')}" for name in missing)
        raise Unreachable(f"missing planner(s) {', '.join(missing)} ({fixes}); `halo doctor` shows what is installed")
