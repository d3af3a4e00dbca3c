"""A wave is a declaration (studies/waves/*.toml) read by one engine (studies/wave.py): every wave file holds the
schema docs/hacking.md documents (every outcome, gate and dropped-seed function it names exists); every stored
family of every wave decides again, by the engine, to the same p, Holm p, verdict and effect from the per-seed
values stored beside it; the claims ledger regenerates from the stored analyses; the job lines a wave declares
expand seed by seed; the seeds command sweep.sh calls prints the declared seeds; one seed's runs on two CPU
models are refused. Seconds: no run is trained and no study is analysed."""
import glob
import importlib
import json
import os
import subprocess
import sys
import tomllib

import pytest

import analyze
from cli import UserError, clean
from conftest import ROOT
from studies import ledger, wave

FILES = sorted(glob.glob(os.path.join(ROOT, "studies", "waves", "*.toml")))
WAVES = list(wave.waves().values())

TOP = {"wave", "name", "declared_in", "layout", "rule", "min_seeds", "machine", "machine_rule", "marker", "declared",
       "runs", "families", "text", "constants", "pilot_seeds", "kind", "seed_sizes", "skipped", "not_rerun"}
RUN = {"seeds", "cap", "cells", "size", "reads", "jobs", "pilot", "pilot_fn"}
FAMILY = {"paper", "runs", "seed_text", "gates", "failure_rule", "hypotheses", "exploratory", "cited", "gate_fn",
          "gate_failed", "gate_line", "dropped_fn", "seeds", "claim_rule", "min_seeds"}
HYPOTHESIS = {"id", "claim", "direction", "margin", "sesoi", "source", "outcome_fn", "args", "match", "gate",
              "gate_fn", "gate_args", "outcome", "error", "why", "mirrors", "params", "target", "ledger", "part",
              "stand_in", "pilot"}
TEXT = {"title", "declaration", "plan", "plan_capped", "plan_uncapped", "plan_title", "families", "wall"}


def resolves(name):
    mod, fn = name.rsplit(".", 1)
    return callable(getattr(importlib.import_module(f"studies.{mod}"), fn, None))


# -----------------------------------------------------------------------------
# (a) the schema

def test_the_waves_are_the_files():
    assert [w["file"] for w in WAVES] == sorted((os.path.relpath(p, ROOT) for p in FILES),
                                                key=lambda p: tomllib.load(open(os.path.join(ROOT, p), "rb"))["wave"])
    assert [w["wave"] for w in WAVES] == sorted({w["wave"] for w in WAVES}) and len({w["name"] for w in WAVES}) == len(WAVES)


@pytest.mark.parametrize("w", WAVES, ids=[w["name"] for w in WAVES])
def test_every_wave_file_holds_the_schema(w):
    where = w["file"]
    assert set(w) - {"file"} <= TOP, f"{where}: unknown keys {set(w) - TOP - {'file'}}"
    assert isinstance(w["wave"], int) and w["layout"] in ("family", "families") and w["rule"] in ("holm", "holm+sign")
    assert w["machine_rule"] in ("one kind", "one model", "one model per seed") and w["min_seeds"] >= 2
    assert all(isinstance(w[k], str) and w[k] for k in ("name", "declared_in", "machine", "marker", "declared"))
    if w["layout"] == "families":
        assert TEXT <= set(w["text"]), f"{where}: [text] lacks {TEXT - set(w['text'])}"
    for study, run in w["runs"].items():
        assert set(run) <= RUN, f"{where} runs.{study}: unknown keys {set(run) - RUN}"
        s = run["seeds"]
        assert s and all(isinstance(x, int) for x in s) and len(set(s)) == len(s) and w["min_seeds"] <= len(s) <= run["cap"]
        assert isinstance(run["cells"], str) and all(r in w["runs"] or r in {"lengen"} for r in run.get("reads", ()))
    for name, fam in w["families"].items():
        assert set(fam) <= FAMILY, f"{where} families.{name}: unknown keys {set(fam) - FAMILY}"
        assert fam["runs"] in w["runs"] and fam["seed_text"] and fam["gates"] and fam["failure_rule"]
        for k in ("gate_fn", "dropped_fn"):
            assert k not in fam or resolves(fam[k]), f"{where} families.{name}.{k} = {fam[k]}: no such function"
        assert ("gate_fn" in fam) == ("gate_failed" in fam)
        assert set(fam.get("seeds", ())) <= set(w["runs"][fam["runs"]]["seeds"]), f"{where} families.{name}.seeds"
        ids = [d["id"] for d in fam["hypotheses"]]
        assert ids and len(ids) == len(set(ids)) and len(ids) <= 4
        for d in fam["hypotheses"]:
            at = f"{where} {name}/{d.get('id')}"
            assert set(d) <= HYPOTHESIS, f"{at}: unknown keys {set(d) - HYPOTHESIS}"
            for k in ("id", "claim", "direction", "outcome", "error", "why"):
                assert d.get(k) not in (None, ""), f"{at}: no {k}"
            assert d["direction"] in (-1, 0, 1)
            if d["direction"] == 0:
                assert d.get("margin", 0) > 0, f"{at}: a claimed null needs its margin"
            else:
                assert "margin" not in d and d.get("sesoi", 1) > 0
            assert ("outcome_fn" in d) != ("match" in d), f"{at}: an outcome function, or (wave 1) a match"
            assert "match" not in d or w["layout"] == "family"
            for k in ("outcome_fn", "gate_fn"):
                assert k not in d or resolves(d[k]), f"{at}: {k} = {d[k]} names no function of a study's file"
            if w.get("kind") == "rung":
                assert d["mirrors"] and len(d["params"]) == 2 and d["params"][0] < d["params"][1]


