"""The drills: what each exercise asks, how its cases are drawn, how it is run, and its classic mistakes.

Every exercise has

* ``functions`` — the names the user's file must define (the skeleton's exact signatures);
* ``draw(rng, i)`` — case ``i`` (the first few are fixed edge cases such as B=1, S=1, H=1; the rest are
  drawn from a seeded NumPy generator, so a seed always gives the same cases);
* ``run(rec, inputs)`` — calls the functions through a :class:`~._harness.Recorder` and records each
  returned array under a name (``y``, ``dx``, ``dW`` ...);
* ``reference()`` — a namespace built on :mod:`numpy_transformer.functional`, the verified
  implementation (itself proven against PyTorch), which the grader compares with;
* ``mistakes`` — classic errors, each a configuration of the matching ``variants.*_impl``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from .. import functional as F
from . import variants as V

# --------------------------------------------------------------------------------------------------
# data types
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mistake:
    """A classic mistake: ``configs`` are knob settings of the exercise's variant that reproduce it."""
    id: str
    title: str
    explain: str
    fix: str
    configs: Tuple[dict, ...]


@dataclass
class Case:
    inputs: dict
    desc: str
    tags: List[str] = field(default_factory=list)
    factors: Dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Exercise:
    name: str
    difficulty: str                       # easy / medium / hard
    minutes: int                          # a fair interview target
    covers: str                           # one line for `drill list`
    functions: Tuple[str, ...]
    outputs: Tuple[Tuple[str, str], ...]  # (output name, function that returns it)
    library: Tuple[str, ...]              # functional.* whose docstrings carry the derivation
    draw: Callable[[np.random.Generator, int], Case]
    run: Callable
    reference: Callable[[], object]
    variant: Callable[..., object]
    mistakes: Tuple[Mistake, ...]
    exception_hints: Tuple[Tuple[str, str], ...] = ()
    n_edge: int = 0
    reference_name: str = "numpy_transformer.functional (verified)"

    def mistake(self, mistake_id):
        for m in self.mistakes:
            if m.id == mistake_id:
                return m
        raise KeyError(mistake_id)


def _shape(a):
    return "(" + ", ".join(str(n) for n in a.shape) + ")"


def _desc(*parts):
    return "  ".join(p for p in parts if p)


# --------------------------------------------------------------------------------------------------
# softmax
# --------------------------------------------------------------------------------------------------

_SOFTMAX_EDGES = [((1, 1), 1.0), ((1, 6), 3.0), ((4, 1), 3.0), ((2, 3, 5), 1000.0), ((3, 4), 3.0)]


def _draw_softmax(rng, i):
    if i < len(_SOFTMAX_EDGES):
        shape, scale = _SOFTMAX_EDGES[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3))))
        shape = lead + (int(rng.integers(1, 9)),)
        scale = 1000.0 if rng.random() < 0.2 else 3.0
    x = rng.standard_normal(shape) * scale
    dy = rng.standard_normal(shape)
    tags = ["large logits (exp overflows without the max subtraction)"] if scale > 100 else []
    return Case({"x": x, "dy": dy}, _desc(f"x {_shape(x)}"), tags, {"V": shape[-1]})


def _run_softmax(rec, c):
    y, cache = rec.pair("softmax_forward", rec.call("softmax_forward", c["x"]), "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("softmax_backward", rec.call("softmax_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_softmax():
    return SimpleNamespace(softmax_forward=lambda x: F.softmax_forward(x, axis=-1),
                           softmax_backward=F.softmax_backward)


SOFTMAX = Exercise(
    name="softmax", difficulty="easy", minutes=10,
    covers="numerically stable softmax over the last axis; its backward (Jacobian-vector product)",
    functions=("softmax_forward", "softmax_backward"),
    outputs=(("y", "softmax_forward"), ("dx", "softmax_backward")),
    library=("softmax_forward", "softmax_backward"),
    draw=_draw_softmax, run=_run_softmax, reference=_ref_softmax, variant=V.softmax_impl,
    n_edge=len(_SOFTMAX_EDGES),
    mistakes=(
        Mistake("softmax_wrong_axis", "softmax over the wrong axis",
                "Each row (the last axis) must sum to 1; the normalisation ran along another axis.",
                "Use axis=-1 with keepdims=True in both the max and the sum (and in the backward's sum).",
                ({"axis": 0}, {"axis": -2})),
        Mistake("softmax_unstable", "no max subtraction: exp overflows",
                "exp(1000) is inf in float64, and inf/inf is NaN. Softmax is unchanged by subtracting a "
                "constant from a row, so the max is subtracted first.",
                "e = np.exp(x - x.max(axis=-1, keepdims=True)).",
                ({"stable": False},)),
        Mistake("softmax_backward_no_rowsum", "softmax backward missing the row-sum term",
                "dx = y * dy treats softmax as elementwise. Its Jacobian is diag(y) - y y^T, so every "
                "input also receives -y_k * sum_i(dy_i y_i).",
                "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
                ({"backward": "no_rowsum"},)),
        Mistake("softmax_backward_diagonal", "softmax backward uses only the Jacobian diagonal y(1-y)",
                "dy_i/dx_i = y_i(1 - y_i) is only the diagonal; dy_i/dx_k = -y_i y_k for k != i is dropped.",
                "dx = y * (dy - np.sum(dy * y, axis=-1, keepdims=True)).",
                ({"backward": "diagonal"},)),
    ),
)

# --------------------------------------------------------------------------------------------------
# layer norm
# --------------------------------------------------------------------------------------------------

_LN_EDGES = [((1, 1, 4), 1.0), ((2, 1), 1.0), ((2, 3, 5), 1e-3), ((1, 8), 1.0), ((3, 6), 4.0)]


def _draw_layer_norm(rng, i):
    if i < len(_LN_EDGES):
        shape, scale = _LN_EDGES[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3))))
        shape = lead + (int(rng.integers(2, 9)),)
        scale = float(rng.choice([1.0, 1e-3, 4.0]))
    d = shape[-1]
    offset = rng.standard_normal(shape[:-1] + (1,))
    x = offset + scale * rng.standard_normal(shape)
    gamma = 1.0 + 0.5 * rng.standard_normal(d)
    beta = 0.5 * rng.standard_normal(d)
    dy = rng.standard_normal(shape)
    tags = ["small variance (eps matters)"] if scale < 0.01 else []
    n = int(np.prod(shape[:-1]))
    return Case({"x": x, "gamma": gamma, "beta": beta, "dy": dy},
                _desc(f"x {_shape(x)}", f"D={d}"), tags, {"D": d, "N": n})


