"""nt.optim.lr_scheduler against torch.optim.lr_scheduler: 200 steps of every class over drawn arguments and
several parameter groups, the groups' lr, get_last_lr, state_dict round trips (torch's into ours), misuse."""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer.optim import lr_scheduler as ours_sched
from reference_torch.convert import optimizer_state_to_numpy

STEPS = 200


def optimizers(lrs):
    """Ours and torch's SGD with one group per lr (a 2-vector each)."""
    ours = nt.optim.SGD([{"params": [nt.Parameter(np.zeros(2))], "lr": lr} for lr in lrs], lr=lrs[0])
    ref = torch.optim.SGD([{"params": [torch.zeros(2, dtype=torch.float64, requires_grad=True)], "lr": lr}
                           for lr in lrs], lr=lrs[0])
    return ours, ref


class Scale:
    """A callable object: LambdaLR's state_dict keeps its __dict__ (plain functions are dropped)."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, epoch):
        return self.rate ** epoch


factors = st.floats(0.05, 1.0)
gammas = st.sampled_from([0.1, 0.5, 0.9, 0.97, 1.0, 1.5])


@st.composite
def scheduler_specs(draw, depth=0):
    """A recipe ``(name, kwargs)``; SequentialLR nests two or three of the others."""
    names = ["LambdaLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR", "CosineAnnealingLR"]
    name = draw(st.sampled_from(names + (["SequentialLR"] * 3 if depth == 0 else [])))
    if name == "LambdaLR":
        return name, dict(lr_lambda=draw(st.sampled_from(["lambda", "object"])), rate=draw(st.floats(0.9, 1.01)))
    if name == "StepLR":
        return name, dict(step_size=draw(st.integers(1, 40)), gamma=draw(gammas))
    if name == "MultiStepLR":
        return name, dict(milestones=draw(st.lists(st.integers(0, STEPS + 5), max_size=5)), gamma=draw(gammas))
    if name == "ConstantLR":
        return name, dict(factor=draw(factors), total_iters=draw(st.integers(0, 60)))
    if name == "LinearLR":
        return name, dict(start_factor=draw(factors), end_factor=draw(st.floats(0.0, 1.0)),
                          total_iters=draw(st.integers(1, 120)))
    if name == "ExponentialLR":
        return name, dict(gamma=draw(st.sampled_from([0.9, 0.99, 1.0, 1.01])))
    if name == "CosineAnnealingLR":
        return name, dict(T_max=draw(st.integers(1, 150)), eta_min=draw(st.sampled_from([0.0, 1e-4, 0.003])))
    subs = draw(st.lists(scheduler_specs(depth=1), min_size=2, max_size=3))
    milestones = sorted(draw(st.sets(st.integers(1, STEPS - 1), min_size=len(subs) - 1, max_size=len(subs) - 1)))
    return name, dict(schedulers=subs, milestones=milestones)


def build(module, opt, spec):
    name, kw = spec
    kw = dict(kw)
    if name == "LambdaLR":
        rate = kw.pop("rate")
        kw["lr_lambda"] = (lambda e: rate ** e) if kw["lr_lambda"] == "lambda" else Scale(rate)
    if name == "SequentialLR":
        kw["schedulers"] = [build(module, opt, s) for s in kw["schedulers"]]
    return getattr(module, name)(opt, **kw)


@settings(max_examples=80)
@given(spec=scheduler_specs(), lrs=st.lists(st.sampled_from([1.0, 0.1, 3e-4, 0.05]), min_size=1, max_size=3),
       extra=st.sampled_from([None, "StepLR", "ExponentialLR"]))
def test_learning_rates_match_torch_for_200_steps(spec, lrs, extra):
    ours, ref = optimizers(lrs)
    s_ours, s_ref = build(ours_sched, ours, spec), build(torch.optim.lr_scheduler, ref, spec)
    chained = []
    if extra:                                   # a second scheduler on the same optimizer (initial_lr reused)
        kw = dict(step_size=7) if extra == "StepLR" else dict(gamma=0.95)
        chained = [(getattr(ours_sched, extra)(ours, **kw), getattr(torch.optim.lr_scheduler, extra)(ref, **kw))]
    for step in range(STEPS + 1):
        assert [g["lr"] for g in ours.param_groups] == [g["lr"] for g in ref.param_groups], step
        assert s_ours.get_last_lr() == s_ref.get_last_lr(), step
        assert [g["initial_lr"] for g in ours.param_groups] == [g["initial_lr"] for g in ref.param_groups]
        assert s_ours.last_epoch == s_ref.last_epoch
        if hasattr(s_ref, "base_lrs"):
            assert s_ours.base_lrs == s_ref.base_lrs
        ours.step(), ref.step()
        s_ours.step(), s_ref.step()
        for a, b in chained:
            a.step(), b.step()


def test_recursive_formulas_match_the_closed_forms():
    """torch's recursive updates are the closed forms to rounding (and exactly ours)."""
    ours, _ = optimizers([0.1])
    s = ours_sched.CosineAnnealingLR(ours, T_max=50, eta_min=1e-3)
    for epoch in range(1, 301):
        ours.step(), s.step()
        closed = 1e-3 + (0.1 - 1e-3) * (1 + math.cos(math.pi * epoch / 50)) / 2
        assert s.get_last_lr()[0] == pytest.approx(closed, rel=1e-9, abs=1e-15)
    ours, _ = optimizers([0.1])
    s = ours_sched.LinearLR(ours, start_factor=0.25, end_factor=0.75, total_iters=40)
    for epoch in range(1, 60):
        ours.step(), s.step()
        assert s.get_last_lr()[0] == pytest.approx(0.1 * (0.25 + 0.5 * min(epoch, 40) / 40), rel=1e-12)


