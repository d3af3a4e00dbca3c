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
# Studies: qat, qat-probes, longctx, posenc, lengen (the grids below); rung1, the larger rung (studies/waves/rung1.toml):
# every run-study's rerun at a larger size in one sweep (CONFIRM=3, implied).
# Environment (docs/cluster.md: the cluster, --cost and the rehearsal in full):
#   SCALE=tiny|paper  tiny (default) fits a 2-core CPU (qat: 99 runs, 13 min on 2 idle cores); paper = the seeds' grids
#   CONFIRM=1|2       tiny only: a confirmatory wave, only the cells its declared families need, at its fresh seeds
#                     (studies/waves/*.toml): 1 = wave1.toml, runs under OUT/confirm/STUDY; 2 = wave2.toml
#                     (qat, longctx, lengen, posenc), runs/confirm2/STUDY (OUT/confirm2 if OUT is set); PUBLISH=1: RESULTS/STUDY/NAME
#   CONFIRM=3         the larger rung, only as `bash sweep.sh rung1`: runs under runs/rung1/{qat,qat-probes,lengen,
#                     posenc} (one wall: runs/rung1/wall.json), analyses in RESULTS/STUDY/rung1
#   CONFIRM=4..9      a wave whose jobs its file declares as data ([[runs.STUDY.jobs]]): runs/NAME/STUDY, seed by seed
#   OUT=out/sweeps    output root: run folders OUT/STUDY/RUN_NAME, logs OUT/STUDY/logs/ (relative paths are
#                     relative to this folder: commands run from the repository root)
#   JOBS=N            parallel jobs (default: GPUs in GPUS x JOBS_PER_GPU, else CPU cores for tiny, else 1); each
#                     gets OMP_NUM_THREADS = cores / JOBS (at least 1) unless OMP_NUM_THREADS is set
#   GPUS=0,1,2,3      one GPU per job slot: slot k runs with CUDA_VISIBLE_DEVICES=GPUS[k mod len(GPUS)]
#   JOBS_PER_GPU=1    with GPUS and no JOBS: slots per GPU, for small launch-bound jobs (lengen, the 3M-8M qat runs)
#   PYTHON=python     interpreter (tests point it at a stub); DATA=path adds --data to every training run
#                     (SCALE=paper: a folder prepared once, `python data.py prepare SRC OUT --procs N`; a raw
#                     corpus is refused: its first job would tokenise it while every other GPU waits)
#   EVAL_DATA=path    SCALE=paper longctx: a prepared long-document set (its held-out split) that every evaluate.py
#                     step scores loss and LongPPL on; checked first (data.py windows): too few windows = no run
#   COMPILE=1|0       train.py --compile; default 1 for SCALE=paper (gate: tests/gpu_check.py on the GPU type first)
#   EXTRA="..."       extra flags appended to every train.py command
#   CHAIN=1|0         1 (default): a job's steps run in one Python process (tools/chain.py), 0: in bash
#   PUBLISH=1         after the study (and with --post), analyze.py also writes its analysis (analysis.md,
#                     analysis.json, plots) into RESULTS/STUDY (RESULTS=results, the tiny studies', by default)
#   REHEARSE=1        SCALE=paper: every line of the grid, shrunk to run on a CPU (tools/sweep_lib.sh)
#   MFU=0.4 GPU=H100  --cost's utilisation and GPU; also PEAK, EVAL_SPEEDUP, VAL_TOKENS, STARTUP, STEP_FLOOR
#
# Resume: a run with RUN/result.json (written last, atomically) is skipped, one with a ckpt.pt restarts
# with --resume, an evaluation step is done once its output exists. A stopped sweep (Ctrl-C, SIGTERM,
# SIGUSR1, SIGHUP) stops its jobs at a step boundary, checkpointed (exit 75), and the same command goes
# on; a run folder still locked by a job of a SIGKILLed sweep fails the rerun's job rather than train it
# twice. Failed jobs are reported at the end (exit 1). Cluster (docs/cluster.md: its SLURM recipe): each
# line is an independent job, e.g. `--task $SLURM_ARRAY_TASK_ID` in a job array, requeue-safe (the same
# skip/resume check; a task stopped by SIGUSR1 before its time limit requeues itself), then --post once;
# or hand the plain list to any scheduler: SCALE=paper bash sweep.sh --dry-run qat > jobs.txt
set -uo pipefail
export LC_ALL=C   # printf %g must print 0.33, not 0,33

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE" || exit 2
STUDIES="qat qat-probes longctx posenc lengen rung1"
SCALE=${SCALE:-tiny}; REHEARSE=${REHEARSE:-0}; CONFIRM=${CONFIRM:-0}
[[ $REHEARSE == 1 ]] && OUT=${OUT:-out/rehearse}
OUT_SET=${OUT:+1}; OUT=${OUT:-out/sweeps}
for a_ in "$@"; do [[ $a_ == rung1 ]] && CONFIRM=${CONFIRM/#0/3}; done  # the rung's one command: bash sweep.sh rung1
PY=${PYTHON:-python}; DATA=${DATA:-}; EVAL_DATA=${EVAL_DATA:-}; EXTRA=${EXTRA:-}; COMPILE=${COMPILE:-}; RESULTS=${RESULTS:-results}

STOP_RC=75  # a job stopped by a signal at a step boundary, its checkpoint written (train.py: cli.STOPPED)
die() { echo "sweep.sh: $*" >&2; exit 2; }
note() { echo "sweep.sh: $*" >&2; }
emit() {  # print a command with single spaces (no subshell per line: a 720-line grid stays fast under load)
    local l="$*"; while [[ $l == *"  "* ]]; do l=${l//"  "/" "}; done; printf '%s\n' "${l% }"
}

case $SCALE in tiny|paper) ;; *) die "unknown SCALE '$SCALE' (tiny | paper)";; esac
if [[ -z $COMPILE ]]; then [[ $SCALE == paper && $REHEARSE == 0 ]] && COMPILE=1 || COMPILE=0; fi
case $COMPILE in 0) COMPILE_FLAG="";; 1) COMPILE_FLAG=" --compile";; *) die "COMPILE must be 0 or 1, got '$COMPILE'";; esac
[[ $OUT == *[[:space:]]* ]] && die "OUT must not contain spaces: '$OUT'"
[[ $OUT == /* ]] || OUT=${OUT#./}
case ${PUBLISH:-0} in 0|1) ;; *) die "PUBLISH must be 0 or 1, got '$PUBLISH'";; esac
WAVE_DIR=(- confirm confirm2 rung1)  # CONFIRM=N's folder in OUT and in RESULTS/STUDY
WAVE_WHAT=(- "the tiny confirmatory design" "the tiny second wave" "the larger rung (bash sweep.sh rung1)")
case $CONFIRM in
    0) ;;
    [123]) [[ $SCALE == tiny && $REHEARSE == 0 ]] || die "CONFIRM=$CONFIRM is ${WAVE_WHAT[CONFIRM]}: SCALE=tiny, REHEARSE=0"
       # waves 2 and 3 keep their records (JSON; checkpoints and logs are git-ignored) in runs/ by default, so
       # a sitting's finished jobs can be committed and the next sitting, even on a fresh clone, resumes them
       [[ $CONFIRM != 1 && -z $OUT_SET ]] && OUT=runs
       RESULTS_SUB=/${WAVE_DIR[CONFIRM]}; OUT=$OUT$RESULTS_SUB ;;
    [4-9]) [[ $SCALE == tiny && $REHEARSE == 0 ]] || die "CONFIRM=$CONFIRM is a tiny wave: SCALE=tiny, REHEARSE=0"
       WAVE_DIR[CONFIRM]=$(python -m studies.wave name "$CONFIRM") ; [[ -n ${WAVE_DIR[CONFIRM]} ]] || exit 2
       [[ -z $OUT_SET ]] && OUT=runs; RESULTS_SUB=/${WAVE_DIR[CONFIRM]}; OUT=$OUT$RESULTS_SUB ;;  # jobs as data
    *) die "CONFIRM must be 0-9 (a wave of studies/waves/), got '$CONFIRM'" ;;
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
# paper: val tokens scored by each final pass of a run (full precision, each PTQ bit-width, the QAT model;
# extensions inherit it): 2^23 = 8192 x 1024. Tiny runs score the bundled val split whole (the default).
PAPER_FINAL_EVAL="--final_eval_tokens 8388608"
EVAL_SEED=100  # paper longctx: the LongPPL evaluator's seed, none of the factorial's
PAPER_TARGET=8192  # paper longctx: the extension target, and its outcome lengths (half of it and it)
PAPER_LENGTHS=$(( PAPER_TARGET / 2 )),$PAPER_TARGET
PAPER_TASKS=passkey,niah_single,niah_multikey,niah_multivalue,niah_multiquery,vt,cwe,fwe,json_kv  # paper longctx retrieval
PAPER_MIN_WINDOWS=8  # paper longctx: full-context windows needed at every target length (EVAL_DATA, checked first)
# QAT budgets: 20 tokens per non-embedding parameter (tiny: model.SIZES' counts, in whole steps of 8 x 128,
# where the INT4 / INT3 penalty has range; paper: 20M a million, in ACCUM micro-batches that fit 80 GB)
TINY_TOKENS=" 6K:124928 10K:193536 14K:278528 25K:494592 39K:772096 55K:1111040 0.1M:1972224"
ACCUM=" 100M:2 175M:4 250M:4 350M:4"
val() { [[ $1 == *" $2:"* ]] || return 1; V=${1#*" $2:"}; V=${V%% *}; }  # TABLE KEY -> V, KEY's value in " K:V K:V"
# The QAT grids are tables: a row is the product of its axes (the first outermost) AXIS=V1,V2 (names joined
# by ':' take values joined by ':'): size, lr (default 1), wd (default QAT_REF), seed, bits, x (adamw, cosine,
# xM: M times the steps) and probe=SIZE (the weight-to-grid probe in the line of SIZE's FP16 and INT4 runs
# at QAT_REF, as the checkpoint it reads is not kept).
# QAT_REF: the reference warmdown (the penalty law is measured there; qat.REF_WARMDOWN, checked
# by tests/test_sweep.py), QAT_SHORT the short one the INT4 transition tests it against (SHORT_WARMDOWN)
QAT_REF=0.33; QAT_SHORT=0.1
QAT_WDS=$QAT_SHORT,$QAT_REF,0.6
ADAMW="wd:x=${QAT_WDS//,/:adamw,}:adamw,$QAT_REF:cosine"  # AdamW at every warmdown, then cosine (no warmdown)
# qat (QAT seed, Phase 2): tiny, a 2-layer family of width 16-48 at FP16/INT4/INT3 (INT8/INT6 cost less
# than the seed noise here, INT4 3-7 seed sds, INT3 10-20), the held-out sizes at the reference cell only.
# qat-probes (Phase 5): AdamW, cosine, longer training, extra sizes, INT4 from the smallest size up; one run
# per config. tiny: INT3 against FP16, 10K and 0.1M held out; LRs 0.5 and 2 at 25K (the grid's verdict then
# takes each warmdown at its best LR); 9x at 14K and 3x at 25K make D vary at fixed N, as the law needs.
if [[ $SCALE == tiny ]]; then
    QAT_FIT=14K,25K,39K
    QAT=("size=$QAT_FIT wd=$QAT_WDS seed=0,1,2 bits=16,4,3" "size=6K,55K seed=0,1,2 bits=16,4,3")
    QAT_PROBES=("size=25K lr=0.5,2 bits=16,3 seed=0,1,2 wd=$QAT_WDS" "size:x=14K:x9,25K:x3 bits=16,3 seed=0,1,2"
        "size=25K bits=16,3 seed=0,1,2 $ADAMW" "size=14K bits=16,3 seed=0,1,2 wd=$QAT_WDS x=x3"
        "size=10K,0.1M bits=16,3 seed=0,1,2")
else
    QAT_FIT=15M,30M,50M,100M
    QAT=("size=$QAT_FIT lr=0.25,0.5,1,2 wd=$QAT_WDS seed=0,1,2,3,4 bits=16,8,6")
    QAT_PROBES=("size=15M,50M bits=16,8,6 seed=0,1,2 $ADAMW" "size=15M bits=16,6 seed=0,1,2 wd=$QAT_WDS x=x3,x9"
        "size=5M,8M,175M,250M,350M bits=16,8,6 seed=0,1,2 wd=$QAT_WDS"
        "size=3M,5M,8M,15M,20M,30M,50M,100M bits=4,16 seed=0,1,2,3,4,5,6,7,8,9 wd=$QAT_SHORT,$QAT_REF")
fi

qat_run() {  # the cell in c[] (qat_cells) -> its line; the name is train.py's run_name, "_xM" for M times the steps
    local size=${c[size]} bits=${c[bits]} wd=${c[wd]} lr=${c[lr]} x=${c[x]} mult=1 opt=muon sched=wsd extra="" suffix=""
    local budget gwd glr run line
    case $x in adamw) opt=adamw; extra="--optimizer adamw";; cosine) sched=cosine; extra="--schedule cosine";;
               x*) mult=${x#x}; suffix=_$x;; esac
    if [[ $SCALE == tiny ]]; then  # vocab 512 keeps the embedding at most about half of these models
        val "$TINY_TOKENS" "$size" || die "no tiny QAT budget for size $size (TINY_TOKENS)"
        budget="--vocab_size 512 --block_size 128 --batch_size 8 --tokens $(( mult * V ))"
        budget+=" --eval_interval 100000 --ckpt_every 100000 --ptq_bits 4,3"
    else
        V=1; val "$ACCUM" "$size"
        budget="--block_size 1024 --batch_size 64 --grad_accum $V --tokens $(( mult * 20000000 * ${size%M} ))"
        budget+=" --eval_interval 500 --ckpt_minutes 30 $PAPER_FINAL_EVAL"
    fi
    printf -v gwd '%g' "$wd"; printf -v glr '%g' "$lr"  # 0.330 -> 0.33, 1.0 -> 1, as train.py's run_name
    run=$d/${size}_b${bits}_wd${gwd}_lr${glr}_${sched}_${opt}_s${c[seed]}$suffix
    line="$PY train.py --size $size --bits $bits --warmdown $wd --lr $lr --seed ${c[seed]} $budget $extra $TRAIN_FLAGS --out_dir $run"
    [[ $size == "${c[probe]}" && $wd == "$QAT_REF" && $bits != 3 ]] &&
        line+=" && $PY evaluate.py $run --tasks grid --ckpt warmdown --grid_bits 4 --out $run/grid.json --quiet"
    emit "$line"
}
qat_cells() {  # AXIS...: every cell of the product into c[], then its line
    (( $# )) || { qat_run; return; }
    local names=${1%%=*} vals=${1#*=} v n rest; shift
    for v in ${vals//,/ }; do
        rest=$v
        for n in ${names//:/ }; do c[$n]=${rest%%:*}; rest=${rest#*:}; done
        qat_cells "$@"
    done
}
qat_grid() {  # STUDY ROW...: the rows' lines in OUT/STUDY; a wave's own rows (QAT_WAVE) run seed by seed
    local d=$OUT/$1 row seed; shift
    local -A c
    local -a rows=("$@") seeds=("")
    if [[ $CONFIRM != 0 ]]; then
        IFS='|' read -r -a rows <<< "${QAT_WAVE[$CONFIRM:${d##*/}]}"
        read -r -a seeds <<< "${CONFIRM_SEEDS[${d##*/}]}"
    fi
    for seed in "${seeds[@]}"; do for row in "${rows[@]}"; do
        c=([lr]=1 [wd]=$QAT_REF [x]=- [probe]=-)
        qat_cells ${seed:+seed=$seed} $row
    done; done
}
grid_qat() { qat_grid qat "${QAT[@]}"; }
grid_qat-probes() { qat_grid qat-probes "${QAT_PROBES[@]}" | awk '!seen[$0]++'; }

