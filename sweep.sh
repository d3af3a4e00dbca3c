#!/usr/bin/env bash
# sweep.sh: the studies of this project as grids of runs, parallel and resumable.
#
#   bash sweep.sh [--dry-run] STUDY    run a study (--dry-run: print the commands still to run, one a line)
#   bash sweep.sh --count STUDY        number of lines (jobs) in the study's full grid
#   bash sweep.sh --task I STUDY       run line I (1-based) of the full grid, with the skip/resume check
#   bash sweep.sh --post STUDY         only the after-sweep steps (grid-distance probe for qat, analyze.py)
#
# Studies: qat, qat-probes, longctx, posenc, lengen (grids: the grid_* functions below).
# Environment:
#   SCALE=tiny|paper  tiny (default) fits a 2-core CPU (qat: 54 runs, 11 min on 2 idle cores); paper = the seeds' grids
#   OUT=out/sweeps    output root; run folders are OUT/STUDY/RUN_NAME, logs OUT/STUDY/logs/ (relative
#                     paths are relative to this folder: commands run from the repository root)
#   JOBS=N            parallel jobs (default: number of GPUs in GPUS, else CPU cores for tiny, else 1)
#   GPUS=0,1,2,3      one GPU per job slot: slot k runs with CUDA_VISIBLE_DEVICES=GPUS[k mod len(GPUS)]
#   PYTHON=python     interpreter (tests point it at a stub); DATA=path adds --data to every training run
#   EXTRA="..."       extra flags appended to every train.py command (e.g. "--compile")
# Each job gets OMP_NUM_THREADS = cores / JOBS (at least 1) unless OMP_NUM_THREADS is set.
#
# Resume: a run whose OUT/STUDY/RUN/result.json exists is finished and skipped (train.py writes it
# atomically, last); an unfinished run with a ckpt.pt restarts with --resume; an evaluation step is
# done when RUN/eval.json exists. Killing the sweep (Ctrl-C, scancel) and rerunning the same command
# continues where it stopped. Failed jobs are reported at the end (exit 1); the others still run.
#
# Cluster: the grid is a list of independent lines. SLURM job array (one GPU per task), requeue-safe
# because --task does the same skip/resume check:
#
#   N=$(SCALE=paper bash sweep.sh --count qat)
#   JID=$(sbatch --parsable --array=1-$N%64 --gres=gpu:1 --cpus-per-task=8 --time=12:00:00 \
#         --requeue --wrap "SCALE=paper bash sweep.sh --task \$SLURM_ARRAY_TASK_ID qat")
#   sbatch --dependency=afterany:$JID --gres=gpu:1 --wrap "SCALE=paper bash sweep.sh --post qat"
#
# or hand the plain list to any scheduler: SCALE=paper bash sweep.sh --dry-run qat > jobs.txt
set -uo pipefail
export LC_ALL=C   # printf %g must print 0.33, not 0,33

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE" || exit 2
STUDIES="qat qat-probes longctx posenc lengen"
SCALE=${SCALE:-tiny}
OUT=${OUT:-out/sweeps}
PY=${PYTHON:-python}
DATA=${DATA:-}
EXTRA=${EXTRA:-}

