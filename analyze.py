"""
Statistics and reports for the sweeps of this project.

    python analyze.py out/qat_grid [out/probes ...] [--out DIR] [--fit_sizes 15M,30M,50M]

Reads every result.json (and the eval.json next to it, if any) under the folders and writes
analysis.md, analysis.json and PNG plots to --out (default: the first folder). Sections:
  1. QAT schedule grid: best warmdown per (bits, size, lr) cell, paired z across seeds
  2. quantisation penalty P_b(N) = L_b(N) - L_16(N), log-linear law, 95% prediction intervals
  3. weight-to-grid distance, QAT vs FP16 weights on the same grid
  4. long-context: inhibiting-feature count -> score, in-sample and leave-one-out R^2
  5. length generalisation: exact match by input length per (task, encoding) over seeds, an
     in-distribution gate, paired comparison with RoPE
  6. positional encodings (posenc): loss, LongPPL and retrieval by evaluation length per encoding
Seeds: the QAT LR-schedule study (720-run grid, "QAT seed" below; it has no arXiv id) and "Cracks in the Foundation" (arXiv 2608.10296, "long-context
seed"). Every field is optional: a missing one shrinks a table, it never crashes the script.
"""
import argparse
import json
import math
import os
import sys
from collections import defaultdict

import numpy as np
from scipy import stats

# config keys that split runs into separate studies (probes: AdamW, cosine, longer training, late QAT,
# clip rule) so that the QAT tables never average across them. A key splits only where it varies
# within one size: iters or tokens scaled with model size are part of the grid, not a probe.
# These come first in a variant's name; every other config key (and model flag, as model.<flag>)
# that varies within one size splits too, except the grid's own axes and bookkeeping below.
VARIANT_KEYS = ("optimizer", "schedule", "iters", "tokens", "block_size", "clip", "qat_start")
AXIS_KEYS = ("bits", "lr", "warmdown", "seed", "size", "n_layer", "n_embd", "n_head")  # size label: size_label
BOOKKEEPING_KEYS = ("out_dir", "quiet", "resume", "overwrite", "device", "compile", "cache_dir", "eval_interval",
                    "eval_tokens", "save_at", "ckpt_every", "model")

# -----------------------------------------------------------------------------
# statistics: pure functions


def paired_z(a, b):
    """Paired comparison across seeds; a[i], b[i] are the losses of seed i under A and B.
    d = a - b, z = mean(d) / (sd(d, ddof=1) / sqrt(n)), the paired t statistic: negative z means
    A has the lower loss. QAT seed: z ~ 12-15 with 10/10 seeds for wd33 over wd10 at INT4 50M+."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired_z needs one loss per seed on both sides, got {a.size} and {b.size}")
    n, d = a.size, a - b
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        z = math.nan  # no spread to estimate
    else:
        sd = float(d.std(ddof=1))
        if sd > 0:
            z = mean / (sd / math.sqrt(n))
        else:  # every seed moved by exactly the same amount: infinitely sure, unless it is zero
            z = math.copysign(math.inf, mean) if mean != 0 else math.nan
    return {"z": z, "mean_diff": mean, "n": n,
            "wins_a": int((a < b).sum()), "wins_b": int((b < a).sum())}


def loglinear_fit(x, y):
    """OLS of y = alpha + beta * ln(x); QAT seed: INT6 penalty vs non-embedding params N.
    Returns alpha, beta, n, s (residual sd, n-2 dof), xbar (mean of ln x), sxx, r2."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"loglinear_fit: x has {x.size} values, y has {y.size}")
    if x.size < 3:
        raise ValueError(f"loglinear_fit needs n >= 3 points (n - 2 residual dof), got {x.size}")
    if not (np.all(np.isfinite(x)) and np.all(x > 0) and np.all(np.isfinite(y))):
        raise ValueError("loglinear_fit needs finite y and x > 0")
    lx, n = np.log(x), x.size
    xbar = lx.mean()
    sxx = float(((lx - xbar) ** 2).sum())
    if sxx == 0:
        raise ValueError("loglinear_fit needs at least two distinct x values")
    beta = float(((lx - xbar) * (y - y.mean())).sum() / sxx)
    alpha = float(y.mean() - beta * xbar)
    sse = float(((y - alpha - beta * lx) ** 2).sum())
    sst = float(((y - y.mean()) ** 2).sum())
    return {"alpha": alpha, "beta": beta, "n": int(n), "s": math.sqrt(sse / (n - 2)),
            "xbar": float(xbar), "sxx": sxx, "r2": 1 - sse / sst if sst > 0 else math.nan}


def predict_interval(fit, x_new, level=0.95):
    """Prediction interval of a new observation at x_new (the textbook OLS formula):
    yhat +- t_{(1+level)/2, n-2} * s * sqrt(1 + 1/n + (ln x0 - xbar)^2 / sxx). Returns arrays."""
    x0 = np.log(np.atleast_1d(np.asarray(x_new, dtype=float)))
    n = fit["n"]
    yhat = fit["alpha"] + fit["beta"] * x0
    t = stats.t.ppf((1 + level) / 2, n - 2)
    half = t * fit["s"] * np.sqrt(1 + 1 / n + (x0 - fit["xbar"]) ** 2 / fit["sxx"])
    return yhat, yhat - half, yhat + half


def _design(X, y):
    """[1, X] design matrix (X 1-D or 2-D) and y as float arrays."""
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float).ravel()
    X = X[:, None] if X.ndim == 1 else X
    if len(X) != len(y):
        raise ValueError(f"X has {len(X)} rows, y has {len(y)}")
    return np.column_stack([np.ones(len(y)), X]), y


def _ols(A, y):
    # lstsq gives the minimum-norm solution, so a constant or duplicated axis does not crash
    return np.linalg.lstsq(A, y, rcond=None)[0]


def r2_in_sample(X, y):
    """R^2 = 1 - SSE/SST of OLS with intercept (X 1-D or 2-D); nan when n <= 1 + columns or y is constant."""
    A, y = _design(X, y)
    sst = float(((y - y.mean()) ** 2).sum())
    if len(y) <= A.shape[1] or sst == 0:  # as many coefficients as points: R^2 = 1 says nothing
        return math.nan
    return 1 - float(((y - A @ _ols(A, y)) ** 2).sum()) / sst


def loo_r2(X, y):
    """Leave-one-out R^2 (long-context seed, arXiv 2608.10296: 0.61 for feature count -> HELMET 32K):
    refit without run i, predict run i; R^2_LOO = 1 - sum (y_i - yhat_-i)^2 / sum (y_i - ybar)^2.
    Negative when the predictor does worse than the mean. nan when n <= 1 + columns or y is constant."""
    A, y = _design(X, y)
    n = len(y)
    sst = float(((y - y.mean()) ** 2).sum())
    if n <= A.shape[1] or sst == 0:  # each refit needs as many points as coefficients
        return math.nan
    press = 0.0
    for i in range(n):
        keep = np.arange(n) != i
        press += float(y[i] - A[i] @ _ols(A[keep], y[keep])) ** 2
    return 1 - press / sst


def feature_axes(model_config, pretrain_block, short_block):
    """The four long-context-inhibiting features of arXiv 2608.10296 as 0/1; missing fields give 0."""
    mc = model_config or {}
    n_head, n_kv = num(mc.get("n_head")), num(mc.get("n_kv_head"))
    return {
        "qk_norm": int(mc.get("qk_norm") not in (None, "none", "", False)),  # layer- or head-wise
        "gqa": int(n_head is not None and n_kv is not None and n_kv < n_head),
        "swa": int((num(mc.get("window")) or 0) > 0),  # any sliding-window layer
        "short_ctx": int(short_block is not None and pretrain_block == short_block),
    }


