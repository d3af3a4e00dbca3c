"""
The batch off the critical path (data.Prefetch, issue 38), on CPU: host milliseconds to build one
global batch; the milliseconds a step waits for its batch in the loop (the critical path: the build
itself in line, the hand-over from the worker when prefetched; steps 2 on); and the loop's milliseconds per step, each
next batch built on a background thread ("ahead") or in line after the step (data.PREFETCH False).
Runs alternate (on, off, off, on, ...) so that a load that drifts falls on both; medians of REPS
runs of ITERS steps each.

    python tests/bench_prefetch.py          # ~4 min on 2 idle cores

torch runs one thread (the step on one core, the build free to take another). On a CPU the
"device" is the host itself, so the overlap is bounded by what the step leaves to the other core and
by the GIL (torch releases it in its kernels; a tiny model's step is mostly Python); on a GPU the
loop waits on the device sync with the GIL released, which is where the build now runs.
"""
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import data  # noqa: E402
import train  # noqa: E402

ITERS, REPS = 20, 4
# name, train.py flags: a passkey / NIAH mix at 512 tokens (the longctx grid's retrieval rows), and
# lengen's paper batch (copy, inputs 1-32, offsets to 64, 32 rows), each on the smallest preset
CASES = [("passkey mix, 0.1M, 8 x 512", "--size 0.1M --block_size 512 --batch_size 8 --task_mix 0.5"),
         ("lengen copy, 0.1M, 32 x 130", "--size 0.1M --algo copy --algo_len 1,32 --algo_offset 64 "
                                         "--block_size 256 --batch_size 32"),
         ("text, 1M, 16 x 256 (main command)", "--size 1M --bits 6")]


def build_ms(cfg, corpus, steps=20):
    block = train.model_config(cfg, corpus.vocab_size if corpus else 48).block_size
    t = time.perf_counter()
    for s in range(steps):
        data.train_batch(cfg, block, corpus, s)
    return 1e3 * (time.perf_counter() - t) / steps


def step_ms(flags, prefetch, out):
    """(ms per step of the loop, batch included; ms per step waiting for the batch) of one run."""
    data.PREFETCH = prefetch
    waited = []
    batches = data.train_batches

    def timed(*a, **kw):  # the loop's batch source, its calls timed
        get = batches(*a, **kw)

        def call(step):
            t = time.perf_counter()
            out = get(step)
            waited.append(time.perf_counter() - t)
            return out
        return call
    data.train_batches = timed
    try:
        cfg = train.parse_args(flags.split() + ["--iters", str(ITERS), "--eval_interval", "100000", "--quiet",
                                                "--final_eval_tokens", "4096", "--ptq_bits", "", "--out_dir", out,
                                                "--overwrite"])
        r = train.train(cfg)
    finally:
        data.train_batches = batches
    step = 1e3 * cfg.batch_size * r["model_config"]["block_size"] / r["tokens_per_s"]
    return step, 1e3 * statistics.mean(waited[1:])  # the first step's batch is built in line either way


def main():
    torch.set_num_threads(1)
    print(f"{'case':<34}{'build':>7}{'wait, in line':>15}{'wait, ahead':>13}{'step, in line':>15}"
          f"{'step, ahead':>13}{'ratio':>7}   (ms)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in CASES:
            cfg = train.parse_args(flags.split())
            corpus = None if cfg.algo else data.corpus_of(cfg)
            b = build_ms(cfg, corpus)
            times = {True: [], False: []}
            for rep in range(REPS):
                for prefetch in ((True, False) if rep % 2 == 0 else (False, True)):
                    times[prefetch].append(step_ms(flags, prefetch, os.path.join(tmp, "run")))
            (on, won), (off, woff) = ([statistics.median(v) for v in zip(*times[p])] for p in (True, False))
            print(f"{name:<34}{b:>7.1f}{woff:>15.2f}{won:>13.2f}{off:>15.1f}{on:>13.1f}{on / off:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
