"""LayerNorm's and RMSNorm's classic mistakes, in every exercise that normalises (layer_norm,
rms_norm, the encoder and decoder layers)."""

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
)
