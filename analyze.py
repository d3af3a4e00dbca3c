"""
Statistics and reports for the studies of this project, one block per study.

    python analyze.py out/sweeps/qat out/sweeps/qat-probes --study qat --fit_sizes 14K,25K,39K --out DIR

Reads every result.json (and the eval.json / grid.json next to it, if any) under the folders and
writes analysis.md, analysis.json and PNG plots to --out (default: the first folder).

The statistics are pure functions in stats.py. This file reads top to bottom: the run loading, the
markdown and plot helpers, then one block per study, each with its report (a JSON-able dict), its markdown and
its plots side by side, and at the end the registry of studies (STUDIES) and the command line:
  qat      (sweep.sh qat and qat-probes) best warmdown per (bits, size[, lr]) with paired z over seeds,
           the quantisation penalty law P_b(N) with prediction intervals at held-out sizes, and the
           weight-to-grid distance
  longctx  inhibiting-feature count -> extension outcome on a factorial grid (arXiv 2608.10296)
  lengen   exact match by input length per (task, encoding) over seeds, gated in distribution
  posenc   loss, LongPPL and retrieval by evaluation length per positional encoding
--study NAME[,NAME] analyses those studies (sweep.sh --post passes its own, so every run read
belongs to it); without it, each run goes to one study by its record (study_of) and every study
with runs is analysed, so no section sees another study's runs. A new study costs one block here,
one line in STUDIES and one grid_ function in sweep.sh.
Seeds: the QAT LR-schedule study (720-run grid, "QAT seed" below; it has no arXiv id) and "Cracks
in the Foundation" (arXiv 2608.10296, "long-context seed"). Every field is optional: a missing one
shrinks a table, it never crashes the script.
"""
import json
import math
import os
import sys
from collections import defaultdict

import numpy as np

from cli import OneLineParser, UserError, atomic_write, clean, finite_float
from stats import (BETTER_LEVEL, MIN_SEEDS, binomial_half_width, distinguishable, factorial_design, interaction_f,
                   lack_of_fit_f, loglinear_fit, loglinear_nd_fit, loo_r2, nested_f, ols, paired_acc, paired_z,
                   pearson, predict_interval, predict_nd, remove_one, samples_for_ci, sd1, seed_noise_check,
                   seed_stats, spearman, t_half_width)

# =============================================================================
# loading runs


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


# config keys that split runs into separate studies (probes: AdamW, cosine, longer training, late QAT,
# clip rule) so that the QAT tables never average across them. A key splits only where it varies
# within one size. The training length is compared as "budget": a run's tokens over the most common
# token count of its size (x1 for the grid, x3 / x9 for the longer-training probe), because token
# budgets scale with model size by design and must not split the sizes of one law apart.
# These come first in a variant's name; every other config key (and model flag, as model.<flag>)
# that varies within one size splits too, except the grid's own axes and bookkeeping below.
VARIANT_KEYS = ("optimizer", "schedule", "budget", "block_size", "clip", "qat_start")
AXIS_KEYS = ("bits", "lr", "warmdown", "seed", "size", "n_layer", "n_embd", "n_head", "iters", "tokens")
BOOKKEEPING_KEYS = ("out_dir", "quiet", "resume", "overwrite", "device", "compile", "dist_timeout", "cache_dir",
                    "eval_interval",
                    "eval_tokens", "save_at", "ckpt_every", "model", "ptq_bits", "init_from", "data",
                    "final_eval_tokens", "eval_batch_tokens")


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


def parent_run(run, runs):
    """The run an extension came from (lineage.parent: its folder), or None."""
    lin = run.get("lineage")
    parent = lin.get("parent") if isinstance(lin, dict) else None
    if not isinstance(parent, str) or not parent:
        return None
    real = os.path.realpath(parent)
    for r in runs:  # the same folder, else the same folder name (analysed from another working directory)
        if "_real" not in r:  # resolved once per run: lineage chains look parents up many times
            r["_real"] = os.path.realpath(r.get("_dir", ""))
        if r is not run and r["_real"] == real:
            return r
    named = [r for r in runs if r is not run and os.path.basename(os.path.normpath(r.get("_dir", ""))) ==
             os.path.basename(os.path.normpath(parent))]
    return named[0] if len(named) == 1 else None


def lineage_root(run, runs):
    """(the pretraining run an extension descends from, the checkpoint of it that was extended)."""
    r, ckpt, seen = run, "final", set()
    while r is not None and run_kind(r) == "extension" and id(r) not in seen:
        seen.add(id(r))
        ckpt = str(dget(r, "lineage", "parent_ckpt") or "final")
        r = parent_run(r, runs)
    return r, ckpt


def pretrain_block(run):
    """Pretraining context: model_config.rope_original_len when set (an extended run keeps its
    pretraining L there), else config.block_size."""
    for b in (num(run["model_config"].get("rope_original_len")), num(run["config"].get("block_size"))):
        if b:
            return int(b)
    return None

# =============================================================================
# markdown and plot helpers


def f(x, spec=".4g"):
    """A number for a table: '-' when missing or NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec) if isinstance(x, float) else str(x)


def table(head, rows):
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def vtag(variant):
    return f"[{variant}] " if variant else ""


def ci(x, lo, hi, spec="+.3f"):
    return f"{f(x, spec)} [{f(lo, spec)}, {f(hi, spec)}]"


def pm(st, spec=".3f"):
    """'mean ± sd' of a seed_stats dict ('-' when missing)."""
    if not st or st.get("mean") is None:
        return "-"
    return f(st["mean"], spec) + (f" ± {f(st['sd'], '.2f')}" if st.get("sd") is not None else "")


def paired_cell(p):
    """A paired comparison (paired_acc) as 'Δ (z, seeds higher/lower)' for a table; '-' when missing."""
    return f"{p['mean_diff']:+.3f} (z {f(p['z'], '+.1f')}, {p['wins']}/{p['losses']})" if p else "-"


def figures(n, width, height=3.5):
    """A row of n panels (matplotlib Agg, imported only when a plot is drawn)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt.subplots(1, n, figsize=(width * n, height), squeeze=False)

# =============================================================================
# study: qat (sweep.sh qat and qat-probes) -- the QAT schedule grid, the penalty law, the grid distance


def records(runs):
    """One record per run of the QAT grid: variant, bits, size, lr, warmdown, seed, loss (the deployed
    metrics.val_loss), N (params.non_embedding) and grid_distance. Algorithmic-task runs and context
    extensions are not part of it, nor runs with nothing to compare: a (variant, size) with one
    bit-width and one warmdown (the pretraining runs of a long-context or positional sweep). Returns
    (records, {"missing": runs lacking a grid field, "algo": algorithmic runs, "extension": extended
    runs, "single": runs with nothing to compare})."""
    grid, skipped = [], {"missing": 0, "algo": 0, "extension": 0, "single": 0}
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
    budget = budgets(r for r, _ in grid)
    fields_of = lambda r: dict(variant_fields(r["config"]), budget=budget[id(r)])
    by_size = defaultdict(list)
    for r, _ in grid:
        by_size[size_label(r["config"])].append(fields_of(r))
    keys = sorted({k for fs in by_size.values() for f in fs for k in f},
                  key=lambda k: (VARIANT_KEYS.index(k) if k in VARIANT_KEYS else len(VARIANT_KEYS), k))
    varying = [k for k in keys if any(len({f.get(k) for f in fs}) > 1 for fs in by_size.values())]
    recs, seen, dups = [], set(), []
    for r, (bits, lr, wd, seed, loss) in grid:
        fields = fields_of(r)
        variant = ",".join(f"{k}={fields.get(k)}" for k in varying)
        key = (variant, int(bits), size_label(r["config"]), lr, round(wd, 6), int(seed))
        if key in seen:
            dups.append(r["run_name"])
            continue
        seen.add(key)
        n = num(r["params"].get("non_embedding"))
        recs.append(dict(zip(("variant", "bits", "size", "lr", "warmdown", "seed"), key), loss=loss,
                         N=n if n and n > 0 else None, D=num(r.get("tokens")), gd=r.get("grid_distance")))
    if dups:
        warn(f"{len(dups)} runs repeat a (bits, size, lr, warmdown, seed) already seen and are ignored, "
             f"e.g. {dups[0]}")
    axes = defaultdict(set)
    for x in recs:
        axes[(x["variant"], x["size"])].add((x["bits"], x["warmdown"]))
    single = {g for g, a in axes.items() if len({b for b, _ in a}) < 2 and len({w for _, w in a}) < 2}
    skipped["single"] = sum((x["variant"], x["size"]) in single for x in recs)
    return [x for x in recs if (x["variant"], x["size"]) not in single], skipped


def budgets(runs):
    """{id(run): 'x<k>'}: a run's trained tokens over the most common token count among the runs of
    its size (ties: the smallest), so the grid is x1 at every size and the longer-training probe x3, x9."""
    runs = list(runs)
    toks = {id(r): num(r.get("tokens")) for r in runs}
    by_size = defaultdict(list)
    for r in runs:
        if toks[id(r)]:
            by_size[size_label(r["config"])].append(toks[id(r)])
    ref = {s: min(set(v), key=lambda t: (-v.count(t), t)) for s, v in by_size.items()}
    return {id(r): f"x{toks[id(r)] / ref[size_label(r['config'])]:.3g}" if toks[id(r)] else "x?" for r in runs}


def size_order(recs):
    """size name -> sort key: mean N when known, else the number in the name."""
    ns = defaultdict(list)
    for x in recs:
        ns[x["size"]].append(x["N"] if x["N"] is not None else parse_size(x["size"]))
    return {s: (float(np.mean(v)), s) for s, v in ns.items()}


def warmdown_rows(by_wd):
    """{warmdown: {seed: loss}} -> (best warmdown, one row per warmdown: mean, sd, n, and the paired
    z and wins of the best against it over matched seeds)."""
    means = {w: float(np.mean(list(v.values()))) for w, v in by_wd.items()}
    best = min(means, key=means.get)
    rows = []
    for w in sorted(by_wd):
        v = np.array(list(by_wd[w].values()))
        seeds = sorted(set(by_wd[w]) & set(by_wd[best]))
        pz = paired_z([by_wd[w][s] for s in seeds], [by_wd[best][s] for s in seeds])
        rows.append({"warmdown": w, "n": len(v), "mean": means[w], "sd": sd1(v),
                     "delta": means[w] - means[best], "z": None if w == best else pz["z"],
                     "best_wins": pz["wins_b"], "n_paired": pz["n"]})
    return best, rows


def qat_report(recs, order):
    """cells: per (variant, bits, size, lr), the loss by warmdown (mean, sd over seeds), the best
    warmdown and the paired z of the best against each other warmdown, matched on seed.
    verdict: per (variant, bits, size), each warmdown at its own best LR (the LR a practitioner would
    tune for that schedule), the best warmdown, and whether it is FP16's best at that size. A variant
    with one warmdown only (the cosine probe) has no verdict: it is descriptive."""
    cells = defaultdict(lambda: defaultdict(dict))  # (variant, bits, size, lr) -> warmdown -> seed -> loss
    for x in recs:
        cells[(x["variant"], x["bits"], x["size"], x["lr"])][x["warmdown"]][x["seed"]] = x["loss"]
    out = []
    for cell in sorted(cells, key=lambda c: (c[0], order[c[2]], c[3], -c[1])):
        best, rows = warmdown_rows(cells[cell])
        out.append(dict(zip(("variant", "bits", "size", "lr"), cell), best_warmdown=best, warmdowns=rows))
    lrs = defaultdict(dict)  # (variant, bits, size) -> lr -> warmdown -> seed -> loss
    for (v, b, s, lr), by_wd in cells.items():
        lrs[(v, b, s)][lr] = by_wd
    verdict, at_best = [], {}
    for key in sorted(lrs, key=lambda k: (k[0], order[k[2]], -k[1])):
        by_lr = lrs[key]
        wds = sorted({w for by_wd in by_lr.values() for w in by_wd})
        if len(wds) < 2:
            continue
        best_lr = {w: min((lr for lr in by_lr if w in by_lr[lr]),
                          key=lambda lr: np.mean(list(by_lr[lr][w].values()))) for w in wds}
        best, rows = warmdown_rows({w: by_lr[best_lr[w]][w] for w in wds})
        for r in rows:
            r["lr"] = best_lr[r["warmdown"]]
        verdict.append(dict(zip(("variant", "bits", "size"), key), best_warmdown=best, best_lr=best_lr[best],
                            lrs=sorted(by_lr), warmdowns=rows))
        at_best[key] = {w: by_lr[best_lr[w]][w] for w in wds}
    fp16 = {(c["variant"], c["size"]): c["best_warmdown"] for c in verdict if c["bits"] == 16}
    for c in verdict:
        c["fp16_best_warmdown"] = fp16.get((c["variant"], c["size"]))
        c["same_as_fp16"] = None if c["fp16_best_warmdown"] is None else c["best_warmdown"] == c["fp16_best_warmdown"]
    return {"cells": out, "verdict": verdict, "interaction": interaction_rows(at_best, order), "int4_transition": int4_transition(at_best, order),
            "lr_rule": "verdict: each warmdown at its own best LR (mean over seeds), then the best warmdown"}


def interaction_rows(at_best, order):
    """Per (variant, size, bits b < 16): the two-way bit-width x warmdown ANOVA of FP16 and INT-b, each
    warmdown at its own best LR, over the seeds every one of those cells has (seed as a block): the
    interaction F tests whether the warmdown effect differs between the bit-widths (the QAT seed's
    null: it does not). at_best: (variant, bits, size) -> warmdown -> seed -> loss."""
    rows = []
    for (v, b, s) in sorted(at_best, key=lambda k: (k[0], order[k[2]], -k[1])):
        fp = at_best.get((v, 16, s))
        if b == 16 or fp is None:
            continue
        wds = sorted(set(fp) & set(at_best[(v, b, s)]))
        groups = [fp, at_best[(v, b, s)]]
        seeds = sorted(set.intersection(*(set(g[w]) for g in groups for w in wds))) if wds else []
        if len(wds) < 2 or len(seeds) < 2:
            continue
        y, bits, wd, blk = zip(*[(g[w][sd], bb, w, sd) for g, bb in zip(groups, (16, b)) for w in wds for sd in seeds])
        t = interaction_f(np.array(y), bits, wd, blk)
        rows.append({"variant": v, "size": s, "bits": b, "warmdowns": wds, "n_seeds": len(seeds),
                     "F": t["F"], "df1": t["df1"], "df2": t["df2"], "p": t["p"]})
    return rows


