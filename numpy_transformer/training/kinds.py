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

A new kind (e.g. a decoder-only language model) is one more :class:`ModelKind` subclass in ``KINDS``;
each kind evaluates through the one loop :func:`~numpy_transformer.training.evaluation.evaluate`, and
:func:`model_from_checkpoint` builds a checkpoint's model by the kind it records (the checkpoint
format itself knows no model class). The choices a kind offers (``activations``, ``positions``) are its
model's own vocabularies, defined once where they are implemented.
"""

from __future__ import annotations

import numpy as np

from ..models.encoder import POS_ENCODINGS as ENCODER_POSITIONS
from ..models.encoder import TransformerModel
from ..models.gpt import GPT, GPT_FFNS
from ..models.gpt import POSITIONS as GPT_POSITIONS
from ..models.seq2seq import POS_ENCODINGS as SEQ2SEQ_POSITIONS
from ..models.seq2seq import Seq2SeqModel
from ..nn.activations import ACTIVATIONS
from ..nn.loss import CrossEntropyLoss
from ..tasks import data as data_mod
from ..tasks import lm
from ..tasks import seq2seq as s2s
from ..tasks.text import make_text_task
from .checkpoint_files import CheckpointError
from .checkpoint_validate import check_model_config
from .evaluation import evaluate

__all__ = ["KINDS", "ModelKind", "EncoderKind", "Seq2SeqKind", "GPTKind", "TextGPTKind", "TEXT_TASK", "get_kind",
           "kind_for", "MODEL_CLASSES", "model_from_checkpoint"]

TEXT_TASK = "text"          # gpt on a text file (--text FILE): numpy_transformer.tasks.text


class ModelKind:
    """What the trainer and the CLI need from a kind of model."""

    name = None
    model_class = None
    tasks = ()
    default_task = None
    # the TrainConfig choices this kind supports (its model's vocabularies; the others keep their defaults)
    activations = tuple(ACTIVATIONS)
    positions = ()
    gpt_only = ("norm", "num_kv_heads")

    def check_task(self, task):
        if task not in self.tasks:
            raise ValueError(f"task must be one of {sorted(self.tasks)} for --model {self.name}, got {task!r}")
        return task

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

    def evaluate(self, model, src, tgt, criterion=None, max_examples=None, batch_size=250):
        """The held-out report of ``model`` on ``(src, tgt)``: the one loop
        :func:`~numpy_transformer.training.evaluation.evaluate` with this kind's logits."""
        return evaluate(model, src, tgt, criterion=criterion, max_examples=max_examples, batch_size=batch_size,
                        logits_of=self.logits)


class EncoderKind(ModelKind):
    name = "encoder"
    model_class = TransformerModel
    positions = ENCODER_POSITIONS
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


class Seq2SeqKind(ModelKind):
    name = "seq2seq"
    model_class = Seq2SeqModel
    positions = SEQ2SEQ_POSITIONS
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
        return self.greedy(model, src, data.tgt_len)

    def greedy(self, model, src, tgt_len):
        """The greedy decoding (N, tgt_len) of sources ``src``: PAD after the EOS."""
        src = np.asarray(src)
        return model.greedy_decode(src, tgt_len, s2s.BOS, s2s.EOS, s2s.PAD, src_key_padding_mask=src == s2s.PAD)

    def evaluate(self, model, src, tgt, criterion=None, max_examples=None, batch_size=250):
        """Teacher-forced loss and token accuracy; exact match and corpus BLEU of greedy generation."""
        return evaluate(model, src, tgt, criterion=criterion or CrossEntropyLoss(ignore_index=s2s.PAD),
                        max_examples=max_examples, batch_size=batch_size, logits_of=self.logits,
                        generate=lambda m, s, t: self.greedy(m, s, t.shape[1]),
                        text_of=lambda row: " ".join(map(str, s2s.strip_target(row))))


