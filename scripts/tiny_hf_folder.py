"""Write a tiny random Hugging Face folder with ``transformers`` itself, offline: a stand-in for a downloaded
GPT-2 or Llama (``config.json`` and ``model.safetensors``, float32, as ``save_pretrained`` writes them), so
the README's walkthrough runs with no download. A user with a real folder uses its path instead.

Usage: python scripts/tiny_hf_folder.py {gpt2,llama} FOLDER [--seed N]

The vocabulary is the 256 byte values, so any text's UTF-8 bytes are valid token ids. The weights are
``transformers``' own initialisation with ``initializer_range=0.2`` (its default 0.02 makes every
next-token distribution nearly uniform). FOLDER must not exist or be empty. Needs ``transformers``
(``pip install -e .[dev]``); a problem is one ``error: ...`` line and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys

CONFIGS = {
    "gpt2": dict(vocab_size=256, n_positions=64, n_embd=32, n_layer=2, n_head=4, initializer_range=0.2,
                 bos_token_id=None, eos_token_id=None),
    "llama": dict(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, initializer_range=0.2,
                  bos_token_id=None, eos_token_id=None, pad_token_id=None),
}


def write_folder(kind: str, folder: str, seed: int = 0) -> None:
    """Write the tiny random ``kind`` ("gpt2" or "llama") model of :data:`CONFIGS` to ``folder``."""
    if kind not in CONFIGS:
        raise ValueError(f"kind must be one of {sorted(CONFIGS)}, got {kind!r}")
    if os.path.exists(folder) and (not os.path.isdir(folder) or os.listdir(folder)):
        raise FileExistsError(f"FOLDER {folder!r} exists and is not an empty folder: name a new one")
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise RuntimeError(f"this script needs transformers and torch ({exc}): pip install -e .[dev]") from None
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(seed)
    if kind == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**CONFIGS[kind]))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIGS[kind]))
    model.eval().save_pretrained(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=sorted(CONFIGS), help="the architecture")
    parser.add_argument("folder", help="the folder to write (must not exist, or be empty)")
    parser.add_argument("--seed", type=int, default=0, help="torch's seed for the random weights (default 0)")
    args = parser.parse_args(argv)
    try:
        write_folder(args.kind, args.folder, args.seed)
    except (ValueError, FileExistsError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote a tiny random {args.kind} folder to {args.folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