def int4_transition(at_best, order, z_min=3.0):
    """The QAT seed's INT4 transition (wd 0.33 decisive from 50M, noise below): per variant and size,
    INT4 at wd 0.33 against wd 0.1 (each at its best LR), paired over seeds: z > 0 when 0.33 has the
    lower loss, wins = seeds where it does; decisive when z >= z_min. from_size: the smallest size
    from which every larger INT4 size is decisive (null when the largest is not). None without INT4."""
    out = []
    for v in sorted({k[0] for k in at_best if k[1] == 4}):
        rows = []
        for s in sorted((k[2] for k in at_best if k[:2] == (v, 4)), key=order.get):
            c = at_best[(v, 4, s)]
            if 0.1 not in c or 0.33 not in c:
                continue
            seeds = sorted(set(c[0.1]) & set(c[0.33]))
            pz = paired_z([c[0.1][sd] for sd in seeds], [c[0.33][sd] for sd in seeds])
            z = None if math.isnan(pz["z"]) else pz["z"]
            rows.append({"size": s, "n": pz["n"], "mean_diff": pz["mean_diff"], "z": z, "wins": pz["wins_b"],
                         "decisive": z is not None and z >= z_min})
        start = None
        for r in reversed(rows):
            if not r["decisive"]:
                break
            start = r["size"]
        if rows:
            out.append({"variant": v, "z_min": z_min, "rows": rows, "from_size": start})
    return out or None


def default_fit_sizes(sizes):
    """Sizes sorted by N: hold out the two extremes when there are >= 5 (as the QAT seed held out
    sizes outside its fit range), else fit them all."""
    return sizes[1:-1] if len(sizes) >= 5 else list(sizes)


def penalty_report(recs, order, fit_sizes=None, level=0.95, ref_lr=1.0, ref_warmdown=0.33):
    """P_b(N) = L_b(N) - L_16(N) at one reference cell (lr = ref_lr, warmdown = ref_warmdown), paired
    on seed and averaged over seeds: the same definition at the fit sizes and the held-out ones
    (which exist only at the reference LR). Per (variant, bits): OLS fit of P = alpha + beta ln N on
    fit_sizes (default: all but the two extreme sizes when there are >= 5), and the prediction
    interval and coverage at every other size."""
    at_ref = [x for x in recs if x["lr"] == ref_lr and abs(x["warmdown"] - ref_warmdown) < 1e-9]
    base = {(x["variant"], x["size"], x["seed"]): x["loss"] for x in at_ref if x["bits"] == 16}
    by_seed, nd = per_seed_penalties(at_ref, base)
    pens = {k: list(v.values()) for k, v in by_seed.items()}
    ns = {k: [n for n, _ in v if n is not None] for k, v in nd.items()}
    out = []
    for v, b in sorted({(v, b) for v, b, _ in pens}, key=lambda t: (t[0], -t[1])):
        sizes = sorted((s for vv, bb, s in pens if (vv, bb) == (v, b)), key=order.get)
        rows = {s: {"size": s, "n_params": float(np.mean(ns[(v, b, s)])) if ns[(v, b, s)] else None,
                    "penalty": float(np.mean(pens[(v, b, s)])), "n": len(pens[(v, b, s)]),
                    "sd": sd1(pens[(v, b, s)])}
                for s in sizes}
        with_n = [s for s in sizes if rows[s]["n_params"] is not None]
        fit_set = [s for s in with_n if s in fit_sizes] if fit_sizes else default_fit_sizes(with_n)
        held = [s for s in with_n if s not in fit_set]
        for s in sizes:
            rows[s]["role"] = "fit" if s in fit_set else "held-out" if s in held else "no N"
        g = {"variant": v, "bits": b, "alpha": None, "beta": None, "fit_sizes": fit_set, "sizes": [rows[s] for s in sizes],
             "held_out": [], "coverage": None, "fit": None}
        if len(fit_set) < 3:
            g["message"] = f"log-linear fit skipped, because {len(fit_set)} fit sizes have runs at the reference cell (need >= 3)"
        else:
            fit = loglinear_fit([rows[s]["n_params"] for s in fit_set], [rows[s]["penalty"] for s in fit_set])
            g.update(fit=fit, alpha=fit["alpha"], beta=fit["beta"])
            if held:
                yhat, lo, hi = predict_interval(fit, [rows[s]["n_params"] for s in held], level)
                for s, yh, l, h in zip(held, yhat, lo, hi):
                    rows[s].update(pred=float(yh), lo=float(l), hi=float(h), inside=bool(l <= rows[s]["penalty"] <= h))
                g["coverage"] = f"{sum(rows[s]['inside'] for s in held)}/{len(held)}"
            g["lack_of_fit"] = lack_of_fit_f([pens[(v, b, s)] for s in fit_set],
                                             [fit["alpha"] + fit["beta"] * math.log(rows[s]["n_params"]) for s in fit_set])
            pt = lambda s: (rows[s]["n_params"], rows[s]["penalty"], rows[s]["sd"], rows[s]["n"])
            g["seed_check"] = seed_noise_check([pt(s) for s in fit_set], [pt(s) for s in held])
            for s, h in zip(held, (g["seed_check"] or {}).get("held", [])):
                rows[s]["z_seed"] = h["z"]
            g["held_out"] = [{k: rows[s].get(k) for k in ("size", "n_params", "penalty", "pred", "lo", "hi", "inside", "z_seed")}
                             for s in held]
        out.append(g)
    return {"level": level, "ref_lr": ref_lr, "ref_warmdown": ref_warmdown, "laws": out,
            "laws_nd": nd_laws(at_ref, base, order, out, level),
            "variant_contrasts": variant_contrasts(at_ref, base, order)}


def without_budget(variant):
    """A variant's name without its budget (training-length) part: the runs one N-D law is fitted on."""
    return ",".join(p for p in variant.split(",") if p and not p.startswith("budget="))


def budget_of(variant):
    """The budget part of a variant's name ('x3': 3x the grid's tokens at that size); 'x1' when absent."""
    return next((p[len("budget="):] for p in variant.split(",") if p.startswith("budget=")), "x1")


def per_seed_penalties(at_ref, base):
    """(variant, bits, size) -> {seed: L_b - L_16} at the reference cell, and -> mean (N, D)."""
    pens, nd = defaultdict(dict), defaultdict(list)
    for x in at_ref:
        k = (x["variant"], x["size"], x["seed"])
        if x["bits"] != 16 and k in base:
            pens[(x["variant"], x["bits"], x["size"])][x["seed"]] = x["loss"] - base[k]
            nd[(x["variant"], x["bits"], x["size"])].append((x["N"], x["D"]))
    return pens, nd


def nd_laws(at_ref, base, order, n_laws, level=0.95):
    """The QAT law in size and tokens, delta(N, D) = k D^gamma_D / N^gamma_N (Chen et al. 2025, arXiv
    2505.14302), beside the log-linear law in N: per (variant without its budget, bits), fitted by
    OLS in log space on the mean penalties of the fit sizes of the N law at every training length
    (the grid and the longer-training runs); tested at the held-out sizes, with level prediction
    intervals (predict_nd). For each held-out size and each longer-training cell the N law's
    prediction (the same at any D) stands beside it: `in_nd_fit` marks the longer-training cells,
    which the N-D law was fitted on (it is only tested out of sample at the held-out sizes)."""
    pens, nd = per_seed_penalties(at_ref, base)
    out = []
    for v0, b in sorted({(without_budget(v), b) for v, b, _ in pens}, key=lambda t: (t[0], -t[1])):
        keys = [k for k in pens if without_budget(k[0]) == v0 and k[1] == b]
        nlaw = next((g for g in n_laws if g["bits"] == b and g["fit"] and without_budget(g["variant"]) == v0
                     and budget_of(g["variant"]) == "x1"), None)
        fit_sizes = set(nlaw["fit_sizes"]) if nlaw else set()
        cells = []
        for k in sorted(keys, key=lambda k: (order[k[2]], k[0])):
            ns, ds = zip(*nd[k])
            if None in ns or None in ds:
                continue
            per = list(pens[k].values())
            cells.append({"size": k[2], "budget": budget_of(k[0]),
                          "tokens": float(np.mean(ds)), "n_params": float(np.mean(ns)), "penalty": float(np.mean(per)),
                          "sd": sd1(per), "n": len(per), "role": "fit" if k[2] in fit_sizes else "held-out"})
        fit_cells = [c for c in cells if c["role"] == "fit" and c["penalty"] > 0]
        g = {"variant": v0, "bits": b, "k": None, "gamma_N": None, "gamma_D": None, "n": len(fit_cells), "r2": None,
             "n_nonpositive": sum(c["role"] == "fit" and c["penalty"] <= 0 for c in cells), "held_out": [],
             "coverage": None, "cells": cells}
        fit = loglinear_nd_fit([c["n_params"] for c in fit_cells], [c["tokens"] for c in fit_cells],
                               [c["penalty"] for c in fit_cells], level) if fit_cells else None
        if fit is None:
            g["message"] = ("the law in N and D is not identified by these runs: it needs >= 4 positive fit penalties "
                            "with D varying at fixed N")
        else:
            g.update({k: fit[k] for k in ("k", "gamma_N", "gamma_D", "r2")}, s=fit["s"], dof=fit["dof"])
        for c in cells:
            if fit:
                c["pred_nd"], c["lo_nd"], c["hi_nd"] = predict_nd(fit, c["n_params"], c["tokens"], level)
                c["inside_nd"] = None if c["lo_nd"] is None else bool(c["lo_nd"] <= c["penalty"] <= c["hi_nd"])
            if nlaw:
                yh, lo, hi = (float(a[0]) for a in predict_interval(nlaw["fit"], [c["n_params"]], level))
                c.update(pred_n=yh, lo_n=lo, hi_n=hi, inside_n=bool(lo <= c["penalty"] <= hi))
            c["in_nd_fit"] = c["role"] == "fit"
        g["held_out"] = [c for c in cells if c["role"] == "held-out" or c["budget"] != "x1"]
        tested = [c for c in cells if c["role"] == "held-out" and c.get("inside_nd") is not None]
        g["coverage"] = f"{sum(c['inside_nd'] for c in tested)}/{len(tested)}" if tested else None
        g["error"] = {law: {part: float(np.mean([abs(c["penalty"] - c[f"pred_{law}"]) for c in cs])) if cs else None
                            for part, cs in (("held_out_sizes", [c for c in cells if c["role"] == "held-out" and f"pred_{law}" in c]),
                                             ("longer_training", [c for c in cells if c["budget"] != "x1" and f"pred_{law}" in c]))}
                      for law in ("n", "nd")}
        out.append(g)
    return out


def variant_contrasts(at_ref, base, order):
    """Each probe's penalty against the grid's at the same size and bits (the grid: the variant with
    the most penalty cells), paired over seeds: the paired t test of the one rule for "better"."""
    pens, _ = per_seed_penalties(at_ref, base)
    count = defaultdict(int)
    for v, _, _ in pens:
        count[v] += 1
    if len(count) < 2:
        return []
    grid = max(sorted(count), key=count.get)
    rows = []
    for (v, b, s) in sorted(pens, key=lambda k: (k[0], -k[1], order[k[2]])):
        if v != grid and (grid, b, s) in pens:
            p = paired_acc(pens[(v, b, s)], pens[(grid, b, s)])
            rows.append({"variant": v, "against": grid, "bits": b, "size": s, **p,
                         "verdict": ("smaller" if p["mean_diff"] < 0 else "larger") if distinguishable(p)
                         else "not distinguishable"})
    return rows


def grid_report(recs, order):
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
    # by variant, grid, entry, size (model size order, as every other section), lr, warmdown
    for key in sorted(d, key=lambda t: (str(t[0]), t[1], str(t[2]), order.get(t[3], 0), str(t[3]), t[4], t[5])):
        fp = d[key].get(16, {})
        for b in sorted((b for b in d[key] if b != 16), reverse=True):
            q = d[key][b]
            seeds = sorted(set(q) & set(fp))  # no FP16 partner: the QAT distance alone, no ratio
            mq = float(np.mean([q[s] for s in seeds] if seeds else list(q.values())))
            mf = float(np.mean([fp[s] for s in seeds])) if seeds else None
            rows.append(dict(zip(("variant", "grid_bits", "key", "size", "lr", "warmdown"), key), bits=b,
                             n=len(seeds), d_qat=mq, d_fp16=mf, ratio=mq / mf if mf else None))
    return {"rows": rows}


def qat_study(runs, args):
    """The three QAT sections over the runs' QAT-grid records (records)."""
    recs, _ = records(runs)
    order = size_order(recs)
    fit_sizes = [s.strip() for s in args.fit_sizes.split(",") if s.strip()] if args.fit_sizes else None
    unknown = set(fit_sizes or []) - set(order)
    if unknown:
        raise UserError(f"--fit_sizes names sizes with no QAT-grid runs: {', '.join(sorted(unknown))} "
                        f"(sizes present: {', '.join(sorted(order, key=order.get)) or 'none'})")
    return {"qat": qat_report(recs, order),
            "penalty_law": penalty_report(recs, order, fit_sizes, args.level, args.ref_lr, args.ref_warmdown),
            "grid_distance": grid_report(recs, order)}