def _run_layer_norm(rec, c):
    y, cache = rec.pair("layer_norm_forward",
                        rec.call("layer_norm_forward", c["x"], c["gamma"], c["beta"], eps=1e-5), "(y, cache)")
    rec.output("y", y)
    dx, dgamma, dbeta = rec.unpack("layer_norm_backward", rec.call("layer_norm_backward", c["dy"], cache),
                                   ["dx", "dgamma", "dbeta"])
    rec.output("dx", dx)
    rec.output("dgamma", dgamma)
    rec.output("dbeta", dbeta)


def _ref_layer_norm():
    return SimpleNamespace(
        layer_norm_forward=lambda x, gamma, beta, eps=1e-5: F.layer_norm_forward(x, gamma, beta, eps),
        layer_norm_backward=F.layer_norm_backward)


LAYER_NORM = Exercise(
    name="layer_norm", difficulty="medium", minutes=15,
    covers="LayerNorm over the last axis (biased variance, eps inside the sqrt); backward dx, dgamma, dbeta",
    functions=("layer_norm_forward", "layer_norm_backward"),
    outputs=(("y", "layer_norm_forward"), ("dx", "layer_norm_backward"), ("dgamma", "layer_norm_backward"),
             ("dbeta", "layer_norm_backward")),
    library=("layer_norm_forward", "layer_norm_backward"),
    draw=_draw_layer_norm, run=_run_layer_norm, reference=_ref_layer_norm, variant=V.layer_norm_impl,
    n_edge=len(_LN_EDGES),
    mistakes=(
        Mistake("ln_unbiased_variance", "unbiased variance (divided by D-1) instead of biased (by D)",
                "LayerNorm (torch, the paper) uses the population variance mean((x - mu)^2). "
                "np.var(ddof=1) / torch.var(unbiased=True) divide by D-1.",
                "var = np.mean((x - mu)**2, axis=-1, keepdims=True)  (np.var's default ddof=0).",
                ({"ddof": 1},)),
        Mistake("ln_eps_outside_sqrt", "eps added outside the square root",
                "(x - mu) / (sqrt(var) + eps) differs from (x - mu) / sqrt(var + eps), most where the "
                "variance is small.",
                "rstd = 1 / np.sqrt(var + eps).",
                ({"eps_outside": True},)),
        Mistake("ln_wrong_axis", "normalised over the batch/positions instead of the features (a BatchNorm)",
                "LayerNorm normalises each position's D features: statistics over axis=-1 only.",
                "mu = x.mean(axis=-1, keepdims=True); var likewise over axis=-1.",
                ({"axis": "leading"},)),
        Mistake("ln_backward_no_mean_term", "LayerNorm backward missing the -mean(dxhat) term",
                "Every x_j also moves the mean mu, which shifts every xhat_i: that path contributes "
                "-rstd * mean(dxhat).",
                "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
                ({"backward": "no_mean"},)),
        Mistake("ln_backward_no_variance_term", "LayerNorm backward missing the -xhat*mean(dxhat*xhat) term",
                "Every x_j also moves the variance, which rescales every xhat_i: that path contributes "
                "-rstd * xhat * mean(dxhat * xhat).",
                "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
                ({"backward": "no_xhat"},)),
        Mistake("ln_backward_constant_stats", "LayerNorm backward treats mean and variance as constants",
                "dx = rstd * dxhat is the gradient only if mu and var did not depend on x.",
                "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).",
                ({"backward": "direct_only"},)),
        Mistake("ln_backward_no_gamma", "LayerNorm backward forgot gamma in dx",
                "y = xhat * gamma + beta, so the gradient reaching xhat is dxhat = dy * gamma.",
                "dxhat = dy * gamma, then the usual formula with dxhat.",
                ({"backward": "no_gamma"},)),
    ),
)

# --------------------------------------------------------------------------------------------------
# gelu
# --------------------------------------------------------------------------------------------------


def _draw_gelu(rng, i):
    edges = [(np.linspace(-10, 10, 41), "none"), (np.linspace(-10, 10, 41), "tanh"),
             (np.zeros((1, 1)), "none")]
    if i < len(edges):
        x, approx = edges[i]
        x = x.copy()
    else:
        shape = tuple(int(n) for n in rng.integers(1, 7, size=int(rng.integers(1, 4))))
        x = 3.0 * rng.standard_normal(shape)
        approx = "none" if rng.random() < 0.6 else "tanh"
    dy = rng.standard_normal(x.shape)
    return Case({"x": x, "approximate": approx, "dy": dy}, _desc(f"x {_shape(x)}", f"approximate={approx!r}"))


def _run_gelu(rec, c):
    y, cache = rec.pair("gelu_forward", rec.call("gelu_forward", c["x"], approximate=c["approximate"]),
                        "(y, cache)")
    rec.output("y", y)
    (dx,) = rec.unpack("gelu_backward", rec.call("gelu_backward", c["dy"], cache), ["dx"])
    rec.output("dx", dx)


def _ref_gelu():
    return SimpleNamespace(gelu_forward=lambda x, approximate="none": F.gelu_forward(x, approximate),
                           gelu_backward=F.gelu_backward)


GELU = Exercise(
    name="gelu", difficulty="easy", minutes=10,
    covers="GELU exact (x * Phi(x), with erf) and its tanh approximation; both derivatives",
    functions=("gelu_forward", "gelu_backward"),
    outputs=(("y", "gelu_forward"), ("dx", "gelu_backward")),
    library=("gelu_forward", "gelu_backward"),
    draw=_draw_gelu, run=_run_gelu, reference=_ref_gelu, variant=V.gelu_impl, n_edge=3,
    mistakes=(
        Mistake("gelu_tanh_for_exact", "the tanh approximation used where the exact GELU was asked",
                "approximate='none' is x * Phi(x) with Phi(x) = (1 + erf(x / sqrt(2))) / 2; the tanh "
                "formula differs by up to ~1e-3.",
                "When approximate == 'none': y = 0.5 * x * (1 + erf(x / sqrt(2))).",
                ({"exact": "tanh"},)),
        Mistake("gelu_sigmoid_approximation", "the sigmoid approximation x * sigmoid(1.702 x) used",
                "x * sigmoid(1.702 x) is a coarse approximation (error ~2e-2), not GELU.",
                "y = 0.5 * x * (1 + erf(x / sqrt(2))) (or the tanh formula when approximate == 'tanh').",
                ({"exact": "sigmoid"},)),
        Mistake("gelu_backward_no_x_pdf", "GELU backward missing the x * phi(x) term (product rule)",
                "y = x * Phi(x) is a product: y' = Phi(x) + x * phi(x), phi the standard normal density.",
                "dx = dy * (Phi(x) + x * np.exp(-x**2 / 2) / np.sqrt(2 * np.pi)).",
                ({"backward": "no_x_pdf"},)),
        Mistake("gelu_backward_pdf_unnormalised", "GELU backward with phi(x) missing 1/sqrt(2*pi)",
                "The standard normal density is exp(-x^2/2) / sqrt(2 pi).",
                "phi = np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi).",
                ({"backward": "pdf_unnormalised"},)),
        Mistake("gelu_tanh_backward_no_inner", "tanh-GELU backward missing the inner derivative",
                "u = sqrt(2/pi) (x + 0.044715 x^3) has du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).",
                "slope = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * sqrt(2/pi) * (1 + 3 * 0.044715 * x**2).",
                ({"backward": "no_inner"},)),
    ),
)

