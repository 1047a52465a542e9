"""nt.check_against_torch / nt.check_against_torch_module and ``numpy-transformer check FILE``: correct user code
passes at the dtype's tolerance, each deliberately broken function is caught with the right tensor named, bad
arguments are refused naming the argument, and without torch the one-line install message."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from _paths import REPO_ROOT
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer import functional as F
from numpy_transformer import oracle
from numpy_transformer.cli import main

torch = pytest.importorskip("torch")
from reference_torch.check.user import TorchCheckError, TorchCheckResult  # noqa: E402

ROOT = str(REPO_ROOT)
EXAMPLE = os.path.join(ROOT, "docs", "examples", "check_layer_norm.py")
MODULE_EXAMPLE = os.path.join(ROOT, "docs", "examples", "check_linear_module.py")


def torch_layer_norm(x, weight, bias):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias)


def _ln_inputs(seed, shape=(2, 3, 6)):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(shape), "weight": rng.standard_normal(shape[-1]),
            "bias": rng.standard_normal(shape[-1])}


def _linear_inputs(seed, d=5):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((3, d)), "weight": rng.standard_normal((d, d)), "bias": rng.standard_normal(d)}


def torch_linear(x, weight, bias):
    return torch.nn.functional.linear(x, weight, bias)


# --------------------------------------------------------------------------------------------------
# correct code passes
# --------------------------------------------------------------------------------------------------

@given(seed=st.integers(0, 2**32 - 1), lead=st.lists(st.integers(1, 4), min_size=1, max_size=2),
       d=st.integers(3, 9), dtype=st.sampled_from([np.float64, np.float32]))
def test_layer_norm_pair_passes_in_both_dtypes(seed, lead, d, dtype):
    """d >= 3: with d = 2 the normalised row is (-1, 1) whatever x is, dx is ~eps-small (1e-4 of the other
    gradients) and its float32 rounding is of its own size on both sides."""
    res = nt.check_against_torch(F.layer_norm_forward, F.layer_norm_backward, torch_layer_norm,
                                 _ln_inputs(seed, (*lead, d)), dtype=dtype, seed=seed)
    assert isinstance(res, TorchCheckResult) and res.ok, str(res)
    assert [c.name for c in res.checks] == ["out", "x", "weight", "bias"]
    worst = max(c.rel_err for c in res.checks)
    assert worst < (1e-12 if dtype == np.float64 else 1e-4), str(res)
    assert res.dtype == np.dtype(dtype) and res.rtol == (1e-10 if dtype == np.float64 else 1e-4)


def test_backward_may_return_a_dict_and_forward_a_bare_array():
    def forward(x, w):
        return np.tanh(x @ w)

    def backward(dout, cache):                  # cache is None: the forward returned a bare array
        assert cache is None
        return {"w": None, "x": None}
    res = nt.check_against_torch(forward, backward, lambda x, w: torch.tanh(x @ w),
                                 {"x": np.ones((2, 3)), "w": np.ones((3, 2))})
    assert res["out"].passed and not res["x"].passed and "ours: no gradient" in res["x"].note

    def fwd(x, w, mask):
        y = np.tanh(x @ w) * mask
        return y, (x, w, y, mask)

    def bwd(dout, cache):
        x, w, y, mask = cache
        dz = dout * mask * (1 - (y * y))
        return {"w": x.T @ dz, "x": dz @ w.T}
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal((2, 3)), "w": rng.standard_normal((3, 2)), "mask": np.array([1, 0])}
    res = nt.check_against_torch(fwd, bwd, lambda x, w, mask: torch.tanh(x @ w) * mask, inputs)
    assert res.ok and [c.name for c in res.checks] == ["out", "x", "w"], str(res)


# --------------------------------------------------------------------------------------------------
# broken code is caught, the right tensor named
# --------------------------------------------------------------------------------------------------

def _failed(res):
    return [c.name for c in res.failures]


def test_wrong_dx_is_caught():
    def backward(dout, cache):                   # forgets the xhat * mean(dxhat * xhat) term
        dx, dw, db = F.layer_norm_backward(dout, cache)
        return dx + 0.05 * np.random.default_rng(0).standard_normal(dx.shape), dw, db
    res = nt.check_against_torch(F.layer_norm_forward, backward, torch_layer_norm, _ln_inputs(1))
    assert _failed(res) == ["x"] and not res.ok
    assert "FAIL: gradient of input 'x'" in str(res) and "worst at" in str(res)
    with pytest.raises(TorchCheckError, match="gradient of input 'x'"):
        res.raise_if_failed()


def test_wrong_dgamma_is_caught():
    def backward(dout, cache):
        dx, dw, db = F.layer_norm_backward(dout, cache)
        return dx, dw * 2, db
    res = nt.check_against_torch(F.layer_norm_forward, backward, torch_layer_norm, _ln_inputs(2))
    assert _failed(res) == ["weight"] and "times 2 " in res["weight"].note


def test_forward_off_by_a_constant_is_caught():
    def forward(x, weight, bias):
        out, cache = F.layer_norm_forward(x, weight, bias)
        return out + 1e-3, cache
    res = nt.check_against_torch(forward, F.layer_norm_backward, torch_layer_norm, _ln_inputs(3))
    assert _failed(res) == ["out"] and "the constant 0.001" in res["out"].note


def test_transposed_weight_gradient_is_caught():
    def backward(dout, cache):
        dx, dw, db = F.linear_backward(dout, cache)
        return dx, dw.T, db
    res = nt.check_against_torch(F.linear_forward, backward, torch_linear, _linear_inputs(4))
    assert _failed(res) == ["weight"] and "transposed" in res["weight"].note
    row = res["weight"]
    assert row.index is not None and row.ours != row.torch and row.rel_err > 1e-3


def test_float32_tolerance_path():
    inputs = _ln_inputs(5, (4, 16, 32))
    res = nt.check_against_torch(F.layer_norm_forward, F.layer_norm_backward, torch_layer_norm, inputs,
                                 dtype=np.float32)
    assert res.ok and max(c.rel_err for c in res.checks) > 1e-9        # float32 rounding shows...
    strict = nt.check_against_torch(F.layer_norm_forward, F.layer_norm_backward, torch_layer_norm, inputs,
                                    dtype=np.float32, rtol=1e-12)
    assert not strict.ok                                                   # ...above a float64 tolerance

    def off(dout, cache):                        # 1e-3 relative error: far above float32 noise
        dx, dw, db = F.layer_norm_backward(dout, cache)
        return dx, dw * np.float32(1.001), db
    assert _failed(nt.check_against_torch(F.layer_norm_forward, off, torch_layer_norm, inputs,
                                          dtype=np.float32)) == ["weight"]

    def upcast(x, weight, bias):                  # float32 in, float64 out: flagged
        out, cache = F.layer_norm_forward(x, weight, bias)
        return out.astype(np.float64), cache
    res = nt.check_against_torch(upcast, F.layer_norm_backward, torch_layer_norm, inputs, dtype=np.float32)
    assert _failed(res) == ["out"] and "dtype float64, expected float32" in res["out"].note


# --------------------------------------------------------------------------------------------------
# modules
# --------------------------------------------------------------------------------------------------

def test_linear_module_against_torch_linear():
    ours = nt.Linear(6, 4, dtype=np.float64, seed=0)
    theirs = torch.nn.Linear(6, 4, dtype=torch.float64)
    x = np.random.default_rng(0).standard_normal((2, 3, 6))
    res = nt.check_against_torch_module(ours, theirs, x)
    assert res.ok and [(c.name, c.kind) for c in res.checks] == [("out", "output"), ("x", "input"),
                                                                 ("weight", "parameter"), ("bias", "parameter")]
    np.testing.assert_array_equal(theirs.weight.detach().numpy(), ours.weight.data)      # ours -> torch
    assert ours.weight.grad is None and ours.training and theirs.training               # left as found
    o32, t32 = nt.Linear(6, 4, seed=0), torch.nn.Linear(6, 4)
    res = nt.check_against_torch_module(o32, t32, x)
    assert res.ok and res.dtype == np.float32 and max(c.rel_err for c in res.checks) < 1e-4


def test_encoder_layer_against_torch():
    ours = nt.TransformerEncoderLayer(8, 2, dim_feedforward=16, dtype=np.float64, seed=0)
    theirs = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, dtype=torch.float64)
    x = np.random.default_rng(1).standard_normal((2, 5, 8))
    res = nt.check_against_torch_module(ours, theirs, x)
    assert res.ok and len(res.checks) == 2 + 12 and max(c.rel_err for c in res.checks) < 1e-12, str(res)


def test_a_broken_module_is_caught_naming_the_parameter():
    class Broken(nt.Linear):
        def backward(self, dout):
            dx = super().backward(dout)
            self.bias.grad = self.bias.grad * 0.5
            return dx
    res = nt.check_against_torch_module(Broken(4, 3, dtype=np.float64, seed=0),
                                        torch.nn.Linear(4, 3, dtype=torch.float64), np.ones((2, 4)))
    assert _failed(res) == ["bias"] and "times 0.5" in res["bias"].note


def test_state_dict_transfer_refusals():
    x = np.ones((2, 4))
    with pytest.raises(ValueError, match=r"torch_module has \['bias'\] that our_module lacks"):
        nt.check_against_torch_module(nt.Linear(4, 3, bias=False, dtype=np.float64), torch.nn.Linear(4, 3).double(), x)
    with pytest.raises(ValueError, match=r"our_module has \['bias'\] that torch_module lacks"):
        nt.check_against_torch_module(nt.Linear(4, 3, dtype=np.float64), torch.nn.Linear(4, 3, bias=False).double(), x)
    with pytest.raises(ValueError, match=r"state_dict\['weight'\] has shape \(3, 4\) in our_module but \(4, 3\) "
                                         r"in torch_module \(transposed\?\)"):
        nt.check_against_torch_module(nt.Linear(4, 3, dtype=np.float64), torch.nn.Linear(3, 4).double(), x)
    with pytest.raises(TypeError, match=r"torch_module's 'weight' is torch.float32 but our_module is float64: "
                                        r"convert it with torch_module.double\(\)"):
        nt.check_against_torch_module(nt.Linear(4, 3, dtype=np.float64), torch.nn.Linear(4, 3), x)
    with pytest.raises(TypeError, match="torch_module must be a torch.nn.Module, got Linear"):
        nt.check_against_torch_module(nt.Linear(4, 3), nt.Linear(4, 3), x)


# --------------------------------------------------------------------------------------------------
# arguments, the result object, without torch
# --------------------------------------------------------------------------------------------------

def test_bad_arguments_are_refused_naming_the_argument():
    fwd, bwd, inputs = F.layer_norm_forward, F.layer_norm_backward, _ln_inputs(0)
    with pytest.raises(TypeError, match="inputs must be a dict name -> value"):
        nt.check_against_torch(fwd, bwd, torch_layer_norm, list(inputs.values()))
    with pytest.raises(TypeError, match="dtype must be np.float32 or np.float64, got float16"):
        nt.check_against_torch(fwd, bwd, torch_layer_norm, inputs, dtype=np.float16)
    with pytest.raises(TypeError, match="torch_fn must be callable, got str"):
        nt.check_against_torch(fwd, bwd, "layer_norm", inputs)
    with pytest.raises(ValueError, match="rtol must be a finite number >= 0, got -1"):
        nt.check_against_torch(fwd, bwd, torch_layer_norm, inputs, rtol=-1)
    with pytest.raises(TypeError, match="seed must be a non-negative int"):
        nt.check_against_torch(fwd, bwd, torch_layer_norm, inputs, seed="zero")
    with pytest.raises(ValueError, match=r"backward returned 2 gradients; expected one per floating-point input "
                                         r"\(3: \['x', 'weight', 'bias'\]"):
        nt.check_against_torch(fwd, lambda d, c: bwd(d, c)[:2], torch_layer_norm, inputs)
    with pytest.raises(ValueError, match=r"backward returned gradients for \['gamma'\], which are not"):
        nt.check_against_torch(fwd, lambda d, c: {"gamma": 1}, torch_layer_norm, inputs)
    with pytest.raises(ValueError, match="inputs has no floating-point array"):
        nt.check_against_torch(fwd, bwd, torch_layer_norm, {"ids": np.arange(3)})
    with pytest.raises(TypeError, match="torch_fn must return a torch.Tensor"):
        nt.check_against_torch(fwd, bwd, lambda **kw: 1.0, inputs)
    with pytest.raises(TypeError, match="torch_fn returned torch.float32 for float64 inputs"):
        nt.check_against_torch(fwd, bwd, lambda **kw: torch_layer_norm(**kw).float(), inputs)


def test_result_object_in_a_notebook_and_a_script():
    res = nt.check_against_torch(F.layer_norm_forward, F.layer_norm_backward, torch_layer_norm, _ln_inputs(0))
    assert res.ok and res.passed and res.raise_if_failed() is res and "x" in res and res["x"].kind == "input"
    assert repr(res).startswith("<TorchCheckResult check_against_torch layer_norm_forward: ok, 4 tensors in float64")
    printed = []

    class Printer:
        def text(self, s):
            printed.append(s)
    res._repr_pretty_(Printer(), False)
    assert printed == [str(res)] and str(res).endswith("PASSED")
    assert all(len(line) <= 100 for line in str(res).splitlines())
    with pytest.raises(KeyError, match="no tensor named 'y'"):
        res["y"]


def test_without_torch_the_install_message(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    for name in [m for m in sys.modules if m == "reference_torch" or m.startswith("reference_torch.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(oracle.OracleUnavailable, match=r"^nt.check_against_torch needs PyTorch, the optional "
                                                       r"oracle: pip install torch==2.13.0"):
        nt.check_against_torch(F.layer_norm_forward, F.layer_norm_backward, None, {})
    with pytest.raises(oracle.OracleUnavailable, match=r"^nt.check_against_torch_module needs PyTorch"):
        nt.check_against_torch_module(nt.Linear(2, 2), None)
    assert main(["check", EXAMPLE]) == 2
    assert capsys.readouterr().err.startswith("error: numpy-transformer check needs PyTorch")


def test_importing_the_library_does_not_import_torch():
    code = ("import sys, numpy_transformer as nt; nt.check_against_torch; nt.check_against_torch_module; "
            "import numpy_transformer.cli.check; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                   timeout=120)


# --------------------------------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------------------------------

def test_cli_check_file_passes_and_fails(tmp_path, capsys):
    assert main(["check", EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert "gamma" in out and out.rstrip().endswith("PASSED")
    assert main(["check", EXAMPLE, "--dtype", "float32", "--seed", "3"]) == 0
    assert "in float32" in capsys.readouterr().out
    assert main(["check", MODULE_EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert "check_against_torch_module Linear vs Linear" in out and out.rstrip().endswith("PASSED")
    broken = tmp_path / "broken.py"
    broken.write_text(open(EXAMPLE).read().replace("dout.sum(axis=lead)", "2 * dout.sum(axis=lead)"))
    assert main(["check", str(broken)]) == 1
    out = capsys.readouterr().out
    assert "FAILED: gradient of input 'beta'" in out


def test_cli_check_refuses_bad_files(tmp_path, capsys):
    partial = tmp_path / "partial.py"
    partial.write_text("def forward(x):\n    return x\n\ndef inputs():\n    return {}\n")
    assert main(["check", str(partial)]) == 2
    err = capsys.readouterr().err
    assert "defines no backward, torch_fn: a check file defines forward, backward, torch_fn, inputs" in err
    assert main(["check", str(tmp_path / "nope.py")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["check", MODULE_EXAMPLE, "--dtype", "float32"]) == 2
    assert "--dtype applies to the functions form" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["check", EXAMPLE, "--rtol", "-1"])
