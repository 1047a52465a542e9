"""``sample``: continue a prompt with a language model trained by ``train --model gpt --text FILE``.

``python -m numpy_transformer sample run.npz --prompt "The " --max-new-tokens 200`` encodes the prompt
with the tokenizer stored in the checkpoint (its vocabulary: no text file is needed), generates with
``GPT.generate`` and writes the prompt and its continuation to stdout and nothing else (every message
goes to stderr), so that ``sample ... > out.txt`` keeps the text alone. Sampling by default
(``--temperature``, ``--top-k``, ``--top-p``, ``--seed``); ``--num-beams N`` (> 1) is beam search
instead, ``--greedy`` the argmax.

A Hugging Face folder (``config.json`` + ``model.safetensors``, loaded by ``GPT.from_pretrained``)
has no tokenizer here: its ``--prompt`` is token ids separated by spaces, and the output is the ids.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from . import nonnegative_int, positive_float, positive_int, probability


def register(subparsers):
    p = subparsers.add_parser("sample", help="continue a prompt with a train --text checkpoint (or a Hugging "
                              "Face GPT folder, in token ids)", description=__doc__)
    p.add_argument("checkpoint", help="a .npz written by train --model gpt --text FILE, or a Hugging Face folder")
    p.add_argument("--prompt", required=True, help="the text to continue (a Hugging Face folder: token ids, "
                   'e.g. "464 3290"); at least one token')
    p.add_argument("--max-new-tokens", type=positive_int, default=100,
                   help="tokens to generate (default 100); the prompt and these must fit the model's block size")
    p.add_argument("--temperature", type=positive_float, help="sampling temperature (default 1.0)")
    p.add_argument("--top-k", type=positive_int, help="sample from the k most likely tokens only")
    p.add_argument("--top-p", type=probability, help="sample from the most likely tokens whose probability "
                   "reaches p (nucleus sampling)")
    p.add_argument("--num-beams", type=positive_int, default=1, help="> 1: beam search instead of sampling")
    p.add_argument("--greedy", action="store_true", help="the most likely token each step instead of sampling")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seeds the sampling (default 0)")
    p.set_defaults(func=run_sample)


def _error(msg):
    print(f"error: {msg}", file=sys.stderr)
    return 2


def load_sampler(path):
    """``(model, encode, decode)`` of a ``train --text`` checkpoint or a Hugging Face folder (ids in/out).

    Raises ValueError (or CheckpointError) naming ``path`` for anything else."""
    if os.path.isdir(path):
        from ..models.gpt import GPT
        model = GPT.from_pretrained(path)

        def encode(text):
            try:
                return np.array([int(t) for t in text.replace(",", " ").split()], dtype=np.int64)
            except ValueError:
                raise ValueError(f"{path} has no tokenizer here, so the prompt is token ids separated "
                                 "by spaces") from None
        return model, encode, lambda ids: " ".join(str(int(i)) for i in ids)
    from ..tasks.text import tokenizer_from_dict
    from ..training.checkpoint import load_checkpoint
    from ..training.kinds import TEXT_TASK, model_from_checkpoint
    from ..training.trainer import checkpoint_config
    ckpt = load_checkpoint(path)
    config = checkpoint_config(ckpt)
    if config.task != TEXT_TASK:
        raise ValueError(f"{path} is a --model {config.model} checkpoint of task {config.task}; sample needs one "
                         "written by train --model gpt --text FILE (use predict for the synthetic tasks)")
    stored = ckpt.extra_json.get("text") or {}
    try:
        tok = tokenizer_from_dict(stored.get("tokenizer"))
    except ValueError as exc:
        raise ValueError(f"{path}: its vocabulary is missing or damaged: {exc}") from None
    model = model_from_checkpoint(ckpt)
    if tok.vocab_size != model.config.vocab_size:
        raise ValueError(f"{path}: its tokenizer has {tok.vocab_size} tokens but the model {model.config.vocab_size};"
                         " the checkpoint is damaged")
    return model, tok.encode, tok.decode


def sample_text(model, encode, decode, prompt, max_new_tokens, temperature=None, top_k=None, top_p=None,
                num_beams=1, greedy=False, seed=0):
    """The prompt and its continuation as text: ``decode(generate(encode(prompt)))``."""
    try:
        ids = encode(prompt)
    except ValueError as exc:
        raise ValueError(f"--prompt {prompt!r}: {exc}") from None
    if ids.size == 0:
        raise ValueError("--prompt must hold at least one token, got an empty prompt")
    do_sample = not greedy and num_beams == 1
    if not do_sample and (temperature is not None or top_k is not None or top_p is not None):
        raise ValueError("--temperature, --top-k and --top-p shape sampling; they do not apply with "
                         + ("--greedy" if greedy else "--num-beams > 1"))
    kwargs = dict(do_sample=do_sample, num_beams=num_beams, use_cache=True)
    if do_sample:
        kwargs.update(temperature=1.0 if temperature is None else temperature, top_k=top_k, top_p=top_p, seed=seed)
    out = model.generate(ids[None, :], max_new_tokens, **kwargs)                 # (1, S + new)
    return decode(out[0])


def run_sample(args):
    try:
        model, encode, decode = load_sampler(args.checkpoint)
        text = sample_text(model, encode, decode, args.prompt, args.max_new_tokens, args.temperature, args.top_k,
                           args.top_p, args.num_beams, args.greedy, args.seed)
    except (ValueError, TypeError, OSError) as exc:
        return _error(str(exc))
    sys.stdout.write(text + ("\n" if sys.stdout.isatty() else ""))
    sys.stdout.flush()
    return 0
