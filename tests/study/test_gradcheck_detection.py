"""``gradcheck`` catches wrong backward functions and says where (which gradient, which index, a hint);
its options (``max_elements``, ``exclude``, ``wrt``), refusals and hygiene (the module and the arrays are
left as they were found), its docstring examples and its exports. This file never imports torch.
"""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer import functional as F
from numpy_transformer.study.gradchecking import (
    GradcheckError,
    gradcheck,
    gradcheck_module,
    numerical_gradient,
)
from tests.study.gradcheck_helpers import _away_from_zero, _ok

# --------------------------------------------------------------------------------------------------
# gradcheck catches wrong backward functions, and says where
# --------------------------------------------------------------------------------------------------

def _failed(res, name):
    assert not res.passed
    assert [c.name for c in res.failures] == [name], str(res)
    check = res[name]
    assert check.index is not None and check.n_bad > 0
    text = str(res)
    assert f"gradient of input {name!r}" in text and "is wrong" in text and "index (" in text
    with pytest.raises(GradcheckError, match=f"FAILED: {name!r}"):
        res.raise_if_failed()
    return check


def test_detects_softmax_backward_without_the_row_sum_term():
    x = np.random.default_rng(0).standard_normal((3, 5))
    res = gradcheck(F.softmax_forward, lambda dout, cache: cache.y * dout, {"x": x}, verbose=False)
    check = _failed(res, "x")
    assert check.max_rel_err > 0.1
    assert abs(check.analytic - check.numeric) == pytest.approx(check.max_abs_err)
    # the right backward passes on the same input
    gradcheck(F.softmax_forward, F.softmax_backward, {"x": x}, verbose=False).raise_if_failed()


def test_detects_linear_backward_with_a_transposed_weight():
    rng = np.random.default_rng(1)
    inputs = {"x": rng.standard_normal((2, 3, 4)), "weight": rng.standard_normal((4, 4)),
              "bias": rng.standard_normal(4)}

    def transposed_dx(dout, cache):                        # dx = dout @ W^T instead of dout @ W
        dx, dw, db = F.linear_backward(dout, cache)
        return dout @ cache.weight.T, dw, db
    _failed(gradcheck(F.linear_forward, transposed_dx, inputs, verbose=False), "x")

    def transposed_dw(dout, cache):                        # dW = x^T dout instead of dout^T x
        dx, dw, db = F.linear_backward(dout, cache)
        return dx, dw.T, db
    check = _failed(gradcheck(F.linear_forward, transposed_dw, inputs, verbose=False), "weight")
    assert "transposed" in check.note

    inputs["weight"] = rng.standard_normal((5, 4))            # not square: the shapes give it away
    inputs["bias"] = rng.standard_normal(5)
    res = gradcheck(F.linear_forward, transposed_dw, inputs, verbose=False)
    assert [c.name for c in res.failures] == ["weight"]
    assert "has shape (4, 5) but the input has shape (5, 4)" in str(res)


def test_detects_layer_norm_backward_missing_a_term():
    rng = np.random.default_rng(2)

    def missing_variance_term(dout, cache):
        dx, dw, db = F.layer_norm_backward(dout, cache)
        dxhat = dout * cache.weight
        return (dxhat - dxhat.mean(axis=-1, keepdims=True)) * cache.rstd, dw, db

    res = gradcheck(F.layer_norm_forward, missing_variance_term,
                    {"x": rng.standard_normal((2, 3, 6)), "weight": rng.standard_normal(6),
                     "bias": rng.standard_normal(6)}, verbose=False)
    _failed(res, "x")
    assert res["weight"].passed and res["bias"].passed


