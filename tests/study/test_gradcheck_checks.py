"""gradcheck's checks beyond the numbers: fast mode (v^T J u), the float64 warning, a backward that edits
its inputs or cache in place, and a second backward with the same cache. No torch."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer import functional as F
from numpy_transformer.cli.gradcheck import module_cases, op_cases
from numpy_transformer.study.gradchecking import GradcheckError, GradcheckPrecisionWarning, gradcheck, gradcheck_module

seeds = st.integers(0, 2**32 - 1)


def _linear_inputs(rng, n=3, d_in=4, d_out=5):
    return {"x": rng.standard_normal((n, d_in)), "weight": rng.standard_normal((d_out, d_in)),
            "bias": rng.standard_normal(d_out)}


class TanhCache(NamedTuple):
    x: np.ndarray
    w: np.ndarray
    y: np.ndarray


def tanh_forward(x, w):
    y = np.tanh(x @ w)                                  # (N, M)
    return y, TanhCache(x, w, y)


def tanh_backward(dout, cache):
    dz = dout * (1 - cache.y * cache.y)
    return dz @ cache.w.T, cache.x.T @ dz


def _tanh_inputs(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((3, 4)), "w": rng.standard_normal((4, 2))}


# --------------------------------------------------------------------------------------------------
# fast mode
# --------------------------------------------------------------------------------------------------

def test_fast_mode_and_full_mode_agree_on_every_registry_op():
    for case in op_cases(0):
        def fwd(**kw):
            return case.forward(**kw, **case.static)
        full = gradcheck(fwd, case.backward, case.inputs, exclude=case.exclude, verbose=False)
        fast = gradcheck(fwd, case.backward, case.inputs, exclude=case.exclude, fast_mode=True, verbose=False)
        assert full.passed and fast.passed, (case.name, str(full), str(fast))
        assert [c.name for c in fast.checks] == [c.name for c in full.checks], case.name
        assert fast.fast_mode and all(c.direction for c in fast.checks)
        for c in fast.checks:                   # v^T J u from the same backward, two ways of reaching it
            assert c.max_rel_err < 1e-6, (case.name, c.describe())


def test_fast_mode_and_full_mode_agree_on_every_registry_module():
    for case in module_cases(0):
        full = gradcheck_module(case.build(np.float64), *case.inputs, forward_kwargs=case.forward_kwargs,
                                exclude=case.exclude, max_elements=6, verbose=False)
        fast = gradcheck_module(case.build(np.float64), *case.inputs, forward_kwargs=case.forward_kwargs,
                                exclude=case.exclude, fast_mode=True, verbose=False)
        assert full.passed and fast.passed, (case.name, str(full), str(fast))
        assert [c.name for c in fast.checks] == [c.name for c in full.checks], case.name


def test_fast_mode_value_is_the_full_gradient_along_u():
    inputs = _tanh_inputs(3)
    res = gradcheck(tanh_forward, tanh_backward, inputs, fast_mode=True, verbose=False)
    full = gradcheck(tanh_forward, tanh_backward, inputs, verbose=False)
    for c in res.checks:
        np.testing.assert_array_equal(c.analytic_grad, full[c.name].analytic_grad)
        assert c.checked == c.total and c.index is None and abs(c.analytic) > 0
    assert "v^T J u" in str(res) and "fast mode" in str(res)


def test_fast_mode_names_only_the_wrong_gradient():
    """A linear backward whose weight gradient is 0.1% off: fast mode fails 'weight' and passes x, bias."""
    def backward(dout, cache):
        dx, dw, db = F.linear_backward(dout, cache)
        return dx, dw * 1.001, db
    inputs = _linear_inputs(np.random.default_rng(1))
    res = gradcheck(F.linear_forward, backward, inputs, fast_mode=True, verbose=False)
    assert [c.name for c in res.failures] == ["weight"]
    assert res["x"].passed and res["bias"].passed and not res.passed
    assert "fast_mode=False" in res["weight"].describe()
    full = gradcheck(F.linear_forward, backward, inputs, verbose=False)
    assert [c.name for c in full.failures] == ["weight"]


@settings(max_examples=max(10, settings().max_examples // 2))
@given(seed=seeds, rel=st.sampled_from([1e-4, 1e-3, 1e-1]), which=st.sampled_from(["x", "weight", "bias"]))
def test_fast_mode_catches_a_random_error_in_one_gradient(seed, rel, which):
    """Any error of normwise size >= 1e-4 in any one gradient is caught, and nothing else is flagged."""
    rng = np.random.default_rng(seed)
    inputs = _linear_inputs(rng, n=int(rng.integers(1, 5)), d_in=int(rng.integers(1, 6)), d_out=int(rng.integers(1, 6)))
    pos = ["x", "weight", "bias"].index(which)

    def backward(dout, cache):
        grads = list(F.linear_backward(dout, cache))
        g = grads[pos]
        e = rng.standard_normal(g.shape)
        grads[pos] = g + rel * np.linalg.norm(g) / np.linalg.norm(e) * e
        return tuple(grads)
    res = gradcheck(F.linear_forward, backward, inputs, fast_mode=True, seed=seed, check_repeat=False, verbose=False)
    assert [c.name for c in res.failures] == [which], str(res)


def test_fast_mode_catches_a_transposed_and_a_forgotten_gradient():
    rng = np.random.default_rng(2)
    inputs = {"x": rng.standard_normal((3, 4)), "weight": rng.standard_normal((4, 4)), "bias": rng.standard_normal(4)}
    transposed = lambda d, c: (lambda g: (g[0], g[1].T, g[2]))(F.linear_backward(d, c))  # noqa: E731
    res = gradcheck(F.linear_forward, transposed, inputs, fast_mode=True, verbose=False)
    assert [c.name for c in res.failures] == ["weight"]
    no_bias = lambda d, c: F.linear_backward(d, c)[:2] + (None,)  # noqa: E731
    res = gradcheck(F.linear_forward, no_bias, inputs, wrt=["x", "weight", "bias"], fast_mode=True, verbose=False)
    assert [c.name for c in res.failures] == ["bias"] and "all zero" in res["bias"].note


def test_fast_mode_catches_a_wrong_module_parameter_gradient(monkeypatch):
    layer = nt.LayerNorm(6, dtype=np.float64)
    x = np.random.default_rng(4).standard_normal((2, 3, 6))
    real = F.norms.layer_norm_backward

    def wrong(dout, cache, *a, **k):
        grads = real(dout, cache, *a, **k)
        return (grads[0], grads[1] + 1e-3, *grads[2:])
    monkeypatch.setattr(F, "layer_norm_backward", wrong)          # nn/norms.py calls F.layer_norm_backward
    res = gradcheck_module(layer, x, fast_mode=True, verbose=False)
    assert [c.name for c in res.failures] == ["weight"], str(res)


# --------------------------------------------------------------------------------------------------
# the float64 warning
# --------------------------------------------------------------------------------------------------

def test_float32_inputs_warn_and_float64_inputs_do_not():
    inputs = _tanh_inputs(5)
    with pytest.warns(GradcheckPrecisionWarning, match=r"'x' \(float32\) not float64; converted"):
        res = gradcheck(tanh_forward, tanh_backward, {"x": inputs["x"].astype(np.float32), "w": inputs["w"]},
                        verbose=False)
    assert res.passed                                    # the check itself ran in float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gradcheck(tanh_forward, tanh_backward, inputs, verbose=False)
        gradcheck(F.embedding_forward, F.embedding_backward, {"ids": np.array([0, 1]), "weight": np.ones((2, 3))},
                  verbose=False)                         # integer ids: nothing to warn about
    with pytest.warns(GradcheckPrecisionWarning, match="gradcheck_module: 'x' \\(float32\\)"):
        gradcheck_module(nt.LayerNorm(4, dtype=np.float64), np.ones((2, 4), np.float32), verbose=False)
    assert issubclass(GradcheckPrecisionWarning, UserWarning) and nt.gradcheck is gradcheck


# --------------------------------------------------------------------------------------------------
# in-place edits
# --------------------------------------------------------------------------------------------------

def test_a_backward_that_edits_its_cache_in_place_is_caught():
    def backward(dout, cache):
        cache.y[...] = 1 - cache.y * cache.y                # reuses the saved output as a buffer
        dz = dout * cache.y
        return dz @ cache.w.T, cache.x.T @ dz
    res = gradcheck(tanh_forward, backward, _tanh_inputs(6), verbose=False)
    assert res.checks and all(c.passed for c in res.checks)       # the first answer is right...
    inplace, repeat = res.hygiene
    assert not inplace.passed and "cache.y (3, 2) was modified in place" in inplace.detail
    assert "cache.x" not in inplace.detail and "'x'" not in inplace.detail
    assert not repeat.passed and "'x' differs" in repeat.detail   # ...the second is not
    assert not res.passed and "FAILED: in-place, second backward" in str(res)
    with pytest.raises(GradcheckError, match="in-place"):
        res.raise_if_failed()


def test_a_backward_that_edits_dout_or_an_input_is_caught_and_the_input_restored():
    def edits_dout(dout, cache):
        dout *= 1 - cache.y * cache.y
        return dout @ cache.w.T, cache.x.T @ dout
    res = gradcheck(tanh_forward, edits_dout, _tanh_inputs(7), check_repeat=False, verbose=False)
    assert all(c.passed for c in res.checks)
    assert not res.passed and res.hygiene[0].detail.startswith("dout (3, 2) was modified in place")

    def edits_x(dout, cache):
        grads = tanh_backward(dout, cache)
        cache.x[0, 0] += 1.0                             # the forward's input, through the cache
        return grads
    res = gradcheck(tanh_forward, edits_x, _tanh_inputs(7), check_repeat=False, verbose=False)
    detail = res.hygiene[0].detail
    assert "x (3, 4) was modified in place (1 of 12 elements, by up to 1.000e+00; first at (0, 0)" in detail
    assert "cache.x" in detail
    assert all(c.passed for c in res.checks)             # the finite differences ran on the restored input


def test_a_module_backward_that_edits_its_cache_is_caught(monkeypatch):
    layer = nt.Linear(3, 2, dtype=np.float64, seed=0)
    real = layer.backward

    def backward(dout):
        (tag, (cache, shape)), = layer._caches
        x = cache.x                                      # the saved input
        out = real(dout)
        x *= 2.0
        return out
    monkeypatch.setattr(layer, "backward", backward)
    res = gradcheck_module(layer, np.random.default_rng(0).standard_normal((4, 3)), verbose=False)
    assert all(c.passed for c in res.checks)
    inplace, repeat = res.hygiene
    assert not inplace.passed and "Linear.cache" in inplace.detail and "modified in place" in inplace.detail
    assert repeat.passed and "refused" in repeat.detail


# --------------------------------------------------------------------------------------------------
# a second backward
# --------------------------------------------------------------------------------------------------

def test_a_second_backward_that_changes_its_answer_is_caught():
    calls = []

    def backward(dout, cache):
        calls.append(1)
        dx, dw = tanh_backward(dout, cache)
        return dx * len(calls), dw                       # state outside the cache
    res = gradcheck(tanh_forward, backward, _tanh_inputs(8), verbose=False)
    repeat = res.hygiene[1]
    assert res.hygiene[0].passed and not repeat.passed and "'x' differs" in repeat.detail and "'w'" not in repeat.detail


def test_a_pure_backward_and_a_consuming_module_pass_both_checks():
    res = gradcheck(tanh_forward, tanh_backward, _tanh_inputs(9), verbose=False)
    assert [h.status for h in res.hygiene] == ["PASS", "PASS"] and "bit for bit" in res.hygiene[1].detail
    layer = nt.TransformerEncoderLayer(4, 2, dim_feedforward=6, dtype=np.float64, seed=0)
    res = gradcheck_module(layer, np.random.default_rng(1).standard_normal((2, 3, 4)), max_elements=3, verbose=False)
    assert res.passed and "refused" in res.hygiene[1].detail and "RuntimeError" in res.hygiene[1].detail
    res = gradcheck(tanh_forward, tanh_backward, _tanh_inputs(9), check_inplace=False, check_repeat=False,
                    verbose=False)
    assert res.hygiene == []


def test_cli_gradcheck_fast_and_the_in_place_row(capsys, monkeypatch):
    from numpy_transformer import cli
    assert cli.main(["gradcheck", "--fast", "--only", "layer_norm", "--only", "Linear"]) == 0
    out = capsys.readouterr().out
    assert "fast mode: v^T J u" in out and "ALL PASS" in out
    real = F.softmax_backward

    def edits_cache(dout, cache):
        grads = real(dout, cache)
        cache.y[...] = 0.0                               # uses the saved output as a scratch buffer
        return grads
    monkeypatch.setattr(F, "softmax_backward", edits_cache)
    assert cli.main(["gradcheck", "--only", "softmax (axis=-1)"]) == 1
    out = capsys.readouterr().out
    assert "(in-place)" in out and "FAIL: in-place: cache.y" in out
