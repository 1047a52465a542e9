"""``plot attention|positional|training`` write real, non-trivial PNGs; the attention weights drawn are
the model's own (checked against torch.nn.MultiheadAttention); without matplotlib a clear message and
exit status 2."""

import importlib.util
import sys

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer.cli import main
from numpy_transformer.study.plotting import attention_weights, smooth, token_labels

needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="matplotlib not installed (the plot extra)")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TINY = ["train", "--task", "reverse", "--vocab-size", "12", "--seq-len", "7", "--num-train", "200",
        "--num-val", "40", "--d-model", "16", "--nhead", "4", "--layers", "2", "--dim-feedforward", "32",
        "--batch-size", "8", "--warmup", "4", "--eval-every", "3", "--quiet"]
SMALL = ["--d-model", "16", "--nhead", "4", "--layers", "2", "--dim-feedforward", "32", "--batch-size", "8",
         "--warmup", "4", "--eval-every", "4", "--num-train", "200", "--num-val", "40", "--quiet"]
TINY_S2S = ["train", "--model", "seq2seq", "--task", "translate", "--vocab-size", "12", "--seq-len", "6",
            "--dtype", "float64"] + SMALL
TINY_GPT = ["train", "--model", "gpt", "--digits", "2", "--dtype", "float64"] + SMALL


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny trained run: checkpoint + log (resumed once, so the log has a resume marker)."""
    d = tmp_path_factory.mktemp("run")
    ckpt = d / "run.npz"
    assert main(TINY + ["--steps", "6", "--save", str(ckpt)]) == 0
    assert main(["train", "--resume", str(ckpt), "--steps", "9", "--eval-every", "3", "--quiet"]) == 0
    learned = d / "learned.npz"
    assert main(TINY + ["--steps", "2", "--pos-encoding", "learned", "--save", str(learned)]) == 0
    assert main(TINY_S2S + ["--steps", "4", "--save", str(d / "s2s.npz")]) == 0
    assert main(TINY_GPT + ["--steps", "4", "--save", str(d / "gpt.npz")]) == 0
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
    from reference_torch.models.encoder import to_torch
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


# -- attention of the decoders: seq2seq cross- and self-attention, GPT's causal self-attention -------------

DECODER_CASES = [("s2s.npz", ["--which", "cross"], "cross"), ("s2s.npz", [], "cross"),
                 ("s2s.npz", ["--which", "self"], "self"), ("gpt.npz", [], "self")]


@needs_matplotlib
@pytest.mark.parametrize("ckpt,extra,which", DECODER_CASES)
def test_plot_attention_decoders_write_pngs(run, tmp_path, capsys, ckpt, extra, which):
    out = tmp_path / "att.png"
    tokens = "12+34" if ckpt == "gpt.npz" else "4 8 6 4"
    assert main(["plot", "attention", str(run / ckpt), "--tokens", tokens, "--layer", "1", "--out", str(out)]
                + extra) == 0
    text = capsys.readouterr().out
    assert f"wrote {out}" in text and ("greedy answer" in text or "greedy target" in text)
    assert_picture(out, min_bytes=10_000)


def _torch_weights(call):
    """Per-head weights of torch.nn.MultiheadAttention (our module's weights copied) on the inputs and
    masks our module was called with; a causal hint without a mask becomes torch's bool causal mask."""
    import warnings

    import torch

    from reference_torch.table import torch_module
    attn, (q, k, v), kw = call
    tm = torch_module(attn, "torch.nn").eval()
    mask = kw.get("attn_mask")
    if mask is None and kw.get("is_causal"):
        mask = np.triu(np.ones((q.shape[1], k.shape[1]), dtype=bool), 1)
    kpm = kw.get("key_padding_mask")
    t = lambda a: None if a is None else torch.from_numpy(np.array(a))        # noqa: E731
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")                # torch: mismatched bool / float mask types
        _, w = tm(t(q), t(k), t(v), key_padding_mask=t(kpm), attn_mask=t(mask), need_weights=True,
                  average_attn_weights=False)
    return w.numpy()                                                            # (B, H, S, T)


@pytest.mark.parametrize("ckpt,extra,which", DECODER_CASES + [("run.npz", [], "self")])
@pytest.mark.parametrize("source", [["--random", "--seed", "3"], ["--tokens", None]])
def test_plot_attention_draws_the_weights_the_model_computed(run, tmp_path, capsys, monkeypatch, ckpt, extra,
                                                            which, source):
    """The weights handed to the drawing are those the model's own attention computed in its forward
    (recorded at the module's call) and equal torch.nn.MultiheadAttention's on the same inputs: rows
    sum to 1 (padding columns dropped), and causal self-attention is zero above the diagonal."""
    pytest.importorskip("torch")
    import numpy_transformer.study.plotting as plotting
    tokens = {"s2s.npz": "4 8 6 4", "gpt.npz": "12+34", "run.npz": "5 9 3 7 2 11 4"}[ckpt]
    source = [a if a is not None else tokens for a in source]
    calls, drawn = [], {}
    original = nt.MultiheadAttention.forward

    def recording(self, query, key, value, **kw):
        if kw.get("need_weights") and not kw.get("average_attn_weights", True):
            calls.append((self, (query, key, value), dict(kw)))      # the calls capture_attention makes
        return original(self, query, key, value, **kw)

    def draw(weights, out, rows, cols, **kw):
        drawn.update(weights=np.array(weights), rows=rows, cols=cols, **kw)
        return out
    monkeypatch.setattr(nt.MultiheadAttention, "forward", recording)
    monkeypatch.setattr(plotting, "plot_attention", draw)
    assert main(["plot", "attention", str(run / ckpt), "--layer", "1", "--out", str(tmp_path / "x.png")]
                + source + extra) == 0
    capsys.readouterr()
    w = drawn["weights"]                                                        # (H, S, T)
    assert len(calls) == 2                                                      # one per layer, one forward
    ref = _torch_weights(calls[1])[0]                                           # (H, S_full, T_full)
    h, s, t = w.shape
    assert h == 4 and (len(drawn["rows"]), len(drawn["cols"])) == (s, t)
    tol = 1e-10 if w.dtype == np.float64 else 1e-5                             # run.npz is float32
    assert w.dtype == (np.float32 if ckpt == "run.npz" else np.float64)
    np.testing.assert_allclose(w, ref[:, :s, :t], rtol=tol, atol=tol / 100)
    np.testing.assert_allclose(ref[:, :s, t:], 0.0, atol=0)                     # only padding was dropped
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=0, atol=tol / 10)
    if which == "self" and ckpt != "run.npz":
        assert s == t
        assert np.all(w[:, np.triu_indices(s, 1)[0], np.triu_indices(s, 1)[1]] == 0)
        assert np.all(w[:, np.arange(s), np.arange(s)] > 0)
    if ckpt == "s2s.npz":
        assert drawn["query_name"] == "target token"
        if which == "cross":
            assert drawn["key_name"] == "source token"
            assert all(c in ("noun", "adj", "verb", "not") or c.rstrip("0123456789") in ("noun", "adj", "verb")
                       for c in drawn["cols"])                               # translate's words
            if source[0] == "--tokens":
                assert drawn["cols"] == ["noun1", "verb0", "adj0", "noun1"]
        else:
            assert drawn["cols"][0] == "BOS" and drawn["cols"][1:] == drawn["rows"][:-1]
    if ckpt == "gpt.npz" and source[0] == "--tokens":
        assert drawn["rows"][:6] == ["1", "2", "+", "3", "4", "="] and drawn["cols"] == drawn["rows"]


