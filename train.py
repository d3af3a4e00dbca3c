"""
Train a small GPT, optionally with quantisation-aware training (QAT), on the bundled corpus.

    python train.py --bits 6 --warmdown 0.33                 # CPU or one GPU
    torchrun --nproc_per_node 2 train.py --bits 6             # data-parallel, same global batch
    python train.py --init_from out/base/ckpt.pt --iters 100  # continue from another run's weights

The trainer: its config, the LR schedule, Muon/AdamW, the loop, evaluation, checkpoints and the run
record. The data pipeline is data.py, the model model.py; extend.py, evaluate.py and tools/export.py
start from the run folders written here (load_run).
"""
import contextlib
import copy
import inspect
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

import cli
import data
import tasks
from cli import UserError, flag, parse, write_json, atomic_write, main as cli_main
from model import (GPT, GPTConfig, SIZES, checkpoint_file, evaluate, hope_record, load_checkpoint, model_from_checkpoint,
                   save_checkpoint)
from quant import frozen, ptq_eval, set_qat, check_bits

# The final evaluation's budget: 2^23 tokens holds the whole val split of the bundled corpus (0.2-0.3M
# tokens: the tiny studies score it all) and bounds the cost of a large one's (the paper sweeps' value
# too: 8192 sequences of 1024 per pass, under 3% of any paper run's training tokens)
FINAL_EVAL_TOKENS = 2 ** 23

# -----------------------------------------------------------------------------
# Run configuration: every training flag, with what it does. Architecture flags are GPTConfig's
# (model.py): given on the command line they land in `model` and override the --size preset.


@dataclass
class TrainConfig:
    size: str = flag("1M", "preset by non-embedding parameters (model.SIZES); --n_layer etc. override it")
    init_from: str = flag("", "start from this checkpoint's weights and architecture (extend.py uses it)")
    # data (data.py)
    data: str = flag("", "corpus: a data.py-prepared folder, a folder of .bin shards, .txt / .jsonl / tar ('' = bundled)")
    tokenizer: str = flag("cl100k_base", "tiktoken encoding available offline (none: a shard folder without one)")
    vocab_size: int = flag(4096, "keep the first V-1 BPE merges + end-of-text (0 = full vocabulary)")
    val_frac: float = flag(0.1, "own corpora: share of documents held out (the bundled one holds out 4 plays)")
    cache_dir: str = flag("", "where raw corpora are prepared once ('' = data/cache)")
    short_frac: float = flag(0.0, "long/short mix: share of steps trained at --short_block instead")
    short_block: int = flag(0, "the short context of the mix (same tokens per step: more rows)")
    short_warmup: bool = flag(False, "the --short_frac steps come first (sequence length warmup, arXiv 2108.06084)")
    task_mix: float = flag(0.0, "share of training sequences replaced by synthetic retrieval tasks")
    task_list: str = flag("passkey,niah_single,niah_multikey", "tasks.py TASKS mixed in by --task_mix")
    task_loss: str = flag("all", "task rows score all tokens | answer (only the answer tokens)")
    task_short_only: bool = flag(False, "task rows only on the --short_frac steps, the rest text (extend.py --task_rows)")
    algo: str = flag("", "train on an algorithmic task instead of text: copy | reverse | sort | ...")
    algo_len: str = flag("1,16", "input lengths min,max seen in training (test longer with evaluate.py)")
    algo_offset: int = flag(0, "random position offsets up to this many PAD tokens (0 = none)")
    # optimisation
    qat_start: float = flag(0.0, "fraction of training after which QAT (--bits < 16) turns on (0 = from init)")
    optimizer: str = flag("muon", "muon (Muon on block matrices + AdamW on the rest) | adamw")
    lr: float = flag(1.0, "multiplier on every base LR below: the swept LR magnitude")
    muon_lr: float = flag(0.02, "base LR of Muon (block matrices)")
    adam_lr: float = flag(0.006, "base LR of AdamW (embeddings, head, norms; every param with adamw)")
    weight_decay: float = flag(0.0, "AdamW decoupled weight decay on matrices")
    grad_clip: float = flag(1.0, "global gradient-norm clip (0 = off)")
    schedule: str = flag("wsd", "wsd (warmup-stable-decay: the warmdown) | cosine")
    warmup: float = flag(0.02, "fraction of steps of linear warmup")
    warmdown: float = flag(0.33, "fraction of steps at the end that decay linearly (wsd)")
    min_lr_frac: float = flag(0.0, "LR at the end of the schedule, as a fraction of the peak")
    iters: int = flag(300, "optimizer steps")
    tokens: int = flag(0, "token budget; if > 0 it sets iters = tokens / (batch_size * block_size)")
    batch_size: int = flag(16, "sequences per optimizer step (global, across processes)")
    grad_accum: int = flag(1, "micro-batches per step (batch_size must divide evenly)")
    seed: int = flag(0, "initialisation and data order")
    # evaluation, records, checkpoints
    eval_interval: int = flag(50, "steps between quick validation evals (on eval_tokens of val)")
    eval_tokens: int = flag(16384, "tokens of the val split used by the quick evals")
    final_eval_tokens: int = flag(FINAL_EVAL_TOKENS, "tokens of the val split scored by every final pass (full "
                                  "precision, each --ptq_bits, the QAT deployed model): the same first tokens; 0 = all")
    eval_batch_tokens: int = flag(0, "tokens per evaluation forward pass (0 = sized to the device and vocabulary)")
    ptq_bits: str = flag("8,6,4", "full-precision runs: also record round-to-nearest PTQ loss at these bits")
    save_at: str = flag("", "extra checkpoints at these comma-separated fractions, e.g. 0.25,0.5")
    ckpt_every: int = flag(100, "steps between resume checkpoints (ckpt.pt)")
    ckpt_minutes: float = flag(0.0, "minutes of wall time between resume checkpoints, instead of --ckpt_every "
                               "(0 = by steps): what preemption needs, not one per N steps of a fast run")
    out_dir: str = flag("", "'' = out/<run name>")
    resume: bool = flag(False, "continue the run in out_dir from its last checkpoint")
    overwrite: bool = flag(False, "replace a finished run in out_dir")
    device: str = flag("auto", "auto | cpu | cuda | cuda:N")
    compile: bool = flag(False, "torch.compile the transformer blocks (CUDA; regional: see compile_blocks)")
    dist_timeout: int = flag(1800, "torchrun: seconds a process waits for the others in a collective before failing")
    quiet: bool = flag(False, "no progress bar")
    model: dict = field(default_factory=dict)  # the GPTConfig flags given on the command line


