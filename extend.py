"""
Context extension of a trained run: training-free RoPE scaling, or continued training at the longer
length through train.py's own loop.

    python extend.py out/base --method yarn --factor 4                          # training-free
    python extend.py out/base --method ntk --factor 4 --train                   # continued training, 5% of pretraining
    python extend.py out/base --method ntk --factor 4 --token_frac 0.25 --short_frac 0.25
    python extend.py out/base --method yarn --factor 4 --train --stages 2       # 2x, then 4x
    python extend.py out/nope --method none --factor 4 --tokens 2000000         # NoPE / ALiBi / ExPE
    python extend.py out/base --method abf --theta 500000 --factor 4 --iters 200
    python extend.py out/base --method swan --window 64 --global_every 2 --iters 100   # RoPE -> SWAN-GPT
    python extend.py out/base --method none --factor 1 --train --out_dir out/more      # more training, same length

Continued-training budget: --train (the default --token_frac 0.05), --token_frac F (F x the parent
run's training tokens: its planned total, also when an intermediate checkpoint is extended),
--tokens N, or --iters N steps; none of them = training-free. Each step holds the parent's tokens
per step (batch in sequences = parent batch x parent length / new length), so steps = tokens /
tokens per step; --stages 2 gives each stage half the budget.

--factor is s = L'/L relative to the ORIGINAL pretraining length L, also when the parent was itself
extended (YaRN's ramp and the 2-stage recipe both refer to that one L). Each extension writes the
rescaled model as OUT/init.pt (with its lineage: where it came from) and trains from it with
`train.py --init_from` semantics, so the output folder is a run like any other (ckpt.pt, result.json)
and a killed extension is resumed by running the same command again.

--method swan converts a trained RoPE model into SWAN-GPT (arXiv 2504.08719: "existing pre-trained
decoder-only models can be efficiently converted to the SWAN architecture with minimal continued
training"): the same weights, with RoPE kept on sliding-window layers and removed (NoPE) from the
global ones, then --iters steps of continued training at the parent's length (or at --factor x it).
Log-n scaling stays off in the record: switch it on at evaluation (evaluate.py --logn).

--method none --factor 1 with a budget trains the parent on at its own length (the extension's LR schedule,
data and budget, nothing rescaled): the more-training control of a continued-training extension, which
a training-free scaling of it (extend.py out/more --method ntk --factor 4) then takes to the target.
"""
import contextlib
import dataclasses
import math
import os
from dataclasses import dataclass

import cli
import train
from cli import UserError, flag, parse, main as cli_main
from train import load_run
from model import ROPE_SCALINGS, ROTARY_POS, layer_plan, model_from_checkpoint, save_checkpoint

METHODS = ROPE_SCALINGS + ("abf", "swan")
DEFAULT_TOKEN_FRAC = 0.05  # --train: the seed extends with a small fraction of its pretraining tokens
# Continued training's own LR schedule: long-context continued pretraining restarts an annealed model at a
# fraction of its pretraining peak with a short warmup and a decay (e.g. arXiv 2309.16039, 2407.21783), not
# at the peak again; the fraction was chosen by a small sweep on the tiny longctx grid (results/longctx).
DEFAULT_LR_FRAC = 0.3
DEFAULT_EXT_WARMUP = 0.1  # share of the extension's steps of linear warmup; the rest decays linearly to 0
SCALINGS = ROPE_SCALINGS[1:]  # the methods that rescale RoPE frequencies