def feature_count(model_config, pretrain_block, short_block):
    """Count of inhibiting features (arXiv 2608.10296): QK-norm, GQA (n_kv_head < n_head), sliding
    window (window > 0), pretraining block_size == the shorter of the sweep's two contexts."""
    return sum(feature_axes(model_config, pretrain_block, short_block).values())

# -----------------------------------------------------------------------------
# loading


def warn(msg):
    print(f"analyze.py: {msg}", file=sys.stderr)


def _read_json(path):
    try:
        with open(path) as f:
            obj = json.load(f)
    except (OSError, ValueError):  # ValueError covers truncated JSON and bad encodings
        return None
    return obj if isinstance(obj, dict) else None


def load_runs(folders):
    """Every readable, finished result.json under the folders (recursively), as dicts; the eval.json
    next to it, if any, goes under "eval". Unreadable or unfinished files are skipped with a warning."""
    runs, seen = [], set()
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            path = os.path.join(root, "result.json")
            if "result.json" not in files or os.path.realpath(path) in seen:  # overlapping folders
                continue
            seen.add(os.path.realpath(path))
            run = _read_json(path)
            if run is None:
                warn(f"skipping {path}: unreadable or not a JSON object")
                continue
            if run.get("status", "done") != "done":
                warn(f"skipping {path}: status {run.get('status')!r}, not 'done'")
                continue
            for k in ("config", "model_config", "params", "metrics"):
                if not isinstance(run.get(k), dict):
                    run[k] = {}
            if not isinstance(run.get("run_name"), str):
                run["run_name"] = os.path.basename(os.path.abspath(root))
            run["_dir"] = root  # lets an extension find its parent run (lineage.parent)
            lift_model_flags(run)
            for name in ("eval.json", "grid.json"):
                if os.path.exists(os.path.join(root, name)):
                    ev = _read_json(os.path.join(root, name))
                    if ev is None:
                        warn(f"ignoring {os.path.join(root, name)}: unreadable or not a JSON object")
                    elif name == "eval.json":
                        run["eval"] = ev
                    else:
                        run["grid_distance"] = ev.get("grid_distance")
            runs.append(run)
    return runs


def lift_model_flags(run):
    """The grid axes that are model flags (bits, block_size, dimension overrides) next to the training
    flags in run["config"], as the tables read them; the other model flags stay under config.model."""
    c, mc = run["config"], run["model_config"]
    model = dict(c.get("model") or {}) if isinstance(c.get("model"), dict) else {}
    for k in ("bits", "block_size"):
        model.pop(k, None)
        c.setdefault(k, mc.get(k))
    for k in ("n_layer", "n_embd", "n_head"):
        if k in model:
            c[k] = model.pop(k)
    c["model"] = model


