"""Pictures: attention heatmaps of a trained model, the positional-encoding table, training curves.

matplotlib is an optional extra (``pip install matplotlib`` or ``pip install -e ".[plot]"``); it is
imported only when a figure is drawn, and only its object-oriented API with the Agg canvas is used
(no pyplot, no global backend switch), so these functions are safe in scripts, tests and notebooks.
Without matplotlib they raise :class:`MatplotlibMissing` (an ImportError) with the install command.

The numbers come from functions that need NumPy only: :func:`attention_weights` (every layer's
per-head weights of a model on some token ids, encoder, seq2seq decoder or GPT:
:mod:`numpy_transformer.study.attention_maps`) and :func:`smooth`.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .attention_maps import attention_weights

__all__ = ["MatplotlibMissing", "INSTALL_HINT", "attention_weights", "plot_attention", "plot_positional",
           "plot_training", "smooth", "token_labels"]

INSTALL_HINT = ('plotting needs matplotlib, which is not installed: pip install matplotlib '
                '(or pip install -e ".[plot]" in the checkout)')


class MatplotlibMissing(ImportError):
    """matplotlib is not installed; the message says how to install it."""


def figure(**kwargs):
    """A matplotlib Figure on an Agg canvas (imports matplotlib lazily)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MatplotlibMissing(INSTALL_HINT) from exc
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig, out):
    out = os.fspath(out)
    directory = os.path.dirname(os.path.abspath(out))
    os.makedirs(directory, exist_ok=True)
    fig.savefig(out, dpi=fig.dpi)
    return out


# -- attention ---------------------------------------------------------------------------------------------

def token_labels(ids, names=None):
    """Tick labels for token ids: ``PAD``/``EOS`` for 0/1 (the synthetic tasks' specials) unless
    ``names`` (a dict id -> str) says otherwise."""
    names = {0: "PAD", 1: "EOS"} if names is None else names
    return [names.get(int(i), str(int(i))) for i in ids]


def _ticks(ax, labels, axis, fontsize):
    n = len(labels)
    step = max(1, math.ceil(n / 40))                 # at most ~40 labels on an axis
    pos = list(range(0, n, step))
    text = [labels[p] for p in pos]
    if axis == "x":
        ax.set_xticks(pos)
        ax.set_xticklabels(text, fontsize=fontsize, rotation=90 if max(len(t) for t in text) > 2 else 0)
    else:
        ax.set_yticks(pos)
        ax.set_yticklabels(text, fontsize=fontsize)


