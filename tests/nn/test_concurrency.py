"""Threads and forked processes: the forward/backward bookkeeping (``nn/module.py``'s ``_TAPE``) and the
active trace (``_trace``) are per thread, so separate models trained in threads, or in children forked
from a threaded process, give bit for bit the results of the same runs done one after the other.

Every run is a small float64 model (a GPT and a ``TransformerEncoder``, with dropout, one of each
checkpointed so that the recomputation's bookkeeping runs too) trained a few steps with Adam; its
losses and final parameters are compared exactly (``np.array_equal``) with the serial run's.
"""

import io
import os
import select
import signal
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import numpy_transformer as nt
from numpy_transformer import functional as F
from numpy_transformer.kernels import parallel
from numpy_transformer.study import trace as _trace

V, D, STEPS = 11, 16, 5


def train(seed, steps=STEPS):
    """Train a GPT and an encoder built from ``seed``, one Adam step of each in turn: ``(losses, params)``.

    The GPT minimises cross-entropy on random tokens; the encoder ``sum(y * G)`` for a random upstream
    gradient ``G`` drawn independently of its input. Odd seeds checkpoint their layers."""
    rng = np.random.default_rng(seed)
    checkpoint = seed % 2 == 1
    gpt = nt.GPT(vocab_size=V, block_size=16, n_layer=2, n_head=2, n_embd=D, dropout=0.1, dtype="float64",
                 seed=seed, checkpoint=checkpoint)
    layer = nt.TransformerEncoderLayer(D, 2, dim_feedforward=32, dropout=0.1, dtype=np.float64, seed=seed)
    encoder = nt.TransformerEncoder(layer, 2, seed=seed + 100, checkpoint=checkpoint)
    opts = [nt.optim.Adam(gpt.parameters(), lr=1e-2), nt.optim.Adam(encoder.parameters(), lr=1e-2)]
    losses = []
    for _ in range(steps):
        ids, tgt = rng.integers(0, V, (3, 8)), rng.integers(0, V, (3, 8))
        logits = gpt(ids)                                                         # (B, S, V)
        loss, cache = F.cross_entropy_forward(logits.reshape(-1, V), tgt.reshape(-1))
        gpt.zero_grad()
        gpt.backward(F.cross_entropy_backward(1.0, cache).reshape(logits.shape))
        x, g = rng.standard_normal((3, 8, D)), rng.standard_normal((3, 8, D))
        y = encoder(x, is_causal=True)                                           # (B, S, D)
        encoder.zero_grad()
        encoder.backward(g)
        for opt in opts:
            opt.step()
        losses += [float(loss), float(np.sum(y * g))]
    params = {f"gpt.{k}": v.copy() for k, v in gpt.state_dict().items()}
    params.update({f"encoder.{k}": v.copy() for k, v in encoder.state_dict().items()})
    return losses, params


def assert_same_run(got, want):
    """Losses and every parameter equal bit for bit."""
    assert got[0] == want[0], "losses differ"
    assert got[1].keys() == want[1].keys()
    differ = [k for k in want[1] if not np.array_equal(got[1][k], want[1][k])]
    assert not differ, f"parameters differ: {differ}"


@pytest.fixture(scope="module")
def serial():
    """The reference: seeds 0..3 trained one after the other in this thread."""
    return {seed: train(seed) for seed in range(4)}


