"""Model sources confined: admin deploys only from configured roots (local directories, s3://
prefixes), refused before anything is read and with one answer whether the path exists or not;
an S3 model's listing (sizes) and manifest are checked before its download; a failed download
leaves nothing cached; an .npz that would inflate past its cap is refused without inflating it.
S3 is a real moto_server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from npz_bomb import write_npz_bomb

from tests.s3_server import S3Server


@pytest.fixture(scope="module")
def s3():
    with S3Server() as server:
        server.create_bucket("halo")
        server.create_bucket("other")
        yield server


@pytest.fixture
def s3_env(s3, monkeypatch):
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    return s3


@pytest.fixture(scope="module")
def bomb_dir(models, tmp_path_factory) -> Path:
    """The v1 model with its weights replaced by a ~2 MB .npz declaring a 2 GiB array."""
    import shutil

    out = tmp_path_factory.mktemp("bomb") / "bomb"
    shutil.copytree(models.v1, out)
    write_npz_bomb(out / "weights.npz")
    return out


def _upload(s3, bucket: str, prefix: str, local: Path, extra: dict[str, bytes] | None = None) -> None:
    client = s3.client()
    for path in local.rglob("*"):
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(local)}")
    for name, data in (extra or {}).items():
        client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)


def _roots(local: Path):
    from serve.model_source import ModelRoots

    return ModelRoots.parse(["s3://halo/prod/models", str(local)])


def test_refs_outside_the_roots_are_refused_before_any_read(s3_env, models, tmp_path):
    from serve.model_source import ModelOutsideRoots, resolve_model

    _upload(s3_env, "other", "tenant/model", models.v1, {"credentials.txt": b"aws_secret=another-tenants"})
    cache = tmp_path / "cache"
    roots = _roots(models.v1.parent)
    (tmp_path / "escape").symlink_to("/etc")
    answers = set()
    for ref in ("s3://other/tenant/model", "s3://halo/prod/models-evil/x", "s3://halo/prod", "/etc", "file:///etc",
                "/proc/self/cwd", "/no/such/dir", f"{models.v1.parent}/../../etc", str(tmp_path / "escape"),
                "ftp://host/m"):
        with pytest.raises(ModelOutsideRoots) as err:
            resolve_model(ref, cache, roots=roots)
        answers.add(str(err.value))
    assert len(answers) == 1 and "/etc" not in answers.pop()  # one answer: no path's existence is revealed
    assert not cache.exists()  # nothing downloaded, nothing cached
    assert resolve_model(str(models.v1), cache, roots=roots) == models.v1.resolve()  # inside: served


def test_sizes_and_manifest_are_checked_before_the_download(s3_env, models, tmp_path):
    from serve.model_source import ModelSourceError, SizeLimits, resolve_model
    from train.manifest import ManifestError

    cache = tmp_path / "cache"
    roots = _roots(models.v1.parent)
    _upload(s3_env, "halo", "prod/models/huge", models.v1, {"blob.bin": b"\0" * 3_000_000})
    with pytest.raises(ModelSourceError, match="cap per artifact"):
        resolve_model("s3://halo/prod/models/huge", cache, roots=roots, limits=SizeLimits(1_000_000, 10**9, 10**9))
    with pytest.raises(ModelSourceError, match="max_model_bytes"):
        resolve_model("s3://halo/prod/models/huge", cache, roots=roots, limits=SizeLimits(10**9, 2_000_000, 10**9))
    _upload(s3_env, "halo", "prod/models/no-manifest", models.v1)
    s3_env.client().delete_object(Bucket="halo", Key="prod/models/no-manifest/manifest.json")
    with pytest.raises(ModelSourceError, match="no manifest.json"):
        resolve_model("s3://halo/prod/models/no-manifest", cache, roots=roots)
    _upload(s3_env, "halo", "prod/models/bad-manifest", models.v1, {"manifest.json": json.dumps({"name": 1}).encode()})
    with pytest.raises(ManifestError):
        resolve_model("s3://halo/prod/models/bad-manifest", cache, roots=roots)
    assert not cache.exists() or not any(cache.iterdir())  # none of them was downloaded


def test_a_refused_download_is_removed(s3_env, bomb_dir, tmp_path):
    from serve.model_source import ModelSourceError
    from serve.runtime import load_model

    _upload(s3_env, "halo", "prod/models/bomb", bomb_dir)
    cache = tmp_path / "cache"
    with pytest.raises(ModelSourceError, match="inflate"):
        load_model("s3://halo/prod/models/bomb", cache_dir=str(cache), roots=_roots(bomb_dir.parent))
    assert not any(cache.iterdir())


def test_the_npz_bomb_is_refused_in_under_100_mb(bomb_dir):
    """In a fresh process: peak memory while the 2 GiB-declaring weights are refused."""
    assert (bomb_dir / "weights.npz").stat().st_size < 4_000_000
    script = textwrap.dedent(f"""
        import resource, json
        from serve.model_source import ModelSourceError
        from serve.runtime import load_model
        import numpy, train.fast_policy  # imported before the baseline
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            load_model({str(bomb_dir)!r})
            outcome = "loaded"
        except ModelSourceError as exc:
            outcome = str(exc)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({{"outcome": outcome, "peak_growth_kb": after - before}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\nnpz bomb: {result}")
    assert "inflate past" in result["outcome"]
    assert result["peak_growth_kb"] < 100 * 1024


def test_admin_cannot_deploy_from_outside_the_roots(cluster, admin_auth):
    for ref in ("/etc", "file:///etc/passwd", "/proc/self/cwd", "s3://other/tenant/model"):
        r = httpx.post(f"{cluster.direct_url}/v1/admin/model", json={"model": ref}, headers=admin_auth, timeout=60)
        assert r.status_code == 403 and r.json()["error"] == "model_outside_roots", r.text
        assert "etc" not in r.json()["detail"] and "tenant" not in r.json()["detail"]