# may change on --resume (ptq_bits and the final-eval flags only shape the final evaluation, done after the resume)
FREE_ON_RESUME = ("resume", "quiet", "overwrite", "compile", "out_dir", "cache_dir", "dist_timeout", "ptq_bits",
                  "final_eval_tokens", "eval_batch_tokens")

# -----------------------------------------------------------------------------
# Schedule and optimizers


def lr_mult(step, total, warmup=0.02, warmdown=0.33, schedule="wsd", min_lr_frac=0.0):
    """LR multiplier at `step` of `total` (progress p = step / total). Pure function.
    wsd (warmup-stable-decay, arXiv 2404.06395): linear warmup, constant, then linear decay to
    min_lr_frac over the last `warmdown` fraction. cosine: linear warmup, then cosine to min_lr_frac."""
    p = step / max(total, 1)
    if warmup > 0 and p < warmup:
        return p / warmup
    if schedule == "cosine":
        q = (p - warmup) / max(1 - warmup, 1e-12)
        return min_lr_frac + (1 - min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(q, 1.0)))
    if warmdown <= 0 or p < 1 - warmdown:
        return 1.0
    q = (p - (1 - warmdown)) / warmdown
    return 1.0 - (1.0 - min_lr_frac) * min(q, 1.0)


def newton_schulz5(G, steps=5):
    """Approximate orthogonalisation U V^T of G = U S V^T with the quintic Newton-Schulz
    iteration of Muon (Keller Jordan 2024); bf16 on GPU, fp32 on CPU. G: one matrix [m, n] or a
    stack of them [N, m, n], each orthogonalised on its own (batched matmuls: one launch per
    operation for the whole stack instead of one per matrix)."""
    a, b, c = 3.4445, -4.7750, 2.0315
    X = G.bfloat16() if G.is_cuda else G.float()
    tall = X.size(-2) > X.size(-1)
    if tall:
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        X = a * X + (b * A + c * A @ A) @ X
    return (X.mT if tall else X).to(G.dtype)


class Muon(torch.optim.Optimizer):
    """MomentUm Orthogonalized by Newton-schulz, for 2-D weight matrices inside the blocks. The
    matrices of one shape are updated together: momentum by foreach ops, Newton-Schulz on their
    stack (the same arithmetic as one matrix at a time, in a few launches instead of ~30 per matrix)."""

    def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, ns_steps=5):
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            same = {}
            for p in group["params"]:
                if p.grad is not None:
                    same.setdefault((p.shape, p.dtype, p.device), []).append(p)
            for ps in same.values():
                for p in ps:
                    if "momentum_buffer" not in self.state[p]:
                        self.state[p]["momentum_buffer"] = torch.zeros_like(p.grad)
                grads, bufs = [p.grad for p in ps], [self.state[p]["momentum_buffer"] for p in ps]
                torch._foreach_mul_(bufs, group["momentum"])
                torch._foreach_add_(bufs, grads)
                g = torch._foreach_add(grads, bufs, alpha=group["momentum"]) if group["nesterov"] else bufs
                u = newton_schulz5(torch.stack(g), group["ns_steps"])
                scale = max(1.0, ps[0].size(0) / ps[0].size(1)) ** 0.5
                torch._foreach_add_(ps, list(u.unbind(0)), alpha=-group["lr"] * scale)


def adamw_options(params):
    """fused=True where every parameter is on CUDA (one kernel for the whole update instead of
    several per tensor); else PyTorch's default implementation (CPU numbers unchanged)."""
    return dict(fused=True) if params and all(p.is_cuda for p in params) else {}


class AdamW(torch.optim.AdamW):
    """torch.optim.AdamW, its step run under no_grad directly: torch.optim's step wrapper imports
    torch._dynamo (~2 s, a sixth of a tiny run) only to place graph breaks for torch.compile, which
    never traces this loop's optimizer step. The same update, bit for bit."""

    @torch.no_grad()
    def step(self):
        return ADAMW_STEP(self)


ADAMW_STEP = inspect.unwrap(torch.optim.AdamW.step)  # the update itself, under the wrappers


