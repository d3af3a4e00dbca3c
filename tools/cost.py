"""
What a sweep costs before it runs: per job and in total, parameters, training tokens, training and
evaluation FLOPs, the bytes of checkpoints it keeps, and GPU-hours at a stated MFU and GPU peak.

    bash sweep.sh --cost qat                            # the tiny grid (sweep.sh feeds its lines here)
    SCALE=paper MFU=0.4 GPU=H100 bash sweep.sh --cost longctx
    SCALE=paper bash sweep.sh --dry-run qat | python tools/cost.py    # any list of job lines

Input: one job a line ("NAME<TAB>COMMAND" or the command alone), steps joined by ' && ' as sweep.sh
writes them: train.py, extend.py and evaluate.py with their own flags (parsed by their own parsers,
so a job costs what it will run). Nothing is trained, loaded or written; the models are built on
the meta device, only to count parameters.

FLOPs: model.flops_per_token (6 per matmul weight and 12 n_layer d T for attention, per trained
token: the formula of the GPU check's MFU), a third of it per evaluated token (forward only).
Training counts every step, --short_frac steps at their shorter context. Evaluation counts train.py's
quick evals (--eval_tokens every --eval_interval steps) and final passes over the val split (full
precision, quantised, one per --ptq_bits), and evaluate.py's windows: ppl and LongPPL's short
windows, the retrieval samples (answer and distractors), the attention probes (two forwards per
window), the algorithmic bins. The val split is the bundled corpus's at the run's vocabulary, the
manifest's of a prepared --data folder, or --val_tokens. Checkpoints kept: a run's ckpt.pt,
ckpt_warmdown.pt, --save_at checkpoints, an extension's init.pt (weights, plus optimizer state in
the resume checkpoints: Muon's momentum 4 bytes, AdamW's two moments 8 bytes per parameter).
GPU-hours = (training FLOPs + evaluation FLOPs / --eval_speedup) / (MFU x peak) / 3600 (+ --startup
seconds per process: one a job under sweep.sh's CHAIN=1), but at least the job's
training steps x --step_floor / --jobs_per_gpu: a small model's step is launch-bound (the host's
kernel launches and Python, which no GPU speed removes), and jobs packed on one GPU share it
(sweep.sh JOBS_PER_GPU). A CPU prediction is the same sum with the CPU's measured training FLOP/s
as PEAK, MFU 1, its start-up and no floor (docs/cluster.md).
"""
import contextlib
import dataclasses
import functools
import io
import json
import math
import os
import shlex
import sys
import types
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from anywhere: the project's libraries
import cli
import evaluate
import extend
import tasks
import train
from cli import UserError, flag, parse, main as cli_main
from model import GPT, GPTConfig, flops_per_token

# Dense (no sparsity) bf16 tensor-core peaks, TFLOP/s, from NVIDIA's datasheets ("with sparsity"
# figures halved); the GPU check's table holds the same figures for its MFU.
PEAK_TFLOPS = {"H100": 989.0, "H100-SXM": 989.0, "H100-NVL": 835.0, "H100-PCIe": 756.0, "H200": 989.0,
               "H200-NVL": 835.0, "A100": 312.0, "L40S": 362.0, "RTX4090": 165.0}
# Host seconds per training step that no GPU speed removes (--step_floor's default): an eager step of
# the small presets launches ~2,000-2,700 kernels (tests/bench_ops.py: 2,381 ATen ops forward and
# backward + 146 Muon + 164 AdamW at 15M, bits 6) at ~4 us of host time each on a current GPU
# server. An estimate, not yet measured on a GPU (docs/gpu.md); it puts the paper lengen grid's
# ~4.6M steps near the 12-19 GPU-hours that its launch-bound jobs were estimated at.
STEP_FLOOR_S = 0.01
# The bundled corpus's val split in tokens by vocabulary (python data.py prepare "" OUT --vocab_size V)
BUNDLED_VAL_TOKENS = {512: 312054, 1024: 258081, 4096: 205997}