@dataclass
class ExtendConfig:
    run: str = flag("", "the parent run folder", positional=True)
    method: str = flag("yarn", " | ".join(METHODS))
    factor: float = flag(0.0, "target length / pretraining length (required; swan: optional, default 1)")
    theta: float = flag(0.0, "abf: the new RoPE base, e.g. 500000")
    beta_fast: float = flag(32.0, "yarn: pairs rotating more often than this in L are kept")
    beta_slow: float = flag(1.0, "yarn: pairs rotating less than this in L are interpolated")
    layers: str = flag("all", "scale every RoPE layer, or global ones only (Olmo 3: windowed layers keep RoPE)")
    window: int = flag(0, "swan: sliding window of the RoPE layers (0 = the parent's)")
    global_every: int = flag(0, "swan: the last layer of each group of k is global NoPE (0 = the parent's "
                                "global layers, else 4)")
    ckpt: str = flag("final", "final | warmdown | a --save_at fraction (0.25): the early-extension diagnostic")
    train: bool = flag(False, f"continued training with the default budget, --token_frac {DEFAULT_TOKEN_FRAC:g} (seed-like)")
    token_frac: float = flag(0.0, "continued-training budget: this fraction of the parent's training tokens")
    tokens: int = flag(0, "continued-training budget in tokens")
    iters: int = flag(0, "continued-training budget in steps (no budget flag at all = training-free)")
    stages: int = flag(1, "2: --stage1_factor on half the budget (into OUT/stage1), then --factor")
    stage1_factor: float = flag(2.0, "--stages 2: the first stage's factor")
    lr_frac: float = flag(DEFAULT_LR_FRAC, "peak LR of continued training as a fraction of the parent's peak, with "
                          f"warmup {DEFAULT_EXT_WARMUP:g} and a linear decay over the rest (0 = the parent's "
                          "schedule: re-warm to its peak)")
    lr: float = flag(None, "LR multiplier, absolute (default: the parent's x --lr_frac)")
    warmup: float = flag(None, f"(default: {DEFAULT_EXT_WARMUP:g}; --lr_frac 0: the parent's)")
    warmdown: float = flag(None, "(default: 1 - warmup, a decay to 0 after the warmup; --lr_frac 0: the parent's)")
    batch_size: int = flag(None, "sequences per step (default: the parent's tokens per step at the new length)")
    short_frac: float = flag(0.0, "share of steps at the pretraining length (long/short data mix)")
    task_rows: str = flag("all", "a parent with a task mix (--task_mix): all = its task rows on every step | short = "
                                 "only on the --short_frac steps at the pretraining length, the target's rows text only "
                                 "(retrieval at the target is then extended, not trained) | none = text only")
    data: str = flag("", "continued training's corpus (default: the parent's --data), e.g. a long-document set")
    ptq_bits: str = flag(None, "PTQ baseline bits ('' = skip; default: the parent's)")
    out_dir: str = flag("", "default: <run>-<method><factor>[-ft]")
    overwrite: bool = flag(False, "replace a finished extension in out_dir")
    device: str = flag("auto", "auto | cpu | cuda | cuda:N")
    quiet: bool = flag(False, "no progress bar")


def check_method(mc, ec, algo):
    """Refuse a method that does not apply to the model's positional encodings (mc: GPTConfig)."""
    if ec.method not in METHODS:
        raise UserError(f"unknown --method {ec.method!r}: {' | '.join(METHODS)}")
    if mc.pos == "learned":
        raise UserError(f"pos=learned has only block_size={mc.block_size} learned positions and cannot run "
                        f"past them: no RoPE to scale, and continued training cannot grow the position "
                        f"table either; retrain with another --pos")
    if algo:
        raise UserError(f"{ec.run} trained on algorithmic tasks (--algo {algo}); extend.py extends "
                        f"language models (test length generalisation with evaluate.py)")
    if ec.layers not in ("all", "global"):
        raise UserError(f"--layers {ec.layers!r}: all | global")
    if ec.layers == "global" and ec.method not in SCALINGS:
        raise UserError(f"--layers global applies to RoPE scaling methods ({' | '.join(SCALINGS)})")
    if ec.method in ("none", "swan"):  # swan: swan_fields checks the parent
        return
    plan = layer_plan(dataclasses.replace(mc, rope_scaling_layers=ec.layers))
    rotary = [l for l in plan if l.pos in ROTARY_POS]
    if not rotary:
        raise UserError(f"--method {ec.method} changes RoPE, but no layer of this model uses RoPE "
                        f"(pos {mc.pos_pattern or mc.pos}); extend it with --method none --iters N")
    if not any(l.scaled for l in rotary):
        raise UserError("--layers global: every RoPE layer of this model is windowed; nothing to scale")


