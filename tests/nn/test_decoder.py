"""The decoder modules beyond the registry's sweeps (tests/nn/test_modules_vs_torch.py runs those for
TransformerDecoderLayer, TransformerDecoder and Transformer): torch's signatures and defaults, the
memory gradient summing over layers, state_dict round trips with torch, every mask kind on each mask
argument, the causal mask helper, hints, a one-key memory, custom parts and torch's initialisation."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
from _compare import assert_close

import numpy_transformer as nt
import reference_torch as R
from numpy_transformer.testing.decoders import MEMORY_MASKS
from numpy_transformer.testing.masks import SELF_MASKS
from reference_torch import check, table

torch.set_num_threads(1)


def _t(a, grad=False):
    return torch.from_numpy(np.array(a, copy=True)).requires_grad_(grad)


# ------------------------------------------------------------------------------------------------
# signatures and defaults: exactly torch's, except the documented differences
# ------------------------------------------------------------------------------------------------

# ours -> torch: batch_first True (ours, as our encoder) vs False; dtype/seed ours, device/dtype torch's;
# activation "relu" vs F.relu (the same function)
_DIFFERENT = {"batch_first", "dtype", "device", "seed", "activation"}


@pytest.mark.parametrize("name", ["TransformerDecoderLayer", "TransformerDecoder", "Transformer"])
@pytest.mark.parametrize("method", ["__init__", "forward"])
def test_signatures_and_defaults_are_torchs(name, method):
    ours = inspect.signature(getattr(getattr(nt, name), method)).parameters
    theirs = inspect.signature(getattr(getattr(torch.nn, name), method)).parameters
    common = [p for p in theirs if p not in ("device", "dtype")]
    assert [p for p in ours if p in theirs and p not in ("dtype",)] == common     # torch's order
    for p in common:
        if p not in _DIFFERENT:
            assert ours[p].default == theirs[p].default, p
    if "batch_first" in ours:
        assert ours["batch_first"].default is True and theirs["batch_first"].default is False
    if "activation" in ours:
        assert ours["activation"].default == "relu" and theirs["activation"].default is torch.nn.functional.relu
    # not in torch: seed; the decoders' incremental decoding (Hugging Face's names), after torch's arguments
    extra = {"seed"} | ({"past_key_values", "use_cache"} if method == "forward" and name != "Transformer" else set())
    # TransformerDecoder(checkpoint=...): activation checkpointing
    extra |= {"checkpoint"} if (method, name) == ("__init__", "TransformerDecoder") else set()
    assert set(ours) - set(theirs) <= extra
    if method == "forward" and name != "Transformer":
        assert list(ours)[-2:] == ["past_key_values", "use_cache"]
        assert ours["past_key_values"].default is None and ours["use_cache"].default is None


def test_generate_square_subsequent_mask_is_torchs():
    for sz in range(0, 6):
        for dt, tdt in ((np.float32, torch.float32), (np.float64, torch.float64)):
            ours = nt.Transformer.generate_square_subsequent_mask(sz, dtype=dt)
            ref = torch.nn.Transformer.generate_square_subsequent_mask(sz, dtype=tdt).numpy()
            assert ours.dtype == ref.dtype and ours.shape == (sz, sz)
            np.testing.assert_array_equal(ours, ref)
    assert nt.Transformer.generate_square_subsequent_mask(3).dtype == np.float32      # torch's default


# ------------------------------------------------------------------------------------------------
# the memory gradient: one sum over every decoder layer's cross-attention
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("norm_first", [False, True])
def test_memory_gradient_is_the_sum_over_layers(norm_first):
    """Torch's twin with a separate copy of memory fed to each layer: the per-layer gradients differ,
    and ours is their sum (float64, 1e-10)."""
    rng = np.random.default_rng(0)
    d, h, b, s, t = 8, 2, 2, 5, 4
    layer = nt.TransformerDecoderLayer(d, h, 16, dropout=0.0, norm_first=norm_first, dtype=np.float64, seed=1)
    dec = nt.TransformerDecoder(layer, 3, norm=nt.LayerNorm(d, dtype=np.float64), seed=2)
    for p in dec.parameters():
        p.data += 0.25 * rng.standard_normal(p.shape)
    tw = table.torch_module(dec, "twin")
    tgt, mem = rng.standard_normal((b, s, d)), rng.standard_normal((b, t, d))
    mask = nt.Transformer.generate_square_subsequent_mask(s, np.float64)
    y = dec(tgt, mem, tgt_mask=mask)
    g = rng.standard_normal(y.shape)
    dtgt, dmem = dec.backward(g)
    x, copies = _t(tgt, True), [_t(mem, True) for _ in tw.layers]
    out = x
    for lay, m in zip(tw.layers, copies):
        out = lay(out, m, tgt_mask=_t(mask), tgt_is_causal=True)
    out = tw.norm(out)
    out.backward(_t(g))
    per_layer = [m.grad.numpy() for m in copies]
    assert_close({"out": (y, out), "dtgt": (dtgt, x.grad), "dmemory = sum over layers": (dmem, sum(per_layer))})
    for i, gi in enumerate(per_layer):       # each layer's share is far from the total: the sum matters
        assert np.abs(dmem - gi).max() > 1e-3 * np.abs(dmem).max(), i


def test_memory_of_one_key_and_one_target_position():
    """T = 1 (the softmax over one key is 1: the query path's gradient is an exact zero) and S = 1."""
    for s, t in ((3, 1), (1, 3), (1, 1)):
        cfg = check.draw_config("TransformerDecoder", check.RandomChooser(np.random.default_rng(s * 10 + t)),
                                tgt_mask="none", memory_mask="none", unbatched=False)
        cfg.update(S=s, T=t)
        res = check.compare(cfg, "torch.nn")
        assert_close(res.pairs, context=f"{cfg}\n")


# ------------------------------------------------------------------------------------------------
# every mask kind on each mask argument, float64 and float32, against torch.nn
# ------------------------------------------------------------------------------------------------

_ARGS = [("tgt_mask", k) for k in SELF_MASKS] + [("memory_mask", k) for k in MEMORY_MASKS]


@pytest.mark.parametrize("kind,arg,mask", [(k, a, m) for k in ("TransformerDecoderLayer", "TransformerDecoder",
                                                                 "Transformer") for a, m in _ARGS]
                         + [("Transformer", "src_mask", m) for m in SELF_MASKS])
def test_each_mask_kind_on_each_argument_vs_torch_nn(kind, arg, mask):
    seed = sum(map(ord, kind + arg + mask))
    for dtype in ("float64", "float32"):
        sizes = check.FLOAT32_SIZES if dtype == "float32" else {}
        cfg = check.draw_config(kind, check.RandomChooser(np.random.default_rng(seed)), dtype=dtype,
                                **{arg: mask}, **sizes)
        res = check.compare(cfg, "torch.nn")
        if dtype == "float64":
            assert_close(res.pairs, context=f"{cfg}\n")
        else:
            check.verify_float32(res)


def test_causal_hints_vs_torch():
    """tgt_is_causal / memory_is_causal: the hint with its mask is torch's answer; the hint alone (ours:
    applies the causal mask; torch raises) is torch's answer with the mask; None detects the mask."""
    rng = np.random.default_rng(3)
    d, h, s, t = 6, 2, 4, 5
    ours = nt.TransformerDecoderLayer(d, h, 12, dropout=0.0, dtype=np.float64, seed=4)
    tm = table.torch_module(ours)
    tgt, mem = rng.standard_normal((2, s, d)), rng.standard_normal((2, t, d))
    causal_t, causal_m = nt.functional.causal_mask(s), nt.functional.causal_mask(s, t)
    with torch.no_grad():
        ref = tm(_t(tgt), _t(mem), tgt_mask=_t(causal_t), memory_mask=_t(causal_m), tgt_is_causal=True,
                 memory_is_causal=True)
        with pytest.raises(RuntimeError, match="Need attn_mask"):
            tm(_t(tgt), _t(mem), tgt_is_causal=True)
    for kw in (dict(tgt_mask=causal_t, memory_mask=causal_m, tgt_is_causal=True, memory_is_causal=True),
               dict(tgt_is_causal=True, memory_is_causal=True),
               dict(tgt_mask=causal_t, memory_mask=causal_m)):
        assert_close({f"{sorted(kw)}": (ours(tgt, mem, **kw), ref)})
    dec = nt.TransformerDecoder(ours, 2, seed=5)
    float_mask = nt.Transformer.generate_square_subsequent_mask(s, np.float64)
    a = dec(tgt, mem, tgt_mask=float_mask)                      # tgt_is_causal=None: detected
    assert_close({"detected": (a, dec(tgt, mem, tgt_is_causal=True))})


# ------------------------------------------------------------------------------------------------
# state_dict: torch's keys; torch's weights load with no renaming, and back
# ------------------------------------------------------------------------------------------------

def test_state_dict_round_trip_with_torch_transformer():
    torch.manual_seed(0)
    tnn = torch.nn.Transformer(8, 2, 2, 3, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    ours = nt.Transformer(8, 2, 2, 3, 16, dropout=0.0, dtype=np.float64, seed=0)
    keys = list(tnn.state_dict())
    assert list(ours.state_dict()) == keys
    for k in ("encoder.layers.1.self_attn.in_proj_weight", "encoder.norm.weight", "decoder.layers.2.norm3.bias",
              "decoder.layers.0.multihead_attn.out_proj.weight", "decoder.norm.bias"):
        assert k in keys
    ours.load_state_dict({k: v.numpy() for k, v in tnn.state_dict().items()})           # torch -> ours
    rng = np.random.default_rng(1)
    src, tgt = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 4, 8))
    mask = nt.Transformer.generate_square_subsequent_mask(4, np.float64)
    with torch.no_grad():
        ref = tnn(_t(src), _t(tgt), tgt_mask=_t(mask))
    assert_close({"torch weights in ours": (ours(src, tgt, tgt_mask=mask), ref)})
    other = nt.Transformer(8, 2, 2, 3, 16, dropout=0.0, dtype=np.float64, seed=9)
    back = torch.nn.Transformer(8, 2, 2, 3, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    back.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in other.state_dict().items()}, strict=True)
    with torch.no_grad():
        assert_close({"ours in torch": (other(src, tgt, tgt_mask=mask), back(_t(src), _t(tgt), tgt_mask=_t(mask)))})


