"""train.py: schedules, Muon, resume, DDP, the run record, bad input."""
import copy
import dataclasses
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import cli
import data
import quant
import tasks
import train
from model import evaluate, load_checkpoint
from train import load_run
from tools.chain import chain
from conftest import ROOT, tiny_config


# ---------------------------------------------------------------- schedules

def test_wsd_schedule_values():
    f = lambda s: train.lr_mult(s, 100, warmup=0.1, warmdown=0.3, schedule="wsd", min_lr_frac=0.0)
    assert f(0) == 0.0
    assert f(5) == pytest.approx(0.5)          # halfway through warmup
    assert f(10) == 1.0 and f(69) == 1.0       # stable phase
    assert f(70) == pytest.approx(1.0)         # decay starts at p = 1 - warmdown
    assert f(85) == pytest.approx(0.5)         # halfway through the warmdown
    assert f(100) == pytest.approx(0.0)
    g = lambda s: train.lr_mult(s, 100, warmup=0.0, warmdown=0.5, min_lr_frac=0.1)
    assert g(75) == pytest.approx(0.55) and g(100) == pytest.approx(0.1)
    assert train.lr_mult(99, 100, warmup=0.0, warmdown=0.0) == 1.0  # warmdown 0 = constant


def test_cosine_schedule_values():
    f = lambda s: train.lr_mult(s, 100, warmup=0.0, schedule="cosine", min_lr_frac=0.1)
    assert f(0) == pytest.approx(1.0)
    assert f(50) == pytest.approx(0.1 + 0.9 * 0.5)
    assert f(100) == pytest.approx(0.1)
    h = lambda s: train.lr_mult(s, 100, warmup=0.2, schedule="cosine")
    assert h(10) == pytest.approx(0.5) and h(20) == pytest.approx(1.0) and h(60) == pytest.approx(0.5)


# ---------------------------------------------------------------- Muon

def test_newton_schulz_orthogonalises():
    torch.manual_seed(0)
    for shape in [(32, 64), (64, 32), (48, 48)]:
        G = torch.randn(*shape)
        X = train.newton_schulz5(G)
        sv = torch.linalg.svdvals(X)
        # the quintic iteration targets singular values in about [0.7, 1.2], not exactly 1
        assert sv.min() > 0.5 and sv.max() < 1.3, (shape, sv.min(), sv.max())
        # and keeps the singular vectors: X is close to U V^T of G
        U, _, Vh = torch.linalg.svd(G, full_matrices=False)
        cos = (X * (U @ Vh)).sum() / (X.norm() * (U @ Vh).norm())
        assert cos > 0.95


def reference_muon_step(params, bufs, ns, lr=0.02, momentum=0.95):
    """Muon as it was written before the batching: one matrix at a time (ns: newton_schulz5)."""
    for p, buf in zip(params, bufs):
        buf.mul_(momentum).add_(p.grad)
        g = p.grad.add(buf, alpha=momentum)
        p.data.add_(ns(g), alpha=-lr * max(1.0, p.size(0) / p.size(1)) ** 0.5)


def test_batched_muon_equals_per_matrix_muon(monkeypatch):
    """Matrices of one shape go through Newton-Schulz as one stack: the same numbers, bit for bit,
    as one matrix at a time, with one orthogonalisation call per shape instead of per matrix."""
    torch.manual_seed(0)
    shapes = [(32, 64)] * 3 + [(64, 32)] * 2 + [(48, 48)] * 4 + [(16, 8)]
    ps = [torch.nn.Parameter(torch.randn(*s) * 0.1) for s in shapes]
    ref = [torch.nn.Parameter(p.detach().clone()) for p in ps]
    bufs = [torch.zeros_like(p) for p in ref]
    opt = train.Muon(ps, lr=0.02)
    calls = []
    ns = train.newton_schulz5
    monkeypatch.setattr(train, "newton_schulz5", lambda G, steps=5: (calls.append(tuple(G.shape)), ns(G, steps))[1])
    for step in range(3):
        for p, r in zip(ps, ref):
            p.grad = torch.randn_like(p)
            r.grad = p.grad.clone()
        opt.step()
        reference_muon_step(ref, bufs, ns)
    assert all(torch.equal(p, r) for p, r in zip(ps, ref))
    assert all(torch.equal(opt.state[p]["momentum_buffer"], b) for p, b in zip(ps, bufs))  # per-matrix state: old checkpoints load
    assert sorted(calls[:4]) == sorted([(3, 32, 64), (2, 64, 32), (4, 48, 48), (1, 16, 8)]) and len(calls) == 12


