"""Your own text as a task (``numpy_transformer.tasks.text``): the tokenizers round-trip, the held-out
part is the text's end, the windows are next-token pairs, and each bad file is refused by name."""

import numpy as np
import pytest

from numpy_transformer.tasks.text import (
    ByteTokenizer,
    CharTokenizer,
    make_text_task,
    read_text,
    tokenizer_from_dict,
    unigram_entropy,
)

TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. Ünïcödé ✓\n" * 3


def test_char_tokenizer_round_trips_and_through_its_dict():
    tok = CharTokenizer.from_text(TEXT)
    assert tok.chars == "".join(sorted(set(TEXT))) and tok.vocab_size == len(set(TEXT))
    ids = tok.encode(TEXT)
    assert ids.dtype == np.int64 and tok.decode(ids) == TEXT
    again = tokenizer_from_dict(tok.to_dict())
    assert again.chars == tok.chars and again.decode(ids) == TEXT
    with pytest.raises(ValueError, match="'Z' is not in this tokenizer's vocabulary"):
        tok.encode("Z")
    with pytest.raises(ValueError, match=r"token id 999 is outside"):
        tok.decode([999])


def test_byte_tokenizer_round_trips_any_bytes():
    tok = ByteTokenizer()
    assert tok.decode(tok.encode(TEXT)) == TEXT
    raw = bytes(range(256))
    assert tok.encode(raw).tolist() == list(range(256))
    assert isinstance(tokenizer_from_dict(tok.to_dict()), ByteTokenizer)
    with pytest.raises(ValueError, match="stored tokenizer"):
        tokenizer_from_dict({"kind": "bpe"})


def test_split_is_the_end_and_windows_predict_the_next_token(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text(TEXT, encoding="utf-8")
    d = make_text_task(path, "char", block_size=8, val_fraction=0.25)
    ids = d.tokenizer.encode(TEXT)
    n_val = int(np.ceil(len(ids) * 0.25))
    assert d.num_tokens == len(ids) and d.num_train_tokens == len(ids) - n_val
    held = ids[len(ids) - n_val:]
    assert d.train_src.shape == (d.num_train_tokens - 8, 8) == d.train_tgt.shape
    for i in (0, 7, len(d.train_src) - 1):            # every offset, target one token on
        assert d.train_src[i].tolist() == ids[i:i + 8].tolist()
        assert d.train_tgt[i].tolist() == ids[i + 1:i + 9].tolist()
    assert d.train_tgt[-1, -1] == ids[d.num_train_tokens - 1]        # no training target in the held-out end
    assert d.val_src.shape == ((n_val - 1) // 8, 8)
    assert d.val_src.reshape(-1).tolist() == held[:d.val_src.size].tolist()
    assert d.val_tgt.reshape(-1).tolist() == held[1:d.val_src.size + 1].tolist()
    counts = np.bincount(ids[:d.num_train_tokens], minlength=d.vocab_size)
    p = counts[counts > 0] / counts.sum()
    assert d.entropy == pytest.approx(-(p * np.log(p)).sum(), rel=1e-12)
    assert unigram_entropy(np.zeros(5, int), 3) == 0.0


def test_bad_files_are_refused_by_name(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"--text .*empty.txt: the file is empty"):
        read_text(empty)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"abc\xff\xfe\x00def")
    with pytest.raises(ValueError, match=r"blob.bin is not UTF-8 text \(byte 0xff at offset 3\).*--tokenizer byte"):
        read_text(binary, "char")
    tok, ids, _ = read_text(binary, "byte")                # the byte tokenizer takes it
    assert ids.tolist() == list(b"abc\xff\xfe\x00def")
    short = tmp_path / "short.txt"
    short.write_text("hello world, a short text", encoding="utf-8")        # 25 characters
    with pytest.raises(ValueError, match=r"short.txt: 25 char tokens are too few for --seq-len 8 with "
                                         r"--val-fraction 0.1.*expected at least 90 tokens"):
        make_text_task(short, "char", block_size=8, val_fraction=0.1)
    with pytest.raises(ValueError, match=r"missing.txt: cannot read it"):
        read_text(tmp_path / "missing.txt")
