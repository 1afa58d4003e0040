"""The decision service as a Ray Serve application builder, for `serve run`/RayService configs.

KubeRay's RayService deploys `serveConfigV2`, whose application names an import path and
passes `args`; this builder turns those args into a ServeConfig (unknown keys are refused),
verifies the model's manifest, makes sure the model registry has a target (a fresh cluster
after a NewCluster upgrade starts with an empty registry) and returns the application that
`halo serve` runs. Later model versions arrive through POST /v1/admin/model, not through here.
"""

from __future__ import annotations

from typing import Any


def app(args: dict[str, Any]) -> Any:
    from serve.app import build_app
    from serve.config import ServeConfig
    from serve.launcher import target_model
    from serve.runtime import verify_model

    config = ServeConfig.from_dict(dict(args))
    if not config.model:
        raise ValueError("serve application args: `model` is required")
    _, manifest = verify_model(config.model, config.model_cache_dir or None)
    target_model(config, manifest, replace=False)  # later versions arrive through /v1/admin/model
    return build_app(config)
