"""The ``numpy_transformer`` modules against ``torch.nn`` and against the hand-written twins.

* ``torch.nn``: for nt.Linear, nt.Embedding, nt.LayerNorm, nt.MultiheadAttention,
  nt.TransformerEncoderLayer and nt.TransformerEncoder, hypothesis draws the configuration (B, S, T,
  H, Dh, F, activation, norm_first, batch_first, unbatched, bias, eps, kdim/vdim, add_bias_kv,
  add_zero_attn, masks, need_weights, average_attn_weights, layers, final norm); the torch module
  (dropout 0, random weights *and* biases) is copied into ours with
  ``load_state_dict({k: v.detach().numpy()})``; output, attention
  weights, every input gradient and every named parameter gradient are compared, under a random
  upstream gradient. The drawing and running code is :mod:`reference_torch.check`'s, so the checker
  and these tests exercise the same comparisons.
* twins (:mod:`reference_torch.nn`) with dropout active: our masks are replayed on the torch side.
* ``state_dict`` keys and shapes: identical to torch's, in order.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from _compare import assert_close
from _paths import REPO_ROOT
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
import reference_torch as R
from numpy_transformer.nn.block import GATED_FFNS
from reference_torch import convert, table
from reference_torch.check import HypothesisChooser
from reference_torch.check import checker as check

# Tiny tensors: torch's intra-op threads only add synchronisation cost (float64 LayerNorm is ~50x
# slower with 2 threads than with 1), and pytest-xdist already runs one worker per core.
torch.set_num_threads(1)

ROOT = REPO_ROOT


def verify(res, dtype):
    """Every named parameter of the reference has a gradient pair, ours exist with the right dtype,
    and everything agrees to the dtype's tolerance."""
    ref_params = [n for n, _ in res.ref.named_parameters()]
    assert res.param_grad_names == ref_params
    assert sorted(n for n, _ in res.ours.named_parameters()) == sorted(ref_params)
    for name, (ours, ref) in res.pairs.items():
        assert ours is not None, f"{name}: numpy_transformer produced no value/gradient ({res.cfg})"
        assert ref is not None, f"{name}: the reference produced no value/gradient ({res.cfg})"
        assert np.asarray(ours).dtype == np.dtype(dtype), f"{name}: dtype {np.asarray(ours).dtype}, expected {dtype}"
    if np.dtype(dtype) == np.float64:
        assert_close(res.pairs, dtype=dtype, context=f"{res.cfg}\n")
    else:
        # 1e-4 against torch's float32; an ill-conditioned entry may instead be within 10x of torch's
        # own float32 error from the exact answer (see reference_torch.check.float32_verdicts)
        check.verify_float32(res)


# ------------------------------------------------------------------------------------------------
# against torch.nn
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", check.KINDS)
@given(data=st.data())
def test_vs_torch_nn_float64(kind, data):
    cfg = check.draw_config(kind, HypothesisChooser(data), dtype="float64")
    verify(check.compare(cfg, "torch.nn"), np.float64)


@pytest.mark.parametrize("kind", check.KINDS)
@given(data=st.data())
def test_vs_torch_nn_float32(kind, data):
    cfg = check.draw_config(kind, HypothesisChooser(data), dtype="float32", **check.FLOAT32_SIZES)
    verify(check.compare(cfg, "torch.nn"), np.float32)


