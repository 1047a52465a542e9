"""The mixed-precision study's probes measure what docs/mixed-precision.md says they measure; its command
writes its JSON first (and the figure only with matplotlib), and Ctrl-C stops it with one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import numpy as np
import pytest
from _paths import REPO_ROOT

from numpy_transformer.study import mixed_precision as study


def test_float16_layer_norm_breaks_where_the_squares_overflow_and_float32_does_not():
    sweep = study.layer_norm_error_vs_scale(scales=[1e-4, 1.0, 30.0, 300.0], rows=64)
    f16, f32 = sweep["float16"], sweep["float32"]
    assert max(f32) < 1e-6                                  # float32: fine across float16's whole range
    assert f16[1] < 5e-3 and f16[2] < 5e-3                  # float16: its rounding, while (x - mean)^2 fits
    assert f16[3] > 0.5 and sweep["sq_overflow"][3] > 0.3   # std 300: squares > 65504 -> inf -> garbage
    assert sweep["sq_overflow"][:3] == [0.0, 0.0, 0.0]
    assert sweep["sq_underflow"][0] > 0.5 and f16[0] < 5e-3  # tiny squares flush, but eps dominates there


def test_loss_scaling_keeps_the_gradients_float16_would_flush():
    r = study.train("float32", steps=30, d_model=16, dim_feedforward=32, num_layers=1, lr=1e-2)
    src, tgt = r["data"].train_src[:128], r["data"].train_tgt[:128]
    g = study.gradient_underflow(r["model"], src, tgt)
    u, s = g["unscaled"], g["scaled"]
    # (p - y) / N over N = 1024 tokens: most entries below float16's smallest normal 6.1e-5
    assert u["dlogits_subnormal"] > 0.1 and s["dlogits_subnormal"] == 0.0 and s["dlogits_flushed"] == 0.0
    assert u["grad_error"] > 0.1                            # unscaled: the backward's gradients underflow
    assert s["finite"] and s["grad_error"] < 2e-2


@pytest.mark.parametrize("mode", study.MODES)
def test_each_mode_trains(mode):
    r = study.train(mode, steps=4, d_model=16, dim_feedforward=32, num_layers=1)
    assert len(r["loss"]) == 4 and np.isfinite(r["loss"]).all() and 0 <= r["val_accuracy"] <= 1
    assert set(r["norm_inputs"]) == {"encoder.layers.0.norm1", "encoder.layers.0.norm2"}
    if mode == "float32":
        assert r["skipped"] == 0 and set(r["scale"]) == {1.0}


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        study.train("bfloat16")


def test_the_study_writes_its_figure_and_figures(tmp_path):
    pytest.importorskip("matplotlib")
    small = dict(steps=3, d_model=16, dim_feedforward=32, num_layers=1)
    runs = [study.train(m, **small) for m in study.MODES]
    sweep = study.layer_norm_error_vs_scale(scales=[1.0, 300.0], rows=8)
    grads = study.gradient_underflow(runs[0]["model"], runs[0]["data"].train_src[:16], runs[0]["data"].train_tgt[:16])
    fig = study.plot(runs, sweep, grads, out=tmp_path / "mp.png")
    assert (tmp_path / "mp.png").stat().st_size > 10000
    assert len(fig.axes) == 4 and len(fig.axes[0].lines) == len(study.MODES)    # 3 panels + the twin axis


def _small(monkeypatch):
    """The command's pieces on a tiny model, so that ``study.main`` runs in a second."""
    real_train, real_sweep = study.train, study.layer_norm_error_vs_scale
    monkeypatch.setattr(study, "train", lambda mode, **kw: real_train(mode, **kw, d_model=16, dim_feedforward=32,
                                                                      num_layers=1))
    monkeypatch.setattr(study, "layer_norm_error_vs_scale", lambda: real_sweep(scales=[1.0, 300.0], rows=8))


def test_without_matplotlib_the_study_writes_its_json_and_says_so(tmp_path, monkeypatch, capsys):
    _small(monkeypatch)
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)                # import matplotlib -> ImportError
    summary = study.main(["--steps", "2", "--out", str(tmp_path)])
    assert json.loads((tmp_path / "mixed_precision.json").read_text()) == json.loads(json.dumps(summary))
    assert [r["mode"] for r in summary["runs"]] == list(study.MODES)
    assert not (tmp_path / "mixed_precision.png").exists()
    out, err = capsys.readouterr()
    assert out.endswith(f"wrote {tmp_path / 'mixed_precision.json'}\n")
    assert err.splitlines()[-1] == ("no figure: plotting needs matplotlib, which is not installed: pip install "
                                    'matplotlib (or pip install -e ".[plot]" in the checkout)')


@pytest.mark.parametrize("where", ["training", "plotting"])
def test_ctrl_c_in_the_study_is_one_line_and_status_130(tmp_path, monkeypatch, capsys, where):
    _small(monkeypatch)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(study, "train" if where == "training" else "plot", interrupted)
    with pytest.raises(SystemExit) as exit_:
        study.main(["--steps", "2", "--out", str(tmp_path)])
    assert exit_.value.code == 130
    said = "nothing written" if where == "training" else (f"{tmp_path / 'mixed_precision.json'} is written, the "
                                                          "figure is not")
    assert capsys.readouterr().err.splitlines()[-1] == f"interrupted; the study stopped ({said})"
    assert (tmp_path / "mixed_precision.json").exists() == (where == "plotting")


def test_a_real_ctrl_c_during_training_prints_no_traceback(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "numpy_transformer.study.mixed_precision", "--steps", "1000000",
                             "--out", str(tmp_path)], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = proc.stderr.readline()                              # training has started
        assert first == "training float32 (1000000 steps) ...\n", first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (130, "", "interrupted; the study stopped (nothing written)\n")
    assert not any(tmp_path.iterdir())
