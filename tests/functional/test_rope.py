"""Rotary position embeddings: the properties that define RoPE, the precomputed tables of a decode
step, the torch twins at 1e-12, and bad input.

The registry-driven test (``tests/functional/test_functional_vs_torch.py::test_op_vs_torch[rope-...]``) compares
forward and gradient with the torch twins at the project's tolerances in float64 and float32; here
the same twins are held to 1e-12, and the properties are checked without torch:

* q . k after rotation depends only on the position difference (both shifted by the same offset);
* every rotated pair keeps its norm;
* the interleaved and the rotate-half layouts are the same map up to a fixed permutation of Dh;
* the backward is the rotation by -theta (= the forward at negated positions, = the inverse).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer.functional as F
from reference_torch import table
from reference_torch.nn import rotary as RR

torch.set_num_threads(1)

seeds = st.integers(0, 2**32 - 1)
head_dims = st.integers(1, 8).map(lambda n: 2 * n)
lead_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
bases = st.sampled_from([10000.0, 500000.0, 2.0, 37.5])


def half_order(dh):
    """The permutation taking the interleaved layout to the rotate-half one: x[..., half_order(Dh)]
    puts features (2i, 2i+1) at (i, i + Dh/2)."""
    return np.concatenate([np.arange(0, dh, 2), np.arange(1, dh, 2)])


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


# --------------------------------------------------------------------------------------------------
# the properties
# --------------------------------------------------------------------------------------------------

@given(seed=seeds, dh=head_dims, s=st.integers(1, 6), offset=st.integers(-200, 1000), base=bases,
       interleaved=st.booleans())
def test_scores_depend_only_on_the_position_difference(seed, dh, s, offset, base, interleaved):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, s, dh)), rng.standard_normal((3, s, dh))
    pq, pk = rng.integers(0, 50, size=s), rng.integers(0, 50, size=s)

    def scores(shift):
        rq, _ = F.rope_forward(q, pq + shift, base, interleaved)
        rk, _ = F.rope_forward(k, pk + shift, base, interleaved)
        return np.einsum("bsd,ctd->bcst", rq, rk)                     # every q . k pair
    ref = scores(0)
    assert rel(scores(offset), ref) < 1e-12
    if s > 1 and dh >= 2 and np.any(pq != pk):                        # and it does depend on the difference
        plain = np.einsum("bsd,ctd->bcst", q, k)
        assert rel(plain, ref) > 1e-6


@given(seed=seeds, dh=head_dims, lead=lead_shapes, s=st.integers(1, 5), base=bases, interleaved=st.booleans())
def test_rotation_preserves_the_norm_of_every_pair(seed, dh, lead, s, base, interleaved):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(lead + (s, dh))
    pos = rng.integers(-100, 1000, size=s)
    out, _ = F.rope_forward(x, pos, base, interleaved)
    sl = (slice(0, None, 2), slice(1, None, 2)) if interleaved else (slice(0, dh // 2), slice(dh // 2, None))

    def pair_norms(a):
        return np.hypot(a[..., sl[0]], a[..., sl[1]])
    assert_close({"pair norms": (pair_norms(out), pair_norms(x))}, tol=1e-14)


@given(seed=seeds, dh=head_dims, lead=lead_shapes, s=st.integers(1, 5), base=bases)
def test_layouts_differ_by_a_fixed_permutation(seed, dh, lead, s, base):
    rng = np.random.default_rng(seed)
    x, dout = rng.standard_normal((2,) + lead + (s, dh))
    pos = rng.integers(0, 100, size=s)
    order = half_order(dh)
    inter, ci = F.rope_forward(x, pos, base, interleaved=True)
    half, ch = F.rope_forward(x[..., order], pos, base, interleaved=False)
    np.testing.assert_array_equal(half, inter[..., order])
    np.testing.assert_array_equal(F.rope_backward(dout[..., order], ch), F.rope_backward(dout, ci)[..., order])


@given(seed=seeds, dh=head_dims, lead=lead_shapes, s=st.integers(1, 5), base=bases, interleaved=st.booleans())
def test_backward_is_the_rotation_by_minus_theta(seed, dh, lead, s, base, interleaved):
    rng = np.random.default_rng(seed)
    x, dout = rng.standard_normal((2,) + lead + (s, dh))
    pos = rng.integers(-50, 500, size=s)
    out, cache = F.rope_forward(x, pos, base, interleaved)
    dx = F.rope_backward(dout, cache)
    back, _ = F.rope_forward(dout, -pos, base, interleaved)           # the forward at -theta
    assert_close({"dx = R(-theta) dout": (dx, back)}, tol=1e-15)
    assert_close({"R(-theta) R(theta) x = x": (F.rope_backward(out, cache), x)}, tol=1e-14)
    # <dout, R x> = <R^T dout, x>: the vector-Jacobian product of a linear map
    assert abs(np.vdot(dout, out) - np.vdot(dx, x)) <= 1e-12 * np.abs(dout).sum() * np.abs(x).max()


def test_known_values():
    """Dh = 4: pair 0 turns by p rad, pair 1 by p / sqrt(base) (frequency base ** (-2i/Dh), i = 1)."""
    base, p = 100.0, 3
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    a0, a1 = p * 1.0, p * base ** -0.5
    r = lambda a, u, v: (u * np.cos(a) - v * np.sin(a), u * np.sin(a) + v * np.cos(a))     # noqa: E731
    (h0, h2), (h1, h3) = r(a0, 1.0, 3.0), r(a1, 2.0, 4.0)             # rotate half: pairs (0, 2), (1, 3)
    out, _ = F.rope_forward(x, np.array([p]), base)
    np.testing.assert_allclose(out, [[h0, h1, h2, h3]], rtol=1e-15, atol=1e-15)
    (i0, i1), (i2, i3) = r(a0, 1.0, 2.0), r(a1, 3.0, 4.0)             # interleaved: pairs (0, 1), (2, 3)
    out, _ = F.rope_forward(x, np.array([p]), base, interleaved=True)
    np.testing.assert_allclose(out, [[i0, i1, i2, i3]], rtol=1e-15, atol=1e-15)
    out, _ = F.rope_forward(x)                                         # position 0: the identity
    np.testing.assert_array_equal(out, x)


# --------------------------------------------------------------------------------------------------
# positions: default, per sequence, and the one new position of a decode step
# --------------------------------------------------------------------------------------------------

@given(seed=seeds, dh=head_dims, s=st.integers(1, 8), interleaved=st.booleans(),
       dtype=st.sampled_from([np.float64, np.float32]))
def test_decode_step_rotates_position_t_as_the_full_sequence(seed, dh, s, interleaved, dtype):
    """Tables built once for arange(max_len); position t alone (a KV-cache step) gives row t of the
    full rotation, bit for bit, in either dtype."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, s, dh)).astype(dtype)
    full, _ = F.rope_forward(x, interleaved=interleaved)
    cos, sin = F.rope_cos_sin(np.arange(s + 4), dh, dtype=dtype)      # (max_len, Dh/2), max_len > S
    assert cos.dtype == sin.dtype == dtype and cos.shape == (s + 4, dh // 2)
    for t in range(s):                                                # one decode step per position
        step, cache = F.rope_apply(x[..., t:t + 1, :], cos[t:t + 1], sin[t:t + 1], interleaved)
        np.testing.assert_array_equal(step, full[..., t:t + 1, :])
        alone, _ = F.rope_forward(x[..., t:t + 1, :], np.array([t]), interleaved=interleaved)
        np.testing.assert_array_equal(alone, full[..., t:t + 1, :])
        d = rng.standard_normal(step.shape).astype(dtype)
        _, c_full = F.rope_forward(x, interleaved=interleaved)
        np.testing.assert_array_equal(F.rope_backward(d, cache),
                                      F.rope_backward(np.broadcast_to(d, x.shape), c_full)[..., t:t + 1, :])


def test_default_positions_are_arange():
    x = np.random.default_rng(0).standard_normal((2, 5, 6))
    for inter in (False, True):
        np.testing.assert_array_equal(F.rope_forward(x, interleaved=inter)[0],
                                      F.rope_forward(x, np.arange(5), interleaved=inter)[0])


@given(seed=seeds, dh=head_dims, s=st.integers(1, 5), interleaved=st.booleans())
def test_per_sequence_positions(seed, dh, s, interleaved):
    """(B, 1, S) positions for (B, H, S, Dh) heads (a left-padded batch), (B, S) for (B, S, Dh):
    each sequence rotated with its own positions."""
    rng = np.random.default_rng(seed)
    b, h = 3, 2
    x, dout = rng.standard_normal((2, b, h, s, dh))
    pos = rng.integers(-3, 20, size=(b, s))
    out, cache = F.rope_forward(x, pos[:, None, :], interleaved=interleaved)
    dx = F.rope_backward(dout, cache)
    for i in range(b):                                                # the test may loop; the op does not
        oi, ci = F.rope_forward(x[i], pos[i], interleaved=interleaved)
        np.testing.assert_array_equal(out[i], oi)
        np.testing.assert_array_equal(dx[i], F.rope_backward(dout[i], ci))
        np.testing.assert_array_equal(F.rope_forward(x[:, 0], pos, interleaved=interleaved)[0][i],
                                      F.rope_forward(x[i, 0], pos[i], interleaved=interleaved)[0])


def test_float32_stays_float32_and_angles_are_float64():
    """The angles p * w_i are formed in float64 and cast once: at p = 10^5 a float32 angle would be
    off by up to ~4e-3 rad; cast from float64, cos/sin are within float32 rounding."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    pos = np.array([0, 12345, 100000])
    out, cache = F.rope_forward(x, pos)
    assert out.dtype == cache.cos.dtype == cache.sin.dtype == np.float32
    assert F.rope_backward(out, cache).dtype == np.float32
    cos64, sin64 = F.rope_cos_sin(pos, 64)
    assert np.max(np.abs(cache.cos - cos64)) < 1e-7 and np.max(np.abs(cache.sin - sin64)) < 1e-7
    ref, _ = F.rope_forward(x.astype(np.float64), pos)
    assert rel(out, ref) < 1e-6


# --------------------------------------------------------------------------------------------------
# the torch twins, held tighter than the registry's 1e-10
# --------------------------------------------------------------------------------------------------

@given(seed=seeds, dh=head_dims, lead=lead_shapes, s=st.integers(1, 6), base=bases, interleaved=st.booleans(),
       per_sequence=st.booleans())
def test_against_the_torch_twins_float64(seed, dh, lead, s, base, interleaved, per_sequence):
    rng = np.random.default_rng(seed)
    lead = (lead or (2,)) if per_sequence else lead
    x, dout = rng.standard_normal((2,) + lead + (s, dh))
    pos = rng.integers(-10, 2000, size=(lead[:1] + (1,) * (len(lead) - 1) + (s,)) if per_sequence else s)
    out, cache = F.rope_forward(x, pos, base, interleaved)
    ref = table.op_outputs("rope", {"x": x}, {"positions": pos, "base": base, "interleaved": interleaved}, dout)
    assert_close({"out": (out, ref["out"]), "dx": (F.rope_backward(dout, cache), ref["x"])}, tol=1e-12)


def test_the_twins_agree_with_each_other():
    """HF's rotate_half on the permuted features equals Meta's complex product (the oracle's own check)."""
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.standard_normal((2, 3, 5, 8)))
    pos = torch.arange(5) + 7
    order = torch.from_numpy(half_order(8))
    torch.testing.assert_close(RR.rope_rotate_half(x[..., order], pos), RR.rope_complex(x, pos)[..., order],
                               rtol=1e-14, atol=1e-14)


# --------------------------------------------------------------------------------------------------
# bad input: refused with a message naming the argument, what it got and what was expected
# --------------------------------------------------------------------------------------------------

X = np.zeros((2, 3, 4))


@pytest.mark.parametrize("call,exc,words", [
    (lambda: F.rope_forward(np.zeros((2, 3, 5))), ValueError, ["Dh", "x", "(2, 3, 5)", "even", "got 5"]),
    (lambda: F.rope_forward(X, np.array([0.0, 1.0, 2.0])), TypeError, ["positions", "integer", "float64"]),
    (lambda: F.rope_forward(X, np.array([True, False, True])), TypeError, ["positions", "integer", "bool"]),
    (lambda: F.rope_forward(X, np.arange(4)), ValueError, ["positions", "(3,)", "got shape (4,)"]),
    (lambda: F.rope_forward(X, np.zeros((3, 3), dtype=int)), ValueError, ["positions", "(2, 3)", "(3, 3)"]),
    (lambda: F.rope_forward(X, np.zeros((1, 2, 3), dtype=int)), ValueError, ["positions", "(1, 2, 3)"]),
    (lambda: F.rope_forward(X, np.int64(2)), ValueError, ["positions", "scalar"]),
    (lambda: F.rope_forward(X, base=0.0), ValueError, ["base", "positive", "0.0"]),
    (lambda: F.rope_forward(X, base=np.nan), ValueError, ["base", "nan"]),
    (lambda: F.rope_forward(X, interleaved="yes"), TypeError, ["interleaved", "'yes'"]),
    (lambda: F.rope_forward(X.astype(np.int64)), TypeError, ["x", "float32 or float64", "int64"]),
    (lambda: F.rope_forward(X.astype(np.float16)), TypeError, ["x", "float16"]),
    (lambda: F.rope_forward(np.zeros(4)), ValueError, ["x", "2 dimensions", "(4,)"]),
    (lambda: F.rope_cos_sin(np.arange(3), 5), ValueError, ["Dh", "head_dim", "got 5"]),
    (lambda: F.rope_cos_sin(np.arange(3.0), 4), TypeError, ["positions", "float64"]),
    (lambda: F.rope_apply(X, *F.rope_cos_sin(np.arange(3), 4, dtype=np.float32)), TypeError,
     ["cos", "float64", "float32"]),
    (lambda: F.rope_apply(X, *F.rope_cos_sin(np.arange(5), 4)), ValueError, ["cos", "(2, 3, 2)", "(5, 2)"]),
])
def test_bad_input_is_refused_with_a_clear_message(call, exc, words):
    with pytest.raises(exc) as err:
        call()
    msg = str(err.value)
    for w in words:
        assert w in msg, (w, msg)


# --------------------------------------------------------------------------------------------------
# the module
# --------------------------------------------------------------------------------------------------

def test_rotary_embedding_module_is_the_functional_pair():
    import numpy_transformer as nt
    rng = np.random.default_rng(3)
    for dtype in (np.float64, np.float32):
        m = nt.RotaryEmbedding(8, base=500.0, interleaved=True)
        assert m.parameters() == [] and m.state_dict() == {} and "interleaved=True" in repr(m)
        x, dout = rng.standard_normal((2, 2, 3, 5, 8)).astype(dtype)
        pos = np.arange(5) + 11
        out = m(x, pos)
        ref, cache = F.rope_forward(x, pos, 500.0, True)
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(m.backward(dout), F.rope_backward(dout, cache))
        assert out.dtype == dtype


def test_rotary_embedding_refuses_bad_input_and_stays_usable():
    import numpy_transformer as nt
    for kwargs, exc, words in [({"dim": 5}, ValueError, ["dim", "even", "5"]), ({"dim": 0}, ValueError, ["dim"]),
                               ({"dim": 4, "base": -1.0}, ValueError, ["base", "-1.0"]),
                               ({"dim": 4, "interleaved": 1}, TypeError, ["interleaved", "1"])]:
        with pytest.raises(exc) as err:
            nt.RotaryEmbedding(**kwargs)
        assert all(w in str(err.value) for w in words), str(err.value)
    m = nt.RotaryEmbedding(4)
    x = np.random.default_rng(4).standard_normal((2, 3, 4))
    for bad, exc, word in [(np.zeros((2, 3, 6)), ValueError, "(..., S, 4)"), (x.astype(int), TypeError, "int64"),
                           (x.astype(np.float16), TypeError, "float16")]:
        with pytest.raises(exc, match=None) as err:
            m(bad)
        assert word in str(err.value)
    with pytest.raises(TypeError, match="positions"):
        m(x, np.arange(3.0))
    with pytest.raises(RuntimeError):
        m.backward(x)                                                 # nothing saved by the refused calls
    out = m(x)
    with pytest.raises(ValueError, match="dout"):
        m.backward(np.zeros((2, 3)))
    np.testing.assert_allclose(m.backward(out), x, atol=1e-15)        # the refused backward kept the cache