# --------------------------------------------------------------------------------------------------
# linear
# --------------------------------------------------------------------------------------------------


def _draw_linear(rng, i):
    edges = [((1, 1), 1), ((2, 4, 3), 3), ((5, 2), 4), ((1, 1, 6), 1), ((3, 3), 3)]
    if i < len(edges):
        xshape, dout = edges[i]
    else:
        lead = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.integers(1, 3))))
        din = int(rng.integers(1, 7))
        dout = din if rng.random() < 0.3 else int(rng.integers(1, 7))
        xshape = lead + (din,)
    din = xshape[-1]
    x = rng.standard_normal(xshape)
    W = rng.standard_normal((dout, din)) / math.sqrt(din)
    b = rng.standard_normal(dout)
    dy = rng.standard_normal(xshape[:-1] + (dout,))
    n = int(np.prod(xshape[:-1]))
    return Case({"x": x, "W": W, "b": b, "dy": dy}, _desc(f"x {_shape(x)}", f"W {_shape(W)}"), [], {"N": n})


def _run_linear(rec, c):
    y, cache = rec.pair("linear_forward", rec.call("linear_forward", c["x"], c["W"], c["b"]), "(y, cache)")
    rec.output("y", y)
    dx, dW, db = rec.unpack("linear_backward", rec.call("linear_backward", c["dy"], cache), ["dx", "dW", "db"])
    rec.output("dx", dx)
    rec.output("dW", dW)
    rec.output("db", db)


def _ref_linear():
    return SimpleNamespace(linear_forward=F.linear_forward, linear_backward=F.linear_backward)


LINEAR = Exercise(
    name="linear", difficulty="easy", minutes=10,
    covers="y = x W^T + b with torch's (Dout, Din) weight layout and any leading dims; dx, dW, db",
    functions=("linear_forward", "linear_backward"),
    outputs=(("y", "linear_forward"), ("dx", "linear_backward"), ("dW", "linear_backward"),
             ("db", "linear_backward")),
    library=("linear_forward", "linear_backward"),
    draw=_draw_linear, run=_run_linear, reference=_ref_linear, variant=V.linear_impl, n_edge=5,
    exception_hints=(
        (r"matmul|not aligned|core dimension|shapes .* mismatch",
         "W is stored (Dout, Din), as torch.nn.Linear: y = x @ W.T + b, dx = dy @ W, "
         "dW = dy^T x with the leading axes flattened."),
    ),
    mistakes=(
        Mistake("linear_untransposed_weight", "W used as (Din, Dout): x @ W instead of x @ W.T",
                "The weight has torch's layout (Dout, Din); x @ W only runs when W is square, and then "
                "computes a different map.",
                "y = x @ W.T + b; dx = dy @ W; dW = dy2.T @ x2.",
                ({"weight_layout": "untransposed"},)),
        Mistake("linear_dW_transposed", "dW transposed: x^T dy is (Din, Dout), W is (Dout, Din)",
                "A parameter's gradient has the parameter's shape: dW[o, i] = sum_n dy[n, o] x[n, i].",
                "dW = dy2.T @ x2 with dy2, x2 the inputs flattened to 2-D.",
                ({"dw": "transposed"},)),
        Mistake("linear_db_mean", "db averaged over rows instead of summed",
                "b is added to every row, so each row's gradient flows into it: a sum, not a mean.",
                "db = dy.reshape(-1, Dout).sum(axis=0).",
                ({"db": "mean"},)),
    ),
)

# --------------------------------------------------------------------------------------------------
# embedding
# --------------------------------------------------------------------------------------------------


def _draw_embedding(rng, i):
    if i == 0:
        v, d, ids = 3, 2, np.array([[1]])
    elif i == 1:
        v, d, ids = 4, 3, np.full((2, 4), 2)
    elif i == 2:
        v, d, ids = 5, 2, rng.permutation(5)[None, :]
    else:
        v, d = int(rng.integers(1, 7)), int(rng.integers(1, 6))
        ids = rng.integers(0, v, size=(int(rng.integers(1, 4)), int(rng.integers(1, 7))))
    ids = ids.astype(np.int64)
    W = rng.standard_normal((v, d))
    dout = rng.standard_normal(ids.shape + (d,))
    repeats = len(np.unique(ids)) < ids.size
    return Case({"ids": ids, "W": W, "dout": dout},
                _desc(f"ids {_shape(ids)}", f"W {_shape(W)}"), ["repeated ids"] if repeats else [])


def _run_embedding(rec, c):
    out, cache = rec.pair("embedding_forward", rec.call("embedding_forward", c["ids"], c["W"]), "(out, cache)")
    rec.output("out", out)
    (dW,) = rec.unpack("embedding_backward", rec.call("embedding_backward", c["dout"], cache), ["dW"])
    rec.output("dW", dW)


def _ref_embedding():
    return SimpleNamespace(embedding_forward=lambda ids, W: F.embedding_forward(ids, W),
                           embedding_backward=F.embedding_backward)


EMBEDDING = Exercise(
    name="embedding", difficulty="easy", minutes=8,
    covers="table lookup W[ids] and its scatter-add backward (repeated ids accumulate)",
    functions=("embedding_forward", "embedding_backward"),
    outputs=(("out", "embedding_forward"), ("dW", "embedding_backward")),
    library=("embedding_forward", "embedding_backward"),
    draw=_draw_embedding, run=_run_embedding, reference=_ref_embedding, variant=V.embedding_impl, n_edge=3,
    mistakes=(
        Mistake("embedding_repeated_ids_dropped", "embedding gradient drops repeated ids (dW[ids] += dout)",
                "NumPy's buffered fancy-index assignment writes each repeated index once: dW[ids] += dout "
                "keeps one row per id instead of summing every occurrence.",
                "np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))  (or a one-hot matmul).",
                ({"backward": "fancy_index"},)),
    ),
)

# --------------------------------------------------------------------------------------------------
# cross-entropy (fused with softmax)
# --------------------------------------------------------------------------------------------------


def _ce_forward(logits, targets):
    """Mean cross-entropy of (N, V) logits against (N,) class ids, through a stable log-softmax."""
    n = logits.shape[0]
    m = logits.max(axis=-1, keepdims=True)                                      # (N, 1)
    z = logits - m                                                              # (N, V)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))                    # (N, V)
    loss = -logp[np.arange(n), targets].mean()
    return loss, (np.exp(logp), targets)


