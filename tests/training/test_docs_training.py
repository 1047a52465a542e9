"""docs/training.md's training snippet is what the `train` command runs: executed for a few steps, its
weights and learning rates equal the Trainer's bit for bit; the scheduler recipe there runs as torch's."""

from __future__ import annotations

import re

import _readme
import numpy as np
import pytest
import torch
from _paths import REPO_ROOT

import numpy_transformer as nt
from numpy_transformer.training.trainer import TrainConfig, Trainer

DOC = REPO_ROOT / "docs" / "training.md"
STEPS = 4


def _blocks():
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_training_snippet_is_the_train_commands_loop():
    code = _blocks()[0]
    assert "seed, steps = 0, 1000" in code
    code = code.replace("seed, steps = 0, 1000", f"seed, steps = 0, {STEPS}")
    code = code.replace("num_train=20000", "num_train=2000")     # a smaller data set for the test, both sides
    code = code.replace("    opt.step()\n", "    lrs.append(opt.param_groups[0]['lr'])\n    opt.step()\n")
    trainer = Trainer(TrainConfig(task="reverse", steps=STEPS, num_train=2000))
    results = []
    trainer.train(callback=results.append)
    ns = {"lrs": []}
    exec(compile(code, str(DOC), "exec"), ns)
    assert ns["lrs"] == [r.lr for r in results] == [trainer.schedule(s) for s in range(1, STEPS + 1)]
    ours, ref = ns["model"].state_dict(), trainer.model.state_dict()
    assert ours.keys() == ref.keys()
    for k in ours:
        assert np.array_equal(ours[k], ref[k]), k
    assert ns["sched"].last_epoch == trainer.scheduler.last_epoch == STEPS


def test_warmup_cosine_recipe_matches_torch():
    code = next(b for b in _blocks() if "SequentialLR" in b)
    ours = nt.optim.SGD([nt.Parameter(np.zeros(2))], lr=0.1)
    ref = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1)
    ns_ours, ns_ref = {"nt": nt, "opt": ours}, {"torch": torch, "opt": ref}
    exec(code, ns_ours)
    exec(code.replace("nt.optim.lr_scheduler", "torch.optim.lr_scheduler"), ns_ref)
    lrs = []
    for _ in range(1000):
        assert ours.param_groups[0]["lr"] == ref.param_groups[0]["lr"]
        lrs.append(ours.param_groups[0]["lr"])
        ours.step(), ref.step(), ns_ours["sched"].step(), ns_ref["sched"].step()
    assert lrs[0] == 0.1 * 0.01 and max(lrs) == lrs[100] == 0.1 and abs(lrs[-1] - 1e-5) < 1e-6


@pytest.mark.slow
def test_the_lockstep_run_prints_what_the_doc_shows(capsys):
    """'Watching NumPy and PyTorch agree': the doc's command, run, prints the held-out figures of the
    output shown there, and every loss agrees to rounding (the doc: ~1e-16; here: below 1e-15), the
    final weights to the order shown (relative, below 1e-9)."""
    from numpy_transformer.cli import main
    argv = _readme.train_command("--dtype", "float64", "--steps", "400", path=DOC)
    assert "--check-torch" in argv
    assert main(argv + ["--quiet"]) == 0
    out = re.sub(r"\s+", " ", capsys.readouterr().out)
    shown = re.sub(r"\s+", " ", DOC.read_text())
    held_out = re.search(r"held-out loss [0-9.]+ token acc [0-9.]+% sequence acc [0-9.]+% \(1000 examples\)", shown)
    assert held_out.group(0) in out, out
    m = re.search(r"(\d+) lockstep steps; largest loss difference ([0-9.e+-]+) \(relative\); final weights max abs "
                  r"diff ([0-9.e+-]+), max relative ([0-9.e+-]+)", out)
    assert m and int(m.group(1)) == 400, out
    assert float(m.group(2)) < 1e-15 and float(m.group(4)) < 1e-9, out