# Long-context extensibility (arXiv 2608.10296): the 2^4 factorial QK-norm x GQA x SWA x pretraining context
# (same tokens and steps). Each run is evaluated, extended to the target by the main recipe (one-stage NTK,
# 5% of the tokens) and evaluated there, with controls; the first seed (its lines start first) adds larger
# budgets, 2-stage YaRN and the recipe on an intermediate checkpoint (--save_at).
swa_layers() {  # SIZE K -> the SWA layout flag: one global layer in K, the last layer global (as Olmo 3's
    # 3:1 layout ends at 32 layers); --global_every alone would end 14 layers (100M) on two windowed ones
    local i pat="" n
    n=$(sed -n "s/^ *\"$1\": (\([0-9]*\),.*/\1/p" "$HERE/model.py")  # SIZES: (n_layer, n_embd, n_head)
    [[ -n $n ]] || die "size $1 is not in model.py's SIZES"
    if (( n % $2 == 0 )); then echo "--global_every $2"; return; fi
    for (( i = 0; i < n; i++ )); do pat+="${pat:+,}$( (( (n - 1 - i) % $2 == 0 )) && echo g || echo w)"; done
    echo "--layer_pattern $pat"
}

grid_longctx() {
    local d=$OUT/longctx size qks kvs ctxs window global target seeds tps steps frac fracs early mix
    local evalf evalo extf tgt_lengths base mlp="" premix="" extdata="" save=""
    if [[ $SCALE == tiny ]]; then
        # window = the short context, as the seed (the SWA cells see 64 at 128, and after extension)
        size=0.1M; qks="none head"; kvs="2 1"; ctxs="64 128"; window=64; global=2; target=512; seeds="0 1 2"
        # 768 steps: the fewest that learned passkey_short in distribution (384: at 64, not 128); fracs: 25%;
        # early 0.75: the long context trains at 128 from half-way, which the early checkpoint must hold
        tps=2048; steps=768; frac=0.05; fracs="0.25"; early=0.75; mix=0.25
        # sequence-length warmup: half the long context's steps at the short one (twice the rows); without
        # it passkey_short was learned in 11 of 24 runs at 128 (results/longctx: the learnability table)
        premix=" --short_frac 0.5 --short_block ${ctxs%% *} --short_warmup"
        # retrieval with range: half the rows are passkey samples (answer loss); exact match on 5 depths x 26
        # = 130 samples a length (>= 129: a 3-seed cell mean's 95% CI half-width <= 0.05)
        base="--vocab_size 1024 --eval_interval 1000 --ptq_bits '' --task_mix 0.5 --task_list passkey_short --task_loss answer"
        evalf="--tasks ppl,passkey_short --depths 5 --samples 26 --score exact --rank false"  # 1 row per sample, not 5
        evalf+=" --ppl_tokens 16384 --longppl_short 32 --alpha 0.5 --beta 4 --quiet"
        tgt_lengths=$target; [[ $CONFIRM != 0 ]] && seeds=${CONFIRM_SEEDS[longctx]}
    else
        # swiglu: every cell exports to transformers (HELMET / RULER); the seed's ratios, 8x / 4x (1K / 2K to 8K)
        size=100M; qks="none head"; kvs="12 3"; ctxs="1024 2048"; window=1024; global=4; target=$PAPER_TARGET; seeds="0 1 2 3 4"
        mlp=" --mlp swiglu"; tps=131072; steps=15259; frac=0.05; fracs="0.25 1"; early=0.25; mix=0.25   # 2.0B tokens, 100M tokens of extension
        base="--grad_accum 4 --eval_interval 500 --ckpt_minutes 30 --ptq_bits '' $PAPER_FINAL_EVAL"
        # retrieval a 100M model can learn (no web text teaches these formats): a quarter of the rows are the
        # evaluated RULER-style tasks, answer loss, in pretraining and the extensions' short steps
        base+=" --task_mix 0.25 --task_list $PAPER_TASKS --task_loss answer"
        # exact match: 5 depths x 3 samples x 9 tasks = 135 a length (>= 129, as tiny)
        evalf="--tasks ppl,$PAPER_TASKS --depths 5 --samples 3 --score exact --longppl_short 1024 --quiet"; tgt_lengths=$PAPER_LENGTHS
        # outcomes inside single documents (EVAL_DATA); --ppl_tokens scores every window (the default: 4 at 8K)
        evalf+="${EVAL_DATA:+ --eval_data $EVAL_DATA} --min_windows $PAPER_MIN_WINDOWS --ppl_tokens $(( PAPER_MIN_WINDOWS * target ))"
        # the extensions train on its train split (the web corpus has few documents of the target length)
        extdata="${EVAL_DATA:+ --data $EVAL_DATA}"
    fi
    # the extensions' task rows only at the pretraining length: exact match at the target is extended, not trained
    local taskrows=" --task_rows short" seed qk kv w ctx run ext swa f n line evm evs="" second=() layout
    layout=$(swa_layers "$size" "$global") || exit 2
    evalf+=" --target ${tgt_lengths%%,*}"  # the outcomes: at the target length(s) only, before and after
    evalo=${evalf/,passkey_short/}  # tiny: retrieval on the root and the main recipe only (its outcome; for time)
    [[ $CONFIRM == 0 ]] && save=" --save_at $early"
    # paper: one fixed LongPPL evaluator (arXiv 2410.23771) for every cell, outside the factorial (no cell
    # scores on its own key tokens): the no-feature cell at the long context, seed EVAL_SEED, extended by the
    # main recipe; its line is the first, the evaluate steps second-pass lines after every training line
    local evaluator=$d/${size}_qknone_kv${kvs%% *}_w0_ctx${ctxs##* }_s${EVAL_SEED}-ntk$target-f$frac
    ev_step() {  # RUN FLAGS...: an evaluate step of this cell, in its line (tiny) or its second-pass line (paper)
        if [[ $SCALE == tiny ]]; then line+=" && $PY evaluate.py $*"; return; fi
        evs+="${evs:+ && }$PY evaluate.py $* --evaluator $evaluator"
    }
    ext_step() { line+=" && $PY extend.py $3 --out_dir $1"; ev_step "$1 --lengths $tgt_lengths --no_probes $2"; }  # OUT EVAL ARGS
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
        # RoPE scaled on the global layers only, as Olmo 3 (= every layer without SWA)
        extf="--factor $(( target / ctx )) --short_frac $mix$taskrows --layers global$extdata --quiet"
        line="$PY train.py --size $size --qk_norm $qk --n_kv_head $kv$swa --block_size $ctx$mlp"
        [[ $ctx != "${ctxs%% *}" ]] && line+="$premix"
        evm=$evalf
        if [[ $CONFIRM != 0 ]]; then  # the 10 cells with <= 1 or >= 3 features: pretrain, the main recipe, evaluations
            n=0; [[ $qk != none ]] && n=1; [[ $kv != "${kvs%% *}" ]] && n=$(( n + 1 )); [[ $w != 0 ]] && n=$(( n + 1 ))
            [[ $ctx == "${ctxs%% *}" ]] && n=$(( n + 1 )); (( n == 2 )) && continue
            [[ $CONFIRM == 1 ]] && evm=$evalo  # wave 2 scores passkey too (exact match at the target, the downstream stand-in)
        fi
        line+=" --batch_size $(( tps / ctx )) --iters $steps$save --seed $seed $base $TRAIN_FLAGS --out_dir $run"
        ev_step "$run --lengths $ctx,$tgt_lengths --probe_samples 4 $evm"
        [[ $CONFIRM == 0 ]] && ext_step "$run-ntk$target-free" "$evalo" "$run --method ntk $extf"  # the gain's baseline
        ext_step "$ext" "$evm" "$run --method ntk --token_frac $frac $extf"
        if [[ $CONFIRM == 0 ]]; then
            # the more-training control: the main recipe's steps at the parent's own length, then NTK training-free
            line+=" && $PY extend.py $run --method none --factor 1 --token_frac $frac --short_frac $mix$taskrows$extdata"
            line+=" --quiet --out_dir $run-more-f$frac"
            ext_step "$run-more-f$frac-ntk$target-free" "$evalf" "$run-more-f$frac --method ntk $extf"
            ext_step "$ext-at$early" "$evalo" "$run --ckpt $early --method ntk --token_frac $frac $extf"
            if [[ $seed == "${seeds%% *}" ]]; then  # robustness variants on the first seed
                for f in $fracs; do ext_step "$run-ntk$target-f$f" "$evalo" "$run --method ntk --token_frac $f $extf"; done
                ext_step "$run-yarn2st$target-f$frac" "$evalo" \
                    "$run --method yarn --stages 2 --stage1_factor $(( target / ctx / 2 )) --token_frac $frac $extf"
                [[ -n $swa ]] && ext_step "$ext-alllayers" "$evalo" \
                    "$run --method ntk --token_frac $frac ${extf/--layers global/--layers all}"  # windowed layers too
            fi
        fi
        emit "$line"
        [[ -n $evs ]] && second+=("$evs"); evs=""
    done; done; done; done; done
    for line in "${second[@]}"; do emit "$line"; done
}

# Positional encodings that extrapolate: train short, evaluate long. --pos variants, SWAN-GPT (windowed RoPE
# + global NoPE layers, log-n scaling), chunk attention (tiny: with its remove-one ablations, arXiv 2510.17196).
# Each twice a seed: a text run (loss, LongPPL) and a passkey run (answer loss: its exact match has range).
# Paper (posenc and lengen): 10 seeds, what python analyze.py --power results/STUDY --seeds 10 needs.
grid_posenc() {
    local d=$OUT/posenc size block base seeds tasks lengths quick swan chunk v label flags seed run ev task pks=8
    local -a abl=()
    if [[ $SCALE == tiny ]]; then
        size=0.1M; block=128; seeds="0 1 2"; base="--vocab_size 1024 --batch_size 16 --iters 300 --eval_interval 1000 --ptq_bits ''"
        tasks="ppl"; lengths="128,256,512,1024"; quick=" --quick"; task=${base/--iters 300/--iters 600}
        # chunk: layer 1 of 2 retrieves 16-token chunks, every layer local, as the paper's design (with 64-token
        # chunks and a global RoPE layer 0 the model lost passkey past 128)
        swan="--swan true --window 32 --global_every 2"; chunk="--chunk_layers 1 --chunk_size 16 --window 16"
        abl=("chunk-linear:$chunk --chunk_encoder linear" "chunk-fused:$chunk --chunk_bypass false"
             "chunk-dense:$chunk --chunk_dense_train true")  # run as the full model
        [[ $CONFIRM != 0 ]] && seeds=${CONFIRM_SEEDS[posenc]}; [[ $CONFIRM == 3 ]] && size=$RUNG_LONG
    else
        size=50M; block=1024; seeds="0 1 2 3 4 5 6 7 8 9"
        base="--batch_size 64 --tokens 1000000000 --eval_interval 500 --ckpt_minutes 30 --ptq_bits '' $PAPER_FINAL_EVAL"
        tasks="ppl,passkey,niah_single,niah_multikey,vt,json_kv"; lengths="1024,2048,4096,8192,16384"; quick=""
        # passkey runs: a quarter of the tokens; 3 depths x 43 = 129 samples a length (CI half-width <= 0.05)
        task=${base/--tokens 1000000000/--tokens 250000000}; pks=43
        swan="--swan true --window 256 --global_every 4"; chunk="--chunk_layers 1,3,5,7,9 --chunk_size 64 --window 256"  # every layer local, as tiny
    fi
    task+=" --task_mix 1.0 --task_list passkey --task_loss answer"
    for v in "rope:--pos rope" "nope:--pos nope" "alibi:--pos alibi" "hope:--pos hope" "expe:--pos expe" \
             "sinusoidal:--pos sinusoidal" "swan:$swan" "chunk:$chunk" "${abl[@]}"; do
        label=${v%%:*}; flags=${v#*:}; ev=""
        [[ $label == swan ]] && ev=" --logn"
        for seed in $seeds; do
            run=$d/${size}_${label}_ctx${block}_s${seed}
            in_wave posenc "$label" &&
            emit "$PY train.py --size $size $flags --block_size $block $base --seed $seed $TRAIN_FLAGS --out_dir $run" \
                 "&& $PY evaluate.py $run --tasks $tasks --lengths $lengths$quick$ev --quiet"
            run=$d/${size}_${label}_passkey_ctx${block}_s${seed}
            in_wave posenc-passkey "$label" &&
            emit "$PY train.py --size $size $flags --block_size $block $task --seed $seed $TRAIN_FLAGS --out_dir $run" \
                 "&& $PY evaluate.py $run --tasks passkey --lengths $lengths --samples $pks --score exact --no_probes$ev --quiet"
        done
    done
}

# Length generalisation on algorithmic tasks (arXiv 2207.02098): train on lengths 1..N, exact match to 3N.
# Tiny: per-task recipes that learn every task with every --pos (>= 0.95 in distribution); parity with RoPE
# alone (the known failure); no reverse, no chunk attention (results/lengen/README.md). The threshold sweep
# (LG-bounds): NoPE at more N, at 1 and 2 layers beside the recipe's depth, under OUT/lengen/threshold/.
lengen_recipe() {  # task -> RECIPE, tiny's depth and steps (parity_scratch: 3 layers left NoPE/ExPE at 0.66-0.82)
    case $1 in sort) RECIPE="--n_layer 3 --iters 800";; parity_scratch) RECIPE="--n_layer 4 --iters 800";;
               *) RECIPE="--n_layer 3 --iters 600";; esac
}
algo_line() {  # N FLAGS: task t trained on lengths 1..N (run, seed from the caller), evaluated to 3N
    emit "$PY train.py --algo $t --algo_len 1,$1 --algo_offset $offset --size $size $2" \
         "--eval_interval 1000 --ckpt_every 1000 --seed $seed --quiet$COMPILE_FLAG $EXTRA --out_dir $run" \
         "&& $PY evaluate.py $run --tasks $t --lengths $1,$(( 2 * $1 )),$(( 3 * $1 )) --quiet"
}

