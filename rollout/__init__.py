"""The refinement loop: episode state, agents, policies, tasks, simulated world, rollouts, store."""
