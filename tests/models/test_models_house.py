"""The models' and training's structure (issue 23): one evaluation loop under ``eval_mode``, the
checkpoint format free of model policy, each choice vocabulary defined once, each block owning its
cached forward, one ids check, one ``use_cache`` rule, one score-bias helper."""

from __future__ import annotations

import ast
import os
import re

import numpy as np
import pytest
from _paths import REPO_ROOT

import numpy_transformer as nt
from numpy_transformer.models import gpt_config
from numpy_transformer.nn import activations
from numpy_transformer.nn import block as nn_block
from numpy_transformer.tasks import lm
from numpy_transformer.training import config as train_config
from numpy_transformer.training import kinds
from numpy_transformer.training.checkpoint import load_checkpoint, save_checkpoint

PKG = os.path.join(str(REPO_ROOT), "numpy_transformer")


def _source(*parts):
    with open(os.path.join(PKG, *parts), encoding="utf-8") as f:
        return f.read()


def _sources(folder):
    root = os.path.join(PKG, folder)
    return {name: _source(folder, name) for name in sorted(os.listdir(root)) if name.endswith(".py")}


def _tiny_gpt(**kw):
    cfg = dict(vocab_size=lm.VOCAB_SIZE, block_size=12, n_layer=2, n_head=2, n_embd=8, dropout=0.1, dtype="float64")
    cfg.update(kw)
    return nt.GPT(**cfg, seed=0)


# -- eval_mode and the one evaluation loop ---------------------------------------------------------------
def test_eval_mode_restores_each_submodules_own_mode_also_after_an_exception():
    model = _tiny_gpt()
    model.h[1].eval()                                        # a block kept apart, in eval mode
    before = [m.training for m in model.modules()]
    assert True in before and False in before
    with nt.eval_mode(model) as m:
        assert m is model and not any(x.training for x in model.modules())
    assert [m.training for m in model.modules()] == before
    with pytest.raises(ZeroDivisionError):
        with nt.nn.eval_mode(model):
            1 / 0
    assert [m.training for m in model.modules()] == before
    with pytest.raises(TypeError, match="eval_mode needs an nt.nn.Module"):
        with nt.eval_mode("model"):
            pass


@pytest.mark.parametrize("name", list(kinds.KINDS))
def test_every_kind_evaluates_through_the_one_loop_and_restores_mixed_modes(name, monkeypatch):
    c = train_config.TrainConfig(model=name, num_train=8, num_val=6, d_model=8, nhead=2, num_layers=1,
                                 dim_feedforward=8, digits=1, seq_len=6, vocab_size=8)
    kind = kinds.KINDS[name]
    data = kind.make_data(c)
    model = kind.build_model(c, data, seed=np.random.default_rng(0))
    first = next(iter(model.children()))
    first.eval()                                             # one submodule in eval mode, the rest training
    before = [m.training for m in model.modules()]
    calls = []
    loop = kinds.evaluate

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return loop(*args, **kwargs)

    monkeypatch.setattr(kinds, "evaluate", spy)
    ev = kind.evaluate(model, data.val_src, data.val_tgt, criterion=kind.criterion(c))
    assert len(calls) == 1 and ev.examples == len(data.val_src)
    assert [m.training for m in model.modules()] == before
    assert ev.generated == (name != "encoder") and (ev.bleu is not None) == (name == "seq2seq")


def test_gpt_answer_lengths_come_from_the_task_layout():
    assert not hasattr(kinds, "_Shape")
    for digits in (1, 3, 9):
        data = lm.make_lm_task(digits=digits, num_train=2, num_val=1) if digits < 9 else None
        width = 3 * digits + 3
        assert lm.prompt_and_answer_lengths(width) == (2 * digits + 2, digits + 2)
        if data is not None:
            assert data.train_src.shape[1] == width
            assert (data.train_tgt[0] != lm.IGNORE).sum() == digits + 2
    with pytest.raises(ValueError, match="cannot be 7 ids wide"):
        lm.prompt_and_answer_lengths(7)