grid_lengen() {
    local d=$OUT/lengen size tasks seeds n base offset swan chunk t v label flags seed run
    local th_tasks="copy sort parity_scratch" th_depths="1 2 recipe" th_lens th_enc=nope nl tn budgets=1 th_block="" b it tflags
    if [[ $SCALE == tiny ]]; then
        size=0.1M; tasks="copy sort parity_scratch parity"; seeds="0 1 2"; n=16; offset=0  # reverse: README
        base="--n_head 4 --mlp_ratio 2 --block_size 64 --batch_size 32"
        swan="--swan true --window 8 --global_every 2"; chunk=""
        th_lens="8 16 24"; [[ $CONFIRM != 0 ]] && seeds=${CONFIRM_SEEDS[lengen]}
        case $CONFIRM in
            1) tasks="copy sort parity_scratch"; th_tasks="" ;;  # NoPE against RoPE on the three tasks every encoding learns
            3) size=$RUNG_LONG ;&  # the rung: wave 2's cells at width 128
            # wave 2: the tasks every encoding learns; thresholds at N in {8, 32} x {1x, 2x the steps}, block 128
            2) tasks="copy sort"; th_tasks="copy sort"; th_lens="8 32"; th_depths=recipe; budgets="1 2"; th_block=128 ;;
        esac
    else
        size=5M; tasks="copy reverse sort parity parity_scratch majority addition assoc_recall"; seeds="0 1 2 3 4 5 6 7 8 9"
        n=32; offset=64; base="--block_size 256 --batch_size 32 --iters 20000"
        swan="--swan true --window 16 --global_every 2"; chunk="--chunk_layers all --chunk_size 16"
        th_lens="8 16 32 48"
    fi
    for t in $tasks; do
        RECIPE=""; [[ $SCALE == tiny ]] && lengen_recipe "$t"
        for v in "rope:--pos rope" "nope:--pos nope" "alibi:--pos alibi" "hope:--pos hope" "expe:--pos expe" \
                 "sinusoidal:--pos sinusoidal" "swan:$swan" "chunk:$chunk"; do
            label=${v%%:*}; flags=${v#*:}
            [[ -z $flags ]] && continue  # a variant this scale leaves out
            [[ $SCALE == tiny && $t == parity && $label != rope ]] && continue  # not learned by any (README)
            in_wave lengen "$label" || continue
            for seed in $seeds; do run=$d/${size}_${t}_${label}_len${n}_s${seed}; algo_line "$n" "$RECIPE $base $flags"; done
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
                if [[ $budgets != 1 ]]; then  # waves 2 and 3: the step budget is an axis of its own
                    run+="_x$b"; tflags="${flags/--iters $it/--iters $(( it * b ))}"
                    [[ -n $th_block ]] && tflags+=" --block_size $th_block"  # the later flag wins
                fi
                algo_line "$tn" "$base $tflags --pos $th_enc"
            done; done
        done; done
    done
}

