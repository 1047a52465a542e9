"""The seed design's experiment: change one thing, train on the same test case, watch the score.

:func:`run_ablation` trains every variant on the same data, seed and step budget (and, with
``repeats=K``, on K seeds), evaluating on the held-out set every ``eval_every`` steps; :func:`format_table`
prints what it measured and :func:`plot_ablation` draws every variant's validation curve in one PNG.
``python -m numpy_transformer ablate`` is the command (:mod:`numpy_transformer.cli.ablate`).

A variant is a name and the :class:`~numpy_transformer.training.trainer.TrainConfig` fields it changes from the
base configuration (``VARIANTS``); ``baseline`` changes nothing, so it is the seed design's block (or
whatever the base options say). What is held fixed across the variants of one repeat: the task's data
(made from the seed), the batch order, the step budget, the schedule and every other option. What cannot
be held fixed: the initial weights, because the variants have different parameters.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..training.trainer import TrainConfig, Trainer

__all__ = ["VARIANTS", "Variant", "VariantRun", "run_ablation", "summarize", "format_table", "plot_ablation",
           "describe_base", "parse_variants"]


@dataclass(frozen=True)
class Variant:
    """One change to try: ``overrides`` are TrainConfig fields and their values."""

    name: str
    overrides: dict
    description: str


def _v(name, description, **overrides):
    return Variant(name, overrides, description)


# One line per variant. A variant that a model kind does not support is refused, naming the option,
# before anything trains (``run_ablation`` builds every variant's model first).
VARIANTS = {v.name: v for v in (
    _v("baseline", "the base options unchanged (by default the seed design's block)"),
    _v("learned-pos", "a learned position table instead of the sinusoidal one", pos_encoding="learned"),
    _v("sinusoidal-pos", "the sinusoidal position table (the train default; nt.GPTConfig's is learned)",
       pos_encoding="sinusoidal"),
    _v("gelu", "GELU in the feed-forward instead of ReLU", activation="gelu"),
    _v("relu", "ReLU in the feed-forward", activation="relu"),
    _v("pre-ln", "LayerNorm before each sub-layer (pre-LN) instead of after it", norm_first=True),
    _v("no-dropout", "dropout 0", dropout=0.0),
    _v("one-head", "a single attention head", nhead=1),
    _v("silu", "SiLU (Swish) in the feed-forward, the seed design's suggestion", activation="silu"),
    _v("relative-bias", "T5's learned relative position bias on the scores instead of a position table",
       pos_encoding="relative"),
    _v("alibi", "ALiBi's fixed linear distance bias on the scores instead of a position table", pos_encoding="alibi"),
    _v("no-pos", "no positional information at all", pos_encoding="none"),
    # gpt's options (--model gpt)
    _v("rope", "rotary embeddings of q and k instead of a position table", pos_encoding="rope"),
    _v("mqa", "multi-query attention: one key/value head shared by every head", num_kv_heads=1),
    _v("gqa", "grouped-query attention: two key/value heads", num_kv_heads=2),
    _v("rmsnorm", "RMSNorm instead of LayerNorm", norm="rmsnorm"),
    _v("swiglu", "a SwiGLU feed-forward", activation="swiglu"),
    _v("llama", "Llama's block: RMSNorm, rotary, SwiGLU, two key/value heads", norm="rmsnorm", pos_encoding="rope",
       activation="swiglu", num_kv_heads=2),
)}


def parse_variants(text):
    """``"baseline,gelu"`` -> ``[VARIANTS["baseline"], VARIANTS["gelu"]]``; an unknown or repeated name
    raises ValueError naming ``--variants`` and listing the known ones."""
    names = [n.strip() for n in str(text).split(",") if n.strip()]
    if not names:
        raise ValueError(f"--variants must name at least one variant, got {text!r}; known: {', '.join(VARIANTS)}")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise ValueError(f"--variants: unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"--variants: {', '.join(repeated)} given more than once")
    return [VARIANTS[n] for n in names]


@dataclass
class VariantRun:
    """One variant trained with one seed: the validation curve and the final figures."""

    variant: str
    seed: int
    parameters: int
    steps: list = field(default_factory=list)              # the evaluation steps
    val_loss: list = field(default_factory=list)
    val_token_accuracy: list = field(default_factory=list)
    loss: float = math.nan                                  # the final evaluation on the whole held-out set
    token_accuracy: float = math.nan
    sequence_accuracy: float = math.nan
    seconds: float = 0.0                                    # training steps only (evaluations excluded)

    def steps_to(self, threshold=0.99):
        """The first evaluation step whose held-out token accuracy reached ``threshold`` (None: never)."""
        for step, acc in zip(self.steps, self.val_token_accuracy):
            if acc >= threshold:
                return step
        return None


def _config(base, variant, seed):
    try:
        return TrainConfig(**{**base, **variant.overrides, "seed": seed})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"variant {variant.name}: {exc}") from None


def _trainer(config, variant):
    try:
        return Trainer(config)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"variant {variant.name}: {exc}") from None


def run_ablation(base, variants, repeats=1, eval_every=100, eval_examples=500, on_eval=None):
    """Train every variant on the same data, seed and budget, ``repeats`` times.

    Parameters
    ----------
    base : dict
        TrainConfig fields shared by every variant (``seed`` is the first repeat's seed; repeat r uses
        ``seed + r``).
    variants : list of Variant
    repeats : int
    eval_every : int
        Evaluate on the first ``eval_examples`` held-out examples every this many steps (the curve).
    on_eval : callable, optional
        ``on_eval(run, step)`` after each evaluation (progress output).

    Returns
    -------
    list of VariantRun
        ``repeats * len(variants)`` runs, repeat by repeat.

    Every variant's configuration and model are built before the first step, so a variant the model
    kind refuses stops the ablation at once with a ValueError naming the variant.
    """
    seed0 = int(base.get("seed", 0))
    pending = {}                                   # the first repeat's trainers, built up front
    for v in variants:
        pending[v.name] = _trainer(_config(base, v, seed0), v)
    runs = []
    for r in range(repeats):
        for v in variants:
            trainer = pending.pop(v.name) if r == 0 else _trainer(_config(base, v, seed0 + r), v)
            runs.append(_train_one(trainer, v, eval_every, eval_examples, on_eval))
    return runs


def _train_one(trainer, variant, eval_every, eval_examples, on_eval):
    c = trainer.config
    run = VariantRun(variant.name, c.seed, trainer.model.num_parameters())

    def evaluate(step):
        ev = trainer.evaluate(max_examples=eval_examples)
        run.steps.append(step)
        run.val_loss.append(ev.loss)
        run.val_token_accuracy.append(ev.token_accuracy)
        if on_eval is not None:
            on_eval(run, step)

    step = 0
    while step < c.steps:
        nxt = min(c.steps, step + eval_every)
        t0 = time.perf_counter()
        trainer.train(nxt)
        run.seconds += time.perf_counter() - t0
        step = nxt
        evaluate(step)
    final = trainer.evaluate()
    run.loss, run.token_accuracy, run.sequence_accuracy = final.loss, final.token_accuracy, final.sequence_accuracy
    return run


@dataclass
class Summary:
    """A variant's figures over its repeats: mean and standard deviation (ddof=1; 0 for one repeat)."""

    variant: str
    repeats: int
    parameters: int
    loss: tuple
    token_accuracy: tuple
    sequence_accuracy: tuple
    seconds: tuple
    steps_to_99: list          # one entry per repeat, None where 99% was never reached


