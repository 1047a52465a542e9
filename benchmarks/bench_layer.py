"""Speed and memory of numpy-transformer against PyTorch, each side in a process of its own.

    python benchmarks/bench_layer.py                # the full table (about 25 min, quiet 2 cores)
    python benchmarks/bench_layer.py --quick        # one shape, fewer rounds (about 3 min)
    python benchmarks/bench_layer.py --out r.json   # the results as JSON to r.json

The results go to benchmarks/out/bench_layer.json (untracked) unless --out names a path. Timing (see
benchmarks/harness.py): for every case, each side runs in fresh processes of its own, --rounds of
them alternating (numpy torch, torch numpy, ...), each timing --repeats steps after --warmup; no
environment variable is set (each library's default threads). A side's figure is the median of all
its steps; the ratio numpy / torch is the median of the per-round ratios, shown with their range.
The 1-minute load average before and after each case is printed with it.

Cases: the TransformerEncoderLayer (d_model 512, 8 heads, feed-forward 2048, dropout 0, training
mode) forward+backward and forward only against torch.nn.TransformerEncoderLayer at (B, S) = (32,
10), (8, 128), (4, 512) for float32 relu, float32 gelu, float64 gelu; the TransformerDecoderLayer
(causal self-attention, memory of the same length) likewise in float32 relu; a training step
(forward, cross-entropy, backward, Adam) of nt.TransformerModel, nt.Seq2SeqModel and nt.GPT (V
10000, width 512, one layer of each stack) against their torch twins; the tiled attention against
the standard path at S = 4096 (time and traced peak memory). Peak memory of a step is measured in
separate processes (never the timed ones).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import harness  # noqa: E402

from numpy_transformer.utils.text import plain  # noqa: E402

DEFAULT_OUT = os.path.join(harness.DEFAULT_OUT_DIR, "bench_layer.json")     # untracked
D, H, F, V = 512, 8, 2048, 10000
SHAPES = [(32, 10), (8, 128), (4, 512)]
LAYER_CONFIGS = [("float32", "relu"), ("float32", "gelu"), ("float64", "gelu")]


def layer_matmul_flops(b, s, d=D, f=F):
    """Matmul FLOPs of one encoder-layer forward: QKV, scores, P V, out-proj, two feed-forward GEMMs."""
    n = b * s
    return 2 * n * d * 3 * d + 2 * 2 * b * s * s * d + 2 * n * d * d + 2 * 2 * n * d * f


# ---- the cases: each builds one side's steps, {name: callable}, from the same seeds ----

def case_layer(side, b, s, dtype, activation, decoder=False):
    import numpy as np

    import numpy_transformer as nt
    dt = np.dtype(dtype)
    cls = nt.TransformerDecoderLayer if decoder else nt.TransformerEncoderLayer
    ours = cls(D, H, F, dropout=0.0, activation=activation, dtype=dt, seed=0)
    rng = np.random.default_rng(1)
    x, mem, dy = (rng.standard_normal((b, s, D)).astype(dt) for _ in range(3))
    if side == "numpy":
        run = (lambda: ours(x, mem, tgt_is_causal=True)) if decoder else (lambda: ours(x))

        def step():
            ours.zero_grad()
            run()
            ours.backward(dy)
        return {"fwd+bwd": step, "fwd": run}, None
    import torch
    tcls = torch.nn.TransformerDecoderLayer if decoder else torch.nn.TransformerEncoderLayer
    tl = tcls(D, H, F, dropout=0.0, activation=activation, batch_first=True, dtype=getattr(torch, dtype))
    tl.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in ours.state_dict().items()})
    xt, mt = torch.tensor(x, requires_grad=True), torch.tensor(mem, requires_grad=True)
    dyt = torch.tensor(dy)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(s, dtype=xt.dtype)

    def fwd(a, m):
        return tl(a, m, tgt_mask=causal, tgt_is_causal=True) if decoder else tl(a)

    def step():
        tl.zero_grad()
        xt.grad = mt.grad = None
        fwd(xt, mt).backward(dyt)

    def forward_only():
        with torch.no_grad():
            fwd(xt.detach(), mt.detach())
    return {"fwd+bwd": step, "fwd": forward_only}, None


def case_model(side, kind, b, s, dtype):
    import numpy as np

    import numpy_transformer as nt
    dt = np.dtype(dtype)
    rng = np.random.default_rng(2)
    ids, tgt = rng.integers(0, V, size=(b, s)), rng.integers(0, V, size=(b, s))
    if kind == "encoder":
        model = nt.TransformerModel(V, d_model=D, nhead=H, num_layers=1, dim_feedforward=F, dropout=0.0,
                                    dtype=dt, seed=0)
        inputs = (ids,)
    elif kind == "seq2seq":
        model = nt.Seq2SeqModel(V, V, d_model=D, nhead=H, num_encoder_layers=1, num_decoder_layers=1,
                                dim_feedforward=F, dropout=0.0, dtype=dt, seed=0)
        inputs = (rng.integers(0, V, size=(b, s)), ids)
    else:
        model = nt.GPT(nt.GPTConfig(vocab_size=V, block_size=max(s, 16), n_layer=1, n_head=H, n_embd=D,
                                    n_inner=F, dropout=0.0, dtype=dtype), seed=0)
        inputs = (ids,)
    if side == "numpy":
        crit = nt.CrossEntropyLoss()
        opt = nt.optim.Adam(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad()
            logits = model(*inputs)
            crit(logits.reshape(-1, V), tgt.reshape(-1))
            model.backward(crit.backward().reshape(logits.shape))
            opt.step()
        return {"train step": step}, None
    import torch
    if kind == "encoder":
        from reference_torch.models.encoder import to_torch
        twin = to_torch(model)
    elif kind == "seq2seq":
        from reference_torch.models.seq2seq import twin_of
        twin = twin_of(model)                 # torch.nn.Transformer inside
    else:
        from reference_torch.models.gpt import to_torch
        twin = to_torch(model, twin=False)    # torch.nn.TransformerEncoderLayer blocks
    twin.train()
    topt = torch.optim.Adam(twin.parameters(), lr=1e-4)
    tin = tuple(torch.from_numpy(a) for a in inputs)
    ttgt = torch.from_numpy(tgt)

    def torch_step():
        topt.zero_grad()
        logits = twin(*tin)
        torch.nn.functional.cross_entropy(logits.reshape(-1, V), ttgt.reshape(-1)).backward()
        topt.step()
    return {"train step": torch_step}, None


def case_attention(side, seq, heads=8, dh=64, block=256):
    """Attention forward+backward at (1, heads, seq, dh) float32; sides "standard" and "tiled"."""
    import numpy as np

    from numpy_transformer import functional as Fn
    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal((1, heads, seq, dh)).astype(np.float32) for _ in range(4))

    def step():
        if side == "standard":
            _, c = Fn.scaled_dot_product_attention_forward(q, k, v, is_causal=False)
            Fn.scaled_dot_product_attention_backward(do, c)
        else:
            _, c = Fn.flash_attention_forward(q, k, v, block_q=block, block_k=block)
            Fn.flash_attention_backward(do, c)

    return {"fwd+bwd": step}, None


def case_blas(side, b, s, dtype):
    """NumPy's GEMM on the layer's largest product, (B*S, D) @ (D, F): the BLAS limit."""
    import numpy as np
    rng = np.random.default_rng(0)
    a = rng.standard_normal((b * s, D)).astype(dtype)
    w = rng.standard_normal((D, F)).astype(dtype)
    return {"gemm": lambda: a @ w}, None


def case_attention_memory(side, seq, heads=8, dh=64, block=256):
    """Traced peak (MB) of one attention forward+backward, as the reply's extra."""
    import tracemalloc
    steps, _ = case_attention(side, seq, heads, dh, block)
    step = steps["fwd+bwd"]
    step()
    tracemalloc.start()
    step()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return {"noop": lambda: None}, peak


