"""Seeded sequence-to-sequence tasks for the encoder-decoder (:class:`Seq2SeqModel`): the target has
its own length, generated token by token until ``EOS``.

Token ids: ``0`` is padding (``PAD``), ``1`` end-of-sequence (``EOS``), ``2`` begin-of-sequence
(``BOS``, the decoder's first input); content tokens are ``[3, vocab_size)``. A source row is a
sequence of 1..``seq_len`` content tokens padded with ``PAD`` to ``seq_len``; a target row is the
answer followed by ``EOS``, padded with ``PAD`` to the task's target width. Tasks:

* ``reverse``    -- the source backwards (source lengths drawn uniformly in [1, seq_len]);
* ``dedup_sort`` -- the distinct source tokens in increasing order (shorter than the source whenever a
  token repeats: the model must decide where to stop);
* ``translate``  -- a toy translation between two vocabularies. The source language is SVO with the
  adjective before its noun and an optional negation before the verb (``[adj] noun [not] verb [adj]
  noun``, 3..6 words); the target language is SOV with the adjective after its noun, and its verb
  takes a suffix token: ``noun' [adj'] noun' [adj'] verb' tense' [neg']``. Each source word has one
  target word (a fixed, seed-independent lexicon derived from ``vocab_size``), so the model has to learn
  the lexicon, the reordering and the length change. ``seq_len`` must be >= 6 (it pads the source).

:func:`make_seq2seq_task` draws a training and a held-out validation set from one seed; no validation
source occurs in the training set (held out exactly, checked row by row). :func:`decoder_input` builds
the teacher-forcing input (``BOS`` + the target shifted right).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..utils.checks import check_positive_int
from .data import Splits

__all__ = ["SEQ2SEQ_TASKS", "PAD", "EOS", "BOS", "FIRST_TOKEN", "Seq2SeqData", "make_seq2seq_task",
           "decoder_input", "strip_target", "translate_lexicon", "check_seq2seq_task", "target_for"]

PAD, EOS, BOS, FIRST_TOKEN = 0, 1, 2, 3
SEQ2SEQ_TASKS = ("reverse", "dedup_sort", "translate")
TRANSLATE_WORDS = 6          # the longest source sentence of ``translate``


def check_seq2seq_task(task):
    if task not in SEQ2SEQ_TASKS:
        raise ValueError(f"task must be one of {list(SEQ2SEQ_TASKS)} for the seq2seq model, got {task!r}")
    return task


@dataclass
class Seq2SeqData(Splits):
    """A seq2seq task's sets: ``*_src`` int64 (N, seq_len) and ``*_tgt`` int64 (N, tgt_len), both
    PAD-padded; each target row ends with EOS. ``tgt_vocab_size`` differs from ``vocab_size`` for
    ``translate``."""

    task: str
    vocab_size: int
    tgt_vocab_size: int
    seq_len: int
    tgt_len: int
    train_src: np.ndarray
    train_tgt: np.ndarray
    val_src: np.ndarray
    val_tgt: np.ndarray



def decoder_input(tgt):
    """Teacher forcing: the decoder input for targets ``tgt`` (N, S): ``BOS`` then ``tgt`` shifted right
    by one, its ``EOS`` turned into ``PAD`` (position i sees the answer's tokens before i)."""
    tgt = np.asarray(tgt)
    out = np.empty_like(tgt)
    out[:, 0] = BOS
    out[:, 1:] = tgt[:, :-1]
    out[out == EOS] = PAD
    return out


def strip_target(row):
    """A target or generated row as a list of ints: everything before the first EOS (PAD dropped)."""
    out = []
    for t in np.asarray(row).tolist():
        if t == EOS:
            break
        if t != PAD:
            out.append(int(t))
    return out


def _pad(rows, width):
    out = np.full((len(rows), width), PAD, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


# -- the toy language pair -------------------------------------------------------------------------------
def translate_lexicon(vocab_size):
    """The ``translate`` vocabularies for a source vocabulary of ``vocab_size`` ids.

    Returns ``(classes, tgt_vocab_size)``: ``classes`` maps ``"noun"``, ``"adj"``, ``"verb"`` to the
    source ids of that word class and ``"not"`` to the negation's id. The target id of source word
    ``w`` is ``w`` + an offset per class (target nouns, adjectives, verbs, then the verbs' tense
    suffixes and the negation suffix); each verb's suffix depends on the verb (two tenses alternate).
    """
    content = vocab_size - FIRST_TOKEN
    if content < 7:
        raise ValueError(f"vocab_size must be >= {FIRST_TOKEN + 7} for translate (3 special ids, one negation, "
                         f"and at least 2 nouns, 2 adjectives, 2 verbs), got {vocab_size}")
    words = content - 1
    n_noun = max(2, (words * 2) // 5)
    n_adj = max(2, (words - n_noun) // 2)
    n_verb = words - n_noun - n_adj
    ids = np.arange(FIRST_TOKEN, vocab_size)
    classes = {"noun": ids[:n_noun], "adj": ids[n_noun:n_noun + n_adj],
               "verb": ids[n_noun + n_adj:n_noun + n_adj + n_verb], "not": int(ids[-1])}
    return classes, vocab_size + 3          # target: the same word ids, + 2 tense suffixes and a negation suffix


def _translate_tables(vocab_size):
    classes, tgt_vocab = translate_lexicon(vocab_size)
    # the target lexicon: the word ids rotated by 3, so a target word is never its source word's id
    words = np.concatenate([classes["noun"], classes["adj"], classes["verb"]])
    lex = dict(zip(words.tolist(), np.roll(words, 3).tolist()))
    tense = {int(v): vocab_size + (i % 2) for i, v in enumerate(classes["verb"])}
    return classes, lex, tense, vocab_size + 2, tgt_vocab


def _translate(src, tables):
    """The target words of source words ``src`` (a list), or None when ``src`` is not a sentence of the
    grammar ``[adj] noun [not] verb [adj] noun``."""
    classes, lex, tense, neg, _ = tables
    nouns, adjs, verbs = (set(classes[k].tolist()) for k in ("noun", "adj", "verb"))
    src, i, parts = list(src), 0, {}
    for slot, wanted, optional in (("adj_s", adjs, True), ("subj", nouns, False), ("not", {classes["not"]}, True),
                                   ("verb", verbs, False), ("adj_o", adjs, True), ("obj", nouns, False)):
        if i < len(src) and src[i] in wanted:
            parts[slot] = src[i]
            i += 1
        elif not optional:
            return None
    if i != len(src):
        return None
    out = [lex[parts["subj"]]] + ([lex[parts["adj_s"]]] if "adj_s" in parts else [])
    out += [lex[parts["obj"]]] + ([lex[parts["adj_o"]]] if "adj_o" in parts else [])
    return out + [lex[parts["verb"]], tense[parts["verb"]]] + ([neg] if "not" in parts else [])


def _translate_pairs(rng, n, vocab_size):
    tables = _translate_tables(vocab_size)
    classes = tables[0]
    nouns, adjs, verbs = classes["noun"], classes["adj"], classes["verb"]
    subj, obj, verb = rng.choice(nouns, n), rng.choice(nouns, n), rng.choice(verbs, n)
    adj_s = np.where(rng.random(n) < 0.5, rng.choice(adjs, n), 0)
    adj_o = np.where(rng.random(n) < 0.5, rng.choice(adjs, n), 0)
    negate = rng.random(n) < 0.3
    srcs = [([a_s] if a_s else []) + [s] + ([classes["not"]] if ng else []) + [v] + ([a_o] if a_o else []) + [o]
            for s, o, v, a_s, a_o, ng in zip(subj.tolist(), obj.tolist(), verb.tolist(), adj_s.tolist(),
                                             adj_o.tolist(), negate.tolist())]
    return srcs, [_translate(src, tables) for src in srcs], tables[-1]


def target_for(task, src, vocab_size):
    """The answer (a list of ids, no EOS) to source tokens ``src`` (ids, PAD dropped), or None when
    ``src`` is not a valid source of ``task`` (translate: not a sentence of its grammar)."""
    check_seq2seq_task(task)
    src = [int(t) for t in src if t != PAD]
    if task == "reverse":
        return src[::-1]
    if task == "dedup_sort":
        return sorted(set(src))
    return _translate(src, _translate_tables(vocab_size))


def _random_pairs(task, rng, n, vocab_size, seq_len):
    lengths = rng.integers(1, seq_len + 1, size=n)
    tokens = rng.integers(FIRST_TOKEN, vocab_size, size=(n, seq_len))
    srcs = [tokens[i, :lengths[i]].tolist() for i in range(n)]
    if task == "reverse":
        tgts = [s[::-1] for s in srcs]
    else:
        tgts = [sorted(set(s)) for s in srcs]
    return srcs, tgts, vocab_size


def _space(task, vocab_size, seq_len, limit):
    """How many distinct sources the task has (counted no further than ``limit``)."""
    if task == "translate":
        classes, _ = translate_lexicon(vocab_size)
        nn, na, nv = (len(classes[k]) for k in ("noun", "adj", "verb"))
        return nn * nn * nv * (na + 1) ** 2 * 2
    c, total = vocab_size - FIRST_TOKEN, 0
    for length in range(1, seq_len + 1):
        total += c ** min(length, limit.bit_length() + 1)
        if total > limit:
            break
    return total


def make_seq2seq_task(task, vocab_size=16, seq_len=8, num_train=20000, num_val=1000, seed=0):
    """Draw ``num_train`` training and ``num_val`` held-out pairs of ``task`` (see the module docstring).

    The same arguments always give the same arrays; no validation source is a training source.
    Raises ValueError naming the argument for a bad task, size or seed, and when the task has too few
    distinct sources for the requested sizes.
    """
    check_seq2seq_task(task)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    vocab_size = check_positive_int(vocab_size, "vocab_size")
    seq_len = check_positive_int(seq_len, "seq_len")
    num_train = check_positive_int(num_train, "num_train")
    num_val = check_positive_int(num_val, "num_val")
    if vocab_size <= FIRST_TOKEN:
        raise ValueError(f"vocab_size must be > {FIRST_TOKEN} (ids 0, 1, 2 are PAD, EOS, BOS), got {vocab_size}")
    if task == "translate" and seq_len < TRANSLATE_WORDS:
        raise ValueError(f"seq_len must be >= {TRANSLATE_WORDS} for translate (its longest sentence), got {seq_len}")
    needed = num_train + num_val
    space = _space(task, vocab_size, seq_len, 2 * needed)
    if needed > space // 2:           # rejection sampling needs room to find unseen sources
        raise ValueError(f"{task} has only {space} distinct sources at vocab_size={vocab_size}, seq_len={seq_len}; "
                         f"num_train + num_val = {needed} is more than half of them: use a larger vocab_size or "
                         "seq_len, or fewer examples")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5E2, SEQ2SEQ_TASKS.index(task)]))

    def draw(n):
        if task == "translate":
            return _translate_pairs(rng, n, vocab_size)
        return _random_pairs(task, rng, n, vocab_size, seq_len)

    train_src, train_tgt, tgt_vocab = draw(num_train)
    seen = {tuple(s) for s in train_src}
    val_src, val_tgt = [], []
    for _ in range(1000):
        cand_src, cand_tgt, _ = draw(2 * (num_val - len(val_src)))
        for s, t in zip(cand_src, cand_tgt):
            if tuple(s) not in seen:
                seen.add(tuple(s))
                val_src.append(s)
                val_tgt.append(t)
                if len(val_src) == num_val:
                    break
        if len(val_src) == num_val:
            break
    else:  # pragma: no cover - the space check leaves room
        raise ValueError(f"could not draw {num_val} validation sources unseen in training")
    # fixed widths (not the draw's longest row), so every seed gives the same shapes
    tgt_len = TRANSLATE_WORDS + 2 if task == "translate" else seq_len + 1    # + EOS (translate: + tense, neg)
    pad = lambda rows: _pad([r + [EOS] for r in rows], tgt_len)      # noqa: E731
    return Seq2SeqData(task, vocab_size, tgt_vocab, seq_len, tgt_len, _pad(train_src, seq_len), pad(train_tgt),
                       _pad(val_src, seq_len), pad(val_tgt))
