"""The loop's vocabulary: agent IDs, episode state, decisions and policies, trajectory records, infra failures."""
