"""Tests for analyze.py: the study helpers by hand, and the CLI on synthetic runs (the statistics: test_stats.py)."""
import itertools
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import analyze  # noqa: E402
from studies import encodings  # noqa: E402
from studies import longctx  # noqa: E402
from studies import common  # noqa: E402
from studies import stats  # noqa: E402
from scipy import stats as scistats  # noqa: E402


# -----------------------------------------------------------------------------
# study helpers by hand (the statistics themselves: tests/test_stats.py)

def test_feature_count():
    llama = {"n_head": 8, "n_kv_head": 8, "qk_norm": "none", "window": 0}
    assert longctx.feature_count(llama, 1024, 512) == 0
    assert longctx.feature_count(llama, 512, 512) == 1  # shorter pretraining context
    worst = {"n_head": 8, "n_kv_head": 2, "qk_norm": "head", "window": 64, "global_every": 4}
    assert longctx.feature_count(worst, 512, 512) == 4
    assert longctx.feature_count({**worst, "qk_norm": "layer"}, 1024, 512) == 3
    assert longctx.feature_count({"n_head": 4}, 512, None) == 0  # missing fields, single context
    assert longctx.feature_count({}, None, 512) == 0
    # an extended run keeps its pretraining length in rope_original_len
    assert common.pretrain_block({"model_config": {"rope_original_len": 128}, "config": {"block_size": 512}}) == 128
    assert common.pretrain_block({"model_config": {"rope_original_len": 0}, "config": {"block_size": 512}}) == 512


# -----------------------------------------------------------------------------
# CLI on synthetic runs

def write_run(root, name, config, metrics, params=None, model_config=None, extra=None, eval_=None):
    d = root / name
    d.mkdir(parents=True)
    res = {"run_name": name, "config": config, "model_config": model_config or {}, "params": params or {},
           "metrics": metrics, "status": "done", **(extra or {})}
    (d / "result.json").write_text(json.dumps(res))
    if eval_ is not None:
        (d / "eval.json").write_text(json.dumps(eval_))


SIZES = {"1M": 1e6, "4M": 4e6}


def qat_loss(bits, size, wd, seed):
    # best warmdown 0.33 everywhere except INT6 at 4M, where it is 0.5
    best = 0.5 if (bits, size) == (6, "4M") else 0.33
    noise = 0.002 * ((7 * seed + int(round(wd * 100))) % 3)  # varies by seed and warmdown
    return 3.0 - 0.1 * math.log(SIZES[size] / 1e6) + (0.05 if bits == 6 else 0.0) + 2 * (wd - best) ** 2 + noise


def make_grid(root):
    for bits in (16, 6):
        for size, n in SIZES.items():
            for wd in (0.1, 0.33, 0.5):
                for seed in range(3):
                    loss = qat_loss(bits, size, wd, seed)
                    write_run(root, f"b{bits}_{size}_wd{wd}_s{seed}",
                              {"bits": bits, "warmdown": wd, "lr": 1.0, "size": size, "seed": seed,
                               "schedule": "wsd", "optimizer": "muon", "block_size": 64,
                               "iters": 100 if size == "1M" else 400},  # scaled with size: not a probe
                              {"val_loss": loss, "val_loss_fp": loss, "train_loss": loss - 0.1},
                              params={"total": int(n) + 1000, "non_embedding": int(n)},
                              extra={"grid_distance": {"bits": 6, "qat": 0.25 if bits == 16 else 0.24}})


def test_cli_qat_grid(tmp_path, capsys):
    make_grid(tmp_path)
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    md = (tmp_path / "analysis.md").read_text()
    assert "| - | 6 | 4M | 0.5 (1) | 0.33 | NO |" in md  # the verdict table
    assert "| - | 6 | 1M | 0.33 (1) | 0.33 | yes |" in md
    assert "log-linear fit skipped, because 2 fit sizes" in md  # only 2 sizes
    rep = json.loads((tmp_path / "analysis.json").read_text())
    best = {(c["bits"], c["size"]): c["best_warmdown"] for c in rep["qat"]["cells"]}
    assert best == {(16, "1M"): 0.33, (6, "1M"): 0.33, (16, "4M"): 0.33, (6, "4M"): 0.5}
    verdict = {(c["bits"], c["size"]): (c["best_warmdown"], c["same_as_fp16"]) for c in rep["qat"]["verdict"]}
    assert verdict == {(16, "1M"): (0.33, True), (6, "1M"): (0.33, True), (16, "4M"): (0.33, True), (6, "4M"): (0.5, False)}
    # paired z against the best: wd 0.1 at 16/1M loses on every seed
    row = next(r for r in rep["qat"]["cells"][0]["warmdowns"] if r["warmdown"] == 0.1)
    assert row["best_wins"] == 3 and row["n_paired"] == 3 and row["z"] > 0
    # penalty INT6 - FP16 at the reference cell (lr 1, wd 0.33), paired on the 3 seeds: exactly 0.05
    law = rep["penalty_law"]["laws"][0]
    assert law["bits"] == 6 and law["sizes"][0]["penalty"] == pytest.approx(0.05) and law["sizes"][0]["n"] == 3
    assert law["alpha"] is None and "skipped" in law["message"]
    gd = rep["grid_distance"]["rows"][0]
    assert gd["ratio"] == pytest.approx(0.24 / 0.25) and gd["n"] == 3


def test_cli_penalty_fit_and_plots(tmp_path):
    sizes = {"1M": 1e6, "2M": 2e6, "4M": 4e6, "8M": 8e6, "16M": 16e6}
    for size, n in sizes.items():
        for seed in range(2):
            for bits in (16, 6):
                pen = (0.2 - 0.01 * math.log(n) + 0.001 * ((seed + len(size)) % 2)) if bits == 6 else 0.0
                write_run(tmp_path, f"b{bits}_{size}_s{seed}",
                          {"bits": bits, "warmdown": 0.33, "lr": 1.0, "size": size, "seed": seed},
                          {"val_loss": 3.0 + pen}, params={"non_embedding": int(n)})
    out = tmp_path / "report"
    assert analyze.main([str(tmp_path), "--out", str(out)]) == 0
    md = (out / "analysis.md").read_text()
    assert "Held-out coverage 2/2." in md  # 1M and 16M held out by default
    assert {"penalty_vs_size.png"} <= set(os.listdir(out))
    assert analyze.main([str(tmp_path), "--out", str(out), "--fit_sizes", "1M,2M,4M", "--no_plots"]) == 0
    g = json.loads((out / "analysis.json").read_text())["penalty_law"]["laws"][0]
    assert [r["role"] for r in g["sizes"]] == ["fit", "fit", "fit", "held-out", "held-out"]
    assert g["fit_sizes"] == ["1M", "2M", "4M"] and g["coverage"].endswith("/2")
    assert [h["size"] for h in g["held_out"]] == ["8M", "16M"] and all(h["lo"] < h["hi"] for h in g["held_out"])
    assert g["beta"] == pytest.approx(-0.01, abs=2e-3)  # the planted slope


FEATS = ("qk_norm", "gqa", "swa", "short_ctx")


def write_factorial(root, outcome, seeds=(0, 1, 2), noise=0.004, early=False, variant=None):
    """A 2^4 factorial of pretraining runs (result.json + eval.json), each extended with the main recipe
    (and, optionally, from an early checkpoint and with a variant recipe on seed 0); outcome(z) -> the
    post-extension loss of the cell z (dict of 0/1 features), plus seed noise centred within each cell
    (so the cell means, and every effect, are exactly the planted ones; the intervals come from the spread)."""
    rng = np.random.default_rng(1)
    for z in itertools.product((0, 1), repeat=4):
        zz = dict(zip(FEATS, z))
        ctx = 64 if zz["short_ctx"] else 128
        mc = {"n_head": 2, "n_kv_head": 1 if zz["gqa"] else 2, "qk_norm": "head" if zz["qk_norm"] else "none",
              "window": 32 if zz["swa"] else 0, "block_size": ctx}
        eps = noise * rng.standard_normal(len(seeds))
        for seed, e in zip(seeds, eps - eps.mean()):
            name = "r" + "".join(map(str, z)) + f"_s{seed}"
            y = outcome(zz) + e
            write_run(root, name, {"block_size": ctx, "seed": seed},
                      {"val_loss": 3.8 + 0.01 * seed, "train_loss_smooth": 3.7 + 0.002 * rng.standard_normal()},
                      model_config=mc, eval_={"ppl": {"by_length": {str(ctx): 3.85}}, "sink_rate": 0.25 * sum(z) % 1,
                                              "sink_strength": 0.03 + 0.001 * seed, "target": {"loss": y + 0.1}})
            recipes = [("ntk", 1, 0.05, "final", y)]
            if early:
                recipes.append(("ntk", 1, 0.05, "0.5", y + 0.05 + 0.5 * noise * rng.standard_normal()))
            if variant and seed == 0:
                recipes.append((*variant, "final", y + 0.02))
            for method, stages, frac, ckpt, val in recipes:
                lin = {"parent": str(root / name), "parent_ckpt": ckpt, "method": method, "stages": stages,
                       "stage": stages, "budget": {"source": "token_frac", "token_frac": frac}, "short_frac": 0.25}
                write_run(root, f"{name}-{method}{stages}-f{frac}-{ckpt}", {"block_size": 512, "seed": seed},
                          {"val_loss": val}, model_config={**mc, "block_size": 512, "rope_original_len": ctx},
                          extra={"lineage": lin}, eval_={"target": {"loss": val, "longppl_loss": 2.5 + val / 10,
                                                                    "retrieval": None}})


def lc_report(tmp_path, **kw):
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    return json.loads((tmp_path / "analysis.json").read_text())["longctx"]


def coef(model, name):
    return next(c for c in model["coefs"] if c["name"] == name)


