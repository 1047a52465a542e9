"""Activation checkpointing (``checkpoint=True``, numpy_transformer/nn/recompute.py): the outputs, every
gradient and every dropout generator's final state equal the plain path's BIT FOR BIT, with dropout
active, in float32 and float64, for every stack and model kind, with masks and padding; the forward
keeps no layer cache; a refused backward leaves nothing behind."""

import numpy as np
import pytest
from _paths import REPO_ROOT
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer.nn.recompute import backward_layer, run_layer

DTYPES = [np.float32, np.float64]


def _gpt(dtype, ck, **kw):
    cfg = dict(vocab_size=13, n_layer=3, n_head=2, n_embd=8, block_size=16, dropout=0.3, dtype=np.dtype(dtype).name)
    cfg.update(kw)
    return nt.GPT(seed=3, checkpoint=ck, **cfg)


def _ids(rng, b, s, v=13):
    return rng.integers(0, v, (b, s))


# each kind: build(dtype, checkpoint) -> model; step(model, rng) -> (outputs, the upstream gradient's run)
def _step_gpt(m, rng, padded=False):
    ids = _ids(rng, 3, 6)
    kw = {}
    if padded:
        mask = np.ones((3, 6), dtype=np.int64)
        mask[1, :2] = 0
        mask[2, :4] = 0
        kw = dict(attention_mask=mask)
    out = m(ids, **kw)
    return [out, m.backward(rng.standard_normal(out.shape).astype(out.dtype))]


def _step_encoder_model(m, rng):
    ids = _ids(rng, 3, 6)
    pad = np.zeros((3, 6), dtype=bool)
    pad[1, 4:] = True
    out = m(ids, src_key_padding_mask=pad)
    return [out, m.backward(rng.standard_normal(out.shape).astype(out.dtype))]


def _step_seq2seq(m, rng):
    src, tgt = _ids(rng, 3, 7), _ids(rng, 3, 5)
    pad = np.zeros((3, 7), dtype=bool)
    pad[2, 5:] = True
    out = m(src, tgt, src_key_padding_mask=pad)
    return [out, m.backward(rng.standard_normal(out.shape).astype(out.dtype))]


def _encoder_stack(dtype, ck, norm_first=False):
    layer = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.3, norm_first=norm_first, dtype=dtype, seed=1)
    return nt.TransformerEncoder(layer, 3, norm=nt.LayerNorm(8, dtype=dtype), seed=2, checkpoint=ck)


def _step_encoder_stack(m, rng):
    x = rng.standard_normal((3, 5, 8)).astype(m.layers[0].dtype)
    pad = np.zeros((3, 5), dtype=bool)
    pad[0, 3:] = True
    out = m(x, mask=nt.Transformer.generate_square_subsequent_mask(5, x.dtype), src_key_padding_mask=pad)
    return [out, m.backward(rng.standard_normal(out.shape).astype(out.dtype))]


def _decoder_stack(dtype, ck, norm_first=False):
    layer = nt.TransformerDecoderLayer(8, 2, 16, dropout=0.3, norm_first=norm_first, dtype=dtype, seed=1)
    return nt.TransformerDecoder(layer, 3, seed=2, checkpoint=ck)


def _step_decoder_stack(m, rng):
    dt = m.layers[0].dtype
    x, mem = rng.standard_normal((2, 5, 8)).astype(dt), rng.standard_normal((2, 4, 8)).astype(dt)
    mpad = np.zeros((2, 4), dtype=bool)
    mpad[1, 3] = True
    out = m(x, mem, tgt_mask=nt.Transformer.generate_square_subsequent_mask(5, dt), memory_key_padding_mask=mpad)
    return [out, *m.backward(rng.standard_normal(out.shape).astype(dt))]


