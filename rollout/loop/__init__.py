"""One episode of the refinement loop: the environment, its agent backends, evaluation, the oracle, reports."""