@pytest.mark.parametrize("kind", ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"])
@pytest.mark.parametrize("mask", ["is_causal", "causal_bool+padding", "per_head+padding", "float+padding"])
def test_vs_torch_nn_mask_kinds_explicit(kind, mask):
    """Each mask kind at least once per module, whatever hypothesis draws."""
    cfg = check.draw_config(kind, check.RandomChooser(np.random.default_rng(len(kind) * 7 + len(mask))))
    cfg.update(mode="self", S=4, T=4, kdim=None, vdim=None, mask=mask)
    verify(check.compare(cfg, "torch.nn"), np.float64)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("extras", [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("unbatched", [False, True])
@pytest.mark.parametrize("mask", ["none", "is_causal", "causal_float", "per_head+padding", "float+padding",
                                  "is_causal+padding"])
def test_mha_add_bias_kv_add_zero_attn_unbatched_vs_torch_nn(dtype, extras, unbatched, mask):
    """add_bias_kv / add_zero_attn (bias_k, bias_v and their gradients; masks padded as torch pads them)
    and unbatched (S, D) inputs, every mask kind, with and without the attention weights."""
    for need_weights in (False, True):
        chooser = check.RandomChooser(np.random.default_rng(len(mask) + 3 * unbatched))
        cfg = check.draw_config("MultiheadAttention", chooser,
                                dtype=dtype, mode="self", mask=mask, unbatched=unbatched, add_bias_kv=extras[0],
                                add_zero_attn=extras[1], **(check.FLOAT32_SIZES if dtype == "float32" else {}))
        cfg.update(need_weights=need_weights)
        res = check.compare(cfg, "torch.nn")
        assert ("grad.bias_k" in res.pairs) == extras[0]
        verify(res, np.dtype(dtype))


@pytest.mark.parametrize("kind", ["TransformerEncoderLayer", "TransformerEncoder"])
@pytest.mark.parametrize("mask", ["none", "is_causal", "causal_bool+padding", "per_head"])
def test_encoder_unbatched_vs_torch_nn(kind, mask):
    """torch's encoder layer and encoder accept unbatched (S, D) input (masks (S, S) / (H, S, S), (S,))."""
    for dtype in ("float64", "float32"):
        cfg = check.draw_config(kind, check.RandomChooser(np.random.default_rng(len(mask))), dtype=dtype,
                                mask=mask, unbatched=True, **(check.FLOAT32_SIZES if dtype == "float32" else {}))
        verify(check.compare(cfg, "torch.nn"), np.dtype(dtype))


def test_bias_kv_initialisation_matches_torch_xavier_normal():
    """bias_k, bias_v (1, 1, E): torch's xavier_normal_ (fan_in = fan_out = E, std sqrt(1/E), mean 0)."""
    e = 4096
    ours = nt.MultiheadAttention(e, 1, add_bias_kv=True, dtype=np.float64, seed=0)
    tnn = torch.nn.MultiheadAttention(e, 1, add_bias_kv=True, dtype=torch.float64)
    for name in ("bias_k", "bias_v"):
        a, b = ours.state_dict()[name], tnn.state_dict()[name].numpy()
        assert a.shape == b.shape == (1, 1, e)
        for x in (a, b):                           # 4096 draws: the std is known to about 1.1%
            assert abs(x.std() / np.sqrt(1.0 / e) - 1) < 0.05 and abs(x.mean()) < 5 * np.sqrt(1.0 / e) / np.sqrt(e)
    assert not np.array_equal(ours.bias_k.data, ours.bias_v.data)
    assert list(ours.state_dict()) == list(tnn.state_dict())


@pytest.mark.parametrize("kind", ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"])
def test_is_causal_hint_against_torch(kind):
    """What torch does with the is_causal hint, and what we do:

    * no mask: torch raises "Need attn_mask if specifying the is_causal hint"; we apply the causal
      mask (documented difference) -- which is torch's answer with the causal mask given;
    * the right hint: torch's answer (whichever path it takes) is ours;
    * a wrong hint: torch's answer depends on the code path (the hint without need_weights, the mask
      with it), so we refuse it (tests/cli/test_bad_input_modules.py)."""
    rng = np.random.default_rng(0)
    d, h, s = 4, 2, 3
    x = rng.standard_normal((2, s, d))
    xt = torch.from_numpy(x)
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)
    if kind == "MultiheadAttention":
        ours = nt.MultiheadAttention(d, h, dtype=np.float64, seed=1)
        tm = table.torch_module(ours)
        run_t = lambda **kw: tm(xt, xt, xt, need_weights=False, **kw)[0]
        run_o = lambda **kw: ours(x, x, x, need_weights=False, **kw)[0]
        mask_kw = "attn_mask"
    else:
        layer = nt.TransformerEncoderLayer(d, h, 8, dropout=0.0, dtype=np.float64, seed=1)
        ours = (layer if kind == "TransformerEncoderLayer"
                else nt.TransformerEncoder(layer, 2, enable_nested_tensor=False))
        tm = table.torch_module(ours)
        run_t, run_o = (lambda **kw: tm(xt, **kw)), (lambda **kw: ours(x, **kw))
        mask_kw = "src_mask" if kind == "TransformerEncoderLayer" else "mask"
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        run_t(is_causal=True)
    with torch.no_grad():
        ref = run_t(**{mask_kw: causal, "is_causal": True})
        assert_close({"hint alone vs torch's mask": (run_o(is_causal=True), ref)})
        assert_close({"right hint": (run_o(**{mask_kw: causal.numpy(), "is_causal": True}), ref)})
        wrong = torch.zeros(s, s, dtype=torch.bool)
        wrong[:, 1] = True
        torch_wrong = run_t(**{mask_kw: wrong, "is_causal": True})
        assert not torch.allclose(torch_wrong, run_t(**{mask_kw: wrong}))   # torch used the hint, not the mask
    with pytest.raises(ValueError, match="is_causal=True is a hint"):
        run_o(**{mask_kw: wrong.numpy(), "is_causal": True})


@pytest.mark.parametrize("extras", [(True, False), (False, True)])
def test_is_causal_with_appended_keys_is_refused_where_torch_has_two_answers(extras):
    """With add_bias_kv / add_zero_attn and the right causal hint, torch's need_weights=False path masks
    the appended keys causally and its need_weights=True path does not: two answers for one call. We
    refuse is_causal=True there (the object stays usable) and equal torch's mask path without the hint."""
    rng = np.random.default_rng(1)
    d, h, s = 8, 2, 4
    x = rng.standard_normal((2, s, d))
    xt = torch.from_numpy(x)
    ours = nt.MultiheadAttention(d, h, add_bias_kv=extras[0], add_zero_attn=extras[1], dtype=np.float64, seed=3)
    tm = table.torch_module(ours)
    causal = np.triu(np.ones((s, s), dtype=bool), 1)
    ct = torch.from_numpy(causal)
    with torch.no_grad():
        hint_fast = tm(xt, xt, xt, attn_mask=ct, is_causal=True, need_weights=False)[0]
        hint_slow = tm(xt, xt, xt, attn_mask=ct, is_causal=True, need_weights=True)[0]
        mask_only = tm(xt, xt, xt, attn_mask=ct, need_weights=False)[0]
    assert not torch.allclose(hint_fast, hint_slow)          # torch disagrees with itself
    with pytest.raises(ValueError, match="cannot be combined with add_bias_kv or add_zero_attn"):
        ours(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
    with pytest.raises(ValueError, match="cannot be combined with add_bias_kv or add_zero_attn"):
        ours(x, x, x, is_causal=True)
    assert_close({"mask path": (ours(x, x, x, attn_mask=causal, need_weights=False)[0], mask_only),
                  "torch's need_weights path": (ours(x, x, x, attn_mask=causal)[0], hint_slow)})


# ------------------------------------------------------------------------------------------------
# against the twins, dropout active
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kind", check.TWIN_KINDS)
@given(data=st.data(), p=st.sampled_from([0.1, 0.5, 0.9]))
def test_vs_twin_with_dropout(kind, dtype, data, p):
    cfg = check.draw_config(kind, HypothesisChooser(data), dtype=dtype, dropout=p,
                            **(check.FLOAT32_SIZES if dtype == "float32" else {}))
    res = check.compare(cfg, "twin")
    enc = ("self_attn", "dropout", "dropout1", "dropout2")
    dec = ("self_attn", "multihead_attn", "dropout", "dropout1", "dropout2", "dropout3")

    def block(ffn):            # nt.TransformerBlock: a gated feed-forward has no dropout inside
        return ("self_attn", "dropout1", "dropout2") + (() if ffn in GATED_FFNS else ("mlp.dropout",))
    expected = {"MultiheadAttention": {""}, "TransformerEncoderLayer": set(enc),
                "TransformerDecoderLayer": set(dec)}.get(kind)
    if kind == "Transformer":
        expected = ({f"encoder.layers.{i}.{n}" for i in range(cfg["num_encoder_layers"]) for n in enc}
                    | {f"decoder.layers.{i}.{n}" for i in range(cfg["num_decoder_layers"]) for n in dec})
    elif kind == "GPT":
        modern = nt.GPTConfig(2, n_head=cfg["H"], n_embd=cfg["D"], positions=cfg["positions"], norm=cfg["norm"],
                              ffn=cfg["ffn"], num_kv_heads=cfg["num_kv_heads"]).modern
        names = block(cfg["ffn"]) if modern else enc
        expected = {"drop"} | {f"h.{i}.{n}" for i in range(cfg["n_layer"]) for n in names}
    elif kind == "GroupedQueryAttention":
        expected = {""}
    elif kind == "TransformerBlock":
        expected = set(block(cfg["ffn"]))
    elif expected is None:
        expected = {f"layers.{i}.{n}" for i in range(cfg["num_layers"])
                    for n in (dec if kind == "TransformerDecoder" else enc)}
    assert set(res.masks) == expected, f"dropout_masks names {sorted(res.masks)}"
    verify(res, np.dtype(dtype))


@pytest.mark.parametrize("kind", check.TWIN_KINDS)
@given(data=st.data())
def test_twin_equals_torch_nn(kind, data):
    """The oracle itself: each twin (dropout 0) equals torch.nn's module, outputs and gradients."""
    cfg = check.draw_config(kind, HypothesisChooser(data))
    tnn = check._build_torch(cfg)
    check._perturb_torch(tnn, torch.Generator().manual_seed(cfg["seed"]))
    tw = table.twin(check._build_numpy(cfg))
    assert list(tw.state_dict()) == list(tnn.state_dict())
    tw.load_state_dict(tnn.state_dict(), strict=True)
    tnn.train()
    tw.train()
    rng = np.random.default_rng(cfg["seed"])
    x_np, other = check._inputs(cfg, rng)
    xa = {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in x_np.items()}
    xb = {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in x_np.items()}
    out_a, extra_a = check._call(tw, cfg, xa, other, "twin")
    out_b, extra_b = check._call(tnn, cfg, xb, other, "torch.nn")
    g = torch.from_numpy(rng.standard_normal(tuple(out_a.shape)))
    out_a.backward(g)
    out_b.backward(g)
    pairs = {"out": (out_a, out_b)}
    pairs.update({n: (extra_a[n], extra_b[n]) for n in extra_a})
    pairs.update({f"d{k}": (xa[k].grad, xb[k].grad) for k in xa})
    ga, gb = convert.grads_to_numpy(tw), convert.grads_to_numpy(tnn)
    assert list(ga) == list(gb)
    pairs.update({f"grad.{k}": (ga[k], gb[k]) for k in ga})
    assert_close(pairs, context=f"{cfg}\n")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@given(v=st.integers(1, 9), d=st.integers(1, 8), b=st.integers(1, 3), s=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_token_embedding_vs_twin(dtype, v, d, b, s, seed):
    ours = nt.TokenEmbedding(v, d, dtype=dtype, seed=seed)
    ref = table.twin(ours)
    assert list(ref.state_dict()) == list(ours.state_dict()) == ["embedding.weight"]
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, v, size=(b, s))
    ids.flat[-1] = ids.flat[0]
    y = ours(ids)
    yt = ref(torch.from_numpy(ids))
    g = rng.standard_normal(y.shape).astype(dtype)
    assert ours.backward(g) is None
    yt.backward(torch.from_numpy(g))
    verify_pairs = {"out": (y, yt), "grad.embedding.weight": (ours.embedding.weight.grad, ref.embedding.weight.grad)}
    assert y.dtype == dtype and ours.embedding.weight.grad.dtype == dtype
    assert_close(verify_pairs, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@given(d=st.integers(1, 9), b=st.integers(1, 3), s=st.integers(1, 7), max_len=st.integers(7, 40),
       seed=st.integers(0, 2**31))
def test_positional_encoding_vs_twin(dtype, d, b, s, max_len, seed):
    ours = nt.PositionalEncoding(d, max_len=max_len, dtype=dtype)
    ref = table.twin(ours)
    assert list(ref.state_dict()) == list(ours.state_dict()) == []
    assert_close({"pe": (ours.pe, ref.pe.to(convert.torch_dtype(dtype)))}, dtype=dtype)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, s, d)).astype(dtype)
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    y, yt = ours(x), ref(xt)
    g = rng.standard_normal(y.shape).astype(dtype)
    dx = ours.backward(g)
    yt.backward(torch.from_numpy(g))
    assert y.dtype == dtype and dx.dtype == dtype
    assert_close({"out": (y, yt), "dx": (dx, xt.grad)}, dtype=dtype)


def test_positional_encoding_too_long_raises_on_both_sides():
    ours, ref = nt.PositionalEncoding(4, max_len=5, dtype=np.float64), R.PositionalEncoding(4, max_len=5)
    with pytest.raises(ValueError, match="max_len"):
        ours(np.zeros((1, 6, 4)))
    with pytest.raises(ValueError, match="max_len"):
        ref(torch.zeros(1, 6, 4, dtype=torch.float64))


# ------------------------------------------------------------------------------------------------
# state_dict keys and shapes
# ------------------------------------------------------------------------------------------------

def _keys_shapes(sd):
    return [(k, tuple(np.shape(v.detach().numpy() if hasattr(v, "detach") else v))) for k, v in sd.items()]


@pytest.mark.parametrize("kind", check.KINDS)
@given(data=st.data())
def test_state_dict_keys_and_shapes_match_torch(kind, data):
    cfg = check.draw_config(kind, HypothesisChooser(data))
    tnn, ours = check._build_torch(cfg), check._build_numpy(cfg)
    assert _keys_shapes(ours.state_dict()) == _keys_shapes(tnn.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in tnn.named_parameters()]
    if kind in check.TWIN_KINDS:
        tw = table.twin(ours)
        assert _keys_shapes(tw.state_dict()) == _keys_shapes(tnn.state_dict())
    # the documented copy recipe works with strict keys
    ours.load_state_dict({k: v.detach().numpy() for k, v in tnn.state_dict().items()})


@pytest.mark.parametrize("kdim,vdim,bias", [(None, None, True), (3, 5, True), (3, 5, False), (None, None, False)])
def test_multihead_attention_parameter_names(kdim, vdim, bias):
    tnn = torch.nn.MultiheadAttention(6, 2, bias=bias, kdim=kdim, vdim=vdim, batch_first=True, dtype=torch.float64)
    ours = nt.MultiheadAttention(6, 2, bias=bias, kdim=kdim, vdim=vdim, dtype=np.float64)
    tw = R.MultiheadAttention(6, 2, bias=bias, kdim=kdim, vdim=vdim, dtype=torch.float64)
    expected = _keys_shapes(tnn.state_dict())
    assert _keys_shapes(ours.state_dict()) == expected
    assert _keys_shapes(tw.state_dict()) == expected
    packed = kdim is None
    assert ("in_proj_weight" in dict(expected)) == packed
    assert ("q_proj_weight" in dict(expected)) == (not packed)


# ------------------------------------------------------------------------------------------------
# convert helpers
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_convert_round_trip_preserves_values_and_dtype(dtype):
    ours = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=dtype, seed=0)
    ref = R.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=convert.torch_dtype(dtype))
    convert.to_torch(ours, ref)
    for k, v in ref.state_dict().items():
        assert v.dtype == convert.torch_dtype(dtype)
        np.testing.assert_array_equal(v.numpy(), ours.state_dict()[k])
    other = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=dtype, seed=1)
    convert.from_torch(ref, other)
    for k, v in other.state_dict().items():
        assert v.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(v, ours.state_dict()[k])
    # copies, not views: changing one side leaves the other alone
    with torch.no_grad():
        ref.linear1.weight.add_(1.0)
    np.testing.assert_array_equal(other.linear1.weight.data, ours.linear1.weight.data)


