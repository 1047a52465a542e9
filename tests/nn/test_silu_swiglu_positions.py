"""SiLU, SwiGLU and learned positions beyond the registry's torch comparisons
(tests/functional/test_functional_vs_torch.py::test_op_vs_torch and tests/nn/test_modules_vs_torch.py run their
registry cases in float64 and float32):

* SiLU's sigmoid has no overflow in either dtype (x = +-1000 and the whole float range) and matches
  torch elementwise; ``nt.SiLU(inplace=True)`` as torch's;
* ``activation="silu"`` in every layer and model that takes ``"relu"``/``"gelu"``, against torch;
* ``nt.SwiGLU``'s initialisation (torch's Linear), arguments and errors;
* ``nt.LearnedPositionalEmbedding``: the batch-summed gradient, ``offset``, refusals naming the
  argument, and the models' ``pos_embed`` keys and draws unchanged.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
import torch
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
import numpy_transformer.functional as F
from numpy_transformer.testing import RandomChooser
from reference_torch import check, table

torch.set_num_threads(1)


# --------------------------------------------------------------------------------------------------
# SiLU
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_silu_far_tails_without_overflow(dtype):
    x = np.array([-1000.0, -200.0, -100.0, -88.0, -30.0, -1.0, 0.0, 1.0, 30.0, 88.0, 100.0, 1000.0,
                  -np.finfo(dtype).max, np.finfo(dtype).max], dtype=dtype)
    dy = np.linspace(-1, 1, x.size).astype(dtype)
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        y, cache = F.silu_forward(x)
        dx = F.silu_backward(dy, cache)
    assert y.dtype == dx.dtype == dtype
    assert np.isfinite(y).all() and np.isfinite(dx).all()
    xt = torch.from_numpy(x).requires_grad_(True)
    yt = torch.nn.functional.silu(xt)
    yt.backward(torch.from_numpy(dy))
    assert y[-2] == 0 and y[-1] == np.finfo(dtype).max                 # -max * sigmoid(-max) = -0, max * 1
    assert y[-3] == 1000 and y[0] == 0 and np.signbit(y[0])              # -1000 * sigmoid(-1000) = -0.0
    assert dx[-3] == dy[-3] and dx[0] == 0
    tol = 1e-6 if dtype == np.float32 else 1e-15
    finite = np.isfinite(yt.detach().numpy())
    assert_close({"y": (y[finite], yt.detach().numpy()[finite])}, tol=tol)
    assert_close({"dx": (dx[:-2], xt.grad.numpy()[:-2])}, tol=tol)      # torch's slope at +-max is nan


def test_sigmoid_and_silu_elementwise_vs_torch_float64():
    """Elementwise relative error (not normwise) over the range where the results are normal floats
    (|x| <= 700: sigmoid(-700) ~ 1e-304; beyond, both sides lose digits to subnormals, then give 0)."""
    x = np.concatenate([np.linspace(-700, 700, 20001), np.random.default_rng(0).standard_normal(2000) * 5])
    xt = torch.from_numpy(x).requires_grad_(True)
    yt = torch.nn.functional.silu(xt)
    yt.backward(torch.ones_like(xt))
    y, cache = F.silu_forward(x)
    dx = F.silu_backward(np.ones_like(x), cache)
    s_ref = torch.sigmoid(torch.from_numpy(x)).numpy()
    for name, ours, ref in (("sigmoid", F.sigmoid(x), s_ref), ("silu", y, yt.detach().numpy()),
                            ("silu'", dx, xt.grad.numpy())):
        rel = np.abs(ours - ref) / np.maximum(np.abs(ref), np.finfo(np.float64).tiny)
        assert rel.max() < 1e-13, (name, float(rel.max()), x[rel.argmax()])


@given(shape=st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple), scale=st.sampled_from([1.0, 10.0, 300.0]),
       seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from([np.float32, np.float64]))
def test_silu_properties(shape, scale, seed, dtype):
    """y = x * sigmoid(x) exactly as defined; sigmoid(-x) = 1 - sigmoid(x); the slope's closed form."""
    x = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)
    with np.errstate(over="raise", invalid="raise", divide="raise"):        # underflow to 0 is fine
        s = F.sigmoid(x)
        y, cache = F.silu_forward(x)
    assert s.dtype == y.dtype == dtype and np.all((s >= 0) & (s <= 1))
    np.testing.assert_allclose(s + F.sigmoid(-x), 1.0, rtol=0, atol=2 * np.finfo(dtype).eps)
    np.testing.assert_array_equal(y, x * s)