@dataclass
class CostConfig:
    mfu: float = flag(0.4, "model FLOPs utilisation assumed for the GPU-hours (sweep.sh: env MFU)")
    gpu: str = flag("H100", f"GPU whose dense bf16 peak is used: {' | '.join(PEAK_TFLOPS)} (env GPU)")
    peak: float = flag(0.0, "peak in TFLOP/s, for a GPU not in the table or a CPU (env PEAK; 0 = the table's)")
    val_tokens: int = flag(0, "val split size in tokens (0 = the bundled corpus's, or a prepared --data folder's)")
    eval_speedup: float = flag(1.0, "how many times faster the evaluation FLOPs run than the training ones (forward "
                                    "only: no backward, no optimizer; env EVAL_SPEEDUP). Measured on the 2-core CPU: 1.5")
    startup: float = flag(0.0, "seconds per process added to the hours: a CPU prediction's import and data "
                               "start-up (env STARTUP; negligible on GPU runs of hours)")
    chain: bool = flag(True, "a job's steps run in one process (sweep.sh CHAIN=1, its default): --startup once a job; "
                             "false: once a step (env CHAIN)")
    step_floor: float = flag(STEP_FLOOR_S, "host seconds per training step that no GPU speed removes: a job's "
                             "GPU time is at least its steps x this / jobs_per_gpu (env STEP_FLOOR; 0 = none)")
    jobs_per_gpu: int = flag(1, "jobs sharing one GPU (sweep.sh JOBS_PER_GPU): they share its host floor")
    jobs: bool = flag(True, "one line per job before the total")


# -----------------------------------------------------------------------------
# Pure arithmetic on configs

def model_stats(mcfg, optimizer):
    """(total params, non-embedding params, bytes of the weights, bytes of the optimizer state) of
    a GPTConfig, counted on the meta device: no memory, no time."""
    return _model_stats(json.dumps(dataclasses.asdict(mcfg), sort_keys=True), optimizer)


@functools.lru_cache(maxsize=None)
def _model_stats(mcfg_json, optimizer):  # GPTConfig is not hashable: cached by its JSON
    import torch
    with torch.device("meta"):
        model = GPT(GPTConfig(**json.loads(mcfg_json)))
    weights = sum(t.numel() * t.element_size() for t in {id(t): t for t in model.state_dict().values()}.values())
    opts = train.build_optimizers(model, train.TrainConfig(optimizer=optimizer))
    state = sum(p.numel() * (4 if isinstance(o, train.Muon) else 8) for o in opts for g in o.param_groups
                for p in g["params"])
    return model.num_params(), model.num_params(non_embedding=True), weights, state


def forward_flops(mcfg, optimizer, seq_len):
    """FLOPs of one evaluated token at context seq_len: a third of a trained one (forward only)."""
    n = model_stats(mcfg, optimizer)[1]
    return flops_per_token(n, mcfg.n_layer, mcfg.n_embd, seq_len, mcfg.vocab_size) / 3


def val_split(cfg, val_tokens):
    if val_tokens:
        return val_tokens
    if cfg.data and os.path.isfile(os.path.join(cfg.data, "manifest.json")):
        with open(os.path.join(cfg.data, "manifest.json")) as f:
            return int(json.load(f)["n_val_tokens"])
    return BUNDLED_VAL_TOKENS.get(cfg.vocab_size, BUNDLED_VAL_TOKENS[4096])


def algo_context(cfg, block):
    """Columns an --algo batch computes: its rows are cut after the longest example (tasks.algo_targets),
    that of the largest input length with the most offset PADs, at most the block."""
    return min(block, tasks.algo_example_len(cfg.algo, train.algo_lengths(cfg)[1], cfg.algo_offset) - 1)


