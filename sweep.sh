#!/usr/bin/env bash
# sweep.sh: the studies of this project as grids of runs, parallel and resumable.
#
#   bash sweep.sh [--dry-run] STUDY    run a study (--dry-run: print the commands still to run, one a line)
#   bash sweep.sh --count STUDY        number of lines (jobs) in the study's full grid
#   bash sweep.sh --cost STUDY         its cost before it runs (tools/cost.py): per job and in total, parameters,
#                                      tokens, training and evaluation FLOPs, checkpoint bytes, GPU-hours
#   bash sweep.sh --task I STUDY       run line I (1-based) of the full grid, with the skip/resume check
#   bash sweep.sh --post STUDY         only the after-sweep steps (grid-distance probe for qat, analyze.py;
#                                      SCALE=paper longctx: tools/export.py --format hf of the main-recipe models)
#
# Studies: qat, qat-probes, longctx, posenc, lengen (grids: the grid_* functions below); rung1, the larger rung
# (studies/rung.py): every run-study's rerun at a larger size in one sweep (CONFIRM=3, implied).
# Environment:
#   SCALE=tiny|paper  tiny (default) fits a 2-core CPU (qat: 99 runs, 13 min on 2 idle cores); paper = the seeds' grids
#   CONFIRM=1         tiny only: the study's confirmatory design (studies/confirm.py): only the cells its declared
#                     family needs, at its fresh seeds (studies/seeds.tsv); runs under OUT/confirm/STUDY, and
#                     analyze.py --confirm decides the family; PUBLISH=1 writes it into RESULTS/STUDY/confirm
#   CONFIRM=2         the second wave (studies/wave2.py): qat, longctx, lengen, posenc; runs under
#                     runs/confirm2/STUDY (OUT/confirm2 when OUT is set), analysis in RESULTS/STUDY/confirm2
#   CONFIRM=3         the larger rung, only as `bash sweep.sh rung1`: runs under runs/rung1/{qat,qat-probes,lengen,
#                     posenc} (one wall: runs/rung1/wall.json), analyses in RESULTS/STUDY/rung1
#   OUT=out/sweeps    output root; run folders are OUT/STUDY/RUN_NAME, logs OUT/STUDY/logs/ (relative
#                     paths are relative to this folder: commands run from the repository root)
#   JOBS=N            parallel jobs (default: GPUs in GPUS x JOBS_PER_GPU, else CPU cores for tiny, else 1)
#   GPUS=0,1,2,3      one GPU per job slot: slot k runs with CUDA_VISIBLE_DEVICES=GPUS[k mod len(GPUS)]
#   JOBS_PER_GPU=1    with GPUS and no JOBS: this many slots per GPU (slot k on GPUS[k mod len]), for small
#                     launch-bound jobs (lengen, the 3M-8M qat runs) that leave a GPU idle while the host launches;
#                     --cost shares its host floor (STEP_FLOOR s a step, tools/cost.py) between them (docs/cluster.md)
#   PYTHON=python     interpreter (tests point it at a stub); DATA=path adds --data to every training run
#                     (SCALE=paper: a prepared folder, `python data.py prepare SRC OUT --procs N` once;
#                     a raw corpus is refused: its first job would tokenise it while every other GPU waits)
#   EVAL_DATA=path    SCALE=paper longctx: a prepared long-document set (its held-out split) that every evaluate.py
#                     step scores loss and LongPPL on; checked first (data.py windows): too few windows = no run
#   COMPILE=1|0       train.py --compile (regional torch.compile); default 1 for SCALE=paper, 0 for tiny.
#                     Gate: tests/gpu_check.py's "compile late QAT" and speed checks on the GPU type first
#   EXTRA="..."       extra flags appended to every train.py command
#   CHAIN=1|0         1 (default): a job's steps run in one Python process (python tools/chain.py LINE), 0: in bash
#   PUBLISH=1         after the study (and with --post), analyze.py also writes its analysis (analysis.md,
#                     analysis.json, plots) into RESULTS/STUDY, so no stored number is copied by hand;
#                     RESULTS=results (default; it holds the tiny studies: set another folder for SCALE=paper)
#   MFU=0.4 GPU=H100  --cost: the utilisation and the GPU (its dense bf16 peak) of the GPU-hours (EVAL_SPEEDUP: how
#                     many times faster evaluation FLOPs run, default 1); PEAK=TFLOP/s
#                     for a device not in tools/cost.py's table; VAL_TOKENS=N the val split (default: the bundled corpus's);
#                     STARTUP=s seconds per process (a CPU prediction; docs/cluster.md)
# Each job gets OMP_NUM_THREADS = cores / JOBS (at least 1) unless OMP_NUM_THREADS is set.
#
# Resume: a run whose OUT/STUDY/RUN/result.json exists is finished and skipped (train.py writes it
# atomically, last); an unfinished run with a ckpt.pt restarts with --resume; an evaluation step is
# done when RUN/eval.json exists. Stopping the sweep (Ctrl-C, SIGTERM as from scancel, SIGUSR1, SIGHUP
# from a closed terminal: its jobs are stopped too) and rerunning the same command continues where it
# stopped: a training job stopped by a signal finishes its step and writes its checkpoint first
# (train.py, exit status 75), and is reported as stopped, resumable, not as failed. A job left
# running by a SIGKILLed sweep keeps its run folder locked: train.py refuses a second writer there,
# so the rerun reports that job as failed rather than train it twice. Failed jobs are reported at
# the end (exit 1); the others still run.
#
# Cluster: the grid is a list of independent lines. SLURM job array (one GPU per task), requeue-safe
# because --task does the same skip/resume check (docs/cluster.md: costs, stops, full disks):
#
#   N=$(SCALE=paper bash sweep.sh --count qat); SCALE=paper bash sweep.sh --cost qat | tail -1
#   JID=$(sbatch --parsable --array=1-$N%64 --gres=gpu:1 --cpus-per-task=8 --time=12:00:00 \
#         --requeue --signal=B:USR1@120 --wrap "SCALE=paper exec bash sweep.sh --task \$SLURM_ARRAY_TASK_ID qat")
#   sbatch --dependency=afterany:$JID --gres=gpu:1 --wrap "SCALE=paper bash sweep.sh --post qat"
#
# --task passes a SIGTERM or SIGUSR1 on to its job (--signal=B: signals the batch shell only); a job
# stopped by SIGUSR1 (the warning before the time limit) under SLURM requeues its own task
# (scontrol requeue $SLURM_JOB_ID), which resumes it. SIGTERM (preemption, scancel) only stops it:
# --requeue requeues a preempted task; a cancelled one stays cancelled.
#
# or hand the plain list to any scheduler: SCALE=paper bash sweep.sh --dry-run qat > jobs.txt
set -uo pipefail
export LC_ALL=C   # printf %g must print 0.33, not 0,33

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE" || exit 2
STUDIES="qat qat-probes longctx posenc lengen rung1"  # rung1: the larger rung (CONFIRM=3)
SCALE=${SCALE:-tiny}
REHEARSE=${REHEARSE:-0}  # 1: the paper grid's rehearsal on CPU (the Rehearsal block below)
[[ $REHEARSE == 1 ]] && OUT=${OUT:-out/rehearse}
OUT_SET=${OUT:+1}
OUT=${OUT:-out/sweeps}
CONFIRM=${CONFIRM:-0}
for a_ in "$@"; do [[ $a_ == rung1 ]] && CONFIRM=${CONFIRM/#0/3}; done  # the rung's one command: bash sweep.sh rung1
PY=${PYTHON:-python}
DATA=${DATA:-}
EXTRA=${EXTRA:-}
COMPILE=${COMPILE:-}
RESULTS=${RESULTS:-results}  # PUBLISH=1: where the analysis is also written (RESULTS/STUDY)

STOP_RC=75  # a job stopped by a signal at a step boundary, its checkpoint written (train.py: cli.STOPPED)
die() { echo "sweep.sh: $*" >&2; exit 2; }
note() { echo "sweep.sh: $*" >&2; }
# The grid code avoids subshells ($(...), pipes) per line: a 720-line grid stays fast under load.
emit() {  # print a command with single spaces
    local l="$*"
    while [[ $l == *"  "* ]]; do l=${l//"  "/" "}; done
    printf '%s\n' "${l% }"
}

case $SCALE in tiny|paper) ;; *) die "unknown SCALE '$SCALE' (tiny | paper)";; esac
if [[ -z $COMPILE ]]; then [[ $SCALE == paper && $REHEARSE == 0 ]] && COMPILE=1 || COMPILE=0; fi
case $COMPILE in 0) COMPILE_FLAG="";; 1) COMPILE_FLAG=" --compile";; *) die "COMPILE must be 0 or 1, got '$COMPILE'";; esac
[[ $OUT == *[[:space:]]* ]] && die "OUT must not contain spaces: '$OUT'"
[[ $OUT == /* ]] || OUT=${OUT#./}
case ${PUBLISH:-0} in 0|1) ;; *) die "PUBLISH must be 0 or 1, got '$PUBLISH'";; esac
case $CONFIRM in
    0) ;;
    1) [[ $SCALE == tiny && $REHEARSE == 0 ]] || die "CONFIRM=1 is the tiny confirmatory design: SCALE=tiny, REHEARSE=0"
       OUT=$OUT/confirm; RESULTS_SUB=/confirm ;;
    2) [[ $SCALE == tiny && $REHEARSE == 0 ]] || die "CONFIRM=2 is the tiny second wave: SCALE=tiny, REHEARSE=0"
       # the wave's records (JSON; checkpoints and logs are git-ignored) live in runs/ by default, so a
       # sitting's finished jobs can be committed and the next sitting, even on a fresh clone, resumes them
       [[ -z $OUT_SET ]] && OUT=runs
       OUT=$OUT/confirm2; RESULTS_SUB=/confirm2 ;;
    3) [[ $SCALE == tiny && $REHEARSE == 0 ]] || die "CONFIRM=3 is the larger rung (bash sweep.sh rung1): SCALE=tiny, REHEARSE=0"
       [[ -z $OUT_SET ]] && OUT=runs  # as wave 2: the records in git, resumable on a fresh clone
       OUT=$OUT/rung1; RESULTS_SUB=/rung1 ;;
    *) die "CONFIRM must be 0, 1, 2 or 3, got '$CONFIRM'" ;;
esac
case $REHEARSE in
    0) ;;
    1) [[ $SCALE == paper ]] || die "REHEARSE=1 rehearses a paper grid: set SCALE=paper"
       DATA=${DATA:-$OUT/data/train}; EVAL_DATA=${EVAL_DATA:-$OUT/data/long} ;;  # rehearse_data prepares them
    *) die "REHEARSE must be 0 or 1, got '$REHEARSE'" ;;
esac

# -----------------------------------------------------------------------------
# Grids: each grid_<study> prints one job per line, fully expanded. A job is one command, or
# steps joined by ' && ' (train, then extend, then evaluate); each step is skipped on its own once done.

TRAIN_FLAGS="--quiet${DATA:+ --data $DATA}$COMPILE_FLAG${EXTRA:+ $EXTRA}"  # on every text training run
# paper: tokens of val scored by each final pass of a run (full precision, each PTQ bit-width, the QAT
# deployed model; extensions inherit it): 2^23, 8192 sequences of 1024. Tiny runs score the bundled
# val split whole (train.py's default, the same 2^23, holds it).
PAPER_FINAL_EVAL="--final_eval_tokens 8388608"
EVAL_SEED=100  # paper longctx: the LongPPL evaluator's seed, none of the factorial's
PAPER_TARGET=8192  # paper longctx: the extension target, and its outcome lengths (half of it and it)
PAPER_LENGTHS=$(( PAPER_TARGET / 2 )),$PAPER_TARGET
PAPER_TASKS=passkey,niah_single,niah_multikey,niah_multivalue,niah_multiquery,vt,cwe,fwe,json_kv  # paper longctx retrieval
PAPER_MIN_WINDOWS=8  # paper longctx: full-context windows needed at every target length (EVAL_DATA, checked first)
EVAL_DATA=${EVAL_DATA:-}

tokens_for() {  # -> TOKENS: paper token budgets, ~20 tokens per non-embedding parameter (Chinchilla-style)
    case $1 in
        3M) TOKENS=60000000;; 5M) TOKENS=100000000;; 8M) TOKENS=160000000;; 15M) TOKENS=300000000;; 20M) TOKENS=400000000;;
        30M) TOKENS=600000000;; 50M) TOKENS=1000000000;; 100M) TOKENS=2000000000;; 175M) TOKENS=3500000000;;
        250M) TOKENS=5000000000;; 350M) TOKENS=7000000000;; *) TOKENS=20000000;;
    esac
}

accum_for() {  # -> ACCUM: micro-batches per step so that a 64 x 1024 batch fits one 80 GB GPU
    case $1 in 100M) ACCUM=2;; 175M|250M|350M) ACCUM=4;; *) ACCUM=1;; esac
}

tiny_tokens_for() {  # -> TOKENS: the tiny QAT budget, 20 tokens per non-embedding parameter (model.SIZES'
    # counts) in whole steps of 8 x 128 tokens: the budget where the INT4 / INT3 penalty has range
    case $1 in
        6K) TOKENS=124928;; 10K) TOKENS=193536;; 14K) TOKENS=278528;; 25K) TOKENS=494592;;
        39K) TOKENS=772096;; 55K) TOKENS=1111040;; 0.1M) TOKENS=1972224;;
        *) die "no tiny QAT budget for size $1 (tiny_tokens_for)";;
    esac
}

# One QAT-grid run. Args: DIR SIZE BITS WD LR SEED [--long M] [extra flags]; --long M trains M times
# longer. Name = train.py's run_name (size_bB_wdW_lrL_schedule_optimizer_sS), "_xM" for --long M.
qat_run() {
    local dir=$1 size=$2 bits=$3 wd=$4 lr=$5 seed=$6; shift 6
    local mult=1 suffix="" opt=muon sched=wsd budget
    if [[ ${1:-} == --long ]]; then mult=$2; suffix="_x$2"; shift 2; fi
    local extra="$*"
    [[ $extra =~ --optimizer[[:space:]]+([a-z]+) ]] && opt=${BASH_REMATCH[1]}
    [[ $extra =~ --schedule[[:space:]]+([a-z]+) ]] && sched=${BASH_REMATCH[1]}
    if [[ $SCALE == tiny ]]; then  # vocab 512 keeps the embedding at most about half of these models
        tiny_tokens_for "$size"
        budget="--vocab_size 512 --block_size 128 --batch_size 8 --tokens $(( mult * TOKENS ))"
        budget+=" --eval_interval 100000 --ckpt_every 100000 --ptq_bits 4,3"
    else
        accum_for "$size"; tokens_for "$size"
        budget="--block_size 1024 --batch_size 64 --grad_accum $ACCUM --tokens $(( mult * TOKENS ))"
        budget+=" --eval_interval 500 --ckpt_minutes 30 $PAPER_FINAL_EVAL"
    fi
    local gwd glr
    printf -v gwd '%g' "$wd"; printf -v glr '%g' "$lr"  # 0.330 -> 0.33, 1.0 -> 1, as train.py's run_name
    emit "$PY train.py --size $size --bits $bits --warmdown $wd --lr $lr --seed $seed $budget $extra" \
         "$TRAIN_FLAGS --out_dir $dir/${size}_b${bits}_wd${gwd}_lr${glr}_${sched}_${opt}_s${seed}${suffix}"
}

# QAT schedule x bit-width grid. paper (QAT seed, Phase 2): 720 runs = FP16/INT8/INT6 x 3 warmdowns x
# 4 LRs x 15M-100M x 5 seeds. tiny (99 runs, 13 min on 2 idle cores): one 2-layer family of width 16-48
# at 20 tokens per non-embedding parameter, FP16/INT4/INT3 (INT8/INT6 cost less than the seed noise at
# this scale, INT4 3-7 seed sds, INT3 10-20); the fit sizes carry the schedule grid, the held-out sizes
# (QAT_HELD) only the reference cell (warmdown 0.33, LR 1) where the penalty law is checked.
# QAT_REF: the reference warmdown (the penalty law is measured there; qat.REF_WARMDOWN, checked
# by tests/test_sweep.py), QAT_SHORT the short one the INT4 transition tests it against (SHORT_WARMDOWN)
QAT_REF=0.33; QAT_SHORT=0.1
QAT_WDS="$QAT_SHORT $QAT_REF 0.6"
qat_axes() {
    if [[ $SCALE == tiny ]]; then
        QAT_SIZES="14K 25K 39K"; QAT_HELD="6K 55K"; QAT_LRS="1"; QAT_SEEDS="0 1 2"; QAT_BITS="16 4 3"
    else
        QAT_SIZES="15M 30M 50M 100M"; QAT_HELD=""; QAT_LRS="0.25 0.5 1 2"; QAT_SEEDS="0 1 2 3 4"; QAT_BITS="16 8 6"
    fi
}

grid_qat() {
    qat_axes
    local d=$OUT/qat size lr wd bits seed
    for size in $QAT_SIZES; do for lr in $QAT_LRS; do for wd in $QAT_WDS; do
        for seed in $QAT_SEEDS; do for bits in $QAT_BITS; do
            qat_run "$d" "$size" "$bits" "$wd" "$lr" "$seed"
        done; done
    done; done; done
    for size in $QAT_HELD; do for seed in $QAT_SEEDS; do for bits in $QAT_BITS; do
        qat_run "$d" "$size" "$bits" "$QAT_REF" 1 "$seed"
    done; done; done
}

# Probes of the null (QAT seed, Phase 5): AdamW, cosine, longer training, extra sizes, INT4 from the
# smallest size up. Identical configs (e.g. the FP16 baselines shared by two probes) are one run.
# tiny (102 runs): the probes at the largest-penalty bit-width (INT3) against FP16, 3 seeds; extra
# held-out sizes 10K and 0.1M for the INT3 law; INT4 is in the tiny grid itself at every size. The
# tiny grid runs one LR, so the LR axis is probed at 25K (LRs 0.5 and 2 beside the grid's 1: these
# runs join the grid's cells, whose verdict then takes each warmdown at its best LR); 9x at 14K and
# 3x at 25K at the reference cell make D vary at fixed N, which the law in N and D needs.
grid_qat_probes() {
    local d=$OUT/qat-probes size bits wd seed m lr sm
    local base pbits seeds sizes sbits swds long_size long lbits int4_sizes int4_seeds int4_wds
    local lr_size lr_lrs ref_long
    if [[ $SCALE == tiny ]]; then
        base="25K"; pbits="16 3"; seeds="0 1 2"; sizes="10K 0.1M"; sbits="16 3"; swds=$QAT_REF
        long_size=14K; long="3"; lbits="16 3"; int4_sizes=""; int4_seeds=""; int4_wds=""
        lr_size=25K; lr_lrs="0.5 2"; ref_long="14K:9 25K:3"
    else
        base="15M 50M"; pbits=$QAT_BITS; seeds="0 1 2"; sizes="5M 8M 175M 250M 350M"; sbits=$QAT_BITS; swds=$QAT_WDS
        long_size=15M; long="3 9"; lbits="16 6"
        int4_sizes="3M 5M 8M 15M 20M 30M 50M 100M"; int4_seeds="0 1 2 3 4 5 6 7 8 9"; int4_wds="$QAT_SHORT $QAT_REF"
        lr_size=""; lr_lrs=""; ref_long=""  # the paper grid has 4 LRs, and 3x / 9x at every warmdown
    fi
    {
    for size in $lr_size; do for lr in $lr_lrs; do for bits in $pbits; do for seed in $seeds; do
        for wd in $QAT_WDS; do qat_run "$d" "$size" "$bits" "$wd" "$lr" "$seed"; done
    done; done; done; done
    for sm in $ref_long; do for bits in $lbits; do for seed in $seeds; do
        qat_run "$d" "${sm%:*}" "$bits" "$QAT_REF" 1 "$seed" --long "${sm#*:}"
    done; done; done
    for size in $base; do for bits in $pbits; do for seed in $seeds; do
        for wd in $QAT_WDS; do qat_run "$d" "$size" "$bits" "$wd" 1 "$seed" --optimizer adamw; done
        qat_run "$d" "$size" "$bits" "$QAT_REF" 1 "$seed" --schedule cosine   # warmdown unused by cosine
    done; done; done
    for bits in $lbits; do for seed in $seeds; do for wd in $QAT_WDS; do
        for m in $long; do qat_run "$d" "$long_size" "$bits" "$wd" 1 "$seed" --long "$m"; done
    done; done; done
    for size in $sizes; do for bits in $sbits; do for seed in $seeds; do for wd in $swds; do
        qat_run "$d" "$size" "$bits" "$wd" 1 "$seed"
    done; done; done; done
    for size in $int4_sizes; do for bits in 4 16; do for seed in $int4_seeds; do for wd in $int4_wds; do
        qat_run "$d" "$size" "$bits" "$wd" 1 "$seed"
    done; done; done; done
    } | awk '!seen[$0]++'
}

# Long-context extensibility (long-context seed, arXiv 2608.10296): the full 2^4 factorial QK-norm x
# GQA x SWA x pretraining context, with seeds. Both contexts train the same tokens per step and the
# same number of steps (the batch in sequences scales inversely with the context). Each run is
# evaluated (evaluate.py: loss at its pretraining length and at the target, sinks), extended with the
# seed's main recipe (one-stage NTK continued training on a long/short mix, a small fraction of the
# pretraining tokens) to the target length and evaluated there; the same recipe on an intermediate
# checkpoint (--save_at, extend.py --ckpt) is the early-extension diagnostic. On the first seed only,
# the robustness variants: larger extension budgets and the seed's alternative, 2-stage YaRN.
# Tiny pretraining mixes in compact passkey rows so that retrieval (exact match) has range; paper
# evaluations come in second-pass lines (the seed's fixed LongPPL evaluator is trained by a first-pass line).
# Lines are seed-major (the longer first-seed lines start first); every step resumes on its own.
swa_layers() {  # SIZE K -> the SWA layout flag: one global layer in K, the last layer global (as Olmo 3's
    # 3:1 layout ends at 32 layers); --global_every alone would end 14 layers (100M) on two windowed ones
    local n
    n=$(sed -n "s/^ *\"$1\": (\([0-9]*\),.*/\1/p" "$HERE/model.py")  # SIZES: (n_layer, n_embd, n_head)
    [[ -n $n ]] || die "size $1 is not in model.py's SIZES"
    if (( n % $2 == 0 )); then echo "--global_every $2"; return; fi
    local i pat=""
    for (( i = 0; i < n; i++ )); do pat+="${pat:+,}$( (( (n - 1 - i) % $2 == 0 )) && echo g || echo w)"; done
    echo "--layer_pattern $pat"
}

grid_longctx() {
    local d=$OUT/longctx size qks kvs ctxs window global target seeds tps steps frac fracs early mix
    local evalf extf tgt_lengths base mlp="" premix="" taskrows=""
    if [[ $SCALE == tiny ]]; then
        # window = the short pretraining context, as the seed and the paper grid (the SWA cells pretrain at
        # 64 with full attention; at 128 the windowed layers see 64; after extension they stay at 64)
        size=0.1M; qks="none head"; kvs="2 1"; ctxs="64 128"; window=64; global=2; target=512; seeds="0 1 2"
        # 768 steps: the fewest measured to learn passkey_short in distribution at context 64 (seed 0,
        # no-feature cells: 192 steps at mix 0.25 or 0.5 gave exact match 0.00; 384 learned it at 64, not
        # at 128); fracs: the 25% budget (100% would cost another pretraining at 512)
        # early 0.75: the long context's runs train at 128 from half-way (below), so the diagnostic's
        # checkpoint must hold some of it
        tps=2048; steps=768; frac=0.05; fracs="0.25"; early=0.75; mix=0.25
        # the long context's pretraining starts with half its steps at the short one (sequence length
        # warmup, same tokens per step, twice the rows): without it the context-128 runs learned
        # passkey_short in 11 of 24 runs (the MQA cells almost never), with the short steps drawn at random
        # in 1 of 3 probes; measured first (results/longctx: the learnability table)
        premix=" --short_frac 0.5 --short_block ${ctxs%% *} --short_warmup"
        # retrieval with range: half the rows are compact passkey samples (answer loss), so the text
        # models can learn retrieval inside their context; exact match at the target on 5 depths x 26
        # = 130 samples per length (>= 129: a cell mean over 3 seeds has a 95% CI half-width <= 0.05)
        base="--vocab_size 1024 --eval_interval 1000 --ptq_bits '' --task_mix 0.5 --task_list passkey_short --task_loss answer"
        evalf="--tasks ppl,passkey_short --depths 5 --samples 26 --score exact --rank false"  # 1 row per sample, not 5
        evalf+=" --ppl_tokens 16384 --longppl_short 32 --alpha 0.5 --beta 4 --quiet"
        tgt_lengths=$target
        [[ $CONFIRM != 0 ]] && seeds=${CONFIRM_SEEDS[longctx]}
    else
        # swiglu: every cell exports to transformers (HELMET / RULER); window = the short pretraining context
        # target: the seed's extension ratios, 8x / 4x (it extends 4K / 8K to 32K); 1K / 2K to 8K here
        size=100M; qks="none head"; kvs="12 3"; ctxs="1024 2048"; window=1024; global=4; target=$PAPER_TARGET; seeds="0 1 2 3 4"
        mlp=" --mlp swiglu"
        tps=131072; steps=15259; frac=0.05; fracs="0.25 1"; early=0.25; mix=0.25   # 2.0B tokens, 100M tokens of extension
        base="--grad_accum 4 --eval_interval 500 --ckpt_minutes 30 --ptq_bits '' $PAPER_FINAL_EVAL"
        # retrieval a 100M model can learn in distribution (no web text teaches these formats): a quarter of
        # the rows are samples of the evaluated RULER-style tasks, answer loss (the tiny grid's passkey mix,
        # with every task), in pretraining and on each extension's steps at the pretraining length
        base+=" --task_mix 0.25 --task_list $PAPER_TASKS --task_loss answer"
        evalf="--tasks ppl,$PAPER_TASKS"
        # exact match is the retrieval outcome (rank secondary, in eval.json): 5 depths x 3 samples = 15 per
        # (task, length), 135 per length over the 9 tasks (>= 129: a CI half-width <= 0.05 over 3 seeds, 78 over 5)
        evalf+=" --depths 5 --samples 3 --score exact --longppl_short 1024 --quiet"; tgt_lengths="$PAPER_LENGTHS"
        # outcomes inside single documents: a long-document set apart from the web corpus, enough windows;
        # --ppl_tokens scores them all (the default, 32768 scored tokens, would stop after 4 windows at 8K)
        evalf+="${EVAL_DATA:+ --eval_data $EVAL_DATA} --min_windows $PAPER_MIN_WINDOWS --ppl_tokens $(( PAPER_MIN_WINDOWS * target ))"
    fi
    # both scales: the extension's task rows only on its steps at the pretraining length, its target rows
    # text only: exact match at the target is extended, not trained at the target
    taskrows=" --task_rows short"
    local seed qk kv w ctx run ext swa f line evs="" second=() evalo layout extdata="" count
    # paper: the extension trains on the long-document set's train split (the seed extends on a
    # long-context mix; the web corpus has few documents of the target length); evaluation scores its
    # held-out split. Both checked before any job (run / task)
    [[ $SCALE == paper ]] && extdata="${EVAL_DATA:+ --data $EVAL_DATA}"
    layout=$(swa_layers "$size" "$global") || exit 2
    evalf+=" --target ${tgt_lengths%%,*}"  # the outcomes: at the target length(s) only, before and after
    evalo=${evalf/,passkey_short/}  # tiny: retrieval on the root and the main recipe only (its outcome; for time)
    # paper: one fixed LongPPL evaluator (arXiv 2410.23771 picks key tokens with one evaluator model)
    # for every cell and seed, outside the factorial: the no-feature architecture pretrained at the long
    # context with its own seed (EVAL_SEED, no cell's), extended by the main recipe to the target (a
    # model of the target length). Not one of the compared models, so no cell scores on its own key
    # tokens. Its line is the first; evaluate steps are second-pass lines after every training line
    # (evaluate.py refuses an evaluator without result.json: a clear error, rerun later)
    local evaluator=$d/${size}_qknone_kv${kvs%% *}_w0_ctx${ctxs##* }_s${EVAL_SEED}-ntk$target-f$frac
    ev_step() {  # RUN FLAGS...: an evaluate step of this cell, in its line (tiny) or its second-pass line (paper)
        if [[ $SCALE == tiny ]]; then line+=" && $PY evaluate.py $*"; return; fi
        evs+="${evs:+ && }$PY evaluate.py $* --evaluator $evaluator"
    }
    if [[ $SCALE == paper ]]; then
        ctx=${ctxs##* }; run=${evaluator%-ntk*}
        line="$PY train.py --size $size --qk_norm none --n_kv_head ${kvs%% *} --block_size $ctx$mlp"
        line+=" --batch_size $(( tps / ctx )) --iters $steps --seed $EVAL_SEED $base $TRAIN_FLAGS --out_dir $run"
        line+=" && $PY extend.py $run --method ntk --token_frac $frac --factor $(( target / ctx )) --short_frac $mix$extdata"
        emit "$line --layers global --quiet --out_dir $evaluator"
    fi
    for seed in $seeds; do for qk in $qks; do for kv in $kvs; do for w in 0 $window; do for ctx in $ctxs; do
        run=$d/${size}_qk${qk}_kv${kv}_w${w}_ctx${ctx}_s${seed}; ext=$run-ntk$target-f$frac
        swa=""; [[ $w != 0 ]] && swa=" --window $w $layout"
        # RoPE scaled on the global layers only, as Olmo 3 (= every layer without SWA); the extension's
        # own LR schedule (extend.py --lr_frac, its default: a fraction of the pretraining peak, decaying)
        extf="--factor $(( target / ctx )) --short_frac $mix$taskrows --layers global$extdata --quiet"
        line="$PY train.py --size $size --qk_norm $qk --n_kv_head $kv$swa --block_size $ctx$mlp"
        [[ $ctx != "${ctxs%% *}" ]] && line+="$premix"
        if [[ $CONFIRM != 0 ]]; then  # the 10 cells with <= 1 or >= 3 features: pretrain, the main recipe, evaluations
            count=$(( $([[ $qk != none ]] && echo 1 || echo 0) + $([[ $kv != "${kvs%% *}" ]] && echo 1 || echo 0)
                      + $([[ $w != 0 ]] && echo 1 || echo 0) + $([[ $ctx == "${ctxs%% *}" ]] && echo 1 || echo 0) ))
            (( count == 2 )) && continue
            line+=" --batch_size $(( tps / ctx )) --iters $steps --seed $seed $base $TRAIN_FLAGS --out_dir $run"
            # wave 2 scores passkey too (its outcome: exact match at the target, the downstream stand-in)
            local evc=$evalo; [[ $CONFIRM == 2 ]] && evc=$evalf
            ev_step "$run --lengths $ctx,$tgt_lengths --probe_samples 4 $evc"
            line+=" && $PY extend.py $run --method ntk --token_frac $frac $extf --out_dir $ext"
            ev_step "$ext --lengths $tgt_lengths --no_probes $evc"
            emit "$line"
            continue
        fi
        line+=" --batch_size $(( tps / ctx )) --iters $steps --save_at $early --seed $seed $base $TRAIN_FLAGS --out_dir $run"
        ev_step "$run --lengths $ctx,$tgt_lengths --probe_samples 4 $evalf"
        line+=" && $PY extend.py $run --method ntk $extf --out_dir $run-ntk$target-free"  # the gain's baseline
        ev_step "$run-ntk$target-free --lengths $tgt_lengths --no_probes $evalo"
        line+=" && $PY extend.py $run --method ntk --token_frac $frac $extf --out_dir $ext"
        ev_step "$ext --lengths $tgt_lengths --no_probes $evalf"
        # the more-training control: the main recipe's steps, data and LR schedule at the parent's own
        # length (nothing rescaled), then the same NTK scaling training-free; retrieval scored as the main's
        line+=" && $PY extend.py $run --method none --factor 1 --token_frac $frac --short_frac $mix$taskrows$extdata"
        line+=" --quiet --out_dir $run-more-f$frac"
        line+=" && $PY extend.py $run-more-f$frac --method ntk $extf --out_dir $run-more-f$frac-ntk$target-free"
        ev_step "$run-more-f$frac-ntk$target-free --lengths $tgt_lengths --no_probes $evalf"
        line+=" && $PY extend.py $run --ckpt $early --method ntk --token_frac $frac $extf --out_dir $ext-at$early"
        ev_step "$ext-at$early --lengths $tgt_lengths --no_probes $evalo"
        if [[ $seed == "${seeds%% *}" ]]; then  # robustness variants on the first seed
            for f in $fracs; do
                line+=" && $PY extend.py $run --method ntk --token_frac $f $extf --out_dir $run-ntk$target-f$f"
                ev_step "$run-ntk$target-f$f --lengths $tgt_lengths --no_probes $evalo"
            done
            line+=" && $PY extend.py $run --method yarn --stages 2 --stage1_factor $(( target / ctx / 2 )) --token_frac $frac"
            line+=" $extf --out_dir $run-yarn2st$target-f$frac"
            ev_step "$run-yarn2st$target-f$frac --lengths $tgt_lengths --no_probes $evalo"
            if [[ -n $swa ]]; then  # RoPE scaled on every layer, windowed ones too
                line+=" && $PY extend.py $run --method ntk --token_frac $frac ${extf/--layers global/--layers all}"
                line+=" --out_dir $ext-alllayers"; ev_step "$ext-alllayers --lengths $tgt_lengths --no_probes $evalo"
            fi
        fi
        emit "$line"
        [[ -n $evs ]] && second+=("$evs"); evs=""
    done; done; done; done; done
    for line in "${second[@]}"; do emit "$line"; done
}

# Positional encodings that extrapolate (NoPE, ALiBi, HoPE, ExPE, SWAN, chunk attention): train short, evaluate long. Variants:
# --pos rope|nope|alibi|hope|expe|sinusoidal (ExPE on the token embedding as published; sinusoidal is its
# baseline), SWAN-GPT (windowed RoPE layers + global NoPE layers, evaluated with
# log-n scaling) and chunk sparse attention. Tiny: each variant twice per seed, a text run (loss and
# LongPPL by length; tiny text models score chance on retrieval) and a passkey run (--task_mix 1.0
# --task_loss answer: learns passkey retrieval at the training length, so its exact match by length
# has range). Tiny also: the remove-one ablation of chunk attention's three principles (arXiv 2510.17196:
# linear encoder without CLS, no bypassing residual path, dense retrieval in training) on the passkey
# and text recipes (exact match and loss by length to 8x). Paper: text runs, evaluated on loss and the
# retrieval tasks, and passkey runs as tiny (a quarter of the tokens; exact match on 129 samples per length).
# No PTQ baseline (--ptq_bits ''):
# nothing in this study reads it.
grid_posenc() {
    local d=$OUT/posenc size block base seeds tasks lengths quick swan chunk v label flags seed run ev task ablate pks=8
    if [[ $SCALE == tiny ]]; then
        size=0.1M; block=128; seeds="0 1 2"; base="--vocab_size 1024 --batch_size 16 --iters 300 --eval_interval 1000 --ptq_bits ''"
        tasks="ppl"; lengths="128,256,512,1024"; quick=" --quick"
        task="--vocab_size 1024 --batch_size 16 --iters 600 --eval_interval 1000 --ptq_bits '' --task_mix 1.0 --task_list passkey --task_loss answer"
        # chunk: layer 1 of 2 retrieves 16-token chunks, every layer local (window 16), as the paper's
        # design (arXiv 2510.17196: no global full-attention layer; many past chunks per training
        # sequence). With 64-token chunks and a global RoPE layer 0 the model lost passkey past 128.
        swan="--swan true --window 32 --global_every 2"; chunk="--chunk_layers 1 --chunk_size 16 --window 16"
        ablate="chunk-linear:$chunk --chunk_encoder linear|chunk-fused:$chunk --chunk_bypass false|chunk-dense:$chunk --chunk_dense_train true"
        [[ $CONFIRM == 1 ]] && { seeds=${CONFIRM_SEEDS[posenc]}; ablate=""; }  # RoPE, SWAN, chunk only (below)
        [[ $CONFIRM == 2 ]] && seeds=${CONFIRM_SEEDS[posenc]}  # the wave-2 cells: W2_TEXT, W2_PASSKEY below
        [[ $CONFIRM == 3 ]] && { seeds=${CONFIRM_SEEDS[posenc]}; size=$RUNG_LONG; }  # the rung: W3_TEXT, W3_PASSKEY
    else
        # 10 seeds: 3 cannot decide under Holm over the pilot's family; what 10 detect, planned on the upper
        # bound of the pilot's sds: python analyze.py --power results/posenc --seeds 10 (results/posenc/README.md)
        size=50M; block=1024; seeds="0 1 2 3 4 5 6 7 8 9"
        base="--batch_size 64 --tokens 1000000000 --eval_interval 500 --ckpt_minutes 30 --ptq_bits '' $PAPER_FINAL_EVAL"
        tasks="ppl,passkey,niah_single,niah_multikey,vt,json_kv"; lengths="1024,2048,4096,8192,16384"; quick=""
        # passkey-trained runs as tiny (the exact-match gate needs a model that retrieves in distribution):
        # a quarter of the text runs' tokens, all rows passkey, answer loss; exact match on 3 depths x 43 =
        # 129 samples per length (a cell mean over 3 seeds: 95% CI half-width <= 0.05)
        task="--batch_size 64 --tokens 250000000 --eval_interval 500 --ckpt_minutes 30 --ptq_bits '' $PAPER_FINAL_EVAL"
        task+=" --task_mix 1.0 --task_list passkey --task_loss answer"; pks=43
        swan="--swan true --window 256 --global_every 4"; chunk="--chunk_layers 1,3,5,7,9 --chunk_size 64 --window 256"; ablate=""  # every layer local, as tiny
    fi
    local IFS_=$IFS; IFS="|"; set -f; local abl=($ablate); IFS=$IFS_; set +f  # the chunk ablations, run as the full model
    for v in "rope:--pos rope" "nope:--pos nope" "alibi:--pos alibi" "hope:--pos hope" "expe:--pos expe" \
             "sinusoidal:--pos sinusoidal" "swan:$swan" "chunk:$chunk" "${abl[@]}"; do
        label=${v%%:*}; flags=${v#*:}; ev=""
        [[ $CONFIRM == 1 && " rope swan chunk " != *" $label "* ]] && continue
        [[ $CONFIRM == 2 && " $W2_TEXT $W2_PASSKEY " != *" $label "* ]] && continue
        [[ $CONFIRM == 3 && " $W3_TEXT $W3_PASSKEY " != *" $label "* ]] && continue
        [[ $label == swan ]] && ev=" --logn"
        for seed in $seeds; do
            run=$d/${size}_${label}_ctx${block}_s${seed}
            [[ ( $CONFIRM != 2 || " $W2_TEXT " == *" $label "* ) && ( $CONFIRM != 3 || " $W3_TEXT " == *" $label "* ) ]] &&
            emit "$PY train.py --size $size $flags --block_size $block $base --seed $seed $TRAIN_FLAGS --out_dir $run" \
                 "&& $PY evaluate.py $run --tasks $tasks --lengths $lengths$quick$ev --quiet"
            [[ -z $task ]] && continue
            [[ $CONFIRM == 2 && " $W2_PASSKEY " != *" $label "* ]] && continue
            [[ $CONFIRM == 3 && " $W3_PASSKEY " != *" $label "* ]] && continue
            run=$d/${size}_${label}_passkey_ctx${block}_s${seed}
            emit "$PY train.py --size $size $flags --block_size $block $task --seed $seed $TRAIN_FLAGS --out_dir $run" \
                 "&& $PY evaluate.py $run --tasks passkey --lengths $lengths --samples $pks --score exact --no_probes$ev --quiet"
        done
    done
}

# Length generalisation on algorithmic tasks (e.g. arXiv 2207.02098): train on input lengths 1..N,
# test on the bins 1..N, N+1..2N, 2N+1..3N with exact match (evaluate.py, the task name as --tasks).
# Tiny: per-task recipes measured to learn every task in distribution with every --pos (3 seeds:
# >= 0.95 exact match, before any extrapolation is read), SWAN (window 8) beside them; plain parity
# (one answer bit, not learned by any encoding) is kept with RoPE alone as the known failure, which
# analyze.py's in-distribution gate excludes from the verdict; reverse left the tiny grid to make room for
# the threshold sweep (it extrapolated with no encoding: results/lengen/README.md). Chunk attention is not in the tiny
# grid (2.5x the cost of a run and 0.89 in distribution on copy in one 600-step try; see the README).
# Threshold sweep (the LG-bounds abstract: extrapolation appears once the training length passes a
# threshold; richer tasks need more; 1 vs 2 layers differ): copy, sort, parity_scratch with NoPE trained
# at more maximum lengths N, at 1 and 2 layers beside the recipe's depth, 3 seeds, each evaluated to 3N;
# runs under OUT/lengen/threshold/ (analyze.py: lengen.threshold; the main grid's N=16 runs join them).
lengen_recipe() {  # task -> RECIPE (tiny: depth and steps of the task's recipe)
    case $1 in
        sort) RECIPE="--n_layer 3 --iters 800";;
        parity_scratch) RECIPE="--n_layer 4 --iters 800";;  # 3 layers left NoPE/ExPE at 0.66-0.82 on some seeds
        *) RECIPE="--n_layer 3 --iters 600";;
    esac
}

grid_lengen() {
    local d=$OUT/lengen size tasks seeds n base offset swan chunk t v label flags seed run
    local th_tasks th_lens th_depths th_enc nl tn budgets="1" th_block="" b it tflags
    if [[ $SCALE == tiny ]]; then
        size=0.1M; tasks="copy sort parity_scratch parity"; seeds="0 1 2"; n=16; offset=0  # reverse: README
        base="--n_head 4 --mlp_ratio 2 --block_size 64 --batch_size 32"
        swan="--swan true --window 8 --global_every 2"; chunk=""
        th_tasks="copy sort parity_scratch"; th_lens="8 16 24"; th_depths="1 2 recipe"; th_enc="nope"
        if [[ $CONFIRM == 1 ]]; then  # NoPE against RoPE on the three tasks every encoding learns; no threshold sweep
            tasks="copy sort parity_scratch"; seeds=${CONFIRM_SEEDS[lengen]}; swan=""; th_tasks=""
        fi
        if [[ $CONFIRM == 2 ]]; then  # the encodings on the tasks all of them learn; the LG-bounds threshold design:
            # N in {8, 32} x steps {1x, 2x the recipe} (the budget apart from N), block 128 (holds N = 32)
            tasks="copy sort"; seeds=${CONFIRM_SEEDS[lengen]}; th_tasks="copy sort"; th_lens="8 32"; th_depths=recipe
            budgets="1 2"; th_block=128
        fi
        if [[ $CONFIRM == 3 ]]; then  # the rung (studies/rung.py): wave 2's lengen cells at width 128 (--size 0.5M,
            # each task's recipe depth), NoPE beside them at N = 16 (the cited NoPE claim, copy and sort)
            size=$RUNG_LONG; tasks="copy sort"; seeds=${CONFIRM_SEEDS[lengen]}; th_tasks="copy sort"; th_lens="8 32"
            th_depths=recipe; budgets="1 2"; th_block=128
        fi
    else
        # 10 seeds: 3 cannot decide under Holm over the pilot's family; what 10 detect, planned on the upper
        # bound of the pilot's sds: python analyze.py --power results/lengen --seeds 10 (results/lengen/README.md)
        size=5M; tasks="copy reverse sort parity parity_scratch majority addition assoc_recall"; seeds="0 1 2 3 4 5 6 7 8 9"
        n=32; offset=64; base="--block_size 256 --batch_size 32 --iters 20000"
        swan="--swan true --window 16 --global_every 2"; chunk="--chunk_layers all --chunk_size 16"
        th_tasks="copy sort parity_scratch"; th_lens="8 16 32 48"; th_depths="1 2 recipe"; th_enc="nope"
    fi
    for t in $tasks; do
        RECIPE=""; [[ $SCALE == tiny ]] && lengen_recipe "$t"
        for v in "rope:--pos rope" "nope:--pos nope" "alibi:--pos alibi" "hope:--pos hope" "expe:--pos expe" \
                 "sinusoidal:--pos sinusoidal" "swan:$swan" "chunk:$chunk"; do
            label=${v%%:*}; flags=${v#*:}
            [[ -z $flags ]] && continue  # a variant this scale leaves out
            [[ $SCALE == tiny && $t == parity && $label != rope ]] && continue  # not learned by any (README)
            [[ $CONFIRM == 1 && $label != rope && $label != nope ]] && continue
            [[ $CONFIRM == 2 && " $W2_ENCODINGS " != *" $label "* ]] && continue
            [[ $CONFIRM == 3 && " $W3_ENCODINGS " != *" $label "* ]] && continue
            for seed in $seeds; do
                run=$d/${size}_${t}_${label}_len${n}_s${seed}
                emit "$PY train.py --algo $t --algo_len 1,$n --algo_offset $offset --size $size $RECIPE $base $flags" \
                     "--eval_interval 1000 --ckpt_every 1000 --seed $seed --quiet$COMPILE_FLAG $EXTRA --out_dir $run" \
                     "&& $PY evaluate.py $run --tasks $t --lengths $n,$(( 2 * n )),$(( 3 * n )) --quiet"
            done
        done
    done
    for t in $th_tasks; do
        RECIPE=""; [[ $SCALE == tiny ]] && lengen_recipe "$t"
        for nl in $th_depths; do for tn in $th_lens; do
            [[ $nl == recipe && $tn == "$n" ]] && continue  # the main grid's run
            flags="$RECIPE"; [[ $nl != recipe ]] && flags="--n_layer $nl ${RECIPE#--n_layer * }"
            it=${flags##*--iters }; it=${it%% *}
            for seed in $seeds; do for b in $budgets; do
                run=$d/threshold/${size}_${t}_${th_enc}_L${nl}_len${tn}_s${seed}; tflags=$flags
                if [[ $budgets != 1 ]]; then  # wave 2: the step budget is an axis of its own
                    run+="_x$b"; tflags="${flags/--iters $it/--iters $(( it * b ))}"
                    [[ -n $th_block ]] && tflags+=" --block_size $th_block"  # the later flag wins
                fi
                emit "$PY train.py --algo $t --algo_len 1,$tn --algo_offset $offset --size $size $base $tflags --pos $th_enc" \
                     "--eval_interval 1000 --ckpt_every 1000 --seed $seed --quiet$COMPILE_FLAG $EXTRA --out_dir $run" \
                     "&& $PY evaluate.py $run --tasks $t --lengths $tn,$(( 2 * tn )),$(( 3 * tn )) --quiet"
            done; done
        done; done
    done
}

# The confirmatory designs (CONFIRM=1; declared in studies/confirm.py before any of these runs, with the
# seed counts analyze.py --power --confirm planned on the pilot; tests/test_confirm.py checks the two agree).
# Fresh seeds from 100: none is a pilot seed (0-2) nor a paper grid's (0-9).
# The seeds come from studies/seeds.tsv, the one place a wave's seeds are declared (the analysis reads it too).
wave_seeds() {  # STUDY WAVE -> its seeds, space-separated
    awk -v s="$1" -v w="$2" '!/^#/ && $1 == s && $2 == w { for (i = 0; i < $4; i++) printf "%d ", $3 + i }' \
        "$HERE/studies/seeds.tsv"
}
declare -A CONFIRM_SEEDS=()
if [[ $CONFIRM != 0 ]]; then for s_ in $STUDIES; do CONFIRM_SEEDS[$s_]=$(wave_seeds "$s_" "$CONFIRM"); done; fi
# Wave 2's encodings (studies/wave2.py): lengen's tasks, posenc's text and passkey cells
W2_ENCODINGS="rope swan hope expe sinusoidal"; W2_TEXT="rope hope expe sinusoidal"
W2_PASSKEY="rope hope chunk chunk-linear chunk-fused chunk-dense"

# The larger rung (studies/rung.py: sizes, seeds, families; bash sweep.sh rung1): QAT at 0.1M, its probes (AdamW at 0.1M, 3x at 55K), lengen's and posenc's cells at width 128 (--size 0.5M)
RUNG_QAT=0.1M; RUNG_ADAMW=0.1M; RUNG_LONG_QAT=55K; RUNG_LONG=0.5M
W3_ENCODINGS="rope nope swan expe sinusoidal"; W3_TEXT="rope swan chunk expe sinusoidal"; W3_PASSKEY="rope swan chunk"

grid_rung_qat() {  # FP16, INT4, INT3 x the three warmdowns at 0.1M (the grid probe on its wd 0.33 FP16 and INT4
    # runs, in the run's line)
    local d=$OUT/qat wd seed bits line
    for seed in ${CONFIRM_SEEDS[qat]}; do
        for wd in $QAT_WDS; do for bits in 16 4 3; do
            line=$(qat_run "$d" "$RUNG_QAT" "$bits" "$wd" 1 "$seed")
            [[ $wd == "$QAT_REF" && $bits != 3 ]] &&
                line+=" && $PY evaluate.py ${line##*--out_dir } --tasks grid --ckpt warmdown --grid_bits 4 --out ${line##*--out_dir }/grid.json --quiet"
            echo "$line"
        done; done
    done
}

grid_rung_qat_probes() {  # wave 1's probes at the rung: AdamW at 0.1M, 3x the steps at 55K; FP16 and INT3
    local d=$OUT/qat-probes wd seed bits
    for seed in ${CONFIRM_SEEDS[qat-probes]}; do for wd in $QAT_WDS; do for bits in 16 3; do
        qat_run "$d" "$RUNG_ADAMW" "$bits" "$wd" 1 "$seed" --optimizer adamw
        qat_run "$d" "$RUNG_LONG_QAT" "$bits" "$wd" 1 "$seed" --long 3
    done; done; done
}

grid_confirm_qat() {  # INT4 and FP16 at 39K, every warmdown: the seed's null and INT4's wd 0.33 there
    local d=$OUT/qat wd seed bits
    for seed in ${CONFIRM_SEEDS[qat]}; do for wd in $QAT_WDS; do for bits in 16 4; do
        qat_run "$d" 39K "$bits" "$wd" 1 "$seed"
    done; done; done
}

grid_confirm_qat_probes() {  # the null under AdamW (25K) and under 3x training (14K), INT3 against FP16
    local d=$OUT/qat-probes wd seed bits
    for seed in ${CONFIRM_SEEDS[qat-probes]}; do for wd in $QAT_WDS; do for bits in 16 3; do
        qat_run "$d" 25K "$bits" "$wd" 1 "$seed" --optimizer adamw
        qat_run "$d" 14K "$bits" "$wd" 1 "$seed" --long 3
    done; done; done
}

grid_confirm2_qat() {  # the null at every size for INT4 and INT3, the transition at 39K, the law over 6K-55K,
    # and the weight-to-grid probe (INT4 grid, warmdown checkpoint) on the 39K wd 0.33 FP16 and INT4 runs, in
    # the run's own line: the checkpoint it reads is not kept between sittings
    local d=$OUT/qat wd seed bits size line run
    for seed in ${CONFIRM_SEEDS[qat]}; do
        for size in $QAT_SIZES; do for wd in $QAT_WDS; do for bits in 16 4 3; do
            line=$(qat_run "$d" "$size" "$bits" "$wd" 1 "$seed")
            if [[ $size == 39K && $wd == "$QAT_REF" && $bits != 3 ]]; then
                run=${line##*--out_dir }
                line+=" && $PY evaluate.py $run --tasks grid --ckpt warmdown --grid_bits 4 --out $run/grid.json --quiet"
            fi
            echo "$line"
        done; done; done
        for size in $QAT_HELD; do for bits in 16 4; do qat_run "$d" "$size" "$bits" "$QAT_REF" 1 "$seed"; done; done
    done
}

grid() {
    if [[ $CONFIRM == 3 ]]; then  # the rung: every run-study in one sweep, in the claims ledger's order
        qat_axes; grid_rung_qat; grid_rung_qat_probes; grid_lengen; grid_posenc
        return
    fi
    if [[ $CONFIRM == 2 ]]; then
        case $1 in
            qat) qat_axes; grid_confirm2_qat;;
            longctx|posenc|lengen) grid_"$1";;
            *) die "CONFIRM=2 has no $1 sweep (its studies: qat longctx lengen posenc)";;
        esac
        return
    fi
    if [[ $CONFIRM == 1 ]]; then
        case $1 in
            qat) qat_axes; grid_confirm_qat;; qat-probes) qat_axes; grid_confirm_qat_probes;;
            *) grid_"$1";;  # longctx, posenc, lengen: their grid functions read CONFIRM themselves
        esac
        return
    fi
    case $1 in
        qat) grid_qat;; qat-probes) qat_axes; grid_qat_probes;; longctx) grid_longctx;;
        posenc) grid_posenc;; lengen) grid_lengen;;
    esac
}