@pytest.fixture
def fast_switching():
    """Threads switch every 10 microseconds (Python's default is 5 ms), so that their passes interleave."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def run_in_threads(fn, args):
    """``fn(a)`` for each of ``args``, each in its own thread, all started together: results in order."""
    results, errors = [None] * len(args), []
    barrier = threading.Barrier(len(args))

    def work(i):
        try:
            barrier.wait()
            results[i] = fn(args[i])
        except BaseException as exc:      # noqa: BLE001 - reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(args))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, f"a thread failed: {errors[0]!r}"
    return results


def test_four_threads_train_as_serially(serial, fast_switching):
    for seed, got in zip(range(4), run_in_threads(train, list(range(4)))):
        assert_same_run(got, serial[seed])


class Parked(nt.nn.Module):
    """A Linear whose forward or backward (``where``) waits for ``release`` once ``inside`` is set: a
    pass held open while other threads (or a forked child) train."""

    def __init__(self, where):
        super().__init__()
        self.linear = nt.nn.Linear(4, 4, dtype=np.float64, seed=0)
        self.where, self.inside, self.release = where, threading.Event(), threading.Event()

    def _park(self, where):
        if self.where == where:
            self.inside.set()
            assert self.release.wait(timeout=60)

    def forward(self, x):
        y = self.linear(x)
        self._park("forward")
        return y

    def backward(self, dy):
        dx = self.linear.backward(dy)
        self._park("backward")
        return dx


def parked_run(module):
    """Forward and backward of ``module`` (which parks in one of them): output, input and weight gradients."""
    x, dy = np.arange(8.0).reshape(2, 4), np.linspace(-1, 1, 8).reshape(2, 4)
    y = module(x)
    return y, module.backward(dy), module.linear.weight.grad.copy()


@pytest.fixture
def parked_threads():
    """Two threads, one held inside a forward, one inside a backward of their own modules; yields the
    function that releases them and returns their results, compared with the same runs unparked."""
    modules = {w: Parked(w) for w in ("backward", "forward")}     # parked one after the other, in this order
    results, threads = {}, []

    def work(where):
        results[where] = parked_run(modules[where])

    for where, m in modules.items():
        threads.append(threading.Thread(target=work, args=(where,), daemon=True))
        threads[-1].start()
        assert m.inside.wait(timeout=60)

    def finish():
        for m in modules.values():
            m.release.set()
        for t in threads:
            t.join(timeout=60)
        for where, got in results.items():
            want = parked_run(Parked(None))
            assert all(np.array_equal(a, b) for a, b in zip(got, want)), f"the thread parked in {where} differs"
        assert results.keys() == modules.keys(), "a parked thread failed"

    try:
        yield finish
    finally:
        for m in modules.values():
            m.release.set()


def test_training_while_other_threads_are_inside_a_pass(serial, parked_threads):
    """Another thread's open forward or backward must not leak into this thread's passes (on a
    process-global tape this thread's backward looked for the other thread's pass: "backward() called
    before forward()")."""
    assert_same_run(train(1), serial[1])
    assert_same_run(train(2), serial[2])
    parked_threads()


def traced_run(model, x, g):
    """The records of a trace of one forward and backward: ``(name, phase, shape, norm)`` each."""
    with nt.trace(model) as t:
        model(x)
        model.backward(g)
    return [(r.name, r.phase, r.shape, r.norm) for r in t.records]


def test_a_trace_records_its_own_thread_only():
    """A trace opened in one thread records nothing of the models another thread runs meanwhile, and a
    checkpointed model recomputed in another thread does not pause it."""
    def build(seed, checkpoint):
        layer = nt.TransformerEncoderLayer(D, 2, dim_feedforward=32, dropout=0.0, dtype=np.float64, seed=seed)
        return nt.TransformerEncoder(layer, 2, seed=seed, checkpoint=checkpoint)

    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((2, 5, D)), rng.standard_normal((2, 5, D))
    want = traced_run(build(1, False), x, g)
    opened, other_done, got = threading.Event(), threading.Event(), []

    def traced():
        model = build(1, False)
        with nt.trace(model) as t:
            opened.set()
            assert other_done.wait(timeout=60)
            model(x)
            model.backward(g)
        got.extend((r.name, r.phase, r.shape, r.norm) for r in t.records)

    thread = threading.Thread(target=traced, daemon=True)
    thread.start()
    try:
        assert opened.wait(timeout=60)
        other = build(2, True)                              # checkpointed: its backward recomputes
        y = other(x)
        other.backward(g)
        assert not _trace.active()                         # this thread opened no trace
    finally:
        other_done.set()
        thread.join(timeout=60)
    assert got == want
    assert np.array_equal(y, build(2, False)(x))


# -- forked children ----------------------------------------------------------------------------------
def encode(run):
    """A run as bytes (np.save of each array, in order): what a child sends back through its pipe."""
    buf = io.BytesIO()
    losses, params = run
    np.save(buf, np.array(losses))
    for key in sorted(params):
        np.save(buf, params[key])
    return buf.getvalue()


def decode(data, keys):
    buf = io.BytesIO(data)
    losses = np.load(buf).tolist()
    return losses, {key: np.load(buf) for key in sorted(keys)}


def fork_and_train(seed):
    """Fork; the child trains ``seed``'s run and writes it to a pipe, then exits at once. Returns
    ``(pid, read end)``."""
    read, write = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    with warnings.catch_warnings():                   # Python >= 3.12 warns about forking with threads
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:                                      # the child: never returns into pytest
        code = 1
        try:
            os.close(read)
            data = encode(train(seed))
            with os.fdopen(write, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def collect(pid, read, timeout=60):
    """The child's bytes and its exit code (a child still running after ``timeout`` s is killed)."""
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([read], [], [], 0.1)[0]:
                chunk = os.read(read, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read)
        done, status = os.waitpid(pid, os.WNOHANG)
        while not done and time.monotonic() < deadline:   # the pipe is closed: the child is exiting
            time.sleep(0.005)
            done, status = os.waitpid(pid, os.WNOHANG)
        if not done:
            os.kill(pid, signal.SIGKILL)
            done, status = os.waitpid(pid, 0)
    return b"".join(chunks), os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_children_forked_from_a_threaded_process_train_as_serially(serial, parked_threads):
    """Forked while the kernels' pool has live threads and two other threads are inside a forward and a
    backward (the last child from a thread other than the main one): every child trains, and its run
    equals the serial one bit for bit."""
    big = np.linspace(-3, 3, 4 * parallel.MIN_PARALLEL)
    parallel.map_chunks(np.tanh, np.empty_like(big), big)          # the elementwise pool's threads start
    children = [(seed, *fork_and_train(seed)) for seed in range(3)]
    from_thread = []
    forker = threading.Thread(target=lambda: from_thread.append(fork_and_train(3)))
    forker.start()
    forker.join(timeout=60)
    children += [(3, *from_thread[0])]
    results = {seed: collect(pid, read) for seed, pid, read in children}
    for seed, (data, code) in results.items():
        assert code == 0, f"the child training seed {seed} failed (exit code {code})"
        assert_same_run(decode(data, serial[seed][1].keys()), serial[seed])
    parked_threads()
