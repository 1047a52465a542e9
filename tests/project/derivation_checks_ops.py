"""The checks of docs/derivations.md's blocks for the elementwise and row-wise ops: linear, embedding, the
norms, softmax, cross-entropy, the activations, dropout, SiLU and SwiGLU (registered in ``CHECKS``).
"""

from __future__ import annotations

import numpy as np

import numpy_transformer.functional as F
from numpy_transformer import nn
from tests.project.derivation_registry import check, close, rel_err

# --------------------------------------------------------------------------------------------------
# one check per block
# --------------------------------------------------------------------------------------------------

@check("linear")
def _check_linear(ns):
    rng = np.random.default_rng(0)
    for lead in [(7,), (2, 3)]:
        x = rng.standard_normal(lead + (5,))
        w, b = rng.standard_normal((4, 5)), rng.standard_normal(4)
        dy = rng.standard_normal(lead + (4,))
        _, cache = F.linear_forward(x, w, b)
        dx, dw, db = F.linear_backward(dy, cache)
        ddx, ddw, ddb = ns["linear_grads"](dy, x, w)
        close(f"lead {lead}", dx=(ddx, dx), dW=(ddw, dw), db=(ddb, db))


@check("embedding")
def _check_embedding(ns):
    rng = np.random.default_rng(1)
    v, d = 6, 4
    ids = np.array([[0, 2, 2, 5], [2, 1, 0, 2]])                       # repeated ids
    w = rng.standard_normal((v, d))
    dy = rng.standard_normal(ids.shape + (d,))
    for pad in (None, 2, 0):
        _, cache = F.embedding_forward(ids, w, padding_idx=pad)
        close(f"padding_idx={pad}", dW=(ns["embedding_grad"](dy, ids, v, pad), F.embedding_backward(dy, cache)))
    _, cache = F.embedding_forward(ids, w)
    ours = F.embedding_backward(dy, cache)
    assert rel_err(ns["embedding_grad_fancy_index"](dy, ids, v), ours) > 1e-2, \
        "the fancy-index update should lose contributions of repeated ids"
    distinct = np.array([[3, 0], [5, 1]])
    dy2 = rng.standard_normal(distinct.shape + (d,))
    _, cache = F.embedding_forward(distinct, w)
    close("distinct ids", dW=(ns["embedding_grad_fancy_index"](dy2, distinct, v), F.embedding_backward(dy2, cache)))


def _ln_data(rng, eps_list=(1e-5, 0.3)):
    x = 3.0 + 2.0 * rng.standard_normal((2, 3, 8))
    w, b = rng.standard_normal(8), rng.standard_normal(8)
    dy = rng.standard_normal(x.shape)
    return x, w, b, dy, eps_list


@check("layer_norm")
def _check_layer_norm(ns):
    rng = np.random.default_rng(2)
    x, w, b, dy, eps_list = _ln_data(rng)
    for eps in eps_list:
        _, cache = F.layer_norm_forward(x, w, b, eps)
        dx, dw, db = F.layer_norm_backward(dy, cache)
        ddx, ddw, ddb = ns["layer_norm_grads"](dy, x, w, eps)
        close(f"eps={eps}", dx=(ddx, dx), dw=(ddw, dw), db=(ddb, db))
    _, cache = F.layer_norm_forward(x, None, None, 1e-5)                 # no affine part: w = 1
    close("no affine", dx=(ns["layer_norm_grads"](dy, x, np.ones(8), 1e-5)[0], F.layer_norm_backward(dy, cache)[0]))


@check("layer_norm_jacobian")
def _check_layer_norm_jacobian(ns):
    rng = np.random.default_rng(3)
    x, w, b, dy, eps_list = _ln_data(rng)
    for eps in eps_list:
        jac = ns["layer_norm_jacobian"](x, eps)                            # (2, 3, 8, 8)
        assert jac.shape == x.shape + (8,)
        _, cache = F.layer_norm_forward(x, w, b, eps)
        dx = F.layer_norm_backward(dy, cache)[0]
        close(f"eps={eps}", dx=(np.einsum("...jk,...j->...k", jac, dy * w), dx),
              J_symmetric=(jac, np.swapaxes(jac, -1, -2)))


@check("rms_norm")
def _check_rms_norm(ns):
    rng = np.random.default_rng(20)
    grads = ns["rms_norm_grads"]
    for shape, n_axes in [((2, 3, 8), 1), ((2, 3, 4), 2), ((5, 1), 1)]:
        ns_shape = shape[len(shape) - n_axes:]
        x = 1.5 + 2.0 * rng.standard_normal(shape)             # an offset: RMSNorm does not remove it
        w, dy = rng.standard_normal(ns_shape), rng.standard_normal(shape)
        for eps in (1e-5, 0.3):
            _, cache = F.rms_norm_forward(x, w, eps)
            dx, dw = F.rms_norm_backward(dy, cache)
            ddx, ddw = grads(dy, x, w, eps, n_axes)
            close(f"{shape} over {n_axes} axes, eps={eps}", dx=(ddx, dx), dw=(ddw, dw))
        if shape[-1] == 1:                # D = 1 with eps = machine eps: dx is rounding noise in any formula
            continue
        _, cache = F.rms_norm_forward(x, None, None, normalized_shape=ns_shape)    # no weight, eps = machine eps
        dx, dw = F.rms_norm_backward(dy, cache)
        assert dw is None
        close(f"{shape} no weight", dx=(grads(dy, x, np.ones(ns_shape), np.finfo(np.float64).eps, n_axes)[0], dx))