SESOI_FROM = 4  # issue 59 item 2: from wave 4 on, every directional test declares its sesoi, and every margin and sesoi
# its source (waves 1-3 were declared and run before the rule; the ledger gives their margins' sources)


def sesoi_errors(w):
    """The hypotheses of a wave (from SESOI_FROM on) that break issue 59's rule: a directional test without a sesoi
    (it could confirm or stay undecided, never refute 'the effect exists'), a margin or sesoi without its source."""
    bad = []
    for name, fam in w["families"].items():
        for d in fam["hypotheses"]:
            at = f"{w['file']} {name}/{d['id']}"
            if d["direction"] and not d.get("sesoi"):
                bad.append(f"{at}: directional, no sesoi")
            if (d.get("sesoi") is not None or d.get("margin") is not None) and not d.get("source"):
                bad.append(f"{at}: a margin or sesoi without its source")
    return bad


def test_the_sesoi_check_can_fail():
    w = {"file": "x.toml", "families": {"f": {"hypotheses": [
        {"id": "a", "direction": 1}, {"id": "b", "direction": 0, "margin": 0.01},
        {"id": "c", "direction": -1, "sesoi": 0.05, "source": "the seed's Figure 2"}]}}}
    assert sesoi_errors(w) == ["x.toml f/a: directional, no sesoi", "x.toml f/b: a margin or sesoi without its source"]
    assert sesoi_errors(wave.get("confirm2"))  # wave 2, declared before the rule, has none


@pytest.mark.parametrize("w", [w for w in WAVES if w["wave"] >= SESOI_FROM], ids=lambda w: w["name"])
def test_every_directional_test_of_a_new_wave_declares_its_sesoi_and_source(w):
    assert not sesoi_errors(w)


def test_the_fresh_seeds_are_fresh():
    """No wave reuses the pilots' seeds (0-2) or another wave's."""
    seen = {}
    for w in WAVES:
        mine = set().union(*(set(r["seeds"]) for r in w["runs"].values()))
        assert not mine & {0, 1, 2}, w["name"]
        for other, theirs in seen.items():
            assert not mine & theirs, f"{w['name']} reuses seeds of {other}"
        seen[w["name"]] = mine


def test_a_rung_mirrors_declared_tiny_tests():
    rw = wave.rung()
    declared = {(w["wave"], k, d["id"]) for w in WAVES if w is not rw for k, f in w["families"].items() for d in f["hypotheses"]}
    assert set(wave.mirrors(rw)) <= declared and set(wave.not_rerun(rw)) <= declared


# -----------------------------------------------------------------------------
# (b) every stored family decides again, by the engine, from its stored per-seed values

def stored():
    out = []
    for w in WAVES:
        for path in sorted(glob.glob(os.path.join(ROOT, "results", "*", w["name"], "analysis.json"))):
            conf = json.load(open(path)).get("confirmatory") or {}
            for fam in ([conf["family"]] if conf.get("family") else []) + list((conf.get("families") or {}).values()):
                out.append((w, os.path.relpath(path, ROOT), fam))
    return out


