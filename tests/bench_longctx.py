"""
Long-context forward benchmark of model.py's attention variants (not collected by pytest).

For train.py's default model (size 1M: 5 layers, d128, 4 heads, vocab 4096, block_size 256) and
each variant, time one forward pass (torch.no_grad, batch 1, CPU) at 4k, 16k and 32k tokens and
record the peak resident memory. Each measurement runs in its own subprocess, so ru_maxrss is the
peak of that forward alone (plus the ~0.3 GB of an idle torch process, shown as "base").

    python tests/bench_longctx.py                       # the full table (about 10 min on one thread)
    python tests/bench_longctx.py --lengths 4096 --variants "dense rope,alibi"
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SWA = dict(window=128, global_every=4)  # layers w,w,w,g,w
VARIANTS = {
    "dense rope": {},
    "nope": dict(pos="nope"),
    "alibi": dict(pos="alibi"),
    "partial rope 0.5": dict(rope_frac=0.5),
    "hope": dict(pos="hope"),
    "expe": dict(pos="expe"),
    "swa 3:1 w128": SWA,
    "swan (+logn)": dict(SWA, swan=True, logn_scale=True),
    "alibi swa 3:1": dict(SWA, pos="alibi"),
    "chunk all C64 k2": dict(chunk_layers="all", chunk_size=64, chunk_topk=2),
    "gqa2 + qk_norm head": dict(n_kv_head=2, qk_norm="head"),
    "learned": dict(pos="learned"),  # only up to block_size
}
LENGTHS = (4096, 16384, 32768)
LIMIT_GB = 4.0  # target: every variant within 4 GB at 16k


def peak_gb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20  # Linux: KiB


def measure(variant, T, threads):
    """Runs in the child: build the model, warm up at its block_size, time one forward at T."""
    import torch
    import train
    from model import GPT
    torch.set_num_threads(threads)
    # train.py's default model (--size preset, block_size, vocabulary) with the variant's model flags
    cfg = train.TrainConfig(model=dict(VARIANTS[variant]))
    torch.manual_seed(0)
    model = GPT(train.model_config(cfg, cfg.vocab_size)).eval()
    with torch.no_grad():
        V = model.config.vocab_size
        model(torch.randint(0, V, (1, model.config.block_size)))
        base = peak_gb()
        idx = torch.randint(0, V, (1, T))
        t0 = time.perf_counter()
        logits, _ = model(idx)
        dt = time.perf_counter() - t0
    return dict(variant=variant, T=T, seconds=dt, peak_gb=peak_gb(), base_gb=base,
                finite=bool(torch.isfinite(logits).all()))


def run_child(variant, T, threads, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", variant, str(T), "--threads", str(threads)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(variant=variant, T=T, error=f"timeout {timeout}s")
    if p.returncode:
        last = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return dict(variant=variant, T=T, error=last[:60])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated variant names")
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per measurement")
    ap.add_argument("--json", default="", help="also write the rows to this file")
    ap.add_argument("--child", nargs=2, metavar=("VARIANT", "T"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(measure(a.child[0], int(a.child[1]), a.threads)))
        return
    names = [v.strip() for v in a.variants.split(",")]
    lengths = [int(t) for t in a.lengths.split(",")]
    rows = []
    head = f"{'variant':22s}" + "".join(f"{f'{T // 1024}k s':>9s}{f'{T // 1024}k GB':>9s}" for T in lengths)
    print(f"forward pass, batch 1, {a.threads} thread(s); GB = peak RSS of the process (base ~0.3 GB)")
    print(head)
    over = []
    for name in names:
        # learned positions cannot run past block_size: measure them at block_size instead
        lens = [256] if VARIANTS[name].get("pos") == "learned" else lengths
        cells = []
        for T in lens:
            r = run_child(name, T, a.threads, a.timeout)
            rows.append(r)
            if "error" in r:
                cells.append(f"{'error':>9s}{'':>9s}")
            else:
                cells.append(f"{r['seconds']:9.2f}{r['peak_gb']:9.2f}")
                if T == 16384 and r["peak_gb"] > LIMIT_GB:
                    over.append(name)
        note = "   (T=256 only: no positions past block_size)" if lens == [256] else ""
        print(f"{name:22s}" + "".join(cells) + note, flush=True)
    for r in rows:
        if "error" in r:
            print(f"error: {r['variant']} T={r['T']}: {r['error']}")
    print(f"16k within {LIMIT_GB:g} GB: " + ("all variants" if not over else "NOT " + ", ".join(over)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
