"""CrossEntropyLoss against torch.nn.CrossEntropyLoss: torch's layouts, index and probability targets,
weight, ignore_index, label smoothing, every reduction, outputs and gradients with a random upstream
gradient; torch's edge behaviours (all ignored, zero total weight, empty batches) and its refusals."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
import numpy_transformer.functional as F
from tests._compare import TOL, assert_close

torch.set_num_threads(1)

LAYOUTS = [0, 1, 2, 3]                 # 0: (C,); 1: (N, C); 2: (N, C, d1); 3: (N, C, d1, d2)


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    dims = draw(st.sampled_from(LAYOUTS))
    c = draw(st.integers(1, 7))
    shape = (c,) if dims == 0 else (draw(st.integers(1, 4)), c) + tuple(draw(st.integers(1, 3))
                                                                           for _ in range(dims - 1))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from([1.0, 10.0, 300.0]))                 # 300: exp would overflow without the max shift
    logits = (rng.standard_normal(shape) * scale).astype(dtype)
    kind = draw(st.sampled_from(["index", "prob"]))
    kwargs = {"reduction": draw(st.sampled_from(["mean", "sum", "none"])),
              "label_smoothing": draw(st.sampled_from([0.0, 0.1, 0.37, 1.0]))}
    if draw(st.booleans()):
        kwargs["weight"] = rng.uniform(0.1, 3.0, c).astype(draw(st.sampled_from([dtype, np.float64])))
    if kind == "prob":
        target = rng.random(shape).astype(dtype)
        if draw(st.booleans()):
            target = (target / target.sum(axis=0 if dims == 0 else 1, keepdims=True)).astype(dtype)
        ignored = "none"
    else:
        ignore_index = draw(st.sampled_from([-100, 0, c - 1, 7]))
        kwargs["ignore_index"] = ignore_index
        target = rng.integers(0, c, size=() if dims == 0 else shape[:1] + shape[2:])
        ignored = draw(st.sampled_from(["none", "some", "all"]))
        if ignored == "some":
            target = np.where(rng.random(target.shape) < 0.4, ignore_index, target)
        elif ignored == "all":
            target = np.full(target.shape, ignore_index)
        target = target.astype(draw(st.sampled_from([np.int64, np.int32])))
    return logits, target, kwargs, ignored, seed


def _torch_loss(logits, target, kwargs):
    """torch.nn.CrossEntropyLoss on the same numbers (float targets and weight in the logits' dtype)."""
    tl = torch.tensor(logits, requires_grad=True)
    kw = dict(kwargs)
    if "weight" in kw:
        kw["weight"] = torch.tensor(kw["weight"], dtype=tl.dtype)      # torch wants the input's dtype
    tt = torch.tensor(target.astype(np.int64)) if target.dtype.kind in "iu" else torch.tensor(target)
    return tl, torch.nn.CrossEntropyLoss(**kw)(tl, tt)


@given(cases())
def test_module_matches_torch(case):
    """Every combination of target kind x weight x ignore_index x smoothing x reduction x layout."""
    logits, target, kwargs, ignored, seed = case
    dtype = logits.dtype
    crit = nt.CrossEntropyLoss(**kwargs)
    loss = crit(logits, target)
    tl, ref = _torch_loss(logits, target, kwargs)
    rng = np.random.default_rng(seed + 1)
    up = rng.standard_normal(loss.shape).astype(dtype) if kwargs["reduction"] == "none" \
        else dtype.type(rng.uniform(0.5, 2.0))                          # a random upstream gradient
    dlogits = crit.backward(up)
    ref.backward(torch.tensor(up, dtype=ref.dtype))
    assert loss.dtype == dtype and loss.shape == tuple(ref.shape)
    assert dlogits.dtype == dtype and dlogits.shape == logits.shape
    assert_close({"loss": (loss, ref), "dlogits": (dlogits, tl.grad)}, tol=TOL[np.dtype(dtype)], dtype=dtype)
    if ignored == "all":
        assert np.all(dlogits == 0)
        assert np.isnan(loss) if kwargs["reduction"] == "mean" else np.all(loss == 0)


def test_default_backward_is_gradient_of_mean():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 6, 4))                            # (N, C, d1)
    targets = rng.integers(0, 6, size=(3, 4))
    crit = nt.CrossEntropyLoss()
    crit(logits, targets)
    tl = torch.tensor(logits, requires_grad=True)
    torch.nn.functional.cross_entropy(tl, torch.as_tensor(targets)).backward()
    assert_close({"dlogits": (crit.backward(), tl.grad)})