def test_fused_adamw_on_cuda_only(tmp_path):
    """fused AdamW is chosen where every parameter is on CUDA; CPU keeps PyTorch's default (its
    numbers unchanged). The choice itself is tested here on stand-ins for CUDA tensors."""
    class Fake:
        def __init__(self, cuda):
            self.is_cuda = cuda
    assert train.adamw_options([Fake(True), Fake(True)]) == dict(fused=True)
    assert train.adamw_options([Fake(True), Fake(False)]) == {} and train.adamw_options([]) == {}
    cfg = tiny_config(tmp_path)
    model = train.GPT(train.model_config(cfg, 512))
    for opt in train.build_optimizers(model, cfg)[1:]:
        assert not opt.defaults.get("fused")


def test_host_to_device_copies():
    """On CUDA a batch goes through pinned memory without blocking; on CPU it is left as it is."""
    import cli
    x = torch.arange(6).view(2, 3)
    assert cli.to_device(x, "cpu") is x
    seen = []

    class Host:
        def pin_memory(self):
            seen.append("pin")
            return self

        def to(self, device, non_blocking=False):
            seen.append((device, non_blocking))
            return "on device"
    assert cli.to_device(Host(), "cuda:1") == "on device" and seen == ["pin", ("cuda:1", True)]


def test_compile_blocks_shares_the_model_and_keeps_it_eager(tmp_path, monkeypatch):
    """--compile is regional: the loop's model is a view whose blocks are compiled; it shares every
    parameter with the model, whose own blocks (evaluation, checkpoints) stay eager."""
    compiled = []

    def fake_compile(m):  # torch.compile's eager backend: the same graph capture, no code generation
        compiled.append(m)
        return torch._dynamo.optimize("eager")(m)
    monkeypatch.setattr(torch, "compile", fake_compile)
    model = train.GPT(train.model_config(tiny_config(tmp_path, window=8, global_every=2), 512))
    keys = list(model.state_dict())
    view = train.compile_blocks(model)
    assert compiled == list(model.blocks) and all(isinstance(b, torch._dynamo.eval_frame.OptimizedModule) for b in view.blocks)
    assert all(not isinstance(b, torch._dynamo.eval_frame.OptimizedModule) for b in model.blocks)
    assert {id(p) for p in view.parameters()} == {id(p) for p in model.parameters()}
    assert list(model.state_dict()) == keys
    x = torch.randint(0, 512, (2, 32))
    loss = view(x, x)[1]
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    eager = model(x, x)[1]
    eager.backward()
    assert torch.allclose(loss, eager, atol=1e-6)
    assert all(torch.allclose(g, p.grad, atol=1e-6) for g, p in zip(grads, model.parameters()))


@pytest.fixture
def counted_compile(monkeypatch):
    """torch.compile with a backend that counts the graphs dynamo hands it (a first compile or a
    recompile) and the calls of the compiled code: a frame past dynamo's recompile limit runs eager,
    so its calls are missing from "runs". No code generation: seconds on CPU."""
    seen = dict(graphs=0, runs=0)

    def backend(gm, example_inputs):
        seen["graphs"] += 1

        def run(*args):
            seen["runs"] += 1
            return gm.forward(*args)
        return run
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda m, **kw: compile_(m, backend=backend, **kw))
    return seen


def test_compiled_algo_run_compiles_once(tmp_path, counted_compile):
    """--compile on an algorithmic task (lengen): the batch's width was the longest example of each
    step, a new shape nearly every step, and ALiBi's kernel specialises on it, so dynamo recompiled
    each step until its limit (8) and then ran the blocks eager. Every batch now has the run's one
    width (tasks.algo_width): one graph, run by every forward of the 30 steps."""
    cfg = tiny_config(tmp_path, algo="copy", algo_len="1,16", batch_size=4, iters=30, eval_interval=1000,
                      ckpt_every=1000, compile=True, block_size=40, n_layer=1, pos="alibi")
    train.train(cfg)
    assert counted_compile == dict(graphs=1, runs=30)
    x, y = data.train_batch(cfg, 40, None, 3)
    assert x.shape[1] == tasks.algo_width("copy", (1, 16)) == 34 and (y[:, -1] == -1).any()
    eager = data.train_batch(dataclasses.replace(cfg, compile=False), 40, None, 3)  # the same batch, trimmed
    assert torch.equal(eager[0], x[:, :eager[0].shape[1]]) and (y[:, eager[0].shape[1]:] == -1).all()


def test_chained_compiled_runs_stay_under_the_recompile_limit(tmp_path, counted_compile):
    """Ten sliding-window runs of 3 steps at ten context lengths in one process (tools/chain.py, as a
    sweep job runs its steps): each run compiles its blocks afresh (compile_blocks resets dynamo).
    With one cache shared by the runs, only the first run's 3 steps ran compiled code (measured
    without the reset); now every forward of the 30 steps does."""
    cfg = tiny_config(tmp_path)
    data.corpus_of(cfg)  # the corpus prepared once into the cache, which the chained runs read
    steps = [f"{sys.executable} {os.path.join(ROOT, 'train.py')} --size 0.1M --n_layer 1 --window 8 --data {cfg.data} "
             f"--cache_dir {cfg.cache_dir} --vocab_size 512 --val_frac 0.34 --batch_size 2 --iters 3 --eval_interval 1000 "
             f"--eval_tokens 64 --final_eval_tokens 64 --ptq_bits '' --compile --quiet --block_size {16 + 4 * i} "
             f"--out_dir {tmp_path / f'r{i}'}" for i in range(10)]
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP)}
    try:
        assert chain(" && ".join(steps)) == 0
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    assert counted_compile["runs"] == 30 and counted_compile["graphs"] <= 2 * 10

