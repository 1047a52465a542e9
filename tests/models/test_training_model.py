"""TransformerModel: state_dict keys, shapes, gradients (finite differences), errors; the synthetic tasks."""

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer.tasks import data as ntdata

V, D, H, L, FF, S, B = 11, 8, 2, 2, 16, 5, 3


def _model(**kw):
    args = dict(d_model=D, nhead=H, num_layers=L, dim_feedforward=FF, dropout=0.0, max_len=S, dtype=np.float64, seed=0)
    args.update(kw)
    return nt.TransformerModel(V, **args)


@pytest.mark.parametrize("pos,norm_first", [("sinusoidal", False), ("learned", True)])
def test_state_dict_keys(pos, norm_first):
    m = _model(pos_encoding=pos, norm_first=norm_first)
    sd = m.state_dict()
    keys = list(sd)
    assert keys[0] == "embed.weight" and keys[-2:] == ["head.weight", "head.bias"]
    assert sd["embed.weight"].shape == (V, D) and sd["head.weight"].shape == (V, D) and sd["head.bias"].shape == (V,)
    assert ("pos_embed.weight" in sd) == (pos == "learned")
    if pos == "learned":
        assert sd["pos_embed.weight"].shape == (S, D)
    assert not any("pe" == k.split(".")[-1] for k in sd)                    # the sinusoidal table is a buffer
    assert ("encoder.norm.weight" in sd) == norm_first
    layer_keys = {k.split(".", 3)[3] for k in keys if k.startswith("encoder.layers.")}
    assert layer_keys == {"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                          "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
                          "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}
    assert {k.split(".")[2] for k in keys if k.startswith("encoder.layers.")} == {str(i) for i in range(L)}


def test_init_and_layers_independent():
    m = nt.TransformerModel(50, d_model=64, nhead=4, num_layers=2, dim_feedforward=32, seed=0)
    scaled = m.embed.weight.data * np.sqrt(64)
    assert 0.85 < scaled.std() < 1.15                                        # unit std after the sqrt(D) scale
    w0, w1 = (m.encoder.layers[i].linear1.weight.data for i in range(2))
    assert not np.array_equal(w0, w1)
    # same seed, same model; different seed, different model
    assert np.array_equal(nt.TransformerModel(50, 64, 4, 2, 32, seed=0).head.weight.data, m.head.weight.data)
    assert not np.array_equal(nt.TransformerModel(50, 64, 4, 2, 32, seed=1).head.weight.data, m.head.weight.data)


@pytest.mark.parametrize("pos,norm_first,causal", [("sinusoidal", False, False), ("learned", True, True)])
def test_backward_matches_finite_differences(pos, norm_first, causal):
    m = _model(pos_encoding=pos, norm_first=norm_first, activation="gelu")
    rng = np.random.default_rng(0)
    ids = rng.integers(0, V, size=(B, S))
    pad = np.zeros((B, S), bool)
    pad[0, -2:] = True
    up = rng.standard_normal((B, S, V))                                      # random upstream gradient

    def loss():
        return float(np.sum(m(ids, src_key_padding_mask=pad, is_causal=causal) * up))

    m.zero_grad()
    m(ids, src_key_padding_mask=pad, is_causal=causal)
    assert m.backward(up) is None
    checked = 0
    for name, p in m.named_parameters():
        flat = p.data.reshape(-1)
        for i in rng.choice(flat.size, size=min(3, flat.size), replace=False):
            old = flat[i]
            flat[i] = old + 1e-6
            lp = loss()
            flat[i] = old - 1e-6
            lm = loss()
            flat[i] = old
            fd = (lp - lm) / 2e-6
            assert abs(fd - p.grad.reshape(-1)[i]) <= 1e-6 * max(1.0, abs(fd)), (name, i, fd, p.grad.reshape(-1)[i])
            checked += 1
    assert checked > 40


def test_forward_shapes_dtypes_and_errors():
    m = _model(dtype=np.float32)
    out = m(np.zeros((B, S), dtype=np.int64))
    assert out.shape == (B, S, V) and out.dtype == np.float32
    with pytest.raises(IndexError, match=r"must lie in \[0, 11\)"):
        m(np.full((B, S), V))
    with pytest.raises(ValueError, match=r"exceeds max_len=5"):
        m(np.zeros((B, S + 1), dtype=int))
    with pytest.raises(ValueError, match=r"ids must have shape \(B, S\)"):
        m(np.zeros(S, dtype=int))
    with pytest.raises(TypeError, match="integer array"):
        m(np.zeros((B, S)))
    with pytest.raises(ValueError, match="src_key_padding_mask must have shape"):
        m(np.zeros((B, S), dtype=int), src_key_padding_mask=np.zeros((B, S + 1), bool))
    with pytest.raises(ValueError, match="activation must be one of"):
        _model(activation="tanh")
    with pytest.raises(ValueError, match="pos_encoding must be one of"):
        _model(pos_encoding="rotary")
    with pytest.raises(ValueError, match="divisible"):
        _model(nhead=3)
    m(np.zeros((B, S), dtype=int))
    m.backward(np.zeros((B, S, V), np.float32))
    with pytest.raises(RuntimeError, match="before forward"):
        m.backward(np.zeros((B, S, V), np.float32))


def test_dropout_masks_names_and_eval():
    m = _model(dropout=0.3)
    m(np.zeros((B, S), dtype=int))
    masks = nt.dropout_masks(m)
    assert set(masks) == {"dropout"} | {f"encoder.layers.{i}.{n}" for i in range(L)
                                        for n in ("dropout", "dropout1", "dropout2", "self_attn")}
    assert masks["encoder.layers.0.self_attn"].shape == (B, H, S, S)
    m.eval()
    a, b = m(np.ones((B, S), dtype=int)), m(np.ones((B, S), dtype=int))
    assert np.array_equal(a, b) and nt.dropout_masks(m) == {}


@pytest.mark.parametrize("task", sorted(ntdata.TASKS))
def test_tasks(task):
    d = ntdata.make_task(task, vocab_size=9, seq_len=6, num_train=300, num_val=50, seed=4)
    assert d.train_src.shape == (300, 6) and d.val_tgt.shape == (50, 6)
    assert d.train_src.min() >= 2 and d.train_src.max() < 9
    train_rows = {r.tobytes() for r in d.train_src}
    assert not any(r.tobytes() in train_rows for r in d.val_src)                # held out exactly
    again = ntdata.make_task(task, vocab_size=9, seq_len=6, num_train=300, num_val=50, seed=4)
    assert np.array_equal(again.train_src, d.train_src) and np.array_equal(again.val_tgt, d.val_tgt)
    src = np.array([[5, 3, 8, 2]])
    expected = {"shift": [[3, 8, 2, 1]], "copy": [[5, 3, 8, 2]], "reverse": [[2, 8, 3, 5]], "sort": [[2, 3, 5, 8]]}
    assert ntdata.make_targets(task, src).tolist() == expected[task]


@pytest.mark.parametrize("seq_len", [209, 300, 4096])
def test_tasks_of_long_sequences(seq_len):
    """30 ** 209 overflows a float: the count of distinct sequences is exact, so long tasks work."""
    d = ntdata.make_task("reverse", vocab_size=32, seq_len=seq_len, num_train=40, num_val=8, seed=0)
    assert d.train_src.shape == (40, seq_len) and d.val_tgt.shape == (8, seq_len)
    assert np.array_equal(d.val_tgt, d.val_src[:, ::-1])
    with pytest.raises(ValueError, match=r"only 1 distinct sequences of length 5000 over 1 content tokens"):
        ntdata.make_task("copy", vocab_size=3, seq_len=5000, num_train=1, num_val=1)


def test_tasks_of_the_usual_lengths_are_unchanged():
    """The README's figures rest on these arrays: their digest is pinned (it predates the long-length fix)."""
    import hashlib
    h = hashlib.sha256()
    for task, seq_len in [("shift", 16), ("sort", 16), ("copy", 5)]:
        d = ntdata.make_task(task, seq_len=seq_len)
        for a in (d.train_src, d.val_src, d.val_tgt):
            h.update(a.tobytes())
    assert h.hexdigest() == "d087ae628ae68c57d3a2b11651e9a45358158ac15f2d44eba5174d312c82b178"


def test_task_errors_and_batcher():
    with pytest.raises(ValueError, match=r"task must be one of \['copy', 'reverse', 'shift', 'sort'\], got 'add'"):
        ntdata.make_task("add")
    with pytest.raises(ValueError, match="vocab_size must be > 2"):
        ntdata.make_task("copy", vocab_size=2)
    with pytest.raises(ValueError, match="distinct sequences"):
        ntdata.make_task("copy", vocab_size=4, seq_len=3, num_train=6, num_val=3)
    d = ntdata.make_task("copy", vocab_size=6, seq_len=4, num_train=10, num_val=5)
    b = ntdata.Batcher(d.train_src, d.train_tgt, 4, seed=0)
    seen = [b.next()[0] for _ in range(2)]                                    # one epoch: 2 batches of 4 (2 dropped)
    assert len({r.tobytes() for s in seen for r in s}) == 8
    state = b.state_dict()
    nxt = b.next()
    b2 = ntdata.Batcher(d.train_src, d.train_tgt, 4, seed=123)
    b2.load_state_dict(state)
    assert np.array_equal(b2.next()[0], nxt[0])
    with pytest.raises(ValueError, match="batch_size 11 exceeds"):
        ntdata.Batcher(d.train_src, d.train_tgt, 11)
