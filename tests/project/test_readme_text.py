"""The README's "Train a character-level GPT on your own text" trains on a fixed text of the checkout
(``data/tiny_text.txt``), not on the README itself, whose figures would drift with every edit: its
``train --text`` command names that file, which exists, is tracked and has the size and encoding the
README claims; its ``sample`` command reads the checkpoint the train command saves."""

import shutil
import subprocess

import _readme
import pytest
from _paths import REPO_ROOT

TEXT = "data/tiny_text.txt"


def _text_command():
    found = [argv for argv in _readme.shell_commands() if argv[:4] == _readme.PREFIX + ["train"] and "--text" in argv]
    assert len(found) == 1, f"expected one `train --text` command in the README, found {len(found)}"
    return found[0]


def test_the_readme_trains_on_the_fixed_text_of_the_checkout():
    argv = _text_command()
    named = argv[argv.index("--text") + 1]
    assert named == TEXT, f"the README's `train --text` names {named!r}, expected the fixed {TEXT!r}"
    path = REPO_ROOT / named
    assert path.is_file(), f"{named} does not exist"
    data = path.read_bytes()
    assert 50_000 <= len(data) <= 200_000
    text = data.decode("utf-8")                                  # --tokenizer char needs UTF-8
    assert f"{len(data):,} bytes, {len(text):,} characters of {len(set(text))} distinct" in (
        REPO_ROOT / "data" / "README.md").read_text(encoding="utf-8")
    saved = argv[argv.index("--save") + 1]
    samples = [a for a in _readme.shell_commands() if a[:4] == _readme.PREFIX + ["sample"]]
    assert any(a[4] == saved for a in samples), f"no README sample command reads {saved}"


@pytest.mark.skipif(shutil.which("git") is None or not (REPO_ROOT / ".git").exists(), reason="needs the git checkout")
def test_the_fixed_text_is_tracked():
    proc = subprocess.run(["git", "ls-files", "--error-unmatch", TEXT], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, f"{TEXT} is not tracked by git: {proc.stderr.strip()}"


# -- the figures the README quotes, rerun (slow: the command's 500 steps) -----------------------------
TABLE = "held-out loss (nats/char)"


@pytest.mark.slow
def test_the_quoted_losses_and_sample_are_the_commands(tmp_path, monkeypatch, capsys):
    """The table's held-out losses (at each step it names) and the ```text sample under it are what the
    README's two commands give (seed 0, float32)."""
    import re

    from numpy_transformer.cli import main
    from numpy_transformer.training.trainer import Trainer
    monkeypatch.chdir(REPO_ROOT)                                  # the command names the file from the root
    argv = _text_command()[3:]
    cell = _readme.table(TABLE)[0][TABLE]
    quoted = {int(step): float(loss) for loss, step in re.findall(r"([\d.]+) at (?:step )?(\d+)", cell)}
    assert max(quoted) == 500 and len(quoted) >= 2                # the last step and some before
    trainer = Trainer(_readme.config_of(argv))
    for step, ev in _readme.evaluations(trainer, sorted(quoted)).items():
        assert round(ev.loss, 3) == quoted[step], (step, ev.loss)
    checkpoint = tmp_path / "tiny_text.npz"
    trainer.save(str(checkpoint))
    saved = argv[argv.index("--save") + 1]
    sample = next(a for a in _readme.shell_commands() if a[:5] == _readme.PREFIX + ["sample", saved])[4:]
    sample[0] = str(checkpoint)
    capsys.readouterr()
    assert main(["sample", *sample]) == 0
    shown = re.search(r"```text\n(.*?)\n```", _text_section(), re.S).group(1)
    assert capsys.readouterr().out.rstrip("\n") == shown


def _text_section():
    text = _readme.README.read_text(encoding="utf-8")
    start = text.index("## Train a character-level GPT on your own text")
    return text[start:text.index("\n## ", start + 1)]