def test_layer_state_dict_keys_are_torchs():
    tnn = torch.nn.TransformerDecoderLayer(6, 3, 10, bias=False, dtype=torch.float64)
    ours = nt.TransformerDecoderLayer(6, 3, 10, bias=False, dtype=np.float64)
    assert [(k, tuple(v.shape)) for k, v in tnn.state_dict().items()] == \
        [(k, v.shape) for k, v in ours.state_dict().items()]
    assert [k.split(".")[0] for k in ours.state_dict()] == (["self_attn"] * 2 + ["multihead_attn"] * 2 +
                                                            ["linear1", "linear2", "norm1", "norm2", "norm3"])


def test_transformer_initialisation_is_torchs_xavier_uniform():
    """torch re-initialises every matrix Xavier-uniform (linear2 (D, F): bound sqrt(6/(D+F)), far above
    Linear's own 1/sqrt(F)); ours too, custom parts included; biases and norms stay as built."""
    d, f = 16, 256
    ours = nt.Transformer(d, 2, 1, 1, f, dtype=np.float64, seed=0)
    tnn = torch.nn.Transformer(d, 2, 1, 1, f, dtype=torch.float64)
    bound = np.sqrt(6.0 / (d + f))
    for m in (ours.state_dict(), {k: v.numpy() for k, v in tnn.state_dict().items()}):
        w = m["decoder.layers.0.linear2.weight"]
        assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
        assert abs(w.std() / (bound / np.sqrt(3)) - 1) < 0.05
        np.testing.assert_array_equal(m["encoder.norm.weight"], 1.0)
    custom = nt.TransformerEncoder(nt.TransformerEncoderLayer(d, 2, f, dtype=np.float64, seed=1), 1)
    nt.Transformer(d, 2, 1, 1, f, custom_encoder=custom, dtype=np.float64, seed=0)
    assert np.abs(custom.layers[0].linear2.weight.data).max() > 1.0 / np.sqrt(f)