def test_longctx_planted_additive_effects_recovered(tmp_path):
    planted = {"qk_norm": 0.05, "gqa": 0.01, "swa": -0.03, "short_ctx": 0.08}
    write_factorial(tmp_path, lambda z: 3.9 + sum(planted[k] * z[k] for k in FEATS), early=True,
                    variant=("yarn", 2, 0.05))
    lc = lc_report(tmp_path)
    assert lc["main_recipe"] == "ntk frac=0.05 short_frac=0.25" and lc["short_block"] == 64
    assert lc["recipes"] == {"ntk frac=0.05 short_frac=0.25": 48, "yarn 2-stage frac=0.05 short_frac=0.25": 16}
    o = lc["outcomes"]["loss"]
    assert o["n"] == 48 and o["n_cells"] == 16 and o["seeds"] == [0, 1, 2]
    models = {m["model"]: m for m in o["models"]}
    for k, v in planted.items():  # every planted effect inside its 95% CI, the CI narrow
        e = next(e for e in o["effects"] if e["feature"] == k)
        assert e["lo"] < v < e["hi"] and e["hi"] - e["lo"] < 0.01 and 0 < e["seed_sd"] < 0.01
        assert e["effect"] == pytest.approx(v, abs=1e-9)
        assert e["effect"] == pytest.approx(coef(models["additive"], k)["est"])
    for r in o["remove_one"]["increments"]:  # additive: removing feature i costs its own effect
        assert r["lo"] < planted[r["feature"]] < r["hi"]
    assert o["remove_one"]["equal"]["p"] < 1e-6  # unequal increments: the count hypothesis fails
    assert models["additive"]["loo_r2"] > 0.95 > models["count"]["loo_r2"]
    assert models["additive"]["loco_r2"] > 0.95
    tests = {t["test"]: t for t in o["tests"]}
    assert tests["count vs additive"]["p"] < 1e-6 and tests["additive vs pairwise"]["p"] > 0.001
    assert o["best_by_loo"] in ("additive", "pairwise", "saturated") and o["best_by_loco"] in ("additive", "pairwise")
    rd = o["relative_drop"]  # best cell: SWA alone (3.87); worst: QK-norm, GQA, short context (4.04)
    assert (rd["best_cell"], rd["worst_cell"]) == ("0010", "1101") and rd["drop_pct"] == pytest.approx(100 * 0.17 / 3.87)
    sk = lc["sinks"]  # sinks form in some roots (0.25 x count mod 1): the path is reported
    assert sk["formed"] and (sk["rate_min"], sk["rate_max"]) == (0.0, 0.75) and sk["path"]["within_ctx"]
    sv = o["seed_variance"]
    assert 0.002 < sv["init_sd"] < 0.008 and sv["dof"] == 32 and 0 < sv["swing_share_max"] < 0.2
    assert o["early"]["n"] == 48 and o["early"]["r2"] > 0.95 and o["early"]["ckpts"] == ["0.5"]
    (v,) = o["variants"]
    assert v["recipe"].startswith("yarn 2-stage") and v["n"] == 16 and v["minus_main"] == pytest.approx(0.02)
    assert "gap" in lc["outcomes"] and "retrieval" not in lc["outcomes"]  # no retrieval measured
    # an outcome with no value in any row is reported as such, with its eval.json key, never dropped silently
    assert "retrieval" in lc["empty_outcomes"] and "loss" not in lc["empty_outcomes"]
    assert "no value in any run of the main recipe: " in (tmp_path / "analysis.md").read_text()
    assert "retrieval (eval.json target.retrieval)" in (tmp_path / "analysis.md").read_text()
    pre = {p["predictor"]: p for p in o["predictors"]}
    assert set(pre) >= {"train_loss_smooth", "val_loss", "pre-extension loss", "sink_rate", "sink_strength"}
    assert pre["pre-extension loss"]["r2"] > 0.95  # the parent's target loss carries the planted effects
    md = (tmp_path / "analysis.md").read_text()
    for text in ("Remove one feature", "exploratory", "Early extension", "Robustness variants", "LOO R^2 (cells)"):
        assert text in md
    runs = lc["runs"]
    assert len(runs) == 48 + 48 + 16 and {"run", "root", "seed", "recipe", "ckpt", "cell", "count", "loss"} <= set(runs[0])


def test_longctx_constant_outcome_is_reported_not_dropped(tmp_path):
    """An outcome with one value in every run (an extension that trained nothing gives the same loss in
    every cell) has no spread to fit: listed under constant_outcomes and in the markdown, not dropped."""
    write_factorial(tmp_path, lambda z: 3.9 + 0.05 * z["qk_norm"])
    for ev in tmp_path.glob("*-ntk*/eval.json"):  # barely trained models: no key tokens anywhere
        e = json.loads(ev.read_text())
        e["target"]["key_frac"] = 0.0
        ev.write_text(json.dumps(e))
    lc = lc_report(tmp_path)
    assert lc["constant_outcomes"] == {"key_frac": 0.0} and "key_frac" not in lc["outcomes"]
    assert "loss" in lc["outcomes"] and "key_frac" not in lc["empty_outcomes"]
    assert "one value in every run of the main recipe: key_frac = 0." in (tmp_path / "analysis.md").read_text()


def test_longctx_planted_interaction_recovered(tmp_path):
    """Equal main effects (the count hypothesis, but for one interaction): qk_norm hurts only with SWA."""
    write_factorial(tmp_path, lambda z: 3.9 + 0.03 * sum(z.values()) + 0.06 * z["qk_norm"] * z["swa"])
    o = lc_report(tmp_path)["outcomes"]["loss"]
    models = {m["model"]: m for m in o["models"]}
    c = coef(models["pairwise"], "qk_norm:swa")
    assert c["lo"] < 0.06 < c["hi"] and c["hi"] - c["lo"] < 0.03
    for other in ("qk_norm:gqa", "gqa:swa", "swa:short_ctx"):
        assert coef(models["pairwise"], other)["lo"] < 0 < coef(models["pairwise"], other)["hi"]
    assert coef(models["pairwise"], "gqa")["lo"] < 0.03 < coef(models["pairwise"], "gqa")["hi"]
    tests = {t["test"]: t for t in o["tests"]}
    assert tests["additive vs pairwise"]["p"] < 1e-6 and tests["pairwise vs saturated"]["p"] > 0.001
    assert models["pairwise"]["loo_r2"] > models["additive"]["loo_r2"] > models["count"]["loo_r2"] - 0.05
    inc = {r["feature"]: r for r in o["remove_one"]["increments"]}  # qk_norm and swa cost 0.09 on top of the rest
    assert inc["qk_norm"]["lo"] < 0.09 < inc["qk_norm"]["hi"] and inc["gqa"]["lo"] < 0.03 < inc["gqa"]["hi"]


def test_longctx_count_hypothesis_holds_when_planted(tmp_path):
    write_factorial(tmp_path, lambda z: 3.9 + 0.04 * sum(z.values()))
    o = lc_report(tmp_path)["outcomes"]["loss"]
    models = {m["model"]: m for m in o["models"]}
    c = coef(models["count"], "count")
    assert c["lo"] < 0.04 < c["hi"] and models["count"]["r2"] > 0.95
    assert {t["test"]: t for t in o["tests"]}["count vs additive"]["p"] > 0.001
    assert o["remove_one"]["equal"]["p"] > 0.001
    assert all(r["lo"] < 0.04 < r["hi"] for r in o["remove_one"]["increments"])


