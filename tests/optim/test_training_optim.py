"""nt.optim against torch.optim: many steps over drawn hyper-parameters and parameter groups, torch's state
loaded mid-run (and ours into torch), param_groups and signatures as torch, add_param_group, torch-only keys;
clip_grad_norm_ with every norm type and non-finite gradients; the paper's schedule."""

import inspect
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import numpy_transformer as nt
from reference_torch.convert import optimizer_state_to_numpy, optimizer_state_to_torch
from tests._compare import assert_close

TORCH = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
OURS = {"sgd": nt.optim.SGD, "adam": nt.optim.Adam, "adamw": nt.optim.AdamW}
SHAPES = [(3,), (2, 4), (5, 1, 2), (1,)]


@st.composite
def hyper_parameters(draw, name):
    """One group's settings (lr, weight decay and the optimizer's own), drawn over their ranges."""
    kw = dict(lr=draw(st.sampled_from([1e-3, 0.05, 0.5]) | st.floats(1e-4, 1.0)),
              weight_decay=draw(st.sampled_from([0.0, 1e-2, 0.3]) | st.floats(0.0, 0.5)),
              maximize=draw(st.booleans()))
    if name == "sgd":
        kw["momentum"] = draw(st.sampled_from([0.0, 0.5, 0.9]) | st.floats(0.0, 0.99))
        kw["nesterov"] = kw["momentum"] > 0 and draw(st.booleans())
        kw["dampening"] = 0.0 if kw["nesterov"] else draw(st.sampled_from([0.0, 0.1]) | st.floats(0.0, 1.0))
    else:
        kw["betas"] = draw(st.sampled_from([(0.9, 0.999), (0.8, 0.98), (0.0, 0.5)])
                           | st.tuples(st.floats(0.0, 0.99), st.floats(0.0, 0.9999)))
        kw["eps"] = draw(st.sampled_from([1e-8, 1e-3]) | st.floats(1e-10, 1e-2))
        kw["amsgrad"] = draw(st.booleans())
    return kw


@st.composite
def optimizer_cases(draw):
    name = draw(st.sampled_from(["sgd", "adam", "adamw"]))
    n_groups = draw(st.integers(1, 3))
    groups = [(draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3)), draw(hyper_parameters(name)))
              for _ in range(n_groups)]
    if draw(st.booleans()):                       # groups that leave some settings to the defaults
        for _, kw in groups[1:]:
            kw.pop("lr"), kw.pop("weight_decay")
    dtype = draw(st.sampled_from([np.float64, np.float64, np.float32]))
    return name, groups, dtype, draw(st.integers(1, 40)), draw(st.integers(0, 2**31 - 1))


def _build(name, groups, dtype, rng):
    """Ours and torch's optimizer on equal parameters, groups as drawn, the first group's settings as defaults."""
    params = [[nt.Parameter(rng.standard_normal(s).astype(dtype)) for s in shapes] for shapes, _ in groups]
    tparams = [[torch.tensor(p.data.copy(), requires_grad=True) for p in ps] for ps in params]
    defaults = groups[0][1]
    ours = OURS[name]([dict(kw, params=ps) for ps, (_, kw) in zip(params, groups)], **defaults)
    ref = TORCH[name]([dict(kw, params=ps) for ps, (_, kw) in zip(tparams, groups)], **defaults)
    return ours, ref, sum(params, []), sum(tparams, [])


def _grads(params, tparams, rng, dtype, skip=()):
    for i, (p, tp) in enumerate(zip(params, tparams)):
        if i in skip:                                         # no gradient this step: skipped by both
            p.grad, tp.grad = None, None
            continue
        g = rng.standard_normal(p.shape).astype(dtype)
        p.grad, tp.grad = g.copy(), torch.tensor(g)