def test_process_group_timeout_flag(monkeypatch):
    import datetime
    import cli
    import torch.distributed as dist
    got = {}
    monkeypatch.setattr(dist, "is_initialized", lambda: bool(got))
    monkeypatch.setattr(dist, "init_process_group", lambda backend, timeout: got.update(backend=backend, timeout=timeout))
    monkeypatch.setattr(dist, "get_backend", lambda: got["backend"])
    for k, v in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0").items():
        monkeypatch.setenv(k, v)
    d = cli.setup_device("cpu", 90)
    assert got == dict(backend="gloo", timeout=datetime.timedelta(seconds=90)) and d.owner
    assert not cli.setup_device("cpu", 90).owner  # a group already started is reused, and left to its owner
    assert train.TrainConfig().dist_timeout == 1800 and "dist_timeout" in train.FREE_ON_RESUME


def test_muon_and_adamw_parameter_groups(tmp_path):
    cfg = tiny_config(tmp_path)
    model = train.GPT(train.model_config(cfg, 512))
    opts = train.build_optimizers(model, cfg)
    assert isinstance(opts[0], train.Muon)
    muon_ids = {id(p) for g in opts[0].param_groups for p in g["params"]}
    for n, p in model.named_parameters():
        assert (id(p) in muon_ids) == (n.startswith("blocks.") and p.ndim == 2), n
    cfg.optimizer = "adamw"
    opts = train.build_optimizers(model, cfg)
    assert len(opts) == 1 and isinstance(opts[0], torch.optim.AdamW)
    assert sum(p.numel() for g in opts[0].param_groups for p in g["params"]) == model.num_params()


# ---------------------------------------------------------------- tokenizer and cache

@pytest.mark.parametrize("script", ["train.py", "evaluate.py", "extend.py", "tools/export.py"])
def test_every_flag_has_help_text(script, capsys):
    """--help of every script comes from its dataclasses' field metadata (cli.flag): each flag shows."""
    import dataclasses
    import evaluate
    from tools import export
    import extend
    from model import GPTConfig
    classes = {"train.py": (train.TrainConfig, GPTConfig), "evaluate.py": (evaluate.EvalConfig,),
               "extend.py": (extend.ExtendConfig,), "tools/export.py": (export.ExportConfig,)}[script]
    main = {"train.py": train.main, "evaluate.py": evaluate.main, "extend.py": extend.main,
            "tools/export.py": export.main}[script]
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for cls in classes:
        for f in dataclasses.fields(cls):
            if "help" not in f.metadata:
                continue  # not flags: the model overrides dict, and the vocabulary (set by the tokenizer)
            if not f.metadata.get("positional"):
                assert f"--{f.name}" in text, (script, f.name)
            assert " ".join(f.metadata["help"].split())[:30] in text, (script, f.name)


def test_tokenizer_round_trip_and_truncation():
    enc = data.get_tokenizer("cl100k_base", 4096)
    assert enc.n_vocab == 4096 and enc.eot_token == 4095
    text = "To be, or not to be: that is the question.\nZwölf Boxkämpfer — 日本語 ✓ 12345\t end"
    ids = enc.encode_ordinary(text)
    assert max(ids) < 4095 and enc.decode(ids) == text
    full = data.get_tokenizer("cl100k_base", 0)
    assert len(full.encode_ordinary(text)) < len(ids)  # more merges, fewer tokens


def test_batches_are_a_function_of_seed_and_step():
    toks = np.arange(10_000, dtype=np.uint16)
    x1, y1 = data.get_batch(toks, 4, 16, seed=1, step=7)
    x2, _ = data.get_batch(toks, 4, 16, seed=1, step=7)
    x3, _ = data.get_batch(toks, 4, 16, seed=1, step=8)
    assert torch.equal(x1, x2) and not torch.equal(x1, x3)
    assert torch.equal(x1[:, 1:], y1[:, :-1])


@pytest.mark.parametrize("flags", [dict(), dict(task_mix=0.5, short_frac=0.5, short_block=16, block_size=64),
                                   dict(algo="copy", algo_len="1,8", block_size=40)])