def qat_md(q):
    L = ["## 1. QAT schedule grid", "",
         "Deployed metrics.val_loss, mean ± sd over seeds. z: paired z of (warmdown - best) over matched seeds"
         " (positive: the best warmdown has the lower loss); best wins: seeds where the best is lower.", "",
         f"**Verdict per (bits, size)** ({q['lr_rule']}):", ""]
    inter = {(r["variant"], r["size"], r["bits"]): r for r in q["interaction"]}
    L += table(["variant", "bits", "size", "best warmdown (at LR)", "FP16 best", "same as FP16",
                "other warmdowns: Δ, z, best wins", "bits x warmdown interaction vs FP16"],
               [[c["variant"] or "-", str(c["bits"]), c["size"], f"{f(c['best_warmdown'])} ({f(c['best_lr'])})",
                 f(c["fp16_best_warmdown"]), {True: "yes", False: "NO", None: "-"}[c["same_as_fp16"]],
                 "; ".join(f"{f(r['warmdown'])}: {r['delta']:+.4f}, z {f(r['z'], '+.1f')}, {r['best_wins']}/{r['n_paired']}"
                           for r in c["warmdowns"] if r["z"] is not None),
                 (lambda t: f"F={f(t['F'], '.2f')} ({t['df1']}, {t['df2']}), p={f(t['p'], '.2g')}" if t else "-")(
                     inter.get((c["variant"], c["size"], c["bits"])))]
                for c in q["verdict"]]) + [""]
    L += ["The interaction column is the QAT seed's null put as a test: a two-way ANOVA of FP16 and this bit-width "
          "over warmdowns (each at its best LR), seeds as blocks; a small p says the warmdown effect differs "
          "between the two bit-widths. \"Same as FP16\" only compares the argmins.", ""]
    for t in q["int4_transition"] or []:
        L += [f"**INT4 transition** {vtag(t['variant'])}(wd 0.33 against wd 0.1, paired over seeds; z > 0: 0.33 lower; "
              f"decisive: z >= {f(t['z_min'])}): " + "; ".join(
                  f"{r['size']} z {f(r['z'], '+.1f')} ({r['wins']}/{r['n']})" for r in t["rows"]) +
              f". Decisive at every size from: **{t['from_size'] or 'none'}**.", ""]
    L += ["Per (bits, size, LR) cell:", ""]
    L += table(["variant", "bits", "size", "lr", "best", "val_loss by warmdown (mean ± sd, n; z)"],
               [[c["variant"] or "-", str(c["bits"]), c["size"], f(c["lr"]), f(c["best_warmdown"]),
                 "; ".join(f"{f(r['warmdown'])}: {r['mean']:.4f} ± {f(r['sd'], '.2g')} (n={r['n']}"
                           + (f", z {f(r['z'], '+.1f')})" if r["z"] is not None else ")") for r in c["warmdowns"])]
                for c in q["cells"]]) + [""]
    return L


def penalty_md(p):
    L = ["## 2. Quantisation penalty law P_b(N) = L_b(N) - L_16(N) = alpha + beta ln N", "",
         f"P at the reference cell lr={f(p['ref_lr'])}, warmdown={f(p['ref_warmdown'])}, paired on seed and averaged;"
         f" N = params.non_embedding; {p['level']:.0%} prediction intervals at the held-out sizes.", ""]
    for g in p["laws"]:
        L += [f"**{vtag(g['variant'])}INT{g['bits']}**", ""]
        L += table(["size", "N", "P mean", "sd", "seeds", "role", f"{p['level']:.0%} PI", "inside"],
                   [[r["size"], f(r["n_params"], ".3g"), f"{r['penalty']:+.4f}", f(r["sd"], ".2g"), str(r["n"]),
                     r["role"], f"[{r['lo']:+.4f}, {r['hi']:+.4f}]" if "lo" in r else "-",
                     ("yes" if r["inside"] else "NO") if "inside" in r else "-"] for r in g["sizes"]]) + [""]
        if g["fit"]:
            ft = g["fit"]
            L += [f"Fit on {', '.join(g['fit_sizes'])}: alpha={ft['alpha']:.4g}, beta={ft['beta']:.4g}, s={ft['s']:.3g},"
                  f" R^2={f(ft['r2'], '.3f')}. " + (f"Held-out coverage {g['coverage']}." if g["coverage"]
                                                   else "No held-out sizes.")]
            lf = g.get("lack_of_fit")
            if lf:
                L += ["", f"Lack of fit against the pooled seed variance (F test): F={lf['F']:.2f} on ({lf['df1']}, "
                          f"{lf['df2']}) dof, p={lf['p']:.2g}."]
            sc = g.get("seed_check")
            if sc:
                zs = ", ".join(f"{h['size']} z={h['z_seed']:+.1f}" for h in g["held_out"] if h.get("z_seed") is not None)
                L += ["", f"Treating each size's seed sd as known (weighted by sd/sqrt(seeds); overstates, the F test above "
                          f"does not): beta={sc['beta']:.4g} ± {sc['beta_se']:.2g}, chi^2={sc['chi2']:.2f} on {sc['dof']} "
                          f"dof (p={sc['p_lack_of_fit']:.2g})" + (f"; held-out {zs}." if zs else ".")]
        else:
            L += [f"_{g['message']}._"]
        L += [""]
    return L + nd_md(p) + contrasts_md(p)


def nd_md(p):
    """The two laws side by side: the N law (alpha + beta ln N) and the N-D law (k D^gamma_D / N^gamma_N)."""
    L = ["### The law in size and tokens beside the law in size", "",
         "delta(N, D) = k D^gamma_D / N^gamma_N (arXiv 2505.14302), OLS in log space on the fit sizes at every "
         f"training length; {p['level']:.0%} prediction intervals (log space, t on n - 3 dof). Beside it the N law "
         "(the same at any D). Cells marked 'in fit' were fitted by the N-D law, not tested.", ""]
    for g in p.get("laws_nd") or []:
        if g["k"] is None and not any("pred_n" in c for c in g["held_out"]):
            continue  # neither law was fitted for this group (a probe at one size): nothing to put side by side
        L += [f"**{vtag(g['variant'])}INT{g['bits']}**: " + (
            f"k={g['k']:.3g}, gamma_N={g['gamma_N']:+.3f}, gamma_D={g['gamma_D']:+.3f}, R^2={f(g['r2'], '.3f')} on "
            f"{g['n']} cells; held-out coverage {g['coverage'] or '-'}." if g["k"] is not None else f"_{g['message']}._"), ""]
        if g["held_out"]:
            pi = lambda c, law: (f"{c[f'pred_{law}']:+.4f} [{f(c[f'lo_{law}'], '+.4f')}, {f(c[f'hi_{law}'], '+.4f')}]"
                                 + ("" if c.get(f"inside_{law}") is None else " ok" if c[f"inside_{law}"] else " **out**")
                                 if f"pred_{law}" in c else "-")
            L += table(["size", "budget", "N", "D", "P (mean ± sd)", "N law", "N-D law"],
                       [[c["size"], c["budget"], f(c["n_params"], ".3g"), f(c["tokens"], ".3g"),
                         f"{c['penalty']:+.4f} ± {f(c['sd'], '.2g')}", pi(c, "n"),
                         pi(c, "nd") + (" (in fit)" if c["in_nd_fit"] else "")] for c in g["held_out"]]) + [""]
            e = g["error"]
            L += ["Mean |error|: held-out sizes N law " + f(e["n"]["held_out_sizes"], ".4f") + ", N-D law "
                  + f(e["nd"]["held_out_sizes"], ".4f") + "; longer training N law " + f(e["n"]["longer_training"], ".4f")
                  + ", N-D law " + f(e["nd"]["longer_training"], ".4f") + " (in fit).", ""]
    return L


def contrasts_md(p):
    rows = p.get("variant_contrasts") or []
    if not rows:
        return []
    return (["### Probes against the grid: the penalty, paired over seeds", "",
             f"d = the probe's penalty - the grid's ({rows[0]['against'] or 'grid'}) at the same size and bits; "
             f"smaller / larger: paired t test p < {f(BETTER_LEVEL)} over >= {MIN_SEEDS} seeds.", ""] +
            table(["probe", "bits", "size", "Δ penalty", "t", "p", "seeds", "verdict"],
                  [[r["variant"], str(r["bits"]), r["size"], f"{r['mean_diff']:+.4f}", f(r["z"], "+.2f"),
                    f(r["p"], ".2g"), str(r["n"]), r["verdict"]] for r in rows]) + [""])


def grid_md(g):
    L = ["## 3. Weight-to-grid distance", "",
         "Mean |w/s - round(w/s)| on the grid_bits grid (0.25 = uniform, 0 = snapped); ratio = QAT / FP16"
         " over matched seeds.", ""]
    return L + table(["grid_bits", "entry", "size", "lr", "warmdown", "bits", "d", "d FP16", "ratio", "seeds"],
                     [[str(r["grid_bits"]), vtag(r["variant"]) + r["key"], r["size"],
                       f(r["lr"]), f(r["warmdown"]), str(r["bits"]), f(r["d_qat"]), f(r["d_fp16"]),
                       f(r["ratio"]), str(r["n"])] for r in g["rows"]]) + [""]


def qat_markdown(rep):
    return ((qat_md(rep["qat"]) if rep["qat"]["cells"] else no_data("qat")) +
            (penalty_md(rep["penalty_law"]) if rep["penalty_law"]["laws"] else no_data("penalty_law")) +
            (grid_md(rep["grid_distance"]) if rep["grid_distance"]["rows"] else no_data("grid_distance")))


def qat_plots(rep):
    """qat_warmdown.png: loss vs warmdown per bit-width, each warmdown at its best LR, seed sd as bars;
    penalty_vs_size.png: the penalty by size with the fitted law and its prediction band."""
    out = []
    q, p = rep["qat"], rep["penalty_law"]
    if q["verdict"]:
        variants = list(dict.fromkeys((c["variant"], c["size"]) for c in q["verdict"]))
        fig, axs = figures(len(variants), 3.6, 3.4)
        for ax, (v, s) in zip(axs[0], variants):
            for c in (c for c in q["verdict"] if (c["variant"], c["size"]) == (v, s)):
                ax.errorbar([r["warmdown"] for r in c["warmdowns"]], [r["mean"] for r in c["warmdowns"]],
                            yerr=[r["sd"] or 0 for r in c["warmdowns"]], marker="o", capsize=2,
                            label="FP16" if c["bits"] == 16 else f"INT{c['bits']}")
            ax.set(title=vtag(v) + f"size {s}", xlabel="warmdown fraction", ylabel="val_loss (best LR)")
            ax.legend(fontsize=6)
        out.append(("qat_warmdown.png", fig))
    if p["laws"]:
        fig, axs = figures(1, 5.5, 3.8)
        ax = axs[0][0]
        for i, g in enumerate(p["laws"]):
            c, rows = f"C{i % 10}", [r for r in g["sizes"] if r["n_params"] is not None]
            for role, mfc in (("fit", c), ("held-out", "none")):  # held-out sizes drawn open
                pts = [r for r in rows if r["role"] == role]
                ax.errorbar([r["n_params"] for r in pts], [r["penalty"] for r in pts], yerr=[r["sd"] or 0 for r in pts],
                            fmt="o", color=c, mfc=mfc, capsize=2,
                            label=vtag(g["variant"]) + f"INT{g['bits']}" if role == "fit" else None)
            if g["fit"] and rows:
                xs = np.geomspace(min(r["n_params"] for r in rows), max(r["n_params"] for r in rows), 100)
                yh, lo, hi = predict_interval(g["fit"], xs, p["level"])
                ax.plot(xs, yh, color=c)
                ax.fill_between(xs, lo, hi, color=c, alpha=0.15)
        ax.set(xscale="log", xlabel="non-embedding params N", ylabel="penalty L_b - L_16",
               title=f"penalty vs size, {p['level']:.0%} PI (open: held out)")
        ax.legend(fontsize=7)
        out.append(("penalty_vs_size.png", fig))
    return out

# =============================================================================
# study: longctx -- inhibiting features vs context extension (arXiv 2608.10296)


FEATURES = ("qk_norm", "gqa", "swa", "short_ctx")
OUTCOMES = {  # name -> (what, higher is better)
    "loss": ("post-extension val loss at the target length(s) (nats/token)", False),
    "gap": ("loss at the target minus the parent's loss at its pretraining length, same val tokens (nats)", False),
    "longppl": ("post-extension log LongPPL at the target: mean loss of the key tokens (nats)", False),
    "key_frac": ("share of the target's tokens that are LongPPL key tokens (the model's own)", True),
    "retrieval": ("retrieval score at the target (evaluate.py score)", True),
    "gain_parent": ("extension gain: the unextended parent's loss at the target minus the extended run's (nats)", True),
    "gain_free": ("extension gain: the training-free scaling's loss at the target (same method and layers) minus "
                  "the extended run's (nats)", True)}
MEASURED = ("loss", "gap", "longppl", "key_frac", "retrieval")  # read from eval.json; the gains are differences
PREDICTORS = ("train_loss_smooth", "val_loss", "pre", "sink_rate", "sink_strength")


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


def recipe(run):
    """An extension's recipe from its lineage: method, stages, budget, long/short mix."""
    lin = run.get("lineage") or {}
    b = lin.get("budget") if isinstance(lin.get("budget"), dict) else {}
    budget = (f"frac={b['token_frac']:g}" if b.get("source") == "token_frac" else
              f"{b['source']}={b.get(b['source'])}" if b.get("source") else
              f"iters={lin['iters']}" if lin.get("iters") else "training-free")
    mix = f" short_frac={lin['short_frac']:g}" if num(lin.get("short_frac")) and budget != "training-free" else ""
    layers = " layers=global" if lin.get("layers") == "global" else ""
    lr = "" if budget == "training-free" or "lr_frac" not in lin else \
        f" lr={lin['lr_frac']:g}x" if num(lin["lr_frac"]) else " lr=parent" if lin["lr_frac"] == 0 else f" lr={lin.get('lr')}"
    return f"{lin.get('method')}{' 2-stage' if lin.get('stages') == 2 else ''} {budget}{mix}{layers}{lr}"


def training_free(run):
    """An extension without continued training (its lineage has no budget)."""
    lin = run.get("lineage") or {}
    return not (lin.get("budget") or lin.get("iters"))


def scaling_key(run):
    """What a training-free extension shares with a trained one it is the baseline of."""
    lin = run.get("lineage") or {}
    return (lin.get("method"), lin.get("layers") or "all", num(lin.get("factor")))


