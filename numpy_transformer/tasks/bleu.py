"""Corpus BLEU (Papineni et al., 2002) exactly as sacrebleu computes it with its defaults on
pre-tokenised input (``sacrebleu.corpus_bleu(hyps, [refs], tokenize="none")``): n-grams up to 4,
clipped counts summed over the corpus, the brevity penalty on the corpus lengths, and sacrebleu's
default ``exp`` smoothing (NIST's: the k-th order whose matches are 0 gets precision ``1 / (2^k *
total)``). tests/models/test_seq2seq.py::test_bleu_equals_sacrebleu checks it against sacrebleu when
that is installed (``pip install .[bleu]``)::

    p_n  = sum_sentences sum_ngrams min(count_hyp, max_ref count_ref) / sum_sentences (#n-grams of hyp)
    BP   = 1 if c >= r else exp(1 - r / c)      c = total hypothesis length, r = total closest reference length
    BLEU = 100 * BP * exp(mean_n log p_n)       (0 when no unigram matches)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

__all__ = ["corpus_bleu", "BLEUScore"]


@dataclass
class BLEUScore:
    """``score`` in [0, 100]; ``precisions`` the n-gram precisions (percent), ``bp`` the brevity penalty,
    ``sys_len`` / ``ref_len`` the corpus lengths; ``counts`` / ``totals`` the clipped matches and the
    hypothesis n-grams per order (sacrebleu's names)."""

    score: float
    counts: list
    totals: list
    precisions: list
    bp: float
    sys_len: int
    ref_len: int

    def __str__(self):
        p = "/".join(f"{x:.1f}" for x in self.precisions)
        return f"BLEU = {self.score:.2f} {p} (BP = {self.bp:.3f} ratio = {self.sys_len / max(self.ref_len, 1):.3f} " \
               f"hyp_len = {self.sys_len} ref_len = {self.ref_len})"


def _tokens(seq, what):
    if isinstance(seq, str):
        return seq.split()
    try:
        return [str(t) for t in seq]
    except TypeError:
        raise TypeError(f"{what} must be a string or a sequence of tokens, got {type(seq).__name__}") from None


def _ngrams(tokens, max_order):
    return Counter(tuple(tokens[i:i + n]) for n in range(1, max_order + 1) for i in range(len(tokens) - n + 1))


def corpus_bleu(hypotheses, references, max_ngram_order=4):
    """Corpus BLEU of ``hypotheses`` against ``references``.

    Parameters
    ----------
    hypotheses : sequence of str or of token sequences
        One per segment; a string is split on whitespace, a sequence of ids/words is taken as tokens.
    references : sequence of reference streams
        As sacrebleu: ``[refs_1, refs_2, ...]``, each stream with one reference per segment (same form
        as ``hypotheses``); pass ``[refs]`` for a single reference per segment.
    max_ngram_order : int
        The largest n (4, as BLEU and sacrebleu).

    Returns
    -------
    BLEUScore
    """
    hypotheses = list(hypotheses)
    references = list(references)
    if isinstance(max_ngram_order, bool) or not isinstance(max_ngram_order, int) or max_ngram_order < 1:
        raise ValueError(f"max_ngram_order must be a positive int, got {max_ngram_order!r}")
    streams = [list(s) for s in references]
    if not streams:
        raise ValueError("references must hold at least one reference stream, e.g. [refs]")
    for i, s in enumerate(streams):
        if len(s) != len(hypotheses):
            raise ValueError(f"references stream {i} has {len(s)} segments, hypotheses has {len(hypotheses)}")
    correct = [0] * max_ngram_order
    total = [0] * max_ngram_order
    sys_len = ref_len = 0
    for j, hyp in enumerate(hypotheses):
        h = _tokens(hyp, f"hypotheses[{j}]")
        refs = [_tokens(s[j], f"references[{j}]") for s in streams]
        ref_counts = Counter()
        for r in refs:                                   # per n-gram, the largest count in any reference
            ref_counts |= _ngrams(r, max_ngram_order)
        # the closest reference length, the shorter one on a tie (sacrebleu's _get_closest_ref_len)
        ref_len += min((abs(len(h) - len(r)), len(r)) for r in refs)[1]
        sys_len += len(h)
        for gram, c in _ngrams(h, max_ngram_order).items():
            n = len(gram) - 1
            total[n] += c
            correct[n] += min(c, ref_counts[gram])
    bp = 1.0 if sys_len >= ref_len else (math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0)
    precisions = [0.0] * max_ngram_order
    if not any(correct):
        return BLEUScore(0.0, correct, total, precisions, bp, sys_len, ref_len)
    smooth = 1.0
    for n in range(max_ngram_order):
        if total[n] == 0:
            break
        if correct[n] == 0:                              # sacrebleu's default smooth_method="exp"
            smooth *= 2
            precisions[n] = 100.0 / (smooth * total[n])
        else:
            precisions[n] = 100.0 * correct[n] / total[n]
    log = [math.log(p) if p > 0 else -9999999999 for p in precisions]    # sacrebleu's my_log
    score = bp * math.exp(sum(log) / max_ngram_order)
    return BLEUScore(score, correct, total, precisions, bp, sys_len, ref_len)

