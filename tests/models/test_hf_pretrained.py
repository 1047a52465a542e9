"""Hugging Face folders, proven against ``transformers`` itself: ``nt.GPT.from_pretrained`` and
``save_pretrained`` for GPT-2 and Llama (grouped-query attention), in float64.

Every model is a tiny random configuration built offline (no download): ``GPT2LMHeadModel(config)`` or
``LlamaForCausalLM(config)``, its weights drawn at O(1) (the 0.02 initialisation, zero biases and unit
norms would hide a swapped or untransposed tensor), saved by ``transformers``' own ``save_pretrained``.

``transformers``' Llama is not exact in float64: its rotary embedding computes the angles in float32
and its RMSNorm normalises in float32 (its eager attention's softmax too), so it sits ~1e-7 from
itself. The fixture :func:`exact_llama` makes the oracle exact instead of loosening the tolerance:
the rotary embedding and RMSNorm forwards are replaced by the same formulas in the input's dtype, and
attention is ``sdpa`` (torch's float64 kernel).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer.models.pretrained import to_hf
from tests._compare import assert_close

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")
from transformers.models.llama import modeling_llama  # noqa: E402

IDS = np.array([[1, 7, 3, 9, 4, 0], [5, 2, 8, 2, 6, 10]])      # (B, S), vocab 11


def _rms_norm_forward(self, hidden_states):
    """LlamaRMSNorm.forward in the input's dtype (transformers' upcasts to float32)."""
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def _rotary_forward(self, x, position_ids):
    """LlamaRotaryEmbedding.forward with float64 angles: the frequencies ``theta ** (-2i / Dh)`` and
    ``position * frequency`` computed in float64 (transformers' are float32), then rotate_half's
    ``cat(freqs, freqs)`` layout as transformers."""
    dim = 2 * self.inv_freq.shape[-1]
    theta = self.config.rope_parameters["rope_theta"]
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)            # (Dh/2,)
    freqs = position_ids[..., None].to(torch.float64) * inv_freq                             # (B, S, Dh/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


@pytest.fixture
def exact_llama(monkeypatch):
    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", _rms_norm_forward)
    monkeypatch.setattr(modeling_llama.LlamaRotaryEmbedding, "forward", _rotary_forward)


def _randomise(model, seed):
    """Every parameter of a transformers model drawn from N(0, 0.3**2) (norms around 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3 + ("norm" in name or "ln_" in name))
    return model


GPT2_CASES = {
    "tied_gelu_new": dict(),
    "untied_relu": dict(tie_word_embeddings=False, activation_function="relu", n_inner=12),
    "exact_gelu": dict(activation_function="gelu", layer_norm_epsilon=1e-3),
}
LLAMA_CASES = {
    "gqa_untied": dict(num_attention_heads=4, num_key_value_heads=2),
    "mqa_tied_bias": dict(num_attention_heads=4, num_key_value_heads=1, tie_word_embeddings=True,
                          attention_bias=True, mlp_bias=True, rope_theta=500.0, rms_norm_eps=1e-3),
    "mha": dict(num_attention_heads=2, num_key_value_heads=2),
}


def hf_gpt2(seed=0, dtype=torch.float64, **kw):
    cfg = dict(vocab_size=11, n_positions=16, n_embd=8, n_layer=2, n_head=2, bos_token_id=None, eos_token_id=None)
    cfg.update(kw)
    return _randomise(transformers.GPT2LMHeadModel(transformers.GPT2Config(**cfg)).to(dtype).eval(), seed)


def hf_llama(seed=0, dtype=torch.float64, **kw):
    cfg = dict(vocab_size=11, hidden_size=16, intermediate_size=24, num_hidden_layers=2, max_position_embeddings=32,
               bos_token_id=None, eos_token_id=None, attn_implementation="sdpa")
    cfg.update(kw)
    return _randomise(transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg)).to(dtype).eval(), seed)


def _cases():
    return ([pytest.param(hf_gpt2, kw, id=f"gpt2-{k}") for k, kw in GPT2_CASES.items()]
            + [pytest.param(hf_llama, kw, id=f"llama-{k}") for k, kw in LLAMA_CASES.items()])