def run_cost(cfg, mcfg, val_tokens=0):
    """One train.py run (its TrainConfig and GPTConfig): dict of params, tokens, train_flops,
    eval_flops, ckpt_bytes (the checkpoints it keeps)."""
    total, n, weights, state = model_stats(mcfg, cfg.optimizer)
    block = mcfg.block_size
    iters = math.ceil(cfg.tokens / (cfg.batch_size * block)) if cfg.tokens > 0 else cfg.iters
    tokens = iters * cfg.batch_size * block
    fpt = lambda T: flops_per_token(n, mcfg.n_layer, mcfg.n_embd, T, mcfg.vocab_size)
    short = cfg.short_frac if cfg.short_frac > 0 else 0.0
    ctx = algo_context(cfg, block) if cfg.algo else block
    train_flops = tokens * ctx / block * ((1 - short) * fpt(ctx) + (short * fpt(cfg.short_block) if short else 0))
    quick = iters // cfg.eval_interval + (iters % cfg.eval_interval != 0)  # train.loop's evals, the last step's too
    passes = 1 + (mcfg.bits < 16) + (len(train.ptq_bits(cfg)) if mcfg.bits >= 16 and not cfg.algo else 0)
    if cfg.algo:  # tasks.algo_eval: 256 examples
        evaluated = (quick + passes) * 256 * ctx
    else:
        val = val_split(cfg, val_tokens)
        final = min(cfg.final_eval_tokens, val) if cfg.final_eval_tokens > 0 else val  # train.py's final passes
        evaluated = quick * min(cfg.eval_tokens, val) + passes * final
    kept = 1 + (cfg.schedule == "wsd" and cfg.warmdown > 0 and iters > 0) + len(train.save_fractions(cfg))
    return dict(params=total, tokens=tokens, steps=iters, train_flops=train_flops,
                eval_flops=evaluated * forward_flops(mcfg, cfg.optimizer, ctx), ckpt_bytes=kept * (weights + state))


def eval_cost(ec, cfg, mcfg, val_tokens=0):
    """FLOPs of one evaluate.py command (its EvalConfig) on a run (TrainConfig, GPTConfig)."""
    train_len = mcfg.block_size
    fwd = lambda T: forward_flops(mcfg, cfg.optimizer, T)
    if cfg.algo:
        lo, N = train.algo_lengths(cfg)
        lengths = evaluate.int_list(ec.lengths, "lengths") or [N, 2 * N, 3 * N]
        flops = sum(ec.algo_samples * T * fwd(T) for T in  # each bin's rows cut after its longest example
                    (tasks.algo_example_len(cfg.algo, b, cfg.algo_offset) - 1 for _, b in evaluate.algo_bins(lo, lengths)))
        ctx = algo_context(cfg, train_len)
        return flops + 256 * ctx * fwd(ctx)  # and the in-distribution tasks.algo_eval
    names = [t for t in (ec.tasks or evaluate.DEFAULT_TASKS).split(",") if t.strip()]
    if "grid" in names:
        return 0.0  # the weights alone
    lengths = sorted(set(evaluate.int_list(ec.lengths, "lengths") or [train_len * f for f in evaluate.DEFAULT_FACTORS]))
    val = val_split(cfg, val_tokens)
    flops = 0.0
    for L in lengths:
        if "ppl" in names:
            scored = min(ec.ppl_tokens, val)
            stride = min(ec.stride, L) if ec.stride else L
            flops += scored * L / stride * fwd(L)
            if not ec.no_longppl:  # short windows of K + W - 1 inputs, one every W positions
                K, W = ec.longppl_short, evaluate.longppl_step(ec)
                flops += scored * (K + W - 1) / W * fwd(K + W - 1)
        retrieval = [t for t in names if t in tasks.TASKS]
        rows = 1 + (tasks.N_DISTRACTORS if ec.rank else 0)  # --rank false: the answer's row only
        flops += len(retrieval) * ec.depths * ec.samples * rows * L * fwd(L)
    if not ec.no_probes:  # val windows and niah samples, each a forward and the attention maps
        flops += sum(2 * 2 * ec.probe_samples * L * fwd(L) for L in set(lengths) | {train_len})
    if ec.ckpt != "final":  # a finished run's short val loss is read from its record
        flops += val * fwd(train_len)
    return flops


def extend_cost(ec, parent, val_tokens=0):
    """[(out_dir, TrainConfig, GPTConfig, cost)] of the stages of one extend.py command from the
    parent run (its TrainConfig, GPTConfig); an extension also keeps its init.pt."""
    pcfg, pm = parent
    budget = extend.resolve_budget(ec, (types.SimpleNamespace(config=pm), pcfg, None))
    out = []
    for _, _, factor, share, out_dir in extend.stages(ec, budget):
        new, cfg = extend.stage_config(ec, pcfg, pm, factor, share, out_dir)
        mcfg = dataclasses.replace(pm, **new)
        c = run_cost(cfg, mcfg, val_tokens)
        c["ckpt_bytes"] += model_stats(mcfg, cfg.optimizer)[2]
        out.append((out_dir, cfg, mcfg, c))
        pcfg, pm = cfg, mcfg  # the 2-stage recipe: stage 2 extends stage 1
    return out


