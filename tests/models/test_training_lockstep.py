"""The NumPy model and its PyTorch twin, trained side by side in float64.

Same initial weights, same batches, dropout active with the same masks (replayed from the NumPy
forward), the same loss, clipping, schedule and optimizer: every step's loss must agree to 1e-9
relative and the final weights to 1e-8 (normwise, per tensor).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as tF

import numpy_transformer as nt
from numpy_transformer.tasks import data as ntdata
from reference_torch.models.encoder import TorchTransformerModel, from_torch, to_torch
from tests._compare import assert_close

STEPS = 25

CONFIGS = {
    # post-LN, sinusoidal, relu, Adam with the paper's warm-up schedule. No L2 decay here: Adam divides
    # ``wd * p`` by ~eps along the key-bias directions, whose gradient is exactly 0 in exact arithmetic, so
    # rounding noise there grows ~1000x per step (in torch and NumPy alike; chaos, not a bug). Adam's decay
    # term is checked step by step in test_training_optim.py, AdamW's decoupled decay below.
    "adam": dict(model=dict(norm_first=False, pos_encoding="sinusoidal", activation="relu"),
                 opt=("adam", dict(lr=1e-3, betas=(0.9, 0.98), eps=1e-9)), schedule=True),
    # pre-LN (+ final norm), learned positions, gelu, SGD with momentum and a constant lr
    "sgd": dict(model=dict(norm_first=True, pos_encoding="learned", activation="gelu"),
                opt=("sgd", dict(lr=0.05, momentum=0.9, weight_decay=1e-4)), schedule=False),
    "adamw": dict(model=dict(norm_first=False, pos_encoding="learned", activation="gelu"),
                  opt=("adamw", dict(lr=2e-3, weight_decay=0.05)), schedule=False),
    "nesterov": dict(model=dict(norm_first=True, pos_encoding="sinusoidal", activation="relu"),
                     opt=("sgd", dict(lr=0.03, momentum=0.8, nesterov=True)), schedule=False),
    # the seed design's experiments: learned positions and Swish (SiLU) in the feed-forward
    "silu": dict(model=dict(norm_first=True, pos_encoding="learned", activation="silu"),
                 opt=("adamw", dict(lr=2e-3, weight_decay=0.05)), schedule=False),
    # a bias on the scores instead of a position table: the layers are nt.TransformerBlocks
    "relative_bias": dict(model=dict(norm_first=False, pos_encoding="relative", activation="gelu"),
                          opt=("adamw", dict(lr=2e-3, weight_decay=0.05)), schedule=False),
    "alibi": dict(model=dict(norm_first=True, pos_encoding="alibi", activation="silu"),
                  opt=("adam", dict(lr=1e-3, betas=(0.9, 0.98), eps=1e-9)), schedule=True),
    "no_positions": dict(model=dict(norm_first=True, pos_encoding="none", activation="relu"),
                         opt=("sgd", dict(lr=0.05, momentum=0.9)), schedule=False),
}

V, D, H, L, FF, S, B = 13, 16, 2, 2, 32, 7, 6
PAD = ntdata.PAD


def _batches(seed):
    """Reverse-task batches with padded tails: padded keys masked, padded targets ignored."""
    rng = np.random.default_rng(seed)
    while True:
        src = rng.integers(2, V, size=(B, S))
        lengths = rng.integers(S - 3, S + 1, size=B)
        pad = np.arange(S)[None, :] >= lengths[:, None]                           # (B, S) True = padding
        src[pad] = PAD
        tgt = ntdata.make_targets("reverse", src)
        tgt[pad] = PAD
        yield src, tgt, pad


@pytest.mark.parametrize("name", list(CONFIGS))
def test_numpy_and_torch_train_in_lockstep(name):
    cfg = CONFIGS[name]
    model = nt.TransformerModel(V, d_model=D, nhead=H, num_layers=L, dim_feedforward=FF, dropout=0.1, max_len=S,
                                dtype=np.float64, seed=3, **cfg["model"])
    twin = to_torch(model)
    opt_name, kw = cfg["opt"]
    ours = nt.optim.make_optimizer(opt_name, model.parameters(), **kw)
    torch_opt = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}[opt_name]
    ref = torch_opt(twin.parameters(), **kw)
    crit = nt.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    clip = 0.5                                                                    # small enough to bite
    schedule = nt.optim.WarmupInverseSqrtSchedule(D, warmup=10, factor=0.2) if cfg["schedule"] else None

    batches = _batches(7)
    clipped = 0
    for step in range(1, STEPS + 1):
        src, tgt, pad = next(batches)
        causal = step % 5 == 0                                                    # exercise the causal path too
        if schedule is not None:
            ours.set_lr(schedule(step))
            for g in ref.param_groups:
                g["lr"] = schedule(step)
        # NumPy
        ours.zero_grad()
        logits = model(src, src_key_padding_mask=pad, is_causal=causal)
        loss = float(crit(logits.reshape(-1, V), tgt.reshape(-1)))                # torch's (N, C) rows
        model.backward(crit.backward().reshape(logits.shape))
        norm = float(nt.clip_grad_norm_(model.parameters(), clip))
        ours.step()
        masks = nt.dropout_masks(model)
        assert len(masks) == 1 + 4 * L
        # torch, replaying the masks
        ref.zero_grad()
        tlogits = twin(src, src_key_padding_mask=pad, is_causal=causal, dropout_masks=masks)
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
    # the weights moved: the agreement is not trivial
    init = nt.TransformerModel(V, d_model=D, nhead=H, num_layers=L, dim_feedforward=FF, dropout=0.1, max_len=S,
                               dtype=np.float64, seed=3, **cfg["model"]).state_dict()
    assert max(np.abs(v - init[k]).max() for k, v in model.state_dict().items()) > 1e-3
    # optimizer state agrees too; compared per kind of state in one call, so a tensor whose gradient is
    # zero in exact arithmetic (a key bias's: the softmax ignores a constant shift of a row of scores)
    # is judged against its siblings' size, not its own rounding noise
    tstate = ref.state_dict()["state"]
    pairs = {}
    for i, (p, tp) in enumerate(zip(model.parameters(), twin.parameters())):
        for key, val in ours.state[id(p)].items():
            other = tstate[i][key]
            if key == "step":
                assert val == float(other)
            else:
                pairs.setdefault(key, {})[f"{i}.{key}"] = (val, other)
    for key, named in pairs.items():
        assert_close(named, tol=1e-8)


def test_parameter_order_matches_torch():
    model = nt.TransformerModel(V, d_model=D, nhead=H, num_layers=L, dim_feedforward=FF, max_len=S,
                                norm_first=True, pos_encoding="learned", dtype=np.float64, seed=0)
    twin = to_torch(model)
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in twin.named_parameters()]


@pytest.mark.parametrize("norm_first,pos,act", [(False, "sinusoidal", "relu"), (True, "learned", "gelu"),
                                                (False, "learned", "silu")])
def test_replay_path_equals_torch_modules(norm_first, pos, act):
    """With dropout off, the written-out replay path equals torch's own TransformerEncoder forward, and
    both equal the NumPy model; so the lockstep test's torch side is torch, plus the masks."""
    model = nt.TransformerModel(V, d_model=D, nhead=H, num_layers=L, dim_feedforward=FF, max_len=S,
                                norm_first=norm_first, pos_encoding=pos, activation=act, dtype=np.float64, seed=1)
    model.eval()
    twin = to_torch(model)
    src, _, pad = next(_batches(0))
    for causal in (False, True):
        ours = model(src, src_key_padding_mask=pad, is_causal=causal)
        with torch.no_grad():
            torch_modules = twin(src, src_key_padding_mask=pad, is_causal=causal)
            replay = twin(src, src_key_padding_mask=pad, is_causal=causal, dropout_masks={})
        assert_close({"numpy vs torch modules": (ours, torch_modules),
                      "replay vs torch modules": (replay, torch_modules)})