# -- the checkpoint format holds no model policy -----------------------------------------------------------
def test_checkpoint_format_names_no_model_class_and_a_new_kind_loads_without_touching_it(tmp_path, monkeypatch):
    src = _source("training", "checkpoint.py")
    assert "models" not in " ".join(re.findall(r"^\s*from \S+ import .*$", src, re.M))
    names = {n.id for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Attribute)}
    assert not names & {"GPT", "TransformerModel", "Seq2SeqModel", "MODEL_CLASSES", "model_class"}

    class TinyGPT(nt.GPT):
        model_kind = "tiny_gpt"

    class TinyKind(kinds.GPTKind):
        name = "tiny_gpt"
        model_class = TinyGPT

    model = TinyGPT(vocab_size=lm.VOCAB_SIZE, block_size=8, n_layer=1, n_head=2, n_embd=8, seed=1)
    path = save_checkpoint(tmp_path / "tiny.npz", model)
    monkeypatch.setitem(kinds.KINDS, "tiny_gpt", TinyKind())
    ckpt = load_checkpoint(path)
    rebuilt = ckpt.build_model()
    assert type(rebuilt) is TinyGPT
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(rebuilt.state_dict()[k], v)
    assert type(kinds.model_from_checkpoint(ckpt)) is TinyGPT


# -- each vocabulary once -----------------------------------------------------------------------------------
def test_each_choice_vocabulary_is_defined_once_and_derived_everywhere():
    assert nn_block.FFNS == (*activations.ACTIVATIONS, *nn_block.GATED_FFNS)
    # GPT's feed-forwards: the block's, and the one only GPT builds (GPT-2's tanh GELU, "gelu_new")
    assert gpt_config.GPT_FFNS == (*nn_block.FFNS, *gpt_config.GPT_ONLY_FFNS)
    assert gpt_config.GPT_ONLY_FFNS == ("gelu_new",)
    assert gpt_config.NORMS == tuple(nn_block.NORMS)
    from numpy_transformer.models import encoder, score_bias
    assert gpt_config.BIAS_POSITIONS is encoder.BIAS_POSITIONS is score_bias.BIAS_POSITIONS
    assert gpt_config.BLOCK_POSITIONS == ("rope", *score_bias.BIAS_POSITIONS)
    assert kinds.GPTKind.activations is gpt_config.GPT_FFNS
    assert kinds.EncoderKind.activations == kinds.Seq2SeqKind.activations == tuple(activations.ACTIVATIONS)
    assert kinds.GPTKind.positions is gpt_config.POSITIONS
    assert set(train_config.ACTIVATION_CHOICES) == {a for k in kinds.KINDS.values() for a in k.activations}
    assert set(train_config.POSITION_CHOICES) == {p for k in kinds.KINDS.values() for p in k.positions}
    for ffn in nn_block.GATED_FFNS:                          # a gated FFN needs the TransformerBlock
        assert gpt_config.GPTConfig(vocab_size=4, ffn=ffn).modern
    literal = re.compile(r"""\(\s*["'](relu|gelu|layernorm|sinusoidal|learned)["']\s*,\s*["']""")
    for folder in ("models", "training", "cli"):
        for name, text in _sources(folder).items():
            code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
            defs = [m.group(0) for m in literal.finditer(code)]
            allowed = (folder, name) in {("models", "gpt_config.py"), ("models", "encoder.py"),
                                         ("models", "seq2seq.py")}
            assert allowed or not defs, f"{folder}/{name} spells a choice vocabulary itself: {defs}"


#: where each vocabulary of names is written out: (file under the repository, the module-level name)
VOCABULARY_DEFINITIONS = {("numpy_transformer/models/gpt_config.py", "POSITIONS"),
                          ("numpy_transformer/models/encoder.py", "POS_ENCODINGS"),
                          ("numpy_transformer/models/score_bias.py", "BIAS_POSITIONS"),
                          ("numpy_transformer/study/plot_positions.py", "KINDS")}