def test_detects_gelu_and_attention_bugs_with_hints():
    x = 2 * np.random.default_rng(3).standard_normal((4, 3))

    def gelu_missing_pdf(dout, cache):                        # y' = Phi(x) only: forgets x * phi(x)
        return dout * 0.5 * F.erfc(-cache.x / np.sqrt(2))
    _failed(gradcheck(F.gelu_forward, gelu_missing_pdf, [x], names=["x"], verbose=False), "x")

    check = _failed(gradcheck(F.relu_forward, lambda d, c: -F.relu_backward(d, c),
                              [_away_from_zero(x)], names=["x"], verbose=False), "x")
    assert "wrong sign" in check.note

    rng = np.random.default_rng(4)
    qkv = {"query": rng.standard_normal((2, 3, 4)), "key": rng.standard_normal((2, 5, 4)),
           "value": rng.standard_normal((2, 5, 2))}

    def unscaled(dout, cache):                                # forgets the 1/sqrt(Dh) on dq and dk
        dq, dk, dv = F.scaled_dot_product_attention_backward(dout, cache)
        return dq * 2, dk, dv
    check = _failed(gradcheck(F.scaled_dot_product_attention_forward, unscaled, qkv, verbose=False), "query")
    assert "times 2" in check.note


class _LinearForgettingBias(nt.Linear):
    def backward(self, dout):
        cache, shape = self._take()
        dx, dw, _ = F.linear_backward(dout, cache)
        self.weight.accumulate(dw)
        return dx


class _LayerNormWrongBackward(nt.LayerNorm):
    def backward(self, dout):
        cache, shape = self._take()
        dx, dw, db = F.layer_norm_backward(dout, cache)
        self.weight.accumulate(dw)
        self.bias.accumulate(db)
        return dout * cache.weight * cache.rstd                  # the normalisation's projection is missing


def test_module_check_detects_a_missing_parameter_gradient_and_a_wrong_input_gradient():
    rng = np.random.default_rng(5)
    res = gradcheck_module(_LinearForgettingBias(3, 2, dtype=np.float64, seed=0), rng.standard_normal((4, 3)),
                           verbose=False)
    assert [c.name for c in res.failures] == ["bias"]
    assert "p.grad is None after backward" in str(res) and "parameter 'bias'" in str(res)

    res = gradcheck_module(_LayerNormWrongBackward(5, dtype=np.float64), rng.standard_normal((2, 5)),
                           verbose=False)
    assert [c.name for c in res.failures] == ["x"]


def test_max_elements_subsets_but_still_checks_the_largest_gradient():
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((6, 8)), rng.standard_normal((5, 8))
    res = _ok(gradcheck(F.linear_forward, F.linear_backward, {"x": x, "weight": w}, max_elements=7,
                        verbose=False))
    assert res["x"].checked == 7 and res["x"].total == 48
    assert np.isnan(res["x"].numeric_grad).sum() == 48 - 7

    def one_wrong(dout, cache):                               # only the largest entry of dW is wrong
        dx, dw, db = F.linear_backward(dout, cache)
        dw = dw.copy()
        dw.flat[np.argmax(np.abs(dw))] *= 1.5
        return dx, dw, db
    res = gradcheck(F.linear_forward, one_wrong, {"x": x, "weight": w}, max_elements=3, verbose=False)
    assert [c.name for c in res.failures] == ["weight"] and res["weight"].n_bad == 1


def test_exclude_and_embedding_padding_row():
    """The padding row's gradient is zero by design, not the derivative: FD flags it unless excluded."""
    m = nt.Embedding(5, 3, padding_idx=2, dtype=np.float64, seed=0)
    ids = np.array([[0, 2, 4], [2, 1, 1]])
    res = gradcheck_module(m, ids, verbose=False)
    assert [c.name for c in res.failures] == ["weight"] and res["weight"].index[0] == 2
    _ok(gradcheck_module(m, ids, exclude={"weight": 2}, verbose=False))


