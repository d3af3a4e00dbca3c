"""
Evaluation throughput (thousand tokens/s, one thread, median of 5) of the tiny studies' models by
tokens per forward pass: the measurement behind cli.eval_batch_tokens' CPU rule (fp32 logits of a
batch within 8 MiB: 4096 tokens at vocabulary 512, 2048 at 1024, 512 at 4096). The marked column is
what the rule picks.

    python tests/bench_eval_batch.py            # ~2 min
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cli  # noqa: E402
from model import GPT, GPTConfig, SIZES  # noqa: E402

# (size, vocab, training length, evaluated length, flags): the final passes of each study's runs,
# an extension's at 512, LongPPL's short windows (39 tokens) and a posenc evaluation at 1024
CASES = [("14K", 512, 128, 128, {}), ("25K", 512, 128, 128, {}), ("0.1M", 1024, 64, 64, dict(n_kv_head=2)),
         ("0.1M", 1024, 64, 512, dict(n_kv_head=2)), ("0.1M", 1024, 64, 39, dict(n_kv_head=2)),
         ("0.1M", 1024, 128, 128, {}), ("0.1M", 1024, 128, 1024, {}), ("1M", 4096, 256, 256, {})]
TOKENS = (512, 1024, 2048, 4096, 8192)


def throughput(model, vocab, T, rows, seconds=0.4):
    x = torch.randint(0, vocab, (rows, T + 1))
    with torch.no_grad():
        model(x[:, :-1], x[:, 1:], reduction="none")
        t, k = time.perf_counter(), 0
        while time.perf_counter() - t < seconds:
            model(x[:, :-1], x[:, 1:], reduction="none")
            k += 1
        return rows * T * k / (time.perf_counter() - t) / 1e3


def main():
    torch.set_num_threads(1)
    print(f"{'model':<22}" + "".join(f"{t:>8}" for t in TOKENS) + "   (k tokens/s; * = cli.eval_batch_tokens)")
    for size, vocab, block, T, kw in CASES:
        n_layer, n_embd, n_head = SIZES[size]
        model = GPT(GPTConfig(vocab_size=vocab, n_layer=n_layer, n_embd=n_embd, n_head=n_head, block_size=block,
                              **kw)).eval()
        runs = {t: [] for t in TOKENS if t >= T}
        for _ in range(5):  # interleaved: a load that drifts falls on every column
            for t in runs:
                runs[t].append(throughput(model, vocab, T, max(1, t // T)))
        pick = cli.eval_batch_tokens("cpu", vocab)
        cells = [f"{statistics.median(runs[t]):.0f}{'*' if t == pick else ''}" if t in runs else "-" for t in TOKENS]
        print(f"{size + f' V{vocab} T{T}':<22}" + "".join(f"{c:>8}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
