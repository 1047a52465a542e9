"""PyTorch oracle for the interview drills (``python -m numpy_transformer drill check``).

``run(exercise, inputs)`` recomputes a drill case with torch and returns the same named outputs as the
drill (``y``, ``dx``, ``dW`` ...). The grader compares them with its NumPy reference: the user is graded
against the NumPy reference, and torch, when installed, confirms that reference case by case.

Nothing here writes torch code of its own: each exercise maps its inputs onto an op of the torch table
(:data:`reference_torch.table.OPS`, torch.nn.functional), or, for the module exercises, builds torch's
module for the reference's own NumPy module (:func:`reference_torch.table.torch_module`), or, for
``adamw_step``, runs ``torch.optim.AdamW`` itself. Imported
lazily by the grading subprocess only (through ``numpy_transformer.oracle``).
"""

from __future__ import annotations

import numpy as np
import torch

from . import table

_DT = torch.float64


def torch_version():
    return torch.__version__


def _np(t):
    return t.detach().cpu().numpy()


def _op(name, inputs, static, dout, names, nondiff=()):
    """Run table op ``name``; return ``{drill output name: array}`` for ``names`` (drill -> table key)."""
    res = table.op_outputs(name, inputs, static, np.asarray(dout, dtype=np.float64), np.float64, nondiff)
    return {k: _np(res[v]) for k, v in names.items()}


def _blocked(c, s, t):
    blocked = np.zeros((s, t), dtype=bool) if c["mask"] is None else np.asarray(c["mask"], dtype=bool)
    return blocked | np.triu(np.ones((s, t), dtype=bool), 1) if c["causal"] else blocked


def _module(np_module, x, dout, **kwargs):
    """torch's module for ``np_module`` on ``x`` with the upstream gradient; ``(module, out, dx)``."""
    tm = table.torch_module(np_module, "torch.nn", np.float64)
    xt = torch.tensor(np.asarray(x), dtype=_DT, requires_grad=True)
    out = tm(xt, xt, xt, need_weights=False, **kwargs)[0] if isinstance(tm, torch.nn.MultiheadAttention) \
        else tm(xt, **kwargs)
    out.backward(torch.tensor(np.asarray(dout), dtype=_DT))
    return tm, out, xt.grad


def _mha(c):
    from numpy_transformer.drills.exercises import EXERCISES
    _, attn = EXERCISES["multi_head_attention"].reference().mha_forward(
        c["x"], c["Wq"], c["Wk"], c["Wv"], c["Wo"], c["num_heads"], mask=c["mask"], causal=c["causal"])
    s = c["x"].shape[1]
    tm, out, dx = _module(attn, c["x"], c["dout"], attn_mask=torch.from_numpy(_blocked(c, s, s)))
    dWq, dWk, dWv = tm.in_proj_weight.grad.split(c["x"].shape[-1])
    return {"out": _np(out), "dx": _np(dx), "dWq": _np(dWq), "dWk": _np(dWk), "dWv": _np(dWv),
            "dWo": _np(tm.out_proj.weight.grad)}


def _cross_attention(c):
    # torch's nn.MultiheadAttention (no biases) called as its decoder layer calls it: (x, memory, memory)
    from numpy_transformer.drills.exercises import EXERCISES
    _, attn = EXERCISES["cross_attention"].reference().cross_attention_forward(
        c["x"], c["memory"], c["Wq"], c["Wk"], c["Wv"], c["Wo"], c["num_heads"])
    tm = table.torch_module(attn, "torch.nn", np.float64)
    xt = torch.tensor(c["x"], dtype=_DT, requires_grad=True)
    mt = torch.tensor(c["memory"], dtype=_DT, requires_grad=True)
    pad = c["memory_key_padding_mask"]
    out = tm(xt, mt, mt, key_padding_mask=None if pad is None else torch.from_numpy(pad), need_weights=False)[0]
    out.backward(torch.tensor(c["dout"], dtype=_DT))
    dWq, dWk, dWv = tm.in_proj_weight.grad.split(c["x"].shape[-1])
    return {"out": _np(out), "dx": _np(xt.grad), "dmemory": _np(mt.grad), "dWq": _np(dWq), "dWk": _np(dWk),
            "dWv": _np(dWv), "dWo": _np(tm.out_proj.weight.grad)}


