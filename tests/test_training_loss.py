"""CrossEntropyLoss against torch.nn.functional.cross_entropy: every option, ignored and all-ignored rows."""

import numpy as np
import pytest
import torch
import torch.nn.functional as tF
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from tests._compare import assert_close, TOL


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    three_d = draw(st.booleans())
    v = draw(st.integers(1, 9))
    shape = (draw(st.integers(1, 4)), draw(st.integers(1, 5))) if three_d else (draw(st.integers(1, 12)),)
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from([1.0, 10.0, 300.0]))                 # 300: exp would overflow without the max shift
    logits = (rng.standard_normal(shape + (v,)) * scale).astype(dtype)
    ignore_index = draw(st.sampled_from([-100, 0, v - 1, 7]))
    targets = rng.integers(0, v, size=shape)
    ignored = draw(st.sampled_from(["none", "some", "all"]))
    if ignored == "some":
        targets[rng.random(shape) < 0.4] = ignore_index
    elif ignored == "all":
        targets[...] = ignore_index
    reduction = draw(st.sampled_from(["mean", "sum", "none"]))
    smoothing = draw(st.sampled_from([0.0, 0.1, 0.37, 1.0]))
    return logits, targets, ignore_index, reduction, smoothing, seed


@given(cases())
def test_cross_entropy_matches_torch(case):
    logits, targets, ignore_index, reduction, smoothing, seed = case
    dtype = logits.dtype
    v = logits.shape[-1]
    crit = nt.CrossEntropyLoss(ignore_index=ignore_index, reduction=reduction, label_smoothing=smoothing)
    loss = crit(logits, targets)
    assert loss.dtype == dtype
    tl = torch.tensor(logits, requires_grad=True)
    ref = tF.cross_entropy(tl.reshape(-1, v), torch.as_tensor(targets).reshape(-1), ignore_index=ignore_index,
                           reduction=reduction, label_smoothing=smoothing)
    if reduction == "none":
        ref_out = ref.reshape(targets.shape)
        up = np.random.default_rng(seed + 1).standard_normal(targets.shape).astype(dtype)   # random upstream grad
        ref_out.backward(torch.as_tensor(up))
        dlogits = crit.backward(up)
    else:
        ref_out = ref
        up = dtype.type(np.random.default_rng(seed + 1).uniform(0.5, 2.0))
        ref.backward(torch.tensor(up, dtype=ref.dtype))
        dlogits = crit.backward(up)
    tol = TOL[np.dtype(dtype)]
    assert_close({"loss": (loss, ref_out), "dlogits": (dlogits, tl.grad)}, tol=tol, dtype=dtype)
    assert dlogits.dtype == dtype and dlogits.shape == logits.shape
    if (targets == ignore_index).all():
        assert np.all(dlogits == 0)
        if reduction == "mean":
            assert np.isnan(loss)


def test_default_backward_is_gradient_of_mean():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 4, 6))
    targets = rng.integers(0, 6, size=(3, 4))
    crit = nt.CrossEntropyLoss()
    crit(logits, targets)
    tl = torch.tensor(logits, requires_grad=True)
    tF.cross_entropy(tl.reshape(-1, 6), torch.as_tensor(targets).reshape(-1)).backward()
    assert_close({"dlogits": (crit.backward(), tl.grad)})


def test_huge_logits_stay_finite():
    logits = np.array([[1e4, -1e4, 0.0], [-3e38, 3e38, 0.0]], dtype=np.float32)
    crit = nt.CrossEntropyLoss()
    loss = crit(logits, np.array([0, 1]))
    assert np.isfinite(loss) and loss == 0
    assert np.all(np.isfinite(crit.backward()))


@pytest.mark.parametrize("targets,match", [
    (np.array([0, 5]), r"targets must lie in \[0, 5\) or equal ignore_index=-100, got 5"),
    (np.array([0, -1]), r"got -1"),
])
def test_out_of_range_targets_are_refused(targets, match):
    with pytest.raises(IndexError, match=match):
        nt.CrossEntropyLoss()(np.zeros((2, 5)), targets)


def test_bad_inputs_are_refused():
    crit = nt.CrossEntropyLoss()
    with pytest.raises(ValueError, match=r"targets must have shape \(2, 3\)"):
        crit(np.zeros((2, 3, 5)), np.zeros((3, 2), dtype=int))
    with pytest.raises(ValueError, match=r"logits must have shape \(N, V\) or \(B, S, V\)"):
        crit(np.zeros(5), np.zeros((), dtype=int))
    with pytest.raises(TypeError, match="targets must be an integer array"):
        crit(np.zeros((2, 5)), np.zeros(2))
    with pytest.raises(TypeError, match="logits must be float32 or float64"):
        crit(np.zeros((2, 5), dtype=int), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="reduction must be one of"):
        nt.CrossEntropyLoss(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        nt.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="before forward"):
        nt.CrossEntropyLoss().backward()
    crit(np.zeros((2, 5)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="dloss must be a scalar"):
        crit.backward(np.ones(2))
    # an ignored target may be out of range: it is never looked up
    assert nt.CrossEntropyLoss(ignore_index=99)(np.zeros((2, 5)), np.array([99, 1])) > 0