def _ce_backward(dloss, cache):
    """dL/dlogits = (softmax - onehot) / N * dloss."""
    p, targets = cache
    n = p.shape[0]
    d = p.copy()
    d[np.arange(n), targets] -= 1
    return d * (dloss / n)


def _draw_cross_entropy(rng, i):
    edges = [(1, 1, 2.0), (1, 5, 2.0), (4, 3, 1000.0), (6, 4, 2.0), (3, 7, 2.0)]
    if i < len(edges):
        n, v, scale = edges[i]
    else:
        n, v = int(rng.integers(1, 9)), int(rng.integers(2, 9))
        scale = 1000.0 if rng.random() < 0.2 else 2.0
    logits = scale * rng.standard_normal((n, v))
    targets = rng.integers(0, v, size=n).astype(np.int64)
    dloss = float(rng.uniform(0.5, 2.0))
    tags = ["large logits (exp overflows, probabilities underflow)"] if scale > 100 else []
    return Case({"logits": logits, "targets": targets, "dloss": dloss},
                _desc(f"logits {_shape(logits)}", f"dloss={dloss:.3f}"), tags, {"N": n, "dloss": dloss})


def _run_cross_entropy(rec, c):
    loss, cache = rec.pair("cross_entropy_forward",
                           rec.call("cross_entropy_forward", c["logits"], c["targets"]), "(loss, cache)")
    rec.output("loss", loss)
    (dlogits,) = rec.unpack("cross_entropy_backward",
                            rec.call("cross_entropy_backward", c["dloss"], cache), ["dlogits"])
    rec.output("dlogits", dlogits)


def _ref_cross_entropy():
    return SimpleNamespace(cross_entropy_forward=_ce_forward, cross_entropy_backward=_ce_backward)


CROSS_ENTROPY = Exercise(
    name="cross_entropy", difficulty="medium", minutes=12,
    covers="mean cross-entropy fused with softmax (log-sum-exp), backward (softmax - onehot) / N",
    functions=("cross_entropy_forward", "cross_entropy_backward"),
    outputs=(("loss", "cross_entropy_forward"), ("dlogits", "cross_entropy_backward")),
    library=("softmax_forward", "softmax_backward"),
    draw=_draw_cross_entropy, run=_run_cross_entropy, reference=_ref_cross_entropy,
    variant=V.cross_entropy_impl, n_edge=5,
    reference_name="log-softmax via log-sum-exp (drills.exercises; equal to torch's cross_entropy in the tests)",
    mistakes=(
        Mistake("ce_unstable_exp", "exp of the raw logits overflows (no max subtraction)",
                "exp(1000) = inf: the loss and gradient become NaN for large logits.",
                "z = logits - logits.max(axis=-1, keepdims=True); logp = z - log(sum(exp(z))).",
                ({"logp": "naive"},)),
        Mistake("ce_log_of_softmax", "log(softmax) instead of log-softmax: log(0) = -inf",
                "With large logits a probability underflows to 0 and log(0) = -inf, so the loss is inf. "
                "log-softmax computed as z - logsumexp(z) never underflows.",
                "logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True)) with z = logits - max.",
                ({"logp": "log_probs"},)),
        Mistake("ce_sum_not_mean", "loss summed over the rows instead of averaged",
                "The loss is the mean over the N rows (torch's reduction='mean').",
                "loss = -logp[np.arange(N), targets].mean(); and divide the gradient by N.",
                ({"reduction": "sum"},)),
        Mistake("ce_grad_not_divided_by_n", "gradient not divided by N (the forward averages)",
                "loss = (1/N) sum_n l_n, so every row's gradient carries the 1/N.",
                "dlogits = (p - onehot) / N * dloss.",
                ({"backward": "no_div_n"},)),
        Mistake("ce_column_subtract", "p[:, targets] -= 1 subtracts whole columns",
                "p[:, targets] selects every row of each target column; the -1 belongs only at "
                "(n, targets[n]).",
                "p[np.arange(N), targets] -= 1.",
                ({"backward": "column_subtract"},)),
        Mistake("ce_no_minus_one", "gradient forgot the -1 at the target (softmax instead of softmax - onehot)",
                "d(-log p_y)/dz = p - onehot(y).",
                "d = p.copy(); d[np.arange(N), targets] -= 1.",
                ({"backward": "no_minus_one"},)),
        Mistake("ce_ignored_dloss", "upstream gradient dloss ignored",
                "The backward receives dL/dloss (not always 1: a loss weight, gradient accumulation...) "
                "and must multiply by it.",
                "dlogits = (p - onehot) / N * dloss.",
                ({"backward": "ignore_dloss"},)),
    ),
)

# --------------------------------------------------------------------------------------------------
# positional encoding
# --------------------------------------------------------------------------------------------------


def _draw_positional(rng, i):
    edges = [(1, 2), (1, 8), (6, 2), (50, 16), (7, 6)]
    if i < len(edges):
        s, d = edges[i]
    else:
        s, d = int(rng.integers(1, 51)), 2 * int(rng.integers(1, 17))
    return Case({"S": s, "D": d}, _desc(f"S={s}", f"D={d}"))


def _run_positional(rec, c):
    (pe,) = rec.unpack("positional_encoding", rec.call("positional_encoding", c["S"], c["D"]), ["pe"])
    rec.output("pe", pe)


def _ref_positional():
    from ..nn import sinusoidal_table
    return SimpleNamespace(positional_encoding=lambda S, D: sinusoidal_table(S, D, np.float64))


POSITIONAL = Exercise(
    name="positional_encoding", difficulty="easy", minutes=8,
    covers="the sinusoidal table pe[pos, 2i] = sin(pos / 10000^(2i/D)), pe[pos, 2i+1] = cos(...), vectorised",
    functions=("positional_encoding",),
    outputs=(("pe", "positional_encoding"),),
    library=(),
    draw=_draw_positional, run=_run_positional, reference=_ref_positional, variant=V.positional_encoding_impl,
    n_edge=5, reference_name="numpy_transformer.nn.sinusoidal_table (verified)",
    mistakes=(
        Mistake("pe_sin_cos_swapped", "sin and cos swapped (cos on the even columns)",
                "Even columns 2i hold the sine, odd columns 2i+1 the cosine of the same angle.",
                "pe[:, 0::2] = np.sin(angle); pe[:, 1::2] = np.cos(angle).",
                ({"swap": True},)),
        Mistake("pe_concatenated", "sines and cosines concatenated [sin | cos] instead of interleaved",
                "The table interleaves: column 2i is sin, column 2i+1 is cos of the same frequency.",
                "pe[:, 0::2] = sin, pe[:, 1::2] = cos (strided assignment), not np.concatenate.",
                ({"layout": "concat"},)),
        Mistake("pe_column_exponent", "odd columns use their own index: 10000^(j/D) instead of 10000^(2i/D)",
                "Columns 2i and 2i+1 share one frequency 1/10000^(2i/D); the odd column's exponent is "
                "not (2i+1)/D.",
                "freq = 10000.0 ** (-np.arange(0, D, 2) / D), used for both columns of a pair.",
                ({"exponent": "column"},)),
        Mistake("pe_missing_factor_two", "exponent i/D instead of 2i/D (i the pair index)",
                "The frequency of pair i is 1 / 10000^(2i/D); np.arange(D // 2) / D drops the 2.",
                "freq = 10000.0 ** (-np.arange(0, D, 2) / D).",
                ({"exponent": "no_two"},)),
        Mistake("pe_positions_from_one", "positions counted from 1 instead of 0",
                "The first position is pos = 0 (its row is [0, 1, 0, 1, ...]).",
                "pos = np.arange(S)[:, None].",
                ({"first_position": 1},)),
    ),
)

