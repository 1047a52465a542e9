"""Every ```python block of the README runs as written, in order, in one session (later blocks use
what earlier ones defined, as a reader typing them into one interpreter would): a feature is done when
a user can run it from the README."""

import re

from _paths import REPO_ROOT

README = REPO_ROOT / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_python_blocks_run_in_order(tmp_path, monkeypatch):
    import _readme
    assert len(BLOCKS) >= 5
    monkeypatch.chdir(tmp_path)
    _readme.run_script_commands(tmp_path)          # what the blocks read (scripts/tiny_hf_folder.py's folder)
    ns = {"__name__": "__readme__"}
    for i, code in enumerate(BLOCKS):
        exec(compile(code, f"README.md python block {i}", "exec"), ns)
    assert ns["llama"].config.modern and ns["out"] is not None


def test_every_train_command_of_the_readme_is_a_valid_configuration():
    """The commands the slow tests rerun for the quoted figures (tests/_readme.py) parse as `train` parses them."""
    import _readme
    commands = [argv[3:] for argv in _readme.shell_commands() if argv[:4] == _readme.PREFIX + ["train"]]
    assert len(commands) >= 8
    for argv in commands:
        if "--resume" not in argv:
            _readme.config_of(argv)
    assert _readme.config_of(_readme.train_command("--model", "seq2seq", "--task", "reverse")).lr == 5e-4


def test_quoted_figures_are_read_as_the_intervals_they_claim():
    import _readme
    q = _readme.quoted("**99.70–99.72%** (more)")
    assert q == (99.70, 99.72, 2) and q.holds(99.7049) and not q.holds(99.7251) and not q.holds(99.69)
    assert _readme.quoted("99.94") == (99.94, 99.94, 2) and _readme.quoted("**100.00%**").holds(99.996)
    assert _readme.milestones("**99.90%** (98.9% at step 1000)", 1500, 200) == {1000: (98.9, 98.9, 1),
                                                                                 1500: (99.9, 99.9, 2)}
    assert list(_readme.milestones("**100.00%** (from step 400 on)", 1000, 200)) == [400, 600, 800, 1000]
    assert _readme.milestones("**100.00%** (already at step 500)", 800, 200)[500] == (100.0, 100.0, 2)
    assert _readme.over_seeds("**99.70–100.00%** over seeds 0–2 (99.4% at step 1000)") == ([0, 1, 2],
                                                                                         (99.7, 100.0, 2))
    assert _readme.over_seeds("**100.00%**") is None


def _files_read_and_written(argv: list[str]) -> tuple[list[str], list[str]]:
    """The checkpoints and logs a README command reads, and those it writes: ``--save X`` writes X and its
    log ``X.log.jsonl`` (unless ``--no-log``), ``--resume X`` reads X (and writes it back without --save);
    any other ``.npz`` or ``.log.jsonl`` word is read."""
    reads, writes = [], []
    for i, word in enumerate(argv):
        before = argv[i - 1] if i else ""
        if before == "--save":
            writes.append(word)
            if "--no-log" not in argv:
                writes.append(word.removesuffix(".npz") + ".log.jsonl")
        elif before == "--resume":
            reads.append(word)
        elif word.endswith((".npz", ".log.jsonl")) and before not in ("--out", "--log"):
            reads.append(word)
    return reads, writes


def test_every_checkpoint_a_readme_command_reads_is_written_by_an_earlier_one():
    """Run in order from a fresh clone, each command finds its files; no two runs save to one name."""
    import _readme
    written, saved = set(), []
    for argv in _readme.shell_commands():
        if argv[:3] != _readme.PREFIX:
            continue
        reads, writes = _files_read_and_written(argv)
        missing = [f for f in reads if f not in written]
        assert not missing, f"`{' '.join(argv)}` reads {missing}, which no README command before it writes"
        written.update(writes)
        saved += [argv[i + 1] for i, w in enumerate(argv[:-1]) if w == "--save"]
    assert len(saved) == len(set(saved)), f"two README runs save to the same checkpoint: {sorted(saved)}"
    assert _files_read_and_written(["train", "--resume", "a.npz", "--save", "b.npz"]) == (
        ["a.npz"], ["b.npz", "b.log.jsonl"])
