"""sweep.sh: grid expansion, skip/resume, the job pool, bad input. No model trains: PYTHON points
at a stub that records its arguments (and environment) and fakes finished runs."""
import itertools
import os
import re
import shlex
import signal
import subprocess
import time

import pytest

from conftest import ROOT

import train

SWEEP = os.path.join(ROOT, "sweep.sh")

STUB = r"""#!/usr/bin/env bash
# fake python: records "CUDA_VISIBLE_DEVICES|OMP_NUM_THREADS|args", then fakes the run's outputs
echo "${CUDA_VISIBLE_DEVICES:-}|${OMP_NUM_THREADS:-}|$*" >> "$STUB_LOG"
script=$1; shift
out=""; eval_out=""; prev=""
for a in "$@"; do [[ $prev == --out_dir ]] && out=$a; [[ $prev == --out ]] && eval_out=$a; prev=$a; done
case $script in
  *train.py|*extend.py)
     [[ -n ${STUB_FAIL:-} && $* == *"$STUB_FAIL"* ]] && exit 3
     sleep "${STUB_SLEEP:-0}"
     mkdir -p "$out"; echo '{"status": "done"}' > "$out/result.json.tmp" && mv "$out/result.json.tmp" "$out/result.json" ;;
  *evaluate.py) echo '{"score": 1}' > "${eval_out:-$1/eval.json}" ;;
esac
exit 0
"""

COUNTS = {  # (study, scale) -> lines of the full grid
    ("qat", "tiny"): 3 * 3 * 2 * 3,                 # bits x warmdown x size x seed (1 LR)
    ("qat", "paper"): 3 * 3 * 4 * 4 * 5,            # the seed's 720-run grid (4 LRs)
    # adamw 1x3x2x3 + cosine 1x3x2 + 3x longer 2x3x2 + size 1M 2x3x2 + INT4 2 sizes x {4,16} x 3 seeds x 3 wd
    ("qat-probes", "tiny"): 18 + 6 + 12 + 12 + 36,
    # adamw 2x3x3x3 + cosine 2x3x3 + {3x,9x} 2x3x3x2 + 5 sizes 3x3x3 + INT4 7x2x10x2, minus 12 FP16
    # runs the size and INT4 probes share (5M/8M, wd 0.1/0.33, seeds 0-2)
    ("qat-probes", "paper"): 54 + 18 + 36 + 135 + 280 - 12,
    ("longctx", "tiny"): 2 * 2 * 2 * 2,             # qk_norm x GQA x SWA x context
    ("longctx", "paper"): 3 * 2 * 2 * 2,
    ("posenc", "tiny"): 7 * 2 * 2,                  # (5 --pos + swan + chunk) x seeds x (text, passkey)
    ("posenc", "paper"): 7 * 3,                     # text runs only
    ("lengen", "tiny"): 4 * 6 * 3 + 3,              # 4 tasks x (5 --pos + swan) x seeds + parity/rope x seeds
    ("lengen", "paper"): 8 * 7 * 3,                 # tasks x (5 --pos + swan + chunk) x seeds
}


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
        assert f"--out_dir {env['OUT']}/{study}/" in line
    dirs = [re.search(r"--out_dir (\S+)", l).group(1) for l in lines]
    assert len(set(dirs)) == len(dirs)  # one folder per job
    assert not os.path.exists(env["OUT"])  # a dry run writes nothing


def test_qat_tiny_grid_flags_and_names(env):
    lines = sweep(env, "-n", "qat").stdout.splitlines()
    combos = set()
    for line in lines:
        argv = train_steps(line)
        cfg = train.parse_args(argv)  # train.py's own parser accepts every flag
        train.check_config(cfg)
        assert os.path.basename(cfg.out_dir) == train.run_name(cfg, train.model_config(cfg, 4096))  # folders named like train.py's runs
        assert cfg.quiet and cfg.iters <= 250 and cfg.eval_interval >= cfg.iters
        combos.add((cfg.model.get('bits', 16), cfg.warmdown, cfg.size, cfg.seed, cfg.lr))
    assert combos == set(itertools.product((16, 8, 6), (0.1, 0.33, 0.6), ("0.1M", "0.5M"), (0, 1, 2), (1.0,)))


def test_qat_paper_grid(env):
    p = sweep(env, "-n", "qat", SCALE="paper", DATA="/data/corpus.jsonl", EXTRA="--compile")
    cfgs = [train.parse_args(train_steps(l)) for l in p.stdout.splitlines()]
    assert {c.size for c in cfgs} == {"15M", "30M", "50M", "100M"}
    assert {c.lr for c in cfgs} == {0.25, 0.5, 1.0, 2.0} and {c.seed for c in cfgs} == set(range(5))
    assert {c.model.get('bits', 16) for c in cfgs} == {16, 8, 6} and {c.warmdown for c in cfgs} == {0.1, 0.33, 0.6}
    assert all(c.tokens >= 20 * 15e6 and c.data == "/data/corpus.jsonl" and c.compile for c in cfgs)
    assert "DATA" not in p.stderr  # no big-corpus warning when DATA is set
    assert "DATA" in sweep(env, "-n", "qat", SCALE="paper").stderr


