"""Every plotting function returns its matplotlib Figure with the expected artists, draws into the
Axes given as ``ax=``, and writes a file only when ``out=`` is given; several logs overlay on shared
axes; the ablation figure names its task and model and labels its 99% line; the positional plot's
legend sits outside its curves."""

import os

import numpy as np
import pytest
from test_plots import PNG_SIGNATURE, needs_matplotlib

from numpy_transformer.cli import main
from numpy_transformer.study import plot_positions as P
from numpy_transformer.study.ablation import VariantRun, plot_ablation
from numpy_transformer.study.plot_gradients import plot_gradients
from numpy_transformer.study.plotting import (
    plot_attention,
    plot_attention_grid,
    plot_positional,
    plot_training,
    position_labels,
)

pytestmark = needs_matplotlib


def training_log(seed, steps=40, norm_first=False):
    rng = np.random.default_rng(seed)
    log = [{"kind": "start", "config": {"task": "shift", "norm_first": norm_first}}]
    for s in range(1, steps + 1):
        log.append({"kind": "train", "step": s, "loss": 3.0 / s + rng.random() * 0.1,
                    "accuracy": min(1.0, s / steps), "lr": 1e-3})
        if s % 10 == 0:
            log.append({"kind": "val", "step": s, "loss": 3.0 / s, "token_accuracy": s / steps,
                        "sequence_accuracy": s / steps / 2})
            layers = [f"encoder.layers.{i}" for i in range(3)]
            log.append({"kind": "trace", "step": s,
                        "param_grad_norms": {n: float(rng.random() + 0.1) for n in layers},
                        "grad_norms": {n: float(rng.random() + 0.1) for n in layers}})
    return log