def test_prefetched_batches_are_the_batches_built_in_line(tmp_path, flags):
    """data.Prefetch builds each next batch on a background thread; the batches are those built in
    line, bit for bit (text, a passkey mix with short steps, an algorithmic task), also when a step
    is asked out of order (a resume), and an error in the thread is raised at the step that needs it."""
    cfg = tiny_config(tmp_path, **flags)
    corpus = None if cfg.algo else data.corpus_of(cfg)
    block = cfg.model["block_size"]
    where = {}

    def build(step):
        where[step] = threading.current_thread() is threading.main_thread()
        return data.train_batch(cfg, block, corpus, step)
    batches = data.Prefetch(build, stop=12)
    for steps in ([0, 1, 2, 3, 7, 8, 9, 10, 11], [5, 6]):  # a resume at 7; after the last step, a new start at 5
        where.clear()
        for step in steps:
            got, want = batches(step), data.train_batch(cfg, block, corpus, step)
            assert all(torch.equal(a, b) for a, b in zip(got, want)), step
        assert [s for s in steps if where[s]] == [steps[0]] + [7] * (7 in steps)  # the rest came from the worker
    assert 12 not in where and batches.worker is not None  # the last step's ended; the new start's runs

    def broken(step):
        if step == 2:
            raise cli.UserError("no batch 2")
        return step
    batches = data.Prefetch(broken, stop=5)
    assert batches(0) == 0 and batches(1) == 1
    with pytest.raises(cli.UserError, match="no batch 2"):
        batches(2)


def test_training_with_prefetch_logs_what_it_logged_without(tmp_path, monkeypatch):
    """A short run with a passkey mix logs the same losses, step for step, and records the same
    final metrics whether each batch is built ahead (data.PREFETCH) or in line."""
    runs = []
    for prefetch in (True, False):
        monkeypatch.setattr(data, "PREFETCH", prefetch)
        cfg = tiny_config(tmp_path, task_mix=0.5, block_size=64, iters=12, eval_interval=4,
                          out_dir=str(tmp_path / f"run{prefetch}"))
        result = train.train(cfg)
        with open(os.path.join(cfg.out_dir, "log.jsonl")) as f:
            runs.append((f.read(), result["metrics"]))
    assert runs[0] == runs[1] and runs[0][0].count("\n") == 12

def test_task_mix_fits_a_64_token_context(tmp_path):
    """passkey_short fits a 64-token row at vocabulary 1024 (passkey needs ~120 tokens): every task row
    of a 64-token block holds one sample, its answer the only scored tokens (the tiny longctx mix)."""
    cfg = tiny_config(tmp_path, vocab_size=1024, block_size=64, batch_size=8, task_mix=1.0,
                      task_list="passkey_short", task_loss="answer")
    corpus = data.corpus_of(cfg)
    x, y = data.train_batch(cfg, 64, corpus, step=0)
    for r in range(8):
        kept = y[r][y[r] >= 0].tolist()
        assert 0 < len(kept) < 12 and corpus.enc.decode(kept).replace(" ", "").isdigit()
        assert corpus.enc.decode(kept).strip() in corpus.enc.decode(x[r].tolist())  # the key is in the row
    cfg.task_list = "passkey"  # too long for the row: filler only, nothing scored
    _, y = data.train_batch(cfg, 64, corpus, step=0)
    assert (y < 0).all()


def test_task_mix_rows_and_answer_only_loss(tmp_path):
    """--task_mix replaces that share of rows with task sequences; --task_loss answer keeps the
    loss only on their answer tokens (text rows keep every token)."""
    cfg = tiny_config(tmp_path, vocab_size=4096, block_size=160, batch_size=16, task_mix=0.5,
                      task_list="passkey")
    corpus = data.corpus_of(cfg)
    x, y = data.train_batch(cfg, 160, corpus, step=3)
    key = corpus.enc.encode_ordinary(" The pass key is")
    is_task = [any(x[r, i:i + len(key)].tolist() == key for i in range(160)) for r in range(16)]
    assert 0 < sum(is_task) < 16 and (y >= 0).all()
    cfg.task_loss = "answer"
    xa, ya = data.train_batch(cfg, 160, corpus, step=3)
    assert torch.equal(x, xa)
    for r in range(16):
        kept = ya[r][ya[r] >= 0].tolist()
        if not is_task[r]:
            assert len(kept) == 160
        else:  # the answer " <digits>" of each passkey sample, nothing else
            assert 0 < len(kept) < 12 and corpus.enc.decode(kept).replace(" ", "").isdigit()


