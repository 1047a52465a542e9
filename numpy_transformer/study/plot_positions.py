"""Pictures of the position schemes other than the sinusoidal table (``plot positional --kind``):

* ``rope`` -- the rotation angle of every (position, frequency pair), and the score ``q . k`` of one
  fixed vector against itself at every distance: rotary embeddings make the score a function of the
  distance alone, oscillating and (for a constant vector) decaying with it;
* ``alibi`` -- each head's fixed bias ``-slope * (i - j)`` over (query, key), and the slopes;
* ``relative`` -- T5's bucket of every distance (exact near zero, logarithmic beyond), and with a
  checkpoint the learned bias of every head against the distance;
* ``learned`` -- a checkpoint's learned table, and the cosine similarity of its positions (learned
  positions that end up smooth show a band along the diagonal).

The numbers come from the library's own functions (``F.rope_forward``, ``F.alibi_bias``,
``F.relative_position_bucket``), so the pictures show what the models compute. Each function returns
its matplotlib Figure, draws into ``ax=`` (a list of its panels' Axes) or onto ``fig=`` when given, and
writes a file only when ``out=`` is given (:mod:`numpy_transformer.study.figures`).
"""

from __future__ import annotations

import numpy as np

from .. import functional as F
from .figures import finish, panels

__all__ = ["KINDS", "plot_rope", "plot_alibi", "plot_relative", "plot_learned", "rope_scores"]

KINDS = ("sinusoidal", "learned", "rope", "alibi", "relative")


def rope_scores(head_dim, max_len, base=10000.0, interleaved=False):
    """``q . k`` after rotating one all-ones vector to position 0 (the query) and to positions 0..max_len-1
    (the keys), divided by ``head_dim``: the score as a function of the distance alone."""
    ones = np.ones((max_len, head_dim))
    rotated, _ = F.rope_forward(ones, positions=np.arange(max_len), base=base, interleaved=interleaved)  # (S, Dh)
    return rotated @ rotated[0] / head_dim                                      # (S,)


def plot_rope(out=None, head_dim=64, max_len=128, base=10000.0, title=None, ax=None, fig=None):
    """Rotary embeddings: each pair's rotation angle over the positions, and :func:`rope_scores`.
    ``ax``: two Axes ``[angles, scores]``. Returns the Figure."""
    fig, (top, bottom) = panels(2, ax, fig, figsize=(10, 8), what="angles and scores", height_ratios=[1.25, 1])
    pairs = np.arange(head_dim // 2)
    theta = np.arange(max_len)[:, None] * base ** (-2.0 * pairs / head_dim)[None, :]   # (S, Dh/2)
    image = top.imshow(np.cos(theta), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    top.set_xlabel("frequency pair i (angle = position * base^(-2i/Dh))")
    top.set_ylabel("position")
    top.set_title(f"rotary embeddings: cos of each pair's rotation angle (head_dim {head_dim}, base {base:g})")
    fig.colorbar(image, ax=top).set_label("cos(angle)")
    bottom.plot(np.arange(max_len), rope_scores(head_dim, max_len, base), linewidth=1.4)
    bottom.set_xlabel("distance between query and key")
    bottom.set_ylabel("q . k / Dh")
    bottom.set_title("the score of one vector against itself at each distance: a function of the distance alone")
    bottom.axhline(0, color="0.6", linewidth=0.6)
    bottom.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    return finish(fig, out)


def plot_alibi(out=None, num_heads=8, max_len=32, title=None, ax=None, fig=None):
    """ALiBi: up to four heads' biases over (query, key), and every head's slope. ``ax``: ``min(num_heads,
    4) + 1`` Axes (the heads, then the slopes). Returns the Figure."""
    bias = F.alibi_bias(num_heads, max_len, max_len)                            # (H, S, S)
    causal = np.triu(np.ones((max_len, max_len), dtype=bool), k=1)
    shown = min(num_heads, 4)
    fig, axes = panels(shown + 1, ax, fig, figsize=(3.2 * (shown + 1), 3.6), ncols=shown + 1,
                       what=f"{shown} heads and the slopes")
    lim = float(np.abs(np.where(causal, 0, bias)).max()) or 1.0
    heads = np.unique(np.linspace(0, num_heads - 1, shown).round().astype(int))
    for ax, h in zip(axes, heads):
        image = ax.imshow(np.ma.masked_where(causal, bias[h]), cmap="viridis", vmin=-lim, vmax=0,
                          interpolation="nearest")
        ax.set_title(f"head {h}: slope {F.alibi_slopes(num_heads)[h]:.3g}", fontsize=9)
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
    fig.colorbar(image, ax=axes[:len(heads)]).set_label("bias = -slope * (i - j)")
    slopes = F.alibi_slopes(num_heads)
    axes[-1].bar(np.arange(num_heads), slopes)
    axes[-1].set_yscale("log")
    axes[-1].set_xlabel("head")
    axes[-1].set_title("slopes", fontsize=9)
    fig.suptitle(title or f"ALiBi, {num_heads} heads (masked: above the diagonal)")
    return finish(fig, out)


def plot_relative(out=None, num_buckets=32, max_distance=128, bidirectional=True, weight=None, title=None,
                  ax=None, fig=None):
    """The bucket of every distance; with ``weight`` (num_buckets, H), each head's bias over distance.
    ``ax``: one Axes (two with ``weight``). Returns the Figure."""
    span = int(max_distance * 1.5)
    rel = np.arange(-span, span + 1) if bidirectional else np.arange(-span, 1)
    buckets = F.relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                         max_distance=max_distance)
    fig, axes = panels(2 if weight is not None else 1, ax, fig, figsize=(10, 7 if weight is not None else 4),
                       what="the buckets" + (" and the learned biases" if weight is not None else ""))
    axes[0].step(rel, buckets, where="mid", linewidth=1.4)
    axes[0].set_xlabel("relative position (key - query)")
    axes[0].set_ylabel("bucket")
    axes[0].set_title(f"T5's buckets ({num_buckets}, max_distance {max_distance}, "
                      f"{'bidirectional' if bidirectional else 'causal'}): exact near 0, logarithmic beyond")
    axes[0].grid(alpha=0.3)
    if weight is not None:
        weight = np.asarray(weight, dtype=np.float64)
        for h in range(weight.shape[1]):
            axes[1].plot(rel, weight[buckets, h], linewidth=1.2, label=f"head {h}")
        axes[1].set_xlabel("relative position (key - query)")
        axes[1].set_ylabel("learned bias")
        axes[1].legend(fontsize=8, ncol=4)
        axes[1].grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    return finish(fig, out)


def plot_learned(table, out=None, title=None, ax=None, fig=None):
    """A learned (max_len, D) table and the cosine similarity of its positions. ``ax``: two Axes.
    Returns the Figure."""
    pe = np.asarray(table, dtype=np.float64)
    unit = pe / np.maximum(np.linalg.norm(pe, axis=1, keepdims=True), 1e-12)
    fig, (left, right) = panels(2, ax, fig, figsize=(12, 5), ncols=2, what="the table and the similarities")
    lim = float(np.abs(pe).max()) or 1.0
    fig.colorbar(left.imshow(pe, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest"),
                 ax=left)
    left.set_xlabel("dimension")
    left.set_ylabel("position")
    left.set_title("the learned table")
    fig.colorbar(right.imshow(unit @ unit.T, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest"), ax=right)
    right.set_xlabel("position")
    right.set_ylabel("position")
    right.set_title("cosine similarity between positions")
    if title:
        fig.suptitle(title)
    return finish(fig, out)
