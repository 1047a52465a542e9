"""nt.Embedding's torch options: ``max_norm``/``norm_type`` (the in-place renorm), ``scale_grad_by_freq``,
``from_pretrained`` (``freeze``, a shared table), and the refusals (``sparse=True``, bad values).
The registry also draws these options, so tests/functional/test_functional_vs_torch.py::test_op_vs_torch and
tests/nn/test_modules_vs_torch.py compare outputs, the renormed weight and gradients with torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
import numpy_transformer.functional as F
from numpy_transformer.study.gradchecking import numerical_gradient

torch.set_num_threads(1)

NORMS = [2.0, 1.0, 3.0, np.inf]


def _ids(rng, v, shape=(3, 5)):
    ids = rng.integers(0, v, size=shape)
    ids.flat[-1] = ids.flat[0]
    return ids


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@given(v=st.integers(1, 7), d=st.integers(1, 5), max_norm=st.floats(0.3, 3.0), norm_type=st.sampled_from(NORMS),
       padding=st.booleans(), freq=st.booleans(), seed=st.integers(0, 2**31))
def test_module_options_vs_torch(dtype, v, d, max_norm, norm_type, padding, freq, seed):
    """Output, the weight after the in-place renorm, and the gradient, twice in a row (the second
    forward sees the already renormed table), against torch.nn.Embedding."""
    rng = np.random.default_rng(seed)
    pad = int(rng.integers(v)) if padding else None
    ours = nt.Embedding(v, d, padding_idx=pad, max_norm=max_norm, norm_type=norm_type, scale_grad_by_freq=freq,
                        dtype=dtype, seed=seed)
    ours.weight.data *= dtype(2.0)                                 # most rows above the bound
    ref = torch.nn.Embedding(v, d, padding_idx=pad, max_norm=max_norm, norm_type=norm_type,
                             scale_grad_by_freq=freq, dtype=torch.float64 if dtype == np.float64 else torch.float32)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(ours.weight.data))
    for _ in range(2):
        ids = _ids(rng, v)
        y, yt = ours(ids), ref(torch.from_numpy(ids))
        g = rng.standard_normal(y.shape).astype(dtype)
        ours.backward(g)
        yt.backward(torch.from_numpy(g))
        assert y.dtype == ours.weight.grad.dtype == dtype
        assert_close({"out": (y, yt), "weight after": (ours.weight.data, ref.weight.detach()),
                      "grad.weight": (ours.weight.grad, ref.weight.grad)}, dtype=dtype)


def test_renorm_touches_only_looked_up_rows_above_the_bound():
    w = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0], [30.0, 40.0]])       # norms 5, 0.5, 10, 50
    ids = np.array([[0, 1, 0], [2, 2, 1]])                                 # row 3 is not looked up
    out, _ = F.embedding_forward(ids, w, max_norm=1.0)
    np.testing.assert_allclose(w[0], [3, 4] / np.float64(5 + 1e-7), rtol=1e-15)
    np.testing.assert_allclose(w[2], [6, 8] / np.float64(10 + 1e-7), rtol=1e-15)
    np.testing.assert_array_equal(w[1], [0.3, 0.4])                        # within the bound
    np.testing.assert_array_equal(w[3], [30.0, 40.0])                      # never looked up
    np.testing.assert_array_equal(out, w[ids])                             # the lookup sees the renormed rows


def test_renorm_also_in_eval_mode_and_on_the_padding_row():
    """As torch: the renorm is part of every forward, eval included, and the padding row is renormed
    when looked up (it only gets no gradient)."""
    w = np.full((3, 4), 2.0)
    emb = nt.Embedding.from_pretrained(w.copy(), padding_idx=0, max_norm=1.0).eval()
    ref = torch.nn.Embedding.from_pretrained(torch.from_numpy(w.copy()), padding_idx=0, max_norm=1.0).eval()
    ids = np.array([[0, 1]])
    assert_close({"out": (emb(ids), ref(torch.from_numpy(ids))), "weight": (emb.weight.data, ref.weight)})
    assert np.linalg.norm(emb.weight.data[0]) < 1.0 and np.array_equal(emb.weight.data[2], w[2])


def test_the_gradient_is_taken_at_the_renormed_table_not_through_the_renorm():
    """The documented lesson: the gradient is the plain scatter-add (torch's), which is the finite
    difference of the lookup of the *renormed* table, and not the finite difference of
    W -> renorm(W)[ids] (the renorm's Jacobian is left out on purpose, by torch and by us)."""
    rng = np.random.default_rng(0)
    w0 = 3 * rng.standard_normal((4, 3))
    ids = np.array([[0, 1, 2, 0]])
    g = rng.standard_normal((1, 4, 3))
    w = w0.copy()
    out, cache = F.embedding_forward(ids, w, max_norm=1.0)
    dw = F.embedding_backward(g, cache)
    wt = torch.from_numpy(w0.copy()).requires_grad_(True)
    torch.nn.functional.embedding(torch.from_numpy(ids), wt, max_norm=1.0).backward(torch.from_numpy(g))
    assert_close({"dweight": (dw, wt.grad), "weight after": (w, wt.detach())})
    renormed = w.copy()
    at_renormed = numerical_gradient(lambda: F.embedding_forward(ids, renormed)[0], renormed, g, 1e-6)
    assert_close({"fd at the renormed table": (dw, at_renormed)}, tol=1e-8)
    w1 = w0.copy()
    through = numerical_gradient(lambda: F.embedding_forward(ids, w1.copy(), max_norm=1.0)[0], w1, g, 1e-6)
    assert np.abs(through - dw).max() > 0.1, "the renorm's own derivative differs from the gradient torch uses"


def test_scale_grad_by_freq_divides_by_the_id_counts():
    ids = np.array([[1, 1, 1, 2], [0, 2, 1, 3]])             # counts: 0 -> 1, 1 -> 4, 2 -> 2, 3 -> 1
    g = np.random.default_rng(1).standard_normal((2, 4, 3))
    w = np.random.default_rng(2).standard_normal((5, 3))
    _, cache = F.embedding_forward(ids, w, scale_grad_by_freq=True)
    _, plain = F.embedding_forward(ids, w)
    dw, dplain = F.embedding_backward(g, cache), F.embedding_backward(g, plain)
    np.testing.assert_allclose(dw, dplain / np.array([1, 4, 2, 1, 1])[:, None], rtol=1e-15)
    assert not dw[4].any()                                    # never looked up: zero, not NaN


@pytest.mark.parametrize("freeze", [True, False])
@pytest.mark.parametrize("padding_idx", [None, 1, -1])
def test_from_pretrained_vs_torch(freeze, padding_idx):
    rng = np.random.default_rng(3)
    table = rng.standard_normal((5, 3))
    ours = nt.Embedding.from_pretrained(table, freeze=freeze, padding_idx=padding_idx)
    ref = torch.nn.Embedding.from_pretrained(torch.from_numpy(table.copy()), freeze=freeze, padding_idx=padding_idx)
    assert np.shares_memory(ours.weight.data, table)           # the array itself, as torch keeps the tensor
    assert ours.weight.requires_grad == ref.weight.requires_grad == (not freeze)
    assert ours.dtype == np.float64 and ours.padding_idx == ref.padding_idx
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["weight"]
    assert repr(ours) == repr(ref)
    np.testing.assert_array_equal(ours.weight.data, ref.weight.detach().numpy())   # padding row kept as given
    ids = _ids(rng, 5)
    y = ours(ids)
    yt = ref(torch.from_numpy(ids))
    g = rng.standard_normal(y.shape)
    assert ours.backward(g) is None
    assert_close({"out": (y, yt)})
    if freeze:
        assert ours.weight.grad is None and not yt.requires_grad
    else:
        yt.backward(torch.from_numpy(g))
        assert_close({"grad.weight": (ours.weight.grad, ref.weight.grad)})


@pytest.mark.parametrize("opt", ["sgd", "adam", "adamw"])
def test_a_frozen_table_is_left_alone_by_the_optimizers(opt):
    table = np.random.default_rng(4).standard_normal((6, 4)).astype(np.float32)
    emb = nt.Embedding.from_pretrained(table.copy())
    head = nt.Linear(4, 2, seed=0)
    optimizer = nt.optim.make_optimizer(opt, emb.parameters() + head.parameters(), lr=0.1, weight_decay=0.1)
    before = head.weight.data.copy()
    for _ in range(3):
        ids = np.array([[0, 1, 5]])
        out = head(emb(ids))
        emb.backward(head.backward(np.ones_like(out)))
        optimizer.step()
        optimizer.zero_grad()
    np.testing.assert_array_equal(emb.weight.data, table)
    assert not np.array_equal(head.weight.data, before)
    emb.weight.requires_grad = True                            # unfreezing, as torch's requires_grad_()
    emb.backward(head.backward(np.ones_like(head(emb(np.array([[0]]))))))
    assert emb.weight.grad is not None and emb.weight.grad[0].any()


def test_from_pretrained_float32_and_max_norm_write_into_the_given_table():
    table = np.full((2, 2), 3.0, dtype=np.float32)
    emb = nt.Embedding.from_pretrained(table, max_norm=1.0, norm_type=1.0)
    assert emb.dtype == np.float32
    emb(np.array([1]))
    np.testing.assert_allclose(table[1], [0.5, 0.5], rtol=1e-6)   # as torch: the shared table is renormed
    np.testing.assert_array_equal(table[0], [3.0, 3.0])


def test_repr_matches_torch():
    kw = dict(padding_idx=2, max_norm=1.5, norm_type=1.0, scale_grad_by_freq=True)
    assert repr(nt.Embedding(5, 3, **kw)) == repr(torch.nn.Embedding(5, 3, **kw))
    assert repr(nt.Embedding(5, 3)) == repr(torch.nn.Embedding(5, 3))


@pytest.mark.parametrize("build,exc,words", [
    (lambda: nt.Embedding(4, 2, sparse=True), ValueError, ["sparse=True is not supported", "sparse=False"]),
    (lambda: nt.Embedding(4, 2, max_norm=0), ValueError, ["max_norm must be", "> 0", "got 0"]),
    (lambda: nt.Embedding(4, 2, max_norm="big"), ValueError, ["max_norm", "'big'"]),
    (lambda: nt.Embedding(4, 2, max_norm=1.0, norm_type=-1), ValueError, ["norm_type must be", "> 0", "-1"]),
    (lambda: nt.Embedding(4, 2, scale_grad_by_freq="yes"), TypeError, ["scale_grad_by_freq must be True or False"]),
    (lambda: nt.Embedding.from_pretrained(np.zeros(4)), ValueError, ["embeddings must be a 2-D array", "(4,)"]),
    (lambda: nt.Embedding.from_pretrained(np.zeros((4, 2), dtype=np.int64)), TypeError, ["embeddings", "int64"]),
    (lambda: nt.Embedding.from_pretrained(np.zeros((4, 2)), padding_idx=4), ValueError, ["padding_idx", "[-4, 4)"]),
    (lambda: nt.Embedding.from_pretrained(np.zeros((4, 2)), sparse=True), ValueError, ["sparse=True"]),
    (lambda: nt.Embedding(4, 2, _weight=np.zeros((3, 2))), ValueError, ["_weight must have shape", "(4, 2)", "(3, 2)"]),
])
def test_refusals(build, exc, words):
    with pytest.raises(exc) as info:
        build()
    for w in words:
        assert w in str(info.value), f"{w!r} not in {info.value}"


def test_from_pretrained_refuses_a_read_only_table():
    table = np.zeros((3, 2))
    table.flags.writeable = False
    with pytest.raises(ValueError, match=r"read-only.*embeddings.copy\(\)"):
        nt.Embedding.from_pretrained(table)


def test_a_refused_forward_does_not_renorm():
    table = np.full((3, 2), 5.0)
    emb = nt.Embedding.from_pretrained(table.copy(), max_norm=1.0)
    with pytest.raises(IndexError):
        emb(np.array([0, 3]))                                   # id 3 out of range: refused before the renorm
    np.testing.assert_array_equal(emb.weight.data, table)