def test_task_short_only_puts_the_task_rows_on_the_short_steps(tmp_path):
    """--task_short_only (extend.py --task_rows short): task rows only on the --short_frac steps at
    --short_block; the long steps are exactly the text batch (all tokens scored), the short ones
    still hold passkey samples (answers scored only)."""
    cfg = tiny_config(tmp_path, vocab_size=1024, block_size=128, batch_size=4, task_mix=1.0, short_frac=0.5,
                      short_block=64, task_list="passkey_short", task_loss="answer", task_short_only=True)
    corpus = data.corpus_of(cfg)
    kinds = set()
    for step in range(12):
        x, y = data.train_batch(cfg, 128, corpus, step)
        if x.shape[1] == 128:  # a long step: text only, the same batch as without any task mix
            xt, yt = data.get_batch(corpus.train, 4, 128, cfg.seed, step)
            assert torch.equal(x, xt) and torch.equal(y, yt)
        else:
            assert x.shape == (8, 64) and ((y >= 0).sum(1) < 12).all()  # every row a sample: its answer scored
        kinds.add(x.shape[1])
    assert kinds == {64, 128}
    cfg.task_short_only = False  # the default: the long steps hold task rows too
    assert any(not torch.equal(data.train_batch(cfg, 128, corpus, s)[1], data.get_batch(corpus.train, 4, 128, cfg.seed, s)[1])
               for s in range(12) if data.train_batch(cfg, 128, corpus, s)[0].shape[1] == 128)


def test_short_warmup_puts_the_short_steps_first(tmp_path):
    """--short_warmup: the --short_frac share of the run's steps at --short_block come first (sequence
    length warmup), the rest at the full block; without it they are drawn at random over the run."""
    cfg = tiny_config(tmp_path, block_size=64, batch_size=4, short_frac=0.25, short_block=32, short_warmup=True)
    corpus = data.corpus_of(cfg)
    widths = [data.train_batch(cfg, 64, corpus, step, iters=16)[0].shape for step in range(16)]
    assert widths == [(8, 32)] * 4 + [(4, 64)] * 12
    batches = data.train_batches(cfg, 64, corpus, 16)  # what train.py's loop asks for (prefetched): the same
    assert [batches(step)[0].shape for step in range(16)] == widths
    cfg.short_warmup = False
    widths = [data.train_batch(cfg, 64, corpus, step, iters=16)[0].shape[1] for step in range(16)]
    assert 32 in widths[4:] or 64 in widths[:4]  # drawn, not first


def test_validation_is_deterministic_and_covers_the_split(tiny_run):
    cfg, result = tiny_run
    corpus = data.corpus_of(cfg)
    model, _, _ = load_run(cfg.out_dir)
    a = evaluate(model, corpus.val, corpus.token_bytes, 32)
    b = evaluate(model, corpus.val, corpus.token_bytes, 32, batch_tokens=3 * 32)  # 3 rows a batch
    assert a["loss"] == pytest.approx(b["loss"], abs=1e-12)  # only the float64 sums' grouping differs
    assert a["loss"] == pytest.approx(result["metrics"]["val_loss"], abs=1e-9)
    assert a["tokens"] == (len(corpus.val) - 1) // 32 * 32
    # bits per byte = nats per token * tokens / (ln 2 * bytes)
    assert a["bpb"] < a["loss"] / math.log(2)


def test_evaluate_prefix_is_the_shorter_evaluation(tiny_run):
    cfg, _ = tiny_run
    corpus = data.corpus_of(cfg)
    model, _, _ = load_run(cfg.out_dir)
    short = evaluate(model, corpus.val, corpus.token_bytes, 32, max_tokens=1000)
    for batch in (3 * 32, 0):  # a batch of 3 rows straddles the prefix's end (31 windows)
        full = evaluate(model, corpus.val, corpus.token_bytes, 32, batch, max_tokens=4096, prefix_tokens=1000)
        assert full["tokens"] == 4096 and full["prefix"]["tokens"] == short["tokens"] == 1000 // 32 * 32
        assert full["prefix"]["loss"] == pytest.approx(short["loss"], abs=1e-12)


def test_final_eval_budget_is_honoured(tmp_path):
    """Every final pass (full precision, each PTQ bit-width) scores the same first
    --final_eval_tokens of val; the logged quick evals keep their own --eval_tokens."""
    cfg = tiny_config(tmp_path, final_eval_tokens=200, ptq_bits="4")
    rec = train.train(cfg)
    corpus = data.corpus_of(cfg)
    model, _, _ = load_run(cfg.out_dir)
    ev = lambda m, n: evaluate(m, corpus.val, corpus.token_bytes, 32, max_tokens=n)["loss"]
    m = rec["metrics"]
    assert m["val_tokens"] == 200 // 32 * 32 and rec["config"]["final_eval_tokens"] == 200
    assert m["val_loss"] == pytest.approx(ev(model, 200), abs=1e-12)
    assert rec["ptq"]["4"]["val_loss"] == pytest.approx(ev(quant.ptq_model(model, 4), 200), abs=1e-12)
    assert abs(ev(model, 0) - m["val_loss"]) > 1e-4  # the whole split scores otherwise: the budget held
    last = [json.loads(line) for line in open(os.path.join(cfg.out_dir, "log.jsonl"))][-1]
    assert last["val_loss"] == pytest.approx(ev(model, cfg.eval_tokens), abs=6e-6)