def test_attention_weights_of_the_decoders_leave_the_model_as_it_was():
    model = nt.Seq2SeqModel(12, 15, d_model=16, nhead=4, num_encoder_layers=1, num_decoder_layers=2,
                            dim_feedforward=32, dropout=0.1, max_len=8, dtype=np.float64, seed=0)
    src = np.array([[4, 8, 6, 0]])
    tgt = np.array([[2, 5, 9]])
    model.eval()
    before = model(src, tgt, src_key_padding_mask=src == 0)
    model.train()
    cross = attention_weights(model, src, tgt, src_key_padding_mask=src == 0)
    self_w = attention_weights(model, src, tgt, which="self", src_key_padding_mask=src == 0)
    assert model.training
    assert [w.shape for w in cross] == [(1, 4, 3, 4)] * 2 and [w.shape for w in self_w] == [(1, 4, 3, 3)] * 2
    assert all(np.all(w[..., 3] == 0) for w in cross)                         # the PAD source column
    model.eval()
    assert np.array_equal(model(src, tgt, src_key_padding_mask=src == 0), before)
    gpt = nt.GPT(vocab_size=14, block_size=8, n_layer=2, n_head=2, n_embd=8, dtype="float64", seed=0)
    (w0, w1) = attention_weights(gpt, np.array([[4, 5, 2, 6, 7, 3]]))
    assert w0.shape == (1, 2, 6, 6) and np.all(np.triu(w1[0, 0], 1) == 0)
    with pytest.raises(ValueError, match="which='cross': a gpt model has no cross-attention"):
        attention_weights(gpt, np.array([[4, 5]]), which="cross")
    with pytest.raises(ValueError, match="which must be 'self' or 'cross', got 'both'"):
        attention_weights(model, src, tgt, which="both")


def test_token_names_of_the_tasks():
    from numpy_transformer.study.attention_maps import token_names
    from numpy_transformer.tasks.seq2seq import target_for
    names = token_names("translate", 12, "source")
    tnames = token_names("translate", 12, "target")
    assert names[0] == "PAD" and names[2] == "BOS" and names[11] == "not"
    sentence = [3, 8, 4]                                      # noun0 verb0 noun1
    assert [names[i] for i in sentence] == ["noun0", "verb0", "noun1"]
    tgt = target_for("translate", sentence, 12)
    assert [tnames[i] for i in tgt] == ["noun0'", "noun1'", "verb0'", "tenseA"]
    assert token_names("addition")[2] == "+" and token_names("addition")[13] == "9"
    assert token_names("reverse") == {0: "PAD", 1: "EOS", 2: "BOS"}


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


