"""
Op counts of one training step (not collected by pytest; run by hand and report the numbers): how
many ATen operations, each one kernel launch on a GPU, the optimizer step and the fake-quantised
forward/backward dispatch. Eager GPU steps of these small models are launch-bound, so fewer ops is
time saved there; the counts are the same on CPU, where this runs.

    python tests/bench_ops.py                      # 15M and 100M at --bits 6
    python tests/bench_ops.py --sizes 15M --bits 16

Rows: muon (train.Muon.step over the block matrices), adamw (the AdamW of the other parameters),
fwd+bwd (one micro-batch of 1 x 128 tokens through train.py's model, loss and backward).
"""
import argparse
import os
import sys
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import train  # noqa: E402


class CountOps(TorchDispatchMode):
    """Counts every ATen op dispatched inside the `with` block (views included: on a GPU they are
    free, so they are reported apart)."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    def kernels(self):
        views = {"view", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze", "slice", "select",
                 "_unsafe_view", "alias", "detach", "unbind", "split", "as_strided", "unfold", "reshape"}
        return sum(n for op, n in self.ops.items() if op not in views), sum(self.ops.values())


def count(fn):
    with CountOps() as c:
        fn()
    return c.kernels()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="15M,100M")
    ap.add_argument("--bits", type=int, default=6)
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    print(f"{'size':>6}  {'row':<8}  {'ops (no views)':>14}  {'all ops':>8}")
    for size in a.sizes.split(","):
        cfg = train.parse_args(["--size", size, "--bits", str(a.bits), "--block_size", "128", "--quiet"])
        model = train.GPT(train.model_config(cfg, 4096))
        muon, adamw = train.build_optimizers(model, cfg)
        x = torch.randint(0, 4096, (1, 129))
        step = lambda: model(x[:, :-1], x[:, 1:])[1].backward()
        step()  # gradients (and optimizer state on the first step) exist before counting
        muon.step(), adamw.step()
        rows = dict(muon=count(muon.step), adamw=count(adamw.step))
        model.zero_grad(set_to_none=True)
        rows["fwd+bwd"] = count(step)
        for name, (kernels, total) in rows.items():
            print(f"{size:>6}  {name:<8}  {kernels:>14,}  {total:>8,}")


if __name__ == "__main__":
    main()
