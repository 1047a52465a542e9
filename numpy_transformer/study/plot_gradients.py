"""``plot gradients``: gradient norms by layer over training, from the ``trace`` lines of a ``train`` log
(``train --trace-every N``), to see vanishing or exploding gradients (post-LN vs pre-LN, deep stacks).

The numbers are those :class:`numpy_transformer.study.trace.Trace` computes on each traced step:
``param_grad_norms`` (all of one layer's parameter gradients as one vector, before clipping) and
``grad_norms`` (the gradient of the residual stream entering the layer). :func:`gradient_norms` reads
them with NumPy only; :func:`plot_gradients` draws them (matplotlib, as :mod:`numpy_transformer.study.plotting`).
"""

from __future__ import annotations

import numpy as np

from .plotting import figure, save_figure

__all__ = ["gradient_norms", "plot_gradients"]

NO_NORMS = ("the log holds no gradient norms by layer (trace lines with grad_norms): train with "
            "--trace-every N to write them")


def gradient_norms(entries, key="param_grad_norms"):
    """``(steps (N,), layer names (L,), norms (N, L))`` from the log's trace lines; ``key`` is
    ``"param_grad_norms"`` or ``"grad_norms"``. Raises ValueError when no trace line holds them. A layer
    missing from a line (or a non-finite norm, logged as null) is NaN."""
    rows = [e for e in entries if e.get("kind") == "trace" and e.get(key)]
    if not rows:
        raise ValueError(NO_NORMS)
    names = list(rows[0][key])
    for e in rows[1:]:
        names += [n for n in e[key] if n not in names]
    steps = np.array([e["step"] for e in rows], dtype=np.float64)                       # (N,)
    norms = np.array([[np.nan if e[key].get(n) is None else e[key][n] for n in names] for e in rows],
                     dtype=np.float64)                                                    # (N, L)
    return steps, names, norms


def _short(name):
    return name.replace("transformer.", "").replace("encoder.layers.", "enc ").replace(
        "decoder.layers.", "dec ").replace("layers.", "").replace("h.", "")


def _by_layer(ax, fig, steps, names, norms, what):
    """One line per traced step, norm against layer (input side left), coloured early -> late."""
    from matplotlib import cm
    from matplotlib.colors import Normalize
    colours = Normalize(vmin=steps.min(), vmax=max(steps.max(), steps.min() + 1))
    x = np.arange(len(names))
    for s, row in zip(steps, norms):
        ax.plot(x, row, "o-", markersize=3, linewidth=1, color=cm.viridis(colours(s)))
    ax.set_xticks(x, [_short(n) for n in names], fontsize=7, rotation=45 if len(names) > 12 else 0)
    ax.set_yscale("log")
    ax.set_xlabel("layer (input side left, loss side right)")
    ax.set_ylabel("L2 norm")
    ax.set_title(what)
    fig.colorbar(cm.ScalarMappable(norm=colours, cmap="viridis"), ax=ax, label="training step")


def plot_gradients(entries, out, title=None):
    """Three panels: each layer's parameter-gradient norm against its depth (one line per traced step),
    the residual stream's gradient norm likewise, and each layer's parameter-gradient norm over training.

    The title line of each profile gives the ratio first layer / last layer at the first and the last
    traced step: well below 1 means the gradient vanishes toward the input, well above 1 that it grows.
    """
    steps, names, norms = gradient_norms(entries, "param_grad_norms")
    try:
        isteps, inames, inorms = gradient_norms(entries, "grad_norms")
    except ValueError:
        isteps = None
    fig = figure(figsize=(10, 11), dpi=110, layout="constrained")
    ax_p, ax_i, ax_t = fig.subplots(3, 1, height_ratios=[1, 1, 1.1])

    def ratios(n):
        return f"first/last layer: {n[0, 0] / n[0, -1]:.3g} at step {steps[0]:g}, {n[-1, 0] / n[-1, -1]:.3g} at the end"
    _by_layer(ax_p, fig, steps, names, norms, "parameter gradient norm by layer (" + ratios(norms) + ")")
    if isteps is not None:
        _by_layer(ax_i, fig, isteps, inames, inorms,
                  f"residual-stream gradient norm entering each layer (first/last: "
                  f"{inorms[-1, 0] / inorms[-1, -1]:.3g} at the end)")
    else:
        ax_i.set_axis_off()
    from matplotlib import cm
    for j, name in enumerate(names):
        ax_t.plot(steps, norms[:, j], linewidth=1.4, color=cm.plasma(j / max(len(names) - 1, 1) * 0.9),
                  label=_short(name))
    ax_t.set_yscale("log")
    ax_t.set_xlabel("optimisation step")
    ax_t.set_ylabel("parameter gradient L2 norm")
    ax_t.set_title("each layer's parameter gradient norm over training")
    ax_t.legend(fontsize=7, ncol=min(len(names), 6), title="layer", title_fontsize=7)
    for ax in (ax_p, ax_i, ax_t):
        ax.grid(alpha=0.3, which="both")
    if title:
        fig.suptitle(title)
    return save_figure(fig, out)