def eager_optimizers():
    """torch.optim marks Optimizer.add_param_group, state_dict, load_state_dict and zero_grad with
    torch._disable_dynamo, which imports torch._dynamo at their first call to cache a not-traced
    version of each. In an eager run nothing traces them: the cache is seeded with the plain method,
    which is what a call then runs. Only while torch._dynamo is not loaded (nothing compiled yet);
    a torch without these internals simply imports it as before."""
    if "torch._dynamo" in sys.modules:
        return
    for name in ("add_param_group", "state_dict", "load_state_dict", "zero_grad"):
        plain = getattr(getattr(torch.optim.Optimizer, name, None), "__wrapped__", None)
        if plain is not None and not hasattr(plain, "__dynamo_disable"):
            setattr(plain, "__dynamo_disable", plain)


def build_optimizers(model, cfg):
    """Muon for 2-D matrices inside the blocks, AdamW for embeddings, head, norms and scalars;
    with --optimizer adamw every parameter goes to AdamW."""
    block_mats = [p for n, p in model.named_parameters() if n.startswith("blocks.") and p.ndim == 2]
    ids = {id(p) for p in block_mats}
    rest = [p for p in model.parameters() if id(p) not in ids]
    betas = (0.9, 0.95)
    if cfg.optimizer == "adamw":
        groups = [dict(params=block_mats, weight_decay=cfg.weight_decay),
                  dict(params=rest, weight_decay=0.0)]
        opts = [AdamW(groups, lr=cfg.adam_lr * cfg.lr, betas=betas, eps=1e-8, **adamw_options(block_mats + rest))]
    else:
        opts = [Muon(block_mats, lr=cfg.muon_lr * cfg.lr),
                AdamW(rest, lr=cfg.adam_lr * cfg.lr, betas=betas, eps=1e-8, weight_decay=0.0, **adamw_options(rest))]
    for opt in opts:
        for g in opt.param_groups:
            g["base_lr"] = g["lr"]
    return opts

# -----------------------------------------------------------------------------
# Training: the step, the loop and the finish (the run it works on is set up below)


@cli.stop_signals()  # SIGTERM / SIGUSR1: the loop stops at its next step boundary, checkpointed
def train(cfg):
    """Train (or resume) one run; returns its result dict. Stopped by a signal: cli.Stopped, with
    ckpt.pt written; --resume continues it exactly."""
    run = setup(cfg)
    try:
        if os.path.exists(run.path("result.json")):  # --resume of a finished run
            print(f"{run.out_dir} already finished; nothing to resume")
            return read_result(run.out_dir)
        loop(run)
        result = finish(run)
        if run.dist.ddp:  # no rank tears the process group down while another still uses it
            import torch.distributed as dist
            dist.barrier()
        return result
    finally:
        release(run)
        if run.dist.ddp and run.dist.owner:
            import torch.distributed as dist
            dist.destroy_process_group()


def train_step(run, mult):
    """One optimizer step on the global batch, split over micro-batches and DDP ranks."""
    cfg, dist = run.cfg, run.dist
    for o in run.opts:
        for g in o.param_groups:
            g["lr"] = g["base_lr"] * mult
    x, y = run.batches(run.step)  # built while the last step ran (data.Prefetch)
    micro = len(x) // cfg.grad_accum
    per_rank = micro // dist.world
    loss_sum = torch.zeros((), device=dist.device)
    for m in range(cfg.grad_accum):
        rows = slice(m * micro + dist.rank * per_rank, m * micro + (dist.rank + 1) * per_rank)
        sync = contextlib.nullcontext() if not dist.ddp or m == cfg.grad_accum - 1 else run.train_model.no_sync()
        with sync, cli.autocast(dist.device):
            _, loss = run.train_model(cli.to_device(x[rows], dist.device), cli.to_device(y[rows], dist.device))
            (loss / cfg.grad_accum).backward()
        loss_sum += loss.detach() / cfg.grad_accum
    # the gradient norm (clipped at --grad_clip; inf = measured only, the gradients unchanged)
    norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grad_clip or math.inf)
    # DDP: the stop flags ride the loss all-reduce, so every rank learns of a signal that reached any
    # of them after this same step, with no all-reduce and sync of their own
    red = loss_sum.view(1)
    if dist.ddp:
        red = torch.cat([red, torch.tensor(cli.stop_flags(), device=dist.device)])
    cli.all_reduce_sum(red, dist)
    loss, norm, *flags = torch.cat([red[:1], norm.to(red.dtype).view(1), red[1:]]).tolist()  # one device sync a step
    run.stop = cli.stop_from_flags(flags) if dist.ddp else ""
    loss /= dist.world
    if not (math.isfinite(loss) and math.isfinite(norm)):  # stop before the update: weights stay good
        raise UserError(f"loss is {loss} (gradient norm {norm}) at step {run.step}; stopped. The last "
                        f"good checkpoint (if any) is kept in {run.out_dir}; try a lower --lr")
    for o in run.opts:
        o.step()
    run.model.zero_grad(set_to_none=True)
    return loss