def test_convert_refuses_dtype_mismatch_unless_cast():
    ours = nt.Linear(3, 2, dtype=np.float64, seed=0)
    ref = torch.nn.Linear(3, 2, dtype=torch.float32)
    with pytest.raises(TypeError, match="dtype mismatch"):
        convert.to_torch(ours, ref)
    with pytest.raises(TypeError, match="dtype mismatch"):
        convert.from_torch(ref, ours)
    convert.to_torch(ours, ref, cast=True)
    np.testing.assert_allclose(ref.weight.detach().numpy(), ours.weight.data, rtol=1e-7)


def test_grads_to_numpy_names_and_values():
    ref = torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True, dtype=torch.float64)
    grads = convert.grads_to_numpy(ref)
    assert list(grads) == [n for n, _ in ref.named_parameters()] and all(g is None for g in grads.values())
    ref(torch.randn(2, 3, 4, dtype=torch.float64)).backward(torch.randn(2, 3, 4, dtype=torch.float64))
    grads = convert.grads_to_numpy(ref)
    for n, p in ref.named_parameters():
        assert grads[n].dtype == np.float64
        np.testing.assert_array_equal(grads[n], p.grad.numpy())


def test_set_dropout_masks_rejects_unknown_names_and_bad_masks():
    ref = R.TransformerEncoderLayer(4, 2, 8, dropout=0.5, dtype=torch.float64)
    with pytest.raises(KeyError, match="dropout_1"):
        ref.set_dropout_masks({"dropout_1": np.ones((1, 2, 4), bool)})
    with pytest.raises(TypeError, match="bool"):
        ref.set_dropout_masks({"dropout1": np.ones((1, 2, 4))})
    ref.set_dropout_masks({"dropout1": np.ones((1, 3, 4), bool)})
    with pytest.raises(ValueError, match="does not fit"):
        ref(torch.zeros(1, 2, 4, dtype=torch.float64))
    ref.clear_dropout_masks()
    assert ref.dropout1.mask is None and ref.self_attn.dropout_mask is None


