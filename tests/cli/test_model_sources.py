"""``predict``, ``evaluate``, ``plot attention``, ``sample`` and the trace (``train --resume --trace-every``)
on the models no synthetic task describes: a ``train --text`` checkpoint, checkpoints saved from Python,
Hugging Face folders (with a tokenizer.json). Where a command applies it works; where it does not, one
error line says what it needs. Bad folders and bad text files: one error line each."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from _tiny_folders import write_gpt2_folder

import numpy_transformer as nt
from numpy_transformer.cli import main
from numpy_transformer.training.checkpoint import save_checkpoint

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

TEXT = "it was the best of times, it was the worst of times, it was the age of wisdom.\n" * 6
TINY = ["--model", "gpt", "--seq-len", "16", "--d-model", "16", "--nhead", "2", "--layers", "1",
        "--dim-feedforward", "32", "--batch-size", "8", "--eval-every", "0", "--quiet"]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("sources")
    (d / "t.txt").write_text(TEXT, encoding="utf-8")
    assert main(["train", *TINY, "--text", str(d / "t.txt"), "--steps", "2", "--save", str(d / "text.npz"),
                 "--log", str(d / "text.log.jsonl")]) == 0
    save_checkpoint(d / "gpt.npz", nt.GPT(vocab_size=20, block_size=16, n_layer=1, n_head=2, n_embd=8, seed=0))
    save_checkpoint(d / "enc.npz", nt.TransformerModel(vocab_size=12, d_model=8, nhead=2, num_layers=1,
                                                       dim_feedforward=16, max_len=6, seed=0))
    save_checkpoint(d / "s2s.npz", nt.Seq2SeqModel(12, 12, d_model=8, nhead=2, num_encoder_layers=1,
                                                   num_decoder_layers=1, dim_feedforward=16, max_len=6, seed=0))
    write_gpt2_folder(d / "hf", dtype="float32")
    write_gpt2_folder(d / "hf_ids", tokenizer=False, dtype="float32")
    nt.GPT(vocab_size=20, block_size=16, n_layer=1, n_head=4, n_embd=16, positions="rope", norm="rmsnorm",
           ffn="swiglu", num_kv_heads=2, bias=False, seed=0).save_pretrained(d / "llama")   # grouped-query attention
    return d


def _run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, re.sub(r"\n {4}(?=\S)", " ", out), err                # fit's wrapped lines joined


def _one_error(capsys, *argv):
    status, out, err = _run(capsys, *argv)
    assert status == 2 and out == "", (out, err)
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


def test_predict_shows_each_next_token(sources, capsys):
    model = nt.GPT.from_pretrained(sources / "hf")
    tok = nt.load_tokenizer(sources / "hf")
    status, out, _ = _run(capsys, "predict", sources / "hf", "--tokens", "the cat sat on")
    ids = tok.encode("the cat sat on")
    pred = model(ids[None]).argmax(-1)[0]
    right = int((pred[:-1] == ids[1:]).sum())
    assert status == 0 and f"example 1: {right} of {len(ids) - 1} next tokens right" in out
    assert "␣cat" in out                                    # tokens as text, spaces made visible
    status, out, _ = _run(capsys, "predict", sources / "text.npz", "--tokens", "it was", "--tokens", "the age")
    assert status == 0 and "example 2: " in out and "of 6 next tokens right" in out
    status, out, _ = _run(capsys, "predict", sources / "gpt.npz", "--tokens", "1 2 3 4")
    assert status == 0 and "a gpt checkpoint saved from Python" in out and "of 3 next tokens right" in out
    status, out, _ = _run(capsys, "predict", sources / "enc.npz", "--tokens", "1 2 3 4")
    pred = nt.TransformerModel(vocab_size=12, d_model=8, nhead=2, num_layers=1, dim_feedforward=16, max_len=6,
                               seed=0).eval()(np.array([[1, 2, 3, 4]])).argmax(-1)[0]
    assert status == 0 and "  predicted  " + "".join(f"{int(i):>2}" for i in pred) in out


def test_predict_refusals_say_what_is_needed(sources, capsys):
    assert "give --tokens TEXT" in _one_error(capsys, "predict", sources / "hf")
    assert "give --tokens IDS" in _one_error(capsys, "predict", sources / "gpt.npz")
    assert "needs its task's BOS and EOS ids" in _one_error(capsys, "predict", sources / "s2s.npz", "--tokens", "3 4")
    assert "so the prompt is token ids" in _one_error(capsys, "predict", sources / "hf_ids", "--tokens", "the cat")
    assert "the model reads 1 to 16 (its block size)" in _one_error(
        capsys, "predict", sources / "text.npz", "--tokens", "it was the best of times")


def test_evaluate_on_a_text_file(sources, capsys):
    status, out, _ = _run(capsys, "evaluate", sources / "hf", "--text", sources / "t.txt")
    model, tok = nt.GPT.from_pretrained(sources / "hf"), nt.load_tokenizer(sources / "hf")
    ids = tok.encode(TEXT)
    n = (len(ids) - 1) // 32
    logits = model(ids[:n * 32].reshape(n, 32)).reshape(-1, model.config.vocab_size).astype(np.float64)
    tgt = ids[1:n * 32 + 1]
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    loss = -logp[np.arange(len(tgt)), tgt].mean()
    assert status == 0 and f"{n} windows of 32 tokens ({len(ids)} tokens): loss {loss:.4f} nats/token" in out
    status, out, _ = _run(capsys, "evaluate", sources / "text.npz", "--text", sources / "t.txt")
    assert status == 0 and "perplexity" in out
    assert _run(capsys, "evaluate", sources / "text.npz")[0] == 0                # its own held-out end
    assert "give --text FILE" in _one_error(capsys, "evaluate", sources / "hf")
    assert "holds no task or text" in _one_error(capsys, "evaluate", sources / "enc.npz")
    err = _one_error(capsys, "evaluate", sources / "gpt.npz", "--text", sources / "t.txt")
    assert "no tokenizer to read text with (it was saved from Python with no tokenizer)" in err, err
    err = _one_error(capsys, "evaluate", sources / "hf_ids", "--text", sources / "t.txt")
    assert "has no tokenizer to read text with (it has no tokenizer.json); evaluate --text needs one" in err, err
    assert "prompt" not in err, err                          # evaluate has no prompt to give as ids


@pytest.mark.parametrize("content, message", [
    (b"", "the file is empty"),
    (b"it was\xff\xfe", "is not UTF-8 text (byte 0xff at offset 6)"),
    (b"i", "1 token; expected at least 2"),
    (b"Zebra", "the character 'Z' is not in this tokenizer's vocabulary"),
])
def test_evaluate_bad_text_files(sources, capsys, tmp_path, content, message):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    err = _one_error(capsys, "evaluate", sources / "text.npz", "--text", bad)
    assert err.startswith(f"error: --text {bad}") and message in err


def test_plot_attention_of_each_source(sources, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "a.png"
    for argv in ([sources / "hf", "--tokens", "the cat sat"], [sources / "text.npz", "--random", "--seed", "0"],
                 [sources / "text.npz", "--tokens", "it was"], [sources / "gpt.npz", "--tokens", "1 2 3"],
                 [sources / "enc.npz", "--tokens", "1 2 3 4 5 6"], [sources / "llama", "--tokens", "1 2 3"]):
        status, stdout, err = _run(capsys, "plot", "attention", *argv, "--out", out)
        assert status == 0 and f"wrote {out}" in stdout, err
    assert "give --tokens TEXT" in _one_error(capsys, "plot", "attention", sources / "hf", "--out", out)
    assert "give --tokens IDS" in _one_error(capsys, "plot", "attention", sources / "enc.npz", "--out", out)
    assert "BOS and EOS" in _one_error(capsys, "plot", "attention", sources / "s2s.npz", "--out", out)


def test_sample_from_a_python_checkpoint_and_refusals(sources, capsys):
    status, out, err = _run(capsys, "sample", sources / "gpt.npz", "--prompt", "1 2", "--max-new-tokens", "3",
                            "--greedy")
    model = nt.GPT(vocab_size=20, block_size=16, n_layer=1, n_head=2, n_embd=8, seed=0)
    want = model.generate(np.array([[1, 2]]), 3, use_cache=True)[0]
    assert status == 0 and err == "" and out == " ".join(map(str, want.tolist()))
    assert "sample continues a language model" in _one_error(capsys, "sample", sources / "enc.npz", "--prompt", "1")


def test_the_trace_of_a_text_run_and_what_cannot_resume(sources, capsys, tmp_path):
    status, out, err = _run(capsys, "train", "--resume", sources / "text.npz", "--steps", "4", "--trace-every", "1",
                            "--save", tmp_path / "more.npz", "--no-log")
    assert status == 0 and "trace of step 3" in err + out
    for path in (sources / "hf", sources / "gpt.npz"):
        err = _one_error(capsys, "train", "--resume", path, "--steps", "3", "--trace-every", "1")
        assert f"--resume {path}" in err and "--resume continues a run saved by train --save" in err


def _bad_folder(tmp_path, kind):
    folder = tmp_path / kind
    write_gpt2_folder(folder, dtype="float32")
    if kind == "no-config":
        (folder / "config.json").unlink()
    elif kind == "model-type":
        cfg = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**cfg, "model_type": "bert"}))
    elif kind == "bin-only":
        (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    else:                                                   # an index naming a shard that is not there
        (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
        names = json.loads((folder / "config.json").read_text())        # any names will do for the index
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
            "wte.weight": "model-00001-of-00002.safetensors", "wpe.weight": "model-00002-of-00002.safetensors"},
            "metadata": {"n": len(names)}}))
    return folder


@pytest.mark.parametrize("kind, message", [
    ("no-config", "has no config.json"), ("model-type", "bert"), ("bin-only", "pytorch_model.bin"),
    ("missing-shard", "model-00002-of-00002.safetensors"),
])
@pytest.mark.parametrize("command", [["sample", "--prompt", "the", "--max-new-tokens", "2"],
                                     ["predict", "--tokens", "the"], ["evaluate", "--text", "FILE"],
                                     ["plot", "attention", "--tokens", "the"]])
def test_bad_folders_are_one_error_line_in_every_command(sources, capsys, tmp_path, kind, message, command):
    folder = _bad_folder(tmp_path, kind)
    argv = [*command[:2 if command[0] == "plot" else 1], folder, *command[2 if command[0] == "plot" else 1:]]
    argv = [sources / "t.txt" if a == "FILE" else a for a in argv]
    if command[0] == "plot":
        pytest.importorskip("matplotlib")
        argv += ["--out", tmp_path / "a.png"]
    assert message in _one_error(capsys, *argv)
