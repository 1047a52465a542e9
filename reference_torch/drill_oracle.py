"""PyTorch oracle for the interview drills (``python -m numpy_transformer drill check``).

``run(exercise, inputs)`` recomputes a drill case with torch's own operators and autograd (float64) and
returns the same named outputs as the drill (``y``, ``dx``, ``dW`` ...). The grader compares them with
its NumPy reference (``numpy_transformer.functional``): the user is graded against the NumPy reference,
and torch, when installed, confirms that reference case by case.

Imported lazily by the grading subprocess only; ``numpy_transformer`` never imports torch.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

_DT = torch.float64


def torch_version():
    return torch.__version__


def _t(a, grad=False):
    t = torch.tensor(np.asarray(a), dtype=_DT)
    return t.requires_grad_(grad)


def _np(t):
    return t.detach().cpu().numpy()


def _softmax(c):
    x = _t(c["x"], True)
    y = torch.softmax(x, dim=-1)
    y.backward(_t(c["dy"]))
    return {"y": _np(y), "dx": _np(x.grad)}


def _layer_norm(c):
    x, g, b = _t(c["x"], True), _t(c["gamma"], True), _t(c["beta"], True)
    y = F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)
    y.backward(_t(c["dy"]))
    return {"y": _np(y), "dx": _np(x.grad), "dgamma": _np(g.grad), "dbeta": _np(b.grad)}


def _gelu(c):
    x = _t(c["x"], True)
    y = F.gelu(x, approximate=c["approximate"])
    y.backward(_t(c["dy"]))
    return {"y": _np(y), "dx": _np(x.grad)}


def _linear(c):
    x, W, b = _t(c["x"], True), _t(c["W"], True), _t(c["b"], True)
    y = F.linear(x, W, b)
    y.backward(_t(c["dy"]))
    return {"y": _np(y), "dx": _np(x.grad), "dW": _np(W.grad), "db": _np(b.grad)}


def _embedding(c):
    W = _t(c["W"], True)
    out = F.embedding(torch.as_tensor(c["ids"], dtype=torch.long), W)
    out.backward(_t(c["dout"]))
    return {"out": _np(out), "dW": _np(W.grad)}


def _cross_entropy(c):
    z = _t(c["logits"], True)
    loss = F.cross_entropy(z, torch.as_tensor(c["targets"], dtype=torch.long))
    loss.backward(torch.tensor(c["dloss"], dtype=_DT))
    return {"loss": _np(loss), "dlogits": _np(z.grad)}


def _positional(c):
    s, d = c["S"], c["D"]
    position = torch.arange(s, dtype=_DT).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2, dtype=_DT) * (-math.log(10000.0) / d))
    pe = torch.zeros(s, d, dtype=_DT)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return {"pe": _np(pe)}


def _blocked(mask, s, t, causal):
    blocked = torch.zeros(s, t, dtype=torch.bool) if mask is None else torch.as_tensor(np.asarray(mask, dtype=bool))
    if causal:
        blocked = blocked | torch.triu(torch.ones(s, t, dtype=torch.bool), diagonal=1)
    return blocked


def _attention(c):
    q, k, v = _t(c["q"], True), _t(c["k"], True), _t(c["v"], True)
    blocked = _blocked(c["mask"], q.shape[-2], k.shape[-2], c["causal"])
    # torch's scaled_dot_product_attention takes a bool mask with True = *may* attend
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked)
    out.backward(_t(c["dout"]))
    return {"out": _np(out), "dq": _np(q.grad), "dk": _np(k.grad), "dv": _np(v.grad)}


def _mha(c):
    x = _t(c["x"], True)
    d = x.shape[-1]
    h = c["num_heads"]
    mha = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True, dtype=_DT)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([_t(c["Wq"]), _t(c["Wk"]), _t(c["Wv"])]))
        mha.out_proj.weight.copy_(_t(c["Wo"]))
    s = x.shape[1]
    blocked = _blocked(c["mask"], s, s, c["causal"])
    out, _ = mha(x, x, x, attn_mask=blocked, need_weights=False)
    out.backward(_t(c["dout"]))
    dWq, dWk, dWv = mha.in_proj_weight.grad.split(d)
    return {"out": _np(out), "dx": _np(x.grad), "dWq": _np(dWq), "dWk": _np(dWk), "dWv": _np(dWv),
            "dWo": _np(mha.out_proj.weight.grad)}


def _encoder(c):
    x = _t(c["x"], True)
    p = c["params"]
    d = x.shape[-1]
    f = p["W1"].shape[0]
    layer = torch.nn.TransformerEncoderLayer(d, c["num_heads"], dim_feedforward=f, dropout=0.0, activation="relu",
                                             layer_norm_eps=1e-5, batch_first=True, norm_first=c["norm_first"],
                                             dtype=_DT)
    with torch.no_grad():
        sa = layer.self_attn
        sa.in_proj_weight.copy_(torch.cat([_t(p["Wq"]), _t(p["Wk"]), _t(p["Wv"])]))
        sa.in_proj_bias.zero_()                      # the drill's attention has no biases
        sa.out_proj.weight.copy_(_t(p["Wo"]))
        sa.out_proj.bias.zero_()
        layer.linear1.weight.copy_(_t(p["W1"]))
        layer.linear1.bias.copy_(_t(p["b1"]))
        layer.linear2.weight.copy_(_t(p["W2"]))
        layer.linear2.bias.copy_(_t(p["b2"]))
        layer.norm1.weight.copy_(_t(p["gamma1"]))
        layer.norm1.bias.copy_(_t(p["beta1"]))
        layer.norm2.weight.copy_(_t(p["gamma2"]))
        layer.norm2.bias.copy_(_t(p["beta2"]))
    layer.train()
    mask = None if c["mask"] is None else torch.as_tensor(np.asarray(c["mask"], dtype=bool))
    out = layer(x, src_mask=mask)
    out.backward(_t(c["dout"]))
    dWq, dWk, dWv = layer.self_attn.in_proj_weight.grad.split(d)
    g = {"Wq": dWq, "Wk": dWk, "Wv": dWv, "Wo": layer.self_attn.out_proj.weight.grad,
         "W1": layer.linear1.weight.grad, "b1": layer.linear1.bias.grad,
         "W2": layer.linear2.weight.grad, "b2": layer.linear2.bias.grad,
         "gamma1": layer.norm1.weight.grad, "beta1": layer.norm1.bias.grad,
         "gamma2": layer.norm2.weight.grad, "beta2": layer.norm2.bias.grad}
    res = {"out": _np(out), "dx": _np(x.grad)}
    res.update({f"grads[{k}]": _np(v) for k, v in g.items()})
    return res


_RUNNERS = {
    "softmax": _softmax, "layer_norm": _layer_norm, "gelu": _gelu, "linear": _linear, "embedding": _embedding,
    "cross_entropy": _cross_entropy, "positional_encoding": _positional,
    "scaled_dot_product_attention": _attention, "multi_head_attention": _mha, "encoder_layer": _encoder,
}


def run(exercise, inputs):
    """The drill's named outputs for ``inputs``, computed by torch (float64, autograd)."""
    return _RUNNERS[exercise](inputs)