# The confirmatory waves (studies/waves/*.toml: declared before any of their runs). Their fresh seeds (from 100:
# no pilot's nor paper grid's) are declared once, there.
wave_seeds() {  # STUDY WAVE -> its seeds, space-separated (studies/waves/*.toml; none for a study it does not run)
    # the wave by its number (1 confirm, 2 confirm2, 3 rung1); plain python, not $PY (tests point PYTHON at a stub)
    (cd "$HERE" && python -m studies.wave seeds "$2" "$1") || die "wave $2: cannot read its seeds (python -m studies.wave)"
}
declare -A CONFIRM_SEEDS=()
if (( CONFIRM && CONFIRM < 4 )); then for s_ in $STUDIES; do CONFIRM_SEEDS[$s_]=$(wave_seeds "$s_" "$CONFIRM"); done; fi
RUNG_LONG=0.5M  # the rung's lengen and posenc cells: width 128
# By CONFIRM:STUDY, each wave's QAT rows ('|' between; every row at a seed, then the next seed), the
# variants of its lengen and posenc cells, and the QAT analysis' fit sizes.
declare -A QAT_WAVE=(
    [1:qat]="size=39K wd=$QAT_WDS bits=16,4"  # the seed's null and INT4's wd 0.33 at 39K
    [1:qat-probes]="wd=$QAT_WDS bits=16,3 size:x=25K:adamw,14K:x3"  # the null under AdamW and under 3x training
    # the null at every size for INT4 and INT3, the transition at 39K, the law over 6K-55K, the grid probe
    [2:qat]="size=$QAT_FIT wd=$QAT_WDS bits=16,4,3 probe=39K|size=6K,55K bits=16,4"
    [3:qat]="wd=$QAT_WDS bits=16,4,3 size=0.1M probe=0.1M"
    [3:qat-probes]="wd=$QAT_WDS bits=16,3 size:x=0.1M:adamw,55K:x3")  # wave 1's probes at the rung
