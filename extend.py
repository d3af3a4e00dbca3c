"""
Context extension of a trained run (REFERENCE.md section 6): training-free RoPE scaling, or continued
training at the longer length through train.py's own loop.

    python extend.py out/base --method yarn --factor 4                          # training-free
    python extend.py out/base --method yarn --factor 4 --iters 200              # continued training
    python extend.py out/base --method yarn --factor 4 --iters 200 --stages 2   # 2x, then 4x
    python extend.py out/nope --method none --factor 4 --iters 200              # NoPE / ALiBi / ExPE
    python extend.py out/base --method abf --theta 500000 --factor 4 --iters 200

--factor is s = L'/L relative to the ORIGINAL pretraining length L, also when the parent was itself
extended (YaRN's ramp and the 2-stage recipe both refer to that one L). The output folder is a run
like any other (ckpt.pt, result.json with train.py's schema) plus "lineage": where it came from.
"""
import argparse
import dataclasses
import os

import train
from model import ROPE_SCALINGS, GPTConfig, layer_plan
from train import TRAIN_MODEL_FIELDS, UserError

METHODS = ROPE_SCALINGS + ("abf",)
SCALINGS = ROPE_SCALINGS[1:]  # the methods that rescale RoPE frequencies


def parse_args(argv=None):
    p = train.OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="the parent run folder")
    p.add_argument("--method", default="yarn", help=" | ".join(METHODS))
    p.add_argument("--factor", type=float, required=True, help="target length / pretraining length")
    p.add_argument("--theta", type=float, default=0.0, help="abf: the new RoPE base, e.g. 500000")
    p.add_argument("--beta_fast", type=float, default=32.0, help="yarn: pairs rotating more often are kept")
    p.add_argument("--beta_slow", type=float, default=1.0, help="yarn: pairs rotating less are interpolated")
    p.add_argument("--layers", default="all", choices=("all", "global"),
                   help="scale every RoPE layer, or global ones only (Olmo 3: windowed layers keep RoPE)")
    p.add_argument("--ckpt", default="final", help="final | warmdown | a --save_at fraction (0.25)")
    p.add_argument("--iters", type=int, default=0, help="continued-training steps (0 = training-free)")
    p.add_argument("--stages", type=int, default=1, choices=(1, 2), help="2: --stage1_factor, then --factor")
    p.add_argument("--stage1_factor", type=float, default=2.0, help="--stages 2: first stage's factor")
    p.add_argument("--lr", type=float, default=None, help="LR multiplier (default: the parent's)")
    p.add_argument("--warmup", type=float, default=None, help="(default: the parent's)")
    p.add_argument("--warmdown", type=float, default=None, help="(default: the parent's)")
    p.add_argument("--batch_size", type=int, default=None, help="sequences per step (default: the parent's)")
    p.add_argument("--short_frac", type=float, default=0.0,
                   help="share of steps at the pretraining length (long/short data mix)")
    p.add_argument("--ptq_bits", default=None, help="PTQ baseline bits ('' = skip; default: the parent's)")
    p.add_argument("--eval_lengths", default="", help="also record val loss at these lengths: 256,512,1024")
    p.add_argument("--out_dir", default="", help="default: <run>-<method><factor>[-ft]")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--device", default="auto")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def checkpoint_path(run, which):
    """The parent's checkpoint file: final (a finished run's ckpt.pt), warmdown, or a --save_at fraction."""
    if not os.path.isdir(run):
        raise UserError(f"no run folder {run}")
    if which == "final":
        if not os.path.isfile(os.path.join(run, "ckpt.pt")):
            raise UserError(f"{run} is not a run folder (no ckpt.pt)")
        if not os.path.isfile(os.path.join(run, "result.json")):  # ckpt.pt alone is a resume point
            raise UserError(f"{run} has no result.json: the run is not finished "
                            f"(--ckpt warmdown or a --save_at fraction picks an intermediate checkpoint)")
        return os.path.join(run, "ckpt.pt")
    try:
        name = "ckpt_warmdown.pt" if which == "warmdown" else f"ckpt_{float(which):g}.pt"
    except ValueError:
        raise UserError(f"--ckpt {which!r}: final | warmdown | a --save_at fraction like 0.25") from None
    if not os.path.isfile(os.path.join(run, name)):
        have = sorted(n[5:-3] for n in os.listdir(run) if n.startswith("ckpt_") and n.endswith(".pt"))
        raise UserError(f"no checkpoint {name} in {run}; available: {', '.join(['final'] + have)}")
    return os.path.join(run, name)


