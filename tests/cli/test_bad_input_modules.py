"""The bad-input suite (tests/cli/test_bad_input_*.py), here the float-input modules, their masks and hints:
hypothesis feeds every public entry point wrong things and checks the exception type (the documented one,
see docs/errors.md) and that the message names the argument, what was expected and what was received.
After any refusal the module must give exactly what a fresh module gives for the next correct call (a
refused call consumes no random numbers and keeps no stale cache).

Which functions validate: every module (``forward`` and ``backward``), ``TransformerModel``,
``CrossEntropyLoss``, the optimizers, clipping and schedules, ``data``, ``checkpoint``, the trainer and
the CLI. The ``functional`` ops are the raw maths (no checks, documented in docs/errors.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from tests.cli.bad_input_helpers import (
    DT,
    FF,
    KD,
    MAXLEN,
    VD,
    B,
    D,
    H,
    S,
    T,
    V,
    _dec_layer,
    _layer,
    _randn,
    expect,
    seeds,
)

# ------------------------------------------------------------------------------------------------
# the float-input modules
# ------------------------------------------------------------------------------------------------

@dataclass
class Entry:
    name: str
    build: Callable                    # () -> module (dropout active where there is any: RNG matters)
    good: Callable                     # rng -> dict of keyword arguments for forward
    arrays: dict                       # float argument -> (required ndim or None, required last dim or None)
    masks: dict                        # mask argument -> list of allowed shapes

    def run(self, module, kwargs):
        out = module(**kwargs)
        return out[0] if isinstance(out, tuple) else out


_DEC_MASKS = {"tgt_mask": [(S, S), (B * H, S, S)], "memory_mask": [(S, T), (B * H, S, T)],
              "tgt_key_padding_mask": [(B, S)], "memory_key_padding_mask": [(B, T)]}


ENTRIES = [
    Entry("Linear", lambda: nt.Linear(D, 5, dtype=DT, seed=1), lambda r: {"x": _randn(r, B, S, D)},
          {"x": (None, D)}, {}),
    Entry("LayerNorm", lambda: nt.LayerNorm(D, dtype=DT), lambda r: {"x": _randn(r, B, S, D)}, {"x": (None, D)}, {}),
    Entry("RMSNorm", lambda: nt.RMSNorm(D, dtype=DT), lambda r: {"x": _randn(r, B, S, D)}, {"x": (None, D)}, {}),
    Entry("ReLU", lambda: nt.ReLU(), lambda r: {"x": _randn(r, B, S, D)}, {"x": (None, None)}, {}),
    Entry("GELU", lambda: nt.GELU("tanh"), lambda r: {"x": _randn(r, B, S, D)}, {"x": (None, None)}, {}),
    Entry("Dropout", lambda: nt.Dropout(0.4, seed=2), lambda r: {"x": _randn(r, B, S, D)}, {"x": (None, None)}, {}),
    Entry("PositionalEncoding", lambda: nt.PositionalEncoding(D, max_len=MAXLEN, dtype=DT),
          lambda r: {"x": _randn(r, B, S, D)}, {"x": (3, D)}, {}),
    Entry("MultiheadAttention", lambda: nt.MultiheadAttention(D, H, dropout=0.3, kdim=KD, vdim=VD, dtype=DT, seed=3),
          lambda r: {"query": _randn(r, B, S, D), "key": _randn(r, B, T, KD), "value": _randn(r, B, T, VD)},
          {"query": ((2, 3), D), "key": (3, KD), "value": (3, VD)},
          {"attn_mask": [(S, T), (B * H, S, T)], "key_padding_mask": [(B, T)]}),
    Entry("TransformerEncoderLayer", _layer, lambda r: {"src": _randn(r, B, S, D)}, {"src": ((2, 3), D)},
          {"src_mask": [(S, S), (B * H, S, S)], "src_key_padding_mask": [(B, S)]}),
    Entry("TransformerEncoder", lambda: nt.TransformerEncoder(_layer(), 2, norm=nt.LayerNorm(D, dtype=DT), seed=6),
          lambda r: {"src": _randn(r, B, S, D)}, {"src": ((2, 3), D)},
          {"mask": [(S, S), (B * H, S, S)], "src_key_padding_mask": [(B, S)]}),
    # the decoder: tgt (B, S, D), memory (B, T, D); Transformer: src (B, T, D), tgt (B, S, D)
    Entry("TransformerDecoderLayer", lambda: _dec_layer(),
          lambda r: {"tgt": _randn(r, B, S, D), "memory": _randn(r, B, T, D)},
          {"tgt": ((2, 3), D), "memory": (3, D)}, _DEC_MASKS),
    Entry("TransformerDecoder", lambda: nt.TransformerDecoder(_dec_layer(), 2, norm=nt.LayerNorm(D, dtype=DT), seed=7),
          lambda r: {"tgt": _randn(r, B, S, D), "memory": _randn(r, B, T, D)}, {"tgt": ((2, 3), D), "memory": (3, D)},
          _DEC_MASKS),
    Entry("Transformer", lambda: nt.Transformer(D, H, 1, 2, FF, dropout=0.3, dtype=DT, seed=8),
          lambda r: {"src": _randn(r, B, T, D), "tgt": _randn(r, B, S, D)}, {"src": ((2, 3), D), "tgt": (3, D)},
          dict(_DEC_MASKS, src_mask=[(T, T), (B * H, T, T)], src_key_padding_mask=[(B, T)])),
]
# the argument names as the modules' messages spell them
SPELLED = {("Linear", "x"): "input", ("LayerNorm", "x"): "input", ("RMSNorm", "x"): "input", ("ReLU", "x"): "input",
           ("GELU", "x"): "input", ("Dropout", "x"): "input"}
entries = st.sampled_from(ENTRIES)


def _spelled(entry, arg):
    return SPELLED.get((entry.name, arg), arg)


def _assert_usable(entry, module, rng_seed, replay=None):
    """After refusals, the module gives what a fresh one gives (after ``replay``, the accepted calls
    the module made, which drew dropout masks), forward and backward."""
    kwargs = entry.good(np.random.default_rng(rng_seed))
    module.zero_grad()                       # (gradients of earlier, accepted backwards accumulate, as torch)
    fresh = entry.build()
    if replay is not None:
        replay(fresh)
        fresh.zero_grad()
    out, ref = entry.run(module, kwargs), entry.run(fresh, kwargs)
    np.testing.assert_array_equal(out, ref)
    g = np.random.default_rng(rng_seed + 1).standard_normal(out.shape)
    a, b = module.backward(g), fresh.backward(g)
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        np.testing.assert_array_equal(x, y)
    for (n, p), (_, q) in zip(module.named_parameters(), fresh.named_parameters()):
        np.testing.assert_array_equal(p.grad, q.grad, err_msg=n)


def _call(entry, module, kwargs):
    return lambda: entry.run(module, kwargs)


@given(entry=entries, data=st.data(), seed=seeds)
def test_wrong_rank_or_last_dimension(entry, data, seed):
    shaped = {k: v for k, v in entry.arrays.items() if v != (None, None)}
    if not shaped:
        return
    module = entry.build()
    arg = data.draw(st.sampled_from(sorted(shaped)))
    ndim, last = shaped[arg]
    kwargs = entry.good(np.random.default_rng(seed))
    x = kwargs[arg]
    options = ["last"] + (["rank"] if ndim is not None else [])
    kind = data.draw(st.sampled_from(options))
    if kind == "last":
        new_last = data.draw(st.integers(1, 12).filter(lambda n: n != last))
        bad = np.zeros(x.shape[:-1] + (new_last,))
        expected = f"last dimension {last}"
    else:
        ndims = ndim if isinstance(ndim, tuple) else (ndim,)          # (2, 3): batched or unbatched
        new_ndim = data.draw(st.sampled_from([n for n in (0, 1, 2, 4, 5) if n not in ndims]))
        bad = np.zeros((2,) * max(new_ndim - 1, 0) + ((last,) if new_ndim else ()))
        expected = f"must have {' or '.join(map(str, ndims))} dimensions"
    kwargs[arg] = bad
    expect(ValueError, _call(entry, module, kwargs), _spelled(entry, arg), expected, f"got shape {bad.shape}")
    _assert_usable(entry, module, seed)


BAD_DTYPES = [np.int32, np.int64, np.uint8, np.bool_, object, np.float16, np.complex64, "U3", np.float32]


@given(entry=entries, data=st.data(), seed=seeds)
def test_wrong_dtype_of_a_float_argument(entry, data, seed):
    module = entry.build()
    arg = data.draw(st.sampled_from(sorted(entry.arrays)))
    dtype = np.dtype(data.draw(st.sampled_from(BAD_DTYPES)))
    kwargs = entry.good(np.random.default_rng(seed))
    kwargs[arg] = kwargs[arg].astype(dtype)
    if dtype == np.float32 and entry.name in ("ReLU", "GELU", "Dropout"):
        entry.run(module, kwargs)                            # dtype-free modules take either precision
        return
    needles = [_spelled(entry, arg), str(dtype)]
    if dtype == np.float16:
        needles.append("not supported")
    expect(TypeError, _call(entry, module, kwargs), *needles)
    _assert_usable(entry, module, seed)


@given(entry=entries, data=st.data(), seed=seeds)
def test_masks_of_the_wrong_shape_or_dtype(entry, data, seed):
    if not entry.masks:
        return
    module = entry.build()
    arg = data.draw(st.sampled_from(sorted(entry.masks)))
    allowed = entry.masks[arg]
    kwargs = entry.good(np.random.default_rng(seed))
    if data.draw(st.booleans()):
        shapes = st.lists(st.integers(1, 7), min_size=1, max_size=4).map(tuple).filter(lambda s: s not in allowed)
        shape = data.draw(shapes)
        kwargs[arg] = np.zeros(shape, dtype=bool)
        expect(ValueError, _call(entry, module, kwargs), arg, " or ".join(str(a) for a in allowed), f"got {shape}")
    else:
        dtype = np.dtype(data.draw(st.sampled_from([np.int64, np.uint8, np.float16, object, "U1", np.complex128])))
        kwargs[arg] = np.zeros(allowed[0], dtype=dtype)
        expect(TypeError, _call(entry, module, kwargs), arg, "bool array", f"got dtype {dtype}")
    _assert_usable(entry, module, seed)


@given(entry=entries, layout=st.sampled_from(["reversed", "fortran", "strided", "broadcast", "transposed"]),
       seed=seeds)
def test_non_contiguous_and_read_only_inputs_work(entry, layout, seed):
    """Views of every layout, read-only: the same numbers as contiguous copies, and inputs untouched."""
    rng = np.random.default_rng(seed)
    kwargs = entry.good(rng)
    views = {}
    for k, x in kwargs.items():
        if layout == "reversed":
            v = np.ascontiguousarray(x[:, ::-1])[:, ::-1]
        elif layout == "fortran":
            v = np.asfortranarray(x)
        elif layout == "strided":
            big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],))
            big[..., ::2] = x
            v = big[..., ::2]
        elif layout == "broadcast":
            x = np.repeat(x[:1], x.shape[0], axis=0)
            kwargs[k] = x
            v = np.broadcast_to(x[:1], x.shape)                  # zero stride, read-only by construction
        else:
            v = np.ascontiguousarray(np.swapaxes(x, 0, 1)).swapaxes(0, 1)
        v = v.view()
        v.flags.writeable = False
        assert np.array_equal(v, x)
        views[k] = v
    g = rng.standard_normal(entry.run(entry.build(), kwargs).shape)
    g_view = np.asfortranarray(g)
    g_view.flags.writeable = False
    a, b = entry.build(), entry.build()
    out_a, out_b = entry.run(a, {k: x.copy() for k, x in kwargs.items()}), entry.run(b, views)
    np.testing.assert_allclose(out_b, out_a, rtol=1e-13, atol=1e-14)
    da, db = a.backward(g), b.backward(g_view)
    for x, y in zip(da if isinstance(da, tuple) else (da,), db if isinstance(db, tuple) else (db,)):
        np.testing.assert_allclose(y, x, rtol=1e-13, atol=1e-14)
    for k, v in views.items():
        assert np.array_equal(v, kwargs[k]), f"{k} was written to"


@given(entry=entries, seed=seeds, kind=st.sampled_from(["before", "twice", "shape", "dtype", "list"]))
def test_backward_misuse(entry, seed, kind):
    module = entry.build()
    kwargs = entry.good(np.random.default_rng(seed))
    if kind == "before":
        expect(RuntimeError, lambda: module.backward(np.zeros((B, S, D))), "backward() called before forward()")
        _assert_usable(entry, module, seed)
        return
    out = entry.run(module, kwargs)
    g = np.random.default_rng(seed + 7).standard_normal(out.shape)
    if kind == "twice":
        module.backward(g)
        expect(RuntimeError, lambda: module.backward(g), "or more times than forward() was called")
        _assert_usable(entry, module, seed, replay=lambda f: (entry.run(f, kwargs), f.backward(g)))
        return
    if kind == "shape":
        bad = g[..., :-1] if out.shape[-1] > 1 else g[:1]
        expect(ValueError, lambda: module.backward(bad), "dout", f"forward output {out.shape}", f"got {bad.shape}")
    elif kind == "dtype":
        expect(TypeError, lambda: module.backward(g.astype(np.float32)), "dout", "float64", "got float32")
    else:
        expect(ValueError, lambda: module.backward(g[0].tolist()), "dout", f"got {g[0].shape}")
    # the refused backward kept the cache: the correct one gives exactly a clean run's gradients
    fresh = entry.build()
    entry.run(fresh, kwargs)
    for x, y in zip(*(r if isinstance(r, tuple) else (r,) for r in (module.backward(g), fresh.backward(g)))):
        np.testing.assert_array_equal(x, y)


@given(entry=st.sampled_from(ENTRIES), batch=st.integers(0, 2), seq=st.integers(0, 2),
       seed=seeds)
def test_zero_size_batches_and_sequences_work_or_are_refused_clearly(entry, batch, seq, seed):
    if batch and seq:
        return
    module = entry.build()
    kwargs = {k: np.zeros((batch, seq if k == "query" or k not in ("key", "value") else 1) + x.shape[2:])
              for k, x in entry.good(np.random.default_rng(seed)).items()}
    if entry.name in ("MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
                      "TransformerDecoder", "Transformer"):
        expect(ValueError, _call(entry, module, kwargs), "non-empty batch and sequence")
    else:                                                        # elementwise / row-wise: empty in, empty out
        out = entry.run(module, kwargs)
        assert out.size == 0
        back = module.backward(np.zeros(out.shape))
        assert back.shape == kwargs["x"].shape
    _assert_usable(entry, module, seed)


def test_gelu_on_empty_arrays():
    for shape in [(0, 3, D), (2, 0, D), (0,)]:
        g = nt.GELU()
        y = g(np.zeros(shape))
        assert y.shape == shape and g.backward(np.zeros(shape)).shape == shape


def test_sequence_longer_than_max_len_is_refused():
    pe = nt.PositionalEncoding(D, max_len=MAXLEN, dtype=DT)
    expect(ValueError, lambda: pe(np.zeros((1, MAXLEN + 1, D))), f"sequence length {MAXLEN + 1}", f"max_len={MAXLEN}")
    for pos in ("sinusoidal", "learned"):
        m = nt.TransformerModel(V, d_model=D, nhead=H, dim_feedforward=FF, max_len=MAXLEN, pos_encoding=pos)
        expect(ValueError, lambda: m(np.zeros((1, MAXLEN + 1), int)), f"sequence length {MAXLEN + 1}",
               f"exceeds max_len={MAXLEN}")
        assert m(np.zeros((1, MAXLEN), int)).shape == (1, MAXLEN, V)


@pytest.mark.parametrize("which", ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"])
def test_wrong_is_causal_hint_is_refused(which):
    """is_causal=True with a mask that is not the causal mask: torch uses the hint in some code paths and
    the mask in others (two different answers); here it is a ValueError naming the mask argument, and
    the module stays usable. The right hint, bool or float, is accepted and changes nothing."""
    rng = np.random.default_rng(0)
    x = _randn(rng, B, S, D)
    wrong = np.zeros((S, S), bool)
    wrong[:, 1] = True
    causal = nt.functional.causal_mask(S)
    if which == "MultiheadAttention":
        m = nt.MultiheadAttention(D, H, dtype=DT, seed=3)
        run = lambda mask, hint: m(x, x, x, attn_mask=mask, is_causal=hint, need_weights=False)[0]
        name = "attn_mask"
    elif which == "TransformerEncoderLayer":
        m = _layer().eval()
        run = lambda mask, hint: m(x, src_mask=mask, is_causal=hint)
        name = "src_mask"
    else:
        m = nt.TransformerEncoder(_layer(), 2, seed=6).eval()
        run = lambda mask, hint: m(x, mask=mask, is_causal=hint)
        name = "mask"
    expect(ValueError, lambda: run(wrong, True), f"is_causal=True is a hint that {name} is the causal mask",
           "is_causal=False")
    expect(ValueError, lambda: run(wrong[None].repeat(B * H, 0), True), name)
    ref = run(causal, False)
    np.testing.assert_array_equal(run(causal, True), ref)
    np.testing.assert_array_equal(run(np.where(causal, -np.inf, 0.0).astype(DT), True), ref)
    np.testing.assert_array_equal(run(None, True), ref)         # our convenience: the hint alone is causal


def test_unbatched_masks_have_torchs_unbatched_shapes():
    """Unbatched (S, D) input: key_padding_mask (T,), attn_mask (S, T) or (H, S, T), as torch."""
    rng = np.random.default_rng(1)
    m = nt.MultiheadAttention(D, H, kdim=KD, vdim=VD, dtype=DT, seed=3)
    q, k, v = _randn(rng, S, D), _randn(rng, T, KD), _randn(rng, T, VD)
    expect(ValueError, lambda: m(q, k, v, key_padding_mask=np.zeros((1, T), bool)), "key_padding_mask",
           f"({T},)")
    expect(ValueError, lambda: m(q, k, v, attn_mask=np.zeros((B * H, S, T), bool)),
           "attn_mask", f"({H}, {S}, {T})")
    expect(ValueError, lambda: m(q, _randn(rng, B, T, KD), v), "key must have 2 dimensions")
    out, w = m(q, k, v, key_padding_mask=np.zeros(T, bool), attn_mask=np.zeros((H, S, T), bool))
    assert out.shape == (S, D) and w.shape == (S, T)


def test_decoder_refusals_name_the_argument_and_what_was_expected():
    """Memory of the wrong width, batch or rank; masks for the wrong length; wrong hints; Transformer's
    src/tgt mismatches. Each module stays usable (a fresh module's answer for the next correct call)."""
    rng = np.random.default_rng(2)
    tgt, mem = _randn(rng, B, S, D), _randn(rng, B, T, D)
    for entry in [e for e in ENTRIES if e.name in ("TransformerDecoderLayer", "TransformerDecoder")]:
        m = entry.build()
        run = lambda **kw: m(**{"tgt": tgt, "memory": mem, **kw})
        expect(ValueError, lambda: run(memory=_randn(rng, B, T, D + 1)), "memory must have last dimension 6",
               f"(D = d_model = {D})", f"got shape {(B, T, D + 1)}")
        expect(ValueError, lambda: run(memory=_randn(rng, B + 1, T, D)), f"memory must have tgt's batch size {B}")
        expect(ValueError, lambda: run(memory=_randn(rng, T, D)), "memory must have 3 dimensions")
        expect(ValueError, lambda: run(tgt=_randn(rng, S, D)), "memory must have 2 dimensions",
               "like the unbatched tgt")
        expect(ValueError, lambda: run(memory_mask=np.zeros((S, S), bool)), "memory_mask",
               f"{(S, T)} or {(B * H, S, T)}", f"got {(S, S)}")
        expect(ValueError, lambda: run(tgt_mask=np.zeros((T, T), bool)), "tgt_mask", f"{(S, S)}")
        expect(ValueError, lambda: run(memory_key_padding_mask=np.zeros((B, S), bool)), "memory_key_padding_mask",
               f"{(B, T)}", f"got {(B, S)}")
        wrong = np.zeros((S, S), bool)
        wrong[:, 1] = True
        expect(ValueError, lambda: run(tgt_mask=wrong, tgt_is_causal=True), "hint that tgt_mask is the causal mask")
        expect(ValueError, lambda: run(memory_mask=np.ones((S, T), bool) & ~np.eye(S, T, dtype=bool),
                                       memory_is_causal=True), "hint that memory_mask is the causal mask")
        _assert_usable(entry, m, 3)
    entry = next(e for e in ENTRIES if e.name == "Transformer")
    m = entry.build()
    src = _randn(rng, B, T, D)
    expect(ValueError, lambda: m(src, _randn(rng, B + 1, S, D)), "src and tgt must have the same batch size")
    expect(ValueError, lambda: m(src, _randn(rng, B, S, D + 2)), "tgt must have last dimension 6")
    expect(ValueError, lambda: m(_randn(rng, B, T, D - 1), tgt), "src must have last dimension 6")
    expect(ValueError, lambda: m(src, tgt, src_mask=np.zeros((S, S), bool)), "src_mask", f"{(T, T)}")
    expect(ValueError, lambda: m(src, tgt, memory_mask=np.zeros((S, S), bool)), "memory_mask", f"{(S, T)}")
    expect(ValueError, lambda: m(src, tgt, src_key_padding_mask=np.zeros((B, S), bool)), "src_key_padding_mask",
           f"{(B, T)}")
    _assert_usable(entry, m, 4)
    expect(TypeError, lambda: nt.Transformer(D, H, custom_encoder=lambda x: x), "custom_encoder must be an nt.Module")
    expect(TypeError, lambda: nt.TransformerDecoder(_layer(), 2), "decoder_layer must be an nt.TransformerDecoderLayer")
    expect(ValueError, lambda: nt.Transformer.generate_square_subsequent_mask(-1), "sz must be a non-negative int")
