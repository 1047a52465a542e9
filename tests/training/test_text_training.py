"""``train --model gpt --text FILE`` end to end, and ``sample``: the checkpoint keeps the vocabulary,
sample writes exactly the prompt and its continuation to stdout, resume continues a text run exactly,
and each bad file is one error line."""

import numpy as np
import pytest

from numpy_transformer.cli import main
from numpy_transformer.cli.sample import load_sampler
from numpy_transformer.training.checkpoint import load_checkpoint

TEXT = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
        "foolishness, it was the epoch of belief, it was the epoch of incredulity.\n") * 4
TINY = ["--model", "gpt", "--seq-len", "16", "--d-model", "16", "--nhead", "2", "--layers", "1",
        "--dim-feedforward", "32", "--batch-size", "8", "--warmup", "5", "--eval-every", "0", "--quiet"]


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "dickens.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def _train(capsys, *args):
    status = main(["train", *TINY, *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def test_train_text_then_sample(tmp_path, text_file, capsys):
    ckpt = tmp_path / "run.npz"
    status, out, err = _train(capsys, "--text", text_file, "--steps", 6, "--save", ckpt, "--no-log")
    assert status == 0, err
    assert "held-out loss" in out and "perplexity" in out and "unigram entropy" in out
    stored = load_checkpoint(str(ckpt)).extra_json["text"]
    assert stored["tokenizer"] == {"kind": "char", "chars": "".join(sorted(set(TEXT)))}
    assert main(["sample", str(ckpt), "--prompt", "it was", "--max-new-tokens", "9", "--seed", "1"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("it was") and len(out) == len("it was") + 9 and set(out) <= set(TEXT)
    model, encode, decode = load_sampler(str(ckpt))              # the stored vocabulary decodes the ids
    gen = model.generate(encode("it was")[None], 9, do_sample=True, temperature=1.0, seed=1, use_cache=True)
    assert decode(gen[0]) == out
    assert main(["sample", str(ckpt), "--prompt", "it was", "--max-new-tokens", "5", "--greedy"]) == 0
    assert len(capsys.readouterr().out) == len("it was") + 5
    assert main(["sample", str(ckpt), "--prompt", "Zebra", "--max-new-tokens", "5"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert err.startswith("error: --prompt 'Zebra': the character 'Z' is not in")
    assert main(["predict", str(ckpt), "--random", "2"]) == 0          # next tokens of held-out windows
    out = " ".join(capsys.readouterr().out.split())                  # the header's wrapped lines joined
    assert "a train --text checkpoint" in out and out.count("next tokens right") == 2
    assert main(["evaluate", str(ckpt)]) == 0
    assert "task text" in capsys.readouterr().out


def test_every_option_and_the_byte_tokenizer(tmp_path, text_file, capsys):
    status, out, err = _train(capsys, "--text", text_file, "--tokenizer", "byte", "--steps", 4, "--norm", "rmsnorm",
                              "--pos-encoding", "rope", "--activation", "swiglu", "--num-kv-heads", "1",
                              "--schedule", "constant", "--clip", "0.5", "--trace-every", "2",
                              "--save", tmp_path / "b.npz", "--no-log")
    assert status == 0, err
    assert "only the byte frequencies" in out
    assert load_checkpoint(str(tmp_path / "b.npz")).extra_json["text"]["tokenizer"] == {"kind": "byte"}
    assert main(["sample", str(tmp_path / "b.npz"), "--prompt", "it", "--max-new-tokens", "4"]) == 0
    assert capsys.readouterr().out.startswith("it")


def test_resume_of_a_text_run_is_exact(tmp_path, text_file, capsys):
    whole, part = tmp_path / "whole.npz", tmp_path / "part.npz"
    assert _train(capsys, "--text", text_file, "--steps", 6, "--save", whole, "--no-log")[0] == 0
    assert _train(capsys, "--text", text_file, "--steps", 3, "--save", part, "--no-log")[0] == 0
    status, _, err = _train(capsys, "--resume", part, "--steps", 6, "--no-log")
    assert status == 0, err
    a, b = load_checkpoint(str(whole)).model_state, load_checkpoint(str(part)).model_state
    assert all(np.array_equal(a[k], b[k]) for k in a)
    text_file.write_text(TEXT.upper(), encoding="utf-8")           # another text: refused, named
    status, _, err = _train(capsys, "--resume", part, "--steps", 8, "--no-log")
    assert status != 0 and "trained on another text" in err and "Traceback" not in err


@pytest.mark.parametrize("content, tokenizer, message", [
    (b"", "char", "the file is empty"),
    (b"abc\xff\x00" * 100, "char", "is not UTF-8 text (byte 0xff at offset 3); the char tokenizer needs UTF-8: "
                                   "use --tokenizer byte"),
    (b"too short for a block", "char", "21 char tokens are too few for --seq-len 16"),
    (b"too short for a block", "byte", "21 byte tokens are too few for --seq-len 16"),
])
def test_bad_text_files_are_one_error_line(tmp_path, capsys, content, tokenizer, message):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    status, out, err = _train(capsys, "--text", bad, "--tokenizer", tokenizer, "--steps", 2, "--no-log")
    assert status != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --text ") and str(bad) in lines[0] and message in lines[0]


def test_sample_from_a_hugging_face_folder_in_token_ids(tmp_path, text_file, capsys):
    pytest.importorskip("safetensors")
    ckpt, folder = tmp_path / "run.npz", tmp_path / "hf"
    assert _train(capsys, "--text", text_file, "--steps", 2, "--pos-encoding", "learned", "--save", ckpt,
                  "--no-log")[0] == 0
    model = load_sampler(str(ckpt))[0]
    model.save_pretrained(folder)
    assert main(["sample", str(folder), "--prompt", "3 4", "--max-new-tokens", "3", "--greedy"]) == 0
    out, err = capsys.readouterr()
    want = model.generate(np.array([[3, 4]]), 3, use_cache=True)[0]
    assert err == "" and out == " ".join(map(str, want.tolist()))
    assert main(["sample", str(folder), "--prompt", "it was", "--max-new-tokens", "3"]) == 2
    assert "the prompt is token ids" in capsys.readouterr().err


def test_num_train_with_text_is_refused(text_file, capsys):
    status, out, err = _train(capsys, "--text", text_file, "--num-train", 50, "--steps", 2, "--no-log")
    assert status != 0 and err.strip() == ("error: --num-train: with --text the text decides the training windows "
                                           "and the held-out ones; set --val-fraction (and --seq-len) instead")


def test_loading_a_text_checkpoint_counts_the_windows_as_views(tmp_path, text_file, capsys, monkeypatch):
    """The windows at every offset share one array of ids: loading a text checkpoint does not estimate
    them as num_train separate rows (which would refuse a large text on a machine that trains it)."""
    from numpy_transformer.training import checkpoint_validate
    ckpt = tmp_path / "run.npz"
    assert _train(capsys, "--text", text_file, "--steps", 2, "--save", ckpt, "--no-log")[0] == 0
    rows = load_checkpoint(str(ckpt)).config["num_train"]
    monkeypatch.setattr(checkpoint_validate, "memory_bytes", lambda: rows * 500)   # rows: 1288 bytes each
    assert load_checkpoint(str(ckpt)).extra_json["text"]["tokenizer"]["kind"] == "char"
