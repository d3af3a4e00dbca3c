"""The paper grids on a cluster (issue 25): their cost before they run (sweep.sh --cost, tools/cost.py), a
graceful stop on SIGTERM / SIGUSR1 (train.py, DDP, extend.py, sweep.sh), and a write that fails on a
full disk (one line, nothing finished lost, then --resume finishes with identical metrics).

Faults are injected in the style of test_faults.py: real processes get real signals; a full disk is
builtins.open handing one named file (or its NAME.tmpPID) a file object whose writes raise ENOSPC
after a few bytes, in this process, so that every writer (torch.save, json, shards, the log) meets
it through its own code path. The runs are test_faults.py's tiny ones (its `env` fixture).
"""
import builtins
import contextlib
import errno
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from test_faults import call, env, one_line, rows, run_main, spawn, strict_json, tree  # noqa: F401 (env: fixture)
import cli
from tools import cost
import data
import evaluate
from tools import export
import extend
import train
from model import load_checkpoint

SWEEP = os.path.join(ROOT, "sweep.sh")

# -----------------------------------------------------------------------------
# --cost: a hand sum over a small grid


def hand_grid(tmp):
    """Three jobs and their costs by hand: the 0.1M preset at vocab 512 has 98,624 non-embedding
    parameters (2 blocks of 4 x 64^2 attention + 2 x 64 x 256 MLP + 2 x 64 norm gains, and a final
    norm of 64) and 131,392 in all (+ 512 x 64 embedding); block matrices 98,304 (Muon), the rest
    33,088 (AdamW). A trained token at context T costs 6 x (98,624 + 512 x 64) + 12 x 2 x 64 x T."""
    base = (f"python train.py --size 0.1M --vocab_size 512 --batch_size 8 --iters 10 --eval_interval 5 "
            f"--eval_tokens 1000 --ptq_bits '' --block_size 32")
    run = os.path.join(tmp, "a")
    lines = [
        f"a\t{base} --out_dir {run} && python evaluate.py {run} --tasks ppl --lengths 64 --ppl_tokens 4096 "
        f"--no_probes --no_longppl",
        f"b\t{base} --bits 4 --out_dir {tmp}/b",
        f"c\t{base} --out_dir {tmp}/c && python extend.py {tmp}/c --method ntk --factor 2 --iters 4 --out_dir {tmp}/c2",
    ]
    fpt = lambda T: 6 * (98624 + 512 * 64) + 12 * 2 * 64 * T
    val = 10000                                 # --val_tokens
    weights, state = 131392 * 4, 98304 * 4 + 33088 * 8
    run_train = 10 * 8 * 32 * fpt(32)           # 10 steps of 8 x 32 tokens
    quick = 2 * 1000                            # evals at steps 5 and 10, 1000 tokens each
    kept = 2 * (weights + state)                # ckpt.pt, ckpt_warmdown.pt (wsd, warmdown 0.33)
    a = dict(tokens=2560, train_flops=run_train, ckpt_bytes=kept,
             eval_flops=(quick + val) * fpt(32) / 3 + 4096 * fpt(64) / 3)  # + evaluate.py's 4096 ppl tokens at 64
    b = dict(a, eval_flops=(quick + 2 * val) * fpt(32) / 3)  # QAT: the final eval quantised and full precision
    # extension: context 64, batch 8 x 32 / 64 = 4 sequences, 4 steps; one quick eval (step 4); it keeps
    # ckpt.pt, ckpt_warmdown.pt and init.pt (the weights)
    c = dict(tokens=2560 + 4 * 4 * 64, train_flops=run_train + 4 * 4 * 64 * fpt(64),
             eval_flops=(quick + val) * fpt(32) / 3 + (1000 + val) * fpt(64) / 3, ckpt_bytes=2 * kept + weights)
    return lines, dict(a=a, b=b, c=c)


