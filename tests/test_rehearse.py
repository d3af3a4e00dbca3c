"""The paper grids' rehearsal (SCALE=paper REHEARSE=1 bash sweep.sh STUDY, tools/rehearse.py): the one rule
that shrinks every line, every rehearsal step accepted by its script, one line of each kind of each
study run for real, the pack runner and the outcome table."""
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

from studies import wave
from tools import rehearse
from studies.longctx import OUTCOMES as LONGCTX_OUTCOMES, RETRIEVAL
import train
from model import SIZES

SWEEP = os.path.join(ROOT, "sweep.sh")
STUDIES = tuple(wave.get("confirm")["runs"])  # every study declares its wave-1 family: the one list


def dry(tmp_path, study, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("OUT", "DATA", "EVAL_DATA", "JOBS", "EXTRA", "COMPILE")}
    p = subprocess.run(["bash", SWEEP, "--dry-run", study], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**e, "SCALE": "paper", "OUT": str(tmp_path / "o"), "DATA": "D", "EVAL_DATA": "E", **env})
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def flags(step):
    """A step's argv -> (script, {flag: value or None})."""
    a = shlex.split(step)
    out, i = {}, 2
    while i < len(a):
        if a[i].startswith("--"):
            val = a[i + 1] if i + 1 < len(a) and not a[i + 1].startswith("--") else None
            out[a[i]] = val
            i += 2 if val is not None else 1
        else:
            i += 1
    return a[1], out