@check("softmax")
def _check_softmax(ns):
    rng = np.random.default_rng(4)
    x = 3.0 * rng.standard_normal((3, 4, 5))
    dy = rng.standard_normal(x.shape)
    for axis in (-1, 0, 1):
        y, cache = F.softmax_forward(x, axis=axis)
        close(f"axis={axis}", dx=(ns["softmax_grad"](dy, x, axis), F.softmax_backward(dy, cache)))
    y, cache = F.softmax_forward(x)
    jac = ns["softmax_jacobian"](y)                                        # (3, 4, 5, 5)
    close("Jacobian", dx=(np.einsum("...ik,...i->...k", jac, dy), F.softmax_backward(dy, cache)),
          J_symmetric=(jac, np.swapaxes(jac, -1, -2)))


@check("cross_entropy")
def _check_cross_entropy(ns):
    rng = np.random.default_rng(5)
    z = 2.0 * rng.standard_normal((2, 7, 5))                               # (N, C, d1): class axis at dim 1
    t = rng.integers(0, 7, size=(2, 5))
    t[0, 1] = t[1, 3] = -100
    t0 = t.copy()
    t0[t0 == -100] = 0                                                     # ignore_index a real class
    probs = rng.random(z.shape)                                            # probability targets (unnormalised)
    weight = rng.uniform(0.5, 2.0, 7)
    cases = [(t, -100), (t0, 0), (probs, -100)]
    for targets, ignore in cases:
        for w in (None, weight):
            for smoothing in (0.0, 0.1):
                for reduction in ("mean", "sum"):
                    loss, cache = F.cross_entropy_forward(z, targets, w, ignore, reduction, smoothing)
                    dz = F.cross_entropy_backward(1.0, cache)
                    dloss, ddz = ns["cross_entropy"](z, targets, w, smoothing, ignore, reduction)
                    close(f"ignore={ignore} weight={w is not None} smoothing={smoothing} {reduction}",
                          loss=(dloss, loss), dz=(ddz, dz))
    ignored = np.full((2, 5), -100)                                        # every row ignored: NaN mean, zero gradient
    loss, cache = F.cross_entropy_forward(z, ignored, weight)
    dloss, ddz = ns["cross_entropy"](z, ignored, weight)
    assert np.isnan(loss) and np.isnan(dloss)
    close("every row ignored", dz=(ddz, F.cross_entropy_backward(1.0, cache)))


@check("relu")
def _check_relu(ns):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 5))
    x[0, :3] = 0.0                                                         # the kink: slope 0
    dy = rng.standard_normal(x.shape)
    _, cache = F.relu_forward(x)
    close(dx=(ns["relu_grad"](dy, x), F.relu_backward(dy, cache)))


@check("gelu")
def _check_gelu(ns):
    rng = np.random.default_rng(7)
    x = np.concatenate([np.linspace(-8, 8, 161), 2.0 * rng.standard_normal(50)])
    dy = rng.standard_normal(x.shape)
    for approximate in ("none", "tanh"):
        _, cache = F.gelu_forward(x, approximate)
        close(approximate, dx=(ns["gelu_grad"](dy, x, approximate), F.gelu_backward(dy, cache)))


@check("dropout")
def _check_dropout(ns):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 4, 5))
    dy = rng.standard_normal(x.shape)
    for p in (0.3, 0.9, 1.0):
        _, cache = F.dropout_forward(x, p, training=True, rng=np.random.default_rng(9))
        close(f"p={p}", dx=(ns["dropout_grad"](dy, cache.mask, p), F.dropout_backward(dy, cache)))
    _, cache = F.dropout_forward(x, 0.3, training=False)                  # evaluation: the identity
    close("eval", dx=(ns["dropout_grad"](dy, np.ones(x.shape, bool), 0.0), F.dropout_backward(dy, cache)))


@check("silu")
def _check_silu(ns):
    rng = np.random.default_rng(20)
    x = np.concatenate([rng.standard_normal(50) * 4, [-30.0, -1.28, 0.0, 2.4, 30.0]])
    dy = rng.standard_normal(x.shape)
    _, cache = F.silu_forward(x)
    close("silu", dx=(ns["silu_grad"](dy, x), F.silu_backward(dy, cache)))


@check("swiglu")
def _check_swiglu(ns):
    rng = np.random.default_rng(21)
    n, d, f = 7, 4, 6
    x, dy = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    wg, wu, wd = rng.standard_normal((f, d)), rng.standard_normal((f, d)), rng.standard_normal((d, f))
    _, cache = F.swiglu_forward(x, wg, wu, wd)
    dx, dwg, dwu, dwd = F.swiglu_backward(dy, cache)[:4]
    ddx, ddwg, ddwu, ddwd = ns["swiglu_grads"](dy, x, wg, wu, wd)
    close("functional", dx=(ddx, dx), dWg=(ddwg, dwg), dWu=(ddwu, dwu), dWd=(ddwd, dwd))
    m = nn.SwiGLU(d, f, dtype=np.float64, seed=0)
    for name, w in (("gate_proj", wg), ("up_proj", wu), ("down_proj", wd)):
        getattr(m, name).weight.data[...] = w
    m(x)
    close("nn.SwiGLU", dx=(ddx, m.backward(dy)), dWg=(ddwg, m.gate_proj.weight.grad),
          dWu=(ddwu, m.up_proj.weight.grad), dWd=(ddwd, m.down_proj.weight.grad))