def _mean_std(values):
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0


def summarize(runs):
    """One :class:`Summary` per variant, in the order the variants first appear in ``runs``."""
    order = list(dict.fromkeys(r.variant for r in runs))
    out = []
    for name in order:
        rs = [r for r in runs if r.variant == name]
        out.append(Summary(name, len(rs), rs[0].parameters, _mean_std([r.loss for r in rs]),
                           _mean_std([r.token_accuracy for r in rs]), _mean_std([r.sequence_accuracy for r in rs]),
                           _mean_std([r.seconds for r in rs]), [r.steps_to(0.99) for r in rs]))
    return out


def _pm(mean_std, fmt, scale=1.0, repeats=1):
    m, s = mean_std
    return format(m * scale, fmt) if repeats == 1 else f"{format(m * scale, fmt)} ± {format(s * scale, fmt)}"


def _steps_cell(steps):
    reached = [s for s in steps if s is not None]
    if len(steps) == 1:
        return "never" if not reached else str(reached[0])
    if not reached:
        return f"never (0/{len(steps)})"
    return f"{int(np.median(reached))} ({len(reached)}/{len(steps)})"


def format_table(runs, sequence_name="seq acc"):
    """The ablation table, one row per variant (mean ± std over the repeats when there are several).

    Columns: parameters, final held-out loss, token and sequence accuracy (``sequence_name``: "exact"
    for the generated sequences of seq2seq and gpt), the steps until the held-out token accuracy first
    reached 99% at an evaluation (median over the repeats that reached it, and how many did), and the
    training wall time (evaluations excluded).
    """
    sums = summarize(runs)
    k = sums[0].repeats if sums else 1
    head = ["variant", "params", "val loss", "token acc %", f"{sequence_name} %", "steps to 99%", "train s"]
    rows = [[s.variant, f"{s.parameters:,}", _pm(s.loss, ".4f", repeats=k), _pm(s.token_accuracy, ".2f", 100, k),
             _pm(s.sequence_accuracy, ".2f", 100, k), _steps_cell(s.steps_to_99), _pm(s.seconds, ".1f", repeats=k)]
            for s in sums]
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "  ".join(str(x).ljust(w) if i == 0 else str(x).rjust(w)   # noqa: E731
                               for i, (x, w) in enumerate(zip(r, widths)))
    return "\n".join([line(head), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def describe_base(base=None):
    """``task shift, encoder model (d_model 128, 2 layers), 1000 steps``: what an ablation's variants
    share, from its base options (``TrainConfig`` fields; the defaults fill in what is not given)."""
    c = TrainConfig(**(base or {}))
    return (f"task {c.task}, {c.model} model (d_model {c.d_model}, {c.num_layers} layers), "
            f"{c.steps} steps")


def plot_ablation(runs, out=None, title=None, base=None, ax=None, fig=None):
    """Every variant's held-out loss (log scale) and token accuracy against the step; with several
    repeats, the mean line and a band from the lowest to the highest repeat. The title names the task
    and the model (from ``base``, the options every variant shares: :func:`describe_base`); the dashed
    line of the accuracy panel is the 99% that ``steps to 99%`` counts, labelled in its legend.

    Parameters
    ----------
    runs : list of VariantRun
        What :func:`run_ablation` returns.
    out : str, optional
        A file to write; nothing is written without it.
    base : dict, optional
        The base options the runs were trained with (``run_ablation``'s ``base``); default the
        ``TrainConfig`` defaults.
    ax : two Axes, optional
        ``[loss, accuracy]``; default a new Figure (``fig``: a Figure to add them to).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .figures import finish, panels
    fig, (ax_loss, ax_acc) = panels(2, ax, fig, figsize=(12, 4.8), ncols=2, what="loss and accuracy")
    for i, name in enumerate(dict.fromkeys(r.variant for r in runs)):
        rs = [r for r in runs if r.variant == name]
        steps = np.asarray(rs[0].steps)
        color = f"C{i % 10}"
        for ax, key in ((ax_loss, "val_loss"), (ax_acc, "val_token_accuracy")):
            values = np.asarray([getattr(r, key) for r in rs], dtype=np.float64)        # (K, evaluations)
            if key == "val_token_accuracy":
                values = 100 * values
            ax.plot(steps, values.mean(axis=0), color=color, label=f"{name}" + (f" ({len(rs)} seeds)" if len(rs) > 1
                                                                                 else ""))
            if len(rs) > 1:
                ax.fill_between(steps, values.min(axis=0), values.max(axis=0), color=color, alpha=0.15, lw=0)
    ax_loss.set_yscale("log")
    ax_loss.set_ylabel("held-out loss")
    ax_acc.set_ylabel("held-out token accuracy (%)")
    ax_acc.axhline(99, color="grey", lw=0.8, ls="--", label="99% (the table's steps to 99%)")
    for ax in (ax_loss, ax_acc):
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    ax_acc.legend(fontsize=8, loc="lower right")
    fig.suptitle(title or f"ablation, held-out curves: {describe_base(base)}")
    return finish(fig, out)


def runs_to_dict(runs):
    """The runs as plain JSON-able dicts (``ablate --json``)."""
    return [dataclasses.asdict(r) for r in runs]