# --------------------------------------------------------------------------------------------------
# scaled dot-product attention
# --------------------------------------------------------------------------------------------------

_ATTN_EDGES = [
    dict(B=1, H=1, S=1, T=1, Dh=1, Dv=1, mask=None, causal=False),
    dict(B=1, H=2, S=1, T=3, Dh=4, Dv=2, mask=None, causal=True),
    dict(B=2, H=1, S=3, T=3, Dh=2, Dv=3, mask="full_row", causal=False),
    dict(B=1, H=3, S=4, T=4, Dh=3, Dv=3, mask=None, causal=True),
    dict(B=2, H=2, S=3, T=5, Dh=4, Dv=4, mask="batch", causal=False),
    dict(B=1, H=1, S=5, T=5, Dh=8, Dv=2, mask="st", causal=True),
    dict(B=2, H=2, S=4, T=2, Dh=2, Dv=3, mask="st", causal=False),
]


def _draw_attention(rng, i):
    if i < len(_ATTN_EDGES):
        cfg = dict(_ATTN_EDGES[i])
    else:
        cfg = dict(B=int(rng.integers(1, 3)), H=int(rng.integers(1, 4)), S=int(rng.integers(1, 6)),
                   T=int(rng.integers(1, 6)), Dh=int(rng.integers(1, 7)), Dv=int(rng.integers(1, 6)),
                   mask=[None, "st", "batch"][int(rng.choice(3, p=[0.4, 0.3, 0.3]))],
                   causal=bool(rng.random() < 0.4))
    b, h, s, t, dh, dv = (cfg[k] for k in ("B", "H", "S", "T", "Dh", "Dv"))
    q = rng.standard_normal((b, h, s, dh))
    k = rng.standard_normal((b, h, t, dh))
    v = rng.standard_normal((b, h, t, dv))
    mask = None
    if cfg["mask"] in ("st", "full_row"):
        mask = rng.random((s, t)) < 0.3
        if cfg["mask"] == "full_row":
            mask[min(1, s - 1)] = True
    elif cfg["mask"] == "batch":
        mask = rng.random((b, 1, s, t)) < 0.3
    dout = rng.standard_normal((b, h, s, dv))
    blocked = np.zeros((s, t), dtype=bool) if mask is None else mask
    if cfg["causal"]:
        blocked = blocked | F.causal_mask(s, t)
    tags = ["a fully-masked row (expect zeros there)"] if np.any(np.all(blocked, axis=-1)) else []
    desc = _desc(f"q {_shape(q)}", f"k {_shape(k)}", f"v {_shape(v)}",
                 f"mask {_shape(mask)}" if mask is not None else "no mask", "causal" if cfg["causal"] else "")
    return Case({"q": q, "k": k, "v": v, "mask": mask, "causal": cfg["causal"], "dout": dout}, desc, tags,
                {"sqrt(Dh)": math.sqrt(dh), "Dh": dh})


def _run_attention(rec, c):
    out, cache = rec.pair("attention_forward",
                          rec.call("attention_forward", c["q"], c["k"], c["v"], mask=c["mask"], causal=c["causal"]),
                          "(out, cache)")
    rec.output("out", out)
    dq, dk, dv = rec.unpack("attention_backward", rec.call("attention_backward", c["dout"], cache),
                            ["dq", "dk", "dv"])
    rec.output("dq", dq)
    rec.output("dk", dk)
    rec.output("dv", dv)


def _ref_attention():
    def attention_forward(q, k, v, mask=None, causal=False):
        return F.scaled_dot_product_attention_forward(q, k, v, attn_mask=mask, is_causal=causal)
    return SimpleNamespace(attention_forward=attention_forward,
                           attention_backward=F.scaled_dot_product_attention_backward)


