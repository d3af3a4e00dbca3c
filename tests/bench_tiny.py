"""
Wall time of the first job of each tiny study and of the main command, for this checkout against
another one (e.g. a worktree of an older commit), in one run, side by side; prints each ratio and
whether the two checkouts' records agree.

    git worktree add /tmp/base 72be9dd                  # the checkout to compare against
    python tests/bench_tiny.py /tmp/base                # all six jobs, once each side (~25 min on 2 cores)
    python tests/bench_tiny.py /tmp/base --only qat,posenc --repeats 3

A study's first job is line 1 of each checkout's own grid (flags may differ between the two), run as
the sweep runs it, `OUT=... bash sweep.sh --task 1 STUDY` (each checkout's own runner: steps in one
process where it has tools/chain.py, else in bash), with one job per core, so OMP_NUM_THREADS = 1 on
the 2-core machine (--threads). The two sides alternate job by job and
repetition by repetition (which one goes first flips), so a load that drifts falls on both.
Each side's data cache is prepared before the clock starts. Wall and CPU seconds (user + system of
the job's processes) are both shown: on a machine shared with other work the wall time stretches
with the load, the CPU time much less (it is what the sweep pays when it has the cores). Records: the metrics (and PTQ) of
every result.json and the numbers of every eval.json the job wrote, this side minus the other;
"identical" when every number is equal. Not collected by pytest: it asserts nothing.
"""
import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)
from studies import wave  # noqa: E402 (wave 1's run-studies: the one list of studies)

STUDIES = tuple(wave.get("confirm")["runs"])
MAIN = "{py} train.py --bits 6 --warmdown 0.33 --quiet --out_dir {out}/main"
EVAL_SKIP = {"wall_s", "eval_config", "versions", "device", "run", "checkpoint", "train_config", "model_config"}


def job_command(job, out):
    """The command of a job: a study's first grid line run as the sweep runs it (`sweep.sh --task 1`,
    with the checkout's own runner), or the main command."""
    if job == "main":
        return ["bash", "-c", MAIN.format(py=sys.executable, out=out)]
    return ["bash", "sweep.sh", "--task", "1", job]


