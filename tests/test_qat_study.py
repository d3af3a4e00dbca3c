"""The QAT study end to end on synthetic records: every run that `sweep.sh --dry-run qat` and
`qat-probes` list gets a result.json from a known law plus seed noise, then analyze.py must recover
the law, test it on the held-out sizes, and give the planted schedule verdict."""
import dataclasses
import json
import math
import os
import shlex
import subprocess

import numpy as np
import pytest
import torch
from scipy import stats as scistats

from conftest import ROOT
import analyze
from studies import qat
import train
from model import GPT

# the planted truth: P_b(N) = alpha_b + beta_b ln N, a schedule optimum at warmdown 0.33 for every
# (bits, size) except INT4 below 50M where the three warmdowns tie (pure noise)
LAW = {8: (0.020, -0.001), 6: (0.30, -0.015), 4: (1.20, -0.055), 3: (2.0, -0.09)}
SEED_SD = 0.003
BASE = "optimizer=muon,schedule=wsd,budget=x1"  # the grid's variant name: every splitting key, fixed order


def planted_loss(bits, n, wd, lr, seed, budget, tokens=None, law=None):
    base = 8.0 - 0.25 * math.log(n) - 0.05 * math.log(budget)
    sched = 0.0 if bits == 4 and n < 4e7 else 0.4 * (wd - 0.33) ** 2
    lr_term = 0.02 * math.log2(lr) ** 2
    penalty = 0.0 if bits == 16 else law(bits, n, tokens) if law else LAW[bits][0] + LAW[bits][1] * math.log(n)
    rng = np.random.default_rng([seed, int(n) % 100003, int(wd * 100), int(lr * 100), bits])
    shared = np.random.default_rng([seed, int(n) % 100003]).normal(0, SEED_SD)  # the init swing, shared by all cells
    return base + sched + lr_term + penalty + shared + rng.normal(0, SEED_SD / 3)