ATTENTION = Exercise(
    name="scaled_dot_product_attention", difficulty="medium", minutes=20,
    covers="softmax(q k^T / sqrt(Dh)) v with a boolean mask and a causal option; backward dq, dk, dv",
    functions=("attention_forward", "attention_backward"),
    outputs=(("out", "attention_forward"), ("dq", "attention_backward"), ("dk", "attention_backward"),
             ("dv", "attention_backward")),
    library=("scaled_dot_product_attention_forward", "scaled_dot_product_attention_backward",
             "softmax_backward"),
    draw=_draw_attention, run=_run_attention, reference=_ref_attention, variant=V.attention_impl,
    n_edge=len(_ATTN_EDGES),
    exception_hints=(
        (r"broadcast", "mask is (S, T) or (B, 1, S, T) and must broadcast against the scores (B, H, S, T); "
                       "k^T means swapping the last two axes: np.swapaxes(k, -1, -2), not k.T"),
        (r"matmul|core dimension|not aligned",
         "check each matmul's shapes (S and T differ in general): scores = q k^T is (.., S, T); in the "
         "backward dv = P^T dout is (.., T, Dv) and dk = dA^T q is (.., T, Dh); k.T on a 4-D array reverses "
         "every axis, use np.swapaxes(k, -1, -2)"),
    ),
    mistakes=(
        Mistake("attn_no_scale", "no 1/sqrt(Dh) scaling",
                "Without the scale the scores grow like sqrt(Dh) and the softmax saturates.",
                "scores = q @ k^T / np.sqrt(Dh), with Dh = q.shape[-1] (and the same factor in the backward).",
                ({"scale": "none"},)),
        Mistake("attn_scale_1_over_dh", "scaled by 1/Dh instead of 1/sqrt(Dh)",
                "q.k sums Dh products of unit-variance terms: its std is sqrt(Dh), so the scale is 1/sqrt(Dh).",
                "scores = q @ k^T / np.sqrt(Dh).",
                ({"scale": "dh"},)),
        Mistake("attn_softmax_wrong_axis", "softmax over the query axis instead of the key axis",
                "Each query's weights over the keys sum to 1: softmax along the last axis (T).",
                "Normalise along axis=-1 of the (..., S, T) scores.",
                ({"axis": -2},)),
        Mistake("attn_mask_after_softmax", "mask applied after the softmax",
                "Zeroing probabilities after the softmax leaves rows that no longer sum to 1; masked scores "
                "must be -inf *before* the softmax.",
                "scores = np.where(mask, -np.inf, scores) before the softmax.",
                ({"mask_mode": "after"},)),
        Mistake("attn_mask_inverted", "mask convention inverted (True read as 'may attend')",
                "Here (as torch.nn.MultiheadAttention) True means 'may NOT attend'.",
                "scores = np.where(mask, -np.inf, scores).",
                ({"mask_mode": "inverted"},)),
        Mistake("attn_masked_rows_not_zero", "fully-masked rows are not zero (a large negative fill such as -1e9)",
                "With -1e9 a row whose keys are all masked becomes a uniform average of the values; the "
                "convention here is that such a row outputs zeros and gets zero gradient.",
                "Fill with -np.inf and make the softmax return 0 for an all -inf row (max -> 0, sum -> 1).",
                ({"mask_mode": "large_negative"},)),
        Mistake("attn_masked_rows_nan", "fully-masked rows give NaN (-inf - -inf in the softmax)",
                "When every key of a row is masked, the row max is -inf and exp(-inf - -inf) is NaN.",
                "m = np.where(np.isneginf(m), 0, m) before exp; divide by a sum of 1 where it is 0.",
                ({"mask_mode": "unguarded"},)),
        Mistake("attn_causal_wrong_direction", "causal mask blocks the past instead of the future",
                "Position i may attend keys j <= i: block j > i, i.e. np.triu(..., k=1).",
                "causal_block = np.triu(np.ones((S, T), dtype=bool), k=1).",
                ({"causal_mode": "tril"},)),
        Mistake("attn_causal_blocks_diagonal", "causal mask also blocks the diagonal (a position cannot see itself)",
                "np.triu(..., k=0) includes the diagonal; position i must see key i.",
                "causal_block = np.triu(np.ones((S, T), dtype=bool), k=1).",
                ({"causal_mode": "diag"},)),
        Mistake("attn_backward_no_rowsum", "softmax backward missing the row-sum term",
                "dscores = P * dP forgets the softmax Jacobian's -P P^T part.",
                "dscores = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)).",
                ({"backward": "no_rowsum"},)),
        Mistake("attn_backward_no_scale", "the 1/sqrt(Dh) scale forgotten in the backward",
                "scores = c q k^T, so dq = c dscores k and dk = c dscores^T q.",
                "Multiply dscores by the same scale before computing dq and dk.",
                ({"backward": "no_scale"},)),
        Mistake("attn_backward_missing_transpose", "a transpose missing in the backward matmuls",
                "out = P v gives dv = P^T dout; scores = q k^T gives dk = dscores^T q (both (..., T, .)).",
                "dv = np.swapaxes(P, -1, -2) @ dout; dk = np.swapaxes(dscores, -1, -2) @ q.",
                ({"backward": "dk_no_transpose"}, {"backward": "dv_no_transpose"})),
    ),
)

# --------------------------------------------------------------------------------------------------
# multi-head attention
# --------------------------------------------------------------------------------------------------

_MHA_EDGES = [
    dict(B=1, S=1, H=1, Dh=1, mask=False, causal=False),
    dict(B=1, S=3, H=1, Dh=4, mask=False, causal=False),
    dict(B=2, S=4, H=2, Dh=3, mask=False, causal=False),
    dict(B=1, S=5, H=4, Dh=2, mask=False, causal=True),
    dict(B=2, S=3, H=3, Dh=2, mask=True, causal=False),
    dict(B=1, S=1, H=2, Dh=2, mask=False, causal=True),
]


def _draw_mha(rng, i):
    if i < len(_MHA_EDGES):
        cfg = dict(_MHA_EDGES[i])
    else:
        cfg = dict(B=int(rng.integers(1, 3)), S=int(rng.integers(1, 6)), H=int(rng.integers(1, 4)),
                   Dh=int(rng.integers(1, 4)), mask=bool(rng.random() < 0.3), causal=bool(rng.random() < 0.4))
    b, s, h, dh = cfg["B"], cfg["S"], cfg["H"], cfg["Dh"]
    d = h * dh
    x = rng.standard_normal((b, s, d))
    Wq, Wk, Wv, Wo = (rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4))
    mask = (rng.random((s, s)) < 0.25) if cfg["mask"] else None
    dout = rng.standard_normal((b, s, d))
    desc = _desc(f"x {_shape(x)}", f"H={h} (Dh={dh})", f"mask {_shape(mask)}" if mask is not None else "no mask",
                 "causal" if cfg["causal"] else "")
    return Case({"x": x, "Wq": Wq, "Wk": Wk, "Wv": Wv, "Wo": Wo, "num_heads": h, "mask": mask,
                 "causal": cfg["causal"], "dout": dout}, desc, [],
                {"sqrt(Dh)": math.sqrt(dh), "Dh": dh, "sqrt(D)": math.sqrt(d), "D": d, "H": h})


def _run_mha(rec, c):
    out, cache = rec.pair("mha_forward",
                          rec.call("mha_forward", c["x"], c["Wq"], c["Wk"], c["Wv"], c["Wo"], c["num_heads"],
                                   mask=c["mask"], causal=c["causal"]), "(out, cache)")
    rec.output("out", out)
    names = ["dx", "dWq", "dWk", "dWv", "dWo"]
    grads = rec.unpack("mha_backward", rec.call("mha_backward", c["dout"], cache), names)
    for name, g in zip(names, grads):
        rec.output(name, g)


def _blocked(mask, s, causal):
    if not causal:
        return mask
    c = F.causal_mask(s)
    return c if mask is None else (np.asarray(mask, dtype=bool) | c)


def _ref_mha():
    def mha_forward(x, Wq, Wk, Wv, Wo, num_heads, mask=None, causal=False):
        out, _, cache = F.multi_head_attention_forward(
            x, x, x, num_heads, in_proj_weight=np.concatenate([Wq, Wk, Wv], axis=0), out_proj_weight=Wo,
            attn_mask=_blocked(mask, x.shape[1], causal))
        return out, cache

    def mha_backward(dout, cache):
        dq, dk, dv, g = F.multi_head_attention_backward(dout, cache)
        dWq, dWk, dWv = np.split(g["in_proj_weight"], 3, axis=0)
        return dq + dk + dv, dWq, dWk, dWv, g["out_proj.weight"]

    return SimpleNamespace(mha_forward=mha_forward, mha_backward=mha_backward)