declare -A WAVE_CELLS=(
    [1:lengen]="rope nope" [1:posenc]="rope swan chunk" [1:posenc-passkey]="rope swan chunk"
    [2:lengen]="rope swan hope expe sinusoidal" [2:posenc]="rope hope expe sinusoidal"
    [2:posenc-passkey]="rope hope chunk chunk-linear chunk-fused chunk-dense"
    [3:lengen]="rope nope swan expe sinusoidal" [3:posenc]="rope swan chunk expe sinusoidal" [3:posenc-passkey]="rope swan chunk")
declare -A QAT_WAVE_FIT=([1:qat]=39K [1:qat-probes]=14K,25K [3:qat]=0.1M [3:qat-probes]=55K,0.1M)
in_wave() { [[ $CONFIRM == 0 || " ${WAVE_CELLS[$CONFIRM:$1]} " == *" $2 "* ]]; }  # KEY LABEL: a cell this sweep runs?

grid() {
    if (( CONFIRM >= 4 )); then python -m studies.wave grid "$CONFIRM" "$1" --out "${OUT%"$RESULTS_SUB"}" || exit 2; return; fi
    [[ $CONFIRM == 3 ]] && set -- qat qat-probes lengen posenc  # the rung: every run-study, in the claims ledger's order
    [[ $CONFIRM == 2 && $1 == qat-probes ]] && die "CONFIRM=2 has no qat-probes sweep (its studies: qat longctx lengen posenc)"
    local s; for s; do grid_"$s"; done
}

