"""The position biases: ALiBi (F.alibi_slopes, F.alibi_bias) against the paper's reference code, and
T5's relative position bias (F.relative_position_bucket, F.relative_position_bias_*, nt.RelativePositionBias)
against the torch twin transcribing Hugging Face's T5Attention.

The registry runs the op and the module against torch too (tests/functional/test_functional_vs_torch.py,
tests/nn/test_modules_vs_torch.py, the gradcheck report); here: the bucket function over hypothesis-drawn
positions and options, alignment (a KV-cache step is the last row of the full matrix), the scatter-add,
the initialisation and the refusals.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer import functional as F
from numpy_transformer.models.score_bias import BIAS_POSITIONS
from reference_torch.nn import position_bias as RP
from reference_torch.table import torch_module

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------------------
# ALiBi
# ------------------------------------------------------------------------------------------------

# get_slopes(n) of ofirpress/attention_with_linear_biases, its values written out for three cases
PAPER_SLOPES = {
    1: [2 ** -8],
    6: [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3],
    8: [2 ** -k for k in range(1, 9)],
    12: [2 ** -k for k in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5],
}


@pytest.mark.parametrize("h", range(1, 17))
def test_alibi_slopes_are_the_papers(h):
    ours = F.alibi_slopes(h)
    assert ours.shape == (h,) and ours.dtype == np.float64
    np.testing.assert_allclose(ours, RP.alibi_get_slopes(h), rtol=1e-14, atol=0)
    if h in PAPER_SLOPES:
        np.testing.assert_allclose(ours, PAPER_SLOPES[h], rtol=1e-14, atol=0)


@pytest.mark.parametrize("h", [1, 2, 4, 8, 16, 32])
def test_alibi_slopes_power_of_two_geometric(h):
    np.testing.assert_allclose(F.alibi_slopes(h), 2.0 ** (-8.0 * np.arange(1, h + 1) / h), rtol=1e-15)


@pytest.mark.parametrize("h,s", [(1, 1), (3, 4), (8, 7), (6, 5), (12, 3)])
def test_alibi_bias_lower_triangle_is_the_papers_matrix(h, s):
    """With S = T: bias[h, i, j] = -m_h (i - j) on and below the diagonal (the paper's figure)."""
    bias = F.alibi_bias(h, s, s)
    assert bias.shape == (h, s, s) and bias.dtype == np.float64
    m = np.asarray(RP.alibi_get_slopes(h))
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    lower = np.broadcast_to(i >= j, (h, s, s))
    expected = -m[:, None, None] * (i - j)
    np.testing.assert_allclose(bias[lower], expected[lower], rtol=1e-15, atol=0)
    assert np.all(bias[:, i[:, 0], i[:, 0]] == 0)                           # the diagonal: distance 0


@given(h=st.integers(1, 12), s=st.integers(1, 7), seed=st.integers(0, 2**16))
def test_alibi_causal_softmax_equals_the_reference_codes(h, s, seed):
    """The reference code adds m_h * j (key position only) to every row and relies on the causal mask and
    softmax's shift invariance: per row it differs from -m_h (i - j) by the constant -m_h i. The causal
    attention probabilities must agree."""
    scores = np.random.default_rng(seed).standard_normal((2, h, s, s))
    m = np.asarray(RP.alibi_get_slopes(h))
    reference = m[:, None, None] * np.arange(s)[None, None, :]                # (H, 1, T)
    causal = F.causal_mask(s)
    probs = [F.softmax_forward(np.where(causal, -np.inf, scores + b), -1)[0] for b in (F.alibi_bias(h, s, s),
                                                                                        reference)]
    assert_close({"probs": (probs[0], probs[1])})


@given(h=st.integers(1, 9), t=st.integers(1, 9), s=st.integers(1, 9))
def test_alibi_is_end_aligned_a_decode_step_is_the_last_row(h, t, s):
    full = F.alibi_bias(h, t, t)
    np.testing.assert_array_equal(F.alibi_bias(h, 1, t), full[:, -1:])       # one query against t cached keys
    if s <= t:
        np.testing.assert_array_equal(F.alibi_bias(h, s, t), full[:, t - s:])
    np.testing.assert_array_equal(F.alibi_bias(h, s, t, offset=0)[:, :min(s, t), :min(s, t)],
                                  full[:, :min(s, t), :min(s, t)])


def test_alibi_bias_dtype():
    b32 = F.alibi_bias(4, 3, 3, dtype=np.float32)
    assert b32.dtype == np.float32
    np.testing.assert_array_equal(b32, F.alibi_bias(4, 3, 3).astype(np.float32))


@pytest.mark.parametrize("call,match", [
    (lambda: F.alibi_slopes(0), "num_heads must be an int >= 1, got 0"),
    (lambda: F.alibi_slopes(2.0), "num_heads must be an int"),
    (lambda: F.alibi_bias(2, -1, 3), "s must be an int >= 0, got -1"),
    (lambda: F.alibi_bias(2, 1, True), "t must be an int"),
])
def test_alibi_refuses_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_alibi_refuses_a_non_int_offset():
    with pytest.raises(TypeError, match="offset must be an int"):
        F.alibi_bias(2, 2, 2, offset=1.5)


# ------------------------------------------------------------------------------------------------
# T5's buckets
# ------------------------------------------------------------------------------------------------

def _scaled_log64(n, bidirectional, num_buckets, max_distance):
    """The bucket function's log term in float64: where it is within float32 rounding of an integer,
    the bucket is a tie that each library's float32 log decides its own way."""
    half = num_buckets // 2 if bidirectional else num_buckets
    me = half // 2
    with np.errstate(divide="ignore"):
        return np.log(n / me) / math.log(max_distance / me) * (half - me)


@given(s=st.integers(0, 40), t=st.integers(0, 300), offset=st.one_of(st.none(), st.integers(-50, 300)),
       bidirectional=st.booleans(), num_buckets=st.integers(4, 64), extra=st.integers(1, 200))
def test_relative_position_bucket_matches_hugging_face(s, t, offset, bidirectional, num_buckets, extra):
    half = num_buckets // 2 if bidirectional else num_buckets
    max_distance = half // 2 + extra
    rel = F.relative_positions(s, t, offset)
    ours = F.relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    ref = RP.relative_position_bucket(torch.from_numpy(rel), bidirectional, num_buckets, max_distance).numpy()
    assert ours.shape == rel.shape and ours.dtype == np.int64
    assert ours.size == 0 or (ours.min() >= 0 and ours.max() < num_buckets)
    differ = ours != ref
    if differ.any():                               # only ties, and only by one bucket
        scaled = _scaled_log64(np.abs(rel[differ]).astype(np.float64), bidirectional, num_buckets, max_distance)
        assert np.all(np.abs(scaled - np.round(scaled)) < 1e-4), (rel[differ], ours[differ], ref[differ])
        assert np.all(np.abs(ours[differ] - ref[differ]) == 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (32, 64), (64, 256), (8, 16)])