def plot_attention(weights, out, query_labels, key_labels=None, title=None, cmap="viridis",
                   query_name="query token", key_name="key token"):
    """One heatmap per head in one figure, token labels on both axes, one shared colour bar.

    Parameters
    ----------
    weights : ndarray (H, S, T)
        One sequence's per-head weights (see :func:`attention_weights`).
    out : str
        The PNG to write.
    query_labels, key_labels : list of str
        Labels of the S query positions (rows) and T key positions (columns; default the query labels).
    query_name, key_name : str
        The axes' titles (e.g. "target token" and "source token" for cross-attention).
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 3:
        raise ValueError(f"weights must be (H, S, T), got shape {w.shape}")
    h, s, t = w.shape
    key_labels = query_labels if key_labels is None else key_labels
    if len(query_labels) != s or len(key_labels) != t:
        raise ValueError(f"{len(query_labels)} query / {len(key_labels)} key labels for weights of shape {w.shape}")
    ncols = min(h, 4)
    nrows = math.ceil(h / ncols)
    cell = max(2.6, min(5.0, 0.28 * max(s, t)))
    fig = figure(figsize=(cell * ncols + 1.6, cell * nrows + 1.2), dpi=110, layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    vmax = float(w.max()) if w.size and w.max() > 0 else 1.0
    fontsize = max(5, min(9, int(170 / max(s, t))))
    image = None
    for k, ax in enumerate(axes):
        if k >= h:
            ax.set_visible(False)
            continue
        image = ax.imshow(w[k], cmap=cmap, vmin=0.0, vmax=vmax, interpolation="nearest")
        ax.set_title(f"head {k}", fontsize=10)
        _ticks(ax, key_labels, "x", fontsize)
        _ticks(ax, query_labels, "y", fontsize)
        if k % ncols == 0:
            ax.set_ylabel(f"{query_name} (row)", fontsize=9)
        if k >= h - ncols:
            ax.set_xlabel(f"{key_name} (column)", fontsize=9)
    bar = fig.colorbar(image, ax=list(axes[:h]), shrink=0.85)
    bar.set_label("attention weight (each row sums to 1)")
    if title:
        fig.suptitle(title, fontsize=11)
    return save_figure(fig, out)


# -- positional encoding -----------------------------------------------------------------------------------

def _default_dims(d):
    """The fastest (sin, cos) pair and a few slower sines: e.g. d=128 -> 0, 1, 16, 17, 32, 64."""
    dims = [0, 1, 2 * (d // 16), 2 * (d // 16) + 1, 2 * (d // 8), 2 * (d // 4)]
    return sorted({i for i in dims if i < d})


def plot_positional(table, out, dims=None, title=None, sinusoidal=True):
    """The (positions, D) table as a heatmap, and a few of its dimensions as curves over the position.

    ``sinusoidal`` only changes the legend: even dimensions are sines, odd ones cosines, with wavelength
    ``2 pi 10000^(2i/D)``.
    """
    pe = np.asarray(table, dtype=np.float64)
    if pe.ndim != 2:
        raise ValueError(f"table must be (max_len, d_model), got shape {pe.shape}")
    n, d = pe.shape
    dims = _default_dims(d) if dims is None else list(dims)
    bad = [i for i in dims if not 0 <= i < d]
    if bad:
        raise ValueError(f"dimensions must lie in [0, {d}), got {bad}")
    fig = figure(figsize=(10, 8), dpi=110, layout="constrained")
    top, bottom = fig.subplots(2, 1, height_ratios=[1.25, 1])
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
    bottom.legend(fontsize=8, loc="upper right", ncol=2 if len(dims) > 3 else 1)
    bottom.set_xlim(0, max(n - 1, 1))
    if title:
        fig.suptitle(title)
    return save_figure(fig, out)


# -- training curves ---------------------------------------------------------------------------------------

def smooth(values, window):
    """Trailing moving average over ``window`` points (shorter at the start); same length as ``values``."""
    v = np.asarray(values, dtype=np.float64)
    if window <= 1 or v.size == 0:
        return v
    c = np.cumsum(np.insert(v, 0, 0.0))
    idx = np.arange(1, v.size + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def _series(entries, kind, *keys):
    rows = [e for e in entries if e.get("kind") == kind and all(e.get(k) is not None for k in keys)]
    steps = np.array([e["step"] for e in rows], dtype=np.float64)
    return steps, [np.array([e[k] for e in rows], dtype=np.float64) for k in keys]


def plot_training(entries, out, title=None, window=None):
    """Loss, accuracy and learning-rate curves from a training log (see :mod:`numpy_transformer.training.runlog`).

    Training values are drawn raw (faint) and as a moving average over ``window`` logged points (default:
    about 1/50 of the run); validations as markers. Resumed runs are marked by a dotted vertical line.
    """
    steps, (loss, acc, lr) = _series(entries, "train", "loss", "accuracy", "lr")
    if steps.size == 0:
        raise ValueError("the log holds no training entries (kind 'train')")
    vsteps, (vloss, vacc) = _series(entries, "val", "loss", "token_accuracy")
    ssteps, (vseq,) = _series(entries, "val", "sequence_accuracy")
    resumes = [e["step"] for e in entries if e.get("kind") == "resume"]
    window = max(1, steps.size // 50) if window is None else int(window)

    fig = figure(figsize=(10, 9), dpi=110, layout="constrained")
    ax_loss, ax_acc, ax_lr = fig.subplots(3, 1, sharex=True, height_ratios=[1.2, 1.2, 0.7])
    ax_loss.plot(steps, loss, color="tab:blue", alpha=0.25, linewidth=0.8, label="train, dropout on (per log line)")
    ax_loss.plot(steps, smooth(loss, window), color="tab:blue", linewidth=1.8,
                 label=f"train, dropout on (moving average of {window})" if window > 1 else "train, dropout on")
    if vsteps.size:
        ax_loss.plot(vsteps, vloss, "o-", color="tab:orange", markersize=4, label="validation (held-out, eval mode)")
    positive = np.concatenate([loss, vloss])
    positive = positive[positive > 0]
    if positive.size and positive.max() / positive.min() > 20:
        ax_loss.set_yscale("log")
    ax_loss.set_ylabel("cross-entropy loss")
    ax_loss.set_title("loss")

    ax_acc.plot(steps, 100 * acc, color="tab:blue", alpha=0.25, linewidth=0.8)
    ax_acc.plot(steps, 100 * smooth(acc, window), color="tab:blue", linewidth=1.8, label="train token accuracy")
    if vsteps.size:
        ax_acc.plot(vsteps, 100 * vacc, "o-", color="tab:orange", markersize=4, label="validation token accuracy")
    if ssteps.size:
        ax_acc.plot(ssteps, 100 * vseq, "s--", color="tab:green", markersize=4,
                    label="validation sequence accuracy")
    ax_acc.set_ylim(-2, 102)
    ax_acc.set_ylabel("accuracy (%)")
    ax_acc.set_title("accuracy")

    ax_lr.plot(steps, lr, color="tab:purple", linewidth=1.4)
    ax_lr.set_ylabel("learning rate")
    ax_lr.set_xlabel("optimisation step")
    ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    for ax in (ax_loss, ax_acc, ax_lr):
        ax.grid(alpha=0.3)
        for k, r in enumerate(resumes):
            ax.axvline(r, color="0.4", linestyle=":", linewidth=1,
                       label="resumed" if k == 0 and ax is not ax_lr else None)
    ax_loss.legend(fontsize=8, loc="upper right")
    ax_acc.legend(fontsize=8, loc="lower right")
    if title:
        fig.suptitle(title)
    return save_figure(fig, out)