def test_cost_equals_the_hand_sum(tmp_path):
    lines, want = hand_grid(str(tmp_path))
    cc = cost.CostConfig(mfu=0.5, gpu="A100", val_tokens=10000, step_floor=0)  # FLOPs alone: the floor below
    rows_, peak = cost.costs(lines, cc)
    assert peak == 312e12
    for name, got in rows_:
        assert got["params"] == 131392
        for k, v in want[name].items():
            assert got[k] == pytest.approx(v, rel=1e-12), (name, k)
        assert got["gpu_hours"] == pytest.approx((want[name]["train_flops"] + want[name]["eval_flops"]) / (0.5 * 312e12) / 3600)
    flops = sum(w["train_flops"] + w["eval_flops"] for w in want.values())
    gb = sum(w["ckpt_bytes"] for w in want.values()) / 1e9
    assert cost.total_line(rows_, cc, peak) == (f"total: {flops:.3g} FLOPs, {flops / (0.5 * 312e12) / 3600:.4g} GPU-hours "
                                                f"at MFU 0.5 on A100 (peak 312 TFLOP/s), {gb:.3g} GB of checkpoints")
    slow, _ = cost.costs(lines, cost.CostConfig(mfu=0.5, gpu="A100", val_tokens=10000, startup=36, step_floor=0,
                                                chain=False))
    for (name, c), (_, d) in zip(rows_, slow):  # 36 s per process: 0.01 h per step of the job
        assert d["gpu_hours"] - c["gpu_hours"] == pytest.approx(0.01 * {"a": 2, "b": 1, "c": 2}[name])
    chained, _ = cost.costs(lines, cost.CostConfig(mfu=0.5, gpu="A100", val_tokens=10000, startup=36, step_floor=0))
    for (name, c), (_, d) in zip(rows_, chained):  # tools/chain.py (sweep.sh's default): one process a job
        assert d["gpu_hours"] - c["gpu_hours"] == pytest.approx(0.01) and d["processes"] == 1
    fast, _ = cost.costs(lines, cost.CostConfig(mfu=0.5, gpu="A100", val_tokens=10000, step_floor=0, eval_speedup=2))
    for name, d in fast:  # evaluation FLOPs at twice the training rate
        w = want[name]
        assert d["gpu_hours"] == pytest.approx((w["train_flops"] + w["eval_flops"] / 2) / (0.5 * 312e12) / 3600)
    with pytest.raises(cli.UserError, match="EVAL_SPEEDUP"):
        cost.costs(lines, cost.CostConfig(eval_speedup=0))
    assert not os.listdir(tmp_path)  # nothing trained, nothing written


def test_cost_prices_retrieval_without_ranking_on_the_answer_row_only():
    """evaluate.py --rank false scores the answer's row only (exact match), not its distractors': the cost
    model prices 1 row per sample there, 1 + N_DISTRACTORS with the ranking (it priced 5 before: the
    tiny longctx grid's evaluations came out about twice what they spend)."""
    import tasks
    base = "python train.py --size 0.1M --block_size 64 --iters 2 --vocab_size 1024 --ptq_bits '' --out_dir R"
    ev = " && python evaluate.py R --lengths 64,128 --tasks passkey_short --no_probes --depths 2 --samples 3 --score exact"
    train_only = cost.job_cost(base)["eval_flops"]
    ranked, exact = (cost.job_cost(base + ev + extra)["eval_flops"] - train_only for extra in ("", " --rank false"))
    assert exact > 0 and ranked / exact == pytest.approx(1 + tasks.N_DISTRACTORS, rel=1e-12)


def test_cost_prices_the_final_passes_on_final_eval_tokens():
    """train.py's final passes score --final_eval_tokens of the val split (0 = all of it): so does
    --cost, on a large val split (each pass of the QAT run: deployed and full precision)."""
    from model import GPTConfig
    val = 10 ** 8
    flops = {}
    for fet in (0, 2 ** 23):
        cfg = train.parse_args(["--size", "1M", "--bits", "6", "--iters", "100", "--eval_interval", "100",
                                "--final_eval_tokens", str(fet)])
        mcfg = train.model_config(cfg, 4096)
        flops[fet] = cost.run_cost(cfg, mcfg, val)["eval_flops"]
        per_token = cost.forward_flops(mcfg, cfg.optimizer, mcfg.block_size)
    assert flops[0] - flops[2 ** 23] == pytest.approx(2 * (val - 2 ** 23) * per_token, rel=1e-12)