def test_longctx_end_to_end_on_the_tiny_grid(tmp_path):
    """Synthetic result.json / eval.json for every run of `bash sweep.sh --dry-run longctx` (names, flags
    and lineage as the scripts would write them), then analyze.py: the gains over the parent, the
    training-free scaling and the more-training control, retrieval gated per run over the full 2^4
    factorial with what the extension adds (post - pre, and over the control), the declared family;
    every key of the longctx section documented in the study README (results/longctx)."""
    import dataclasses
    import shlex
    import extend
    import train
    root = os.path.join(os.path.dirname(__file__), "..")
    out = tmp_path / "sweeps"
    p = subprocess.run(["bash", os.path.join(root, "sweep.sh"), "--dry-run", "longctx"], capture_output=True, text=True,
                       env={**os.environ, "OUT": str(out), "SCALE": "tiny"}, timeout=60)
    assert p.returncode == 0, p.stderr
    rng = np.random.default_rng(0)
    n_ext, lineages, failing = 0, {}, set()
    pk = lambda ex, *ls: {"passkey_short": {"by_length": {str(L): {"exact": e, "rank": 0.9, "n": 130}
                                                          for L, e in zip(ls, ex)}}}
    for i, line in enumerate(p.stdout.splitlines()):
        steps = [shlex.split(s)[1:] for s in line.split(" && ")]
        cfg = train.parse_args(steps[0][1:])
        mc = dataclasses.asdict(train.model_config(cfg, 1024))
        z = dict(swa=mc["window"] > 0, short=mc["block_size"] == 64, gqa=mc["n_kv_head"] < mc["n_head"])
        y0 = 3.9 + 0.04 * z["short"] - 0.04 * z["swa"] + 0.01 * z["gqa"] + 0.005 * rng.standard_normal()
        res = {"run_name": os.path.basename(cfg.out_dir), "status": "done", "config": dataclasses.asdict(cfg),
               "model_config": mc, "metrics": {"val_loss": 3.8, "train_loss_smooth": 3.7 + 0.01 * rng.standard_normal()}}
        # retrieval learned in distribution except on two runs (one per cell: every cell keeps 2 passing runs);
        # before the extension exact match at 512 is pre (SWA +0.2); the extension adds 0.1 + 0.1 x SWA, the
        # more-training control 0.05
        pre = 0.2 + 0.2 * z["swa"] + 0.01 * rng.standard_normal()
        ide = 0.5 if i in (5, 16 + 9) else 0.97
        if ide < 0.9:
            failing.add(os.path.basename(cfg.out_dir))
        write_json_run(cfg.out_dir, res, {"ppl": {"by_length": {str(mc["block_size"]): 3.85}}, "sink_rate": 0.0,
                                          "sink_strength": 0.03 + 0.01 * rng.random(), "score": pre,
                                          "tasks": pk((ide, pre), mc["block_size"], 512), "score_lengths": [512],
                                          "target": {"loss": y0 + 0.02, "longppl_loss": 2.7, "retrieval": pre}})
        configs = {cfg.out_dir: (mc, None)}
        for j, st in enumerate(steps[2:], 2):
            if st[0] != "extend.py":
                continue
            ec = extend.parse_args(st[1:])
            pmc, plin = configs[ec.run]
            lin = {"parent": ec.run, "parent_ckpt": ec.ckpt, "method": ec.method, "factor": ec.factor,
                   "stages": ec.stages, "stage": ec.stages, "short_frac": ec.short_frac, "layers": ec.layers,
                   "lr_frac": ec.lr_frac, "task_rows": ec.task_rows, "parent_lineage": plin,
                   "budget": {"source": "token_frac", "token_frac": ec.token_frac} if ec.token_frac else None}
            L = pmc.get("rope_original_len") or pmc["block_size"]
            emc = {**pmc, "block_size": int(ec.factor * L), **({"rope_original_len": L} if ec.factor > 1 else {})}
            configs[ec.out_dir] = (emc, lin)
            evaluated = j + 1 < len(steps) and steps[j + 1][:2] == ["evaluate.py", ec.out_dir]
            if not evaluated:  # the more-training control's first step: a run, no outcome
                write_json_run(ec.out_dir, {"run_name": os.path.basename(ec.out_dir), "status": "done", "lineage": lin,
                                            "config": {"block_size": emc["block_size"], "seed": cfg.seed},
                                            "model_config": emc, "metrics": {"val_loss": y0}}, None)
                continue
            n_ext += 1
            control = plin is not None and plin["method"] == "none"
            # trained: better than the parent's 0.02; training-free: worse; the control between the two;
            # (as good as the main recipe: no gain over it); 2-stage YaRN hurts (the flag)
            y = (y0 + (0.03 if ec.ckpt != "final" else 0) - 0.05 * ec.token_frac + (0.04 if not ec.token_frac else 0)
                 - (0.0425 if control else 0) + (0.05 if ec.stages == 2 else 0) + 0.005 * rng.standard_normal())
            ex = float(np.clip(pre + (0.05 if control else 0.1 + 0.1 * z["swa"] if ec.token_frac else 0)
                               + 0.01 * rng.standard_normal(), 0, 1))
            ev = {"target": {"loss": y, "longppl_loss": 2.6 + y / 10, "key_frac": 0.01, "retrieval": ex},
                  "tasks": pk((ex,), 512), "score_lengths": [512]}
            if ec.stages == 2:  # the first stage's folder holds a finished run too; it is no outcome
                write_json_run(os.path.join(ec.out_dir, "stage1"), {"run_name": "stage1", "status": "done",
                               "config": {}, "model_config": emc, "lineage": {**lin, "stage": 1}}, None)
                lin["parent"] = os.path.join(ec.out_dir, "stage1")
                lin["parent_lineage"] = {**lin, "stage": 1, "parent": ec.run}
            lineages[os.path.basename(ec.out_dir)] = lin
            write_json_run(ec.out_dir, {"run_name": os.path.basename(ec.out_dir), "status": "done", "lineage": lin,
                                        "config": {"block_size": emc["block_size"], "seed": cfg.seed},
                                        "model_config": emc, "metrics": {"val_loss": y}}, ev)
    assert analyze.main([str(out / "longctx")]) == 0
    lc = json.loads((out / "longctx" / "analysis.json").read_text())["longctx"]
    assert set(lc) == {"contexts", "short_block", "extensions", "main_recipe", "recipes", "runs", "outcomes",
                       "gain", "flagged_recipes", "sinks", "retrieval", "empty_outcomes", "constant_outcomes", "family",
                       "cells16"}
    assert lc["cells16"] is None or {c["cell"] for c in lc["cells16"]["cells"]} == {f"{i:04b}" for i in range(16)}
    rt = lc["retrieval"]  # gated per run: 46 of 48 pass, every cell keeps >= 2, so an outcome of the factorial
    assert rt["usable"] and rt["n_learned"] == 16 and (rt["n_pass"], rt["n_runs"]) == (46, 48)
    assert rt["samples_per_run"] == [130] and sorted(c["n_pass"] for c in rt["cells"]) == [2, 2] + [3] * 14
    assert all(c["n"] == 3 and (c["half_width"] <= 0.05) == (c["n_pass"] == 3) for c in rt["cells"])  # the rule: 3 x 130
    assert "46 of 48 runs learned" in rt["verdict"] and "retrieval" in lc["outcomes"]
    lr = f"lr={extend.DEFAULT_LR_FRAC:g}x"
    main = f"ntk frac=0.05 short_frac=0.25 layers=global {lr} tasks=short"
    control = f"ntk training-free layers=global after more training (none frac=0.05 short_frac=0.25 {lr} tasks=short)"
    assert lc["main_recipe"] == main and lc["recipes"][main] == 48 and lc["recipes"][control] == 48
    assert lc["recipes"]["ntk training-free layers=global"] == 48  # the gain's baseline: no recipe of its own
    rows = [w for w in lc["runs"] if w["recipe"] == main and w["ckpt"] == "final"]
    assert all(w["passes_gate"] == (w["root"] not in failing) and w["retrieval_gain"] is not None for w in rows)
    o = lc["outcomes"]
    assert o["retrieval_gain"]["n"] == o["retrieval_more"]["n"] == 46  # the gate: passing runs only
    eff = {e["feature"]: e for e in o["retrieval_gain"]["effects"]}  # planted: 0.1 + 0.1 x SWA
    assert eff["swa"]["lo"] < 0.1 < eff["swa"]["hi"] and eff["short_ctx"]["lo"] < 0 < eff["short_ctx"]["hi"]
    eff = {e["feature"]: e for e in o["retrieval"]["effects"]}  # after = before (+0.2) + added (+0.1)
    assert eff["swa"]["lo"] < 0.3 < eff["swa"]["hi"]
    assert np.mean([w["retrieval_more"] for w in rows if w["retrieval_more"] is not None]) == pytest.approx(0.1, abs=0.02)
    gain = {g["recipe"]: g for g in lc["gain"]}
    g = gain[main]  # planted: 0.0225 over the parent, 0.0425 over training-free, 0 over the control
    assert g["gain_parent"]["lo"] < 0.0225 < g["gain_parent"]["hi"] and g["gain_free"]["lo"] < 0.0425 < g["gain_free"]["hi"]
    assert g["gain_more"]["lo"] < 0 < g["gain_more"]["hi"] and g["gain_more"]["n"] == 48
    assert g["gain_free"]["n"] == 48 and g["gain_free"]["cells_positive"] == 16 and not g["flagged"]
    assert gain[main.replace("0.05", "0.25")]["gain_more"] is None  # the control matches the main budget only
    yarn = f"yarn 2-stage frac=0.05 short_frac=0.25 layers=global {lr} tasks=short"
    assert lc["flagged_recipes"] == [yarn] and "FLAG: " + yarn in (out / "longctx" / "analysis.md").read_text()
    assert gain[main.replace("layers=global ", "")]["gain_free"] is None  # no training-free run with every layer scaled
    assert len(lc["runs"]) == n_ext and sum(lc["recipes"].values()) + sum(w["ckpt"] != "final" for w in lc["runs"]) == n_ext
    fam = lc["family"]  # the declared family: Holm within it, verdicts over 3 seeds
    claims = {h["claim"]: h for h in fam["hypotheses"]}
    # gains 3, features 4, count 1, retrieval gains 2; the features' retrieval effects are exploratory
    assert fam["m"] == len(claims) == 3 + 4 + 1 + 2 and all(h["n"] == 3 for h in claims.values())
    fx = fam["factorial"]  # the feature effects' error term, chosen by the stored pooling check
    assert fx["dof_pooled"] == 15 * 2 and fx["used"] == ("pooled" if fx["pooling"]["pool"] else "seed")
    feat = claims["swa changes the loss at the target"]
    assert ("pooled seed x contrast error" in feat["test"]) == fx["pooling"]["pool"]
    h = claims["the extension lowers the loss at the target below the training-free scaling's"]
    assert h["passed"] and h["direction"] == 1 and h["p_holm"] >= h["p"]
    h = claims["the extension lowers the loss at the target below the more-training control's"]
    assert not h["passed"] and h["mde"] > 0  # none planted: a null with its detectable effect
    lo = o["loss"]
    assert set(lo) == {"what", "higher_is_better", "n", "n_cells", "seeds", "cells", "effects", "models", "tests",
                       "best_by_loo", "remove_one", "seed_variance", "predictors", "early", "variants",
                       "relative_drop", "best_by_loco"}
    assert (lo["n"], lo["n_cells"], lo["seeds"]) == (48, 16, [0, 1, 2])
    eff = {e["feature"]: e for e in lo["effects"]}
    assert eff["short_ctx"]["lo"] < 0.04 < eff["short_ctx"]["hi"] and eff["swa"]["lo"] < -0.04 < eff["swa"]["hi"]
    assert lo["early"]["n"] >= 16
    assert {v["recipe"] for v in lo["variants"]} == {
        main.replace("0.05", "0.25"), yarn, main.replace("layers=global ", ""), "ntk training-free layers=global", control}
    # the all-layers variant runs on the SWA cells only: SWA is constant there, so it leaves the fit
    # (kept, the design is rank-deficient and its coefficient an arbitrary split of the intercept)
    (al,) = [v for v in lo["variants"] if v["recipe"] == main.replace("layers=global ", "")]
    assert al["constant"] == {"swa": 1} and [c["name"] for c in al["additive"]["coefs"]] == ["qk_norm", "gqa", "short_ctx"]
    assert all(v["constant"] == {} for v in lo["variants"] if v is not al)
    assert os.path.exists(out / "longctx" / "longctx_outcome_vs_count.png")
    md = (out / "longctx" / "analysis.md").read_text()
    assert "vs the more-training control" in md and "Verdicts (the declared family)" in md and "runs passing / n" in md
    readme = open(os.path.join(root, "results", "longctx", "README.md")).read()  # the study write-up
    keys = set(lc) | set(lo) | set(g) | set(g["gain_parent"]) | set(lc["sinks"]) | set(lo["relative_drop"]) | {
        k for part in ("cells", "effects", "models", "tests", "predictors", "variants") for x in lo[part] for k in x} \
        | set(lo["remove_one"]) | set(lo["seed_variance"]) | set(lo["early"]) | set(lc["runs"][0]) \
        | set(lo["remove_one"]["increments"][0]) | set(lo["remove_one"]["equal"]) | set(rt) | set(rt["cells"][0]) \
        | set(rt["gate"]) | set(o)
    missing = sorted(k for k in keys if f"`{k}`" not in readme)
    assert not missing, f"README does not document analysis.json longctx keys {missing}"


def test_longctx_retrieval_gate_and_span():
    """A recipe that does not learn retrieval in distribution scores chance at the target: no outcome,
    said so; learned cells whose means differ by less than 3 init sds: said so; the sample rule."""
    rows = [{"cell": c, "seed": s, "exact": 0.2 + 0.01 * s + 0.005 * int(c, 2), "exact_n": 130, "id_exact": idx}
            for c in ("0000", "0001", "1000") for s in (0, 1, 2) for idx in [0.3 if c == "0001" else 0.95]]
    r = longctx.retrieval_report(rows)
    assert r["n_learned"] == 2 and not r["usable"] and "6 of 9 runs learned" in r["verdict"]
    assert "1 of 3 cells have fewer than 2" in r["verdict"] and r["cells"][1]["mean"] is None
    assert [c["learned"] for c in r["cells"]] == [True, False, True]
    one = [dict(w, id_exact=0.3) if (w["cell"], w["seed"]) == ("0000", 2) else w for w in rows]  # gated per run
    c = longctx.retrieval_report(one)["cells"][0]
    assert (c["n_pass"], c["learned"], c["samples"]) == (2, True, 260) and c["mean"] == pytest.approx(0.205)
    assert c["mean_all"] == pytest.approx(0.21)  # every run, beside
    r = longctx.retrieval_report([dict(w, id_exact=0.2) for w in rows])
    assert r["n_learned"] == 0 and "not learned in distribution" in r["verdict"] and "chance" in r["verdict"]
    assert [w["retrieval_gain"] for w in longctx.gated([dict(rows[0], retrieval_gain=0.1, id_exact=0.5),
                                                                dict(rows[0], retrieval_gain=0.1)])] == [None, 0.1]
    r = longctx.retrieval_report([dict(w, id_exact=1.0) for w in rows])  # range 0.04, init sd 0.01: 4 sds
    assert r["usable"] and r["spans_3sd"] and r["init_sd"] == pytest.approx(0.01)
    r = longctx.retrieval_report([dict(w, id_exact=1.0, exact=w["exact"] - (0.02 if w["cell"] == "1000" else 0))
                                  for w in rows])  # range 0.02 < 3 x 0.01
    assert not r["spans_3sd"] and "do not span" in r["verdict"]
    c = r["cells"][0]  # the binomial sampling CI of a mean over 3 runs of 130 samples each
    assert c["half_width"] == pytest.approx(1.96 * math.sqrt(sum(p * (1 - p) / 130 for p in (0.20, 0.21, 0.22))) / 3, rel=1e-3)
    assert longctx.retrieval_report([dict(w, exact=None) for w in rows]) is None


