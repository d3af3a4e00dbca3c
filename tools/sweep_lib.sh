# The machinery sweep.sh sources (its grids are what a fork edits): the paper grid's rehearsal on a CPU,
# skip / resume, the job pool with its signals, the wall-time estimate of a tiny grid. It reads sweep.sh's
# settings (SCALE, REHEARSE, OUT, PY, JOBS, GPUS, ...) and defines functions and the pool's state only.
# -----------------------------------------------------------------------------
# Rehearsal (REHEARSE=1, SCALE=paper; docs/cluster.md): every line of the paper grid on a CPU, to find
# what reading misses (a refused flag, a missing file, an outcome with no runs) before GPU-hours are
# spent. Lines keep their scripts, flags, run names, steps and passes; one rule, rehearse_lines, shrinks
# each step:
#   model     --size S keeps S's depth and heads (so layer patterns and GQA groups are the paper's) at
#             head dim 8: --n_embd 8 x heads; the record keeps S's name, and N grows with S as in the paper
#   steps     --iters / 1000 (longctx / 100: its 5% extensions then get 4 steps; at 1 step the only step is
#             the warmup's, at LR 0, and trains nothing), --tokens / 1000000 (ratios kept: 3x and 9x
#             training, 0.25 x passkey budgets)
#   lengths   --block_size, --window, --target, --lengths, --longppl_short, --chunk_size / 8
#             (8: the shortest paper context, 1024, becomes 128, the length a passkey sample needs;
#             1 for lengen, whose 256-token context and task lengths already fit a CPU); the
#             extension --factor and the windows' counts (--min_windows) are unchanged
#   batches   --batch_size / 32 (at least 1, a multiple of the step's --grad_accum, which is unchanged)
#   budgets   train.py's --final_eval_tokens and --eval_tokens 1024 (stated where left at the default);
#             evaluate.py's --ppl_tokens as lengths (the same number of windows; 32768 / 8 where unstated)
#   compile   --compile dropped (compiling on a CPU costs more than these runs)
#   samples   --samples 1, --depths 1, --probe_samples 1 (stated where a step left evaluate.py's default):
#             one retrieval sample per task and length (the depth 0.5)
# REHEARSE_SEEDS=K keeps the lines of the first K seeds (and longctx's evaluator seed; K >= 2 still runs
# every kind of line). The lines run packed, several per Python process (tools/rehearse.py pack), the
# second pass after the first; then tools/rehearse.py lists each outcome with the runs it rests on (none
# fails). The models are barely trained: a rehearsal tests that every outcome is computed, not its value.

size_heads() {  # model.py's SIZES as "SIZE:HEADS ..." (the rehearsal's width is 8 x heads)
    sed -n 's/^ *"\([0-9.]*[KM]\)": ([0-9]*, [0-9]*, \([0-9]*\)).*/\1:\2/p' "$HERE/model.py" | tr '\n' ' '
}