def num(x):
    """float(x) for a finite number, else None (missing field, string, bool, NaN)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def parse_size(s):
    """'15M' -> 1.5e7, '350K' -> 3.5e5; inf when unknown. Sort key when params are missing."""
    try:
        return float(s[:-1]) * {"K": 1e3, "M": 1e6, "B": 1e9}[s[-1].upper()]
    except (KeyError, ValueError, IndexError, TypeError, AttributeError):
        return math.inf


def size_label(config):
    """config.size, plus the dimensions overridden on the command line (--n_layer 2 -> '0.5M[n_layer=2]'),
    so that differently shaped models under one preset name are never averaged together."""
    over = [f"{k}={config[k]}" for k in ("n_layer", "n_embd", "n_head") if num(config.get(k))]
    return config["size"] + (f"[{','.join(over)}]" if over else "")


def variant_fields(config):
    """{key: value as text} of the config keys that may split runs into variants (model flags as model.<flag>)."""
    out = {k: str(v) for k, v in config.items() if k not in AXIS_KEYS and k not in BOOKKEEPING_KEYS}
    model = config.get("model")
    if isinstance(model, dict):
        out.update({f"model.{k}": str(v) for k, v in model.items()})
    return out


def run_kind(run):
    """'algo' (train.py --algo: an answer loss, not a text loss), 'extension' (extend.py: has a lineage)
    or 'lm' (a text language-model training run: the QAT grid)."""
    if run["config"].get("algo"):
        return "algo"
    if run.get("lineage") is not None:
        return "extension"
    return "lm"


def records(runs):
    """One record per run of the QAT grid: variant, bits, size, lr, warmdown, seed, loss (the deployed
    metrics.val_loss), N (params.non_embedding) and grid_distance. Algorithmic-task runs and context
    extensions are not part of it. Returns (records, {"missing": runs lacking a grid field,
    "algo": algorithmic runs, "extension": extended runs})."""
    grid, skipped = [], {"missing": 0, "algo": 0, "extension": 0}
    for r in runs:
        kind = run_kind(r)
        if kind != "lm":
            skipped[kind] += 1
            continue
        c = r["config"]
        vals = [num(c.get(k)) for k in ("bits", "lr", "warmdown", "seed")] + [num(r["metrics"].get("val_loss"))]
        if None not in vals and isinstance(c.get("size"), str):
            grid.append((r, vals))
        else:
            skipped["missing"] += 1
    by_size = defaultdict(list)
    for r, _ in grid:
        by_size[size_label(r["config"])].append(variant_fields(r["config"]))
    keys = sorted({k for fs in by_size.values() for f in fs for k in f},
                  key=lambda k: (VARIANT_KEYS.index(k) if k in VARIANT_KEYS else len(VARIANT_KEYS), k))
    varying = [k for k in keys if any(len({f.get(k) for f in fs}) > 1 for fs in by_size.values())]
    recs, seen, dups = [], set(), []
    for r, (bits, lr, wd, seed, loss) in grid:
        fields = variant_fields(r["config"])
        variant = ",".join(f"{k}={fields.get(k)}" for k in varying)
        key = (variant, int(bits), size_label(r["config"]), lr, round(wd, 6), int(seed))
        if key in seen:
            dups.append(r["run_name"])
            continue
        seen.add(key)
        n = num(r["params"].get("non_embedding"))
        recs.append(dict(zip(("variant", "bits", "size", "lr", "warmdown", "seed"), key), loss=loss,
                         N=n if n and n > 0 else None, gd=r.get("grid_distance")))
    if dups:
        warn(f"{len(dups)} runs repeat a (bits, size, lr, warmdown, seed) already seen and are ignored, "
             f"e.g. {dups[0]}")
    return recs, skipped


def size_order(recs):
    """size name -> sort key: mean N when known, else the number in the name."""
    ns = defaultdict(list)
    for x in recs:
        ns[x["size"]].append(x["N"] if x["N"] is not None else parse_size(x["size"]))
    return {s: (float(np.mean(v)), s) for s, v in ns.items()}

# -----------------------------------------------------------------------------
# reports: each returns a JSON-able dict, rendered to markdown below


def qat_report(recs, order):
    """Per (variant, bits, size, lr) cell: mean +- sd over seeds by warmdown, the best (lowest mean)
    warmdown, and paired_z of each warmdown against the best, matched on seed."""
    cells = defaultdict(lambda: defaultdict(dict))  # cell -> warmdown -> seed -> loss
    for x in recs:
        cells[(x["variant"], x["bits"], x["size"], x["lr"])][x["warmdown"]][x["seed"]] = x["loss"]
    out = []
    for cell in sorted(cells, key=lambda c: (c[0], order[c[2]], c[3], -c[1])):
        by_wd = cells[cell]
        means = {w: float(np.mean(list(s.values()))) for w, s in by_wd.items()}
        best = min(means, key=means.get)
        rows = []
        for w in sorted(by_wd):
            v = np.array(list(by_wd[w].values()))
            seeds = sorted(set(by_wd[w]) & set(by_wd[best]))
            pz = paired_z([by_wd[w][s] for s in seeds], [by_wd[best][s] for s in seeds])
            rows.append({"warmdown": w, "n": len(v), "mean": means[w],
                         "sd": float(v.std(ddof=1)) if len(v) > 1 else None,
                         "delta": means[w] - means[best], "z": None if w == best else pz["z"],
                         "best_wins": pz["wins_b"], "n_paired": pz["n"]})
        out.append(dict(zip(("variant", "bits", "size", "lr"), cell), best_warmdown=best, rows=rows))
    groups = defaultdict(dict)
    for c in out:
        groups[(c["variant"], c["size"], c["lr"])][c["bits"]] = c["best_warmdown"]
    same = [{"variant": v, "size": s, "lr": lr, "best_by_bits": b, "same": len(set(b.values())) == 1}
            for (v, s, lr), b in groups.items() if len(b) > 1]
    return {"cells": out, "consistency": same}


def default_fit_sizes(sizes):
    """Sizes sorted by N: hold out the two extremes when there are >= 5 (as the QAT seed held out
    sizes outside its fit range), else fit them all."""
    return sizes[1:-1] if len(sizes) >= 5 else list(sizes)


def penalty_report(recs, order, fit_sizes=None, level=0.95):
    """P_b(N) = L_b(N) - L_16(N) matched on (variant, size, lr, warmdown, seed), averaged per (bits, size);
    log-linear fit on the fit sizes, prediction intervals and coverage at the held-out ones."""
    base = {(x["variant"], x["size"], x["lr"], x["warmdown"], x["seed"]): x["loss"]
            for x in recs if x["bits"] == 16}
    pens, ns = defaultdict(list), defaultdict(list)
    for x in recs:
        k = (x["variant"], x["size"], x["lr"], x["warmdown"], x["seed"])
        if x["bits"] != 16 and k in base:
            pens[(x["variant"], x["bits"], x["size"])].append(x["loss"] - base[k])
            if x["N"] is not None:
                ns[(x["variant"], x["bits"], x["size"])].append(x["N"])
    out = []
    for v, b in sorted({(v, b) for v, b, _ in pens}, key=lambda t: (t[0], -t[1])):
        sizes = sorted((s for vv, bb, s in pens if (vv, bb) == (v, b)), key=order.get)
        rows = {s: {"size": s, "N": float(np.mean(ns[(v, b, s)])) if ns[(v, b, s)] else None,
                    "penalty": float(np.mean(pens[(v, b, s)])), "n": len(pens[(v, b, s)]),
                    "sd": float(np.std(pens[(v, b, s)], ddof=1)) if len(pens[(v, b, s)]) > 1 else None}
                for s in sizes}
        with_n = [s for s in sizes if rows[s]["N"] is not None]
        fit_set = [s for s in with_n if s in fit_sizes] if fit_sizes else default_fit_sizes(with_n)
        held = [s for s in with_n if s not in fit_set]
        for s in sizes:
            rows[s]["role"] = "fit" if s in fit_set else "held-out" if s in held else "no N"
        g = {"variant": v, "bits": b, "rows": [rows[s] for s in sizes], "fit": None, "coverage": None}
        if len(fit_set) < 3:
            g["message"] = f"log-linear fit skipped: {len(fit_set)} fit sizes with N, need >= 3"
        else:
            fit = loglinear_fit([rows[s]["N"] for s in fit_set], [rows[s]["penalty"] for s in fit_set])
            g["fit"] = fit
            if held:
                yhat, lo, hi = predict_interval(fit, [rows[s]["N"] for s in held], level)
                for s, yh, l, h in zip(held, yhat, lo, hi):
                    rows[s].update(pred=float(yh), lo=float(l), hi=float(h),
                                   inside=bool(l <= rows[s]["penalty"] <= h))
                g["coverage"] = [sum(rows[s]["inside"] for s in held), len(held)]
        out.append(g)
    return {"level": level, "groups": out}


def grid_report(recs):
    """Weight-to-grid distance (mean |w/s - round(w/s)|, see quant.grid_distance): each numeric entry of grid_distance other than
    "bits" is a distance on the grid_distance["bits"] grid. Ratio = mean over matched seeds of the QAT
    run's distance / mean of the FP16 run's (same variant, size, lr, warmdown, seed; QAT seed ~1.04)."""
    d = defaultdict(lambda: defaultdict(dict))  # (variant, grid bits, key, size, lr, wd) -> bits -> seed -> d
    for x in recs:
        g = x["gd"] if isinstance(x["gd"], dict) else {}
        gb = num(g.get("bits"))
        for k, val in g.items():
            if gb is not None and k != "bits" and num(val) is not None:
                d[(x["variant"], int(gb), k, x["size"], x["lr"], x["warmdown"])][x["bits"]][x["seed"]] = num(val)
    rows = []
    for key in sorted(d, key=lambda t: tuple(map(str, t))):
        fp = d[key].get(16, {})
        for b in sorted((b for b in d[key] if b != 16), reverse=True):
            q = d[key][b]
            seeds = sorted(set(q) & set(fp))  # no FP16 partner: the QAT distance alone, no ratio
            mq = float(np.mean([q[s] for s in seeds] if seeds else list(q.values())))
            mf = float(np.mean([fp[s] for s in seeds])) if seeds else None
            rows.append(dict(zip(("variant", "grid_bits", "key", "size", "lr", "warmdown"), key), bits=b,
                             n=len(seeds), d_qat=mq, d_fp16=mf, ratio=mq / mf if mf else None))
    return {"rows": rows}


def pretrain_block(run):
    """Pretraining context: model_config.rope_original_len when set (an extended run keeps its
    pretraining L there), else config.block_size."""
    for b in (num(run["model_config"].get("rope_original_len")), num(run["config"].get("block_size"))):
        if b:
            return int(b)
    return None


def parent_run(run, runs):
    """The run an extension came from (lineage.parent: its folder), or None."""
    lin = run.get("lineage")
    parent = lin.get("parent") if isinstance(lin, dict) else None
    if not isinstance(parent, str) or not parent:
        return None
    real = os.path.realpath(parent)
    for r in runs:  # the same folder, else the same folder name (analysed from another working directory)
        if r is not run and os.path.realpath(r.get("_dir", "")) == real:
            return r
    named = [r for r in runs if r is not run and os.path.basename(os.path.normpath(r.get("_dir", ""))) ==
             os.path.basename(os.path.normpath(parent))]
    return named[0] if len(named) == 1 else None


def longctx_report(runs):
    """Text runs with an eval.json score: feature count per run and R^2 (in-sample, LOO) of predictors of
    the score: the count, a linear model on the four 0/1 axes, short-context losses, sink rate. When some
    scored runs are context extensions (lineage), the score is the post-extension one (as in the
    long-context seed): only the extensions are rows, and the parent's own score is one more predictor."""
    lc = [r for r in runs if run_kind(r) != "algo" and num(dget(r, "eval", "score")) is not None]
    if not lc:
        return None
    ext = [r for r in lc if run_kind(r) == "extension"]
    if ext:
        lc = ext
    blocks = [pretrain_block(r) for r in lc]
    contexts = sorted({b for b in blocks if b is not None})
    short = contexts[0] if len(contexts) >= 2 else None  # one context only: no "shorter" point
    rows = []
    for r, block in zip(lc, blocks):
        ax = feature_axes(r["model_config"], block, short)
        parent = parent_run(r, runs) if ext else None
        pm = (parent or {}).get("metrics") or {}
        rows.append({"run": r["run_name"], **ax, "count": sum(ax.values()), "score": num(r["eval"]["score"]),
                     "sink_rate": num(r["eval"].get("sink_rate")),
                     "train_loss": num(r["metrics"].get("train_loss")) if not ext else num(pm.get("train_loss")),
                     "val_loss": num(r["metrics"].get("val_loss")) if not ext else num(pm.get("val_loss")),
                     "pre_score": num(dget(parent, "eval", "score"))})
    y = np.array([w["score"] for w in rows], dtype=float)
    col = lambda k: np.array([np.nan if w[k] is None else w[k] for w in rows], dtype=float)
    axes = np.column_stack([col(k) for k in ("qk_norm", "gqa", "swa", "short_ctx")])
    preds = [("feature count", col("count")), ("four axes (linear)", axes),
             ("train_loss", col("train_loss")), ("val_loss", col("val_loss")),
             ("sink_rate", col("sink_rate"))]
    if ext:
        preds.append(("pre-extension score", col("pre_score")))
    out = []
    for name, X in preds:
        ok = np.all(np.isfinite(X.reshape(len(y), -1)), axis=1)
        out.append({"predictor": name, "n": int(ok.sum()),
                    "r2": r2_in_sample(X[ok], y[ok]) if ok.any() else None,
                    "loo_r2": loo_r2(X[ok], y[ok]) if ok.any() else None})
    return {"contexts": contexts, "short_block": short, "extensions": bool(ext), "runs": rows, "predictors": out}


