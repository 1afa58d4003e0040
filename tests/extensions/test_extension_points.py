"""Adding an agent or a planner is one new file plus one registration line; a task source is
one function plus one line, and so is a trained policy class.

The throw-away agent (throwaway_agent.py) and planner (throwaway_planner.py) are registered
here with one line each, then shown working through the real paths: the episode loop
dispatches to the agent by ID in the simulated world with the real planner and validator;
`halo doctor`, `solvers.versions()`, the sandbox's read-only binds and `halo solve --planner`
see the planner, which plans in the sandbox. Both are unregistered afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import solvers
from cluster.cli import app
from cluster.commands import solve_cli
from rollout.core.agent_table import AGENT_IDS, AGENTS, register_agent, unregister_agent
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.loop.episode import EpisodeConfig, run_episode_sync
from rollout.policies import make_policy
from rollout.sim import SimConfig
from rollout.tasks import Task, TaskSpecError, load_tasks
from rollout.tasks.loaders import TASK_SOURCES, load_pddl_folder
from solvers import pool, sandbox
from solvers.planners import PLANNERS, BasePlanner
from tests.extensions.throwaway_agent import AGENT_ID
from train.manifest import Manifest, ManifestError
from train.policies import POLICY_CLASSES, ConstantPolicy, decides_inline, load_policy

FAST = EpisodeConfig(max_steps=1, sim=SimConfig(latency_scale=0.0))
IPC = Path(__file__).resolve().parent.parent / "fixtures" / "pddl" / "ipc" / "blocksworld"


@pytest.fixture
def throwaway_agent() -> Iterator[int]:
    register_agent(AGENT_ID, "tests.extensions.throwaway_agent:AgentGoldRestorer")
    yield AGENT_ID
    unregister_agent(AGENT_ID)


@pytest.fixture
def throwaway_planner() -> Iterator[str]:
    PLANNERS.register("fd-blind", "tests.extensions.throwaway_planner:PLANNER")
    yield "fd-blind"
    PLANNERS.unregister("fd-blind")


class Always(Policy):
    """Chooses one agent every step (a test double for a policy, not for any solver)."""

    name = "always"

    def __init__(self, agent_id: int) -> None:
        self.agent_id = agent_id

    def _decide(self, state: EpisodeState) -> Decision:
        return Decision(self.agent_id, "scripted", reason="always")


def test_a_registered_agent_is_dispatched_by_the_episode_loop(throwaway_agent: int) -> None:
    task = load_tasks("planbench:blocksworld:1")[0]
    record = run_episode_sync(task, Always(throwaway_agent), FAST)
    assert record.error == ""
    step = record.steps[0]
    assert (step.agent_id, step.agent_name, step.agent_ok) == (AGENT_ID, "AgentGoldRestorer", True)
    assert step.agent_message == "restored the gold PDDL"
    assert (step.domain_after, step.problem_after) == (task.gold_domain, task.gold_problem)
    # The loop ran the real planner and validator on what the agent wrote.
    assert step.plan_found and step.plan_valid and record.success_validator


def test_an_unregistered_agent_is_an_episode_error_not_a_crash() -> None:
    assert str(AGENT_ID) not in AGENTS
    task = load_tasks("planbench:blocksworld:1")[0]
    record = run_episode_sync(task, Always(AGENT_ID), FAST)
    assert record.error and not record.success_validator


def test_fixed_agent_ids_cannot_be_taken() -> None:
    for agent_id in (0, 11, 21, -1):
        with pytest.raises(ValueError, match="above 21"):
            register_agent(agent_id, "tests.extensions.throwaway_agent:AgentGoldRestorer")


def test_every_registered_agent_class_carries_its_id() -> None:
    for key in AGENTS.names():
        assert AGENTS.get(key).agent_id == int(key), key


def test_a_registered_planner_is_listed_bound_and_solves(throwaway_planner: str, capsys) -> None:
    found = solvers.versions()
    assert "astar(blind())" in found[throwaway_planner]
    report = json.loads(CliRunner().invoke(app, ["doctor", "--json"]).output)
    assert report["ok"] is True and "astar(blind())" in report["found"][throwaway_planner]
    fd_root = str(PLANNERS.get(throwaway_planner).ro_paths()[0].resolve())
    assert fd_root in pool._ro_paths()

    domain, problem = IPC / "domain.pddl", IPC / "probBLOCKS-4-1.pddl"
    code = solve_cli.main("solve", [str(domain), str(problem), "--planner", throwaway_planner, "--validate", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["plan"]["planner"] == throwaway_planner and out["validation"]["valid"]
    # Blind A* is optimal: the same cost as Fast Downward's A* with LM-cut.
    optimal = solvers.plan(domain.read_text(), problem.read_text(), alias="optimal")
    assert optimal.ok and out["plan"]["cost"] == optimal.cost


def test_an_unregistered_planner_is_refused() -> None:
    assert "fd-blind" not in solvers.versions()
    assert solve_cli.main("solve", [str(IPC / "domain.pddl"), str(IPC / "probBLOCKS-4-1.pddl"),
                                    "--planner", "fd-blind"]) == 2
    with pytest.raises(ValueError, match="planner must be one of"):
        solvers.plan("(define (domain d))", "(define (problem p))", planner="fd-blind")


class _BindsADirectory(BasePlanner):
    """Only its read-only path matters here: it shows the sandbox binds what planners ask for."""

    name = label = "binds-a-directory"
    roles = frozenset({"validator"})

    def __init__(self, path: Path) -> None:
        self.path = path

    def available(self) -> bool:
        return True

    def version(self) -> str | None:
        return "0"

    def cache_id(self) -> str:
        return ""

    def ro_paths(self) -> list[Path]:
        return [self.path]


def test_the_sandbox_binds_every_registered_planners_paths(tmp_path: Path) -> None:
    PLANNERS.register("binds-a-directory", _BindsADirectory(tmp_path))
    try:
        paths = pool._ro_paths()
        argv = sandbox.bwrap_argv(paths)
        assert str(tmp_path.resolve()) in paths
        assert argv[argv.index(str(tmp_path.resolve())) - 1] == "--ro-bind"
    finally:
        PLANNERS.unregister("binds-a-directory")
    assert str(tmp_path.resolve()) not in pool._ro_paths()


def _fixture_folder(rest: str) -> list[Task]:
    """A task source: one IPC fixture folder by name (the spec after "fixture:")."""
    return load_pddl_folder(IPC.parent / rest, family="classical", target_planner="fd")


def test_a_registered_task_source_is_one_function_and_one_line() -> None:
    TASK_SOURCES.register("fixture", _fixture_folder, example="fixture:DOMAIN")
    try:
        tasks = load_tasks("fixture:blocksworld,planbench:blocksworld:1")
        assert tasks[0].task_id.startswith("classical/blocksworld/") and tasks[-1].family == "planbench"
        with pytest.raises(TaskSpecError, match="fixture:DOMAIN"):
            load_tasks("nosuch:x")
    finally:
        TASK_SOURCES.unregister("fixture")
    with pytest.raises(TaskSpecError, match="--tasks 'fixture:blocksworld': unknown task source 'fixture'"):
        load_tasks("fixture:blocksworld")


def _constant_class(model_dir: Path, manifest: Manifest, device: str | None) -> Policy:
    """A trained policy class whose artifact is its manifest: always the agent in `extra`."""
    return ConstantPolicy(int(manifest.extra["agent_id"]), name=manifest.name)


def test_a_registered_trained_policy_class_loads_and_declares_inline(tmp_path: Path) -> None:
    Manifest(name="always-5", version="1", policy_class="constant", label_map={i: str(i) for i in AGENT_IDS},
             encoder_version="none", extra={"agent_id": 5}).save(tmp_path)
    POLICY_CLASSES.register("constant", _constant_class, inline=True)
    try:
        assert decides_inline("constant") and decides_inline("hashed_linear") and not decides_inline("llm")
        state = EpisodeState(task_description="t", domain="(define (domain d))", problem="(define (problem p))")
        assert load_policy(tmp_path).decide(state).agent_id == 5
        # Every command's policy specs reach it: model:DIR goes through the same registry.
        assert make_policy(f"rules+model:{tmp_path}").decide(state).agent_id == 5
    finally:
        POLICY_CLASSES.unregister("constant")
    assert not decides_inline("constant")
    with pytest.raises(ManifestError, match="unknown policy_class 'constant'"):
        load_policy(tmp_path)


class _NotInstalled(_BindsADirectory):
    name = label = "not-installed"
    roles = frozenset({"classical"})
    install = "pip install not-installed"

    def available(self) -> bool:
        return False

    def version(self) -> str | None:
        return None


def test_a_registered_planner_that_is_not_installed_is_a_clear_error(tmp_path: Path, capsys) -> None:
    PLANNERS.register("not-installed", _NotInstalled(tmp_path))
    try:
        code = solve_cli.main("solve", [str(IPC / "domain.pddl"), str(IPC / "probBLOCKS-4-1.pddl"),
                                        "--planner", "not-installed"])
        assert code == 2
        assert "'not-installed' is not installed here (pip install not-installed)" in capsys.readouterr().err
        with pytest.raises(ValueError, match="not installed here"):
            solvers.plan("(define (domain d))", "(define (problem p))", planner="not-installed")
        assert "not-installed" not in solvers.versions()
        report = json.loads(CliRunner().invoke(app, ["doctor", "--json"]).output)
        assert report["missing"]["not-installed"] == "pip install not-installed"
    finally:
        PLANNERS.unregister("not-installed")