def test_cost_checkpoint_bytes_match_a_real_run(env):
    """The checkpoint sizes --cost predicts are the files a run keeps (torch.save adds a few KB)."""
    r = env.result
    cfg = train.TrainConfig(**{**r["config"], "model": r["config"]["model"]})
    from model import GPTConfig
    want = cost.run_cost(cfg, GPTConfig.from_dict(r["model_config"]))["ckpt_bytes"]
    got = sum(os.path.getsize(os.path.join(env.run, n)) for n in os.listdir(env.run) if n.endswith(".pt"))
    assert sorted(n for n in os.listdir(env.run) if n.endswith(".pt")) == ["ckpt.pt", "ckpt_warmdown.pt"]
    assert want < got < want * 1.03


def sweep_cost(study, **env):
    e = {k: v for k, v in os.environ.items()
         if k not in ("SCALE", "OUT", "PYTHON", "MFU", "GPU", "PEAK", "VAL_TOKENS", "JOBS_PER_GPU", "STEP_FLOOR")}
    return subprocess.run(["bash", SWEEP, "--cost", study], env={**e, "PYTHON": sys.executable, **env},
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_sweep_cost_lists_every_job_and_the_total():
    p = sweep_cost("posenc")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    n = int(subprocess.run(["bash", SWEEP, "--count", "posenc"], capture_output=True, text=True, cwd=ROOT).stdout)
    assert len(out) == 1 + n + 2 and out[0].split()[:3] == ["job", "params", "tokens"]
    m = re.fullmatch(r"total: (\S+) FLOPs, (\S+) GPU-hours at MFU 0.4 on H100 \(peak 989 TFLOP/s\), (\S+) GB of "
                     r"checkpoints", out[-1])
    assert m, out[-1]



def test_cost_scales_with_mfu_and_gpu(monkeypatch, capsys):
    """Half the MFU and a 312 TFLOP/s peak (A100): 2 x 989/312 the hours (one job, in process)."""
    hours = {}
    for argv in (["--step_floor", "0"], ["--step_floor", "0", "--mfu", "0.2", "--gpu", "A100"]):
        monkeypatch.setattr(sys, "stdin", io.StringIO("a\tpython train.py --size 1M --iters 200\n"))
        capsys.readouterr()
        assert run_main(cost.main, argv)[0] == 0
        hours[len(argv) > 2] = float(re.search(r"([\d.e+-]+) GPU-hours", capsys.readouterr().out.splitlines()[-1])[1])
    assert hours[False] > 0 and hours[True] == pytest.approx(hours[False] * 2 * 989 / 312, rel=1e-3)


def test_cost_host_floor_covers_launch_bound_jobs(monkeypatch, capsys):
    """A small model's step costs at least --step_floor seconds of the GPU's time whatever its FLOPs
    (kernel launches and Python on the host), shared by the --jobs_per_gpu jobs packed on one GPU; a
    large model's FLOPs outweigh it. sweep.sh passes JOBS_PER_GPU and STEP_FLOOR."""
    lines = ["small\tpython train.py --size 0.1M --iters 3000 --block_size 64",
             "large\tpython train.py --size 100M --iters 200 --block_size 1024 --batch_size 64"]
    hours = {}
    for floor, packed in ((0.0, 1), (0.01, 1), (0.01, 4)):
        rows_, _ = cost.costs(lines, cost.CostConfig(step_floor=floor, jobs_per_gpu=packed))
        hours[floor, packed] = {name: c["gpu_hours"] for name, c in rows_}
        assert [c["steps"] for _, c in rows_] == [3000, 200]
    assert hours[0.01, 1]["small"] == pytest.approx(3000 * 0.01 / 3600) and hours[0.01, 1]["small"] > 100 * hours[0.0, 1]["small"]
    assert hours[0.01, 4]["small"] == pytest.approx(3000 * 0.01 / 4 / 3600)
    assert hours[0.0, 1]["large"] == hours[0.01, 1]["large"] == hours[0.01, 4]["large"] > 200 * 0.01 / 3600
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    assert run_main(cost.main, ["--jobs_per_gpu", "4"])[0] == 0
    assert "host floor 10 ms a step / 4 job(s) per GPU: 1 of 2 jobs bound by it" in capsys.readouterr().out
    p = sweep_cost("lengen", JOBS_PER_GPU="4", STEP_FLOOR="0.02")
    assert p.returncode == 0 and "host floor 20 ms a step / 4 job(s) per GPU" in p.stdout, p.stderr


def test_cost_refuses_an_unknown_gpu_or_mfu(monkeypatch, capsys):
    for argv, match in ((["--gpu", "Z80"], "unknown GPU 'Z80'"), (["--mfu", "1.5"], "MFU 1.5"),
                        (["--step_floor", "-1"], "STEP_FLOOR -1"), (["--jobs_per_gpu", "0"], "JOBS_PER_GPU 0")):
        monkeypatch.setattr(sys, "stdin", io.StringIO("python train.py --iters 2\n"))
        one_line(*call(cost.main, argv, capsys), match)


# -----------------------------------------------------------------------------
# Graceful stop: a real train.py process, signalled mid-run, then --resume


LONG = ["--iters", "40", "--block_size", "64", "--batch_size", "16", "--eval_interval", "20"]  # ~1-2 s of steps


@pytest.fixture(scope="module")
def uninterrupted(env, tmp_path_factory):
    run = str(tmp_path_factory.mktemp("uninterrupted") / "run")
    assert run_main(train.main, env.flags(run, *LONG))[0] == 0
    return strict_json(os.path.join(run, "result.json")), rows(run)


def signal_after(p, run, sig, n_rows=3, timeout=120):
    """Send sig to process p once its log holds n_rows steps; -> (status, stderr)."""
    log, deadline = os.path.join(run, "log.jsonl"), time.time() + timeout
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(log) and open(log).read().count("\n") >= n_rows:
            break
        time.sleep(0.02)
    p.send_signal(sig)
    _, err = p.communicate(timeout=timeout)
    return p.returncode, err


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGUSR1"])
def test_signal_stops_at_a_step_then_resume_equals_uninterrupted(env, uninterrupted, sig, tmp_path, capsys):
    run = str(tmp_path / "run")
    code, err = signal_after(spawn("train.py", env.flags(run, *LONG)), run, getattr(signal, sig))
    step = load_checkpoint(os.path.join(run, "ckpt.pt"))["step"]
    assert code == cli.STOPPED == 75 and 3 <= step < 40, (code, err)
    assert err.strip().splitlines()[-1] == f"stopped by {sig} at step {step}; ckpt.pt written; rerun with --resume"
    assert len(rows(run)) == step and not os.path.exists(os.path.join(run, "result.json"))
    assert not [n for n in os.listdir(run) if ".tmp" in n]
    code, err = call(train.main, env.flags(run, *LONG, "--resume"), capsys)
    assert code == 0, err
    ref, ref_log = uninterrupted
    assert strict_json(os.path.join(run, "result.json"))["metrics"] == ref["metrics"]  # every metric, exactly
    assert rows(run) == ref_log


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(argv):
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                             str(free_port()), os.path.join(ROOT, "train.py"), *argv], cwd=ROOT,
                            env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def worker(p, rank, timeout=120):
    """PID of torchrun p's worker of this rank (its children, told apart by their RANK)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for pid in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split():
            with contextlib.suppress(OSError):
                if f"RANK={rank}".encode() in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
                    return int(pid)
        time.sleep(0.05)
    raise AssertionError("no worker")


def test_ddp_ranks_stop_at_one_step_then_resume_equals_uninterrupted(env, tmp_path):
    """torchrun, 2 gloo processes: SIGUSR1 to rank 1 only; rank 0 learns of it through the per-step
    all-reduce, so both stop after the same step and rank 0 writes the checkpoint."""
    ref = str(tmp_path / "ref")
    p = torchrun(env.flags(ref, *LONG))
    assert p.wait(timeout=300) == 0, p.stderr.read()[-2000:]
    p.stderr.close()
    run = str(tmp_path / "run")
    p = torchrun(env.flags(run, *LONG))
    rank1 = worker(p, 1)
    log, deadline = os.path.join(run, "log.jsonl"), time.time() + 120
    while time.time() < deadline and not (os.path.exists(log) and open(log).read().count("\n") >= 3):
        time.sleep(0.02)
    os.kill(rank1, signal.SIGUSR1)
    _, err = p.communicate(timeout=300)
    step = load_checkpoint(os.path.join(run, "ckpt.pt"))["step"]
    assert 3 <= step < 40 and len(rows(run)) == step
    assert err.count("stopped by SIGUSR1 at step") == 1 and f"at step {step}; ckpt.pt written" in err  # rank 0's line
    # the first rank to exit reports the stopped status; torchrun then sends SIGTERM to the others, which
    # (already stopped after the same step, by the all-reduce) report 75 too or, if still tearing down, -15
    codes = re.findall(r"exitcode  : (-?\d+)", err)
    assert "75" in codes and set(codes) <= {"75", "-15"} and len(codes) in (1, 2), err[-3000:]
    p = torchrun(env.flags(run, *LONG, "--resume"))
    assert p.wait(timeout=300) == 0, p.stderr.read()[-2000:]
    p.stderr.close()
    assert strict_json(os.path.join(run, "result.json"))["metrics"] == strict_json(os.path.join(ref, "result.json"))["metrics"]
    assert rows(run) == rows(ref)


def signal_in_step(monkeypatch, step, sig, folder=""):
    """This process signals itself during optimizer step `step` (0-based) of the run in folder."""
    real = train.train_step

    def step_fn(run, mult):
        if run.step == step and run.out_dir.endswith(folder):
            os.kill(os.getpid(), sig)
        return real(run, mult)
    monkeypatch.setattr(train, "train_step", step_fn)


def test_signal_in_the_last_step_stops_before_the_final_evaluation(env, tmp_path, capsys, monkeypatch):
    run = str(tmp_path / "run")
    with monkeypatch.context() as m:
        signal_in_step(m, 11, signal.SIGTERM)
        code, err = call(train.main, env.flags(run), capsys)
    assert code == 75 and err == "stopped by SIGTERM at step 12; ckpt.pt written; rerun with --resume\n"
    assert not os.path.exists(os.path.join(run, "result.json"))
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers of before are back
    code, err = call(train.main, env.flags(run, "--resume"), capsys)
    assert code == 0, err
    assert strict_json(os.path.join(run, "result.json"))["metrics"] == env.result["metrics"]


def test_extend_stage_stopped_then_the_same_command_finishes(env, tmp_path, capsys, monkeypatch):
    """extend.py --stages 2, SIGUSR1 during stage 1: the stage checkpoints, the command stops with one
    line; the same command again resumes stage 1 and runs stage 2, as an uninterrupted extension."""
    argv = lambda out: [env.run, "--method", "yarn", "--factor", "4", "--stages", "2", "--iters", "8",
                        "--out_dir", out, "--quiet", "--device", "cpu"]
    ref = str(tmp_path / "ref")
    assert call(extend.main, argv(ref), capsys)[0] == 0
    out = str(tmp_path / "ext")
    with monkeypatch.context() as m:
        signal_in_step(m, 1, signal.SIGUSR1, "stage1")
        code, err = call(extend.main, argv(out), capsys)
    stage1 = os.path.join(out, "stage1")
    assert code == 75 and err == (f"{stage1}: stopped by SIGUSR1 at step 2; ckpt.pt written; rerun the same "
                                  "command to resume\n"), err
    assert [n for n in os.listdir(out) if n != ".lock"] == ["stage1"] and not os.path.exists(os.path.join(stage1, "result.json"))
    code, err = call(extend.main, argv(out), capsys)
    assert code == 0, err
    for sub in ("stage1", ""):
        got, want = (strict_json(os.path.join(d, sub, "result.json")) for d in (out, ref))
        assert got["metrics"] == want["metrics"], sub


# -----------------------------------------------------------------------------
# A full disk: one named file's writes fail


class FullDisk:
    """An open file on a disk that fills up: `free` bytes go through, then writes fail with err."""

    def __init__(self, f, free, err):
        self._f, self._free, self._err = f, free, err

    def write(self, b):
        n = len(b) if isinstance(b, str) else memoryview(b).nbytes
        if n <= self._free:
            self._free -= n
            return self._f.write(b)
        if self._free:
            self._f.write(b[:self._free] if isinstance(b, str) else memoryview(b).cast("B")[:self._free])
            self._free = 0
        raise OSError(self._err, os.strerror(self._err))

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


@contextlib.contextmanager
def disk_full(monkeypatch, name, nth=1, free=100, err=errno.ENOSPC, folder=None):
    """The nth opening for writing of a file named name (directly or as name.tmpPID) gets a FullDisk;
    -> a dict whose "before" is tree(folder) just before that opening."""
    real, seen, out = builtins.open, [0], {}

    def fake(file, mode="r", *a, **k):
        if any(c in mode for c in "wax") and re.sub(r"\.tmp\d+$", "", os.path.basename(str(file))) == name:
            seen[0] += 1
            if seen[0] == nth:
                out["before"] = tree(folder) if folder and os.path.isdir(folder) else {}
                return FullDisk(real(file, mode, *a, **k), free, err)
        return real(file, mode, *a, **k)
    with monkeypatch.context() as m:
        m.setattr(builtins, "open", fake)
        yield out
    assert seen[0] >= nth, f"{name} was opened for writing {seen[0]} times, not {nth}"


def full_error(err, path, code="ENOSPC"):
    one_line(1, err, f"error: cannot write {path} (")
    assert re.search(rf" bytes\): \S.* \[{code}\]; (the earlier \S+ is kept|nothing written)$", err.strip()), err


def log_bytes(log, n):
    return sum(len(json.dumps(r) + "\n") for r in log[:n])


# (case, file, nth opening, free bytes, step of the ckpt.pt left, errno); --ckpt_every 4: ckpt.pt at
# steps 4, 8 and the final 12, ckpt_warmdown.pt at 8; log.jsonl is opened by truncate_log, then appended
TRAIN_CASES = [
    ("periodic ckpt.pt", "ckpt.pt", 2, 100, 4, errno.ENOSPC),
    ("final ckpt.pt", "ckpt.pt", 3, 100, 8, errno.EDQUOT),
    ("ckpt_warmdown.pt", "ckpt_warmdown.pt", 1, 100, 8, errno.ENOSPC),
    ("log row", "log.jsonl", 2, None, 4, errno.EIO),
    ("record result.json", "result.json", 1, 10, 12, errno.ENOSPC),
]


@pytest.mark.parametrize("case,name,nth,free,step,err", TRAIN_CASES, ids=[c[0] for c in TRAIN_CASES])
def test_train_write_fails_then_resume(env, case, name, nth, free, step, err, tmp_path, capsys, monkeypatch):
    run = str(tmp_path / "run")
    flags = env.flags(run, "--ckpt_every", "4")
    if free is None:
        free = log_bytes(env.log, 6) + 10  # the row of step 7 is cut short
    with disk_full(monkeypatch, name, nth, free, err, run) as at:
        code, out = call(train.main, flags, capsys)
    full_error(out, os.path.join(run, name), errno.errorcode[err])
    assert code == 1 and not [n for n in os.listdir(run) if ".tmp" in n]
    assert load_checkpoint(os.path.join(run, "ckpt.pt"))["step"] == step
    now = tree(run)
    for k in at["before"]:  # every file there before the failed write is as it was (the log is appended)
        assert k == "log.jsonl" or now[k] == at["before"][k], k
    assert name == "log.jsonl" or set(now) == set(at["before"])  # (the log is opened before step 4's ckpt.pt)
    assert rows(run) == env.log[:len(rows(run))]  # whole rows only (a cut row was taken back)
    code, out = call(train.main, flags + ["--resume"], capsys)
    assert code == 0, out
    assert strict_json(os.path.join(run, "result.json"))["metrics"] == env.result["metrics"]
    assert rows(run) == env.log


def test_extension_init_write_fails_then_rerun(env, tmp_path, capsys, monkeypatch):
    argv = lambda out: [env.run, "--factor", "2", "--iters", "3", "--out_dir", out, "--quiet", "--device", "cpu"]
    ref, out = str(tmp_path / "ref"), str(tmp_path / "ext")
    assert call(extend.main, argv(ref), capsys)[0] == 0
    with disk_full(monkeypatch, "init.pt"):
        code, err = call(extend.main, argv(out), capsys)
    full_error(err, os.path.join(out, "init.pt"))
    assert not [n for n in os.listdir(out) if n != ".lock"]
    assert call(extend.main, argv(out), capsys)[0] == 0
    assert strict_json(os.path.join(out, "result.json"))["metrics"] == strict_json(os.path.join(ref, "result.json"))["metrics"]


def test_evaluation_record_write_fails_then_rerun(env, tmp_path, capsys, monkeypatch):
    run = env.copy(tmp_path / "run")
    argv = [run, "--tasks", "ppl", "--lengths", "32,64", "--no_probes", "--quiet", "--device", "cpu"]
    before = tree(run)
    with disk_full(monkeypatch, "eval.json"):
        code, err = call(evaluate.main, argv, capsys)
    full_error(err, os.path.join(run, "eval.json"))
    assert tree(run) == before
    assert call(evaluate.main, argv, capsys)[0] == 0 and strict_json(os.path.join(run, "eval.json"))["ppl"]


@pytest.mark.parametrize("name", ["model_int4.pt", "export.json"])
def test_export_write_fails_then_rerun(env, name, tmp_path, capsys, monkeypatch):
    run = env.copy(tmp_path / "run")
    before = tree(run)
    with disk_full(monkeypatch, name):
        code, err = call(export.main, [run, "--bits", "4", "--device", "cpu"], capsys)
    full_error(err, os.path.join(run, name))
    now = tree(run)
    assert {k: v for k, v in now.items() if k in before} == before and set(now) - set(before) <= {"model_int4.pt"}
    assert call(export.main, [run, "--bits", "4", "--device", "cpu"], capsys)[0] == 0
    assert strict_json(os.path.join(run, "export.json"))["val_loss"] > 0


@pytest.mark.parametrize("name", ["train_000000.bin", "val_docs.npy", "manifest.json"])
def test_prepare_write_fails_then_rerun(env, name, tmp_path, capsys, monkeypatch):
    argv = lambda out: ["prepare", env.corpus, out, "--vocab_size", "512", "--val_frac", "0.34", "--quiet"]
    ref, out = str(tmp_path / "ref"), str(tmp_path / "prep")
    assert call(data.main, argv(ref), capsys)[0] == 0
    with disk_full(monkeypatch, name, err=errno.ENOSPC):
        code, err = call(data.main, argv(out), capsys)
    full_error(err, os.path.join(out, name))
    assert not os.path.exists(out)  # a new folder: removed again, temp files and all
    assert call(data.main, argv(out), capsys)[0] == 0
    tokens = lambda d: {k: v for k, v in tree(d).items() if k.endswith((".bin", ".npy"))}
    assert tokens(out) == tokens(ref)


def test_refused_vocab_leaves_the_prepared_folder_untouched(env, tmp_path, capsys):
    """A copy without its mtimes makes a start re-hash and restamp manifest.json; a refused command
    (another --vocab_size) must not, an accepted train.py does once every check passed."""
    src = str(tmp_path / "src")
    assert call(data.main, ["prepare", env.corpus, src, "--vocab_size", "512", "--val_frac", "0.34", "--quiet"],
                capsys)[0] == 0
    folder = str(tmp_path / "prep")
    shutil.copytree(src, folder, copy_function=shutil.copy)
    before = tree(folder)
    run = str(tmp_path / "run")
    one_line(*call(train.main, env.flags(run, "--vocab_size", "1024", data=folder), capsys), "another tokenizer")
    assert tree(folder) == before and not os.path.exists(run)
    one_line(*call(train.main, env.flags(run, "--n_layer", "0", data=folder), capsys))  # refused before the data
    assert tree(folder) == before
    assert call(train.main, env.flags(run, "--iters", "2", data=folder), capsys)[0] == 0
    after = tree(folder)
    assert after["manifest.json"] != before["manifest.json"] and {k: after[k] for k in after if k != "manifest.json"} \
        == {k: before[k] for k in before if k != "manifest.json"}


# -----------------------------------------------------------------------------
# sweep.sh: stopped jobs are reported as such; --task passes the signal on and requeues on SIGUSR1

STUB = r"""#!/usr/bin/env bash
# fake python: a job that stops like train.py does on TERM / USR1 (exit 75), or at once with STUB_STOP
echo $$ >> "$STUB_PIDS"
[[ -n ${STUB_STOP:-} ]] && exit 75
trap 'echo "$1 TERM" >> "$STUB_LOG"; exit 75' TERM
trap 'echo "$1 USR1" >> "$STUB_LOG"; exit 75' USR1
sleep 60 & wait
"""


@pytest.fixture
def stub_env(tmp_path):
    stub, bin_ = tmp_path / "stub", tmp_path / "bin"
    stub.write_text(STUB)
    stub.chmod(0o755)
    bin_.mkdir()
    (bin_ / "scontrol").write_text('#!/bin/sh\necho "scontrol $*" >> "$STUB_LOG"\n')
    (bin_ / "scontrol").chmod(0o755)
    e = {k: v for k, v in os.environ.items() if k not in ("SCALE", "JOBS", "GPUS", "DATA", "EXTRA", "SLURM_JOB_ID")}
    return dict(e, PYTHON=str(stub), OUT=str(tmp_path / "out"), STUB_LOG=str(tmp_path / "log"),
                STUB_PIDS=str(tmp_path / "pids"), PATH=f"{bin_}:{e['PATH']}", JOBS="2")


def test_pool_reports_stopped_jobs_as_resumable(stub_env):
    p = subprocess.run(["bash", SWEEP, "posenc"], env=dict(stub_env, STUB_STOP="1"), capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    n = int(subprocess.run(["bash", SWEEP, "--count", "posenc"], capture_output=True, text=True, cwd=ROOT).stdout)
    assert p.returncode == 75, p.stderr
    assert p.stderr.count("STOPPED ") == n and "FAILED" not in p.stderr
    assert f"{n} jobs stopped by a signal" in p.stderr and "rerun to resume" in p.stderr


@pytest.mark.parametrize("sig,requeue", [("SIGUSR1", True), ("SIGTERM", False)])
def test_task_passes_the_signal_on_and_requeues_on_usr1(stub_env, sig, requeue):
    p = subprocess.Popen(["bash", SWEEP, "--task", "3", "qat"], env=dict(stub_env, SLURM_JOB_ID="4242"), cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not os.path.exists(stub_env["STUB_PIDS"]):
        time.sleep(0.05)
    time.sleep(0.3)  # the stub's traps are set
    os.kill(p.pid, getattr(signal, sig))  # the batch shell only, as --signal=B: does
    _, err = p.communicate(timeout=60)
    assert p.returncode == 75, err
    log = open(stub_env["STUB_LOG"]).read().splitlines()
    assert log[0] == f"train.py {sig[3:]}"  # the job got the signal itself
    assert ("scontrol requeue 4242" in log) == requeue and ("requeued SLURM job 4242" in err) == requeue
    assert f"stopped by {sig}, resumable" in err


def test_stop_flags_summed_over_ranks_name_the_signal_max_would(monkeypatch):
    """The DDP step folds one flag per stop signal into its loss all-reduce (a sum): the summed flags
    name what the all-reduce MAX of signal numbers named (SIGTERM over SIGUSR1; none)."""
    ranks = {}
    for name, num in (("none", 0), ("usr1", signal.SIGUSR1), ("term", signal.SIGTERM)):
        monkeypatch.setitem(cli._STOP, "signum", int(num))
        ranks[name] = cli.stop_flags()
    add = lambda *fs: [sum(x) for x in zip(*fs)]
    assert cli.stop_from_flags(add(ranks["none"], ranks["none"])) == ""
    assert cli.stop_from_flags(add(ranks["none"], ranks["usr1"])) == "SIGUSR1"
    assert cli.stop_from_flags(add(ranks["usr1"], ranks["term"])) == "SIGTERM" == signal.Signals(
        max(signal.SIGUSR1, signal.SIGTERM)).name


def test_cost_prices_final_eval_tokens_not_the_whole_val_split():
    """cost.run_cost scores final_eval_tokens per final pass (the whole val split at 0), as train.py
    does: on a 100M-token val split an INT6 run's two final passes cost 2 x final_eval_tokens."""
    from model import GPTConfig
    mcfg = GPTConfig(vocab_size=4096, block_size=256, n_layer=2, n_head=4, n_embd=64, bits=6)
    per = lambda **kw: cost.run_cost(train.TrainConfig(iters=100, eval_interval=50, eval_tokens=16384, **kw), mcfg,
                                     val_tokens=100_000_000)["eval_flops"]
    one = cost.forward_flops(mcfg, "muon", 256)
    assert per(final_eval_tokens=0) == pytest.approx((2 * 16384 + 2 * 100_000_000) * one)
    assert per(final_eval_tokens=1_000_000) == pytest.approx((2 * 16384 + 2 * 1_000_000) * one)
    assert per(final_eval_tokens=10 ** 9) == per(final_eval_tokens=0)  # capped at the split
