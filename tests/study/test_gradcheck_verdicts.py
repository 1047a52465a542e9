"""The checkers' verdicts can be trusted: a failed result is falsy and ``raise_exception=True`` raises
:class:`nt.GradcheckError`; the upstream gradient never coincides with the inputs a user drew from the
same seed (so a backward that uses ``x`` in place of ``dout``, or a transposed square weight gradient,
fails every checker); and no row of the ``gradcheck`` report claims a pass it did not test."""

from __future__ import annotations

import re

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer import cli
from numpy_transformer import functional as F
from numpy_transformer.cli.gradcheck import _fd_rows, op_cases
from numpy_transformer.study.gradchecking import (
    GradcheckError,
    checker_rng,
    gradcheck,
    gradcheck_module,
    upstream_gradient,
)

torch = pytest.importorskip("torch")


# --------------------------------------------------------------------------------------------------
# the code under check: right and wrong backward passes
# --------------------------------------------------------------------------------------------------

def relu_forward(x):
    return np.maximum(x, 0.0), x


def relu_backward(dout, x):
    return dout * (x > 0)


def relu_backward_uses_x(dout, x):
    return x * (x > 0)                               # the bug: x where dout belongs


def torch_relu(x):
    return torch.relu(x)


def linear_backward_transposed(dout, cache):
    dx, dw, db = F.linear_backward(dout, cache)
    return dx, dw.T, db


def torch_linear(x, weight, bias):
    return torch.nn.functional.linear(x, weight, bias)


class UsesInputAsDout(nt.Linear):
    """A Linear whose backward is fed its own input instead of ``dout`` (square, so the shapes agree)."""

    def forward(self, x):
        object.__setattr__(self, "last_input", np.array(x, copy=True))
        return super().forward(x)

    def backward(self, dout):
        return super().backward(self.last_input)


def linear_backward_doubled(dout, cache):
    dx, dw, db = F.linear_backward(dout, cache)
    return dx, 2 * dw, db


class DoubledWeightGrad(nt.Linear):
    """A Linear that accumulates twice its weight gradient."""

    def backward(self, dout):
        dx = super().backward(dout)
        self.weight.grad = 2 * self.weight.grad
        return dx


class TransposedWeightGrad(nt.Linear):
    """A Linear that accumulates its weight gradient transposed."""

    def backward(self, dout):
        before = 0.0 if self.weight.grad is None else self.weight.grad.copy()
        dx = super().backward(dout)
        self.weight.grad = before + (self.weight.grad - before).T
        return dx


def _data(shape, seed=0):
    """Inputs as the docs draw them: the first draws of ``np.random.default_rng(seed)``."""
    return np.random.default_rng(seed).standard_normal(shape)


def _linear_inputs():
    return {"x": _data((4, 3)), "weight": _data((3, 3), 1), "bias": _data(3, 2)}


def _torch_linear_module(ours):
    return torch.nn.Linear(ours.in_features, ours.out_features, dtype=torch.float64)


# --------------------------------------------------------------------------------------------------
# item 1: a failed check is falsy; raise_exception raises GradcheckError
# --------------------------------------------------------------------------------------------------

def _four_checks(broken, raise_exception=False):
    """The four checkers on a doubled weight gradient (broken) or a correct linear."""
    bwd = linear_backward_doubled if broken else F.linear_backward
    cls = DoubledWeightGrad if broken else nt.Linear
    kw = dict(raise_exception=True) if raise_exception else {}
    yield lambda: gradcheck(F.linear_forward, bwd, _linear_inputs(), verbose=False, **kw)
    yield lambda: gradcheck_module(cls(3, 3, dtype=np.float64, seed=0), _data((4, 3)), verbose=False, **kw)
    yield lambda: nt.check_against_torch(F.linear_forward, bwd, torch_linear, _linear_inputs(), **kw)
    module = cls(3, 3, dtype=np.float64, seed=0)
    yield lambda: nt.check_against_torch_module(module, _torch_linear_module(module), _data((4, 3)), **kw)


def test_a_failed_result_is_falsy_and_a_passed_one_truthy():
    for check in _four_checks(broken=True):
        res = check()
        assert not res.passed and not bool(res) and not res
        with pytest.raises(AssertionError):
            assert res                                 # what a user writes in a test
    for check in _four_checks(broken=False):
        res = check()
        assert res.passed and bool(res) is True
        assert res


