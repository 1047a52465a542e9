"""The model kinds ``train``/``evaluate``/``predict`` know (``--model``), each in one place: its tasks,
how its data and model are built from a :class:`~numpy_transformer.training.trainer.TrainConfig`, what one
training step feeds the model, how it is evaluated and how it predicts.

* ``encoder`` -- :class:`TransformerModel`, one output token per input position (:mod:`data`);
* ``seq2seq`` -- :class:`Seq2SeqModel`, the encoder-decoder with teacher forcing, decoded greedily
  (:mod:`tasks_seq2seq`); its held-out exact match is over whole generated sequences, and it reports
  corpus BLEU;
* ``gpt`` -- :class:`GPT`, the decoder-only language model on digit addition (:mod:`tasks_lm`): the
  loss is on the answer tokens only; evaluated by the held-out exact match of the answer generated
  greedily through the KV cache (``model.generate``), and the teacher-forced token accuracy.

A new kind (e.g. a decoder-only language model) is one more :class:`ModelKind` subclass in ``KINDS``.
"""

from __future__ import annotations

import numpy as np

from ..tasks import data as data_mod
from ..tasks import lm
from ..tasks import seq2seq as s2s
from ..tasks.bleu import corpus_bleu
from ..models.gpt import GPT
from ..nn.loss import CrossEntropyLoss
from ..models.encoder import TransformerModel
from ..models.seq2seq import Seq2SeqModel

__all__ = ["KINDS", "ModelKind", "EncoderKind", "Seq2SeqKind", "GPTKind", "get_kind", "MODEL_CLASSES"]


class ModelKind:
    """What the trainer and the CLI need from a kind of model."""

    name = None
    model_class = None
    tasks = ()
    default_task = None

    def check_task(self, task):
        if task not in self.tasks:
            raise ValueError(f"task must be one of {sorted(self.tasks)} for --model {self.name}, got {task!r}")
        return task

    # the TrainConfig options this kind supports (the others keep their defaults)
    activations = ("relu", "gelu", "silu")
    positions = ("sinusoidal", "learned")
    gpt_only = ("norm", "num_kv_heads")

    def check_options(self, c):
        """Refuse a TrainConfig option this kind does not support, naming it and the kind."""
        if c.activation not in self.activations:
            raise ValueError(f"activation must be one of {self.activations} for --model {self.name}, got "
                             f"{c.activation!r}")
        if c.pos_encoding not in self.positions:
            raise ValueError(f"pos_encoding must be one of {self.positions} for --model {self.name}, got "
                             f"{c.pos_encoding!r}")
        defaults = {"norm": "layernorm", "num_kv_heads": None}
        for name in self.gpt_only:
            if getattr(c, name) != defaults[name]:
                raise ValueError(f"{name}={getattr(c, name)!r} is an option of --model gpt only (got --model "
                                 f"{self.name})")

    def make_data(self, config):
        raise NotImplementedError

    def build_model(self, config, data, seed):
        raise NotImplementedError

    def criterion(self, config):
        raise NotImplementedError

    def logits(self, model, src, tgt):
        """``(logits, targets)`` of one batch: what the loss compares (dropout as the model's mode)."""
        raise NotImplementedError

    def token_accuracy(self, logits, targets):
        raise NotImplementedError

    def predict(self, model, src, data):
        """The predicted target rows for sources ``src`` (eval mode)."""
        raise NotImplementedError


class EncoderKind(ModelKind):
    name = "encoder"
    model_class = TransformerModel
    positions = ("sinusoidal", "learned", "relative", "alibi", "none")
    tasks = tuple(data_mod.TASKS)
    default_task = "shift"

    def make_data(self, c):
        return data_mod.make_task(c.task, c.vocab_size, c.seq_len, c.num_train, c.num_val, seed=c.seed)

    def build_model(self, c, data, seed):
        return TransformerModel(**c.model_kwargs(), seed=seed)

    def criterion(self, c):
        return CrossEntropyLoss(label_smoothing=c.label_smoothing)

    def logits(self, model, src, tgt):
        return model(src), tgt                                                   # (B, S, V), (B, S)

    def token_accuracy(self, logits, targets):
        return float(np.mean(logits.argmax(-1) == targets))

    def predict(self, model, src, data=None):
        return model(np.asarray(src)).argmax(-1)

    def evaluate(self, model, src, tgt, criterion=None, max_examples=None, batch_size=250):
        from .evaluation import evaluate
        return evaluate(model, src, tgt, criterion=criterion, max_examples=max_examples, batch_size=batch_size)