def _hf_logits(hf, ids=IDS):
    return hf(torch.tensor(ids)).logits


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("build, kw", _cases())
def test_logits_and_every_gradient_match_transformers(build, kw, tmp_path, exact_llama):
    """transformers' folder -> from_pretrained: logits and every parameter's gradient (random upstream
    gradient) agree with transformers' autograd to 1e-10 relative."""
    hf = build(**kw)
    hf.save_pretrained(tmp_path)
    ours = nt.GPT.from_pretrained(tmp_path, dtype="float64")
    ref = _hf_logits(hf)
    logits = ours(IDS)
    g = np.random.default_rng(1).standard_normal(logits.shape)
    (ref * torch.tensor(g)).sum().backward()
    ours.zero_grad()
    ours.backward(g)
    hf_grads = {name: p.grad for name, p in hf.named_parameters()}
    our_grads = to_hf(ours.config, {name: p.grad for name, p in ours.named_parameters()})
    assert sorted(our_grads) == sorted(hf_grads)                    # every parameter has its counterpart
    assert_close({"logits": (logits, ref.detach()), **{k: (our_grads[k], hf_grads[k]) for k in hf_grads}},
                 tol=1e-10)


def test_the_fixture_is_what_makes_llama_exact(tmp_path):
    """Unpatched, transformers' float64 Llama is ~1e-7 from ours (its float32 angles and norm): the
    fixture, not a tolerance, is what the 1e-10 above rests on."""
    hf = hf_llama(**LLAMA_CASES["gqa_untied"])
    hf.save_pretrained(tmp_path)
    ref = _hf_logits(hf).detach().numpy()
    err = np.abs(nt.GPT.from_pretrained(tmp_path, dtype="float64")(IDS) - ref).max() / np.abs(ref).max()
    assert 1e-10 < err < 1e-5


OURS = {
    "gpt2": dict(vocab_size=11, block_size=16, n_layer=2, n_head=2, n_embd=8, ffn="gelu_new"),
    "gpt2_untied_silu": dict(vocab_size=11, block_size=16, n_layer=1, n_head=2, n_embd=8, ffn="silu", n_inner=12,
                             tie_word_embeddings=False, layer_norm_eps=1e-3),
    "llama": dict(llama=True, block_size=16, n_layer=2, n_head=4, num_kv_heads=2, n_embd=16, n_inner=24,
                  rope_base=300.0, layer_norm_eps=1e-4),
    "llama_tied_bias": dict(llama=True, block_size=16, n_layer=1, n_head=2, num_kv_heads=1, n_embd=8,
                            tie_word_embeddings=True, bias=True),
}


def _ours(kind, dtype="float64", seed=3):
    kw = dict(OURS[kind])
    if kw.pop("llama", False):
        m = nt.GPT(nt.llama_config(11, dtype=dtype, **kw), seed=seed)
    else:
        m = nt.GPT(dtype=dtype, seed=seed, **kw)
    rng = np.random.default_rng(seed)
    for p in m.parameters():
        p.data[...] += (0.3 * rng.standard_normal(p.shape)).astype(p.dtype)
    return m