MHA = Exercise(
    name="multi_head_attention", difficulty="hard", minutes=30,
    covers="self-attention with H heads: project, split heads, attend, merge, project; full backward",
    functions=("mha_forward", "mha_backward"),
    outputs=(("out", "mha_forward"), ("dx", "mha_backward"), ("dWq", "mha_backward"), ("dWk", "mha_backward"),
             ("dWv", "mha_backward"), ("dWo", "mha_backward")),
    library=("multi_head_attention_forward", "multi_head_attention_backward",
             "scaled_dot_product_attention_backward"),
    draw=_draw_mha, run=_run_mha, reference=_ref_mha, variant=V.mha_impl, n_edge=len(_MHA_EDGES),
    mistakes=(
        Mistake("mha_reshape_only_split", "heads split with a reshape only (no transpose)",
                "(B, S, D).reshape(B, H, S, Dh) cuts the flat memory into H blocks that mix positions; "
                "a head is the Dh-wide slice of every position: reshape to (B, S, H, Dh), then transpose.",
                "q.reshape(B, S, H, Dh).transpose(0, 2, 1, 3); merge back with .transpose(0, 2, 1, 3)"
                ".reshape(B, S, D).",
                ({"split": "reshape", "merge": "reshape"}, {"split": "reshape"})),
        Mistake("mha_merge_without_transpose", "heads merged without the transpose",
                "(B, H, S, Dh).reshape(B, S, D) interleaves positions of one head instead of concatenating "
                "the heads of one position.",
                "ctx.transpose(0, 2, 1, 3).reshape(B, S, D).",
                ({"merge": "reshape"},)),
        Mistake("mha_no_scale", "no 1/sqrt(Dh) scaling",
                "The scores need the 1/sqrt(Dh) factor (Dh = D/H, the head width).",
                "scores = qh @ kh^T / np.sqrt(Dh).",
                ({"scale": "none"},)),
        Mistake("mha_scale_1_over_dh", "scaled by 1/Dh instead of 1/sqrt(Dh)",
                "The dot product's std grows like sqrt(Dh), so the scale is 1/sqrt(Dh).",
                "scores = qh @ kh^T / np.sqrt(Dh).",
                ({"scale": "dh"},)),
        Mistake("mha_scale_sqrt_d", "scaled by 1/sqrt(D) (model width) instead of 1/sqrt(Dh) (head width)",
                "Each head's dot product has Dh = D/H terms: the scale uses the head width.",
                "scores = qh @ kh^T / np.sqrt(D // H).",
                ({"scale": "sqrt_d"},)),
        Mistake("mha_weights_untransposed", "projections computed as x @ W instead of x @ W.T",
                "Weights have torch's layout (Dout, Din): q = x @ Wq.T.",
                "q = x @ Wq.T, ..., out = ctx @ Wo.T; then dW = dy2.T @ x2.",
                ({"weights": "untransposed"},)),
        Mistake("mha_backward_qkv_not_summed", "dx only from one projection (x feeds q, k and v)",
                "x is used three times (q = x Wq^T, k = x Wk^T, v = x Wv^T): its gradient is the sum of the "
                "three paths.",
                "dx = dq @ Wq + dk @ Wk + dv @ Wv (with dq, dk, dv merged back to (B, S, D)).",
                ({"backward": "no_sum_qkv"},)),
        Mistake("mha_backward_no_rowsum", "softmax backward missing the row-sum term",
                "dscores = P * dP forgets the softmax Jacobian's -P P^T part.",
                "dscores = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)).",
                ({"backward": "no_rowsum"},)),
    ),
)

# --------------------------------------------------------------------------------------------------
# encoder layer
# --------------------------------------------------------------------------------------------------

PARAM_KEYS = ("Wq", "Wk", "Wv", "Wo", "W1", "b1", "W2", "b2", "gamma1", "beta1", "gamma2", "beta2")

_ENC_EDGES = [
    dict(B=1, S=1, H=1, Dh=3, F=3, mask=None, norm_first=False),
    dict(B=1, S=1, H=1, Dh=3, F=3, mask=None, norm_first=True),
    dict(B=2, S=3, H=2, Dh=2, F=4, mask="causal", norm_first=False),
    dict(B=2, S=4, H=1, Dh=3, F=5, mask="causal", norm_first=True),
    dict(B=1, S=4, H=2, Dh=2, F=6, mask="random", norm_first=False),
]


def _draw_encoder(rng, i):
    if i < len(_ENC_EDGES):
        cfg = dict(_ENC_EDGES[i])
    else:
        cfg = dict(B=int(rng.integers(1, 3)), S=int(rng.integers(1, 5)), H=int(rng.integers(1, 3)),
                   Dh=int(rng.integers(2, 4)), F=int(rng.integers(2, 7)),
                   mask=[None, "causal", "random"][int(rng.integers(3))], norm_first=bool(rng.random() < 0.5))
        if cfg["H"] * cfg["Dh"] < 3:
            cfg["Dh"] = 3          # D >= 3: with D <= 2 LayerNorm's output cannot depend on x (degenerate)
    b, s, h, dh, f = cfg["B"], cfg["S"], cfg["H"], cfg["Dh"], cfg["F"]
    d = h * dh
    x = rng.standard_normal((b, s, d))
    p = {}
    for name in ("Wq", "Wk", "Wv", "Wo"):
        p[name] = rng.standard_normal((d, d)) / math.sqrt(d)
    p["W1"] = rng.standard_normal((f, d)) / math.sqrt(d)
    p["b1"] = 0.1 * rng.standard_normal(f)
    p["W2"] = rng.standard_normal((d, f)) / math.sqrt(f)
    p["b2"] = 0.1 * rng.standard_normal(d)
    for j in (1, 2):
        p[f"gamma{j}"] = 1.0 + 0.1 * rng.standard_normal(d)
        p[f"beta{j}"] = 0.1 * rng.standard_normal(d)
    mask = None
    if cfg["mask"] == "causal":
        mask = F.causal_mask(s)
    elif cfg["mask"] == "random":
        mask = rng.random((s, s)) < 0.25
    dout = rng.standard_normal((b, s, d))
    desc = _desc(f"x {_shape(x)}", f"H={h} (Dh={dh})", f"F={f}",
                 {None: "no mask", "causal": "causal mask", "random": "random mask"}[cfg["mask"]],
                 "pre-LN (norm_first)" if cfg["norm_first"] else "post-LN")
    return Case({"x": x, "params": p, "num_heads": h, "mask": mask, "norm_first": cfg["norm_first"],
                 "dout": dout}, desc, [], {"sqrt(Dh)": math.sqrt(dh)})


def _run_encoder(rec, c):
    out, cache = rec.pair("encoder_layer_forward",
                          rec.call("encoder_layer_forward", c["x"], c["params"], c["num_heads"], mask=c["mask"],
                                   norm_first=c["norm_first"]), "(out, cache)")
    rec.output("out", out)
    dx, grads = rec.unpack("encoder_layer_backward", rec.call("encoder_layer_backward", c["dout"], cache),
                           ["dx", "grads"])
    rec.output("dx", dx)
    if not isinstance(grads, dict):
        rec.fail("encoder_layer_backward", "arity",
                 f"encoder_layer_backward must return (dx, grads) with grads a dict keyed like params; its "
                 f"second value is a {type(grads).__name__}")
    for key in PARAM_KEYS:
        rec.output(f"grads[{key}]", grads.get(key, MISSING))