# -----------------------------------------------------------------------------
# Job lines

def script_argv(step):
    """'python train.py --x 1' -> ('train', ['--x', '1']); a step of another kind -> (None, [])."""
    words = shlex.split(step)
    for i, w in enumerate(words):
        name = os.path.basename(w)
        if name in ("train.py", "extend.py", "evaluate.py"):
            return name[:-3], words[i + 1:]
    return None, []


def parsed(fn, argv, step):
    """A step's config from its script's own parser; its complaint becomes one line naming the step."""
    why = io.StringIO()
    try:
        with contextlib.redirect_stderr(why):
            return fn(argv)
    except SystemExit:
        raise UserError(f"{why.getvalue().strip().split(': error: ')[-1]}: {step[:120]}") from None


def job_cost(line, val_tokens=0, known=None):
    """One grid line -> dict of params (of its first trained model), tokens (trained, every step),
    steps (training steps, every run), train_flops, eval_flops, ckpt_bytes. known: the runs of
    earlier lines (a second-pass line evaluates them), updated with this line's."""
    runs = {} if known is None else known  # out_dir -> (TrainConfig, GPTConfig): what later steps extend or evaluate
    total = dict(params=0, tokens=0, steps=0, train_flops=0.0, eval_flops=0.0, ckpt_bytes=0, processes=0)

    def add(c):
        for k in ("tokens", "steps", "train_flops", "eval_flops", "ckpt_bytes"):
            total[k] += c[k]
        total["params"] = total["params"] or c["params"]

    for step in line.split(" && "):
        kind, argv = script_argv(step)
        total["processes"] += 1
        if kind == "train":
            cfg = parsed(train.parse_args, argv, step)
            vocab = len(tasks.ALGO_VOCAB) if cfg.algo else (cfg.vocab_size or full_vocab(cfg.tokenizer))
            mcfg = train.model_config(cfg, vocab)
            add(run_cost(cfg, mcfg, val_tokens))
            runs[os.path.normpath(cfg.out_dir)] = (cfg, mcfg)
        elif kind == "extend":
            ec = parsed(extend.parse_args, argv, step)
            for out_dir, cfg, mcfg, c in extend_cost(ec, parent_of(runs, ec.run, step), val_tokens):
                add(c)
                runs[os.path.normpath(out_dir)] = (cfg, mcfg)
        elif kind == "evaluate":
            ec = parsed(evaluate.parse_args, argv, step)
            total["eval_flops"] += eval_cost(ec, *parent_of(runs, ec.run, step), val_tokens)
    return total


def parent_of(runs, folder, step):
    if os.path.normpath(folder) not in runs:
        raise UserError(f"{folder} is not trained by an earlier step of its job: {step[:120]}")
    return runs[os.path.normpath(folder)]


def full_vocab(tokenizer):
    import data
    return data.get_tokenizer(tokenizer, 0).n_vocab


def peak_flops(cc):
    """FLOP/s of the stated device: --peak, else the table's entry for --gpu."""
    if cc.peak > 0:
        return cc.peak * 1e12
    if cc.gpu not in PEAK_TFLOPS:
        raise UserError(f"unknown GPU {cc.gpu!r} ({', '.join(PEAK_TFLOPS)}); give its peak: PEAK=TFLOP/s")
    return PEAK_TFLOPS[cc.gpu] * 1e12


def gpu_hours(flops, mfu, peak, steps=0, floor=0.0, jobs_per_gpu=1, eval_flops=0.0, eval_speedup=1.0):
    """Hours of one GPU: the training FLOPs at mfu x peak and the evaluation FLOPs eval_speedup times
    faster, or the steps' host floor shared by the jobs on the GPU when that is longer (a
    launch-bound job waits on its host, not on the GPU's arithmetic)."""
    busy = (flops + eval_flops / eval_speedup) / (mfu * peak)
    return max(busy, steps * floor / jobs_per_gpu) / 3600


def si(x, unit=""):
    """1234567 -> '1.23M': three significant digits."""
    for div, p in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= div:
            return f"{x / div:.3g}{p}{unit}"
    return f"{x:.3g}{unit}"


