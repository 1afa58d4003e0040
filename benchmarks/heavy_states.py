"""Crafted decision states that are expensive to read: big PDDL whose relaxed reachability and
static read explode, plus long error texts (what a hostile client sends to one replica)."""

from __future__ import annotations

from typing import Any


def heavy_state(target_bytes: int = 500_000) -> dict[str, Any]:
    """A state of about `target_bytes` of JSON: many 4-parameter actions over many objects."""
    actions = []
    for i in range(60):
        actions.append(f"(:action a{i} :parameters (?x ?y ?z ?w) :precondition (and (p{i} ?x ?y) (q ?y ?z) (q ?z ?w)) "
                       f":effect (and (p{i + 1} ?w ?x) (not (q ?x ?y))))")
    domain = "(define (domain heavy) (:requirements :strips) (:predicates " + \
        " ".join(f"(p{i} ?a ?b)" for i in range(61)) + " (q ?a ?b)) " + " ".join(actions) + ")"
    objects = [f"o{i}" for i in range(400)]
    init = " ".join(f"(q o{i} o{(i * 7 + 1) % 400})" for i in range(400)) + " (p0 o1 o2)"
    goal = " ".join(f"(p60 o{i} o{(i + 3) % 400})" for i in range(300))
    problem = f"(define (problem h) (:domain heavy) (:objects {' '.join(objects)}) (:init {init}) " \
              f"(:goal (and {goal})))"
    errors = "precondition false: (q o1 o2) in step 3 (a1 o1 o2 o3 o4) " * 200
    clauses = ", ".join(f"p60(o{i}, o{(i + 3) % 400})" for i in range(2000))
    state = {"task_description": "reach the goal: " + clauses, "domain": domain, "problem": problem, "plan": "",
             "validator_errors": errors, "planner_log": "", "error_category": "plan_invalid",
             "plan_found": False, "plan_valid": False, "history": [13, 7], "step": 2}
    pad = target_bytes - sum(len(str(v)) for v in state.values())
    if pad > 0:
        state["planner_log"] = "x" * pad
    return state