def test_from_torch_round_trip():
    twin = TorchTransformerModel(V, d_model=D, nhead=H, num_layers=L, dim_feedforward=FF, max_len=S,
                                 dtype=torch.float64).eval()
    model = from_torch(twin)
    assert not model.training
    src, _, _ = next(_batches(1))
    with torch.no_grad():
        assert_close({"logits": (model(src), twin(src))})
    back = to_torch(model)
    for k, v in twin.state_dict().items():
        assert torch.equal(v, back.state_dict()[k])


def test_lockstep_callback_follows_a_trainer_and_its_resumed_run(tmp_path):
    """``train --check-torch``'s callback: attached to a Trainer, and attached again after resume."""
    from numpy_transformer.training.trainer import TrainConfig, Trainer
    from reference_torch.lockstep import Lockstep
    config = dict(task="reverse", vocab_size=10, seq_len=6, num_train=200, num_val=20, d_model=16, nhead=2,
                  num_layers=1, dim_feedforward=32, batch_size=8, warmup=5, dtype="float64", steps=12)
    trainer = Trainer(TrainConfig(**config))
    lockstep = trainer.add_callback(Lockstep(trainer))
    trainer.train(steps=6)
    assert lockstep.stats.steps == 6 and [h[0] for h in lockstep.stats.history] == list(range(1, 7))
    path = tmp_path / "run.npz"
    trainer.save(path)
    resumed = Trainer.resume(path)
    assert resumed.callbacks == []
    again = resumed.add_callback(Lockstep(resumed))
    resumed.train()
    assert again.stats.steps == 6 and again.stats.history[0][0] == 7
    for stats in (lockstep.stats, again.stats):
        assert stats.max_loss_rel < 1e-9
    assert again.check_weights()[1] < 1e-8