def _compare(params, tparams, dtype, what):
    """float64 to 1e-12 relative; float32 to 1e-5 of at least the parameters' O(1) starting scale
    (``p - lr * b`` cancelling to 2e-3 keeps float32's absolute error of ~1e-7, not its relative one)."""
    tol, floor = (1e-12, None) if dtype == np.float64 else (1e-5, 1.0)
    assert_close({f"p{i} {what}": (p.data, tp) for i, (p, tp) in enumerate(zip(params, tparams))}, tol=tol,
                 dtype=dtype, floor=floor)


def _compare_state(ours, ref, dtype):
    """Every buffer: float64 to 1e-12; float32 to 1e-5, the averages of gradients (which may cancel) against
    at least the O(1) scale of the gradients, the averages of squares (positive sums) on their own scale."""
    a, b = ours.state_dict(), optimizer_state_to_numpy(ref.state_dict())
    assert a["state"].keys() == b["state"].keys()
    for i in a["state"]:
        assert a["state"][i].keys() == b["state"][i].keys()
        for k, v in a["state"][i].items():
            floor = 1.0 if dtype == np.float32 and k in ("momentum_buffer", "exp_avg") else None
            assert_close({f"state {i} {k}": (np.asarray(v), np.asarray(b["state"][i][k]))},
                         tol=1e-12 if dtype == np.float64 else 1e-5, dtype=dtype, floor=floor)
    assert a["param_groups"] == b["param_groups"]


@settings(max_examples=60)
@given(optimizer_cases())
def test_many_steps_match_torch(case):
    name, groups, dtype, steps, seed = case
    rng = np.random.default_rng(seed)
    ours, ref, params, tparams = _build(name, groups, dtype, rng)
    for step in range(steps):
        _grads(params, tparams, rng, dtype, skip={step % (len(params) + 2)})
        if step == 2:                                   # a learning-rate change mid-run (as a scheduler does)
            for g, tg in zip(ours.param_groups, ref.param_groups):
                g["lr"] = tg["lr"] = g["lr"] / 3
        ours.step()
        ref.step()
        _compare(params, tparams, dtype, f"step {step}")
        assert all(p.data.dtype == dtype for p in params)
    _compare_state(ours, ref, dtype)


@settings(max_examples=40)
@given(optimizer_cases(), st.integers(1, 15), st.sampled_from(["tensors", "converted"]))
def test_torch_state_dict_loads_mid_run_and_ours_into_torch(case, split, given_as):
    """torch runs ``split`` steps; a fresh optimizer of ours (other settings) loads its state_dict (torch's
    tensors as they are, or converted to NumPy) and continues in step with torch; then torch loads ours."""
    name, groups, dtype, steps, seed = case
    if dtype == np.float32:
        dtype = np.float64
    rng = np.random.default_rng(seed)
    ours, ref, params, tparams = _build(name, groups, dtype, rng)
    for _ in range(split):
        _grads(params, tparams, rng, dtype)
        ref.step()
    for p, tp in zip(params, tparams):
        p.data[...] = tp.detach().numpy()
    fresh = OURS[name]([{"params": g["params"]} for g in ours.param_groups], lr=0.123)
    sd = ref.state_dict()
    fresh.load_state_dict(sd if given_as == "tensors" else optimizer_state_to_numpy(sd))
    _compare_state(fresh, ref, dtype)
    for step in range(steps):
        _grads(params, tparams, rng, dtype)
        fresh.step(), ref.step()
        _compare(params, tparams, dtype, f"step {split + step} after loading torch's state")
    # ours -> torch: a fresh torch optimizer continues from our state
    tfresh = TORCH[name]([{"params": g["params"]} for g in ref.param_groups], lr=0.321)
    tfresh.load_state_dict(optimizer_state_to_torch(fresh.state_dict()))
    for step in range(5):
        _grads(params, tparams, rng, dtype)
        fresh.step(), tfresh.step()
        _compare(params, tparams, dtype, f"step {step} of torch after loading ours")


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw"])
def test_signature_defaults_and_param_groups_are_torchs(name):
    ours_sig, ref_sig = inspect.signature(OURS[name]), inspect.signature(TORCH[name])
    assert [(p.name, p.kind, p.default) for p in ours_sig.parameters.values()] == \
           [(p.name, p.kind, p.default) for p in ref_sig.parameters.values()]
    ours, ref = OURS[name]([nt.Parameter(np.ones(2))]), TORCH[name]([torch.ones(2, requires_grad=True)])
    og, rg = ours.param_groups[0], ref.param_groups[0]
    assert list(og) == list(rg) and {k: v for k, v in og.items() if k != "params"} == \
        {k: v for k, v in rg.items() if k != "params"}
    assert ours.defaults == ref.defaults