def target_loss(run):
    """eval.json target outcomes, or (older files) the ppl loss at the longest length."""
    t = dget(run, "eval", "target")
    if isinstance(t, dict):
        return {k: num(t.get(k)) for k in ("loss", "longppl_loss", "key_frac", "retrieval")}
    by = dget(run, "eval", "ppl", "by_length") or {}
    L = max(by, key=parse_int, default=None)
    return {"loss": num(by.get(L)) if L else None, "longppl_loss": None, "key_frac": None,
            "retrieval": num(dget(run, "eval", "score"))}


def outcome_values(run, root, ctx):
    """The outcomes of one run (OUTCOMES), the root's pretraining length ctx."""
    t, ind = target_loss(run), num(dget(root, "eval", "ppl", "by_length", str(ctx)))
    return {"loss": t["loss"], "gap": t["loss"] - ind if t["loss"] is not None and ind is not None else None,
            "longppl": t["longppl_loss"], "key_frac": t["key_frac"], "retrieval": t["retrieval"]}


def longctx_rows(runs):
    """One row per scored long-context run: the context extensions (the final stage of each) when
    there are any, else every text run with an eval.json. Features from the pretraining run (root)."""
    lc = [r for r in runs if run_kind(r) != "algo" and isinstance(r.get("eval"), dict)]
    ext = [r for r in lc if run_kind(r) == "extension" and not (dget(r, "lineage", "stage") == 1 and
                                                                   dget(r, "lineage", "stages") == 2)]
    rows = []
    for r in ext or lc:
        root, ckpt = lineage_root(r, runs) if ext else (r, "final")
        root = root or r
        ctx = pretrain_block(root)
        m, ev = root["metrics"], root.get("eval") or {}
        seed = num(root["config"].get("seed"))
        row = {"run": r["run_name"], "root": root["run_name"], "seed": int(seed) if seed is not None and seed.is_integer() else seed,
               "recipe": recipe(r) if ext else "no extension", "ckpt": ckpt, "ctx": ctx,
               "training_free": training_free(r) if ext else None, "_scaling": scaling_key(r),
               **outcome_values(r, root, ctx),
               "train_loss_smooth": num(m.get("train_loss_smooth", m.get("train_loss"))),
               "val_loss": num(m.get("val_loss")), "sink_rate": num(ev.get("sink_rate")),
               "sink_strength": num(ev.get("sink_strength")),
               **dict(zip(("exact", "exact_n"), exact_at(r, dget(r, "eval", "score_lengths") or []))),
               "id_exact": exact_at(root, [ctx])[0] if ctx is not None else None}
        pre = outcome_values(root, root, ctx) if ext else {}
        rows.append({**row, **{f"pre_{k}": pre.get(k) for k in MEASURED}, "_model_config": root["model_config"]})
    extension_gains(rows)
    contexts = sorted({w["ctx"] for w in rows if w["ctx"] is not None})
    short = contexts[0] if len(contexts) >= 2 else None
    for w in rows:
        ax = feature_axes(w.pop("_model_config"), w["ctx"], short)
        w.update(ax, count=sum(ax.values()), cell="".join(str(ax[k]) for k in FEATURES))
    return rows, contexts, short, bool(ext)


def extension_gains(rows):
    """gain_parent and gain_free of every extension on a final checkpoint (lower loss = positive gain):
    the root's own loss at the target (evaluate.py before extension), and the loss of the training-free
    extension of the same root with the same scaling (none: None), each minus the run's loss."""
    free = {(w["root"], w["_scaling"]): w["loss"] for w in rows if w["training_free"] and w["ckpt"] == "final"}
    for w in rows:
        final = w["ckpt"] == "final" and w["loss"] is not None and w["training_free"] is not None
        w["gain_parent"] = w["pre_loss"] - w["loss"] if final and w["pre_loss"] is not None else None
        key = (w["root"], w.pop("_scaling"))
        base = free.get(key) if final and not w["training_free"] else None
        w["gain_free"] = base - w["loss"] if base is not None else None


def gain_report(rows, level=0.95):
    """Does each recipe extend? Per trained recipe on final checkpoints, each gain (gain_parent,
    gain_free): runs, mean with its 95% CI over runs, runs and cells with a positive gain; flagged
    when a mean gain is not positive (the extension hurts at the target, on average)."""
    out = []
    for rec in sorted({w["recipe"] for w in rows if w["ckpt"] == "final" and w["training_free"] is False}):
        entry = {"recipe": rec}
        for key in ("gain_parent", "gain_free"):
            rs = [w for w in rows if w["recipe"] == rec and w["ckpt"] == "final" and w[key] is not None]
            if not rs:
                entry[key] = None
                continue
            v = np.array([w[key] for w in rs])
            cells = defaultdict(list)
            for w in rs:
                cells[w["cell"]].append(w[key])
            half = t_half_width(v, level)
            entry[key] = {"n": len(v), "mean": float(v.mean()), "lo": float(v.mean() - half), "hi": float(v.mean() + half),
                          "n_positive": int((v > 0).sum()), "n_cells": len(cells),
                          "cells_positive": sum(np.mean(c) > 0 for c in cells.values())}
        entry["flagged"] = any(entry[k] is not None and not entry[k]["mean"] > 0 for k in ("gain_parent", "gain_free"))
        out.append(entry)
    return out


def exact_at(run, lengths):
    """(mean exact match over the run's retrieval tasks (eval.json tasks) at these lengths, samples
    behind it); (None, 0) where none was scored."""
    rs = [b[str(L)] for t in (dget(run, "eval", "tasks") or {}).values() if isinstance(t, dict)
          for b in [t.get("by_length") or {}] for L in lengths if isinstance(b.get(str(L)), dict)]
    if not rs:
        return None, 0
    return float(np.mean([num(r.get("exact")) for r in rs])), sum(int(num(r.get("n")) or 0) for r in rs)


def retrieval_report(rows, gate=0.9, level=0.95, span_sds=3):
    """Exact-match retrieval at the target on the main recipe's rows (final checkpoints): per cell the
    mean over seeds with its 95% sampling CI (binomial: the samples of the cell's runs), the sd over
    seeds and the roots' exact match at their pretraining length (the gate: a cell whose recipe does
    not learn the task in distribution, mean < gate, scores chance at the target, not an outcome);
    whether the cell means span more than span_sds init sds (pooled within-cell sd over seeds)."""
    rs = [w for w in rows if w.get("exact") is not None]
    if not rs:
        return None
    cells = defaultdict(list)
    for w in rs:
        cells[w["cell"]].append(w)
    out_cells, var, dof = [], 0.0, 0
    for c, ws in sorted(cells.items()):
        p = np.array([w["exact"] for w in ws])
        n = np.array([max(w["exact_n"], 1) for w in ws])
        half = binomial_half_width(p, n, level)
        ide = [w["id_exact"] for w in ws if w["id_exact"] is not None]
        learned = bool(ide) and float(np.mean(ide)) >= gate
        if len(ws) > 1:
            var, dof = var + float(p.var(ddof=1)) * (len(ws) - 1), dof + len(ws) - 1
        out_cells.append({"cell": c, "n": len(ws), "samples": int(n.sum()), "mean": float(p.mean()),
                          "lo": float(p.mean() - half), "hi": float(p.mean() + half), "half_width": half,
                          "sd": sd1(list(p)), "id_exact": float(np.mean(ide)) if ide else None, "learned": learned})
    means = [c["mean"] for c in out_cells]
    init_sd = math.sqrt(var / dof) if dof else None
    span = max(means) - min(means)
    n_learned = sum(c["learned"] for c in out_cells)
    spans = bool(init_sd is not None and span > span_sds * init_sd) if init_sd else span > 0
    verdict = ("not learned in distribution: exact match at the pretraining length below the gate in every cell; the "
               "target exact match is chance, not an outcome" if not n_learned else
               f"learned in distribution in {n_learned} of {len(out_cells)} cells only: no factorial outcome"
               if n_learned < len(out_cells) else
               f"the cell means {'span' if spans else 'do not span'} more than {span_sds} init sds")
    return {"metric": "exact match at the target (mean over retrieval tasks and target lengths)",
            "gate": {"metric": "the roots' exact match at their pretraining length", "threshold": gate},
            "samples_per_run": sorted({int(w["exact_n"]) for w in rs}), "samples_rule":
            f"z^2 / 4 / (0.05^2 x seeds): {samples_for_ci(len({w['seed'] for w in rs}) or 1)} per run for a cell mean's "
            f"95% CI half-width <= 0.05",
            "cells": out_cells, "n_learned": n_learned, "init_sd": init_sd, "init_sd_dof": dof,
            "cell_mean_range": span, "spans_3sd": spans, "usable": n_learned == len(out_cells), "verdict": verdict}


def learned_subfactorial(rows, ret):
    """When retrieval is learned in some cells only: the largest half of the factorial in which every
    cell learned it (one feature held at one level, the other three crossed), analysed there as an
    outcome (outcome_report on those features); the first such feature in FEATURES order; null when
    no half is learned throughout."""
    learned = {c["cell"]: c["learned"] for c in ret["cells"]}
    for i, f in enumerate(FEATURES):
        for v in (0, 1):
            half = [c for c in learned if int(c[i]) == v]
            if len(half) == 2 ** (len(FEATURES) - 1) and all(learned[c] for c in half):
                others = tuple(g for g in FEATURES if g != f)
                rep = outcome_report([w for w in rows if w[f] == v], "retrieval", features=others)
                sv = (rep or {}).get("seed_variance") or {}
                spans = (sv.get("init_sd") is not None and sv["cell_mean_range"] > 3 * sv["init_sd"])
                return {"fixed": {f: v}, "features": list(others), "cells": sorted(half), "report": rep,
                        "init_sd": sv.get("init_sd"), "cell_mean_range": sv.get("cell_mean_range"), "spans_3sd": spans}
    return None


def fit_summary(fit, names=None):
    keep = [c for c in fit["coefs"] if names is None or c["name"] in names]
    return {"r2": fit["r2"], "s": fit["s"], "dof": fit["dof"], "coefs": keep}


def outcome_report(rows, key, level=0.95, features=FEATURES):
    """Every analysis of one outcome over the rows of one recipe: cells, main effects with the seed
    spread, count / additive / pairwise / saturated models (R^2, LOO R^2 over runs and over cells,
    nested F tests), the remove-one increments, seed variance, and exploratory short-context predictors.
    features: the factors that vary in rows (a sub-factorial holds the others fixed)."""
    rs = [w for w in rows if w[key] is not None]
    if len(rs) < 3 or len({w[key] for w in rs}) < 2:
        return None
    y = np.array([w[key] for w in rs])
    Z = np.array([[w[k] for k in features] for w in rs])
    cells = defaultdict(list)
    for w in rs:
        cells[w["cell"]].append(w[key])
    models, fits = [], {}
    for name in ("count", "additive", "pairwise", "saturated"):
        X, names = factorial_design(Z, name, list(features))
        fits[name] = ols(X, y, names, level)
        models.append({"model": name, "k": X.shape[1] + 1, **fit_summary(fits[name], None if name != "saturated" else []),
                       "loo_r2": loo_r2(X, y), "loco_r2": loo_r2(X, y, [w["cell"] for w in rs]) if name != "saturated" else None})
    sat = fits["saturated"]  # the cell means: its residual is the spread over seeds
    s2, dof = (sat["s"] ** 2, sat["dof"]) if sat["dof"] > 0 else (math.nan, 0)
    tests = [{"test": f"{a} vs {b}", **nested_f(fits[a], fits[b])}
             for a, b in (("count", "additive"), ("additive", "pairwise"), ("pairwise", "saturated"))]
    means = {c: float(np.mean(v)) for c, v in cells.items()}
    span = max(means.values()) - min(means.values())
    ranges = [max(v) - min(v) for v in cells.values() if len(v) > 1]
    seeds = sorted({w["seed"] for w in rs if w["seed"] is not None})
    effects = []
    for i, f in enumerate(features):
        per_seed = [np.mean([w[key] for w in rs if w["seed"] == sd and w[f]]) -
                    np.mean([w[key] for w in rs if w["seed"] == sd and not w[f]]) for sd in seeds
                    if len({w[f] for w in rs if w["seed"] == sd}) == 2]
        c = fits["additive"]["coefs"][i + 1]
        sd = sd1(per_seed)
        effects.append({"feature": f, "effect": c["est"], "lo": c["lo"], "hi": c["hi"], "seed_sd": sd,
                        "per_seed": [float(e) for e in per_seed],
                        "effect_over_init_sd": abs(c["est"]) / math.sqrt(s2) if s2 > 0 else None})
    rem = remove_one(Z, y, s2, dof, level)
    for r in rem["increments"]:
        r["feature"] = features[r["feature"]]
    preds = []
    for p in PREDICTORS:
        x = np.array([np.nan if w.get(f"pre_{key}" if p == "pre" else p) is None else w[f"pre_{key}" if p == "pre" else p]
                      for w in rs], dtype=float)
        ok = np.isfinite(x)
        if ok.sum() >= 3 and np.ptp(x[ok]) > 0:
            fit = ols(x[ok], y[ok], [p], level)
            preds.append({"predictor": "pre-extension " + key if p == "pre" else p, "n": int(ok.sum()),
                          "slope": fit["coefs"][1]["est"], "r2": fit["r2"], "loo_r2": loo_r2(x[ok], y[ok])})
    better = max if OUTCOMES[key][1] else min
    best, worst = better(means, key=means.get), (min if OUTCOMES[key][1] else max)(means, key=means.get)
    drop = {"best_cell": best, "worst_cell": worst, "best": means[best], "worst": means[worst],
            "drop_pct": 100 * abs(means[worst] - means[best]) / abs(means[best]) if means[best] else None}
    loco = [m for m in models if m["loco_r2"] is not None and math.isfinite(m["loco_r2"])]
    return {"what": OUTCOMES[key][0], "higher_is_better": OUTCOMES[key][1], "n": len(rs), "n_cells": len(cells),
            "relative_drop": drop if key in MEASURED and key != "gap" else None,  # a % of a near-0 gap is no headline
            "best_by_loco": max(loco, key=lambda m: m["loco_r2"])["model"] if loco else None,
            "seeds": seeds, "cells": [{"cell": c, **dict(zip(FEATURES, map(int, c))), "count": c.count("1"), "n": len(v),
                                       "mean": means[c], "sd": sd1(v)}
                                      for c, v in sorted(cells.items())],
            "effects": effects, "models": models, "tests": tests,
            "best_by_loo": max((m for m in models if m["loo_r2"] is not None and math.isfinite(m["loo_r2"])),
                               key=lambda m: m["loo_r2"], default={"model": None})["model"],
            "remove_one": rem,
            "seed_variance": {"init_sd": math.sqrt(s2) if s2 > 0 else None, "dof": dof, "cell_mean_range": span,
                              "swing_max": max(ranges, default=None),
                              "swing_share_max": max(ranges) / span if ranges and span > 0 else None,
                              "swing_share_median": float(np.median(ranges)) / span if ranges and span > 0 else None},
            "predictors": preds}