@pytest.mark.parametrize("kind", list(OURS))
def test_save_pretrained_loads_in_transformers_to_the_same_logits(kind, tmp_path, exact_llama):
    ours = _ours(kind)
    ours.save_pretrained(tmp_path)
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float64, attn_implementation="sdpa")
    assert type(hf).__name__ == ("GPT2LMHeadModel" if kind.startswith("gpt2") else "LlamaForCausalLM")
    assert (hf.lm_head.weight is hf.get_input_embeddings().weight) == ours.config.tie_word_embeddings
    assert_close({"logits": (ours(IDS), _hf_logits(hf).detach())}, tol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", list(OURS))
def test_save_then_load_is_bit_for_bit(kind, dtype, tmp_path):
    ours = _ours(kind, dtype)
    ours.save_pretrained(tmp_path)
    back = nt.GPT.from_pretrained(tmp_path, dtype=dtype)
    # the same configuration; Llama's intermediate_size is always a number, so n_inner comes back explicit
    expected = ours.config if kind.startswith("gpt2") else dataclasses.replace(ours.config, n_inner=ours.config.ffn_dim)
    assert back.config == expected
    a, b = ours.state_dict(), back.state_dict()
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
    assert np.array_equal(back(IDS), ours(IDS))


@pytest.mark.parametrize("build, kw", [_cases()[0], _cases()[3], _cases()[4]])
def test_greedy_generation_equals_transformers_generate(build, kw, tmp_path, exact_llama):
    hf = build(**kw)
    hf.save_pretrained(tmp_path)
    ours = nt.GPT.from_pretrained(tmp_path, dtype="float64")
    prompt = IDS[:, :3]
    ref = hf.generate(torch.tensor(prompt), attention_mask=torch.ones(prompt.shape, dtype=torch.long),
                      max_new_tokens=9, do_sample=False, num_beams=1, pad_token_id=0).numpy()
    np.testing.assert_array_equal(ours.generate(prompt, 9), ref)


def test_sharded_folder_loads_to_the_same_logits(tmp_path):
    hf = hf_gpt2()
    hf.save_pretrained(tmp_path, max_shard_size="1KB")
    assert (tmp_path / "model.safetensors.index.json").exists() and not (tmp_path / "model.safetensors").exists()
    assert_close({"logits": (nt.GPT.from_pretrained(tmp_path, dtype="float64")(IDS), _hf_logits(hf).detach())},
                 tol=1e-10)


def test_bfloat16_weights_are_widened_exactly(tmp_path):
    """A bfloat16 folder (NumPy has no bfloat16): each weight becomes the float32 torch widens it to."""
    hf = hf_llama(dtype=torch.bfloat16, **LLAMA_CASES["gqa_untied"])
    hf.save_pretrained(tmp_path)
    ours = nt.GPT.from_pretrained(tmp_path)                        # float32
    assert ours.dtype == np.float32
    ref = {k: v.float().numpy() for k, v in hf.state_dict().items()}
    got = to_hf(ours.config, {name: p.data for name, p in ours.named_parameters()})
    for k in got:
        assert np.array_equal(got[k], ref[k]), k


def test_the_hubs_older_gpt2_layout_loads(tmp_path):
    """The Hub's GPT-2 file has no ``transformer.`` prefix and holds the causal-mask buffers
    ``h.{i}.attn.bias``: both are accepted (the buffers skipped)."""
    from safetensors.numpy import load_file, save_file
    hf = hf_gpt2()
    hf.save_pretrained(tmp_path)
    tensors = {k.removeprefix("transformer."): v for k, v in load_file(tmp_path / "model.safetensors").items()}
    for i in range(2):
        tensors[f"h.{i}.attn.bias"] = np.tril(np.ones((1, 1, 16, 16), dtype=np.uint8))
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    assert_close({"logits": (nt.GPT.from_pretrained(tmp_path, dtype="float64")(IDS), _hf_logits(hf).detach())},
                 tol=1e-10)


def test_float32_load_matches_transformers_float32(tmp_path):
    hf = hf_gpt2(dtype=torch.float32)
    hf.save_pretrained(tmp_path)
    ours = nt.GPT.from_pretrained(tmp_path)
    assert ours.dtype == np.float32 and ours(IDS).dtype == np.float32
    assert_close({"logits": (ours(IDS), _hf_logits(hf).detach())}, tol=1e-4, dtype=np.float32)


@pytest.mark.parametrize("modern", [False, True], ids=["encoder_layer_blocks", "transformer_blocks"])
def test_gelu_new_is_the_tanh_gelu_in_either_block(modern):
    """ffn="gelu_new" against the torch twin (``F.gelu(approximate="tanh")``), logits and every gradient,
    in the torch-layout blocks and in the TransformerBlocks (rotary positions), and unlike exact GELU."""
    from reference_torch.models import gpt as RG
    kw = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8, dtype="float64", seed=2,
              positions="rope" if modern else "learned")
    m = nt.GPT(ffn="gelu_new", **kw)
    rng = np.random.default_rng(0)
    for p in m.parameters():
        p.data[...] += rng.standard_normal(p.shape)
    assert m.config.modern == modern
    ref = RG.to_torch(m)
    logits = m(IDS)
    g = np.random.default_rng(1).standard_normal(logits.shape)
    m.zero_grad()
    m.backward(g)
    out = ref(torch.tensor(IDS))
    out.backward(torch.tensor(g))
    grads = dict(ref.named_parameters())
    assert_close({"logits": (logits, out.detach()),
                  **{n: (p.grad, grads[n].grad) for n, p in m.named_parameters()}}, tol=1e-10)
    exact = nt.GPT(ffn="gelu", **kw)
    exact.load_state_dict(m.state_dict())
    assert np.abs(exact(IDS) - logits).max() > 1e-6
