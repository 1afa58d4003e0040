"""The online learning loop (docs/loop.md): retrain the served orchestrator on fresh accepted data."""