def early_report(rows, main, key):
    """Early-extension diagnostic: the main recipe applied to an intermediate checkpoint (train.py
    --save_at, extend.py --ckpt) vs the same recipe on the final one, paired by pretraining run."""
    final = {w["root"]: w[key] for w in rows if w["recipe"] == main and w["ckpt"] == "final" and w[key] is not None}
    pairs = [(w[key], final[w["root"]], w["ckpt"]) for w in rows
             if w["recipe"] == main and w["ckpt"] != "final" and w[key] is not None and w["root"] in final]
    if len(pairs) < 3:
        return None
    x, y = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    fit = ols(x, y, ["early"])
    return {"ckpts": sorted({p[2] for p in pairs}), "n": len(pairs), "slope": fit["coefs"][1]["est"], "r2": fit["r2"],
            "loo_r2": loo_r2(x, y), "pearson": pearson(x, y), "spearman": spearman(x, y)}


def variant_report(rows, main, key, level=0.95):
    """A robustness variant (another recipe), reported on its own: count and additive fits, and how
    its cell means and runs compare with the main recipe's (same pretraining runs)."""
    out = []
    base = {w["root"]: w[key] for w in rows if w["recipe"] == main and w["ckpt"] == "final" and w[key] is not None}
    for rec in sorted({w["recipe"] for w in rows} - {main}):
        rs = [w for w in rows if w["recipe"] == rec and w["ckpt"] == "final" and w[key] is not None]
        if len(rs) < 3:
            continue
        y, Z = np.array([w[key] for w in rs]), np.array([[w[k] for k in FEATURES] for w in rs])
        cnt, add = ols(Z.sum(1), y, ["count"], level), ols(Z, y, FEATURES, level)
        shared = [(w[key], base[w["root"]]) for w in rs if w["root"] in base]
        d = np.array([a - b for a, b in shared])
        out.append({"recipe": rec, "n": len(rs), "mean": float(y.mean()),
                    "count": fit_summary(cnt, ["count"]), "count_loo_r2": loo_r2(Z.sum(1), y),
                    "additive": fit_summary(add, FEATURES), "n_paired": len(shared),
                    "minus_main": float(d.mean()) if len(d) else None,
                    "r_with_main": pearson(*zip(*shared)) if len(shared) > 2 else None})
    return out


def longctx_report(runs):
    """The long-context study (arXiv 2608.10296) on a factorial grid: per outcome (OUTCOMES) the
    analyses of outcome_report on the main recipe (the most common one on final checkpoints), the
    early-extension diagnostic, and each other recipe as a separate robustness variant."""
    rows, contexts, short, ext = longctx_rows(runs)
    if not rows:
        return None
    finals = [w["recipe"] for w in rows if w["ckpt"] == "final"]
    trained = [w["recipe"] for w in rows if w["ckpt"] == "final" and not w["training_free"]] or finals
    main = max(sorted(set(trained)), key=trained.count) if trained else None  # a training-free baseline is no recipe
    out = {}
    for key in OUTCOMES:
        rep = outcome_report([w for w in rows if w["recipe"] == main and w["ckpt"] == "final"], key)
        if rep:
            out[key] = dict(rep, early=early_report(rows, main, key), variants=variant_report(rows, main, key))
    gain = gain_report(rows)
    main_rows = [w for w in rows if w["recipe"] == main and w["ckpt"] == "final"]
    ret = retrieval_report(main_rows)
    if ret and not ret["usable"]:  # chance is no outcome: the recipe must learn the task in distribution
        out.pop("retrieval", None)
        ret["subfactorial"] = learned_subfactorial(main_rows, ret)
    return {"sinks": sink_path(main_rows, "loss"), "contexts": contexts, "short_block": short, "extensions": ext, "main_recipe": main,
            "recipes": {r: finals.count(r) for r in sorted(set(finals))}, "runs": rows, "outcomes": out,
            "gain": gain, "flagged_recipes": [g["recipe"] for g in gain if g["flagged"]], "retrieval": ret}


def effects_table(o, digits):
    """The main effects of an outcome report (outcome_report) as a markdown table, `digits` decimals."""
    return table(["feature", "effect [95% CI]", "sd over seeds", "abs(effect) / init sd"],
                 [[e["feature"], ci(e["effect"], e["lo"], e["hi"], f"+.{digits}f"), f(e["seed_sd"], f".{digits}f"),
                   f(e["effect_over_init_sd"], ".1f")] for e in o["effects"]]) + [""]


def f_tests(o):
    """The nested F tests of an outcome report in one line."""
    return "; ".join(f"{t['test']}: F={f(t['F'], '.2f')} ({t['df1']}, {t['df2']}), p={f(t['p'], '.3g')}" for t in o["tests"])


def longctx_md(lc):
    if not (lc and lc["outcomes"]):
        return no_data("longctx")
    L = ["## 4. Long-context extensibility vs inhibiting features (arXiv 2608.10296)", "",
         f"Pretraining contexts {lc['contexts']}; short context = {lc['short_block'] or 'n/a (need two contexts)'}. "
         f"Main recipe: {lc['main_recipe']} ({lc['recipes'].get(lc['main_recipe'], len(lc['runs']))} runs); "
         f"recipes: {', '.join(f'{r} ({n})' for r, n in lc['recipes'].items()) or '-'}. Features: "
         f"{', '.join(FEATURES)} (1 = present). Effects are in the outcome's units, 95% confidence intervals in "
         f"brackets; init sd = pooled sd over seeds within a cell.", ""]
    L += gain_md(lc)
    L += retrieval_md(lc)
    sk = lc.get("sinks")
    if sk:
        L += [f"Sinks (main recipe's roots): sink rate {f(sk['rate_min'], '.3f')} .. {f(sk['rate_max'], '.3f')}; " +
              ("no head sinks, so the QK-norm -> sink -> outcome path is not tested." if not sk["path"] else
               f"QK-norm on the sink rate {ci(sk['path']['qk_norm_on_sink_rate']['est'], sk['path']['qk_norm_on_sink_rate']['lo'], sk['path']['qk_norm_on_sink_rate']['hi'], '+.3f')}; "
               "sink rate -> loss within each context: " + ", ".join(
                   f"ctx {w['ctx']}: slope {f(w['slope'], '+.3g')}, R^2 {f(w['r2'], '.2f')}" for w in sk["path"]["within_ctx"])), ""]
    outs = lc["outcomes"]
    if outs:
        first = next(iter(outs.values()))
        L += table(["cell " + "/".join(FEATURES), "count", "n"] + list(outs),
                   [[c["cell"], str(c["count"]), str(c["n"])] +
                    [f"{f(cm['mean'], '.4f')} ± {f(cm['sd'], '.3f')}" for cm in
                     (next((x for x in o["cells"] if x["cell"] == c["cell"]), {"mean": None, "sd": None})
                      for o in outs.values())] for c in first["cells"]]) + [""]
    for key, o in outs.items():
        sv = o["seed_variance"]
        rd = o.get("relative_drop")
        L += [f"### {key}: {o['what']} ({'higher' if o['higher_is_better'] else 'lower'} is better)", ""]
        if rd:
            L += [f"Headline: the worst cell ({rd['worst_cell']}, {f(rd['worst'], '.4f')}) is {f(rd['drop_pct'], '.1f')}% "
                  f"from the best ({rd['best_cell']}, {f(rd['best'], '.4f')}). Best model by leave-one-cell-out R^2: "
                  f"**{o['best_by_loco']}**.", ""]
        L += [
              f"{o['n']} runs, {o['n_cells']} cells, seeds {o['seeds']}. Init swing: sd {f(sv['init_sd'], '.4f')} "
              f"({sv['dof']} dof); the largest range over seeds in a cell is {f(sv['swing_share_max'], '.0%')} of the "
              f"range of the cell means ({f(sv['cell_mean_range'], '.4f')}), median {f(sv['swing_share_median'], '.0%')}.", ""]
        L += effects_table(o, 4)
        L += table(["model", "params", "R^2", "LOO R^2 (runs)", "LOO R^2 (cells)", "coefficients [95% CI]"],
                   [[m["model"], str(m["k"]), f(m["r2"], ".3f"), f(m["loo_r2"], ".3f"), f(m["loco_r2"], ".3f"),
                     "; ".join(f"{c['name']} {ci(c['est'], c['lo'], c['hi'], '+.4f')}" for c in m["coefs"]
                               if c["name"] != "intercept" and (m["model"] != "pairwise" or ":" in c["name"]))
                     or "the cell means"] for m in o["models"]]) + [""]
        L += ["Nested F tests: " + f_tests(o) + f". Best predictor by LOO R^2 over runs: **{o['best_by_loo']}**.", ""]
        rem = o["remove_one"]
        L += ["Remove one feature from the four-feature cell (increment = all four - the other three; equal "
              "increments = the count hypothesis):", ""]
        L += table(["feature", "increment [95% CI]", "n (4 / 3)"],
                   [[r["feature"], ci(r["increment"], r["lo"], r["hi"], "+.4f"), "/".join(map(str, r["n"]))]
                    for r in rem["increments"]]) + [""]
        eq = rem["equal"]
        L += [f"Equal increments: F={f(eq['F'], '.2f')} ({eq['df1']}, {eq['df2']}), p={f(eq['p'], '.3g')}.", ""]
        if o["predictors"]:
            L += ["Short-context predictors and sinks (exploratory: one predictor at a time, not corrected for "
                  "multiple comparisons):", ""]
            L += table(["predictor", "n", "slope", "R^2", "LOO R^2"],
                       [[p["predictor"], str(p["n"]), f(p["slope"], "+.3g"), f(p["r2"], ".3f"), f(p["loo_r2"], ".3f")]
                        for p in o["predictors"]]) + [""]
        e = o["early"]
        if e:
            L += [f"Early extension (checkpoint {', '.join(e['ckpts'])}, same recipe) -> final: n={e['n']}, "
                  f"R^2={f(e['r2'], '.3f')}, LOO R^2={f(e['loo_r2'], '.3f')}, Pearson {f(e['pearson'], '.3f')}, "
                  f"Spearman {f(e['spearman'], '.3f')}.", ""]
        if o["variants"]:
            L += ["Robustness variants (each on its own; never pooled with the main recipe):", ""]
            L += table(["recipe", "n", "mean", "- main (paired)", "r with main", "count slope [95% CI]", "count R^2 / LOO",
                        "additive effects"],
                       [[v["recipe"], str(v["n"]), f(v["mean"], ".4f"), f(v["minus_main"], "+.4f"), f(v["r_with_main"], ".2f"),
                         ci(v["count"]["coefs"][0]["est"], v["count"]["coefs"][0]["lo"], v["count"]["coefs"][0]["hi"], "+.4f"),
                         f"{f(v['count']['r2'], '.2f')} / {f(v['count_loo_r2'], '.2f')}",
                         ", ".join(f"{c['name']} {f(c['est'], '+.3f')}" for c in v["additive"]["coefs"])]
                        for v in o["variants"]]) + [""]
    return L


def sink_path(rows, key, level=0.95):
    """The seed's QK-norm -> attention sink -> outcome path, reported only where sinks form: the sink
    rate range over the roots first; where it varies, QK-norm's effect on the sink rate and the sink
    rate's slope on the outcome within each pretraining context (a pooled fit mixes the contexts)."""
    r = [w for w in rows if w["sink_rate"] is not None]
    if not r:
        return None
    rates = [w["sink_rate"] for w in r]
    out = {"rate_min": min(rates), "rate_max": max(rates), "formed": max(rates) > 0, "path": None}
    if not out["formed"] or len(set(rates)) < 2:
        return out
    q = ols([w["qk_norm"] for w in r], rates, ["qk_norm"], level)["coefs"][1]
    within = []
    for ctx in sorted({w["ctx"] for w in r}):
        pts = [(w["sink_rate"], w[key]) for w in r if w["ctx"] == ctx and w[key] is not None]
        if len(pts) >= 3 and len({x for x, _ in pts}) > 1:
            fit = ols([x for x, _ in pts], [y for _, y in pts], ["sink_rate"], level)
            within.append({"ctx": ctx, "n": len(pts), "slope": fit["coefs"][1]["est"], "r2": fit["r2"]})
    out["path"] = {"outcome": key, "qk_norm_on_sink_rate": {k: q[k] for k in ("est", "lo", "hi")}, "within_ctx": within}
    return out


def gain_md(lc):
    """The extension-gain check: does each recipe extend (lower loss at the target than the parent and
    than training-free scaling)? A recipe whose mean gain is not positive is flagged."""
    if not lc.get("gain"):
        return []
    L = ["### Does the extension extend? Extension gain at the target (nats; positive = the extension helps)", ""]
    cell = lambda g: (f"{ci(g['mean'], g['lo'], g['hi'], '+.4f')}; runs > 0: {g['n_positive']}/{g['n']}, cells > 0: "
                      f"{g['cells_positive']}/{g['n_cells']}") if g else "-"
    L += table(["recipe", "vs the unextended parent", "vs training-free scaling", "flag"],
               [[g["recipe"] + (" (main)" if g["recipe"] == lc["main_recipe"] else ""), cell(g["gain_parent"]),
                 cell(g["gain_free"]), "**mean gain not positive**" if g["flagged"] else ""] for g in lc["gain"]]) + [""]
    for rec in lc["flagged_recipes"]:
        L += [f"**FLAG: {rec} does not extend: its mean gain at the target is not positive; its outcomes measure "
              f"a recipe that hurts, not what an extension recovers.**", ""]
    return L