def test_qat_probes_grid(env):
    for scale, base in (("tiny", {"0.1M"}), ("paper", {"15M", "50M"})):
        cfgs = [train.parse_args(train_steps(l)) for l in sweep(env, "-n", "qat-probes", SCALE=scale).stdout.splitlines()]
        for c in cfgs:
            train.check_config(c)
        assert {c.size for c in cfgs if c.optimizer == "adamw"} == base
        assert {c.size for c in cfgs if c.schedule == "cosine"} == base
        assert {c.model.get('bits', 16) for c in cfgs} == {16, 8, 6, 4}
        int4 = sorted({c.size for c in cfgs if c.model.get('bits', 16) == 4}, key=lambda s: float(s[:-1]))
        assert int4[0] == ("0.1M" if scale == "tiny" else "3M")  # INT4 from the smallest size up
        long_runs = [c for c in cfgs if os.path.basename(c.out_dir).endswith(("_x3", "_x9"))]
        assert long_runs and all(c.model.get('bits', 16) in (16, 6) for c in long_runs)
    sizes = {c.size for c in cfgs}
    assert {"5M", "8M", "175M", "250M", "350M"} <= sizes  # the seed's held-out sizes


def test_longctx_grid(env):
    for scale, target in (("tiny", 512), ("paper", 16384)):
        lines = sweep(env, "-n", "longctx", SCALE=scale).stdout.splitlines()
        axes = set()
        for line in lines:
            steps = line.split(" && ")
            assert [s.split()[1] for s in steps] == ["train.py", "evaluate.py", "extend.py", "evaluate.py"]
            t, ev0, ext, ev1 = (shlex.split(s)[2:] for s in steps)
            run = flag(t, "--out_dir")
            assert ev0[0] == run and ext[0] == run and flag(ext, "--method") == "yarn"
            assert int(flag(ext, "--factor")) * int(flag(t, "--block_size")) == target
            assert ev1[0] == flag(ext, "--out_dir") and "--tasks" in ev1 and "--lengths" in ev1
            axes.add((flag(t, "--qk_norm"), flag(t, "--n_kv_head"), flag(t, "--window", "0"), flag(t, "--block_size")))
        assert len(axes) == len(lines)
        assert len({a[3] for a in axes}) == 2 and len({a[2] for a in axes}) == 2 and len({a[1] for a in axes}) == 2
    assert {a[0] for a in axes} == {"none", "layer", "head"}  # paper: the three QK-norm settings


def test_posenc_and_lengen_grids(env):
    lines = sweep(env, "-n", "posenc").stdout.splitlines()
    assert {flag(train_steps(l), "--pos") for l in lines} == {"rope", "nope", "alibi", "hope", "expe", None}
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
        kinds.setdefault(kind, set()).add((flag(a, "--pos"), "--swan" in a, flag(a, "--chunk_layers"), flag(a, "--seed")))
    assert len(kinds["text"]) == len(kinds["passkey"]) == 14 and kinds["text"] == kinds["passkey"]
    lines = sweep(env, "-n", "lengen").stdout.splitlines()
    cells = {}
    for l in lines:
        a = train_steps(l)
        n = int(flag(a, "--algo_len").split(",")[1])
        ev = shlex.split(l.split(" && ")[1])
        assert flag(a, "--algo") == flag(ev, "--tasks") and flag(ev, "--lengths") == f"{n},{2 * n},{3 * n}"
        enc = "swan" if "--swan" in a else flag(a, "--pos")
        cells.setdefault((flag(a, "--algo"), enc), set()).add(flag(a, "--seed"))
    assert {t for t, _ in cells} == {"copy", "reverse", "sort", "parity_scratch", "parity"}
    assert all(len(s) >= 3 for s in cells.values())  # >= 3 seeds per cell
    for t in ("copy", "reverse", "sort", "parity_scratch"):
        assert {e for tt, e in cells if tt == t} == {"rope", "nope", "alibi", "hope", "expe", "swan"}
    assert {e for t, e in cells if t == "parity"} == {"rope"}
    lines = sweep(env, "-n", "lengen", SCALE="paper").stdout.splitlines()
    assert {flag(train_steps(l), "--algo") for l in lines} == set(train.tasks.ALGO_TASKS)