def swan_fields(mc, ec):
    """GPTConfig fields that turn the RoPE model mc into SWAN-GPT: window and global layers (the
    parent's, or --window / --global_every), RoPE on the windowed layers, NoPE on the global ones.
    The weights are untouched: SWAN adds no parameter, it only changes the per-layer plan."""
    plan = layer_plan(mc)
    if mc.swan or mc.pos_pattern or any(l.pos != "rope" for l in plan):
        raise UserError(f"--method swan converts a model with RoPE in every layer; this one has "
                        f"{'swan already' if mc.swan else 'pos ' + (mc.pos_pattern or mc.pos)}")
    if any(l.chunk for l in plan):
        raise UserError(f"--method swan: chunk attention layers (chunk_layers {mc.chunk_layers!r}) are local "
                        f"by construction; convert a model without them")
    if ec.window < 0 or ec.global_every < 0:
        raise UserError(f"--window {ec.window} and --global_every {ec.global_every} must be >= 0")
    window = ec.window or mc.window
    if not window:
        raise UserError("--method swan needs --window W: the parent has no sliding window")
    new = dict(swan=True, window=window)
    if ec.global_every or not (mc.window and any(l.window == 0 for l in plan)):
        new.update(global_every=ec.global_every or 4, layer_pattern="")  # else: the parent's global layers
    return new  # model_from_checkpoint checks the converted config


def extended_fields(mc, ec, factor):
    """GPTConfig fields that extend model config mc to factor x its pretraining length (swan: convert,
    at the same length when factor is 1)."""
    L = mc.rope_original_len or mc.block_size  # the ORIGINAL length, even for an extended parent
    new = swan_fields(mc, ec) if ec.method == "swan" else {}
    if ec.method in ("swan", "none") and factor == 1:  # none at 1: continued training at the parent's own length
        return new
    if factor <= 1 or factor * L != int(factor * L):
        raise UserError(f"--factor {factor:g} must be > 1 and give a whole number of tokens from L={L}")
    new.update(block_size=int(factor * L), rope_original_len=L)
    if ec.method in SCALINGS:
        new.update(rope_scaling=ec.method, rope_factor=factor, yarn_beta_fast=ec.beta_fast,
                   yarn_beta_slow=ec.beta_slow, rope_scaling_layers=ec.layers)
    elif ec.method == "abf":  # ABF (arXiv 2309.16039): a larger base, no scaling; then continue training
        if ec.theta <= 1:
            raise UserError("--method abf needs --theta, the new RoPE base (e.g. 500000)")
        new["rope_theta"] = ec.theta
    # freeze what defaults to block_size, so that growing block_size leaves the function unchanged
    kinds = {l.pos for l in layer_plan(mc)}
    if "hope" in kinds and not mc.hope_cutoff:
        new["hope_cutoff"] = mc.block_size
    if ("expe" in kinds or mc.pos == "expe") and not mc.expe_slope:
        new["expe_slope"] = 1 / mc.block_size
    return new


def extension_schedule(ec, peak):
    """TrainConfig fields of the extension's LR schedule: its own (--lr_frac x the parent's peak, a short
    warmup, a linear decay to 0 over the rest), or with --lr_frac 0 the parent's; --lr / --warmup /
    --warmdown override either. peak: the pretraining run's LR multiplier (also for stage 2 of 2)."""
    if ec.lr_frac < 0:
        raise UserError(f"--lr_frac {ec.lr_frac:g} must be >= 0 (0 = the parent's schedule)")
    own = {}
    if ec.lr_frac > 0:
        warm = DEFAULT_EXT_WARMUP if ec.warmup is None else ec.warmup
        own = dict(lr=peak * ec.lr_frac, warmup=warm, warmdown=max(0.0, 1.0 - warm),
                   schedule="wsd", min_lr_frac=0.0)
    own.update({k: getattr(ec, k) for k in ("lr", "warmup", "warmdown") if getattr(ec, k) is not None})
    return own