STORED = stored()


def test_every_wave_has_stored_families():
    """Every wave has its decided families stored, but one declared before its runs (no runs/<name> yet) or one whose
    jobs are data and still running (sweep.sh publishes such a wave only once every job is done)."""
    stored = {w["name"] for w, _, _ in STORED}
    assert stored <= {w["name"] for w in WAVES}
    running = {w["name"] for w in WAVES if any(r.get("jobs") for r in w["runs"].values())}
    assert not [w["name"] for w in WAVES if w["name"] not in stored | running
                and os.path.isdir(os.path.join(ROOT, "runs", w["name"]))]


@pytest.mark.parametrize("w, where, fam", STORED, ids=[f"{p}:{f.get('family') or f.get('study')}" for _, p, f in STORED])
def test_every_stored_family_decides_again_the_same(w, where, fam):
    again = wave.redecide(w, fam)
    assert [h["id"] for h in again["hypotheses"]] == [h["id"] for h in fam["hypotheses"]]
    for old, new in zip(fam["hypotheses"], again["hypotheses"]):
        for k in ("p", "p_holm", "passed", "opposite", "effect"):
            assert new.get(k) == old.get(k), f"{where} {old['id']}: stored {k} {old.get(k)}, the engine {new.get(k)}"


def test_a_changed_value_decides_otherwise():
    w, _, fam = next((w, p, f) for w, p, f in STORED if any(h.get("passed") and h.get("margin") is None
                                                          for h in f["hypotheses"]))
    bad = json.loads(json.dumps(fam))
    h = next(h for h in bad["hypotheses"] if h.get("passed") and h.get("margin") is None)
    h["per_seed"] = {s: -v if i % 2 else v for i, (s, v) in enumerate(h["per_seed"].items())}
    again = {x["id"]: x for x in wave.redecide(w, bad)["hypotheses"]}
    assert again[h["id"]]["p"] != h["p"]


# -----------------------------------------------------------------------------
# (c) the ledger regenerates from the stored analyses

def test_the_ledger_regenerates_from_the_stored_analyses():
    results = os.path.join(ROOT, "results")
    led = ledger.ledger(results)
    with open(os.path.join(results, "ledger.json")) as fh:
        text = fh.read()
    old = json.loads(text)
    led["plot"], led["sizes_plot"] = old.get("plot"), old.get("sizes_plot")  # the figures' paths, as written
    assert json.dumps(clean(led), indent=1, allow_nan=False) + "\n" == text, "run python analyze.py --ledger README.md"
    with open(os.path.join(results, "ledger.md")) as fh:
        assert fh.read() == "\n".join(ledger.full_md(led)) + "\n"
    with open(os.path.join(ROOT, "README.md")) as fh:
        readme = fh.read()
    assert ledger.with_ledger(readme, led) == readme


# -----------------------------------------------------------------------------
# (d) the job lines a wave declares, and the seeds command

JOBS = """
wave = 9
name = "demo"
[runs.toy]
seeds = [900, 901]
cap = 4
cells = "toy"
[[runs.toy.jobs]]
axes = {qk = ["none", "head"], ctx = [64, 128]}
line = "python train.py --qk_norm {qk} --block_size {ctx} --batch_size {batch} --seed {seed} --out_dir {dir}/q{qk}_c{ctx}_s{seed}"
[runs.toy.jobs.per.ctx]
"64" = {batch = 32}
"128" = {batch = 16}
[[runs.toy.jobs]]
line = "python evaluate.py {dir}/summary_s{seed}"
"""


def test_the_grid_expands_seed_by_seed(tmp_path):
    w = tomllib.loads(JOBS)
    lines = list(wave.grid(w, "toy", "runs/demo/toy"))
    first = [f"python train.py --qk_norm {q} --block_size {c} --batch_size {b} --seed 900 --out_dir runs/demo/toy/q{q}_c{c}_s900"
             for q in ("none", "head") for c, b in ((64, 32), (128, 16))] + ["python evaluate.py runs/demo/toy/summary_s900"]
    assert lines[:5] == first  # axes in the order written, the last fastest; blocks in file order
    assert lines[5:] == [x.replace("900", "901") for x in first]  # every line of one seed before the next seed's