def test_seed_reproduces_weights_and_dropout():
    rng = np.random.default_rng(0)
    src, tgt = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 4, 8))
    a, b = (nt.Transformer(8, 2, 1, 2, 16, dropout=0.5, dtype=np.float64, seed=7) for _ in range(2))
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        np.testing.assert_array_equal(va, vb, err_msg=ka)
    np.testing.assert_array_equal(a(src, tgt), b(src, tgt))
    masks = nt.dropout_masks(a)
    assert not np.array_equal(masks["decoder.layers.0.dropout1"], masks["decoder.layers.1.dropout1"])


# ------------------------------------------------------------------------------------------------
# gradients accumulate; custom parts; unbatched; sequence-first
# ------------------------------------------------------------------------------------------------

def test_gradients_accumulate_over_backwards():
    rng = np.random.default_rng(2)
    m = nt.Transformer(6, 2, 1, 1, 8, dropout=0.0, dtype=np.float64, seed=3)
    src, tgt = rng.standard_normal((2, 3, 6)), rng.standard_normal((2, 4, 6))
    g = rng.standard_normal((2, 4, 6))
    m(src, tgt)
    first = m.backward(g)
    once = {n: p.grad.copy() for n, p in m.named_parameters()}
    m(src, tgt)
    second = m.backward(g)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    for n, p in m.named_parameters():
        np.testing.assert_allclose(p.grad, 2 * once[n], rtol=1e-14, atol=0, err_msg=n)


