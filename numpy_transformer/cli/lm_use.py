"""``predict``, ``evaluate`` and ``plot attention`` of the models no synthetic task describes
(:mod:`.model_source`): a ``train --text`` checkpoint, a Hugging Face folder, a checkpoint saved from Python.

* ``predict``: a language model's most likely next token at each position of the given ``--tokens``
  (teacher-forced: position i reads tokens 0..i), against the token that follows there; ``--random N``
  takes N windows of a text checkpoint's held-out end. An encoder saved from Python: its per-position
  prediction of ``--tokens`` ids.
* ``evaluate --text FILE``: the loss (nats per token), perplexity and next-token accuracy of a language
  model with a tokenizer on the file's non-overlapping windows of its block size.
* ``plot attention``: a language model's causal self-attention over ``--tokens`` (or a held-out window).
"""

from __future__ import annotations

import math

import numpy as np

from ..utils.text import WIDTH, fit


def no_data(opened) -> str:
    """Why ``evaluate`` without ``--text`` has nothing to measure ``opened`` on, and what it needs."""
    if opened.is_language_model and opened.tokenizer is not None:
        return (f"{opened.path} is {opened.description}: it holds no held-out data; give --text FILE to measure its "
                "loss and perplexity on a text")
    return (f"{opened.path} is {opened.description}: it holds no task or text to evaluate on; evaluate needs a "
            "checkpoint written by train --save, or --text FILE with a language model that has a tokenizer (a "
            "train --text checkpoint, a Hugging Face folder with tokenizer.json)")


def _random_count(args):
    if args.random is not None and args.random <= 0:
        raise ValueError(f"--random must be a positive number of examples, got {args.random}")
    return args.random or 5


def _given(opened, texts, flag="--tokens"):
    """Each ``--tokens`` value as ids (1 to block_size of them)."""
    block = opened.model.config.block_size
    out = []
    for text in texts:
        ids = opened.encode(text, flag)
        if not 1 <= ids.size <= block:
            raise ValueError(f"{flag} {text!r}: {ids.size} tokens; the model reads 1 to {block} (its block size)")
        out.append(ids)
    return out


def _held_out_windows(args, opened, n):
    """``(src, tgt)`` of the first ``n`` held-out windows of a text checkpoint; an error for any other model."""
    if opened.origin != "text":
        what = "TEXT" if opened.tokenizer is not None else "IDS"
        raise ValueError(f"--random takes held-out windows of a train --text checkpoint's text; {args.checkpoint} "
                         f"is {opened.description}, which holds none: give --tokens {what}")
    from ..training.kinds import TEXT_KIND
    data = TEXT_KIND.make_data(opened.config)
    return data.val_src[:n], data.val_tgt[:n]


def _columns(rows, marks=None):
    """Print label rows (name -> labels, one column per position), wrapped at WIDTH; ``marks`` under them."""
    n = len(next(iter(rows.values())))
    width = [1 + max(len(r[i]) for r in rows.values()) for i in range(n)]
    a = 0
    while a < n:
        b, used = a, 13
        while b < n and (b == a or used + width[b] <= WIDTH):
            used += width[b]
            b += 1
        if b - a < n:
            print(f"  positions {a}-{b - 1}")
        for name, labels in rows.items():
            print(f"  {name:<10} " + "".join(f"{labels[i]:>{width[i]}}" for i in range(a, b)))
        if marks is not None and any(marks[a:b]):
            print("             " + "".join(f"{'^' if marks[i] else '':>{width[i]}}" for i in range(a, b)))
        a = b


def predict_next_tokens(args, opened):
    """``predict`` of a language model: each position's most likely next token (status 0)."""
    if args.tokens:
        seqs = [(ids, ids[1:]) for ids in _given(opened, args.tokens)]
    else:
        src, tgt = _held_out_windows(args, opened, _random_count(args))
        seqs = list(zip(src, tgt))
    model = opened.model
    model.eval()
    print(fit(f"{opened.path}: {opened.description}; at each position, the model's most likely next token given "
              "the tokens up to it (teacher-forced), against the token that follows (^: another)"))
    for n, (ids, following) in enumerate(seqs, 1):
        pred = model(np.asarray(ids)[None]).argmax(-1)[0]                     # (S,)
        known = len(following)
        wrong = [i < known and pred[i] != following[i] for i in range(len(ids))]
        args.document.setdefault("examples", []).append(
            {"tokens": opened.labels(ids), "predicted": opened.labels(pred), "follows": opened.labels(following),
             "right": known - sum(wrong), "known": known})
        print(f"\nexample {n}: {known - sum(wrong)} of {known} next tokens right" if known else
              f"\nexample {n}: one token, nothing follows it to compare with")
        rows = {"tokens": opened.labels(ids), "predicted": opened.labels(pred)}
        if known:
            rows["follows"] = opened.labels(following) + [""] * (len(ids) - known)
        _columns(rows, wrong)
    return 0