def _encoder(c):
    from numpy_transformer.drills.exercises import EXERCISES
    from numpy_transformer.drills.exercises.encoder_layer import _STATE_KEYS
    _, layer = EXERCISES["encoder_layer"].reference().encoder_layer_forward(
        c["x"], c["params"], c["num_heads"], mask=c["mask"], norm_first=c["norm_first"])
    mask = None if c["mask"] is None else torch.from_numpy(np.asarray(c["mask"], dtype=bool))
    tm, out, dx = _module(layer, c["x"], c["dout"], src_mask=mask)
    p = dict(tm.named_parameters())
    g = {k: p[key].grad for k, key in _STATE_KEYS.items()}
    g["Wq"], g["Wk"], g["Wv"] = p["self_attn.in_proj_weight"].grad.split(c["x"].shape[-1])
    res = {"out": _np(out), "dx": _np(dx)}
    res.update({f"grads[{k}]": _np(v) for k, v in g.items()})
    return res


def _decoder(c):
    # torch.nn.TransformerDecoderLayer built from the reference's own layer (zero attention biases)
    from numpy_transformer.drills.exercises import EXERCISES
    from numpy_transformer.drills.exercises.decoder_layer import _DEC_STATE_KEYS
    _, layer = EXERCISES["decoder_layer"].reference().decoder_layer_forward(
        c["tgt"], c["memory"], c["params"], c["num_heads"])
    tm = table.torch_module(layer, "torch.nn", np.float64)
    tt = torch.tensor(c["tgt"], dtype=_DT, requires_grad=True)
    mt = torch.tensor(c["memory"], dtype=_DT, requires_grad=True)
    as_t = (lambda a: None if a is None else torch.from_numpy(np.asarray(a, dtype=bool)))
    out = tm(tt, mt, tgt_mask=as_t(c["tgt_mask"]), memory_key_padding_mask=as_t(c["memory_key_padding_mask"]))
    out.backward(torch.tensor(c["dout"], dtype=_DT))
    p = dict(tm.named_parameters())
    g = {k: p[key].grad for k, key in _DEC_STATE_KEYS.items()}
    g["Wq"], g["Wk"], g["Wv"] = p["self_attn.in_proj_weight"].grad.split(c["tgt"].shape[-1])
    g["cWq"], g["cWk"], g["cWv"] = p["multihead_attn.in_proj_weight"].grad.split(c["tgt"].shape[-1])
    res = {"out": _np(out), "dtgt": _np(tt.grad), "dmemory": _np(mt.grad)}
    res.update({f"grads[{k}]": _np(v) for k, v in g.items()})
    return res


def _positional(c):
    from .nn.layers import sinusoidal_table
    return {"pe": _np(sinusoidal_table(c["S"], c["D"], _DT))}


def _attention(c):
    # the drill's mask is True = may NOT attend; torch's function (the table's op) takes True = may attend
    q = c["q"]
    return _op("scaled_dot_product_attention", {"query": q, "key": c["k"], "value": c["v"]},
               {"attn_mask": ~_blocked(c, q.shape[-2], c["k"].shape[-2]) if c["mask"] is not None or c["causal"]
                else None}, c["dout"], {"out": "out", "dq": "query", "dk": "key", "dv": "value"})


