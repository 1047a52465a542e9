"""Speed and memory of numpy-transformer against PyTorch, measured side by side.

    python benchmarks/bench_layer.py                # the full table (about 6 min, quiet 2 cores)
    python benchmarks/bench_layer.py --quick        # one shape, fewer repeats (about a minute)
    python benchmarks/bench_layer.py --out out.json # also write the results as JSON
    python benchmarks/bench_layer.py --update       # rewrite the tracked benchmarks/results.json

Nothing is written unless --out or --update asks for it. The times are those of a quiet machine:
other processes on the cores stretch them several times (with a load of 5 on the 2-core machine,
--quick took 4.5 minutes and the full table 30).

For each (B, S) in (32, 10), (8, 128), (4, 512) at d_model 512, 8 heads, feed-forward 2048, relu and
gelu, float32 and float64, it times our ``TransformerEncoderLayer`` forward+backward and forward-only
against ``torch.nn.TransformerEncoderLayer`` on the same weights and the same number of threads,
interleaved (A B A B ...) after a warm-up, and reports medians, the median of the per-pair ratios,
GFLOP/s over the layer's matmul FLOPs, the percentage of the BLAS limit (NumPy's own GEMM on the
layer's largest matrix product), and the peak memory of one training step (each side measured in a
fresh process). It also times the tiled attention against the standard path at S = 4096, and a full
training step of ``nt.TransformerModel`` against its torch twin when that model is available.

Dropout is 0 so that both sides do the same arithmetic; the layers are in training mode.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

# OpenBLAS's idle threads spin for a while after each GEMM; a short timeout lets the cores go to our
# own elementwise threads instead. It must be set before NumPy loads.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results.json")   # tracked: rewritten only with --update
sys.path.insert(0, ROOT)

import numpy_transformer as nt  # noqa: E402
from numpy_transformer._text import plain  # noqa: E402

D, H, F = 512, 8, 2048
SHAPES = [(32, 10), (8, 128), (4, 512)]


def layer_matmul_flops(b, s, d=D, f=F):
    """Matmul FLOPs of one forward: QKV, scores, P V, out-proj, two feed-forward GEMMs."""
    n = b * s
    return 2 * n * d * 3 * d + 2 * 2 * b * s * s * d + 2 * n * d * d + 2 * 2 * n * d * f


def blas_limit(b, s, dtype, repeats=7):
    """GFLOP/s of NumPy's GEMM on the layer's largest product, (N, D) @ (D, F)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((b * s, D)).astype(dtype)
    w = rng.standard_normal((D, F)).astype(dtype)
    a @ w
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        a @ w
        times.append(time.perf_counter() - t)
    return 2 * b * s * D * F / np.median(times) / 1e9


def build(b, s, dtype, activation, torch, attention="standard"):
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(D, H, F, dropout=0.0, activation=activation, batch_first=True, dtype=tdt)
    ours = nt.TransformerEncoderLayer(D, H, F, dropout=0.0, activation=activation, dtype=dtype, seed=0,
                                      attention=attention, block_size=256)
    ours.load_state_dict({k: v.detach().numpy() for k, v in tl.state_dict().items()})
    rng = np.random.default_rng(1)
    x = rng.standard_normal((b, s, D)).astype(dtype)
    dy = rng.standard_normal((b, s, D)).astype(dtype)
    xt = torch.tensor(x, requires_grad=True)
    dyt = torch.tensor(dy)

    def ours_step():
        ours.zero_grad()
        ours(x)
        ours.backward(dy)

    def torch_step():
        tl.zero_grad()
        xt.grad = None
        tl(xt).backward(dyt)

    def ours_fwd():
        ours(x)

    def torch_fwd():
        with torch.no_grad():
            tl.train()
            tl(xt.detach())

    return ours_step, torch_step, ours_fwd, torch_fwd


def interleaved(fa, fb, warmup, repeats):
    """Median times of A and B and the median of per-pair ratios, timed A B A B ..."""
    for _ in range(warmup):
        fa()
        fb()
    ta, tb = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        fa()
        ta.append(time.perf_counter() - t)
        t = time.perf_counter()
        fb()
        tb.append(time.perf_counter() - t)
    ta, tb = np.array(ta), np.array(tb)
    return float(np.median(ta)), float(np.median(tb)), float(np.median(ta / tb))


