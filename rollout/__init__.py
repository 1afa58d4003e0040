"""The refinement loop and the rollouts that run it at scale.

Rooms, bottom to top (a room imports only rooms below it; tests/test_layering.py checks it):

- `llm/`      chat clients, the job-wide LLM budget, backoff and retries, prices, call records
- `core/`     the loop's vocabulary: agent IDs, `EpisodeState`, `Decision`/`Policy`, trajectory
              records, infrastructure failures
- `pddl/`     PDDL text: s-expressions, sections, a model, a printer, a state-space explorer
- `tasks/`    tasks and task sets: loaders, generators, Natural Plan, describing a task in words
- `agents/`   the 21 agents (LLM and deterministic) behind one interface
- `loop/`     one episode: `RefinementEnv`, `run_episode`, agent backends, evaluation by the
              real solvers, the oracle, per-policy reports
- `policies/` orchestrator policies: rules, scripted, random, teacher, trained model, the
              decision-service client, dynamic escalation
- `sim/`      the simulated agent world (the only room that says sim): world files, faults,
              the simulated teacher, its backend
- `store/`    the trajectory store: Parquet/Delta on a filesystem or S3, runs, leases, blobs
- `driver/`   the Ray rollout job: actors, workers, scheduling, commits, progress, summaries
"""