@pytest.mark.parametrize("custom", ["encoder", "decoder"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_custom_encoder_or_decoder_vs_torch_nn(custom, dtype):
    for trial in range(3):
        cfg = check.draw_config("Transformer", check.RandomChooser(np.random.default_rng(trial)), dtype=dtype,
                                custom=custom, **(check.FLOAT32_SIZES if dtype == "float32" else {}))
        res = check.compare(cfg, "torch.nn")
        tm = res.ref
        assert isinstance(tm, torch.nn.Transformer)
        part = tm.encoder if custom == "encoder" else tm.decoder
        assert (part.norm is None) == (not cfg["final_norm"])      # the custom part's own final norm
        if dtype == "float64":
            assert_close(res.pairs, context=f"{cfg}\n")
        else:
            check.verify_float32(res)


@pytest.mark.parametrize("kind", ["TransformerDecoderLayer", "TransformerDecoder", "Transformer"])
@pytest.mark.parametrize("layout", ["unbatched", "sequence-first"])
def test_unbatched_and_sequence_first_vs_torch_nn(kind, layout):
    for mask in ("causal_bool+padding", "per_head+padding"):
        cfg = check.draw_config(kind, check.RandomChooser(np.random.default_rng(len(mask))), tgt_mask=mask,
                                memory_mask="per_head+padding", unbatched=layout == "unbatched")
        if layout == "sequence-first":
            cfg["batch_first"] = False
        assert_close(check.compare(cfg, "torch.nn").pairs, context=f"{cfg}\n")


def test_twin_replays_every_dropout_of_the_transformer():
    cfg = check.draw_config("Transformer", check.RandomChooser(np.random.default_rng(5)), dropout=0.5,
                            custom=None, unbatched=False)
    res = check.compare(cfg, "twin")
    names = set(res.masks)
    assert {"decoder.layers.0.multihead_attn", "decoder.layers.0.dropout3", "encoder.layers.0.dropout2"} <= names
    assert isinstance(res.ref, R.Transformer)
    assert_close(res.pairs, context=f"{cfg}\n")


@pytest.mark.parametrize("activation", [nt.GELU("tanh"), nt.ReLU(), "gelu"])
def test_activation_module_vs_torch_nn(activation):
    """activation: a string or an nt.ReLU/nt.GELU module (torch: a string or a callable)."""
    rng = np.random.default_rng(6)
    ours = nt.TransformerDecoderLayer(6, 2, 10, dropout=0.0, activation=activation, dtype=np.float64, seed=1)
    for p in ours.parameters():
        p.data += 0.25 * rng.standard_normal(p.shape)
    tm = table.torch_module(ours)
    tgt, mem = rng.standard_normal((2, 4, 6)), rng.standard_normal((2, 3, 6))
    y = ours(tgt, mem, tgt_is_causal=True)
    g = rng.standard_normal(y.shape)
    dtgt, dmem = ours.backward(g)
    tt, mt = _t(tgt, True), _t(mem, True)
    yt = tm(tt, mt, tgt_mask=_t(nt.functional.causal_mask(4)), tgt_is_causal=True)
    yt.backward(_t(g))
    pairs = {"out": (y, yt), "dtgt": (dtgt, tt.grad), "dmemory": (dmem, mt.grad)}
    pairs.update({n: (dict(ours.named_parameters())[n].grad, p.grad) for n, p in tm.named_parameters()})
    assert_close(pairs)
    if isinstance(activation, nt.GELU):        # the tanh form reached torch: it is not the exact GELU
        with torch.no_grad():
            exact = table.torch_module(nt.TransformerDecoderLayer(6, 2, 10, dropout=0.0, activation="gelu",
                                                                  dtype=np.float64, seed=1))
            exact.load_state_dict(tm.state_dict())
            assert not torch.allclose(exact(_t(tgt), _t(mem)), tm(_t(tgt), _t(mem)), rtol=1e-9, atol=0)