die() { echo "sweep.sh: $*" >&2; exit 2; }
note() { echo "sweep.sh: $*" >&2; }
# The grid code avoids subshells ($(...), pipes) per line: a 720-line grid stays fast under load.
emit() {  # print a command with single spaces
    local l="$*"
    while [[ $l == *"  "* ]]; do l=${l//"  "/" "}; done
    printf '%s\n' "${l% }"
}

case $SCALE in tiny|paper) ;; *) die "unknown SCALE '$SCALE' (tiny | paper)";; esac
[[ $OUT == *[[:space:]]* ]] && die "OUT must not contain spaces: '$OUT'"
[[ $OUT == /* ]] || OUT=${OUT#./}

# -----------------------------------------------------------------------------
# Grids: each grid_<study> prints one job per line, fully expanded. A job is one command, or
# steps joined by ' && ' (train, then extend, then evaluate); each step is skipped on its own once done.

TRAIN_FLAGS="--quiet${DATA:+ --data $DATA}${EXTRA:+ $EXTRA}"  # on every text training run

tokens_for() {  # -> TOKENS: paper token budgets, ~20 tokens per non-embedding parameter (Chinchilla-style)
    case $1 in
        3M) TOKENS=60000000;; 5M) TOKENS=100000000;; 8M) TOKENS=160000000;; 15M) TOKENS=300000000;;
        30M) TOKENS=600000000;; 50M) TOKENS=1000000000;; 100M) TOKENS=2000000000;; 175M) TOKENS=3500000000;;
        250M) TOKENS=5000000000;; 350M) TOKENS=7000000000;; *) TOKENS=20000000;;
    esac
}

accum_for() {  # -> ACCUM: micro-batches per step so that a 64 x 1024 batch fits one 80 GB GPU
    case $1 in 100M) ACCUM=2;; 175M|250M|350M) ACCUM=4;; *) ACCUM=1;; esac
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
    if [[ $SCALE == tiny ]]; then
        budget="--vocab_size 1024 --block_size 128 --batch_size 8 --iters $(( 120 * mult )) --eval_interval 120"
    else
        accum_for "$size"; tokens_for "$size"
        budget="--block_size 1024 --batch_size 64 --grad_accum $ACCUM --tokens $(( mult * TOKENS ))"
        budget+=" --eval_interval 500 --ckpt_every 500"
    fi
    local gwd glr
    printf -v gwd '%g' "$wd"; printf -v glr '%g' "$lr"  # 0.330 -> 0.33, 1.0 -> 1, as train.py's run_name
    emit "$PY train.py --size $size --bits $bits --warmdown $wd --lr $lr --seed $seed $budget $extra" \
         "$TRAIN_FLAGS --out_dir $dir/${size}_b${bits}_wd${gwd}_lr${glr}_${sched}_${opt}_s${seed}${suffix}"
}

# QAT schedule x bit-width grid (QAT seed, Phase 2: 720 runs = 3 bits x 3 warmdowns x 4 LRs x 4 sizes x 5 seeds)
QAT_BITS="16 8 6"
QAT_WDS="0.1 0.33 0.6"
qat_axes() {
    if [[ $SCALE == tiny ]]; then
        QAT_SIZES="0.1M 0.5M"; QAT_LRS="1"; QAT_SEEDS="0 1 2"
    else
        QAT_SIZES="15M 30M 50M 100M"; QAT_LRS="0.25 0.5 1 2"; QAT_SEEDS="0 1 2 3 4"
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
}

# Probes of the null (QAT seed, Phase 5): AdamW, cosine, longer training, extra sizes, INT4 from
# the smallest size up. Identical configs (e.g. the FP16 baselines shared by two probes) are one run.
grid_qat_probes() {
    local d=$OUT/qat-probes size bits wd seed m
    local base seeds sizes long int4_sizes int4_seeds int4_wds
    if [[ $SCALE == tiny ]]; then
        base="0.1M"; seeds="0 1"; sizes="1M"; long="3"
        int4_sizes="0.1M 0.5M"; int4_seeds="0 1 2"; int4_wds="0.1 0.33 0.6"
    else
        base="15M 50M"; seeds="0 1 2"; sizes="5M 8M 175M 250M 350M"; long="3 9"
        int4_sizes="3M 5M 8M 15M 30M 50M 100M"; int4_seeds="0 1 2 3 4 5 6 7 8 9"; int4_wds="0.1 0.33"
    fi
    {
    for size in $base; do for bits in $QAT_BITS; do for seed in $seeds; do
        for wd in $QAT_WDS; do qat_run "$d" "$size" "$bits" "$wd" 1 "$seed" --optimizer adamw; done
        qat_run "$d" "$size" "$bits" 0.33 1 "$seed" --schedule cosine   # warmdown unused by cosine
    done; done; done
    for size in ${base%% *}; do for bits in 16 6; do for seed in $seeds; do for wd in $QAT_WDS; do
        for m in $long; do qat_run "$d" "$size" "$bits" "$wd" 1 "$seed" --long "$m"; done
    done; done; done; done
    for size in $sizes; do for bits in $QAT_BITS; do for seed in $seeds; do for wd in $QAT_WDS; do
        [[ $SCALE == tiny && $bits == 8 ]] && continue  # tiny: FP16 and INT6 only at the extra size
        qat_run "$d" "$size" "$bits" "$wd" 1 "$seed"
    done; done; done; done
    for size in $int4_sizes; do for bits in 4 16; do for seed in $int4_seeds; do for wd in $int4_wds; do
        qat_run "$d" "$size" "$bits" "$wd" 1 "$seed"
    done; done; done; done
    } | awk '!seen[$0]++'
}

# Long-context extensibility (long-context seed, arXiv 2608.10296): QK-norm x GQA x SWA x pretraining
# context, each run then extended with YaRN (extend.py) to the same target length and evaluated
# (evaluate.py) before and after the extension.
grid_longctx() {
    local d=$OUT/longctx size qks kvs ctxs window global target ext_iters tasks lengths quick base
    if [[ $SCALE == tiny ]]; then
        size=0.1M; qks="none head"; kvs="2 1"; ctxs="64 128"; window=32; global=2; target=512; ext_iters=50
        base="--vocab_size 1024 --batch_size 16 --tokens 393216 --eval_interval 1000"
        tasks="ppl,passkey,niah_single"; lengths="128,256,512"; quick=" --quick"
    else
        size=100M; qks="none layer head"; kvs="12 3"; ctxs="1024 2048"; window=1024; global=4; target=16384
        ext_iters=2000; base="--batch_size 64 --grad_accum 2 --tokens 2000000000 --eval_interval 500 --ckpt_every 500"
        tasks="ppl,passkey,niah_single,niah_multikey,niah_multivalue,niah_multiquery,vt,cwe,fwe,json_kv"
        lengths="2048,4096,8192,16384"; quick=""
    fi
    local qk kv w ctx name run ext
    for qk in $qks; do for kv in $kvs; do for w in 0 $window; do for ctx in $ctxs; do
        name="${size}_qk${qk}_kv${kv}_w${w}_ctx${ctx}_s0"
        run=$d/$name; ext=$run-yarn$target
        local swa=""; [[ $w != 0 ]] && swa=" --window $w --global_every $global"
        emit "$PY train.py --size $size --qk_norm $qk --n_kv_head $kv$swa --block_size $ctx $base" \
             "$TRAIN_FLAGS --out_dir $run" \
             "&& $PY evaluate.py $run --tasks $tasks --lengths $lengths$quick --quiet" \
             "&& $PY extend.py $run --method yarn --factor $(( target / ctx )) --iters $ext_iters --quiet" \
             "--out_dir $ext && $PY evaluate.py $ext --tasks $tasks --lengths $lengths$quick --quiet"
    done; done; done; done
}

# Positional encodings that extrapolate (NoPE, ALiBi, HoPE, ExPE, SWAN, chunk attention): train short, evaluate long. Variants:
# --pos rope|nope|alibi|hope|expe, SWAN-GPT (windowed RoPE layers + global NoPE layers, evaluated with
# log-n scaling) and chunk sparse attention. Tiny: each variant twice per seed, a text run (loss and
# LongPPL by length; tiny text models score chance on retrieval) and a passkey run (--task_mix 1.0
# --task_loss answer: learns passkey retrieval at the training length, so its exact match by length
# has range). Paper: text runs, evaluated on loss and the retrieval tasks.
grid_posenc() {
    local d=$OUT/posenc size block base seeds tasks lengths quick swan chunk v label flags seed run ev task
    if [[ $SCALE == tiny ]]; then
        size=0.1M; block=128; seeds="0 1"; base="--vocab_size 1024 --batch_size 16 --iters 300 --eval_interval 1000"
        tasks="ppl"; lengths="128,256,512,1024"; quick=" --quick"
        task="--vocab_size 1024 --batch_size 16 --iters 600 --eval_interval 1000 --task_mix 1.0 --task_list passkey --task_loss answer"
        swan="--swan true --window 32 --global_every 2"; chunk="--chunk_layers 1"   # 2 layers: 1 of each
    else
        size=50M; block=1024; seeds="0 1 2"
        base="--batch_size 64 --tokens 1000000000 --eval_interval 500 --ckpt_every 500"
        tasks="ppl,passkey,niah_single,niah_multikey,vt,json_kv"; lengths="1024,2048,4096,8192,16384"; quick=""
        task=""; swan="--swan true --window 256 --global_every 4"; chunk="--chunk_layers 1,3,5,7,9"
    fi
    for v in "rope:--pos rope" "nope:--pos nope" "alibi:--pos alibi" "hope:--pos hope" "expe:--pos expe" \
             "swan:$swan" "chunk:$chunk"; do
        label=${v%%:*}; flags=${v#*:}; ev=""
        [[ $label == swan ]] && ev=" --logn"
        for seed in $seeds; do
            run=$d/${size}_${label}_ctx${block}_s${seed}
            emit "$PY train.py --size $size $flags --block_size $block $base --seed $seed $TRAIN_FLAGS --out_dir $run" \
                 "&& $PY evaluate.py $run --tasks $tasks --lengths $lengths$quick$ev --quiet"
            [[ -z $task ]] && continue
            run=$d/${size}_${label}_passkey_ctx${block}_s${seed}
            emit "$PY train.py --size $size $flags --block_size $block $task --seed $seed $TRAIN_FLAGS --out_dir $run" \
                 "&& $PY evaluate.py $run --tasks passkey --lengths $lengths --samples 8 --score exact --no_probes$ev --quiet"
        done
    done
}

# Length generalisation on algorithmic tasks (e.g. arXiv 2207.02098): train on input lengths 1..N,
# test on the bins 1..N, N+1..2N, 2N+1..3N with exact match (evaluate.py, the task name as --tasks).
# Tiny: per-task recipes measured to learn every task in distribution with every --pos (3 seeds:
# >= 0.95 exact match, before any extrapolation is read), SWAN (window 8) beside them; plain parity
# (one answer bit, not learned by any encoding) is kept with RoPE alone as the known failure, which
# analyze.py's in-distribution gate excludes from the verdict. Chunk attention is not in the tiny
# grid (2.5x the cost of a run and 0.89 in distribution on copy in one 600-step try; see the README).
lengen_recipe() {  # task -> RECIPE (tiny: depth and steps of the task's recipe)
    case $1 in
        sort) RECIPE="--n_layer 3 --iters 800";;
        parity_scratch) RECIPE="--n_layer 4 --iters 800";;  # 3 layers left NoPE/ExPE at 0.66-0.82 on some seeds
        *) RECIPE="--n_layer 3 --iters 600";;
    esac
}

grid_lengen() {
    local d=$OUT/lengen size tasks seeds n base offset swan chunk t v label flags seed run
    if [[ $SCALE == tiny ]]; then
        size=0.1M; tasks="copy reverse sort parity_scratch parity"; seeds="0 1 2"; n=16; offset=0
        base="--n_head 4 --mlp_ratio 2 --block_size 64 --batch_size 32"
        swan="--swan true --window 8 --global_every 2"; chunk=""
    else
        size=5M; tasks="copy reverse sort parity parity_scratch majority addition assoc_recall"; seeds="0 1 2"
        n=32; offset=64; base="--block_size 256 --batch_size 32 --iters 20000"
        swan="--swan true --window 16 --global_every 2"; chunk="--chunk_layers all --chunk_size 16"
    fi
    for t in $tasks; do
        RECIPE=""; [[ $SCALE == tiny ]] && lengen_recipe "$t"
        for v in "rope:--pos rope" "nope:--pos nope" "alibi:--pos alibi" "hope:--pos hope" "expe:--pos expe" \
                 "swan:$swan" "chunk:$chunk"; do
            label=${v%%:*}; flags=${v#*:}
            [[ -z $flags ]] && continue  # a variant this scale leaves out
            [[ $SCALE == tiny && $t == parity && $label != rope ]] && continue  # not learned by any (README)
            for seed in $seeds; do
                run=$d/${size}_${t}_${label}_len${n}_s${seed}
                emit "$PY train.py --algo $t --algo_len 1,$n --algo_offset $offset --size $size $RECIPE $base $flags" \
                     "--eval_interval 1000 --ckpt_every 1000 --seed $seed --quiet $EXTRA --out_dir $run" \
                     "&& $PY evaluate.py $run --tasks $t --lengths $n,$(( 2 * n )),$(( 3 * n )) --quiet"
            done
        done
    done
}

grid() {
    case $1 in
        qat) grid_qat;; qat-probes) qat_axes; grid_qat_probes;; longctx) grid_longctx;;
        posenc) grid_posenc;; lengen) grid_lengen;;
    esac
}

# -----------------------------------------------------------------------------
# Skip / resume: turn a grid line into what is left to run (empty when everything is done).

step_target() {  # one step -> STEP_KIND (train | extend | eval | "") and STEP_DIR
    local s=$1
    STEP_KIND=""; STEP_DIR=""
    if [[ $s =~ (^|[[:space:]])([^[:space:]]*/)?(train|extend)\.py[[:space:]] ]]; then
        STEP_KIND=${BASH_REMATCH[3]}
        [[ $s =~ --out_dir[[:space:]]+([^[:space:]]+) ]] && STEP_DIR=${BASH_REMATCH[1]}
    elif [[ $s =~ (^|[[:space:]])([^[:space:]]*/)?evaluate\.py[[:space:]]+([^[:space:]]+) ]]; then
        STEP_KIND=eval; STEP_DIR=${BASH_REMATCH[3]}
    fi
}

