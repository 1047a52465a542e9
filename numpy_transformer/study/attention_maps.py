"""The attention weights the study tools draw (``plot attention``), and the tasks' token names for the axes.

NumPy only. :func:`attention_weights` runs a model's own forward with every chosen attention module
asked for its per-head weights (``need_weights=True, average_attn_weights=False``), so the weights are
exactly those the model computed; nothing is recomputed with a separate formula. Which attention
modules, by kind of model:

=====================  ==========================================  ================  =======================
model                  attention modules                           ``which``         one layer's weights
=====================  ==========================================  ================  =======================
``TransformerModel``   ``encoder.layers[i].self_attn``             ``"self"``        (B, H, S, S)
``Seq2SeqModel``       ``transformer.decoder.layers[i]`` ...       ``"cross"``       (B, H, S, T): target
                       ``.multihead_attn`` (cross-attention)                         queries x source keys
                       ``.self_attn`` (causal self-attention)      ``"self"``        (B, H, S, S)
``GPT``                ``h[i].self_attn`` (causal)                 ``"self"``        (B, H, S, S)
=====================  ==========================================  ================  =======================

(S the target or sequence length, T the source length.) A GPT with the modern blocks (a Llama-style
one, ``from_pretrained`` included) has ``GroupedQueryAttention`` there, which has no ``need_weights``:
its weights are the softmax its last call kept (``last_weights``), read right after the call.
"""

from __future__ import annotations

import numpy as np

from ..nn.gqa import GroupedQueryAttention
from ..nn.modes import eval_mode

__all__ = ["attention_modules", "attention_weights", "capture_attention", "token_names", "WHICH"]

WHICH = ("self", "cross")


def attention_modules(model, which=None):
    """``(which, [MultiheadAttention per layer], what)`` of ``model``: the modules :func:`attention_weights`
    reads. ``which`` defaults to ``"cross"`` for a ``Seq2SeqModel`` and ``"self"`` otherwise; ``what``
    names them in words ("decoder layer", "block", "encoder layer")."""
    if which is not None and which not in WHICH:
        raise ValueError(f"which must be 'self' or 'cross', got {which!r}")
    transformer = getattr(model, "transformer", None)
    if transformer is not None:                                      # Seq2SeqModel: the decoder's layers
        which = which or "cross"
        name = "multihead_attn" if which == "cross" else "self_attn"
        return which, [getattr(layer, name) for layer in transformer.decoder.layers], "decoder layer"
    kind = getattr(model, "model_kind", "encoder")
    if which == "cross":
        raise ValueError(f"which='cross': a {kind} model has no cross-attention (only a seq2seq model's decoder "
                         "has one); use 'self'")
    if hasattr(model, "h"):                                          # GPT: its causal blocks
        return "self", [block.self_attn for block in model.h], "block"
    return "self", [layer.self_attn for layer in model.encoder.layers], "encoder layer"


def capture_attention(attns, run):
    """Call ``run()`` with each ``MultiheadAttention`` of ``attns`` computing its per-head weights (a
    ``GroupedQueryAttention``, which has no ``need_weights``, is read after its call: ``last_weights``).

    Each module's ``forward`` is wrapped for the call (an instance attribute, removed afterwards, even
    on an error): the wrapper calls the class's own ``forward`` with ``need_weights=True,
    average_attn_weights=False``, keeps the weights and hands the caller ``(out, None)`` as the
    ``need_weights=False`` call it replaces would. The output does not change (the weights are the
    softmax the output is computed from). Returns ``(run(), [weights of each module's last call])``.
    """
    captured = [None] * len(attns)

    def wrap(i, attn):
        original = type(attn).forward
        if isinstance(attn, GroupedQueryAttention):                      # Llama's: no need_weights
            def forward(*args, **kwargs):
                out = original(attn, *args, **kwargs)
                captured[i] = np.array(attn.last_weights)                # (B, H, S, S): the softmax it used
                return out
            return forward

        def forward(query, key, value, **kwargs):
            kwargs.update(need_weights=True, average_attn_weights=False)
            out, w = original(attn, query, key, value, **kwargs)
            captured[i] = np.array(w)                                    # (B, H, S, T)
            return out, None
        return forward

    try:
        for i, attn in enumerate(attns):
            object.__setattr__(attn, "forward", wrap(i, attn))
        result = run()
    finally:
        for attn in attns:
            attn.__dict__.pop("forward", None)
    return result, captured


def attention_weights(model, *inputs, which=None, **kwargs):
    """Every layer's attention weights of ``model`` on ``inputs``, per head, in eval mode.

    Parameters
    ----------
    model : TransformerModel, Seq2SeqModel or GPT
    *inputs, **kwargs
        The model's forward arguments: ``ids`` (B, S) for the encoder model and GPT; ``src`` (B, T),
        ``tgt`` (B, S) (the decoder input) and ``src_key_padding_mask`` for the seq2seq model.
    which : {"self", "cross"}, optional
        The seq2seq decoder's cross-attention (default) or its causal self-attention; the other
        models have self-attention only.

    Returns
    -------
    list of ndarray
        One array per layer: ``w[b, h, i, j]`` is how much query position i attends to key position j
        in head h (each row sums to 1; 0 for masked keys: the future in causal self-attention, source
        padding in cross-attention). (B, H, S, S) for self-attention, (B, H, S, T) for cross-attention.

    The model's own forward runs once with the weights requested (:func:`capture_attention`); its
    output, parameters and train/eval mode are unchanged afterwards.
    """
    _, attns, _ = attention_modules(model, which)
    with eval_mode(model):
        _, weights = capture_attention(attns, lambda: model(*[np.asarray(x) for x in inputs], **kwargs))
    return weights


def token_names(task, vocab_size=None, side="source"):
    """``{id: name}`` for a task's tokens on the axes: the specials by name, ``translate``'s words by
    class (``noun0``, ``adj1``, ``verb0``, ``not``; a target word is its source word primed, ``noun0'``,
    then the verb suffixes ``tenseA``/``tenseB`` and ``neg``), ``addition``'s digits and ``+``, ``=``.
    Ids without a name are drawn as numbers."""
    if task == "addition":
        from ..tasks import lm
        names = {lm.PAD: "PAD", lm.EOS: "EOS", lm.PLUS: "+", lm.EQUALS: "="}
        names.update({lm.DIGIT0 + d: str(d) for d in range(10)})
        return names
    from ..tasks import seq2seq as s2s
    if task not in s2s.SEQ2SEQ_TASKS:
        return {0: "PAD", 1: "EOS"}                                  # the encoder's synthetic tasks
    names = {s2s.PAD: "PAD", s2s.EOS: "EOS", s2s.BOS: "BOS"}
    if task != "translate":
        return names
    classes, _ = s2s.translate_lexicon(vocab_size)
    words = {}
    for cls in ("noun", "adj", "verb"):
        words.update({int(w): f"{cls}{k}" for k, w in enumerate(classes[cls])})
    if side == "source":
        names.update(words)
        names[int(classes["not"])] = "not"
        return names
    _, lex, _, neg, _ = s2s._translate_tables(vocab_size)
    names.update({int(lex[w]): f"{words[w]}'" for w in words})
    names.update({vocab_size: "tenseA", vocab_size + 1: "tenseB", neg: "neg"})
    return names