def grid_lines(study, scale, out):
    env = {**os.environ, "SCALE": scale, "OUT": out, "PYTHON": "python"}
    p = subprocess.run(["bash", os.path.join(ROOT, "sweep.sh"), "--dry-run", study], env=env,
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def write_records(lines, n_params, law=None):
    """One result.json per train.py line, written as train.py would (config, model_config, params,
    metrics, tokens), with the planted loss (law(bits, N, D): the penalty, instead of LAW)."""
    sizes = {}
    for line in lines:
        argv = shlex.split(line.split(" && ")[0])[2:]
        cfg = train.parse_args(argv)
        mcfg = train.model_config(cfg, 4096)
        key = (mcfg.n_layer, mcfg.n_embd, mcfg.n_head)
        if key not in n_params:
            with torch.device("meta"):  # the real parameter count, no memory
                n_params[key] = GPT(mcfg).num_params(non_embedding=True)
        n = n_params[key]
        tokens = cfg.tokens or cfg.iters * cfg.batch_size * mcfg.block_size
        sizes.setdefault(cfg.size, tokens)
        budget = tokens / sizes[cfg.size] if "_x" not in cfg.out_dir else float(cfg.out_dir.rsplit("_x", 1)[1])
        loss = planted_loss(mcfg.bits, n, cfg.warmdown, cfg.lr, cfg.seed, budget, tokens, law)
        os.makedirs(cfg.out_dir, exist_ok=True)
        rec = dict(run_name=os.path.basename(cfg.out_dir), status="done", config=dataclasses.asdict(cfg),
                   model_config=dataclasses.asdict(mcfg), params=dict(non_embedding=n), tokens=tokens,
                   metrics=dict(val_loss=loss))
        with open(os.path.join(cfg.out_dir, "result.json"), "w") as f:
            json.dump(rec, f)


@pytest.fixture(scope="module")
def paper_study(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("sweeps"))
    qat, probes = grid_lines("qat", "paper", out), grid_lines("qat-probes", "paper", out)
    assert len(qat) == 720 and len(qat) + len(probes) > 1200
    n_params = {}
    write_records(qat + probes, n_params)
    report = os.path.join(out, "report")
    assert analyze.main([os.path.join(out, "qat"), os.path.join(out, "qat-probes"), "--fit_sizes",
                         "15M,30M,50M,100M", "--out", report, "--no_plots"]) == 0
    return json.load(open(os.path.join(report, "analysis.json"))), open(os.path.join(report, "analysis.md")).read()


def test_paper_grid_recovers_the_law_and_tests_the_held_out_sizes(paper_study):
    rep, md = paper_study
    laws = {(g["variant"], g["bits"]): g for g in rep["penalty_law"]["laws"]}
    # one base variant holds the grid, the extra sizes and the INT4 sizes (not one variant per size)
    assert {v for v, b in laws} == {BASE, "optimizer=adamw,schedule=wsd,budget=x1", "optimizer=muon,schedule=cosine,budget=x1",
                                    "optimizer=muon,schedule=wsd,budget=x3", "optimizer=muon,schedule=wsd,budget=x9"}
    for bits in (8, 6, 4):
        g = laws[(BASE, bits)]
        assert g["fit_sizes"] == ["15M", "30M", "50M", "100M"]
        assert g["alpha"] == pytest.approx(LAW[bits][0], abs=0.03 + abs(LAW[bits][0]) * 0.05)
        assert g["beta"] == pytest.approx(LAW[bits][1], abs=0.002 + abs(LAW[bits][1]) * 0.05)
        held = {h["size"] for h in g["held_out"]}
        want = {"5M", "8M", "175M", "250M", "350M"} if bits != 4 else {"3M", "5M", "8M", "20M"}
        assert held == want, (bits, held)
        for h in g["held_out"]:
            assert h["lo"] < h["pred"] < h["hi"] and h["n_params"] > 0
        k, n = map(int, g["coverage"].split("/"))
        assert n == len(want) and k >= n - 1  # the planted law holds: (almost) every held-out size inside
    assert "Held-out coverage" in md


def test_paper_grid_verdict_per_bits_and_size(paper_study):
    rep, _ = paper_study
    verdict = [c for c in rep["qat"]["verdict"] if c["variant"] == BASE]
    grid = [c for c in verdict if c["bits"] in (16, 8, 6) and c["size"] in ("15M", "30M", "50M", "100M")]
    assert len(grid) == 12 and all(c["best_warmdown"] == 0.33 and c["same_as_fp16"] for c in grid)
    assert all(len(c["lrs"]) == 4 for c in grid)  # the LR axis is resolved inside the verdict
    big4 = [c for c in verdict if c["bits"] == 4 and c["size"] in ("50M", "100M")]
    assert len(big4) == 2 and all(c["best_warmdown"] == 0.33 for c in big4)
    for c in big4:  # decisive: the best wins on every seed
        other = next(r for r in c["warmdowns"] if r["z"] is not None)
        assert other["best_wins"] == other["n_paired"] == 10 and other["z"] > 3
    # cells keep the per-LR detail: 3 bits x 4 sizes x 4 LRs in the grid
    cells = [c for c in rep["qat"]["cells"] if c["variant"] == grid[0]["variant"] and c["size"] in
             ("15M", "30M", "50M", "100M") and c["bits"] in (16, 8, 6)]
    assert len(cells) == 48 and all(set(r) >= {"warmdown", "mean", "sd", "n", "z", "best_wins"}
                                    for c in cells for r in c["warmdowns"])


def test_paper_probes_are_separate_variants_and_cosine_has_no_verdict(paper_study):
    rep, _ = paper_study
    variants = {c["variant"] for c in rep["qat"]["cells"]}
    assert any("budget=x3" in v for v in variants) and any("budget=x9" in v for v in variants)
    assert any("optimizer=adamw" in v for v in variants) and any("schedule=cosine" in v for v in variants)
    assert not any("schedule=cosine" in c["variant"] for c in rep["qat"]["verdict"])  # one warmdown: descriptive


def test_fit_sizes_without_runs_is_a_one_line_error(paper_study, tmp_path, capsys):
    rep, _ = paper_study
    from test_analyze import make_grid
    make_grid(tmp_path)
    assert analyze.main([str(tmp_path), "--fit_sizes", "1M,7M", "--no_plots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "7M" in err[0]


def test_tiny_grid_end_to_end(tmp_path):
    """The tiny design as sweep.sh lists it: qat (fit sizes 14K-39K, held-out 6K and 55K) and qat-probes
    (held-out 10K and 0.1M, INT3) analysed together, as `sweep.sh --post qat-probes` does."""
    out = str(tmp_path)
    write_records(grid_lines("qat", "tiny", out) + grid_lines("qat-probes", "tiny", out), {})
    report = os.path.join(out, "report")
    assert analyze.main([os.path.join(out, "qat"), os.path.join(out, "qat-probes"), "--fit_sizes", "14K,25K,39K",
                         "--out", report]) == 0
    rep = json.load(open(os.path.join(report, "analysis.json")))
    laws = {(g["variant"], g["bits"]): g for g in rep["penalty_law"]["laws"]}
    g3, g4 = laws[(BASE, 3)], laws[(BASE, 4)]
    assert g3["fit_sizes"] == g4["fit_sizes"] == ["14K", "25K", "39K"]
    assert [h["size"] for h in g3["held_out"]] == ["6K", "10K", "55K", "0.1M"]
    assert [h["size"] for h in g4["held_out"]] == ["6K", "55K"]
    assert g3["beta"] == pytest.approx(LAW[3][1], abs=0.01) and g3["seed_check"]["dof"] == 1
    assert all(h["z_seed"] is not None for h in g3["held_out"])
    verdict = {(c["bits"], c["size"]): c for c in rep["qat"]["verdict"] if c["variant"] == BASE}
    assert set(verdict) == {(b, s) for b in (16, 4, 3) for s in ("14K", "25K", "39K")}  # held-out sizes: no verdict
    assert all(len(c["warmdowns"]) == 3 for c in verdict.values())
    # the planted optimum (INT4 below 40M params is planted as a tie: no claim)
    assert all(c["best_warmdown"] == 0.33 and c["same_as_fp16"] for (b, s), c in verdict.items() if b != 4)
    assert {"qat_warmdown.png", "penalty_vs_size.png"} <= set(os.listdir(report))
    # the tiny probes make the new tests possible: the LR axis at 25K, the N-D law for INT3 (D varies at
    # 14K and 25K), the interaction at every fit size, the INT4 transition over the fit sizes
    assert verdict[(16, "25K")]["lrs"] == [0.5, 1.0, 2.0] and verdict[(16, "14K")]["lrs"] == [1.0]
    nd = {g["bits"]: g for g in rep["penalty_law"]["laws_nd"] if g["variant"] == "optimizer=muon,schedule=wsd"}
    assert nd[3]["k"] is not None and nd[3]["n"] == 6 and nd[4]["k"] is None
    assert {(r["size"], r["bits"]) for r in rep["qat"]["interaction"] if r["variant"] == BASE} == \
        {(s, b) for s in ("14K", "25K", "39K") for b in (4, 3)}
    t, = [t for t in rep["qat"]["int4_transition"] if t["variant"] == BASE]
    assert [r["size"] for r in t["rows"]] == ["14K", "25K", "39K"]


# ---------------------------------------------------------------- the referee's statistics

def test_paper_grid_interaction_and_int4_transition(paper_study):
    """The paper grid's planted truth: INT4 has no schedule effect below 40M (FP16 has), so the
    bits x warmdown interaction is there for INT4 at 15M and 30M and not for INT8 / INT6; wd 0.33
    is lower for INT4 from 50M on (passed in the family, Holm-adjusted), and that is the transition."""
    rep, md = paper_study
    inter = {(r["size"], r["bits"]): r for r in rep["qat"]["interaction"] if r["variant"] == BASE}
    assert inter[("15M", 4)]["p"] < 1e-6 and inter[("30M", 4)]["p"] < 1e-6
    assert inter[("15M", 4)]["passed"] and inter[("30M", 4)]["passed"]
    # the grid's own cells (every warmdown) are decided in qat's family, not in this one (the probes')
    assert rep["qat"]["family"]["scope"] == "probes"
    assert all(inter[(s, b)]["p"] > 1e-3 and "passed" not in inter[(s, b)] for s in ("15M", "30M", "50M", "100M")
               for b in (8, 6))
    # the repeated-measures F of 5 seeds x 3 warmdowns, and the difference in differences beside it
    assert inter[("15M", 6)]["n_seeds"] == 5 and (inter[("15M", 6)]["df1"], inter[("15M", 6)]["df2"]) == (2, 8)
    assert [d["warmdown"] for d in inter[("15M", 6)]["did"]] == [0.1, 0.6]
    # planted at 15M INT4: the penalty at 0.1 is lower than at 0.33 by FP16's schedule cost 0.4 (0.23)^2
    d01 = inter[("15M", 4)]["did"][0]
    assert d01["ci"][0] < -0.4 * 0.23 ** 2 < d01["ci"][1]
    t = next(t for t in rep["qat"]["int4_transition"] if t["variant"] == BASE)
    assert [r["size"] for r in t["rows"]] == ["3M", "5M", "8M", "15M", "20M", "30M", "50M", "100M"]
    assert t["from_size"] == "50M" and all(r["passed"] and r["mean_diff"] > 0 for r in t["rows"][-2:])
    assert not any(r["passed"] for r in t["rows"][:-2])  # the planted tie below 40M
    assert all(r["wins"] == 10 and r["z"] > 10 for r in t["rows"][-2:])
    assert "bits x warmdown interaction" in md and "lower at every size from: **50M**" in md


def test_paper_grid_family_decides_every_verdict_and_stores_per_seed_values(paper_study):
    """One declared family (qat.family): every tested statement a hypothesis, Holm-adjusted together;
    the nulls carry the effect their test would have detected; every cell keeps its per-seed values."""
    rep, md = paper_study
    fam = rep["qat"]["family"]
    hyps = fam["hypotheses"]
    assert fam["m"] == len(hyps) == sum(h["p"] is not None for h in hyps)
    assert all(h["p_holm"] >= h["p"] for h in hyps if h["p"] is not None)
    claims = " | ".join(h["claim"] for h in hyps)
    for what in ("bits x warmdown interaction", "INT4 at 50M: wd 0.1 against wd 0.33", "the best warmdown moves with size",
                 "departs from the law alpha + beta ln N", "gamma_D != 0", "the penalty differs from the grid's"):
        assert what in claims, what
    inter = [h for h in hyps if "interaction" in h["claim"] and h.get("margin") is None]
    nulls = [h for h in inter if not h["passed"]]
    # the seed's null as its own test: an equivalence hypothesis (TOST, the declared margin) per interaction cell
    eq = [h for h in hyps if h.get("margin") is not None]
    assert len(eq) == len(inter) and all(h["margin"] == fam["margin"] and h["mde"] is None for h in eq)
    assert all(h["ci"][0] <= h["effect"] <= h["ci"][1] for h in eq if h["ci"])
    assert nulls and all(h["mde"] and h["mde"] > 0 for h in nulls)
    # the F and coefficient tests carry their own detectable effect beside a null too
    laws = [h for h in hyps if "departs from" in h["claim"] or "N-D law" in h["claim"]]
    assert laws and all(h["mde"] > 0 for h in laws if not h["passed"])
    # the planted FP16 schedule cost is the same at every size (the extremes with both warmdowns: the INT4
    # probe's 3M and the held-out 350M): "moves with size" does not pass for FP16
    moves = {r["bits"]: r for r in rep["qat"]["moves"] if r["variant"] == BASE}
    assert (moves[16]["small"], moves[16]["large"]) == ("3M", "350M") and not moves[16]["passed"]
    assert moves[4]["passed"] and moves[4]["effect"] > 0  # INT4: no gain below 40M, a gain above
    # per-seed values everywhere a mean is stored
    cell = rep["qat"]["cells"][0]["warmdowns"][0]
    assert len(cell["per_seed"]) == cell["n"] and np.mean(list(cell["per_seed"].values())) == pytest.approx(cell["mean"])
    law = next(g for g in rep["penalty_law"]["laws"] if g["variant"] == BASE and g["bits"] == 6)
    assert all(len(r["per_seed"]) == r["n"] for r in law["sizes"])
    assert all(len(r["per_seed"]) == r["n"] for r in rep["penalty_law"]["variant_contrasts"])
    assert "The family: every verdict of this analysis" in md


ND = (0.8, 0.4, 0.25)  # k, gamma_N, gamma_D of the planted INT6 law


def test_paper_grid_recovers_a_planted_law_in_size_and_tokens(tmp_path):
    """Synthetic records of the whole paper grid (qat + qat-probes) with the INT6 penalty planted as
    k D^gamma_D / N^gamma_N: the N-D law recovers k and both exponents, covers the held-out sizes, and
    predicts the longer-training runs that the log-linear law in N (blind to D) misses."""
    out = str(tmp_path)
    law = lambda bits, n, d: ND[0] * d ** ND[2] / n ** ND[1] if bits == 6 else LAW[bits][0] + LAW[bits][1] * math.log(n)
    write_records(grid_lines("qat", "paper", out) + grid_lines("qat-probes", "paper", out), {}, law)
    report = os.path.join(out, "report")
    assert analyze.main([os.path.join(out, "qat"), os.path.join(out, "qat-probes"), "--study", "qat-probes",
                         "--fit_sizes", "15M,30M,50M,100M", "--out", report, "--no_plots"]) == 0
    rep = json.load(open(os.path.join(report, "analysis.json")))
    g = next(g for g in rep["penalty_law"]["laws_nd"] if g["variant"] == "optimizer=muon,schedule=wsd" and g["bits"] == 6)
    assert g["k"] == pytest.approx(ND[0], rel=0.25)
    assert g["gamma_N"] == pytest.approx(ND[1], abs=0.02) and g["gamma_D"] == pytest.approx(ND[2], abs=0.02)
    assert g["coverage"].endswith("/5")  # tested at 5M, 8M, 175M, 250M, 350M
    e = g["error"]
    assert e["nd"]["held_out_sizes"] < e["n"]["held_out_sizes"]
    assert e["nd"]["longer_training"] < 0.2 * e["n"]["longer_training"]  # the N law cannot follow D
    assert {c["budget"] for c in g["held_out"]} == {"x1", "x3", "x9"}
    # without D varying at fixed N (INT4 runs only at x1, D = 20 N) the law is refused, not fitted
    g4 = next(g for g in rep["penalty_law"]["laws_nd"] if g["variant"] == "optimizer=muon,schedule=wsd" and g["bits"] == 4)
    assert g4["k"] is None and "not identified" in g4["message"]


def test_int4_transition_follows_ref_warmdown():
    """int4_transition compares INT4 at --ref_warmdown against the short warmdown, not at a literal 0.33."""
    seeds = {0: 0.0, 1: 0.01, 2: -0.01}
    cell = {0.1: {s: 3.0 + e for s, e in seeds.items()}, 0.33: {s: 2.9 + e for s, e in seeds.items()},
            0.6: {s: 3.2 + e / 2 for s, e in seeds.items()}}
    at_best = {("", 4, "14K"): cell}
    t = qat.int4_transition(at_best, {"14K": 0})[0]
    assert (t["ref_warmdown"], t["short_warmdown"]) == (0.33, 0.1) and t["rows"][0]["z"] > 0
    t = qat.int4_transition(at_best, {"14K": 0}, ref=0.6)[0]
    assert t["ref_warmdown"] == 0.6 and t["rows"][0]["z"] < 0 and t["rows"][0]["mean_diff"] == pytest.approx(-0.2)
    # the paired t test on n - 1 dof, with its interval (no z >= 3 rule)
    assert t["rows"][0]["p"] == pytest.approx(scistats.ttest_rel(list(cell[0.1].values()), list(cell[0.6].values())).pvalue)
    assert t["rows"][0]["ci"][0] < -0.2 < t["rows"][0]["ci"][1] and "z_min" not in t


def test_fp16_meets_int4_at_the_lrs_int4_was_run_at():
    """The paper probes run INT4 at LR 1 only while FP16 has several LRs: FP16's best warmdown and the
    interaction beside INT4 come from FP16 at LR 1 too, not from its best of all LRs. Planted: FP16 is
    best at wd 0.1 with LR 0.5 (its lowest losses overall) and at wd 0.33 with LR 1; INT4 (LR 1) at 0.33."""
    from studies import qat
    loss = {(16, 0.5, 0.1): 3.0, (16, 0.5, 0.33): 3.2, (16, 1.0, 0.1): 3.4, (16, 1.0, 0.33): 3.3,
            (4, 1.0, 0.1): 3.6, (4, 1.0, 0.33): 3.5}
    recs = [dict(variant="probe", bits=b, size="50M", lr=lr, warmdown=w, seed=sd, loss=y + 0.01 * ((sd * 7 + b) % 3))
            for (b, lr, w), y in loss.items() for sd in range(3)]
    rep = qat.qat_report(recs, {"50M": 0})
    v = {c["bits"]: c for c in rep["verdict"]}
    assert v[16]["best_warmdown"] == 0.1 and v[4]["best_warmdown"] == 0.33
    assert v[4]["fp16_best_warmdown"] == 0.33 and v[4]["same_as_fp16"] and v[4]["fp16_lrs"] == [1.0]
    (row,) = rep["interaction"]
    assert row["bits"] == 4 and row["p"] > 0.05  # at LR 1 both prefer 0.33 by 0.1: no interaction
