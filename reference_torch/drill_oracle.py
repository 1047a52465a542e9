"""PyTorch oracle for the interview drills (``python -m numpy_transformer drill check``).

``run(exercise, inputs)`` recomputes a drill case with torch and returns the same named outputs as the
drill (``y``, ``dx``, ``dW`` ...). The grader compares them with its NumPy reference: the user is graded
against the NumPy reference, and torch, when installed, confirms that reference case by case.

There is no list of exercises here: each exercise folder's ``exercise.py`` says, as data (its
``ORACLE``), how torch re-checks it. Most map their inputs onto an op of the torch table
(:data:`reference_torch.table.OPS`, torch.nn.functional): ``{"op": name, "inputs": {table argument: case
input}, "static": {argument: value}, "options": {argument: case input}, "upstream": case input,
"outputs": {drill output: table output}, "nondiff": (...)}``. The irregular ones name an adapter below
(``{"adapter": "multi_head_attention"}`` -> :func:`adapter_multi_head_attention`): the module exercises
build torch's module for the reference's own NumPy module (:func:`reference_torch.table.torch_module`),
``adamw_step`` runs ``torch.optim.AdamW`` itself. Imported
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


def adapter_multi_head_attention(c):
    from numpy_transformer.drills.exercises import EXERCISES
    _, attn = EXERCISES["multi_head_attention"].reference().mha_forward(
        c["x"], c["Wq"], c["Wk"], c["Wv"], c["Wo"], c["num_heads"], mask=c["mask"], causal=c["causal"])
    s = c["x"].shape[1]
    tm, out, dx = _module(attn, c["x"], c["dout"], attn_mask=torch.from_numpy(_blocked(c, s, s)))
    dWq, dWk, dWv = tm.in_proj_weight.grad.split(c["x"].shape[-1])
    return {"out": _np(out), "dx": _np(dx), "dWq": _np(dWq), "dWk": _np(dWk), "dWv": _np(dWv),
            "dWo": _np(tm.out_proj.weight.grad)}


def adapter_cross_attention(c):
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


def adapter_encoder_layer(c):
    from numpy_transformer.drills.exercises import EXERCISES
    from numpy_transformer.drills.exercises.encoder_layer.exercise import STATE_KEYS
    _, layer = EXERCISES["encoder_layer"].reference().encoder_layer_forward(
        c["x"], c["params"], c["num_heads"], mask=c["mask"], norm_first=c["norm_first"])
    mask = None if c["mask"] is None else torch.from_numpy(np.asarray(c["mask"], dtype=bool))
    tm, out, dx = _module(layer, c["x"], c["dout"], src_mask=mask)
    p = dict(tm.named_parameters())
    g = {k: p[key].grad for k, key in STATE_KEYS.items()}
    g["Wq"], g["Wk"], g["Wv"] = p["self_attn.in_proj_weight"].grad.split(c["x"].shape[-1])
    res = {"out": _np(out), "dx": _np(dx)}
    res.update({f"grads[{k}]": _np(v) for k, v in g.items()})
    return res


def adapter_decoder_layer(c):
    # torch.nn.TransformerDecoderLayer built from the reference's own layer (zero attention biases)
    from numpy_transformer.drills.exercises import EXERCISES
    from numpy_transformer.drills.exercises.decoder_layer.exercise import DEC_STATE_KEYS
    _, layer = EXERCISES["decoder_layer"].reference().decoder_layer_forward(
        c["tgt"], c["memory"], c["params"], c["num_heads"])
    tm = table.torch_module(layer, "torch.nn", np.float64)
    tt = torch.tensor(c["tgt"], dtype=_DT, requires_grad=True)
    mt = torch.tensor(c["memory"], dtype=_DT, requires_grad=True)
    as_t = (lambda a: None if a is None else torch.from_numpy(np.asarray(a, dtype=bool)))
    out = tm(tt, mt, tgt_mask=as_t(c["tgt_mask"]), memory_key_padding_mask=as_t(c["memory_key_padding_mask"]))
    out.backward(torch.tensor(c["dout"], dtype=_DT))
    p = dict(tm.named_parameters())
    g = {k: p[key].grad for k, key in DEC_STATE_KEYS.items()}
    g["Wq"], g["Wk"], g["Wv"] = p["self_attn.in_proj_weight"].grad.split(c["tgt"].shape[-1])
    g["cWq"], g["cWk"], g["cWv"] = p["multihead_attn.in_proj_weight"].grad.split(c["tgt"].shape[-1])
    res = {"out": _np(out), "dtgt": _np(tt.grad), "dmemory": _np(mt.grad)}
    res.update({f"grads[{k}]": _np(v) for k, v in g.items()})
    return res


def adapter_positional_encoding(c):
    from .nn.layers import sinusoidal_table
    return {"pe": _np(sinusoidal_table(c["S"], c["D"], _DT))}


def adapter_scaled_dot_product_attention(c):
    # the drill's mask is True = may NOT attend; torch's function (the table's op) takes True = may attend
    q = c["q"]
    return _op("scaled_dot_product_attention", {"query": q, "key": c["k"], "value": c["v"]},
               {"attn_mask": ~_blocked(c, q.shape[-2], c["k"].shape[-2]) if c["mask"] is not None or c["causal"]
                else None}, c["dout"], {"out": "out", "dq": "query", "dk": "key", "dv": "value"})


def adapter_relative_position_bias(c):
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


def adapter_alibi(c):
    """The paper's get_slopes and bias (reference_torch.nn.position_bias, torch ops)."""
    from .nn.position_bias import alibi_bias, alibi_get_slopes
    return {"slopes": np.asarray(alibi_get_slopes(c["num_heads"]), dtype=np.float64),
            "bias": alibi_bias(c["num_heads"], c["S"], c["T"]).numpy()}