def test_relative_position_bucket_equals_hugging_face_exactly_for_usual_settings(bidirectional, num_buckets,
                                                                                 max_distance):
    rel = np.arange(-5000, 5001)
    np.testing.assert_array_equal(F.relative_position_bucket(rel, bidirectional, num_buckets, max_distance),
                                  RP.relative_position_bucket(torch.from_numpy(rel), bidirectional, num_buckets,
                                                              max_distance).numpy())


def test_relative_position_bucket_documented_tie():
    """num_buckets=34, max_distance=27: n = 12 and 18 sit exactly on a boundary (12/8 = 1.5, 27/8 = 1.5^3)."""
    scaled = _scaled_log64(np.array([12.0, 18.0]), True, 34, 27)
    np.testing.assert_allclose(scaled, [3.0, 6.0], rtol=1e-14)


def test_relative_position_bucket_structure():
    """T5's defaults: exact buckets 0..7 for distances 0..7 (past), 16..23 for the future, then 8
    log-spaced ones covering [8, 128): bucket 8 + k from 8 * 16 ** (k / 8) on, so the last one (k = 7)
    from 90.5; unidirectional: the future is bucket 0, 16 exact buckets, the last from 16 * 8 ** (15/16)
    = 112.2."""
    past = F.relative_position_bucket(-np.arange(300), True, 32, 128)
    future = F.relative_position_bucket(np.arange(1, 300), True, 32, 128)
    np.testing.assert_array_equal(past[:8], np.arange(8))
    np.testing.assert_array_equal(future[:7], 16 + np.arange(1, 8))
    assert np.all(np.diff(past) >= 0) and np.all(np.diff(future) >= 0)
    assert np.all(past[91:] == 15) and past[90] == 14 and np.all(future[90:] == 31) and future[89] == 30
    assert past[16] == 10 and past[15] == 9                                   # 8 * 16 ** (2 / 8) = 16
    uni = F.relative_position_bucket(np.arange(-300, 300), False, 32, 128)
    assert np.all(uni[300:] == 0)
    np.testing.assert_array_equal(uni[300 - 16:301][::-1], np.arange(17))     # 16 exact buckets: 0..15, then 16
    assert np.all(uni[:300 - 112] == 31) and uni[300 - 112] == 30


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.relative_position_bucket(np.zeros(2), True, 32, 128), TypeError, "integer array"),
    (lambda: F.relative_position_bucket(np.zeros(2, int), True, 3, 128), ValueError,
     "num_buckets must be an int >= 4, got 3"),
    (lambda: F.relative_position_bucket(np.zeros(2, int), False, 1, 128), ValueError,
     "num_buckets must be an int >= 2, got 1"),
    (lambda: F.relative_position_bucket(np.zeros(2, int), True, 32, 8), ValueError,
     "max_distance must be an int >= 9, got 8"),
])
def test_relative_position_bucket_refuses(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ------------------------------------------------------------------------------------------------
# the learned bias: functional pair and module
# ------------------------------------------------------------------------------------------------

def test_backward_scatter_adds_repeated_buckets():
    """Every pair at distance >= max_distance shares one bucket: its gradient is their sum, which an
    assignment dW[buckets] = ... (or +=) would lose."""
    rng = np.random.default_rng(0)
    buckets = F.relative_position_bucket(F.relative_positions(6, 9), True, 8, 5)
    w = rng.standard_normal((8, 3))
    bias, cache = F.relative_position_bias_forward(w, buckets)
    np.testing.assert_array_equal(bias, w[buckets].transpose(2, 0, 1))
    dbias = rng.standard_normal(bias.shape)
    dw = F.relative_position_bias_backward(dbias, cache)
    expected = np.stack([[dbias[h][buckets == b].sum() for h in range(3)] for b in range(8)])
    np.testing.assert_allclose(dw, expected, rtol=1e-13, atol=1e-13)
    wrong = np.zeros_like(w)
    wrong[buckets.reshape(-1)] += dbias.reshape(3, -1).T
    assert np.abs(wrong - expected).max() > 0.1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@given(s=st.integers(1, 12), t=st.integers(1, 12), offset=st.one_of(st.none(), st.integers(-4, 12)),
       h=st.integers(1, 4), bidirectional=st.booleans(), num_buckets=st.integers(4, 16), extra=st.integers(1, 12),
       seed=st.integers(0, 2**16))
def test_module_vs_hugging_face_twin(dtype, s, t, offset, h, bidirectional, num_buckets, extra, seed):
    """Forward and the weight's gradient against the twin (weights copied), under a random upstream gradient."""
    half = num_buckets // 2 if bidirectional else num_buckets
    ours = nt.RelativePositionBias(h, num_buckets, half // 2 + extra, bidirectional, dtype=dtype, seed=seed)
    ref = torch_module(ours, "twin")
    bias = ours(s, t, offset=offset)
    bias_t = ref(s, t, offset=offset)
    assert bias.shape == (h, s, t) and bias.dtype == dtype
    dbias = np.random.default_rng(seed).standard_normal(bias.shape).astype(dtype)
    assert ours.backward(dbias) is None
    bias_t.backward(torch.from_numpy(dbias))
    assert_close({"bias": (bias, bias_t), "grad": (ours.relative_attention_bias.weight.grad,
                                                   ref.relative_attention_bias.weight.grad)}, dtype=dtype)


@given(h=st.integers(1, 3), t=st.integers(1, 20), bidirectional=st.booleans())
def test_module_decode_step_is_the_last_row(h, t, bidirectional):
    """Cached decoding: one query against t keys gets the last row of the (t, t) bias; offset=0 is
    Hugging Face's compute_bias(S, T) without cache_position."""
    m = nt.RelativePositionBias(h, 8, 12, bidirectional, dtype=np.float64, seed=1)
    full = m(t)
    np.testing.assert_array_equal(m(1, t), full[:, -1:])
    ref = torch_module(m, "twin")
    s = max(1, t // 2)
    np.testing.assert_array_equal(m(s, t, offset=0), ref.compute_bias(s, t)[0].detach().numpy())


def test_module_state_dict_init_and_accumulation():
    m = nt.RelativePositionBias(8, num_buckets=512, max_distance=1000, dtype=np.float64, seed=0)
    assert list(m.state_dict()) == ["relative_attention_bias.weight"]
    w = m.state_dict()["relative_attention_bias.weight"]
    assert w.shape == (512, 8)
    assert abs(w.mean()) < 0.05 and abs(w.std() - 1) < 0.05                   # N(0, 1), torch.nn.Embedding's
    assert list(torch_module(m, "twin").state_dict()) == list(m.state_dict())
    np.testing.assert_array_equal(w, nt.RelativePositionBias(8, 512, 1000, dtype=np.float64, seed=0)
                                  .relative_attention_bias.weight.data)
    d = np.ones((8, 2, 3))
    m(2, 3)
    m.backward(d)
    g1 = m.relative_attention_bias.weight.grad.copy()
    m(2, 3)
    m.backward(d)
    np.testing.assert_array_equal(m.relative_attention_bias.weight.grad, 2 * g1)           # accumulates


def test_module_refusals_leave_it_usable():
    with pytest.raises(TypeError, match="bidirectional must be True or False, got 'yes'"):
        nt.RelativePositionBias(2, bidirectional="yes")
    with pytest.raises(ValueError, match="num_heads must be an int >= 1, got 0"):
        nt.RelativePositionBias(0)
    with pytest.raises(ValueError, match="max_distance must be an int >= 9"):
        nt.RelativePositionBias(2, num_buckets=32, max_distance=4)
    m = nt.RelativePositionBias(2, 8, 10, dtype=np.float32, seed=0)
    with pytest.raises(ValueError, match="s must be an int >= 0"):
        m(-1, 2)
    b = m(2, 3)
    with pytest.raises(ValueError, match=r"dbias must have the shape of the forward output \(2, 2, 3\)"):
        m.backward(np.ones((2, 3, 2), np.float32))
    with pytest.raises(TypeError, match="dbias must have dtype float32"):
        m.backward(np.ones(b.shape))
    m.backward(np.ones(b.shape, np.float32))                                  # the cache survived
    with pytest.raises(RuntimeError, match="backward"):
        m.backward(np.ones(b.shape, np.float32))


# ------------------------------------------------------------------------------------------------
# plugging a bias into attention (what the models will do)
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", BIAS_POSITIONS)
@pytest.mark.parametrize("causal", [True, False])
def test_bias_as_a_float_attn_mask_of_multihead_attention_matches_torch(kind, causal):
    """An (H, S, T) bias tiled to a float (B*H, S, T) attn_mask (plus -inf above the diagonal when
    causal) is added to the scaled scores, in nt.MultiheadAttention as in torch.nn.MultiheadAttention:
    output and input gradient agree. (Our backward returns no gradient for attn_mask: a learned bias's
    gradient needs the score gradient summed over the batch, which the attention backward does not
    return.)"""
    b, s, h, d = 2, 5, 2, 6
    rng = np.random.default_rng(3)
    bias = F.alibi_bias(h, s, s) if kind == "alibi" else \
        nt.RelativePositionBias(h, 8, 6, bidirectional=not causal, dtype=np.float64, seed=0)(s, s)
    mask = np.tile(bias, (b, 1, 1))                                           # (B*H, S, T), batch-major
    if causal:
        mask = np.where(F.causal_mask(s), -np.inf, mask)
    ours = nt.MultiheadAttention(d, h, batch_first=True, dtype=np.float64, seed=1)
    ref = torch_module(ours).double()
    x = rng.standard_normal((b, s, d))
    out, _ = ours(x, x, x, attn_mask=mask, need_weights=False)
    xt = torch.from_numpy(x).requires_grad_(True)
    out_t = ref(xt, xt, xt, attn_mask=torch.from_numpy(mask), need_weights=False)[0]
    dout = rng.standard_normal(out.shape)
    dq, dk, dv = ours.backward(dout)
    out_t.backward(torch.from_numpy(dout))
    assert_close({"out": (out, out_t), "dx": (dq + dk + dv, xt.grad),
                  "grad.in_proj_weight": (ours.in_proj_weight.grad, ref.in_proj_weight.grad)})
