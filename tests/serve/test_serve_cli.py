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
