"""Seq2seq tasks, Seq2SeqModel (finite differences, torch twin, greedy decoding), corpus BLEU."""

import numpy as np
import pytest
from _compare import assert_close
from hypothesis import given
from hypothesis import strategies as st

import numpy_transformer as nt
from numpy_transformer.models.seq2seq import Seq2SeqModel
from numpy_transformer.tasks import seq2seq as s2s
from numpy_transformer.tasks.bleu import corpus_bleu


# -- tasks -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("task,vocab,length", [("reverse", 10, 6), ("dedup_sort", 10, 6), ("translate", 32, 6)])
def test_tasks_deterministic_disjoint_and_correct(task, vocab, length):
    d = s2s.make_seq2seq_task(task, vocab, length, num_train=600, num_val=80, seed=3)
    again = s2s.make_seq2seq_task(task, vocab, length, num_train=600, num_val=80, seed=3)
    for name in ("train_src", "train_tgt", "val_src", "val_tgt"):
        assert np.array_equal(getattr(d, name), getattr(again, name)), name
        assert getattr(d, name).dtype == np.int64
    other = s2s.make_seq2seq_task(task, vocab, length, num_train=600, num_val=80, seed=4)
    assert not np.array_equal(d.train_src, other.train_src)
    train = {r.tobytes() for r in d.train_src}
    val = [r.tobytes() for r in d.val_src]
    assert not train & set(val) and len(set(val)) == len(val)          # held out exactly, no repeats
    assert d.train_src.shape == (600, length) and d.train_tgt.shape == (600, d.tgt_len)
    for src, tgt in zip(np.concatenate([d.train_src, d.val_src]), np.concatenate([d.train_tgt, d.val_tgt])):
        n = int((src != s2s.PAD).sum())
        assert n >= 1 and (src[:n] >= s2s.FIRST_TOKEN).all() and (src[n:] == s2s.PAD).all()
        answer = s2s.strip_target(tgt)
        k = len(answer)
        assert tgt[k] == s2s.EOS and (tgt[k + 1:] == s2s.PAD).all()     # answer, EOS, padding
        assert answer == s2s.target_for(task, src, vocab)
        assert max(answer) < d.tgt_vocab_size
    if task == "dedup_sort":
        lengths = [(len(s2s.strip_target(t)), int((s != 0).sum())) for s, t in zip(d.train_src, d.train_tgt)]
        assert any(a < b for a, b in lengths)                          # targets shorter than their sources


def test_translate_reorders_and_changes_length():
    classes, tgt_vocab = s2s.translate_lexicon(32)
    a, n1, n2 = int(classes["adj"][0]), int(classes["noun"][0]), int(classes["noun"][1])
    v, neg = int(classes["verb"][0]), classes["not"]
    plain = s2s.target_for("translate", [n1, v, n2], 32)
    assert len(plain) == 4 and plain[3] >= 32                            # noun' noun' verb' tense'
    full = s2s.target_for("translate", [a, n1, neg, v, a, n2], 32)
    assert full[0] == plain[0] and full[2] == plain[1]                   # SOV, the adjective after its noun
    assert full[-1] == tgt_vocab - 1 and len(full) == 7                   # the negation suffix comes last
    assert s2s.target_for("translate", [v, n1, n2], 32) is None          # not a sentence


def test_decoder_input_is_bos_and_shifted_target():
    tgt = np.array([[5, 6, 1, 0], [7, 1, 0, 0]])
    assert s2s.decoder_input(tgt).tolist() == [[2, 5, 6, 0], [2, 7, 0, 0]]


