"""The top floor: the `halo` CLI, Ray cluster start/join, job entry points, the online loop."""