class GPTKind(ModelKind):
    """The GPT language model on ``addition`` (``TrainConfig.digits`` per operand; ``vocab_size`` and
    ``seq_len`` are the tokenizer's and the task's, so those two options are not used)."""

    name = "gpt"
    model_class = GPT
    activations = GPT_FFNS
    positions = GPT_POSITIONS
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
        return self.answers(model, np.asarray(src)[:, :data.prompt_len], data.answer_len)

    def answers(self, model, prompts, answer_len):
        """The greedy answers (N, answer_len) to ``prompts`` (N, prompt_len), generated through the KV
        cache; PAD after the EOS."""
        out = model.generate(prompts, answer_len, eos_token_id=lm.EOS, pad_token_id=lm.PAD, use_cache=True)
        gen = np.full((len(prompts), answer_len), lm.PAD, dtype=np.int64)
        gen[:, :out.shape[1] - prompts.shape[1]] = out[:, prompts.shape[1]:]
        return gen

    def evaluate(self, model, src, tgt, criterion=None, max_examples=None, batch_size=250):
        """Teacher-forced loss and token accuracy over the answer tokens; exact match of the greedily
        generated answer (every digit and the EOS)."""
        prompt_len, answer_len = lm.prompt_and_answer_lengths(src.shape[1])
        return evaluate(model, src, tgt, criterion=criterion or CrossEntropyLoss(ignore_index=lm.IGNORE),
                        max_examples=max_examples, batch_size=batch_size, logits_of=self.logits,
                        generate=lambda m, s, t: self.answers(m, s[:, :prompt_len], answer_len))


class TextGPTKind(GPTKind):
    """The GPT language model on a text file (``TrainConfig.text``, task ``text``): every position
    predicts the next token (no target ignored); evaluated by the held-out loss and token accuracy
    (teacher-forced; nothing to generate exactly). ``seq_len`` is the block size; ``num_train`` and
    ``num_val`` are set from the text (its training windows and held-out windows)."""

    tasks = (TEXT_TASK,)
    default_task = TEXT_TASK

    def make_data(self, c):
        data = make_text_task(c.text, c.tokenizer, c.seq_len, c.val_fraction)
        c.num_train, c.num_val = len(data.train_src), len(data.val_src)       # the text decides them
        return data

    def build_model(self, c, data, seed):
        return GPT(vocab_size=data.vocab_size, block_size=data.block_size, n_layer=c.num_layers, n_head=c.nhead,
                   n_embd=c.d_model, n_inner=c.dim_feedforward, dropout=c.dropout, ffn=c.activation,
                   positions=c.pos_encoding, norm=c.norm, num_kv_heads=c.num_kv_heads, dtype=c.dtype, seed=seed)

    def criterion(self, c):
        return CrossEntropyLoss(label_smoothing=c.label_smoothing)

    def logits(self, model, src, tgt):
        return model(src), tgt                                                   # (B, S, V), (B, S)

    def token_accuracy(self, logits, targets):
        return float(np.mean(logits.argmax(-1) == targets))

    def predict(self, model, src, data=None):
        return model(np.asarray(src)).argmax(-1)

    def evaluate(self, model, src, tgt, criterion=None, max_examples=None, batch_size=250):
        return evaluate(model, src, tgt, criterion=criterion, max_examples=max_examples, batch_size=batch_size,
                        logits_of=self.logits)


KINDS = {k.name: k for k in (EncoderKind(), Seq2SeqKind(), GPTKind())}
MODEL_CLASSES = {name: k.model_class for name, k in KINDS.items()}
TEXT_KIND = TextGPTKind()


def get_kind(name):
    if name not in KINDS:
        raise ValueError(f"model must be one of {list(KINDS)}, got {name!r}")
    return KINDS[name]


def kind_for(config):
    """The kind that trains ``config``: ``KINDS[config.model]``, or the text kind for ``--text``."""
    return TEXT_KIND if config.model == "gpt" and config.task == TEXT_TASK else get_kind(config.model)


def model_from_checkpoint(ckpt, seed=None):
    """A fresh model of the kind ``ckpt`` (a :class:`~numpy_transformer.training.checkpoint.Checkpoint`)
    records, built from its ``model_config`` and loaded with its weights.

    The kind decides the class (``KINDS[ckpt.model_kind].model_class``) and the class how a stored
    configuration builds it (``model_class(**model_config, seed=seed)``). A kind this code does not
    know, a ``model_config`` whose sizes disagree with the stored weights (``d_model`` against the
    embedding's width, the number of layers stored, ...) or that the class refuses raises
    CheckpointError before anything is built.
    """
    if ckpt.model_kind not in KINDS:
        raise CheckpointError(f"{ckpt.path} holds a model of kind {ckpt.model_kind!r}; this code builds "
                              f"{sorted(KINDS)}")
    cls = KINDS[ckpt.model_kind].model_class
    cfg = dict(ckpt.model_config)
    check_model_config(ckpt.path, ckpt.model_kind, cfg, {k: v.shape for k, v in ckpt.model_state.items()})
    try:
        model = cls(**cfg, seed=seed)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{ckpt.path}: model_config {cfg} does not fit {cls.__name__}: {exc}") from exc
    return ckpt.load_model(model)
