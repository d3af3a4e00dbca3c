"""Tests for analyze.py: statistics against hand-worked numbers, and the CLI on synthetic runs."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import analyze  # noqa: E402

# t_{0.975, 2} = 0.95 * sqrt(2 / (4 * 0.975 * 0.025)) in closed form for 2 dof (as scipy.stats.t.ppf gives it)
T975_DF2 = 4.302652729749464


# -----------------------------------------------------------------------------
# statistics by hand

def test_paired_z_by_hand():
    # d = [0.5, -0.5, 1.0], mean 1/3, deviations 1/6, -5/6, 2/3 -> var = (1 + 25 + 16)/36 / 2 = 7/12
    # z = (1/3) / (sqrt(7/12) / sqrt(3)) = 2 / sqrt(7)
    r = analyze.paired_z([1.0, 2.0, 3.0], [0.5, 2.5, 2.0])
    assert r["z"] == pytest.approx(2 / math.sqrt(7))
    assert r["mean_diff"] == pytest.approx(1 / 3)
    assert (r["n"], r["wins_a"], r["wins_b"]) == (3, 1, 2)


def test_paired_z_degenerate():
    assert analyze.paired_z([1.0, 2.0], [0.5, 1.5])["z"] == math.inf  # sd 0, A worse on every seed
    assert analyze.paired_z([1.0, 2.0], [1.5, 2.5])["z"] == -math.inf
    assert math.isnan(analyze.paired_z([1.0, 2.0], [1.0, 2.0])["z"])  # no difference at all
    r = analyze.paired_z([1.0], [2.0])
    assert math.isnan(r["z"]) and r["n"] == 1 and r["wins_a"] == 1
    assert math.isnan(analyze.paired_z([], [])["z"])
    with pytest.raises(ValueError):
        analyze.paired_z([1.0, 2.0], [1.0])


def test_loglinear_fit_by_hand():
    # ln x = 0, 1, 2, 3; y = 1, 2, 2, 4: xbar = 1.5, sxx = 2.25 + 0.25 + 0.25 + 2.25 = 5, ybar = 2.25
    # sxy = 1.5*1.25 + 0.5*0.25 - 0.5*0.25 + 1.5*1.75 = 4.5 -> beta = 0.9, alpha = 2.25 - 0.9*1.5 = 0.9
    # fitted 0.9, 1.8, 2.7, 3.6; residuals 0.1, 0.2, -0.7, 0.4; SSE = 0.70, s = sqrt(0.70 / 2)
    # SST = 1.5625 + 0.0625 + 0.0625 + 3.0625 = 4.75, R^2 = 1 - 0.70/4.75
    fit = analyze.loglinear_fit(np.exp([0.0, 1.0, 2.0, 3.0]), [1.0, 2.0, 2.0, 4.0])
    assert fit["n"] == 4
    for k, v in dict(alpha=0.9, beta=0.9, s=math.sqrt(0.35), xbar=1.5, sxx=5.0, r2=1 - 0.70 / 4.75).items():
        assert fit[k] == pytest.approx(v), k


def test_loglinear_fit_rejects_bad_input():
    with pytest.raises(ValueError, match="n >= 3"):
        analyze.loglinear_fit([1.0, 2.0], [0.1, 0.2])
    with pytest.raises(ValueError):
        analyze.loglinear_fit([1.0, 0.0, 2.0], [0.1, 0.2, 0.3])  # ln 0
    with pytest.raises(ValueError):
        analyze.loglinear_fit([5.0, 5.0, 5.0], [0.1, 0.2, 0.3])  # sxx = 0


def test_predict_interval_by_hand():
    fit = analyze.loglinear_fit(np.exp([0.0, 1.0, 2.0, 3.0]), [1.0, 2.0, 2.0, 4.0])
    # at ln x0 = 4: yhat = 0.9 + 0.9*4 = 4.5; half = t * sqrt(0.35) * sqrt(1 + 1/4 + (4 - 1.5)^2 / 5)
    #             = t * sqrt(0.35) * sqrt(2.5)
    half = T975_DF2 * math.sqrt(0.35 * 2.5)
    yhat, lo, hi = analyze.predict_interval(fit, [math.exp(4.0), math.exp(1.5)])
    assert yhat[0] == pytest.approx(4.5) and lo[0] == pytest.approx(4.5 - half) and hi[0] == pytest.approx(4.5 + half)
    # at the centre ln x0 = xbar: yhat = 0.9 + 1.35 = 2.25, half = t * sqrt(0.35) * sqrt(1.25)
    assert hi[1] - yhat[1] == pytest.approx(T975_DF2 * math.sqrt(0.35 * 1.25))
    # level 0.5 is narrower
    _, lo50, hi50 = analyze.predict_interval(fit, [math.exp(4.0)], level=0.5)
    assert hi50[0] - lo50[0] < hi[0] - lo[0]


def test_r2_and_loo_r2_by_hand():
    # x = 0, 1, 2; y = 0, 2, 1; ybar = 1, SST = 2
    # in sample: slope = ((-1)(-1) + 0 + (1)(0)) / 2 = 0.5, intercept 0.5: residuals -0.5, 1, -0.5 -> SSE 1.5
    assert analyze.r2_in_sample([0.0, 1.0, 2.0], [0.0, 2.0, 1.0]) == pytest.approx(1 - 1.5 / 2)
    # leave out x=0: line through (1,2),(2,1) predicts 3 -> error -3
    # leave out x=1: line through (0,0),(2,1) predicts 0.5 -> error 1.5
    # leave out x=2: line through (0,0),(1,2) predicts 4 -> error -3
    # R^2_LOO = 1 - (9 + 2.25 + 9) / 2
    assert analyze.loo_r2([0.0, 1.0, 2.0], [0.0, 2.0, 1.0]) == pytest.approx(1 - 20.25 / 2)


def test_loo_r2_explicit_refit_2d():
    X = np.array([[0, 1], [1, 0], [1, 1], [2, 0], [0, 0], [2, 1]], dtype=float)
    y = np.array([1.0, 2.5, 2.0, 4.2, 0.3, 3.1])
    press = 0.0
    for i in range(len(y)):  # refit OLS with intercept without row i, predict row i
        keep = np.arange(len(y)) != i
        A = np.column_stack([np.ones(keep.sum()), X[keep]])
        coef = np.linalg.solve(A.T @ A, A.T @ y[keep])
        press += (y[i] - np.r_[1.0, X[i]] @ coef) ** 2
    expected = 1 - press / ((y - y.mean()) ** 2).sum()
    assert analyze.loo_r2(X, y) == pytest.approx(expected)
    # independent check, the hat-matrix shortcut: e_i / (1 - h_ii)
    A = np.column_stack([np.ones(len(y)), X])
    H = A @ np.linalg.solve(A.T @ A, A.T)
    e = y - H @ y
    assert analyze.loo_r2(X, y) == pytest.approx(1 - ((e / (1 - np.diag(H))) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    assert math.isnan(analyze.loo_r2([1.0, 2.0], [1.0, 2.0]))  # n < 3
    assert math.isnan(analyze.r2_in_sample([1.0, 2.0], [1.0, 3.0]))  # 2 points, 2 coefficients: saturated
    assert math.isnan(analyze.loo_r2([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]))  # constant y


def test_feature_count():
    llama = {"n_head": 8, "n_kv_head": 8, "qk_norm": "none", "window": 0}
    assert analyze.feature_count(llama, 1024, 512) == 0
    assert analyze.feature_count(llama, 512, 512) == 1  # shorter pretraining context
    worst = {"n_head": 8, "n_kv_head": 2, "qk_norm": "head", "window": 64, "global_every": 4}
    assert analyze.feature_count(worst, 512, 512) == 4
    assert analyze.feature_count({**worst, "qk_norm": "layer"}, 1024, 512) == 3
    assert analyze.feature_count({"n_head": 4}, 512, None) == 0  # missing fields, single context
    assert analyze.feature_count({}, None, 512) == 0
    # an extended run keeps its pretraining length in rope_original_len
    assert analyze.pretrain_block({"model_config": {"rope_original_len": 128}, "config": {"block_size": 512}}) == 128
    assert analyze.pretrain_block({"model_config": {"rope_original_len": 0}, "config": {"block_size": 512}}) == 512


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
    assert "**bits=16 size=1M lr=1**: best warmdown 0.33" in md
    assert "**bits=6 size=1M lr=1**: best warmdown 0.33" in md
    assert "**bits=16 size=4M lr=1**: best warmdown 0.33" in md
    assert "**bits=6 size=4M lr=1**: best warmdown 0.5" in md
    assert "size=1M lr=1: same best warmdown 0.33" in md
    assert "size=4M lr=1: best warmdown differs (16: 0.33, 6: 0.5)" in md
    assert "log-linear fit skipped" in md  # only 2 sizes
    rep = json.loads((tmp_path / "analysis.json").read_text())
    best = {(c["bits"], c["size"]): c["best_warmdown"] for c in rep["qat"]["cells"]}
    assert best == {(16, "1M"): 0.33, (6, "1M"): 0.33, (16, "4M"): 0.33, (6, "4M"): 0.5}
    # paired z against the best: wd 0.1 at 16/1M loses on every seed
    row = next(r for r in rep["qat"]["cells"][0]["rows"] if r["warmdown"] == 0.1)
    assert row["best_wins"] == 3 and row["n_paired"] == 3 and row["z"] > 0
    # penalty INT6 - FP16 at 1M, wd 0.33 is 0.05; mean over warmdowns also carries 0
    pen = rep["penalty"]["groups"][0]
    assert pen["bits"] == 6 and pen["rows"][0]["penalty"] == pytest.approx(0.05) and pen["rows"][0]["n"] == 9
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
    assert "Held-out coverage: 2/2" in md  # 1M and 16M held out by default
    assert {"qat_warmdown.png", "penalty_vs_size.png"} <= set(os.listdir(out))
    assert analyze.main([str(tmp_path), "--out", str(out), "--fit_sizes", "1M,2M,4M", "--no_plots"]) == 0
    g = json.loads((out / "analysis.json").read_text())["penalty"]["groups"][0]
    assert [r["role"] for r in g["rows"]] == ["fit", "fit", "fit", "held-out", "held-out"]
    assert g["coverage"][1] == 2


def test_cli_longctx(tmp_path):
    # score falls 2 points per inhibiting feature, plus a small wobble
    combos = [("none", 4, 0, 256), ("head", 4, 0, 256), ("head", 2, 0, 256), ("head", 2, 32, 128),
              ("none", 2, 32, 128), ("layer", 4, 32, 256), ("none", 4, 0, 128)]
    for i, (qk, kv, win, block) in enumerate(combos):
        count = (qk != "none") + (kv < 4) + (win > 0) + (block == 128)
        write_run(tmp_path, f"lc{i}", {"block_size": block, "seed": 0}, {"train_loss": 2.0 + 0.01 * i},
                  model_config={"n_head": 4, "n_kv_head": kv, "qk_norm": qk, "window": win},
                  eval_={"score": 10.0 - 2 * count + 0.1 * (i % 2), "sink_rate": 0.5 - 0.1 * count})
    assert analyze.main([str(tmp_path), "--no_plots"]) == 0
    lc = json.loads((tmp_path / "analysis.json").read_text())["longctx"]
    assert lc["short_block"] == 128
    assert [w["count"] for w in lc["runs"]] == [0, 1, 2, 4, 3, 2, 1]
    count = next(p for p in lc["predictors"] if p["predictor"] == "feature count")
    assert count["n"] == 7 and count["r2"] > 0.99 and count["loo_r2"] > 0.98
    assert "predictor of score" in (tmp_path / "analysis.md").read_text()


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
    assert "2 runs lack one of" in md and "best warmdown 0.33" in md


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
    md = (tmp_path / "analysis.md").read_text()
    assert "**[optimizer=adamw] bits=16 size=1M lr=1**: best warmdown 0.1" in md
    assert "**[optimizer=muon] bits=16 size=1M lr=1**: best warmdown 0.33" in md


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
    assert all(r["n"] == 2 for c in rep["qat"]["cells"] for r in c["rows"])
    pen = rep["penalty"]["groups"][0]["rows"][0]
    assert pen["n"] == 2 and pen["N"] > 0  # params.non_embedding read as N


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
                  eval_={"score": 0.9})
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
    # the QAT tables hold the grid and the 5 long-context base runs (a separate variant: block_size varies)
    variants = {c["variant"] for c in rep["qat"]["cells"]}
    assert len(variants) >= 2
    lcr = rep["longctx"]
    assert lcr["extensions"] and [w["run"] for w in lcr["runs"]] == [f"base{i}-yarn1024" for i in range(5)]
    assert lcr["short_block"] == 128 and [w["count"] for w in lcr["runs"]] == [0, 1, 3, 2, 2]
    assert [w["train_loss"] for w in lcr["runs"]] == pytest.approx([3.0, 3.01, 3.02, 3.03, 3.04])  # the parents'
    pred = {p["predictor"]: p for p in lcr["predictors"]}
    assert pred["feature count"]["r2"] > 0.99 and pred["pre-extension score"]["n"] == 5
    g = {(x["task"], x["encoding"]): x for x in rep["lengen"]["cells"]}
    assert set(g) == {("copy", "nope"), ("copy", "rope"), ("sort", "nope"), ("sort", "rope")}
    assert g[("copy", "nope")]["score"]["mean"] == 0.5 and g[("copy", "nope")]["by_length"]["32"]["mean"] == 0.5
    md = (tmp_path / "analysis.md").read_text()
    assert "8 algorithmic-task runs (config.algo) and 5 context extensions (lineage)" in md
    assert "## 5. Length generalisation" in md and "pre-ext score" in md


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
    assert c[("copy", "hope")]["verdict"] == "no clear difference" and c[("copy", "rope")]["verdict"] == "reference"
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
    assert pk["vs_reference"]["score"]["mean_diff"] == pytest.approx(0.75) and pk["verdict"] == "better than rope"
    assert c[("task_mix:passkey", "alibi")]["learned"] is False
    assert c[("task_mix:passkey", "alibi")]["verdict"].startswith("excluded")
    assert pe["excluded"] == [{"training": "task_mix:passkey", "encoding": "alibi", "n": 2}]
    md = (tmp_path / "analysis.md").read_text()
    assert "## 6. Positional encodings" in md and "task_mix:passkey-trained: passkey retrieval" in md