def test_the_grid_and_seeds_commands(tmp_path, monkeypatch, capsys):
    (tmp_path / "demo.toml").write_text(JOBS)
    monkeypatch.setattr(wave, "FOLDER", str(tmp_path))
    monkeypatch.setattr(wave, "_WAVES", {})
    assert wave.main(["grid", "demo", "toy", "--out", "OUT"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 10 and out[0].endswith("--out_dir OUT/demo/toy/qnone_c64_s900") and "s901" in out[5]
    assert wave.main(["seeds", "9", "toy"]) == 0 and capsys.readouterr().out == "900 901\n"
    assert wave.main(["seeds", "demo", "other"]) == 0 and capsys.readouterr().out == "\n"  # a study it does not run
    assert wave.main(["seeds", "nowave", "toy"]) == 2 and "no wave 'nowave'" in capsys.readouterr().err


def test_the_seeds_command_sweep_sh_calls():
    """python -m studies.wave seeds NAME STUDY, by name or number, as sweep.sh's wave_seeds runs it."""
    run = lambda *a: subprocess.run([sys.executable, "-m", "studies.wave", *a], capture_output=True, text=True, cwd=ROOT,
                                    timeout=60)
    p = run("seeds", "confirm2", "qat")
    assert p.returncode == 0 and p.stdout == " ".join(map(str, range(200, 216))) + "\n"
    assert run("seeds", "3", "qat-probes").stdout.split() == [str(s) for s in wave.get("rung1")["runs"]["qat-probes"]["seeds"]]
    p = run("grid", "confirm2", "qat")  # the existing waves keep their grids in sweep.sh
    assert p.returncode == 2 and "declares no jobs" in p.stderr


# -----------------------------------------------------------------------------
# the engine's rules, on hand-made inputs

def runs_of(*rows):
    return [{"config": {"seed": s}, "versions": {"cpu_capability": cap, **({"cpu_model": m} if m else {}), "cpu": "x"}}
            for s, cap, m in rows]


def test_one_cpu_model_within_each_seed():
    w = {**wave.get("confirm2"), "machine_rule": "one model per seed"}
    s = wave.seeds(w, "qat")
    ok = wave.check_runs(w, "qat", runs_of((s[0], "AVX512", "A"), (s[0], "AVX512", "A"), (s[1], "AVX2", "B")))
    assert ok["seeds_by_cpu"] == {"A": [s[0]], "B": [s[1]]} and ok["machine"]["cpu_capability"] == ["AVX2", "AVX512"]
    with pytest.raises(UserError, match=f"seed {s[0]} has runs on 2 CPU models"):
        wave.check_runs(w, "qat", runs_of((s[0], "AVX512", "A"), (s[0], "AVX512", "B")))
    old = wave.check_runs(w, "qat", runs_of((s[0], "AVX512", None), (s[1], "AVX512", None)))
    assert old["seeds_by_cpu"] is None  # older records, one model (versions.cpu): nothing new to store
    with pytest.raises(UserError, match="CPU kinds"):  # the existing waves' rule: one kind for every run
        wave.check_runs(wave.get("confirm2"), "qat", runs_of((s[0], "AVX512", "A"), (s[1], "AVX2", "A")))
    with pytest.raises(UserError, match="outside the declared fresh seeds"):
        wave.check_runs(w, "qat", runs_of((0, "AVX512", "A")))


def test_a_sesoi_refutes_an_interval_inside_it():
    fam = {"hypotheses": [{"effect": 0.01, "ci": [0.005, 0.015], "passed": True, "declared": 1, "sesoi": 0.02},
                          {"effect": 0.05, "ci": [0.03, 0.07], "passed": True, "declared": 1, "sesoi": 0.02}]}
    a, b = wave.in_declared_direction(fam)["hypotheses"]
    assert a["negligible"] and not a["passed"] and b["passed"] and not b["negligible"]
    assert ledger.hypothesis_status(a)[0] == "refuted" and wave.words(a).startswith("refuted")


def test_analyze_discovers_the_waves(capsys):
    """--wave N takes the numbers of studies/waves/*.toml, and no other."""
    assert analyze.main(["--power", os.path.join(ROOT, "results", "qat"), "--confirm", "--wave", "3"]) == 0
    assert "## Rung plan: qat" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        analyze.main(["--power", os.path.join(ROOT, "results", "qat"), "--confirm", "--wave", str(max(w["wave"] for w in WAVES) + 1)])
