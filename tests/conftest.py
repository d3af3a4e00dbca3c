"""Shared test helpers: a tiny corpus and a tiny training run that take seconds on CPU."""
import dataclasses
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
torch.set_num_threads(1)  # keep the suite's timing stable on the 2-core CI machine

import train  # noqa: E402


def write_corpus(folder, n_docs=6, words=1500, seed=0):
    """A small corpus of .txt documents made of simple English-like text."""
    import random
    rng = random.Random(seed)
    vocab = ("the king and queen of a fair land did speak to their lords with love and fear "
             "my lord I pray you hear me now for all is well that ends well").split()
    os.makedirs(folder, exist_ok=True)
    for d in range(n_docs):
        text = " ".join(rng.choice(vocab) for _ in range(words)) + "\n"
        with open(os.path.join(folder, f"doc{d}.txt"), "w") as f:
            f.write(text)
    return folder


def tiny_config(tmp_path, **kw):
    """A TrainConfig for a ~0.1M-parameter model on the tiny corpus: a few seconds on CPU.
    Keyword arguments naming GPTConfig fields (block_size, bits, ...) go to the model flags."""
    data = write_corpus(str(tmp_path / "corpus"))
    args = dict(size="0.1M", data=data, vocab_size=512, batch_size=8, iters=20,
                eval_interval=10, eval_tokens=2048, ckpt_every=10, out_dir=str(tmp_path / "run"),
                cache_dir=str(tmp_path / "cache"), quiet=True, val_frac=0.34)
    model = dict(block_size=32)
    own = {f.name for f in dataclasses.fields(train.TrainConfig)}
    for k, v in kw.items():
        (args if k in own else model)[k] = v
    args["model"] = {**model, **args.get("model", {})}
    return train.TrainConfig(**args)


@pytest.fixture
def tiny_run(tmp_path):
    """Train a tiny run once; returns (cfg, result)."""
    cfg = tiny_config(tmp_path)
    return cfg, train.train(cfg)
