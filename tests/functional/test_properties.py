"""Properties that hold whatever the inputs: probabilities, masks, fixed tables, seeds, dropout."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
import numpy_transformer.functional as F
import reference_torch as R
from reference_torch import convert, table

# Tiny tensors: torch's intra-op threads only add synchronisation cost (float64 LayerNorm is ~50x
# slower with 2 threads than with 1), and pytest-xdist already runs one worker per core.
torch.set_num_threads(1)

seeds = st.integers(0, 2**31 - 1)


# ------------------------------------------------------------------------------------------------
# softmax and masks
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple), data=st.data(),
       scale=st.sampled_from([1.0, 30.0, 1000.0]), seed=seeds)
def test_softmax_rows_sum_to_one(dtype, shape, data, scale, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(dtype)        # large logits: no overflow either
    y, _ = F.softmax_forward(x, axis=axis)
    assert y.dtype == dtype
    assert np.all(y >= 0) and np.all(np.isfinite(y))
    np.testing.assert_allclose(y.sum(axis=axis), 1.0, rtol=0, atol=10 * np.finfo(dtype).eps * shape[axis])


def test_softmax_all_masked_slice_is_zero_not_nan():
    x = np.array([[0.0, 1.0, -np.inf], [-np.inf, -np.inf, -np.inf]])
    y, cache = F.softmax_forward(x)
    np.testing.assert_array_equal(y[1], 0.0)
    assert y[0, 2] == 0.0 and np.isclose(y[0].sum(), 1.0)
    dx = F.softmax_backward(np.ones_like(x), cache)
    assert np.all(np.isfinite(dx)) and np.all(dx[1] == 0)


@given(b=st.integers(1, 3), s=st.integers(1, 5), t=st.integers(1, 5), h=st.integers(1, 3), dh=st.integers(1, 3),
       seed=seeds)
def test_masked_keys_get_exactly_zero_weight(b, s, t, h, dh, seed):
    rng = np.random.default_rng(seed)
    d = h * dh
    mha = nt.MultiheadAttention(d, h, dtype=np.float64, seed=seed)
    q = rng.standard_normal((b, s, d))
    kv = rng.standard_normal((b, t, d))
    attn_mask = rng.random((b * h, s, t)) < 0.4                  # True = may not attend
    kpm = rng.random((b, t)) < 0.3
    float_mask = np.where(rng.random((s, t)) < 0.3, -np.inf, rng.standard_normal((s, t)))
    for kwargs, masked in [
        (dict(attn_mask=attn_mask), attn_mask.reshape(b, h, s, t)),
        (dict(key_padding_mask=kpm), np.broadcast_to(kpm[:, None, None, :], (b, h, s, t))),
        (dict(attn_mask=float_mask), np.broadcast_to(np.isneginf(float_mask), (b, h, s, t))),
        (dict(is_causal=True), np.broadcast_to(F.causal_mask(s, t), (b, h, s, t))),
    ]:
        out, w = mha(q, kv, kv, average_attn_weights=False, **kwargs)
        assert np.all(w[masked] == 0.0), f"{list(kwargs)}: masked weights {w[masked]}"
        live = ~masked.all(axis=-1)                                 # rows keeping at least one key
        np.testing.assert_allclose(w.sum(axis=-1)[live], 1.0, rtol=1e-12)
        np.testing.assert_array_equal(w.sum(axis=-1)[~live], 0.0)
        assert np.all(np.isfinite(out))
        mha.backward(rng.standard_normal(out.shape))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@given(b=st.integers(2, 3), s=st.integers(1, 5), h=st.integers(1, 3), dh=st.integers(1, 3), seed=seeds)
def test_fully_masked_rows_give_zeros_and_finite_grads(dtype, b, s, h, dh, seed):
    """A batch element with every key padded and a query row with every key masked: zero output
    rows (before the output projection: out = bias), no NaN anywhere, same as the twin."""
    rng = np.random.default_rng(seed)
    d = h * dh
    ours = nt.MultiheadAttention(d, h, dtype=dtype, seed=seed)
    for p in ours.parameters():
        p.data[...] += (0.3 * rng.standard_normal(p.shape)).astype(dtype)
    ref = table.twin(ours)
    x = rng.standard_normal((b, s, d)).astype(dtype)
    kpm = np.zeros((b, s), bool)
    kpm[0] = True                                                   # batch 0: nothing to attend to
    attn_mask = np.zeros((s, s), bool)
    attn_mask[-1] = True                                            # last query: nothing to attend to
    out, w = ours(x, x, x, key_padding_mask=kpm, attn_mask=attn_mask, average_attn_weights=False)
    g = rng.standard_normal(out.shape).astype(dtype)
    dq, dk, dv = ours.backward(g)
    bias = ours.out_proj.bias.data
    np.testing.assert_array_equal(out[0], np.broadcast_to(bias, out[0].shape))
    np.testing.assert_array_equal(out[:, -1], np.broadcast_to(bias, out[:, -1].shape))
    np.testing.assert_array_equal(w[0], 0.0)
    np.testing.assert_array_equal(w[:, :, -1], 0.0)
    for name, p in ours.named_parameters():
        assert np.all(np.isfinite(p.grad)), f"NaN/inf in {name}.grad"
    assert np.all(np.isfinite(dq + dk + dv))

    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    ot, wt = ref(xt, xt, xt, key_padding_mask=torch.from_numpy(kpm), attn_mask=torch.from_numpy(attn_mask),
                 average_attn_weights=False)
    ot.backward(torch.from_numpy(g))
    pairs = {"out": (out, ot), "weights": (w, wt), "dx": (dq + dk + dv, xt.grad)}
    grads = convert.grads_to_numpy(ref)
    pairs.update({f"grad.{n}": (p.grad, grads[n]) for n, p in ours.named_parameters()})
    assert_close(pairs, dtype=dtype)


def test_fully_padded_sequence_in_encoder_stays_finite():
    layer = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.1, dtype=np.float64, seed=0)
    enc = nt.TransformerEncoder(layer, 2, norm=nt.LayerNorm(8, dtype=np.float64), seed=1)
    x = np.random.default_rng(0).standard_normal((2, 4, 8))
    kpm = np.zeros((2, 4), bool)
    kpm[1] = True
    y = enc(x, src_key_padding_mask=kpm)
    dx = enc.backward(np.random.default_rng(1).standard_normal(y.shape))
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(dx))
    for name, p in enc.named_parameters():
        assert np.all(np.isfinite(p.grad)), f"NaN/inf in {name}.grad"


# ------------------------------------------------------------------------------------------------
# fixed tables and embeddings
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("d", [1, 2, 5, 8])
def test_positional_encoding_table(dtype, d):
    pe = nt.PositionalEncoding(d, max_len=50, dtype=dtype)
    row0 = np.array([0.0 if i % 2 == 0 else 1.0 for i in range(d)], dtype=dtype)
    np.testing.assert_array_equal(pe.pe[0], row0)                 # sin(0) = 0, cos(0) = 1
    assert pe.pe.dtype == dtype and pe.pe.shape == (50, d)
    assert "pe" not in pe.state_dict() and list(pe.state_dict()) == []
    assert pe.parameters() == [] and "pe" in dict(pe.named_buffers())
    # position 1, column 0 is sin(1); the frequencies fall geometrically
    assert np.isclose(pe.pe[1, 0], np.sin(1.0), rtol=1e-6)
    x = np.zeros((1, 3, d), dtype=dtype)
    assert np.array_equal(pe(x)[0], pe.pe[:3]) and pe.backward(np.ones((1, 3, d), dtype)).dtype == dtype
    ref = R.PositionalEncoding(d, max_len=50)
    assert list(ref.state_dict()) == [] and list(ref.parameters()) == []
    np.testing.assert_array_equal(ref.pe[0].numpy(), row0.astype(np.float64))


@given(v=st.integers(1, 5), d=st.integers(1, 4), n=st.integers(1, 30), seed=seeds)
def test_embedding_gradient_for_repeated_ids_adds_up(v, d, n, seed):
    rng = np.random.default_rng(seed)
    emb = nt.Embedding(v, d, dtype=np.float64, seed=seed)
    ids = rng.integers(0, v, size=(1, n))
    y = emb(ids)
    g = rng.standard_normal(y.shape)
    emb.backward(g)
    for row in range(v):
        expected = g[0][ids[0] == row].sum(axis=0) if np.any(ids[0] == row) else np.zeros(d)
        np.testing.assert_allclose(emb.weight.grad[row], expected, rtol=1e-13, atol=1e-15)


def test_backward_accumulates_like_torch():
    """Two forward/backward rounds add up in .grad, as torch's autograd does."""
    tnn = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    ours = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=np.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in tnn.state_dict().items()})
    rng = np.random.default_rng(0)
    for _ in range(2):
        x, g = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 3, 8))
        ours(x)
        ours.backward(g)
        tnn(torch.from_numpy(x)).backward(torch.from_numpy(g))
    grads = convert.grads_to_numpy(tnn)
    assert_close({n: (p.grad, grads[n]) for n, p in ours.named_parameters()})