def test_task_bad_input_names_the_argument():
    with pytest.raises(ValueError, match=r"task must be one of \['reverse', 'dedup_sort', 'translate'\].*'sort'"):
        s2s.make_seq2seq_task("sort")
    with pytest.raises(ValueError, match="vocab_size must be > 3"):
        s2s.make_seq2seq_task("reverse", vocab_size=3)
    with pytest.raises(ValueError, match="seq_len must be >= 6 for translate, got 4|seq_len must be >= 6"):
        s2s.make_seq2seq_task("translate", vocab_size=32, seq_len=4)
    with pytest.raises(ValueError, match="vocab_size must be >= 10 for translate"):
        s2s.make_seq2seq_task("translate", vocab_size=9)
    with pytest.raises(ValueError, match="only 12 distinct sources"):
        s2s.make_seq2seq_task("reverse", vocab_size=6, seq_len=2, num_train=10, num_val=5)
    with pytest.raises(ValueError, match="seed must be a non-negative int"):
        s2s.make_seq2seq_task("reverse", seed=-1)


# -- the model -----------------------------------------------------------------------------------------------
def _model(pos="sinusoidal", norm_first=False, dtype=np.float64, dropout=0.0, seed=1):
    return Seq2SeqModel(9, 11, d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=12,
                        dropout=dropout, max_len=10, pos_encoding=pos, norm_first=norm_first, dtype=dtype, seed=seed)


def _batch(rng):
    src = rng.integers(3, 9, (3, 5))
    tgt = rng.integers(0, 11, (3, 4))
    pad = np.zeros((3, 5), bool)
    pad[0, 3:] = True
    src[pad] = 0
    return src, tgt, pad


@pytest.mark.parametrize("pos", ["sinusoidal", "learned"])
def test_gradients_match_finite_differences(pos):
    rng = np.random.default_rng(0)
    m = _model(pos)
    src, tgt, pad = _batch(rng)
    g = rng.standard_normal((3, 4, 11))

    def f():
        return float((m(src, tgt, src_key_padding_mask=pad) * g).sum())
    m.zero_grad()
    m(src, tgt, src_key_padding_mask=pad)
    assert m.backward(g) is None
    for name, p in m.named_parameters():
        for _ in range(2):
            idx = tuple(int(rng.integers(0, s)) for s in p.data.shape)
            old = p.data[idx]
            p.data[idx] = old + 1e-6
            a = f()
            p.data[idx] = old - 1e-6
            b = f()
            p.data[idx] = old
            fd = (a - b) / 2e-6
            assert abs(fd - p.grad[idx]) <= 1e-6 * max(1.0, abs(fd)), (name, idx, fd, p.grad[idx])


