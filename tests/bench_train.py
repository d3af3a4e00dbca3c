"""
Benchmark of the main job (not collected by pytest; run by hand and report the numbers):

    python tests/bench_train.py            # default run + tokens/s + MFU + QAT step-time ratio
    python tests/bench_train.py --quick    # skip the full default run

1. `python train.py --bits 6 --warmdown 0.33` end to end: wall time (target <= 3 min on the
   2-core CPU) and val loss against the unigram baseline.
2. Training tokens/s and model FLOPs utilisation against a matmul peak measured in this run.
3. Step time of --bits 6 over --bits 16 at the same config (target <= 1.15).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import data  # noqa: E402
import train  # noqa: E402
from model import GPT, flops_per_token  # noqa: E402  (the one FLOP-per-token formula, shared with the GPU check)


def matmul_peak(n=1024, reps=20):
    """fp32 FLOP/s of a square matmul: the practical peak of this machine for this dtype."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n ** 3 * reps / (time.perf_counter() - t)


def model_flops_per_token(mcfg):
    """Training FLOPs per token of a GPTConfig (model.flops_per_token: 6 x matmul params incl.
    the head + the attention scores, PaLM appendix B)."""
    with torch.device("meta"):
        n = GPT(mcfg).num_params(non_embedding=True)
    return flops_per_token(n, mcfg.n_layer, mcfg.n_embd, mcfg.block_size, mcfg.vocab_size)


def step_time(bits, steps=30, warm=5, **kw):
    """Median seconds per optimizer step of the default config at this bit-width."""
    cfg = train.TrainConfig(model=dict(bits=bits), **kw)
    corpus = data.corpus_of(cfg)
    torch.manual_seed(0)
    model = GPT(train.model_config(cfg, corpus.vocab_size))
    block = model.config.block_size
    opts = train.build_optimizers(model, cfg)
    times = []
    for step in range(steps + warm):
        t = time.perf_counter()
        x, y = data.train_batch(cfg, block, corpus, step)
        _, loss = model(x, y)
        loss.backward()
        for o in opts:
            o.step()
        model.zero_grad(set_to_none=True)
        if step >= warm:
            times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2], model.config


def main():
    quick = "--quick" in sys.argv
    out = {}
    if not quick:
        with tempfile.TemporaryDirectory() as d:
            t = time.time()
            p = subprocess.run([sys.executable, os.path.join(ROOT, "train.py"), "--bits", "6", "--warmdown", "0.33",
                                "--out_dir", os.path.join(d, "run"), "--quiet"], capture_output=True, text=True)
            wall = time.time() - t
            if p.returncode:
                sys.exit(p.stderr)
            r = json.load(open(os.path.join(d, "run", "result.json")))
        m = r["metrics"]
        out["default_run"] = dict(wall_s=round(wall, 1), val_loss=m["val_loss"], val_bpb=m["val_bpb"],
                                  val_loss_fp=m["val_loss_fp"], unigram_loss=m["unigram_loss"],
                                  tokens_per_s=round(r["tokens_per_s"]))
        print(f"default run: {wall:.1f} s wall, val loss {m['val_loss']:.4f} (deployed INT6), "
              f"{m['val_bpb']:.4f} bpb; unigram baseline {m['unigram_loss']:.4f}; "
              f"{r['tokens_per_s']:.0f} train tokens/s")
    peak = matmul_peak()
    t16, cfg = step_time(16)
    t6, _ = step_time(6)
    tok = train.TrainConfig().batch_size * cfg.block_size
    mfu = model_flops_per_token(cfg) * tok / t16 / peak
    out.update(matmul_peak_gflops=round(peak / 1e9, 1), step_s_bits16=round(t16, 4), step_s_bits6=round(t6, 4),
               qat_step_ratio=round(t6 / t16, 3), tokens_per_s_bits16=round(tok / t16), mfu_bits16=round(mfu, 3))
    print(f"matmul peak {peak / 1e9:.1f} GFLOP/s; bits16 {t16 * 1e3:.0f} ms/step ({tok / t16:.0f} tok/s, "
          f"MFU {mfu:.1%}); bits6 {t6 * 1e3:.0f} ms/step; ratio bits6/bits16 = {t6 / t16:.3f} (target <= 1.15)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
