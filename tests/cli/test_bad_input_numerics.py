"""Refusals of issue 22, each as the documented error (docs/errors.md) naming the argument, what it got
and what was expected: sdpa and flash attention inputs (against torch 2.13's own refusals), the
generation options, another model's KV cache and ALiBi's dtype; and the answers that were silently
wrong: a tiny sampling temperature, NaN logits under sampling.
"""

from __future__ import annotations

import numpy as np
import pytest

import numpy_transformer as nt
import numpy_transformer.functional as F
from numpy_transformer.models import generation as G

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _raises(exc_type, fn, *needles):
    with pytest.raises(exc_type) as info:
        fn()
    for n in needles:
        assert n in str(info.value), f"{n!r} not in the message: {info.value}"


def _qkv(dq=np.float64, dk=np.float64, dv=np.float64, s=3, t=5, dh=4, dh_k=None, t_v=None):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 2, s, dh)).astype(dq)
    k = rng.standard_normal((2, 2, t, dh if dh_k is None else dh_k)).astype(dk)
    v = rng.standard_normal((2, 2, t if t_v is None else t_v, 6)).astype(dv)
    return q, k, v


def _torch_refuses(q, k, v, mask=None):
    with pytest.raises(RuntimeError):
        TF.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)),
                                        attn_mask=None if mask is None else torch.from_numpy(mask))


ATTENTION = {"scaled_dot_product_attention_forward": F.scaled_dot_product_attention_forward,
             "flash_attention_forward": F.flash_attention_forward}


# ------------------------------------------------------------------------------------------------
# sdpa and flash attention: shapes and dtypes, as torch refuses them
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ATTENTION)
@pytest.mark.parametrize("case,needles", [
    (dict(dh_k=3), ("query", "key", "same head size", "got 4 and 3")),
    (dict(t_v=4), ("key", "value", "same length T", "got 5 and 4")),
])
def test_attention_refuses_disagreeing_sizes(name, case, needles):
    q, k, v = _qkv(**case)
    _torch_refuses(q, k, v)
    _raises(ValueError, lambda: ATTENTION[name](q, k, v), name, *needles)


@pytest.mark.parametrize("name", ATTENTION)
@pytest.mark.parametrize("dtypes,needles", [
    ((np.int64,) * 3, ("query must be a floating-point array", "int64")),
    ((np.float32, np.float64, np.float64), ("same dtype", "float32, float64 and float64")),
    ((np.float64, np.float32, np.float64), ("same dtype", "float64, float32 and float64")),
    ((np.float64, np.float64, np.float32), ("same dtype", "float64, float64 and float32")),
])
def test_attention_refuses_integer_and_mixed_dtypes(name, dtypes, needles):
    q, k, v = _qkv(*dtypes)
    _torch_refuses(q, k, v)
    _raises(TypeError, lambda: ATTENTION[name](q, k, v), name, *needles)


@pytest.mark.parametrize("name", ATTENTION)
@pytest.mark.parametrize("qdtype,mdtype", [(np.float32, np.float64), (np.float64, np.float16),
                                           (np.float32, np.float16)])
def test_attention_refuses_a_float_mask_of_another_dtype_as_torch(name, qdtype, mdtype):
    """torch 2.13: a float mask must be float32 or the query's dtype."""
    q, k, v = _qkv(qdtype, qdtype, qdtype)
    mask = np.zeros((3, 5), dtype=mdtype)
    _torch_refuses(q, k, v, mask)
    _raises(TypeError, lambda: ATTENTION[name](q, k, v, attn_mask=mask), name, "attn_mask", str(np.dtype(mdtype)),
            "float32 or the query's dtype")


@pytest.mark.parametrize("name", ATTENTION)
def test_attention_takes_a_float32_mask_with_a_float64_query_as_torch(name):
    q, k, v = _qkv()
    mask = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    out, _ = ATTENTION[name](q, k, v, attn_mask=mask)
    ref = TF.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch.from_numpy(mask))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-12, atol=1e-13)


# ------------------------------------------------------------------------------------------------
# generation
# ------------------------------------------------------------------------------------------------

def _gpt(n_layer=2, seed=0, **kw):
    cfg = dict(block_size=16, n_layer=n_layer, n_head=2, n_embd=8, n_inner=16, dtype="float64")
    cfg.update(kw)
    m = nt.GPT(nt.GPTConfig(11, **cfg), seed=seed)
    for p in m.parameters():                   # O(1) weights: distinct, peaked next-token distributions
        p.data[...] += 0.6 * np.random.default_rng(seed + 1).standard_normal(p.shape)
    return m.eval()


IDS = np.array([[1, 2, 3], [4, 5, 6]])


@pytest.mark.parametrize("arg", ["eos_token_id", "pad_token_id"])
def test_generate_refuses_an_empty_token_list(arg):
    _raises(ValueError, lambda: _gpt().generate(IDS, 3, **{arg: []}), arg, "non-empty list", "[]")


def test_generate_refuses_a_negative_seed():
    _raises(ValueError, lambda: _gpt().generate(IDS, 3, do_sample=True, seed=-1), "seed must be a non-negative int",
            "-1")


