"""Soak: many training steps with memory held flat.

After every step no module holds a forward cache (each backward released its own), and neither the
memory NumPy and Python allocate (tracemalloc) nor the process's resident size nor its open files grow
with the number of steps. The short version runs in the default suite; the long one (thousands of steps,
with evaluation and checkpoints as the ``train`` command does them) is marked slow::

    .venv/bin/python -m pytest -m slow tests/training/test_soak.py
"""

from __future__ import annotations

import gc
import os
import tracemalloc

import numpy as np
import pytest

from numpy_transformer.training.trainer import TrainConfig, Trainer

KIB = 1024


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _open_files():
    return len(os.listdir("/proc/self/fd"))


def _caches_left(trainer):
    left = [name or "model" for name, m in trainer.model.named_modules() if m._caches]
    if trainer.criterion._cache is not None:
        left.append("criterion")
    return left


def soak(config, steps, warmup, every, tmp_path=None, eval_every=0):
    """Train ``steps`` steps; after ``warmup`` steps sample (step, traced bytes, RSS, open files) every
    ``every`` steps. Checks after *every* step that no forward cache is left alive."""
    trainer = Trainer(config)
    samples = []
    leaks = []
    tracemalloc.start()
    try:
        def on_step(r):
            left = _caches_left(trainer)
            if left:
                leaks.append((r.step, left))
            if eval_every and r.step % eval_every == 0:
                trainer.evaluate(max_examples=64)
                trainer.save(tmp_path / "soak.npz")
            if r.step >= warmup and (r.step - warmup) % every == 0:
                gc.collect()
                samples.append((r.step, tracemalloc.get_traced_memory()[0], _rss(), _open_files()))
        trainer.train(steps=steps, callback=on_step)
    finally:
        tracemalloc.stop()
    assert not leaks, f"forward caches alive after backward: {leaks[:3]}"
    return trainer, samples


def _assert_flat(samples, traced_slack, rss_slack):
    steps = np.array([s[0] for s in samples], dtype=float)
    traced = np.array([s[1] for s in samples], dtype=float)
    rss = np.array([s[2] for s in samples], dtype=float)
    files = [s[3] for s in samples]
    report = "\n".join(f"  step {s:>6}: traced {t / KIB:9.1f} KiB  rss {r / KIB / KIB:8.1f} MiB  files {f}"
                       for s, t, r, f in samples)
    assert traced.max() - traced[0] <= traced_slack, f"traced memory grows:\n{report}"
    slope = np.polyfit(steps, traced, 1)[0]                        # bytes per step
    assert slope * (steps[-1] - steps[0]) <= traced_slack, f"traced memory trends up ({slope:.1f} B/step):\n{report}"
    assert rss.max() - rss[0] <= rss_slack, f"resident memory grows:\n{report}"
    assert len(set(files)) == 1, f"open files change:\n{report}"


SMALL = dict(task="copy", vocab_size=12, seq_len=8, num_train=512, num_val=64, d_model=16, nhead=2, num_layers=2,
             dim_feedforward=32, batch_size=16, warmup=20, dropout=0.1, steps=1)


@pytest.mark.parametrize("dtype,activation", [("float32", "gelu"), ("float64", "relu")])
def test_short_soak_memory_flat(dtype, activation):
    """300 steps (a few seconds): after warm-up, traced memory stays within 64 KiB, no cache survives."""
    _, samples = soak(TrainConfig(**SMALL, dtype=dtype, activation=activation, norm_first=dtype == "float32"),
                      steps=300, warmup=60, every=40)
    _assert_flat(samples, traced_slack=64 * KIB, rss_slack=16 * KIB * KIB)


@pytest.mark.slow
def test_long_soak_memory_flat(tmp_path):
    """5000 steps (about a minute), with evaluation and a checkpoint every 500 steps (what `train` does):
    traced memory, resident size and open files stay flat."""
    config = TrainConfig(**dict(SMALL, d_model=32, nhead=4, dim_feedforward=64, seq_len=10, num_train=4000,
                                pos_encoding="learned", activation="gelu"))
    trainer, samples = soak(config, steps=5000, warmup=500, every=250, tmp_path=tmp_path, eval_every=500)
    assert trainer.step == 5000 and len(samples) == 19
    _assert_flat(samples, traced_slack=256 * KIB, rss_slack=32 * KIB * KIB)
