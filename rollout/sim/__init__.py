"""The simulated agent world: gold PDDL + injected faults, simulated LLM agents, real solvers."""

from rollout.sim.faults import CATALOG, PDDL_FAULTS, PLAN_FAULTS, Fault
from rollout.sim.world import Draft, SimConfig, SimWorld

__all__ = ["CATALOG", "PDDL_FAULTS", "PLAN_FAULTS", "Draft", "Fault", "SimConfig", "SimWorld"]
