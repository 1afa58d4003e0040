"""One validation of an episode state: `EpisodeState.from_dict` (trajectory reads, DeploymentHandle
callers) and the HTTP request schema refuse the same things, naming the same field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rollout.core.state import HISTORY_LEN, EpisodeState, StateError, field_path, state_schema
from serve.schemas import StateIn

GOOD = {"task_description": "Stack the blocks.", "domain": "(define (domain d))", "history": [13, 2],
        "plan_valid": False, "step": 3, "spec_json": None}

BAD = [
    ({}, "task_description"),
    ({**GOOD, "task_description": 7}, "task_description"),
    ({**GOOD, "plan_valid": 0}, "plan_valid"),  # no 0 for false
    ({**GOOD, "step": "1"}, "step"),  # no "1" for 1
    ({**GOOD, "step": True}, "step"),
    ({**GOOD, "step": -1}, "step"),
    ({**GOOD, "step": 10**9}, "step"),
    ({**GOOD, "spec_json": 3}, "spec_json"),
    ({**GOOD, "history": [1, "2"]}, "history[1]"),
    ({**GOOD, "history": [22]}, "history[0]"),  # past the dynamic agent
    ({**GOOD, "history": [0] * 1001}, "history"),
    ({**GOOD, "history": 5}, "history"),
]


@pytest.mark.parametrize(("body", "field"), BAD)
def test_from_dict_and_the_http_schema_refuse_the_same_field(body, field):
    with pytest.raises(StateError) as err:
        EpisodeState.from_dict(body)
    assert err.value.field_name == field
    assert str(err.value).startswith(f"{field}: ")
    with pytest.raises(ValidationError) as http:
        StateIn.model_validate(body)
    assert field_path(http.value.errors()[0]["loc"]) == field


def test_the_http_schema_is_the_state_schema():
    assert StateIn is state_schema()
    assert set(StateIn.model_fields) == {f for f in EpisodeState.__dataclass_fields__}


def test_round_trip_and_history_cut():
    state = EpisodeState(task_description="t", history=list(range(HISTORY_LEN)), step=4, plan_found=True)
    assert EpisodeState.from_dict(state.to_dict()) == state
    assert EpisodeState.from_json(state.to_json()) == state
    long = EpisodeState.from_dict({"task_description": "t", "history": list(range(15))})
    assert long.history == list(range(5, 15))
    # the HTTP path builds the state from the validated body: the same state, the same cut
    body = StateIn.model_validate({"task_description": "t", "history": list(range(15))})
    assert EpisodeState.from_model(body) == long


def test_unknown_keys_are_ignored_on_read_and_refused_over_http():
    assert EpisodeState.from_dict({**GOOD, "written_by_a_newer_version": 1}) == EpisodeState.from_dict(GOOD)
    with pytest.raises(ValidationError) as err:
        StateIn.model_validate({**GOOD, "plan_vaild": True})
    assert field_path(err.value.errors()[0]["loc"]) == "plan_vaild"


def test_not_an_object():
    with pytest.raises(StateError) as err:
        EpisodeState.from_dict(["task_description"])  # type: ignore[arg-type]
    assert err.value.field_name == "state"
