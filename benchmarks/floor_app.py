"""The latency floor of benchmarks/serve.py: a plain uvicorn + FastAPI no-op answering like
/v1/decide, in its own process (python benchmarks/floor_app.py PORT)."""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from fastapi import FastAPI, Request

app = FastAPI()


@app.post("/v1/decide")
async def decide(request: Request) -> dict[str, Any]:
    await request.body()
    return {"agent_id": 0, "agent_name": "AgentHallucinations", "decided_by": "rule", "policy_version": "noop",
            "latency_ms": 0.0}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
