"""``train --trace-every N`` logs each traced step's gradient norms by layer, equal to the norms of
the step's own gradients; ``plot gradients LOG`` draws them (a real PNG), and refuses in one line."""

import json

import numpy as np
import pytest
from test_plots import PNG_SIGNATURE, TINY, needs_matplotlib

from numpy_transformer.cli import main
from numpy_transformer.study.plot_gradients import NO_NORMS, gradient_norms
from numpy_transformer.training.trainer import TrainConfig, Trainer


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("grads")
    for name, extra in (("post", []), ("pre", ["--norm-first"])):
        assert main(TINY + ["--layers", "3", "--steps", "6", "--trace-every", "2", *extra,
                            "--save", str(d / f"{name}.npz")]) == 0
    assert main(TINY + ["--steps", "2", "--save", str(d / "plain.npz")]) == 0
    return d


def test_trace_lines_log_the_norms_by_layer(logs):
    rows = [json.loads(line) for line in open(logs / "post.log.jsonl")]
    traces = [r for r in rows if r["kind"] == "trace"]
    assert [r["step"] for r in traces] == [2, 4, 6]
    for r in traces:
        assert list(r["param_grad_norms"]) == [f"encoder.layers.{i}" for i in range(3)]
        assert list(r["grad_norms"]) == [f"encoder.layers.{i}" for i in range(3)]
        assert all(v > 0 for v in r["param_grad_norms"].values())
    steps, names, norms = gradient_norms(rows)
    assert steps.tolist() == [2, 4, 6] and norms.shape == (3, 3)


def test_logged_norms_are_the_steps_own_gradients():
    """The by-layer norms equal the norms computed directly from the parameters' .grad after the step's
    backward (the trace's parameter records are taken before the optimizer step and any clipping)."""
    tr = Trainer(TrainConfig(steps=3, num_layers=3, d_model=16, nhead=2, dim_feedforward=32, batch_size=4,
                             clip=1e9, dtype="float64"))
    r = tr.train_step(trace=True)
    got = r.trace.layer_param_grad_norms()
    model = tr.model
    for i in range(3):
        grads = [p.grad for n, p in model.named_parameters() if n.startswith(f"encoder.layers.{i}.")]
        want = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
        assert got[f"encoder.layers.{i}"] == pytest.approx(want, rel=1e-12)
    total = np.sqrt(sum(v ** 2 for v in got.values()))
    assert total <= r.grad_norm * (1 + 1e-9)                   # the layers are part of the whole model


@needs_matplotlib
@pytest.mark.parametrize("name", ["post", "pre"])
def test_plot_gradients_writes_a_picture(logs, tmp_path, capsys, name):
    out = tmp_path / f"{name}.png"
    assert main(["plot", "gradients", str(logs / f"{name}.log.jsonl"), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    from matplotlib import image
    assert out.read_bytes()[:8] == PNG_SIGNATURE and out.stat().st_size > 30_000
    img = image.imread(str(out))                                     # (H, W, 4) floats in [0, 1]
    assert img.shape[0] > 800 and img.shape[1] > 800
    rgb = (img[..., :3] * 255).astype(np.int64)
    codes = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    assert len(np.unique(codes)) > 200                               # lines coloured by step, colour bars
    assert np.mean(codes != 0xFFFFFF) > 0.04                         # line plots: little ink, but not blank


@needs_matplotlib
def test_plot_gradients_refusals_are_one_line(logs, tmp_path, capsys):
    for log, msg in ((logs / "plain.log.jsonl", NO_NORMS), (tmp_path / "missing.jsonl", "does not exist")):
        assert main(["plot", "gradients", str(log), "--out", str(tmp_path / "x.png")]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.png").exists()
