"""Bad input, token ids and targets (out of range, negative, non-integer dtypes, wrong shapes) and
``load_state_dict`` (every refusal leaves the module untouched). The suite's conventions are stated in
tests/cli/test_bad_input_modules.py.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from tests.cli.bad_input_helpers import (
    DT,
    FF,
    KD,
    MAXLEN,
    VD,
    D,
    H,
    S,
    V,
    _layer,
    expect,
    seeds,
)

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
