"""nt.GPT and its PyTorch twin (reference_torch.models.gpt), trained side by side in float64.

Same initial weights, same batches (next-token prediction with padded tails ignored), dropout active
with the same masks (replayed from the NumPy forward), the same loss, clipping, schedule and
optimizer: every step's loss must agree to 1e-9 relative and the final weights to 1e-8 (normwise,
per tensor), as the encoder model's lockstep test (tests/models/test_training_lockstep.py).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as tF

import numpy_transformer as nt
from numpy_transformer.nn.block import GATED_FFNS
from reference_torch.models import gpt as RG
from tests._compare import assert_close

torch.set_num_threads(1)

STEPS = 25
V, S, B, PAD = 13, 8, 5, 0

CONFIGS = {
    # learned positions, tied head, gelu, AdamW (decoupled decay touches the tied weight once)
    "adamw_tied": dict(model=dict(positions="learned", tie_word_embeddings=True, ffn="gelu"),
                       opt=("adamw", dict(lr=3e-3, weight_decay=0.05)), schedule=False),
    # sinusoidal positions, untied head, relu, Adam with the warm-up schedule
    "adam_untied": dict(model=dict(positions="sinusoidal", tie_word_embeddings=False, ffn="relu"),
                        opt=("adam", dict(lr=2e-3, betas=(0.9, 0.98), eps=1e-9)), schedule=True),
    # tied, SGD with momentum, no biases
    "sgd_tied_nobias": dict(model=dict(positions="learned", tie_word_embeddings=True, bias=False),
                            opt=("sgd", dict(lr=0.1, momentum=0.9)), schedule=False),
    # the modern blocks (nt.TransformerBlock), issue 13's options
    "llama_mqa": dict(model=dict(positions="rope", norm="rmsnorm", ffn="swiglu", num_kv_heads=1, bias=False,
                                 tie_word_embeddings=False), opt=("adamw", dict(lr=3e-3, weight_decay=0.05)),
                      schedule=False),
    "alibi_silu": dict(model=dict(positions="alibi", ffn="silu", norm="layernorm", n_head=4, num_kv_heads=2),
                       opt=("adam", dict(lr=2e-3)), schedule=True),
    "relative_rmsnorm": dict(model=dict(positions="relative", norm="rmsnorm", ffn="gelu",
                                        relative_attention_num_buckets=6, relative_attention_max_distance=5),
                             opt=("adam", dict(lr=2e-3)), schedule=False),
    "no_positions": dict(model=dict(positions="none", ffn="swiglu", tie_word_embeddings=True),
                         opt=("sgd", dict(lr=0.1, momentum=0.9)), schedule=False),
}


def _batches(seed):
    """Next-token batches: targets are the ids shifted left; padded tails are ignored by the loss."""
    rng = np.random.default_rng(seed)
    while True:
        seq = rng.integers(1, V, size=(B, S + 1))
        lengths = rng.integers(S - 3, S + 2, size=B)
        pad = np.arange(S + 1)[None, :] >= lengths[:, None]
        seq[pad] = PAD
        yield seq[:, :-1], seq[:, 1:]


def _model(cfg, seed=3):
    kw = dict(n_head=2)
    kw.update(cfg["model"])
    return nt.GPT(nt.GPTConfig(V, block_size=S, n_layer=2, n_embd=16, n_inner=32, dropout=0.1,
                               dtype="float64", initializer_range=0.5, **kw), seed=seed)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_gpt_and_torch_twin_train_in_lockstep(name):
    cfg = CONFIGS[name]
    model = _model(cfg)
    twin = RG.to_torch(model)
    opt_name, kw = cfg["opt"]
    ours = nt.optim.make_optimizer(opt_name, model.parameters(), **kw)
    ref = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}[opt_name](twin.parameters(),
                                                                                                **kw)
    assert len(ours.params()) == len(list(twin.parameters()))           # the tied weight once on both sides
    crit = nt.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    clip = 0.5
    schedule = nt.optim.WarmupInverseSqrtSchedule(16, warmup=10, factor=0.5) if cfg["schedule"] else None
    batches = _batches(7)
    clipped = 0
    for step in range(1, STEPS + 1):
        ids, tgt = next(batches)
        if schedule is not None:
            ours.set_lr(schedule(step))
            for g in ref.param_groups:
                g["lr"] = schedule(step)
        ours.zero_grad()
        logits = model(ids)
        loss = float(crit(logits.reshape(-1, V), tgt.reshape(-1)))
        model.backward(crit.backward().reshape(logits.shape))
        norm = float(nt.clip_grad_norm_(model.parameters(), clip))
        ours.step()
        masks = nt.dropout_masks(model)
        per_block = 3 if model.config.ffn in GATED_FFNS else 4     # a gated one has no inner dropout
        assert len(masks) == 1 + per_block * 2
        ref.zero_grad()
        twin.set_dropout_masks(masks)
        tlogits = twin(ids)
        tloss = tF.cross_entropy(tlogits.reshape(-1, V), torch.as_tensor(tgt).reshape(-1), ignore_index=PAD,
                                 label_smoothing=0.1)
        tloss.backward()
        tnorm = float(torch.nn.utils.clip_grad_norm_(twin.parameters(), clip))
        ref.step()
        clipped += norm > clip
        assert abs(loss - tloss.item()) <= 1e-9 * abs(tloss.item()), (step, loss, tloss.item())
        assert abs(norm - tnorm) <= 1e-9 * tnorm, (step, norm, tnorm)
    assert clipped >= 1, "clipping never engaged; the test would not cover it"
    tsd = twin.state_dict()
    assert_close({k: (v, tsd[k]) for k, v in model.state_dict().items()}, tol=1e-8, context=f"{name} final weights: ")
    init = _model(cfg).state_dict()
    assert max(np.abs(v - init[k]).max() for k, v in model.state_dict().items()) > 1e-3     # the weights moved
    if cfg["model"].get("tie_word_embeddings", True):
        assert model.lm_head.weight is model.wte.weight and twin.lm_head.weight is twin.wte.weight


def test_twin_replay_path_equals_torch_nn_blocks():
    """Dropout off: the twin with hand-written blocks equals the one with torch.nn.TransformerEncoderLayer
    blocks, and both equal nt.GPT, so the lockstep test's torch side is torch, plus the masks."""
    model = _model(CONFIGS["adam_untied"]).eval()
    ids, _ = next(_batches(0))
    with torch.no_grad():
        twin = RG.to_torch(model).eval()(ids)
        tnn = RG.to_torch(model, twin=False).eval()(ids)
    assert_close({"twin vs torch.nn blocks": (twin, tnn), "numpy vs torch.nn blocks": (model(ids), tnn)})
