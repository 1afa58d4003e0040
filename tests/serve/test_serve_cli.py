"""`halo serve` refuses a model that does not verify before starting anything."""

from __future__ import annotations

from typer.testing import CliRunner

from cluster.cli import app


def test_halo_serve_refuses_bad_models(models, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["serve", "--model", str(models.bad)])
    assert result.exit_code == 2
    assert "distinct" in result.output
    result = runner.invoke(app, ["serve", "--model", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "does not exist" in result.output
    config = tmp_path / "serve.yaml"
    config.write_text(f"model: {models.v1}\nruntime: tpu\n")
    result = runner.invoke(app, ["serve", "--config", str(config)])
    assert result.exit_code == 2 and "runtime" in result.output
    assert runner.invoke(app, ["serve"]).exit_code == 2


def test_halo_serve_refuses_an_open_service_off_loopback_and_short_keys(models, tmp_path, monkeypatch):
    runner = CliRunner()
    monkeypatch.delenv("HALO_SERVE_API_KEYS", raising=False)
    monkeypatch.delenv("HALO_SERVE_ADMIN_KEYS", raising=False)
    result = runner.invoke(app, ["serve", "--model", str(models.v1), "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "--insecure" in result.output
    monkeypatch.setenv("HALO_SERVE_API_KEYS", "short-key")
    result = runner.invoke(app, ["serve", "--model", str(models.v1)])
    assert result.exit_code == 2 and "16 characters" in result.output
    assert "Traceback" not in result.output