def _relative_position_bias(c):
    # the buckets from the Hugging Face T5 twin's function, the lookup and its gradient from the table's op
    from .nn.position_bias import relative_position_bucket
    s, t, nb = c["S"], c["T"], c["W"].shape[0]
    rel = torch.arange(t)[None, :] - (torch.arange(s)[:, None] + t - s)
    buckets = relative_position_bucket(rel, c["bidirectional"], nb, c["max_distance"]).numpy()
    res = _op("relative_position_bias", {"weight": c["W"], "buckets": buckets}, {}, c["dbias"],
              {"bias": "out", "dW": "weight"}, nondiff=("buckets",))
    res["buckets"] = relative_position_bucket(torch.from_numpy(np.asarray(c["rel"], dtype=np.int64)),
                                              c["bidirectional"], nb, c["max_distance"]).numpy()
    return res


def _alibi(c):
    """The paper's get_slopes and bias (reference_torch.nn.position_bias, torch ops)."""
    from .nn.position_bias import alibi_bias, alibi_get_slopes
    return {"slopes": np.asarray(alibi_get_slopes(c["num_heads"]), dtype=np.float64),
            "bias": alibi_bias(c["num_heads"], c["S"], c["T"]).numpy()}


def _learned_positions(c):
    """torch's twin of nt.LearnedPositionalEmbedding (table.torch_module) with the case's table."""
    import numpy_transformer as nt
    W = np.asarray(c["W"], dtype=np.float64)
    m = nt.LearnedPositionalEmbedding(W.shape[0], W.shape[1], dtype=np.float64)
    m.weight.data[...] = W
    tm, out, dx = _module(m, c["x"], c["dy"], offset=c["offset"])
    return {"y": _np(out), "dx": _np(dx), "dW": _np(tm.weight.grad)}


def _dropout(c):
    # torch's own generator cannot replay NumPy's draw: the drill's keep-mask (rng.random(x.shape) >= p
    # from the case's seed) goes to the table's dropout op, which applies it with torch's operators
    keep = np.random.default_rng(int(c["seed"])).random(c["x"].shape) >= c["p"]
    return _op("dropout", {"x": c["x"]}, {"p": c["p"], "training": c["training"], "mask": keep}, c["dy"],
               {"y": "out", "dx": "x"})


def _adamw(c):
    # torch.optim.AdamW itself, its state set to the case's (step, exp_avg, exp_avg_sq)
    p = torch.nn.Parameter(torch.tensor(c["param"], dtype=_DT))
    p.grad = torch.tensor(c["grad"], dtype=_DT)
    opt = torch.optim.AdamW([p], lr=c["lr"], betas=c["betas"], eps=c["eps"], weight_decay=c["weight_decay"],
                            foreach=False)
    opt.state[p] = {"step": torch.tensor(float(c["step"]), dtype=_DT),
                    "exp_avg": torch.tensor(c["m"], dtype=_DT), "exp_avg_sq": torch.tensor(c["v"], dtype=_DT)}
    opt.step()
    return {"param": _np(p), "m": _np(opt.state[p]["exp_avg"]), "v": _np(opt.state[p]["exp_avg_sq"])}


def _kv_cache(c):
    # the last S rows of torch's causal attention over the T + S positions (True = may attend, aligned
    # bottom-right); the caches are torch.cat's
    k = np.concatenate([c["k_cache"], c["k_new"]], axis=2)
    v = np.concatenate([c["v_cache"], c["v_new"]], axis=2)
    s, n = c["q"].shape[-2], k.shape[-2]
    res = _op("scaled_dot_product_attention", {"query": c["q"], "key": k, "value": v},
              {"attn_mask": np.tril(np.ones((s, n), dtype=bool), n - s)}, np.zeros(c["q"].shape[:-1] + v.shape[-1:]),
              {"out": "out"})
    res["k_cache"] = _np(torch.cat([torch.from_numpy(c["k_cache"]), torch.from_numpy(c["k_new"])], dim=2))
    res["v_cache"] = _np(torch.cat([torch.from_numpy(c["v_cache"]), torch.from_numpy(c["v_new"])], dim=2))
    return res