def _vocabularies():
    """Every choice vocabulary (activations, feed-forwards, norms, position schemes) by name. The seq2seq
    model's ("sinusoidal", "learned") is left out: the same two names are also the natural subset of
    table positions a GPT test draws from, not a copy of that vocabulary."""
    from numpy_transformer.models import encoder, score_bias
    from numpy_transformer.study import plot_positions
    return {"ACTIVATION_NAMES": activations.ACTIVATION_NAMES, "FFNS": nn_block.FFNS,
            "GPT_FFNS": gpt_config.GPT_FFNS, "NORMS": tuple(nn_block.NORMS), "POSITIONS": gpt_config.POSITIONS,
            "encoder POS_ENCODINGS": encoder.POS_ENCODINGS, "BIAS_POSITIONS": score_bias.BIAS_POSITIONS,
            "plot KINDS": plot_positions.KINDS}


def _spelled_vocabularies(source, rel, vocabularies):
    """``(line, vocabulary)`` for each literal tuple/list/set of strings in ``source`` whose names are
    exactly one vocabulary's, outside its definition, and each string that embeds one's repr (an error
    message that lists the choices)."""
    by_set = {frozenset(v): name for name, v in vocabularies.items()}
    tree = ast.parse(source)
    defining = {id(node.value) for node in tree.body if isinstance(node, ast.Assign)
                and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and (rel, node.targets[0].id) in VOCABULARY_DEFINITIONS}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2 and id(node) not in defining \
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            name = by_set.get(frozenset(e.value for e in node.elts))
            if name is not None:
                found.append((node.lineno, name))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [(node.lineno, name) for name, v in vocabularies.items() if repr(tuple(v))[1:-1] in node.value]
    return found


def test_no_file_spells_out_a_choice_vocabulary_outside_its_definition():
    vocabularies = _vocabularies()
    found = []
    for top in ("numpy_transformer", "reference_torch", "tests"):
        for root, _, files in os.walk(os.path.join(str(REPO_ROOT), top)):
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, str(REPO_ROOT)).replace(os.sep, "/")
                with open(path, encoding="utf-8") as f:
                    found += [f"{rel}:{line} ({vocab})" for line, vocab in
                              _spelled_vocabularies(f.read(), rel, vocabularies)]
    assert not found, f"import the vocabulary instead of writing its names out: {found}"


def test_the_vocabulary_detector_finds_tuples_lists_and_messages():
    vocabularies = _vocabularies()
    names = activations.ACTIVATION_NAMES                     # built here: this file spells none out itself
    src = (f"A = {tuple(reversed(names))!r}\nB = {list(nn_block.NORMS)!r}\n"
           f"C = \"activation must be one of {names}\"\nD = {names[:2]!r}\n")
    assert _spelled_vocabularies(src, "x.py", vocabularies) == [(1, "ACTIVATION_NAMES"), (2, "NORMS"),
                                                                 (3, "ACTIVATION_NAMES")]
    definition = 'BIAS_POSITIONS = ("relative", "alibi")\n'
    assert _spelled_vocabularies(definition, "numpy_transformer/models/score_bias.py", vocabularies) == []
    assert _spelled_vocabularies(definition, "numpy_transformer/models/gpt_config.py", vocabularies) == \
        [(1, "BIAS_POSITIONS")]


# -- blocks own their cached forward; GPT re-implements none --------------------------------------------------
@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_layer_forward_cached_equals_its_causal_forward(norm_first):
    layer = nt.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first,
                                       dtype=np.float64, seed=3)
    layer.eval()
    x = np.random.default_rng(4).standard_normal((2, 5, 8))
    full = layer(x, is_causal=True, src_mask=nt.functional.causal_mask(5))
    cache = nt.KVCache()
    head = layer.forward_cached(x[:, :3], cache, 0)
    steps = [layer.forward_cached(x[:, i:i + 1], cache, 0) for i in (3, 4)]
    np.testing.assert_allclose(np.concatenate([head, *steps], axis=1), full, rtol=1e-12, atol=1e-13)