def test_silu_module_inplace_as_torch():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5))
    dy = rng.standard_normal((2, 5))
    plain = nt.SiLU()
    y_plain = plain(x)
    dx_plain = plain.backward(dy)
    xi = x.copy()
    inplace = nt.SiLU(inplace=True)
    y = inplace(xi)
    assert y is xi and np.array_equal(xi, y_plain)                         # written into the input, as torch
    np.testing.assert_array_equal(inplace.backward(dy), dx_plain)         # the backward saw the original x
    xt = torch.from_numpy(x.copy())
    assert torch.nn.SiLU(inplace=True)(xt) is xt and np.allclose(xt.numpy(), y_plain, rtol=1e-15)
    assert repr(inplace) == "SiLU(inplace=True)" and repr(plain) == "SiLU()"


def test_silu_module_refusals_leave_it_usable():
    ro = np.ones(3)
    ro.flags.writeable = False
    m = nt.SiLU(inplace=True)
    with pytest.raises(ValueError, match="read-only.*inplace=True"):
        m(ro)
    with pytest.raises(TypeError, match="inplace must be a bool, got 'yes'"):
        nt.SiLU(inplace="yes")
    with pytest.raises(TypeError, match="input must be a float32 or float64 array, got dtype int64"):
        nt.SiLU()(np.arange(3))
    assert np.isfinite(m(np.ones(3))).all()


def test_silu_is_an_activation_everywhere():
    assert isinstance(nt.TransformerEncoderLayer(4, 2, 8, activation="silu").activation, nt.SiLU)
    assert isinstance(nt.TransformerDecoderLayer(4, 2, 8, activation="silu").activation, nt.SiLU)
    mod = nt.SiLU()
    assert nt.TransformerEncoderLayer(4, 2, 8, activation=mod).activation is mod
    t = nt.Transformer(4, 2, 1, 1, 8, activation="silu")
    assert isinstance(t.decoder.layers[0].activation, nt.SiLU) and isinstance(t.encoder.layers[0].activation, nt.SiLU)
    assert "silu" in nt.models.encoder.ACTIVATIONS and "silu" in nt.models.gpt.GPT_FFNS
    with pytest.raises(ValueError, match="activation must be 'relu', 'gelu' or 'silu'.*got 'swish'"):
        nt.TransformerEncoderLayer(4, 2, 8, activation="swish")


