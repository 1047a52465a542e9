"""The residual connection and where its LayerNorm sits (the encoder and decoder layers): post-LN is
z = LN(x + f(x)), pre-LN is z = x + f(LN(x)); either way the residual sends dz to x directly *and*
through f."""

from . import Family

#: (the gradient assigned, the residual's identity path added to it), as the layer solutions write them
_PATHS = (("dh", "dout"), ("dx", "dh"), ("dh", "dz2"), ("dx", "dz1"), ("dh2", "dz3"), ("dh1", "dz2"),
          ("dtgt", "dz1"))

#: a sub-layer's function: the attention's (``_attn_forward``, ``_mha_forward``) or the feed-forward's
_ATTN, _FFN = r"_\w*(?:attn|mha)\w*_forward", r"_ffn_forward"


def _pre_ln_stream(fn):
    """pre-LN ``n, c = LN(x); f, c_f = fn(n, ...); h = x + f`` with the residual taken from ``n``."""
    return (rf"(?m)^([ \t]+)(\w+), (c_\w+) = _ln_forward\((\w+), ([^\n]*)\)\n([ \t]+)(\w+), (c_\w+) = ({fn})\(\2, "
            rf"([^\n]*)\)\n([ \t]+)(\w+) = \4 \+ \7$",
            r"\1\2, \3 = _ln_forward(\4, \5)\n\6\7, \8 = \9(\2, \10)\n\11\12 = \2 + \7")


def _pre_ln_for_post_ln(fn, self_attention=False):
    """post-LN ``f, c_f = fn(x, ...); h, c = LN(x + f)`` written pre-LN: ``n = LN(x); f = fn(n, ...);
    h = x + f`` (the forward only; ``self_attention``: fn's first two arguments are both x)."""
    two = r"\5, " if self_attention else r"(?!\5\b)"
    new_two = "_n, " if self_attention else ""
    return (rf"(?m)^([ \t]+)(\w+), (c_\w+) = ({fn})\((\w+), {two}([^\n]*)\)\n[ \t]+(\w+), (c_n\d) = "
            rf"_ln_forward\(\5 \+ \2, ([^\n]*)\)$",
            rf"\1_n, \8 = _ln_forward(\5, \9)\n\1\2, \3 = \4(_n, {new_two}\6)\n\1\7 = \5 + \2")


def _norm_on_branch():
    """post-LN ``h, c = LN(x + f)`` written ``h = x + LN(f)``: the branch normalised, not the sum."""
    return (r"(?m)^([ \t]+)(\w+), (c_n\d) = _ln_forward\((\w+) \+ (\w+), ([^\n]*)\)$",
            r"\1_b, \3 = _ln_forward(\5, \6)\n\1\2 = \4 + _b")


FAMILIES = (
    Family("residual_grad_dropped", "backward dropped a residual's identity path",
           "A residual z = x + f(x) sends dz to x twice: directly (the identity) and through f. Keeping "
           "only the branch's gradient drops the identity path.",
           "dx = dz + (the branch's backward of dz), for every residual.",
           tuple(((rf"(?m)^(\s+){lhs} = {res} \+ ", rf"\1{lhs} = "),) for lhs, res in _PATHS)),
    Family("residual_adds_normed_input", "pre-LN: the residual adds the normalised input LN(x) instead of x",
           "pre-LN is h = x + f(LN(x)): only the branch sees the normalised input; the residual stream "
           "carries x itself (so the stream is never normalised until the final norm).",
           "n = LN(x); h = x + f(n).",
           ((_pre_ln_stream(_ATTN),), (_pre_ln_stream(_FFN),), (_pre_ln_stream(_ATTN), _pre_ln_stream(_FFN)))),
    Family("residual_pre_ln_for_post_ln", "pre-LN written where post-LN was asked (a sub-layer normalises "
           "its input instead of its residual sum)",
           "post-LN (torch's default, norm_first=False) normalises after each residual, h = LN(x + f(x)); "
           "pre-LN normalises the branch's input, h = x + f(LN(x)): a different function of the same weights.",
           "h = LN(x + f(x)) for every sub-layer.",
           ((_pre_ln_for_post_ln(_ATTN, self_attention=True),), (_pre_ln_for_post_ln(_ATTN),),
            (_pre_ln_for_post_ln(_FFN),),
            (_pre_ln_for_post_ln(_ATTN, self_attention=True), _pre_ln_for_post_ln(_ATTN),
             _pre_ln_for_post_ln(_FFN)))),
    Family("residual_norm_on_branch", "post-LN written x + LN(f(x)): the branch normalised instead of the "
           "residual sum",
           "post-LN normalises the sum, h = LN(x + f(x)); x + LN(f(x)) leaves the residual stream "
           "unnormalised and its scale grows layer after layer.",
           "h = LN(x + f(x)).",
           ((_norm_on_branch(),),)),
    Family("residual_from_earlier_stream", "a residual adds an earlier stream (the layer's input, or the "
           "sub-layer before's) instead of its own sub-layer's input",
           "Each residual adds the sub-layer's own input to its output: post-LN h2 = LN(h1 + CA(h1)), "
           "y = LN(h2 + FF(h2)); pre-LN y = h + FF(LN(h)). Skipping back to an older stream (h1 for h2, "
           "x for h) drops the sub-layer before from the residual path.",
           "each sub-layer z = f(s): out = s + z with s what f was given (before or after the norm as asked).",
           (((r"_ln_forward\(h2 \+ (\w+),", r"_ln_forward(h1 + \1,"),),
            ((r"_ln_forward\(h1 \+ (\w+),", r"_ln_forward(tgt + \1,"),),
            ((r"_ln_forward\(h \+ (\w+),", r"_ln_forward(x + \1,"),),
            ((r"(?m)^([ \t]+)y = h \+ (\w+)$", r"\1y = x + \2"),))),
    Family("layer_norm_eps_not_torch", "LayerNorm eps other than torch's 1e-5 (1e-6, 1e-8, 1e-12 ...)",
           "torch.nn.LayerNorm (and the Transformer layers built on it) uses eps = 1e-5 inside the square "
           "root, 1/sqrt(var + eps); another eps changes every output by a small relative amount, "
           "largest where a row's variance is small.",
           "EPS = 1e-5.",
           tuple(((r"(?m)^EPS = 1e-5$", f"EPS = {e}"),) for e in ("1e-6", "1e-8", "1e-12", "1e-3"))),
)