@pytest.mark.parametrize("study", STUDIES)
def test_one_rule_shrinks_every_line_and_keeps_the_rest(tmp_path, study):
    """Same lines, steps, scripts, run folders and flags as the paper grid; each number that the rule
    names divided as documented in sweep.sh (lengths by 8, lengen's by 1; steps by 1000, longctx's by
    100: its 5% extensions train 4 steps, not 1 at the warmup's LR 0), nothing else changed."""
    paper, rehearsal = dry(tmp_path, study), dry(tmp_path, study, REHEARSE="1")
    assert len(rehearsal) == len(paper) > 0
    ld = 1 if study == "lengen" else 8
    rule = {"--block_size": ld, "--window": ld, "--target": ld, "--longppl_short": ld, "--chunk_size": ld,
            "--ppl_tokens": ld, "--iters": 100 if study == "longctx" else 1000, "--tokens": 1000000, "--batch_size": 32}
    seen = set()
    for p_line, r_line in zip(paper, rehearsal):
        p_steps, r_steps = p_line.split(" && "), r_line.split(" && ")
        assert len(p_steps) == len(r_steps)
        for ps, rs in zip(p_steps, r_steps):
            (script, pf), (rscript, rf) = flags(ps), flags(rs)
            assert script == rscript and pf.get("--out_dir") == rf.get("--out_dir")
            added = set(rf) - set(pf)
            if script.endswith("train.py") and "--size" in pf:
                assert rf["--n_embd"] == str(8 * SIZES[pf["--size"]][2]) and "--n_embd" in added
                added.discard("--n_embd")
            if script.endswith("evaluate.py"):  # evaluate.py's defaults stated where the rule shrinks them
                assert added <= {"--ppl_tokens", "--samples", "--depths"}, added
                added = set()
            if script.endswith("train.py"):  # as train.py's quick-eval budget
                assert rf["--eval_tokens"] == "1024"
                added.discard("--eval_tokens")
            assert not added, added
            for k, v in pf.items():
                if k == "--batch_size":  # a multiple of the step's --grad_accum
                    b, a = max(1, int(v) // 32), int(pf.get("--grad_accum", 1))
                    assert int(rf[k]) == b + (a - b % a) % a, (v, rf[k])
                    seen.add(k)
                elif k in rule:
                    assert int(rf[k]) == max(1, int(v) // rule[k]), (k, v, rf[k])
                    seen.add(k)
                elif k in ("--final_eval_tokens", "--eval_tokens"):
                    assert rf[k] == "1024"
                elif k == "--lengths":
                    assert rf[k] == ",".join(str(max(1, int(x) // ld)) for x in v.split(","))
                elif k in ("--samples", "--probe_samples", "--depths"):
                    assert rf[k] == "1"
                elif k == "--compile":  # the paper default; CPU compile would cost more than the runs
                    assert k not in rf
                else:
                    assert rf[k] == v, (k, v, rf[k])
    assert {"--batch_size"} <= seen and ({"--iters", "--tokens"} & seen)


@pytest.mark.parametrize("study", STUDIES)
def test_every_rehearsal_step_is_accepted_by_its_script(tmp_path, study):
    """The rehearsal's sizes are valid configurations (e.g. a chunk shorter than the context)."""
    extend = pytest.importorskip("extend")
    evaluate = pytest.importorskip("evaluate")
    for line in dry(tmp_path, study, REHEARSE="1"):
        for step in line.split(" && "):
            a = shlex.split(step)
            if a[1] == "train.py":
                cfg = train.parse_args(a[2:])
                train.check_config(cfg)
                train.model_config(cfg, 4096)  # the model's own checks (GPTConfig), at the rehearsal's sizes
            elif a[1] == "extend.py":
                extend.parse_args(a[2:])
            else:
                evaluate.parse_args(a[2:])


def kinds(lines):
    """One line per kind: the same scripts with the same flag names (a FP16 and an INT8 QAT run, or
    RoPE and NoPE, are one kind; AdamW, cosine, SWAN, chunk attention, passkey training are kinds)."""
    out = {}
    for line in lines:
        out.setdefault(tuple((s, tuple(sorted(f))) for s, f in map(flags, line.split(" && "))), line)
    return list(out.values())


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    d = tmp_path_factory.mktemp("data") / "train"
    subprocess.run([sys.executable, "data.py", "prepare", os.path.join(ROOT, "data", "shakespeare.tar.xz"), str(d),
                    "--quiet"], cwd=ROOT, check=True, capture_output=True, timeout=300)
    return str(d)


@pytest.mark.parametrize("study", STUDIES)
def test_one_line_of_each_kind_runs(tmp_path, prepared, study):
    """Lines of the study's rehearsal run to their end through tools/rehearse.py pack, as the rehearsal runs
    them: with REHEARSE_KINDS=all one line of each kind (qat, qat-probes, lengen whole; posenc and
    longctx, whose evaluations at 8-16x the context take minutes on 2 cores, their training steps, one
    per kind), by default the first kind of qat, qat-probes and lengen only, to keep the suite in its
    5 minutes (a kind costs 5-90 s on the shared 2-core machine). The full rehearsal (sweep.sh) runs
    every line whole."""
    if os.environ.get("REHEARSE_KINDS") != "all" and study in ("posenc", "longctx"):
        pytest.skip("REHEARSE_KINDS=all: a 50M / 100M rehearsal model trains in 35-45 s on the shared 2-core CPU")
    lines = kinds(dry(tmp_path, study, REHEARSE="1", DATA=prepared, EVAL_DATA=prepared))
    if study in ("posenc", "longctx"):
        lines = kinds([l.split(" && ")[0] for l in lines if "train.py" in l.split(" && ")[0]])
    if os.environ.get("REHEARSE_KINDS") != "all":
        lines = lines[:1]
    py = sys.executable
    pack = tmp_path / "pack.txt"
    pack.write_text("".join(re.sub(r"(^| && )python ", rf"\g<1>{py} ", l) + "\n" for l in lines))
    p = subprocess.run([py, "tools/rehearse.py", "pack", str(pack)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count("# done line") == len(lines) > 0
    for line in lines:
        for step in line.split(" && "):
            f = flags(step)[1]
            if "--out_dir" in f:
                assert os.path.exists(os.path.join(f["--out_dir"], "result.json")), step


def test_seed_subsample_keeps_every_kind(tmp_path):
    """REHEARSE_SEEDS=2 keeps the first two seeds (and longctx's evaluator) and still every kind of line."""
    for study in ("longctx", "qat-probes"):
        every, two = dry(tmp_path, study, REHEARSE="1"), dry(tmp_path, study, REHEARSE="1", REHEARSE_SEEDS="2")
        assert 0 < len(two) < len(every) and len(kinds(two)) == len(kinds(every))
        assert not any(re.search(r"(--seed |_s)([2-9]|1[0-9])\b", l) for l in two)
    assert any("_s100" in l for l in dry(tmp_path, "longctx", REHEARSE="1", REHEARSE_SEEDS="2"))


def test_pack_goes_on_after_a_failed_line(tmp_path):
    """A failed line is reported and the next one runs: the rehearsal shows every trap, not the first."""
    ok = tmp_path / "ok.py"
    ok.write_text("import sys; open(sys.argv[1], 'w').write('ran')\n")
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit(3)\n")
    crash = tmp_path / "crash.py"
    crash.write_text("raise RuntimeError('boom')\n")
    pack = tmp_path / "pack.txt"
    py = sys.executable
    pack.write_text(f"{py} {bad}\n{py} {crash}\n{py} {ok} {tmp_path / 'a'} && {py} {ok} {tmp_path / 'b'}\n")
    p = subprocess.run([py, os.path.join(ROOT, "tools/rehearse.py"), "pack", str(pack)], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert p.returncode == 1
    assert "FAILED (exit 3) line 1" in p.stdout and "FAILED (exit 1) line 2" in p.stdout and "boom" in p.stderr
    assert "done line 3" in p.stdout and (tmp_path / "a").exists() and (tmp_path / "b").exists()


def test_outcomes_fail_when_empty_or_missing(tmp_path, capsys):
    """Every outcome of a study with its runs; an empty outcome, or one the analysis lacks, fails."""
    a = {"lengen": {"cells": [{"by_length": {"16": {"n": 3}, "32": {"n": 3}}}, {"by_length": {"16": {"n": 2}}}],
                    "threshold": {"rows": [{"by_train_len": [{"n": 3}, {"n": 3}]}]}}}
    (tmp_path / "analysis.json").write_text(json.dumps(a))
    assert rehearse.list_outcomes("lengen", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert re.search(r"\b5 runs .*exact match by length", out) and re.search(r"\b6 runs .*threshold", out)
    a["lengen"]["threshold"]["rows"] = []
    (tmp_path / "analysis.json").write_text(json.dumps(a))
    assert rehearse.list_outcomes("lengen", str(tmp_path)) == 1
    assert "FAILS" in capsys.readouterr().out
    del a["lengen"]["cells"]
    (tmp_path / "analysis.json").write_text(json.dumps(a))
    assert rehearse.list_outcomes("lengen", str(tmp_path)) == 2
    assert "missing from the analysis" in capsys.readouterr().out
    assert rehearse.list_outcomes("qat", str(tmp_path / "nowhere")) == len(rehearse.OUTCOMES["qat"])


def test_fit_sizes_are_the_names_the_analysis_gives_rehearsal_runs(tmp_path):
    """analyze.py labels a run by its size and overridden width (common.size_label), so the penalty
    law's fit sizes that sweep.sh passes in a rehearsal carry the rule's width."""
    from studies import common
    src = open(os.path.join(ROOT, "tools", "sweep_lib.sh")).read()  # the rehearsal machinery sweep.sh sources
    funcs = "\n".join(re.search(rf"^{f}\(\) \{{.*?^\}}", src, re.M | re.S).group(0) for f in ("size_heads", "rehearse_sizes"))
    out = subprocess.run(["bash", "-c", f"{funcs}\nHERE={shlex.quote(ROOT)}; rehearse_sizes 15M,100M"],
                         capture_output=True, text=True, timeout=30).stdout.strip()
    line = next(l for l in dry(tmp_path, "qat", REHEARSE="1") if "--size 100M" in l)
    cfg = train.parse_args(shlex.split(line)[2:])
    label = common.size_label({"size": cfg.size, **cfg.model})
    assert out.split(",") == ["15M[n_embd=48]", label] and label == "100M[n_embd=96]"


def test_longctx_outcomes_tell_values_from_design(tmp_path, capsys):
    """An outcome empty because barely trained models have no key tokens is listed as refused on
    values; one empty for any other reason (here: no retrieval cells at all) fails."""
    # every outcome the analysis defines has values, except LongPPL's two and the gated retrieval ones
    o = {k: {"n": 4, "cells": [{"mean": 0.1}]} for k in LONGCTX_OUTCOMES if k not in RETRIEVAL + ("longppl", "key_frac")}
    o["key_frac"] = {"n": 4, "cells": [{"mean": 0.0}, {"mean": 0.0}]}
    o["longppl"] = {"n": 0}
    lc = {"outcomes": o, "empty_outcomes": ["longppl"], "gain": [{"gain_parent": {"n": 4}}],
          "retrieval": {"cells": [{"n": 4}], "usable": False, "verdict": "learned in distribution in 0 of 16 cells"}}
    (tmp_path / "analysis.json").write_text(json.dumps({"longctx": lc}))
    assert rehearse.list_outcomes("longctx", str(tmp_path)) == 1  # only the exports (none here) fail
    out = capsys.readouterr().out
    assert "refused on values: no key tokens" in out and "FAILS: no main-recipe run" in out
    o["key_frac"]["cells"][0]["mean"] = 0.2  # key tokens exist, yet no LongPPL: a design fault
    (tmp_path / "analysis.json").write_text(json.dumps({"longctx": lc}))
    assert rehearse.list_outcomes("longctx", str(tmp_path)) == 2
    capsys.readouterr()
    del o["key_frac"], o["gain_free"]  # the analysis lists one-valued outcomes apart (constant_outcomes)
    lc["constant_outcomes"] = {"key_frac": 0.0, "gain_free": 0.0}
    (tmp_path / "analysis.json").write_text(json.dumps({"longctx": lc}))
    assert rehearse.list_outcomes("longctx", str(tmp_path)) == 2  # the exports and the gain of exactly 0
    out = capsys.readouterr().out
    assert "4 runs  key_frac (longctx.outcomes.key_frac): refused on values: no key tokens" in out
    assert "4 runs  longppl (longctx.outcomes.longppl): refused on values: no key tokens" in out
    assert "gain_free (longctx.outcomes.gain_free): FAILS: one value in every run (0)" in out


def test_posenc_longppl_without_key_tokens_is_refused_on_values(tmp_path, capsys):
    """posenc: LongPPL empty in every cell because no run has key tokens (barely trained models) is
    refused on values; empty while key tokens exist is a design fault and fails."""
    stats = lambda mean: {"mean": mean, "sd": None, "n": 0 if mean is None else 3, "per_seed": {}}
    cell = lambda training: {"training": training, "loss_by_length": {"256": stats(4.0)},
                             "longppl_by_length": {"256": stats(None)}, "key_frac_by_length": {"256": stats(0.0)},
                             "retrieval": {"passkey": {"exact": {"256": stats(0.5)}}}}
    cells = [cell("text"), cell("text"), cell("task_mix:passkey")]
    (tmp_path / "analysis.json").write_text(json.dumps({"posenc": {"cells": cells}}))
    assert rehearse.list_outcomes("posenc", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "6 runs  LongPPL by length, text runs: refused on values: no key tokens" in out
    cells[0]["key_frac_by_length"]["256"]["mean"] = 0.01  # key tokens, yet no LongPPL
    (tmp_path / "analysis.json").write_text(json.dumps({"posenc": {"cells": cells}}))
    assert rehearse.list_outcomes("posenc", str(tmp_path)) == 1
    assert "FAILS: no cell with a value" in capsys.readouterr().out