def task_rows(ec, parent_cfg):
    """TrainConfig fields of the extension's task rows (--task_rows): the parent's mix on every step, on
    the --short_frac steps at the pretraining length only, or none. Pure function."""
    if ec.task_rows not in ("all", "short", "none"):
        raise UserError(f"--task_rows {ec.task_rows!r}: all | short | none")
    if ec.task_rows == "all" or not parent_cfg.task_mix:
        return {}
    if ec.task_rows == "none":
        return {"task_mix": 0.0}
    if not ec.short_frac:
        raise UserError("--task_rows short puts the task rows on the --short_frac steps: give --short_frac > 0")
    return {"task_short_only": True}


def child_config(parent_cfg, ec, block, original_len, iters, batch, out_dir, peak=None):
    """The TrainConfig of the extended run: the parent's, with this extension's flags and LR schedule."""
    over = {**extension_schedule(ec, parent_cfg.lr if peak is None else peak), **({"ptq_bits": ec.ptq_bits} if ec.ptq_bits is not None else {}),
            **task_rows(ec, parent_cfg)}
    cfg = dataclasses.replace(
        parent_cfg, init_from=os.path.join(out_dir, "init.pt"), model={}, iters=iters, tokens=0, out_dir=out_dir,
        resume=os.path.exists(os.path.join(out_dir, "ckpt.pt")), overwrite=False, save_at="", device=ec.device,
        quiet=ec.quiet, short_frac=ec.short_frac, short_block=original_len if ec.short_frac else 0, short_warmup=False,
        batch_size=batch, grad_accum=math.gcd(batch, parent_cfg.grad_accum),
        qat_start=0.0, **over, **({"data": ec.data} if ec.data else {}))  # a QAT parent: keep QAT on
    train.check_config(cfg)
    train.check_block(cfg, block)
    return cfg


def planned_tokens(cfg, block):
    """Training tokens of a run (TrainConfig cfg, context block): its planned total, as train.py sets it."""
    steps = math.ceil(cfg.tokens / (cfg.batch_size * block)) if cfg.tokens > 0 else cfg.iters
    return steps * cfg.batch_size * block


def resolve_budget(ec, loaded):
    """The continued-training budget of the whole extension: None (training-free), {"iters": N} or
    {"tokens": T}, with where it came from. loaded: the parent, as train.load_run gives it."""
    given = {k: getattr(ec, k) for k in ("token_frac", "tokens", "iters") if getattr(ec, k)}
    if any(v < 0 for v in given.values()):
        raise UserError("--token_frac, --tokens and --iters must be >= 0")
    if len(given) > 1:
        raise UserError(f"one continued-training budget at a time, got {' and '.join('--' + k for k in given)}")
    if ec.train and not given:
        given = {"token_frac": DEFAULT_TOKEN_FRAC}
    if not given:
        return None
    (src, val), = given.items()
    if src == "iters":
        return dict(source="iters", iters=val)
    if src == "tokens":
        return dict(source="tokens", tokens=val)
    model, cfg, _ = loaded
    parent = planned_tokens(cfg, model.config.block_size)
    return dict(source="token_frac", token_frac=val, parent_tokens=parent, tokens=max(1, round(val * parent)))


def stage_steps(share, batch, block):
    """Steps of one stage from its share of the budget ({"iters"} or {"tokens"}; None: 0)."""
    if not share:
        return 0
    if "iters" in share:
        return share["iters"]
    return max(1, round(share["tokens"] / (batch * block)))


