"""Bad input, constructors and hyper-parameters (sizes, probabilities, other options) and the optimizers,
clipping and schedules: each refusal names the argument, what was expected and what was received.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from tests.cli.bad_input_helpers import (
    DT,
    _layer,
    expect,
    not_numbers,
    not_positive_ints,
    not_probabilities,
)

# ------------------------------------------------------------------------------------------------
# constructors and hyper-parameters
# ------------------------------------------------------------------------------------------------


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
