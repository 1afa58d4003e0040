"""Ray Serve decision endpoint, model runtimes, hot reload, telemetry."""
