"""Tiny Hugging Face folders built offline for the tests: a random GPT-2 (``config.json`` and
``model.safetensors``, written by ``GPT.save_pretrained``) and, with :func:`write_tokenizer`, a
``tokenizer.json`` trained by the ``tokenizers`` package on a few sentences (GPT-2's byte-level BPE)."""

from __future__ import annotations

import os

WORDS = ("the cat sat on the mat. the dog sat on the log. a cat and a dog sat together on the mat, "
         "and the cat saw the dog.\n")


def write_tokenizer(folder, vocab_size=300):
    """Train a byte-level BPE (GPT-2's scheme, ``<|endoftext|>`` its special token) on :data:`WORDS`
    and write it to ``folder/tokenizer.json``; returns the ``tokenizers.Tokenizer``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([WORDS] * 3, trainer)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    return tok


def write_gpt2_folder(folder, vocab_size=300, tokenizer=True, seed=0, dtype="float64"):
    """A random tiny GPT-2 in ``folder`` and, unless ``tokenizer=False``, its tokenizer (the model's
    vocabulary is then the tokenizer's, at most ``vocab_size``); returns the model."""
    import numpy_transformer as nt
    if tokenizer:
        vocab_size = write_tokenizer(folder, vocab_size).get_vocab_size()
    model = nt.GPT(vocab_size=vocab_size, block_size=32, n_layer=2, n_head=2, n_embd=16, ffn="gelu_new",
                   dtype=dtype, seed=seed)
    model.save_pretrained(folder, overwrite=True)          # beside the tokenizer.json written first
    return model