MEMORY_PROBE = r"""
import os, sys, resource
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")
sys.path.insert(0, {root!r})
import numpy as np
side, b, s, dtype, act, threads = {args!r}
import torch
torch.set_num_threads(threads)
sys.path.insert(0, os.path.join({root!r}, "benchmarks"))
from bench_layer import build
steps = build(b, s, np.dtype(dtype).type, act, torch, "tiled" if side == "numpy-tiled" else "standard")
step = steps[1] if side == "torch" else steps[0]
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))
step()                                    # warm-up: first-call allocations are not the steady state
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                          # reset the peak resident size (VmHWM) to the current one
before = status("VmRSS")
step()
print(max(status("VmHWM") - before, 0))
"""


def peak_memory(side, b, s, dtype, activation, threads):
    """Peak resident-memory growth (bytes) of one training step, in a fresh process."""
    code = MEMORY_PROBE.format(root=ROOT, args=(side, b, s, np.dtype(dtype).name, activation, threads))
    # Large blocks through mmap, so that freed memory leaves the resident set at once and the peak
    # resident size measures live arrays (NumPy and torch both allocate through malloc).
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="65536")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return int(out.stdout.strip().splitlines()[-1])


def build_training_step(b, s, dtype, vocab=10000, torch=None):
    """One training step of ``nt.TransformerModel`` (seed configuration: D 512, 8 heads, F 2048,
    1 layer) and of its torch twin: forward, cross-entropy, backward, Adam step."""
    from reference_torch.model import to_torch
    model = nt.TransformerModel(vocab, d_model=D, nhead=H, num_layers=1, dim_feedforward=F, dropout=0.0,
                                dtype=dtype, seed=0)
    twin = to_torch(model)
    twin.train()
    crit = nt.CrossEntropyLoss()
    opt = nt.optim.Adam(model.parameters(), lr=1e-4)
    topt = torch.optim.Adam(twin.parameters(), lr=1e-4)
    rng = np.random.default_rng(2)
    ids = rng.integers(0, vocab, size=(b, s))
    tgt = rng.integers(0, vocab, size=(b, s))
    tids, ttgt = torch.from_numpy(ids), torch.from_numpy(tgt)

    def ours_step():
        opt.zero_grad()
        logits = model(ids)
        crit(logits.reshape(-1, vocab), tgt.reshape(-1))
        model.backward(crit.backward().reshape(logits.shape))
        opt.step()

    def torch_step():
        topt.zero_grad()
        logits = twin(tids)
        torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), ttgt.reshape(-1)).backward()
        topt.step()

    return ours_step, torch_step


def tiled_vs_standard(seq=4096, heads=8, dh=64, block=256, repeats=3):
    """Forward+backward of attention at (1, 8, S, 64) float32: time and traced peak memory, both paths."""
    import tracemalloc
    from numpy_transformer import functional as Fn
    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal((1, heads, seq, dh)).astype(np.float32) for _ in range(4))
    results = {}
    for name in ("standard", "tiled"):
        def step():
            if name == "standard":
                _, c = Fn.scaled_dot_product_attention_forward(q, k, v, is_causal=False)
                Fn.scaled_dot_product_attention_backward(do, c)
            else:
                _, c = Fn.flash_attention_forward(q, k, v, block_q=block, block_k=block)
                Fn.flash_attention_backward(do, c)
        step()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
        tracemalloc.start()
        step()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        results[name] = {"ms": float(np.median(times)) * 1e3, "peak_mb": peak / 2**20}
    return results


