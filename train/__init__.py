"""Dataset building, state encoder, label tokens, Ray Train fine-tuning, fast policies, evaluation."""