def parent_config(ckpt):
    try:
        return GPTConfig.from_dict(ckpt["model_config"])
    except (ValueError, TypeError) as e:
        raise UserError(f"checkpoint does not match this model code: {e}") from None


def check_method(mc, args, algo):
    """Refuse a method that does not apply to the model's positional encodings (mc: GPTConfig)."""
    if args.method not in METHODS:
        raise UserError(f"unknown --method {args.method!r}: {' | '.join(METHODS)}")
    if mc.pos == "learned":
        raise UserError(f"pos=learned has only block_size={mc.block_size} learned positions and cannot run "
                        f"past them: no RoPE to scale, and continued training cannot grow the position "
                        f"table either; retrain with another --pos")
    if algo:
        raise UserError(f"{args.run} trained on algorithmic tasks (--algo {algo}); extend.py extends "
                        f"language models (test length generalisation with evaluate.py)")
    if args.layers == "global" and args.method not in SCALINGS:
        raise UserError(f"--layers global applies to RoPE scaling methods ({' | '.join(SCALINGS)})")
    if args.method == "none":
        return
    plan = layer_plan(dataclasses.replace(mc, rope_scaling_layers=args.layers))
    rotary = [l for l in plan if l.pos in ("rope", "hope")]
    if not rotary:
        raise UserError(f"--method {args.method} changes RoPE, but no layer of this model uses RoPE "
                        f"(pos {mc.pos_pattern or mc.pos}); extend it with --method none --iters N")
    if not any(l.scaled for l in rotary):
        raise UserError("--layers global: every RoPE layer of this model is windowed; nothing to scale")


def extended_fields(mc, args, factor):
    """GPTConfig fields that extend model config mc to factor x its pretraining length."""
    L = mc.rope_original_len or mc.block_size  # the ORIGINAL length, even for an extended parent
    if factor <= 1 or factor * L != int(factor * L):
        raise UserError(f"--factor {factor:g} must be > 1 and give a whole number of tokens from L={L}")
    new = dict(block_size=int(factor * L), rope_original_len=L)
    if args.method in SCALINGS:
        new.update(rope_scaling=args.method, rope_factor=factor, yarn_beta_fast=args.beta_fast,
                   yarn_beta_slow=args.beta_slow, rope_scaling_layers=args.layers)
    elif args.method == "abf":  # ABF (arXiv 2309.16039): a larger base, no scaling; then continue training
        if args.theta <= 0:
            raise UserError("--method abf needs --theta, the new RoPE base (e.g. 500000)")
        new["rope_theta"] = args.theta
    # freeze what defaults to block_size, so that growing block_size leaves the function unchanged
    kinds = {l.pos for l in layer_plan(mc)}
    if "hope" in kinds and not mc.hope_cutoff:
        new["hope_cutoff"] = mc.block_size
    if "expe" in kinds and not mc.expe_slope:
        new["expe_slope"] = 1 / mc.block_size
    return new


def child_config(ckpt, new, args, iters, out_dir):
    """The TrainConfig of the extended run: the parent's, at the new length, with this run's flags."""
    tc = dict(ckpt["train_config"])
    model = {**tc.pop("model", {}), **{k: v for k, v in new.items() if k not in TRAIN_MODEL_FIELDS}}
    tc.update(block_size=new["block_size"], rope_theta=new.get("rope_theta", tc.get("rope_theta")),
              iters=iters, tokens=0, out_dir=out_dir, resume=False, overwrite=args.overwrite, save_at="",
              device=args.device, quiet=args.quiet, model=model,
              short_frac=args.short_frac, short_block=new["rope_original_len"] if args.short_frac else 0,
              qat_start=0.0)  # a QAT parent's weights are trained on the grid already: keep QAT on
    for k in ("lr", "warmup", "warmdown", "batch_size", "ptq_bits"):
        if getattr(args, k) is not None:
            tc[k] = getattr(args, k)
    try:
        cfg = train.TrainConfig(**tc)
    except TypeError as e:
        raise UserError(f"checkpoint's train_config does not match this train.py: {e}") from None
    train.check_config(cfg, min_iters=0)  # iters 0 = training-free
    return cfg