class Seq2SeqKind(ModelKind):
    name = "seq2seq"
    model_class = Seq2SeqModel
    tasks = s2s.SEQ2SEQ_TASKS
    default_task = "reverse"

    def make_data(self, c):
        return s2s.make_seq2seq_task(c.task, c.vocab_size, c.seq_len, c.num_train, c.num_val, seed=c.seed)

    def build_model(self, c, data, seed):
        return Seq2SeqModel(data.vocab_size, data.tgt_vocab_size, d_model=c.d_model, nhead=c.nhead,
                            num_encoder_layers=c.num_layers, num_decoder_layers=c.num_layers,
                            dim_feedforward=c.dim_feedforward, dropout=c.dropout,
                            max_len=max(data.seq_len, data.tgt_len), activation=c.activation,
                            norm_first=c.norm_first, pos_encoding=c.pos_encoding, dtype=np.dtype(c.dtype), seed=seed)

    def criterion(self, c):
        return CrossEntropyLoss(ignore_index=s2s.PAD, label_smoothing=c.label_smoothing)   # padding is no target

    def logits(self, model, src, tgt):
        """Teacher forcing: the decoder reads BOS + the target shifted right and predicts the target."""
        return model(src, s2s.decoder_input(tgt), src_key_padding_mask=src == s2s.PAD), tgt    # (B, S, V), (B, S)

    def token_accuracy(self, logits, targets):
        keep = targets != s2s.PAD
        return float(np.sum((logits.argmax(-1) == targets) & keep) / max(int(keep.sum()), 1))

    def predict(self, model, src, data):
        src = np.asarray(src)
        return model.greedy_decode(src, data.tgt_len, s2s.BOS, s2s.EOS, s2s.PAD,
                                   src_key_padding_mask=src == s2s.PAD)

    def evaluate(self, model, src, tgt, criterion=None, max_examples=None, batch_size=250):
        """Teacher-forced loss and token accuracy; exact match and corpus BLEU of greedy generation."""
        from .evaluation import EvalResult
        criterion = criterion or CrossEntropyLoss(ignore_index=s2s.PAD)
        crit = CrossEntropyLoss(ignore_index=criterion.ignore_index, reduction="sum",
                                label_smoothing=criterion.label_smoothing)
        n = len(src) if max_examples is None else min(len(src), max_examples)
        was = model.training
        model.eval()
        total_loss, correct, counted, exact = 0.0, 0, 0, 0
        hyps, refs = [], []
        try:
            for i in range(0, n, batch_size):
                s, t = src[i:min(i + batch_size, n)], tgt[i:min(i + batch_size, n)]
                logits, _ = self.logits(model, s, t)
                total_loss += float(crit(logits.reshape(-1, logits.shape[-1]), t.reshape(-1)))
                keep = t != s2s.PAD
                correct += int(((logits.argmax(-1) == t) & keep).sum())
                counted += int(keep.sum())
                gen = model.greedy_decode(s, t.shape[1], s2s.BOS, s2s.EOS, s2s.PAD,
                                          src_key_padding_mask=s == s2s.PAD)       # (b, tgt_len)
                exact += int((gen == t).all(axis=1).sum())           # every token, the EOS and the stop
                hyps += [" ".join(map(str, s2s.strip_target(g))) for g in gen]
                refs += [" ".join(map(str, s2s.strip_target(r))) for r in t]
        finally:
            model.train(was)
        bleu = corpus_bleu(hyps, [refs]).score if n else 0.0
        return EvalResult(total_loss / max(counted, 1), correct / max(counted, 1), exact / max(n, 1), n,
                          bleu=bleu)


