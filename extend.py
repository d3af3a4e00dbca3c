"""
Context extension of a trained run: training-free RoPE scaling, or continued training at the longer
length through train.py's own loop.

    python extend.py out/base --method yarn --factor 4                          # training-free
    python extend.py out/base --method ntk --factor 4 --train                   # continued training, 5% of pretraining
    python extend.py out/base --method ntk --factor 4 --token_frac 0.25 --short_frac 0.25
    python extend.py out/base --method yarn --factor 4 --train --stages 2       # 2x, then 4x
    python extend.py out/nope --method none --factor 4 --tokens 2000000         # NoPE / ALiBi / ExPE
    python extend.py out/base --method abf --theta 500000 --factor 4 --iters 200

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
"""
import dataclasses
import math
import os
from dataclasses import dataclass

import train
from cli import UserError, flag, parse, main as cli_main
from model import ROPE_SCALINGS, GPTConfig, layer_plan

METHODS = ROPE_SCALINGS + ("abf",)
DEFAULT_TOKEN_FRAC = 0.05  # --train: the seed extends with a small fraction of its pretraining tokens
SCALINGS = ROPE_SCALINGS[1:]  # the methods that rescale RoPE frequencies


@dataclass
class ExtendConfig:
    run: str = flag("", "the parent run folder", positional=True)
    method: str = flag("yarn", " | ".join(METHODS))
    factor: float = flag(0.0, "target length / pretraining length (required)")
    theta: float = flag(0.0, "abf: the new RoPE base, e.g. 500000")
    beta_fast: float = flag(32.0, "yarn: pairs rotating more often than this in L are kept")
    beta_slow: float = flag(1.0, "yarn: pairs rotating less than this in L are interpolated")
    layers: str = flag("all", "scale every RoPE layer, or global ones only (Olmo 3: windowed layers keep RoPE)")
    ckpt: str = flag("final", "final | warmdown | a --save_at fraction (0.25): the early-extension diagnostic")
    train: bool = flag(False, f"continued training with the default budget, --token_frac {DEFAULT_TOKEN_FRAC:g} (seed-like)")
    token_frac: float = flag(0.0, "continued-training budget: this fraction of the parent's training tokens")
    tokens: int = flag(0, "continued-training budget in tokens")
    iters: int = flag(0, "continued-training budget in steps (no budget flag at all = training-free)")
    stages: int = flag(1, "2: --stage1_factor on half the budget (into OUT/stage1), then --factor")
    stage1_factor: float = flag(2.0, "--stages 2: the first stage's factor")
    lr: float = flag(None, "LR multiplier (default: the parent's)")
    warmup: float = flag(None, "(default: the parent's)")
    warmdown: float = flag(None, "(default: the parent's)")
    batch_size: int = flag(None, "sequences per step (default: the parent's tokens per step at the new length)")
    short_frac: float = flag(0.0, "share of steps at the pretraining length (long/short data mix)")
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
    if ec.method == "none":
        return
    plan = layer_plan(dataclasses.replace(mc, rope_scaling_layers=ec.layers))
    rotary = [l for l in plan if l.pos in ("rope", "hope")]
    if not rotary:
        raise UserError(f"--method {ec.method} changes RoPE, but no layer of this model uses RoPE "
                        f"(pos {mc.pos_pattern or mc.pos}); extend it with --method none --iters N")
    if not any(l.scaled for l in rotary):
        raise UserError("--layers global: every RoPE layer of this model is windowed; nothing to scale")


def extended_fields(mc, ec, factor):
    """GPTConfig fields that extend model config mc to factor x its pretraining length."""
    L = mc.rope_original_len or mc.block_size  # the ORIGINAL length, even for an extended parent
    if factor <= 1 or factor * L != int(factor * L):
        raise UserError(f"--factor {factor:g} must be > 1 and give a whole number of tokens from L={L}")
    new = dict(block_size=int(factor * L), rope_original_len=L)
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
    if "expe" in kinds and not mc.expe_slope:
        new["expe_slope"] = 1 / mc.block_size
    return new


def child_config(parent_cfg, ec, block, original_len, iters, batch, out_dir):
    """The TrainConfig of the extended run: the parent's, with this extension's flags."""
    over = {k: getattr(ec, k) for k in ("lr", "warmup", "warmdown", "ptq_bits") if getattr(ec, k) is not None}
    cfg = dataclasses.replace(
        parent_cfg, init_from=os.path.join(out_dir, "init.pt"), model={}, iters=iters, tokens=0, out_dir=out_dir,
        resume=os.path.exists(os.path.join(out_dir, "ckpt.pt")), overwrite=False, save_at="", device=ec.device,
        quiet=ec.quiet, short_frac=ec.short_frac, short_block=original_len if ec.short_frac else 0,
        batch_size=batch, grad_accum=math.gcd(batch, parent_cfg.grad_accum),
        qat_start=0.0, **over)  # a QAT parent's weights are trained on the grid already: keep QAT on
    train.check_config(cfg)
    train.check_block(cfg, block)
    return cfg


def planned_tokens(cfg, block):
    """Training tokens of a run (TrainConfig cfg, context block): its planned total, as train.py sets it."""
    steps = math.ceil(cfg.tokens / (cfg.batch_size * block)) if cfg.tokens > 0 else cfg.iters
    return steps * cfg.batch_size * block


