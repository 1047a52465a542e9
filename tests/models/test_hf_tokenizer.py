"""A Hugging Face folder's ``tokenizer.json`` (``nt.load_tokenizer``, the optional ``tokenizers`` package):
it encodes and decodes as ``transformers``' fast tokenizer of the same file, and ``sample FOLDER
--prompt TEXT`` gives the text ``transformers``' own ``generate`` gives; without the file or the package
the folder works in token ids, with one message saying why. The tokenizer is trained offline on a few
sentences (GPT-2's byte-level BPE) into a tiny random GPT-2 folder."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from _tiny_folders import WORDS, write_gpt2_folder

import numpy_transformer as nt
from numpy_transformer.cli import main
from numpy_transformer.models.pretrained import PretrainedFolderError

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

PROMPTS = ["the cat sat", "a dog and the mat,", " the log.\nthe", "Zebra!"]       # the last: unseen words


@pytest.fixture
def folder(tmp_path):
    write_gpt2_folder(tmp_path / "tiny", dtype="float32")
    return tmp_path / "tiny"


def test_load_tokenizer_encodes_and_decodes_as_transformers(folder):
    transformers = pytest.importorskip("transformers")
    ref = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    tok = nt.load_tokenizer(folder)
    assert tok.vocab_size == len(ref)
    for text in [*PROMPTS, WORDS]:
        ids = tok.encode(text)
        assert ids.dtype == np.int64 and ids.tolist() == ref(text)["input_ids"]
        assert tok.decode(ids) == ref.decode(ids.tolist()) == text               # byte-level BPE round trips
    special = np.array([tok.vocab_size - 1, *tok.encode("the cat"), 0])
    assert tok.decode(special) == ref.decode(special.tolist())
    assert tok.decode(special, skip_special_tokens=True) == ref.decode(special.tolist(), skip_special_tokens=True)
    with pytest.raises(ValueError, match=r"token id 999 is outside the vocabulary \[0, \d+\) of .*tokenizer.json"):
        tok.decode([999])


def test_sample_gives_the_text_transformers_generate_gives(folder, capsys):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    ref_tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    ref = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    capsys.readouterr()                                                   # transformers' progress bar
    for prompt in PROMPTS[:3]:
        assert main(["sample", str(folder), "--prompt", prompt, "--max-new-tokens", "6", "--greedy"]) == 0
        out, err = capsys.readouterr()
        ids = torch.tensor([ref_tok(prompt)["input_ids"]])
        with torch.no_grad():
            want = ref.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0)
        assert err == "" and out == ref_tok.decode(want[0].tolist(), skip_special_tokens=True)
    # the Python API: the same text from generate's ids (ids in, ids out)
    model, tok = nt.GPT.from_pretrained(folder), nt.load_tokenizer(folder)
    gen = model.generate(tok.encode(PROMPTS[0])[None], 6, use_cache=True)
    assert main(["sample", str(folder), "--prompt", PROMPTS[0], "--max-new-tokens", "6", "--greedy"]) == 0
    assert capsys.readouterr().out == tok.decode(gen[0], skip_special_tokens=True)


def test_without_tokenizer_json_the_folder_works_in_ids(tmp_path, capsys):
    model = write_gpt2_folder(tmp_path / "ids", tokenizer=False, dtype="float32")
    (tmp_path / "ids" / "vocab.json").write_text("{}")
    with pytest.raises(PretrainedFolderError, match=r"has no tokenizer.json \(it has vocab.json, which this code "
                                                    r"does not read\); without it the model works in token ids"):
        nt.load_tokenizer(tmp_path / "ids")
    assert main(["sample", str(tmp_path / "ids"), "--prompt", "5 6", "--max-new-tokens", "2", "--greedy"]) == 0
    want = model.generate(np.array([[5, 6]]), 2, use_cache=True)[0]
    assert capsys.readouterr().out == " ".join(map(str, want.tolist()))


def test_without_the_tokenizers_package_one_message_says_why(folder, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)                  # import tokenizers -> ImportError
    with pytest.raises(ImportError, match=r"needs the tokenizers package \(pip install tokenizers"):
        nt.load_tokenizer(folder)
    assert main(["sample", str(folder), "--prompt", "5 6", "--max-new-tokens", "2", "--greedy"]) == 0
    out, err = capsys.readouterr()
    assert len(out.split()) == 4 and err.count("\n") == 1
    assert err.startswith(f"note: {folder}: reading ") and "needs the tokenizers package" in err
    assert main(["sample", str(folder), "--prompt", "the cat", "--max-new-tokens", "2"]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and lines[-1].startswith("error: --prompt must be token ids separated by spaces, got 'the cat'")
    assert "needs the tokenizers package" in lines[-1]


def test_a_damaged_tokenizer_json_and_a_foreign_one_are_refused(folder, tmp_path, capsys):
    (folder / "tokenizer.json").write_text("{not json")
    with pytest.raises(PretrainedFolderError, match=r"tokenizer.json is not a tokenizer file tokenizers can read"):
        nt.load_tokenizer(folder)
    assert main(["sample", str(folder), "--prompt", "the", "--max-new-tokens", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a tokenizer file" in err and "Traceback" not in err
    small = tmp_path / "small"
    write_gpt2_folder(small, vocab_size=300, tokenizer=False)
    from _tiny_folders import write_tokenizer
    write_tokenizer(small, vocab_size=300)
    foreign = nt.GPT(vocab_size=100, block_size=8, n_layer=1, n_head=2, n_embd=8, ffn="gelu_new", seed=0)
    foreign.save_pretrained(small, overwrite=True)
    assert main(["sample", str(small), "--prompt", "the", "--max-new-tokens", "2"]) == 2
    assert "tokens but the model 100; the tokenizer belongs to another model" in capsys.readouterr().err