def adapter_learned_positions(c):
    """torch's twin of nt.LearnedPositionalEmbedding (table.torch_module) with the case's table."""
    import numpy_transformer as nt
    W = np.asarray(c["W"], dtype=np.float64)
    m = nt.LearnedPositionalEmbedding(W.shape[0], W.shape[1], dtype=np.float64)
    m.weight.data[...] = W
    tm, out, dx = _module(m, c["x"], c["dy"], offset=c["offset"])
    return {"y": _np(out), "dx": _np(dx), "dW": _np(tm.weight.grad)}


def adapter_dropout(c):
    # torch's own generator cannot replay NumPy's draw: the drill's keep-mask (rng.random(x.shape) >= p
    # from the case's seed) goes to the table's dropout op, which applies it with torch's operators
    keep = np.random.default_rng(int(c["seed"])).random(c["x"].shape) >= c["p"]
    return _op("dropout", {"x": c["x"]}, {"p": c["p"], "training": c["training"], "mask": keep}, c["dy"],
               {"y": "out", "dx": "x"})


def adapter_adamw_step(c):
    # torch.optim.AdamW itself, its state set to the case's (step, exp_avg, exp_avg_sq)
    p = torch.nn.Parameter(torch.tensor(c["param"], dtype=_DT))
    p.grad = torch.tensor(c["grad"], dtype=_DT)
    opt = torch.optim.AdamW([p], lr=c["lr"], betas=c["betas"], eps=c["eps"], weight_decay=c["weight_decay"],
                            foreach=False)
    opt.state[p] = {"step": torch.tensor(float(c["step"]), dtype=_DT),
                    "exp_avg": torch.tensor(c["m"], dtype=_DT), "exp_avg_sq": torch.tensor(c["v"], dtype=_DT)}
    opt.step()
    return {"param": _np(p), "m": _np(opt.state[p]["exp_avg"]), "v": _np(opt.state[p]["exp_avg_sq"])}


def adapter_causal_attention_kv_cache(c):
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


def _table_op(spec, c):
    """An exercise's ``ORACLE`` of the table-op kind, run on the case inputs ``c``."""
    static = dict(spec.get("static", {}))
    static.update({arg: c[key] for arg, key in spec.get("options", {}).items()})
    return _op(spec["op"], {arg: c[key] for arg, key in spec["inputs"].items()}, static, c[spec["upstream"]],
               spec["outputs"], nondiff=tuple(spec.get("nondiff", ())))


def run(exercise, inputs):
    """The drill's named outputs for ``inputs``, computed by torch (float64, autograd)."""
    from numpy_transformer.drills.exercises import get
    ex = get(exercise)
    spec = None if ex is None else ex.oracle
    if not spec:
        raise KeyError(f"no torch oracle for the {exercise!r} drill (its exercise.py has no ORACLE)")
    if "adapter" in spec:
        return globals()[f"adapter_{spec['adapter']}"](inputs)
    return _table_op(spec, inputs)
