"""Where a store lives: a local directory or `s3://bucket/prefix`, and how to reach it.

S3 settings come from the usual AWS variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION) and may be overridden per store with
`storage_options` (same keys, any case). Delta commits on S3 use conditional puts
(`aws_conditional_put=etag`), so concurrent writers are safe without a DynamoDB lock; pass
`AWS_S3_LOCKING_PROVIDER=dynamodb` (and its table settings) instead where the endpoint lacks them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.fs as pafs

_AWS_ENV_KEYS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_REGION")


@dataclass(frozen=True)
class StoreLocation:
    url: str  # normalised: absolute local path, or s3://bucket/prefix (no trailing slash)
    scheme: str  # "file" | "s3"
    bucket: str = ""
    prefix: str = ""  # inside the bucket (s3) or the absolute directory (file)
    options: dict[str, str] = field(default_factory=dict)  # upper-case AWS-style keys

    @property
    def is_s3(self) -> bool:
        return self.scheme == "s3"

    def join(self, relative: str) -> str:
        """URL of a path inside the store ("steps", "models/my-model", ...)."""
        relative = relative.strip("/")
        if ".." in relative.split("/"):
            raise ValueError(f"store paths may not contain '..': {relative!r}")
        return f"{self.url}/{relative}" if relative else self.url

    def fs_path(self, relative: str) -> str:
        """The same path as a pyarrow filesystem path (no scheme)."""
        relative = relative.strip("/")
        base = f"{self.bucket}/{self.prefix}".rstrip("/") if self.is_s3 else self.prefix
        return f"{base}/{relative}" if relative else base

    def delta_options(self, *, max_retries: int = 3, retry_timeout_s: float = 10.0) -> dict[str, str]:
        """storage_options for deltalake (object_store): credentials, endpoint, its own short retries."""
        if not self.is_s3:
            return {}
        opts = {k: v for k, v in self.options.items() if v}
        if self.option("AWS_ENDPOINT_URL").startswith("http://"):
            opts.setdefault("AWS_ALLOW_HTTP", "true")
        if not (self.option("AWS_S3_LOCKING_PROVIDER") or self.option("AWS_S3_ALLOW_UNSAFE_RENAME")
                or self.option("aws_conditional_put")):
            opts["aws_conditional_put"] = "etag"
        if not self.option("AWS_REGION"):
            opts["AWS_REGION"] = "us-east-1"
        # object_store retries a little; the store's own retry loop owns the long budget.
        defaults = {"max_retries": str(max_retries), "retry_timeout": f"{retry_timeout_s:g}s",
                    "connect_timeout": "5s", "timeout": "60s"}
        for key, value in defaults.items():
            if not self.option(key):
                opts[key] = value
        return opts

    def option(self, key: str) -> str:
        """A storage option by case-insensitive name ("" when unset)."""
        for name, value in self.options.items():
            if name.lower() == key.lower():
                return value
        return ""

    def filesystem(self) -> pafs.FileSystem:
        if not self.is_s3:
            return pafs.LocalFileSystem()
        get = self.option
        kwargs: dict[str, object] = {
            "region": get("AWS_REGION") or "us-east-1",
            "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3),
            "connect_timeout": 5.0,
            "request_timeout": 60.0,
        }
        if get("AWS_ACCESS_KEY_ID"):
            kwargs["access_key"] = get("AWS_ACCESS_KEY_ID")
            kwargs["secret_key"] = get("AWS_SECRET_ACCESS_KEY")
            if get("AWS_SESSION_TOKEN"):
                kwargs["session_token"] = get("AWS_SESSION_TOKEN")
        endpoint = get("AWS_ENDPOINT_URL")
        if endpoint:
            parsed = urlparse(endpoint)
            kwargs["endpoint_override"] = parsed.netloc or parsed.path
            kwargs["scheme"] = parsed.scheme or "https"
        return pafs.S3FileSystem(**kwargs)


def parse_location(url: str | os.PathLike[str], storage_options: dict[str, str] | None = None) -> StoreLocation:
    text = os.fspath(url).strip()
    if not text:
        raise ValueError("store URL is empty: give a directory or s3://bucket/prefix")
    parsed = urlparse(text)
    if parsed.scheme in ("s3", "s3a"):
        if not parsed.netloc:
            raise ValueError(f"store URL {text!r} has no bucket: use s3://bucket/prefix")
        prefix = parsed.path.strip("/")
        options = {k: os.environ[k] for k in _AWS_ENV_KEYS if os.environ.get(k)}
        if "AWS_REGION" not in options and os.environ.get("AWS_DEFAULT_REGION"):
            options["AWS_REGION"] = os.environ["AWS_DEFAULT_REGION"]
        for key, value in (storage_options or {}).items():
            for existing in [k for k in options if k.lower() == key.lower()]:
                del options[existing]
            options[key] = str(value)
        norm = f"s3://{parsed.netloc}/{prefix}" if prefix else f"s3://{parsed.netloc}"
        return StoreLocation(norm, "s3", parsed.netloc, prefix, options)
    if parsed.scheme in ("", "file"):
        path = Path(parsed.path if parsed.scheme == "file" else text).expanduser().resolve()
        return StoreLocation(str(path), "file", "", str(path), {})
    raise ValueError(f"unsupported store URL scheme {parsed.scheme!r} in {text!r}: use a local path or s3://")
