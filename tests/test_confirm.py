"""The confirmatory designs of wave 1 (studies/waves/wave1.toml, CONFIRM=1 bash sweep.sh STUDY): the seeds sweep.sh runs are
the declared fresh ones, the seed counts are the planner's on the stored pilot, the grid holds only the
declared cells, and the analysis decides the declared family end to end on synthetic records of every run
(planted effects found, a planted interaction not called equivalent, pilot seeds and mixed machines refused)."""
import json
import os
import shutil
import subprocess

import pytest

import analyze
from conftest import ROOT
from studies import wave
from test_analyze import write_algo, write_factorial, write_run
from test_qat_study import write_records
from test_sweep import env, sweep, train_steps  # noqa: F401 (env: the stub-python fixture)

W1 = wave.get("confirm")
STUDIES = list(W1["runs"])
PILOT_SEEDS = set(W1["pilot_seeds"])
seeds_of = lambda study: wave.seeds(W1, study)  # noqa: E731
COUNTS = {"qat": 8 * 3 * 2, "qat-probes": 13 * 3 * 2 * 2, "longctx": 10 * 10, "lengen": 16 * 3 * 2, "posenc": 8 * 3 * 2}


def _lines(study, out):
    p = subprocess.run(["bash", os.path.join(ROOT, "sweep.sh"), "--dry-run", study], capture_output=True, text=True,
                       env={**os.environ, "SCALE": "tiny", "CONFIRM": "1", "OUT": out, "PYTHON": "python"},
                       timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


@pytest.mark.parametrize("study", STUDIES)
def test_the_grid_runs_the_declared_fresh_seeds_and_cells_only(study, tmp_path):
    lines = _lines(study, str(tmp_path))
    assert len(lines) == COUNTS[study]
    seeds = {int(train_steps(line)[train_steps(line).index("--seed") + 1]) for line in lines}
    assert seeds == set(seeds_of(study)) and not seeds & PILOT_SEEDS
    assert len(seeds) >= W1["min_seeds"]
    assert all(f"{tmp_path}/confirm/{study}/" in line for line in lines)  # apart from the pilot's runs
    args = [train_steps(line) for line in lines]
    val = lambda a, k, d=None: a[a.index(k) + 1] if k in a else d
    if study == "qat":
        assert {(val(a, "--size"), val(a, "--bits"), val(a, "--warmdown")) for a in args} == {
            ("39K", b, w) for b in ("16", "4") for w in ("0.1", "0.33", "0.6")}
    elif study == "qat-probes":
        assert {(val(a, "--size"), val(a, "--bits"), val(a, "--optimizer", "muon"), "_x3" in val(a, "--out_dir")) for a in args} == {
            (s, b, o, lg) for s, o, lg in (("25K", "adamw", False), ("14K", "muon", True)) for b in ("16", "3")}
    elif study == "longctx":
        count = lambda a: ((val(a, "--qk_norm") != "none") + (val(a, "--n_kv_head") == "1") + ("--window" in a)
                           + (val(a, "--block_size") == "64"))
        assert sorted(count(a) for a in args if val(a, "--seed") == "100") == [0, 1, 1, 1, 1, 3, 3, 3, 3, 4]
        assert all(line.count("extend.py") == 1 and line.count("evaluate.py") == 2 for line in lines)
    elif study == "lengen":
        assert {(val(a, "--algo"), val(a, "--pos")) for a in args} == {
            (t, p) for t in ("copy", "sort", "parity_scratch") for p in ("rope", "nope")}
    else:
        kinds = {(val(a, "--pos", "swan" if "--swan" in a else "chunk" if "--chunk_layers" in a else None),
                  val(a, "--task_mix", "text")) for a in args}
        assert kinds == {(e, m) for e in ("rope", "swan", "chunk") for m in ("text", "1.0")}


@pytest.mark.parametrize("study", STUDIES)
def test_the_declared_seed_counts_are_the_planners_on_the_stored_pilot(study):
    """analyze.py --power results/STUDY --confirm: >= 8, <= the cap, the most any hypothesis needs."""
    with open(os.path.join(ROOT, "results", study, "analysis.json")) as fh:
        plan = wave.plan(W1, study, json.load(fh))
    assert len(seeds_of(study)) == plan["seeds"]
    assert len(plan["families"][study]["rows"]) == len(W1["families"][study]["hypotheses"]) <= 4
    if not plan["capped"]:
        assert plan["seeds"] == max(W1["min_seeds"], plan["needed"])


def test_confirm_is_tiny_only(env):
    p = sweep(env, "--count", "qat", CONFIRM="1", SCALE="paper")
    assert p.returncode == 2 and "CONFIRM=1 is the tiny confirmatory design" in p.stderr
    p = sweep(env, "--count", "qat", CONFIRM="yes")
    assert p.returncode == 2 and "CONFIRM must be 0-9 (a wave of studies/waves/)" in p.stderr
    p = sweep(env, "--count", "longctx", CONFIRM="9")  # no wave 9 declared: the engine says so, nothing runs
    assert p.returncode == 2 and "no wave" in p.stderr


def test_the_sweep_records_its_wall_over_sittings(env, tmp_path):
    """A confirm sweep writes OUT/confirm/STUDY/wall.json (seconds summed over sittings); a sitting with nothing
    left to run adds nothing; the runs resume (finished ones skipped)."""
    p = sweep(env, "qat", CONFIRM="1", timeout=120)
    assert p.returncode == 0, p.stderr
    wall = tmp_path / "out" / "confirm" / "qat" / "wall.json"
    w = json.loads(wall.read_text())
    assert w["sittings"] == 1 and w["seconds"] >= 0 and w["jobs"] == 2
    p = sweep(env, "--dry-run", "qat", CONFIRM="1")
    assert p.stdout == "" and f"{COUNTS['qat']} finished, 0 to run" in p.stderr
    assert sweep(env, "qat", CONFIRM="1", timeout=120).returncode == 0
    assert json.loads(wall.read_text())["sittings"] == 1


def decide(folder, study, capsys=None):
    rc = analyze.main([str(folder), "--study", study, "--confirm", "--no_plots"])
    rep = json.loads((folder / "analysis.json").read_text()) if rc == 0 else None
    return rc, rep


def test_qat_end_to_end_a_planted_interaction_is_not_equivalent(tmp_path):
    """Every confirm run of qat as a synthetic record (the planted world of test_qat_study: INT4 below 40M has
    no schedule effect while FP16 pays 0.4 (wd - 0.33)^2, so the penalty moves by 0.021 nats between wd 0.1 and
    0.33): the null is not shown equivalent at +-0.01, and INT4's wd 0.33 preference is not there to find."""
    out = tmp_path / "sweeps"
    write_records(_lines("qat", str(out)), {})
    rc, rep = decide(out / "confirm" / "qat", "qat")
    assert rc == 0
    fam = rep["confirmatory"]["family"]
    h = {x["id"]: x for x in fam["hypotheses"]}
    assert fam["m"] == 2 and fam["seeds_used"] == seeds_of("qat") and h["null"]["n"] == 8
    assert not h["null"]["passed"] and h["null"]["margin"] == 0.01 and abs(h["null"]["effect"]) > 0.015
    assert not h["int4_wd33"]["passed"] and abs(h["int4_wd33"]["effect"]) < 0.005 and h["int4_wd33"]["declared"] == 1
    md = (out / "confirm" / "qat" / "analysis.md").read_text()
    assert "## Confirmatory family: qat" in md and "not shown equivalent" in md


def test_qat_probes_end_to_end(tmp_path):
    out = tmp_path / "sweeps"
    write_records(_lines("qat-probes", str(out)), {})
    rc, rep = decide(out / "confirm" / "qat-probes", "qat-probes")
    assert rc == 0
    fam = rep["confirmatory"]["family"]
    assert [h["id"] for h in fam["hypotheses"]] == ["adamw_null", "long_null"] and fam["m"] == 2
    assert all(h["n"] == 13 and h["margin"] == 0.01 for h in fam["hypotheses"])


def test_longctx_end_to_end_planted_compounding_passes(tmp_path):
    """The 10 confirm cells at the 10 fresh seeds (write_factorial's runs; the count-2 cells removed): a loss
    rising by 0.03 nats a feature passes 'compound' and 'count_slope' in the declared direction, after the gate."""
    root = tmp_path / "confirm" / "longctx"
    write_factorial(root, lambda z: 3.6 + 0.03 * sum(z.values()), seeds=tuple(seeds_of("longctx")))
    for d in os.listdir(root):  # write_factorial names a run r<qk><gqa><swa><short>_s<seed>[-extension]
        if sum(map(int, d[1:5])) == 2:
            shutil.rmtree(root / d)
        elif "-" not in d:  # the parent's loss at the target: 0.1 above its extension's, plus a seed swing
            ev = json.loads((root / d / "eval.json").read_text())
            ev["target"]["loss"] += 0.002 * (int(d.rsplit("_s", 1)[1]) % 5)
            (root / d / "eval.json").write_text(json.dumps(ev))
    rc, rep = decide(root, "longctx")
    assert rc == 0
    h = {x["id"]: x for x in rep["confirmatory"]["family"]["hypotheses"]}
    assert h["extends"]["passed"] and h["extends"]["effect"] == pytest.approx(0.104)  # the gate: parent at target + 0.1 + swing
    # >= 3 features (3, 3, 3, 3, 4: mean 3.2) against <= 1 (0, 1, 1, 1, 1: mean 0.8): 2.4 features apart
    assert h["compound"]["n"] == 10 and h["compound"]["passed"] and h["compound"]["effect"] == pytest.approx(0.03 * 2.4, abs=0.002)
    assert h["count_slope"]["passed"] and h["count_slope"]["effect"] == pytest.approx(0.03, abs=0.005)


def test_lengen_end_to_end_the_gate_drops_a_seed_and_names_it(tmp_path):
    root = tmp_path / "confirm" / "lengen"
    seeds = seeds_of("lengen")
    for i, s in enumerate(seeds):
        for task in ("copy", "sort", "parity_scratch"):
            write_algo(root, task, "rope", s, 0.99, 0.05 + 0.01 * (i % 3))
            # sort: the first seed's NoPE run misses the 0.95 gate in distribution
            write_algo(root, task, "nope", s, 0.9 if (task == "sort" and i == 0) else 0.99, 0.30 + 0.02 * (i % 4))
    rc, rep = decide(root, "lengen")
    assert rc == 0
    h = {x["id"]: x for x in rep["confirmatory"]["family"]["hypotheses"]}
    assert h["copy_nope"]["passed"] and h["copy_nope"]["n"] == 16 and h["copy_nope"]["declared"] == 1
    assert h["sort_nope"]["n"] == 15 and h["sort_nope"]["gated_out"] == [str(seeds[0])]


def test_posenc_end_to_end_retrieval_gate_and_text(tmp_path):
    """RoPE, SWAN and chunk attention, text and passkey runs at the 8 fresh seeds: SWAN's text loss past 128 is
    planted 0.3 lower than RoPE's and chunk's retrieval 0.6 higher; one seed's chunk passkey run misses the
    in-distribution gate and leaves that hypothesis (named); the text hypotheses have no gate."""
    root = tmp_path / "confirm" / "posenc"
    seeds = seeds_of("posenc")
    lens = (128, 256, 512, 1024)
    for i, seed in enumerate(seeds):
        for enc, loss, exact in (("rope", (4.0, 4.6, 5.0, 5.4), (1.0, 0.2, 0.0, 0.0)),
                                 ("swan", (4.0, 4.3, 4.7, 5.1), (1.0, 0.3, 0.1, 0.0)),
                                 ("chunk", (4.0, 4.6, 5.0, 5.4), (1.0, 0.9, 0.7, 0.4))):
            mc = {"pos": "rope", "block_size": 128, "swan": enc == "swan", "chunk_layers": "1" if enc == "chunk" else ""}
            cfg = {"bits": 16, "seed": seed, "size": "0.1M", "block_size": 128, "model": dict(mc)}
            swing = 0.01 * (i % 3) + 0.004 * ((i + "rope swan chunk".split().index(enc)) % 4)  # the seed's, and the seed's for this encoding
            ppl = {"by_length": {str(L): x + swing * (L > 128) for L, x in zip(lens, loss)}}
            write_run(root, f"{enc}_s{seed}", cfg, {"val_loss": loss[0]}, model_config=mc,
                      eval_={"score": None, "ppl": ppl, "tasks": {}})
            ex = [x if not (enc == "chunk" and i == 0 and L == 128) else 0.5 for L, x in zip(lens, exact)]
            ex = [min(1.0, x + 0.01 * ((i + "rope swan chunk".split().index(enc)) % 4) * (L > 128)) for L, x in zip(lens, ex)]
            tasks_ = {"passkey": {"by_length": {str(L): {"exact": x, "rank": 1.0} for L, x in zip(lens, ex)}}}
            write_run(root, f"{enc}_passkey_s{seed}", {**cfg, "task_mix": 1.0, "task_list": "passkey"},
                      {"val_loss": 9.0}, model_config=mc, eval_={"score": sum(ex[1:]) / 3, "ppl": None, "tasks": tasks_})
    rc, rep = decide(root, "posenc")
    assert rc == 0
    h = {x["id"]: x for x in rep["confirmatory"]["family"]["hypotheses"]}
    assert rep["confirmatory"]["family"]["m"] == 4
    assert h["swan_text"]["passed"] and h["swan_text"]["effect"] == pytest.approx(-0.3, abs=0.02) and h["swan_text"]["n"] == 8
    assert h["swan_text"]["declared"] == -1 and not h["swan_text"]["opposite"]
    assert not h["chunk_text"]["passed"]
    assert h["chunk_passkey"]["passed"] and h["chunk_passkey"]["n"] == 7 and h["swan_passkey"]["n"] == 8 and h["chunk_passkey"]["gated_out"] == [str(seeds[0])]


def test_pilot_seeds_and_mixed_machines_are_refused(tmp_path, capsys):
    root = tmp_path / "confirm" / "lengen"
    for s in (0,) + tuple(seeds_of("lengen")[:3]):
        for task in ("copy", "sort", "parity_scratch"):
            for pos in ("rope", "nope"):
                write_algo(root, task, pos, s, 0.99, 0.3)
    rc, _ = decide(root, "lengen")
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "outside the declared fresh seeds" in err
    for d in os.listdir(root):
        if d.endswith("_s0"):
            shutil.rmtree(root / d)
    first = sorted(os.listdir(root))[0]
    r = json.load(open(root / first / "result.json"))
    r["versions"] = {"cpu_capability": "AVX512"}
    json.dump(r, open(root / first / "result.json", "w"))
    rc, _ = decide(root, "lengen")
    err = capsys.readouterr().err
    assert rc == 2 and "CPU kinds" in err


@pytest.mark.parametrize("study", STUDIES)
def test_the_writeup_opens_with_the_generated_confirmatory_section(study):
    with open(os.path.join(ROOT, "results", study, "README.md")) as fh:
        text = fh.read()
    with open(os.path.join(ROOT, "results", study, "analysis.json")) as fh:
        pilot = json.load(fh)
    conf_path = os.path.join(ROOT, "results", study, "confirm", "analysis.json")
    conf = json.load(open(conf_path)) if os.path.isfile(conf_path) else None
    begin, _ = wave.markers(W1)
    assert begin in text and text.index(begin) < text.index("**Question")
    assert wave.with_section(W1, text, study, conf, pilot) == text, \
        f"results/{study}/README.md: run python analyze.py --verdicts results/{study}"


def test_the_wave1_page_quotes_the_generated_confirmatory_verdicts():
    """results/wave1.md's confirmatory-verdicts section is exactly what analyze.py --front writes from
    results/*/confirm: every declared hypothesis, each with its verdict or 'pending', linked to its write-up."""
    with open(os.path.join(ROOT, "results", "wave1.md")) as fh:
        text = fh.read()
    assert wave.with_front(text, os.path.join(ROOT, "results"), "") == text, \
        "run python analyze.py --front results/wave1.md"
    assert "](qat/README.md)" in text and "](results/" not in text  # links from results/ itself
    section = text.split(wave.FRONT_BEGIN, 1)[1].split(wave.FRONT_END, 1)[0]
    n = sum(len(c["hypotheses"]) for c in W1["families"].values())
    assert section.count("\n| [") == n


def test_front_rewrites_only_its_section(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    (tmp_path / "README.md").write_text(f"before\n{wave.FRONT_BEGIN}\nstale\n{wave.FRONT_END}\nafter\n")
    assert analyze.main(["--front", str(tmp_path / "README.md")]) == 0
    text = (tmp_path / "README.md").read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "stale" not in text and "pending" in text
    (tmp_path / "README.md").write_text("no markers\n")
    assert analyze.main(["--front", str(tmp_path / "README.md")]) == 2
    assert (tmp_path / "README.md").read_text() == "no markers\n"
