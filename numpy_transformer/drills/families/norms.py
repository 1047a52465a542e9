"""LayerNorm's and RMSNorm's classic mistakes, in every exercise that normalises (layer_norm,
rms_norm, the encoder and decoder layers), from their maths:

    LayerNorm: mu = mean(x), var = mean((x - mu)^2) (biased), xhat = (x - mu) / sqrt(var + eps),
               y = gamma * xhat + beta
    RMSNorm:   ms = mean(x^2), xhat = x / sqrt(ms + eps), y = gamma * xhat
    backward:  dgamma = sum(dy * xhat), dbeta = sum(dy) over the leading positions; dxhat = dy * gamma;
               dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))   (RMSNorm: no mean(dxhat))

Each statistic can be taken wrong (a sum for a mean, D - 1, x uncentred, eps outside the root), each term
of dx dropped or added, each factor (gamma, rstd) forgotten (gamma in one term only: dy where dxhat
belongs), the affine step applied in the wrong order, and the parameters' gradients built from the raw
input or averaged instead of summed.
"""

from . import Family

FAMILIES = (
    Family("ln_backward_no_mean_term", "LayerNorm backward missing the -mean(dxhat) term",
           "x_j reaches the loss through the mean too (d mu/d x_j = 1/D): dx = rstd * (dxhat - mean(dxhat) "
           "- xhat * mean(dxhat * xhat)).",
           "dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * np.mean(dxhat * xhat, -1, keepdims=True)).",
           (((r"dxhat - dxhat\.mean\((?:axis=)?-1, keepdims=True\)(\s*)- xhat", r"dxhat\1- xhat"),),)),
    Family("ln_backward_no_variance_term", "LayerNorm backward missing the -xhat*mean(dxhat*xhat) term",
           "x_j reaches the loss through rstd too: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * "
           "xhat)).",
           "add - xhat * np.mean(dxhat * xhat, -1, keepdims=True) inside the bracket.",
           (((r"(dxhat - dxhat\.mean\((?:axis=)?-1, keepdims=True\))\s*- xhat \* np\.mean\(dxhat \* xhat, "
              r"(?:axis=)?-1, keepdims=True\)\)", r"\1)"),),)),
    Family("rms_backward_no_projection", "RMSNorm backward missing the -xhat*mean(dxhat*xhat) term",
           "x_j reaches the loss through rstd too: dx = rstd * (dxhat - xhat * mean(dxhat * xhat)).",
           "dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)).",
           (((r"rstd \* \(dxhat - xhat \* np\.mean\(dxhat \* xhat, (?:axis=)?-1, keepdims=True\)\)",
              "rstd * dxhat"),),)),
    Family("norm_eps_outside_sqrt", "eps added outside the square root",
           "The statistic is 1/sqrt(var + eps) (torch's): 1/(sqrt(var) + eps) differs, most where the "
           "variance is tiny.",
           "rstd = 1.0 / np.sqrt(var + eps).",
           (((r"np\.sqrt\((np\.mean\((\w+) \* \2, (?:axis=)?-1, keepdims=True\)) \+ (EPS|eps)\)",
               r"(np.sqrt(\1) + \3)"),),)),
    Family("norm_backward_no_gamma", "the norm's backward forgot gamma in dx",
           "y = xhat * gamma, so the gradient reaching xhat is dy * gamma, not dy.",
           "dxhat = dy * gamma.",
           (((r"dxhat = dy \* gamma", "dxhat = dy"),),)),
    Family("norm_mean_square_summed", "sum of squares instead of their mean (the 1/D missing)",
           "The statistic is a MEAN over the D features (RMSNorm's mean(x^2), LayerNorm's mean((x - mu)^2)): "
           "a sum makes the normalised values sqrt(D) times too small.",
           "np.mean(x * x, axis=-1, keepdims=True).",
           (((r"np\.mean\((\w+) \* \1, (axis=)?-1, keepdims=True\)", r"np.sum(\1 * \1, \g<2>-1, keepdims=True)"),),)),
    Family("ln_unbiased_variance", "unbiased variance (divided by D-1) instead of biased (by D)",
           "LayerNorm (torch, the paper) uses the population variance mean((x - mu)^2); torch.var's default "
           "divides by D - 1.",
           "var = np.mean((x - mu) ** 2, axis=-1, keepdims=True).",
           (((r"np\.mean\(xc \* xc, (axis=)?-1, keepdims=True\)",
              r"(np.sum(xc * xc, \g<1>-1, keepdims=True) / (xc.shape[-1] - 1))"),),)),
    Family("ln_variance_not_centred", "variance of x instead of x - mean (mean(x^2) in place of mean((x - mu)^2))",
           "The variance is taken around the mean: mean((x - mu)^2) = mean(x^2) - mu^2.",
           "var = np.mean(xc * xc, axis=-1, keepdims=True) with xc = x - mu.",
           (((r"np\.mean\(xc \* xc,", "np.mean(x * x,"),),)),
    Family("rms_backward_layernorm_mean_term", "a LayerNorm-style -mean(dxhat) term added to the RMSNorm backward",
           "LayerNorm's -mean(dxhat) comes from subtracting the mean in the forward (d mu/d x_j = 1/D); "
           "RMSNorm subtracts none, so its dx = rstd * (dxhat - xhat * mean(dxhat * xhat)).",
           "dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)).",
           (((r"rstd \* \(dxhat - xhat \* np\.mean",
              "rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * np.mean"),),)),
    Family("norm_backward_no_rstd", "dx missing the rstd = 1/sqrt(var + eps) factor",
           "xhat = (x - mu) * rstd: every path from x to xhat carries the factor rstd.",
           "dx = rstd * (...).",
           (((r"dx = rstd \* \(", "dx = ("),),)),
    Family("norm_dgamma_unnormalised", "dgamma uses the raw input instead of xhat (dy * x, not dy * xhat)",
           "y = gamma * xhat (+ beta): gamma multiplies the NORMALISED values, so dgamma = sum(dy * xhat) over "
           "the leading positions.",
           "dgamma = np.sum(dy * xhat, axis=lead).",
           (((r"np\.sum\(dy \* xhat, axis=lead\)", "np.sum(dy * xhat / rstd, axis=lead)"),),
            ((r"(\(xhat, rstd, gamma)\)", r"\1, x)"), (r"xhat, rstd, gamma = cache", "xhat, rstd, gamma, x = cache"),
             (r"np\.sum\(dy \* xhat, axis=lead\)", "np.sum(dy * x, axis=lead)")))),
    Family("norm_dgamma_dbeta_swapped", "dgamma and dbeta swapped",
           "beta is added (dbeta = sum(dy)); gamma multiplies xhat (dgamma = sum(dy * xhat)).",
           "return dx, dgamma, dbeta in that order.",
           (((r"return dx, dgamma, dbeta", "return dx, dbeta, dgamma"),),
            ((r"return dx, np\.sum\(dy \* xhat, axis=lead\), np\.sum\(dy, axis=lead\)",
              "return dx, np.sum(dy, axis=lead), np.sum(dy * xhat, axis=lead)"),))),
    Family("norm_param_grads_averaged", "dgamma (and dbeta) averaged over the positions instead of summed",
           "gamma and beta are shared by every position, and each position's gradient adds into them: a sum "
           "over the leading axes.",
           "dgamma = np.sum(dy * xhat, axis=lead); dbeta = np.sum(dy, axis=lead).",
           (((r"np\.sum\(dy \* xhat, axis=lead\)", "np.mean(dy * xhat, axis=lead)"),
             (r"np\.sum\(dy, axis=lead\)", "np.mean(dy, axis=lead)")),
            ((r"np\.sum\(dy \* xhat, axis=lead\)", "np.mean(dy * xhat, axis=lead)"),))),
    Family("ln_beta_forgotten", "beta left out of the forward (y = gamma * xhat)",
           "LayerNorm's affine part is y = gamma * xhat + beta.",
           "y = xhat * gamma + beta.",
           (((r"xhat \* gamma \+ beta", "xhat * gamma"),),)),
    Family("norm_backward_term_without_gamma", "gamma forgotten in one term of dx: dy where dxhat = dy * gamma "
           "belongs (in mean(dxhat * xhat) or mean(dxhat))",
           "Every path from the output to x passes through y = gamma * xhat (+ beta), so each term of "
           "dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) uses dxhat = dy * gamma; "
           "RMSNorm's likewise, without mean(dxhat). A term written with dy skips gamma.",
           "use dxhat = dy * gamma in every term.",
           (((r"np\.mean\(dxhat \* xhat,", "np.mean(dy * xhat,"),),
            ((r"\bdxhat\.mean\(", "dy.mean("),),
            ((r"np\.mean\(dxhat \* xhat,", "np.mean(dy * xhat,"), (r"\bdxhat\.mean\(", "dy.mean(")))),
    Family("ln_affine_wrong_order", "the affine step in the wrong order: (xhat + beta) * gamma instead of "
           "gamma * xhat + beta",
           "LayerNorm scales the normalised values first and shifts after: y = gamma * xhat + beta. Adding "
           "beta first scales the shift too (beta * gamma).",
           "y = xhat * gamma + beta.",
           (((r"xhat \* gamma \+ beta", "(xhat + beta) * gamma"),),)),
)
