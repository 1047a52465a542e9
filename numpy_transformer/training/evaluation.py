"""Evaluation: :class:`EvalResult` (what every evaluation reports) and :func:`evaluate`, the one
evaluation loop. Every model kind (:mod:`.kinds`) evaluates through it, naming only what differs: how
a batch's logits are made (``logits_of``), how whole sequences are generated for the exact match
(``generate``) and, for BLEU, how a row reads as text (``text_of``). Kept apart from the trainer so
that the kinds, which the trainer uses, do not import it back.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..nn.loss import CrossEntropyLoss
from ..nn.modes import eval_mode
from ..tasks.bleu import corpus_bleu

__all__ = ["EvalResult", "evaluate"]


@dataclass
class EvalResult:
    """``sequence_accuracy``: whole sequences right (seq2seq and gpt: greedy generation equal to the
    target, EOS included, i.e. exact match); ``bleu``: corpus BLEU of the generated sequences (seq2seq
    only); ``generated``: the exact match is of generated sequences (seq2seq and gpt), not of the
    teacher-forced tokens (the encoder)."""

    loss: float
    token_accuracy: float
    sequence_accuracy: float
    examples: int
    bleu: float = None
    generated: bool = False

    def __str__(self):
        if self.bleu is None and self.generated:
            return (f"loss {self.loss:.4f}  token acc {100 * self.token_accuracy:.2f}% (teacher-forced)  "
                    f"exact match {100 * self.sequence_accuracy:.2f}% (greedy)  ({self.examples} examples)")
        if self.bleu is None:
            return (f"loss {self.loss:.4f}  token acc {100 * self.token_accuracy:.2f}%  "
                    f"sequence acc {100 * self.sequence_accuracy:.2f}%  ({self.examples} examples)")
        return (f"loss {self.loss:.4f}  token acc {100 * self.token_accuracy:.2f}% (teacher-forced)  "
                f"exact match {100 * self.sequence_accuracy:.2f}% (greedy)  BLEU {self.bleu:.2f}  "
                f"({self.examples} examples)")

    def brief(self):
        """The short form of a progress line: ``loss 0.0406  token 99.98%  seq 99.60%`` (seq2seq:
        ``loss 0.0406  exact 99.60%  BLEU 99.90``, the greedy exact match and corpus BLEU; gpt:
        ``loss 0.0406  token 99.98%  exact 99.60%``)."""
        if self.bleu is None and self.generated:
            return (f"loss {self.loss:.4f}  token {100 * self.token_accuracy:.2f}%  "
                    f"exact {100 * self.sequence_accuracy:.2f}%")
        if self.bleu is None:
            return (f"loss {self.loss:.4f}  token {100 * self.token_accuracy:.2f}%  "
                    f"seq {100 * self.sequence_accuracy:.2f}%")
        return f"loss {self.loss:.4f}  exact {100 * self.sequence_accuracy:.2f}%  BLEU {self.bleu:.2f}"


def evaluate(model, src, tgt, criterion=None, max_examples=None, batch_size=250, *, logits_of=None, generate=None,
             text_of=None):
    """Loss, token accuracy and whole-sequence accuracy of ``model`` on ``(src, tgt)``, in eval mode
    (:func:`~numpy_transformer.nn.eval_mode`: every submodule's mode is restored afterwards).

    Parameters
    ----------
    model : Module
    src, tgt : ndarray (N, S), (N, T)
        The inputs and their targets; ``tgt``'s entries equal to ``criterion.ignore_index`` are no
        target (neither the loss nor the token accuracy counts them).
    criterion : CrossEntropyLoss, optional
        Its ``ignore_index`` and ``label_smoothing`` (the loss is summed over the kept targets and
        divided by their count). Default ``CrossEntropyLoss()``.
    max_examples : int, optional
        Evaluate the first ``max_examples`` rows only.
    batch_size : int
    logits_of : callable, optional
        ``logits_of(model, src, tgt) -> (logits (B, T, V), targets (B, T))``; default ``model(src)``
        against ``tgt`` (the encoder: one output per input position).
    generate : callable, optional
        ``generate(model, src, tgt) -> rows (B, W)``: sequences generated without teacher forcing, a
        row an exact match when it equals ``tgt[:, -W:]``. Default: a row is right when every kept
        teacher-forced token is.
    text_of : callable, optional
        ``text_of(row) -> str``, the text corpus BLEU compares (generated rows against the targets);
        without it no BLEU is reported.
    """
    criterion = criterion or CrossEntropyLoss()
    summed = CrossEntropyLoss(ignore_index=criterion.ignore_index, reduction="sum",
                              label_smoothing=criterion.label_smoothing)
    logits_of = logits_of or (lambda m, s, t: (m(s), t))
    n = len(src) if max_examples is None else min(len(src), max_examples)
    total_loss, correct, counted, exact = 0.0, 0, 0, 0
    hyps, refs = [], []
    with eval_mode(model):
        for i in range(0, n, batch_size):
            s, t = src[i:min(i + batch_size, n)], tgt[i:min(i + batch_size, n)]
            logits, t = logits_of(model, s, t)                                   # (b, T, V), (b, T)
            total_loss += float(summed(logits.reshape(-1, logits.shape[-1]), t.reshape(-1)))
            keep = t != criterion.ignore_index
            hit = (logits.argmax(-1) == t) | ~keep
            correct += int((hit & keep).sum())
            counted += int(keep.sum())
            if generate is None:
                exact += int(hit.all(axis=1).sum())
                continue
            gen = generate(model, s, t)                                          # (b, W)
            exact += int((gen == t[:, t.shape[1] - gen.shape[1]:]).all(axis=1).sum())   # the EOS included
            if text_of is not None:
                hyps += [text_of(g) for g in gen]
                refs += [text_of(r) for r in t]
    bleu = None if text_of is None else (corpus_bleu(hyps, [refs]).score if n else 0.0)
    return EvalResult(total_loss / max(counted, 1), correct / max(counted, 1), exact / max(n, 1), n, bleu=bleu,
                      generated=generate is not None)