def costs(lines, cc):
    """[(name, job cost dict)] of the job lines, then the total's line (the last line printed)."""
    peak = peak_flops(cc)
    if not 0 < cc.mfu <= 1:
        raise UserError(f"MFU {cc.mfu:g} must be in (0, 1]")
    if not (math.isfinite(cc.eval_speedup) and cc.eval_speedup > 0):
        raise UserError(f"EVAL_SPEEDUP {cc.eval_speedup:g} must be > 0")
    if not (math.isfinite(cc.step_floor) and cc.step_floor >= 0) or cc.jobs_per_gpu < 1:
        raise UserError(f"STEP_FLOOR {cc.step_floor:g} must be >= 0 and JOBS_PER_GPU {cc.jobs_per_gpu} >= 1")
    rows, known = [], {}
    for i, line in enumerate(lines, 1):
        name, _, cmd = line.rpartition("\t")
        c = job_cost(cmd, cc.val_tokens, known)
        c["processes"] = 1 if cc.chain else c["processes"]  # tools/chain.py: one process runs every step
        c["gpu_hours"] = (gpu_hours(c["train_flops"], cc.mfu, peak, c["steps"], cc.step_floor, cc.jobs_per_gpu,
                                    c["eval_flops"], cc.eval_speedup) + c["processes"] * cc.startup / 3600)
        c["floor_bound"] = c["steps"] * cc.step_floor / cc.jobs_per_gpu > 3600 * gpu_hours(
            c["train_flops"], cc.mfu, peak, eval_flops=c["eval_flops"], eval_speedup=cc.eval_speedup)
        rows.append((name or f"line {i}", c))
    return rows, peak


def total_line(rows, cc, peak):
    flops = sum(c["train_flops"] + c["eval_flops"] for _, c in rows)
    mfu = f"{cc.mfu:g}" + (f" (evaluation {cc.eval_speedup:g}x faster)" if cc.eval_speedup != 1 else "")
    return (f"total: {flops:.3g} FLOPs, {sum(c['gpu_hours'] for _, c in rows):.4g} GPU-hours at MFU {mfu} on "
            f"{cc.gpu if cc.peak <= 0 else cc.gpu + ' (given)'} (peak {peak / 1e12:g} TFLOP/s), "
            f"{sum(c['ckpt_bytes'] for _, c in rows) / 1e9:.3g} GB of checkpoints")


def report(rows, cc, peak):
    out = []
    if cc.jobs:
        width = max([len(n) for n, _ in rows] + [3])
        out.append(f"{'job':<{width}}  {'params':>7} {'tokens':>7} {'train FLOPs':>11} {'eval FLOPs':>10} "
                   f"{'ckpt GB':>8} {'GPU-h':>8}")
        for name, c in rows:
            out.append(f"{name:<{width}}  {si(c['params']):>7} {si(c['tokens']):>7} {c['train_flops']:>11.3g} "
                       f"{c['eval_flops']:>10.3g} {c['ckpt_bytes'] / 1e9:>8.3g} {c['gpu_hours']:>8.3g}")
    procs = sum(c["processes"] for _, c in rows)
    out.append(f"{len(rows)} jobs, {si(sum(c['tokens'] for _, c in rows))} tokens trained; training "
               f"{sum(c['train_flops'] for _, c in rows):.3g} FLOPs, evaluation {sum(c['eval_flops'] for _, c in rows):.3g}"
               + (f"; {procs} processes x {cc.startup:g} s start-up" if cc.startup else "")
               + (f"; host floor {1e3 * cc.step_floor:g} ms a step / {cc.jobs_per_gpu} job(s) per GPU: "
                  f"{sum(c['floor_bound'] for _, c in rows)} of {len(rows)} jobs bound by it" if cc.step_floor else ""))
    out.append(total_line(rows, cc, peak))
    return "\n".join(out)


def main(argv=None):
    def body():
        cc = parse(CostConfig, argv, __doc__)
        lines = [line.rstrip("\n") for line in sys.stdin if line.strip() and not line.startswith("#")]
        rows, peak = costs(lines, cc)
        print(report(rows, cc, peak))
    cli_main(body)


if __name__ == "__main__":
    main()