CASES = dict(layer=case_layer, model=case_model, attention=case_attention, blas=case_blas,
             attention_memory=case_attention_memory)


# ---- the parent: the table ----

def build_parser():
    parser = argparse.ArgumentParser(description=plain(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one shape, 2 rounds of 3 steps (about 3 min)")
    parser.add_argument("--rounds", type=int, help="processes per side, alternating (default 3; --quick 2)")
    parser.add_argument("--repeats", type=int, help="timed steps per process (default 7; --quick 3)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--out", "--json", dest="json", metavar="PATH", default=DEFAULT_OUT,
                        help="write the results as JSON to PATH (default benchmarks/out/bench_layer.json, "
                             "untracked)")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory processes")
    parser.add_argument("--only", choices=("layers", "models", "attention"), action="append",
                        help="run only these parts (repeatable; default all)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def _ratio(res, name):
    r = res["ratio"][name]
    return f"{r['median']:5.2f} [{r['low']:.2f}-{r['high']:.2f}]"


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.child:
        return harness.serve_child(args.child, CASES)
    rounds = args.rounds or (2 if args.quick else 3)
    repeats = args.repeats or (3 if args.quick else 7)
    if rounds < 1 or repeats < 1 or args.warmup < 0:
        build_parser().error(f"--rounds and --repeats must be >= 1, --warmup >= 0; got {rounds}, {repeats}, "
                             f"{args.warmup}")
    t_start = time.perf_counter()
    import numpy as np
    import torch
    shapes = SHAPES[1:2] if args.quick else SHAPES
    timing = dict(rounds=rounds, warmup=args.warmup, repeats=repeats)
    parts = args.only or ["layers", "models", "attention"]
    script = os.path.abspath(__file__)
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
               f"NumPy {np.__version__}, torch {torch.__version__}")
    print(f"machine: {machine}\nmethod: each side in fresh processes, {rounds} rounds alternating, "
          f"{args.warmup} warm-up + {repeats} timed steps each; medians; ratio numpy/torch = median "
          f"[range] of the per-round ratios; default threads, no environment variables\n", flush=True)
    result = dict(machine=machine, date=time.strftime("%Y-%m-%d %H:%M"), timing=timing, layers=[], models=[])

    if "layers" in parts:
        head = (f"{'layer':<8}{'B':>3} {'S':>4} {'dtype':<8}{'act':<5}| {'fwd+bwd ms':>10} {'torch':>7} "
                f"{'ratio [range]':>17} | {'fwd ms':>7} {'torch':>7} {'ratio [range]':>17} | {'%BLAS':>5} | "
                f"{'peak MB':>7} {'torch':>6} | load")
        print(head + "\n" + "-" * len(head), flush=True)
        configs = [(False, dt, act) for dt, act in LAYER_CONFIGS] + [(True, "float32", "relu")]
        for b, s in shapes:
            blas = {}
            for decoder, dtype, act in configs:
                kw = dict(b=b, s=s, dtype=dtype, activation=act, decoder=decoder)
                res = harness.compare(script, "layer", kw, **timing)
                ours, ref = res["sides"]["numpy"], res["sides"]["torch"]
                row = dict(kw, **{k: v for k, v in res.items() if k != "extra"})
                pct = ""
                if not decoder:
                    if dtype not in blas:
                        # the peak: more steps than a layer case, so that one slow step cannot lower it
                        ms = harness.single(script, "blas", dict(b=b, s=s, dtype=dtype), "numpy", warmup=3,
                                            repeats=21)["gemm"]
                        blas[dtype] = 2 * b * s * D * F / (ms / 1e3) / 1e9
                    gflops = 3 * layer_matmul_flops(b, s) / (ours["fwd+bwd"]["median_ms"] / 1e3) / 1e9
                    row.update(gflops=gflops, blas_gflops=blas[dtype], pct_blas=100 * gflops / blas[dtype])
                    pct = f"{row['pct_blas']:4.0f}%"
                mem = ""
                if not args.no_memory:
                    row["peak_mb"] = harness.peak_memory(script, "layer", kw, "numpy") / 2**20
                    row["torch_peak_mb"] = harness.peak_memory(script, "layer", kw, "torch") / 2**20
                    mem = f"{row['peak_mb']:7.1f} {row['torch_peak_mb']:6.1f}"
                result["layers"].append(row)
                print(f"{'decoder' if decoder else 'encoder':<8}{b:>3} {s:>4} {dtype:<8}{act:<5}| "
                      f"{ours['fwd+bwd']['median_ms']:>10.1f} {ref['fwd+bwd']['median_ms']:>7.1f} "
                      f"{_ratio(res, 'fwd+bwd'):>17} | "
                      f"{ours['fwd']['median_ms']:>7.1f} {ref['fwd']['median_ms']:>7.1f} "
                      f"{_ratio(res, 'fwd'):>17} | {pct:>5} | {mem:>14} | {harness.load_text(res)}", flush=True)

    if "models" in parts:
        print(f"\ntraining step (forward, cross-entropy, backward, Adam; V {V}, width {D}, {H} heads, F {F}, "
              f"one layer per stack, float32) against the torch twin", flush=True)
        for kind in ("encoder", "seq2seq", "gpt"):
            for b, s in shapes:
                kw = dict(kind=kind, b=b, s=s, dtype="float32")
                res = harness.compare(script, "model", kw, **timing)
                ours, ref = res["sides"]["numpy"]["train step"], res["sides"]["torch"]["train step"]
                row = dict(kw, **{k: v for k, v in res.items() if k != "extra"})
                mem = ""
                if not args.no_memory:
                    row["peak_mb"] = harness.peak_memory(script, "model", kw, "numpy") / 2**20
                    row["torch_peak_mb"] = harness.peak_memory(script, "model", kw, "torch") / 2**20
                    mem = f"   peak {row['peak_mb']:6.1f} MB, torch {row['torch_peak_mb']:6.1f}"
                result["models"].append(row)
                print(f"  {kind:<8} B={b:>2} S={s:>3} {ours['median_ms']:8.1f} ms   torch {ref['median_ms']:8.1f} ms"
                      f"   ratio {_ratio(res, 'train step')}{mem}   {harness.load_text(res)}", flush=True)

    if "attention" in parts:
        seq = 1024 if args.quick else 4096
        res = harness.compare(script, "attention", dict(seq=seq), sides=("tiled", "standard"), **timing)
        peaks = {side: harness.single(script, "attention_memory", dict(seq=seq), side, warmup=0, repeats=1,
                                      extra=True)
                 for side in ("standard", "tiled")}
        result["tiled_attention"] = dict(seq=seq, peak_mb=peaks, **{k: v for k, v in res.items() if k != "extra"})
        st, ti = res["sides"]["standard"]["fwd+bwd"], res["sides"]["tiled"]["fwd+bwd"]
        print(f"\nattention fwd+bwd at (1, 8, {seq}, 64) float32: standard {st['median_ms']:.0f} ms, peak "
              f"{peaks['standard']:.0f} MB; tiled {ti['median_ms']:.0f} ms, peak {peaks['tiled']:.0f} MB "
              f"(time x{_ratio(res, 'fwd+bwd').strip()}, memory 1/{peaks['standard'] / peaks['tiled']:.1f})   "
              f"{harness.load_text(res)}", flush=True)

    print(f"\nwrote {harness.write_json(args.json, result)}")
    print(f"the benchmark took {(time.perf_counter() - t_start) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