def resolve_budget(ec):
    """The continued-training budget of the whole extension: None (training-free), {"iters": N} or
    {"tokens": T}, with where it came from."""
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
    model, cfg, _ = train.load_run(ec.run, ec.ckpt)
    parent = planned_tokens(cfg, model.config.block_size)
    return dict(source="token_frac", token_frac=val, parent_tokens=parent, tokens=max(1, round(val * parent)))


def stage_steps(share, batch, block):
    """Steps of one stage from its share of the budget ({"iters"} or {"tokens"}; None: 0)."""
    if not share:
        return 0
    if "iters" in share:
        return share["iters"]
    return max(1, round(share["tokens"] / (batch * block)))


def prepare(ec, parent, which, factor, share, out_dir):
    """Everything checked, nothing written: (model, cfg, lineage) of one extension stage; share: this
    stage's part of the budget."""
    if os.path.realpath(out_dir) == os.path.realpath(parent):
        raise UserError(f"--out_dir {out_dir} is the parent run itself")
    model, parent_cfg, ckpt = train.load_run(parent, which)
    mc = model.config
    check_method(mc, ec, parent_cfg.algo)
    new = extended_fields(mc, ec, factor)
    block = new["block_size"]
    # the parent's tokens per step, held: batch in sequences scales inversely with the length
    batch = ec.batch_size or max(1, round(parent_cfg.batch_size * mc.block_size / block))
    iters = stage_steps(share, batch, block)
    model = train.model_from_checkpoint(ckpt, **new)
    cfg = child_config(parent_cfg, ec, block, new["rope_original_len"], iters, batch, out_dir)
    lineage = dict(parent=parent, parent_ckpt=which, parent_step=ckpt["step"], method=ec.method,
                   factor=factor, original_len=new["rope_original_len"], block_size=block,
                   theta=model.config.rope_theta, beta_fast=ec.beta_fast, beta_slow=ec.beta_slow,
                   layers=ec.layers, iters=iters, batch_size=batch, tokens=iters * batch * block,
                   short_frac=ec.short_frac, parent_lineage=ckpt.get("extra", {}).get("lineage"))
    return model, cfg, lineage


def stages(ec, budget=None):
    """[(parent, checkpoint, factor, share of the budget, out_dir)]: one stage, or the 2-stage recipe
    (stage 1 at --stage1_factor on half the budget into OUT/stage1; stage 2 at --factor from stage 1)."""
    if ec.factor <= 0:
        raise UserError("--factor is required: target length / pretraining length, e.g. 4")
    if ec.iters < 0:
        raise UserError(f"--iters {ec.iters} must be >= 0 (0 = training-free)")
    out_dir = ec.out_dir or f"{os.path.normpath(ec.run)}-{ec.method}{ec.factor:g}" + ("-ft" if budget else "")
    if ec.stages == 1:
        return [(ec.run, ec.ckpt, ec.factor, budget, out_dir)]
    if ec.stages != 2 or not budget or budget.get("iters", 2) < 2 or not 1 < ec.stage1_factor < ec.factor:
        raise UserError(f"--stages {ec.stages}: 1, or 2 with a continued-training budget (--iters >= 2) and "
                        f"1 < --stage1_factor {ec.stage1_factor:g} < --factor {ec.factor:g}")
    key = "iters" if "iters" in budget else "tokens"
    first = {key: budget[key] // 2}
    stage1 = os.path.join(out_dir, "stage1")
    return [(ec.run, ec.ckpt, ec.stage1_factor, first, stage1),
            (stage1, "final", ec.factor, {key: budget[key] - first[key]}, out_dir)]


def extend(ec):
    """Run the stages in order. A finished stage is kept (--overwrite redoes it), an unfinished one
    resumes from its checkpoint, a new one starts from its init.pt."""
    budget = resolve_budget(ec)
    plan = stages(ec, budget)
    final = plan[-1][4]
    if os.path.exists(os.path.join(final, "result.json")) and not ec.overwrite:
        raise UserError(f"{final} already holds a finished run; use --overwrite or another --out_dir")
    model, cfg, lineage = prepare(ec, *plan[0])  # stage 1 is checked before anything is written
    if len(plan) == 2:
        extended_fields(model.config, ec, ec.factor)  # and stage 2's length
    if ec.overwrite:
        for _, _, _, _, out in plan:
            for name in ("result.json", "ckpt.pt", "init.pt"):
                if os.path.exists(os.path.join(out, name)):
                    os.remove(os.path.join(out, name))
        cfg.resume = False
    for k, stage in enumerate(plan):
        out = stage[4]
        if os.path.exists(os.path.join(out, "result.json")):  # a finished first stage of an earlier call
            continue
        if k:
            model, cfg, lineage = prepare(ec, *stage)
        lineage.update(stage=k + 1, stages=len(plan), budget=budget)
        os.makedirs(out, exist_ok=True)
        if not cfg.resume:  # the rescaled model is the new run's starting point; train.py loads it
            train.save_checkpoint(cfg.init_from, model, [], 0, cfg, model.config, dict(lineage=lineage))
        result = train.train(cfg)
    return result


def parse_args(argv=None):
    return parse(ExtendConfig, argv, __doc__)


def main(argv=None):
    def body():
        train.report(extend(parse_args(argv)))
    cli_main(body)


if __name__ == "__main__":
    main()
