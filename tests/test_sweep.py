"""sweep.sh: grid expansion, skip/resume, the job pool, bad input. No model trains: PYTHON points
at a stub that records its arguments (and environment) and fakes finished runs."""
import itertools
import os
import sys
import re
import shlex
import signal
import subprocess
import time

import pytest

from conftest import ROOT

import train
from model import GPT, MODEL_WIDE_POS, POS_KINDS

SWEEP = os.path.join(ROOT, "sweep.sh")
# the encodings the length-generalisation grids compare: model.py's, but learned (which no study compares), and SWAN
ENCODINGS = set(POS_KINDS) | set(MODEL_WIDE_POS) - {"learned"} | {"swan"}
N_ENC = len(ENCODINGS)  # 7: rope nope alibi hope expe sinusoidal swan

STUB = r"""#!/usr/bin/env bash
# fake python: records "CUDA_VISIBLE_DEVICES|OMP_NUM_THREADS|args", then fakes the run's outputs
# two jobs log at once, and a chained job's line can pass 4 KB (more than one write): lock the append
line="${CUDA_VISIBLE_DEVICES:-}|${OMP_NUM_THREADS:-}|$*"
if command -v flock > /dev/null; then { flock 9; printf '%s\n' "$line" >> "$STUB_LOG"; } 9>> "$STUB_LOG.lock"
else printf '%s\n' "$line" >> "$STUB_LOG"; fi
script=$1; shift
out=""; eval_out=""; prev=""
for a in "$@"; do [[ $prev == --out_dir ]] && out=$a; [[ $prev == --out ]] && eval_out=$a; prev=$a; done
case $script in
  *train.py|*extend.py)
     [[ -n ${STUB_FAIL:-} && $* == *"$STUB_FAIL"* ]] && exit 3
     sleep "${STUB_SLEEP:-0}"
     [[ -n ${STUB_SLOW:-} && $* == *"$STUB_SLOW"* ]] && sleep 1
     mkdir -p "$out"; echo '{"status": "done"}' > "$out/result.json.tmp" && mv "$out/result.json.tmp" "$out/result.json" ;;
  *evaluate.py) echo '{"score": 1}' > "${eval_out:-$1/eval.json}" ;;
  *chain.py) exec bash -c "$1" ;;  # the job's steps, each a stub call of its own
esac
exit 0
"""

COUNTS = {  # (study, scale) -> lines of the full grid
    ("qat", "tiny"): 3 * 3 * 3 * 3 + 2 * 3 * 3,     # bits x warmdown x fit size x seed (1 LR) + held-out sizes at wd 0.33
    ("qat", "paper"): 3 * 3 * 4 * 4 * 5,            # the seed's 720-run grid (4 LRs)
    # adamw 2 bits x 3 wd x 3 seeds + cosine 2x3 + 3x longer 2x3x3 + sizes 10K, 0.1M at wd 0.33 2x2x3
    # + the LR axis at 25K (LRs 0.5, 2) 2x2x3x3 + the reference cell at 14K x9 and 25K x3 2x2x3
    ("qat-probes", "tiny"): 18 + 6 + 18 + 12 + 36 + 12,
    # adamw 2x3x3x3 + cosine 2x3x3 + {3x,9x} 2x3x3x2 + 5 sizes 3x3x3 + INT4 8x2x10x2 (3M-100M: six sizes
    # below 50M), minus 12 FP16 runs the size and INT4 probes share (5M/8M, wd 0.1/0.33, seeds 0-2)
    ("qat-probes", "paper"): 54 + 18 + 36 + 135 + 320 - 12,
    ("longctx", "tiny"): 2 * 2 * 2 * 2 * 3,         # qk_norm x GQA x SWA x context x 3 seeds
    ("longctx", "paper"): 1 + 2 * 2 * 2 * 2 * 5 * 2,  # the LongPPL evaluator, 5 seeds, a second-pass line per cell
    # (encodings + chunk) x 3 seeds x (text, passkey) + 3 chunk ablations x 3 seeds (passkey)
    ("posenc", "tiny"): (N_ENC + 1) * 3 * 2 + 3 * 3 * 2,
    ("posenc", "paper"): (N_ENC + 1) * 10 * 2,      # text and passkey runs, 10 seeds (power under Holm)
    # 3 tasks x encodings x seeds + parity/rope x seeds + the threshold sweep: 3 tasks x
    # (3 depths x 3 lengths - the main grid's recipe run at 16) x 3 seeds
    ("lengen", "tiny"): 3 * N_ENC * 3 + 3 + 3 * 8 * 3,
    ("lengen", "paper"): 8 * (N_ENC + 1) * 10 + 3 * 11 * 10,  # tasks x (encodings + chunk) x 10 seeds + threshold
}
N_QAT = COUNTS[("qat", "tiny")]  # the tiny grid the pool tests run with the stub


@pytest.fixture
def env(tmp_path):
    stub = tmp_path / "stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    e = {k: v for k, v in os.environ.items() if k not in ("SCALE", "JOBS", "GPUS", "OMP_NUM_THREADS", "DATA",
                                                           "EXTRA", "OUT", "PYTHON", "CUDA_VISIBLE_DEVICES")}
    e.update(PYTHON=str(stub), OUT=str(tmp_path / "out"), STUB_LOG=str(tmp_path / "calls.log"), JOBS="2")
    return e