def stage_config(ec, parent_cfg, mc, factor, share, out_dir, peak=None):
    """(GPTConfig fields that extend the parent's model config mc, TrainConfig) of one stage: the
    configs alone, no weights (sweep.sh --cost plans the grid's extensions with it too)."""
    check_method(mc, ec, parent_cfg.algo)
    new = extended_fields(mc, ec, factor)
    block = new.get("block_size", mc.block_size)  # swan at factor 1 keeps the length
    # the parent's tokens per step, held: batch in sequences scales inversely with the length
    batch = ec.batch_size or max(1, round(parent_cfg.batch_size * mc.block_size / block))
    L = new.get("rope_original_len", mc.rope_original_len) or block
    return new, child_config(parent_cfg, ec, block, L, stage_steps(share, batch, block), batch, out_dir, peak)


def prepare(ec, parent, which, factor, share, out_dir, loaded=None, peak=None):
    """Everything checked, nothing written: (model, cfg, lineage) of one extension stage; share: this
    stage's part of the budget; peak: the LR --lr_frac refers to (default: the parent's)."""
    if os.path.realpath(out_dir) == os.path.realpath(parent):
        raise UserError(f"--out_dir {out_dir} is the parent run itself")
    model, parent_cfg, ckpt = loaded or load_run(parent, which)
    peak = parent_cfg.lr if peak is None else peak
    new, cfg = stage_config(ec, parent_cfg, model.config, factor, share, out_dir, peak)
    model = model_from_checkpoint(ckpt, **new)
    c = model.config
    L, block, batch, iters = c.rope_original_len or c.block_size, c.block_size, cfg.batch_size, cfg.iters
    lineage = dict(parent=parent, parent_ckpt=which, parent_step=ckpt["step"], method=ec.method,
                   factor=factor, original_len=L, block_size=block,
                   theta=c.rope_theta, beta_fast=ec.beta_fast, beta_slow=ec.beta_slow,
                   layers=ec.layers, iters=iters, batch_size=batch, tokens=iters * batch * block,
                   short_frac=ec.short_frac, task_rows=ec.task_rows, lr=cfg.lr, lr_frac=ec.lr_frac if ec.lr is None else None,
                   parent_lr=peak, warmup=cfg.warmup, warmdown=cfg.warmdown, schedule=cfg.schedule,
                   parent_lineage=ckpt.get("extra", {}).get("lineage"))
    if ec.method == "swan":
        lineage.update(window=c.window, global_every=c.global_every, layer_pattern=c.layer_pattern)
    return model, cfg, lineage