# model flags that make up an algorithmic run's positional variant (its "encoding"); every other
# flag that varies between the runs of one task splits cells as the "variant"
ENCODING_KEYS = ("pos", "pos_pattern", "swan", "window", "global_every", "layer_pattern", "logn_scale",
                 "chunk_layers", "chunk_size", "chunk_topk", "rope_frac", "hope_cutoff", "expe_dims",
                 "expe_start", "expe_slope")


def encoding(mc):
    """Positional variant of a run from its model_config: 'swan', 'chunk', or the --pos kind (with a
    sliding window or a per-layer pattern appended when set)."""
    if mc.get("swan"):
        return "swan"
    if str(mc.get("chunk_layers") or "").strip():
        return "chunk"
    name = str(mc.get("pos") or "rope")
    if mc.get("pos_pattern"):
        name += f"[{mc['pos_pattern']}]"
    if num(mc.get("window")):
        name += f"+window{int(num(mc['window']))}"
    return name


def seed_stats(per_seed):
    """{seed: value} -> mean, sd (ddof 1; None below 2 seeds), n and the values, over the non-missing ones."""
    v = {s: x for s, x in per_seed.items() if x is not None}
    a = np.array(list(v.values()), dtype=float)
    return {"mean": float(a.mean()) if a.size else None, "sd": float(a.std(ddof=1)) if a.size > 1 else None,
            "n": int(a.size), "per_seed": v}


def paired_acc(a, b):
    """Paired comparison of accuracies over common seeds (a, b: {seed: value}): d = a - b, mean
    difference, paired z (paired_z's statistic; positive: a is higher), seeds where a is higher / lower."""
    seeds = sorted(s for s in set(a) & set(b) if a[s] is not None and b[s] is not None)
    if not seeds:
        return None
    pz = paired_z([a[s] for s in seeds], [b[s] for s in seeds])
    return {"n": pz["n"], "mean_diff": pz["mean_diff"], "z": pz["z"], "wins": pz["wins_b"], "losses": pz["wins_a"]}


def lengen_report(runs, gate=0.9, margin=0.05, reference="rope"):
    """Algorithmic-task runs (train.py --algo), one cell per (task, encoding, variant) over seeds:
    in-distribution exact match (metrics.val_acc), exact match per input-length bin and the score
    (mean exact match past N) from eval.json, each as mean, sd and per seed. The gate: a cell whose
    mean in-distribution exact match is below `gate` has not learned the task; it is listed under
    "excluded" and gets no extrapolation verdict. A learned cell is compared with the `reference`
    encoding's cell of the same task and variant (when that one is learned too), paired over seeds,
    per bin past N and on the score; verdict on the score: "better"/"worse" when every paired seed
    is higher/lower and the mean difference is at least `margin`, else "no clear difference"."""
    algo = [r for r in runs if run_kind(r) == "algo"]
    if not algo:
        return None
    by_task = defaultdict(list)
    for r in algo:
        by_task[str(r["config"]["algo"])].append(r)
    cells, dups = {}, []
    for task in sorted(by_task):
        rs = by_task[task]
        fields = [{k: v for k, v in variant_fields(r["config"]).items()
                   if (k.startswith("model.") and k[6:] not in ENCODING_KEYS)
                   or k in ("algo_len", "algo_offset", "block_size", "iters")} for r in rs]
        varying = sorted({k for f in fields for k in f if len({g.get(k) for g in fields}) > 1})
        for r, f in zip(rs, fields):
            key = (task, encoding({**r["model_config"], **r["config"]["model"]}),
                   ",".join(f"{k}={f.get(k)}" for k in varying))
            seed = r["config"].get("seed")
            c = cells.setdefault(key, {})
            if seed in c:
                dups.append(r["run_name"])
                continue
            c[seed] = r
    if dups:
        warn(f"{len(dups)} algorithmic runs repeat a (task, encoding, variant, seed) already seen and are "
             f"ignored, e.g. {dups[0]}")
    out = {}
    for (task, enc, variant), by_seed in cells.items():
        seeds = sorted(by_seed, key=lambda s: (num(s) is None, num(s) or 0))
        bins, train_len = {}, None
        for s in seeds:
            r = by_seed[s]
            ev = dget(r, "eval", "tasks", task) or {}
            tl = ev.get("train_len") if isinstance(ev, dict) else None
            train_len = train_len or (tl if isinstance(tl, list) and len(tl) == 2 else None)
            by_len = ev.get("by_length") if isinstance(ev, dict) else None
            for b, v in (by_len.items() if isinstance(by_len, dict) else ()):
                if isinstance(v, dict) and num(v.get("exact")) is not None:
                    bins.setdefault(b, {"lo": v.get("lo"), "hi": parse_int(b), "per_seed": {}})["per_seed"][s] = \
                        num(v["exact"])
        if train_len is None:
            try:
                train_len = [int(x) for x in str(by_seed[seeds[0]]["config"].get("algo_len")).split(",")]
            except ValueError:
                train_len = None
        in_dist = seed_stats({s: num(by_seed[s]["metrics"].get("val_acc")) for s in seeds})
        score = seed_stats({s: num(dget(by_seed[s], "eval", "score")) for s in seeds})
        by_length = {}
        for b in sorted(bins, key=parse_int):
            st = seed_stats(bins[b]["per_seed"])
            by_length[b] = {"lo": bins[b]["lo"], "hi": bins[b]["hi"], **st}
        learned = in_dist["mean"] is not None and in_dist["mean"] >= gate
        held = None  # the longest length up to which every bin's mean stays at the gate
        if learned:
            for b in by_length.values():
                if b["mean"] is None or b["mean"] < gate:
                    break
                held = b["hi"]
        out[(task, enc, variant)] = {
            "task": task, "encoding": enc, "variant": variant, "n": len(seeds), "seeds": seeds,
            "train_len": train_len, "in_dist": in_dist, "learned": learned, "by_length": by_length,
            "score": score, "held_to": held, "vs_reference": None, "verdict": None}
    for key, c in out.items():
        task, enc, variant = key
        ref = out.get((task, reference, variant))
        N = c["train_len"][1] if c["train_len"] else None
        if not c["learned"]:
            c["verdict"] = "excluded: not learned in distribution"
        elif enc == reference:
            c["verdict"] = "reference"
        elif ref is None:
            c["verdict"] = f"no {reference} cell to compare with"
        elif not ref["learned"]:
            c["verdict"] = f"no comparison: {reference} not learned in distribution"
        else:
            cmp = {"score": paired_acc(c["score"]["per_seed"], ref["score"]["per_seed"]), "by_length": {}}
            for b, v in c["by_length"].items():
                if N is not None and v["lo"] is not None and v["lo"] > N and b in ref["by_length"]:
                    cmp["by_length"][b] = paired_acc(v["per_seed"], ref["by_length"][b]["per_seed"])
            c["vs_reference"] = cmp
            p = cmp["score"]
            if p is None:
                c["verdict"] = f"no seeds in common with {reference}"
            elif p["wins"] == p["n"] and p["mean_diff"] >= margin:
                c["verdict"] = f"better than {reference}"
            elif p["losses"] == p["n"] and p["mean_diff"] <= -margin:
                c["verdict"] = f"worse than {reference}"
            else:
                c["verdict"] = "no clear difference"
    order = {e: i for i, e in enumerate(("rope", "nope", "alibi", "hope", "expe", "swan", "chunk"))}
    ordered = sorted(out.values(), key=lambda c: (c["task"], c["variant"], order.get(c["encoding"], len(order)),
                                                 c["encoding"]))
    excluded = [{"task": c["task"], "encoding": c["encoding"], "variant": c["variant"], "n": c["n"],
                 "in_dist_mean": c["in_dist"]["mean"]} for c in ordered if not c["learned"]]
    return {"gate": {"metric": "metrics.val_acc", "threshold": gate,
                     "rule": "a cell enters the extrapolation verdict when the mean over seeds of its "
                             "in-distribution exact match is >= threshold"},
            "reference": reference, "margin": margin, "cells": ordered, "excluded": excluded}


