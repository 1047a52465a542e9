"""nt.optim against torch.optim step by step; clipping and schedules; optimizer state round trips."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from tests._compare import assert_close

TORCH = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}


@st.composite
def optimizer_cases(draw):
    name = draw(st.sampled_from(["sgd", "adam", "adamw"]))
    lr = draw(st.sampled_from([1e-3, 0.05, 0.5]))
    wd = draw(st.sampled_from([0.0, 1e-2, 0.3]))
    if name == "sgd":
        momentum = draw(st.sampled_from([0.0, 0.5, 0.9]))
        nesterov = momentum > 0 and draw(st.booleans())
        dampening = 0.0 if nesterov else draw(st.sampled_from([0.0, 0.1]))
        kw = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=wd, nesterov=nesterov)
    else:
        kw = dict(lr=lr, betas=draw(st.sampled_from([(0.9, 0.999), (0.8, 0.98), (0.0, 0.5)])),
                  eps=draw(st.sampled_from([1e-8, 1e-3])), weight_decay=wd)
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    shapes = draw(st.lists(st.sampled_from([(3,), (2, 4), (5, 1, 2)]), min_size=1, max_size=3))
    steps = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31 - 1))
    return name, kw, dtype, shapes, steps, seed


@given(optimizer_cases())
def test_each_step_matches_torch(case):
    name, kw, dtype, shapes, steps, seed = case
    rng = np.random.default_rng(seed)
    params = [nt.Parameter(rng.standard_normal(s).astype(dtype)) for s in shapes]
    tparams = [torch.tensor(p.data.copy(), requires_grad=True) for p in params]
    ours = nt.optim.make_optimizer(name, params, **kw)
    ref = TORCH[name](tparams, **kw)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for step in range(steps):
        for p, tp in zip(params, tparams):
            g = rng.standard_normal(p.shape).astype(dtype)
            p.grad = g.copy()
            tp.grad = torch.tensor(g)
        if step == 2:                                   # a learning-rate change mid-run (as a schedule does)
            ours.set_lr(kw["lr"] / 3)
            for group in ref.param_groups:
                group["lr"] = kw["lr"] / 3
        ours.step()
        ref.step()
        assert_close({f"p{i} step {step}": (p.data, tp) for i, (p, tp) in enumerate(zip(params, tparams))},
                     tol=tol, dtype=dtype)
        for p in params:
            assert p.data.dtype == dtype


def test_parameters_without_grad_are_skipped_and_zero_grad():
    a, b = nt.Parameter(np.ones(3)), nt.Parameter(np.ones(2))
    opt = nt.optim.Adam([a, b], lr=0.1)
    a.grad = np.ones(3)
    opt.step()
    assert np.all(b.data == 1) and np.all(a.data < 1)
    opt.zero_grad()
    assert a.grad is None
    a.grad = np.ones(3)
    opt.zero_grad(set_to_none=False)
    assert np.all(a.grad == 0)


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw"])
def test_state_dict_round_trip_continues_identically(name):
    kw = dict(lr=0.1, momentum=0.9) if name == "sgd" else dict(lr=0.1)
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((4, 3)) for _ in range(6)]

    def run(split):
        p = nt.Parameter(np.arange(12.0).reshape(4, 3))
        opt = nt.optim.make_optimizer(name, [p], **kw)
        for i, g in enumerate(grads):
            if i == split:
                sd = opt.state_dict()
                q = nt.Parameter(p.data.copy())
                opt = nt.optim.make_optimizer(name, [q], lr=123.0)
                opt.load_state_dict(sd)
                p = q
            p.grad = g.copy()
            opt.step()
        return p.data

    np.testing.assert_array_equal(run(None), run(3))


def test_state_dict_matches_torch_layout():
    p = nt.Parameter(np.ones(3))
    tp = torch.ones(3, dtype=torch.float64, requires_grad=True)
    ours, ref = nt.optim.Adam([p], lr=0.1), torch.optim.Adam([tp], lr=0.1)
    p.grad, tp.grad = np.ones(3), torch.ones(3, dtype=torch.float64)
    ours.step(), ref.step()
    sd, tsd = ours.state_dict(), ref.state_dict()
    assert set(sd["state"][0]) == set(tsd["state"][0])
    assert set(tsd["param_groups"][0]) >= set(sd["param_groups"][0])
    assert sd["param_groups"][0]["params"] == tsd["param_groups"][0]["params"]


def test_load_state_dict_refuses_mismatch():
    p = nt.Parameter(np.ones(3))
    opt = nt.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = np.ones(3)
    opt.step()
    sd = opt.state_dict()
    other = nt.optim.SGD([nt.Parameter(np.ones(4))], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match=r"momentum_buffer.*shape \(3,\).*\(4,\)"):
        other.load_state_dict(sd)


def test_bad_optimizer_arguments():
    p = [nt.Parameter(np.ones(2))]
    with pytest.raises(ValueError, match="optimizer must be one of"):
        nt.optim.make_optimizer("rmsprop", p, lr=1)
    with pytest.raises(ValueError, match="lr must be >= 0"):
        nt.optim.SGD(p, lr=-1)
    with pytest.raises(ValueError, match="betas"):
        nt.optim.Adam(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov"):
        nt.optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        nt.optim.Adam([])
    with pytest.raises(TypeError, match="iterable of Parameters"):
        nt.optim.Adam(p[0])


@given(st.integers(0, 2**31 - 1), st.sampled_from([0.01, 0.5, 1.0, 100.0]), st.sampled_from([2.0, math.inf]),
       st.sampled_from([np.float64, np.float32]))
def test_clip_grad_norm_matches_torch(seed, max_norm, norm_type, dtype):
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5,), (2, 2, 2)]
    params = [nt.Parameter(np.zeros(s, dtype=dtype)) for s in shapes]
    tparams = [torch.zeros(s, dtype=torch.float64 if dtype == np.float64 else torch.float32, requires_grad=True)
               for s in shapes]
    for p, tp in zip(params, tparams):
        g = rng.standard_normal(p.shape).astype(dtype)
        p.grad, tp.grad = g.copy(), torch.tensor(g)
    params.append(nt.Parameter(np.zeros(2, dtype=dtype)))              # no grad: skipped, as torch
    total = nt.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tparams, max_norm, norm_type=norm_type)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    assert_close({"total norm": (total, ttotal), **{f"g{i}": (p.grad, tp.grad) for i, (p, tp) in
                                                    enumerate(zip(params, tparams))}}, tol=tol, dtype=dtype)
    assert params[0].grad.dtype == dtype


def test_noam_schedule():
    d, w = 512, 4000
    lr = nt.optim.noam_lr
    assert lr(1, d, w) == pytest.approx(d ** -0.5 * w ** -1.5)
    assert lr(w, d, w) == pytest.approx(d ** -0.5 * w ** -0.5)         # the peak
    assert lr(4 * w, d, w) == pytest.approx(lr(w, d, w) / 2)            # then 1/sqrt(step)
    assert all(lr(s, d, w) < lr(s + 1, d, w) for s in range(1, w))
    sched = nt.optim.WarmupInverseSqrtSchedule(128, warmup=100, factor=2.0)
    assert sched.peak == pytest.approx(2.0 / math.sqrt(128 * 100))
    assert nt.optim.ConstantSchedule(0.3)(17) == 0.3
    with pytest.raises(ValueError, match="step counts from 1"):
        lr(0, d, w)