# -----------------------------------------------------------------------------
# The rehearsal, skip / resume, the job pool and its signals, the tiny wall-time estimate
# shellcheck source=tools/sweep_lib.sh
. "$HERE/tools/sweep_lib.sh"

# -----------------------------------------------------------------------------
# After a study: the weight-to-grid probe (qat) and analyze.py.

probe_lines() {  # weight-to-grid distance on the INT6 grid (tiny: INT4, its grid has no INT6) of every
    local pb=4 run; [[ $SCALE == paper ]] && pb=6  # QAT-grid run at its warmdown checkpoint -> RUN/grid.json
    for run in "$OUT/qat"/*/; do
        run=${run%/}
        [[ -f $run/result.json && -f $run/ckpt_warmdown.pt && ! -f $run/grid.json ]] || continue
        echo "$PY evaluate.py $run --tasks grid --ckpt warmdown --grid_bits $pb --out $run/grid.json --quiet"
    done
}

post() {
    local study=$1 rc=0 sub
    if [[ $study == rung1 ]]; then  # each run-study of the rung analysed (and published) on its own
        for sub in qat qat-probes lengen posenc; do post "$sub" || rc=1; done; return $rc
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
        [[ $study == qat-probes && -d $OUT/qat && $CONFIRM == 0 ]] && folders=("$OUT/qat" "$OUT/qat-probes")
        local fit=${QAT_WAVE_FIT[$CONFIRM:$study]:-$QAT_FIT}
        [[ $REHEARSE == 1 ]] && fit=$(rehearse_sizes "$fit")  # its runs' size names carry the shrunk width
        flags+=(--fit_sizes "$fit" --out "$OUT/$study")
    fi
    [[ $CONFIRM == 1 ]] && flags+=(--confirm)  # the declared family (studies/waves/wave1.toml), decided on these runs
    if (( CONFIRM >= 2 )); then  # the wave's families (studies/waves/*.toml); posenc's
        flags+=(--confirm --wave "$CONFIRM")     # read lengen's task runs too
        if [[ $study == posenc && -d $OUT/lengen ]]; then folders+=("$OUT/lengen"); flags=("${flags[@]/#posenc/posenc,lengen}"); fi
    fi
    note "analysis: $PY analyze.py ${folders[*]} ${flags[*]}"
    $PY analyze.py "${folders[@]}" "${flags[@]}" || rc=$?
    if [[ $study == longctx && $SCALE == paper && $REHEARSE == 0 ]]; then  # (the rehearsal: rehearse_outcomes)
        note "HELMET / RULER inputs: tools/export.py --format hf on every main-recipe model (logits checked)"
        run_pool "$OUT/longctx/logs/export" < <(export_lines longctx) || rc=1
    fi
    local publish=${PUBLISH:-0} left
    if [[ $CONFIRM != 0 && $publish == 1 ]]; then  # a confirmatory family is published whole, never on part of its runs
        passes; left=$(( ${#FIRST[@]} + ${#SECOND[@]} ))
        (( left )) && { note "not published: $left of the ${#GRID[@]} jobs still to run (rerun to finish)"; publish=0; }
    fi
    if [[ $publish == 1 && $rc == 0 ]]; then  # the same analysis, written by analyze.py into RESULTS/STUDY
        note "publishing: $PY analyze.py ${folders[*]} ${flags[*]} --out $RESULTS/$study${RESULTS_SUB:-}"
        $PY analyze.py "${folders[@]}" "${flags[@]}" --out "$RESULTS/$study${RESULTS_SUB:-}" || rc=$?  # the later --out wins
    fi
    return $rc
}

usage() { echo "usage: bash sweep.sh [--dry-run | --count | --cost | --task I | --post] STUDY   (studies: $STUDIES;" \
         "env SCALE=tiny|paper OUT JOBS GPUS JOBS_PER_GPU PYTHON DATA EVAL_DATA EXTRA; --cost: MFU EVAL_SPEEDUP GPU PEAK VAL_TOKENS STARTUP STEP_FLOOR)"
}

# -----------------------------------------------------------------------------

mode=run task=""
while (( $# )); do
    case $1 in
        --dry-run|-n) mode=dry ;;
        --count|--cost|--post) mode=${1#--} ;;
        --task|--task=*) mode=task; if [[ $1 == --task ]]; then task=${2:-}; shift; else task=${1#--task=}; fi
            [[ $task =~ ^[1-9][0-9]*$ ]] || die "--task needs a line number >= 1" ;;
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
if [[ -n ${JOBS:-} ]]; then :
elif [[ -n ${GPUS:-} ]]; then JOBS=$(( $(awk -F, '{print NF}' <<< "$GPUS") * ${JOBS_PER_GPU:-1} ))
elif [[ $SCALE == tiny || $REHEARSE == 1 ]]; then JOBS=$NCPU
else JOBS=1; fi
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "JOBS must be a positive integer, got '$JOBS'"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( NCPU / JOBS > 0 ? NCPU / JOBS : 1 ))}
[[ $SCALE == paper && -z $DATA && $mode != count && $mode != cost && $study != lengen ]] &&
    note "warning: SCALE=paper trains on billions of tokens; set DATA to a large corpus (the bundled one has ~2M)"
[[ $SCALE == paper && $study == longctx && -z $EVAL_DATA && $mode == dry ]] &&  # a list for a scheduler
    note "warning: EVAL_DATA is not set, so these lines have no --eval_data: set it before handing them on"
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
    count) echo "${#GRID[@]}" ;;
    cost)
        for line in "${GRID[@]}"; do job_name "$line"; printf '%s\t%s\n' "$JOB_NAME" "$line"; done |
            "$PY" tools/cost.py --mfu "${MFU:-0.4}" --gpu "${GPU:-H100}" --peak "${PEAK:-0}" --val_tokens "${VAL_TOKENS:-0}" \
                --startup "${STARTUP:-0}" --jobs_per_gpu "${JOBS_PER_GPU:-1}" ${STEP_FLOOR:+--step_floor "$STEP_FLOOR"} \
                --eval_speedup "${EVAL_SPEEDUP:-1}" --chain "$([[ ${CHAIN:-1} == 0 ]] && echo false || echo true)"
        exit "${PIPESTATUS[1]}" ;;
    dry)
        todo=()
        for line in "${GRID[@]}"; do pending "$line"; [[ -n $PENDING ]] && todo+=("$PENDING"); done
        (( ${#todo[@]} )) && printf '%s\n' "${todo[@]}"
        note "$study (SCALE=$SCALE): ${#GRID[@]} jobs, $((${#GRID[@]} - ${#todo[@]})) finished, ${#todo[@]} to run"
        [[ $SCALE == tiny ]] && (( ${#todo[@]} )) && printf '%s\n' "${todo[@]}" | estimate >&2
        if [[ $study == rung1 ]]; then note "then: bash sweep.sh --post rung1 (python analyze.py on each of $OUT/{qat,qat-probes,lengen,posenc})"
        else note "then: bash sweep.sh --post $study ($([[ $study == qat ]] && echo 'evaluate.py --tasks grid, ')python analyze.py $OUT/$study --study $study)"; fi
        ;;
    task)
        (( task <= ${#GRID[@]} )) || die "--task $task: $study has ${#GRID[@]} lines"
        pending "${GRID[task - 1]}"; job_name "${GRID[task - 1]}"
        [[ -z $PENDING ]] && { note "line $task ($JOB_NAME) already finished"; exit 0; }
        note "line $task: $PENDING"
        run_task "$PENDING"; exit $? ;;
    post)
        rc=0; post "$study" || rc=$?
        [[ $REHEARSE == 1 ]] && { rehearse_outcomes || rc=1; }
        exit $rc ;;
    run)
        [[ $REHEARSE == 1 ]] && { rehearse_run; exit $?; }
        start=$SECONDS; passes; todo=("${FIRST[@]}" "${SECOND[@]}")
        if [[ $CONFIRM != 0 ]] && (( ${#todo[@]} )); then  # the write-up's measured wall, summed over sittings and
            # written as each job ends (wall_tick, from run_pool): a sitting killed outright keeps what it measured
            WALL=$OUT/$study/wall.json; mkdir -p "$OUT/$study"
            [[ $study == rung1 ]] && WALL=$OUT/wall.json  # the rung's one wall, beside its run-studies' folders
            read -r WALL_BASE WALL_SITS < <(sed -n 's/.*"seconds": *\([0-9]*\).*"sittings": *\([0-9]*\).*/\1 \2/p' "$WALL" 2>/dev/null || true)
            WALL_BASE=${WALL_BASE:-0}; WALL_SITS=$(( ${WALL_SITS:-0} + 1 )); WALL_START=$start
            wall_tick() { printf '{"seconds": %d, "sittings": %d, "jobs": %d, "cores": %d}\n' $(( WALL_BASE + SECONDS - WALL_START )) \
                              "$WALL_SITS" "$JOBS" "$NCPU" > "$WALL.tmp" && mv "$WALL.tmp" "$WALL"; }
            wall_tick; trap wall_tick EXIT  # a sitting stopped by a signal keeps its time up to the stop
        fi
        note "$study (SCALE=$SCALE): ${#GRID[@]} jobs, $((${#GRID[@]} - ${#todo[@]})) already finished," \
             "${#todo[@]} to run with JOBS=$JOBS${GPUS:+ on GPUs $GPUS}, OMP_NUM_THREADS=$OMP_NUM_THREADS"
        (( ${#FIRST[@]} )) && run_pool "$OUT/$study/logs" < <(printf '%s\n' "${FIRST[@]}")
        (( ${#SECOND[@]} )) && run_pool "$OUT/$study/logs" < <(printf '%s\n' "${SECOND[@]}")  # after the first pass
        note "$study: runs finished in $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s, ${#FAILED[@]} failed"
        declare -F wall_tick > /dev/null && wall_tick
        rc=0
        post "$study" || rc=$?
        (( ${#STOPPED[@]} )) &&
            note "${#STOPPED[@]} jobs stopped by a signal (${STOPPED[*]:0:5}${STOPPED[5]:+ ...}), checkpointed: rerun to resume"
        (( ${#FAILED[@]} )) && { note "${#FAILED[@]} jobs failed (${FAILED[*]:0:5}${FAILED[5]:+ ...}); fix and rerun to resume"; exit 1; }
        (( ${#STOPPED[@]} )) && exit "$STOP_RC"
        exit $rc
        ;;
esac