def stages(ec, budget=None):
    """[(parent, checkpoint, factor, share of the budget, out_dir)]: one stage, or the 2-stage recipe
    (stage 1 at --stage1_factor on half the budget into OUT/stage1; stage 2 at --factor from stage 1)."""
    swan = ec.method == "swan"
    factor = ec.factor if ec.factor > 0 or not swan else 1.0  # swan converts at the parent's length
    if factor <= 0:
        raise UserError("--factor is required: target length / pretraining length, e.g. 4")
    if ec.iters < 0:
        raise UserError(f"--iters {ec.iters} must be >= 0 (0 = training-free)")
    if ec.method == "none" and factor == 1 and not budget:
        raise UserError("--method none --factor 1 trains on at the parent's length: give a continued-training "
                        "budget (--train, --token_frac, --tokens or --iters)")
    tag = ec.method if swan and factor == 1 else f"{ec.method}{factor:g}"
    out_dir = ec.out_dir or f"{os.path.normpath(ec.run)}-{tag}" + ("-ft" if budget else "")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UserError(f"--out_dir {out_dir} is a file, not a folder")
    if ec.stages == 1:
        return [(ec.run, ec.ckpt, factor, budget, out_dir)]
    if swan:
        raise UserError("--stages 2 is the context-extension recipe; --method swan converts in one stage")
    if ec.stages != 2 or not budget or budget.get("iters", 2) < 2 or not 1 < ec.stage1_factor < ec.factor:
        raise UserError(f"--stages {ec.stages}: 1, or 2 with a continued-training budget (--iters >= 2) and "
                        f"1 < --stage1_factor {ec.stage1_factor:g} < --factor {ec.factor:g}")
    key = "iters" if "iters" in budget else "tokens"
    first = {key: budget[key] // 2}
    stage1 = os.path.join(out_dir, "stage1")
    return [(ec.run, ec.ckpt, ec.stage1_factor, first, stage1),
            (stage1, "final", ec.factor, {key: budget[key] - first[key]}, out_dir)]


@cli.stop_signals()  # a SIGTERM / SIGUSR1 between stages stops the next one at its first step
def extend(ec):
    """Run the stages in order. A finished stage is kept (--overwrite redoes it), an unfinished one
    resumes from its checkpoint, a new one starts from its init.pt. Stopped by a signal: the stage
    in training writes its ckpt.pt (cli.Stopped), and the same command again resumes it."""
    loaded = load_run(ec.run, ec.ckpt)  # the parent, read once for the budget and stage 1
    budget = resolve_budget(ec, loaded)
    plan = stages(ec, budget)
    final = plan[-1][4]
    if os.path.exists(os.path.join(final, "result.json")) and not ec.overwrite:
        raise UserError(f"{final} already holds a finished run; use --overwrite or another --out_dir")
    peak = loaded[1].lr  # --lr_frac refers to the pretraining peak, in both stages
    model, cfg, lineage = prepare(ec, *plan[0], loaded=loaded, peak=peak)  # stage 1 is checked before anything is written
    if len(plan) == 2:
        extended_fields(model.config, ec, ec.factor)  # and stage 2's length
    master = int(os.environ.get("RANK", 0)) == 0  # under torchrun only rank 0 locks and writes, as train.py
    with contextlib.ExitStack() as held:  # every stage folder is ours before anything is written
        if cli.under_torchrun():  # one process group for every stage: ranks meet at a barrier per stage
            cli.setup_device(cfg.device, cfg.dist_timeout)
            held.callback(destroy_group)
        for _, _, _, _, out in plan:
            os.makedirs(out, exist_ok=True)
            if master:
                held.enter_context(cli.locked(out))  # train.py takes the same lock again (re-entrant)
        if ec.overwrite:
            for _, _, _, _, out in plan:
                for name in ("result.json", "ckpt.pt", "init.pt"):
                    if master and os.path.exists(os.path.join(out, name)):
                        os.remove(os.path.join(out, name))
            cfg.resume = False
        for k, stage in enumerate(plan):
            out = stage[4]
            if os.path.exists(os.path.join(out, "result.json")):  # a finished first stage of an earlier call
                continue
            if k:
                model, cfg, lineage = prepare(ec, *stage, peak=peak)
            lineage.update(stage=k + 1, stages=len(plan), budget=budget)
            if not cfg.resume and master:  # the rescaled model is the new run's starting point; train.py loads it
                save_checkpoint(cfg.init_from, model, [], 0, cfg, model.config, dict(lineage=lineage))
            wait_for_master()
            try:
                result = train.train(cfg)
            except cli.Stopped as e:
                raise cli.Stopped(f"{out}: {e}") from None
    return result


def wait_for_master():
    """Under torchrun: every rank waits here until rank 0 has written the stage's files."""
    if cli.under_torchrun():
        import torch.distributed as dist
        dist.barrier()


def destroy_group():
    import torch.distributed as dist
    dist.destroy_process_group()


def parse_args(argv=None):
    return parse(ExtendConfig, argv, __doc__)


def main(argv=None):
    def body():
        result = extend(parse_args(argv))
        if int(os.environ.get("RANK", 0)) == 0:
            train.report(result)
    cli_main(body, resume="rerun the same command to resume")


if __name__ == "__main__":
    main()
