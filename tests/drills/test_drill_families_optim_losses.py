"""The mistake families of the optimiser, the losses, the lookup tables, the linear layer, the norms and
dropout (``drills/families/{adamw,cross_entropy,embedding,linear,norms,dropout}.py``), issue 24.

Each mistake below is written as a candidate would write it, in another spelling than the family's own
rewrite (so the family is recognised from the numbers its patch gives, not from the text): the check
fails and its diagnosis names the family first. On the code before these families each was "no known
mistake explains this failure".
"""

from __future__ import annotations

import io
import re

import pytest

import numpy_transformer.drills as drills
from tests.drills.drill_helpers import apply_patches, solution_source


def check_patched(tmp_path, name, patches, cases=12):
    """``drill check`` of the solution of ``name`` with ``patches`` applied; (status, flat output)."""
    path = tmp_path / f"{name}.py"
    path.write_text(apply_patches(solution_source(name), patches))
    buf = io.StringIO()
    rc = drills.check_file(str(path), stream=buf, cases=cases, torch="off", quiet=True)
    return rc, " ".join(buf.getvalue().split())


def named(out):
    m = re.search(r"known mistake \[(\w+)\]: ", out)
    return m.group(1) if m else None


MISTAKES = [
    # AdamW: the second moment of |g|, one correction missing, the betas exchanged, the state corrected
    ("adamw_step", [("(1.0 - beta2) * grad * grad", "(1.0 - beta2) * abs(grad)")], "adamw_second_moment_not_squared"),
    ("adamw_step", [("m_hat = m / (1.0 - beta1 ** t)", "m_hat = m * 1.0")], "adamw_first_moment_not_corrected"),
    ("adamw_step", [("v_hat = v / (1.0 - beta2 ** t)", "v_hat = v.copy()")], "adamw_second_moment_not_corrected"),
    ("adamw_step", [("beta1, beta2 = betas", "beta1, beta2 = betas[1], betas[0]")], "adamw_betas_swapped"),
    ("adamw_step", [("return param, m, v", "return param, m / (1.0 - beta1 ** t), v / (1.0 - beta2 ** t)")],
     "adamw_state_bias_corrected"),
    # cross-entropy with its options: the smoothing's 1/V and its weights, dloss, the one-hot's sign
    ("cross_entropy_options", [("smooth = -logp.mean(axis=-1)", "smooth = -np.sum(logp, axis=-1)")],
     "ce_smoothing_summed"),
    ("cross_entropy_options", [("d_smooth = p - 1.0 / V", "d_smooth = p - np.ones_like(p)")],
     "ce_smoothing_grad_without_1_over_v"),
    ("cross_entropy_options", [("((1 - e) * nll + e * smooth)", "(e * nll + (1 - e) * smooth)"),
                               ("((1 - e) * d_nll + e * d_smooth)", "(e * d_nll + (1 - e) * d_smooth)")],
     "ce_smoothing_weights_swapped"),
    ("cross_entropy_options", [("return d * (dloss / n_keep)", "return d * (1.0 / n_keep)")], "ce_ignored_dloss"),
    ("cross_entropy", [("d[np.arange(N), targets] -= 1", "d[np.arange(N), targets] = d[np.arange(N), targets] + 1")],
     "ce_onehot_added"),
    # embedding: a mean where the scatter-add sums
    ("embedding", [("    return dW\n", "    return dW / dout.shape[0] / dout.shape[1]\n")],
     "embedding_grad_mean_over_positions"),
    ("embedding", [("    return dW\n", "    n = np.zeros(V)\n    np.add.at(n, ids.reshape(-1), 1)\n"
                                       "    return np.where(n[:, None] > 0, dW / np.maximum(n, 1)[:, None], 0.0)\n")],
     "embedding_grad_averaged_per_id"),
    # linear: dW a mean over the rows, the batch not flattened
    ("linear", [("dW = dy2.T @ x2 ", "dW = (dy2.T @ x2) / len(x2) ")], "linear_dW_mean"),
    ("linear", [("x2 = x.reshape(-1, x.shape[-1])", "x2 = x[0] if x.ndim == 3 else x"),
                ("dy2 = dy.reshape(-1, dy.shape[-1])", "dy2 = dy[0] if dy.ndim == 3 else dy")],
     "linear_first_batch_only"),
    # norms: a sum of squares, an uncentred dgamma, LayerNorm's mean term in RMSNorm, D - 1 in the encoder
    ("rms_norm", [("ms = np.mean(x * x, axis=-1, keepdims=True)", "ms = (x ** 2).sum(-1, keepdims=True)")],
     "norm_mean_square_summed"),
    ("rms_norm", [("dx = rstd * (dxhat - xhat", "dx = rstd * (dxhat - np.mean(dxhat, -1, keepdims=True) - xhat")],
     "rms_backward_layernorm_mean_term"),
    ("layer_norm", [("return y, (xhat, rstd, gamma)", "return y, (xhat, rstd, gamma, x)"),
                    ("xhat, rstd, gamma = cache", "xhat, rstd, gamma, x_in = cache"),
                    ("dgamma = np.sum(dy * xhat, axis=lead)", "dgamma = (dy * x_in).reshape(-1, dy.shape[-1]).sum(0)")],
     "norm_dgamma_unnormalised"),
    ("encoder_layer", [("np.mean(xc * xc, axis=-1, keepdims=True)", "xc.var(axis=-1, ddof=1, keepdims=True)")],
     "ln_unbiased_variance"),
    # dropout: the keep mask inverted, the backward without the mask
    ("dropout", [("keep = rng.random(x.shape) >= p", "keep = ~(rng.random(x.shape) >= p)")],
     "dropout_keep_mask_inverted"),
    ("dropout", [("return dy * keep * scale", "return scale * dy")], "dropout_backward_no_mask"),
]


@pytest.mark.parametrize("name,patches,family", MISTAKES, ids=[f"{n}-{f}" for n, _, f in MISTAKES])
def test_the_family_names_a_candidates_own_spelling(name, patches, family, tmp_path):
    rc, out = check_patched(tmp_path, name, patches)
    assert rc == 1, out
    assert named(out) == family, out
    assert drills.EXERCISES[name].mistake(family).title in out


def test_the_ops_are_declared_by_their_exercises():
    for name, op in [("adamw_step", "adamw"), ("cross_entropy", "cross_entropy"),
                     ("cross_entropy_options", "cross_entropy"), ("embedding", "embedding"), ("linear", "linear")]:
        assert op in drills.EXERCISES[name].ops, name
