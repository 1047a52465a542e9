"""``predict`` and ``evaluate``: use a checkpoint written by ``train`` (registered by ``cli.train``).

Both also open a language model that no synthetic task describes (:mod:`.model_source`): a ``train
--text`` checkpoint, a Hugging Face folder, a GPT checkpoint saved from Python. ``predict`` then shows
each position's most likely next token under the given ``--tokens`` (text through the model's
tokenizer, else token ids) or a held-out window of the text (``--random``, a text checkpoint's);
``evaluate --text FILE`` measures the loss and perplexity on a text file's windows (a model with a
tokenizer). An encoder saved from Python predicts ``--tokens`` ids; a seq2seq one is refused (its task's
BOS and EOS ids are unknown), and so is ``evaluate`` of a model with no data and no tokenizer.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

from ..tasks.data import EOS, FIRST_TOKEN, PAD
from ..utils.text import WIDTH, fit
from . import parse_tokens
from .json_output import add_json_option, emit, report_to_stderr
from .model_source import open_model

PREDICT_SCHEMA = ('{"command": "predict", "checkpoint", "examples": [one object per example, the human report\'s '
                  'rows: encoder "source", "predicted", "expected", "correct"; seq2seq "source", "generated", '
                  '"ended", "expected", "verdict", "correct"; gpt "prompt", "generated", "reads", "expected", '
                  '"correct"; a language model "tokens", "predicted", "follows", "right", "known"; an encoder '
                  'saved from Python "tokens", "predicted"]}')
EVALUATE_SCHEMA = ('{"command": "evaluate", "checkpoint", "task", "step", "split", "loss", "token_accuracy", '
                   '"sequence_accuracy", "examples", "bleu" (seq2seq, else null), "generated"} (accuracies as '
                   'fractions, not percent); with --text: {"command", "checkpoint", "text", "windows", '
                   '"window_tokens", "tokens", "loss", "perplexity", "token_accuracy"}')


def register(subparsers):
    p = subparsers.add_parser("predict", help="run a trained checkpoint on token sequences")
    p.add_argument("checkpoint", help="a .npz written by train --save (or saved from Python), or a Hugging Face folder")
    p.add_argument("--tokens", action="append", metavar="IDS",
                   help='a source sequence of the length the model was trained on, e.g. --tokens "5 9 3 7 ..." '
                        '(seq2seq: 1 to --seq-len content ids; gpt: an addition such as "123+456"; a language '
                        'model: text, or token ids without a tokenizer); repeatable; default: --random 5')
    p.add_argument("--random", type=int, metavar="N", help="show N held-out validation examples (a text "
                   "checkpoint: windows of its held-out end)")
    add_json_option(p, PREDICT_SCHEMA)
    p.set_defaults(func=run_predict)

    p = subparsers.add_parser("evaluate", help="loss and accuracy of a checkpoint on its task")
    p.add_argument("checkpoint", help="a .npz written by train --save, or (with --text) a Hugging Face folder")
    p.add_argument("--split", choices=["val", "train"], help="held-out (default) or training set")
    p.add_argument("--num", type=int, help="evaluate only the first N examples")
    p.add_argument("--text", metavar="FILE", help="a language model with a tokenizer (a train --text checkpoint, a "
                   "Hugging Face folder with tokenizer.json): loss and perplexity on this file's windows of its "
                   "block size")
    add_json_option(p, EVALUATE_SCHEMA)
    p.set_defaults(func=run_evaluate)


def _error(msg):
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _with_document(run, command):
    """Run ``run(args)`` with ``args.document`` to fill; with ``--json`` its report goes to stderr and the
    document, on success, to stdout."""
    def wrapped(args):
        args.document = {"command": command, "checkpoint": args.checkpoint}
        with report_to_stderr(getattr(args, "json", False)):
            rc = run(args)
        if getattr(args, "json", False) and rc == 0:
            emit(args.document)
        return rc
    wrapped.__name__ = wrapped.__qualname__ = f"run_{command}"
    wrapped.__doc__ = run.__doc__
    return wrapped


def examples_of(args):
    """The list of ``predict``'s JSON document that each example is appended to."""
    return args.document.setdefault("examples", [])


