"""``plot gradients``: gradient norms by layer over training, from the ``trace`` lines of a ``train`` log
(``train --trace-every N``), to see vanishing or exploding gradients (post-LN vs pre-LN, deep stacks).

The numbers are those :class:`numpy_transformer.study.trace.Trace` computes on each traced step:
``param_grad_norms`` (all of one layer's parameter gradients as one vector, before clipping) and
``grad_norms`` (the gradient of the residual stream entering the layer). :func:`gradient_norms` reads
them with NumPy only; :func:`plot_gradients` draws them (matplotlib, as :mod:`numpy_transformer.study.plotting`).
"""

from __future__ import annotations

import numpy as np

from .figures import finish, panels
from .plot_curves import as_runs

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


def plot_gradients(entries, out=None, title=None, labels=None, ax=None, fig=None):
    """Three panels: each layer's parameter-gradient norm against its depth, the residual stream's
    gradient norm likewise, and each layer's parameter-gradient norm over training.

    From one log, the profiles have one line per traced step (coloured early -> late); their titles
    give the ratio first layer / last layer at the first and the last traced step: well below 1 means
    the gradient vanishes toward the input, well above 1 that it grows. From several logs (pre-LN
    against post-LN), every panel overlays them on shared axes, one colour per log named in the legend:
    the profiles at the first (dotted) and the last (solid) traced step, and over training the first
    layer (solid) and the last (dashed).

    Parameters
    ----------
    entries : list of dict, or list of lists of dict
        One ``train --trace-every N`` log's entries (``read_log(path)``) or several logs'.
    out : str, optional
        A file to write; nothing is written without it.
    labels : list of str, optional
        The logs' names (one per log).
    ax : three Axes, optional
        ``[parameter profile, residual profile, over training]``; default a new Figure (``fig``: a
        Figure to add them to).

    Returns
    -------
    matplotlib.figure.Figure
    """
    runs = as_runs(entries, labels)
    read = []
    for label, log in runs:
        try:
            got = gradient_norms(log, "param_grad_norms")
        except ValueError as exc:
            raise ValueError(str(exc) + (f" ({label})" if len(runs) > 1 else "")) from None
        try:
            inner = gradient_norms(log, "grad_norms")
        except ValueError:
            inner = None
        read.append((label, got, inner))
    fig, (ax_p, ax_i, ax_t) = panels(3, ax, fig, figsize=(10, 11), what="two profiles and the norms over training",
                                     height_ratios=[1, 1, 1.1])
    if len(runs) == 1:
        _one_log(fig, ax_p, ax_i, ax_t, *read[0][1:])
    else:
        _several_logs(ax_p, ax_i, ax_t, read)
    for a in (ax_p, ax_i, ax_t):
        a.grid(alpha=0.3, which="both")
    if title:
        fig.suptitle(title)
    return finish(fig, out)


def _one_log(fig, ax_p, ax_i, ax_t, got, inner):
    from matplotlib import cm
    steps, names, norms = got

    def ratios(n):
        return f"first/last layer: {n[0, 0] / n[0, -1]:.3g} at step {steps[0]:g}, {n[-1, 0] / n[-1, -1]:.3g} at the end"
    _by_layer(ax_p, fig, steps, names, norms, "parameter gradient norm by layer (" + ratios(norms) + ")")
    if inner is not None:
        isteps, inames, inorms = inner
        _by_layer(ax_i, fig, isteps, inames, inorms,
                  f"residual-stream gradient norm entering each layer (first/last: "
                  f"{inorms[-1, 0] / inorms[-1, -1]:.3g} at the end)")
    else:
        ax_i.set_axis_off()
    for j, name in enumerate(names):
        ax_t.plot(steps, norms[:, j], linewidth=1.4, color=cm.plasma(j / max(len(names) - 1, 1) * 0.9),
                  label=_short(name))
    ax_t.set_yscale("log")
    ax_t.set_xlabel("optimisation step")
    ax_t.set_ylabel("parameter gradient L2 norm")
    ax_t.set_title("each layer's parameter gradient norm over training")
    ax_t.legend(fontsize=7, ncol=min(len(names), 6), title="layer", title_fontsize=7)


def _several_logs(ax_p, ax_i, ax_t, read):
    longest = {}                                              # axis -> the longest layer list drawn on it
    for k, (label, (steps, names, norms), inner) in enumerate(read):
        colour = f"C{k % 10}"
        profiles = [(ax_p, steps, names, norms)] + ([(ax_i, *inner)] if inner is not None else [])
        for a, st, nm, nr in profiles:
            x = np.arange(len(nm))
            a.plot(x, nr[0], "o:", markersize=3, linewidth=1, color=colour, label=f"{label}: step {st[0]:g}")
            a.plot(x, nr[-1], "o-", markersize=3, linewidth=1.6, color=colour,
                   label=f"{label}: step {st[-1]:g} (first/last layer {nr[-1, 0] / nr[-1, -1]:.3g})")
            if len(nm) > len(longest.get(a, [])):
                longest[a] = nm
        ax_t.plot(steps, norms[:, 0], linewidth=1.6, color=colour, label=f"{label}: {_short(names[0])}")
        ax_t.plot(steps, norms[:, -1], "--", linewidth=1.4, color=colour, label=f"{label}: {_short(names[-1])}")
    for a, nm in longest.items():
        a.set_xticks(np.arange(len(nm)), [_short(n) for n in nm], fontsize=7, rotation=45 if len(nm) > 12 else 0)
    for a, what in ((ax_p, "parameter gradient norm by layer"),
                    (ax_i, "residual-stream gradient norm entering each layer")):
        if a not in longest:                                  # no log holds residual-stream norms
            a.set_axis_off()
            continue
        a.set_yscale("log")
        a.set_xlabel("layer (input side left, loss side right)")
        a.set_ylabel("L2 norm")
        a.set_title(what + ": first (dotted) and last (solid) traced step")
        a.legend(fontsize=7)
    ax_t.set_yscale("log")
    ax_t.set_xlabel("optimisation step")
    ax_t.set_ylabel("parameter gradient L2 norm")
    ax_t.set_title("first layer (solid) and last layer (dashed) over training")
    ax_t.legend(fontsize=7, ncol=2)