def loop(run):
    cfg, iters = run.cfg, run.iters
    wsd = cfg.schedule == "wsd" and cfg.warmdown > 0 and iters > 0
    warmdown_step = int(iters * (1 - cfg.warmdown)) if wsd else None
    extra_steps = {int(iters * f): f for f in save_fractions(cfg)}
    qat_step = int(iters * cfg.qat_start)
    log = cli.LineLog(run.path("log.jsonl")) if run.dist.master else None
    pbar = None
    if run.dist.master and not cfg.quiet:
        from tqdm import tqdm
        pbar = tqdm(total=iters, initial=run.step, dynamic_ncols=True)
    tokens_per_step = cfg.batch_size * run.mcfg.block_size
    qat_on = None  # the switch as last set: flipped when it changes, not a fill_ per module per step
    stop, last_ckpt, start = "", time.time(), run.step
    while run.step < iters:
        # SIGTERM / SIGUSR1: stop here, between two steps (DDP: as the last step's all-reduce said)
        stop = run.stop if run.dist.ddp and run.step > start else cli.stop_requested(run.dist)
        if stop:
            break
        if run.step == warmdown_step:
            checkpoint(run, "ckpt_warmdown.pt")
        if run.step in extra_steps:
            checkpoint(run, f"ckpt_{extra_steps[run.step]:g}.pt")
        if run.mcfg.bits < 16 and qat_on != (run.step >= qat_step):
            qat_on = run.step >= qat_step
            set_qat(run.model, qat_on)
        mult = lr_mult(run.step, iters, cfg.warmup, cfg.warmdown, cfg.schedule, cfg.min_lr_frac)
        ts = time.time()
        loss = train_step(run, mult)
        run.step += 1
        run.train_time += time.time() - ts
        run.tokens_done += tokens_per_step
        run.losses.append(loss)
        row = dict(step=run.step, loss=round(loss, 5), lr_mult=round(mult, 5), tokens=run.step * tokens_per_step)
        if run.step % cfg.eval_interval == 0 or run.step == iters:
            ev = last_eval(run, bool(qat_on)) if run.step == iters else val_fn(run, run.model, max_tokens=cfg.eval_tokens)
            row["val_loss"] = round(ev["loss"], 5)
            if "acc" in ev:
                row["val_acc"] = round(ev["acc"], 4)
        if log:
            log.write(json.dumps(cli.clean(row), allow_nan=False) + "\n")
        if pbar:
            pbar.update(1)
            pbar.set_postfix(loss=f"{loss:.3f}", lr=f"{mult:.2f}", tok_s=f"{run.tokens_done / run.train_time:.0f}",
                             refresh=False)  # drawn with the bar's own refresh, not every step
        due = time.time() - last_ckpt >= 60 * cfg.ckpt_minutes if cfg.ckpt_minutes > 0 else run.step % cfg.ckpt_every == 0
        if due and run.step < iters:  # only rank 0 writes (checkpoint() is no collective), so ranks may disagree
            checkpoint(run, "ckpt.pt")
            last_ckpt = time.time()
    if pbar:
        pbar.close()
    if log:
        log.close()
    run.warmdown_step, run.extra_steps = warmdown_step, extra_steps
    checkpoint(run, "ckpt.pt")  # the final weights, before the record that marks them final (or: where a stop resumes)
    stop = stop or cli.stop_requested(run.dist)  # also a signal during the last step: stop before the final evaluation
    if stop:
        if run.dist.ddp:  # no rank exits before the master's checkpoint is written
            import torch.distributed as dist
            dist.barrier()
        raise cli.Stopped(f"stopped by {stop} at step {run.step}; ckpt.pt written")