# -----------------------------------------------------------------------------
# The rehearsal, skip / resume, the job pool and its signals, the tiny wall-time estimate
# shellcheck source=tools/sweep_lib.sh
. "$HERE/tools/sweep_lib.sh"

# -----------------------------------------------------------------------------
# After a study: the weight-to-grid probe (qat) and analyze.py.

probe_lines() {  # weight-to-grid distance on the INT6 grid (tiny: INT4, its grid has no INT6) of every
    qat_axes      # QAT-grid run at its warmdown checkpoint: evaluate.py --tasks grid -> RUN/grid.json
    local d=$OUT/qat pb=6 run
    [[ " $QAT_BITS " == *" 6 "* ]] || pb=4
    for run in "$d"/*/; do
        run=${run%/}
        [[ -f $run/result.json && -f $run/ckpt_warmdown.pt && ! -f $run/grid.json ]] || continue
        echo "$PY evaluate.py $run --tasks grid --ckpt warmdown --grid_bits $pb --out $run/grid.json --quiet"
    done
}

post() {
    local study=$1 rc=0 sub
    if [[ $study == rung1 ]]; then  # each run-study of the rung analysed (and published) on its own
        for sub in qat qat-probes lengen posenc; do post "$sub" || rc=1; done
        return $rc
    fi
    if [[ $study == qat && $CONFIRM == 0 ]]; then
        note "grid-distance probe (evaluate.py --tasks grid) on the warmdown checkpoints"
        if [[ $REHEARSE == 1 ]]; then rehearse_pool "$OUT/qat/logs/probe" probe < <(probe_lines)
        else run_pool "$OUT/qat/logs/probe" < <(probe_lines); fi
    fi
    local -a folders=("$OUT/$study") flags=(--study "$study")  # every run read is this study's
    if [[ $study == qat || $study == qat-probes ]]; then
        # the penalty law is fitted on the grid's sizes and tested on the probes' held-out sizes,
        # so qat-probes is analysed together with the grid (as the QAT seed's Phase 2 + Phase 5)
        qat_axes
        [[ $study == qat-probes && -d $OUT/qat && $CONFIRM == 0 ]] && folders=("$OUT/qat" "$OUT/qat-probes")
        local fit=${QAT_SIZES// /,}
        [[ $CONFIRM == 1 ]] && fit=$( [[ $study == qat ]] && echo 39K || echo 14K,25K )  # the confirm cells' sizes
        [[ $CONFIRM == 3 ]] && fit=$( [[ $study == qat ]] && echo $RUNG_QAT || echo $RUNG_LONG_QAT,$RUNG_ADAMW )
        [[ $REHEARSE == 1 ]] && fit=$(rehearse_sizes "$fit")  # its runs' size names carry the shrunk width
        flags+=(--fit_sizes "$fit" --out "$OUT/$study")
    fi
    [[ $CONFIRM == 1 ]] && flags+=(--confirm)  # the declared family (studies/confirm.py), decided on these runs
    if [[ $CONFIRM == 2 || $CONFIRM == 3 ]]; then  # the wave's families (studies/wave2.py, rung.py); posenc's
        flags+=(--confirm --wave "$CONFIRM")     # read lengen's task runs too
        if [[ $study == posenc && -d $OUT/lengen ]]; then folders+=("$OUT/lengen"); flags=("${flags[@]/#posenc/posenc,lengen}"); fi
    fi
    note "analysis: $PY analyze.py ${folders[*]} ${flags[*]}"
    $PY analyze.py "${folders[@]}" "${flags[@]}" || rc=$?
    if [[ $study == longctx && $SCALE == paper && $REHEARSE == 0 ]]; then  # (the rehearsal: rehearse_outcomes)
        note "HELMET / RULER inputs: tools/export.py --format hf on every main-recipe model (logits checked)"
        run_pool "$OUT/longctx/logs/export" < <(export_lines longctx) || rc=1
    fi
    local publish=${PUBLISH:-0}
    if [[ $CONFIRM != 0 && $publish == 1 ]]; then  # a confirmatory family is published whole, never on part of its runs
        passes
        if (( ${#FIRST[@]} + ${#SECOND[@]} )); then
            note "not published: $(( ${#FIRST[@]} + ${#SECOND[@]} )) of the ${#GRID[@]} jobs still to run (rerun to finish)"
            publish=0
        fi
    fi
    if [[ $publish == 1 && $rc == 0 ]]; then  # the same analysis, written by analyze.py into RESULTS/STUDY
        note "publishing: $PY analyze.py ${folders[*]} ${flags[*]} --out $RESULTS/$study${RESULTS_SUB:-}"
        $PY analyze.py "${folders[@]}" "${flags[@]}" --out "$RESULTS/$study${RESULTS_SUB:-}" || rc=$?  # the later --out wins
    fi
    return $rc
}


usage() {
    echo "usage: bash sweep.sh [--dry-run | --count | --cost | --task I | --post] STUDY   (studies: $STUDIES;" \
         "env SCALE=tiny|paper OUT JOBS GPUS JOBS_PER_GPU PYTHON DATA EVAL_DATA EXTRA; --cost: MFU EVAL_SPEEDUP GPU PEAK VAL_TOKENS STARTUP STEP_FLOOR)"
}

# -----------------------------------------------------------------------------

mode=run task=""
while (( $# )); do
    case $1 in
        --dry-run|-n) mode=dry ;;
        --count) mode=count ;;
        --cost) mode=cost ;;
        --post) mode=post ;;
        --task) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die "--task needs a line number >= 1"; mode=task; task=$2; shift ;;
        --task=*) task=${1#--task=}; [[ $task =~ ^[1-9][0-9]*$ ]] || die "--task needs a line number >= 1"; mode=task ;;
        -h|--help) usage; exit 0 ;;
        -*) die "unknown option '$1'; $(usage)" ;;
        *) [[ -n ${study:-} ]] && die "one study at a time (got '$study' and '$1')"; study=$1 ;;
    esac
    shift
done
[[ -n ${study:-} ]] || { usage >&2; exit 2; }
[[ " $STUDIES " == *" $study "* ]] || die "unknown study '$study' (choose from: $STUDIES)"
[[ $study == rung1 && $CONFIRM != 3 ]] && die "rung1 is the larger rung's sweep (CONFIRM=3, or unset), not CONFIRM=$CONFIRM"
[[ $CONFIRM == 3 && $study != rung1 ]] && die "CONFIRM=3 is the rung's sweep: bash sweep.sh rung1 (not $study)"

NCPU=$(nproc 2>/dev/null || echo 1)
[[ ${JOBS_PER_GPU:-1} =~ ^[1-9][0-9]*$ ]] || die "JOBS_PER_GPU must be a positive integer, got '$JOBS_PER_GPU'"
if [[ -z ${JOBS:-} ]]; then
    if [[ -n ${GPUS:-} ]]; then JOBS=$(( $(awk -F, '{print NF}' <<< "$GPUS") * ${JOBS_PER_GPU:-1} ))
    elif [[ $SCALE == tiny || $REHEARSE == 1 ]]; then JOBS=$NCPU
    else JOBS=1; fi
fi
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "JOBS must be a positive integer, got '$JOBS'"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( NCPU / JOBS > 0 ? NCPU / JOBS : 1 ))}
if [[ $SCALE == paper && -z $DATA && $mode != count && $mode != cost && $study != lengen ]]; then
    note "warning: SCALE=paper trains on billions of tokens; set DATA to a large corpus (the bundled one has ~2M)"
fi
if [[ $SCALE == paper && $study == longctx && -z $EVAL_DATA && $mode == dry ]]; then  # a list for a scheduler
    note "warning: EVAL_DATA is not set, so these lines have no --eval_data: set it before handing them on"
fi
[[ $REHEARSE == 1 && ( $mode == run || $mode == task ) ]] && rehearse_data
if [[ $SCALE == paper && $study == longctx && ( $mode == run || $mode == task ) ]]; then  # before anything trains
    [[ -n $EVAL_DATA && -f $EVAL_DATA/manifest.json ]] || die "SCALE=paper longctx needs EVAL_DATA, a prepared" \
        "long-document set (python data.py prepare BOOKS EVAL --val_frac 0.5): loss, gap and LongPPL are measured" \
        "inside single documents of ${PAPER_LENGTHS/,/-} tokens, which a web corpus rarely holds enough of"
    # the extensions' data: one pass of the main recipe's tokens (5% of 2.0B) in windows of the target
    chk=(--batch_size 128 --block_size 1024 --iters 15259 --target $PAPER_TARGET --lengths $PAPER_LENGTHS)
    [[ $REHEARSE == 1 ]] && read -r -a chk <<< "$(rehearse_lines <<< "${chk[*]}")"  # the rehearsal's sizes
    $PY data.py windows "$EVAL_DATA" --lengths "${chk[9]}" --min_windows $PAPER_MIN_WINDOWS > /dev/null || exit 2
    $PY data.py windows "$EVAL_DATA" --split train --lengths "${chk[7]}" \
        --min_windows $(( chk[1] * chk[3] * chk[5] / 20 / chk[7] )) > /dev/null || exit 2
fi
if [[ $SCALE == paper && ( $mode == run || $mode == task ) && -n $DATA && $study != lengen && ! -f $DATA/manifest.json ]] \
   && ! compgen -G "$DATA/*.bin" > /dev/null; then  # a prepared folder, or a folder of token shards
    die "SCALE=paper needs DATA to be a prepared folder, not the raw corpus '$DATA' (every job would wait" \
        "on the first one tokenising it): python data.py prepare $DATA PREPARED --procs N, then DATA=PREPARED"
fi

if [[ $REHEARSE == 1 ]]; then mapfile -t GRID < <(grid "$study" | rehearse_lines | rehearse_seeds)
else mapfile -t GRID < <(grid "$study"); fi
case $mode in
    count)
        echo "${#GRID[@]}" ;;
    cost)
        for line in "${GRID[@]}"; do job_name "$line"; printf '%s\t%s\n' "$JOB_NAME" "$line"; done |
            "$PY" tools/cost.py --mfu "${MFU:-0.4}" --gpu "${GPU:-H100}" --peak "${PEAK:-0}" --val_tokens "${VAL_TOKENS:-0}" \
                --startup "${STARTUP:-0}" --jobs_per_gpu "${JOBS_PER_GPU:-1}" ${STEP_FLOOR:+--step_floor "$STEP_FLOOR"} \
                --eval_speedup "${EVAL_SPEEDUP:-1}" --chain "$([[ ${CHAIN:-1} == 0 ]] && echo false || echo true)"
        exit "${PIPESTATUS[1]}" ;;
    dry)
        left=0
        for line in "${GRID[@]}"; do
            pending "$line"
            [[ -n $PENDING ]] && { echo "$PENDING"; left=$((left + 1)); }
        done
        note "$study (SCALE=$SCALE): ${#GRID[@]} jobs, $((${#GRID[@]} - left)) finished, $left to run"
        [[ $SCALE == tiny ]] && for line in "${GRID[@]}"; do pending "$line"; [[ -n $PENDING ]] && echo "$PENDING"; done | estimate >&2
        if [[ $study == rung1 ]]; then note "then: bash sweep.sh --post rung1 (python analyze.py on each of $OUT/{qat,qat-probes,lengen,posenc})"
        else note "then: bash sweep.sh --post $study ($([[ $study == qat ]] && echo 'evaluate.py --tasks grid, ')python analyze.py $OUT/$study --study $study)"; fi
        ;;
    task)
        (( task <= ${#GRID[@]} )) || die "--task $task: $study has ${#GRID[@]} lines"
        pending "${GRID[task - 1]}"
        job_name "${GRID[task - 1]}"
        [[ -z $PENDING ]] && { note "line $task ($JOB_NAME) already finished"; exit 0; }
        note "line $task: $PENDING"
        run_task "$PENDING"; exit $?
        ;;
    post)
        rc=0; post "$study" || rc=$?
        [[ $REHEARSE == 1 ]] && { rehearse_outcomes || rc=1; }
        exit $rc ;;
    run)
        [[ $REHEARSE == 1 ]] && { rehearse_run; exit $?; }
        start=$SECONDS
        passes
        todo=("${FIRST[@]}" "${SECOND[@]}")
        if [[ $CONFIRM != 0 ]] && (( ${#todo[@]} )); then  # the write-up's measured wall, summed over sittings and
            # written as each job ends (wall_tick, from run_pool): a sitting killed outright keeps what it measured
            WALL=$OUT/$study/wall.json; mkdir -p "$OUT/$study"
            [[ $study == rung1 ]] && WALL=$OUT/wall.json  # the rung's one wall, beside its run-studies' folders
            read -r WALL_BASE WALL_SITS < <(sed -n 's/.*"seconds": *\([0-9]*\).*"sittings": *\([0-9]*\).*/\1 \2/p' "$WALL" 2>/dev/null || true)
            WALL_BASE=${WALL_BASE:-0}; WALL_SITS=$(( ${WALL_SITS:-0} + 1 )); WALL_START=$start
            wall_tick() {
                printf '{"seconds": %d, "sittings": %d, "jobs": %d, "cores": %d}\n' $(( WALL_BASE + SECONDS - WALL_START )) \
                    "$WALL_SITS" "$JOBS" "$NCPU" > "$WALL.tmp" && mv "$WALL.tmp" "$WALL"
            }
            wall_tick
        fi
        note "$study (SCALE=$SCALE): ${#GRID[@]} jobs, $((${#GRID[@]} - ${#todo[@]})) already finished," \
             "${#todo[@]} to run with JOBS=$JOBS${GPUS:+ on GPUs $GPUS}, OMP_NUM_THREADS=$OMP_NUM_THREADS"
        (( ${#FIRST[@]} )) && run_pool "$OUT/$study/logs" < <(printf '%s\n' "${FIRST[@]}")
        (( ${#SECOND[@]} )) && run_pool "$OUT/$study/logs" < <(printf '%s\n' "${SECOND[@]}")  # after the first pass
        note "$study: runs finished in $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s, ${#FAILED[@]} failed"
        declare -F wall_tick > /dev/null && wall_tick
        rc=0
        post "$study" || rc=$?
        if (( ${#STOPPED[@]} )); then
            note "${#STOPPED[@]} jobs stopped by a signal (${STOPPED[*]:0:5}${STOPPED[5]:+ ...}), checkpointed: rerun to resume"
        fi
        if (( ${#FAILED[@]} )); then
            note "${#FAILED[@]} jobs failed (${FAILED[*]:0:5}${FAILED[5]:+ ...}); fix and rerun to resume"
            exit 1
        fi
        (( ${#STOPPED[@]} )) && exit "$STOP_RC"
        exit $rc
        ;;
esac