def retrieval_md(lc):
    """Exact-match retrieval at the target per cell, its gate and whether the cells span > 3 init sds."""
    r = lc.get("retrieval")
    if not r:
        return []
    L = [f"### Retrieval: {r['metric']} (main recipe)", "",
         f"Samples per run {r['samples_per_run']} ({r['samples_rule']}). Gate: {r['gate']['metric']} >= "
         f"{r['gate']['threshold']}. Init sd {f(r['init_sd'], '.3f')} ({r['init_sd_dof']} dof), range of the cell means "
         f"{f(r['cell_mean_range'], '.3f')}. **Verdict: {r['verdict']}.**", ""]
    L += table(["cell " + "/".join(FEATURES), "n", "samples", "exact match [95% CI]", "sd over seeds",
                "exact match at the pretraining length", "learned"],
               [[c["cell"], str(c["n"]), str(c["samples"]), ci(c["mean"], c["lo"], c["hi"], ".3f"), f(c["sd"], ".3f"),
                 f(c["id_exact"], ".3f"), "yes" if c["learned"] else "**no**"] for c in r["cells"]]) + [""]
    sub = r.get("subfactorial")
    if sub and sub["report"]:
        o, (fx, v) = sub["report"], next(iter(sub["fixed"].items()))
        L += [f"**The learned half: {fx} = {v}** (every one of its {len(sub['cells'])} cells learned; "
              f"{', '.join(sub['features'])} crossed, {o['n']} runs; the cell means "
              f"{'span' if sub['spans_3sd'] else 'do not span'} more than 3 init sds: range "
              f"{f(sub['cell_mean_range'], '.3f')}, init sd {f(sub['init_sd'], '.3f')}). Main effects on the target "
              f"exact match (additive model):", ""]
        L += effects_table(o, 3)
        L += ["Models: " + "; ".join(f"{m['model']} R^2 {f(m['r2'], '.2f')} (LOO {f(m['loo_r2'], '.2f')})"
                                     for m in o["models"]) + ". Nested F tests: " + f_tests(o) + ".", ""]
    return L


def longctx_plots(rep):
    """longctx_outcome_vs_count.png: each outcome of the main recipe vs the feature count: every run
    (colour = seed, offset by seed so none hides another), the cell means (x) and the count fit."""
    lc = rep["longctx"]
    if not (lc and lc["outcomes"]):
        return []
    outs = lc["outcomes"]
    fig, axs = figures(len(outs), 4.2, 3.6)
    rows = [w for w in lc["runs"] if w["recipe"] == lc["main_recipe"] and w["ckpt"] == "final"]
    for ax, (key, o) in zip(axs[0], outs.items()):
        seeds = o["seeds"] or [None]
        for j, sd in enumerate(seeds):
            pts = [w for w in rows if w["seed"] == sd and w[key] is not None]
            ax.plot([w["count"] + 0.08 * (j - (len(seeds) - 1) / 2) for w in pts], [w[key] for w in pts], "o",
                    ms=4, alpha=0.8, label=f"seed {f(sd, 'g')}")
        ax.plot([c["count"] for c in o["cells"]], [c["mean"] for c in o["cells"]], "kx", ms=5, label="cell mean")
        b = {c["name"]: c["est"] for c in o["models"][0]["coefs"]}
        ax.plot([0, 4], [b["intercept"], b["intercept"] + 4 * b["count"]], "k-",
                label=f"count fit, R^2 {f(o['models'][0]['r2'], '.2f')}")
        ax.set(xlabel="inhibiting-feature count", ylabel=key, title=f"{key} vs feature count")
        ax.legend(fontsize=6)
    return [("longctx_outcome_vs_count.png", fig)]

# =============================================================================
# positional encodings: what the lengen and posenc studies share


# model flags that make up an algorithmic run's positional variant (its "encoding"); every other
# flag that varies between the runs of one task splits cells as the "variant"
ENCODING_KEYS = ("pos", "pos_pattern", "swan", "window", "global_every", "layer_pattern", "logn_scale",
                 "chunk_layers", "chunk_size", "chunk_topk", "rope_frac", "hope_cutoff", "expe_dims",
                 "expe_start", "expe_slope", "expe_on", "chunk_encoder", "chunk_bypass", "chunk_dense_train")
# chunk attention's ablations (arXiv 2510.17196's principles removed one at a time): flag -> (value, suffix)
CHUNK_ABLATIONS = {"chunk_encoder": ("linear", "-linear"), "chunk_bypass": (False, "-fused"),
                   "chunk_dense_train": (True, "-dense")}


def encoding(mc):
    """Positional variant of a run from its model_config: 'swan', 'chunk' (with '-linear', '-fused',
    '-dense' for each principle removed: CHUNK_ABLATIONS), or the --pos kind (with a sliding window or a
    per-layer pattern appended when set; 'expe-qk' for ExPE written into q and k, which a record
    without expe_on predates the embedding form and so is)."""
    if mc.get("swan"):
        return "swan"
    if str(mc.get("chunk_layers") or "").strip():
        return "chunk" + "".join(suf for k, (v, suf) in CHUNK_ABLATIONS.items()
                                 if k in mc and str(mc[k]).lower() == str(v).lower())
    name = str(mc.get("pos") or "rope")
    if name == "expe" and mc.get("expe_on", "qk") == "qk":
        name = "expe-qk"
    if mc.get("pos_pattern"):
        name += f"[{mc['pos_pattern']}]"
    if num(mc.get("window")):
        name += f"+window{int(num(mc['window']))}"
    return name


ENCODING_ORDER = {e: i for i, e in enumerate(("rope", "nope", "alibi", "hope", "expe", "expe-qk", "sinusoidal",
                                               "swan", "chunk", "chunk-linear", "chunk-fused", "chunk-dense"))}


# Comparisons beside the reference (RoPE) that the write-ups read, each cell against one other encoding:
# ExPE against the sinusoidal encoding its paper compares with (arXiv 2509.19569), sinusoidal against
# NoPE (absolute positions against none), chunk attention against SWAN (the other design that keeps
# retrieval past the training length). In lengen_report and posenc_report as cells[].vs_baseline.
BASELINES = {"expe": "sinusoidal", "sinusoidal": "nope", "chunk": "swan"}


def score_verdict(p, reference, margin, lower_is_better=False):
    """The verdict of a paired comparison p (paired_acc) of scores with the reference encoding, by the
    one rule for "better" (distinguishable: paired t test at BETTER_LEVEL over >= MIN_SEEDS seeds)
    and a mean gap of at least the margin; otherwise "not distinguishable", with the numbers.
    lower_is_better: p compares losses (a negative difference is better)."""
    if p is None:
        return f"no seeds in common with {reference}"
    if distinguishable(p) and abs(p["mean_diff"]) >= margin:
        return f"{'better' if (p['mean_diff'] < 0) == lower_is_better else 'worse'} than {reference}"
    why = (f"{p['n']} seeds, fewer than {MIN_SEEDS}" if p["n"] < MIN_SEEDS else
           f"paired t p={f(p['p'], '.2g')}" + (f", |Δ| < {f(margin)}" if distinguishable(p) else ""))
    return f"not distinguishable from {reference} (Δ {p['mean_diff']:+.3f}, {why})"


def cells_by_seed(keyed, what):
    """{key: {seed: run}} from (key, run) pairs; a run repeating a (key, seed) is ignored with a
    warning naming `what` the key is made of."""
    cells, dups = {}, []
    for key, r in keyed:
        seed = r["config"].get("seed")
        if seed in cells.setdefault(key, {}):
            dups.append(r["run_name"])
            continue
        cells[key][seed] = r
    if dups:
        warn(f"{len(dups)} runs repeat a ({what}, seed) already seen and are ignored, e.g. {dups[0]}")
    return cells


def by_length_panel(ax, series, colour, clip):
    """One encoding panel: a line per cell (x, mean) with its seed band (mean +- sd; clipped to [0, 1]
    for exact match), one colour per encoding across panels (colour: a dict shared by the panels),
    crosses and a dashed line for a cell not learned in distribution.
    series: [(encoding, label, learned, [(x, {"mean", "sd"})])]."""
    for enc, label, learned, pts in series:
        pts = sorted((x, v) for x, v in pts if v["mean"] is not None)
        if not pts:
            continue
        x, m = [p[0] for p in pts], np.array([p[1]["mean"] for p in pts])
        sd = np.array([p[1]["sd"] or 0.0 for p in pts])
        col = colour.setdefault(enc, f"C{len(colour) % 10}")
        ax.plot(x, m, "o-" if learned else "x--", color=col, label=label + ("" if learned else " (not learned)"))
        lo, hi = (np.clip(m - sd, 0, 1), np.clip(m + sd, 0, 1)) if clip else (m - sd, m + sd)
        ax.fill_between(x, lo, hi, color=col, alpha=0.15)
    ax.legend(fontsize=6)

# =============================================================================
# study: lengen -- length generalisation on algorithmic tasks (train short, test long)


def lengen_report(runs, gate=0.9, margin=0.05, reference="rope"):
    """Algorithmic-task runs (train.py --algo), one cell per (task, encoding, variant) over seeds:
    in-distribution exact match (metrics.val_acc), exact match per input-length bin and the score
    (mean exact match past N) from eval.json, each as mean, sd and per seed. The gate: a cell whose
    mean in-distribution exact match is below `gate` has not learned the task; it is listed under
    "excluded" and gets no extrapolation verdict. A learned cell is compared with the `reference`
    encoding's cell of the same task and variant (when that one is learned too), paired over seeds,
    per bin past N and on the score; verdict on the score by score_verdict (the paired t test at
    BETTER_LEVEL over >= MIN_SEEDS seeds, and a mean difference of at least `margin`)."""
    algo = [r for r in runs if run_kind(r) == "algo"]
    if not algo:
        return None
    by_task = defaultdict(list)
    for r in algo:
        if threshold_run(r):  # the threshold sweep's own runs: lengen.threshold only
            continue
        by_task[str(r["config"]["algo"])].append(r)
    keyed = []
    for task in sorted(by_task):
        rs = by_task[task]
        fields = [{k: v for k, v in variant_fields(r["config"]).items()
                   if (k.startswith("model.") and k[6:] not in ENCODING_KEYS)
                   or k in ("algo_len", "algo_offset", "block_size", "iters")} for r in rs]
        varying = sorted({k for f in fields for k in f if len({g.get(k) for g in fields}) > 1})
        keyed += [((task, encoding({**r["model_config"], **r["config"]["model"]}),
                    ",".join(f"{k}={f.get(k)}" for k in varying)), r) for r, f in zip(rs, fields)]
    cells = cells_by_seed(keyed, "task, encoding, variant")
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
            "hope_pairs": hope_pairs(by_seed.values()),
            "score": score, "held_to": held, "vs_reference": None, "verdict": None}
    for key, c in out.items():
        task, enc, variant = key
        ref = out.get((task, reference, variant))
        if not c["learned"]:
            c["verdict"] = "excluded: not learned in distribution"
        elif enc == reference:
            c["verdict"] = "reference"
        elif ref is None:
            c["verdict"] = f"no {reference} cell to compare with"
        elif not ref["learned"]:
            c["verdict"] = f"no comparison: {reference} not learned in distribution"
        else:
            c["vs_reference"] = lengen_paired(c, ref)
            c["verdict"] = score_verdict(c["vs_reference"]["score"], reference, margin)
        base = out.get((task, BASELINES.get(enc), variant))
        c["vs_baseline"] = None
        if base and c["learned"] and base["learned"]:
            cmp = lengen_paired(c, base)
            c["vs_baseline"] = dict(cmp, baseline=base["encoding"], verdict=score_verdict(cmp["score"], base["encoding"], margin))
    order = ENCODING_ORDER
    ordered = sorted(out.values(), key=lambda c: (c["task"], c["variant"], order.get(c["encoding"], len(order)),
                                                 c["encoding"]))
    excluded = [{"task": c["task"], "encoding": c["encoding"], "variant": c["variant"], "n": c["n"],
                 "in_dist_mean": c["in_dist"]["mean"]} for c in ordered if not c["learned"]]
    return {"gate": {"metric": "metrics.val_acc", "threshold": gate,
                     "rule": "a cell enters the extrapolation verdict when the mean over seeds of its "
                             "in-distribution exact match is >= threshold"},
            "reference": reference, "margin": margin, "cells": ordered, "excluded": excluded,
            "threshold": lengen_threshold(algo, gate)}


def lengen_paired(c, ref):
    """A lengen cell against another of the same task and variant, paired over seeds: the score and
    each input-length bin past the training length."""
    N = c["train_len"][1] if c["train_len"] else None
    return {"score": paired_acc(c["score"]["per_seed"], ref["score"]["per_seed"]),
            "by_length": {b: paired_acc(v["per_seed"], ref["by_length"][b]["per_seed"]) for b, v in c["by_length"].items()
                          if N is not None and v["lo"] is not None and v["lo"] > N and b in ref["by_length"]}}


def hope_pairs(runs):
    """HoPE's rotary pairs per head and how many it left unrotated (train.py's run record "hope"),
    from the first run that has them; None for a cell without HoPE layers."""
    return next((r["hope"] for r in runs if isinstance(r.get("hope"), dict)), None)


def attn_by_distance(evals):
    """{L: {edges, mean [layer][bucket]}}: evaluate.py's mean attention weight per relative-distance
    bucket at length L (probes.by_length.L.attn_by_distance), averaged over the seeds that have it."""
    acc = defaultdict(list)
    for e in evals:
        for L, row in (dget(e, "probes", "by_length") or {}).items():
            v = row.get("attn_by_distance") if isinstance(row, dict) else None
            if isinstance(v, dict) and isinstance(v.get("mean"), list):
                acc[L].append(v)
    out = {}
    for L in sorted(acc, key=parse_int):
        vs = [v for v in acc[L] if v["edges"] == acc[L][0]["edges"] and np.shape(v["mean"]) == np.shape(acc[L][0]["mean"])]
        out[L] = {"edges": vs[0]["edges"], "n": len(vs), "mean": np.mean([v["mean"] for v in vs], 0).tolist()}
    return out