class GPTKind(ModelKind):
    """The GPT language model on ``addition`` (``TrainConfig.digits`` per operand; ``vocab_size`` and
    ``seq_len`` are the tokenizer's and the task's, so those two options are not used)."""

    name = "gpt"
    model_class = GPT
    activations = ("gelu", "relu", "silu", "swiglu")
    positions = ("learned", "sinusoidal", "rope", "alibi", "relative", "none")
    gpt_only = ()
    tasks = lm.LM_TASKS
    default_task = "addition"

    def make_data(self, c):
        return lm.make_lm_task(c.task, c.digits, c.num_train, c.num_val, seed=c.seed)

    def build_model(self, c, data, seed):
        return GPT(vocab_size=data.vocab_size, block_size=data.seq_len, n_layer=c.num_layers, n_head=c.nhead,
                   n_embd=c.d_model, n_inner=c.dim_feedforward, dropout=c.dropout, ffn=c.activation,
                   positions=c.pos_encoding, norm=c.norm, num_kv_heads=c.num_kv_heads, dtype=c.dtype, seed=seed)

    def criterion(self, c):
        return CrossEntropyLoss(ignore_index=lm.IGNORE, label_smoothing=c.label_smoothing)   # answer tokens only

    def logits(self, model, src, tgt):
        """Next-token prediction over the whole sequence; the prompt's targets are IGNORE."""
        return model(src), tgt                                                   # (B, L-1, V), (B, L-1)

    def token_accuracy(self, logits, targets):
        keep = targets != lm.IGNORE
        return float(np.sum((logits.argmax(-1) == targets) & keep) / max(int(keep.sum()), 1))

    def predict(self, model, src, data):
        """The greedy answers (N, digits + 2) to the prompts in ``src`` (its first ``prompt_len``
        columns), generated through the KV cache; PAD after the EOS."""
        prompts = np.asarray(src)[:, :data.prompt_len]
        out = model.generate(prompts, data.answer_len, eos_token_id=lm.EOS, pad_token_id=lm.PAD, use_cache=True)
        gen = np.full((len(prompts), data.answer_len), lm.PAD, dtype=np.int64)
        gen[:, :out.shape[1] - data.prompt_len] = out[:, data.prompt_len:]
        return gen

    def evaluate(self, model, src, tgt, criterion=None, max_examples=None, batch_size=250):
        """Teacher-forced loss and token accuracy over the answer tokens; exact match of the greedily
        generated answer (every digit and the EOS)."""
        from .evaluation import EvalResult
        criterion = criterion or CrossEntropyLoss(ignore_index=lm.IGNORE)
        crit = CrossEntropyLoss(ignore_index=criterion.ignore_index, reduction="sum",
                                label_smoothing=criterion.label_smoothing)
        n = len(src) if max_examples is None else min(len(src), max_examples)
        digits = (src.shape[1] - 3) // 3
        shape = _Shape(2 * digits + 2, digits + 2)
        was = model.training
        model.eval()
        total_loss, correct, counted, exact = 0.0, 0, 0, 0
        try:
            for i in range(0, n, batch_size):
                s, t = src[i:min(i + batch_size, n)], tgt[i:min(i + batch_size, n)]
                logits, _ = self.logits(model, s, t)
                total_loss += float(crit(logits.reshape(-1, logits.shape[-1]), t.reshape(-1)))
                keep = t != lm.IGNORE
                correct += int(((logits.argmax(-1) == t) & keep).sum())
                counted += int(keep.sum())
                gen = self.predict(model, s, shape)                              # (b, digits + 2)
                exact += int((gen == t[:, -shape.answer_len:]).all(axis=1).sum())
        finally:
            model.train(was)
        return EvalResult(total_loss / max(counted, 1), correct / max(counted, 1), exact / max(n, 1), n,
                          generated=True)


class _Shape:
    """The prompt and answer lengths :meth:`GPTKind.predict` needs (an LMData's, from the sizes alone)."""

    def __init__(self, prompt_len, answer_len):
        self.prompt_len, self.answer_len = prompt_len, answer_len


KINDS = {k.name: k for k in (EncoderKind(), Seq2SeqKind(), GPTKind())}
MODEL_CLASSES = {name: k.model_class for name, k in KINDS.items()}


def get_kind(name):
    if name not in KINDS:
        raise ValueError(f"model must be one of {list(KINDS)}, got {name!r}")
    return KINDS[name]