POSENC_FLAGS = ("pos", "pos_pattern", "swan", "chunk_layers")  # a text run given one of these is a posenc run


def posenc_report(runs, gate=0.9, margin=0.05, reference="rope"):
    """Positional-variant text runs (a --pos, --pos_pattern, --swan or --chunk_layers flag given;
    train short, evaluate long with evaluate.py), one cell per (training, encoding, training length)
    over seeds; training is "text" or "task_mix:<task_list>" (task-trained runs, for retrieval).
    Per cell: loss and LongPPL by evaluation length (eval.json ppl), retrieval exact match and rank by
    length (eval.json tasks), the score, each as mean/sd/per seed. Retrieval cells are gated like
    lengen's: learned when the mean exact match of every task at the training length is >= `gate`.
    Against the `reference` encoding's cell of the same training and length, paired over seeds at each
    length past training: the loss difference, and for learned retrieval cells the exact-match
    difference with a verdict on the score (as lengen_report)."""
    sel = [r for r in runs if run_kind(r) == "lm" and isinstance(r.get("eval"), dict)
           and any(k in r["config"]["model"] for k in POSENC_FLAGS)]
    if not sel:
        return None
    cells, dups = {}, []
    for r in sel:
        c = r["config"]
        training = f"task_mix:{c.get('task_list')}" if (num(c.get("task_mix")) or 0) > 0 else "text"
        key = (training, encoding({**r["model_config"], **c["model"]}), c.get("block_size"))
        if c.get("seed") in cells.setdefault(key, {}):
            dups.append(r["run_name"])
            continue
        cells[key][c.get("seed")] = r
    if dups:
        warn(f"{len(dups)} posenc runs repeat a (training, encoding, length, seed) already seen and are ignored, "
             f"e.g. {dups[0]}")
    out = {}
    for (training, enc, block), by_seed in cells.items():
        seeds = sorted(by_seed, key=lambda s: (num(s) is None, num(s) or 0))
        ev = {s: by_seed[s]["eval"] for s in seeds}
        lengths = sorted({parse_int(L) for s in seeds for L in (dget(ev[s], "ppl", "by_length") or {})} |
                         {parse_int(L) for s in seeds for t in (ev[s].get("tasks") or {}).values()
                          if isinstance(t, dict) for L in (t.get("by_length") or {})})
        lengths = [L for L in lengths if L != math.inf]
        per_len = lambda get: {str(L): seed_stats({s: num(get(ev[s], str(L))) for s in seeds}) for L in lengths}
        tasks_ = sorted({t for s in seeds for t, v in (ev[s].get("tasks") or {}).items() if isinstance(v, dict)})
        retrieval = {t: {m: per_len(lambda e, L, t=t, m=m: dget(e, "tasks", t, "by_length", L, m))
                         for m in ("exact", "rank")} for t in tasks_}
        train_len = num(block)
        at_train = [retrieval[t]["exact"].get(str(int(train_len)), {}).get("mean") if train_len else None
                    for t in tasks_]
        learned = (all(x is not None and x >= gate for x in at_train) if tasks_ else None)
        out[(training, enc, block)] = {
            "training": training, "encoding": enc, "train_len": int(train_len) if train_len else None,
            "n": len(seeds), "seeds": seeds,
            "val_loss": seed_stats({s: num(by_seed[s]["metrics"].get("val_loss")) for s in seeds}),
            "loss_by_length": per_len(lambda e, L: dget(e, "ppl", "by_length", L)),
            "longppl_by_length": per_len(lambda e, L: dget(e, "ppl", "longppl", "by_length", L, "longppl")),
            "retrieval": retrieval, "learned": learned,
            "score": seed_stats({s: num(ev[s].get("score")) for s in seeds}),
            "score_def": next((ev[s].get("score_def") for s in seeds if isinstance(ev[s].get("score_def"), str)), None),
            "vs_reference": None, "verdict": None}
    for (training, enc, block), c in out.items():
        ref = out.get((training, reference, block))
        if ref is None or enc == reference:
            c["verdict"] = "reference" if enc == reference else f"no {reference} cell to compare with"
            continue
        past = [L for L in c["loss_by_length"] if c["train_len"] and parse_int(L) > c["train_len"]]
        cmp = {"loss": {L: paired_acc(c["loss_by_length"][L]["per_seed"], ref["loss_by_length"][L]["per_seed"])
                        for L in past if L in ref["loss_by_length"]}, "exact": {}, "score": None}
        if c["learned"] is False:
            c["verdict"] = "excluded: retrieval not learned in distribution"
        elif c["learned"] and not ref["learned"]:
            c["verdict"] = f"no comparison: {reference} retrieval not learned in distribution"
        elif c["learned"]:
            for t in c["retrieval"]:
                for L, st in c["retrieval"][t]["exact"].items():
                    if parse_int(L) > c["train_len"] and L in ref["retrieval"].get(t, {}).get("exact", {}):
                        cmp["exact"][f"{t}@{L}"] = paired_acc(st["per_seed"], ref["retrieval"][t]["exact"][L]["per_seed"])
            p = cmp["score"] = paired_acc(c["score"]["per_seed"], ref["score"]["per_seed"])
            c["verdict"] = ("no seeds in common" if p is None else f"better than {reference}"
                            if p["wins"] == p["n"] and p["mean_diff"] >= margin else f"worse than {reference}"
                            if p["losses"] == p["n"] and p["mean_diff"] <= -margin else "no clear difference")
        c["vs_reference"] = cmp
    order = {e: i for i, e in enumerate(("rope", "nope", "alibi", "hope", "expe", "swan", "chunk"))}
    ordered = sorted(out.values(), key=lambda c: (c["training"], c["train_len"] or 0,
                                                 order.get(c["encoding"], len(order)), c["encoding"]))
    return {"gate": {"metric": "retrieval exact match at the training length", "threshold": gate},
            "reference": reference, "margin": margin, "cells": ordered,
            "excluded": [{"training": c["training"], "encoding": c["encoding"], "n": c["n"]}
                         for c in ordered if c["learned"] is False]}