KINDS = {
    "encoder_stack_post_ln": (lambda dt, ck: _encoder_stack(dt, ck), _step_encoder_stack),
    "encoder_stack_pre_ln": (lambda dt, ck: _encoder_stack(dt, ck, True), _step_encoder_stack),
    "decoder_stack_post_ln": (lambda dt, ck: _decoder_stack(dt, ck), _step_decoder_stack),
    "decoder_stack_pre_ln": (lambda dt, ck: _decoder_stack(dt, ck, True), _step_decoder_stack),
    "encoder_model": (lambda dt, ck: nt.TransformerModel(13, 8, 2, 3, 16, dropout=0.3, dtype=dt, seed=4,
                                                          checkpoint=ck), _step_encoder_model),
    "encoder_model_relative": (lambda dt, ck: nt.TransformerModel(13, 8, 2, 3, 16, dropout=0.3, norm_first=True,
                                                                   pos_encoding="relative", dtype=dt, seed=4,
                                                                   checkpoint=ck), _step_encoder_model),
    "encoder_model_alibi": (lambda dt, ck: nt.TransformerModel(13, 8, 2, 2, 16, dropout=0.3, pos_encoding="alibi",
                                                                dtype=dt, seed=4, checkpoint=ck), _step_encoder_model),
    "seq2seq": (lambda dt, ck: nt.Seq2SeqModel(13, 13, 8, 2, 2, 2, 16, dropout=0.3, dtype=dt, seed=5,
                                               checkpoint=ck), _step_seq2seq),
    "gpt": (lambda dt, ck: _gpt(dt, ck), _step_gpt),
    "gpt_padded": (lambda dt, ck: _gpt(dt, ck, positions="sinusoidal"), lambda m, r: _step_gpt(m, r, True)),
    "gpt_modern_rope_swiglu_gqa": (lambda dt, ck: _gpt(dt, ck, positions="rope", norm="rmsnorm", ffn="swiglu",
                                                       num_kv_heads=1), _step_gpt),
    "gpt_relative_padded": (lambda dt, ck: _gpt(dt, ck, positions="relative"), lambda m, r: _step_gpt(m, r, True)),
    "gpt_alibi": (lambda dt, ck: _gpt(dt, ck, positions="alibi"), _step_gpt),
}


def _generators(m):
    return [mm.rng.bit_generator.state for mm in m.modules() if isinstance(mm.__dict__.get("rng"), np.random.Generator)]


def _assert_identical(a, b, what):
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert (p.grad is None) == (q.grad is None), f"{what}: {name}"
        if p.grad is not None:
            assert p.grad.dtype == q.grad.dtype and np.array_equal(p.grad, q.grad), f"{what}: {name}'s gradient differs"
    assert _generators(a) == _generators(b), f"{what}: a dropout generator ends in another state"
    assert nt.dropout_masks(a).keys() == nt.dropout_masks(b).keys()
    for k, mask in nt.dropout_masks(a).items():
        assert np.array_equal(mask, nt.dropout_masks(b)[k]), f"{what}: last_mask of {k}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_checkpointed_steps_equal_the_plain_ones_bit_for_bit(kind, dtype):
    build, step = KINDS[kind]
    plain, ck = build(dtype, False), build(dtype, True)
    assert not plain.checkpoint and ck.checkpoint
    r1, r2 = np.random.default_rng(7), np.random.default_rng(7)
    for i in range(3):                               # gradients accumulate over the steps, as in training
        outs_plain, outs_ck = step(plain, r1), step(ck, r2)
        for o, p in zip(outs_plain, outs_ck):
            assert (o is None and p is None) or (o.dtype == p.dtype and np.array_equal(o, p)), f"{kind} step {i}"
        _assert_identical(plain, ck, f"{kind} step {i}")
        assert not any(m._caches for m in ck.modules()), "every cache consumed"
    assert any(m.p > 0 and m.last_mask is not None and not m.last_mask.all()
               for m in ck.modules() if isinstance(m, nt.Dropout)), "dropout was active"


def test_the_checkpointed_forward_keeps_no_layer_cache_and_the_inputs_only():
    m = _encoder_stack(np.float64, True)
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    out = m(x)
    for layer in m.layers:
        assert not any(mm._caches for mm in layer.modules()), "a checkpointed layer kept its caches"
    (_, saved), = m._caches
    assert saved[0].args[0] is x and len(saved) == 3
    m.checkpoint = False                            # the plain path, for contrast: every layer keeps its caches
    assert m(x).shape == out.shape
    assert all(layer.linear1._caches and layer.norm1._caches and layer.self_attn._caches for layer in m.layers)