@needs_matplotlib
@pytest.mark.parametrize("kind", ["rope", "alibi", "relative"])
def test_plot_positional_kinds(kind, tmp_path):
    out = tmp_path / f"{kind}.png"
    assert main(["plot", "positional", "--kind", kind, "--max-len", "40", "--nhead", "6", "--head-dim", "16",
                 "--out", str(out)]) == 0
    assert_picture(out)


@needs_matplotlib
def test_plot_positional_learned_and_relative_of_checkpoints(run, tmp_path):
    out = tmp_path / "learned.png"
    assert main(["plot", "positional", "--kind", "learned", "--checkpoint", str(run / "learned.npz"),
                 "--out", str(out)]) == 0
    assert_picture(out)
    rel = tmp_path / "rel.npz"
    assert main(TINY + ["--steps", "2", "--pos-encoding", "relative", "--save", str(rel)]) == 0
    assert main(["plot", "positional", "--kind", "relative", "--checkpoint", str(rel), "--out",
                 str(tmp_path / "rel.png")]) == 0
    assert_picture(tmp_path / "rel.png")


def test_plot_positional_kind_refusals(run, tmp_path, capsys):
    for argv, msg in ((["--kind", "learned"], "--kind learned draws a checkpoint's table"),
                      (["--kind", "learned", "--checkpoint", str(run / "run.npz")], "has no learned position table"),
                      (["--kind", "relative", "--checkpoint", str(run / "run.npz")], "has no relative position bias"),
                      (["--kind", "rope", "--head-dim", "7"], "--head-dim must be a positive even number, got 7")):
        assert main(["plot", "positional", *argv, "--out", str(tmp_path / "x.png")]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, err


def test_rope_scores_depend_on_the_distance_alone():
    """The picture's curve: q . k of one vector rotated to 0 and to m; equal to rotating both by any shift."""
    from numpy_transformer import functional as F
    from numpy_transformer.study.plot_positions import rope_scores
    scores = rope_scores(8, 20)
    assert scores[0] == pytest.approx(1.0)
    ones = np.ones((20, 8))
    shifted, _ = F.rope_forward(ones, positions=np.arange(20) + 7)
    np.testing.assert_allclose(shifted @ shifted[0] / 8, scores, atol=1e-12)


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
    (["attention", "{run}/s2s.npz", "--layer", "-3"], "--layer must be in [0, 2) (the model's 2 decoder layers"),
    (["attention", "{run}/gpt.npz", "--layer", "2"], "--layer must be in [0, 2) (the model's 2 blocks"),
    (["attention", "{run}/s2s.npz", "--which", "both"], "--which must be 'self' or 'cross', got 'both'"),
    (["attention", "{run}/gpt.npz", "--which", "cross"], "--which cross: the gpt model in {run}/gpt.npz has no "
                                                         "cross-attention"),
    (["attention", "{run}/run.npz", "--which", "cross"], "--which cross: the encoder model in"),
    (["attention", "{run}/s2s.npz", "--tokens", "4 1 6"], "source ids must lie in [3, 12)"),
    (["attention", "{run}/gpt.npz", "--tokens", "123+4"], "the model adds numbers of at most 2 digits"),
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
    err = capsys.readouterr().err
    assert msg.replace("{run}", str(run)) in err
    assert err.count("\n") == 1 and err.startswith("error: ")             # one line
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


def test_attention_weights_of_grouped_query_attention_are_the_softmax_it_used():
    """A Llama-style GPT's GroupedQueryAttention has no need_weights: its weights are read after its call
    (``last_weights``) and are the causal softmax of its rotated queries and shared keys."""
    from numpy_transformer import functional as F
    from numpy_transformer.study.attention_maps import attention_weights
    model = nt.GPT(vocab_size=12, block_size=8, n_layer=2, n_head=4, n_embd=16, positions="rope", norm="rmsnorm",
                   ffn="swiglu", num_kv_heads=2, bias=False, dtype="float64", seed=0)
    ids = np.array([[1, 5, 2, 7, 3]])
    weights = attention_weights(model, ids)
    attn = model.h[0].self_attn
    x = model.h[0].norm1(model.wte(ids))                                       # block 0's attention input (pre-LN)
    q, _ = F.rope_forward(F.split_heads(attn.q_proj(x), 4))                   # (B, H, S, Dh)
    k, _ = F.rope_forward(F.split_heads(attn.k_proj(x), 2))                   # (B, Hkv, S, Dh)
    k = np.repeat(k, 2, axis=1)                                                # query head h uses kv head h // 2
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(4) + np.triu(np.full((5, 5), -np.inf), 1)
    want = np.exp(scores - scores.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    assert len(weights) == 2 and weights[0].shape == (1, 4, 5, 5)
    np.testing.assert_allclose(weights[0], want, rtol=1e-12, atol=1e-15)