def _predict(args):
    """``predict``: the examples of a checkpoint's task, or of its text, with the model's predictions."""
    try:
        opened = open_model(args.checkpoint)
        if opened.origin != "train":
            return _predict_untasked(args, opened)
        c, model = opened.config, opened.model
        if c.model == "seq2seq":
            return _predict_seq2seq(args, c, model)
        if c.model == "gpt":
            return _predict_gpt(args, c, model)
        from ..tasks.data import make_targets, make_task
        if args.tokens:
            src = np.array([parse_tokens(text, c.seq_len, c.vocab_size) for text in args.tokens], dtype=np.int64)
        else:
            if args.random is not None and args.random <= 0:
                raise ValueError(f"--random must be a positive number of examples, got {args.random}")
            n = args.random or 5
            src = make_task(c.task, c.vocab_size, c.seq_len, c.num_train, c.num_val, seed=c.seed).val_src[:n]
    except (ValueError, TypeError, OSError, ImportError) as exc:
        return _error(str(exc))
    model.eval()
    pred = model(src).argmax(-1)
    tgt = make_targets(c.task, src)
    print(fit(f"task {c.task}, {c.seq_len} tokens per sequence; ids: {PAD} = PAD, {EOS} = EOS (end of sequence), "
              f"{FIRST_TOKEN}..{c.vocab_size - 1} content"
              + ("; shift's last target is EOS (nothing follows the last token)" if c.task == "shift" else "")))
    width = 1 + len(str(c.vocab_size - 1))
    per_line = max(1, (WIDTH - 13) // width)                  # long sequences: blocks of positions, 100 columns
    fmt = lambda ids: "".join(f"{int(i):>{width}}" for i in ids)          # noqa: E731
    for n, (s, p, t) in enumerate(zip(src, pred, tgt), 1):
        wrong = p != t
        examples_of(args).append({"source": s, "predicted": p, "expected": t, "correct": not wrong.any()})
        print(f"\nexample {n}: " + (f"{int(wrong.sum())} of {len(t)} tokens wrong (marked ^)" if wrong.any()
                                     else "correct"))
        for a in range(0, len(t), per_line):
            b = min(a + per_line, len(t))
            if len(t) > per_line:
                print(f"  positions {a}-{b - 1}")
            print(f"  source     {fmt(s[a:b])}")
            print(f"  predicted  {fmt(p[a:b])}")
            if wrong.any():
                print(f"  expected   {fmt(t[a:b])}")
                marks = "".join(f"{m:>{width}}" for m in np.where(wrong[a:b], "^", " "))
                if marks.strip():
                    print(f"             {marks}")
    return 0


def parse_source(text, seq_len, vocab_size):
    """A seq2seq ``--tokens`` value: 1..seq_len content ids (>= FIRST_TOKEN), padded to seq_len."""
    from ..tasks.seq2seq import FIRST_TOKEN as FIRST
    from ..tasks.seq2seq import PAD as PAD_ID
    try:
        ids = [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(f"--tokens must be integers separated by spaces, got {text!r}") from None
    if not 1 <= len(ids) <= seq_len:
        raise ValueError(f"--tokens: the model reads sources of 1 to {seq_len} tokens; got {len(ids)} in {text!r}")
    bad = [i for i in ids if not FIRST <= i < vocab_size]
    if bad:
        raise ValueError(f"--tokens: source ids must lie in [{FIRST}, {vocab_size}) (0, 1, 2 are PAD, EOS, BOS), "
                         f"got {bad[0]}")
    return ids + [PAD_ID] * (seq_len - len(ids))


def _predict_seq2seq(args, c, model):
    from ..tasks.seq2seq import BOS as BOS_ID
    from ..tasks.seq2seq import strip_target, target_for
    from ..training.kinds import get_kind
    kind = get_kind(c.model)
    try:
        data = kind.make_data(c)
        if args.tokens:
            src = np.array([parse_source(text, c.seq_len, c.vocab_size) for text in args.tokens], dtype=np.int64)
        else:
            if args.random is not None and args.random <= 0:
                raise ValueError(f"--random must be a positive number of examples, got {args.random}")
            src = data.val_src[:args.random or 5]
    except (ValueError, TypeError) as exc:
        return _error(str(exc))
    model.eval()
    gen = kind.predict(model, src, data)                                     # (N, tgt_len)
    print(fit(f"task {c.task} (seq2seq, greedy decoding): sources of 1..{c.seq_len} tokens; ids: {PAD} = PAD, "
              f"{EOS} = EOS, {BOS_ID} = BOS (the decoder's first input), {BOS_ID + 1}.. content"))
    fmt = lambda ids: " ".join(str(int(i)) for i in ids) or "(empty)"     # noqa: E731
    for n, (s, g) in enumerate(zip(src, gen), 1):
        want = target_for(c.task, s, c.vocab_size)
        got = strip_target(g)
        ended = bool((g == EOS).any())
        verdict = ("not a sentence of the task's grammar: no expected answer" if want is None
                   else "correct" if got == want and ended else "wrong")
        examples_of(args).append({"source": s[s != PAD], "generated": got, "ended": ended, "expected": want,
                                  "verdict": verdict, "correct": verdict == "correct"})
        print(f"\nexample {n}: {verdict}")
        print(f"  source     {fmt(s[s != PAD])}")
        print(f"  generated  {fmt(got)}" + ("" if ended else f"  (no EOS within {len(g)} tokens)"))
        if want is not None and verdict != "correct":
            print(f"  expected   {fmt(want)}")
    return 0


def _predict_gpt(args, c, model):
    from ..tasks import lm
    from ..training.kinds import get_kind
    kind = get_kind(c.model)
    try:
        data = kind.make_data(c)
        if args.tokens:
            ab = np.array([lm.parse_expression(text, c.digits) for text in args.tokens], dtype=np.int64)
        else:
            if args.random is not None and args.random <= 0:
                raise ValueError(f"--random must be a positive number of examples, got {args.random}")
            ab = data.val_ab[:args.random or 5]
    except (ValueError, TypeError) as exc:
        return _error(str(exc))
    model.eval()
    prompts = lm.encode_prompt(ab[:, 0], ab[:, 1], c.digits)
    gen = kind.predict(model, prompts, data)                                 # (N, digits + 2)
    print(fit(f"task {c.task} (gpt, greedy decoding through the KV cache): the answer is generated "
              f"least-significant digit first and read back reversed; $ = EOS"))
    for n, ((a, b), p, g) in enumerate(zip(ab.tolist(), prompts, gen), 1):
        want = a + b
        got = lm.decode_answer(g)
        examples_of(args).append({"prompt": lm.to_text(p), "generated": lm.to_text(g).rstrip("_"), "reads": got,
                                  "expected": want, "correct": got == want})
        print(f"\nexample {n}: " + ("correct" if got == want else "wrong"))
        print(f"  prompt     {lm.to_text(p)}")
        reads = "nothing: not digits then EOS" if got is None else got
        print(f"  generated  {lm.to_text(g).rstrip('_')}  (reads {reads})")
        print(f"  expected   {lm.to_text(lm.encode_answer(want, c.digits)[0])}  ({want})")
    return 0


def _evaluate(args):
    """``evaluate``: loss and accuracy of a checkpoint on its task's split (or on ``--text``)."""
    from . import lm_use
    try:
        if args.num is not None and args.num <= 0:
            raise ValueError(f"--num must be positive, got {args.num}")
        opened = open_model(args.checkpoint)
        if args.text is not None:
            return lm_use.evaluate_text(args, opened)
        if opened.origin not in ("train", "text"):
            raise ValueError(lm_use.no_data(opened))
        from ..training.kinds import kind_for
        c, model = opened.config, opened.model
        kind = kind_for(c)
        data = kind.make_data(c)
    except (ValueError, TypeError, OSError, ImportError) as exc:
        return _error(str(exc))
    split = args.split or "val"
    step = opened.ckpt.extra_json.get("step", "?")
    ev = kind.evaluate(model, *data.split(split), max_examples=args.num)
    args.document.update(task=c.task, step=step, split=split, **dataclasses.asdict(ev))
    print(fit(f"{args.checkpoint}: task {c.task}, step {step}, {split} split: {ev}"))
    return 0


def _predict_untasked(args, opened):
    """predict of a model no synthetic task describes: a language model's next tokens, an encoder's ids."""
    from . import lm_use
    if opened.is_language_model:
        return lm_use.predict_next_tokens(args, opened)
    if opened.model_kind == "seq2seq":
        raise ValueError(f"{args.checkpoint} is {opened.description}: predict decodes a seq2seq model greedily, "
                         "which needs its task's BOS and EOS ids; a checkpoint written by train --model seq2seq "
                         "--save has them")
    if not args.tokens:
        raise ValueError(f"{args.checkpoint} is {opened.description}, so it has no held-out examples: give "
                         "--tokens IDS (token ids separated by spaces)")
    return lm_use.predict_encoder_ids(args, opened)


run_predict = _with_document(_predict, "predict")
run_evaluate = _with_document(_evaluate, "evaluate")