@pytest.mark.parametrize("spec", [("StepLR", dict(step_size=3, gamma=0.5)),
                                  ("MultiStepLR", dict(milestones=[2, 5, 5])),
                                  ("LinearLR", dict(start_factor=0.2, total_iters=6)),
                                  ("ExponentialLR", dict(gamma=0.9)),
                                  ("CosineAnnealingLR", dict(T_max=4)),
                                  ("ConstantLR", dict(factor=0.5, total_iters=3))])
def test_deprecated_step_with_epoch_uses_the_closed_form_as_torch(spec):
    ours, ref = optimizers([0.1, 0.02])
    a, b = build(ours_sched, ours, spec), build(torch.optim.lr_scheduler, ref, spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in [3, 7, 1, 12, 5]:
            a.step(epoch), b.step(epoch)
            assert a.get_last_lr() == b.get_last_lr() and a.last_epoch == b.last_epoch


def _torch_state_for_ours(state):
    """A torch scheduler state as plain Python (its values are already numbers, lists and dicts)."""
    return {k: ([_torch_state_for_ours(s) for s in v] if k == "_schedulers" else v) for k, v in state.items()}


@given(spec=scheduler_specs(), split=st.integers(1, 150),
       lrs=st.lists(st.sampled_from([0.1, 3e-4]), min_size=1, max_size=2))
def test_state_dict_from_torch_continues_like_torch(spec, split, lrs):
    """Run torch ``split`` steps, load its optimizer and scheduler state into fresh ones of ours, continue."""
    if spec[0] == "LambdaLR":
        spec = (spec[0], dict(spec[1], lr_lambda="object"))
    ours, ref = optimizers(lrs)
    s_ref = build(torch.optim.lr_scheduler, ref, spec)
    for _ in range(split):
        ref.step(), s_ref.step()
    s_ours = build(ours_sched, ours, spec)                     # build first, then load (torch's advice)
    ours.load_state_dict(optimizer_state_to_numpy(ref.state_dict()))
    s_ours.load_state_dict(_torch_state_for_ours(s_ref.state_dict()))
    if spec[0] == "LambdaLR":
        assert s_ours.lr_lambdas[0].rate == s_ref.lr_lambdas[0].rate
    assert ours.param_groups[0]["initial_lr"] == ref.param_groups[0]["initial_lr"]
    for step in range(60):
        ours.step(), ref.step()
        s_ours.step(), s_ref.step()
        assert [g["lr"] for g in ours.param_groups] == [g["lr"] for g in ref.param_groups], step
    # and ours round-trips into ours
    again = build(ours_sched, optimizers(lrs)[0], spec)
    again.load_state_dict(s_ours.state_dict())
    assert again.state_dict().keys() == s_ours.state_dict().keys()


def test_an_lr_rounded_below_zero_by_torch_loads():
    """torch's LinearLR down to end_factor=0 ends at -3e-18 (rounding); its optimizer state still loads."""
    ours, ref = optimizers([0.1])
    s_ref = torch.optim.lr_scheduler.LinearLR(ref, start_factor=0.42577011850130864, end_factor=0.0, total_iters=3)
    for _ in range(3):
        ref.step(), s_ref.step()
    assert -1e-12 < ref.param_groups[0]["lr"] < 0
    ours.load_state_dict(optimizer_state_to_numpy(ref.state_dict()))
    assert ours.param_groups[0]["lr"] == ref.param_groups[0]["lr"]
    with pytest.raises(ValueError, match="lr must be >= 0"):
        ours.load_state_dict({"state": {}, "param_groups": [dict(ours.state_dict()["param_groups"][0], lr=-1e-3)]})


def test_state_dict_keys_are_torchs():
    for spec in [("StepLR", dict(step_size=3)), ("LambdaLR", dict(lr_lambda="lambda", rate=0.9)),
                 ("SequentialLR", dict(schedulers=[("LinearLR", {}), ("CosineAnnealingLR", dict(T_max=5))],
                                       milestones=[4]))]:
        ours, ref = optimizers([0.1])
        a, b = build(ours_sched, ours, spec), build(torch.optim.lr_scheduler, ref, spec)
        assert a.state_dict() == b.state_dict(), spec[0]
        assert list(ours.param_groups[0]) == list(ref.param_groups[0])        # initial_lr added, same order


def test_resume_with_last_epoch_needs_initial_lr_and_continues():
    ours, ref = optimizers([0.1])
    with pytest.raises(KeyError, match="initial_lr"):
        ours_sched.StepLR(ours, step_size=2, last_epoch=4)
    ours.param_groups[0]["initial_lr"] = 0.1
    ref.param_groups[0]["initial_lr"] = 0.1
    a = ours_sched.CosineAnnealingLR(ours, T_max=10, last_epoch=4)
    b = torch.optim.lr_scheduler.CosineAnnealingLR(ref, T_max=10, last_epoch=4)
    for _ in range(12):
        assert a.get_last_lr() == b.get_last_lr()
        ours.step(), ref.step(), a.step(), b.step()


def test_warnings_as_torch():
    ours, _ = optimizers([0.1])
    s = ours_sched.StepLR(ours, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        s.get_lr()
    with pytest.warns(UserWarning, match="epoch parameter"):
        s.step(3)


def test_scheduler_misuse():
    ours, _ = optimizers([0.1])
    with pytest.raises(TypeError, match="is not an Optimizer"):
        ours_sched.StepLR(torch.optim.SGD([torch.zeros(1, requires_grad=True)]), step_size=2)
    for make, needle in [(lambda: ours_sched.StepLR(ours, step_size=0), "step_size must be an int >= 1, got 0"),
                         (lambda: ours_sched.StepLR(ours, step_size=2, gamma="x"), "gamma"),
                         (lambda: ours_sched.CosineAnnealingLR(ours, T_max=0), "T_max must be an int >= 1"),
                         (lambda: ours_sched.LinearLR(ours, start_factor=0), "Starting multiplicative factor"),
                         (lambda: ours_sched.LinearLR(ours, end_factor=2), "Ending multiplicative factor"),
                         (lambda: ours_sched.MultiStepLR(ours, milestones=[1, -2]),
                          "each milestone must be an int >= 0"),
                         (lambda: ours_sched.LambdaLR(ours, [lambda e: 1.0] * 2), "Expected 1 lr_lambdas, but got 2"),
                         (lambda: ours_sched.StepLR(ours, 2, last_epoch=-3), "last_epoch must be an int >= -1")]:
        with pytest.raises(ValueError, match=needle):
            make()
    with pytest.raises(TypeError, match="lr_lambda should be a function"):
        ours_sched.LambdaLR(ours, 0.5)
    a, b = ours_sched.StepLR(ours, 2), ours_sched.ExponentialLR(ours, 0.9)
    for kw, needle in [(dict(milestones=[]), "one more than the number of milestone"),
                       (dict(milestones=[0]), "each milestone must be an int >= 1"),
                       (dict(schedulers=[a, b, a], milestones=[5, 3]), "milestones must increase")]:
        with pytest.raises(ValueError, match=needle):
            ours_sched.SequentialLR(ours, **dict(dict(schedulers=[a, b]), **kw))
    other, _ = optimizers([0.1])
    with pytest.raises(ValueError, match="same optimizer"):
        ours_sched.SequentialLR(ours, [a, ours_sched.StepLR(other, 2)], milestones=[3])
    before = a.state_dict()
    with pytest.raises(ValueError, match="unknown entries \\['T_max'\\]"):
        a.load_state_dict(dict(before, T_max=4))
    assert a.state_dict() == before
    ours.add_param_group({"params": [nt.Parameter(np.zeros(1))]})
    ours.step()
    with pytest.raises(ValueError, match="2 parameter groups, but the scheduler was built for 1"):
        a.step()