def eval_lengths(args):
    try:
        lengths = [int(t) for t in args.eval_lengths.split(",") if t.strip()]
    except ValueError:
        lengths = [0]
    if any(t < 2 for t in lengths):
        raise UserError(f"malformed --eval_lengths {args.eval_lengths!r}: comma-separated lengths >= 2")
    return lengths


def load_corpus(cfg):
    return train.load_corpus(cfg.data, cfg.tokenizer, cfg.vocab_size, cfg.cache_dir, cfg.val_frac)


def prepare(args, parent, which, factor, iters, out_dir):
    """Everything checked, nothing written: (model, cfg, lineage) of one extension step."""
    if os.path.realpath(out_dir) == os.path.realpath(parent):
        raise UserError(f"--out_dir {out_dir} is the parent run itself")
    if os.path.exists(os.path.join(out_dir, "result.json")) and not args.overwrite:
        raise UserError(f"{out_dir} already holds a finished run; use --overwrite or another --out_dir")
    ckpt = train.load_checkpoint(checkpoint_path(parent, which))
    mc = parent_config(ckpt)
    check_method(mc, args, ckpt["train_config"].get("algo", ""))
    new = extended_fields(mc, args, factor)
    model = train.model_from_checkpoint(ckpt, **new)
    cfg = child_config(ckpt, new, args, iters, out_dir)
    lineage = dict(parent=parent, parent_ckpt=which, parent_step=ckpt["step"], method=args.method,
                   factor=factor, original_len=new["rope_original_len"], block_size=new["block_size"],
                   theta=model.config.rope_theta, beta_fast=args.beta_fast, beta_slow=args.beta_slow,
                   layers=args.layers, iters=iters, short_frac=args.short_frac,
                   parent_lineage=ckpt.get("extra", {}).get("lineage"))
    return model, cfg, lineage


def extend(args):
    """One extension, or the 2-stage recipe (stage 1 at --stage1_factor for half the steps, into
    out_dir/stage1; stage 2 at --factor from stage 1's result), each stage a run with its lineage."""
    out_dir = args.out_dir or f"{os.path.normpath(args.run)}-{args.method}{args.factor:g}" + \
        ("-ft" if args.iters else "")
    lengths = eval_lengths(args)
    if args.iters < 0:
        raise UserError(f"--iters {args.iters} must be >= 0 (0 = training-free)")
    stages = [(args.run, args.ckpt, args.factor, args.iters, out_dir)]
    if args.stages == 2:
        if args.iters < 2 or not 1 < args.stage1_factor < args.factor:
            raise UserError(f"--stages 2 needs --iters >= 2 and 1 < --stage1_factor "
                            f"{args.stage1_factor:g} < --factor {args.factor:g}")
        stage1 = os.path.join(out_dir, "stage1")
        stages = [(args.run, args.ckpt, args.stage1_factor, args.iters // 2, stage1),
                  (stage1, "final", args.factor, args.iters - args.iters // 2, out_dir)]
        prepare(args, args.run, args.ckpt, args.factor, stages[1][3], out_dir)  # check stage 2 up front
    model, cfg, lineage = prepare(args, *stages[0])
    if lengths:
        n_val = len(load_corpus(cfg).val)
        if max(lengths) >= n_val:
            raise UserError(f"--eval_lengths {max(lengths)} does not fit the {n_val}-token val split")
    for k, stage in enumerate(stages):
        if k:
            model, cfg, lineage = prepare(args, *stage)
        lineage.update(stage=k + 1, stages=len(stages))
        # train.py's loop from the rescaled model; 0 steps = training-free (evaluate and record)
        last = k == len(stages) - 1
        result = train.train(cfg, init_model=model, lineage=lineage, eval_lengths=lengths if last else ())
    return result


def main(argv=None):
    def body():
        result = extend(parse_args(argv))
        train.report(result)
        for t, loss in result["metrics"].get("val_loss_by_length", {}).items():
            print(f"  val loss at {t:>6} tokens: {loss:.4f}")
    train.cli(body)


if __name__ == "__main__":
    main()
