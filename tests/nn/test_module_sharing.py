"""One module instance used several times in one forward pass, as torch allows: each use keeps its own
cache (a stack on the module), the backwards consume them most recent first, and a shared parameter's
gradient is the sum over its uses. Compared with torch under the same sharing, float64 and float32,
every gradient, a random upstream gradient. Also: the errors when the backwards do not match the
forwards, and that caches never pile up (evaluation forwards, refused calls, finite differences)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer.study.gradchecking import gradcheck_module
from reference_torch import convert

torch.set_num_threads(1)


class SharedBlock(nt.nn.Module):
    """``out(gelu(lin(gelu(lin(x)))))``: one Linear and one GELU, each used twice."""

    def __init__(self, d, approximate="none", dtype=np.float64, seed=0):
        super().__init__()
        self.lin = nt.Linear(d, d, dtype=dtype, seed=seed)
        self.act = nt.GELU(approximate)
        self.out = nt.Linear(d, 2, dtype=dtype, seed=seed + 1)

    def forward(self, x):
        h = self.act(self.lin(x))                # first use of lin and act
        h = self.act(self.lin(h))                # second use: a second cache on each
        return self.out(h)

    def backward(self, dout):
        dh = self.out.backward(dout)
        dh = self.lin.backward(self.act.backward(dh))     # the second use's caches, popped first
        return self.lin.backward(self.act.backward(dh))   # then the first use's


class TorchSharedBlock(torch.nn.Module):
    def __init__(self, d, approximate="none"):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)
        self.act = torch.nn.GELU(approximate)
        self.out = torch.nn.Linear(d, 2)

    def forward(self, x):
        return self.out(self.act(self.lin(self.act(self.lin(x)))))


def _compare(d, lead, approximate, dtype, seed):
    ours = SharedBlock(d, approximate, dtype, seed)
    ref = TorchSharedBlock(d, approximate).to(convert.torch_dtype(dtype))
    assert list(ours.state_dict()) == list(ref.state_dict())
    convert.to_torch(ours, ref)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(lead + (d,)).astype(dtype)
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    y, yt = ours(x), ref(xt)
    assert len(ours.act._caches) == 2 and len(ours.lin._caches) == 2
    g = rng.standard_normal(y.shape).astype(dtype)
    dx = ours.backward(g)
    yt.backward(torch.from_numpy(g))
    assert all(not m._caches for m in ours.modules()), "every cache consumed"
    pairs = {"out": (y, yt), "dx": (dx, xt.grad)}
    ga = convert.grads_to_numpy(ref)
    pairs.update({f"grad.{n}": (p.grad, ga[n]) for n, p in ours.named_parameters()})
    assert len(pairs) == 6
    for name, (a, _) in pairs.items():
        assert a.dtype == dtype, name
    return assert_close(pairs, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@given(d=st.integers(1, 6), lead=st.lists(st.integers(1, 3), max_size=2).map(tuple),
       approximate=st.sampled_from(["none", "tanh"]), seed=st.integers(0, 2**31))
def test_shared_gelu_and_linear_vs_torch(dtype, d, lead, approximate, seed):
    _compare(d, lead, approximate, dtype, seed)


class UnsharedBlock(SharedBlock):
    """The same maths with two copies of the Linear and of the GELU."""

    def __init__(self, d):
        super().__init__(d)
        self.lin2, self.act2 = nt.Linear(d, d, dtype=np.float64, seed=0), nt.GELU()

    def forward(self, x):
        return self.out(self.act2(self.lin2(self.act(self.lin(x)))))

    def backward(self, dout):
        dh = self.lin2.backward(self.act2.backward(self.out.backward(dout)))
        return self.lin.backward(self.act.backward(dh))


def test_shared_linear_grad_is_the_sum_of_both_uses():
    """The shared weight's gradient equals what two separate copies get, added."""
    shared, unshared = SharedBlock(4), UnsharedBlock(4)
    x = np.random.default_rng(0).standard_normal((3, 4))
    g = np.random.default_rng(1).standard_normal((3, 2))
    np.testing.assert_array_equal(shared(x), unshared(x))
    np.testing.assert_allclose(shared.backward(g), unshared.backward(g), rtol=1e-13)
    for name in ("weight", "bias"):
        np.testing.assert_allclose(getattr(shared.lin, name).grad,
                                   getattr(unshared.lin, name).grad + getattr(unshared.lin2, name).grad, rtol=1e-13)


