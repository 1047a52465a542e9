"""Activation checkpointing (``checkpoint=True``) measured: peak memory and time of a training step of an
encoder stack against the layer count, with and without it, beside ``torch.utils.checkpoint`` on the
torch twin.

    python benchmarks/bench_checkpoint.py                 # layers 2, 4, 8 (about 2 minutes, quiet 2 cores)
    python benchmarks/bench_checkpoint.py --layers 2 4    # fewer
    python benchmarks/bench_checkpoint.py --out out.json  # also write the results as JSON

The step: ``nt.TransformerEncoder`` of L post-LN ``TransformerEncoderLayer`` s (d_model 256, 4 heads,
feed-forward 1024, dropout 0.1, float32, training mode) on x (B, S, D) = (8, 128, 256): forward, then
backward of a random upstream gradient. The torch side is ``torch.nn.TransformerEncoder`` with the same
weights (``reference_torch.table.torch_module``); checkpointed, each layer is called through
``torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)`` (its default preserves the RNG
state, so the recomputed dropout masks are the first forward's, as ours).

How memory is measured, and why this way. tracemalloc sees NumPy's arrays but not torch's (torch
allocates in C++), so one yardstick for both sides is the operating system's: the growth of the
resident set during one step after a warm-up step (``/proc/self/clear_refs`` resets the high-water
mark ``VmHWM``; peak = VmHWM - VmRSS before the step), each case in a fresh process, with glibc's mmap
threshold lowered (``MALLOC_MMAP_THRESHOLD_=65536``) so that a freed array leaves the resident set at
once for both libraries (as ``bench_layer.py`` does). It counts every live byte, the parameters'
gradients and the library's scratch buffers included. For our side the table also gives tracemalloc's
peak of the same step (NumPy reports its array allocations to it), which agrees. Time: in the plain
case's process, plain and checkpointed steps alternate (``--repeats`` pairs, 2 threads each side): the
median of each and the median of the per-pair ratios, which a busy machine distorts less than the times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D, H, F, B, S, P = 256, 4, 1024, 8, 128, 0.1

PROBE = r"""
import os, sys, time, json
sys.path.insert(0, {root!r})
side, layers, checkpoint, threads, repeats = {args!r}
D, H, F, B, S, P = {shape!r}
import numpy as np
import numpy_transformer as nt
layer = nt.TransformerEncoderLayer(D, H, F, dropout=P, dtype=np.float32, seed=0)
enc = nt.TransformerEncoder(layer, layers, seed=1)
rng = np.random.default_rng(0)
x = rng.standard_normal((B, S, D)).astype(np.float32)
dout = rng.standard_normal((B, S, D)).astype(np.float32)
mode = dict(checkpoint=checkpoint)
if side == "numpy":
    def step():
        enc.checkpoint = mode["checkpoint"]
        enc(x)
        enc.backward(dout)
else:
    import torch
    from torch.utils.checkpoint import checkpoint as torch_checkpoint
    torch.set_num_threads(threads)
    from reference_torch.table import torch_module
    tenc = torch_module(enc, oracle="torch.nn")
    del enc, layer
    xt, dt = torch.from_numpy(x).requires_grad_(True), torch.from_numpy(dout)
    def step():
        h = xt
        for lay in tenc.layers:
            h = torch_checkpoint(lay, h, use_reentrant=False) if mode["checkpoint"] else lay(h)
        h.backward(dt)
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))
step()                                    # warm-up: the gradients' arrays, first-call allocations
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                          # reset the peak resident size (VmHWM) to the current one
before = status("VmRSS")
step()
rss = max(status("VmHWM") - before, 0)
traced = None
if side == "numpy":
    import tracemalloc
    tracemalloc.start()
    step()
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
times = {{False: [], True: []}}
for _ in range(repeats):                  # interleaved, plain and checkpointed: a busy machine slows both alike
    for ck in (False, True):
        mode["checkpoint"] = ck
        t = time.perf_counter()
        step()
        times[ck].append(time.perf_counter() - t)
ms = [float(np.median(times[ck])) * 1e3 for ck in (False, True)]
ratio = float(np.median(np.array(times[True]) / np.array(times[False])))
print(json.dumps(dict(rss=rss, traced=traced, ms=ms, time_ratio=ratio)))
"""


def measure(side, layers, checkpoint, threads, repeats):
    """One fresh process: the peak of a step in the ``checkpoint`` mode, then (``repeats`` > 0) both
    modes timed interleaved."""
    code = PROBE.format(root=ROOT, args=(side, layers, checkpoint, threads, repeats), shape=(D, H, F, B, S, P))
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536",
               OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), NT_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"{side} L={layers} checkpoint={checkpoint} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5, help="timed step pairs (plain, checkpointed) per side")
    ap.add_argument("--out", help="write the results as JSON")
    args = ap.parse_args(argv)
    mb = 2.0 ** 20
    print(f"encoder stack training step: D {D}, {H} heads, F {F}, dropout {P}, float32, (B, S) = ({B}, {S}); "
          f"{args.threads} threads")
    print("peak MB = resident-set growth over one step (ours: tracemalloc's peak in brackets); time: median ms "
          "of a step, plain / checkpointed, and the median per-pair ratio")
    print(f"{'L':>2} | {'ours plain':>15} {'ours ckpt':>15} {'mem':>4} | {'torch':>6} {'ckpt':>6} {'mem':>4} | "
          f"{'ours ms':>11} {'x':>4} | {'torch ms':>11} {'x':>4}")
    rows = []
    for L in args.layers:
        r = {(side, ck): measure(side, L, ck, args.threads, 0 if ck else args.repeats)
             for side in ("numpy", "torch") for ck in (False, True)}
        op, oc, tp, tc = r["numpy", False], r["numpy", True], r["torch", False], r["torch", True]
        print(f"{L:>2} | {op['rss'] / mb:6.1f} ({op['traced'] / mb:5.1f}) {oc['rss'] / mb:6.1f} "
              f"({oc['traced'] / mb:5.1f}) {oc['rss'] / op['rss']:4.2f} | {tp['rss'] / mb:6.1f} "
              f"{tc['rss'] / mb:6.1f} {tc['rss'] / tp['rss']:4.2f} | {op['ms'][0]:5.0f} {op['ms'][1]:5.0f} "
              f"{op['time_ratio']:4.2f} | {tp['ms'][0]:5.0f} {tp['ms'][1]:5.0f} {tp['time_ratio']:4.2f}")
        rows.append(dict(layers=L, ours=op, ours_checkpoint=oc, torch=tp, torch_checkpoint=tc))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(shape=dict(d_model=D, nhead=H, dim_feedforward=F, batch=B, seq=S, dropout=P),
                           threads=args.threads, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