# ------------------------------------------------------------------------------------------------
# dropout and seeds
# ------------------------------------------------------------------------------------------------

def test_dropout_eval_mode_is_identity():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 8))
    drop = nt.Dropout(0.5, seed=0).eval()
    assert np.array_equal(drop(x), x) and np.array_equal(drop.backward(x), x)
    assert nt.dropout_masks(drop) == {}

    layer = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.5, dtype=np.float64, seed=1)
    plain = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=np.float64, seed=1)
    plain.load_state_dict(layer.state_dict())
    layer.eval()
    np.testing.assert_array_equal(layer(x), plain(x))
    assert nt.dropout_masks(layer) == {}
    mha = nt.MultiheadAttention(8, 2, dropout=0.9, dtype=np.float64, seed=2).eval()
    out1, w1 = mha(x, x, x)
    out2, w2 = mha(x, x, x)
    np.testing.assert_array_equal(out1, out2)
    np.testing.assert_allclose(w1.sum(-1), 1.0)


def test_dropout_keep_fraction_and_scale():
    x = np.ones((200, 200))
    drop = nt.Dropout(0.3, seed=0)
    y = drop(x)
    keep = drop.last_mask
    assert abs(keep.mean() - 0.7) < 0.01
    np.testing.assert_allclose(y[keep], 1 / 0.7)
    assert np.all(y[~keep] == 0)


