"""The usual mistakes, as a user meets them: one line on stderr, the documented exit code
(cluster/errors.py), nothing started and nothing written to the store. All of these stop before
Ray starts, so each takes a few seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.errors import EXIT_UNREACHABLE, EXIT_USAGE
from serve.ports import free_port
from tests.fake_openai import FakeOpenAI, Reply

HALO = str(Path(sys.executable).with_name("halo"))
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if not k.startswith(("HALO_LLM_", "OPENAI_", "AWS_")) and k != "HALO_STORE_URL"}



def halo(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([HALO, *args], capture_output=True, text=True, env=env or CLEAN_ENV, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == code, result.stdout + result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def assert_nothing_stored(store: Path) -> None:
    assert not (store / "runs").exists() or not list((store / "runs").iterdir()), list(store.rglob("*"))
    assert not (store / "steps").exists()


def test_endpoint_down_is_refused_before_ray_starts(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    t0 = time.monotonic()
    result = halo("rollout", "--store", str(tmp_path), "--llm", f"openai:gpt-test@{url}", "--episodes", "2")
    assert_one_line_error(result, EXIT_UNREACHABLE, url, "connection_error", "start it or fix the URL")
    assert time.monotonic() - t0 < 60
    assert_nothing_stored(tmp_path)


def test_junk_endpoint_is_refused(tmp_path: Path) -> None:
    with FakeOpenAI(default=lambda body: Reply.malformed()) as server:
        url = server.base_url
        result = halo("rollout", "--store", str(tmp_path), "--llm", f"openai:gpt-test@{url}", "--episodes", "2")
        assert len(server.requests) >= 1  # it was asked once (a one-token request)
    assert_one_line_error(result, EXIT_UNREACHABLE, "bad_response", url)
    assert_nothing_stored(tmp_path)


def test_missing_url_is_a_usage_error(tmp_path: Path) -> None:
    result = halo("rollout", "--store", str(tmp_path), "--llm", "openai:gpt-4o", "--episodes", "2")
    assert_one_line_error(result, EXIT_USAGE, "no LLM endpoint", "HALO_LLM_BASE_URL")
    assert_nothing_stored(tmp_path)


def test_student_service_down_is_refused(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = halo("rollout", "--store", str(tmp_path), "--policy", f"rules+student:{url}", "--episodes", "2")
    assert_one_line_error(result, EXIT_UNREACHABLE, "decision service", url, "halo serve")
    assert_nothing_stored(tmp_path)


@pytest.mark.parametrize(("policy", "unknown"), [("rules+scripted:nosie=0.3", "nosie"), ("random:sed=4", "sed"),
                                                  ("scripted:noise=0.1,sed=2", "sed")])
def test_unknown_policy_parameters_are_refused(tmp_path: Path, policy: str, unknown: str) -> None:
    result = halo("rollout", "--store", str(tmp_path), "--policy", policy, "--episodes", "2")
    assert_one_line_error(result, EXIT_USAGE, f"unknown parameter '{unknown}'", "known:")
    assert_nothing_stored(tmp_path)


def test_unknown_sim_parameter_is_refused(tmp_path: Path) -> None:
    result = halo("rollout", "--store", str(tmp_path), "--llm", "sim:realtim=1", "--episodes", "2")
    assert_one_line_error(result, EXIT_USAGE, "realtim")


def test_s3_store_without_credentials(tmp_path: Path) -> None:
    from tests.s3_server import S3Server

    with S3Server() as server:
        env = {**CLEAN_ENV, "AWS_ENDPOINT_URL": server.endpoint, "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no"),
               "AWS_CONFIG_FILE": str(tmp_path / "no"), "AWS_EC2_METADATA_DISABLED": "true"}
        t0 = time.monotonic()
        rollout = halo("rollout", "--store", "s3://halo-nocreds/data", "--episodes", "2", env=env)
        runs = halo("runs", "--store", "s3://halo-nocreds/data", env=env)
        took = time.monotonic() - t0
    assert_one_line_error(rollout, EXIT_UNREACHABLE, "no S3 credentials", "AWS_ACCESS_KEY_ID")
    assert_one_line_error(runs, EXIT_UNREACHABLE, "AWS_ACCESS_KEY_ID")
    assert took < 60, took


def test_debug_shows_the_trace(tmp_path: Path) -> None:
    result = halo("rollout", "--store", str(tmp_path), "--policy", "random:sed=4", "--debug")
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_version() -> None:
    from cluster.config import project_version

    result = halo("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"halo {project_version()}"