def test_longctx_retrieval_learned_half_is_analysed_as_a_subfactorial():
    """Retrieval learned only where the pretraining context is short: no factorial outcome, but the
    learned half (short_ctx = 1, the other three features crossed) is analysed on its own; the planted
    effects come back. With no fully learned half there is none."""
    rows = []
    for cell in itertools.product((0, 1), repeat=4):
        c = "".join(map(str, cell))
        feats = dict(zip(longctx.FEATURES, cell))
        for seed in range(3):
            y = 0.4 - 0.2 * feats["qk_norm"] + 0.3 * feats["swa"] + 0.01 * (seed - 1) * (1 + int(c, 2) % 3)
            rows.append({"cell": c, "seed": seed, **feats, "exact": y, "retrieval": y, "exact_n": 130,
                         "id_exact": 1.0 if feats["short_ctx"] else 0.4})
    r = longctx.retrieval_report(rows)
    assert not r["usable"] and r["n_learned"] == 8
    sub = longctx.learned_subfactorial(rows, r)
    assert sub["fixed"] == {"short_ctx": 1} and sub["features"] == ["qk_norm", "gqa", "swa"] and len(sub["cells"]) == 8
    eff = {e["feature"]: e["effect"] for e in sub["report"]["effects"]}
    assert eff == pytest.approx({"qk_norm": -0.2, "gqa": 0.0, "swa": 0.3}, abs=1e-9)
    assert sub["report"]["n"] == 24 and sub["spans_3sd"] and sub["cell_mean_range"] == pytest.approx(0.5)
    one_off = [dict(w, id_exact=0.4) if w["cell"] == "0011" else w for w in rows]  # a learned-half cell fails
    assert longctx.learned_subfactorial(one_off, longctx.retrieval_report(one_off)) is None


def write_json_run(folder, res, ev):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "result.json"), "w") as f:
        json.dump(res, f)
    if ev is not None:
        with open(os.path.join(folder, "eval.json"), "w") as f:
            json.dump(ev, f)


