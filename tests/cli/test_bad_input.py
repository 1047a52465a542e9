"""The bad-input suite: hypothesis feeds every public entry point wrong things and checks the exception
type (the documented one, see docs/errors.md) and that the message names the argument, what was
expected and what was received. After any refusal the module must give exactly what a fresh module
gives for the next correct call (a refused call consumes no random numbers and keeps no stale cache).

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
from numpy_transformer.cli import main
from numpy_transformer.models.gpt_config import GPT_FFNS
from numpy_transformer.tasks import data as ntdata
from numpy_transformer.training.trainer import TrainConfig

seeds = st.integers(0, 2**31 - 1)
DT = np.float64                  # the modules' dtype in this file (float32 is covered by the dtype draws)
B, S, T, D, KD, VD, H, FF, V, MAXLEN = 2, 3, 4, 6, 4, 5, 2, 12, 7, 8


def message(info):
    """The exception's message (KeyError's str() adds quotes)."""
    return info.value.args[0] if isinstance(info.value, KeyError) else str(info.value)


def expect(exc_type, fn, *needles):
    """``fn()`` raises exactly ``exc_type`` (or a subclass) whose message contains every needle."""
    with pytest.raises(Exception) as info:
        fn()
    assert isinstance(info.value, exc_type), (
        f"expected {exc_type.__name__}, got {type(info.value).__name__}: {info.value}")
    msg = message(info)
    for n in needles:
        assert str(n) in msg, f"{n!r} not in the message: {msg}"
    return msg


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


def _randn(rng, *shape):
    return rng.standard_normal(shape)


def _layer():
    return nt.TransformerEncoderLayer(D, H, FF, dropout=0.3, dtype=DT, seed=5)


def _dec_layer():
    return nt.TransformerDecoderLayer(D, H, FF, dropout=0.3, dtype=DT, seed=5)


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


# ------------------------------------------------------------------------------------------------
# token ids and targets
# ------------------------------------------------------------------------------------------------

ID_TAKERS = {
    "Embedding": (lambda: nt.Embedding(V, 4, dtype=DT, seed=0), "input"),
    "TokenEmbedding": (lambda: nt.TokenEmbedding(V, 4, dtype=DT, seed=0), "input"),
    "TransformerModel": (lambda: nt.TransformerModel(V, d_model=D, nhead=H, dim_feedforward=FF, max_len=MAXLEN,
                                                     dropout=0.3, dtype=DT, seed=0), "ids"),
}


@given(name=st.sampled_from(sorted(ID_TAKERS)), bad=st.one_of(st.integers(-10**6, -1), st.integers(V, 10**6)),
       pos=st.tuples(st.integers(0, 1), st.integers(0, 2)), seed=seeds)
def test_ids_out_of_range_including_negative(name, bad, pos, seed):
    build, arg = ID_TAKERS[name]
    module = build()
    ids = np.random.default_rng(seed).integers(0, V, (2, 3))
    ids[pos] = bad
    expect(IndexError, lambda: module(ids), arg, f"[0, {V})", f"got id {bad}", "not wrapped" if bad < 0 else "")
    good = np.random.default_rng(seed).integers(0, V, (2, 3))
    np.testing.assert_array_equal(module(good), build()(good))


@given(name=st.sampled_from(sorted(ID_TAKERS)),
       dtype=st.sampled_from([np.float32, np.float64, np.bool_, object, "U2", np.complex64]))
def test_ids_of_a_non_integer_dtype(name, dtype):
    build, arg = ID_TAKERS[name]
    dtype = np.dtype(dtype)
    expect(TypeError, lambda: build()(np.zeros((2, 3), dtype=dtype)), arg, "integer array", f"dtype {dtype}")


def test_model_ids_shapes_and_padding_masks():
    m = ID_TAKERS["TransformerModel"][0]()
    expect(ValueError, lambda: m(np.zeros(3, int)), "ids must have shape (B, S)", "got shape (3,)")
    expect(ValueError, lambda: m(np.zeros((0, 3), int)), "ids must have a non-empty batch and sequence", "(0, 3)")
    expect(ValueError, lambda: m(np.zeros((2, 3), int), src_key_padding_mask=np.zeros((2, 4), bool)),
           "src_key_padding_mask", "(2, 3)", "got (2, 4)")
    expect(TypeError, lambda: m(np.zeros((2, 3), int), src_key_padding_mask=np.zeros((2, 3), int)),
           "src_key_padding_mask", "got dtype int64", "mask.astype(bool)")
    assert m([[1, 2, 3]]).shape == (1, 3, V)                          # nested lists of ints are fine
    expect(RuntimeError, lambda: ID_TAKERS["TransformerModel"][0]().backward(np.zeros((1, 3, V))), "before forward")
    out = m(np.zeros((2, 3), int))
    expect(ValueError, lambda: m.backward(np.zeros((2, 3, V + 1))), "dlogits", f"(2, 3, {V})", f"got (2, 3, {V + 1})")
    m.backward(np.zeros(out.shape))                                 # the refused call kept the cache


@given(bad=st.one_of(st.integers(-10**6, -101), st.integers(-99, -1), st.integers(5, 10**6)), seed=seeds)
def test_cross_entropy_targets_out_of_range(bad, seed):
    crit = nt.CrossEntropyLoss()
    t = np.random.default_rng(seed).integers(0, 5, 4)
    t[2] = bad
    expect(IndexError, lambda: crit(np.zeros((4, 5)), t), "target", "[0, 5)", "ignore_index=-100", f"got {bad}")
    assert crit(np.zeros((4, 5)), np.zeros(4, int)) > 0              # usable afterwards


def test_cross_entropy_refusals():
    crit = nt.CrossEntropyLoss()
    expect(TypeError, lambda: crit(np.zeros((2, 3), int), np.zeros(2, int)), "input", "float32 or float64", "int64")
    expect(ValueError, lambda: crit(np.zeros((2, 3, 4, 5)), np.zeros((2, 3, 4), int)),
           "target must have shape (2, 4, 5)", "input (2, 3, 4, 5)", "class axis at dim 1", "got (2, 3, 4)")
    expect(ValueError, lambda: crit(np.zeros((2, 5, 7)), np.zeros((2, 5), int)), "target must have shape (2, 7)",
           "input.reshape(-1, 7) with target.reshape(-1)")
    expect(ValueError, lambda: crit(np.zeros((2, 0)), np.zeros(2, int)), "at least one class", "(2, 0)")
    expect(TypeError, lambda: crit(np.zeros((2, 3)), np.zeros(2)), "target", "integer class indices", "float64")
    expect(ValueError, lambda: crit(np.zeros((2, 3)), np.zeros(3, int)), "target must have shape (2,)", "got (3,)")
    expect(ValueError, lambda: nt.CrossEntropyLoss(weight=[1.0, 2.0])(np.zeros((2, 3)), np.zeros(2, int)),
           "weight must have shape (3,)", "got shape (2,)")
    expect(TypeError, lambda: nt.CrossEntropyLoss(size_average=True), "size_average=True", "reduction=")
    expect(RuntimeError, lambda: nt.CrossEntropyLoss().backward(), "before forward")
    crit(np.zeros((2, 3)), np.zeros(2, int))
    expect(ValueError, lambda: crit.backward(np.ones(2)), "dout must be a scalar", "got shape (2,)")
    expect(TypeError, lambda: crit.backward("1"), "dout", "dtype <U1")
    assert crit.backward().shape == (2, 3)                           # the refused calls kept the cache
    expect(RuntimeError, lambda: crit.backward(), "twice")
    none = nt.CrossEntropyLoss(reduction="none")
    none(np.zeros((2, 3)), np.zeros(2, int))
    expect(ValueError, lambda: none.backward(np.ones(3)), "output's shape (2,)", "got (3,)")
    # empty batches: NaN mean / 0 sum, as torch
    assert np.isnan(nt.CrossEntropyLoss()(np.zeros((0, 3)), np.zeros(0, int)))
    assert nt.CrossEntropyLoss(reduction="sum")(np.zeros((0, 3)), np.zeros(0, int)) == 0
    for kwargs, needle in [(dict(reduction="avg"), "reduction must be one of"),
                           (dict(label_smoothing=1.5), "label_smoothing"),
                           (dict(label_smoothing="x"), "label_smoothing")]:
        expect(ValueError, lambda: nt.CrossEntropyLoss(**kwargs), needle)
    expect(TypeError, lambda: nt.CrossEntropyLoss(ignore_index=1.5), "ignore_index must be an int", "1.5")


# ------------------------------------------------------------------------------------------------
# load_state_dict
# ------------------------------------------------------------------------------------------------

STATEFUL = {
    "Linear": lambda: nt.Linear(D, 5, dtype=DT, seed=1),
    "LayerNorm": lambda: nt.LayerNorm(D, dtype=DT),
    "RMSNorm": lambda: nt.RMSNorm((S, D), dtype=DT),
    "Embedding": lambda: nt.Embedding(V, 4, dtype=DT, seed=0),
    "MultiheadAttention": lambda: nt.MultiheadAttention(D, H, kdim=KD, vdim=VD, dtype=DT, seed=3),
    "TransformerEncoder": lambda: nt.TransformerEncoder(_layer(), 2, seed=6),
    "TransformerModel": lambda: nt.TransformerModel(V, d_model=D, nhead=H, dim_feedforward=FF, max_len=MAXLEN,
                                                    pos_encoding="learned", dtype=DT, seed=0),
}


@given(name=st.sampled_from(sorted(STATEFUL)), data=st.data(),
       kind=st.sampled_from(["missing", "extra", "shape", "int", "bool", "object", "none", "string", "mapping",
                             "path"]))
def test_load_state_dict_refusals_leave_the_module_untouched(name, data, kind):
    module = STATEFUL[name]()
    before = {k: v.copy() for k, v in module.state_dict().items()}
    sd = {k: v + 1 for k, v in before.items()}
    key = data.draw(st.sampled_from(sorted(sd)))
    if kind == "missing":
        del sd[key]
        exc, needles = KeyError, ["missing keys", repr(key)]
    elif kind == "extra":
        sd["surprise.weight"] = np.zeros(3)
        exc, needles = KeyError, ["unexpected keys", "'surprise.weight'"]
    elif kind == "shape":
        bad_shape = sd[key].shape[:-1] + (sd[key].shape[-1] + 1,)
        sd[key] = np.zeros(bad_shape)
        exc, needles = ValueError, [repr(key), f"has shape {bad_shape}", f"expects {before[key].shape}"]
    elif kind in ("int", "bool", "object", "string"):
        dt = {"int": np.int64, "bool": np.bool_, "object": object, "string": "U1"}[kind]
        sd[key] = np.zeros(before[key].shape, dtype=dt)
        exc, needles = TypeError, [repr(key), "floating-point", f"got dtype {np.dtype(dt)}"]
    elif kind == "none":
        sd[key] = None
        exc, needles = TypeError, [repr(key), "floating-point", "object", "None"]
    elif kind == "mapping":
        sd = list(sd.items())
        exc, needles = TypeError, ["state_dict must be a mapping", "got list"]
    else:
        sd = "checkpoint.npz"
        exc, needles = TypeError, ["got str", "load_checkpoint(path)"]
    expect(exc, lambda: module.load_state_dict(sd), *needles)
    for k, v in module.state_dict().items():
        np.testing.assert_array_equal(v, before[k], err_msg=f"{k} changed although the load was refused")


def test_load_state_dict_accepts_other_float_precisions_and_partial_loads():
    m = STATEFUL["Linear"]()
    m.load_state_dict({"weight": np.ones((5, D), np.float32), "bias": np.ones(5, np.float16)})
    assert m.weight.data.dtype == DT and m.bias.data.dtype == DT and m.bias.data[0] == 1
    res = m.load_state_dict({"weight": np.zeros((5, D))}, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == [] and m.weight.data.sum() == 0


# ------------------------------------------------------------------------------------------------
# constructors and hyper-parameters
# ------------------------------------------------------------------------------------------------

not_positive_ints = st.one_of(st.integers(-5, 0), st.floats(allow_nan=True), st.text(max_size=3), st.none(),
                              st.booleans())
not_probabilities = st.one_of(st.floats().filter(lambda p: not 0 <= p <= 1), st.text(max_size=3), st.none(),
                              st.booleans())

SIZE_ARGS = [
    (lambda v: nt.Linear(v, 3), "in_features"), (lambda v: nt.Linear(3, v), "out_features"),
    (lambda v: nt.Embedding(v, 3), "num_embeddings"), (lambda v: nt.Embedding(3, v), "embedding_dim"),
    (lambda v: nt.LayerNorm(v), "normalized_shape"), (lambda v: nt.MultiheadAttention(v, 1), "embed_dim"),
    (lambda v: nt.RMSNorm(v), "normalized_shape"), (lambda v: nt.RMSNorm((4, v)), "normalized_shape"),
    (lambda v: nt.MultiheadAttention(4, v), "num_heads"), (lambda v: nt.MultiheadAttention(4, 2, kdim=v), "kdim"),
    (lambda v: nt.MultiheadAttention(4, 2, block_size=v), "block_size"),
    (lambda v: nt.TransformerEncoderLayer(v, 1), "d_model"), (lambda v: nt.TransformerEncoderLayer(4, v), "nhead"),
    (lambda v: nt.TransformerEncoder(nt.TransformerEncoderLayer(4, 2, 8), v), "num_layers"),
    (lambda v: nt.PositionalEncoding(4, max_len=v), "max_len"), (lambda v: nt.TokenEmbedding(v, 4), "num_embeddings"),
    (lambda v: nt.TransformerModel(v), "vocab_size"), (lambda v: nt.TransformerModel(8, d_model=v), "d_model"),
    (lambda v: nt.TransformerModel(8, 4, 2, dim_feedforward=v), "dim_feedforward"),
    (lambda v: nt.TransformerModel(8, 4, 2, num_layers=v), "num_layers"),
]


@given(case=st.sampled_from(SIZE_ARGS), value=not_positive_ints)
def test_sizes_must_be_positive_ints(case, value):
    build, name = case
    if name == "kdim" and value is None:
        return                                                   # None: the default (kdim = embed_dim)
    expect(ValueError, lambda: build(value), name, "positive int", repr(value))


@given(build=st.sampled_from([lambda p: nt.Dropout(p), lambda p: nt.MultiheadAttention(4, 2, dropout=p),
                              lambda p: nt.TransformerEncoderLayer(4, 2, 8, dropout=p),
                              lambda p: nt.TransformerModel(8, 4, 2, dropout=p)]), p=not_probabilities)
def test_probabilities(build, p):
    expect(ValueError, lambda: build(p), "dropout probability must be a number in [0, 1]", repr(p))


def test_other_constructor_arguments():
    expect(ValueError, lambda: nt.MultiheadAttention(6, 4), "embed_dim must be divisible by num_heads", "6 % 4 = 2")
    expect(ValueError, lambda: nt.TransformerEncoderLayer(6, 4), "d_model must be divisible by nhead")
    expect(ValueError, lambda: nt.TransformerEncoderLayer(4, 2, activation="tanh"), "activation", "'tanh'")
    expect(ValueError, lambda: nt.MultiheadAttention(4, 2, attention="flash"), "attention", "'flash'")
    expect(ValueError, lambda: nt.GELU("fast"), "approximate must be 'none' or 'tanh'", "'fast'")
    expect(ValueError, lambda: nt.LayerNorm(4, eps=0), "eps must be > 0", "got 0")
    expect(ValueError, lambda: nt.LayerNorm(4, eps="small"), "eps must be a number > 0", "'small'")
    expect(ValueError, lambda: nt.LayerNorm((4, 0)), "normalized_shape", "(4, 0)")   # (4, 5) is fine: two trailing dims
    expect(ValueError, lambda: nt.RMSNorm(4, eps=0), "eps must be > 0", "got 0")
    expect(ValueError, lambda: nt.RMSNorm(4, eps="small"), "eps must be a number > 0", "'small'")
    expect(ValueError, lambda: nt.RMSNorm(()), "normalized_shape", "non-empty tuple", "got ()")
    expect(ValueError, lambda: nt.RMSNorm((3, 4), dtype=DT)(np.zeros((2, 4, 3))), "input", "trailing dimensions (3, 4)",
           "got shape (2, 4, 3)")
    expect(ValueError, lambda: nt.Embedding(5, 2, padding_idx=5), "padding_idx", "[-5, 5)", "got 5")
    expect(ValueError, lambda: nt.Embedding(5, 2, padding_idx="0"), "padding_idx", "got '0'")
    expect(TypeError, lambda: nt.Linear(2, 2, dtype="banana"), "dtype must be np.float32 or np.float64", "'banana'")
    expect(TypeError, lambda: nt.Linear(2, 2, dtype=np.int32), "dtype must be np.float32 or np.float64", "int32")
    expect(TypeError, lambda: nt.Linear(2, 2, seed="x"), "seed must be None, an int or a numpy.random.Generator", "str")
    expect(TypeError, lambda: nt.TransformerEncoder(nt.Linear(2, 2), 1), "encoder_layer", "Linear")
    expect(TypeError, lambda: nt.TransformerEncoder(_layer(), 1, norm=nt.Linear(2, 2)), "norm", "Linear")
    expect(ValueError, lambda: nt.TransformerModel(8, 4, 2, pos_encoding="rotary"), "pos_encoding", "'rotary'")
    mha = nt.MultiheadAttention(4, 2, attention="tiled")
    x = np.zeros((1, 2, 4), np.float32)
    expect(ValueError, lambda: mha(x, x, x), "need_weights=False")
    assert mha(x, x, x, need_weights=False)[0].shape == (1, 2, 4)


# ------------------------------------------------------------------------------------------------
# optimizers, clipping, schedules
# ------------------------------------------------------------------------------------------------

def _params():
    return nt.Linear(3, 2, dtype=DT, seed=0).parameters()


not_numbers = st.one_of(st.text(max_size=3), st.none(), st.booleans(), st.just(float("nan")), st.just([1.0]))


@given(case=st.sampled_from([
    ("sgd", "lr"), ("sgd", "momentum"), ("sgd", "weight_decay"), ("sgd", "dampening"),
    ("adam", "lr"), ("adam", "eps"), ("adam", "weight_decay"), ("adamw", "lr"), ("adamw", "weight_decay"),
]), value=st.one_of(not_numbers, st.floats(max_value=-1e-9, allow_nan=False)))
def test_optimizer_hyper_parameters(case, value):
    name, arg = case
    if arg == "dampening" and isinstance(value, float) and value < 0:
        return                                                        # any finite dampening is allowed, as torch
    kwargs = {"lr": 0.1, arg: value} if name == "sgd" else {arg: value}
    expect(ValueError, lambda: nt.optim.make_optimizer(name, _params(), **kwargs), arg, repr(value))


@given(betas=st.one_of(not_numbers, st.tuples(st.floats(), st.floats()).filter(
    lambda b: not all(0 <= x < 1 for x in b)), st.lists(st.floats(0, 0.9), min_size=3, max_size=3)))
def test_adam_betas(betas):
    expect(ValueError, lambda: nt.optim.Adam(_params(), betas=betas), "betas", "in [0, 1)")


def test_optimizer_misuse():
    expect(TypeError, lambda: nt.optim.Adam(nt.Linear(2, 2)), "iterable of Parameters", "model.parameters()",
           "got Linear")
    expect(TypeError, lambda: nt.optim.Adam(nt.Linear(2, 2).weight), "got a single Parameter")
    expect(TypeError, lambda: nt.optim.Adam([np.zeros(3)]), "nt.Parameter objects", "got ndarray")
    expect(ValueError, lambda: nt.optim.Adam([]), "empty parameter list")
    expect(ValueError, lambda: nt.optim.make_optimizer("rmsprop", _params()), "optimizer must be one of", "'rmsprop'")
    lin = nt.Linear(3, 2, dtype=DT, seed=0)
    opt = nt.optim.SGD(lin.parameters(), lr=0.1)
    lin.weight.grad = np.ones((3, 2))
    expect(ValueError, opt.step, "gradient shape (3, 2) differs from parameter shape (2, 3)")
    lin.weight.grad = np.ones((2, 3), np.float32)
    expect(TypeError, opt.step, "gradient dtype float32 differs from the parameter's float64")
    expect(ValueError, lambda: opt.set_lr(float("nan")), "lr must be >= 0", "nan")
    before = opt.state_dict()
    expect(ValueError, lambda: opt.load_state_dict({"state": {}}), "keys 'state' and 'param_groups'")
    bad = {"state": {}, "param_groups": [dict(before["param_groups"][0], lr=-1)]}
    expect(ValueError, lambda: opt.load_state_dict(bad), "lr must be >= 0", "-1")
    bad = {"state": {}, "param_groups": [dict(before["param_groups"][0], amsgrad=True)]}
    expect(ValueError, lambda: opt.load_state_dict(bad), "unknown settings ['amsgrad']")
    assert opt.state_dict() == before                                  # refused loads changed nothing


@given(max_norm=st.one_of(not_numbers, st.floats(max_value=-1e-9, allow_nan=False)))
def test_clip_grad_norm_arguments(max_norm):
    expect(ValueError, lambda: nt.clip_grad_norm_(_params(), max_norm), "max_norm", repr(max_norm))


def test_clip_and_schedule_misuse():
    expect(ValueError, lambda: nt.clip_grad_norm_(_params(), 1.0, norm_type="fast"),
           "norm_type must be a number or 'inf'")
    expect(ValueError, lambda: nt.clip_grad_norm_(_params(), 1.0, norm_type=float("nan")), "norm_type must be", "nan")
    expect(TypeError, lambda: nt.clip_grad_norm_(nt.Linear(2, 2), 1.0), "iterable of Parameters", "Linear")
    expect(TypeError, lambda: nt.clip_grad_norm_([np.zeros(2)], 1.0), "nt.Parameter objects", "ndarray")
    for args, needle in [((0, 8, 10), "step counts from 1, got 0"), ((1.5, 8, 10), "step counts from 1, got 1.5"),
                         ((1, 0, 10), "d_model must be a positive int, got 0"),
                         ((1, 8, 0), "warmup must be an int >= 1"),
                         ((1, 8, 10, "x"), "factor must be a finite number")]:
        expect(ValueError, lambda: nt.optim.noam_lr(*args), needle)
    expect(ValueError, lambda: nt.optim.WarmupInverseSqrtSchedule(-4, 10), "d_model must be a positive int")
    expect(ValueError, lambda: nt.optim.ConstantSchedule(-1.0), "lr must be >= 0")


# ------------------------------------------------------------------------------------------------
# data and the training configuration
# ------------------------------------------------------------------------------------------------

def test_data_refusals():
    expect(ValueError, lambda: ntdata.make_task("add"), "task must be one of", "'add'")
    expect(ValueError, lambda: ntdata.make_task("copy", seed=-1), "seed must be a non-negative int", "-1")
    expect(ValueError, lambda: ntdata.make_task("copy", seed="a"), "seed must be a non-negative int", "'a'")
    expect(ValueError, lambda: ntdata.make_task("copy", vocab_size=2), "vocab_size must be > 2", "2")
    expect(ValueError, lambda: ntdata.make_task("copy", seq_len=0), "seq_len must be a positive int", "0")
    expect(TypeError, lambda: ntdata.make_targets("copy", np.zeros(3)), "src must be an integer array", "float64")
    expect(ValueError, lambda: ntdata.make_targets("copy", np.int64(3)), "src must have shape (..., L)")
    src = np.zeros((10, 3), int)
    expect(ValueError, lambda: ntdata.Batcher(src, src[:9], 2), "same number of rows N", "(10, 3) and (9, 3)")
    expect(ValueError, lambda: ntdata.Batcher(src[0], src[0], 2), "src must have shape (N, L)", "(3,)")
    expect(TypeError, lambda: ntdata.Batcher(src.astype(float), src, 2), "src must be an integer array", "float64")
    expect(ValueError, lambda: ntdata.Batcher(src, src, 11), "batch_size 11 exceeds the 10 training examples")
    expect(ValueError, lambda: ntdata.Batcher(src, src, 0), "batch_size must be a positive int", "0")
    expect(KeyError, lambda: ntdata.Batcher(src, src, 2).load_state_dict({"pos": 0}),
           "missing ['rng', 'perm', 'epoch']")


CONFIG_BAD = {
    "lr": st.one_of(not_numbers, st.floats(max_value=0, allow_nan=False), st.just(float("inf"))),
    "clip": st.one_of(not_numbers, st.floats(max_value=-1e-9, allow_nan=False)),
    "dropout": not_probabilities,
    "label_smoothing": st.one_of(not_numbers, st.floats(min_value=1.0001, allow_infinity=False)),
    "weight_decay": st.one_of(not_numbers, st.floats(max_value=-1e-9, allow_nan=False)),
    "momentum": st.one_of(not_numbers, st.floats(max_value=-1e-9, allow_nan=False)),
    "eps": st.one_of(not_numbers, st.floats(max_value=-1e-9, allow_nan=False)),
    "steps": st.one_of(st.integers(max_value=-1), st.floats(), st.text(max_size=2), st.none()),
    "seed": st.one_of(st.integers(max_value=-1), st.floats(), st.text(max_size=2), st.none()),
    "d_model": not_positive_ints, "batch_size": not_positive_ints, "warmup": not_positive_ints,
    "task": st.text(max_size=5), "optimizer": st.text(max_size=5),
    "dtype": st.sampled_from(["float16", "int32", np.float32]),
    "activation": st.text(max_size=4), "schedule": st.text(max_size=4), "pos_encoding": st.text(max_size=4),
    "betas": st.one_of(not_numbers, st.tuples(st.floats(1, 5), st.floats(0, 0.5)),
                       st.lists(st.floats(0, .5), max_size=1)),
}


@given(data=st.data(), field=st.sampled_from(sorted(CONFIG_BAD)))
def test_train_config_refuses_every_bad_field(data, field):
    value = data.draw(CONFIG_BAD[field])
    needle = field.split("_")[0] if field != "label_smoothing" else field
    expect(ValueError, lambda: TrainConfig(**{field: value}), needle)


# ------------------------------------------------------------------------------------------------
# the command line
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,needle", [
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["train", "--bogus"], "unrecognized arguments: --bogus"),
    (["train", "--steps", "many"], "argument --steps: invalid int value: 'many'"),
    (["train", "--lr", "fast"], "argument --lr: invalid float value: 'fast'"),
    (["train", "--task", "add"], "argument --task: invalid choice: 'add'"),
    (["evaluate", "x.npz", "--split", "test"], "argument --split: invalid choice: 'test'"),
    (["demo", "--d-model", "0"], "argument --d-model: must be a positive integer, got 0"),
    (["demo", "--dropout", "1.5"], "argument --dropout: must be a number in [0, 1], got 1.5"),
    (["demo", "--seed", "-3"], "argument --seed: must be a non-negative integer, got -3"),
    (["gradcheck", "--eps", "0"], "argument --eps: must be a positive number, got 0"),
    (["drill", "check", "x.py", "--cases", "zero"], "argument --cases: must be a positive integer, got 'zero'"),
])
def test_cli_refuses_unknown_options_and_values(argv, needle, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", [
    (["train", "--lr", "0"], "lr must be > 0, got 0.0"),
    (["train", "--lr", "nan"], "lr must be > 0, got nan"),
    (["train", "--dropout", "1.5"], "dropout probability must be a number in [0, 1], got 1.5"),
    (["train", "--batch-size", "0"], "batch_size must be a positive int, got 0"),
    (["train", "--seed", "-1"], "seed must be an int >= 0, got -1"),
    (["train", "--betas", "0.9", "1.0"], "betas[1] must be in [0, 1), got 1.0"),
    (["train", "--eval-every", "-1"], "--eval-every must be >= 0, got -1"),
    (["train", "--clip", "-1"], "clip (0 = no clipping) must be >= 0, got -1.0"),
    (["train", "--label-smoothing", "2"], "label_smoothing must be in [0, 1], got 2.0"),
    (["train", "--activation", "tanh"], f"activation must be one of {GPT_FFNS}, got 'tanh'"),
    (["train", "--save", "no/such/dir/run.npz"], "the directory"),
    (["train", "--resume", "missing.npz"], "checkpoint missing.npz does not exist"),
    (["evaluate", "missing.npz"], "checkpoint missing.npz does not exist"),
    (["evaluate", "."], "is not a numpy-transformer checkpoint"),
    (["demo", "--d-model", "30", "--nhead", "4"], "--d-model must be divisible by --nhead, got 30 and 4"),
    (["demo", "--seq-len", "6000", "--no-torch"], "--seq-len must be at most 5000"),
])
def test_cli_explains_bad_values(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv + (["--steps", "0"] if argv[0] == "train" and "--resume" not in argv else [])) == 2
    assert needle in capsys.readouterr().err


def test_cli_predict_and_evaluate_arguments(tmp_path, capsys):
    path = tmp_path / "run.npz"
    assert main(["train", "--task", "copy", "--vocab-size", "8", "--seq-len", "4", "--num-train", "50", "--num-val",
                 "10", "--d-model", "8", "--nhead", "2", "--layers", "1", "--dim-feedforward", "8", "--batch-size", "4",
                 "--steps", "1", "--quiet", "--save", str(path)]) == 0
    capsys.readouterr()
    for argv, needle in [
        (["predict", str(path), "--tokens", "a b c d"], "--tokens must be integers separated by spaces, got 'a b c d'"),
        (["predict", str(path), "--tokens", "2 3 4 9"], "token ids must lie in [0, 8), got 9"),
        (["predict", str(path), "--tokens", "2 3 -4 5"], "token ids must lie in [0, 8), got -4"),
        (["predict", str(path), "--tokens", "2 3"], "the model was trained on length 4; got 2 tokens"),
        (["predict", str(path), "--random", "-2"], "--random must be a positive number of examples, got -2"),
        (["evaluate", str(path), "--num", "0"], "--num must be positive, got 0"),
        (["train", "--resume", str(path), "--d-model", "16"],
         "another configuration: d_model: checkpoint 8, requested 16"),
    ]:
        assert main(argv) == 2, argv
        assert needle in capsys.readouterr().err, argv


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


def _decoders():
    layer = nt.TransformerDecoderLayer(D, H, FF, dropout=0.0, dtype=DT, seed=0)
    return {"TransformerDecoderLayer": layer, "TransformerDecoder": nt.TransformerDecoder(layer, 2),
            "Transformer": nt.Transformer(D, H, 1, 1, FF, dropout=0.0, dtype=DT, seed=0)}


def _decoder_call(name, tgt=None, memory=None, **kw):
    m = _decoders()[name]
    tgt = np.zeros((B, S, D)) if tgt is None else tgt
    memory = np.zeros((B, T, D)) if memory is None else memory
    return lambda: m(memory, tgt, **kw) if name == "Transformer" else m(tgt, memory, **kw)


def _seq2seq():
    return nt.Seq2SeqModel(V, V, d_model=D, nhead=H, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=FF,
                           dropout=0.0, max_len=MAXLEN, dtype=DT, seed=0)


def _gpt():
    return nt.GPT(vocab_size=V, block_size=MAXLEN, n_layer=1, n_head=H, n_embd=D, dtype="float64", seed=0)


_ONES = np.ones((B, 3), dtype=np.int64)
DONE_WHEN = {      # the "Done when" list: each entry point that takes the input, and what it says
    # memory of the wrong width
    **{f"{n} memory width": (_decoder_call(n, memory=np.zeros((B, T, D + 1))), ValueError,
                             ["must have last dimension 6", f"(D = d_model = {D})", f"got shape {(B, T, D + 1)}"])
       for n in ("TransformerDecoderLayer", "TransformerDecoder", "Transformer")},
    "Seq2SeqModel.decode memory width": (lambda: _seq2seq().decode(_ONES, np.zeros((B, T, D - 1))), ValueError,
                                         ["memory must have last dimension 6", f"got shape {(B, T, D - 1)}"]),
    # a mask for the wrong length
    **{f"{n} {k}": (_decoder_call(n, **{k: np.zeros(shape, bool)}), ValueError, [k, want, f"got {shape}"])
       for n in ("TransformerDecoderLayer", "TransformerDecoder", "Transformer")
       for k, shape, want in [("tgt_mask", (T, T), f"{(S, S)}"), ("memory_mask", (S, S), f"{(S, T)}"),
                              ("tgt_key_padding_mask", (B, T), f"{(B, S)}"),
                              ("memory_key_padding_mask", (B, S), f"{(B, T)}")]},
    "Seq2SeqModel.greedy_decode src_key_padding_mask": (
        lambda: _seq2seq().greedy_decode(_ONES, 4, 1, 2, src_key_padding_mask=np.zeros((B, 2), bool)), ValueError,
        ["src_key_padding_mask must have shape (2, 3)", "got (2, 2)"]),
    "GPT.generate attention_mask": (lambda: _gpt().generate(_ONES, 2, attention_mask=np.ones((B, 4), int)),
                                    ValueError, ["attention_mask must have shape (2, 3)", "got shape (2, 4)"]),
    # ids past max_len / block_size during generation
    "Seq2SeqModel.greedy_decode max_len": (lambda: _seq2seq().greedy_decode(_ONES, MAXLEN + 1, 1, 2), ValueError,
                                           [f"max_len must be <= the model's max_len={MAXLEN}", f"got {MAXLEN + 1}"]),
    "Seq2SeqModel.greedy_decode src length": (lambda: _seq2seq().greedy_decode(np.ones((B, MAXLEN + 1), int), 3, 1, 2),
                                              ValueError, [f"src length {MAXLEN + 1} exceeds max_len={MAXLEN}"]),
    # (generate past block_size crops, as nanoGPT: tests/models/test_generation_crop.py)
    "GPT forward past block_size": (lambda: _gpt()(np.ones((B, MAXLEN + 1), int)), ValueError,
                                    [f"ids: {MAXLEN + 1} positions exceed block_size={MAXLEN}"]),
    # an empty prompt
    "GPT.generate empty prompt": (lambda: _gpt().generate(np.zeros((B, 0), int), 2), ValueError,
                                  ["ids is an empty prompt (shape (2, 0))", "at least one token per row"]),
    "GPT.generate no rows": (lambda: _gpt().generate(np.zeros((0, 3), int), 2), ValueError,
                             ["ids holds no prompt (shape (0, 3))", "B >= 1"]),
    "GPT.generate all-padding row": (lambda: _gpt().generate(_ONES, 2, attention_mask=[[0, 0, 0], [1, 1, 1]]),
                                     ValueError, ["attention_mask row 0 is all 0: an empty prompt"]),
    "Seq2SeqModel.greedy_decode empty src": (lambda: _seq2seq().greedy_decode(np.zeros((B, 0), int), 3, 1, 2),
                                             ValueError, ["src must have a non-empty batch and sequence",
                                                          "got shape (2, 0)"]),
    "Transformer empty src": (lambda: _decoders()["Transformer"](np.zeros((B, 0, D)), np.zeros((B, S, D))),
                              ValueError, ["src and tgt must have a non-empty batch and sequence", f"src {(B, 0, D)}"]),
    **{f"{n} empty tgt": (_decoder_call(n, tgt=np.zeros((B, 0, D))), ValueError,
                          ["non-empty batch and sequence", f"tgt {(B, 0, D)}"])
       for n in ("TransformerDecoderLayer", "TransformerDecoder", "Transformer")},
}


@pytest.mark.parametrize("case", list(DONE_WHEN))
def test_decoder_and_generation_errors_of_the_done_when_list(case):
    """The issue's list (memory of the wrong width, a mask for the wrong length, ids past max_len during
    generation, an empty prompt) at every entry point that takes that input: the message names the
    argument, what was expected and what was received."""
    fn, exc, needles = DONE_WHEN[case]
    expect(exc, fn, *needles)
