"""What ``nt.GPT.from_pretrained`` and ``save_pretrained`` refuse: one clear error each, naming what was
found (the folder, the key, the tensor, the field). The folders are written by hand (no torch needed)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer.models.pretrained import PretrainedFolderError

pytest.importorskip("safetensors")
from safetensors.numpy import load_file, save_file  # noqa: E402


def _folder(tmp_path, model=None):
    """A valid folder written by our own save_pretrained (GPT-2 unless ``model`` says otherwise)."""
    model = model or nt.GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8, ffn="gelu_new", seed=0)
    model.save_pretrained(tmp_path)
    return tmp_path


def _edit_config(folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))


def _edit_tensors(folder, fn):
    tensors = load_file(folder / "model.safetensors")
    fn(tensors)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def _refused(folder, *words, exc=PretrainedFolderError):
    with pytest.raises(exc) as info:
        nt.GPT.from_pretrained(folder)
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    return str(info.value)


def test_not_a_folder(tmp_path):
    _refused(tmp_path / "nowhere", "nowhere", "not found", exc=FileNotFoundError)
    (tmp_path / "file").write_text("x")
    _refused(tmp_path / "file", "a file, not a folder", exc=FileNotFoundError)
    with pytest.raises(TypeError, match="path must be"):
        nt.GPT.from_pretrained(3)


def test_folder_without_config_json(tmp_path):
    _refused(tmp_path, "has no config.json")


def test_config_json_that_is_not_json(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    _refused(tmp_path, "config.json is not valid JSON")


@pytest.mark.parametrize("kind", ["bert", "mistral", None])
def test_other_model_types_are_refused_by_name(tmp_path, kind):
    _edit_config(_folder(tmp_path), model_type=kind)
    _refused(tmp_path, f"model_type={kind!r} is not supported", "'gpt2', 'llama'")


def test_pickle_only_folder_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "vocab_size": 11, "n_positions": 8,
                                                      "n_embd": 8, "n_layer": 1, "n_head": 2}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04not really a pickle")
    _refused(tmp_path, "pickle weights only (pytorch_model.bin)", "refused")


def test_folder_without_weights(tmp_path):
    _folder(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    _refused(tmp_path, "holds no model.safetensors")


@pytest.mark.parametrize("changes, words", [
    (dict(activation_function="gelu_fast"), ["activation_function='gelu_fast'"]),
    (dict(scale_attn_by_inverse_layer_idx=True), ["scale_attn_by_inverse_layer_idx=True"]),
    (dict(scale_attn_weights=False), ["scale_attn_weights=False"]),
    (dict(add_cross_attention=True), ["add_cross_attention=True"]),
    (dict(n_head=3), ["n_embd must be divisible by n_head"]),
    (dict(tie_word_embeddings="yes"), ["tie_word_embeddings must be True or False"]),
])
def test_gpt2_config_keys_that_do_not_map(tmp_path, changes, words):
    _edit_config(_folder(tmp_path), **changes)
    _refused(tmp_path, *words)


def test_missing_required_key(tmp_path):
    folder = _folder(tmp_path)
    cfg = json.loads((folder / "config.json").read_text())
    del cfg["n_embd"]
    (folder / "config.json").write_text(json.dumps(cfg))
    _refused(tmp_path, "config.json has no 'n_embd'")


@pytest.mark.parametrize("changes, words", [
    (dict(hidden_act="gelu"), ["hidden_act='gelu'"]),
    (dict(attention_bias=True), ["attention_bias=True with mlp_bias=False"]),
    (dict(mlp_bias="no"), ["mlp_bias must be true or false, got 'no'"]),
    (dict(head_dim=8), ["head_dim=8", "expected hidden_size / num_attention_heads = 4"]),
    (dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}), ["rope_type='linear'"]),
    (dict(rope_scaling={"type": "dynamic", "factor": 2.0}), ["rope_scaling's rope_type='dynamic'"]),
])
def test_llama_config_keys_that_do_not_map(tmp_path, changes, words):
    _edit_config(_folder(tmp_path, nt.GPT(nt.llama_config(11, block_size=8, n_layer=1, n_head=4, n_embd=16),
                                          seed=0)), **changes)
    _refused(tmp_path, *words)


def test_missing_and_unexpected_tensors(tmp_path):
    folder = _folder(tmp_path)
    _edit_tensors(folder, lambda t: t.pop("transformer.h.0.mlp.c_fc.bias"))
    _refused(folder, "1 missing (transformer.h.0.mlp.c_fc.bias)")
    _edit_tensors(folder, lambda t: t.update({"transformer.h.0.mlp.c_fc.bias": np.zeros(32, np.float32),
                                              "transformer.h.7.ln_1.weight": np.ones(8, np.float32)}))
    _refused(folder, "1 unexpected (transformer.h.7.ln_1.weight)")


def test_shape_mismatch_names_the_tensor(tmp_path):
    _edit_config(_folder(tmp_path), n_positions=12)
    _refused(tmp_path, "tensor transformer.wpe.weight has shape (8, 8), expected (12, 8)")


def test_conv1d_weight_stored_untransposed_is_refused(tmp_path):
    folder = _folder(tmp_path)
    _edit_tensors(folder, lambda t: t.update({"transformer.h.0.mlp.c_fc.weight":
                                              np.ascontiguousarray(t["transformer.h.0.mlp.c_fc.weight"].T)}))
    _refused(folder, "tensor transformer.h.0.mlp.c_fc.weight has shape (32, 8), expected (8, 32)")


def test_tied_head_with_other_values_is_refused(tmp_path):
    folder = _folder(tmp_path)
    _edit_tensors(folder, lambda t: t.update({"lm_head.weight": t["transformer.wte.weight"] + 1}))
    _refused(folder, "lm_head.weight that differs from the token embedding", "tie_word_embeddings=true")


def test_integer_tensor_is_refused(tmp_path):
    folder = _folder(tmp_path)
    _edit_tensors(folder, lambda t: t.update({"transformer.ln_f.bias": np.zeros(8, np.int32)}))
    _refused(folder, "tensor transformer.ln_f.bias has dtype int32")


@pytest.mark.parametrize("content,message", [
    (b"\x05\x00\x00\x00\x00\x00\x00\x00{oops", "is not a readable safetensors file"),
    # random bytes: the header length read off them is far beyond the file (an OverflowError before)
    (bytes(range(7, 107)), "its header claims 1,012,478,732,780,767,239 bytes but the file has 100"),
    (b"\x07\x00\x00\x00\x00\x00\x00\x00[1, 2] ", "its header is not a JSON object (got list)"),
])
def test_a_damaged_file_is_refused(tmp_path, content, message):
    folder = _folder(tmp_path)
    (folder / "model.safetensors").write_bytes(content)
    _refused(folder, message)


def test_an_index_naming_a_missing_shard(tmp_path):
    folder = _folder(tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model-1-of-2.safetensors"}}))
    _refused(folder, "lists the shard model-1-of-2.safetensors, which is not in")


def test_without_the_safetensors_package(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    _refused(folder, "pip install numpy-transformer[hf]", exc=ImportError)


@pytest.mark.parametrize("changes, field", [
    (dict(positions="alibi"), "positions='alibi'"), (dict(norm="rmsnorm"), "norm='rmsnorm'"),
    (dict(bias=False), "bias=False"), (dict(num_kv_heads=1), "num_kv_heads=1"),
    (dict(positions="sinusoidal"), "positions='sinusoidal'")])
def test_save_pretrained_refuses_what_hugging_face_cannot_express(tmp_path, changes, field):
    cfg = dict(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)
    cfg.update(changes)
    with pytest.raises(PretrainedFolderError, match="cannot be saved as a Hugging Face folder") as info:
        nt.GPT(**cfg).save_pretrained(tmp_path / "out")
    assert field in str(info.value)
    assert not (tmp_path / "out").exists()                          # nothing written


def test_save_pretrained_into_a_file_path(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(FileExistsError, match="is a file, not a folder"):
        nt.GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8).save_pretrained(tmp_path / "f")


def test_save_pretrained_over_a_sharded_copy_replaces_it(tmp_path):
    folder = _folder(tmp_path)
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    save_file(tensors, folder / "model-00001-of-00001.safetensors", metadata={"format": "pt"})
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {k: "model-00001-of-00001.safetensors" for k in tensors}}))
    model = nt.GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8, ffn="gelu_new", seed=5)
    model.save_pretrained(folder, overwrite=True)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    assert np.array_equal(nt.GPT.from_pretrained(folder).wte.weight.data, model.wte.weight.data)


def test_save_pretrained_refuses_a_folder_that_is_not_empty(tmp_path):
    """Saving a fine-tuned model over the folder it was loaded from would lose the original: a folder
    that holds anything is refused, naming it and what it holds, and nothing is written."""
    folder = _folder(tmp_path / "source")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    model = nt.GPT.from_pretrained(folder)
    model.wte.weight.data[...] += 1.0
    with pytest.raises(FileExistsError, match=r"is not empty \(it holds config.json, model.safetensors\); save to a "
                                              r"new folder, or pass overwrite=True"):
        model.save_pretrained(folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    model.save_pretrained(tmp_path / "new")                                  # a new folder
    (tmp_path / "empty").mkdir()
    model.save_pretrained(tmp_path / "empty")                                # an empty one
    model.save_pretrained(folder, overwrite=True)                            # explicitly
    assert np.array_equal(nt.GPT.from_pretrained(folder).wte.weight.data, model.wte.weight.data)