def dget(d, *keys):
    """d[k1][k2]... or None when a level is missing or not a dict (eval.json is another program's output)."""
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def parse_int(s):
    try:
        return int(s)
    except (TypeError, ValueError):
        return math.inf

# -----------------------------------------------------------------------------
# markdown


def f(x, spec=".4g"):
    """A number for a table: '-' when missing or NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec) if isinstance(x, float) else str(x)


def table(head, rows):
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def vtag(variant):
    return f"[{variant}] " if variant else ""


def cell_name(c):
    return vtag(c["variant"]) + f"bits={c['bits']} size={c['size']} lr={f(c['lr'])}"


def qat_md(q):
    L = ["## 1. QAT schedule grid", "",
         "Deployed metrics.val_loss, mean ± sd over seeds. z: paired z of (warmdown - best) across matched"
         " seeds (positive: the best warmdown has the lower loss); best wins: seeds where the best is lower.", ""]
    for c in q["cells"]:
        L += [f"**{cell_name(c)}**: best warmdown {f(c['best_warmdown'])}", ""]
        L += table(["warmdown", "n", "val_loss", "Δ vs best", "z", "best wins"],
                   [[f(r["warmdown"]), str(r["n"]), f"{r['mean']:.4f} ± {f(r['sd'], '.2g')}",
                     f"{r['delta']:+.4f}", f(r["z"], "+.2f"),
                     "-" if r["z"] is None else f"{r['best_wins']}/{r['n_paired']}"]
                    for r in c["rows"]]) + [""]
    if q["consistency"]:
        L += ["Best warmdown across bit-widths:"]
        for g in q["consistency"]:
            name = vtag(g["variant"]) + f"size={g['size']} lr={f(g['lr'])}"
            bb = ", ".join(f"{b}: {f(w)}" for b, w in sorted(g["best_by_bits"].items(), reverse=True))
            L += [f"- {name}: " + (f"same best warmdown {f(next(iter(g['best_by_bits'].values())))} at all "
                                   f"bit-widths ({bb})" if g["same"] else f"best warmdown differs ({bb})")]
        L += [""]
    return L


def penalty_md(p):
    L = ["## 2. Quantisation penalty P_b(N) = L_b(N) - L_16(N)", "",
         "Matched on (size, lr, warmdown, seed), mean over the matched pairs; N = params.non_embedding.", ""]
    for g in p["groups"]:
        L += [f"**{vtag(g['variant'])}bits={g['bits']}**", ""]
        L += table(["size", "N", "P mean", "sd", "pairs", "role", f"{p['level']:.0%} PI", "inside"],
                   [[r["size"], f(r["N"], ".3g"), f"{r['penalty']:+.4f}", f(r["sd"], ".2g"), str(r["n"]),
                     r["role"],
                     f"[{r['lo']:+.4f}, {r['hi']:+.4f}]" if "lo" in r else "-",
                     ("yes" if r["inside"] else "NO") if "inside" in r else "-"] for r in g["rows"]]) + [""]
        if g["fit"]:
            ft = g["fit"]
            L += [f"Fit P = alpha + beta ln N on {ft['n']} sizes: alpha={ft['alpha']:.4g}, beta={ft['beta']:.4g},"
                  f" s={ft['s']:.3g}, R^2={f(ft['r2'], '.3f')}."]
            L += [f"Held-out coverage: {g['coverage'][0]}/{g['coverage'][1]} inside the {p['level']:.0%} PI."
                  if g["coverage"] else "No held-out sizes (all sizes fit)."]
        else:
            L += [g["message"] + "."]
        L += [""]
    return L


def grid_md(g):
    L = ["## 3. Weight-to-grid distance", "",
         "Mean |w/s - round(w/s)| on the grid_bits grid (0.25 = uniform, 0 = snapped); ratio = QAT / FP16"
         " over matched seeds.", ""]
    return L + table(["grid_bits", "entry", "size", "lr", "warmdown", "bits", "d", "d FP16", "ratio", "seeds"],
                     [[str(r["grid_bits"]), vtag(r["variant"]) + r["key"], r["size"],
                       f(r["lr"]), f(r["warmdown"]), str(r["bits"]), f(r["d_qat"]), f(r["d_fp16"]),
                       f(r["ratio"]), str(r["n"])] for r in g["rows"]]) + [""]


def longctx_md(lc):
    what = "post-extension score of the context extensions (lineage); losses and pre-extension score of their " \
           "parent runs" if lc.get("extensions") else "score of each run"
    L = ["## 4. Long-context score vs inhibiting features (arXiv 2608.10296)", "",
         f"Contexts {lc['contexts']}; short context = {lc['short_block'] or 'n/a (need two contexts)'}; {what}.", ""]
    pre = lc.get("extensions")
    L += table(["run", "qk_norm", "gqa", "swa", "short_ctx", "count", "score", "sink_rate", "train_loss"]
               + (["pre-ext score"] if pre else []),
               [[w["run"], *(str(w[k]) for k in ("qk_norm", "gqa", "swa", "short_ctx", "count")),
                 f(w["score"]), f(w["sink_rate"]), f(w["train_loss"])] + ([f(w["pre_score"])] if pre else [])
                for w in lc["runs"]]) + [""]
    L += table(["predictor of score", "n", "R^2", "LOO R^2"],
               [[p["predictor"], str(p["n"]), f(p["r2"], ".3f"), f(p["loo_r2"], ".3f")] for p in lc["predictors"]])
    return L + [""]


def pm(st, spec=".3f"):
    """'mean ± sd' of a seed_stats dict ('-' when missing)."""
    if not st or st.get("mean") is None:
        return "-"
    return f(st["mean"], spec) + (f" ± {f(st['sd'], '.2f')}" if st.get("sd") is not None else "")


def lengen_md(lg):
    ref, gate = lg["reference"], lg["gate"]["threshold"]
    L = ["## 5. Length generalisation on algorithmic tasks", "",
         f"Exact match, mean ± sd over seeds: in distribution (metrics.val_acc, input lengths 1..N) and per "
         f"input-length bin (evaluate.py). Gate: a cell is learned when its mean in-distribution exact match is "
         f">= {f(gate)}; a cell that is not is excluded from the verdict. held to: the longest length up to which "
         f"every bin's mean stays >= {f(gate)}. Δ {ref}: the score (mean exact match past N) minus {ref}'s, paired "
         f"over seeds, with paired z and the seeds where it is higher/lower; verdict: better/worse when every "
         f"seed is and |Δ| >= {f(lg['margin'])}.", ""]
    for task in dict.fromkeys(c["task"] for c in lg["cells"]):
        cs = [c for c in lg["cells"] if c["task"] == task]
        bins = sorted({b for c in cs for b in c["by_length"]}, key=parse_int)
        span = {b: next((f"{c['by_length'][b]['lo']}-{b}" for c in cs if b in c["by_length"]), b) for b in bins}
        tl = next((c["train_len"] for c in cs if c["train_len"]), None)
        L += [f"**{task}**" + (f" (trained on input lengths {tl[0]}-{tl[1]})" if tl else ""), ""]
        rows = []
        for c in cs:
            p = (c["vs_reference"] or {}).get("score")
            rows.append([c["encoding"] + (f" [{c['variant']}]" if c["variant"] else ""), str(c["n"]),
                         pm(c["in_dist"]), "yes" if c["learned"] else "**no**"]
                        + [pm(c["by_length"].get(b)) for b in bins]
                        + [pm(c["score"]), f(c["held_to"]),
                           f"{p['mean_diff']:+.3f} (z {f(p['z'], '+.1f')}, {p['wins']}/{p['losses']})" if p else "-",
                           c["verdict"]])
        L += table(["encoding", "seeds", "in-dist", "learned"] + [span[b] for b in bins]
                   + ["score", "held to", f"Δ {ref} (z, higher/lower)", "verdict"], rows) + [""]
    ex = lg["excluded"]
    L += [f"Excluded by the gate ({len(ex)} cells): " + (", ".join(
        f"{x['task']}/{x['encoding']}{' [' + x['variant'] + ']' if x['variant'] else ''} "
        f"({f(x['in_dist_mean'], '.3f')})" for x in ex) if ex else "none") + ".", ""]
    return L


def posenc_md(pe):
    ref = pe["reference"]
    L = ["## 6. Positional encodings: train short, evaluate long", "",
         "Mean ± sd over seeds (evaluate.py). Loss: nats/token on the held-out plays in windows of L tokens; "
         f"Δ loss {ref}: mean over the lengths past training of the paired difference from {ref}'s (negative: "
         f"lower loss). Retrieval: exact match of the answer (rank among 5 in brackets); learned: mean exact "
         f"match at the training length >= {f(pe['gate']['threshold'])}; Δ {ref}: the score (mean exact match "
         f"past training) minus {ref}'s, paired over seeds (z, seeds higher/lower).", ""]
    for training in dict.fromkeys(c["training"] for c in pe["cells"]):
        cs = [c for c in pe["cells"] if c["training"] == training]
        lens = sorted({L for c in cs for L in c["loss_by_length"] if c["loss_by_length"][L]["mean"] is not None},
                      key=parse_int)
        if lens:
            L += [f"**{training}-trained: loss by length**", ""]
            rows = []
            for c in cs:
                d = [v["mean_diff"] for v in ((c["vs_reference"] or {}).get("loss") or {}).values() if v]
                rows.append([c["encoding"], str(c["n"]), f(c["train_len"])] + [pm(c["loss_by_length"].get(L))
                                                                            for L in lens]
                            + [pm(c["longppl_by_length"].get(lens[-1]), ".2f"),
                               f"{np.mean(d):+.3f}" if d else "-"])
            L += table(["encoding", "seeds", "train len"] + [f"loss@{x}" for x in lens]
                       + [f"LongPPL@{lens[-1]}", f"Δ loss {ref}"], rows) + [""]
        for t in sorted({t for c in cs for t in c["retrieval"]}):
            tl = sorted({L for c in cs for L in c["retrieval"].get(t, {}).get("exact", {})}, key=parse_int)
            L += [f"**{training}-trained: {t} retrieval**", ""]
            rows = []
            for c in cs:
                r = c["retrieval"].get(t, {})
                p = (c["vs_reference"] or {}).get("score")
                rows.append([c["encoding"], str(c["n"])]
                            + [pm(r.get("exact", {}).get(L)) + f" ({f((r.get('rank', {}).get(L) or {}).get('mean'), '.2f')})"
                               for L in tl]
                            + ["-" if c["learned"] is None else "yes" if c["learned"] else "**no**", pm(c["score"]),
                               f"{p['mean_diff']:+.3f} (z {f(p['z'], '+.1f')}, {p['wins']}/{p['losses']})" if p else "-",
                               c["verdict"]])
            L += table(["encoding", "seeds"] + [f"@{x}" for x in tl] + ["learned", "score", f"Δ {ref}", "verdict"],
                       rows) + [""]
    if pe["excluded"]:
        L += ["Retrieval cells excluded by the gate: " + ", ".join(f"{x['training']}/{x['encoding']}"
                                                                for x in pe["excluded"]) + ".", ""]
    return L


# -----------------------------------------------------------------------------
# plots (matplotlib Agg; a failed plot is a warning, never a crash)


def plot_all(rep, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, name), dpi=120)
        plt.close(fig)
        written.append(name)
    q = rep.get("qat")
    if q and q["cells"]:
        sizes = list(dict.fromkeys(c["size"] for c in q["cells"]))
        fig, axs = plt.subplots(1, len(sizes), figsize=(4 * len(sizes), 3.5), squeeze=False)
        for ax, s in zip(axs[0], sizes):
            for c in (c for c in q["cells"] if c["size"] == s):
                ax.errorbar([r["warmdown"] for r in c["rows"]], [r["mean"] for r in c["rows"]],
                            yerr=[r["sd"] or 0 for r in c["rows"]], marker="o", capsize=2,
                            label=cell_name(c).replace(f" size={s}", ""))
            ax.set(title=f"size {s}", xlabel="warmdown fraction", ylabel="val_loss")
            ax.legend(fontsize=6)
        save(fig, "qat_warmdown.png")
    p = rep.get("penalty")
    if p and p["groups"]:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for i, g in enumerate(p["groups"]):
            c, rows = f"C{i % 10}", [r for r in g["rows"] if r["N"] is not None]
            for role, mfc in (("fit", c), ("held-out", "none")):  # held-out sizes drawn open
                pts = [r for r in rows if r["role"] == role]
                ax.plot([r["N"] for r in pts], [r["penalty"] for r in pts], "o", color=c, mfc=mfc,
                        label=vtag(g["variant"]) + f"INT{g['bits']}" if role == "fit" else None)
            if g["fit"] and rows:
                xs = np.geomspace(min(r["N"] for r in rows), max(r["N"] for r in rows), 100)
                yh, lo, hi = predict_interval(g["fit"], xs, p["level"])
                ax.plot(xs, yh, color=c)
                ax.fill_between(xs, lo, hi, color=c, alpha=0.15)
        ax.set(xscale="log", xlabel="non-embedding params N", ylabel="penalty L_b - L_16",
               title="penalty vs size (open: held out)")
        ax.legend(fontsize=7)
        save(fig, "penalty_vs_size.png")
    lg = rep.get("lengen")
    if lg and lg["cells"]:
        tasks_ = list(dict.fromkeys(c["task"] for c in lg["cells"]))
        fig, axs = plt.subplots(1, len(tasks_), figsize=(4 * len(tasks_), 3.5), squeeze=False)
        colour = {}
        for ax, task in zip(axs[0], tasks_):
            for c in (c for c in lg["cells"] if c["task"] == task):
                bs = [b for b in c["by_length"].values() if b["mean"] is not None]
                if not bs:
                    continue
                x = [(b["lo"] + b["hi"]) / 2 if b["lo"] is not None else b["hi"] for b in bs]
                m = np.array([b["mean"] for b in bs])
                sd = np.array([b["sd"] or 0.0 for b in bs])
                col = colour.setdefault(c["encoding"], f"C{len(colour) % 10}")  # one colour per encoding
                name = c["encoding"] + (f" [{c['variant']}]" if c["variant"] else "")
                ax.plot(x, m, "o-" if c["learned"] else "x--", color=col,
                        label=name + ("" if c["learned"] else " (not learned)"))
                ax.fill_between(x, np.clip(m - sd, 0, 1), np.clip(m + sd, 0, 1), color=col, alpha=0.15)
            tl = next((c["train_len"] for c in lg["cells"] if c["task"] == task and c["train_len"]), None)
            if tl:
                ax.axvline(tl[1] + 0.5, color="grey", ls=":", lw=1)
            ax.set(title=task, xlabel="input length (bin centre)", ylabel="exact match", ylim=(-0.03, 1.03))
            ax.legend(fontsize=6)
        save(fig, "lengen_accuracy.png")
    pe = rep.get("posenc")
    if pe and pe["cells"]:
        panels = []  # (title, ylabel, [(cell, {length: stats})])
        for training in dict.fromkeys(c["training"] for c in pe["cells"]):
            cs = [c for c in pe["cells"] if c["training"] == training]
            if any(v["mean"] is not None for c in cs for v in c["loss_by_length"].values()):
                panels.append((f"{training}: loss", "loss (nats/token)", [(c, c["loss_by_length"]) for c in cs]))
            for t in sorted({t for c in cs for t in c["retrieval"]}):
                panels.append((f"{training}: {t}", "exact match", [(c, c["retrieval"][t]["exact"])
                                                                   for c in cs if t in c["retrieval"]]))
        fig, axs = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.5), squeeze=False)
        colour = {}
        for ax, (title, ylabel, series) in zip(axs[0], panels):
            for c, by_len in series:
                pts = [(parse_int(L), v) for L, v in by_len.items() if v["mean"] is not None]
                if not pts:
                    continue
                pts.sort(key=lambda t: t[0])
                x, m = [p[0] for p in pts], np.array([p[1]["mean"] for p in pts])
                sd = np.array([p[1]["sd"] or 0.0 for p in pts])
                col = colour.setdefault(c["encoding"], f"C{len(colour) % 10}")
                ax.plot(x, m, "o-" if c["learned"] is not False else "x--", color=col,
                        label=c["encoding"] + (" (not learned)" if c["learned"] is False else ""))
                ax.fill_between(x, m - sd, m + sd, color=col, alpha=0.15)
            tl = next((c["train_len"] for c, _ in series if c["train_len"]), None)
            if tl:
                ax.axvline(tl, color="grey", ls=":", lw=1)
            ax.set(title=title, xlabel="evaluation length (tokens)", ylabel=ylabel, xscale="log")
            ax.legend(fontsize=6)
        save(fig, "posenc_length.png")
    lc = rep.get("longctx")
    if lc:
        fig, ax = plt.subplots(figsize=(4.5, 3.5))
        ax.plot([w["count"] for w in lc["runs"]], [w["score"] for w in lc["runs"]], "o")
        ax.set(xlabel="inhibiting-feature count", ylabel="long-context score", title="score vs feature count")
        save(fig, "longctx_score_vs_count.png")
    return written

# -----------------------------------------------------------------------------


def jsonable(x):
    """NaN/inf -> null, numpy scalars -> Python, tuples -> lists: strict JSON."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    return None if isinstance(x, float) and not math.isfinite(x) else x


