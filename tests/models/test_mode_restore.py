"""Every evaluation in the middle of training leaves each submodule in its own mode (issue 23): generation,
the seq2seq greedy decode, attention maps and the trainer's evaluate/predict all switch through the one
``nn.modes.eval_mode``, so a block the caller keeps frozen in eval mode stays there while the rest trains.
And no file of the package writes the ``was = model.training ... model.train(was)`` restore by hand."""

from __future__ import annotations

import ast
import os

import numpy as np
import pytest
from _paths import REPO_ROOT

import numpy_transformer as nt
from numpy_transformer.study.attention_maps import attention_weights
from numpy_transformer.tasks import lm
from numpy_transformer.training.trainer import TrainConfig, Trainer

PKG = os.path.join(str(REPO_ROOT), "numpy_transformer")


def _modes(model):
    return [m.training for m in model.modules()]


def _frozen_first_block(model, blocks):
    """``model`` in train mode with its first block put apart in eval mode; the modes to keep."""
    model.train()
    blocks[0].eval()
    before = _modes(model)
    assert True in before and False in before
    return before


def test_gpt_generate_keeps_a_frozen_block_in_eval_and_the_rest_training():
    model = nt.GPT(vocab_size=lm.VOCAB_SIZE, block_size=12, n_layer=2, n_head=2, n_embd=8, dropout=0.1,
                   dtype="float64", seed=0)
    before = _frozen_first_block(model, model.h)
    for beams in (1, 2):
        model.generate(np.array([[4, 5, 2]]), 3, num_beams=beams)
        assert _modes(model) == before
        assert not model.h[0].training and model.h[1].training and model.training


def test_seq2seq_greedy_decode_keeps_a_frozen_layer_in_eval_and_the_rest_training():
    model = nt.Seq2SeqModel(8, 8, d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2,
                            dim_feedforward=8, max_len=6, dropout=0.1, seed=0)
    layers = model.transformer.decoder.layers
    before = _frozen_first_block(model, layers)
    model.greedy_decode(np.array([[3, 4, 5]]), 4, bos_token_id=2, eos_token_id=1)
    assert _modes(model) == before
    assert not layers[0].training and layers[1].training


@pytest.mark.parametrize("model_kind", ["gpt", "seq2seq"])
def test_attention_weights_keep_a_frozen_block_in_eval_and_the_rest_training(model_kind):
    if model_kind == "gpt":
        model = nt.GPT(vocab_size=9, block_size=8, n_layer=2, n_head=2, n_embd=8, dropout=0.1, seed=0)
        blocks, inputs = model.h, (np.array([[1, 2, 3]]),)
    else:
        model = nt.Seq2SeqModel(8, 8, d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                                dim_feedforward=8, max_len=6, dropout=0.1, seed=0)
        blocks, inputs = model.transformer.encoder.layers, (np.array([[3, 4, 5]]), np.array([[2, 3]]))
    before = _frozen_first_block(model, blocks)
    attention_weights(model, *inputs)
    assert _modes(model) == before


@pytest.mark.parametrize("model_kind", ["encoder", "seq2seq", "gpt"])
def test_trainer_evaluate_and_predict_keep_a_frozen_submodule_in_eval(model_kind):
    trainer = Trainer(TrainConfig(model=model_kind, num_train=8, num_val=4, d_model=8, nhead=2, num_layers=1,
                                  dim_feedforward=8, digits=1, seq_len=4, vocab_size=8, batch_size=4,
                                  dropout=0.1))
    model = trainer.model
    first = next(iter(model.children()))
    first.eval()
    before = _modes(model)
    assert True in before and False in before
    trainer.evaluate()
    assert _modes(model) == before
    trainer.predict(trainer.data.val_src[:2])
    assert _modes(model) == before


def _hand_written_restores(tree):
    """``X.train(name)`` calls where ``name`` was assigned from ``X.training`` (or ``getattr(X, "training")``)
    in the same function or module body: the save/restore that forgets every submodule's own mode."""
    found = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        saved = set()
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                v = node.value
                reads_training = (isinstance(v, ast.Attribute) and v.attr == "training") or (
                    isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "getattr"
                    and len(v.args) >= 2 and isinstance(v.args[1], ast.Constant) and v.args[1].value == "training")
                if reads_training:
                    saved.add(node.targets[0].id)
        for node in ast.walk(scope):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "train"
                    and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id in saved):
                found.append(node.lineno)
    return sorted(set(found))


def test_the_restore_detector_finds_the_pattern():
    src = "def f(model):\n    was = model.training\n    model.eval()\n    model.train(was)\n"
    assert _hand_written_restores(ast.parse(src)) == [4]
    src = "def f(m):\n    w = getattr(m, 'training', False)\n    m.train(w)\n"
    assert _hand_written_restores(ast.parse(src)) == [3]
    assert _hand_written_restores(ast.parse("def f(m):\n    m.train(True)\n")) == []


def test_no_file_but_nn_modes_restores_the_mode_by_hand():
    offenders = []
    for root, _, files in os.walk(PKG):
        for name in files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, PKG)
            if not name.endswith(".py") or rel == os.path.join("nn", "modes.py"):
                continue
            with open(path, encoding="utf-8") as f:
                lines = _hand_written_restores(ast.parse(f.read()))
            offenders += [f"{rel}:{n}" for n in lines]
    assert not offenders, f"use nn.modes.eval_mode instead of saving and restoring .training: {offenders}"
