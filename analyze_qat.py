"""
The qat study (sweep.sh qat and qat-probes): the QAT schedule grid, the penalty law, the grid distance.
Best warmdown per (bits, size[, lr]) with paired z over seeds, the quantisation penalty law P_b(N)
with prediction intervals at held-out sizes, and the weight-to-grid distance. Reads top to bottom:
what it reads (records), its report, its markdown, its plots.
"""
import math
from collections import defaultdict

import numpy as np

from cli import UserError
from stats import (BETTER_LEVEL, MIN_SEEDS, distinguishable, interaction_f, lack_of_fit_f, loglinear_fit,
                   loglinear_nd_fit, paired_acc, paired_z, predict_interval, predict_nd, sd1, seed_noise_check)
from studyio import (VARIANT_KEYS, f, figures, no_data, num, parse_size, run_kind, size_label, table,
                     variant_fields, vtag, warn)

# The QAT seed's reference warmdown (its schedule of record: the penalty law is measured there, analyze.py
# --ref_warmdown's default) and the short warmdown the INT4 transition tests it against (wd33 vs wd10).
REF_WARMDOWN, SHORT_WARMDOWN = 0.33, 0.1


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


def qat_report(recs, order, ref_warmdown=REF_WARMDOWN):
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
        best_lr = best_lrs(by_lr, by_lr)
        best, rows = warmdown_rows({w: by_lr[best_lr[w]][w] for w in wds})
        for r in rows:
            r["lr"] = best_lr[r["warmdown"]]
        verdict.append(dict(zip(("variant", "bits", "size"), key), best_warmdown=best, best_lr=best_lr[best],
                            lrs=sorted(by_lr), warmdowns=rows))
        at_best[key] = {w: by_lr[best_lr[w]][w] for w in wds}
    # like with like: FP16 against INT-b over the LRs both were run at (the paper's INT4 probes run LR 1
    # only while FP16 has four: its best-of-four would meet INT4's one)
    common = {k: {lr: by_wd for lr, by_wd in lrs[(k[0], 16, k[2])].items() if lr in lrs[k]}
              for k in at_best if k[1] != 16 and (k[0], 16, k[2]) in lrs}
    fp16_at = {k: {w: by_lr[lr][w] for w, lr in best_lrs(by_lr, lrs[k]).items()} for k, by_lr in common.items()}
    for c in verdict:
        k = (c["variant"], c["bits"], c["size"])
        fp = fp16_at.get(k) if c["bits"] != 16 else at_best[k]
        c["fp16_best_warmdown"] = warmdown_rows(fp)[0] if fp and len(fp) >= 2 else None
        c["same_as_fp16"] = None if c["fp16_best_warmdown"] is None else c["best_warmdown"] == c["fp16_best_warmdown"]
        if c["bits"] != 16:
            c["fp16_lrs"] = sorted(common.get(k, {}))
    return {"cells": out, "verdict": verdict, "interaction": interaction_rows(at_best, order, fp16_at),
            "int4_transition": int4_transition(at_best, order, ref_warmdown),
            "lr_rule": "verdict: each warmdown at its own best LR (mean over seeds), then the best warmdown; "
                       "FP16 beside INT-b (fp16_best_warmdown, interaction): FP16 over the LRs INT-b was run at"}


def best_lrs(by_lr, allowed):
    """{warmdown: the LR of allowed with the lowest mean loss over seeds} (by_lr: lr -> warmdown -> seed -> loss)."""
    wds = sorted({w for lr in by_lr if lr in allowed for w in by_lr[lr]})
    return {w: min((lr for lr in by_lr if lr in allowed and w in by_lr[lr]),
                   key=lambda lr: np.mean(list(by_lr[lr][w].values()))) for w in wds}


def interaction_rows(at_best, order, fp16_at=None):
    """Per (variant, size, bits b < 16): the two-way bit-width x warmdown ANOVA of FP16 and INT-b, each
    warmdown at its own best LR, over the seeds every one of those cells has (seed as a block): the
    interaction F tests whether the warmdown effect differs between the bit-widths (the QAT seed's
    null: it does not). at_best: (variant, bits, size) -> warmdown -> seed -> loss; fp16_at: the same
    key -> FP16 at the LRs that INT-b was run at (default: FP16 at its own best LRs)."""
    rows = []
    for (v, b, s) in sorted(at_best, key=lambda k: (k[0], order[k[2]], -k[1])):
        fp = (fp16_at or {}).get((v, b, s), at_best.get((v, 16, s)))
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


def int4_transition(at_best, order, ref=REF_WARMDOWN, short=SHORT_WARMDOWN, z_min=3.0):
    """The QAT seed's INT4 transition (wd 0.33 decisive from 50M, noise below): per variant and size,
    INT4 at the reference warmdown ref (--ref_warmdown) against the short one (each at its best LR),
    paired over seeds: z > 0 when ref has the lower loss, wins = seeds where it does; decisive when z >= z_min. from_size: the smallest size
    from which every larger INT4 size is decisive (null when the largest is not). None without INT4."""
    out = []
    for v in sorted({k[0] for k in at_best if k[1] == 4}):
        rows = []
        for s in sorted((k[2] for k in at_best if k[:2] == (v, 4)), key=order.get):
            c = at_best[(v, 4, s)]
            if short not in c or ref not in c:
                continue
            seeds = sorted(set(c[short]) & set(c[ref]))
            pz = paired_z([c[short][sd] for sd in seeds], [c[ref][sd] for sd in seeds])
            z = None if math.isnan(pz["z"]) else pz["z"]
            rows.append({"size": s, "n": pz["n"], "mean_diff": pz["mean_diff"], "z": z, "wins": pz["wins_b"],
                         "decisive": z is not None and z >= z_min})
        start = None
        for r in reversed(rows):
            if not r["decisive"]:
                break
            start = r["size"]
        if rows:
            out.append({"variant": v, "ref_warmdown": ref, "short_warmdown": short, "z_min": z_min, "rows": rows,
                        "from_size": start})
    return out or None


def default_fit_sizes(sizes):
    """Sizes sorted by N: hold out the two extremes when there are >= 5 (as the QAT seed held out
    sizes outside its fit range), else fit them all."""
    return sizes[1:-1] if len(sizes) >= 5 else list(sizes)


def penalty_report(recs, order, fit_sizes=None, level=0.95, ref_lr=1.0, ref_warmdown=REF_WARMDOWN):
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
    return {"qat": qat_report(recs, order, args.ref_warmdown),
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
        ref, short = f(t.get("ref_warmdown", REF_WARMDOWN)), f(t.get("short_warmdown", SHORT_WARMDOWN))  # older records
        L += [f"**INT4 transition** {vtag(t['variant'])}(wd {ref} against wd {short}, paired over seeds; z > 0: {ref} lower; "
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
