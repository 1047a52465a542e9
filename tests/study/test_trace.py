"""Trace mode (``nt.trace``): it covers every stage of a whole model on the forward, the backward and
the parameter gradients, changes nothing, and each of the seed design's health checks fires when its
abnormal case is provoked (and only then)."""

import contextlib
import json

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer import functional as F

V, D, S, B = 20, 16, 8, 3


def _model(pos="sinusoidal", norm_first=False, d_model=D, nhead=2, layers=2, dtype=np.float32, seed=0):
    return nt.TransformerModel(vocab_size=V, d_model=d_model, nhead=nhead, num_layers=layers,
                               dim_feedforward=32, dropout=0.1, max_len=S, pos_encoding=pos,
                               norm_first=norm_first, dtype=dtype, seed=seed)


def _ids(seed=1):
    return np.random.default_rng(seed).integers(0, V, size=(B, S))


def _run(model, ids=None, dlogits_scale=1.0, dlogits=None):
    """One traced forward + backward with a random upstream gradient; returns the Trace."""
    ids = _ids() if ids is None else ids
    with nt.trace(model) as t:
        y = model(ids)
        if dlogits is None:
            dlogits = np.random.default_rng(2).standard_normal(y.shape).astype(y.dtype) * y.dtype.type(dlogits_scale)
        model.backward(dlogits)
    return t


def _names(t, phase):
    return [r.name for r in t.records if r.phase == phase]


def _flags(t, needle):
    return [f"{r.name} ({r.phase})" for r in t.records if needle in r.flag]