def test_reshaped_model_logits_equal_transposed_ones():
    """(B, S, V) logits as torch users pass them: reshape(-1, V) rows, or transposed to (B, V, S)."""
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((2, 5, 7))
    targets = rng.integers(0, 7, size=(2, 5))
    flat = nt.CrossEntropyLoss(label_smoothing=0.1)
    loss_flat = flat(logits.reshape(-1, 7), targets.reshape(-1))
    d_flat = flat.backward().reshape(logits.shape)
    moved = nt.CrossEntropyLoss(label_smoothing=0.1)
    loss_moved = moved(logits.transpose(0, 2, 1), targets)
    d_moved = moved.backward().transpose(0, 2, 1)
    assert_close({"loss": (loss_moved, loss_flat), "dlogits": (d_moved, d_flat)})


def test_class_axis_last_is_refused_with_the_fix_or_silently_read_as_torch():
    """torch's trap, kept: (B, S, V) logits passed as they are mean C = S. With S != V the target's shape
    gives it away (our message says how to fix it); with S == V both libraries compute another loss."""
    crit = nt.CrossEntropyLoss()
    with pytest.raises(ValueError, match=r"target must have shape \(2, 7\).*got \(2, 5\).*reshape\(-1, 7\)"):
        crit(np.zeros((2, 5, 7)), np.zeros((2, 5), dtype=int))
    rng = np.random.default_rng(2)
    logits, targets = rng.standard_normal((2, 4, 4)), rng.integers(0, 4, size=(2, 4))
    as_is = float(crit(logits, targets))
    ref = torch.nn.CrossEntropyLoss()(torch.tensor(logits), torch.tensor(targets))
    assert abs(as_is - float(ref)) < 1e-12                                         # the same (wrong) reading as torch
    assert abs(as_is - float(crit(logits.reshape(-1, 4), targets.reshape(-1)))) > 1e-6


def test_zero_total_weight_is_nan_as_torch():
    """Kept targets whose weights are 0: "mean" is 0/0 = NaN and the gradient NaN on those rows, as torch;
    an ignored row keeps gradient 0. "sum" stays finite."""
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((3, 4))
    target = np.array([0, 0, -100])
    weight = np.array([0.0, 2.0, 0.5, 3.0])
    for smoothing in (0.0, 0.1):
        for reduction in ("mean", "sum"):
            crit = nt.CrossEntropyLoss(weight=weight, reduction=reduction, label_smoothing=smoothing)
            loss, d = crit(logits, target), crit.backward()
            tl, ref = _torch_loss(logits, target, dict(weight=weight, reduction=reduction, label_smoothing=smoothing))
            ref.backward()
            assert_close({"loss": (loss, ref), "dlogits": (d, tl.grad)})          # NaN positions must agree
            assert np.isnan(loss) == (reduction == "mean")


@pytest.mark.parametrize("kind", ["index", "prob"])
@pytest.mark.parametrize("weight", [None, np.array([1.0, 2.0, 0.5])])
def test_empty_batch_as_torch(kind, weight):
    target = np.zeros(0, dtype=int) if kind == "index" else np.zeros((0, 3))
    for reduction in ("mean", "sum", "none"):
        crit = nt.CrossEntropyLoss(weight=weight, reduction=reduction)
        loss = crit(np.zeros((0, 3)), target)
        ref = torch.nn.CrossEntropyLoss(weight=None if weight is None else torch.tensor(weight), reduction=reduction)(
            torch.zeros(0, 3, dtype=torch.float64), torch.tensor(target))
        assert loss.shape == tuple(ref.shape)
        np.testing.assert_array_equal(loss, ref.numpy())
        assert crit.backward(None if reduction != "none" else np.zeros(0)).shape == (0, 3)


def test_huge_logits_stay_finite():
    logits = np.array([[1e4, -1e4, 0.0], [-3e38, 3e38, 0.0]], dtype=np.float32)
    crit = nt.CrossEntropyLoss()
    loss = crit(logits, np.array([0, 1]))
    assert np.isfinite(loss) and loss == 0
    assert np.all(np.isfinite(crit.backward()))


def test_functional_pair_is_what_the_module_computes():
    rng = np.random.default_rng(4)
    x, t, w = rng.standard_normal((3, 5, 2)), rng.integers(0, 5, size=(3, 2)), rng.uniform(0.5, 2, 5)
    out, cache = F.cross_entropy_forward(x, t, w, 1, "none", 0.2)
    crit = nt.CrossEntropyLoss(w, None, 1, None, "none", 0.2)           # torch's positional order
    g = rng.standard_normal(out.shape)
    np.testing.assert_array_equal(crit(x, t), out)
    np.testing.assert_array_equal(crit.backward(g), F.cross_entropy_backward(g, cache))