def test_gradcheck_of_a_shared_block():
    res = gradcheck_module(SharedBlock(3), np.random.default_rng(0).standard_normal((2, 3)), verbose=False)
    assert res.passed and len(res.checks) == 5


def test_one_backward_too_many_says_so_and_a_new_forward_recovers():
    m = SharedBlock(3)
    x = np.ones((2, 3))
    y = m(x)
    m.backward(np.ones_like(y))
    with pytest.raises(RuntimeError, match=r"GELU.backward\(\) called before forward\(\), or more times than forward"):
        m.act.backward(np.ones((2, 3)))
    y = m(x)
    m.backward(np.ones_like(y))                  # usable


def test_backward_out_of_order_is_refused_with_a_hint_and_keeps_both_caches():
    act = nt.GELU()

    class TwoShapes(nt.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = act

        def forward(self, a, b):
            return self.act(a), self.act(b)

    m = TwoShapes()
    a, b = np.ones((2, 3)), np.ones((4,))
    m(a, b)
    with pytest.raises(ValueError, match="dout") as info:
        act.backward(np.ones((2, 3)))            # the first use's gradient first: wrong order
    if sys.version_info >= (3, 11):              # exception notes
        assert "2 forwards waiting" in "".join(info.value.__notes__)
    assert len(act._caches) == 2                 # the refused call cost nothing
    db = act.backward(np.ones(4))                # the right order works
    da = act.backward(np.ones((2, 3)))
    assert db.shape == (4,) and da.shape == (2, 3)


def test_evaluation_forwards_never_pile_up_caches():
    """A forward never followed by a backward (an evaluation loop) leaves one pass's caches at most."""
    m = SharedBlock(3).eval()
    x = np.ones((2, 3))
    for _ in range(50):
        m(x)
    assert len(m.act._caches) == 2 and len(m.lin._caches) == 2 and len(m.out._caches) == 1
    m.train()
    y = m(x)                                     # a training pass after them: only its own caches
    m.backward(np.ones_like(y))
    assert all(not mod._caches for mod in m.modules())


def test_calling_a_top_level_module_again_drops_its_previous_calls_caches():
    """Two top-level calls of the same module are two passes of it: the second drops the first's cache
    (documented; an evaluation loop keeps one)."""
    act = nt.GELU()
    act(np.ones(3))
    act(np.ones(4))
    assert len(act._caches) == 1
    assert act.backward(np.ones(4)).shape == (4,)
    with pytest.raises(RuntimeError, match="calling a top-level module again drops the caches"):
        act.backward(np.ones(3))


def test_a_forward_that_raises_leaves_no_cache_of_its_own():
    m = SharedBlock(3)
    with pytest.raises(ValueError):
        m(np.ones((2, 5)))                       # wrong width: lin refuses it
    assert all(not mod._caches for mod in m.modules())
    with pytest.raises(RuntimeError, match="before forward"):
        m.backward(np.ones((2, 2)))
    y = m(np.ones((2, 3)))
    m.backward(np.ones_like(y))


def test_direct_forward_calls_count_as_forwards():
    """``module.forward(x)`` (bypassing ``__call__``) shares as well."""
    m = SharedBlock(2)
    y = m.forward(np.ones((1, 2)))
    assert len(m.act._caches) == 2
    m.backward(np.ones_like(y))


class Block(nt.nn.Module):
    """``act(lin(x))`` with an activation given from outside (shared between blocks)."""

    def __init__(self, d, act, seed):
        super().__init__()
        self.lin = nt.Linear(d, d, dtype=np.float64, seed=seed)
        self.act = act

    def forward(self, x):
        return self.act(self.lin(x))

    def backward(self, dout):
        return self.lin.backward(self.act.backward(dout))


class TorchBlock(torch.nn.Module):
    def __init__(self, d, act):
        super().__init__()
        self.lin, self.act = torch.nn.Linear(d, d, dtype=torch.float64), act

    def forward(self, x):
        return self.act(self.lin(x))


@pytest.mark.parametrize("chained,order", [(False, "first-second"), (False, "second-first"),
                                           (True, "second-first")])   # chained: b1's dout comes from b2
def test_two_layers_sharing_a_gelu_called_at_top_level_vs_torch(chained, order):
    """The issue's case: two layers built with one GELU instance and called one after the other from
    a script. Each backward takes the cache of its own layer's pass, in either order."""
    act, tact = nt.GELU(), torch.nn.GELU()
    b1, b2 = Block(3, act, 0), Block(3, act, 1)
    t1, t2 = TorchBlock(3, tact), TorchBlock(3, tact)
    convert.to_torch(b1, t1)
    convert.to_torch(b2, t2)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((4, 2, 3))
    xt, yt = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (x, y))
    o1, o1t = b1(x), t1(xt)
    src, src_t = (o1, o1t) if chained else (y, yt)
    o2, o2t = b2(src), t2(src_t)
    g1, g2 = rng.standard_normal(o1.shape), rng.standard_normal(o2.shape)
    if chained:
        d2 = b2.backward(g2)
        b1.backward(d2)
        o2t.backward(torch.from_numpy(g2))
        pairs = {"dx": (b1.lin.weight.grad, t1.lin.weight.grad)}
    else:
        grads = {}
        for which in (("b1", "b2") if order == "first-second" else ("b2", "b1")):
            grads[which] = b1.backward(g1) if which == "b1" else b2.backward(g2)
        (o1t * torch.from_numpy(g1)).sum().add((o2t * torch.from_numpy(g2)).sum()).backward()
        pairs = {"dx": (grads["b1"], xt.grad), "dy": (grads["b2"], yt.grad)}
    pairs.update({"out1": (o1, o1t), "out2": (o2, o2t), "b1.weight": (b1.lin.weight.grad, t1.lin.weight.grad),
                  "b2.weight": (b2.lin.weight.grad, t2.lin.weight.grad),
                  "b2.bias": (b2.lin.bias.grad, t2.lin.bias.grad)})
    assert not act._caches
    assert_close(pairs)


