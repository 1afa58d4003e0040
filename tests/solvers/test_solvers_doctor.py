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