_RUNNERS = {
    "softmax": lambda c: _op("softmax", {"x": c["x"]}, {"axis": -1}, c["dy"], {"y": "out", "dx": "x"}),
    "layer_norm": lambda c: _op("layer_norm", {"x": c["x"], "weight": c["gamma"], "bias": c["beta"]}, {"eps": 1e-5},
                                c["dy"], {"y": "out", "dx": "x", "dgamma": "weight", "dbeta": "bias"}),
    "rms_norm": lambda c: _op("rms_norm", {"x": c["x"], "weight": c["gamma"]}, {"eps": 1e-6}, c["dy"],
                              {"y": "out", "dx": "x", "dgamma": "weight"}),
    "gelu": lambda c: _op("gelu", {"x": c["x"]}, {"approximate": c["approximate"]}, c["dy"], {"y": "out", "dx": "x"}),
    "silu": lambda c: _op("silu", {"x": c["x"]}, {}, c["dy"], {"y": "out", "dx": "x"}),
    "swiglu": lambda c: _op("swiglu", {"x": c["x"], "w_gate": c["W_gate"], "w_up": c["W_up"], "w_down": c["W_down"]},
                            {}, c["dy"], {"y": "out", "dx": "x", "dW_gate": "w_gate", "dW_up": "w_up",
                                          "dW_down": "w_down"}),
    "linear": lambda c: _op("linear", {"x": c["x"], "weight": c["W"], "bias": c["b"]}, {}, c["dy"],
                            {"y": "out", "dx": "x", "dW": "weight", "db": "bias"}),
    "dropout": _dropout,
    "embedding": lambda c: _op("embedding", {"ids": c["ids"], "weight": c["W"]}, {}, c["dout"],
                               {"out": "out", "dW": "weight"}, nondiff=("ids",)),
    "cross_entropy": lambda c: _op("cross_entropy", {"input": c["logits"], "target": c["targets"]}, {},
                                   c["dloss"], {"loss": "out", "dlogits": "input"}, nondiff=("target",)),
    "cross_entropy_options": lambda c: _op(
        "cross_entropy", {"input": c["logits"], "target": c["targets"]},
        {"ignore_index": c["ignore_index"], "label_smoothing": c["label_smoothing"]}, c["dloss"],
        {"loss": "out", "dlogits": "input"}, nondiff=("target",)),
    "adamw_step": _adamw,
    "relative_position_bias": _relative_position_bias,
    "alibi": _alibi,
    "learned_positions": _learned_positions,
    "positional_encoding": _positional,
    "rope": lambda c: _op("rope", {"x": c["x"]}, {"positions": c["positions"], "base": c["base"],
                                                  "interleaved": c["interleaved"]}, c["dy"], {"y": "out", "dx": "x"}),
    "scaled_dot_product_attention": _attention,
    "grouped_query_attention": lambda c: _op(
        "scaled_dot_product_attention_gqa", {"query": c["q"], "key": c["k"], "value": c["v"]},
        {"is_causal": c["causal"], "enable_gqa": True}, c["dout"],
        {"out": "out", "dq": "query", "dk": "key", "dv": "value"}),
    "causal_attention_kv_cache": _kv_cache,
    "flash_attention_backward": lambda c: _op(
        "scaled_dot_product_attention", {"query": c["q"], "key": c["k"], "value": c["v"]}, {"is_causal": c["causal"]},
        c["dout"], {"dq": "query", "dk": "key", "dv": "value"}),
    "multi_head_attention": _mha,
    "cross_attention": _cross_attention,
    "encoder_layer": _encoder,
    "decoder_layer": _decoder,
}


def run(exercise, inputs):
    """The drill's named outputs for ``inputs``, computed by torch (float64, autograd)."""
    if exercise not in _RUNNERS:
        raise KeyError(f"no torch oracle for the {exercise!r} drill in reference_torch.drill_oracle")
    return _RUNNERS[exercise](inputs)