@pytest.mark.parametrize("target,match", [
    (np.array([0, 5]), r"target must hold class indices in \[0, 5\) or ignore_index=-100, got 5 \(1 such entry\)"),
    (np.array([0, -1]), r"got -1"),                                     # negative ids are not wrapped around
    (np.array([-7, -1]), r"got -7 \(2 such entries\)"),
])
def test_out_of_range_targets_are_refused(target, match):
    with pytest.raises(IndexError, match=match):
        nt.CrossEntropyLoss()(np.zeros((2, 5)), target)
    with pytest.raises(IndexError):                                       # torch raises too
        torch.nn.CrossEntropyLoss()(torch.zeros(2, 5), torch.tensor(target))


def test_bad_inputs_are_refused():
    crit = nt.CrossEntropyLoss()
    with pytest.raises(ValueError, match=r"target must have shape \(2, 5\) to match input \(2, 3, 5\)"):
        crit(np.zeros((2, 3, 5)), np.zeros((3, 2), dtype=int))
    with pytest.raises(ValueError, match="input must have shape"):
        crit(np.zeros(()), np.zeros((), dtype=int))
    with pytest.raises(TypeError, match=r"target must be integer class indices of shape \(2,\) or float class "
                                        r"probabilities of the input's shape \(2, 5\); got dtype float64"):
        crit(np.zeros((2, 5)), np.zeros(2))
    with pytest.raises(TypeError, match="so it is read as class probabilities, which must be floating point"):
        crit(np.zeros(5), np.zeros(5, dtype=int))
    with pytest.raises(TypeError, match="got dtype bool"):
        crit(np.zeros((2, 5)), np.zeros(2, dtype=bool))
    with pytest.raises(TypeError, match="input must be float32 or float64"):
        crit(np.zeros((2, 5), dtype=int), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match=r"input must have at least one class"):
        crit(np.zeros((2, 0)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match=r"weight must have shape \(5,\): one weight per class of input \(2, 5\), "
                                         r"got shape \(4,\)"):
        nt.CrossEntropyLoss(weight=np.ones(4))(np.zeros((2, 5)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="weight must be a 1-D array"):
        nt.CrossEntropyLoss(weight=np.ones((1, 5)))
    with pytest.raises(ValueError, match="ignore_index=0 is not supported with probability targets"):
        nt.CrossEntropyLoss(ignore_index=0)(np.zeros((2, 5)), np.full((2, 5), 0.2))
    with pytest.raises(RuntimeError, match="ignore_index is not supported"):               # torch refuses too
        torch.nn.CrossEntropyLoss(ignore_index=0)(torch.zeros(2, 5), torch.full((2, 5), 0.2))
    for kwargs in (dict(size_average=False), dict(reduce=False)):
        with pytest.raises(TypeError, match="deprecated spelling.*use reduction="):
            nt.CrossEntropyLoss(**kwargs)
    with pytest.raises(ValueError, match="reduction must be one of"):
        nt.CrossEntropyLoss(reduction="avg")
    for bad in (1.5, -0.1):                     # torch silently reads a negative smoothing as 0: refused here
        with pytest.raises(ValueError, match="label_smoothing"):
            nt.CrossEntropyLoss(label_smoothing=bad)
    with pytest.raises(RuntimeError, match="before forward"):
        nt.CrossEntropyLoss().backward()
    crit(np.zeros((2, 5)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="dout must be a scalar"):
        crit.backward(np.ones(2))
    assert crit.backward().shape == (2, 5)                              # the refused call kept the cache
    # an ignored target may be out of range: it is never looked up
    assert nt.CrossEntropyLoss(ignore_index=99)(np.zeros((2, 5)), np.array([99, 1])) > 0


def test_refused_forward_leaves_no_stale_cache():
    crit = nt.CrossEntropyLoss()
    crit(np.zeros((2, 5)), np.zeros(2, dtype=int))
    with pytest.raises(IndexError):
        crit(np.zeros((2, 5)), np.array([0, 9]))
    with pytest.raises(RuntimeError, match="before forward"):
        crit.backward()
    assert crit(np.zeros((2, 5)), np.zeros(2, dtype=int)) > 0          # usable afterwards