@pytest.mark.parametrize("scale", ["tiny", "paper"])
def test_every_step_parses_with_its_script(env, scale):
    """Each step's flags are accepted by the script that runs it (train.py's config checks included)."""
    extend = pytest.importorskip("extend")
    evaluate = pytest.importorskip("evaluate")
    for study in ("qat", "qat-probes", "longctx", "posenc", "lengen"):
        for line in sweep(env, "-n", study, SCALE=scale).stdout.splitlines():
            for step in line.split(" && "):
                a = shlex.split(step)
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
    assert len(dry.stdout.splitlines()) == 53 and "1 finished" in dry.stderr
    assert not any(done in l for l in dry.stdout.splitlines())
    assert [l for l in dry.stdout.splitlines() if l.endswith(" --resume")] == [lines[5] + " --resume"]
    p = sweep(env, "qat")
    assert p.returncode == 0, p.stderr
    runs = calls(env)
    assert len(runs) == 53
    outs = [flag(a, "--out_dir") for _, _, a in runs]
    assert done not in outs and len(set(outs)) == 53
    assert [flag(a, "--out_dir") for _, _, a in runs if "--resume" in a] == [partial]
    assert all(omp == "1" for _, omp, _ in runs)  # 2 jobs on this 2-core machine: 1 thread each
    # everything finished: a rerun runs nothing
    os.remove(env["STUB_LOG"])
    p = sweep(env, "qat")
    assert p.returncode == 0 and calls(env) == [] and "54 already finished, 0 to run" in p.stderr


def test_multi_step_jobs_skip_done_steps(env):
    lines = sweep(env, "-n", "longctx").stdout.splitlines()
    run = flag(train_steps(lines[0]), "--out_dir")
    os.makedirs(run)
    for f in ("result.json", "eval.json"):
        open(os.path.join(run, f), "w").write("{}")
    first = sweep(env, "-n", "longctx").stdout.splitlines()[0]
    assert first.split()[1] == "extend.py" and first.count(" && ") == 1  # only extend + evaluate left
    assert sweep(env, "longctx").returncode == 0
    assert len(calls(env, "train.py")) == 15 and len(calls(env, "extend.py")) == 16
    assert len(calls(env, "evaluate.py")) == 31


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
    assert 0 < len(finished) < 54
    assert all(os.path.exists(os.path.join(env["OUT"], "qat", d, "result.json")) for d in finished)
    started_first = len(calls(env))
    assert started_first >= len(finished)
    assert sweep(env, "qat").returncode == 0
    outs = [flag(a, "--out_dir") for _, _, a in calls(env)[started_first:]]
    assert len(outs) == 54 - len(finished) and len(set(outs)) == len(outs)  # finished runs skipped
    assert len([d for d in os.listdir(os.path.join(env["OUT"], "qat")) if d != "logs"]) == 54


# ---------------------------------------------------------------- the pool

def test_gpu_slots_and_logs(env):
    p = sweep(env, "posenc", GPUS="5,7", JOBS="")
    assert p.returncode == 0, p.stderr
    runs = calls(env)
    n = COUNTS[("posenc", "tiny")]
    assert len(runs) == n and {c for c, _, _ in runs} == {"5", "7"}  # JOBS defaults to the GPU count
    logs = os.listdir(os.path.join(env["OUT"], "posenc", "logs"))
    assert len(logs) == n and all(l.endswith(".log") for l in logs)


def test_failed_job_reported_others_run(env):
    p = sweep(env, "qat", STUB_FAIL="0.5M_b8_wd0.33_lr1_wsd_muon_s1")
    assert p.returncode == 1
    assert "FAILED 0.5M_b8_wd0.33_lr1_wsd_muon_s1 (exit 3)" in p.stderr and "1 jobs failed" in p.stderr
    assert len(calls(env)) == 54 and len(calls(env, "analyze.py")) == 1  # analysis of what finished


def test_task_mode_for_job_arrays(env):
    lines = sweep(env, "-n", "qat").stdout.splitlines()
    p = sweep(env, "--task", "7", "qat")
    assert p.returncode == 0
    assert [flag(a, "--out_dir") for _, _, a in calls(env)] == [flag(train_steps(lines[6]), "--out_dir")]
    p = sweep(env, "--task", "7", "qat")
    assert p.returncode == 0 and "already finished" in p.stderr and len(calls(env)) == 1
    for bad in ("0", "55", "x"):
        p = sweep(env, "--task", bad, "qat")
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_post_runs_probe_then_analyze(env):
    lines = sweep(env, "-n", "qat").stdout.splitlines()
    group = [flag(train_steps(l), "--out_dir") for l in lines
             if "0.1M_b" in l and "_wd0.33_" in l and l.endswith("_s0")]
    assert len(group) == 3
    for d in group:
        os.makedirs(d)
        for f in ("result.json", "ckpt_warmdown.pt"):
            open(os.path.join(d, f), "w").write("{}")
    p = sweep(env, "--post", "qat")
    assert p.returncode == 0, p.stderr
    probes = [a for _, _, a in calls(env, "evaluate.py") if "grid" in a]
    assert sorted(os.path.basename(a[0])[:8] for a in probes) == ["0.1M_b16", "0.1M_b6_", "0.1M_b8_"]
    for a in probes:  # every run measured on the INT6 grid at its warmdown checkpoint, into its own grid.json
        assert flag(a, "--grid_bits") == "6" and flag(a, "--ckpt") == "warmdown"
        assert flag(a, "--out") == os.path.join(a[0], "grid.json")
    assert [a for _, _, a in calls(env, "analyze.py")] == [[os.path.join(env["OUT"], "qat")]]
    assert len(os.listdir(os.path.join(env["OUT"], "qat", "logs", "probe"))) == 3


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
