"""Evaluation: :class:`EvalResult` (what every evaluation reports) and :func:`evaluate`, the encoder's
teacher-forced loop (the model kinds' own loops build on them, :mod:`.kinds`). Kept apart from the
trainer so that the kinds, which the trainer uses, do not import it back.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..nn.loss import CrossEntropyLoss

__all__ = ["EvalResult", "evaluate"]


@dataclass
class EvalResult:
    """``sequence_accuracy``: whole sequences right (seq2seq and gpt: greedy generation equal to the
    target, EOS included, i.e. exact match); ``bleu``: corpus BLEU of the generated sequences (seq2seq
    only); ``generated``: the exact match is of generated sequences (gpt, which reports no BLEU)."""

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


def evaluate(model, src, tgt, criterion=None, max_examples=None, batch_size=250):
    """Loss, token accuracy and whole-sequence accuracy of ``model`` on ``(src, tgt)`` in eval mode."""
    criterion = criterion or CrossEntropyLoss()
    crit = CrossEntropyLoss(ignore_index=criterion.ignore_index, reduction="sum",
                            label_smoothing=criterion.label_smoothing)
    n = len(src) if max_examples is None else min(len(src), max_examples)
    was = model.training
    model.eval()
    total_loss, correct, seq_correct, counted = 0.0, 0, 0, 0
    try:
        for i in range(0, n, batch_size):
            s, t = src[i:min(i + batch_size, n)], tgt[i:min(i + batch_size, n)]
            logits = model(s)
            total_loss += float(crit(logits.reshape(-1, logits.shape[-1]), t.reshape(-1)))
            keep = t != criterion.ignore_index
            hit = (logits.argmax(-1) == t) | ~keep
            correct += int((hit & keep).sum())
            counted += int(keep.sum())
            seq_correct += int(hit.all(axis=1).sum())
    finally:
        model.train(was)
    return EvalResult(total_loss / max(counted, 1), correct / max(counted, 1), seq_correct / max(n, 1), n)
