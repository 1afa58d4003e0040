"""The search's value estimate: `search:...,value=DIR` loads a value model artifact (built by
`halo train --value`, train/value_model.py) and orders the frontier with it.

The artifact's code lives in the train layer, above this one; it is named here as a
"module:attr" string and imported when a spec first asks for it (as the `model:DIR` policy is),
so rollout/ never imports train/.

The rule (chosen on a development task set, docs/results/2026-12-03-search.md, Session 39): a
node's priority is the search's own (the verifier's verdict, a depth bonus, a rank penalty) plus
`value_weight` times the model's estimate of the chance the episode ends in oracle success from
the node's state. A verdict level is worth 1, so with the default weight the estimate orders
nodes of one verdict and can lift a node past a neighbouring verdict only when it is far surer.
The results file says what it bought on that set.
"""

from __future__ import annotations

from typing import Protocol

from rollout.core.state import EpisodeState
from solvers.registry import load_attr

VALUE_LOADER = "train.value_model:load_value_model"  # DIR -> a ValueEstimator; ValueError when DIR is not one


class ValueEstimator(Protocol):
    name: str
    version: str

    def predict(self, state: EpisodeState) -> float:
        """The chance, in [0, 1], that an episode in `state` ends in oracle success."""
        ...


def load_value(directory: str) -> ValueEstimator:
    """The value model in `directory` (its loader raises a one-line ValueError when it is not one)."""
    loader = load_attr(VALUE_LOADER)
    return loader(directory)