def predict_encoder_ids(args, opened):
    """``predict`` of an encoder saved from Python: its prediction at each position of ``--tokens`` ids."""
    from .model_source import parse_ids
    cfg = opened.ckpt.model_config
    model = opened.model
    model.eval()
    print(fit(f"{opened.path}: {opened.description}; the model's most likely token at each position"))
    for n, text in enumerate(args.tokens, 1):
        ids = parse_ids(text, cfg["vocab_size"], "--tokens")
        if not 1 <= ids.size <= cfg["max_len"]:
            raise ValueError(f"--tokens {text!r}: {ids.size} ids; the model reads 1 to {cfg['max_len']} (its max_len)")
        pred = model(ids[None]).argmax(-1)[0]
        args.document.setdefault("examples", []).append({"tokens": ids, "predicted": pred})
        print(f"\nexample {n}:")
        _columns({"tokens": [str(int(i)) for i in ids], "predicted": [str(int(i)) for i in pred]})
    return 0


def _read(path, tokenizer):
    """The text of ``path`` for ``tokenizer`` (bytes for the byte tokenizer); ValueError naming the file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ValueError(f"--text {path}: cannot read it: {exc.strerror or exc}") from None
    if not data:
        raise ValueError(f"--text {path}: the file is empty; expected some text to evaluate on")
    if getattr(tokenizer, "kind", None) == "byte":
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"--text {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                         "this model's tokenizer reads text") from None


def evaluate_text(args, opened):
    """``evaluate --text FILE``: loss, perplexity and next-token accuracy on the file's windows (status 0)."""
    if not opened.is_language_model:
        raise ValueError(f"--text evaluates a language model; {args.checkpoint} is {opened.description}")
    if opened.tokenizer is None:
        why = (opened.no_text or "").split(", so the prompt")[0].split("; until then")[0]   # not the prompt's ids
        raise ValueError(f"--text {args.text}: {args.checkpoint} has no tokenizer to read text with ({why}); "
                         "evaluate --text needs one")
    if args.split is not None:
        raise ValueError("--split chooses a checkpoint's own split; with --text the whole file is evaluated")
    try:
        ids = opened.tokenizer.encode(_read(args.text, opened.tokenizer))
    except ValueError as exc:
        if str(exc).startswith("--text"):
            raise
        raise ValueError(f"--text {args.text}: {exc}") from None
    n = ids.size
    if n < 2:
        raise ValueError(f"--text {args.text}: {n} token; expected at least 2 (one to read, the next to predict)")
    length = min(opened.model.config.block_size, n - 1)
    rows = (n - 1) // length
    src = ids[:rows * length].reshape(rows, length)                          # (N, L)
    tgt = ids[1:rows * length + 1].reshape(rows, length)                      # (N, L): one token on
    from ..nn.loss import CrossEntropyLoss
    from ..training.evaluation import evaluate
    ev = evaluate(opened.model, src, tgt, criterion=CrossEntropyLoss(), max_examples=args.num,
                  logits_of=lambda model, s, t: (model(s), t))
    args.document.update(text=args.text, windows=ev.examples, window_tokens=length, tokens=n, loss=ev.loss,
                         perplexity=math.exp(ev.loss), token_accuracy=ev.token_accuracy)
    print(fit(f"{args.checkpoint}: {opened.description}; --text {args.text}: {ev.examples} windows of {length} "
              f"tokens ({n} tokens): loss {ev.loss:.4f} nats/token = perplexity {math.exp(ev.loss):.2f}, "
              f"next-token accuracy {100 * ev.token_accuracy:.2f}%"))
    return 0


def attention_input(args, opened):
    """``(ids (1, S), labels, what)`` that ``plot attention`` draws for a language model."""
    if args.tokens:
        ids = _given(opened, [args.tokens])[0]
        what = "given tokens"
    else:
        src, _ = _held_out_windows(args, opened, None)
        k = int(np.random.default_rng(args.seed).integers(len(src)))
        ids, what = src[k], f"held-out window {k}"
        print(f"input ({what}): {opened.decode(ids)!r}")
    return np.asarray(ids)[None], opened.labels(ids), what
