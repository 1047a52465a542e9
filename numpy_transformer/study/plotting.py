"""Pictures: attention heatmaps of a trained model (one layer, or every layer and head in one grid),
the positional-encoding table, training curves (:mod:`numpy_transformer.study.plot_curves`).

Every function returns its matplotlib ``Figure``, draws into ``ax=`` (its Axes) or onto ``fig=`` when
given, and writes a file only when ``out=`` is given (:mod:`numpy_transformer.study.figures`), so a
notebook shows the pictures inline and the CLI keeps writing PNG files. matplotlib is an optional
extra (``pip install matplotlib`` or ``pip install -e ".[plot]"``); without it the functions raise
:class:`MatplotlibMissing` (an ImportError) with the install command.

The numbers come from functions that need NumPy only: :func:`attention_weights` (every layer's
per-head weights of a model on some token ids, encoder, seq2seq decoder or GPT:
:mod:`numpy_transformer.study.attention_maps`) and :func:`smooth`.
"""

from __future__ import annotations

import math

import numpy as np

from .attention_maps import attention_weights
from .figures import INSTALL_HINT, MatplotlibMissing, figure, finish, panels, save_figure
from .plot_curves import plot_training, smooth

__all__ = ["MatplotlibMissing", "INSTALL_HINT", "attention_weights", "plot_attention", "plot_attention_grid",
           "plot_positional", "plot_training", "position_labels", "smooth", "token_labels"]
_SHARED = (figure, save_figure)                    # re-exported: older callers import them from here


# -- attention ---------------------------------------------------------------------------------------------

def token_labels(ids, names=None):
    """Tick labels for token ids: ``PAD``/``EOS`` for 0/1 (the synthetic tasks' specials) unless
    ``names`` (a dict id -> str) says otherwise."""
    names = {0: "PAD", 1: "EOS"} if names is None else names
    return [names.get(int(i), str(int(i))) for i in ids]


def position_labels(labels):
    """``position:token`` labels, e.g. ``["0:the", "1:cat"]``: a repeated token stays tellable apart."""
    return [f"{i}:{t}" for i, t in enumerate(labels)]


def _ticks(ax, labels, axis, fontsize, show=True):
    n = len(labels)
    step = max(1, math.ceil(n / 40))                 # at most ~40 labels on an axis
    pos = list(range(0, n, step))
    text = [labels[p] for p in pos] if show else [""] * len(pos)
    if axis == "x":
        ax.set_xticks(pos)
        ax.set_xticklabels(text, fontsize=fontsize,
                           rotation=90 if show and max(len(t) for t in text) > 2 else 0)
    else:
        ax.set_yticks(pos)
        ax.set_yticklabels(text, fontsize=fontsize)


def _check_labels(w, query_labels, key_labels):
    """The (query, key) labels for weights ``w`` (..., S, T): positions when none are given."""
    s, t = w.shape[-2:]
    query_labels = [str(i) for i in range(s)] if query_labels is None else list(query_labels)
    key_labels = (query_labels if s == t else [str(j) for j in range(t)]) if key_labels is None else list(key_labels)
    if len(query_labels) != s or len(key_labels) != t:
        raise ValueError(f"{len(query_labels)} query / {len(key_labels)} key labels for weights of shape {w.shape}")
    return query_labels, key_labels


