"""The README's walkthrough "Compare with transformers, generate, fine-tune one step and save back": its
command writes the tiny random folder (``scripts/tiny_hf_folder.py``, with ``transformers``), its block
runs as written there, and each claim the README makes of it holds: ours equals transformers' logits
as loaded and after the step, greedy generation gives transformers' tokens (the block asserts it), the
step lowers the loss, the source folder is untouched, and saving over a folder that holds anything is
refused."""

import re

import numpy as np
import pytest
from _paths import REPO_ROOT

pytest.importorskip("transformers")
pytest.importorskip("safetensors")

README = REPO_ROOT / "README.md"
SECTION = "### Compare with transformers, generate, fine-tune one step and save back"


def _walkthrough():
    text = README.read_text(encoding="utf-8")
    section = text[text.index(SECTION):]
    section = section[:section.index("\n## ")]
    return re.findall(r"```python\n(.*?)```", section, re.S)[0]


def test_the_walkthrough_runs_as_written_and_its_claims_hold(tmp_path, monkeypatch, capsys):
    import _readme
    monkeypatch.chdir(tmp_path)
    assert ["python", "scripts/tiny_hf_folder.py", "gpt2", "tiny-gpt2"] in _readme.run_script_commands(tmp_path)
    source = {p.name: p.read_bytes() for p in (tmp_path / "tiny-gpt2").iterdir()}
    ns = {"__name__": "__readme__"}
    exec(compile(_walkthrough(), "README.md walkthrough", "exec"), ns)
    assert ns["err_loaded"] < 1e-12 and ns["err_tuned"] < 1e-12
    assert float(ns["loss_after"]) < float(ns["loss"])
    printed = capsys.readouterr().out
    quoted = re.search(r"It prints `(loss [\d.]+ -> [\d.]+)`", README.read_text(encoding="utf-8")).group(1)
    assert quoted in printed                                      # the figures the README quotes
    assert {p.name: p.read_bytes() for p in (tmp_path / "tiny-gpt2").iterdir()} == source
    with pytest.raises(FileExistsError, match="is not empty"):
        ns["gpt2"].save_pretrained("tiny-gpt2-tuned")
    with pytest.raises(FileExistsError, match="is not empty"):
        ns["gpt2"].save_pretrained("tiny-gpt2")
    np.testing.assert_array_equal(ns["out"][:, :8], ns["ids"][:, :8])


def test_the_script_refuses_a_folder_that_is_not_empty(tmp_path, capsys):
    import importlib.util
    spec = importlib.util.spec_from_file_location("tiny_hf_folder", REPO_ROOT / "scripts" / "tiny_hf_folder.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert script.main(["gpt2", str(tmp_path / "full")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: FOLDER") and "is not an empty folder" in err[0]
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    assert script.main(["llama", str(tmp_path / "llama")]) == 0
    import numpy_transformer as nt
    assert nt.GPT.from_pretrained(tmp_path / "llama").config.num_kv_heads == 2
