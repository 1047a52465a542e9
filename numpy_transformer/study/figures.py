"""The figure plumbing every plotting function shares: a Figure on the Agg canvas, the panels it draws
into (new ones, the caller's ``ax=``, or new ones on the caller's ``fig=``), and the optional file.

Every plotting function of :mod:`numpy_transformer.study` follows the convention of seaborn and
pandas: it **returns its matplotlib** :class:`~matplotlib.figure.Figure`, draws into the Axes given as
``ax=`` (one Axes, or for a figure of several panels a list or array of them) or onto the Figure given
as ``fig=``, and writes a file only when ``out=`` is given. In a notebook the returned Figure shows
inline; the CLI passes ``out`` and so keeps writing PNG files.

matplotlib is an optional extra; it is imported only when a figure is drawn, and only its
object-oriented API with the Agg canvas is used (no pyplot, no global backend switch). Without it the
functions raise :class:`MatplotlibMissing` (an ImportError) whose message gives the install command.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["INSTALL_HINT", "MatplotlibMissing", "figure", "finish", "panels", "save_figure"]

INSTALL_HINT = ('plotting needs matplotlib, which is not installed: pip install matplotlib '
                '(or pip install -e ".[plot]" in the checkout)')


class MatplotlibMissing(ImportError):
    """matplotlib is not installed; the message says how to install it."""


def figure(**kwargs):
    """A new matplotlib Figure on an Agg canvas (imports matplotlib lazily)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MatplotlibMissing(INSTALL_HINT) from exc
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def panels(n, ax=None, fig=None, *, figsize, nrows=None, ncols=1, what="panels", **subplots_kw):
    """``(fig, axes)``: the ``n`` Axes a plotting function draws into, as a flat list.

    Parameters
    ----------
    n : int
        How many Axes the picture needs.
    ax : Axes or sequence/array of Axes, optional
        The caller's: at least ``n`` of them (a single Axes when ``n == 1``), all on one Figure; the
        first ``n`` are used, row by row.
    fig : Figure, optional
        The caller's Figure, to which ``nrows x ncols`` new subplots are added (ignored when ``ax`` is given).
    figsize : (float, float)
        The size of a new Figure (neither ``ax`` nor ``fig`` given); it uses the constrained layout.
    nrows, ncols, **subplots_kw
        The grid of new subplots (``nrows`` defaults to ``ceil(n / ncols)``) and ``Figure.subplots``'s
        other arguments (``sharex``, ``height_ratios``, ...).
    what : str
        What the panels show, for the error message.
    """
    if ax is not None:
        from matplotlib.axes import Axes
        axes = [ax] if isinstance(ax, Axes) else list(np.ravel(np.asarray(ax, dtype=object)))
        bad = [type(a).__name__ for a in axes if not isinstance(a, Axes)]
        if bad:
            raise TypeError(f"ax must be a matplotlib Axes or a list/array of them, got {bad[0]} in it")
        if len(axes) < n:
            raise ValueError(f"ax: this figure draws {n} panels ({what}), so it needs {n} Axes; got {len(axes)}")
        owners = {id(a.figure) for a in axes[:n]}
        if len(owners) != 1:
            raise ValueError("ax: the Axes must all belong to one Figure")
        return axes[0].figure, axes[:n]
    nrows = -(-n // ncols) if nrows is None else nrows
    if fig is None:
        fig = figure(figsize=figsize, dpi=110, layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False, **subplots_kw)
    axes = list(grid.ravel())
    for extra in axes[n:]:
        extra.set_visible(False)
    return fig, axes[:n]


def save_figure(fig, out):
    """Write ``fig`` to ``out`` (its folders made as needed); returns the path."""
    out = os.fspath(out)
    directory = os.path.dirname(os.path.abspath(out))
    os.makedirs(directory, exist_ok=True)
    fig.savefig(out, dpi=fig.dpi)
    return out


def finish(fig, out=None):
    """Write ``fig`` to ``out`` when it is given; return ``fig`` (what every plotting function returns)."""
    if out is not None:
        save_figure(fig, out)
    return fig
