"""``plot attention|positional|training`` write real, non-trivial PNGs; the attention weights drawn are
the model's own (checked against torch.nn.MultiheadAttention); without matplotlib a clear message and
exit status 2."""

import importlib.util
import sys

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer.cli import main
from numpy_transformer.plotting import attention_weights, smooth, token_labels

needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="matplotlib not installed (the plot extra)")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TINY = ["train", "--task", "reverse", "--vocab-size", "12", "--seq-len", "7", "--num-train", "200",
        "--num-val", "40", "--d-model", "16", "--nhead", "4", "--layers", "2", "--dim-feedforward", "32",
        "--batch-size", "8", "--warmup", "4", "--eval-every", "3", "--quiet"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny trained run: checkpoint + log (resumed once, so the log has a resume marker)."""
    d = tmp_path_factory.mktemp("run")
    ckpt = d / "run.npz"
    assert main(TINY + ["--steps", "6", "--save", str(ckpt)]) == 0
    assert main(["train", "--resume", str(ckpt), "--steps", "9", "--eval-every", "3", "--quiet"]) == 0
    learned = d / "learned.npz"
    assert main(TINY + ["--steps", "2", "--pos-encoding", "learned", "--save", str(learned)]) == 0
    return d


def assert_picture(path, min_colours=40, min_bytes=15_000):
    """A PNG that decodes, is not tiny, and is not blank (many distinct colours, much non-white ink)."""
    from matplotlib import image
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > min_bytes, len(data)
    img = image.imread(str(path))                              # (H, W, 3 or 4) floats in [0, 1]
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 300
    rgb = (img[..., :3] * 255).astype(np.int64)
    codes = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    assert len(np.unique(codes)) >= min_colours
    ink = np.mean(codes != 0xFFFFFF)
    assert ink > 0.1, f"only {ink:.1%} of the picture is not white"


# -- attention -------------------------------------------------------------------------------------------

@needs_matplotlib
def test_plot_attention_given_tokens(run, tmp_path, capsys):
    out = tmp_path / "att.png"
    assert main(["plot", "attention", str(run / "run.npz"), "--tokens", "5 9 3 7 2 11 4", "--layer", "1",
                 "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert_picture(out)


@needs_matplotlib
def test_plot_attention_random_held_out_example(run, tmp_path, capsys):
    out = tmp_path / "sub" / "att.png"
    assert main(["plot", "attention", str(run / "run.npz"), "--random", "--seed", "0", "--layer", "-1",
                 "--out", str(out)]) == 0
    assert "held-out example" in capsys.readouterr().out
    assert_picture(out)


def test_attention_weights_are_the_models_own():
    """Per head, rows sum to 1, equal torch.nn.MultiheadAttention's weights on the same layer inputs,
    and capturing them changes neither the output nor the module."""
    torch = pytest.importorskip("torch")
    from reference_torch.model import to_torch
    model = nt.TransformerModel(vocab_size=12, d_model=16, nhead=4, num_layers=2, dim_feedforward=32,
                                dropout=0.1, max_len=7, norm_first=True, dtype=np.float64, seed=0)
    ids = np.random.default_rng(0).integers(0, 12, size=(2, 7))
    model.eval()
    before = model(ids)
    model.train()
    weights = attention_weights(model, ids)
    assert model.training                                       # mode restored
    assert all("forward" not in layer.self_attn.__dict__ for layer in model.encoder.layers)
    model.eval()
    assert np.array_equal(model(ids), before)
    assert [w.shape for w in weights] == [(2, 4, 7, 7)] * 2
    for w in weights:
        np.testing.assert_allclose(w.sum(-1), 1.0, rtol=0, atol=1e-12)

    twin = to_torch(model).eval()
    inputs = []
    hooks = [layer.self_attn.register_forward_pre_hook(lambda m, args: inputs.append(args[0]))
             for layer in twin.encoder.layers]
    twin(ids)                                                   # grad enabled: torch's slow path calls self_attn
    for h in hooks:
        h.remove()
    assert len(inputs) == 2
    for layer, x, ours in zip(twin.encoder.layers, inputs, weights):
        with torch.no_grad():
            _, ref = layer.self_attn(x, x, x, need_weights=True, average_attn_weights=False)
        np.testing.assert_allclose(ours, ref.numpy(), rtol=1e-10, atol=1e-13)


def test_token_labels_and_smooth():
    assert token_labels([0, 1, 7]) == ["PAD", "EOS", "7"]
    np.testing.assert_allclose(smooth([1, 2, 3, 4], 2), [1, 1.5, 2.5, 3.5])
    np.testing.assert_allclose(smooth([1, 2, 3], 1), [1, 2, 3])


# -- positional ------------------------------------------------------------------------------------------

@needs_matplotlib
def test_plot_positional(tmp_path):
    out = tmp_path / "pos.png"
    assert main(["plot", "positional", "--d-model", "64", "--max-len", "50", "--out", str(out)]) == 0
    assert_picture(out, min_colours=200)


@needs_matplotlib
def test_plot_positional_of_a_checkpoint(run, tmp_path):
    for name in ("learned", "run"):
        out = tmp_path / f"{name}.png"
        assert main(["plot", "positional", "--checkpoint", str(run / f"{name}.npz"), "--dims", "0", "3",
                     "--out", str(out)]) == 0
        assert_picture(out)


# -- training --------------------------------------------------------------------------------------------

@needs_matplotlib
def test_plot_training(run, tmp_path):
    out = tmp_path / "train.png"
    assert main(["plot", "training", str(run / "run.log.jsonl"), "--out", str(out)]) == 0
    assert_picture(out)


# -- errors ----------------------------------------------------------------------------------------------

def test_plot_attention_and_predict_take_the_same_tokens(run, tmp_path, capsys):
    """One validator: what predict refuses, plot attention refuses with the same words (no silent plot)."""
    for tokens in ("3 4 5", "5 99 3 7 2 11 4", "5 x 3 7 2 11 4"):
        assert main(["predict", str(run / "run.npz"), "--tokens", tokens]) == 2
        refused = capsys.readouterr().err
        assert main(["plot", "attention", str(run / "run.npz"), "--tokens", tokens,
                     "--out", str(tmp_path / "x.png")]) == 2
        assert capsys.readouterr().err == refused and refused.startswith("error: --tokens")
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("argv,msg", [
    (["attention", "{run}/run.npz", "--tokens", "5 x"], "--tokens must be integers"),
    (["attention", "{run}/run.npz", "--tokens", "5 99 3 7 2 11 4"], "token ids must lie in [0, 12), got 99"),
    (["attention", "{run}/run.npz", "--tokens", "1 2 3 4 5 6 7 8"], "the model was trained on length 7; got 8"),
    (["attention", "{run}/run.npz", "--tokens", "3 4 5"], "the model was trained on length 7; got 3"),
    (["attention", "{run}/run.npz", "--layer", "2"], "--layer must be in [0, 2)"),
    (["attention", "{run}/missing.npz"], "does not exist"),
    (["positional", "--d-model", "0"], "--d-model must be positive"),
    (["positional", "--dims", "130"], "dimensions must lie in [0, 128)"),
    (["training", "{run}/missing.jsonl"], "does not exist"),
    (["training", "{run}/run.npz"], "no training entries"),
])
def test_plot_errors(run, tmp_path, capsys, argv, msg):
    out = tmp_path / "x.png"
    argv = [a.replace("{run}", str(run)) for a in argv]
    assert main(["plot"] + argv + ["--out", str(out)]) == 2
    assert msg in capsys.readouterr().err
    assert not out.exists()


def test_matplotlib_missing(run, tmp_path, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)          # "import matplotlib..." now raises ImportError
    for argv in (["positional"], ["training", str(run / "run.log.jsonl")],
                 ["attention", str(run / "run.npz"), "--tokens", "3 4 5 6 7 8 9"]):
        out = tmp_path / "x.png"
        assert main(["plot"] + argv + ["--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "matplotlib" in err and "pip install matplotlib" in err and ".[plot]" in err
        assert not out.exists()