def test_add_param_group_as_torch():
    a, b, c = (nt.Parameter(np.ones(n)) for n in (2, 3, 4))
    opt = nt.optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.01})             # one Parameter stands for [b]
    assert opt.param_groups[1]["params"] == [b]
    assert opt.param_groups[1]["lr"] == 0.01 and opt.param_groups[1]["momentum"] == 0.9   # defaults filled in
    before = [dict(g) for g in opt.param_groups]
    for group, exc, needle in [({"params": [a]}, ValueError, "some parameters appear in more than one parameter group"),
                               ({"params": [c, c]}, ValueError, "same parameter twice"),
                               ({"params": {c}}, TypeError, "ordered collections"),
                               ([c], TypeError, "param_group must be a dict"),
                               ({"params": [c], "lr": -1}, ValueError, "lr must be >= 0"),
                               ({"params": [c], "betas": (0.9, 0.99)}, ValueError, "SGD has no setting 'betas'"),
                               ({"params": [c], "nesterov": True, "momentum": 0.0}, ValueError, "Nesterov"),
                               ({"params": [("c", c)]}, ValueError, "with/without names")]:
        with pytest.raises(exc, match=needle):
            opt.add_param_group(group)
        assert [dict(g) for g in opt.param_groups] == before          # a refused group changes nothing
    t = torch.optim.SGD([torch.ones(2, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        t.add_param_group({"params": t.param_groups[0]["params"]})   # the same refusal in torch
    named = nt.optim.Adam(nt.Linear(2, 3, seed=0).named_parameters())
    assert named.param_groups[0]["param_names"] == ["weight", "bias"]
    assert named.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]


def test_torch_only_settings():
    p = [nt.Parameter(np.ones(2))]
    nt.optim.Adam(p, foreach=True), nt.optim.SGD(p, foreach=False, fused=False)      # change nothing: accepted
    for make, needle in [(lambda: nt.optim.Adam(p, capturable=True), "capturable=True is not supported"),
                         (lambda: nt.optim.Adam(p, fused=True), "fused=True is not supported"),
                         (lambda: nt.optim.SGD(p, differentiable=True), "differentiable=True is not supported"),
                         (lambda: nt.optim.AdamW(p, amsgrad="yes"), "amsgrad must be True or False")]:
        with pytest.raises(ValueError, match=needle):
            make()
    opt = nt.optim.Adam(p, lr=0.1)
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="fused=True is not supported"):
        opt.load_state_dict({"state": {}, "param_groups": [dict(sd["param_groups"][0], fused=True)]})
    assert opt.state_dict() == sd
    w = nt.optim.AdamW(p)                                   # AdamW stays decoupled whatever it loads, as torch
    w.load_state_dict({"state": {}, "param_groups": [dict(sd["param_groups"][0], decoupled_weight_decay=False)]})
    assert w.param_groups[0]["decoupled_weight_decay"] is True
    assert nt.optim.SGD(p).param_groups[0]["lr"] == 1e-3    # torch 2.x's default


def test_amsgrad_state_must_be_complete():
    p = nt.Parameter(np.ones(3))
    plain = nt.optim.Adam([p])
    p.grad = np.ones(3)
    plain.step()
    with pytest.raises(ValueError, match=r"lacks \['max_exp_avg_sq'\] \(amsgrad=True needs"):
        nt.optim.Adam([p], amsgrad=True).load_state_dict(
            {"state": plain.state_dict()["state"],
             "param_groups": [dict(plain.state_dict()["param_groups"][0], amsgrad=True)]})
    with pytest.raises(ValueError, match=r"holds \['momentum_buffer'\], which Adam does not keep"):
        plain.load_state_dict({"state": {0: {"momentum_buffer": np.ones(3)}},
                               "param_groups": plain.state_dict()["param_groups"]})


def test_parameters_without_grad_are_skipped_and_zero_grad():
    a, b = nt.Parameter(np.ones(3)), nt.Parameter(np.ones(2))
    opt = nt.optim.Adam([a, b], lr=0.1)
    a.grad = np.ones(3)
    assert opt.step(closure=lambda: 1.5) == 1.5                # the closure's value, as torch
    assert np.all(b.data == 1) and np.all(a.data < 1)
    opt.zero_grad()
    assert a.grad is None
    a.grad = np.ones(3)
    opt.zero_grad(set_to_none=False)
    assert np.all(a.grad == 0)


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw"])
def test_state_dict_round_trip_continues_identically(name):
    kw = dict(lr=0.1, momentum=0.9) if name == "sgd" else dict(lr=0.1, amsgrad=True)
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


NORM_TYPES = [2.0, 1.0, 3.5, 0.5, math.inf, "inf", -math.inf, 0.0, -1.5]


def _clip_pair(rng, dtype, shapes, special):
    params = [nt.Parameter(np.zeros(s, dtype=dtype)) for s in shapes]
    tparams = [torch.zeros(s, dtype=torch.float64 if dtype == np.float64 else torch.float32, requires_grad=True)
               for s in shapes]
    for p, tp in zip(params, tparams):
        g = rng.standard_normal(p.shape).astype(dtype)
        if special and g.size > 1:
            g.flat[rng.integers(g.size)] = special
        p.grad, tp.grad = g.copy(), torch.tensor(g)
    return params, tparams


@settings(max_examples=60)
@given(st.integers(0, 2**31 - 1), st.sampled_from([0.0, 0.01, 0.5, 1.0, 100.0, math.inf]), st.sampled_from(NORM_TYPES),
       st.sampled_from([np.float64, np.float32]), st.sampled_from([None, None, 0.0, math.nan, math.inf, -math.inf]))
def test_clip_grad_norm_matches_torch(seed, max_norm, norm_type, dtype, special):
    rng = np.random.default_rng(seed)
    params, tparams = _clip_pair(rng, dtype, [(3, 4), (5,), (2, 2, 2)], special)
    params.append(nt.Parameter(np.zeros(2, dtype=dtype)))              # no grad: skipped, as torch
    total = nt.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tparams, max_norm, norm_type=norm_type)
    assert total.dtype == dtype and params[0].grad.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-5
    ours = [np.asarray(total)] + [p.grad for p in params[:3]]
    ref = [ttotal.numpy()] + [tp.grad.numpy() for tp in tparams]
    for name, a, b in zip(["total norm", "g0", "g1", "g2"], ours, ref):
        finite = np.isfinite(b)
        assert np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(a[~finite & ~np.isnan(b)],
                                                                            b[~finite & ~np.isnan(b)]), name
        assert_close({name: (np.where(finite, a, 0), np.where(finite, b, 0))}, tol=tol, dtype=dtype)