# -- coverage ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pos,norm_first", [("sinusoidal", False), ("learned", True)])
def test_trace_covers_the_whole_model(pos, norm_first):
    model = _model(pos, norm_first)
    t = _run(model)
    fwd, bwd, par = _names(t, "forward"), _names(t, "backward"), _names(t, "parameter")
    assert fwd[:2] == ["embed", "embed * sqrt(d_model)"]
    assert ("pos_encoding" if pos == "sinusoidal" else "pos_embed") in fwd
    for i in range(2):
        p = f"encoder.layers.{i}"
        for sub in ("self_attn.q (heads)", "self_attn.k (heads)", "self_attn.v (heads)",
                    "self_attn.scores (q k^T / sqrt(Dh))", "self_attn.softmax", "self_attn", "dropout1",
                    "norm1", "linear1", "activation", "dropout", "linear2", "dropout2", "norm2"):
            assert f"{p}.{sub}" in fwd, f"{p}.{sub}"
            if "(" not in sub and sub != "self_attn.softmax":
                assert f"{p}.{sub}" in bwd, f"{p}.{sub} (backward)"
        assert p in fwd and p in bwd
    assert fwd[-2:] == ["head", "TransformerModel"]
    assert bwd[0] == "head"
    assert "embed.weight" in bwd
    if norm_first:
        assert "encoder.norm" in fwd and "encoder.norm" in bwd
    # every parameter's gradient, in the model's order, once
    assert par == [n for n, _ in model.named_parameters()]
    shapes = {r.name: r.shape for r in t.records if r.phase == "forward"}
    assert shapes["encoder.layers.0.self_attn.q (heads)"] == (B, 2, S, D // 2)
    assert shapes["encoder.layers.0.self_attn.scores (q k^T / sqrt(Dh))"] == (B, 2, S, S)
    assert shapes["head"] == (B, S, V)
    assert t.problems() == [], t.report()
    assert t.first_nonfinite() is None
    assert "no problems" in t.summary()


def test_trace_records_statistics_exactly():
    model = _model(dtype=np.float64)
    ids = _ids()
    with nt.trace(model) as t:
        model.eval()
        y = model(ids)
    r = next(r for r in t.records if r.name == "head")
    assert (r.shape, r.dtype) == (y.shape, "float64")
    assert (r.mean, r.std, r.min, r.max) == (y.mean(), y.std(), y.min(), y.max())
    assert _names(t, "parameter") == []                  # no backward ran: no gradient records


def test_trace_changes_nothing():
    """The same weights, dropout masks and gradients bit for bit, traced or not."""
    results = []
    for traced in (False, True):
        model = _model(seed=3)
        ids = _ids()
        dy = np.random.default_rng(2).standard_normal((B, S, V)).astype(np.float32)
        if traced:
            with nt.trace(model):
                y = model(ids)
                model.backward(dy)
        else:
            y = model(ids)
            model.backward(dy)
        results.append((y, [p.grad.copy() for p in model.parameters()]))
    (y0, g0), (y1, g1) = results
    assert np.array_equal(y0, y1)
    assert all(np.array_equal(a, b) for a, b in zip(g0, g1))


def test_trace_without_roots_and_on_a_single_layer():
    layer = nt.TransformerEncoderLayer(16, 4, 32, dropout=0.0, seed=0)
    x = np.random.default_rng(0).standard_normal((2, 5, 16)).astype(np.float32)
    with nt.trace() as t:
        y = layer(x)
        layer.backward(np.ones_like(y))
    assert any(r.name.endswith("softmax") for r in t.records)
    assert {r.phase for r in t.records} == {"forward", "backward", "parameter"}
    assert len(_names(t, "parameter")) == len(layer.parameters())
    table = t.table()
    assert " fwd " in table and " bwd " in table and " grad " in table
    json.dumps(t.to_dicts())                             # JSON-serialisable


def _decoder_run(module, traced):
    """One forward + backward of a decoder layer or an nt.Transformer (causal target, a memory/source
    of another length), traced or not: (trace or None, output, input gradients, parameter gradients)."""
    rng = np.random.default_rng(0)
    tgt, mem = rng.standard_normal((2, 5, 16)), rng.standard_normal((2, 7, 16))
    causal = nt.Transformer.generate_square_subsequent_mask(5, np.float64)
    dy = rng.standard_normal((2, 5, 16))
    with (nt.trace(module) if traced else contextlib.nullcontext()) as t:
        if isinstance(module, nt.Transformer):
            y = module(mem, tgt, tgt_mask=causal, src_key_padding_mask=np.array([[False] * 6 + [True]] * 2))
        else:
            y = module(tgt, mem, tgt_mask=causal, tgt_is_causal=True)
        grads = module.backward(dy)
    return t, y, grads, [p.grad.copy() for p in module.parameters()]


@pytest.mark.parametrize("kind", ["layer", "transformer"])
def test_trace_covers_the_decoder_and_the_transformer(kind):
    """Every sub-layer of the decoder (self-attention, cross-attention (B, H, S, T), feed-forward, three
    norms) on the forward, both input gradients on the backward (d tgt, d memory / d src), every
    parameter; and tracing changes nothing."""
    def build():
        if kind == "layer":
            return nt.TransformerDecoderLayer(16, 4, 32, dropout=0.1, dtype=np.float64, seed=0)
        return nt.Transformer(16, 4, 2, 2, 32, dropout=0.1, dtype=np.float64, seed=0)
    t, y, grads, pgrads = _decoder_run(build(), traced=True)
    _, y0, grads0, pgrads0 = _decoder_run(build(), traced=False)
    assert np.array_equal(y, y0) and all(np.array_equal(a, b) for a, b in zip(grads + tuple(pgrads),
                                                                              grads0 + tuple(pgrads0)))
    prefix = "" if kind == "layer" else "decoder.layers.1."
    fwd = {r.name: r for r in t.records if r.phase == "forward"}
    assert fwd[prefix + "multihead_attn.scores (q k^T / sqrt(Dh))"].shape == (2, 4, 5, 7)     # (B, H, S, T)
    assert fwd[prefix + "self_attn.scores (q k^T / sqrt(Dh))"].shape == (2, 4, 5, 5)
    assert fwd[prefix + "multihead_attn.softmax"].note == "row sums in [1.000000, 1.000000]"
    for name in ("self_attn", "multihead_attn", "linear1", "linear2", "norm1", "norm2", "norm3", "dropout3"):
        assert prefix + name in fwd
    notes = {(r.name, r.note) for r in t.records if r.phase == "backward"}
    if kind == "layer":
        assert {("TransformerDecoderLayer", "d tgt"), ("TransformerDecoderLayer", "d memory"),
                ("multihead_attn", "d key"), ("multihead_attn", "d value")} <= notes
        dtgt, dmem = grads
        byname = {(r.name, r.note): r for r in t.records}
        assert byname[("TransformerDecoderLayer", "d memory")].shape == dmem.shape == (2, 7, 16)
        assert byname[("TransformerDecoderLayer", "d memory")].max == dmem.max()
    else:
        assert {("Transformer", "d src"), ("Transformer", "d tgt"), ("decoder", "d memory")} <= notes
    assert len(_names(t, "parameter")) == len(build().parameters())
    assert not t.problems(), t.report()


# -- health checks, each provoked ------------------------------------------------------------------------

def test_flags_missing_embedding_scale_in_the_model(monkeypatch):
    model = _model(d_model=64, nhead=4)
    monkeypatch.setattr(model, "scale", np.float32(1.0))            # the sqrt(d_model) forgotten
    t = _run(model)
    assert _flags(t, "embedding std") == ["embed * sqrt(d_model) (forward)"]
    assert "missing the sqrt(d_model) scale" in t.report()


def test_flags_missing_scale_in_token_embedding(monkeypatch):
    emb = nt.TokenEmbedding(V, 64, seed=0)
    monkeypatch.setattr(nt.TokenEmbedding, "forward", lambda self, ids: self.embedding(ids))
    with nt.trace(emb) as t:
        emb(_ids())
    assert _flags(t, "embedding std") == ["TokenEmbedding (forward)"]


def test_flags_positional_table_not_starting_at_zero(monkeypatch):
    model = _model()
    shifted = nt.sinusoidal_table(S + 1, D, np.float32)[1:]          # row 0 is position 1
    monkeypatch.setitem(model.pos_encoding._buffers, "pe", shifted)
    t = _run(model)
    assert _flags(t, "position 0") == ["pos_encoding (forward)"]


def test_flags_positional_forward_off_by_one(monkeypatch):
    """The table is right but the forward adds rows 1..S: caught from what the forward added."""
    model = _model()
    model.pos_encoding.register_buffer("pe", nt.sinusoidal_table(S + 1, D, np.float32), persistent=False)

    def forward(self, x):
        self._save(x.shape)
        return x + self.pe[1:x.shape[1] + 1]
    monkeypatch.setattr(nt.PositionalEncoding, "forward", forward)
    t = _run(model)
    assert _flags(t, "position 0") == ["pos_encoding (forward)"]
    assert "adds another row" in t.report()


def test_flags_scores_without_the_inverse_sqrt_scale(monkeypatch):
    model = _model(d_model=64, nhead=1, layers=1)                    # Dh = 64: q.k ~ N(0, 64) unscaled
    assert _flags(_run(model), "scores") == []
    original = F.scaled_dot_product_attention_forward
    monkeypatch.setattr(F.multi_head_attention, "scaled_dot_product_attention_forward",   # where MHA looks it up
                        lambda *a, **k: original(*a, **dict(k, scale=1.0)))
    t = _run(model)
    assert _flags(t, "scores") == ["encoder.layers.0.self_attn.scores (q k^T / sqrt(Dh)) (forward)"]
    assert "missing the 1/sqrt(Dh) scale" in t.report()


def _sharpen(model, factor):
    """Scale every attention's q and k projections by ``factor``: scores ``factor ** 2`` times larger,
    rightly scaled by 1/sqrt(Dh) (what training does to a head that learns to attend sharply)."""
    for layer in model.encoder.layers:
        w = layer.self_attn.in_proj_weight.data
        d = w.shape[1]
        w[:2 * d] *= w.dtype.type(factor)


def test_sharp_but_rightly_scaled_scores_are_not_flagged(monkeypatch):
    """A trained head's scores go far beyond the seed design's [-10, 10] (the README's reverse run reaches
    ~23 by step 800): healthy, so no flag; the missing scale is still caught on that same model."""
    model = _model(d_model=64, nhead=1, layers=1)
    _sharpen(model, 4.0)
    t = _run(model)
    scores = next(r for r in t.records if r.name.endswith("scores (q k^T / sqrt(Dh))"))
    assert max(-scores.min, scores.max) > 20
    assert _flags(t, "scores") == [] and "softmax input = 1 x q k^T / sqrt(Dh)" in scores.note
    original = F.scaled_dot_product_attention_forward
    monkeypatch.setattr(F.multi_head_attention, "scaled_dot_product_attention_forward",
                        lambda *a, **k: original(*a, **dict(k, scale=1.0)))
    t = _run(model)
    assert _flags(t, "scores") == ["encoder.layers.0.self_attn.scores (q k^T / sqrt(Dh)) (forward)"]
    assert "scores are 8 x q k^T / sqrt(Dh), expected 1 (missing the 1/sqrt(Dh) scale? sqrt(Dh) = 8)" in t.report()


def test_scale_check_at_every_head_width_and_with_masks(monkeypatch):
    """Bool masks (P = 0, left out) and a causal mask change nothing; a float mask that varies within rows
    is not mistaken for a scale (the fit is then no straight line: no verdict)."""
    rng = np.random.default_rng(0)
    for dh in (4, 16, 64):
        q, k = rng.standard_normal((2, 3, 7, dh)), rng.standard_normal((2, 3, 9, dh))
        for mask in (None, rng.random((7, 9)) < 0.3):
            for scale, expect in ((1 / np.sqrt(dh), 1.0), (1.0, np.sqrt(dh))):
                _, cache = F.scaled_dot_product_attention_forward(q, k, k, attn_mask=mask, scale=scale)
                assert _trace_factor(cache) == pytest.approx(expect, rel=1e-9)
        _, cache = F.scaled_dot_product_attention_forward(q, k, k, attn_mask=3.0 * rng.standard_normal((7, 9)))
        factor = _trace_factor(cache)
        assert factor is None or 1 / 1.5 <= factor <= 1.5


def _trace_factor(cache):
    from numpy_transformer.study import trace as _trace
    return _trace.applied_scale_factor(cache.q, cache.k, cache.probs)


@pytest.mark.slow
def test_the_readme_trace_every_example_is_clean(tmp_path, capsys, monkeypatch):
    """The README's own `train --task reverse --trace-every 200 --save rev.npz`: no flagged record."""
    from numpy_transformer.cli import main
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--task", "reverse", "--trace-every", "200", "--save", "rev.npz"]) == 0
    err = capsys.readouterr().err
    assert err.count("trace of step") == 5 and err.count("no problems") == 5, err


def test_flags_softmax_rows_not_summing_to_one(monkeypatch):
    model = _model()

    def unnormalised(x, axis=-1, out=None):                          # forgot the division by the row sum
        y = np.exp(x - x.max(axis=axis, keepdims=True), out=out)
        return y, F.SoftmaxCache(y, axis)
    monkeypatch.setattr(F.attention, "softmax_forward", unnormalised)      # where attention looks it up
    t = _run(model)
    assert _flags(t, "softmax rows do not sum to 1") == [f"encoder.layers.{i}.self_attn.softmax (forward)"
                                                         for i in range(2)]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_names_the_first_layer_where_nan_appears():
    model = _model()
    target = model.encoder.layers[1].linear1
    original = target.forward

    def poisoned(x):
        out = original(x)
        out[0, 2, 3] = np.nan
        return out
    object.__setattr__(target, "forward", poisoned)
    t = _run(model)
    assert t.first_nonfinite() == "encoder.layers.1.linear1 (forward)"
    firsts = [r.name for r in t.records if "first NaN/inf" in r.flag]
    assert firsts == ["encoder.layers.1.linear1"]
    later = _flags(t, "NaN/inf")
    assert later[0] == "encoder.layers.1.linear1 (forward)" and "head (forward)" in later
    assert "encoder.layers.0.linear1 (forward)" not in later         # before the injection: clean
    assert "NaN/inf first appears at encoder.layers.1.linear1 (forward)" in t.summary()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_names_the_first_layer_where_nan_appears_on_the_backward(monkeypatch):
    model = _model()
    original = F.relu_backward

    def poisoned(dout, cache):
        dx = original(dout, cache)
        dx[0, 0, 0] = np.inf
        return dx
    monkeypatch.setattr(F, "relu_backward", poisoned)
    t = _run(model)
    assert t.first_nonfinite() == "encoder.layers.1.activation (backward)"   # layers run backwards


def test_flags_a_gradient_exactly_zero(monkeypatch):
    model = _model()
    monkeypatch.setattr(F, "relu_backward", lambda dout, cache: np.zeros_like(dout))   # a dead ReLU
    t = _run(model)
    zero = _flags(t, "gradient exactly zero")
    assert zero[:2] == ["encoder.layers.1.activation (backward)", "encoder.layers.1.linear1 (backward)"]
    assert "encoder.layers.0.linear1.weight (parameter)" in zero
    assert "encoder.layers.1.linear1.bias (parameter)" in zero
    assert not any("linear2" in z for z in zero)


def test_flags_an_exploding_gradient():
    model = _model()
    t = _run(model, dlogits_scale=1e6)
    exploding = _flags(t, "exploding gradient")
    assert exploding[0] == "head (backward)"
    assert "head.weight (parameter)" in exploding
    assert _flags(_run(_model()), "exploding") == []


def test_report_lists_the_flagged_rows():
    model = _model()
    t = _run(model, dlogits_scale=1e6)
    rep = t.report(max_problems=3)
    lines = rep.splitlines()
    assert "flagged" in lines[0]
    assert lines[1].startswith("  !! head (backward)")
    assert lines[-1].startswith("  ... and ")