def test_replayed_masks_make_twin_deterministic():
    """With every mask replayed the twin's training forward no longer depends on torch's RNG."""
    ours = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.5, dtype=np.float64, seed=3)
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    y = ours(x)
    ref = table.twin(ours).set_dropout_masks(nt.dropout_masks(ours))
    xt = torch.from_numpy(x)
    torch.manual_seed(0)
    a = ref(xt)
    torch.manual_seed(1)
    b = ref(xt)
    assert torch.equal(a, b)
    assert_close({"out": (y, a)})


# ------------------------------------------------------------------------------------------------
# the checker
# ------------------------------------------------------------------------------------------------

def test_checker_cli_passes():
    proc = subprocess.run([sys.executable, "-m", "reference_torch.check", "--trials", "2", "--seed", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for kind in check.KINDS:
        assert kind in proc.stdout
    assert "max rel" in proc.stdout and "OK: worst relative error" in proc.stdout


def test_checker_catches_a_tiny_gradient_bug(monkeypatch, capsys):
    """A 1e-7 relative error in one weight gradient is enough to fail the checker."""
    real = nt.functional.linear_backward

    def slightly_wrong(dout, cache):
        dx, dw, db = real(dout, cache)
        return dx, dw * (1 + 1e-7), db

    monkeypatch.setattr(nt.functional, "linear_backward", slightly_wrong)
    assert check.main(["--trials", "2", "--module", "Linear"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "grad.weight" in out


def test_ctrl_c_in_the_checker_is_one_line_and_status_130(monkeypatch, capsys):
    import runpy

    def interrupted(argv=None):
        raise KeyboardInterrupt
    monkeypatch.setattr(check, "main", interrupted)
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("reference_torch.check", run_name="__main__")
    assert exit_.value.code == 130
    assert capsys.readouterr().err == "interrupted; the check stopped before its report\n"