@pytest.mark.parametrize("special", [math.nan, math.inf])
def test_clip_grad_norm_error_if_nonfinite(special):
    rng = np.random.default_rng(0)
    params, tparams = _clip_pair(rng, np.float64, [(3, 4), (5,)], special)
    before = [p.grad.copy() for p in params]
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_(tparams, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is non-finite"):
        nt.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    assert all(np.array_equal(b, p.grad, equal_nan=True) for b, p in zip(before, params))   # untouched


def test_clip_grad_norm_edge_cases():
    assert nt.clip_grad_norm_([nt.Parameter(np.ones(2))], 1.0).dtype == torch.nn.utils.clip_grad_norm_(
        [torch.ones(2, requires_grad=True)], 1.0).numpy().dtype == np.float32          # no gradient at all: 0.0
    p = nt.Parameter(np.ones(3))
    p.grad = np.full(3, 2.0)
    assert float(nt.clip_grad_norm_(p, 1.0, foreach=True)) == pytest.approx(math.sqrt(12))   # a single Parameter
    empty = nt.Parameter(np.zeros(0))
    empty.grad = np.zeros(0)
    with pytest.raises(RuntimeError, match="empty"):
        nt.clip_grad_norm_([empty], 1.0, norm_type="inf")
    t = torch.zeros(0, requires_grad=True)
    t.grad = torch.zeros(0)
    with pytest.raises(RuntimeError):
        torch.nn.utils.clip_grad_norm_([t], 1.0, norm_type="inf")


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


def test_trainer_schedule_is_a_lambda_lr_giving_exactly_the_schedule():
    """The Trainer's LambdaLR (base lr 1.0) sets step s's lr to exactly schedule(s); torch's LambdaLR
    with the same lambda on an lr-1.0 optimizer gives the same numbers."""
    from numpy_transformer.training.trainer import TrainConfig
    for schedule in ("warmup", "constant"):
        c = TrainConfig(d_model=16, warmup=7, lr=3e-3, schedule=schedule)
        opt = nt.optim.Adam([nt.Parameter(np.ones(2))], **c.optimizer_kwargs())
        sched, f = c.make_scheduler(opt), c.make_schedule()
        ref = torch.optim.Adam([torch.ones(2, requires_grad=True)], **c.optimizer_kwargs())
        tsched = torch.optim.lr_scheduler.LambdaLR(ref, lambda e: f(e + 1))
        for step in range(1, 40):
            assert opt.param_groups[0]["lr"] == f(step) == ref.param_groups[0]["lr"]
            opt.step(), ref.step(), sched.step(), tsched.step()
        assert max(f(s) for s in range(1, 40)) == pytest.approx(3e-3)


@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1), dict(amsgrad=True, maximize=True),
                                dict(decoupled_weight_decay=True, weight_decay=0.1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adam_on_cache_sized_chunks_is_bit_for_bit_the_whole_array_step(kw, dtype):
    """A parameter larger than the kernels' chunk is updated chunk by chunk on the thread pool
    (``optim/adam.py``); every element must get exactly the whole-array step's operations, and a
    non-contiguous parameter (the whole-array path) the same numbers. Checked against torch too."""
    from numpy_transformer.kernels.parallel import CHUNK
    rng = np.random.default_rng(0)
    shape = (3, CHUNK // 2 + 7)                                   # 1.5 chunks and a ragged end
    start = rng.standard_normal(shape).astype(dtype)
    grads = [rng.standard_normal(shape).astype(dtype) for _ in range(3)]
    chunked = nt.Parameter(start.copy())
    strided = nt.Parameter(np.asfortranarray(start.copy()))      # not C-contiguous: one whole-array call
    ref = torch.tensor(start, requires_grad=True)
    opts = [nt.optim.Adam([chunked], lr=1e-2, **kw), nt.optim.Adam([strided], lr=1e-2, **kw),
            torch.optim.Adam([ref], lr=1e-2, **kw)]
    for g in grads:
        chunked.grad, strided.grad, ref.grad = g.copy(), np.asfortranarray(g), torch.tensor(g)
        for o in opts:
            o.step()
    assert np.array_equal(chunked.data, strided.data)
    assert np.array_equal(opts[0].state[id(chunked)]["exp_avg_sq"], opts[1].state[id(strided)]["exp_avg_sq"])
    assert_close({"param": (chunked.data, ref.detach().numpy())}, tol=1e-12 if dtype == np.float64 else 1e-6,
                 dtype=dtype)
