"""Fault injection (issue 17): no state a kill, a second writer, a NaN, a corrupt cache or a bad flag
can leave behind.

- Kills (SIGKILL of a real `python train.py` / `python extend.py` process) at the three dangerous
  moments: after the final ckpt.pt and before result.json, during `--overwrite`, during stage 2 of
  `extend.py --stages 2`. No hook in the code: every write goes through NAME.tmpPID (cli.atomic_write,
  model.save_checkpoint), so a named pipe made at that path before the process gets there stops
  it exactly at that write (opening a pipe for writing waits for a reader), and the test kills it
  there. Then the same command (with --resume for train.py) must complete the run.
- A second writer (train.py fresh, --overwrite, --resume; extend.py) on a folder another process is
  training into: one line, nothing changed.
- Every corruption of a prepared data folder (refused on one line) and of the raw-source cache
  (noted, rebuilt, same result), through train.py's command line.
- Bad input: every case of the issue through the scripts' own `main(argv)` (the real parser and
  error handler, in this process: the interpreter start is the only part left out), checking the
  exit status, one line on stderr and that every file of the run folder is byte-identical after.
- sweep.sh: SIGHUP stops the jobs (their own process groups), not only the pool.
"""
import glob
import hashlib
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest
import torch

from conftest import ROOT, write_corpus
import analyze
import data
import evaluate
from tools import export
import extend
import train
from model import load_checkpoint

FLAGS = ["--size", "0.1M", "--block_size", "32", "--batch_size", "8", "--iters", "12", "--eval_interval", "6",
         "--eval_tokens", "1024", "--vocab_size", "512", "--val_frac", "0.34", "--ptq_bits", "", "--quiet",
         "--device", "cpu"]  # ckpt_every 100: the only ckpt.pt is the final one; ckpt_warmdown.pt at step 8


class Env:
    """The shared fixture: a tiny corpus, its cache, one finished run and its record."""

    def flags(self, out, *extra, data=None, cache=None):
        return FLAGS + ["--data", data or self.corpus, "--cache_dir", cache or self.cache, "--out_dir", str(out),
                        *extra]

    def copy(self, dst, finished=True):
        """A copy of the finished run (without result.json: an unfinished run at its last step)."""
        shutil.copytree(self.run, dst)
        if not finished:
            os.remove(os.path.join(dst, "result.json"))
        return str(dst)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    e = Env()
    d = tmp_path_factory.mktemp("faults")
    e.dir, e.corpus, e.cache, e.run = d, write_corpus(str(d / "corpus")), str(d / "cache"), str(d / "run")
    assert run_main(train.main, e.flags(e.run))[0] == 0
    e.result = json.load(open(os.path.join(e.run, "result.json")))
    e.log = rows(e.run)
    return e


def run_main(main, argv):
    """A script's main(argv) -> (exit status, None): the command line without the interpreter start."""
    try:
        return main(argv) or 0, None
    except SystemExit as e:
        return e.code, None


def call(main, argv, capsys):
    """-> (exit status, stderr) of main(argv); an exception other than SystemExit fails the test."""
    capsys.readouterr()
    code, _ = run_main(main, argv)
    return code, capsys.readouterr().err


def one_line(code, err, match=""):
    assert code not in (0, None) and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (code, err)
    assert "error" in err and match in err, err


def tree(folder):
    """{path relative to folder: sha256} of every file under folder."""
    out = {}
    for root, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(root, n)
            if not os.path.isfile(p):  # a named pipe left by a killed process: by name only
                out[os.path.relpath(p, folder)] = "pipe"
                continue
            with open(p, "rb") as f:
                out[os.path.relpath(p, folder)] = hashlib.file_digest(f, "sha256").hexdigest()
    return out


def copy_run(src, dst):
    """shutil.copytree that also copies named pipes (left by the killed processes below)."""
    def copy(a, b):
        if stat.S_ISFIFO(os.lstat(a).st_mode):
            os.mkfifo(b)
        else:
            shutil.copy2(a, b)
    shutil.copytree(src, dst, copy_function=copy)
    return str(dst)