def sweep(env, *args, timeout=60, **extra):
    return subprocess.run(["bash", SWEEP, *args], env={**env, **extra}, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def calls(env, script="train.py"):
    """Recorded stub calls of one script: list of (cuda, omp, argv after the script)."""
    if not os.path.exists(env["STUB_LOG"]):
        return []
    out = []
    for line in open(env["STUB_LOG"]).read().splitlines():
        cuda, omp, cmd = line.split("|", 2)
        argv = cmd.split()
        if argv and argv[0].endswith(script):
            out.append((cuda, omp, argv[1:]))
    return out


def flag(argv, name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


def train_steps(line):
    """argv (after train.py) of the train.py step of a dry-run line."""
    for step in line.split(" && "):
        a = shlex.split(step)
        if a[1].endswith("train.py"):
            return a[2:]
    raise AssertionError(f"no train.py step in {line}")


# ---------------------------------------------------------------- grid expansion

@pytest.mark.parametrize("study,scale", sorted(COUNTS))
def test_dry_run_line_counts(env, study, scale):
    p = sweep(env, "--dry-run", study, SCALE=scale)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == COUNTS[(study, scale)]
    assert len(set(lines)) == len(lines)  # no job twice
    assert sweep(env, "--count", study, SCALE=scale).stdout.strip() == str(len(lines))
    for line in lines:  # fully expanded, runnable: the interpreter, a script, an out_dir under OUT/study
        assert line.startswith(env["PYTHON"] + " ") and "$" not in line
        evals_only = all(shlex.split(st)[1] == "evaluate.py" for st in line.split(" && "))  # a second pass
        assert f"--out_dir {env['OUT']}/{study}/" in line or (evals_only and f" {env['OUT']}/{study}/" in line)
    dirs = [m.group(1) if m else "evaluate " + shlex.split(l)[2] for l in lines for m in [re.search(r"--out_dir (\S+)", l)]]
    assert len(set(dirs)) == len(dirs)  # one folder per job
    assert not os.path.exists(env["OUT"])  # a dry run writes nothing


def test_qat_tiny_grid_flags_and_names(env):
    lines = sweep(env, "-n", "qat").stdout.splitlines()
    combos = set()
    for line in lines:
        argv = train_steps(line)
        cfg = train.parse_args(argv)  # train.py's own parser accepts every flag
        train.check_config(cfg)
        mcfg = train.model_config(cfg, cfg.vocab_size)
        assert os.path.basename(cfg.out_dir) == train.run_name(cfg, mcfg)  # folders named like train.py's runs
        n = GPT(mcfg).num_params(non_embedding=True)  # 20 tokens per non-embedding parameter, whole steps
        steps = cfg.tokens // (cfg.batch_size * mcfg.block_size)
        assert abs(cfg.tokens - 20 * n) <= cfg.batch_size * mcfg.block_size / 2 and cfg.eval_interval >= steps
        combos.add((mcfg.bits, cfg.warmdown, cfg.size, cfg.seed, cfg.lr))
    grid = itertools.product((16, 4, 3), (0.1, 0.33, 0.6), ("14K", "25K", "39K"), (0, 1, 2), (1.0,))
    held = itertools.product((16, 4, 3), (0.33,), ("6K", "55K"), (0, 1, 2), (1.0,))
    assert combos == set(grid) | set(held)


def test_qat_paper_grid(env, tmp_path):
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "manifest.json").write_text("{}")
    p = sweep(env, "-n", "qat", SCALE="paper", DATA=str(prepared))
    cfgs = [train.parse_args(train_steps(l)) for l in p.stdout.splitlines()]
    assert {c.size for c in cfgs} == {"15M", "30M", "50M", "100M"}
    assert {c.lr for c in cfgs} == {0.25, 0.5, 1.0, 2.0} and {c.seed for c in cfgs} == set(range(5))
    assert {c.model.get('bits', 16) for c in cfgs} == {16, 8, 6} and {c.warmdown for c in cfgs} == {0.1, 0.33, 0.6}
    assert all(c.tokens >= 20 * 15e6 and c.data == str(prepared) and c.compile for c in cfgs)  # --compile by default
    assert "DATA" not in p.stderr  # no big-corpus warning when DATA is set
    assert "DATA" in sweep(env, "-n", "qat", SCALE="paper").stderr
    off = sweep(env, "-n", "qat", SCALE="paper", DATA=str(prepared), COMPILE="0").stdout.splitlines()
    assert off and not any("--compile" in l for l in off)
    assert not any("--compile" in l for l in sweep(env, "-n", "qat").stdout.splitlines())  # tiny: eager
    lengen = sweep(env, "-n", "lengen", SCALE="paper").stdout.splitlines()
    assert lengen and all(train.parse_args(train_steps(l)).compile for l in lengen)


@pytest.mark.parametrize("mode", [["--task", "1"], []])
def test_paper_sweeps_refuse_a_raw_corpus(env, tmp_path, mode):
    """SCALE=paper running with DATA a raw corpus: one line, status 2, nothing run (its first job would
    tokenise billions of tokens while every other GPU waited on the lock); a folder of token shards
    is taken, and tiny sweeps still prepare a raw corpus themselves."""
    raw = tmp_path / "corpus.jsonl"
    raw.write_text('{"text": "a"}\n')
    p = sweep(env, *mode, "qat", SCALE="paper", DATA=str(raw))
    assert p.returncode == 2 and "data.py prepare" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not calls(env) and not p.stdout
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "fineweb_val_000000.bin").write_bytes(b"")
    assert sweep(env, "-n", "qat", SCALE="paper", DATA=str(shards)).returncode == 0
    assert sweep(env, "-n", "qat", DATA=str(raw)).returncode == 0
    assert sweep(env, "--count", "qat", SCALE="paper", DATA=str(raw)).returncode == 0


def test_qat_probes_grid(env):
    for scale, base, bits, held in (("tiny", {"25K"}, {16, 3}, {"10K", "0.1M"}),
                                    ("paper", {"15M", "50M"}, {16, 8, 6, 4}, {"5M", "8M", "175M", "250M", "350M"})):
        cfgs = [train.parse_args(train_steps(l)) for l in sweep(env, "-n", "qat-probes", SCALE=scale).stdout.splitlines()]
        for c in cfgs:
            train.check_config(c)
        assert {c.size for c in cfgs if c.optimizer == "adamw"} == base
        assert {c.size for c in cfgs if c.schedule == "cosine"} == base
        assert {c.model.get('bits', 16) for c in cfgs} == bits
        assert held <= {c.size for c in cfgs}  # the held-out sizes of the penalty law
        long_runs = [c for c in cfgs if os.path.basename(c.out_dir).endswith(("_x3", "_x9"))]
        assert long_runs and all(c.model.get('bits', 16) in (16, 6, 3) for c in long_runs)
        if scale == "tiny":  # the LR axis at 25K, and D varying at fixed N at the reference cell
            assert {c.lr for c in cfgs if c.size == "25K" and c.optimizer == "muon" and c.schedule == "wsd"} >= {0.5, 2.0}
            ref_long = {(c.size, os.path.basename(c.out_dir)[-3:]) for c in long_runs if c.warmdown == 0.33}
            assert {("14K", "_x3"), ("14K", "_x9"), ("25K", "_x3")} <= ref_long
            assert {c.warmdown for c in long_runs if c.out_dir.endswith("_x9")} == {0.33}
    int4 = sorted({c.size for c in cfgs if c.model.get('bits', 16) == 4}, key=lambda s: float(s[:-1]))
    assert int4 == ["3M", "5M", "8M", "15M", "20M", "30M", "50M", "100M"]  # six sizes below 50M


def test_final_evaluation_flags_of_the_grids(env):
    """Paper text runs score the stated final-evaluation budget; tiny ones the default (the whole
    bundled val split); posenc, whose analysis reads no PTQ baseline, trains none."""
    for scale in ("tiny", "paper"):
        for study in ("qat", "longctx", "posenc"):
            for line in sweep(env, "-n", study, SCALE=scale).stdout.splitlines():
                if " train.py " not in line:  # a second-pass line: evaluations only
                    continue
                a = train_steps(line)
                assert flag(a, "--final_eval_tokens") == ("8388608" if scale == "paper" else None), line
                if study == "posenc":
                    assert flag(a, "--ptq_bits") == "", line