def test_the_checkpoint_attribute_follows_the_model_and_is_validated():
    m = nt.Seq2SeqModel(13, 13, 8, 2, 1, 1, 16, dtype=np.float64, seed=0)
    assert not m.checkpoint and not m.transformer.encoder.checkpoint
    m.checkpoint = True
    assert m.transformer.encoder.checkpoint and m.transformer.decoder.checkpoint
    with pytest.raises(TypeError, match="checkpoint must be True or False, got 'yes'"):
        m.checkpoint = "yes"
    assert m.checkpoint                                        # the refused value changed nothing
    assert "checkpoint" not in m.config                        # not architecture: a checkpoint file ignores it


@pytest.mark.parametrize("kind", ["encoder_stack_post_ln", "decoder_stack_pre_ln", "gpt_relative_padded"])
def test_a_refused_backward_leaves_no_recomputed_cache_and_the_next_backward_works(kind):
    build, step = KINDS[kind]
    plain, ck = build(np.float64, False), build(np.float64, True)
    outs = step(plain, np.random.default_rng(1))
    rng = np.random.default_rng(1)
    # the checkpointed run, by hand: forward, a refused backward, then the right one
    if kind.startswith("encoder"):
        x = rng.standard_normal((3, 5, 8))
        pad = np.zeros((3, 5), dtype=bool)
        pad[0, 3:] = True
        out = ck(x, mask=nt.Transformer.generate_square_subsequent_mask(5, x.dtype), src_key_padding_mask=pad)
    elif kind.startswith("decoder"):
        x, mem = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 4, 8))
        mpad = np.zeros((2, 4), dtype=bool)
        mpad[1, 3] = True
        out = ck(x, mem, tgt_mask=nt.Transformer.generate_square_subsequent_mask(5, x.dtype),
                 memory_key_padding_mask=mpad)
    else:
        ids = _ids(rng, 3, 6)
        mask = np.ones((3, 6), dtype=np.int64)
        mask[1, :2] = 0
        mask[2, :4] = 0
        out = ck(ids, attention_mask=mask)
    with pytest.raises(ValueError, match="dout|dlogits"):
        ck.backward(np.zeros(out.shape[:-1] + (out.shape[-1] + 1,)))
    layer_modules = [mm for layer in (ck.h if hasattr(ck, "h") else ck.layers) for mm in layer.modules()]
    assert not any(mm._caches for mm in layer_modules), "the refused backward left a recomputed cache"
    ck.backward(rng.standard_normal(out.shape))
    assert np.array_equal(out, outs[0])
    _assert_identical(plain, ck, kind)


def test_trace_records_the_first_forward_only_and_the_backward_once():
    def run(ck):
        m = _encoder_stack(np.float64, ck)
        x = np.random.default_rng(0).standard_normal((2, 5, 8))
        with nt.trace(m) as t:
            out = m(x)
            m.backward(np.random.default_rng(1).standard_normal(out.shape))
        return t
    plain, ck = run(False), run(True)
    assert len(plain.records) == len(ck.records)
    for a, b in zip(plain.records, ck.records):
        assert repr(a) == repr(b)


def test_run_layer_without_checkpoint_is_the_plain_call():
    layer = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=np.float64, seed=0)
    x = np.random.default_rng(0).standard_normal((2, 3, 8))
    out, saved = run_layer(layer, False, x)
    assert saved is None and layer._caches
    assert backward_layer(layer, None, np.ones_like(out)).shape == x.shape


@given(b=st.integers(1, 3), s=st.integers(1, 6), layers=st.integers(1, 3), norm_first=st.booleans(),
       p=st.sampled_from([0.0, 0.2, 0.6]), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16),
       padded=st.booleans(), causal=st.booleans())
def test_property_encoder_stack_checkpointed_equals_plain(b, s, layers, norm_first, p, dtype, seed, padded, causal):
    def build(ck):
        layer = nt.TransformerEncoderLayer(8, 2, 12, dropout=p, norm_first=norm_first, dtype=dtype, seed=seed)
        return nt.TransformerEncoder(layer, layers, seed=seed + 1, checkpoint=ck)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, s, 8)).astype(dtype)
    pad = None
    if padded:
        pad = rng.random((b, s)) < 0.3
        pad[:, 0] = False
    dout = rng.standard_normal((b, s, 8)).astype(dtype)
    results = []
    for ck in (False, True):
        m = build(ck)
        out = m(x, src_key_padding_mask=pad, is_causal=causal)
        results.append((m, out, m.backward(dout)))
    (a, oa, da), (c, oc, dc) = results
    assert np.array_equal(oa, oc) and np.array_equal(da, dc)
    _assert_identical(a, c, "property")