def test_raise_exception_raises_gradcheck_error_and_the_default_returns_the_report():
    for check in _four_checks(broken=True, raise_exception=True):
        with pytest.raises(nt.GradcheckError, match="FAILED") as info:
            check()
        assert isinstance(info.value, RuntimeError) and isinstance(info.value, AssertionError)
        assert "weight" in str(info.value)
    for check in _four_checks(broken=False, raise_exception=True):
        assert check().passed                          # a pass returns the report, raising nothing
    for check in _four_checks(broken=True):            # the default, False: the (falsy) report
        assert not check()


def test_gradcheck_error_is_exported_and_is_torchs_kind_of_error():
    from reference_torch.check.report import TorchCheckError
    assert nt.GradcheckError is GradcheckError and "GradcheckError" in nt.__all__
    assert issubclass(GradcheckError, RuntimeError) and issubclass(GradcheckError, AssertionError)
    assert issubclass(TorchCheckError, GradcheckError)


def test_raise_exception_must_be_a_bool():
    with pytest.raises(TypeError, match="raise_exception must be True or False, got 'yes'"):
        gradcheck(F.linear_forward, F.linear_backward, _linear_inputs(), verbose=False, raise_exception="yes")
    with pytest.raises(TypeError, match="raise_exception must be True or False, got 1"):
        gradcheck_module(nt.Linear(3, 3, dtype=np.float64), _data((4, 3)), verbose=False, raise_exception=1)
    with pytest.raises(TypeError, match="raise_exception must be True or False, got None"):
        nt.check_against_torch(F.linear_forward, F.linear_backward, torch_linear, _linear_inputs(),
                               raise_exception=None)


# --------------------------------------------------------------------------------------------------
# item 2: dout never coincides with the user's inputs
# --------------------------------------------------------------------------------------------------

def test_upstream_gradient_is_not_the_stream_of_default_rng_seed():
    for seed in (0, 1, 7, 12345):
        x = _data((3, 4), seed)
        dout = upstream_gradient((3, 4), seed)
        assert not np.array_equal(dout, x) and abs(np.corrcoef(dout.ravel(), x.ravel())[0, 1]) < 0.99
        np.testing.assert_array_equal(dout, upstream_gradient((3, 4), seed))        # seeded: reproducible
        np.testing.assert_array_equal(dout, checker_rng(seed).standard_normal((3, 4)))
    g = np.random.default_rng(5)
    assert upstream_gradient((2,), g).shape == (2,)                                 # a Generator: used as is


def test_upstream_gradient_redraws_a_draw_parallel_to_an_input():
    first = upstream_gradient((3, 4), 0)
    for avoid in (first, -2.5 * first, first.astype(np.float32).astype(np.float64)):
        dout = upstream_gradient((3, 4), 0, avoid=[avoid])
        cos = float(np.sum(dout * avoid) / (np.linalg.norm(dout) * np.linalg.norm(avoid)))
        assert abs(cos) < 0.99, cos
    assert np.array_equal(upstream_gradient((3, 4), 0, avoid=[np.ones((2, 2)), _data((3, 4))]), first)
    upstream_gradient((), 0, avoid=[np.array(0.5)])                                # a scalar: no endless redraw
    with pytest.raises(TypeError, match="seed must be a non-negative int"):
        upstream_gradient((2,), 1.5)


def test_a_backward_that_uses_x_for_dout_fails_every_checker():
    """x drawn as the docs draw it (default_rng(0)), an output of x's shape: on the old dout stream
    dout == x exactly and every checker passed this backward."""
    x = _data((4, 5))
    assert not gradcheck(relu_forward, relu_backward_uses_x, {"x": x}, verbose=False)
    assert not gradcheck(relu_forward, relu_backward_uses_x, {"x": x}, fast_mode=True, verbose=False)
    assert gradcheck(relu_forward, relu_backward, {"x": x}, verbose=False)
    assert not nt.check_against_torch(relu_forward, relu_backward_uses_x, torch_relu, {"x": x})
    assert nt.check_against_torch(relu_forward, relu_backward, torch_relu, {"x": x})
    x = _data((4, 3))
    res = gradcheck_module(UsesInputAsDout(3, 3, dtype=np.float64, seed=0), x, verbose=False)
    assert not res and {"x", "weight", "bias"} <= {c.name for c in res.failures}
    module = UsesInputAsDout(3, 3, dtype=np.float64, seed=0)
    res = nt.check_against_torch_module(module, _torch_linear_module(module), x)
    assert not res and {"x", "weight", "bias"} <= {c.name for c in res.failures}