@given(pos=st.sampled_from(["sinusoidal", "learned"]), norm_first=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_matches_torch_twin_float64(pos, norm_first, seed):
    torch = pytest.importorskip("torch")
    from reference_torch.models.seq2seq import twin_of
    rng = np.random.default_rng(seed)
    m = _model(pos, norm_first, seed=seed)
    twin = twin_of(m).train()
    src, tgt, pad = _batch(rng)
    g = rng.standard_normal((3, 4, 11))
    m.zero_grad()
    logits = m(src, tgt, src_key_padding_mask=pad)
    m.backward(g)
    ref = twin(torch.from_numpy(src), torch.from_numpy(tgt), src_key_padding_mask=torch.from_numpy(pad))
    ref.backward(torch.from_numpy(g))
    pairs = {"logits": (logits, ref.detach().numpy())}
    tp = dict(twin.named_parameters())
    for name, p in m.named_parameters():
        pairs[f"{name}.grad"] = (p.grad, tp[name].grad.numpy())
    assert set(tp) == {n for n, _ in m.named_parameters()}
    assert_close(pairs, dtype=np.float64, context=f"pos={pos} norm_first={norm_first}")


def test_matches_torch_twin_float32():
    torch = pytest.importorskip("torch")
    from reference_torch.models.seq2seq import twin_of
    rng = np.random.default_rng(5)
    m = _model(dtype=np.float32)
    twin = twin_of(m)
    src, tgt, pad = _batch(rng)
    g = rng.standard_normal((3, 4, 11)).astype(np.float32)
    m.zero_grad()
    logits = m(src, tgt, src_key_padding_mask=pad)
    assert logits.dtype == np.float32
    m.backward(g)
    ref = twin(torch.from_numpy(src), torch.from_numpy(tgt), src_key_padding_mask=torch.from_numpy(pad))
    ref.backward(torch.from_numpy(g))
    tp = dict(twin.named_parameters())
    pairs = {"logits": (logits, ref.detach().numpy())}
    pairs.update({f"{n}.grad": (p.grad, tp[n].grad.numpy()) for n, p in m.named_parameters()})
    assert all(p.grad.dtype == np.float32 for p in m.parameters())
    assert_close(pairs, dtype=np.float32)


def test_padding_does_not_leak_and_causal_mask_holds():
    rng = np.random.default_rng(2)
    m = _model().eval()
    src, tgt, pad = _batch(rng)
    base = m(src, tgt, src_key_padding_mask=pad)
    src2 = src.copy()
    src2[0, 3:] = 7                                        # change padded source positions only
    assert np.allclose(m(src2, tgt, src_key_padding_mask=pad)[0], base[0], atol=1e-12)
    tgt2 = tgt.copy()
    tgt2[:, 2:] = 3                                        # change the future: earlier positions unchanged
    assert np.allclose(m(src, tgt2, src_key_padding_mask=pad)[:, :2], base[:, :2], atol=1e-12)


def test_greedy_decode_is_the_argmax_of_a_full_forward_at_each_step():
    rng = np.random.default_rng(3)
    m = _model(dropout=0.3).train()
    src, _, pad = _batch(rng)
    out = m.greedy_decode(src, 6, bos_token_id=2, eos_token_id=1, src_key_padding_mask=pad)
    assert m.training and out.shape == (3, 6)
    m.eval()
    for b in range(3):
        row = out[b].tolist()
        prefix = [2]
        for t in row:
            if prefix[-1] == 1:
                assert t == 0                                # PAD after EOS
                continue
            logits = m(src[b:b + 1], np.array([prefix]), src_key_padding_mask=pad[b:b + 1])
            assert t == int(logits[0, -1].argmax())
            prefix.append(t)


@pytest.mark.parametrize("pos", ["sinusoidal", "learned"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_equals_the_full_decoder_at_every_step(pos, norm_first):
    """decode through the KV cache, one new position per call (after a 2-token start), gives the full
    prefix's logits at those positions; greedy_decode gives the same tokens with and without it."""
    rng = np.random.default_rng(5)
    m = _model(pos, norm_first, seed=2).eval()
    for p in m.parameters():
        p.data += 0.3 * rng.standard_normal(p.shape)                   # beyond the initialisation
    src, tgt, pad = _batch(rng)
    tgt = np.concatenate([tgt, rng.integers(0, 11, (3, 4))], axis=1)   # (3, 8)
    memory = m.encode(src, pad)
    full = m.decode(tgt, memory, pad)                                  # (3, 8, V)
    logits, cache = m.decode(tgt[:, :2], memory, pad, use_cache=True)
    steps = [logits]
    for i in range(2, tgt.shape[1]):
        logits, cache = m.decode(tgt[:, i:i + 1], memory, pad, past_key_values=cache)
        steps.append(logits)
    assert_close({"cached logits": (np.concatenate(steps, axis=1), full)}, tol=1e-12)
    with pytest.raises(ValueError, match=r"tgt: 3 positions after the 8 cached ones exceed the model's max_len=10"):
        m.decode(tgt[:, :3], memory, pad, past_key_values=cache)
    kw = dict(bos_token_id=2, eos_token_id=1, src_key_padding_mask=pad)
    np.testing.assert_array_equal(m.greedy_decode(src, 9, **kw), m.greedy_decode(src, 9, use_cache=False, **kw))


def test_model_bad_input_names_the_argument():
    m = _model()
    src, tgt, pad = _batch(np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"tgt must have shape \(B, L\)"):
        m(src, tgt[0])
    with pytest.raises(ValueError, match=r"src and tgt must have the same batch size"):
        m(src, tgt[:2])
    with pytest.raises(ValueError, match=r"tgt length 11 exceeds max_len=10"):
        m(src, np.zeros((3, 11), int))
    with pytest.raises(ValueError, match="src_key_padding_mask"):
        m(src, tgt, src_key_padding_mask=pad[:, :2])
    with pytest.raises(IndexError, match=r"src must lie in \[0, 9\)"):
        m(src + 9, tgt)
    with pytest.raises(ValueError, match="eos_token_id must be an id in \\[0, 11\\), got 11"):
        m.greedy_decode(src, 3, 2, 11)
    with pytest.raises(ValueError,
                       match=r"max_len must be <= the model's max_len=10 \(the longest decoder input\), got 11"):
        m.greedy_decode(src, 11, 2, 1)
    with pytest.raises(ValueError, match="d_model must be divisible by nhead"):
        Seq2SeqModel(5, 5, d_model=6, nhead=4)
    assert m(src, tgt).shape == (3, 4, 11)                   # still usable after refusals


# -- BLEU -----------------------------------------------------------------------------------------------------
def test_bleu_hand_computed():
    assert corpus_bleu(["1 2 3 4"], [["1 2 3 4"]]).score == pytest.approx(100.0)
    assert corpus_bleu(["9 9"], [["1 2"]]).score == 0.0
    # hyp "1 2 3 4 5 6" vs ref "1 2 3 4 5 7": p1 5/6, p2 4/5, p3 3/4, p4 2/3, no brevity penalty
    s = corpus_bleu([[1, 2, 3, 4, 5, 6]], [[[1, 2, 3, 4, 5, 7]]])
    assert s.score == pytest.approx(100 * (5 / 6 * 4 / 5 * 3 / 4 * 2 / 3) ** 0.25, rel=1e-12)
    # a short hypothesis: BP = exp(1 - 8/4); its 4-gram matches 1 of 1
    s = corpus_bleu(["1 2 3 4"], [["1 2 3 4 5 6 7 8"]])
    assert s.bp == pytest.approx(np.exp(1 - 2)) and s.score == pytest.approx(100 * np.exp(-1))
    # no 4-gram match: sacrebleu's exp smoothing gives that order 100 / (2 * total)
    s = corpus_bleu(["1 2 3 5 4"], [["1 2 3 4 5"]])
    assert s.counts == [5, 2, 1, 0] and s.totals == [5, 4, 3, 2]
    assert s.precisions[3] == pytest.approx(100 / (2 * 2))
    with pytest.raises(ValueError, match="references stream 0 has 1 segments, hypotheses has 2"):
        corpus_bleu(["1", "2"], [["1"]])


def test_bleu_equals_sacrebleu():
    sacrebleu = pytest.importorskip("sacrebleu")
    rng = np.random.default_rng(0)
    for _ in range(200):
        n, v = int(rng.integers(1, 7)), int(rng.integers(2, 7))
        hyps = [" ".join(map(str, rng.integers(0, v, int(rng.integers(0, 10))))) for _ in range(n)]
        refs = [[" ".join(map(str, rng.integers(0, v, int(rng.integers(1, 10))))) for _ in range(n)]
                for _ in range(int(rng.integers(1, 4)))]
        ours = corpus_bleu(hyps, refs)
        ref = sacrebleu.corpus_bleu(hyps, refs, tokenize="none")
        assert ours.counts == ref.counts and ours.totals == ref.totals
        assert (ours.sys_len, ours.ref_len) == (ref.sys_len, ref.ref_len)
        assert ours.score == pytest.approx(ref.score, rel=1e-12, abs=1e-12)


def test_public_names():
    assert nt.Seq2SeqModel is Seq2SeqModel and nt.corpus_bleu is corpus_bleu and nt.tasks_seq2seq is s2s