def test_gradcheck_module_leaves_the_module_as_it_found_it():
    rng = np.random.default_rng(7)
    layer = nt.TransformerEncoderLayer(4, 2, dim_feedforward=6, dtype=np.float64, seed=0)
    x = rng.standard_normal((2, 3, 4))
    layer(x)
    layer.backward(np.ones((2, 3, 4)))                           # stale accumulated grads
    before = {n: (p.data.copy(), p.grad.copy()) for n, p in layer.named_parameters()}
    x_before = x.copy()
    _ok(gradcheck_module(layer, x, verbose=False))              # passes although p.grad was not zero
    for n, p in layer.named_parameters():
        assert np.array_equal(p.data, before[n][0]) and np.array_equal(p.grad, before[n][1]), n
    assert layer.training and layer.dropout.training
    assert np.array_equal(x, x_before)


def test_refusals():
    rng = np.random.default_rng(8)
    with pytest.raises(TypeError, match="dtype=np.float64"):
        gradcheck_module(nt.Linear(2, 2, seed=0), rng.standard_normal((1, 2)), verbose=False)
    w32 = rng.standard_normal((2, 3)).astype(np.float32)
    with pytest.raises(TypeError, match="float64 end to end"):
        gradcheck(lambda x: (x @ w32.T).astype(np.float32), lambda d, c: None, [rng.standard_normal((1, 3))],
                  verbose=False)
    with pytest.raises(ValueError, match="dropout is active"):
        gradcheck_module(nt.Dropout(0.2), rng.standard_normal(3), eval_mode=False, verbose=False)
    with pytest.raises(ValueError, match="returned 4 gradients"):
        gradcheck(F.linear_forward, lambda d, c: (1, 2, 3, 4), {"x": rng.standard_normal((2, 3)),
                                                          "weight": rng.standard_normal((2, 3)),
                                                          "bias": rng.standard_normal(2)}, verbose=False)
    with pytest.raises(ValueError, match="not floating-point inputs"):
        gradcheck(F.embedding_forward, F.embedding_backward, {"ids": np.array([0]), "weight": np.ones((2, 2))},
                  wrt=["ids"], verbose=False)


def test_wrt_turns_a_none_gradient_into_a_failure():
    rng = np.random.default_rng(9)
    inputs = {"x": rng.standard_normal((2, 3)), "weight": rng.standard_normal((2, 3)), "bias": rng.standard_normal(2)}
    no_bias = lambda d, c: F.linear_backward(d, c)[:2] + (None,)  # noqa: E731
    res = gradcheck(F.linear_forward, no_bias, inputs, verbose=False)
    assert res.passed and res.skipped == [("bias", "the backward returned None")]
    res = gradcheck(F.linear_forward, no_bias, inputs, wrt=["x", "weight", "bias"], verbose=False)
    assert [c.name for c in res.failures] == ["bias"] and "all zero" in res["bias"].note


def test_numerical_gradient_restores_the_array_and_handles_aliasing_outputs():
    x = np.array([1.0, -2.0, np.inf, 3.0])
    g = numerical_gradient(lambda: x * 1.0, x, np.ones(4))
    assert np.array_equal(x, [1.0, -2.0, np.inf, 3.0])
    np.testing.assert_allclose(g[[0, 1, 3]], 1.0, rtol=1e-9)
    assert np.isnan(g[2])                                      # no finite difference at inf
    y = np.array([0.5, 2.0])                                   # the output IS the input (dropout in eval)
    np.testing.assert_allclose(numerical_gradient(lambda: y, y, np.array([3.0, -1.0])), [3.0, -1.0], rtol=1e-9)


def test_docstring_examples_run():
    failures = tried = 0
    for name in ["", ".pair", ".module", ".numeric", ".result", ".hygiene"]:
        mod = importlib.import_module("numpy_transformer.study.gradchecking" + name)  # the package, not the function
        f, t = doctest.testmod(mod, verbose=False, report=False)
        failures, tried = failures + f, tried + t
    assert tried >= 12 and failures == 0


def test_exported():
    assert nt.gradcheck is gradcheck and nt.gradcheck_module is gradcheck_module
    assert {"gradcheck", "gradcheck_module", "GradcheckResult"} <= set(nt.__all__)
