"""`halo doctor` reports what it found and runs a real solve + validate."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cluster.cli import app


def test_doctor_json_lists_planners_sandbox_and_a_working_smoke_test():
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["ok"] is True and "solve+validate ok" in report["smoke_test"]
    for name in ("python", "fast-downward", "kairos", "sandbox"):
        assert report["found"][name]
    assert report["uses"]["validator"] in ("val", "kairos")
    assert all(cmd for cmd in report["missing"].values())


def test_doctor_text_names_missing_tools_with_an_install_command():
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "sandbox" in result.output and "fast-downward" in result.output
    if "missing:" in result.output:
        assert "k8s/images/build-planners.sh" in result.output or "install" in result.output


def test_b16_doctor_fails_and_names_a_popf_that_cannot_run(monkeypatch, tmp_path):
    import solvers

    fake = tmp_path / "popf"
    fake.write_text("#!/bin/sh\nexit 0\n")  # found on PATH, prints nothing: every call would fail
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    solvers.shutdown()
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert report["ok"] is False and "solver_crash" in report["smoke_tests"]["popf"]
    assert report["smoke_tests"]["fd"].startswith("ok") and "popf" in report["smoke_test"]


def test_b16_doctor_runs_classical_and_temporal_with_real_popf_and_val(monkeypatch):
    from real_tools import use_real_tools

    use_real_tools(monkeypatch, need_popf=True)
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["uses"] == {"temporal planner": "popf", "validator": "val"}
    assert report["smoke_tests"]["popf"] == "ok (temporal)"
    assert report["smoke_tests"]["val"] == "ok (classical, temporal)"