class _Missing:
    def __repr__(self):
        return "<missing>"


MISSING = _Missing()


def _ref_encoder():
    def attn(x, p, h, mask):
        out, _, cache = F.multi_head_attention_forward(
            x, x, x, h, in_proj_weight=np.concatenate([p["Wq"], p["Wk"], p["Wv"]]), out_proj_weight=p["Wo"],
            attn_mask=mask)
        return out, cache

    def attn_back(d, cache, g):
        dq, dk, dv, gg = F.multi_head_attention_backward(d, cache)
        g["Wq"], g["Wk"], g["Wv"] = np.split(gg["in_proj_weight"], 3)
        g["Wo"] = gg["out_proj.weight"]
        return dq + dk + dv

    def ffn(x, p):
        a, c1 = F.linear_forward(x, p["W1"], p["b1"])
        r, cr = F.relu_forward(a)
        y, c2 = F.linear_forward(r, p["W2"], p["b2"])
        return y, (c1, cr, c2)

    def ffn_back(d, cache, g):
        c1, cr, c2 = cache
        dr, g["W2"], g["b2"] = F.linear_backward(d, c2)
        dx, g["W1"], g["b1"] = F.linear_backward(F.relu_backward(dr, cr), c1)
        return dx

    def encoder_layer_forward(x, params, num_heads, mask=None, norm_first=False):
        p = params
        if norm_first:
            n1, c_n1 = F.layer_norm_forward(x, p["gamma1"], p["beta1"])
            a, c_a = attn(n1, p, num_heads, mask)
            h = x + a
            n2, c_n2 = F.layer_norm_forward(h, p["gamma2"], p["beta2"])
            f, c_f = ffn(n2, p)
            y = h + f
        else:
            a, c_a = attn(x, p, num_heads, mask)
            h, c_n1 = F.layer_norm_forward(x + a, p["gamma1"], p["beta1"])
            f, c_f = ffn(h, p)
            y, c_n2 = F.layer_norm_forward(h + f, p["gamma2"], p["beta2"])
        return y, (norm_first, c_n1, c_a, c_n2, c_f)

    def encoder_layer_backward(dout, cache):
        norm_first, c_n1, c_a, c_n2, c_f = cache
        g = {}
        if norm_first:
            dn2, g["gamma2"], g["beta2"] = F.layer_norm_backward(ffn_back(dout, c_f, g), c_n2)
            dh = dout + dn2
            dn1, g["gamma1"], g["beta1"] = F.layer_norm_backward(attn_back(dh, c_a, g), c_n1)
            dx = dh + dn1
        else:
            dz2, g["gamma2"], g["beta2"] = F.layer_norm_backward(dout, c_n2)
            dh = dz2 + ffn_back(dz2, c_f, g)
            dz1, g["gamma1"], g["beta1"] = F.layer_norm_backward(dh, c_n1)
            dx = dz1 + attn_back(dz1, c_a, g)
        return dx, g

    return SimpleNamespace(encoder_layer_forward=encoder_layer_forward,
                           encoder_layer_backward=encoder_layer_backward)


ENCODER = Exercise(
    name="encoder_layer", difficulty="hard", minutes=45,
    covers="a whole encoder layer (MHA + ReLU FFN, residuals, post-LN or pre-LN) forward and backward",
    functions=("encoder_layer_forward", "encoder_layer_backward"),
    outputs=(("out", "encoder_layer_forward"), ("dx", "encoder_layer_backward"))
    + tuple((f"grads[{k}]", "encoder_layer_backward") for k in PARAM_KEYS),
    library=("layer_norm_backward", "multi_head_attention_backward", "linear_backward", "relu_backward"),
    draw=_draw_encoder, run=_run_encoder, reference=_ref_encoder, variant=V.encoder_layer_impl,
    n_edge=len(_ENC_EDGES),
    mistakes=(
        Mistake("enc_norm_placement", "post-LN and pre-LN swapped",
                "norm_first=False (post-LN): x = LN1(x + SA(x)); x = LN2(x + FF(x)). "
                "norm_first=True (pre-LN): x = x + SA(LN1(x)); x = x + FF(LN2(x)).",
                "Branch on norm_first exactly as above, forward and backward.",
                ({"swap_norm": True},)),
        Mistake("enc_residual_grad_dropped", "backward dropped a residual's identity path",
                "y = x + f(x) gives dx = dy + (df/dx)^T dy: the gradient reaches x directly *and* through f.",
                "Add the incoming gradient to the branch's gradient at every residual.",
                ({"residual_grad": False},)),
        Mistake("enc_qkv_grads_not_summed", "attention input gradient from one projection only",
                "The attention input feeds q, k and v; its gradient is the sum of the three paths.",
                "d_in = dq @ Wq + dk @ Wk + dv @ Wv.",
                ({"sum_qkv": False},)),
        Mistake("enc_relu_backward_unmasked", "ReLU backward passes the gradient where the input was negative",
                "relu'(a) = 1 where a > 0 and 0 elsewhere.",
                "da = dr * (a > 0).",
                ({"relu_backward": "none"},)),
        Mistake("enc_no_scale", "no 1/sqrt(Dh) scaling in the attention",
                "The attention scores are q k^T / sqrt(Dh) with Dh = D/H.",
                "scores = qh @ kh^T / np.sqrt(Dh).",
                ({"scale": "none"},)),
    ),
)

# --------------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------------

EXERCISES = {e.name: e for e in (SOFTMAX, LAYER_NORM, GELU, LINEAR, EMBEDDING, CROSS_ENTROPY, POSITIONAL,
                                 ATTENTION, MHA, ENCODER)}

ALIASES = {"attention": "scaled_dot_product_attention", "sdpa": "scaled_dot_product_attention",
           "mha": "multi_head_attention", "layernorm": "layer_norm", "ln": "layer_norm",
           "encoder": "encoder_layer", "pe": "positional_encoding", "ce": "cross_entropy",
           "cross-entropy": "cross_entropy", "layer-norm": "layer_norm"}


def get(name) -> Optional[Exercise]:
    """The exercise called ``name`` (or one of its aliases), else None."""
    name = (name or "").strip().lower().replace("-", "_")
    name = ALIASES.get(name, name)
    return EXERCISES.get(name)


def draw_case(exercise, seed, i):
    """Case ``i`` of ``exercise`` for ``seed``: deterministic, independent of the other cases."""
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(i), len(exercise.name)])
    return exercise.draw(rng, i)