THRESHOLD_DIR = "threshold"  # sweep.sh puts the threshold sweep's runs in OUT/lengen/threshold/
# The order of the training-length thresholds we read the LG-bounds abstract to predict ("richer tasks
# need longer training"), ranked by how much of the input one output token must combine: copy reads one
# earlier token (found by matching), sort compares one token with all the others (a count), and the
# parity scratchpad composes a running state over all the input.
THRESHOLD_PREDICTED = ("copy", "sort", "parity_scratch")


def threshold_run(r):
    return os.path.basename(os.path.dirname(os.path.normpath(r.get("_dir") or ""))) == THRESHOLD_DIR


def bin_at(by_len, hi):
    """Exact match of the eval.json by_length bin ending at input length hi, or None."""
    v = (by_len or {}).get(str(hi)) if isinstance(by_len, dict) else None
    return num(v.get("exact")) if isinstance(v, dict) else None


def threshold_of(points, gate):
    """The training-length threshold: the smallest N from which every trained length N' >= N holds
    mean exact match >= gate at 2N' (and in distribution); None when the longest one does not.
    points: [{train_len, in_dist, at_2x}] with stats (mean) values, any order."""
    thr = None
    for p in sorted(points, key=lambda p: p["train_len"], reverse=True):
        ok = all(p[k]["mean"] is not None and p[k]["mean"] >= gate for k in ("in_dist", "at_2x"))
        if not ok:
            break
        thr = p["train_len"]
    return thr


def lengen_threshold(algo, gate=0.9):
    """lengen.threshold: per (task, n_layer, encoding) trained at >= 2 maximum input lengths N (the
    threshold sweep's runs and the main grid's), over seeds: in-distribution exact match and exact match
    in the bins ending at 2N and 3N, and the threshold (threshold_of)."""
    groups = defaultdict(lambda: defaultdict(dict))
    for r in algo:
        task = str(r["config"]["algo"])
        try:
            N = int(str(r["config"].get("algo_len")).split(",")[-1])
        except ValueError:
            continue
        key = (task, num(r["model_config"].get("n_layer")), encoding({**r["model_config"], **r["config"]["model"]}))
        groups[key][N][r["config"].get("seed")] = r
    rows = []
    for (task, n_layer, enc), by_n in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0,
                                                                             ENCODING_ORDER.get(kv[0][2], 99))):
        if len(by_n) < 2:
            continue
        pts = []
        for N in sorted(by_n):
            rs = by_n[N]
            by_len = {s: dget(r, "eval", "tasks", task, "by_length") for s, r in rs.items()}
            pts.append({"train_len": N, "n": len(rs), "seeds": sorted(rs, key=lambda s: (num(s) is None, num(s) or 0)),
                        "in_dist": seed_stats({s: num(r["metrics"].get("val_acc")) for s, r in rs.items()}),
                        "at_2x": seed_stats({s: bin_at(by_len[s], 2 * N) for s in rs}),
                        "at_3x": seed_stats({s: bin_at(by_len[s], 3 * N) for s in rs})})
        rows.append({"task": task, "n_layer": int(n_layer) if n_layer else None, "encoding": enc,
                     "threshold": threshold_of(pts, gate), "by_train_len": pts})
    if not rows:
        return None
    measured = {}
    for depth in sorted({r["n_layer"] for r in rows if r["n_layer"]}):
        at = {r["task"]: r["threshold"] for r in rows if r["n_layer"] == depth}
        measured[str(depth)] = sorted(at, key=lambda t: (at[t] is None, at[t] or 0, THRESHOLD_PREDICTED.index(t)
                                                         if t in THRESHOLD_PREDICTED else 99))
    return {"rule": f"the smallest trained maximum length N from which every longer trained N' holds mean exact "
                    f"match >= {gate} in distribution and in the bin ending at 2N' (null: the longest does not)",
            "gate": gate, "predicted_order": list(THRESHOLD_PREDICTED), "measured_order": measured, "rows": rows}


def lengen_md(lg):
    if not (lg and lg["cells"]):
        return no_data("lengen")
    ref, gate = lg["reference"], lg["gate"]["threshold"]
    L = ["## 5. Length generalisation on algorithmic tasks", "",
         f"Exact match, mean ± sd over seeds: in distribution (metrics.val_acc, input lengths 1..N) and per "
         f"input-length bin (evaluate.py). Gate: a cell is learned when its mean in-distribution exact match is "
         f">= {f(gate)}; a cell that is not is excluded from the verdict. held to: the longest length up to which "
         f"every bin's mean stays >= {f(gate)}. Δ {ref}: the score (mean exact match past N) minus {ref}'s, paired "
         f"over seeds, with paired z and the seeds where it is higher/lower; verdict: better/worse when the paired t "
         f"test over >= {MIN_SEEDS} seeds gives p < {f(BETTER_LEVEL)} and |Δ| >= {f(lg['margin'])}, else not "
         f"distinguishable.", ""]
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
                           paired_cell(p),
                           c["verdict"]])
        L += table(["encoding", "seeds", "in-dist", "learned"] + [span[b] for b in bins]
                   + ["score", "held to", f"Δ {ref} (z, higher/lower)", "verdict"], rows) + [""]
    ex = lg["excluded"]
    L += [f"Excluded by the gate ({len(ex)} cells): " + (", ".join(
        f"{x['task']}/{x['encoding']}{' [' + x['variant'] + ']' if x['variant'] else ''} "
        f"({f(x['in_dist_mean'], '.3f')})" for x in ex) if ex else "none") + ".", ""]
    base = [c for c in lg["cells"] if c.get("vs_baseline")]
    if base:
        L += ["Beside the reference (`vs_baseline`, the score paired over seeds):", ""]
        L += [f"- {c['task']}: {c['encoding']} vs {c['vs_baseline']['baseline']}: {paired_cell(c['vs_baseline']['score'])}, "
              f"{c['vs_baseline']['verdict']}" for c in base] + [""]
    return L + threshold_md(lg.get("threshold"))


def threshold_md(th):
    if not th:
        return []
    lens = sorted({p["train_len"] for r in th["rows"] for p in r["by_train_len"]})
    L = ["### The training-length threshold", "",
         f"Exact match at 2N (in distribution / at 3N in brackets), mean over seeds, per maximum training length "
         f"N. Threshold: {th['rule']}.", ""]
    rows = []
    for r in th["rows"]:
        by = {p["train_len"]: p for p in r["by_train_len"]}
        rows.append([r["task"], str(r["n_layer"]), r["encoding"]]
                    + [(f"{f(by[N]['at_2x']['mean'], '.2f')} ({f(by[N]['in_dist']['mean'], '.2f')} / "
                        f"{f(by[N]['at_3x']['mean'], '.2f')}) n={by[N]['n']}") if N in by else "-" for N in lens]
                    + [f(r["threshold"]) if r["threshold"] is not None else "never"])
    L += table(["task", "layers", "encoding"] + [f"N={N}" for N in lens] + ["threshold"], rows) + [""]
    L += [f"Predicted order of the thresholds (lowest first): {', '.join(th['predicted_order'])}; measured "
          "(never last): " + "; ".join(f"{d} layers: {', '.join(o)}" for d, o in th["measured_order"].items())
          + ".", ""]
    return L


def lengen_plots(rep):
    """lengen_accuracy.png: exact match by input length (bin centre) per task, one line per encoding."""
    lg = rep["lengen"]
    if not (lg and lg["cells"]):
        return []
    tasks_ = list(dict.fromkeys(c["task"] for c in lg["cells"]))
    fig, axs = figures(len(tasks_), 4)
    colour = {}
    for ax, task in zip(axs[0], tasks_):
        cs = [c for c in lg["cells"] if c["task"] == task]
        by_length_panel(ax, [(c["encoding"], c["encoding"] + (f" [{c['variant']}]" if c["variant"] else ""),
                              c["learned"], [((b["lo"] + b["hi"]) / 2 if b["lo"] is not None else b["hi"], b)
                                             for b in c["by_length"].values()]) for c in cs], colour, clip=True)
        tl = next((c["train_len"] for c in cs if c["train_len"]), None)
        if tl:
            ax.axvline(tl[1] + 0.5, color="grey", ls=":", lw=1)
        ax.set(title=task, xlabel="input length (bin centre)", ylabel="exact match", ylim=(-0.03, 1.03))
    return [("lengen_accuracy.png", fig)] + threshold_plot(lg.get("threshold"))


def threshold_plot(th):
    """lengen_threshold.png: exact match at 2N against the maximum training length N, one panel per
    task, one line per (layers, encoding) with its seed band; the dashed line is the gate."""
    if not th:
        return []
    tasks_ = list(dict.fromkeys(r["task"] for r in th["rows"]))
    fig, axs = figures(len(tasks_), 4)
    colour = {}
    for ax, task in zip(axs[0], tasks_):
        rs = [r for r in th["rows"] if r["task"] == task]
        by_length_panel(ax, [(f"L{r['n_layer']}", f"{r['n_layer']} layers, {r['encoding']}"
                              + (f" (threshold {r['threshold']})" if r["threshold"] is not None else " (never)"), True,
                              [(p["train_len"], p["at_2x"]) for p in r["by_train_len"]]) for r in rs], colour, clip=True)
        ax.axhline(th["gate"], color="grey", ls="--", lw=1)
        ax.set(title=task, xlabel="maximum training length N", ylabel="exact match at N+1..2N", ylim=(-0.03, 1.03))
    return [("lengen_threshold.png", fig)]

# =============================================================================
# study: posenc -- positional encodings trained short, evaluated long on text and retrieval


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
    def key(r):
        c = r["config"]
        training = f"task_mix:{c.get('task_list')}" if (num(c.get("task_mix")) or 0) > 0 else "text"
        return training, encoding({**r["model_config"], **c["model"]}), c.get("block_size")
    cells = cells_by_seed([(key(r), r) for r in sel], "training, encoding, length")
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
            "retrieval": retrieval, "learned": learned, "hope_pairs": hope_pairs(by_seed.values()),
            "attn_by_distance": attn_by_distance(ev.values()),
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
            cmp["score"] = paired_acc(c["score"]["per_seed"], ref["score"]["per_seed"])
            c["verdict"] = score_verdict(cmp["score"], reference, margin)
        c["vs_reference"] = cmp
    for (training, enc, block), c in out.items():
        base = out.get((training, BASELINES.get(enc), block))
        c["vs_baseline"] = posenc_baseline(c, base, margin) if base else None
    order = ENCODING_ORDER
    ordered = sorted(out.values(), key=lambda c: (c["training"], c["train_len"] or 0,
                                                 order.get(c["encoding"], len(order)), c["encoding"]))
    return {"gate": {"metric": "retrieval exact match at the training length", "threshold": gate},
            "reference": reference, "margin": margin, "cells": ordered,
            "excluded": [{"training": c["training"], "encoding": c["encoding"], "n": c["n"]}
                         for c in ordered if c["learned"] is False],
            "chunk_ablation": chunk_ablation(out, margin)}


def mean_loss(cell, lengths):
    """{seed: the cell's mean loss over the given evaluation lengths} (None for a seed missing one)."""
    by = {s: [cell["loss_by_length"][L]["per_seed"].get(s) for L in lengths] for s in cell["seeds"]}
    return {s: float(np.mean(v)) if v and None not in v else None for s, v in by.items()}


def posenc_baseline(c, base, margin):
    """posenc cells[].vs_baseline: a cell against its BASELINES encoding of the same training and length,
    paired over seeds: the loss at every length (training length included), the mean loss past
    training (loss_past, with the verdict on it, lower is better), and, when both learned retrieval,
    the score; None when there is neither."""
    lens = [L for L in c["loss_by_length"] if c["loss_by_length"][L]["mean"] is not None
            and (base["loss_by_length"].get(L) or {}).get("mean") is not None]  # text-trained cells only
    past = [L for L in lens if c["train_len"] and parse_int(L) > c["train_len"]]
    loss_past = paired_acc(mean_loss(c, past), mean_loss(base, past)) if past else None
    score = paired_acc(c["score"]["per_seed"], base["score"]["per_seed"]) if c["learned"] and base["learned"] else None
    if not lens and score is None:
        return None
    return {"baseline": base["encoding"],
            "loss": {L: paired_acc(c["loss_by_length"][L]["per_seed"], base["loss_by_length"][L]["per_seed"]) for L in lens},
            "loss_past": loss_past,
            "loss_verdict": score_verdict(loss_past, base["encoding"], margin, lower_is_better=True) if past else None,
            "score": score, "score_verdict": score_verdict(score, base["encoding"], margin) if score else None}


def chunk_ablation(cells, margin=0.05, full="chunk"):
    """posenc.chunk_ablation: each cell with one of chunk attention's principles removed
    (CHUNK_ABLATIONS) against the full chunk model's cell of the same training and length, paired over
    seeds. Text-trained cells: the loss at each length past training and its mean over those lengths
    (loss_past; lower is better). Retrieval-trained cells: the retrieval score and exact match per task
    and length past training, compared only when both learned retrieval in distribution (the full
    model's ability is shown before an ablation's effect on it is read); an ablation that did not learn
    it is reported as such."""
    rows = []
    for (training, enc, block), c in cells.items():
        ref = cells.get((training, full, block))
        flag = next((k for k, (_, suf) in CHUNK_ABLATIONS.items() if enc == full + suf), None)
        if flag is None or ref is None:
            continue
        cmp = {"score": None, "exact": {}, "loss": {}, "loss_past": None}
        if training == "text":  # loss by length past training, paired with the full chunk model's
            past = [L for L in c["loss_by_length"] if parse_int(L) > (c["train_len"] or 0) and L in ref["loss_by_length"]]
            cmp["loss"] = {L: paired_acc(c["loss_by_length"][L]["per_seed"], ref["loss_by_length"][L]["per_seed"])
                           for L in past}
            cmp["loss_past"] = paired_acc(mean_loss(c, past), mean_loss(ref, past))  # negative: lower without it
            verdict = (score_verdict(cmp["loss_past"], full, margin, lower_is_better=True) if past
                       else "no lengths past training")
        elif ref["learned"] is not True:
            verdict = f"no comparison: {full} retrieval not learned in distribution"
        elif c["learned"] is not True:
            verdict = "retrieval not learned in distribution without this principle"
        else:
            for t, r in c["retrieval"].items():
                for L, st in r["exact"].items():
                    if parse_int(L) > (c["train_len"] or 0) and L in ref["retrieval"].get(t, {}).get("exact", {}):
                        cmp["exact"][f"{t}@{L}"] = paired_acc(st["per_seed"], ref["retrieval"][t]["exact"][L]["per_seed"])
            cmp["score"] = paired_acc(c["score"]["per_seed"], ref["score"]["per_seed"])
            verdict = score_verdict(cmp["score"], full, margin)
        rows.append({"ablation": flag, "value": CHUNK_ABLATIONS[flag][0], "encoding": enc, "training": training,
                     "train_len": c["train_len"], "n": c["n"], "learned": c["learned"], "full_learned": ref["learned"],
                     "retrieval": c["retrieval"], "score": c["score"], "full_score": ref["score"],
                     "loss_by_length": c["loss_by_length"], "full_loss_by_length": ref["loss_by_length"],
                     "vs_full": cmp, "verdict": verdict})
    order = list(CHUNK_ABLATIONS)
    return sorted(rows, key=lambda r: (r["training"], r["train_len"] or 0, order.index(r["ablation"])))


