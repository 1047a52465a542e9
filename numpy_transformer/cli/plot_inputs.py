"""What ``plot attention`` feeds a model, by kind of checkpoint: the forward's inputs (the task's
held-out example or ``--tokens``, and for a decoder its greedy output), the row and column labels, the
axes' titles and a caption. :func:`input_of` picks the kind's reader."""

from __future__ import annotations

import numpy as np

from ..study import attention_maps
from ..study.plotting import token_labels
from . import parse_tokens

__all__ = ["INPUTS", "input_of"]


class _Plotted:
    """What one kind's input gives :func:`run_attention`: the forward's arguments, the row and column
    labels (their counts trim padding off the weights), the axes' titles, a caption."""

    def __init__(self, inputs, rows, cols, what, note="", kwargs=None, query_name="query token",
                 key_name="key token"):
        self.inputs, self.rows, self.cols, self.what, self.note = inputs, rows, cols, what, note
        self.kwargs = kwargs or {}
        self.query_name, self.key_name = query_name, key_name


def _held_out(args, n):
    k = int(np.random.default_rng(args.seed).integers(n))
    return k, f"held-out example {k}"


def _encoder_input(args, ckpt, model):
    from ..tasks.data import make_task
    from ..training.trainer import checkpoint_config
    mc = ckpt.model_config
    if args.tokens:                      # the length it was trained on (a bare checkpoint: its max_len)
        length = checkpoint_config(ckpt).seq_len if ckpt.config else mc["max_len"]
        ids = np.array([parse_tokens(args.tokens, length, mc["vocab_size"])], dtype=np.int64)
        what = "given tokens"
    else:
        c = checkpoint_config(ckpt)
        val = make_task(c.task, c.vocab_size, c.seq_len, c.num_train, c.num_val, seed=c.seed).val_src
        k, what = _held_out(args, len(val))
        ids = val[k:k + 1]
        print(f"input ({what}): {' '.join(str(int(i)) for i in ids[0])}")
    pred = model.eval()(ids).argmax(-1)[0]
    labels = token_labels(ids[0])
    return _Plotted([ids], labels, labels, what, note=f"prediction: {' '.join(token_labels(pred))}")


def _seq2seq_input(args, ckpt, model):
    """The source (--tokens or held out) and the model's greedy decode of it; the decoder's input is
    BOS + that decode shifted right, so row i is the position that produced target token i."""
    from ..tasks import seq2seq as s2s
    from ..training.kinds import get_kind
    from ..training.trainer import checkpoint_config
    from .train_use import parse_source
    c = checkpoint_config(ckpt)
    kind = get_kind("seq2seq")
    data = kind.make_data(c)
    if args.tokens:
        src = np.array([parse_source(args.tokens, c.seq_len, c.vocab_size)], dtype=np.int64)
        what = "given source"
    else:
        k, what = _held_out(args, len(data.val_src))
        src = data.val_src[k:k + 1]
    gen = kind.predict(model, src, data)[0]                                 # (tgt_len,), PAD after EOS
    length = int(np.argmax(gen == s2s.EOS)) + 1 if (gen == s2s.EOS).any() else len(gen)
    gen = gen[:length]
    tgt_in = np.concatenate([[s2s.BOS], gen[:-1]])[None]                    # (1, S): BOS + shifted
    n_src = int((src[0] != s2s.PAD).sum())
    src_names = attention_maps.token_names(c.task, c.vocab_size, "source")
    tgt_names = attention_maps.token_names(c.task, c.vocab_size, "target")
    fmt = lambda ids: " ".join(str(int(i)) for i in ids)                    # noqa: E731
    print(f"source ({what}): {fmt(src[0, :n_src])}\ngreedy target: {fmt(gen)}")
    rows = token_labels(gen, tgt_names)
    if args.which == "self":
        cols, key_name = token_labels(tgt_in[0], tgt_names), "decoder input token"
    else:
        cols, key_name = token_labels(src[0, :n_src], src_names), "source token"
    return _Plotted([src, tgt_in], rows, cols, what, kwargs=dict(src_key_padding_mask=src == s2s.PAD),
                    note=f"source: {' '.join(token_labels(src[0, :n_src], src_names))}",
                    query_name="target token", key_name=key_name)


def _gpt_input(args, ckpt, model):
    """The prompt (--tokens "123+456" or held out) and its greedy answer, up to its EOS."""
    from ..tasks import lm
    from ..training.kinds import get_kind
    from ..training.trainer import checkpoint_config
    c = checkpoint_config(ckpt)
    kind = get_kind("gpt")
    data = kind.make_data(c)
    if args.tokens:
        a, b = lm.parse_expression(args.tokens, c.digits)
        what = "given prompt"
    else:
        k, what = _held_out(args, len(data.val_ab))
        a, b = (int(v) for v in data.val_ab[k])
    prompt = lm.encode_prompt(a, b, c.digits)                               # (1, prompt_len)
    gen = kind.predict(model, prompt, data)[0]
    length = int(np.argmax(gen == lm.EOS)) + 1 if (gen == lm.EOS).any() else len(gen)
    ids = np.concatenate([prompt[0], gen[:length]])[None]                   # (1, S)
    print(f"prompt ({what}): {lm.to_text(prompt[0])}\ngreedy answer: {lm.to_text(gen[:length])} "
          f"(least-significant digit first)")
    labels = token_labels(ids[0], attention_maps.token_names("addition"))
    return _Plotted([ids], labels, labels, what, note=f"{a}+{b}: answer {lm.to_text(gen[:length])}")


INPUTS = {"encoder": _encoder_input, "seq2seq": _seq2seq_input, "gpt": _gpt_input}


def input_of(args, opened):
    """The input drawn: the task's (a train checkpoint), a language model's text or ids, an encoder's ids."""
    if opened.origin == "train":
        return INPUTS[opened.model_kind](args, opened.ckpt, opened.model)
    if opened.is_language_model:
        from .lm_use import attention_input
        ids, labels, what = attention_input(args, opened)
        return _Plotted([ids], labels, labels, what)
    if opened.model_kind == "seq2seq":
        raise ValueError(f"{args.checkpoint} is {opened.description}: plot attention decodes a seq2seq model's "
                         "target greedily, which needs its task's BOS and EOS ids; a checkpoint written by train "
                         "--model seq2seq --save has them")
    if not args.tokens:
        raise ValueError(f"{args.checkpoint} is {opened.description}, so it has no held-out examples: give --tokens "
                         "IDS (token ids separated by spaces)")
    return _encoder_input(args, opened.ckpt, opened.model)