def test_a_transposed_square_weight_gradient_fails_every_checker():
    """With dout == x the weight gradient dout.T @ x is symmetric and its transpose equal to it."""
    res = gradcheck(F.linear_forward, linear_backward_transposed, _linear_inputs(), verbose=False)
    assert [c.name for c in res.failures] == ["weight"]
    res = gradcheck(F.linear_forward, linear_backward_transposed, _linear_inputs(), fast_mode=True, verbose=False)
    assert [c.name for c in res.failures] == ["weight"]
    res = nt.check_against_torch(F.linear_forward, linear_backward_transposed, torch_linear, _linear_inputs())
    assert [c.name for c in res.failures] == ["weight"]
    res = gradcheck_module(TransposedWeightGrad(3, 3, dtype=np.float64, seed=0), _data((4, 3)), verbose=False)
    assert [c.name for c in res.failures] == ["weight"]
    module = TransposedWeightGrad(3, 3, dtype=np.float64, seed=0)
    res = nt.check_against_torch_module(module, _torch_linear_module(module), _data((4, 3)))
    assert [c.name for c in res.failures] == ["weight"]


# --------------------------------------------------------------------------------------------------
# item 3: no row of the report claims a pass it did not test
# --------------------------------------------------------------------------------------------------

# Gradients that are zero in exact arithmetic whatever the draw: a bias added to every key shifts each
# row of scores by a constant, which the softmax ignores. Any other zero row is a degenerate draw.
STRUCTURAL_ZEROS = re.compile(r"(^|\.)k_proj\.bias$")


def test_the_report_examples_draw_no_degenerate_axis():
    for case in op_cases(0):
        if case.op == "softmax":
            axis = case.static["axis"]
            assert case.inputs["x"].shape[axis] > 1, (case.name, case.inputs["x"].shape)
        for name in ("key",):                       # attention: over one key, dquery = dkey = 0
            if name in case.inputs:
                assert case.inputs[name].shape[-2] > 1, (case.name, case.inputs[name].shape)


def test_a_zero_gradient_row_states_its_absolute_check_and_no_infinite_tolerance():
    x = _data((2, 1))                                # softmax over an axis of length 1: the gradient is 0
    res = gradcheck(F.softmax_forward, F.softmax_backward, {"x": x, "axis": 1}, verbose=False)
    row = _fd_rows("softmax", res)["x"]
    assert row.fd_absolute and row.fd_pass and row.fd_tol == res.atol and np.isfinite(row.fd_tol)
    assert "zero" in res["x"].describe() and "0.000e+00 x the gradient scale" not in res["x"].describe()


def _report_rows(out):
    """``(case, tensor, cells)`` for every row of the report (a long name stands on its own line)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("---")) + 1
    rows, case, name = [], None, ""
    for line in lines[start:]:
        if line.startswith("---"):
            break
        if line.startswith("  ") and len(line.split()) == 1:
            name = line.strip()
        elif line.startswith("  "):
            cells = line.split()
            tensor = name or cells[0]
            shape_and_rest = line[2 + 34 + 1:].split() if name else cells[1:]
            rows.append((case, tensor, " ".join(shape_and_rest)))
            name = ""
        else:
            case = line
    return rows


def test_no_row_of_the_report_claims_a_pass_it_did_not_test(capsys, monkeypatch):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["gradcheck"])
    assert cli.main(["gradcheck"]) == 0
    out = capsys.readouterr().out
    assert "inf" not in out.replace("infer", ""), "an infinite error or tolerance in the report"
    rows = _report_rows(out)
    assert len(rows) > 300
    for case, tensor, rest in rows:
        cells = re.findall(r"\)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$", rest)
        assert cells, (case, tensor, rest)
        fd_err, fd_tol, fd, t_rel, t, result = cells[0]
        if result == "PASS":
            assert "PASS" in (fd, t), (case, tensor, rest)            # a pass names what passed
        if fd == "PASS":
            assert float(fd_tol.rstrip("a")) < 1e-3, (case, tensor, rest)
        if fd_err.endswith("a"):                  # a gradient zero to within atol: a degenerate draw?
            assert STRUCTURAL_ZEROS.search(tensor), f"{case} / {tensor} has a zero gradient: {rest}"
        else:
            assert fd == "-" or float(fd_err) < 1e-6, (case, tensor, rest)
    summary = next(line for line in out.splitlines() if "largest passing relative error" in line)
    fd_worst = float(re.search(r"FD (\S+),", summary).group(1))
    assert fd_worst < 1e-6, summary
