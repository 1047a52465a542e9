"""``nt.amp.GradScaler`` against ``torch.amp.GradScaler("cpu")`` on the same gradient streams."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer.amp import GradScaler

torch = pytest.importorskip("torch")

SHAPES = [(3,), (2, 4)]


@st.composite
def streams(draw):
    """Scaler settings and a stream of steps: each step's gradients (some holding inf/NaN), whether
    ``unscale_`` is called before ``step``, and now and then a ``new_scale`` given to ``update``."""
    cfg = dict(init_scale=draw(st.sampled_from([1.0, 2.0 ** 16, 3.0e38, 1e-3])),
               growth_factor=draw(st.sampled_from([2.0, 1.5, 10.0])),
               backoff_factor=draw(st.sampled_from([0.5, 0.25, 0.9])),
               growth_interval=draw(st.integers(1, 4)))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    steps = []
    for _ in range(draw(st.integers(1, 15))):
        grads = []
        for shape in SHAPES:
            g = (rng.standard_normal(shape) * 10.0 ** draw(st.integers(-6, 3))).astype(np.float32)
            if draw(st.integers(0, 4)) == 0:                # an inf or NaN somewhere in one step in five
                g.flat[draw(st.integers(0, g.size - 1))] = draw(st.sampled_from([np.inf, -np.inf, np.nan]))
            grads.append(g)
        none = draw(st.integers(0, 5)) == 0               # the second parameter gets no gradient this step
        steps.append((grads, none, draw(st.booleans()),
                      draw(st.sampled_from([None] * 6 + [4.0, 1e5]))))
    return cfg, steps


def _start(shape):
    return np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)


def _run_ours(cfg, steps):
    params = [nt.Parameter(_start(s)) for s in SHAPES]
    opt = nt.optim.SGD(params, lr=0.1)
    scaler = GradScaler(**cfg)
    log = []
    for grads, none, unscale_first, new_scale in steps:
        scaler.scale(np.float32(1.0))                      # initialises the scale, as torch's first scale()
        for p, g, i in zip(params, grads, range(2)):
            p.grad = None if (none and i == 1) else g.copy()
        if unscale_first:
            scaler.unscale_(opt)
        stepped = scaler.step(opt)
        scaler.update(new_scale)
        log.append((scaler.get_scale(), scaler._get_growth_tracker(), [p.data.copy() for p in params],
                    [None if p.grad is None else p.grad.copy() for p in params], stepped))
    return log, scaler


def _run_torch(cfg, steps):
    params = [torch.nn.Parameter(torch.from_numpy(_start(s))) for s in SHAPES]
    opt = torch.optim.SGD(params, lr=0.1)
    scaler = torch.amp.GradScaler("cpu", **cfg)
    log = []
    for grads, none, unscale_first, new_scale in steps:
        scaler.scale(torch.tensor(1.0))
        for p, g, i in zip(params, grads, range(2)):
            p.grad = None if (none and i == 1) else torch.from_numpy(g.copy())
        if unscale_first:
            scaler.unscale_(opt)
        stepped = scaler.step(opt)
        scaler.update(new_scale)
        log.append((scaler.get_scale(), int(scaler._get_growth_tracker()),
                    [p.detach().numpy().copy() for p in params],
                    [None if p.grad is None else p.grad.numpy().copy() for p in params], stepped))
    return log, scaler


@given(streams())
def test_scaler_matches_torch_on_streams_with_infs(stream):
    cfg, steps = stream
    ours, our_scaler = _run_ours(cfg, steps)
    ref, ref_scaler = _run_torch(cfg, steps)
    for k, (a, b) in enumerate(zip(ours, ref)):
        assert a[0] == b[0], f"step {k}: scale {a[0]} vs torch {b[0]}"
        assert a[1] == b[1], f"step {k}: growth tracker {a[1]} vs torch {b[1]}"
        for x, y in zip(a[2], b[2]):                       # parameters after the (possibly skipped) step
            # (SGD's update itself may differ by an ulp: torch fuses p - lr * g; the scaler is exact)
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6, err_msg=f"step {k}: parameters")
        for x, y in zip(a[3], b[3]):                       # the unscaled gradients, infs and NaNs included
            assert (x is None) == (y is None)
            if x is not None:
                np.testing.assert_array_equal(x, y, err_msg=f"step {k}: unscaled gradients")
    ref_state = {k: (v.item() if hasattr(v, "item") else v) for k, v in ref_scaler.state_dict().items()}
    assert our_scaler.state_dict() == ref_state


def test_skipped_step_leaves_parameters_and_optimizer_state_unchanged():
    p = nt.Parameter(np.ones(3, np.float32))
    opt = nt.optim.Adam([p], lr=0.1)
    scaler = GradScaler(init_scale=8.0, growth_interval=1)
    p.grad = scaler.scale(np.array([1.0, 2.0, 3.0], np.float32))
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 16.0
    before, state = p.data.copy(), {k: np.copy(v) for k, v in opt.state[id(p)].items()}
    p.grad = np.array([1.0, np.inf, 3.0], np.float32)
    scaler.step(opt)
    np.testing.assert_array_equal(p.data, before)
    for k, v in opt.state[id(p)].items():
        np.testing.assert_array_equal(v, state[k])
    scaler.update()
    assert scaler.get_scale() == 8.0 and scaler._get_growth_tracker() == 0


def test_state_dict_round_trips_with_torch():
    ref = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    ref.scale(torch.tensor(1.0))
    ours = GradScaler()
    ours.load_state_dict({k: (v.item() if hasattr(v, "item") else v) for k, v in ref.state_dict().items()})
    assert ours.get_scale() == 1024.0 and ours.get_growth_interval() == 3
    back = torch.amp.GradScaler("cpu")
    back.load_state_dict(ours.state_dict())
    assert back.get_scale() == 1024.0 and back.get_growth_interval() == 3


def test_disabled_scaler_is_a_pass_through():
    p = nt.Parameter(np.ones(2, np.float32))
    opt = nt.optim.SGD([p], lr=1.0)
    scaler = GradScaler(enabled=False)
    g = np.array([1.0, 2.0], np.float32)
    assert scaler.scale(g) is g and scaler.get_scale() == 1.0 and scaler.state_dict() == {}
    p.grad = g
    scaler.step(opt)
    scaler.update()
    np.testing.assert_array_equal(p.data, [0.0, -1.0])


@pytest.mark.parametrize("call, exc, match", [
    (lambda s, o: (s.unscale_(o), s.unscale_(o)), RuntimeError, "already been called on this optimizer"),
    (lambda s, o: (s.step(o), s.unscale_(o)), RuntimeError, "after step"),
    (lambda s, o: (s.step(o), s.step(o)), RuntimeError, "step\\(\\) has already been called"),
    (lambda s, o: s.update(), AssertionError, "No inf checks"),
    (lambda s, o: s.step(o, closure=lambda: 0.0), RuntimeError, "Closure"),
    (lambda s, o: s.load_state_dict({}), RuntimeError, "state dict is empty"),
    (lambda s, o: s.scale("loss"), TypeError, "outputs must be"),
])
def test_misuse_is_refused_as_torch_refuses_it(call, exc, match):
    p = nt.Parameter(np.ones(2, np.float32))
    opt = nt.optim.SGD([p], lr=1.0)
    scaler = GradScaler()
    p.grad = scaler.scale(np.ones(2, np.float32))
    with pytest.raises(exc, match=match):
        call(scaler, opt)


@pytest.mark.parametrize("kw, match", [
    ({"init_scale": 0.0}, "init_scale"), ({"growth_factor": 1.0}, "growth_factor"),
    ({"backoff_factor": 1.0}, "backoff_factor"), ({"growth_interval": 0}, "growth_interval"),
])
def test_bad_arguments_name_themselves(kw, match):
    with pytest.raises(ValueError, match=match):
        GradScaler(**kw)


@pytest.mark.parametrize("init_scale", [2.0 ** 16, 3.3, 1000.1, 0.125, 7e-5])
def test_scale_of_float16_arrays_is_torchs_bit_for_bit(init_scale):
    """torch's ``scale`` keeps a float16 tensor float16 (the scale is a 0-dim float32 tensor, which
    does not promote) but computes the product in float32 and rounds once: ``0.5 * 2**16`` is 32768,
    not the inf of a float16 scale (float16(65536) = inf; 0 * inf would even be NaN)."""
    rng = np.random.default_rng(0)
    with np.errstate(over="ignore"):
        x = np.concatenate([rng.standard_normal(4000) * 10.0 ** rng.uniform(-8, 5, 4000),
                            [0.0, -0.0, 1e-7, 0.5, 65504.0, np.inf, -np.inf, np.nan]]).astype(np.float16)
    ours = GradScaler(init_scale=init_scale).scale(x)
    theirs = torch.amp.GradScaler("cpu", init_scale=init_scale).scale(torch.from_numpy(x)).numpy()
    assert ours.dtype == theirs.dtype == np.float16
    assert np.array_equal(ours.view(np.uint16), theirs.view(np.uint16))
    assert GradScaler().scale(np.array([0.5, 0.0], dtype=np.float16)).tolist() == [32768.0, 0.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scale_of_float32_and_float64_arrays_is_torchs_bit_for_bit(dtype):
    x = np.random.default_rng(1).standard_normal(1000).astype(dtype)
    for init_scale in (2.0 ** 16, 1000.1):
        ours = GradScaler(init_scale=init_scale).scale(x)
        theirs = torch.amp.GradScaler("cpu", init_scale=init_scale).scale(torch.from_numpy(x)).numpy()
        assert ours.dtype == theirs.dtype == dtype and np.array_equal(ours, theirs)


LOSSES = [3.0, 0.1, 1e-30, 65504.0, 3.0e38, -7.25, float("inf"), float("nan")]


@pytest.mark.parametrize("init_scale", [2.0 ** 16, 1000.1, 3.0e38])
@pytest.mark.parametrize("form", ["0-d array", "numpy scalar", "1-element array", "python number"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_scale_of_a_loss_follows_torchs_type_promotion_bit_for_bit(init_scale, form, dtype):
    """A 0-d array and a NumPy scalar are torch's 0-dim tensors (float16 * the 0-dim float32 scale is
    float32: 3 * 2**16 = 196608, not float16's inf); an n-d array keeps its dtype; a Python number (torch's
    scale refuses one) is what torch makes of it, a float32 tensor (``torch.tensor(3.0)``)."""
    for loss in LOSSES:
        with np.errstate(over="ignore"):
            value = dtype(loss)
        if form == "python number":
            if dtype is not np.float64:
                continue                                     # one Python float: tested once
            x, t = loss, torch.tensor(loss)
        elif form == "1-element array":
            x = np.array([value])
            t = torch.from_numpy(x.copy())
        else:
            x = np.array(value) if form == "0-d array" else value
            t = torch.from_numpy(np.array(value))
        ours = GradScaler(init_scale=init_scale).scale(x)
        theirs = torch.amp.GradScaler("cpu", init_scale=init_scale).scale(t).numpy()
        ours_arr = np.asarray(ours)
        assert ours_arr.dtype == theirs.dtype and ours_arr.shape == theirs.shape, (loss, ours_arr.dtype, theirs.dtype)
        assert np.array_equal(ours_arr, theirs, equal_nan=True), (loss, ours, theirs)
        assert np.array_equal(np.signbit(ours_arr), np.signbit(theirs)) or np.isnan(theirs).all()
        if form == "0-d array":
            assert isinstance(ours, np.ndarray) and ours.ndim == 0
    assert GradScaler().scale(np.array(3, np.float16)) == np.float32(196608.0)