def test_empty_folder_exit_2(tmp_path):
    # a real subprocess: exit code and stderr as a user sees them
    script = os.path.join(os.path.dirname(__file__), "..", "analyze.py")
    p = subprocess.run([sys.executable, script, str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 2
    assert "nothing to analyse" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr


def test_missing_folder_exit_2(tmp_path, capsys):
    assert analyze.main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such folder" in err[0]


def test_partial_and_broken_inputs(tmp_path, capsys):
    make_grid(tmp_path)
    write_run(tmp_path, "bare", {"bits": 6}, {})  # missing almost everything
    write_run(tmp_path, "odd", {"bits": "six", "size": 5, "lr": None}, {"val_loss": "nan"}, extra={"grid_distance": 3})
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "result.json").write_text('{"run_name": "broken", "con')  # truncated write
    (tmp_path / "running").mkdir()
    (tmp_path / "running" / "result.json").write_text(json.dumps({"status": "running"}))
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    err = capsys.readouterr().err
    assert "skipping" in err and "broken" in err and "running" in err and "Traceback" not in err
    md = (tmp_path / "analysis.md").read_text()
    assert "2 runs lack one of" in md and "| - | 6 | 1M | 0.33 (1) | 0.33 | yes |" in md


def test_only_partial_runs_still_report(tmp_path):
    write_run(tmp_path, "bare", {"bits": 16}, {"val_loss": 3.0})
    assert analyze.main([str(tmp_path)]) == 0
    md = (tmp_path / "analysis.md").read_text()
    assert "# Analysis of 1 runs" in md and "_qat: no data._" in md


def test_overlapping_folders_read_once(tmp_path, capsys):
    make_grid(tmp_path)
    sub = next(p for p in tmp_path.iterdir() if p.is_dir())
    assert analyze.main([str(tmp_path), str(sub), "--no_plots"]) == 0
    assert "# Analysis of 36 runs" in (tmp_path / "analysis.md").read_text()
    assert "repeat" not in capsys.readouterr().err


def test_probe_runs_are_separate_cells(tmp_path):
    make_grid(tmp_path)
    for wd, loss in ((0.1, 2.0), (0.33, 2.2), (0.5, 2.4)):  # an AdamW probe at 1M whose best is wd 0.1
        for seed in range(3):
            write_run(tmp_path, f"adamw_wd{wd}_s{seed}",
                      {"bits": 16, "warmdown": wd, "lr": 1.0, "size": "1M", "seed": seed, "optimizer": "adamw",
                       "schedule": "wsd", "block_size": 64, "iters": 100}, {"val_loss": loss + 0.01 * seed})
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    cells = json.loads((tmp_path / "analysis.json").read_text())["qat"]["cells"]
    best = {(c["variant"], c["bits"], c["size"]): c["best_warmdown"] for c in cells}
    assert best[("optimizer=adamw", 16, "1M")] == 0.1 and best[("optimizer=muon", 16, "1M")] == 0.33


# -----------------------------------------------------------------------------
# real records, mixed folders

def test_real_train_records(tmp_path):
    """result.json exactly as train.py writes it (plus quant.py's grid_distance): every section reads it."""
    from conftest import tiny_config
    import train
    for bits in (16, 6):
        for seed in (0, 1):
            cfg = tiny_config(tmp_path, bits=bits, seed=seed, iters=8, eval_interval=8, ckpt_every=8,
                              out_dir=str(tmp_path / "runs" / f"b{bits}_s{seed}"))
            train.train(cfg)
    out = tmp_path / "runs"
    assert analyze.main([str(out), "--no_plots"]) == 0
    rep = json.loads((out / "analysis.json").read_text())
    assert rep["n_runs"] == 4 and rep["n_skipped_qat"] == 0
    assert [(c["bits"], c["size"], c["variant"]) for c in rep["qat"]["cells"]] == [(16, "0.1M", ""), (6, "0.1M", "")]
    assert all(r["n"] == 2 for c in rep["qat"]["cells"] for r in c["warmdowns"])
    pen = rep["penalty_law"]["laws"][0]["sizes"][0]
    assert pen["n"] == 2 and pen["n_params"] > 0  # params.non_embedding read as N


def test_size_overrides_and_model_flags_split(tmp_path):
    base = {"bits": 16, "lr": 1.0, "size": "1M", "schedule": "wsd", "optimizer": "muon", "n_layer": 0, "model": {}}
    for seed in range(2):
        for wd in (0.1, 0.33):
            write_run(tmp_path, f"a_{wd}_{seed}", {**base, "warmdown": wd, "seed": seed}, {"val_loss": 3.0 + wd})
            write_run(tmp_path, f"b_{wd}_{seed}", {**base, "warmdown": wd, "seed": seed, "n_layer": 2},
                      {"val_loss": 3.5 - wd})
            write_run(tmp_path, f"c_{wd}_{seed}", {**base, "warmdown": wd, "seed": seed, "model": {"mlp_ratio": 2.0}},
                      {"val_loss": 4.0 - wd})
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    cells = json.loads((tmp_path / "analysis.json").read_text())["qat"]["cells"]
    best = {(c["variant"], c["size"]): c["best_warmdown"] for c in cells}
    assert best == {("model.mlp_ratio=None", "1M"): 0.1, ("model.mlp_ratio=2.0", "1M"): 0.33,
                    ("model.mlp_ratio=None", "1M[n_layer=2]"): 0.33}


def test_mixed_folder_extensions_and_algo_runs(tmp_path, capsys):
    make_grid(tmp_path / "qat")
    lc = tmp_path / "longctx"
    for i, (qk, kv, block) in enumerate([("none", 4, 256), ("head", 4, 256), ("head", 2, 128), ("none", 2, 128),
                                         ("layer", 4, 128)]):
        count = (qk != "none") + (kv < 4) + (block == 128)
        cfg = {"bits": 16, "lr": 1.0, "warmdown": 0.33, "seed": 0, "size": "1M", "block_size": block}
        mc = {"n_head": 4, "n_kv_head": kv, "qk_norm": qk, "window": 0, "block_size": block}
        write_run(lc, f"base{i}", cfg, {"val_loss": 3.0, "train_loss": 3.0 + 0.01 * i}, model_config=mc,
                  eval_={"score": 0.9 - 0.01 * i})
        write_run(lc, f"base{i}-yarn1024", {**cfg, "block_size": 1024}, {"val_loss": 3.1},
                  model_config={**mc, "rope_original_len": block, "block_size": 1024},
                  extra={"lineage": {"parent": str(lc / f"base{i}"), "method": "yarn"}},
                  eval_={"score": 0.8 - 0.2 * count + 0.01 * i, "sink_rate": 0.1})
    for task in ("copy", "sort"):
        for pos in ("rope", "nope"):
            for seed in range(2):
                write_run(tmp_path / "lengen", f"{task}_{pos}_{seed}",
                          {"algo": task, "algo_len": "1,16", "bits": 16, "lr": 1.0, "warmdown": 0.33, "seed": seed,
                           "size": "0.1M", "model": {"pos": pos}}, {"val_loss": 0.1, "val_acc": 0.9},
                          eval_={"score": 0.5 if pos == "nope" else 0.0,
                                 "tasks": {task: {"by_length": {"16": {"exact": 0.9}, "32": {"exact": 0.5},
                                                                "48": {"exact": 0.1}}}}})
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    rep = json.loads((tmp_path / "analysis.json").read_text())
    assert rep["n_algo"] == 8 and rep["n_extension"] == 5
    # the long-context base runs (one bit-width, one warmdown in their variant: nothing to compare) would
    # stay out of the QAT tables anyway (n_no_comparison counts them over every run read); they are the
    # longctx study's runs, so the QAT tables hold the grid alone and no variant splits it
    assert rep["n_no_comparison"] == 2
    assert rep["studies"] == {"qat": 36, "longctx": 10, "lengen": 8}
    assert {c["variant"] for c in rep["qat"]["cells"]} == {""}
    lcr = rep["longctx"]
    assert lcr["extensions"] and [w["run"] for w in lcr["runs"]] == [f"base{i}-yarn1024" for i in range(5)]
    assert lcr["short_block"] == 128 and [w["count"] for w in lcr["runs"]] == [0, 1, 3, 2, 2]
    # the parents' train loss (an older record without train_loss_smooth: its last-step train_loss)
    assert [w["train_loss_smooth"] for w in lcr["runs"]] == pytest.approx([3.0, 3.01, 3.02, 3.03, 3.04])
    o = lcr["outcomes"]["retrieval"]  # older eval.json files: only the score, no target losses
    assert set(lcr["outcomes"]) == {"retrieval"} and o["higher_is_better"]
    assert o["models"][0]["model"] == "count" and o["models"][0]["r2"] > 0.99
    assert {p["predictor"]: p for p in o["predictors"]}["pre-extension retrieval"]["n"] == 5
    g = {(x["task"], x["encoding"]): x for x in rep["lengen"]["cells"]}
    assert set(g) == {("copy", "nope"), ("copy", "rope"), ("sort", "nope"), ("sort", "rope")}
    assert g[("copy", "nope")]["score"]["mean"] == 0.5 and g[("copy", "nope")]["by_length"]["32"]["mean"] == 0.5
    md = (tmp_path / "analysis.md").read_text()
    assert "8 algorithmic-task runs (config.algo) and 5 context extensions (lineage)" in md
    assert "## 5. Length generalisation" in md and "pre-extension retrieval" in md


def write_algo(root, task, pos, seed, val_acc, past, lens=(16, 32, 48)):
    """An algorithmic run: in-distribution exact match val_acc, exact match `past` in both bins past N."""
    by_length = {str(lens[0]): {"lo": 1, "hi": lens[0], "exact": val_acc}}
    by_length.update({str(b): {"lo": a + 1, "hi": b, "exact": past} for a, b in zip(lens, lens[1:])})
    write_run(root, f"{task}_{pos}_s{seed}", {"algo": task, "algo_len": f"1,{lens[0]}", "bits": 16, "lr": 1.0,
                                              "warmdown": 0.33, "seed": seed, "size": "0.1M", "model": {"pos": pos}},
              {"val_loss": 0.1, "val_acc": val_acc}, model_config={"pos": pos, "swan": False, "chunk_layers": ""},
              eval_={"score": past, "tasks": {task: {"train_len": [1, lens[0]], "by_length": by_length}}})


def test_lengen_gate_excludes_cells_not_learned_in_distribution(tmp_path):
    """A cell below the in-distribution gate is listed as excluded and gets no verdict, however well
    it scores past N (alibi here); a learned cell whose RoPE reference is not learned gets no comparison."""
    for seed in range(3):
        write_algo(tmp_path, "copy", "rope", seed, 0.98 + 0.01 * seed, [0.1, 0.0, 0.2][seed])
        write_algo(tmp_path, "copy", "nope", seed, 0.99, [0.5, 0.6, 0.7][seed])
        write_algo(tmp_path, "copy", "hope", seed, 0.97, [0.2, 0.0, 0.1][seed])   # +0.0, 1 higher, 1 lower
        write_algo(tmp_path, "copy", "alibi", seed, [0.5, 0.6, 0.4][seed], 0.9)  # not learned, "extrapolates"
        write_algo(tmp_path, "sort", "rope", seed, 0.5, 0.0)
        write_algo(tmp_path, "sort", "nope", seed, 0.95, 0.8)
    assert analyze.main([str(tmp_path)]) == 0
    assert "lengen_accuracy.png" in json.loads((tmp_path / "analysis.json").read_text())["plots"]
    lg = json.loads((tmp_path / "analysis.json").read_text())["lengen"]
    assert lg["gate"]["threshold"] == 0.9 and lg["reference"] == "rope"
    assert [(x["task"], x["encoding"]) for x in lg["excluded"]] == [("copy", "alibi"), ("sort", "rope")]
    assert lg["excluded"][0]["in_dist_mean"] == pytest.approx(0.5)
    c = {(x["task"], x["encoding"]): x for x in lg["cells"]}
    assert not c[("copy", "alibi")]["learned"] and c[("copy", "alibi")]["vs_reference"] is None
    assert c[("copy", "alibi")]["verdict"].startswith("excluded") and c[("copy", "alibi")]["held_to"] is None
    nope = c[("copy", "nope")]
    assert nope["learned"] and nope["verdict"] == "better than rope" and nope["n"] == 3
    assert nope["in_dist"]["per_seed"] == {"0": 0.99, "1": 0.99, "2": 0.99} and nope["in_dist"]["sd"] == pytest.approx(0)
    assert nope["by_length"]["32"]["mean"] == pytest.approx(0.6) and nope["by_length"]["32"]["sd"] == pytest.approx(0.1)
    p = nope["vs_reference"]["score"]
    assert p["mean_diff"] == pytest.approx(0.5) and (p["wins"], p["losses"], p["n"]) == (3, 0, 3) and p["z"] > 0
    assert set(nope["vs_reference"]["by_length"]) == {"32", "48"}  # the bins past N only
    assert c[("copy", "hope")]["verdict"].startswith("not distinguishable from rope (Δ +0.000, p=1, Holm p=1; detectable: 0.46")
    assert c[("copy", "rope")]["verdict"] == "reference" and p["p"] == pytest.approx(0.0132, abs=1e-3)
    # the declared family: nope and hope against rope (alibi is excluded, sort/nope has no comparison);
    # Holm doubles the smaller p, which still passes
    fam = {h["claim"]: h for h in lg["family"]["hypotheses"]}
    assert lg["family"]["m"] == 2 and set(fam) == {"copy: nope vs rope: score (exact match past N)",
                                                   "copy: hope vs rope: score (exact match past N)"}
    h = fam["copy: nope vs rope: score (exact match past N)"]
    assert h["p"] == pytest.approx(p["p"]) and h["p_holm"] == pytest.approx(2 * p["p"]) and h["passed"]
    assert nope["extrapolates"] is False  # better, but held to 16 = N: no bin past N at the gate
    assert c[("sort", "nope")]["verdict"] == "no comparison: rope not learned in distribution"
    assert c[("copy", "rope")]["held_to"] == 16 and c[("copy", "nope")]["held_to"] == 16
    md = (tmp_path / "analysis.md").read_text()
    assert "Excluded by the gate (2 cells): copy/alibi (0.500), sort/rope (0.500)." in md
    # a lower gate lets alibi in: its verdict is then computed like any other
    assert analyze.main([str(tmp_path), "--no_plots", "--lengen_gate", "0.3", "--out", str(tmp_path / "low")]) == 0
    lg = json.loads((tmp_path / "low" / "analysis.json").read_text())["lengen"]
    assert [x["encoding"] for x in lg["excluded"]] == []
    alibi = {(x["task"], x["encoding"]): x for x in lg["cells"]}[("copy", "alibi")]
    assert alibi["verdict"] == "better than rope" and alibi["held_to"] == 48 and alibi["learned"]
    # sort/rope (0.5) is learned at this gate too; sort/nope beats it by 0.8 in every seed: sd 0, no t
    # statistic, so the hypothesis is undefined (not counted in m, not passed) rather than p 0
    assert alibi["extrapolates"] and lg["family"]["m"] == 3
    srt = next(h for h in lg["family"]["hypotheses"] if h["claim"].startswith("sort: nope vs rope"))
    assert srt["undefined"] and not srt["passed"] and srt["p"] is None
    assert {(x["task"], x["encoding"]): x for x in lg["cells"]}[("sort", "nope")]["verdict"].startswith("undefined against rope")


def test_posenc_loss_and_gated_retrieval_by_length(tmp_path):
    """posenc: text runs give loss by length per encoding (paired against RoPE past the training
    length); passkey-trained runs give retrieval by length, gated at the training length."""
    lens = (128, 256, 512)
    for seed in range(2):
        for pos, loss, exact in (("rope", (4.0, 4.5, 5.0), (1.0, 0.2, 0.0)), ("nope", (4.1, 4.2, 4.3), (1.0, 0.9, 0.8)),
                                 ("alibi", (4.0, 4.1, 4.1), (0.5, 0.5, 0.5))):
            cfg = {"bits": 16, "lr": 1.0, "warmdown": 0.33, "seed": seed, "size": "0.1M", "block_size": 128,
                   "model": {"pos": pos}}
            ppl = {"by_length": {str(L): x + 0.01 * seed for L, x in zip(lens, loss)},
                   "longppl": {"by_length": {str(L): {"longppl": 20.0} for L in lens}}}
            write_run(tmp_path, f"{pos}_s{seed}", cfg, {"val_loss": loss[0]}, model_config={"pos": pos, "block_size": 128},
                      eval_={"score": None, "ppl": ppl, "tasks": {}})
            tasks_ = {"passkey": {"by_length": {str(L): {"exact": x, "rank": 1.0} for L, x in zip(lens, exact)}}}
            write_run(tmp_path, f"{pos}_passkey_s{seed}", {**cfg, "task_mix": 1.0, "task_list": "passkey"},
                      {"val_loss": 9.0}, model_config={"pos": pos, "block_size": 128},
                      eval_={"score": sum(exact[1:]) / 2, "ppl": None, "tasks": tasks_})
    assert analyze.main([str(tmp_path)]) == 0
    assert os.path.exists(tmp_path / "posenc_length.png")
    pe = json.loads((tmp_path / "analysis.json").read_text())["posenc"]
    c = {(x["training"], x["encoding"]): x for x in pe["cells"]}
    assert set(c) == {(t, p) for t in ("text", "task_mix:passkey") for p in ("rope", "nope", "alibi")}
    nope = c[("text", "nope")]
    assert nope["n"] == 2 and nope["loss_by_length"]["512"]["mean"] == pytest.approx(4.305)
    assert nope["vs_reference"]["loss"]["512"]["mean_diff"] == pytest.approx(-0.7)
    assert set(nope["vs_reference"]["loss"]) == {"256", "512"} and nope["learned"] is None
    pk = c[("task_mix:passkey", "nope")]
    assert pk["learned"] and pk["retrieval"]["passkey"]["exact"]["256"]["mean"] == pytest.approx(0.9)
    assert pk["vs_reference"]["score"]["mean_diff"] == pytest.approx(0.75) and pk["verdict"] == "not distinguishable from rope (Δ +0.750, 2 seeds, fewer than 3)"
    assert c[("task_mix:passkey", "alibi")]["learned"] is False
    assert c[("task_mix:passkey", "alibi")]["verdict"].startswith("excluded")
    assert pe["excluded"] == [{"training": "task_mix:passkey", "encoding": "alibi", "n": 2}]
    md = (tmp_path / "analysis.md").read_text()
    assert "## 6. Positional encodings" in md and "task_mix:passkey-trained: passkey retrieval" in md


def test_lengen_repeated_seed_is_ignored_with_a_warning(tmp_path, capsys):
    """Two runs of one (task, encoding, seed) in the folders: the first one read counts, the other is
    named in a one-line warning; the cell has that seed once."""
    for seed in range(2):
        write_algo(tmp_path, "copy", "rope", seed, 0.99, 0.1)
    write_algo(tmp_path / "again", "copy", "rope", 0, 0.99, 0.9)  # seed 0 once more, another score
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    err = capsys.readouterr().err
    assert "1 runs repeat a (task, encoding, variant, seed) already seen" in err
    cell, = json.loads((tmp_path / "analysis.json").read_text())["lengen"]["cells"]
    assert cell["n"] == 2 and cell["seeds"] == [0, 1]


def write_posenc_pair(root, seed):
    """Two posenc text runs (rope, nope) with an eval.json: what leaked into a longctx section before."""
    for pos, loss in (("rope", 5.0), ("nope", 4.3)):
        cfg = {"bits": 16, "lr": 1.0, "warmdown": 0.33, "seed": seed, "size": "0.1M", "block_size": 128,
               "model": {"pos": pos}}
        write_run(root, f"{pos}_s{seed}", cfg, {"val_loss": 4.0}, model_config={"pos": pos, "block_size": 128},
                  eval_={"score": None, "ppl": {"by_length": {"128": 4.0, "256": loss}}, "tasks": {}})


def test_a_run_of_one_study_is_in_no_other_studys_section(tmp_path, capsys):
    """Posenc, longctx and QAT runs in one folder: without --study each run goes to one study by its
    record (a posenc text run is no longctx row, a longctx base run no QAT record); --study NAME gives
    every run read to that study alone, and the other studies' keys are absent."""
    make_grid(tmp_path / "qat")
    for seed in range(2):
        write_posenc_pair(tmp_path / "posenc", seed)
    write_factorial(tmp_path / "longctx", lambda z: 4.0 + 0.1 * sum(z.values()), seeds=(0, 1))
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    rep = json.loads((tmp_path / "analysis.json").read_text())
    posenc_runs = {f"{p}_s{s}" for p in ("rope", "nope") for s in range(2)}
    lc_runs = {w["run"] for w in rep["longctx"]["runs"]} | {w["root"] for w in rep["longctx"]["runs"]}
    assert lc_runs and not lc_runs & posenc_runs
    assert {c["n"] for c in rep["posenc"]["cells"]} == {2} and len(rep["posenc"]["cells"]) == 2
    assert sum(r["n"] for c in rep["qat"]["cells"] for r in c["warmdowns"]) == rep["studies"]["qat"] == 36
    assert set(rep["studies"]) == {"qat", "longctx", "posenc"}
    # posenc runs alone (no extension anywhere): still no long-context section built from them
    assert analyze.main([str(tmp_path / "posenc"), "--no_plots", "--out", str(tmp_path / "p")]) == 0
    assert set(json.loads((tmp_path / "p" / "analysis.json").read_text())["studies"]) == {"posenc"}
    assert "longctx" not in json.loads((tmp_path / "p" / "analysis.json").read_text())
    # told the study (as sweep.sh --post does): only that study's sections, from every run read
    assert analyze.main([str(tmp_path / "posenc"), "--study", "posenc", "--no_plots"]) == 0
    rep = json.loads((tmp_path / "posenc" / "analysis.json").read_text())
    assert "longctx" not in rep and "qat" not in rep and rep["studies"] == {"posenc": 4}
    md = (tmp_path / "posenc" / "analysis.md").read_text()
    assert "Long-context" not in md and "## 6. Positional encodings" in md
    assert analyze.main([str(tmp_path), "--study", "qat-probes", "--no_plots", "--out", str(tmp_path / "q")]) == 0
    assert set(json.loads((tmp_path / "q" / "analysis.json").read_text())["studies"]) == {"qat"}
    capsys.readouterr()
    assert analyze.main([str(tmp_path), "--study", "bogus"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown study bogus" in err and "Traceback" not in err


def test_one_rule_for_better_the_paired_t_test_over_three_seeds():
    """better / worse needs the paired t test over >= 3 seeds at Holm-adjusted p < 0.05 within the family and
    a gap of at least the margin; every seed agreeing is not enough (two seeds), nor is a consistent gap on
    noisy seeds, nor a raw p < 0.05 that Holm lifts over the level (one of several tests)."""
    def decided(*pairs):
        hyps = [stats.paired_hypothesis(f"h{i}", encodings.seed_diffs(dict(enumerate(a)), dict(enumerate(b))))
                for i, (a, b) in enumerate(pairs)]
        return stats.decide_family(hyps)["hypotheses"]
    verdict = encodings.family_verdict
    clear, = decided(([0.5, 0.6, 0.7], [0.1, 0.0, 0.2]))
    assert clear["p"] == pytest.approx(2 * scistats.t.sf(0.5 / (0.1 / math.sqrt(3)), 2))
    assert verdict(clear, "rope", 0.05) == "better than rope"
    assert verdict(decided(([0.1, 0.0, 0.2], [0.5, 0.6, 0.7]))[0], "rope", 0.05) == "worse than rope"
    assert verdict(clear, "rope", 0.05, lower_is_better=True) == "worse than rope"  # a loss: higher is worse
    two, = decided(([0.9, 0.8], [0.1, 0.2]))  # every seed higher, but two seeds
    assert verdict(two, "rope", 0.05) == "not distinguishable from rope (Δ +0.700, 2 seeds, fewer than 3)"
    noisy, = decided(([0.30, 0.10, 0.45], [0.10, 0.08, 0.12]))  # all three higher, z 1.8 (as SWAN on sort): p 0.18
    assert verdict(noisy, "rope", 0.05).startswith("not distinguishable from rope (Δ +0.183, p=0.18, Holm p=0.18; "
                                                   "detectable: ")
    small, = decided(([0.11, 0.115, 0.12], [0.10, 0.10, 0.10]))  # passed, but below the margin
    assert small["passed"] and "|Δ| < 0.05" in verdict(small, "rope", 0.05)
    # the clear one (p 0.013) among four: Holm multiplies it by 4, over the level, so no verdict word
    fam = decided(([0.5, 0.6, 0.7], [0.1, 0.0, 0.2]), ([0.3, 0.1, 0.45], [0.1, 0.08, 0.12]),
                  ([0.2, 0.3, 0.1], [0.2, 0.1, 0.3]), ([0.5, 0.4, 0.6], [0.5, 0.6, 0.4]))
    assert fam[0]["p_holm"] == pytest.approx(4 * clear["p"]) and not fam[0]["passed"]
    assert verdict(fam[0], "rope", 0.05).startswith("not distinguishable from rope (Δ +0.500, p=0.013, Holm p=0.052; detectable: ")
    assert encodings.exploratory(stats.paired_acc({0: 0.5, 1: 0.6, 2: 0.7}, {0: 0.1, 1: 0.0, 2: 0.2})) == \
        "exploratory, outside the family (Δ +0.500, raw paired t p=0.013)"


def write_threshold_run(root, task, n_layer, N, seed, in_dist, at_2x, at_3x):
    """A threshold-sweep run (OUT/lengen/threshold/...): NoPE, n_layer layers, trained on lengths 1..N."""
    by_length = {str(N): {"lo": 1, "hi": N, "exact": in_dist}, str(2 * N): {"lo": N + 1, "hi": 2 * N, "exact": at_2x},
                 str(3 * N): {"lo": 2 * N + 1, "hi": 3 * N, "exact": at_3x}}
    write_run(root / "threshold", f"{task}_L{n_layer}_len{N}_s{seed}",
              {"algo": task, "algo_len": f"1,{N}", "bits": 16, "seed": seed, "size": "0.1M",
               "model": {"pos": "nope", "n_layer": n_layer}},
              {"val_loss": 0.1, "val_acc": in_dist}, model_config={"pos": "nope", "n_layer": n_layer, "chunk_layers": ""},
              eval_={"score": (at_2x + at_3x) / 2, "tasks": {task: {"train_len": [1, N], "by_length": by_length}}})


def test_lengen_threshold_rule_on_planted_records(tmp_path):
    """The threshold: a row's family test at its longest N (the seeds' min(in-dist, at 2N) - gate) decides
    whether there is one; it is then the smallest N from which every longer trained N has every seed at the
    gate in distribution and at 2N: a dip at a longer N moves it up, as does one seed below the gate where the
    mean is above it, and an in-distribution failure counts as a miss. A row below the gate at its longest N
    has none up to it (right-censored), a row the test cannot tell from the gate is undecided, a row never
    learned in distribution is excluded, and ties stay tied in the measured order. Threshold-sweep runs stay
    out of the main cells."""
    planted = {  # (task, layers) -> {N: (in_dist, at_2x)}; seeds spread at_2x by +-0.01 (sort 3: +-0.1)
        ("copy", 1): {4: (1.0, 0.2), 8: (1.0, 0.97), 16: (1.0, 0.5), 24: (1.0, 0.97)},  # dip at 16: 24
        ("copy", 2): {4: (1.0, 0.3), 8: (0.95, 0.96), 16: (1.0, 0.97), 24: (1.0, 0.98)},  # 8
        ("copy", 3): {8: (1.0, 0.90), 16: (1.0, 0.97)},  # mean 0.90 at 8, but one seed at 0.89: 16
        ("sort", 2): {4: (0.5, 0.95), 8: (0.99, 0.96), 16: (1.0, 0.97)},  # 4 fails in distribution: 8
        ("parity_scratch", 2): {8: (1.0, 0.97), 16: (1.0, 0.98)},  # holds at the shortest N: <= 8
        ("sort", 1): {4: (1.0, 0.1), 8: (1.0, 0.1)},  # below the gate: none up to 8
        ("sort", 3): {8: (1.0, 0.5), 16: (1.0, 0.92)},  # 0.82 / 0.92 / 1.02 at 16 (in-dist 1.0 caps the min): undecided
        ("parity_scratch", 1): {8: (0.5, 0.0), 16: (0.4, 0.0)},  # never learned in distribution: excluded
    }
    for (task, nl), by_n in planted.items():
        for N, (ind, a2) in by_n.items():
            for seed in range(3):
                spread = 0.1 if (task, nl) == ("sort", 3) else 0.01
                write_threshold_run(tmp_path, task, nl, N, seed, ind, a2 + spread * (seed - 1), 0.5)
    for seed in range(3):  # a main-grid run: its own cell, and a point of no threshold row (one N)
        write_algo(tmp_path, "copy", "rope", seed, 0.99, 0.1)
    assert analyze.main([str(tmp_path)]) == 0
    lg = json.loads((tmp_path / "analysis.json").read_text())["lengen"]
    assert [(c["task"], c["encoding"], c["n"]) for c in lg["cells"]] == [("copy", "rope", 3)]
    th = lg["threshold"]
    got = {(r["task"], r["n_layer"]): r for r in th["rows"]}
    assert {k: r["threshold"] for k, r in got.items()} == {
        ("copy", 1): 24, ("copy", 2): 8, ("copy", 3): 16, ("sort", 2): 8, ("parity_scratch", 2): 8,
        ("sort", 1): None, ("sort", 3): None, ("parity_scratch", 1): None}
    status = {k: r["status"] for k, r in got.items()}
    assert status[("copy", 1)] == "24" and status[("parity_scratch", 2)].startswith("<= 8 (left-censored")
    assert status[("sort", 1)] == "none up to N=8 (right-censored: it may lie above)"
    assert status[("sort", 3)].startswith("undecided at N=16 (mean +0.013 from the gate, p=0.82")
    assert status[("parity_scratch", 1)].startswith("excluded: not learned in distribution")
    fam = {h["id"]: h for h in lg["family"]["hypotheses"]}  # every row but the excluded one, and no cell
    assert lg["family"]["m"] == 7 and "threshold/parity_scratch/1/nope" not in fam
    assert fam["threshold/copy/1/nope"]["effect"] == pytest.approx(0.07) and fam["threshold/copy/1/nope"]["passed"]
    p = got[("copy", 1)]["by_train_len"][1]
    assert p["train_len"] == 8 and p["at_2x"]["mean"] == pytest.approx(0.97) and p["at_3x"]["mean"] == 0.5
    assert p["in_dist"]["n"] == 3 and got[("copy", 1)]["encoding"] == "nope"
    assert th["measured_order"] == {  # copy, parity_scratch and sort tie at 2 layers: one group, by name
        "1": {"ordered": [["copy"]], "none": ["sort"], "excluded": ["parity_scratch"]},
        "2": {"ordered": [["copy", "parity_scratch", "sort"]], "none": [], "excluded": []},
        "3": {"ordered": [["copy"]], "none": ["sort"], "excluded": []}}
    assert th["predicted_order"] == ["copy", "sort", "parity_scratch"]
    assert "lengen_threshold.png" in json.loads((tmp_path / "analysis.json").read_text())["plots"]
    md = (tmp_path / "analysis.md").read_text()
    assert "### The training-length threshold" in md and "2 layers: copy = parity_scratch = sort" in md


def test_posenc_chunk_ablation_against_the_full_chunk_model(tmp_path):
    """posenc.chunk_ablation: each ablated chunk cell paired with the full chunk cell (3 seeds); an
    ablation that does not learn retrieval in distribution is reported so, without a comparison."""
    lens = (128, 256, 512)
    cells = {"chunk": ({}, (1.0, 0.2, 0.1)), "chunk-dense": ({"chunk_dense_train": True}, (1.0, 0.8, 0.7)),
             "chunk-linear": ({"chunk_encoder": "linear"}, (0.3, 0.0, 0.0)),
             "chunk-fused": ({"chunk_bypass": False}, (1.0, 0.2, 0.1))}
    for seed in range(3):
        for name, (flags, exact) in cells.items():
            model = {"chunk_layers": "1", **flags}
            cfg = {"bits": 16, "seed": seed, "size": "0.1M", "block_size": 128, "model": model,
                   "task_mix": 1.0, "task_list": "passkey"}
            ex = [x + 0.02 * seed * (name == "chunk-dense") for x in exact]
            tasks_ = {"passkey": {"by_length": {str(L): {"exact": x, "rank": 1.0} for L, x in zip(lens, ex)}}}
            write_run(tmp_path, f"{name}_s{seed}", cfg, {"val_loss": 9.0},
                      model_config={"pos": "rope", "block_size": 128, "chunk_encoder": "mlp_cls", "chunk_bypass": True,
                                    "chunk_dense_train": False, **model},
                      eval_={"score": sum(ex[1:]) / 2, "ppl": None, "tasks": tasks_})
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    pe = json.loads((tmp_path / "analysis.json").read_text())["posenc"]
    assert {c["encoding"] for c in pe["cells"]} == set(cells)
    rows = {r["ablation"]: r for r in pe["chunk_ablation"]}
    assert [r["ablation"] for r in pe["chunk_ablation"]] == ["chunk_encoder", "chunk_bypass", "chunk_dense_train"]
    d = rows["chunk_dense_train"]
    assert d["encoding"] == "chunk-dense" and d["verdict"] == "better than chunk" and d["n"] == 3
    assert d["vs_full"]["exact"]["passkey@256"]["mean_diff"] == pytest.approx(0.62)
    assert set(d["vs_full"]["exact"]) == {"passkey@256", "passkey@512"}
    assert rows["chunk_encoder"]["verdict"] == "retrieval not learned in distribution without this principle"
    assert rows["chunk_encoder"]["vs_full"]["score"] is None
    assert rows["chunk_bypass"]["verdict"].startswith("not distinguishable from chunk (Δ +0.000")
    assert "### Chunk attention: one principle removed" in (tmp_path / "analysis.md").read_text()


def test_posenc_chunk_ablation_text_runs_compare_loss_past_training(tmp_path):
    """Text-trained chunk ablations: the loss at each length past training, paired with the full chunk
    model's; the verdict reads the mean over those lengths, lower is better."""
    lens = (128, 256, 512)
    planted = {"chunk": ({}, 0.0), "chunk-linear": ({"chunk_encoder": "linear"}, 0.2),
               "chunk-fused": ({"chunk_bypass": False}, 0.0), "chunk-dense": ({"chunk_dense_train": True}, -0.3)}
    for seed in range(3):
        for name, (flags, gap) in planted.items():
            model = {"chunk_layers": "1", **flags}
            noise = 0.01 * (seed - 1) * (name != "chunk")
            loss = {str(L): 4.0 + 0.1 * i + (gap + noise) * (L > 128) for i, L in enumerate(lens)}
            write_run(tmp_path, f"{name}_s{seed}", {"bits": 16, "seed": seed, "size": "0.1M", "block_size": 128,
                                                   "model": model}, {"val_loss": 4.0},
                      model_config={"pos": "rope", "block_size": 128, "chunk_encoder": "mlp_cls", "chunk_bypass": True,
                                    "chunk_dense_train": False, **model},
                      eval_={"score": None, "ppl": {"by_length": loss}, "tasks": {}})
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    rows = {r["ablation"]: r for r in json.loads((tmp_path / "analysis.json").read_text())["posenc"]["chunk_ablation"]}
    assert set(rows) == {"chunk_encoder", "chunk_bypass", "chunk_dense_train"}
    lin = rows["chunk_encoder"]
    assert lin["training"] == "text" and set(lin["vs_full"]["loss"]) == {"256", "512"}
    assert lin["vs_full"]["loss_past"]["mean_diff"] == pytest.approx(0.2) and lin["verdict"] == "worse than chunk"
    assert rows["chunk_dense_train"]["verdict"] == "better than chunk"
    assert rows["chunk_bypass"]["verdict"].startswith("not distinguishable from chunk (Δ +0.000")
    assert lin["full_loss_by_length"]["128"]["mean"] == pytest.approx(4.0)
    assert "@256 4.300 (4.100)" in (tmp_path / "analysis.md").read_text()


def test_vs_baseline_pairs_a_cell_with_its_named_baseline(tmp_path):
    """cells[].vs_baseline (encodings.BASELINES): lengen pairs the sinusoidal cell's score with NoPE's;
    posenc pairs chunk attention's loss with SWAN's at every length, the verdict on the mean past
    training (lower is better); a cell without a baseline encoding has none."""
    lg_dir, pe_dir = tmp_path / "lengen", tmp_path / "posenc"
    for seed in range(3):
        write_algo(lg_dir, "copy", "rope", seed, 0.99, 0.0)
        write_algo(lg_dir, "copy", "nope", seed, 0.99, [0.5, 0.6, 0.7][seed])
        write_algo(lg_dir, "copy", "sinusoidal", seed, 0.99, [0.3, 0.4, 0.45][seed])
        for name, model, gap in (("chunk", {"chunk_layers": "1"}, -0.1), ("swan", {"swan": True}, 0.0),
                                 ("rope", {"pos": "rope"}, 0.3)):
            loss = {str(L): 3.7 + (gap + 0.01 * seed * (name == "chunk")) * (L > 128) for L in (128, 256, 512)}
            write_run(pe_dir, f"{name}_s{seed}", {"bits": 16, "seed": seed, "size": "0.1M", "block_size": 128,
                                                 "model": model}, {"val_loss": 3.7},
                      model_config={"pos": "rope", "block_size": 128, **model},
                      eval_={"score": None, "ppl": {"by_length": loss}, "tasks": {}})
    assert analyze.main([str(lg_dir), "--no_plots"]) == 0 and analyze.main([str(pe_dir), "--no_plots"]) == 0
    lg = {c["encoding"]: c for c in json.loads((lg_dir / "analysis.json").read_text())["lengen"]["cells"]}
    b = lg["sinusoidal"]["vs_baseline"]
    assert b["baseline"] == "nope" and b["score"]["mean_diff"] == pytest.approx(-0.65 / 3) and b["verdict"] == "worse than nope"
    assert lg["nope"]["vs_baseline"] is None and lg["rope"]["vs_baseline"] is None
    pe = {c["encoding"]: c for c in json.loads((pe_dir / "analysis.json").read_text())["posenc"]["cells"]}
    b = pe["chunk"]["vs_baseline"]
    assert b["baseline"] == "swan" and set(b["loss"]) == {"128", "256", "512"} and b["score"] is None
    assert b["loss_past"]["mean_diff"] == pytest.approx(-0.09) and b["loss_verdict"] == "better than swan"
    assert b["loss"]["128"]["mean_diff"] == pytest.approx(0.0) and pe["swan"]["vs_baseline"] is None
    assert "chunk vs swan: loss -0.090" in (pe_dir / "analysis.md").read_text()


def test_posenc_cells_carry_hope_pairs_and_attention_by_distance(tmp_path):
    """A HoPE cell names the rotary pairs HoPE removed (run record "hope"); every cell with probes has
    the attention weight by distance per layer, averaged over seeds."""
    for seed in range(2):
        for pos in ("rope", "hope"):
            probes = {"by_length": {"128": {"attn_by_distance": {"edges": [0, 1, 2, 128],
                                                                 "mean": [[0.5, 0.1 * (seed + 1), 0.01], [0.3, 0.2, 0.02]]}}}}
            write_run(tmp_path, f"{pos}_s{seed}", {"bits": 16, "seed": seed, "size": "0.1M", "block_size": 128,
                                                   "model": {"pos": pos}}, {"val_loss": 4.0},
                      model_config={"pos": pos, "block_size": 128},
                      extra={"hope": {"pairs": 16, "removed": 10, "cutoff": 128, "head_dim": 32}} if pos == "hope" else None,
                      eval_={"score": None, "ppl": {"by_length": {"128": 4.0, "256": 4.2}}, "tasks": {}, "probes": probes})
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    c = {x["encoding"]: x for x in json.loads((tmp_path / "analysis.json").read_text())["posenc"]["cells"]}
    assert c["hope"]["hope_pairs"] == {"pairs": 16, "removed": 10, "cutoff": 128, "head_dim": 32}
    assert c["rope"]["hope_pairs"] is None
    d = c["rope"]["attn_by_distance"]["128"]
    assert d["n"] == 2 and d["edges"] == [0, 1, 2, 128] and d["mean"][0] == pytest.approx([0.5, 0.15, 0.01])


def write_encoding_study(root):
    """Planted lengen and posenc runs, 3 seeds: lengen cells (copy: rope, nope, sinusoidal, expe; a gated-out
    alibi) and a threshold sweep; posenc text and passkey runs (rope, nope, swan, sinusoidal, expe)."""
    for seed in range(3):
        write_algo(root, "copy", "rope", seed, 0.98, [0.1, 0.0, 0.2][seed])
        write_algo(root, "copy", "nope", seed, 0.99, [0.5, 0.6, 0.7][seed])
        write_algo(root, "copy", "sinusoidal", seed, 0.97, [0.3, 0.5, 0.4][seed])
        write_algo(root, "copy", "expe", seed, 0.97, [0.2, 0.1, 0.3][seed])
        write_algo(root, "copy", "alibi", seed, 0.5, 0.9)
        for N, a2 in ((8, 0.95), (16, 0.97)):
            write_threshold_run(root, "copy", 2, N, seed, 1.0, a2 + 0.01 * (seed - 1), 0.5)
        for pos, loss, exact in (("rope", (4.0, 4.5, 5.0), (1.0, 0.2, 0.0)), ("nope", (4.1, 4.2, 4.3), (0.2, 0.0, 0.0)),
                                 ("sinusoidal", (4.1, 4.15, 4.2), (0.1, 0.0, 0.0)),
                                 ("expe", (4.1, 4.6, 5.5), (0.0, 0.0, 0.0)), ("swan", (4.0, 4.0, 4.0), (1.0, 0.9, 0.8))):
            cfg = {"bits": 16, "seed": seed, "size": "0.1M", "block_size": 128, "model": {"pos": pos}}
            mc = {"pos": pos, "block_size": 128}
            if pos == "swan":
                cfg["model"], mc = {"swan": True}, {"swan": True, "block_size": 128}
            lens = (128, 256, 512)
            ppl = {"by_length": {str(L): x + 0.01 * seed * (L > 128) * (1 + (pos == "swan")) for L, x in zip(lens, loss)}}
            write_run(root / "posenc", f"{pos}_s{seed}", cfg, {"val_loss": loss[0]}, model_config=mc,
                      eval_={"score": None, "ppl": ppl, "tasks": {}})
            ex = [min(1.0, x + 0.02 * seed * (pos == "swan")) for x in exact]
            tasks_ = {"passkey": {"by_length": {str(L): {"exact": x, "rank": 1.0} for L, x in zip(lens, ex)}}}
            write_run(root / "posenc", f"{pos}_passkey_s{seed}", {**cfg, "task_mix": 1.0, "task_list": "passkey"},
                      {"val_loss": 9.0}, model_config=mc, eval_={"score": sum(ex[1:]) / 2, "ppl": None, "tasks": tasks_})


def test_refamily_of_a_fresh_analysis_is_the_fresh_analysis(tmp_path, capsys):
    """analyze.py --refamily DIR decides the families again from analysis.json alone, by the functions a fresh
    analysis uses: on a fresh analysis it changes nothing (json and markdown), and on a stale one (families,
    verdicts, thresholds stripped or wrong, as the stored analyses were) it gives the fresh analysis back.
    A file with a study that has no family function is refused in one line, unchanged."""
    write_encoding_study(tmp_path / "runs")
    for study in ("lengen", "posenc"):
        out = tmp_path / study
        assert analyze.main([str(tmp_path / "runs"), "--study", study, "--out", str(out)]) == 0
        fresh_json, fresh_md = (out / "analysis.json").read_text(), (out / "analysis.md").read_text()
        rep = json.loads(fresh_json)
        assert rep[study]["family"]["m"] >= 2 and "### Verdicts: " in fresh_md
        assert analyze.main(["--refamily", str(out)]) == 0
        assert json.loads((out / "analysis.json").read_text()) == rep and (out / "analysis.md").read_text() == fresh_md
        sec = rep[study]
        del sec["family"]
        for c in sec["cells"]:
            c["verdict"] = "stale" if c["verdict"] and "than" in c["verdict"] else c["verdict"]
            c.pop("extrapolates", None)
            c.pop("loss_verdict", None)
            if c.get("vs_baseline"):
                c["vs_baseline"].update({k: "stale" for k in ("verdict", "loss_verdict", "score_verdict") if k in c["vs_baseline"]})
        for r in (sec.get("threshold") or {}).get("rows", []):
            r["threshold"], r["status"] = 8, "stale"
        if sec.get("threshold"):
            sec["threshold"]["measured_order"] = {"2": ["copy"]}
        (out / "analysis.json").write_text(json.dumps(rep))
        assert analyze.main(["--refamily", str(out)]) == 0
        assert json.loads((out / "analysis.json").read_text()) == json.loads(fresh_json)
        assert (out / "analysis.md").read_text() == fresh_md
    lg = json.loads((tmp_path / "lengen" / "analysis.json").read_text())["lengen"]
    # 3 vs rope, sinusoidal vs nope, 1 row; expe-qk beats rope by 0.1 in every seed (up to round-off): no t
    # statistic, so undefined and outside m (it was z ~1e16, p ~0, passed)
    assert lg["threshold"]["rows"][0]["threshold"] == 8 and lg["family"]["m"] == 4
    assert next(h for h in lg["family"]["hypotheses"] if h["claim"].startswith("copy: expe-qk vs rope"))["undefined"]
    # a stored file without a cell's per-seed values: that hypothesis is labelled and left out of m, not invented
    rep = json.loads((tmp_path / "lengen" / "analysis.json").read_text())
    nope = next(c for c in rep["lengen"]["cells"] if c["encoding"] == "nope")
    del nope["score"]["per_seed"]
    del rep["lengen"]["threshold"]["rows"][0]["by_train_len"][-1]["at_2x"]["per_seed"]
    (tmp_path / "lengen" / "analysis.json").write_text(json.dumps(rep))
    assert analyze.main(["--refamily", str(tmp_path / "lengen"), "--no_plots"]) == 0
    lg = json.loads((tmp_path / "lengen" / "analysis.json").read_text())["lengen"]
    h = next(h for h in lg["family"]["hypotheses"] if h["claim"].startswith("copy: nope vs rope"))
    assert h["p"] is None and "excluded: fewer than 2 per-seed values stored" in h["test"]
    assert lg["family"]["m"] == 1  # nope vs rope, sinusoidal vs nope and the threshold row are out; expe-qk is undefined
    assert next(c for c in lg["cells"] if c["encoding"] == "nope")["verdict"] == "no seeds in common with rope"
    assert lg["threshold"]["rows"][0]["status"] == "undecided at N=16 (fewer than 2 per-seed values stored)"
    pe = json.loads((tmp_path / "posenc" / "analysis.json").read_text())["posenc"]
    ids = [h["id"] for h in pe["family"]["hypotheses"]]  # the passkey cells of nope, sinusoidal, expe are gated out
    assert ids == [f"task_mix:passkey: swan vs rope/score"] + [f"text: {e} vs {b}/loss" for e, b in (
        ("nope", "rope"), ("expe-qk", "rope"), ("sinusoidal", "rope"), ("sinusoidal", "nope"), ("swan", "rope"))]
    capsys.readouterr()
    other = tmp_path / "other"
    other.mkdir()
    (other / "analysis.json").write_text(json.dumps({"studies": {"sinks": 3}, "sinks": {}}))
    assert analyze.main(["--refamily", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no family function for sinks" in err
    assert json.loads((other / "analysis.json").read_text()) == {"studies": {"sinks": 3}, "sinks": {}}
    (other / "analysis.json").write_text(json.dumps({"studies": {"qat": 3}, "qat": {}}))  # no penalty_law section
    assert analyze.main(["--refamily", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the stored qat analysis lacks 'penalty_law'" in err
    assert json.loads((other / "analysis.json").read_text()) == {"studies": {"qat": 3}, "qat": {}}


def test_power_mode_prints_the_detectable_effect_and_the_seeds_needed(tmp_path, capsys):
    """analyze.py --power DIR [--seeds N] [--effect X]: per hypothesis of the stored family, the effect its
    test detects at N seeds and the seeds X needs, both at the family's strictest Holm step (stats.power_plan,
    the numbers checked against min_detectable_effect and seeds_needed); a file without a family, and a
    planned seed count below 2, are one-line errors."""
    write_encoding_study(tmp_path / "runs")
    out = tmp_path / "lengen"
    assert analyze.main([str(tmp_path / "runs"), "--study", "lengen", "--no_plots", "--out", str(out)]) == 0
    fam = json.loads((out / "analysis.json").read_text())["lengen"]["family"]
    capsys.readouterr()
    assert analyze.main(["--power", str(out), "--seeds", "10", "--effect", "0.05"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("## Power: lengen") and f"at level 0.05/{fam['m']}" in text
    h = next(h for h in fam["hypotheses"] if h["claim"].startswith("copy: nope vs rope"))
    row = next(line for line in text.splitlines() if line.startswith(f"| {h['claim']} |")).split(" | ")
    level = 0.05 / fam["m"]
    up = stats.sd_upper(h["sd"], h["n"] - 1)  # planned on the 80% upper confidence bound of the pilot's sd
    assert row[1] == "paired t" and float(row[4]) == pytest.approx(up, rel=2e-3)
    assert float(row[7]) == pytest.approx(stats.min_detectable_effect(up, 10, level), rel=2e-3)
    assert int(row[9].rstrip(" |")) == stats.seeds_needed(up, 0.05, level) > 10
    plan = stats.power_plan(fam)  # defaults: each hypothesis's own n and observed effect
    r = next(r for r in plan["rows"] if r["claim"] == h["claim"])
    assert r["planned_seeds"] == 3 and r["target"] == h["effect"]
    assert r["detectable"] == pytest.approx(stats.min_detectable_effect(up, 3, level))
    assert r["detectable"] > h["mde"]  # the family's mde: from the point sd
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "analysis.json").write_text(json.dumps({"studies": {"qat": 1}, "qat": {"cells": []}}))
    assert analyze.main(["--power", str(tmp_path / "bare")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "declares no family" in err
    with pytest.raises(SystemExit):
        analyze.main(["--power", str(out), "--seeds", "1"])
    assert "at least 2 seeds" in capsys.readouterr().err


def test_model_choice_names_the_chosen_models_interactions():
    """The markdown says which model leave-one-cell-out picks; when it is the pairwise one, it names
    the interactions whose CI excludes 0 (and only those), and what the main effects then mean."""
    from studies import longctx_md as al
    pair = {"model": "pairwise", "coefs": [{"name": "swa", "est": -0.04, "lo": -0.05, "hi": -0.03},
                                            {"name": "swa:short_ctx", "est": -0.045, "lo": -0.07, "hi": -0.019},
                                            {"name": "qk_norm:gqa", "est": -0.01, "lo": -0.04, "hi": 0.01}]}
    line = al.model_choice_md({"best_by_loco": "pairwise", "best_by_loo": "additive", "models": [pair]})[0]
    assert "**pairwise**" in line and "by leave-one-run-out: additive" in line
    assert "swa:short_ctx -0.0450 [-0.0700, -0.0190]" in line and "qk_norm:gqa" not in line and "averaged" in line
    line = al.model_choice_md({"best_by_loco": "additive", "best_by_loo": "additive", "models": [pair]})[0]
    assert "**additive**" in line and "interaction" not in line
    assert al.model_choice_md({"best_by_loco": None}) == []