@pytest.mark.parametrize("kind", ["TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
                                  "TransformerDecoder", "Transformer", "GPT"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_silu_layers_vs_torch(kind, dtype):
    """activation="silu" against torch.nn (torch's layers take the callable F.silu) and against the
    hand-written twins with dropout active."""
    for seed in range(3):
        extra = check.FLOAT32_SIZES if dtype == "float32" else {}
        silu = dict(ffn="silu") if kind == "GPT" else dict(activation="silu")    # GPTConfig calls it ffn
        cfg = check.draw_config(kind, RandomChooser(np.random.default_rng(seed + 100 * len(kind))), dtype=dtype,
                                **silu, **extra)
        res = check.compare(cfg, "torch.nn")
        assert isinstance(res.ref, torch.nn.Module)
        if dtype == "float64":
            assert_close(res.pairs, dtype=np.float64, context=f"{cfg}\n")
            cfg = dict(cfg, dropout=0.3)
            assert_close(check.compare(cfg, "twin").pairs, dtype=np.float64, context=f"twin {cfg}\n")
        else:
            check.verify_float32(res)


def test_silu_models_vs_torch_twins():
    """TransformerModel and Seq2SeqModel with activation="silu" (and learned positions) against their twins."""
    from reference_torch.models.encoder import to_torch
    from reference_torch.models.seq2seq import twin_of
    rng = np.random.default_rng(4)
    m = nt.TransformerModel(11, d_model=8, nhead=2, num_layers=2, dim_feedforward=12, dropout=0.0, max_len=9,
                            activation="silu", pos_encoding="learned", dtype=np.float64, seed=2)
    ids = rng.integers(0, 11, (3, 6))
    g = rng.standard_normal((3, 6, 11))
    twin = to_torch(m)
    logits = m(ids)
    m.backward(g)
    ref = twin(ids)
    ref.backward(torch.from_numpy(g))
    tp = dict(twin.named_parameters())
    pairs = {"logits": (logits, ref)}
    pairs.update({f"{n}.grad": (p.grad, tp[n].grad) for n, p in m.named_parameters()})
    assert_close(pairs, dtype=np.float64, context="TransformerModel ")

    s2s = nt.Seq2SeqModel(9, 11, d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=12,
                          dropout=0.0, max_len=10, activation="silu", pos_encoding="learned", dtype=np.float64, seed=1)
    twin = twin_of(s2s)
    src, tgt = rng.integers(3, 9, (3, 5)), rng.integers(0, 11, (3, 4))
    g = rng.standard_normal((3, 4, 11))
    logits = s2s(src, tgt)
    s2s.backward(g)
    ref = twin(torch.from_numpy(src), torch.from_numpy(tgt))
    ref.backward(torch.from_numpy(g))
    tp = dict(twin.named_parameters())
    pairs = {"logits": (logits, ref)}
    pairs.update({f"{n}.grad": (p.grad, tp[n].grad) for n, p in s2s.named_parameters()})
    assert_close(pairs, dtype=np.float64, context="Seq2SeqModel ")


def test_cli_and_demo_accept_silu(capsys):
    from numpy_transformer.cli import main
    assert main(["demo", "--vocab", "50", "--d-model", "32", "--nhead", "4", "--dim-feedforward", "64", "--batch", "2",
                 "--seq-len", "5", "--activation", "silu"]) == 0
    out = capsys.readouterr().out
    worst = float(re.search(r"largest relative error (\S+)", out).group(1))
    assert "silu" in out and worst <= 1e-10
    assert nt.training.trainer.TrainConfig(activation="silu").activation == "silu"


# --------------------------------------------------------------------------------------------------
# SwiGLU
# --------------------------------------------------------------------------------------------------

def test_swiglu_initialisation_and_keys_as_torch_linear():
    d, f = 64, 96
    m = nt.SwiGLU(d, f, seed=0)
    assert m.gate_proj.weight.dtype == np.float32
    sd = m.state_dict()
    assert list(sd) == ["gate_proj.weight", "up_proj.weight", "down_proj.weight"]
    assert (sd["gate_proj.weight"].shape == sd["up_proj.weight"].shape == (f, d)
            and sd["down_proj.weight"].shape == (d, f))
    for name, fan_in in (("gate_proj.weight", d), ("up_proj.weight", d), ("down_proj.weight", f)):
        w = sd[name]
        bound = 1 / math.sqrt(fan_in)                                        # torch.nn.Linear: U(-1/sqrt(in), ..)
        assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
        assert abs(w.std() / (bound / math.sqrt(3)) - 1) < 0.05
    assert not np.array_equal(sd["gate_proj.weight"], sd["up_proj.weight"])
    mb = nt.SwiGLU(d, f, bias=True, seed=0)
    assert list(mb.state_dict()) == ["gate_proj.weight", "gate_proj.bias", "up_proj.weight", "up_proj.bias",
                                     "down_proj.weight", "down_proj.bias"]
    twin = table.torch_module(mb)
    assert list(twin.state_dict()) == list(mb.state_dict())
    np.testing.assert_array_equal(nt.SwiGLU(d, f, seed=7).state_dict()["down_proj.weight"],
                                  nt.SwiGLU(d, f, seed=7).state_dict()["down_proj.weight"])


def test_swiglu_refusals_leave_it_usable():
    m = nt.SwiGLU(4, 6, dtype=np.float64, seed=0)
    with pytest.raises(ValueError, match=r"x must have last dimension 4 \(\.\.\., d_model\), got shape \(2, 5\)"):
        m(np.ones((2, 5)))
    with pytest.raises(TypeError, match="x has dtype float32 but the module's parameters are float64"):
        m(np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="hidden_dim"):
        nt.SwiGLU(4, 0)
    with pytest.raises(TypeError, match="bias must be a bool, got 'no'"):
        nt.SwiGLU(4, 6, bias="no")
    y = m(np.ones((2, 4)))
    with pytest.raises(ValueError, match="dout must have the shape of the forward output"):
        m.backward(np.ones((2, 3)))
    assert m.backward(np.ones_like(y)).shape == (2, 4)


@given(seed=st.integers(0, 2**32 - 1), bias=st.booleans())
def test_swiglu_module_equals_the_functional_pair(seed, bias):
    rng = np.random.default_rng(seed)
    m = nt.SwiGLU(3, 5, bias=bias, dtype=np.float64, seed=seed % 1000)
    x, dy = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 3))
    names = ("gate_proj", "up_proj", "down_proj")
    args = [getattr(m, n).weight.data for n in names] + [None if not bias else getattr(m, n).bias.data for n in names]
    y_f, cache = F.swiglu_forward(x, *args)
    grads = F.swiglu_backward(dy, cache)
    y = m(x)
    dx = m.backward(dy)
    pairs = {"y": (y, y_f), "dx": (dx, grads[0])}
    pairs.update({f"{n}.weight": (getattr(m, n).weight.grad, g) for n, g in zip(names, grads[1:4])})
    if bias:
        pairs.update({f"{n}.bias": (getattr(m, n).bias.grad, g) for n, g in zip(names, grads[4:])})
    else:
        assert grads[4:] == (None, None, None)
    assert_close(pairs, tol=1e-14)