def test_a_draw_between_the_forward_and_the_backward_is_not_undone_by_the_replay():
    # the recomputation rewinds each generator to replay the first forward's masks, then puts it back
    # where it stood: a layer used on its own in between (here h[1], in training mode) keeps its draws
    dt = np.float64
    results = []
    for ck in (False, True):
        m = _gpt(dt, ck)
        rng = np.random.default_rng(0)
        ids = _ids(rng, 2, 5)
        out = m(ids)
        m.h[1](rng.standard_normal((2, 5, 8)), is_causal=True)          # draws from h[1]'s generators
        m.backward(rng.standard_normal(out.shape))
        results.append(m)
    _assert_identical(*results, "a draw in between")
    later = [m.h[1].dropout1.rng.random() for m in results]
    assert later[0] == later[1]


def _train_config(model, **kw):
    from numpy_transformer.training.trainer import TrainConfig
    base = dict(num_train=200, num_val=16, d_model=16, nhead=2, num_layers=2, dim_feedforward=32, batch_size=8,
                warmup=4, dtype="float32", dropout=0.2, steps=5, model=model)
    base.update(dict(task="reverse", vocab_size=10, seq_len=5) if model == "seq2seq" else
                dict(digits=2) if model == "gpt" else dict(task="shift", vocab_size=10, seq_len=6))
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("model,extra", [("encoder", {}), ("encoder", dict(pos_encoding="alibi", norm_first=True)),
                                         ("seq2seq", {}), ("gpt", {}), ("gpt", dict(pos_encoding="rope"))])
def test_a_checkpointed_training_run_equals_the_plain_one_bit_for_bit(model, extra):
    from numpy_transformer.training.trainer import Trainer
    runs = []
    for ck in (False, True):
        t = Trainer(_train_config(model, checkpoint_activations=ck, **extra))
        assert t.model.checkpoint is ck
        losses = []
        t.train(callback=lambda r: losses.append(r.loss))
        runs.append((t, losses))
    (a, la), (b, lb) = runs
    assert la == lb and len(la) == 5
    assert a.step == b.step == 5
    for (name, p), (_, q) in zip(a.model.named_parameters(), b.model.named_parameters()):
        assert np.array_equal(p.data, q.data), f"{name} differs after 5 steps"
    assert _generators(a.model) == _generators(b.model)
    assert a.evaluate().loss == b.evaluate().loss


def test_train_command_takes_checkpoint_activations_and_resume_may_toggle_it(tmp_path, capsys):
    from numpy_transformer.cli import main
    from numpy_transformer.training.trainer import TrainConfig, Trainer
    args = ["train", "--task", "shift", "--vocab-size", "10", "--seq-len", "6", "--num-train", "100", "--num-val",
            "16", "--d-model", "16", "--nhead", "2", "--layers", "2", "--dim-feedforward", "32", "--batch-size", "8",
            "--warmup", "2", "--quiet", "--no-log"]
    assert main(args + ["--steps", "3", "--checkpoint-activations", "--save", str(tmp_path / "a.npz")]) == 0
    assert main(args + ["--steps", "3", "--save", str(tmp_path / "b.npz")]) == 0
    a, b = Trainer.resume(tmp_path / "a.npz"), Trainer.resume(tmp_path / "b.npz")
    assert a.config.checkpoint_activations and a.model.checkpoint and not b.model.checkpoint
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        assert np.array_equal(p.data, q.data)
    assert not Trainer.resume(tmp_path / "a.npz", {"checkpoint_activations": False}).model.checkpoint
    with pytest.raises(ValueError, match="checkpoint_activations must be True or False, got 'yes'"):
        TrainConfig(checkpoint_activations="yes")
    capsys.readouterr()


def test_the_study_tools_example_runs_and_prints_true(capsys):
    import re
    doc = (REPO_ROOT / "docs" / "study-tools.md").read_text(encoding="utf-8")
    section = doc.split("### Activation checkpointing", 1)[1].split("\n### ", 1)[0]
    code, = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    exec(compile(code, "docs/study-tools.md", "exec"), {})
    assert capsys.readouterr().out.strip() == "gradients identical bit for bit: True"