def main(argv=None):
    ap = argparse.ArgumentParser(description="Statistics and reports over result.json / eval.json files.")
    ap.add_argument("folders", nargs="+", help="folders searched recursively for result.json")
    ap.add_argument("--out", default=None, help="output folder (default: the first folder)")
    ap.add_argument("--fit_sizes", default=None,
                    help="comma list of size names for the penalty fit; the rest are held out "
                         "(default: all but the two extreme sizes if >= 5 sizes, else all)")
    ap.add_argument("--level", type=float, default=0.95, help="prediction-interval level")
    ap.add_argument("--lengen_gate", type=float, default=0.9,
                    help="algorithmic runs: a (task, encoding) cell enters the extrapolation verdict only when its "
                         "mean in-distribution exact match over seeds is >= this")
    ap.add_argument("--lengen_margin", type=float, default=0.05,
                    help="algorithmic runs: smallest mean gain (or loss) of exact match past N against RoPE "
                         "that counts as better (worse), with every paired seed agreeing")
    ap.add_argument("--no_plots", action="store_true", help="skip the PNG plots")
    args = ap.parse_args(argv)
    missing = [d for d in args.folders if not os.path.isdir(d)]
    if missing:
        warn(f"no such folder: {', '.join(missing)}")
        return 2
    runs = load_runs(args.folders)
    if not runs:
        warn(f"nothing to analyse: no readable result.json under {', '.join(args.folders)}")
        return 2
    recs, skipped = records(runs)
    order = size_order(recs)
    fit_sizes = [s.strip() for s in args.fit_sizes.split(",") if s.strip()] if args.fit_sizes else None
    other = [f"{n} {what}" for n, what in ((skipped["algo"], "algorithmic-task runs (config.algo)"),
                                           (skipped["extension"], "context extensions (lineage)")) if n]
    lines = [f"# Analysis of {len(runs)} runs", "", f"Folders: {', '.join(args.folders)}. "
             f"{skipped['missing']} runs lack one of config.bits/size/lr/warmdown/seed or metrics.val_loss and are "
             f"not in the QAT tables" + (f"; neither are {' and '.join(other)}." if other else "."), ""]
    rep = {"n_runs": len(runs), "n_skipped_qat": skipped["missing"], "n_algo": skipped["algo"],
           "n_extension": skipped["extension"]}
    unknown = set(fit_sizes or []) - set(order)
    if unknown:
        warn(f"--fit_sizes names sizes not in the runs: {', '.join(sorted(unknown))}")
    sections = [("qat", lambda: qat_report(recs, order), lambda r: r["cells"], qat_md),
                ("penalty", lambda: penalty_report(recs, order, fit_sizes, args.level),
                 lambda r: r["groups"], penalty_md),
                ("grid_distance", lambda: grid_report(recs), lambda r: r["rows"], grid_md),
                ("longctx", lambda: longctx_report(runs), lambda r: r, longctx_md),
                ("lengen", lambda: lengen_report(runs, args.lengen_gate, args.lengen_margin), lambda r: r["cells"],
                 lengen_md),
                ("posenc", lambda: posenc_report(runs, args.lengen_gate, args.lengen_margin), lambda r: r["cells"],
                 posenc_md)]
    for name, compute, has_data, render in sections:
        try:  # one broken section must not take the others down
            r = compute()
            rep[name] = r
            if r is not None and has_data(r):
                lines += render(r)
            else:
                lines += [f"_{name}: no data._", ""]
        except Exception as e:
            warn(f"{name} section skipped: {type(e).__name__}: {e}")
            lines += [f"_{name}: skipped ({type(e).__name__}: {e})._", ""]
    out = args.out or args.folders[0]
    try:
        os.makedirs(out, exist_ok=True)
        if not args.no_plots:
            try:
                rep["plots"] = plot_all(rep, out)
            except Exception as e:
                warn(f"plots skipped: {type(e).__name__}: {e}")
        md = "\n".join(lines) + "\n"
        with open(os.path.join(out, "analysis.md"), "w") as fh:
            fh.write(md)
        with open(os.path.join(out, "analysis.json"), "w") as fh:
            json.dump(jsonable(rep), fh, indent=1)
    except OSError as e:
        warn(f"cannot write to {out}: {e}")
        return 1
    print(md, end="")
    print(f"wrote {os.path.join(out, 'analysis.md')} and analysis.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
