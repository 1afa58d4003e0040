"""The keys the serve test cluster is started with (a module of its own: `conftest` is not importable by
name when several test folders each have one)."""

API_KEY = "test-key-0123456789"
STALL_KEY = "staller=stall-key-0123456789"  # a second decision key, for the stalled-clients test
ADMIN_KEY = "ops=admin-key-0123456789"  # NAME=KEY: metrics and logs show "ops"
FEEDBACK_KEY = "mallory=feedback-key-0123456789"  # a feedback-only key (the fabricated-feedback test)