# --------------------------------------------------------------------------------------------------
# learned positions
# --------------------------------------------------------------------------------------------------

def test_learned_positions_gradient_is_the_batch_sum_and_accumulates():
    rng = np.random.default_rng(5)
    p = nt.LearnedPositionalEmbedding(7, 3, dtype=np.float64, seed=0)
    x, dy = rng.standard_normal((4, 5, 3)), rng.standard_normal((4, 5, 3))
    np.testing.assert_array_equal(p(x), x + p.weight.data[:5])
    np.testing.assert_array_equal(p.backward(dy), dy)
    expected = np.zeros((7, 3))
    expected[:5] = dy.sum(axis=0)
    np.testing.assert_allclose(p.weight.grad, expected, rtol=1e-15)
    p(x[:, :2], offset=3)                                                   # a decoding step: positions 3, 4
    p.backward(dy[:, :2])
    expected[3:5] += dy[:, :2].sum(axis=0)
    np.testing.assert_allclose(p.weight.grad, expected, rtol=1e-15)
    twin = table.torch_module(p)
    xt = torch.from_numpy(x[:, :2].copy())
    np.testing.assert_array_equal(twin(xt, offset=3).detach().numpy(), p(x[:, :2], offset=3))


def test_learned_positions_refusals_name_the_argument():
    p = nt.LearnedPositionalEmbedding(4, 2, dtype=np.float64, seed=0)
    with pytest.raises(ValueError, match="sequence length 5 exceeds LearnedPositionalEmbedding max_len=4"):
        p(np.ones((1, 5, 2)))
    with pytest.raises(ValueError, match="sequence length 2 at offset 3 exceeds LearnedPositionalEmbedding max_len=4"):
        p(np.ones((1, 2, 2)), offset=3)
    with pytest.raises(ValueError, match="offset must be a non-negative int, got -1"):
        p(np.ones((1, 2, 2)), offset=-1)
    with pytest.raises(ValueError, match=r"x must have 3 dimensions \(B, S, D\)"):
        p(np.ones((2, 2)))
    with pytest.raises(ValueError, match="max_len"):
        nt.LearnedPositionalEmbedding(0, 2)
    assert p(np.ones((1, 4, 2))).shape == (1, 4, 2)                       # still usable


def test_learned_positions_draws_and_model_keys_unchanged():
    """The same N(0, 1) draws as Embedding(max_len, D, seed=...), so models built before keep their weights;
    the models' state_dict keys are the same as before."""
    np.testing.assert_array_equal(nt.LearnedPositionalEmbedding(6, 3, seed=11).weight.data,
                                  nt.Embedding(6, 3, seed=11).weight.data)
    m = nt.TransformerModel(10, d_model=4, nhead=2, dim_feedforward=8, max_len=6, pos_encoding="learned", seed=0)
    assert isinstance(m.pos_embed, nt.LearnedPositionalEmbedding)
    keys = list(m.state_dict())
    assert keys[:2] == ["embed.weight", "pos_embed.weight"] and m.state_dict()["pos_embed.weight"].shape == (6, 4)
    s = nt.Seq2SeqModel(5, 6, d_model=4, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8,
                        max_len=6, pos_encoding="learned", seed=0)
    assert {"src_pos_embed.weight", "tgt_pos_embed.weight"} <= set(s.state_dict())