def _train_run(seed, enc_seed=None):
    layer = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.3, dtype=np.float64, seed=seed)
    enc = nt.TransformerEncoder(layer, 3, seed=enc_seed if enc_seed is not None else seed)
    x = np.random.default_rng(99).standard_normal((2, 5, 8))
    return layer, enc, enc(x), nt.dropout_masks(enc)


def test_same_seed_bit_identical_init_and_masks():
    l1, e1, y1, m1 = _train_run(7)
    l2, e2, y2, m2 = _train_run(7)
    for (k, a), (k2, b) in zip(e1.state_dict().items(), e2.state_dict().items()):
        assert k == k2 and a.dtype == b.dtype and np.array_equal(a, b), k
    for (k, a), (_, b) in zip(l1.state_dict().items(), l2.state_dict().items()):
        assert np.array_equal(a, b), k
    assert m1.keys() == m2.keys() and len(m1) == 12
    for k in m1:
        assert np.array_equal(m1[k], m2[k]), k
    assert np.array_equal(y1, y2)
    # a different seed changes both
    l3, _, y3, m3 = _train_run(8)
    assert not np.array_equal(l1.linear1.weight.data, l3.linear1.weight.data)
    assert any(not np.array_equal(m1[k], m3[k]) for k in m1)


def test_same_seed_bit_identical_for_leaf_modules():
    for make in (lambda s: nt.Linear(5, 4, dtype=np.float64, seed=s),
                 lambda s: nt.Embedding(6, 3, dtype=np.float32, seed=s),
                 lambda s: nt.MultiheadAttention(6, 2, kdim=4, vdim=5, dtype=np.float64, seed=s),
                 lambda s: nt.TokenEmbedding(7, 4, dtype=np.float64, seed=s)):
        a, b = make(3), make(3)
        for (k, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
            assert np.array_equal(x, y), k


def test_encoder_layers_get_different_dropout_masks():
    _, enc, _, masks = _train_run(5)
    for name in ("dropout", "dropout1", "dropout2", "self_attn"):
        per_layer = [masks[f"layers.{i}.{name}"] for i in range(3)]
        for i in range(3):
            for j in range(i + 1, 3):
                assert not np.array_equal(per_layer[i], per_layer[j]), f"layers {i} and {j} share the {name} mask"
    # and consecutive forwards draw fresh masks
    y_again = enc(np.random.default_rng(99).standard_normal((2, 5, 8)))
    again = nt.dropout_masks(enc)
    assert any(not np.array_equal(masks[k], again[k]) for k in masks)
    assert y_again.shape == (2, 5, 8)


def test_encoder_layers_start_with_the_same_weights_as_torch():
    """Like torch.nn.TransformerEncoder, every layer starts as a copy of the template layer."""
    layer = nt.TransformerEncoderLayer(8, 2, 16, dtype=np.float64, seed=0)
    enc = nt.TransformerEncoder(layer, 3, seed=0)
    sd = enc.state_dict()
    for k, v in layer.state_dict().items():
        for i in range(3):
            np.testing.assert_array_equal(sd[f"layers.{i}.{k}"], v)
    assert enc.layers[0].linear1.weight.data is not enc.layers[1].linear1.weight.data