def posenc_md(pe):
    if not (pe and pe["cells"]):
        return no_data("posenc")
    ref, gate = pe["reference"], f(pe['gate']['threshold'])
    how = ("Mean ± sd over seeds (evaluate.py). Loss: nats/token on the held-out plays in windows of L tokens; "
           f"Δ loss {ref}: mean over the lengths past training of the paired difference from {ref}'s (negative: "
           f"lower loss). Retrieval: exact match of the answer (rank among 5 in brackets); learned: mean exact "
           f"match at the training length >= {gate}; Δ {ref}: the score (mean exact match past training) minus "
           f"{ref}'s, paired over seeds (z, seeds higher/lower); verdict: better/worse when the paired t test over "
           f">= {MIN_SEEDS} seeds gives p < {f(BETTER_LEVEL)} and |Δ| >= {f(pe['margin'])}, else not distinguishable.")
    L = ["## 6. Positional encodings: train short, evaluate long", "", how, ""]
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
                               paired_cell(p),
                               c["verdict"]])
            L += table(["encoding", "seeds"] + [f"@{x}" for x in tl] + ["learned", "score", f"Δ {ref}", "verdict"],
                       rows) + [""]
    base = [c for c in pe["cells"] if c.get("vs_baseline")]
    if base:
        L += ["Beside the reference (`vs_baseline`, paired over seeds; loss: mean past training, lower is better):", ""]
        for c in base:
            b = c["vs_baseline"]
            L += [f"- {c['training']}: {c['encoding']} vs {b['baseline']}: " + "; ".join(
                x for x in (f"loss {paired_cell(b['loss_past'])}, {b['loss_verdict']}" if b["loss_verdict"] else "",
                            f"score {paired_cell(b['score'])}, {b['score_verdict']}" if b["score_verdict"] else "") if x)]
        L += [""]
    if pe["excluded"]:
        L += ["Retrieval cells excluded by the gate: " + ", ".join(f"{x['training']}/{x['encoding']}"
                                                                for x in pe["excluded"]) + ".", ""]
    return L + chunk_ablation_md(pe.get("chunk_ablation"))


def chunk_ablation_md(rows):
    if not rows:
        return []
    L = ["### Chunk attention: one principle removed at a time (arXiv 2510.17196)", "",
         "Text-trained: loss by length of each ablated model (the full chunk model's in brackets), the paired "
         "difference of the mean loss past training (negative: lower without the principle). Retrieval-trained: "
         "exact match by length, the score (mean exact match past training) beside the full chunk model's and "
         "their paired difference. z and seeds higher/lower in brackets; verdict by the one rule (paired t test "
         "over >= 3 seeds).", ""]
    out = []
    for r in rows:
        if r["training"] == "text":
            by = " / ".join(f"@{L} {f(st['mean'], '.3f')} ({f((r['full_loss_by_length'].get(L) or {}).get('mean'), '.3f')})"
                            for L, st in r["loss_by_length"].items())
            out.append([r["encoding"], f"{r['ablation']}={r['value']}", r["training"], str(r["n"]), by or "-",
                        "-", "-", paired_cell(r["vs_full"]["loss_past"]), r["verdict"]])
            continue
        ex = " / ".join(f"{t}@{L} {f(st['mean'], '.2f')}" for t, v in r["retrieval"].items()
                        for L, st in v["exact"].items())
        out.append([r["encoding"], f"{r['ablation']}={r['value']}", r["training"], str(r["n"]), ex or "-",
                    pm(r["score"]), pm(r["full_score"]), paired_cell(r["vs_full"]["score"]), r["verdict"]])
    return L + table(["encoding", "removed", "training", "seeds", "by length", "score", "full chunk score",
                      "Δ chunk", "verdict"], out) + [""]


def posenc_plots(rep):
    """posenc_length.png: per training (text / task mix) the loss and each retrieval task's exact match
    by evaluation length, one line per encoding."""
    pe = rep["posenc"]
    if not (pe and pe["cells"]):
        return []
    panels = []  # (title, ylabel, [(cell, {length: stats})])
    for training in dict.fromkeys(c["training"] for c in pe["cells"]):
        cs = [c for c in pe["cells"] if c["training"] == training]
        if any(v["mean"] is not None for c in cs for v in c["loss_by_length"].values()):
            panels.append((f"{training}: loss", "loss (nats/token)", [(c, c["loss_by_length"]) for c in cs]))
        for t in sorted({t for c in cs for t in c["retrieval"]}):
            panels.append((f"{training}: {t}", "exact match", [(c, c["retrieval"][t]["exact"])
                                                               for c in cs if t in c["retrieval"]]))
    fig, axs = figures(len(panels), 4.5)
    colour = {}
    for ax, (title, ylabel, series) in zip(axs[0], panels):
        by_length_panel(ax, [(c["encoding"], c["encoding"], c["learned"] is not False,
                              [(parse_int(L), v) for L, v in by_len.items()]) for c, by_len in series],
                        colour, clip=ylabel == "exact match")
        tl = next((c["train_len"] for c, _ in series if c["train_len"]), None)
        if tl:
            ax.axvline(tl, color="grey", ls=":", lw=1)
        ax.set(title=title, xlabel="evaluation length (tokens)", ylabel=ylabel, xscale="log")
        lengths = sorted({parse_int(L) for _, by_len in series for L in by_len})
        ax.set_xticks(lengths, [str(L) for L in lengths])  # the evaluated lengths, not 2x10^2 ...
        ax.minorticks_off()
    return [("posenc_length.png", fig)]

# =============================================================================
# the registry of studies and the command line

# study -> (its sections from (runs, args), their markdown, their plots [(file name, figure)]).
# sweep.sh's qat-probes is analysed by the qat block, together with the grid (ALIASES).
STUDIES = {
    "qat": (qat_study, qat_markdown, qat_plots),
    "longctx": (lambda runs, a: {"longctx": longctx_report(runs)}, lambda rep: longctx_md(rep["longctx"]),
                longctx_plots),
    "lengen": (lambda runs, a: {"lengen": lengen_report(runs, a.lengen_gate, a.lengen_margin)},
               lambda rep: lengen_md(rep["lengen"]), lengen_plots),
    "posenc": (lambda runs, a: {"posenc": posenc_report(runs, a.lengen_gate, a.lengen_margin)},
               lambda rep: posenc_md(rep["posenc"]), posenc_plots),
}
ALIASES = {"qat-probes": "qat"}


def study_of(run, runs, extended=()):
    """The study a run belongs to when --study does not say: an algorithmic run is lengen's; a text
    run given a positional flag (POSENC_FLAGS), or an extension of one, is posenc's; another
    extension, a pretraining run that was extended (id in `extended`) or a text run with an
    eval.json is longctx's; any other text run is qat's."""
    kind = run_kind(run)
    if kind == "algo":
        return "lengen"
    root = (lineage_root(run, runs)[0] if kind == "extension" else None) or run
    if any(k in root["config"]["model"] for k in POSENC_FLAGS):
        return "posenc"
    if kind == "extension" or isinstance(run.get("eval"), dict) or id(run) in extended:
        return "longctx"
    return "qat"


def runs_by_study(runs, selected=None):
    """{study: its runs}: with one study selected, every run; else each run by study_of, keeping the
    selected studies (default: every study with runs)."""
    if selected and len(selected) == 1:
        return {selected[0]: runs}
    extended = {id(lineage_root(r, runs)[0]) for r in runs if run_kind(r) == "extension"}
    by = defaultdict(list)
    for r in runs:
        by[study_of(r, runs, extended)].append(r)
    return {s: by[s] for s in STUDIES if by[s] and (selected is None or s in selected)}


def no_data(name):
    return [f"_{name}: no data._", ""]


def parse_studies(text):
    """--study NAME[,NAME] -> study names of STUDIES (aliases resolved, order kept)."""
    names = [ALIASES.get(s.strip(), s.strip()) for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in STUDIES]
    if bad or not names:
        raise UserError(f"--study {text!r}: unknown study {', '.join(bad) or '(none given)'} "
                        f"(choose from: {', '.join(list(STUDIES) + list(ALIASES))})")
    return list(dict.fromkeys(names))


def analyse(runs, args):
    """(report, markdown lines, [(plot file, figure)]) of the selected studies over the runs."""
    mine = runs_by_study(runs, parse_studies(args.study) if args.study else None)
    _, skipped = records(runs)
    rep = {"n_runs": len(runs), "studies": {s: len(rs) for s, rs in mine.items()},
           "n_skipped_qat": skipped["missing"], "n_algo": skipped["algo"], "n_extension": skipped["extension"],
           "n_no_comparison": skipped["single"]}
    lines = [f"# Analysis of {len(runs)} runs", "",
             f"Folders: {', '.join(args.folders)}. Studies: "
             + (", ".join(f"{s} ({len(rs)} runs)" for s, rs in mine.items()) or "none") + ".", ""]
    if "qat" in mine:
        other = [f"{n} {what}" for n, what in ((skipped["algo"], "algorithmic-task runs (config.algo)"),
                                               (skipped["extension"], "context extensions (lineage)"),
                                               (skipped["single"], "runs with one bit-width and one warmdown in "
                                                                   "their variant and size (nothing to compare)")) if n]
        lines += [f"{skipped['missing']} runs lack one of config.bits/size/lr/warmdown/seed or metrics.val_loss and "
                  f"are not in the QAT tables" + (f"; neither are {' and '.join(other)}." if other else "."), ""]
    figs = []
    for name, rs in mine.items():
        study, markdown, plots = STUDIES[name]
        part = study(rs, args)  # a UserError (bad flag for this study) stops the whole analysis
        rep.update(part)
        try:  # one broken section must not take the others down
            lines += markdown(part)
            figs += plots(part) if not args.no_plots else []
        except Exception as e:
            warn(f"{name} section skipped: {type(e).__name__}: {e}")
            lines += [f"_{name}: skipped ({type(e).__name__}: {e})._", ""]
    return rep, lines, figs


def save_figures(figs, outdir):
    """Write each figure to outdir; returns the names written. A failed plot is a warning, never a crash."""
    import matplotlib.pyplot as plt
    written = []
    for name, fig in figs:
        try:
            fig.tight_layout()
            fig.savefig(os.path.join(outdir, name), dpi=120)
            written.append(name)
        except Exception as e:
            warn(f"plot {name} skipped: {type(e).__name__}: {e}")
        plt.close(fig)
    return written


def main(argv=None):
    ap = OneLineParser(description="Statistics and reports over result.json / eval.json files.")
    ap.add_argument("folders", nargs="+", help="folders searched recursively for result.json")
    ap.add_argument("--study", default=None,
                    help="comma list of studies to analyse (" + ", ".join(list(STUDIES) + list(ALIASES)) +
                         "); one study: every run read is its own (sweep.sh --post passes it). Default: each "
                         "run's study from its record, every study that has runs")
    ap.add_argument("--out", default=None, help="output folder (default: the first folder)")
    ap.add_argument("--fit_sizes", default=None,
                    help="qat: comma list of size names for the penalty fit; the rest are held out "
                         "(default: all but the two extreme sizes if >= 5 sizes, else all)")
    ap.add_argument("--level", type=finite_float, default=0.95, help="prediction-interval level, in (0, 1)")
    ap.add_argument("--ref_lr", type=finite_float, default=1.0, help="qat: LR of the cell where the penalty is measured")
    ap.add_argument("--ref_warmdown", type=finite_float, default=0.33,
                    help="qat: warmdown of the cell where the penalty is measured")
    ap.add_argument("--lengen_gate", type=finite_float, default=0.9,
                    help="lengen, posenc: a (task, encoding) cell enters the extrapolation verdict only when its "
                         "mean in-distribution exact match over seeds is >= this")
    ap.add_argument("--lengen_margin", type=finite_float, default=0.05,
                    help="lengen, posenc: smallest mean gain (or loss) of exact match past N against RoPE "
                         "that counts as better (worse), with the paired t test over >= 3 seeds at p < 0.05")
    ap.add_bool("--no_plots", False, "skip the PNG plots")
    args = ap.parse_args(argv)
    if not 0 < args.level < 1:
        ap.error(f"--level {args.level:g} must be in (0, 1)")
    missing = [d for d in args.folders if not os.path.isdir(d)]
    if missing:
        warn(f"no such folder: {', '.join(missing)}")
        return 2
    runs = load_runs(args.folders)
    if not runs:
        warn(f"nothing to analyse: no readable result.json under {', '.join(args.folders)}")
        return 2
    try:
        rep, lines, figs = analyse(runs, args)
    except UserError as e:
        warn(str(e))
        return 2
    out = args.out or args.folders[0]
    try:
        os.makedirs(out, exist_ok=True)
        if not args.no_plots:
            rep["plots"] = save_figures(figs, out)
        md = "\n".join(lines) + "\n"
        atomic_write(os.path.join(out, "analysis.md"), md)
        atomic_write(os.path.join(out, "analysis.json"), json.dumps(clean(rep), indent=1, allow_nan=False) + "\n")
    except OSError as e:
        warn(f"cannot write to {out}: {e}")
        return 1
    print(md, end="")
    print(f"wrote {os.path.join(out, 'analysis.md')} and analysis.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
