"""``sample``: continue a prompt with a language model trained by ``train --model gpt --text FILE``.

``python -m numpy_transformer sample run.npz --prompt "The " --max-new-tokens 200`` encodes the prompt
with the tokenizer stored in the checkpoint (its vocabulary: no text file is needed), generates with
``GPT.generate`` and writes the prompt and its continuation to stdout and nothing else (every message
goes to stderr), so that ``sample ... > out.txt`` keeps the text alone. Sampling by default
(``--temperature``, ``--top-k``, ``--top-p``, ``--seed``); ``--num-beams N`` (> 1) is beam search
instead, ``--greedy`` the argmax.

A Hugging Face folder (``config.json`` + ``model.safetensors``, loaded by ``GPT.from_pretrained``)
takes and gives text too when it holds ``tokenizer.json`` and the ``tokenizers`` package is installed
(``nt.load_tokenizer``; special tokens such as ``<s>`` are left out of the output). Without either, and
for a GPT checkpoint saved from Python, the ``--prompt`` is token ids separated by spaces and the
output is the ids; a prompt that is not ids gets one error saying why.
"""

from __future__ import annotations

import sys

from . import nonnegative_int, positive_float, positive_int, probability


def register(subparsers):
    p = subparsers.add_parser("sample", help="continue a prompt with a train --text checkpoint or a Hugging "
                              "Face folder (text with its tokenizer.json, else token ids)", description=__doc__)
    p.add_argument("checkpoint", help="a .npz written by train --model gpt --text FILE, or a Hugging Face folder")
    p.add_argument("--prompt", required=True, help="the text to continue (a folder without tokenizer.json, or a "
                   'GPT saved from Python: token ids, e.g. "464 3290"); at least one token')
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
    """``(model, encode, decode)`` of a ``train --text`` checkpoint, a Hugging Face folder (text with its
    ``tokenizer.json`` and the ``tokenizers`` package, token ids without) or a GPT saved from Python (ids).

    Raises ValueError (or CheckpointError) naming ``path`` for anything else."""
    from .model_source import open_model
    opened = open_model(path)
    if not opened.is_language_model:
        if opened.origin == "train":
            raise ValueError(f"{path} is a --model {opened.model_kind} checkpoint of task {opened.config.task}; "
                             "sample needs one written by train --model gpt --text FILE (use predict for the "
                             "synthetic tasks)")
        raise ValueError(f"{path} is {opened.description}; sample continues a language model (a gpt: "
                         "a train --text checkpoint, a Hugging Face folder, or a GPT saved from Python)")
    if opened.origin == "folder" and opened.tokenizer is None and "tokenizers package" in (opened.no_text or ""):
        print(f"note: {path}: {opened.no_text}", file=sys.stderr)      # tokenizer.json there, the package not

    def encode(text):
        return opened.encode(text, "--prompt")
    return opened.model, encode, opened.decode


def sample_text(model, encode, decode, prompt, max_new_tokens, temperature=None, top_k=None, top_p=None,
                num_beams=1, greedy=False, seed=0):
    """The prompt and its continuation as text: ``decode(generate(encode(prompt)))``."""
    ids = encode(prompt)
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