def test_last_eval_is_the_deployed_final_pass(tmp_path, monkeypatch):
    """A QAT run's eval after its last step is its deployed final pass, whose first --eval_tokens
    are the logged quick eval: no token is scored twice; each pass on --final_eval_tokens."""
    calls, orig = [], evaluate
    monkeypatch.setattr(train, "evaluate", lambda *a, **k: (calls.append(k.get("max_tokens")), orig(*a, **k))[1])
    cfg = tiny_config(tmp_path, bits=4, final_eval_tokens=1024, eval_tokens=512)  # 20 steps, an eval every 10
    m = train.train(cfg)["metrics"]
    assert calls == [512, 1024, 1024]  # step 10; step 20 = the deployed pass; the full-precision pass
    corpus = data.corpus_of(cfg)
    model, _, _ = load_run(cfg.out_dir)  # QAT on, as deployed
    ev = lambda n: orig(model, corpus.val, corpus.token_bytes, 32, max_tokens=n)["loss"]
    assert m["val_tokens"] == 1024 and m["val_loss"] == pytest.approx(ev(1024), abs=1e-12)
    last = [json.loads(line) for line in open(os.path.join(cfg.out_dir, "log.jsonl"))][-1]
    assert last["step"] == 20 and last["val_loss"] == pytest.approx(ev(512), abs=6e-6)
    quant.set_qat(model, False)
    assert m["val_loss_fp"] == pytest.approx(ev(1024), abs=1e-12)


def test_eval_batch_tokens_bound_the_logits():
    assert cli.eval_batch_tokens("cpu", 512) == 4096 and cli.eval_batch_tokens("cpu", 1024) == 2048
    assert cli.eval_batch_tokens("cuda:0", 50257) == 2 ** 28 // 50257
    assert cli.eval_batch_tokens("cuda", 50257, given=100) == 100 and cli.eval_batch_tokens("cpu", 10 ** 9) == 1


def test_adamw_steps_exactly_as_torch_adamw():
    torch.manual_seed(0)
    a = torch.nn.Linear(8, 8)
    b = copy.deepcopy(a)
    kw = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opts = [(a, train.AdamW(a.parameters(), **kw)), (b, torch.optim.AdamW(b.parameters(), **kw))]
    for _ in range(5):
        x = torch.randn(4, 8)
        for m, o in opts:
            m(x).square().sum().backward()
            o.step()
            o.zero_grad()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    sa, sb = (o.state_dict() for _, o in opts)
    assert all(torch.equal(sa["state"][k][n], sb["state"][k][n]) for k in sb["state"] for n in sb["state"][k])
    opts[1][1].load_state_dict(sa)  # the same checkpoint format both ways


def test_eager_training_never_imports_dynamo(tmp_path):
    """torch.optim's hooks and the PTQ twin on the meta device would import torch._dynamo (~2 s of a
    tiny run's start): an eager run, checkpoints and PTQ included, needs none of it."""
    code = (f"import sys, pathlib; sys.path.insert(0, {os.path.join(ROOT, 'tests')!r}); import train; "
            f"from conftest import tiny_config; "
            f"train.train(tiny_config(pathlib.Path({str(tmp_path)!r}), iters=4, ckpt_every=2, ptq_bits='4')); "
            f"print('dynamo' if 'torch._dynamo' in sys.modules else 'no dynamo')")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "no dynamo"


# ---------------------------------------------------------------- the run record