rehearse_sizes() {  # comma list of sizes -> the names the analysis gives the rehearsal's runs (common.size_label:
    # the size and its overridden width, 15M -> 15M[n_embd=48])
    local s h out="" sh
    sh=" $(size_heads)"
    for s in ${1//,/ }; do
        h=${sh#* $s:}; h=${h%% *}
        out+="${out:+,}$s[n_embd=$(( 8 * h ))]"
    done
    echo "$out"
}

rehearse_lines() {  # stdin: paper grid lines (or flags) -> the same, shrunk by the rule above
    local heads ld=8 ld_iters=1000
    [[ $study == lengen ]] && ld=1
    [[ $study == longctx ]] && ld_iters=100
    heads=$(size_heads)
    awk -v heads="$heads" -v ld="$ld" -v ld_iters="$ld_iters" '
    function div(v, d,   r) { r = int(v / d); return r < 1 ? 1 : r }
    function lens(v,   a, n, i, o) { n = split(v, a, ","); o = ""; for (i = 1; i <= n; i++) o = o (i > 1 ? "," : "") div(a[i], ld); return o }
    BEGIN { n = split(heads, hs, " "); for (i = 1; i <= n; i++) { split(hs[i], kv, ":"); H[kv[1]] = kv[2] } }
    function step_end() {  # a step gets its defaults stated where the rule shrinks them
        if (ev && !ppl && tasks ~ /(^|,)ppl(,|$)/) o = o " --ppl_tokens " div(32768, ld)
        if (ev && !smp) o = o " --samples 1 --depths 1"
        if (tr && !evt) o = o " --eval_tokens 1024"
        ev = 0; ppl = 0; smp = 0; tasks = ""; tr = 0; evt = 0
    }
    {
        step = 0; delete accum  # each step'"'"'s --grad_accum: its batch stays a multiple of it
        for (i = 1; i < NF; i++) { if ($i == "&&") step++; else if ($i == "--grad_accum") accum[step] = $(i + 1) }
        o = ""; ev = 0; ppl = 0; smp = 0; tasks = ""; tr = 0; evt = 0; step = 0
        for (i = 1; i <= NF; i++) {
            f = $i; v = $(i + 1)
            if (f ~ /evaluate\.py$/) ev = 1
            if (f ~ /train\.py$/) tr = 1
            if (f == "--eval_tokens") evt = 1
            if (f == "&&") { step_end(); step++ }
            if (f == "--tasks") tasks = v
            if (f == "--ppl_tokens") ppl = 1
            if (f == "--samples") smp = 1
            if (f == "--compile") continue
            if (f == "--size" && (v in H)) { o = o " " f " " v " --n_embd " 8 * H[v]; i++; continue }
            if (f ~ /^--(block_size|window|target|longppl_short|chunk_size|ppl_tokens)$/) v = div(v, ld)
            else if (f == "--lengths") v = lens(v)
            else if (f == "--iters") v = div(v, ld_iters)
            else if (f == "--tokens") v = div(v, 1000000)
            else if (f == "--batch_size") { v = div(v, 32); a = accum[step]; if (a > 1 && v % a) v += a - v % a }
            else if (f ~ /^--(final_eval_tokens|eval_tokens)$/) v = 1024
            else if (f ~ /^--(samples|probe_samples|depths)$/) v = 1
            else { o = o " " f; continue }
            o = o " " f " " v; i++
        }
        step_end()
        print substr(o, 2)
    }'
}

rehearse_seeds() {  # stdin: lines -> those of the first REHEARSE_SEEDS seeds (all without it; EVAL_SEED kept)
    local k=${REHEARSE_SEEDS:-}
    [[ -z $k ]] && { cat; return; }
    [[ $k =~ ^[1-9][0-9]*$ ]] || die "REHEARSE_SEEDS must be a positive integer, got '$k'"
    awk -v k="$k" -v keep="$EVAL_SEED" '{
        line = $0; drop = 0
        while (match(line, /(--seed |_s)[0-9]+/)) {
            s = substr(line, RSTART, RLENGTH); sub(/^(--seed |_s)/, "", s)
            if (s + 0 >= k && s != keep) drop = 1
            line = substr(line, RSTART + RLENGTH)
        }
        if (!drop) print
    }'
}

rehearse_data() {  # DATA (and for longctx EVAL_DATA) prepared from the bundled corpus, once
    local src=$HERE/data/shakespeare.tar.xz
    if [[ $study != lengen && ! -f $DATA/manifest.json ]]; then
        note "rehearsal: preparing DATA=$DATA from the bundled corpus"
        $PY data.py prepare "$src" "$DATA" --quiet > /dev/null || die "rehearsal: data.py prepare failed"
    fi
    if [[ $study == longctx && ! -f $EVAL_DATA/manifest.json ]]; then
        note "rehearsal: preparing EVAL_DATA=$EVAL_DATA (half the documents held out)"
        $PY data.py prepare "$src" "$EVAL_DATA" --val_frac 0.5 --quiet > /dev/null || die "rehearsal: data.py prepare failed"
    fi
}

export_lines() {  # STUDY -> the exports a paper outcome needs: longctx's HELMET / RULER (run outside this
    # project, on transformers) score every main-recipe extension; tools/export.py checks its logits
    [[ $1 == longctx ]] || return 0
    local run
    for run in "$OUT/longctx/"*-ntk*-f0.05; do
        [[ $run == *_s$EVAL_SEED-* || ! -f $run/result.json || -f $run/hf/config.json ]] && continue
        echo "$PY tools/export.py $run --format hf"
    done
}

rehearse_pool() {  # LOGDIR NAME; stdin: lines -> run in 3 x JOBS packs (tools/rehearse.py pack: one Python
    # process runs a pack's lines one after the other, each as tools/chain.py runs a line, and goes on after a
    # failed line), dealt round robin so that the long first-seed lines spread over the packs
    local logdir=$1 name=$2 k=0 line
    mkdir -p "$logdir/packs"
    rm -f "$logdir/packs/${name}_"*.txt
    while IFS= read -r line; do
        printf '%s\n' "$line" >> "$logdir/packs/${name}_$(( k % (3 * JOBS) )).txt"; k=$((k + 1))
    done
    (( k )) && run_pool "$logdir" < <(for line in "$logdir/packs/${name}_"*.txt; do echo "$PY tools/rehearse.py pack $line"; done)
}

rehearse_outcomes() {  # after the analysis: the exports an outcome needs, then every outcome with its runs
    rehearse_pool "$OUT/$study/logs" export < <(export_lines "$study")
    $PY tools/rehearse.py outcomes "$study" "$OUT/$study"
}

rehearse_run() {  # the rehearsal's run: pass 1 (training lines), pass 2 (evaluate.py lines), the
    # analysis, the exports an outcome needs, then the outcomes and the runs each rests on
    local start=$SECONDS rc=0
    passes
    note "rehearsal of $study: ${#GRID[@]} lines (${#FIRST[@]} + ${#SECOND[@]} to run), packed," \
         "JOBS=$JOBS, OMP_NUM_THREADS=$OMP_NUM_THREADS, OUT=$OUT"
    (( ${#FIRST[@]} )) && rehearse_pool "$OUT/$study/logs" pass1 < <(printf '%s\n' "${FIRST[@]}")
    (( ${#SECOND[@]} )) && rehearse_pool "$OUT/$study/logs" pass2 < <(printf '%s\n' "${SECOND[@]}")
    note "rehearsal: runs finished in $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s, ${#FAILED[@]} packs with a failed line"
    post "$study" || rc=$?
    rehearse_outcomes || rc=1
    note "rehearsal of $study: $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s in all"
    (( ${#FAILED[@]} )) && { note "failed lines: grep -l FAILED $OUT/$study/logs/*.log"; rc=1; }
    return $rc
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
    local rest=$1 s i j n
    local -a steps=() kinds=() dirs=() todo=()
    PENDING=""
    while [[ -n $rest ]]; do
        s=${rest%% && *}
        [[ $s == "$rest" ]] && rest="" || rest=${rest#* && }
        steps+=("$s")
    done
    n=${#steps[@]}
    for ((i = 0; i < n; i++)); do
        s=${steps[i]}; step_target "$s"; kinds[i]=$STEP_KIND; dirs[i]=$STEP_DIR; todo[i]=1
        case $STEP_KIND in
            train|extend)
                [[ -n $STEP_DIR && -f $STEP_DIR/result.json ]] && todo[i]=0 ;;
            eval)  # done when its output exists: --out FILE (the grid probe's grid.json), else RUN/eval.json
                if [[ $s =~ [[:space:]]--out[[:space:]]+([^[:space:]]+) ]]; then [[ -f ${BASH_REMATCH[1]} ]] && todo[i]=0
                elif [[ -f $STEP_DIR/eval.json ]]; then todo[i]=0; fi ;;
        esac
    done
    # A finished run whose checkpoint is gone (a clone keeps only the JSON records: runs/ in .gitignore) is
    # trained again, --overwrite, when a later step of its line still needs it; backwards, so that a rerun
    # extension reruns its parent too. Training is deterministic on one machine: the same record comes back.
    for ((i = n - 1; i >= 0; i--)); do
        [[ (${kinds[i]} == train || ${kinds[i]} == extend) && ${todo[i]} == 0 && ! -f ${dirs[i]}/ckpt.pt ]] || continue
        for ((j = i + 1; j < n; j++)); do (( todo[j] )) && { todo[i]=2; break; }; done
    done
    for ((i = 0; i < n; i++)); do
        s=${steps[i]}
        (( todo[i] )) || continue
        if (( todo[i] == 2 )); then s+=" --overwrite"
        elif [[ ${kinds[i]} == train && -f ${dirs[i]}/ckpt.pt && $s != *" --resume"* ]]; then s+=" --resume"; fi
        PENDING+="${PENDING:+ && }$s"
    done
}

passes() {  # GRID -> FIRST, SECOND: what is left to run, the second-pass lines (evaluate.py steps only,
    # paper longctx) apart: they read the runs of the first pass (and its LongPPL evaluator), so they
    # start once every first-pass line has ended, not beside one still training its cell
    local line
    FIRST=(); SECOND=()
    for line in "${GRID[@]}"; do
        pending "$line"; [[ -z $PENDING ]] && continue
        [[ $PENDING == "$PY evaluate.py "* ]] && SECOND+=("$PENDING") || FIRST+=("$PENDING")
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
STOPPED=()

job_shell() {  # a job's shell: after a TERM / USR1 / HUP it stops the ' && ' chain once the running step
    # has returned (a training step checkpoints first), with the stopped status. Several steps run in
    # one Python process (tools/chain.py: Python and torch start once, not once a step; it stops the same
    # way), unless CHAIN=0
    local run=$1
    [[ ${CHAIN:-1} == 1 && $1 == *" && "* ]] && printf -v run '%s %q %q' "$PY" "$HERE/tools/chain.py" "$1"
    printf '%s' "trap 'exit $STOP_RC' TERM USR1 HUP; $run"
}

stop_all() {  # arg: exit status. Each job is its own process group: stop the whole group
    local p
    trap '' HUP  # a closed terminal may send more; the note below may find no terminal to write to
    note "interrupted: stopping running jobs (rerun the same command to resume)"
    for p in "${SLOT_PID[@]}"; do [[ -n $p ]] && kill -TERM -- "-$p" 2>/dev/null; done
    wait 2>/dev/null
    exit "$1"
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
    trap 'stop_all 130' INT TERM
    trap 'stop_all 129' HUP  # a closed terminal: its jobs, in their own process groups, would not see it
    trap 'stop_all 138' USR1
    for ((s = 0; s < JOBS; s++)); do SLOT_PID[s]=""; done
    while (( k < n )) || busy; do
        event=0
        for ((s = 0; s < JOBS; s++)); do
            p=${SLOT_PID[s]}
            if [[ -n $p ]] && ! kill -0 "$p" 2>/dev/null; then  # finished: collect its status
                wait "$p"; rc=$?
                if (( rc == 0 )); then note "done   ${names[s]} ($(( SECONDS - t0[s] ))s)"
                elif (( rc == STOP_RC )); then
                    note "STOPPED ${names[s]} by a signal, resumable (rerun to resume), log: $logdir/${names[s]}.log"
                    STOPPED+=("${names[s]}")
                else note "FAILED ${names[s]} (exit $rc), log: $logdir/${names[s]}.log"; FAILED+=("${names[s]}"); fi
                SLOT_PID[s]=""; p=""; event=1
                declare -F wall_tick > /dev/null && wall_tick  # CONFIRM: the sitting's wall so far, as jobs end
            fi
            if [[ -z $p ]] && (( k < n )); then
                line=${lines[k]}; k=$((k + 1))
                job_name "$line"; names[s]=$JOB_NAME; t0[s]=$SECONDS
                started="[$k/$n] slot $s${gpus[*]:+ gpu ${gpus[s % ${#gpus[@]}]}}"
                note "start  ${names[s]} $started"
                {
                    echo "# $(date '+%F %T') $started: $line"
                    if (( ${#gpus[@]} )); then export CUDA_VISIBLE_DEVICES=${gpus[s % ${#gpus[@]}]}; fi
                    exec bash -c "$(job_shell "$line")"
                } >> "$logdir/${names[s]}.log" 2>&1 < /dev/null &
                SLOT_PID[s]=$!; event=1
            fi
        done
        (( event )) && nap=0 || nap=$(( nap < 4 ? nap + 1 : 4 ))
        busy && sleep "${naps[nap]}"
    done
    trap - INT TERM HUP USR1
    set +m
}

run_task() {  # one grid line in the foreground (--task): a TERM / USR1 / HUP sent to this shell reaches
    local line=$1 pid rc r sig=""  # every process of the job (its own process group), which stops and checkpoints
    set -m
    bash -c "$(job_shell "$line")" &
    pid=$!
    trap 'sig=TERM; kill -TERM -- "-$pid" 2>/dev/null' TERM
    trap 'sig=USR1; kill -USR1 -- "-$pid" 2>/dev/null' USR1
    trap 'sig=HUP; kill -TERM -- "-$pid" 2>/dev/null' HUP INT
    while :; do  # a trapped signal interrupts wait (status > 128): wait again while the job runs
        wait "$pid"; rc=$?
        (( rc > 128 )) && kill -0 "$pid" 2>/dev/null && continue
        if (( rc > 128 )); then wait "$pid"; r=$?; (( r != 127 )) && rc=$r; fi  # it ended meanwhile
        break
    done
    if (( rc == STOP_RC )); then
        note "line $task ($JOB_NAME) stopped by SIG${sig:-TERM}, resumable: rerun --task $task to resume"
        if [[ $sig == USR1 && -n ${SLURM_JOB_ID:-} ]]; then  # the time-limit warning: run the rest later
            if scontrol requeue "$SLURM_JOB_ID"; then note "requeued SLURM job $SLURM_JOB_ID"
            else note "scontrol requeue $SLURM_JOB_ID failed: resubmit --task $task"; fi
        fi
    fi
    return "$rc"
}


estimate() {  # rough wall time of tiny text-training lines, from timings on the 2-core dev CPU under load
    # per run: start-up + steps x seconds per step + seconds per final evaluation pass (QAT runs evaluate
    # twice, quantised and full precision; FP16 runs once plus one pass per --ptq_bits). Start-ups are 2 s
    # below the first timings: a run no longer imports torch._dynamo (docs/speed.md)
    awk -v jobs="$JOBS" '
    function opt(name, def,   i) { for (i = 1; i < NF; i++) if ($i == "--" name) return $(i + 1); return def }
    / train\.py / && !/--algo / && !/evaluate\.py|extend\.py/ {
        size = opt("size", "1M"); bits = opt("bits", 16); steps = opt("iters", 300)
        tok = opt("batch_size", 16) * opt("block_size", 256)
        if (opt("tokens", 0) > 0) steps = int((opt("tokens", 0) + tok - 1) / tok)
        ptq = opt("ptq_bits", "8,6,4"); evals = bits < 16 ? 2 : 1 + (ptq == "\047\047" ? 0 : split(ptq, _p, ","))
        if (size ~ /^(6K|10K|14K)$/) t += 5 + steps * 0.025 + 1.4 * evals
        else if (size == "25K") t += 5 + steps * 0.026 + 2.0 * evals
        else if (size == "39K") t += 5 + steps * 0.032 + 2.4 * evals
        else if (size == "55K") t += 5 + steps * 0.045 + 3.0 * evals
        else if (size == "0.1M") t += 10 + steps * (0.10 + tok * 0.049e-3) + 10 * evals
        else if (size == "0.5M") t += 10 + steps * (0.17 + tok * 0.154e-3) + 11 * evals
        else if (size == "1M") t += 10 + steps * (0.25 + tok * 0.30e-3) + 15 * evals
        else { unknown = 1; next }
        n++
        next
    }
    { unknown = 1 }
    END {
        if (n && !unknown) printf "sweep.sh: estimated wall time %.0f min with JOBS=%d (rough: 2-core dev CPU shared with other jobs)\n", t / jobs / 60, jobs
    }'
}