def strict_json(path):
    """json.load that refuses NaN / Infinity, as a strict reader (or pandas) would."""
    def refuse(c):
        raise AssertionError(f"{path} holds {c}")
    with open(path) as f:
        return json.loads(f.read(), parse_constant=refuse)


def rows(run):
    return [json.loads(line) for line in open(os.path.join(run, "log.jsonl"))]


# -----------------------------------------------------------------------------
# Kills of real processes, stopped exactly at one write by a named pipe

def spawn(script, argv):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, os.path.join(ROOT, script), *argv], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def stop_at(folder, name, p):
    """Process p will stop when it writes folder/name (atomic writes go through name.tmp<pid>)."""
    os.makedirs(folder, exist_ok=True)
    os.mkfifo(os.path.join(folder, f"{name}.tmp{p.pid}"))


def wait_stopped(p, timeout=180):
    """Until p waits at a named pipe (Linux: /proc/PID/wchan); then SIGKILL it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if p.poll() is not None:
            raise AssertionError(f"exited {p.returncode} before the pipe: {p.stderr.read()}")
        try:
            if open(f"/proc/{p.pid}/wchan").read().strip() in ("wait_for_partner", "fifo_open"):
                break
        except OSError:
            pass
        time.sleep(0.02)
    else:
        os.killpg(p.pid, signal.SIGKILL)
        raise AssertionError(f"never reached the pipe: {p.stderr.read() if p.poll() is not None else ''}")


def kill(p):
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    p.stderr.close()


@pytest.fixture(scope="module")
def killed(env, tmp_path_factory):
    """The finished run's command, SIGKILLed after its final ckpt.pt, at the write of result.json.
    While it waits there (holding its folder), second writers try the same folder: their
    (status, stderr) and whether the folder changed are recorded for test_second_writer_is_refused."""
    out = str(tmp_path_factory.mktemp("killed") / "run")
    p = spawn("train.py", env.flags(out))
    stop_at(out, "result.json", p)
    wait_stopped(p)
    before, attempts = tree(out), {}
    for name, main, argv in [
            ("train.py fresh, another seed", train.main, env.flags(out, "--seed", "1")),
            ("train.py --overwrite", train.main, env.flags(out, "--overwrite")),
            ("train.py --resume", train.main, env.flags(out, "--resume")),
            ("extend.py --overwrite into it", extend.main, [env.run, "--factor", "2", "--out_dir", out, "--overwrite",
                                                            "--quiet"])]:
        buf = io.StringIO()
        real, sys.stderr = sys.stderr, buf
        try:
            code, _ = run_main(main, argv)
        finally:
            sys.stderr = real
        attempts[name] = (code, buf.getvalue())
    unchanged = tree(out) == before
    kill(p)
    return out, p.pid, attempts, unchanged


def test_second_writer_is_refused(killed):
    _, _, attempts, unchanged = killed
    for name, (code, err) in attempts.items():
        assert code == 1 and err.count("\n") == 1 and "another process is training into" in err, (name, err)
    assert unchanged


def test_kill_after_final_checkpoint_then_resume_writes_the_whole_record(env, killed, tmp_path, capsys):
    src, pid, _, _ = killed
    run = copy_run(src, tmp_path / "run")
    names = os.listdir(run)
    assert "ckpt.pt" in names and "result.json" not in names and f"result.json.tmp{pid}" in names
    with open(os.path.join(run, "log.jsonl"), "ab") as f:
        f.write(b'{"step": 13, "lo\n\xff\xfe not UTF-8\n')  # a row cut short, bytes that are not text
    open(os.path.join(run, f"ckpt.pt.tmp{pid}"), "wb").write(b"half a checkpoint")  # a killed write
    open(os.path.join(run, f"x.tmp{os.getpid()}"), "w").write("a write in progress")  # a live process's
    code, err = call(train.main, env.flags(run, "--resume"), capsys)
    assert code == 0, err
    r = strict_json(os.path.join(run, "result.json"))
    for k in ("train_loss", "train_loss_smooth", "val_loss", "val_bpb", "unigram_loss"):
        assert r["metrics"][k] == env.result["metrics"][k], k  # bit-identical to the uninterrupted run
    assert r["tokens_per_s"] > 0 and r["wall_time_s"] > 0 and r["steps"] == 12
    assert rows(run) == env.log  # every step once; the cut row and the junk dropped
    left = sorted(n for n in os.listdir(run) if ".tmp" in n)
    assert left == [f"x.tmp{os.getpid()}"]  # stale temp files removed, a live process's kept


def test_moved_run_resumes_and_names_differing_flags(env, killed, tmp_path, capsys):
    moved = copy_run(killed[0], tmp_path / "elsewhere" / "run")
    before = tree(moved)
    code, err = call(train.main, env.flags(moved, "--resume", "--seed", "1", "--lr", "0.5"), capsys)
    one_line(code, err, "flags differ")
    assert "--lr 1.0 -> 0.5" in err and "--seed 0 -> 1" in err and "out_dir" not in err
    assert tree(moved) == before
    code, err = call(train.main, env.flags(moved, "--resume", cache=str(tmp_path / "new_cache")), capsys)
    assert code == 0, err  # another --out_dir and --cache_dir: paths are not flags of the run
    assert strict_json(os.path.join(moved, "result.json"))["metrics"]["val_loss"] == env.result["metrics"]["val_loss"]


def test_kill_during_overwrite(env, tmp_path, capsys):
    """--overwrite --seed 1 over the finished run, killed at step 8 (writing ckpt_warmdown.pt) with
    a new partial ckpt.pt (--ckpt_every 4: step 8): nothing of the old run may remain to be taken as
    finished, and --resume continues the new run."""
    run = env.copy(tmp_path / "run")
    p = spawn("train.py", env.flags(run, "--overwrite", "--seed", "1", "--ckpt_every", "4"))
    stop_at(run, "ckpt_warmdown.pt", p)
    wait_stopped(p)
    kill(p)
    assert sorted(n for n in os.listdir(run) if ".tmp" not in n) == [".lock", "ckpt.pt", "log.jsonl"]
    assert load_checkpoint(os.path.join(run, "ckpt.pt"))["step"] == 8
    assert [r["step"] for r in rows(run)] == list(range(1, 9)) and rows(run)[0] != env.log[0]  # seed 1's
    before = tree(run)
    for main, argv, match in [(extend.main, [run, "--factor", "2", "--quiet"], "not finished"),
                              (evaluate.main, [run, "--quiet"], "not finished"),
                              (export.main, [run, "--bits", "4"], "not finished"),
                              (train.main, env.flags(run, "--seed", "1"), "unfinished run")]:
        one_line(*call(main, argv, capsys), match)
    assert tree(run) == before
    code, err = call(train.main, env.flags(run, "--overwrite", "--seed", "1", "--ckpt_every", "4", "--resume"), capsys)
    assert code == 0, err
    r = strict_json(os.path.join(run, "result.json"))
    assert r["seed"] == 1 and r["metrics"]["val_loss"] != env.result["metrics"]["val_loss"]
    assert [x["step"] for x in rows(run)] == list(range(1, 13))
    assert not [n for n in os.listdir(run) if ".tmp" in n]


def test_kill_during_stage_two_then_rerun(env, tmp_path, capsys):
    """extend.py --stages 2 killed in stage 2 (at its warmdown checkpoint, after one step): the same
    command again keeps the finished stage 1 and redoes stage 2 from its init.pt."""
    out = str(tmp_path / "ext")
    argv = [env.run, "--method", "yarn", "--factor", "4", "--stages", "2", "--iters", "4", "--out_dir", out,
            "--quiet", "--device", "cpu"]
    p = spawn("extend.py", argv)
    stop_at(out, "ckpt_warmdown.pt", p)
    wait_stopped(p)
    kill(p)
    stage1 = os.path.join(out, "stage1")
    assert os.path.exists(os.path.join(stage1, "result.json")) and not os.path.exists(os.path.join(out, "result.json"))
    before = tree(stage1)
    code, err = call(extend.main, argv, capsys)
    assert code == 0, err
    assert tree(stage1) == before  # the finished stage is kept as it was
    r = strict_json(os.path.join(out, "result.json"))
    assert r["lineage"]["stage"] == 2 and r["lineage"]["parent"] == stage1 and r["model_config"]["block_size"] == 128
    assert not [n for n in os.listdir(out) if ".tmp" in n]


# -----------------------------------------------------------------------------
# NaN: the last checkpoint is good, the records are strict JSON

def test_huge_lr_stops_before_the_update_and_keeps_finite_checkpoints(env, tmp_path, capsys):
    # 1e20: at 1e6 the clipped, orthogonalised updates stay finite on some CPUs (the loss sits at
    # ln(vocab) and the run finishes), so the test would depend on the machine's float kernels
    run = str(tmp_path / "run")
    one_line(*call(train.main, env.flags(run, "--lr", "1e20", "--ckpt_every", "1"), capsys), "stopped")
    ck = load_checkpoint(os.path.join(run, "ckpt.pt"))
    assert ck["step"] >= 1 and all(torch.isfinite(v).all() for v in ck["model"].values())
    before = tree(run)
    one_line(*call(train.main, env.flags(run, "--lr", "1e20", "--ckpt_every", "1", "--resume"), capsys), "stopped")
    assert tree(run)["ckpt.pt"] == before["ckpt.pt"]  # the same good checkpoint, not a broken one


def test_records_are_strict_json(env, tmp_path, capsys):
    strict_json(os.path.join(env.run, "result.json"))
    run = str(tmp_path / "algo")  # algorithmic runs have no bits per byte: null, not NaN
    code, err = call(train.main, ["--algo", "copy", "--algo_len", "1,4", "--size", "0.1M", "--block_size", "16",
                                  "--iters", "2", "--quiet", "--device", "cpu", "--out_dir", run], capsys)
    assert code == 0, err
    assert strict_json(os.path.join(run, "result.json"))["metrics"]["val_bpb"] is None
    for line in open(os.path.join(run, "log.jsonl")):
        json.loads(line, parse_constant=lambda c: pytest.fail(f"log holds {c}"))


# -----------------------------------------------------------------------------
# Data: every corruption of a prepared folder is refused on one line; of the cache, rebuilt

def _edit(name, fn):
    def damage(folder):
        m = json.load(open(os.path.join(folder, "manifest.json")))
        fn(m)
        json.dump(m, open(os.path.join(folder, name), "w"))
    return damage


def _bytes(name, fn):
    def damage(folder):
        path = os.path.join(folder, name)
        raw = bytearray(open(path, "rb").read())
        time.sleep(0.01)  # a later write has a later mtime
        open(path, "wb").write(fn(raw))
    return damage


def _tokens(name, fn):
    return _bytes(name, lambda r: r[:1024] + fn(np.frombuffer(bytes(r[1024:]), dtype="<u2").copy()).tobytes())


def _set(a, i, v):
    a[i] = v
    return a


def _shorter_docs(folder):  # the val document list without its last document
    path = os.path.join(folder, "val_docs.npy")
    np.save(path, np.load(path)[:-1])


CORRUPT = {
    "zero-byte shard": (_bytes("train_000000.bin", lambda r: b""), "less than a shard header"),
    "odd-size shard": (_bytes("train_000000.bin", lambda r: r + b"x"), "room for"),
    "manifest is a list": (lambda f: open(os.path.join(f, "manifest.json"), "w").write("[1, 2]"), "not a JSON object"),
    "manifest lacks a key": (_edit("manifest.json", lambda m: m.pop("n_val_tokens")), "'n_val_tokens' is missing"),
    "token beyond the vocabulary": (_tokens("train_000000.bin", lambda t: _set(t, 5, 600)), "sha256 mismatch"),
    "val tokens reversed": (_tokens("val_000000.bin", lambda t: t[::-1]), "sha256 mismatch"),
    "n_train_tokens changed": (_edit("manifest.json", lambda m: m.update(n_train_tokens=m["n_train_tokens"] - 1)),
                               "n_train_tokens"),
    "dtype changed": (_edit("manifest.json", lambda m: m.update(dtype="uint32")), "dtype uint32"),
    "shortened document list": (_shorter_docs, "val_docs.npy has"),
}


@pytest.fixture(scope="module")
def prepared(env):
    out = str(env.dir / "prepared")
    data.prepare(env.corpus, out, vocab_size=512, val_frac=0.34)
    return out


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_prepared_folder_is_refused(env, prepared, case, tmp_path, capsys):
    folder = str(tmp_path / "prep")
    shutil.copytree(prepared, folder)
    CORRUPT[case][0](folder)
    before = tree(folder)
    code, err = call(train.main, env.flags(tmp_path / "run", data=folder), capsys)
    one_line(code, err, CORRUPT[case][1])
    assert "run data.py prepare again" in err
    assert tree(folder) == before and not os.path.exists(tmp_path / "run")


def cache_folder(cache):
    (folder,) = [os.path.dirname(p) for p in glob.glob(os.path.join(cache, "*", "manifest.json"))]
    return folder


def token_files(folder):
    return {n: h for n, h in tree(folder).items() if n.endswith((".bin", ".npy"))}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_cache_is_rebuilt(env, case, tmp_path, capsys):
    cache = str(tmp_path / "cache")
    shutil.copytree(env.cache, cache)  # mtimes kept: the copy is a valid cache of the same corpus
    folder = cache_folder(cache)
    CORRUPT[case][0](folder)
    code, err = call(train.main, env.flags(tmp_path / "run", "--iters", "2", cache=cache), capsys)
    assert code == 0 and err.count("\n") == 1 and "preparing it again" in err and CORRUPT[case][1] in err, err
    assert token_files(folder) == token_files(cache_folder(env.cache))  # the very tokens of before
    assert data.verify(folder) and strict_json(str(tmp_path / "run" / "result.json"))["steps"] == 2


def test_verify_sees_a_dropped_document_end(prepared, tmp_path, capsys):
    """A document end dropped from the middle with the manifest made to agree: a start is O(1) and
    cannot see it, data.py verify does."""
    folder = str(tmp_path / "prep")
    shutil.copytree(prepared, folder)
    path = os.path.join(folder, "train_docs.npy")
    ends = np.load(path)
    np.save(path, np.delete(ends, len(ends) // 2))
    m = json.load(open(os.path.join(folder, "manifest.json")))
    m["arrays"]["train_docs"].update(data.file_entry(path))
    json.dump(m, open(os.path.join(folder, "manifest.json"), "w"))
    one_line(*call(data.main, ["verify", folder], capsys), "end-of-text tokens")


# -----------------------------------------------------------------------------
# Bad input: one line, non-zero exit, nothing in the run folder changed

@pytest.fixture(scope="module")
def bad(env):
    d = env.dir / "bad"
    d.mkdir()
    (d / "latin1.jsonl").write_bytes(b'{"text": "caf\xe9"}\n')
    (d / "binary.jsonl").write_bytes(bytes(range(255, -1, -1)) * 8)
    (d / "corrupt.tar.xz").write_bytes(b"\xfd7zXZ\x00" + bytes(range(256)) * 2)
    (d / "empty.tar.xz").write_bytes(b"")
    with tarfile.open(d / "latin1.tar.xz", "w:xz") as tar:
        raw = "caf\xe9 au lait\n".encode("latin-1") * 40
        info = tarfile.TarInfo("works/a.txt")
        info.size = len(raw)
        tar.addfile(info, io.BytesIO(raw))
    (d / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1") * 40)
    (d / "afile").write_text("not a folder")
    return str(d)


def _ckpt(edit):
    def make(run):
        path = os.path.join(run, "ckpt.pt")
        ck = torch.load(path, weights_only=True)
        edit(ck)
        torch.save(ck, path)
    return make


T, EV, EX, XT, AN = train.main, evaluate.main, export.main, extend.main, analyze.main
# (id, script main, argv (RUN: the run folder, BAD: the bad inputs' folder), match, the run: finished
# | unfinished (no result.json), its checkpoint edited by _ckpt). train.py cases pass --overwrite
# (or --resume) so that nothing but the validation can stop them from clearing the finished run.
BAD = [
    ("lr nan", T, ["--lr", "nan", "--overwrite"], "finite number", None),
    ("device bogus", T, ["--device", "bogus", "--overwrite"], "--device", None),
    ("n_layer -2", T, ["--n_layer", "-2", "--overwrite"], "must be positive", None),
    ("mlp_ratio -1", T, ["--mlp_ratio", "-1", "--overwrite"], "must be positive", None),
    ("eval_interval 0", T, ["--eval_interval", "0", "--overwrite"], "--eval_interval", None),
    ("ckpt_every 0", T, ["--ckpt_every", "0", "--overwrite"], "--ckpt_every", None),
    ("seed -1", T, ["--seed", "-1", "--overwrite"], "--seed", None),
    ("rope_theta -5", T, ["--rope_theta", "-5", "--overwrite"], "rope_theta", None),
    ("val_frac 1.5", T, ["--val_frac", "1.5", "--overwrite"], "--val_frac", None),
    ("cache_dir a file", T, ["--cache_dir", "BAD/afile", "--overwrite"], "is a file", None),
    ("jsonl not UTF-8", T, ["--data", "BAD/latin1.jsonl", "--overwrite"], "not UTF-8", None),
    ("jsonl binary", T, ["--data", "BAD/binary.jsonl", "--overwrite"], "not UTF-8", None),
    ("tar.xz corrupt", T, ["--data", "BAD/corrupt.tar.xz", "--overwrite"], "not a readable tar", None),
    ("tar.xz empty", T, ["--data", "BAD/empty.tar.xz", "--overwrite"], "not a readable tar", None),
    ("tar.xz not UTF-8", T, ["--data", "BAD/latin1.tar.xz", "--overwrite"], "not UTF-8", None),
    ("txt not UTF-8", T, ["--data", "BAD/latin1.txt", "--overwrite"], "not UTF-8", None),
    ("resume: ckpt without rng", T, ["--resume"], "no valid 'rng'", _ckpt(lambda c: c.pop("rng"))),
    ("resume: ckpt without step", T, ["--resume"], "no valid 'step'", _ckpt(lambda c: c.pop("step"))),
    ("resume: step not a number", T, ["--resume"], "no valid 'step'", _ckpt(lambda c: c.update(step="x"))),
    ("resume: rng without torch", T, ["--resume"], "KeyError", _ckpt(lambda c: c.update(rng={}))),
    ("resume: empty optimizer list", T, ["--resume"], "0 optimizer states", _ckpt(lambda c: c.update(optimizers=[]))),
    ("evaluate: ckpt without model_config", EV, ["RUN", "--quiet"], "model_config",
     _ckpt(lambda c: c.pop("model_config"))),
    ("evaluate --out missing folder", EV, ["RUN", "--out", "BAD/none/eval.json", "--quiet"], "no folder", None),
    ("evaluate --out a folder", EV, ["RUN", "--out", "BAD", "--quiet"], "is a folder", None),
    ("evaluate --out the checkpoint", EV, ["RUN", "--tasks", "grid", "--out", "RUN/ckpt.pt"], "not overwritten", None),
    ("export: ckpt without model_config", EX, ["RUN", "--bits", "4"], "model_config",
     _ckpt(lambda c: c.pop("model_config"))),
    ("export --out a folder", EX, ["RUN", "--bits", "4", "--out", "BAD"], "is a folder", None),
    ("export --out the checkpoint", EX, ["RUN", "--bits", "4", "--out", "RUN/ckpt.pt"], "not overwritten", None),
    ("export --out the record", EX, ["RUN", "--bits", "4", "--out", "RUN/result.json"], "not overwritten", None),
    ("export --device bogus", EX, ["RUN", "--bits", "4", "--device", "bogus"], "--device", None),
    ("extend --stages 2 --out_dir a file", XT, ["RUN", "--factor", "4", "--stages", "2", "--iters", "4",
                                                "--out_dir", "BAD/afile"], "is a file", None),
    ("analyze --level 2", AN, ["RUN", "--level", "2", "--no_plots"], "--level", None),
    ("analyze unknown flag", AN, ["RUN", "--bogus"], "unrecognized arguments", None),
    ("analyze no folder", AN, [], "required", None),
]


@pytest.fixture
def no_work(monkeypatch):
    """Bad input fails before any evaluation or export: these must never be reached."""
    def boom(*a, **k):
        raise AssertionError("the work started before the input was checked")
    for mod, name in ((evaluate, "eval_ppl"), (evaluate, "eval_task"), (evaluate, "eval_probes"),
                      (evaluate, "grid_distance"), (export, "artefact_bytes")):
        monkeypatch.setattr(mod, name, boom)


@pytest.mark.parametrize("case,main,argv,match,edit", BAD, ids=[b[0] for b in BAD])
def test_bad_input_one_line_nothing_changed(env, bad, case, main, argv, match, edit, tmp_path, capsys, no_work):
    run = env.copy(tmp_path / "run", finished=not (main is T and "--resume" in argv))
    if edit:
        edit(run)
    argv = [a.replace("RUN", run).replace("BAD", bad) for a in argv]
    if main is T:
        argv = env.flags(run, *argv)
    before, bad_before = tree(run), tree(bad)
    code, err = call(main, argv, capsys)
    one_line(code, err, match)
    assert tree(run) == before and tree(bad) == bad_before


def test_out_dir_that_cannot_be_made(env, bad, capsys):
    for out in (os.path.join(bad, "afile"), os.path.join(bad, "afile", "run")):  # a file; a path through one
        one_line(*call(train.main, env.flags(out), capsys))
    assert open(os.path.join(bad, "afile")).read() == "not a folder"


# -----------------------------------------------------------------------------
# sweep.sh: a closed terminal (SIGHUP) stops the jobs, which run in their own process groups

STUB = """#!/usr/bin/env bash
echo $$ >> "$STUB_PIDS"
exec sleep 60
"""


def alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_sweep_hangup_stops_its_jobs(tmp_path):
    stub = tmp_path / "stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    pids = tmp_path / "pids"
    env = {k: v for k, v in os.environ.items() if k not in ("SCALE", "GPUS", "DATA", "EXTRA", "OMP_NUM_THREADS")}
    env.update(PYTHON=str(stub), OUT=str(tmp_path / "out"), JOBS="2", STUB_PIDS=str(pids))
    # SIGHUP at its default in the sweep: under nohup (a suite started with it) the sweep inherits
    # HUP ignored, and bash cannot trap a signal ignored at its start, so it keeps running, as nohup asks
    p = subprocess.Popen(["bash", os.path.join(ROOT, "sweep.sh"), "qat"], env=env, cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    jobs = []
    try:
        deadline = time.time() + 60
        while time.time() < deadline and len(jobs) < 2:
            time.sleep(0.05)
            jobs = [int(x) for x in open(pids).read().split()] if pids.exists() else []
        assert len(jobs) == 2
        p.send_signal(signal.SIGHUP)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 129 and "interrupted" in err, err
        deadline = time.time() + 10
        while time.time() < deadline and any(alive(j) for j in jobs):
            time.sleep(0.05)
        assert not any(alive(j) for j in jobs), "jobs left running after SIGHUP"
    finally:
        for j in jobs:
            if alive(j):
                os.kill(j, signal.SIGKILL)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