def test_gpt_calls_each_blocks_own_cached_forward():
    src = _source("models", "gpt.py")
    assert "_block_step" not in src and "_ff_block" not in src and "cached_attention" not in src
    for kw in ({}, dict(norm="rmsnorm")):
        model = _tiny_gpt(**kw)
        model.eval()
        seen = []
        for block in model.h:
            own = block.forward_cached
            block.forward_cached = lambda *a, own=own, **k: (seen.append(1), own(*a, **k))[1]
        ids = np.array([[4, 5, 2, 6, 7]])
        logits, cache = model(ids, use_cache=True)
        np.testing.assert_allclose(logits, model(ids), rtol=1e-12, atol=1e-12)
        assert len(seen) == len(model.h)


# -- one ids check, one use_cache rule, one score-bias helper ------------------------------------------------
def test_every_model_refuses_float_ids_in_the_one_checks_words():
    float_ids = np.zeros((2, 3))
    calls = {
        "TransformerModel": lambda: nt.TransformerModel(8, d_model=8, nhead=2, dim_feedforward=8, max_len=6)(float_ids),
        "GPT": lambda: _tiny_gpt()(float_ids),
        "generate": lambda: _tiny_gpt().generate(float_ids, 1),
        "Seq2SeqModel": lambda: nt.Seq2SeqModel(8, 8, d_model=8, nhead=2, dim_feedforward=8, max_len=6)(
            float_ids, np.zeros((2, 3), int)),
    }
    for name, call in calls.items():
        want = "src" if name == "Seq2SeqModel" else "ids"
        with pytest.raises(TypeError, match=re.escape(f"{want} must be an integer array of token ids, got dtype "
                                                      "float64")):
            call()
    for name, text in _sources("models").items():
        assert "integer array of token ids" not in text, f"models/{name} checks ids itself"


def test_use_cache_is_resolved_in_one_place_and_checked_everywhere():
    texts = [t for folder in ("models", "nn") for t in _sources(folder).values()]
    assert sum(t.count("past_key_values given with use_cache=False") for t in texts) == 1
    model = nt.Seq2SeqModel(8, 8, d_model=8, nhead=2, dim_feedforward=8, max_len=6, seed=0)
    model.eval()
    memory = model.encode(np.array([[3, 4, 5]]))
    with pytest.raises(TypeError, match="use_cache must be True, False or None"):
        model.decode(np.array([[2]]), memory, use_cache="yes")
    with pytest.raises(TypeError, match="use_cache must be True, False or None"):
        _tiny_gpt()(np.array([[4]]), use_cache=1)


def test_the_score_bias_is_written_once():
    for name, text in _sources("models").items():
        if name != "score_bias.py":             # (generation's -inf is its filtering of logits, not a bias;
            #                                     the score processors moved to logits_process.py)
            assert "alibi_bias(" not in text and "relative_position_bias(" not in text, f"models/{name}"
            filters = ("generation.py", "logits_process.py")
            assert name in filters or "-np.inf" not in text, f"models/{name} builds a padding bias"
    from numpy_transformer.models import score_bias
    bias, const = score_bias.position_scores("alibi", 2, 3, past=2, dtype=np.float64)
    np.testing.assert_array_equal(const, nt.functional.alibi_bias(2, 3, 5, dtype=np.float64))
    keep = np.array([[False, True, True, True, True]])
    padded = score_bias.with_padding(const, keep, np.float64)
    assert padded.shape == (1, 2, 3, 5) and np.isneginf(padded[..., 0]).all()
    np.testing.assert_array_equal(padded[0, :, :, 1:], const[:, :, 1:])
