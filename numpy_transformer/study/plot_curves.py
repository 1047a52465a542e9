"""Training curves (``plot training``): loss, accuracy and learning rate against the step, from one
``train`` log or several overlaid on shared axes (pre-LN against post-LN in one figure).

The log is the JSON-lines file :mod:`numpy_transformer.training.runlog` writes (``read_log(path)``
gives its entries). :func:`smooth` needs NumPy only; :func:`plot_training` draws (matplotlib, returned
as a Figure: :mod:`numpy_transformer.study.figures`).
"""

from __future__ import annotations

import numpy as np

from .figures import finish, panels

__all__ = ["as_runs", "plot_training", "smooth"]


def smooth(values, window):
    """Trailing moving average over ``window`` points (shorter at the start); same length as ``values``."""
    v = np.asarray(values, dtype=np.float64)
    if window <= 1 or v.size == 0:
        return v
    c = np.cumsum(np.insert(v, 0, 0.0))
    idx = np.arange(1, v.size + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def as_runs(entries, labels=None):
    """``[(label, entries), ...]`` from one log (a list of dicts) or several (a list of such lists).

    ``labels`` names the logs (as many as there are logs); default ``run 0``, ``run 1``, ... for
    several logs and ``None`` for one."""
    entries = list(entries)
    logs = [entries] if not entries or isinstance(entries[0], dict) else [list(e) for e in entries]
    if labels is None:
        labels = [None] if len(logs) == 1 else [f"run {k}" for k in range(len(logs))]
    labels = list(labels)
    if len(labels) != len(logs):
        raise ValueError(f"labels: {len(labels)} label(s) for {len(logs)} log(s); give one label per log")
    return list(zip(labels, logs))


def _series(entries, kind, *keys):
    rows = [e for e in entries if e.get("kind") == kind and all(e.get(k) is not None for k in keys)]
    steps = np.array([e["step"] for e in rows], dtype=np.float64)
    return steps, [np.array([e[k] for e in rows], dtype=np.float64) for k in keys]


def plot_training(entries, out=None, title=None, window=None, labels=None, ax=None, fig=None):
    """Loss, accuracy and learning-rate curves from one training log, or several overlaid.

    Training values are drawn raw (faint) and as a moving average over ``window`` logged points (default:
    about 1/50 of the run); validations as markers. Resumed runs are marked by a dotted vertical line.
    Several logs share the three axes (one y-range each), one colour per log, named in the legends.

    Parameters
    ----------
    entries : list of dict, or list of lists of dict
        One log's entries (``read_log(path)``) or several logs'.
    out : str, optional
        A file to write; nothing is written without it.
    labels : list of str, optional
        The logs' names in the legend (one per log), e.g. ``["pre-LN", "post-LN"]``.
    ax : three Axes, optional
        ``[loss, accuracy, learning rate]``; default a new Figure (``fig``: a Figure to add them to).

    Returns
    -------
    matplotlib.figure.Figure
    """
    runs = as_runs(entries, labels)
    fig, (ax_loss, ax_acc, ax_lr) = panels(3, ax, fig, figsize=(10, 9), what="loss, accuracy, learning rate",
                                           sharex=True, height_ratios=[1.2, 1.2, 0.7])
    several = len(runs) > 1
    positive = []
    for k, (label, log) in enumerate(runs):
        steps, (loss, acc, lr) = _series(log, "train", "loss", "accuracy", "lr")
        if steps.size == 0:
            raise ValueError("the log holds no training entries (kind 'train')"
                             + (f": {label}" if several else ""))
        vsteps, (vloss, vacc) = _series(log, "val", "loss", "token_accuracy")
        ssteps, (vseq,) = _series(log, "val", "sequence_accuracy")
        resumes = [e["step"] for e in log if e.get("kind") == "resume"]
        win = max(1, steps.size // 50) if window is None else int(window)
        c_train, c_val, c_seq = (f"C{k % 10}",) * 3 if several else ("tab:blue", "tab:orange", "tab:green")
        name = f"{label}: " if several else ""
        ax_loss.plot(steps, loss, color=c_train, alpha=0.25, linewidth=0.8,
                     label=None if several else "train, dropout on (per log line)")
        ax_loss.plot(steps, smooth(loss, win), color=c_train, linewidth=1.8,
                     label=name + (f"train, dropout on (moving average of {win})" if win > 1 else "train, dropout on"))
        if vsteps.size:
            ax_loss.plot(vsteps, vloss, "o--" if several else "o-", color=c_val, markersize=4,
                         label=name + "validation (held-out, eval mode)")
        positive += [loss, vloss]
        ax_acc.plot(steps, 100 * acc, color=c_train, alpha=0.25, linewidth=0.8)
        ax_acc.plot(steps, 100 * smooth(acc, win), color=c_train, linewidth=1.8, label=name + "train token accuracy")
        if vsteps.size:
            ax_acc.plot(vsteps, 100 * vacc, "o--" if several else "o-", color=c_val, markersize=4,
                        label=name + "validation token accuracy")
        if ssteps.size:
            ax_acc.plot(ssteps, 100 * vseq, "s:" if several else "s--", color=c_seq, markersize=4,
                        label=name + "validation sequence accuracy")
        ax_lr.plot(steps, lr, color=c_train if several else "tab:purple", linewidth=1.4, label=label)
        for a in (ax_loss, ax_acc, ax_lr):
            for j, r in enumerate(resumes):
                a.axvline(r, color=c_train if several else "0.4", linestyle=":", linewidth=1,
                          label=name + "resumed" if j == 0 and a is not ax_lr else None)
    positive = np.concatenate(positive)
    positive = positive[positive > 0]
    if positive.size and positive.max() / positive.min() > 20:
        ax_loss.set_yscale("log")
    ax_loss.set_ylabel("cross-entropy loss")
    ax_loss.set_title("loss")
    ax_acc.set_ylim(-2, 102)
    ax_acc.set_ylabel("accuracy (%)")
    ax_acc.set_title("accuracy")
    ax_lr.set_ylabel("learning rate")
    ax_lr.set_xlabel("optimisation step")
    ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    for a in (ax_loss, ax_acc, ax_lr):
        a.grid(alpha=0.3)
    ax_loss.legend(fontsize=8, loc="upper right")
    ax_acc.legend(fontsize=8, loc="lower right")
    if several:
        ax_lr.legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    return finish(fig, out)