def new_axes(n, ncols=1):
    from numpy_transformer.study.figures import figure
    fig = figure()
    return fig, fig.subplots(-(-n // ncols), ncols, squeeze=False).ravel()[:n]


def weights(shape, seed=0):
    return np.random.default_rng(seed).dirichlet(np.ones(shape[-1]), size=shape[:-1])


def ablation_runs():
    return [VariantRun(variant=name, seed=0, parameters=10, steps=[5, 10], val_loss=[1.0, 0.5],
                       val_token_accuracy=[0.5, acc]) for name, acc in (("baseline", 0.995), ("no-pos", 0.6))]


CASES = {   # name: (draw(out, ax), how many Axes it draws into, a check of the figure it returns)
    "attention": (lambda out, ax: plot_attention(weights((3, 4, 5)), out=out, ax=ax), 3,
                  lambda fig: sum(len(a.images) for a in fig.axes) == 3
                  and [a.get_title() for a in fig.axes[:3]] == ["head 0", "head 1", "head 2"]),
    "attention_grid": (lambda out, ax: plot_attention_grid(weights((2, 3, 4, 4)), out=out, ax=ax,
                                                           query_labels=position_labels("abcd")), 6,
                       lambda fig: sum(len(a.images) for a in fig.axes) == 6
                       and [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["0:a", "1:b", "2:c", "3:d"]
                       and fig.axes[3].get_ylabel() == "layer 1: query"),
    "positional": (lambda out, ax: plot_positional(np.random.default_rng(0).normal(size=(30, 16)), out=out, ax=ax,
                                                   dims=[0, 1, 5]), 2,
                   lambda fig: len(fig.axes[0].images) == 1 and len(fig.axes[1].lines) == 4),   # 3 dims + zero line
    "training": (lambda out, ax: plot_training(training_log(0), out=out, ax=ax), 3,
                 lambda fig: [a.get_ylabel() for a in fig.axes[:3]] == ["cross-entropy loss", "accuracy (%)",
                                                                        "learning rate"]
                 and len(fig.axes[0].lines) == 3 and len(fig.axes[1].lines) == 4),
    "gradients": (lambda out, ax: plot_gradients(training_log(0), out=out, ax=ax), 3,
                  lambda fig: len(fig.axes[0].lines) == 4 and len(fig.axes[2].lines) == 3),   # 4 traced steps, 3 layers
    "ablation": (lambda out, ax: plot_ablation(ablation_runs(), out=out, ax=ax), 2,
                 lambda fig: len(fig.axes[0].lines) == 2 and len(fig.axes[1].lines) == 3),     # + the 99% line
    "rope": (lambda out, ax: P.plot_rope(out=out, head_dim=8, max_len=20, ax=ax), 2,
             lambda fig: len(fig.axes[0].images) == 1 and len(fig.axes[1].lines) == 2),
    "alibi": (lambda out, ax: P.plot_alibi(out=out, num_heads=4, max_len=8, ax=ax), 5,
              lambda fig: sum(len(a.images) for a in fig.axes) == 4 and len(fig.axes[4].patches) == 4),
    "relative": (lambda out, ax: P.plot_relative(out=out, num_buckets=8, max_distance=16, ax=ax,
                                                 weight=np.ones((8, 2))), 2,
                 lambda fig: len(fig.axes[0].lines) == 1 and len(fig.axes[1].lines) == 2),
    "learned": (lambda out, ax: P.plot_learned(np.random.default_rng(0).normal(size=(10, 6)), out=out, ax=ax), 2,
                lambda fig: len(fig.axes[0].images) == 1 and len(fig.axes[1].images) == 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_returns_its_figure_and_writes_only_when_out_is_given(name, tmp_path, monkeypatch):
    from matplotlib.figure import Figure
    draw, n, check = CASES[name]
    monkeypatch.chdir(tmp_path)
    fig = draw(None, None)
    assert isinstance(fig, Figure) and check(fig)
    assert os.listdir(tmp_path) == []                                   # no out: no file anywhere
    out = tmp_path / "sub" / f"{name}.png"
    assert isinstance(draw(str(out), None), Figure)
    assert out.read_bytes()[:8] == PNG_SIGNATURE


@pytest.mark.parametrize("name", list(CASES))
def test_draws_into_the_given_axes(name):
    draw, n, check = CASES[name]
    mine, axes = new_axes(n)
    fig = draw(None, axes)
    assert fig is mine and check(fig)
    assert all(a.has_data() for a in axes)                              # every given Axes drawn into


def test_too_few_axes_and_a_wrong_ax_are_refused():
    _, axes = new_axes(2)
    with pytest.raises(ValueError, match=r"ax: this figure draws 3 panels .* needs 3 Axes; got 2"):
        plot_attention(weights((3, 4, 4)), ax=axes)
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes or a list/array of them, got str"):
        plot_training(training_log(0), ax=["loss", "acc", "lr"])


def test_fig_adds_the_panels_to_a_given_figure():
    from numpy_transformer.study.figures import figure
    mine = figure()
    assert plot_attention_grid(weights((2, 2, 3, 3)), fig=mine) is mine and len(mine.axes) == 5   # + colour bar


# -- several logs on shared axes ------------------------------------------------------------------------

def test_training_overlays_several_logs_with_a_legend():
    fig = plot_training([training_log(0), training_log(1, steps=60)], labels=["pre-LN", "post-LN"])
    ax_loss, ax_acc, ax_lr = fig.axes[:3]
    legend = [t.get_text() for t in ax_loss.get_legend().get_texts()]
    assert any(t.startswith("pre-LN: train") for t in legend) and any(t.startswith("post-LN: validation")
                                                                     for t in legend)
    assert len(ax_loss.lines) == 2 * 3 and len(ax_lr.lines) == 2                 # both runs on the same axes
    assert ax_loss.get_xlim()[1] >= 60 and [t.get_text() for t in ax_lr.get_legend().get_texts()] == ["pre-LN",
                                                                                                    "post-LN"]
    with pytest.raises(ValueError, match=r"labels: 1 label\(s\) for 2 log\(s\)"):
        plot_training([training_log(0), training_log(1)], labels=["one"])


def test_gradients_overlay_several_logs_with_a_legend():
    fig = plot_gradients([training_log(0), training_log(1)], labels=["pre-LN", "post-LN"])
    ax_p, ax_i, ax_t = fig.axes[:3]
    for a in (ax_p, ax_i, ax_t):
        texts = [t.get_text() for t in a.get_legend().get_texts()]
        assert len(a.lines) == 4 and sum(t.startswith("pre-LN") for t in texts) == 2, texts


def test_cli_overlays_logs_and_refuses_a_label_count(tmp_path, capsys):
    import json
    paths = []
    for k, name in enumerate(("pre.log.jsonl", "post.log.jsonl")):
        paths.append(tmp_path / name)
        paths[-1].write_text("".join(json.dumps(e) + "\n" for e in training_log(k)))
    for what in ("training", "gradients"):
        out = tmp_path / f"{what}.png"
        assert main(["plot", what, *map(str, paths), "--labels", "pre-LN", "post-LN", "--out", str(out)]) == 0
        assert capsys.readouterr().out.strip() == f"wrote {out}" and out.read_bytes()[:8] == PNG_SIGNATURE
        assert main(["plot", what, *map(str, paths), "--labels", "pre-LN", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err == "error: --labels: 1 label(s) for 2 log(s); give one per log\n"


# -- the ablation's names and the positional legend -----------------------------------------------------

def test_ablation_names_its_task_and_model_and_labels_its_99_line():
    fig = plot_ablation(ablation_runs(), base={"task": "reverse", "model": "encoder", "steps": 10})
    title = fig._suptitle.get_text()
    assert "task reverse" in title and "encoder model" in title and "10 steps" in title
    acc = fig.axes[1]
    line99 = [ln for ln in acc.lines if list(ln.get_ydata()) == [99, 99]]
    assert len(line99) == 1 and "99%" in line99[0].get_label()
    assert "99%" in " ".join(t.get_text() for t in acc.get_legend().get_texts())


def test_positional_legend_sits_outside_the_curves():
    fig = plot_positional(np.random.default_rng(0).normal(size=(50, 64)))
    fig.canvas.draw()
    curves = fig.axes[1]
    box, area = curves.get_legend().get_window_extent(), curves.get_window_extent()
    assert box.x0 >= area.x1 - 1e-6, (box, area)                     # right of the axes: hides no curve