@pytest.mark.parametrize("value", ["no", 0, 1])
def test_generate_refuses_a_use_cache_that_is_not_a_bool(value):
    _raises(TypeError, lambda: _gpt().generate(IDS, 3, use_cache=value), "use_cache must be a bool or None",
            repr(value))


def test_generate_use_cache_none_is_the_default():
    m = _gpt()
    np.testing.assert_array_equal(m.generate(IDS, 4, use_cache=None), m.generate(IDS, 4))


@pytest.mark.parametrize("value", ["no", 0, 1.0])
def test_gpt_forward_refuses_a_use_cache_that_is_not_a_bool(value):
    _raises(TypeError, lambda: _gpt()(IDS, use_cache=value), "use_cache must be True, False or None", repr(value))


@pytest.mark.parametrize("temperature", [1e-310, 1e-300, 5e-324])
def test_a_tiny_temperature_samples_the_argmax(temperature):
    """The limit of softmax(logits / T) as T -> 0 is the argmax: sampling then is greedy decoding
    (scores / 1e-310 overflowed to +-inf and NaN, which drew token 0 everywhere)."""
    m = _gpt(seed=3)
    greedy = m.generate(IDS, 6)
    assert len(set(greedy[:, 3:].ravel().tolist())) > 1
    for seed in range(3):
        out = m.generate(IDS, 6, do_sample=True, temperature=temperature, seed=seed)
        np.testing.assert_array_equal(out, greedy)


def test_a_tiny_temperature_shares_the_argmax_among_ties():
    scores = np.array([[1.0, 3.0, 3.0, -2.0]])
    scaled = G.divide_by_temperature(scores, 1e-310)
    assert np.array_equal(np.exp(G.log_softmax(scaled)), [[0, 0.5, 0.5, 0]])


class _Logits:
    """The cached-forward protocol with fixed next-token logits."""

    def __init__(self, row):
        self.row, self.vocab_size, self.max_len = np.asarray(row, dtype=np.float64), len(row), None

    def __call__(self, ids, past_key_values=None, use_cache=None):
        logits = np.broadcast_to(self.row, ids.shape + self.row.shape)
        return (logits, past_key_values) if use_cache else logits


@pytest.mark.parametrize("row,needle", [([0.1, np.nan, 0.3], "1 NaN"), ([0.1, np.inf, 0.3], "1 +inf"),
                                        ([-np.inf] * 3, "3 -inf")])
def test_sampling_refuses_logits_that_are_no_distribution(row, needle):
    """As torch.multinomial ("probability tensor contains either inf, nan or element < 0"); NumPy's
    inverse CDF drew token 0."""
    _raises(ValueError, lambda: G.generate(_Logits(row), np.array([[0]]), 2, do_sample=True, seed=0),
            "probability tensor contains either inf, nan or element < 0", needle, "row 0")
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.softmax(torch.tensor([row]), -1), 1)


# ------------------------------------------------------------------------------------------------
# another model's KV cache
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("other,needles", [
    (dict(n_layer=2), ("past_key_values holds the layers [0, 1]", "this model has 1")),
    (dict(n_layer=1, n_head=4), ("past_key_values", "shape (2, 4, 3, 2)", "(B, 2, T, 4)")),
    (dict(n_layer=1, n_embd=12), ("past_key_values", "shape (2, 2, 3, 6)", "(B, 2, T, 4)")),
])
def test_gpt_refuses_another_models_cache(other, needles):
    _, cache = _gpt(**other)(IDS, use_cache=True)
    model = _gpt(n_layer=1)
    _raises(ValueError, lambda: model(IDS[:, :1], past_key_values=cache), *needles)


def test_gpt_refuses_a_cache_of_another_dtype():
    _, cache = _gpt(n_layer=1, dtype="float32")(IDS, use_cache=True)
    _raises(TypeError, lambda: _gpt(n_layer=1)(IDS[:, :1], past_key_values=cache), "past_key_values",
            "float32", "float64")


def test_gpt_refuses_a_grouped_query_cache_of_other_heads():
    _, cache = _gpt(n_layer=1, n_head=4, n_embd=16, num_kv_heads=2)(IDS, use_cache=True)
    model = _gpt(n_layer=1, n_head=4, n_embd=16, num_kv_heads=1)
    _raises(ValueError, lambda: model(IDS[:, :1], past_key_values=cache), "(B, 1, T, 4)")


def test_gpt_takes_its_own_cache():
    model = _gpt(n_layer=2)
    full = model(np.concatenate([IDS, IDS[:, :1]], axis=1))
    _, cache = model(IDS, use_cache=True)
    step, _ = model(IDS[:, :1], past_key_values=cache)
    np.testing.assert_allclose(step[:, -1], full[:, -1], rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# ALiBi's dtype
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int32, np.int64, bool])
def test_alibi_bias_refuses_a_dtype_that_is_not_float(dtype):
    _raises(TypeError, lambda: F.alibi_bias(4, 3, 3, dtype=dtype), "alibi_bias: dtype", "np.float32 or np.float64",
            str(np.dtype(dtype)))