def cpu_seconds():
    """User + system CPU seconds of this process's finished children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_job(checkout, job, out, env):
    """Run one job from scratch; -> (wall seconds, CPU seconds), or None if it failed."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    c, t = cpu_seconds(), time.perf_counter()
    p = subprocess.run(job_command(job, out), cwd=checkout, env=dict(env, OUT=out, PYTHON=sys.executable),
                       capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t, cpu_seconds() - c
    if p.returncode:
        print(f"  {job} failed in {checkout} (exit {p.returncode}): {(p.stderr or p.stdout).strip()[-300:]}")
        return None
    return wall, cpu


def numbers(x, prefix=""):
    """{path: number} of every numeric leaf of a JSON value."""
    if isinstance(x, dict):
        return {k: v for key, val in x.items() for k, v in numbers(val, f"{prefix}/{key}").items()}
    if isinstance(x, list):
        return {k: v for i, val in enumerate(x) for k, v in numbers(val, f"{prefix}/{i}").items()}
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return {prefix: float(x)}
    return {prefix: x} if x is None else {}


def records(out):
    """{relative path/number path: value} over the job's result.json (metrics, ptq) and eval.json files."""
    got = {}
    for root, _, files in os.walk(out):
        for name in files:
            if name not in ("result.json", "eval.json"):
                continue
            with open(os.path.join(root, name)) as f:
                rec = json.load(f)
            keep = {k: rec.get(k) for k in ("metrics", "ptq")} if name == "result.json" else \
                {k: v for k, v in rec.items() if k not in EVAL_SKIP}
            rel = os.path.relpath(os.path.join(root, name), out)
            got.update({rel + k: v for k, v in numbers(keep).items()})
    return got


def compare(mine, other):
    """One line: identical, or the largest difference and the numbers only one side has."""
    both = sorted(set(mine) & set(other))
    diffs = [(abs(mine[k] - other[k]), k) for k in both
             if mine[k] is not None and other[k] is not None and mine[k] != other[k]
             and not (math.isnan(mine[k]) and math.isnan(other[k]))]
    diffs += [(math.inf, k) for k in both if (mine[k] is None) != (other[k] is None)]
    only = sorted(set(mine) ^ set(other))
    line = "identical" if not diffs else f"max |diff| {max(diffs)[0]:.2e} ({len(diffs)} of {len(both)} differ, e.g. {max(diffs)[1]})"
    if only:
        line += f"; {len(only)} numbers on one side only (e.g. {only[0]})"
    return line if both else "no records"


def prepare_cache(checkout, env):
    """Tokenise the bundled corpus at the tiny studies' vocabularies before any clock starts."""
    code = "import data\nfor v in (512, 1024, 4096): data.load_corpus('', 'cl100k_base', v)"
    subprocess.run([sys.executable, "-c", code], cwd=checkout, env=env, check=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("other", help="the checkout to compare against (a folder with train.py and sweep.sh)")
    p.add_argument("--only", default=",".join(STUDIES + ("main",)), help="comma-separated jobs: studies and/or main")
    p.add_argument("--repeats", type=int, default=1, help="runs of each job on each side (the median is shown)")
    p.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS per job (0 = as sweep.sh's tiny default: 1 "
                                                          "job per core, cores / jobs threads each)")
    p.add_argument("--keep", default="", help="keep the jobs' output folders here (default: a temporary folder)")
    a = p.parse_args()
    other = os.path.abspath(a.other)
    if not os.path.isfile(os.path.join(other, "train.py")) or not os.path.isfile(os.path.join(other, "sweep.sh")):
        sys.exit(f"bench_tiny: {other} is not a checkout of this project (no train.py / sweep.sh)")
    jobs = [j for j in a.only.split(",") if j]
    bad = [j for j in jobs if j not in STUDIES + ("main",)]
    if bad or a.repeats < 1:
        sys.exit(f"bench_tiny: unknown job {bad[0]!r} (studies: {', '.join(STUDIES)}, main)" if bad else
                 "bench_tiny: --repeats must be >= 1")
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads or 1))  # sweep.sh tiny: JOBS = cores, 1 thread each
    root = a.keep or tempfile.mkdtemp(prefix="bench_tiny_")
    sides = {"this": HERE, "other": other}
    print(f"this: {HERE}\nother: {other}\nOMP_NUM_THREADS={env['OMP_NUM_THREADS']}, {a.repeats} run(s) a side, "
          f"outputs in {root}; load: {os.getloadavg()[0]:.1f}")
    for path in sides.values():
        prepare_cache(path, env)
    times = {(j, s): [] for j in jobs for s in sides}
    verdict = {}
    for rep in range(a.repeats):
        for i, job in enumerate(jobs):
            order = ["other", "this"] if (rep + i) % 2 == 0 else ["this", "other"]
            outs = {}
            for side in order:
                outs[side] = os.path.join(root, side, job)
                t = run_job(sides[side], job, outs[side], env)
                if t is not None:
                    times[(job, side)].append(t)
                print(f"  [{rep + 1}/{a.repeats}] {job:<10} {side:<5} " +
                      ("failed" if t is None else f"wall {t[0]:.1f} s, CPU {t[1]:.1f} s") +
                      f" (load {os.getloadavg()[0]:.1f})", flush=True)
            verdict[job] = compare(records(outs["this"]), records(outs["other"]))
    print(f"\n{'':<11}{'---------- wall s ----------':>28}{'---------- CPU s -----------':>30}")
    print(f"{'job':<11}{'other':>10}{'this':>10}{'ratio':>8}{'other':>12}{'this':>10}{'ratio':>8}  records (this - other)")
    fmt = lambda x: "-" if x is None else f"{x:.1f}"
    for job in jobs:
        cells = ""
        for k in (0, 1):  # wall, CPU: medians over the repetitions
            o, t = (statistics.median(x[k] for x in times[(job, s)]) if times[(job, s)] else None
                    for s in ("other", "this"))
            cells += f"{fmt(o):>{10 if k == 0 else 12}}{fmt(t):>10}{(f'{t / o:.2f}' if o and t else '-'):>8}"
        print(f"{job:<11}{cells}  {verdict.get(job, '-')}")
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