def build_parser():
    parser = argparse.ArgumentParser(description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one shape, few repeats (about a minute)")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--out", "--json", dest="json", metavar="PATH",
                     help="also write the results as JSON to PATH (default: write no file)")
    out.add_argument("--update", action="store_const", dest="json", const=RESULTS,
                     help="rewrite the tracked benchmarks/results.json (for the table in benchmarks/README.md)")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--no-tiled", action="store_true")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    t_start = time.perf_counter()
    import torch
    torch.set_num_threads(args.threads)
    shapes = SHAPES[1:2] if args.quick else SHAPES
    repeats = 3 if args.quick else args.repeats
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, NumPy {np.__version__}, torch {torch.__version__}"
    print(f"machine: {machine}; threads {args.threads}")
    header = (f"{'B':>3} {'S':>4} {'dtype':<8} {'act':<5} | {'fwd+bwd ms':>10} {'torch':>8} {'ratio':>6} | "
              f"{'fwd ms':>7} {'torch':>7} {'ratio':>6} | {'GFLOP/s':>8} {'BLAS':>7} {'%BLAS':>6} | "
              f"{'peak MB':>8} {'torch':>7}")
    print(header)
    print("-" * len(header))
    rows = []
    for b, s in shapes:
        for dtype in (np.float32, np.float64):
            limit = blas_limit(b, s, dtype)
            for act in ("relu", "gelu"):
                ours_step, torch_step, ours_fwd, torch_fwd = build(b, s, dtype, act, torch)
                t_ours, t_torch, ratio = interleaved(ours_step, torch_step, args.warmup, repeats)
                f_ours, f_torch, f_ratio = interleaved(ours_fwd, torch_fwd, args.warmup, repeats)
                gflops = 3 * layer_matmul_flops(b, s) / t_ours / 1e9
                mem = (None, None) if args.no_memory else (
                    peak_memory("numpy", b, s, dtype, act, args.threads) / 2**20,
                    peak_memory("torch", b, s, dtype, act, args.threads) / 2**20)
                row = dict(B=b, S=s, dtype=np.dtype(dtype).name, activation=act, ms=t_ours * 1e3,
                           torch_ms=t_torch * 1e3, ratio=ratio, fwd_ms=f_ours * 1e3, torch_fwd_ms=f_torch * 1e3,
                           fwd_ratio=f_ratio, gflops=gflops, blas_gflops=limit, pct_blas=100 * gflops / limit,
                           peak_mb=mem[0], torch_peak_mb=mem[1])
                rows.append(row)
                memtxt = "" if mem[0] is None else f"{mem[0]:>8.1f} {mem[1]:>7.1f}"
                print(f"{b:>3} {s:>4} {row['dtype']:<8} {act:<5} | {row['ms']:>10.1f} {row['torch_ms']:>8.1f} "
                      f"{ratio:>6.2f} | {row['fwd_ms']:>7.1f} {row['torch_fwd_ms']:>7.1f} {f_ratio:>6.2f} | "
                      f"{gflops:>8.1f} {limit:>7.1f} {row['pct_blas']:>5.0f}% | {memtxt}", flush=True)
    result = {"machine": machine, "threads": args.threads, "layers": rows}

    print("\ntraining step of nt.TransformerModel (V 10000, D 512, 8 heads, F 2048, 1 layer, Adam) vs its torch twin")
    steps = []
    for b, s in shapes:
        for dtype in (np.float32, np.float64):
            ours_step, torch_step = build_training_step(b, s, dtype, torch=torch)
            t_ours, t_torch, ratio = interleaved(ours_step, torch_step, args.warmup, repeats)
            steps.append(dict(B=b, S=s, dtype=np.dtype(dtype).name, ms=t_ours * 1e3, torch_ms=t_torch * 1e3,
                              ratio=ratio))
            print(f"  B={b:>2} S={s:>3} {np.dtype(dtype).name:<8} {t_ours * 1e3:8.1f} ms   torch {t_torch * 1e3:8.1f} ms"
                  f"   ratio {ratio:.2f}", flush=True)
    result["training_step"] = steps

    if not args.no_memory:
        print("\npeak memory of a layer training step (MB, float32, relu): standard attention, tiled attention, torch")
        mem_rows = []
        for b, s in shapes:
            std = peak_memory("numpy", b, s, np.float32, "relu", args.threads) / 2**20
            tiled = peak_memory("numpy-tiled", b, s, np.float32, "relu", args.threads) / 2**20
            ref = peak_memory("torch", b, s, np.float32, "relu", args.threads) / 2**20
            mem_rows.append(dict(B=b, S=s, standard_mb=std, tiled_mb=tiled, torch_mb=ref))
            print(f"  B={b:>2} S={s:>3}   standard {std:7.1f}   tiled {tiled:7.1f}   torch {ref:7.1f}", flush=True)
        result["memory"] = mem_rows
    if not args.no_tiled:
        tiled = tiled_vs_standard(seq=1024 if args.quick else 4096)
        result["tiled_attention"] = tiled
        st, ti = tiled["standard"], tiled["tiled"]
        print(f"\nattention fwd+bwd at (1, 8, {1024 if args.quick else 4096}, 64) float32: standard "
              f"{st['ms']:.0f} ms, peak {st['peak_mb']:.0f} MB; tiled {ti['ms']:.0f} ms, peak {ti['peak_mb']:.0f} MB "
              f"(time x{ti['ms'] / st['ms']:.2f}, memory 1/{st['peak_mb'] / ti['peak_mb']:.1f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"\nwrote {args.json}")
    print(f"\nthe benchmark took {(time.perf_counter() - t_start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