def test_record_schema(tiny_run):
    cfg, r = tiny_run
    rec = json.load(open(os.path.join(cfg.out_dir, "result.json")))
    for key in ("config", "model_config", "seed", "git_commit", "corpus", "versions", "device",
                "params", "metrics", "wall_time_s", "tokens_per_s", "steps", "tokens", "status"):
        assert key in rec, key
    assert rec["corpus"]["hash"] and rec["versions"]["torch"] == torch.__version__
    assert rec["versions"]["torch_threads"] == torch.get_num_threads()
    # the kernels' vector instructions decide the last bits (a QAT run amplifies them): recorded
    assert rec["versions"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and "cpu" in rec["versions"]
    assert rec["params"]["non_embedding"] < rec["params"]["total"]
    m = rec["metrics"]
    assert m["val_loss"] < m["unigram_loss"] and m["val_bpb"] > 0
    # the smoothed train loss is the mean of the last 5% of steps' losses (here: the last one)
    assert m["train_loss_smooth"] == pytest.approx(np.mean([r["loss"] for r in
                                                            map(json.loads, open(os.path.join(cfg.out_dir, "log.jsonl")))][-1:]), abs=1e-4)
    # full-precision runs also record the PTQ baseline on the same grid
    assert set(rec["ptq"]) == {"8", "6", "4"} and rec["ptq"]["4"]["val_loss"] != m["val_loss"]
    log = [json.loads(l) for l in open(os.path.join(cfg.out_dir, "log.jsonl"))]
    assert [r["step"] for r in log] == list(range(1, cfg.iters + 1))
    assert "val_loss" in log[cfg.eval_interval - 1]
    assert os.path.exists(os.path.join(cfg.out_dir, "ckpt_warmdown.pt"))
    ck = load_checkpoint(os.path.join(cfg.out_dir, "ckpt_warmdown.pt"))
    assert ck["step"] == int(cfg.iters * (1 - cfg.warmdown))


def test_qat_run_reports_deployed_and_fp_loss(tmp_path):
    cfg = tiny_config(tmp_path, bits=4, save_at="0.5")
    m = train.train(cfg)["metrics"]
    assert m["val_loss"] == m["val_loss_quant"]
    assert m["quant_gap"] == pytest.approx(m["val_loss_quant"] - m["val_loss_fp"])
    assert m["quant_gap"] != 0
    assert os.path.exists(os.path.join(cfg.out_dir, "ckpt_0.5.pt"))


def test_late_qat_switches_on_mid_run(tmp_path, monkeypatch):
    """The QAT switch (a tensor, so a compiled model follows it) is on from the step QAT turns on,
    and is set only when it changes: twice in the loop, not once per module per step."""
    seen, state = [], []
    orig, step = train.set_qat, train.train_step
    monkeypatch.setattr(train, "set_qat", lambda m, on: (seen.append(on), orig(m, on)))
    monkeypatch.setattr(train, "train_step", lambda run, mult: (state.append(run.model.blocks[0].mlp.c_fc.qat_on.item()),
                                                                step(run, mult))[1])
    cfg = tiny_config(tmp_path, bits=3, qat_start=0.5, iters=10)
    train.train(cfg)
    assert state == [0.0] * 5 + [1.0] * 5
    assert seen[:2] == [False, True] and len(seen) == 4  # then the final evaluation's off and on


# ---------------------------------------------------------------- resume

def test_resume_gives_identical_final_metrics(tmp_path, monkeypatch):
    full = train.train(tiny_config(tmp_path / "a", bits=6))
    cfg = tiny_config(tmp_path / "b", bits=6)
    orig = data.get_batch

    def crash_at_15(tokens, b, t, seed, step):
        if step == 15:
            raise KeyboardInterrupt
        return orig(tokens, b, t, seed, step)

    monkeypatch.setattr(data, "get_batch", crash_at_15)
    with pytest.raises(KeyboardInterrupt):
        train.train(cfg)
    assert not os.path.exists(os.path.join(cfg.out_dir, "result.json"))
    monkeypatch.setattr(data, "get_batch", orig)
    cfg.resume = True
    resumed = train.train(cfg)
    assert resumed["metrics"]["val_loss"] == full["metrics"]["val_loss"]
    assert resumed["metrics"]["val_loss_fp"] == full["metrics"]["val_loss_fp"]
    log = [json.loads(l)["step"] for l in open(os.path.join(cfg.out_dir, "log.jsonl"))]
    assert log == list(range(1, cfg.iters + 1))


def test_nan_loss_stops_and_keeps_last_checkpoint(tmp_path, monkeypatch):
    cfg = tiny_config(tmp_path, iters=20, ckpt_every=5)
    orig = train.GPT.forward
    calls = {"n": 0}

    def nan_after_12(self, idx, targets=None, reduction="mean"):
        logits, loss = orig(self, idx, targets, reduction)
        if self.training:
            calls["n"] += 1
            if calls["n"] > 12:
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(train.GPT, "forward", nan_after_12)
    with pytest.raises(train.UserError, match="loss is nan"):
        train.train(cfg)
    ck = load_checkpoint(os.path.join(cfg.out_dir, "ckpt.pt"))
    assert ck["step"] == 10 and all(torch.isfinite(v).all() for v in ck["model"].values())
    assert not os.path.exists(os.path.join(cfg.out_dir, "result.json"))


# ---------------------------------------------------------------- DDP

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_gloo_ddp_matches_single_process(tmp_path):
    single = train.train(tiny_config(tmp_path / "s", iters=10, grad_accum=2))
    cfg = tiny_config(tmp_path / "d", iters=10, grad_accum=2)
    args = [f"--{k}={v}" for k, v in {**vars(cfg), **cfg.model}.items() if not isinstance(v, (bool, dict))]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
           str(_free_port()), os.path.join(ROOT, "train.py"), *args, "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    ddp = json.load(open(os.path.join(cfg.out_dir, "result.json")))
    assert ddp["world_size"] == 2
    assert ddp["metrics"]["val_loss"] == pytest.approx(single["metrics"]["val_loss"], abs=2e-4)


# ---------------------------------------------------------------- bad input (CLI)

@pytest.fixture
def _cli(monkeypatch, capsys):
    """train.main(argv) in this process, from cwd: (exit status, stderr). The interpreter start is the
    same for every case and costs seconds; test_bad_input_in_a_real_process checks it once."""
    def run(args, cwd):
        import warnings
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        with warnings.catch_warnings(record=True) as caught:  # a process would print these on stderr too
            warnings.simplefilter("always")
            try:
                code = train.main([*args, "--quiet"]) or 0
            except SystemExit as e:
                code = e.code
        return code, "\n".join([capsys.readouterr().err.strip(), *(str(w.message) for w in caught)])
    return run


def test_bad_input_in_a_real_process(tmp_path):
    """As a user sees it: a non-zero exit status and one line on stderr, no traceback."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "train.py"), "--bits", "9", "--quiet"],
                       capture_output=True, text=True, cwd=str(tmp_path), timeout=120)
    err = p.stderr.strip()
    assert p.returncode == 1 and err.startswith("error: bits 9 not supported") and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("args,msg", [
    (["--no_such_flag", "1"], "unrecognized arguments"),
    (["--bits", "9"], "bits 9 not supported"),
    (["--bits", "1"], "bits 1 not supported"),
    (["--warmdown", "1.5"], "--warmdown"),
    (["--warmdown", "-0.1"], "--warmdown"),
    (["--warmup", "0.5", "--warmdown", "0.6"], "exceeds 1"),
    (["--size", "7M"], "unknown size preset"),
    (["--data", "/no/such/corpus"], "data path not found"),
    (["--clip", "quantile:2"], "clip rule"),
    (["--n_kv_head", "3"], "must divide"),
    (["--task_mix", "0.5", "--task_list", "passkey,nope"], "unknown task 'nope'"),
    (["--task_mix", "0.5", "--task_loss", "answers"], "--task_loss"),
    (["--task_mix", "0.5", "--task_short_only", "true"], "--task_short_only"),
    (["--algo", "copy", "--algo_len", "1,16", "--algo_offset", "32", "--block_size", "64"], "--block_size >= 66"),
])
def test_bad_input_one_line_error(tmp_path, args, msg, _cli):
    code, err = _cli(args + ["--out_dir", str(tmp_path / "o")], tmp_path)
    assert code != 0 and msg in err and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert not os.path.exists(tmp_path / "o" / "result.json")


def test_corpus_smaller_than_one_batch(tmp_path, _cli):
    (tmp_path / "small.txt").write_text("too short\n" * 10)
    code, err = _cli(["--data", str(tmp_path / "small.txt"), "--out_dir", str(tmp_path / "o"),
                      "--cache_dir", str(tmp_path / "k")], tmp_path)
    assert code != 0 and "corpus too small" in err and "Traceback" not in err


def test_finished_run_is_not_overwritten_and_corrupt_checkpoint(tiny_run, tmp_path, _cli):
    cfg, _ = tiny_run
    before = open(os.path.join(cfg.out_dir, "result.json")).read()
    args = ["--size", "0.1M", "--data", cfg.data, "--vocab_size", "512", "--block_size", "32",
            "--iters", "5", "--out_dir", cfg.out_dir, "--cache_dir", cfg.cache_dir]
    code, err = _cli(args, tmp_path)
    assert code != 0 and "already holds a finished run" in err
    assert open(os.path.join(cfg.out_dir, "result.json")).read() == before
    # a corrupt checkpoint when resuming an unfinished run
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "ckpt.pt").write_bytes(b"not a checkpoint")
    code, err = _cli(args[:-4] + ["--out_dir", str(bad), "--cache_dir", cfg.cache_dir, "--resume"], tmp_path)
    assert code != 0 and "corrupt or unreadable checkpoint" in err and "Traceback" not in err
    assert (bad / "ckpt.pt").read_bytes() == b"not a checkpoint"


@pytest.mark.parametrize("minutes, want", [(1e-9, 7), (1000.0, 0)])
def test_ckpt_minutes_sets_the_cadence_by_wall_time(tmp_path, monkeypatch, minutes, want):
    """--ckpt_minutes replaces --ckpt_every: a cadence shorter than a step writes ckpt.pt after every
    step but the last, a long one none until the final checkpoint; the result is the same run's."""
    names = []
    real = train.checkpoint
    monkeypatch.setattr(train, "checkpoint", lambda run, name: (names.append((run.step, name)), real(run, name))[1])
    cfg = tiny_config(tmp_path, iters=8, ckpt_every=2, ckpt_minutes=minutes, eval_interval=8)
    train.train(cfg)
    mid = [s for s, n in names if n == "ckpt.pt" and s < 8]
    assert len(mid) == want and names[-1] == (8, "ckpt.pt")


def test_ckpt_minutes_must_be_finite_and_not_negative(tmp_path):
    for bad in (-1.0, float("inf")):
        with pytest.raises(train.UserError, match="--ckpt_minutes"):
            train.check_config(tiny_config(tmp_path, ckpt_minutes=bad))