pending() {  # one grid line -> PENDING: the steps still to do, ' && '-joined ("" when all are done)
    local rest=$1 s
    PENDING=""
    while [[ -n $rest ]]; do
        s=${rest%% && *}
        [[ $s == "$rest" ]] && rest="" || rest=${rest#* && }
        step_target "$s"
        case $STEP_KIND in
            train|extend)
                [[ -n $STEP_DIR && -f $STEP_DIR/result.json ]] && continue
                [[ $STEP_KIND == train && -f $STEP_DIR/ckpt.pt && $s != *" --resume"* ]] && s+=" --resume" ;;
            eval)
                [[ -f $STEP_DIR/eval.json ]] && continue ;;
        esac
        PENDING+="${PENDING:+ && }$s"
    done
}

job_name() {  # -> JOB_NAME for a job's log file: the run folder of its first step; for other
    local -a w    # commands, script and first arguments (quant-probe-0.1M_b6_wd0.1_lr1_wsd_muon_s0)
    local a
    step_target "${1%% && *}"
    JOB_NAME=${STEP_DIR##*/}
    if [[ -z $JOB_NAME ]]; then
        read -r -a w <<< "${1%% && *}"
        JOB_NAME=${w[1]:-job}; JOB_NAME=${JOB_NAME##*/}; JOB_NAME=${JOB_NAME%.py}
        for a in "${w[@]:2:2}"; do [[ $a == -* ]] && break; JOB_NAME+="-${a##*/}"; done
    fi
    JOB_NAME=${JOB_NAME//[^A-Za-z0-9._=+-]/_}
}

# -----------------------------------------------------------------------------
# Runner: a bash job pool with JOBS slots; a slot's jobs see its GPU as CUDA_VISIBLE_DEVICES.

declare -a SLOT_PID=()
FAILED=()

stop_all() {
    local p
    note "interrupted: stopping running jobs (rerun the same command to resume)"
    for p in "${SLOT_PID[@]}"; do [[ -n $p ]] && kill -TERM -- "-$p" 2>/dev/null; done
    wait 2>/dev/null
    exit 130
}

busy() { local p; for p in "${SLOT_PID[@]}"; do [[ -n $p ]] && return 0; done; return 1; }

run_pool() {  # args: LOGDIR ; stdin: command lines
    local logdir=$1 line s p rc k=0 n started nap=0 event
    local -a lines gpus=() names=() t0=() naps=(0.05 0.1 0.2 0.5 1)  # poll fast for short jobs, 1 s for long
    mapfile -t lines
    n=${#lines[@]}
    (( n == 0 )) && return 0
    [[ -n ${GPUS:-} ]] && IFS=, read -r -a gpus <<< "$GPUS"
    mkdir -p "$logdir"
    set -m  # each job in its own process group, so a stop reaches its python children
    trap stop_all INT TERM
    for ((s = 0; s < JOBS; s++)); do SLOT_PID[s]=""; done
    while (( k < n )) || busy; do
        event=0
        for ((s = 0; s < JOBS; s++)); do
            p=${SLOT_PID[s]}
            if [[ -n $p ]] && ! kill -0 "$p" 2>/dev/null; then  # finished: collect its status
                wait "$p"; rc=$?
                if (( rc == 0 )); then note "done   ${names[s]} ($(( SECONDS - t0[s] ))s)"
                else note "FAILED ${names[s]} (exit $rc), log: $logdir/${names[s]}.log"; FAILED+=("${names[s]}"); fi
                SLOT_PID[s]=""; p=""; event=1
            fi
            if [[ -z $p ]] && (( k < n )); then
                line=${lines[k]}; k=$((k + 1))
                job_name "$line"; names[s]=$JOB_NAME; t0[s]=$SECONDS
                started="[$k/$n] slot $s${gpus[*]:+ gpu ${gpus[s % ${#gpus[@]}]}}"
                note "start  ${names[s]} $started"
                {
                    echo "# $(date '+%F %T') $started: $line"
                    if (( ${#gpus[@]} )); then export CUDA_VISIBLE_DEVICES=${gpus[s % ${#gpus[@]}]}; fi
                    exec bash -c "$line"
                } >> "$logdir/${names[s]}.log" 2>&1 < /dev/null &
                SLOT_PID[s]=$!; event=1
            fi
        done
        (( event )) && nap=0 || nap=$(( nap < 4 ? nap + 1 : 4 ))
        busy && sleep "${naps[nap]}"
    done
    trap - INT TERM
    set +m
}

# -----------------------------------------------------------------------------
# After a study: the weight-to-grid probe (qat) and analyze.py.

probe_lines() {  # weight-to-grid distance on the INT6 grid (the lowest grid bits when 6 is not swept)
    qat_axes          # of every QAT-grid run at its warmdown checkpoint: evaluate.py --tasks grid -> RUN/grid.json
    local d=$OUT/qat pb=6 run
    [[ " $QAT_BITS " == *" 6 "* ]] || pb=$(tr ' ' '\n' <<< "$QAT_BITS" | grep -vx 16 | sort -n | head -1)
    for run in "$d"/*/; do
        run=${run%/}
        [[ -f $run/result.json && -f $run/ckpt_warmdown.pt && ! -f $run/grid.json ]] || continue
        echo "$PY evaluate.py $run --tasks grid --ckpt warmdown --grid_bits $pb --out $run/grid.json --quiet"
    done
}

post() {
    local study=$1 rc=0
    if [[ $study == qat ]]; then
        note "grid-distance probe (evaluate.py --tasks grid) on the warmdown checkpoints"
        run_pool "$OUT/qat/logs/probe" < <(probe_lines)
    fi
    note "analysis: $PY analyze.py $OUT/$study"
    $PY analyze.py "$OUT/$study" || rc=$?
    return $rc
}

estimate() {  # rough wall time of tiny text-training lines, from timings on the 2-core dev CPU under load
    # per run: ~12 s start-up + steps x (per-step overhead + tokens/step x per-token cost) + ~10 s per
    # final evaluation pass (QAT runs evaluate twice: full precision and quantised)
    awk -v jobs="$JOBS" '
    function opt(name, def,   i) { for (i = 1; i < NF; i++) if ($i == "--" name) return $(i + 1); return def }
    / train\.py / && !/--algo / && !/evaluate\.py|extend\.py/ {
        size = opt("size", "1M"); bits = opt("bits", 16); steps = opt("iters", 300)
        tok = opt("batch_size", 16) * opt("block_size", 256)
        if (size == "0.1M") { f = 0.10; c = 0.049e-3; e = 10 }
        else if (size == "0.5M") { f = 0.17; c = 0.154e-3; e = 11 }
        else if (size == "1M") { f = 0.25; c = 0.30e-3; e = 15 }
        else { unknown = 1; next }
        t += 12 + steps * (f + tok * c) + e * (bits < 16 ? 2 : 1); n++
        next
    }
    { unknown = 1 }
    END {
        if (n && !unknown) printf "sweep.sh: estimated wall time %.0f min with JOBS=%d (rough: 2-core dev CPU shared with other jobs)\n", t / jobs / 60, jobs
    }'
}

usage() {
    echo "usage: bash sweep.sh [--dry-run | --count | --task I | --post] STUDY   (studies: $STUDIES;" \
         "env SCALE=tiny|paper OUT JOBS GPUS PYTHON DATA EXTRA)"
}

# -----------------------------------------------------------------------------

mode=run task=""
while (( $# )); do
    case $1 in
        --dry-run|-n) mode=dry ;;
        --count) mode=count ;;
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

NCPU=$(nproc 2>/dev/null || echo 1)
if [[ -z ${JOBS:-} ]]; then
    if [[ -n ${GPUS:-} ]]; then JOBS=$(awk -F, '{print NF}' <<< "$GPUS")
    elif [[ $SCALE == tiny ]]; then JOBS=$NCPU
    else JOBS=1; fi
fi
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "JOBS must be a positive integer, got '$JOBS'"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( NCPU / JOBS > 0 ? NCPU / JOBS : 1 ))}
if [[ $SCALE == paper && -z $DATA && $mode != count && $study != lengen ]]; then
    note "warning: SCALE=paper trains on billions of tokens; set DATA to a large corpus (the bundled one has ~2M)"
fi

mapfile -t GRID < <(grid "$study")
case $mode in
    count)
        echo "${#GRID[@]}" ;;
    dry)
        left=0
        for line in "${GRID[@]}"; do
            pending "$line"
            [[ -n $PENDING ]] && { echo "$PENDING"; left=$((left + 1)); }
        done
        note "$study (SCALE=$SCALE): ${#GRID[@]} jobs, $((${#GRID[@]} - left)) finished, $left to run"
        [[ $SCALE == tiny ]] && for line in "${GRID[@]}"; do pending "$line"; [[ -n $PENDING ]] && echo "$PENDING"; done | estimate >&2
        note "then: bash sweep.sh --post $study ($([[ $study == qat ]] && echo 'evaluate.py --tasks grid, ')python analyze.py $OUT/$study)"
        ;;
    task)
        (( task <= ${#GRID[@]} )) || die "--task $task: $study has ${#GRID[@]} lines"
        pending "${GRID[task - 1]}"
        job_name "${GRID[task - 1]}"
        [[ -z $PENDING ]] && { note "line $task ($JOB_NAME) already finished"; exit 0; }
        note "line $task: $PENDING"
        exec bash -c "$PENDING"
        ;;
    post)
        post "$study"; exit $? ;;
    run)
        start=$SECONDS
        todo=()
        for line in "${GRID[@]}"; do pending "$line"; [[ -n $PENDING ]] && todo+=("$PENDING"); done
        note "$study (SCALE=$SCALE): ${#GRID[@]} jobs, $((${#GRID[@]} - ${#todo[@]})) already finished," \
             "${#todo[@]} to run with JOBS=$JOBS${GPUS:+ on GPUs $GPUS}, OMP_NUM_THREADS=$OMP_NUM_THREADS"
        (( ${#todo[@]} )) && run_pool "$OUT/$study/logs" < <(printf '%s\n' "${todo[@]}")
        note "$study: runs finished in $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s, ${#FAILED[@]} failed"
        rc=0
        post "$study" || rc=$?
        if (( ${#FAILED[@]} )); then
            note "${#FAILED[@]} jobs failed (${FAILED[*]:0:5}${FAILED[5]:+ ...}); fix and rerun to resume"
            exit 1
        fi
        exit $rc
        ;;
esac