def plot_attention(weights, out=None, query_labels=None, key_labels=None, title=None, cmap="viridis",
                   query_name="query token", key_name="key token", ax=None, fig=None):
    """One heatmap per head of one layer, token labels on both axes, one shared colour bar.

    Parameters
    ----------
    weights : ndarray (H, S, T)
        One sequence's per-head weights (see :func:`attention_weights`).
    out : str, optional
        A file to write (PNG, SVG, PDF: by its extension); nothing is written without it.
    query_labels, key_labels : list of str, optional
        Labels of the S query positions (rows) and T key positions (columns); default the positions,
        and the query labels for the keys of self-attention.
    query_name, key_name : str
        The axes' titles (e.g. "target token" and "source token" for cross-attention).
    ax : sequence or array of H Axes, optional
        Where the heads are drawn (a single Axes when H is 1); default a new Figure, 4 heads a row.
    fig : Figure, optional
        A Figure to add the panels to, instead of a new one.

    Returns
    -------
    matplotlib.figure.Figure
        The figure drawn (``ax``'s when given): one image per head, titled ``head k``.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 3:
        raise ValueError(f"weights must be (H, S, T), got shape {w.shape}")
    h, s, t = w.shape
    query_labels, key_labels = _check_labels(w, query_labels, key_labels)
    ncols = min(h, 4)
    cell = max(2.6, min(5.0, 0.28 * max(s, t)))
    fig, axes = panels(h, ax, fig, figsize=(cell * ncols + 1.6, cell * math.ceil(h / ncols) + 1.2),
                       ncols=ncols, what=f"one per head of {h}")
    vmax = float(w.max()) if w.size and w.max() > 0 else 1.0
    fontsize = max(5, min(9, int(170 / max(s, t))))
    for k, a in enumerate(axes):
        image = a.imshow(w[k], cmap=cmap, vmin=0.0, vmax=vmax, interpolation="nearest")
        a.set_title(f"head {k}", fontsize=10)
        _ticks(a, key_labels, "x", fontsize)
        _ticks(a, query_labels, "y", fontsize)
        if k % ncols == 0:
            a.set_ylabel(f"{query_name} (row)", fontsize=9)
        if k >= h - ncols:
            a.set_xlabel(f"{key_name} (column)", fontsize=9)
    bar = fig.colorbar(image, ax=axes, shrink=0.85)
    bar.set_label("attention weight (each row sums to 1)")
    if title:
        fig.suptitle(title, fontsize=11)
    return finish(fig, out)


def plot_attention_grid(weights, out=None, query_labels=None, key_labels=None, title=None, cmap="viridis",
                        query_name="query", key_name="key", layer_name="layer", ax=None, fig=None):
    """Every layer and every head at once: a grid of heatmaps, rows the layers, columns the heads.

    Parameters
    ----------
    weights : list of ndarray (H, S, T), or ndarray (L, H, S, T)
        One sequence's weights, layer by layer (``[w[0] for w in attention_weights(model, ids)]``).
    out : str, optional
        A file to write; nothing is written without it.
    query_labels, key_labels : list of str, optional
        The rows' and columns' labels, e.g. :func:`position_labels` of the tokens (``3:cat``); drawn on
        the left column and the bottom row. Default: the positions.
    query_name, key_name, layer_name : str
        The words on the axes: ``"{layer_name} i: {query_name}"`` on each row, ``key_name`` below.
    ax : array (L, H) or flat sequence of L*H Axes, optional
        Where the panels are drawn, row by row; default a new Figure.
    fig : Figure, optional
        A Figure to add the L x H panels to, instead of a new one.

    Returns
    -------
    matplotlib.figure.Figure
        One image per (layer, head), all on one colour scale (0 to the largest weight).
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 4:
        raise ValueError(f"weights must be (L, H, S, T) (a list of L layers' (H, S, T)), got shape {w.shape}")
    n_layers, h, s, t = w.shape
    query_labels, key_labels = _check_labels(w, query_labels, key_labels)
    cell = max(1.6, min(3.2, 0.16 * max(s, t)))
    fig, axes = panels(n_layers * h, ax, fig, figsize=(cell * h + 2.2, cell * n_layers + 1.4), ncols=h,
                       what=f"{n_layers} layers x {h} heads")
    vmax = float(w.max()) if w.size and w.max() > 0 else 1.0
    fontsize = max(4, min(8, int(120 / max(s, t))))
    for k, a in enumerate(axes):
        layer, head = divmod(k, h)
        image = a.imshow(w[layer, head], cmap=cmap, vmin=0.0, vmax=vmax, interpolation="nearest")
        _ticks(a, key_labels, "x", fontsize, show=layer == n_layers - 1)
        _ticks(a, query_labels, "y", fontsize, show=head == 0)
        if layer == 0:
            a.set_title(f"head {head}", fontsize=9)
        if head == 0:
            a.set_ylabel(f"{layer_name} {layer}: {query_name}", fontsize=8)
        if layer == n_layers - 1:
            a.set_xlabel(key_name, fontsize=8)
    bar = fig.colorbar(image, ax=axes, shrink=0.6)
    bar.set_label("attention weight (each row sums to 1)")
    if title:
        fig.suptitle(title, fontsize=10)
    return finish(fig, out)


# -- positional encoding -----------------------------------------------------------------------------------

def _default_dims(d):
    """The fastest (sin, cos) pair and a few slower sines: e.g. d=128 -> 0, 1, 16, 17, 32, 64."""
    dims = [0, 1, 2 * (d // 16), 2 * (d // 16) + 1, 2 * (d // 8), 2 * (d // 4)]
    return sorted({i for i in dims if i < d})


def plot_positional(table, out=None, dims=None, title=None, sinusoidal=True, ax=None, fig=None):
    """The (positions, D) table as a heatmap, and a few of its dimensions as curves over the position.

    ``sinusoidal`` only changes the legend: even dimensions are sines, odd ones cosines, with wavelength
    ``2 pi 10000^(2i/D)``. The legend sits outside the curves' axes, to their right, so it hides none
    of them.

    Parameters
    ----------
    table : ndarray (max_len, d_model)
    out : str, optional
        A file to write; nothing is written without it.
    dims : list of int, optional
        The dimensions drawn as curves (default: the fastest sin/cos pair and a few slower sines).
    ax : two Axes, optional
        ``[heatmap, curves]``; default a new Figure. ``fig``: a Figure to add the two panels to.

    Returns
    -------
    matplotlib.figure.Figure
    """
    pe = np.asarray(table, dtype=np.float64)
    if pe.ndim != 2:
        raise ValueError(f"table must be (max_len, d_model), got shape {pe.shape}")
    n, d = pe.shape
    dims = _default_dims(d) if dims is None else list(dims)
    bad = [i for i in dims if not 0 <= i < d]
    if bad:
        raise ValueError(f"dimensions must lie in [0, {d}), got {bad}")
    fig, (top, bottom) = panels(2, ax, fig, figsize=(10, 8), what="the table and the curves",
                                height_ratios=[1.25, 1])
    lim = max(1.0, float(np.abs(pe).max()))
    image = top.imshow(pe, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest",
                       origin="upper")
    top.set_xlabel("dimension i (even: sin, odd: cos)" if sinusoidal else "dimension i")
    top.set_ylabel("position")
    top.set_title(f"positional encoding table ({n} positions x d_model {d})")
    bar = fig.colorbar(image, ax=top)
    bar.set_label("PE[position, i]")
    positions = np.arange(n)
    for i in dims:
        if sinusoidal:
            wavelength = 2 * math.pi * 10000 ** ((i - i % 2) / d)
            label = f"dim {i}: {'sin' if i % 2 == 0 else 'cos'}, wavelength {wavelength:.3g}"
        else:
            label = f"dim {i}"
        bottom.plot(positions, pe[:, i], label=label, linewidth=1.4)
    bottom.set_xlabel("position")
    bottom.set_ylabel("PE[position, i]")
    bottom.set_title("a few dimensions over the positions")
    bottom.axhline(0, color="0.6", linewidth=0.6)
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    bottom.set_xlim(0, max(n - 1, 1))
    if title:
        fig.suptitle(title)
    return finish(fig, out)