@pytest.mark.parametrize("scale", ["tiny", "paper"])
def test_longctx_grid(env, scale):
    """The full 2^4 factorial with >= 3 seeds; every pretraining run trains the same tokens per step and
    the same steps whatever its context; the main recipe (1-stage NTK, a small budget) extends every
    run to one target, also from the early checkpoint, beside its training-free baseline (the extension
    gain's) and the more-training control (the main recipe's budget at the parent's own length, then the
    same scaling training-free), RoPE scaled on the global layers with extend.py's own LR schedule; the
    window is the short pretraining context; tiny: the long context's pretraining starts at the short one
    (sequence length warmup), and the extension's task rows stay at the pretraining length; robustness
    variants on the first seed only (the all-layers scaling on the SWA cells)."""
    lines = sweep(env, "-n", "longctx", SCALE=scale).stdout.splitlines()
    if scale == "paper":
        lines = paper_longctx_joined(lines)
    cells, per_step, steps, targets, variants = set(), set(), set(), set(), {}
    ctxs = {train.parse_args(shlex.split(l.split(" && ")[0])[2:]).model["block_size"] for l in lines}
    for line in lines:
        parts = [shlex.split(s)[1:] for s in line.split(" && ")]
        (t_script, *t), (e_script, *ev0) = parts[:2]
        assert (t_script, e_script) == ("train.py", "evaluate.py")
        cfg = train.parse_args(t)
        run, ctx = cfg.out_dir, cfg.model["block_size"]
        cells.add((cfg.model["qk_norm"], cfg.model["n_kv_head"], cfg.model.get("window", 0), ctx, cfg.seed))
        per_step.add(cfg.batch_size * ctx)  # tokens per step, equal across contexts
        steps.add(cfg.iters if not cfg.tokens else cfg.tokens // (cfg.batch_size * ctx))
        assert cfg.model.get("window", 0) in (0, min(ctxs))  # the window is the short pretraining context
        if scale == "tiny" and ctx > min(ctxs):  # sequence length warmup: the first half at the short context
            assert (cfg.short_frac, cfg.short_block, cfg.short_warmup) == (0.5, min(ctxs), True)
            assert cfg.save_at == "0.75"  # the early checkpoint holds steps at the long context
        else:
            assert cfg.short_frac == 0
        assert ev0[0] == run and ctx in map(int, flag(ev0, "--lengths").split(","))  # in-distribution loss too
        exts, more = [], []
        rest = parts[2:]
        while rest:
            (s1, *a), (s2, *b), rest = rest[0], rest[1], rest[2:]
            assert s1 == "extend.py"
            if s2 == "extend.py":  # the more-training control: train on at the parent's length, then scale
                assert flag(a, "--method") == "none" and flag(a, "--factor") == "1" and b[0] == flag(a, "--out_dir")
                (s3, *c), rest = rest[0], rest[1:]
                assert s3 == "evaluate.py" and c[0] == flag(b, "--out_dir")
                more.append((a, b))
                continue
            assert s2 == "evaluate.py"
            exts.append((a, b))
        for ext, ev in exts:
            assert ext[0] == run and ev[0] == flag(ext, "--out_dir")
            target = int(float(flag(ext, "--factor")) * ctx)
            targets.add(target)
            assert min(map(int, flag(ev, "--lengths").split(","))) >= int(flag(ev, "--target")) > ctx
            key = (flag(ext, "--method"), flag(ext, "--stages", "1"), float(flag(ext, "--token_frac", 0)),
                   flag(ext, "--ckpt", "final"), flag(ext, "--lr_frac"), flag(ext, "--layers"))
            variants.setdefault(key, []).append((cfg.seed, cfg.model.get("window", 0)))
            if scale == "tiny":  # the target's rows text only: retrieval there is extended, not trained
                assert flag(ext, "--task_rows") == "short"
        free, main = exts[0][0], exts[1][0]
        assert flag(main, "--method") == "ntk" and flag(main, "--stages", "1") == "1" and flag(main, "--lr_frac") is None
        assert float(flag(main, "--token_frac")) <= 0.1 and float(flag(main, "--short_frac")) > 0  # long/short mix
        assert flag(main, "--layers") == "global" and flag(free, "--token_frac") is None  # the gain's baseline
        assert [a for a in free if a != flag(free, "--out_dir")] == \
            [a for a in main if a not in ("--token_frac", flag(main, "--token_frac"), flag(main, "--out_dir"))]
        assert flag(exts[2][0], "--ckpt") == cfg.save_at  # the early extension: the --save_at checkpoint
        (a, b), = more  # the control: the main recipe's budget, mix and task rows at factor 1, then its free scaling
        assert a[0] == run and [flag(a, k) for k in ("--token_frac", "--short_frac", "--task_rows")] == \
            [flag(main, k) for k in ("--token_frac", "--short_frac", "--task_rows")]
        assert [x for x in b[1:] if x != flag(b, "--out_dir")] == [x for x in free[1:] if x != flag(free, "--out_dir")]
        if scale == "paper":  # every cell exports (SwiGLU); the window is the short pretraining context
            assert cfg.model["mlp"] == "swiglu" and cfg.model.get("window", 0) in (0, 1024)
    seeds = sorted({c[-1] for c in cells})
    assert len(cells) == len(lines) == 16 * len(seeds) and len(seeds) >= 3
    assert len({c[:4] for c in cells}) == 16
    assert len(per_step) == 1 and len(steps) == 1 and len(targets) == 1
    main_key = ("ntk", "1", float(flag(main, "--token_frac")), "final", None, "global")
    for key in (main_key, ("ntk", "1", 0.0, "final", None, "global")):  # main recipe and training-free baseline
        assert sorted(s for s, _ in variants.pop(key)) == sorted(seeds * 16)
    all_layers = variants.pop(main_key[:5] + ("all",))  # SWA cells only: elsewhere the same as global
    assert {s for s, _ in all_layers} == {seeds[0]} and len(all_layers) == 8 and all(w > 0 for _, w in all_layers)
    early = [k for k in variants if k[3] != "final"]
    assert len(early) == 1 and len(variants.pop(early[0])) >= 16
    fracs = {k[2] for k in variants if k[0] == "ntk"}
    assert 0.25 in fracs and (scale == "tiny" or 1.0 in fracs)  # the extension budget as a robustness axis
    assert any(k[:2] == ("yarn", "2") for k in variants)  # the seed's alternative recipe
    assert all({s for s, _ in v} == {seeds[0]} and len(v) == 16 for v in variants.values())  # first seed, every cell


@pytest.mark.parametrize("study", ["longctx", "posenc"])
def test_retrieval_is_exact_match_on_samples_sized_for_the_ci(env, study):
    """Retrieval outcomes are exact match on enough samples that a cell mean over the grid's seeds has
    a 95% CI half-width <= 0.05 (z^2 / 4 / (0.05^2 seeds) samples per run and length); the tiny
    longctx runs pretrain on a documented passkey mix (a task that fits their context); the paper
    posenc grid has passkey-trained runs like tiny."""
    from studies import stats
    for scale in ("tiny", "paper") if study == "longctx" else ("paper",):  # tiny posenc: 24 samples (its README)
        lines = sweep(env, "-n", study, SCALE=scale).stdout.splitlines()
        cells = lines[1:] if (study, scale) == ("longctx", "paper") else lines  # not the LongPPL evaluator's seed
        seeds = {flag(train_steps(l), "--seed") for l in cells if " train.py " in l}
        need = stats.samples_for_ci(len(seeds))
        assert len(seeds) >= 3 and need <= 129
        scored = 0
        ev_tasks = {t for x in lines for st in x.split(" && ") if " evaluate.py " in st
                    for t in flag(shlex.split(st), "--tasks").split(",")} - {"ppl"}  # every evaluated task
        for l in lines:
            a = train_steps(l) if " train.py " in l else None
            if study == "longctx" and scale == "tiny":
                assert (flag(a, "--task_mix"), flag(a, "--task_list"), flag(a, "--task_loss")) == \
                    ("0.5", "passkey_short", "answer")
            if study == "longctx" and scale == "paper" and a:  # every evaluated task is in the pretraining mix
                assert float(flag(a, "--task_mix")) > 0 and flag(a, "--task_loss") == "answer"
                assert len(ev_tasks) >= 5 and ev_tasks <= set(flag(a, "--task_list").split(","))
            if study == "posenc" and (a is None or not flag(a, "--task_mix")):
                continue  # posenc text runs: loss by length, no retrieval outcome
            for st in l.split(" && "):
                ev = shlex.split(st)
                if ev[1] != "evaluate.py":
                    continue
                tasks_ = [t for t in flag(ev, "--tasks").split(",") if t in train.tasks.TASKS]
                if not tasks_ and (study, scale) == ("longctx", "tiny") and not re.search(r"-(ntk512-f0\.05|more-f0\.05-ntk512-free) ", st + " "):
                    continue  # tiny: retrieval on the root, the main recipe and the control only (the outcomes' runs)
                assert tasks_ and flag(ev, "--score") == "exact", st
                per_length = len(tasks_) * int(flag(ev, "--depths", "3")) * int(flag(ev, "--samples"))
                assert per_length >= need, st
                scored += 1
        assert scored >= 16 and (scored == 3 * 48 or (study, scale) != ("longctx", "tiny")), (study, scale, scored)


def paper_longctx_joined(lines):
    """The paper longctx grid: first the one fixed LongPPL evaluator's line (the no-feature
    architecture at the long context with a seed no cell has, extended by the main recipe), then a
    training line (train + extensions) per cell and seed, then one second-pass line per cell and seed
    with its evaluations, each with that evaluator. Checks that, and returns the cell lines with each
    evaluation put back after the step that makes its run (the tiny grid's layout)."""
    n = (len(lines) - 1) // 2
    (ev_line,), first, second = lines[:1], lines[1:1 + n], lines[1 + n:]
    assert len(second) == len(first) == n and n % 16 == 0
    assert all(" train.py " in l for l in first) and not any(" train.py " in l or " extend.py " in l for l in second)
    ev_train, ev_ext = [shlex.split(st) for st in ev_line.split(" && ")]
    cell_seeds = {train.parse_args(shlex.split(l.split(" && ")[0])[2:]).seed for l in first}
    assert train.parse_args(ev_train[2:]).seed not in cell_seeds and flag(ev_ext, "--out_dir").endswith("-ntk8192-f0.05")
    evaluator = flag(ev_ext, "--out_dir")
    made = {}  # run folder -> the first-pass line that trains or extends it
    for i, l in enumerate(first):
        for st in l.split(" && "):
            made[flag(shlex.split(st), "--out_dir")] = i
    assert evaluator not in made  # not one of the compared models: no cell scores on its own key tokens
    joined = [l.split(" && ") for l in first]
    for l in second:
        for st in l.split(" && "):
            ev = shlex.split(st)
            run = ev[2]
            assert flag(ev, "--evaluator") == evaluator  # one evaluator for every cell and seed
            steps = joined[made[run]]
            at = next(k for k, x in enumerate(steps) if flag(shlex.split(x), "--out_dir") == run)
            steps.insert(at + 1, st)
    return [" && ".join(s) for s in joined]


def test_posenc_and_lengen_grids(env):
    lines = sweep(env, "-n", "posenc").stdout.splitlines()
    assert {flag(train_steps(l), "--pos") for l in lines} == {*POS_KINDS, *MODEL_WIDE_POS, None} - {"learned"}
    assert any("--swan true" in l for l in lines) and any("--chunk_layers" in l for l in lines)
    kinds = {}
    for l in lines:  # train short, evaluate long
        a = train_steps(l)
        train_len = int(flag(a, "--block_size"))
        ev = shlex.split(l.split(" && ")[1])
        assert ev[1] == "evaluate.py" and max(map(int, flag(ev, "--lengths").split(","))) >= 4 * train_len
        # tiny: a text run scored on loss by length, and a passkey-trained run scored on passkey retrieval
        kind = "passkey" if flag(a, "--task_mix") else "text"
        assert flag(ev, "--tasks") == ("passkey" if kind == "passkey" else "ppl")
        assert kind == "text" or (flag(a, "--task_list"), flag(a, "--task_loss"), flag(ev, "--score")) == \
            ("passkey", "answer", "exact")
        assert ("--logn" in ev) == ("--swan" in a)
        abl = tuple(x for x in ("--chunk_encoder", "--chunk_bypass", "--chunk_dense_train") if x in a)
        kinds.setdefault(kind, set()).add((flag(a, "--pos"), "--swan" in a, flag(a, "--chunk_layers"), abl,
                                           flag(a, "--seed")))
    ablations = {k for k in kinds["passkey"] if k[3]}  # one principle removed at a time, 3 seeds, both recipes
    assert {k[3] for k in ablations} == {("--chunk_encoder",), ("--chunk_bypass",), ("--chunk_dense_train",)}
    assert len(ablations) == 9 and all(k[2] == "1" for k in ablations)
    assert len(kinds["text"]) == (N_ENC + 1) * 3 + 9 and kinds["text"] == kinds["passkey"]  # (encodings + chunk) x 3 + ablations
    lines = sweep(env, "-n", "lengen").stdout.splitlines()
    cells, thr = {}, {}
    for l in lines:
        a = train_steps(l)
        n = int(flag(a, "--algo_len").split(",")[1])
        ev = shlex.split(l.split(" && ")[1])
        assert flag(a, "--algo") == flag(ev, "--tasks") and flag(ev, "--lengths") == f"{n},{2 * n},{3 * n}"
        enc = "swan" if "--swan" in a else flag(a, "--pos")
        if "/threshold/" in flag(a, "--out_dir"):  # the threshold sweep: (task, layers) -> {N: seeds}
            assert enc == "nope" and a.count("--n_layer") == 1
            thr.setdefault((flag(a, "--algo"), flag(a, "--n_layer")), {}).setdefault(n, set()).add(flag(a, "--seed"))
            continue
        assert n == 16
        cells.setdefault((flag(a, "--algo"), enc), set()).add(flag(a, "--seed"))
    assert {t for t, _ in cells} == {"copy", "sort", "parity_scratch", "parity"}
    assert all(len(s) >= 3 for s in cells.values())  # >= 3 seeds per cell
    for t in ("copy", "sort", "parity_scratch"):
        assert {e for tt, e in cells if tt == t} == ENCODINGS  # every encoding of model.py, and SWAN
    recipe = {"copy": "3", "sort": "3", "parity_scratch": "4"}
    assert set(thr) == {(t, d) for t in recipe for d in ("1", "2", recipe[t])}
    for (t, d), by_n in thr.items():  # the main grid's recipe run supplies N = 16 at the recipe's depth
        assert set(by_n) == ({8, 24} if d == recipe[t] else {8, 16, 24})
        assert all(s == {"0", "1", "2"} for s in by_n.values())
    assert {e for t, e in cells if t == "parity"} == {"rope"}
    lines = sweep(env, "-n", "lengen", SCALE="paper").stdout.splitlines()
    assert {flag(train_steps(l), "--algo") for l in lines} == set(train.tasks.ALGO_TASKS)


@pytest.mark.parametrize("scale", ["tiny", "paper"])
def test_every_step_parses_with_its_script(env, scale):
    """Each step's flags are accepted by the script that runs it (train.py's config checks included)."""
    extend = pytest.importorskip("extend")
    evaluate = pytest.importorskip("evaluate")
    seen = set()
    for study in ("qat", "qat-probes", "longctx", "posenc", "lengen"):
        for line in sweep(env, "-n", study, SCALE=scale).stdout.splitlines():
            for step in line.split(" && "):
                a = shlex.split(step)
                # steps that differ only in their seed and folders parse alike: each kind once
                key = tuple(re.sub(r"_s\d+", "_s", x) for i, x in enumerate(a) if i == 0 or a[i - 1] != "--seed")
                if key in seen:
                    continue
                seen.add(key)
                if a[1] == "train.py":
                    train.check_config(train.parse_args(a[2:]))
                elif a[1] == "extend.py":
                    extend.parse_args(a[2:])
                else:
                    assert a[1] == "evaluate.py"
                    evaluate.parse_args(a[2:])


# ---------------------------------------------------------------- skip / resume

def test_skip_finished_and_resume_unfinished(env):
    lines = sweep(env, "-n", "qat").stdout.splitlines()
    done, partial = (re.search(r"--out_dir (\S+)", lines[i]).group(1) for i in (0, 5))
    os.makedirs(done)
    open(os.path.join(done, "result.json"), "w").write("{}")
    os.makedirs(partial)
    open(os.path.join(partial, "ckpt.pt"), "w").write("x")
    dry = sweep(env, "-n", "qat")
    assert len(dry.stdout.splitlines()) == N_QAT - 1 and "1 finished" in dry.stderr
    assert not any(done in l for l in dry.stdout.splitlines())
    assert [l for l in dry.stdout.splitlines() if l.endswith(" --resume")] == [lines[5] + " --resume"]
    p = sweep(env, "qat")
    assert p.returncode == 0, p.stderr
    runs = calls(env)
    assert len(runs) == N_QAT - 1
    outs = [flag(a, "--out_dir") for _, _, a in runs]
    assert done not in outs and len(set(outs)) == N_QAT - 1
    assert [flag(a, "--out_dir") for _, _, a in runs if "--resume" in a] == [partial]
    assert all(omp == "1" for _, omp, _ in runs)  # 2 jobs on this 2-core machine: 1 thread each
    # everything finished: a rerun runs nothing
    os.remove(env["STUB_LOG"])
    p = sweep(env, "qat")
    assert p.returncode == 0 and calls(env) == [] and f"{N_QAT} already finished, 0 to run" in p.stderr


def test_multi_step_jobs_skip_done_steps(env):
    lines = sweep(env, "-n", "longctx").stdout.splitlines()
    run = flag(train_steps(lines[0]), "--out_dir")
    os.makedirs(run)
    for f in ("result.json", "eval.json"):
        open(os.path.join(run, f), "w").write("{}")
    # a finished run without its checkpoint (a clone keeps only the JSON records): trained again, --overwrite,
    # since its extensions still need the checkpoint; its own finished evaluation stays skipped
    first = sweep(env, "-n", "longctx").stdout.splitlines()[0]
    assert first.split()[1] == "train.py" and " --overwrite" in first.split(" && ")[0]
    assert first.count(" && ") == lines[0].count(" && ") - 1
    open(os.path.join(run, "ckpt.pt"), "w").write("")
    first = sweep(env, "-n", "longctx").stdout.splitlines()[0]
    assert first.split()[1] == "extend.py" and first.count(" && ") == lines[0].count(" && ") - 2
    n_ext = sum(l.count("extend.py ") for l in lines)
    n_more = sum(l.count("--method none --factor 1 ") for l in lines)  # the control's first step: no evaluation
    assert sweep(env, "longctx").returncode == 0
    assert len(calls(env, "train.py")) == len(lines) - 1 and len(calls(env, "extend.py")) == n_ext
    assert n_more == len(lines) and len(calls(env, "evaluate.py")) == len(lines) - 1 + n_ext - n_more


def test_interrupt_then_rerun_finishes_each_run_once(env, tmp_path):
    p = subprocess.Popen(["bash", SWEEP, "qat"], env={**env, "STUB_SLEEP": "0.5"}, cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    qat = os.path.join(env["OUT"], "qat")
    deadline = time.time() + 30  # stop once a few runs have finished (robust to a slow, loaded machine)
    while time.time() < deadline and (not os.path.isdir(qat) or len(os.listdir(qat)) < 4):
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=20)
    assert p.returncode == 130 and "interrupted" in err
    time.sleep(0.7)  # a killed job would have written its result by now
    finished = [d for d in os.listdir(os.path.join(env["OUT"], "qat")) if d != "logs"]
    assert 0 < len(finished) < N_QAT
    assert all(os.path.exists(os.path.join(env["OUT"], "qat", d, "result.json")) for d in finished)
    started_first = len(calls(env))
    assert started_first >= len(finished)
    assert sweep(env, "qat").returncode == 0
    outs = [flag(a, "--out_dir") for _, _, a in calls(env)[started_first:]]
    assert len(outs) == N_QAT - len(finished) and len(set(outs)) == len(outs)  # finished runs skipped
    assert len([d for d in os.listdir(os.path.join(env["OUT"], "qat")) if d != "logs"]) == N_QAT


# ---------------------------------------------------------------- the pool

def test_gpu_slots_and_logs(env):
    p = sweep(env, "posenc", GPUS="5,7", JOBS="")
    assert p.returncode == 0, p.stderr
    runs = calls(env)
    n = COUNTS[("posenc", "tiny")]
    assert len(runs) == n and {c for c, _, _ in runs} == {"5", "7"}  # JOBS defaults to the GPU count
    logs = os.listdir(os.path.join(env["OUT"], "posenc", "logs"))
    assert len(logs) == n and all(l.endswith(".log") for l in logs)


def test_jobs_per_gpu_packs_small_jobs(env):
    """JOBS_PER_GPU=3 with two GPUs: six slots, three on each GPU (small launch-bound jobs share
    one); a malformed value is refused on one line."""
    p = sweep(env, "posenc", GPUS="5,7", JOBS="", JOBS_PER_GPU="3")
    assert p.returncode == 0, p.stderr
    assert "JOBS=6 on GPUs 5,7" in p.stderr
    slots = {int(s): g for s, g in re.findall(r"slot (\d+) gpu (\d+)", p.stderr)}
    assert slots == {0: "5", 1: "7", 2: "5", 3: "7", 4: "5", 5: "7"}
    assert {c for c, _, _ in calls(env)} == {"5", "7"} and len(calls(env)) == COUNTS[("posenc", "tiny")]
    for bad in ("0", "two"):
        p = sweep(env, "--dry-run", "posenc", GPUS="5,7", JOBS="", JOBS_PER_GPU=bad)
        assert p.returncode == 2 and p.stderr.strip() == f"sweep.sh: JOBS_PER_GPU must be a positive integer, got '{bad}'"


def test_failed_job_reported_others_run(env):
    p = sweep(env, "qat", STUB_FAIL="25K_b4_wd0.33_lr1_wsd_muon_s1")
    assert p.returncode == 1
    assert "FAILED 25K_b4_wd0.33_lr1_wsd_muon_s1 (exit 3)" in p.stderr and "1 jobs failed" in p.stderr
    assert len(calls(env)) == N_QAT and len(calls(env, "analyze.py")) == 1  # analysis of what finished


def test_task_mode_for_job_arrays(env):
    lines = sweep(env, "-n", "qat").stdout.splitlines()
    p = sweep(env, "--task", "7", "qat")
    assert p.returncode == 0
    assert [flag(a, "--out_dir") for _, _, a in calls(env)] == [flag(train_steps(lines[6]), "--out_dir")]
    p = sweep(env, "--task", "7", "qat")
    assert p.returncode == 0 and "already finished" in p.stderr and len(calls(env)) == 1
    for bad in ("0", str(N_QAT + 1), "x"):
        p = sweep(env, "--task", bad, "qat")
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_post_runs_probe_then_analyze(env):
    lines = sweep(env, "-n", "qat").stdout.splitlines()
    group = [flag(train_steps(l), "--out_dir") for l in lines
             if "25K_b" in l and "_wd0.33_" in l and l.endswith("_s0")]
    assert len(group) == 3
    for d in group:
        os.makedirs(d)
        for f in ("result.json", "ckpt_warmdown.pt"):
            open(os.path.join(d, f), "w").write("{}")
    p = sweep(env, "--post", "qat")
    assert p.returncode == 0, p.stderr
    probes = [a for _, _, a in calls(env, "evaluate.py") if "grid" in a]
    assert sorted(os.path.basename(a[0])[:7] for a in probes) == ["25K_b16", "25K_b3_", "25K_b4_"]
    for a in probes:  # every run measured on the INT4 grid (tiny has no INT6) at its warmdown checkpoint
        assert flag(a, "--grid_bits") == "4" and flag(a, "--ckpt") == "warmdown"
        assert flag(a, "--out") == os.path.join(a[0], "grid.json")
    out = os.path.join(env["OUT"], "qat")  # the law is fitted on the grid's sizes
    assert [a for _, _, a in calls(env, "analyze.py")] == [[out, "--study", "qat", "--fit_sizes", "14K,25K,39K", "--out", out]]
    assert len(os.listdir(os.path.join(env["OUT"], "qat", "logs", "probe"))) == 3
    os.remove(env["STUB_LOG"])  # qat-probes: the grid and the probes together, the law tested on the probes' sizes
    assert sweep(env, "--post", "qat-probes").returncode == 0
    probes = os.path.join(env["OUT"], "qat-probes")
    assert [a for _, _, a in calls(env, "analyze.py")] == [[out, probes, "--study", "qat-probes", "--fit_sizes", "14K,25K,39K",
                                                        "--out", probes]]


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("args,extra,msg", [
    (["nosuch"], {}, "unknown study 'nosuch'"),
    (["--dry-run", "nosuch"], {}, "unknown study"),
    ([], {}, "usage"),
    (["--bogus", "qat"], {}, "unknown option"),
    (["qat", "posenc"], {}, "one study at a time"),
    (["-n", "qat"], {"SCALE": "huge"}, "unknown SCALE"),
    (["-n", "qat"], {"JOBS": "0"}, "JOBS must be"),
])
def test_bad_input_one_line_exit_2(env, args, extra, msg):
    p = sweep(env, *args, **extra)
    assert p.returncode == 2
    assert p.stdout == "" and len(p.stderr.strip().splitlines()) == 1 and msg in p.stderr
    assert not os.path.exists(env["STUB_LOG"])


def test_chain_runs_a_jobs_steps_in_one_process(tmp_path):
    """tools/chain.py (the runner of a job's steps): each step is a __main__ of its own with its own
    argv, all in one process (a later step sees what an earlier one imported), and the first
    failure ends the job with its status; a line with another kind of step runs in bash."""
    import sys
    (tmp_path / "a.py").write_text("import sys, os\nassert __name__ == '__main__'\nsys.modules['chain_mark'] = os\n"
                                   "open(sys.argv[1], 'w').write(f'{os.getpid()} {sys.argv[2]}')\n")
    (tmp_path / "b.py").write_text("import sys, os\nopen(sys.argv[1], 'w').write(f'{os.getpid()} '"
                                   "+ str('chain_mark' in sys.modules))\n")
    (tmp_path / "fail.py").write_text("import sys\nsys.exit(3)\n")
    py, chain = shlex.quote(sys.executable), os.path.join(ROOT, "tools", "chain.py")
    step = lambda script, *args: " ".join([py, str(tmp_path / script), *map(str, args)])
    run = lambda line: subprocess.run([sys.executable, chain, line], capture_output=True, text=True, timeout=60)
    p = run(" && ".join([step("a.py", tmp_path / "a.out", "x"), step("b.py", tmp_path / "b.out")]))
    assert p.returncode == 0, p.stderr
    (pa, arg), (pb, seen) = (tmp_path / "a.out").read_text().split(), (tmp_path / "b.out").read_text().split()
    assert arg == "x" and pa == pb and seen == "True"  # one process, the argv of each step
    p = run(" && ".join([step("fail.py"), step("b.py", tmp_path / "c.out")]))
    assert p.returncode == 3 and not (tmp_path / "c.out").exists()
    (tmp_path / "term.py").write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(30)\n")
    p = run(" && ".join([step("term.py"), step("b.py", tmp_path / "e.out")]))  # a scheduler's SIGTERM mid-step
    assert p.returncode == 75 and not (tmp_path / "e.out").exists()  # stopped (cli.STOPPED), no further step
    p = run(f"true && {step('b.py', tmp_path / 'd.out')}")  # not all python steps: bash runs the line
    assert p.returncode == 0 and (tmp_path / "d.out").read_text().split()[1] == "False"



def test_paper_longctx_refuses_short_eval_documents_before_training(env, tmp_path):
    """SCALE=paper longctx measures loss and LongPPL inside single documents of 16K-32K tokens: without
    a long-document EVAL_DATA, or with one whose documents are short, sweep.sh stops with one line
    before any job starts (the check runs the real data.py windows)."""
    import data
    from conftest import write_corpus
    prep = str(tmp_path / "short")
    data.prepare(write_corpus(str(tmp_path / "src"), n_docs=4, words=800), prep, val_frac=0.5, quiet=True)
    real = {**env, "PYTHON": sys.executable, "SCALE": "paper", "DATA": prep}
    for extra, msg in (({}, "needs EVAL_DATA"), ({"EVAL_DATA": prep}, "evaluation windows of 4096 tokens (need 8")):
        for mode in ([], ["--task", "1"]):
            p = sweep(real, *mode, "longctx", timeout=120, **extra)
            err = p.stderr.strip().splitlines()
            assert p.returncode == 2 and msg in err[-1] and "Traceback" not in p.stderr, p.stderr
            assert not os.path.exists(os.path.join(env["OUT"], "longctx"))  # nothing trained, nothing written
    assert sweep(real, "--dry-run", "longctx", EVAL_DATA=prep).returncode == 0  # listing the grid needs no data
    lines = sweep(real, "--dry-run", "longctx", EVAL_DATA=prep).stdout.splitlines()
    evals = [s for line in lines for s in line.split(" && ") if " evaluate.py " in s]
    assert evals and all(f"--eval_data {prep} --min_windows 8" in s for s in evals)
    exts = [s for line in lines for s in line.split(" && ") if " extend.py " in s]  # trained on the long documents
    assert exts and all(flag(shlex.split(s), "--data") == prep for s in exts)


def test_paper_longctx_second_pass_starts_after_the_first(env, tmp_path):
    """The second-pass lines (each cell's evaluations, with the LongPPL evaluator) read every
    first-pass line's runs: with two job slots none starts while a training line still runs."""
    for d in ("data", "eval"):
        os.makedirs(tmp_path / d)
        (tmp_path / d / "manifest.json").write_text("{}")
    p = sweep(env, "longctx", timeout=300, SCALE="paper", DATA=str(tmp_path / "data"), EVAL_DATA=str(tmp_path / "eval"),
              STUB_SLOW="100M_qkhead_kv3_w1024_ctx2048_s4 ")  # the last training line: 1 s a step
    assert p.returncode == 0, p.stderr[-2000:]
    order = [line.split("|", 2)[2].split()[0] for line in open(env["STUB_LOG"]).read().splitlines()]
    order = [s for s in order if s.endswith(("train.py", "extend.py", "evaluate.py"))]
    first_eval = next(i for i, s in enumerate(order) if s.endswith("evaluate.py"))
    assert not any(s.endswith(("train.py", "extend.py")) for s in order[first_eval:]) and first_eval > 80
    finished = [l.split()[2] for l in p.stderr.split("\n") if l.startswith("sweep.sh: done ")]
    assert sum(not n.startswith("export-") for n in finished) == COUNTS[("longctx", "paper")]
    assert sum(n.startswith("export-") for n in finished) == 16 * 5  # then HELMET / RULER's export of each main recipe


def test_paper_listing_and_pricing_need_no_prepared_data(env, tmp_path):
    """--dry-run and --count only list (and --cost prices): a raw corpus as DATA (or none) is refused
    for running only, and a paper longctx list without EVAL_DATA says its lines lack --eval_data."""
    raw = tmp_path / "corpus.txt"
    raw.write_text("a raw corpus, not prepared\n")
    paper = {**env, "SCALE": "paper", "DATA": str(raw)}
    for mode in (["--dry-run"], ["--count"]):
        p = sweep(paper, *mode, "qat")
        assert p.returncode == 0 and p.stdout.strip(), p.stderr
    p = sweep(paper, "qat")
    assert p.returncode == 2 and "needs DATA to be a prepared folder" in p.stderr.strip().splitlines()[-1]
    p = sweep({**env, "SCALE": "paper"}, "--dry-run", "longctx")
    assert p.returncode == 0 and "EVAL_DATA is not set" in p.stderr
    assert all("--eval_data" not in line for line in p.stdout.splitlines())


def test_sweep_encoding_lists_are_model_pys():
    """The variants' loops of grid_posenc and grid_lengen run every positional encoding of model.py
    (POS_KINDS, MODEL_WIDE_POS but learned, which no study compares) and no other."""
    text = open(os.path.join(ROOT, "sweep.sh")).read()
    loops = re.findall(r'for v in ("rope:--pos rope".*?); do', text, re.S)
    assert len(loops) == 2  # grid_posenc and grid_lengen
    for loop in loops:
        pos = re.findall(r'"(\w+):--pos (\w+)"', loop)
        assert all(label == p for label, p in pos)
        assert [p for _, p in pos] == list(POS_KINDS) + [p for p in MODEL_WIDE_POS if p != "learned"]


def test_paper_longctx_post_exports_every_main_recipe_model(env):
    """SCALE=paper --post longctx: after the analysis, tools/export.py --format hf on every finished
    main-recipe extension (HELMET / RULER run on them, outside this project), not the LongPPL
    evaluator's, not one already exported; tiny --post exports nothing."""
    lines = sweep(env, "--dry-run", "longctx", SCALE="paper").stdout.splitlines()
    mains = sorted({a.split()[0] for l in lines for a in l.split("--out_dir ")[1:] if a.split()[0].endswith("-f0.05")
                    and "-ntk" in a.split()[0]})
    evaluator = [m for m in mains if "_s100-" in m]
    assert len(evaluator) == 1 and len(mains) == 1 + 80
    for m in mains[:5] + evaluator:
        os.makedirs(m, exist_ok=True)
        open(os.path.join(m, "result.json"), "w").write("{}")
    os.makedirs(os.path.join(mains[0], "hf"))
    open(os.path.join(mains[0], "hf", "config.json"), "w").write("{}")
    assert sweep(env, "--post", "longctx", SCALE="paper").returncode == 0
    got = sorted(a[0] for _, _, a in calls(env, "tools/export.py"))
    assert got == sorted(m for m in mains[1:5] if m not in evaluator)
    assert all(a[1:] == ["--format", "hf"] for _, _, a in calls(env, "tools/export.py"))
    os.remove(env["STUB_LOG"])
    assert sweep(env, "--post", "longctx").returncode == 0 and not calls(env, "tools/export.py")


def test_publish_writes_the_analysis_into_results(env, tmp_path):
    """PUBLISH=1: after the study's own analysis, analyze.py writes the same one into RESULTS/STUDY
    (results/ by default), so no stored number is copied by hand; without it, nothing goes there."""
    assert sweep(env, "--post", "longctx").returncode == 0
    out = os.path.join(env["OUT"], "longctx")
    assert [a for _, _, a in calls(env, "analyze.py")] == [[out, "--study", "longctx"]]
    os.remove(env["STUB_LOG"])
    res = str(tmp_path / "results")
    p = sweep(env, "--post", "longctx", PUBLISH="1", RESULTS=res)
    assert p.returncode == 0, p.stderr
    assert [a for _, _, a in calls(env, "analyze.py")] == [[out, "--study", "longctx"],
                                                          [out, "--study", "longctx", "--out", os.path.join(res, "longctx")]]
    os.remove(env["STUB_LOG"])  # qat: the grid's own --out is replaced by results/qat
    assert sweep(env, "--post", "qat", PUBLISH="1", RESULTS=res).returncode == 0
    qat = os.path.join(env["OUT"], "qat")
    assert calls(env, "analyze.py")[1][2] == [qat, "--study", "qat", "--fit_sizes", "14K,25K,39K", "--out", qat,
                                              "--out", os.path.join(res, "qat")]
    assert "PUBLISH must be 0 or 1" in sweep(env, "--post", "qat", PUBLISH="yes").stderr


def test_sweep_qat_reference_warmdown_is_the_analysis():
    """sweep.sh's reference and short warmdowns are the ones the analysis measures the penalty law at and
    tests the INT4 transition with (qat.REF_WARMDOWN, SHORT_WARMDOWN): one value each."""
    from studies import qat
    text = open(os.path.join(ROOT, "sweep.sh")).read()
    ref, short = re.search(r"^QAT_REF=([\d.]+); QAT_SHORT=([\d.]+)$", text, re.M).groups()
    assert (float(ref), float(short)) == (qat.REF_WARMDOWN, qat.SHORT_WARMDOWN)


# sha256 of each grid's `--dry-run` lines (stdout, OUT=/tmp/gg, PYTHON=python), measured before sweep.sh's
# grids became tables (issue 60). A change to any job line of any grid fails here: stored runs (runs/confirm2,
# runs/rung1) and the write-ups rest on these lines, so a value is updated only with a change meant to the grid.
GRID_SHA256 = {
    "qat": "879e2e6771ee2be00ec5030524c86189975352afd50c57190e66482884165a13",
    "qat-probes": "dece37a2064c7f41e39373806cfcde0eaa65ac97cfd4eb6cd771542aae497579",
    "longctx": "1127a09f0465b3a245523f08b49ce70ae4c50ba844e64c975eed8c42947e890a",
    "posenc": "387704bcfab24659a896edd082c65547064f0f2beae31f6569bc9b2575a81d94",
    "lengen": "d860474fc578066c05c7d9da919bf7efd84872d2ed05b2e2097ba0b2e37019b0",
    "CONFIRM=1 qat": "7bf9fca4ff257f53f6600bb9f019bc2d0a0cf086a4e4cb0b5f9582843bc9acaf",
    "CONFIRM=1 qat-probes": "45301a8300018647ca4d88bcb9c0c0369c16dcf97bb9d8940646ddfef7851b08",
    "CONFIRM=1 longctx": "5597fe1494f2b433697b41c04a74aa8667861b48fc09b3ffe268135635c7ecb3",
    "CONFIRM=1 posenc": "60cdd85cbae2723c5554c984cc0efb9b76a06bb400056410cc40fd2cb22097c5",
    "CONFIRM=1 lengen": "04c2a0decd6930e61ea411c0e89aad6c1d8a489bb91bf5b8ca036d483ded6a6e",
    "CONFIRM=2 qat": "8cbd1f2513b632c4e20ab3786e9f231a3ab8e8de531dbc590a657468ed8e5070",
    "CONFIRM=2 longctx": "87ce4b291a971d4ef2916c91c7aa3300499b3f6dc0a34fcef4e9b7a3826887cb",
    "CONFIRM=2 posenc": "328956eac01e8f2f2fc3c049f1374e3b5174135f6e18aae84c3a92c4286c6ccd",
    "CONFIRM=2 lengen": "fe32f15f3dea2eb1bfdac85fa204d299c482a734fc556c968346c16eb2ef9348",
    "rung1": "c73bee09892e314e90644d1aaa56ab12f615bc52d1961e7eab3f80bf864f469f",
    "SCALE=paper qat": "b879e4ac1d28c635bde76777b0d9a0bd597f91fcc2181bba35c8a1ba18c31777",
    "SCALE=paper qat-probes": "f23e065ccfb502f313f105bd659a1bbb9abac931f87ae4bf5e78c3d08670e84c",
    "SCALE=paper longctx": "828adc1f975e20660c3663511066521f0aabd6c7ba6abc1664ee0d8f0edba047",
    "SCALE=paper posenc": "21753682bdfae7996da30b7052b5b9099cf26b879742821c87d82531d408b821",
    "SCALE=paper lengen": "d2e1c04d848b33bb3ead672fbef4f0b86689f2bbfc018703a10ab671ec072e18",
    "SCALE=paper REHEARSE=1 qat": "23c551df694b7564df3f820420678eca148c5e7793fdc4c5e49d8dce30e516c2",
    "SCALE=paper REHEARSE=1 qat-probes": "7f65e34267c26d7418f4b991ef0570d23264e4e81f621f5cbec12d84b8ed75c0",
    "SCALE=paper REHEARSE=1 longctx": "719a0c9eb5be3a79c47406bfcfac69fe7ef9fc0ed4b4bf6319ad0ca54698c106",
    "SCALE=paper REHEARSE=1 posenc": "a6efc0497f3fb22e4227fcbf2c58db8990b0bb915657c093ea695d2224a59cd4",
    "SCALE=paper REHEARSE=1 lengen": "82964a784d0e9a716b5f47515bd3e81ed49f5214c48f6175e04cfa0a2a3596a2",
}


@pytest.mark.parametrize("grid", sorted(GRID_SHA256))
def test_grid_lines_are_pinned(grid, tmp_path):
    """Every grid's job lines are byte-identical to the ones measured before the grids became tables:
    run with OUT in a fresh folder (nothing finished), that folder written as /tmp/gg, then hashed."""
    import hashlib
    *settings, study = grid.split()
    out = str(tmp_path / "gg")
    env = {k: v for k, v in os.environ.items() if k not in ("SCALE", "CONFIRM", "REHEARSE", "REHEARSE_SEEDS", "DATA",
                                                           "EVAL_DATA", "EXTRA", "COMPILE", "OUT", "PYTHON")}
    env.update(dict(s.split("=") for s in settings), OUT=out, PYTHON="python")
    p = subprocess.run(["bash", SWEEP, "--dry-run", study], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0 and p.stdout, p.stderr[-2000:]
    assert hashlib.sha256(p.stdout.replace(out, "/tmp/gg").encode()).hexdigest() == GRID_SHA256[grid], \
        f"{grid}: the grid's job lines changed ({len(p.stdout.splitlines())} lines)"