def test_shared_module_under_several_top_level_modules_keeps_one_pass_each():
    act = nt.GELU()
    b1, b2 = Block(3, act, 0).eval(), Block(3, act, 1).eval()
    for _ in range(30):
        b1(np.ones((1, 3)))
        b2(np.ones((1, 3)))
    assert len(act._caches) == 2 and len(b1.lin._caches) == 1
    for _ in range(30):                           # a fresh top-level module each time: the dead ones' caches go
        Block(3, act, 2)(np.ones((1, 3)))
    assert len(act._caches) == 3


def test_two_encoder_layers_built_with_one_gelu_vs_torch():
    """The issue's report, literally: ``activation=act`` with the same ``nt.GELU`` for two layers."""
    from reference_torch import table
    act = nt.GELU()
    layers = [nt.TransformerEncoderLayer(6, 2, dim_feedforward=8, dropout=0.0, activation=act, dtype=np.float64,
                                         seed=s) for s in (0, 1)]
    assert layers[0].activation is layers[1].activation is act
    refs = [table.torch_module(m) for m in layers]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 6))
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    y = layers[1](layers[0](x))
    yt = refs[1](refs[0](xt))
    g = rng.standard_normal(y.shape)
    dx = layers[0].backward(layers[1].backward(g))
    yt.backward(torch.from_numpy(g))
    pairs = {"out": (y, yt), "dx": (dx, xt.grad)}
    for i, (m, r) in enumerate(zip(layers, refs)):
        ga = convert.grads_to_numpy(r)
        pairs.update({f"{i}.{n}": (p.grad, ga[n]) for n, p in m.named_parameters()})
    assert len(pairs) == 2 + 2 * len(ga)
    assert_close(pairs)