def smooth_steps(iters):
    return max(1, iters // 20)  # the smoothed train loss averages the last 5% of steps


def val_fn(run, model, max_tokens=0, prefix_tokens=0):
    """The run's validation: val loss of the corpus, or exact match for --algo runs; a QAT model's
    weights are quantised once for it (quant.frozen)."""
    model = frozen(model)
    if run.cfg.algo:
        with torch.no_grad():  # no graph for the backward that never comes
            return tasks.algo_eval(model, run.cfg.algo, algo_lengths(run.cfg), run.mcfg.block_size, run.cfg.seed,
                                   run.cfg.algo_offset, device=run.dist.device)
    return evaluate(model, run.corpus.val, run.corpus.token_bytes, run.mcfg.block_size, run.cfg.eval_batch_tokens,
                    max_tokens=max_tokens, device=run.dist.device, dist_info=run.dist, prefix_tokens=prefix_tokens)


def last_eval(run, qat_on):
    """The loop's eval after its last step, as a final pass of the model as it stands (QAT on or
    off), kept for finish(); its first eval_tokens are the logged quick eval, so no token is
    scored twice. A quick eval larger than the final budget is run on its own."""
    cfg = run.cfg
    if not cfg.algo and cfg.final_eval_tokens and cfg.eval_tokens > cfg.final_eval_tokens:
        return val_fn(run, run.model, max_tokens=cfg.eval_tokens)
    ev = val_fn(run, run.model, cfg.final_eval_tokens, prefix_tokens=0 if cfg.algo else cfg.eval_tokens)
    run.final = (qat_on, ev)
    return dict(ev, **ev.get("prefix", {}))


def final_pass(run, qat_on):
    """One final evaluation on final_eval_tokens: the deployed model (QAT on) or full precision."""
    set_qat(run.model, qat_on)
    if run.final and run.final[0] == qat_on:
        return run.final[1]
    return val_fn(run, run.model, run.cfg.final_eval_tokens)


def finish(run):
    """Final evaluation on final_eval_tokens of the val split (deployed = quantised weights, and full
    precision), PTQ of full-precision runs on the same tokens, and the record, written last: its
    presence marks a finished run."""
    cfg, mcfg, model = run.cfg, run.mcfg, run.model
    tail = run.losses[-smooth_steps(run.iters):]
    metrics = dict(train_loss=tail[-1] if tail else None,  # the last step's batch
                   train_loss_smooth=float(np.mean(tail)) if tail else None,  # less noisy than one batch
                   unigram_loss=run.corpus.unigram_loss() if run.corpus else None)
    fp = final_pass(run, False)
    metrics.update(val_loss_fp=fp["loss"], val_bpb_fp=fp["bpb"], val_tokens=fp["tokens"])
    if "acc" in fp:
        metrics["val_acc"] = fp["acc"]
    if mcfg.bits < 16:
        q = final_pass(run, True)
        metrics.update(val_loss=q["loss"], val_bpb=q["bpb"], val_loss_quant=q["loss"],
                       quant_gap=q["loss"] - fp["loss"])
    else:
        metrics.update(val_loss=fp["loss"], val_bpb=fp["bpb"], val_loss_quant=None, quant_gap=None)
    result = dict(
        run_name=os.path.basename(os.path.normpath(run.out_dir)), out_dir=run.out_dir, status="done",
        config=asdict(cfg), model_config=asdict(mcfg), seed=cfg.seed, git_commit=cli.git_commit(),
        corpus=run.corpus.info if run.corpus else dict(source=f"tasks.py:{cfg.algo}", vocab_size=mcfg.vocab_size),
        versions=cli.versions(), device=run.dist.device, world_size=run.dist.world,
        ddp_backend=run.dist.backend or None,
        params=dict(total=model.num_params(), non_embedding=model.num_params(non_embedding=True)),
        hope=hope_record(model), metrics=metrics, steps=run.iters, tokens=run.iters * cfg.batch_size * mcfg.block_size,
        wall_time_s=run.wall + time.time() - run.t0,
        tokens_per_s=run.tokens_done / run.train_time if run.train_time else None,
        checkpoints=dict(final="ckpt.pt", warmdown="ckpt_warmdown.pt" if run.warmdown_step is not None else None,
                         save_at={f"{f:g}": f"ckpt_{f:g}.pt" for f in run.extra_steps.values()}),
    )
    if run.extra.get("lineage"):
        result["lineage"] = run.extra["lineage"]
    if mcfg.bits >= 16 and cfg.ptq_bits and run.corpus:
        # PTQ baseline: the same grid applied after training, for the QAT-vs-PTQ table. Every DDP
        # rank evaluates (evaluate() all-reduces); only the master writes the record
        result["ptq"] = ptq_eval(model, lambda m: val_fn(run, m, cfg.final_eval_tokens), ptq_bits(cfg), mcfg.clip)
    if run.dist.master:
        write_json(run.path("result.json"), result)
    return result

# -----------------------------------------------------------------------------
# Set-up: everything checked before anything is written, then the run folder claimed


@dataclass
class Run:
    """What set-up hands to the loop and the finish."""
    cfg: TrainConfig
    mcfg: GPTConfig
    model: torch.nn.Module
    train_model: torch.nn.Module  # the model as the loop calls it (compiled / DDP-wrapped)
    opts: list
    dist: cli.Dist
    corpus: object                # data.Corpus, or None for --algo runs
    out_dir: str
    iters: int
    step: int = 0
    tokens_done: int = 0          # tokens trained, over every process that trained this run (resumes)
    train_time: float = 0.0       # seconds in training steps, likewise: tokens/s = tokens_done / train_time
    wall: float = 0.0             # wall seconds of earlier processes of this run
    t0: float = field(default_factory=time.time)
    losses: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # lineage etc., kept in every checkpoint
    lock: object = None
    warmdown_step: int = None
    extra_steps: dict = field(default_factory=dict)
    final: tuple = None           # (QAT on, result): a final pass the loop's last eval already ran
    stop: str = ""                # DDP: the stop signal any rank had by the last step's all-reduce
    batches: object = None        # step -> its global batch (data.train_batches)

    def path(self, name):
        return os.path.join(self.out_dir, name)


def setup(cfg):
    check_config(cfg)
    dist = cli.setup_device(cfg.device, cfg.dist_timeout)
    if cfg.batch_size % (cfg.grad_accum * dist.world):
        raise UserError(f"--batch_size {cfg.batch_size} must divide by grad_accum x processes "
                        f"= {cfg.grad_accum * dist.world}")
    init = load_checkpoint(cfg.init_from) if cfg.init_from else None
    corpus = None if cfg.algo else data.corpus_of(cfg)
    vocab = len(tasks.ALGO_VOCAB) if cfg.algo else corpus.vocab_size
    torch.manual_seed(cfg.seed)
    if init:  # another run's weights and architecture, with the model flags given here on top
        model = model_from_checkpoint(init, **cfg.model)
        extra = dict(lineage=init.get("extra", {}).get("lineage") or dict(init_from=cfg.init_from))
    else:
        model, extra = GPT(model_config(cfg, vocab)), {}
    mcfg = model.config
    check_block(cfg, mcfg.block_size)
    if mcfg.vocab_size != vocab:
        raise UserError(f"the model's vocabulary ({mcfg.vocab_size}) is not the corpus's ({vocab})")
    if corpus and (len(corpus.train) < mcfg.block_size + 2 or len(corpus.val) < 2):
        raise UserError(f"corpus too small: {len(corpus.train)} train tokens for --block_size {mcfg.block_size}")
    block = mcfg.block_size
    iters = math.ceil(cfg.tokens / (cfg.batch_size * block)) if cfg.tokens > 0 else cfg.iters
    out_dir = cfg.out_dir or os.path.join("out", run_name(cfg, mcfg))
    if not cfg.compile:
        eager_optimizers()
    run = Run(cfg, mcfg, model.to(dist.device), model, build_optimizers(model, cfg), dist, corpus, out_dir,
              iters, extra=extra, batches=data.train_batches(cfg, block, corpus, iters, "cuda" in dist.device))
    if dist.master:
        os.makedirs(out_dir, exist_ok=True)
        run.lock = cli.lock_folder(out_dir)  # before the first write; released by train() (or below)
    try:
        return claim(run)
    except BaseException:
        release(run)
        raise


def model_config(cfg, vocab_size):
    """The GPTConfig of a run: the --size preset's dimensions, then the architecture flags given."""
    n_layer, n_embd, n_head = SIZES[cfg.size]
    try:
        return GPTConfig(**{**dict(vocab_size=vocab_size, n_layer=n_layer, n_embd=n_embd, n_head=n_head),
                            **cfg.model})
    except (ValueError, TypeError) as e:
        raise UserError(str(e)) from None


def run_name(cfg, mcfg):
    return (f"{cfg.size}_b{mcfg.bits}_wd{cfg.warmdown:g}_lr{cfg.lr:g}_{cfg.schedule}"
            f"_{cfg.optimizer}_s{cfg.seed}")


def compile_blocks(model):
    """--compile, regional: the model as the loop calls it, its transformer blocks torch.compile'd
    one by one (blocks of one kind share a compiled graph: compile time does not grow with depth;
    the position tables, embedding and loss stay eager, which keeps dynamic_ntk, learned positions
    and the other model-level Python out of the graph). A shallow copy of model with the same
    parameters and buffers: model itself stays eager for evaluation, probes and checkpoints. Dynamo
    starts empty: runs chained in one process (tools/chain.py, extend.py's stages) hit its recompile limit."""
    torch._dynamo.reset()
    view = copy.copy(model)
    view._modules = dict(model._modules)
    view.blocks = torch.nn.ModuleList(torch.compile(b) for b in model.blocks)
    return view


def claim(run):
    """The run folder, locked: resume it, or clear an earlier run's files for a fresh one. A refusal
    here leaves every file as it was."""
    cfg, dist, out_dir = run.cfg, run.dist, run.out_dir
    if os.path.exists(run.path("result.json")) and not cfg.overwrite:
        if cfg.resume:
            return run  # finished: train() returns its record
        raise UserError(f"{out_dir} already holds a finished run; use --overwrite or another --out_dir")
    if cfg.resume:
        restore(run)
    elif os.path.exists(run.path("ckpt.pt")) and not cfg.overwrite:
        raise UserError(f"{out_dir} holds an unfinished run: --resume continues it, --overwrite starts again")
    elif dist.master:  # a fresh run: nothing of an earlier run in this folder may survive it
        for name in os.listdir(out_dir):
            if name == "result.json" or name == "log.jsonl" or (name.startswith("ckpt") and name.endswith(".pt")):
                os.remove(run.path(name))
    if dist.master:
        cli.remove_stale_tmp(out_dir)  # writes killed half-way
        truncate_log(run)
        if run.corpus:
            run.corpus.remember()  # accepted: a prepared folder's manifest may now note new mtimes
    if cfg.compile:
        run.train_model = compile_blocks(run.model)
    if dist.ddp:  # after compiling: each block's backward is its own graph, so DDP's bucketed
        # all-reduces start while the earlier blocks are still in backward (overlap)
        from torch.nn.parallel import DistributedDataParallel as DDP
        run.train_model = DDP(run.train_model, device_ids=[int(dist.device.split(":")[1])] if "cuda" in dist.device else None)
    return run


def release(run):
    if run.lock:
        cli.unlock_folder(run.lock)
        run.lock = None


def restore(run):
    """--resume: the model, optimizers, RNG, step and loss history of ckpt.pt, after checking that
    it belongs to this very run (same flags, paths aside)."""
    if not os.path.exists(run.path("ckpt.pt")):
        raise UserError(f"--resume: no checkpoint in {run.out_dir}")
    ckpt = load_checkpoint(run.path("ckpt.pt"))
    old, new = ckpt["train_config"], asdict(run.cfg)
    differ = sorted(k for k in set(old) | set(new) if k not in FREE_ON_RESUME and old.get(k) != new.get(k))
    if differ:
        raise UserError(f"--resume: flags differ from the checkpoint's run in {run.out_dir}: "
                        + ", ".join(f"--{k} {old.get(k)!r} -> {new.get(k)!r}" for k in differ[:4]))
    if len(ckpt["optimizers"]) != len(run.opts):
        raise UserError(f"--resume: {run.path('ckpt.pt')} has {len(ckpt['optimizers'])} optimizer states, "
                        f"this run needs {len(run.opts)}")
    try:
        run.model.load_state_dict(ckpt["model"])
        for o, s in zip(run.opts, ckpt["optimizers"]):
            o.load_state_dict(s)
        torch.set_rng_state(ckpt["rng"]["torch"])
        run.step, run.extra = ckpt["step"], dict(ckpt.get("extra", {}))
        run.losses = [float(x) for x in run.extra.pop("losses", [])]
        clock = run.extra.pop("clock", {})
        run.tokens_done, run.train_time, run.wall = (float(clock.get(k, 0)) for k in ("tokens_done", "train_time", "wall"))
    except (RuntimeError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UserError(f"incompatible checkpoint {run.path('ckpt.pt')}: "
                        f"{type(e).__name__}: {cli.first_line(e)}") from None


def truncate_log(run):
    """Keep the log rows up to the resumed step (a fresh run: none); a row cut short by a kill is dropped."""
    rows = []
    if run.step and os.path.exists(run.path("log.jsonl")):
        with open(run.path("log.jsonl"), "rb") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:  # also bytes that are not UTF-8
                    continue
                if isinstance(r, dict) and type(r.get("step")) is int and r["step"] <= run.step:
                    rows.append(r)
    atomic_write(run.path("log.jsonl"), "".join(json.dumps(cli.clean(r)) + "\n" for r in rows))

# -----------------------------------------------------------------------------
# Checkpoints (their format: model.py)


def checkpoint(run, name):
    """Save the run's state, never non-finite weights. The loss tail and the clock ride along, so
    a run resumed from its final checkpoint still writes a whole record."""
    if not all(torch.isfinite(p).all() for p in run.model.parameters()):
        raise UserError(f"the weights became non-finite by step {run.step}; stopped. The last good "
                        f"checkpoint (if any) is kept in {run.out_dir}; try a lower --lr")
    if run.dist.master:
        clock = dict(tokens_done=run.tokens_done, train_time=run.train_time, wall=run.wall + time.time() - run.t0)
        save_checkpoint(run.path(name), run.model, run.opts, run.step, run.cfg, run.mcfg,
                        dict(run.extra, losses=run.losses[-smooth_steps(run.iters):], clock=clock))


def read_result(run):
    """A finished run's result.json as a dict. Raises UserError."""
    try:
        with open(os.path.join(run, "result.json")) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise UserError(f"unreadable {os.path.join(run, 'result.json')}: {type(e).__name__}") from None


def config_from_checkpoint(ckpt):
    try:
        return TrainConfig(**ckpt["train_config"])
    except TypeError as e:
        raise UserError(f"checkpoint's train_config does not match this train.py: {e}") from None


def load_run(run, which="final", **overrides):
    """The one run-folder loader: (model, TrainConfig, checkpoint dict) of a run's checkpoint
    `which`; overrides change model config fields. The final checkpoint of a run without
    result.json is a resume point, not a result. Here, beside the code that writes run folders;
    evaluate.py, extend.py and tools/export.py read runs through it."""
    if not os.path.isdir(run):
        raise UserError(f"no run folder {run}")
    name = checkpoint_file(which)
    if not os.path.isfile(os.path.join(run, name)):
        have = sorted(n[5:-3] for n in os.listdir(run) if n.startswith("ckpt_") and n.endswith(".pt"))
        raise UserError(f"no checkpoint {name} in {run}; available: {', '.join(['final'] * os.path.isfile(os.path.join(run, 'ckpt.pt')) + have) or 'none'}")
    if which == "final" and not os.path.isfile(os.path.join(run, "result.json")):
        raise UserError(f"{run} has no result.json: the run is not finished "
                        f"(warmdown or a --save_at fraction picks an intermediate checkpoint)")
    ckpt = load_checkpoint(os.path.join(run, name))
    return model_from_checkpoint(ckpt, **overrides), config_from_checkpoint(ckpt), ckpt


# -----------------------------------------------------------------------------
# Checks of the configuration


def check_config(cfg):
    """Validate every flag before anything is written. Raises UserError."""
    if cfg.size not in SIZES:
        raise UserError(f"unknown size preset {cfg.size!r}; choose from {', '.join(SIZES)}")
    for name in ("warmup", "warmdown", "qat_start", "min_lr_frac", "short_frac", "task_mix"):
        if not 0.0 <= getattr(cfg, name) <= 1.0:
            raise UserError(f"--{name} {getattr(cfg, name)} must be in [0, 1]")
    if cfg.warmup + cfg.warmdown > 1.0:
        raise UserError(f"--warmup {cfg.warmup} + --warmdown {cfg.warmdown} exceeds 1")
    if not 0 < cfg.val_frac < 1:
        raise UserError(f"--val_frac {cfg.val_frac} must be in (0, 1)")
    for name, allowed in (("schedule", ("wsd", "cosine")), ("optimizer", ("muon", "adamw")),
                          ("task_loss", ("all", "answer"))):
        if getattr(cfg, name) not in allowed:
            raise UserError(f"unknown --{name} {getattr(cfg, name)!r}: {' | '.join(allowed)}")
    if cfg.iters < 0 or cfg.tokens < 0 or (cfg.iters == 0 and cfg.tokens == 0 and not cfg.init_from):
        raise UserError("--iters must be >= 1 (0 only with --init_from: evaluate and record)")
    if cfg.batch_size < 1 or cfg.grad_accum < 1 or cfg.batch_size % cfg.grad_accum:
        raise UserError(f"--batch_size {cfg.batch_size} must be a positive multiple of --grad_accum {cfg.grad_accum}")
    if not math.isfinite(cfg.ckpt_minutes) or cfg.ckpt_minutes < 0:
        raise UserError(f"--ckpt_minutes {cfg.ckpt_minutes} must be >= 0 (0 = every --ckpt_every steps)")
    if min(cfg.eval_interval, cfg.ckpt_every, cfg.eval_tokens, cfg.dist_timeout) < 1 or cfg.seed < 0 or cfg.algo_offset < 0:
        raise UserError("--eval_interval, --ckpt_every, --eval_tokens and --dist_timeout must be >= 1, "
                        "--seed and --algo_offset >= 0")
    if cfg.final_eval_tokens < 0 or cfg.eval_batch_tokens < 0:
        raise UserError("--final_eval_tokens and --eval_batch_tokens must be >= 0 (0 = all / sized automatically)")
    if cfg.lr <= 0 or cfg.muon_lr <= 0 or cfg.adam_lr <= 0 or cfg.weight_decay < 0 or cfg.grad_clip < 0:
        raise UserError("--lr, --muon_lr, --adam_lr must be > 0; --weight_decay, --grad_clip >= 0")
    for name in ("out_dir", "cache_dir"):
        if getattr(cfg, name) and os.path.exists(getattr(cfg, name)) and not os.path.isdir(getattr(cfg, name)):
            raise UserError(f"--{name} {getattr(cfg, name)} is a file, not a folder")
    if cfg.task_short_only and not (cfg.task_mix > 0 and cfg.short_frac > 0):
        raise UserError("--task_short_only (task rows on the short steps) needs --task_mix > 0 and --short_frac > 0")
    if cfg.task_mix > 0:
        bad = [t for t in cfg.task_list.split(",") if t not in tasks.TASKS]
        if bad:
            raise UserError(f"unknown task {bad[0]!r} in --task_list; choose from {', '.join(tasks.TASKS)}")
    if cfg.algo and cfg.algo not in tasks.ALGO_TASKS:
        raise UserError(f"unknown --algo {cfg.algo!r}; choose from {', '.join(tasks.ALGO_TASKS)}")
    ptq_bits(cfg)
    save_fractions(cfg)
    if not cfg.init_from:
        check_block(cfg, model_config(cfg, 4096).block_size)  # architecture flags fail here, not mid-run


def check_block(cfg, block):
    """The flags that depend on the training context length."""
    if cfg.short_frac > 0 and (cfg.short_block < 2 or block % cfg.short_block):
        raise UserError(f"--short_block {cfg.short_block} must divide --block_size {block}")
    if cfg.algo:
        longest = algo_lengths(cfg)[1]
        need = tasks.algo_example_len(cfg.algo, longest, cfg.algo_offset) - 1
        if need > block:
            raise UserError(f"--algo {cfg.algo} at length {longest} with --algo_offset "
                            f"{cfg.algo_offset} needs --block_size >= {need}")


def save_fractions(cfg):
    try:
        fr = [float(x) for x in cfg.save_at.split(",") if x.strip()]
    except ValueError:
        fr = [-1.0]
    if any(not 0 < f < 1 for f in fr):
        raise UserError(f"malformed --save_at {cfg.save_at!r}: comma-separated fractions in (0, 1)")
    return fr


def ptq_bits(cfg):
    try:
        bits = tuple(int(b) for b in cfg.ptq_bits.split(",") if b.strip())
        for b in bits:
            check_bits(b)
    except ValueError:
        raise UserError(f"malformed --ptq_bits {cfg.ptq_bits!r}: comma-separated bit-widths in 2..8") from None
    return bits


def algo_lengths(cfg):
    try:
        return tasks.algo_lengths(cfg.algo_len)
    except ValueError as e:
        raise UserError(str(e)) from None

# -----------------------------------------------------------------------------
# Command line


def report(result):
    m = result["metrics"]
    if "val_acc" in m:
        line = f"val answer loss {m['val_loss']:.4f}, exact match {m['val_acc']:.3f}"
    else:
        line = f"val loss {m['val_loss']:.4f} nats/token" + (f", {m['val_bpb']:.4f} bits/byte" if m.get("val_bpb") else "")
    if m.get("quant_gap") is not None:
        line += f" (quantised; full precision {m['val_loss_fp']:.4f}, gap {m['quant_gap']:+.4f})"
    if m.get("unigram_loss") is not None:
        line += f"; unigram baseline {m['unigram_loss']:.3f}"
    print(line)
    out = result["out_dir"]
    print(f"record: {os.path.join(out, 'result.json')}  checkpoint: {os.path.join(out, 'ckpt.pt')}")


def parse_args(argv=None):
    """train.py's command line: TrainConfig's flags, plus GPTConfig's (collected in cfg.model)."""
    return parse(TrainConfig, argv, __doc__, overrides=(GPTConfig, "model"))


def main(argv=None):
    def body():
        result = train(parse_args(argv))
        if int(os.environ.get("RANK", 0)) == 0:
            report(result)
    cli_main(body, "interrupted; resume with --resume")


if __name__ == "__main__":
    main()
