"""The linear projections around attention (q = x Wq^T, k = x Wk^T, v = x Wv^T, out = ctx Wo^T), in
every multi-head exercise: the backward of y = x W^T is dx = dy W and dW = dy^T x, and an input that
feeds several projections (self-attention's x feeds q, k and v; cross-attention's memory feeds k and
v) receives the sum of their paths."""

from . import Family


def _drop(p):
    """Rules dropping the ``p`` path (p in q, k, v) from an input gradient's sum, as solutions spell it:
    ``dq @ Wq + dk @ Wk + dv @ Wv``, ``dx_q + dx_k + dx_v``, ``dz1 + dq_sa + dk_sa + dv_sa``, ``dk_ca + dv_ca``."""
    return (((rf" \+ d{p} @ W{p}\b", ""),), ((rf"(= )d{p} @ W{p} \+ ", r"\1"),),
            ((rf" \+ dx_{p}\b", ""),), ((rf"(return )dx_{p} \+ ", r"\1"),),
            ((rf" \+ d{p}_sa\b", ""),), ((rf" \+ d{p}_ca\b", ""),), ((rf"(= )d{p}_ca \+ ", r"\1"),))


#: the forward's projection by W{p}, as solutions spell it: ``x @ Wq.T``, ``x @ p["Wq"].T``
_PROJ = (r"@ W{p}\.T\b", r'@ p\["W{p}"\]\.T')
_SPELL = ("@ W{p}.T", '@ p["W{p}"].T')
_NAMES = {"q": "queries", "k": "keys", "v": "values"}


def _wrong_weight(p, w):
    """The ``p`` projection (q, k or v) made with ``W{w}``."""
    return Family(f"proj_{_NAMES[p]}_with_W{w}", f"the {_NAMES[p]} projected with W{w} instead of W{p}",
                  f"Each projection has its own weight: {p} = x W{p}^T. Projecting the {_NAMES[p]} with W{w} "
                  f"makes them a copy of the {_NAMES[w]}' map (the shapes agree, so nothing complains).",
                  f"{p} = x @ W{p}.T (and dW{p} from the {p} path).",
                  tuple(((rx.format(p=p), sp.format(p=w)),) for rx, sp in zip(_PROJ, _SPELL)))


def _path(p, name):
    return Family(f"proj_input_grad_no_{name}_path", f"the input gradient misses the {name} path (d{p} @ W{p})",
                  f"The input feeds the {name} projection {p} = x W{p}^T among others; its gradient is the sum "
                  f"of every path it took, the {name} path d{p} W{p} included.",
                  "dx = dq @ Wq + dk @ Wk + dv @ Wv (self-attention); dmemory = dk @ Wk + dv @ Wv (cross).",
                  _drop(p))


FAMILIES = (
    _path("q", "query"), _path("k", "key"), _path("v", "value"),
    Family("proj_out_backward_transposed_weight", "the output projection's backward uses Wo^T (dctx = dout @ "
           "Wo.T) instead of Wo",
           "out = ctx Wo^T, so dctx = dout Wo (torch's layout (Dout, Din)): the transpose of the forward's "
           "Wo^T, not Wo^T again. (With square weights the shapes cannot tell.)",
           "dctx = dout @ Wo.",
           (((r"\(dout @ Wo, H\)", "(dout @ Wo.T, H)"),),
            ((r"_lin_grads\((\w+), ctx, p\[\"Wo\"\]\)", r'_lin_grads(\1, ctx, p["Wo"].T)'),),
            ((r"_lin_grads\((\w+), ctx, Wo\)", r"_lin_grads(\1, ctx, Wo.T)"),))),
    Family("proj_in_backward_transposed_weight", "the input projections' backward uses W^T (dq @ Wq.T) "
           "instead of W",
           "q = x Wq^T, so dx = dq Wq (and likewise for k and v): multiplying by Wq^T again is the "
           "forward's map, not its transpose.",
           "dx = dq @ Wq + dk @ Wk + dv @ Wv.",
           (((r"\b(d[qkv]) @ (W[qkv])\b(?!\.)", r"\1 @ \2.T"),),
            ((r"(_lin_grads\(merge\([^\n]*\), x, p\[\"W[qkv]\"\])\)", r"\1.T)"),),
            ((r"(_lin_grads\(_merge\([^\n]*\), x\w+, W[qkv])\)", r"\1.T)"),))),
    # the queries or keys made with another projection's weight. (The values made with Wq or Wk, and the
    # swaps that move a weight into the values, are left out for now: on the drill's one-feature cases
    # any change of the values is proportional to any error, so readings.py's "exactly c times the change
    # that ... makes" holds there spuriously and keeps the reading budget open; see issue 24.)
    *(_wrong_weight(p, w) for p in "qk" for w in "qkv" if w != p),
)
