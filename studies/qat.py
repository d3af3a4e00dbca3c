"""
The qat study (sweep.sh qat and qat-probes): the QAT schedule grid, the penalty law, the grid distance.
The loss by warmdown per (bits, size[, lr]) with per-seed values, the bits x warmdown interaction as a
repeated-measures test, the INT4 transition, the quantisation penalty law P_b(N) with prediction
intervals at held-out sizes and its lack of fit, the law in N and D, and the weight-to-grid distance;
every verdict decided in one declared family (qat_family: Holm, the one rule). Reads top to bottom:
what it reads (records), its report, its family, its plots, then the confirmatory waves' outcomes (the
functions studies/waves/*.toml name). Its markdown: studies/qat_md.py.
"""
import math
from collections import defaultdict

import numpy as np

from cli import UserError
from studies.stats import (BETTER_LEVEL, decide_family, lack_of_fit_f, loglinear_fit, loglinear_nd_fit, model_hypothesis,
                   coef_mde, lack_of_fit_mde, ols, ols_coef_tests, paired_hypothesis, paired_p, paired_z,
                   predict_interval, predict_nd, repeated_measures_f, rm_anova_mde, sd1, seed_noise_check,
                   bartlett, equivalence_hypothesis, pooled_rm_f, rm_gg)
from studies.decisions import lof_equivalence, noninferior_iut, pi_criterion
from studies.common import (VARIANT_KEYS, f, figures, num, parse_size, run_kind, size_label, variant_fields, vtag,
                            warn)

# The QAT seed's reference warmdown (its schedule of record: the penalty law is measured there, analyze.py
# --ref_warmdown's default) and the short warmdown the INT4 transition tests it against (wd33 vs wd10).
REF_WARMDOWN, SHORT_WARMDOWN = 0.33, 0.1
# The QAT seed's null, "the best warmdown does not depend on the bit-width", as an equivalence test:
# every change of the penalty (INT-b - FP16) from the reference warmdown lies within +-QAT_MARGIN nats.
# Declared before the confirmatory runs: a quarter of the smallest INT4 penalty of the tiny grid at wd
# 0.33 (+0.023 at 14K in the pilot is the INT4 penalty's floor; 0.01 is under half of it), and the size of
# the FP16 warmdown effects the study reads as "moves" (0.011-0.032 nats between warmdowns).
QAT_MARGIN = 0.01


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
    """{warmdown: {seed: loss}} -> (the warmdown with the lowest mean, one row per warmdown: mean, sd, n,
    its per-seed losses, and the paired t statistic z, raw p (n - 1 dof) and wins of the lowest against
    it over matched seeds: descriptive, outside the study's family)."""
    means = {w: float(np.mean(list(v.values()))) for w, v in by_wd.items()}
    best = min(means, key=means.get)
    rows = []
    for w in sorted(by_wd):
        v = np.array(list(by_wd[w].values()))
        seeds = sorted(set(by_wd[w]) & set(by_wd[best]))
        pz = paired_z([by_wd[w][s] for s in seeds], [by_wd[best][s] for s in seeds])
        rows.append({"warmdown": w, "n": len(v), "mean": means[w], "sd": sd1(v),
                     "delta": means[w] - means[best], "z": None if w == best else pz["z"],
                     "p": None if w == best else paired_p(pz["z"], pz["n"]),
                     "best_wins": pz["wins_b"], "n_paired": pz["n"], "per_seed": dict(sorted(by_wd[w].items()))})
    return best, rows


def qat_report(recs, order, ref_warmdown=REF_WARMDOWN):
    """cells: per (variant, bits, size, lr), the loss by warmdown (mean, sd, per seed), the warmdown with
    the lowest mean and the paired t of it against each other warmdown, matched on seed.
    verdict: per (variant, bits, size), each warmdown at its own best LR (the LR a practitioner would
    tune for that schedule), the lowest-mean warmdown, and whether it is FP16's at that size. A variant
    with one warmdown only (the cosine probe) has no verdict: it is descriptive. The tested statements
    (interaction, int4_transition, moves) enter the study's family (qat_family)."""
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
    return {"cells": out, "verdict": verdict, "interaction": interaction_rows(at_best, order, fp16_at, ref_warmdown),
            "int4_transition": int4_transition(at_best, order, ref_warmdown),
            "moves": warmdown_moves(at_best, order, ref_warmdown),
            "lr_rule": "verdict: each warmdown at its own best LR (mean over seeds), then the lowest-mean warmdown; "
                       "FP16 beside INT-b (fp16_best_warmdown, interaction): FP16 over the LRs INT-b was run at"}


def best_lrs(by_lr, allowed):
    """{warmdown: the LR of allowed with the lowest mean loss over seeds} (by_lr: lr -> warmdown -> seed -> loss)."""
    wds = sorted({w for lr in by_lr if lr in allowed for w in by_lr[lr]})
    return {w: min((lr for lr in by_lr if lr in allowed and w in by_lr[lr]),
                   key=lambda lr: np.mean(list(by_lr[lr][w].values()))) for w in wds}


def interaction_rows(at_best, order, fp16_at=None, ref=REF_WARMDOWN):
    """Per (variant, size, bits b < 16): the bits x warmdown interaction as a repeated-measures test
    (stats.repeated_measures_f): per seed the penalty INT-b loss - FP16 loss at each warmdown (each at
    its own best LR), over the seeds every one of those cells has, tested for a change over warmdowns
    with seeds as blocks (a seed's bit-width effect is its block, so it is not in the error). The QAT
    seed's null: the penalty does not depend on the warmdown. Beside it the difference in differences
    (penalty at each warmdown - at ref) with its t interval over seeds. at_best: (variant, bits, size)
    -> warmdown -> seed -> loss; fp16_at: the same key -> FP16 at the LRs that INT-b was run at."""
    rows = []
    for (v, b, s) in sorted(at_best, key=lambda k: (k[0], order[k[2]], -k[1])):
        fp = (fp16_at or {}).get((v, b, s), at_best.get((v, 16, s)))
        if b == 16 or fp is None:
            continue
        q = at_best[(v, b, s)]
        wds = sorted(set(fp) & set(q))
        seeds = sorted(set.intersection(*(set(g[w]) for g in (fp, q) for w in wds))) if wds else []
        if len(wds) < 2 or len(seeds) < 2:
            continue
        pen = {sd: {w: q[w][sd] - fp[w][sd] for w in wds} for sd in seeds}
        t = repeated_measures_f([[pen[sd][w] for w in wds] for sd in seeds])
        r = ref if ref in wds else wds[0]
        did = []
        for w in wds:
            if w != r:
                h = paired_hypothesis("", {sd: pen[sd][w] - pen[sd][r] for sd in seeds})
                did.append({"warmdown": w, "against": r, **{k: h[k] for k in ("n", "effect", "sd", "ci", "p")}})
        rows.append({"variant": v, "size": s, "bits": b, "warmdowns": wds, "n_seeds": len(seeds), "ref_warmdown": r,
                     "penalty_means": t["means"], "F": t["F"], "df1": t["df1"], "df2": t["df2"], "p": t["p"],
                     "ms_error": t["ms_error"], "did": did, "per_seed": pen})
    return rows


def transition_row(cell, short, ref):
    """INT-b at the short warmdown against ref over matched seeds: d = loss(short) - loss(ref) per seed
    (> 0: ref lower), its mean, t interval, the paired t statistic (z) and raw p, and ref's wins."""
    seeds = sorted(set(cell[short]) & set(cell[ref]))
    h = paired_hypothesis("", {sd: cell[short][sd] - cell[ref][sd] for sd in seeds})
    pz = paired_z([cell[short][sd] for sd in seeds], [cell[ref][sd] for sd in seeds])
    return {"n": h["n"], "mean_diff": h["effect"], "ci": h["ci"], "sd": h["sd"], "p": h["p"],
            "z": None if math.isnan(pz["z"]) else pz["z"], "wins": pz["wins_b"], "per_seed": h["per_seed"]}


def int4_transition(at_best, order, ref=REF_WARMDOWN, short=SHORT_WARMDOWN):
    """The QAT seed's INT4 transition (wd 0.33 better from 50M, noise below): per variant and size, INT4
    at the reference warmdown ref (--ref_warmdown) against the short one (each at its best LR), the
    paired t test over seeds (transition_row). Each row is one hypothesis of the study's family:
    qat_family adds p_holm and passed (ref lower, Holm-adjusted p < 0.05 over >= 3 seeds) and from_size,
    the smallest size from which every larger size passed. None without INT4."""
    out = []
    for v in sorted({k[0] for k in at_best if k[1] == 4}):
        rows = [{"size": s, **transition_row(at_best[(v, 4, s)], short, ref)}
                for s in sorted((k[2] for k in at_best if k[:2] == (v, 4)), key=order.get)
                if short in at_best[(v, 4, s)] and ref in at_best[(v, 4, s)]]
        if rows:
            out.append({"variant": v, "ref_warmdown": ref, "short_warmdown": short, "rows": rows, "from_size": None})
    return out or None


def warmdown_moves(at_best, order, ref=REF_WARMDOWN, short=SHORT_WARMDOWN):
    """"The best warmdown moves with size" as a tested contrast, not an argmin: per (variant, bits) with
    the short and the ref warmdown at >= 2 sizes, the gain of ref over short, g = loss(short) - loss(ref)
    per seed, at the largest size minus at the smallest (a difference in differences), paired over the
    seed numbers both sizes have (independent runs: the pairing blocks only what a seed shares across
    sizes, such as its data order; the paired t stays valid, on n - 1 dof)."""
    out = []
    for v, b in sorted({k[:2] for k in at_best}, key=lambda t: (t[0], -t[1])):
        sizes = [s for s in sorted((k[2] for k in at_best if k[:2] == (v, b)), key=order.get)
                 if short in at_best[(v, b, s)] and ref in at_best[(v, b, s)]]
        if len(sizes) < 2:
            continue
        gain = {s: {sd: at_best[(v, b, s)][short][sd] - at_best[(v, b, s)][ref][sd]
                    for sd in set(at_best[(v, b, s)][short]) & set(at_best[(v, b, s)][ref])} for s in (sizes[0], sizes[-1])}
        lo, hi = gain[sizes[0]], gain[sizes[-1]]
        h = paired_hypothesis("", {sd: hi[sd] - lo[sd] for sd in sorted(set(lo) & set(hi))})
        out.append({"variant": v, "bits": b, "small": sizes[0], "large": sizes[-1], "short_warmdown": short,
                    "ref_warmdown": ref, "gain_small": float(np.mean(list(lo.values()))),
                    "gain_large": float(np.mean(list(hi.values()))), **{k: h[k] for k in ("n", "effect", "sd", "ci", "p")},
                    "per_seed": h["per_seed"]})
    return out


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
                    "sd": sd1(pens[(v, b, s)]), "per_seed": dict(sorted(by_seed[(v, b, s)].items()))}
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
            g["lack_of_fit"] = law_lack_of_fit([pens[(v, b, s)] for s in fit_set],
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


def law_lack_of_fit(groups, fitted, n_coef=2):
    """stats.lack_of_fit_f of a law (per-seed penalties at each fit size or cell, the law's values there)
    plus rms: the root mean square deviation of the size means from the law, weighted by seeds,
    sqrt(sum n_i (mean_i - law_i)^2 / sum n_i) (nats): the effect its family row quotes."""
    t = lack_of_fit_f(groups, fitted, n_coef)
    if t:
        t["rms"] = math.sqrt(t["ms_lof"] * t["df1"] / sum(len(g) for g in groups))
    return t


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


def nd_law_tests(fit, fit_cells, level=0.95):
    """The N-D law's own tests: each exponent with its level interval and two-sided t p (the OLS of
    ln P on ln D and -ln N that loglinear_nd_fit solves, t on n - 3 dof: `coefs`), and its lack of fit
    against the pooled seed variance of the per-seed penalties (law_lack_of_fit in nats, 3 coefficients)."""
    X = np.column_stack([np.log([c["tokens"] for c in fit_cells]), -np.log([c["n_params"] for c in fit_cells])])
    o = ols(X, np.log([c["penalty"] for c in fit_cells]), ["gamma_D", "gamma_N"], level)
    law = [fit["k"] * c["tokens"] ** fit["gamma_D"] / c["n_params"] ** fit["gamma_N"] for c in fit_cells]
    return {"coefs": ols_coef_tests(o),
            "lack_of_fit": law_lack_of_fit([list(c["per_seed"].values()) for c in fit_cells], law, n_coef=3)}


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
                          "sd": sd1(per), "n": len(per), "role": "fit" if k[2] in fit_sizes else "held-out",
                          "per_seed": dict(sorted(pens[k].items()))})
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
            g.update(nd_law_tests(fit, fit_cells, level))
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
    the most penalty cells), paired over seeds: d = probe - grid per seed, the paired t test with its
    interval. Each row is a hypothesis of the study's family; qat_family writes its verdict."""
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
            a, g = pens[(v, b, s)], pens[(grid, b, s)]
            seeds = sorted(set(a) & set(g))
            h = paired_hypothesis("", {sd: a[sd] - g[sd] for sd in seeds})
            pz = paired_z([a[sd] for sd in seeds], [g[sd] for sd in seeds])
            rows.append({"variant": v, "against": grid, "bits": b, "size": s, "n": h["n"], "mean_diff": h["effect"],
                         "ci": h["ci"], "sd": h["sd"], "z": pz["z"], "p": h["p"], "wins": pz["wins_b"],
                         "losses": pz["wins_a"], "per_seed": h["per_seed"], "verdict": None})  # verdict: qat_family
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
                             n=len(seeds), d_qat=mq, d_fp16=mf, ratio=mq / mf if mf else None,
                             per_seed={sd: {"qat": q[sd], "fp16": fp.get(sd)} for sd in sorted(q)}))
    return {"rows": rows}


def qat_study(runs, args):
    """The three QAT sections over the runs' QAT-grid records (records), and the study's family of
    hypotheses (qat_family) under qat.family."""
    recs, _ = records(runs)
    order = size_order(recs)
    fit_sizes = [s.strip() for s in args.fit_sizes.split(",") if s.strip()] if args.fit_sizes else None
    unknown = set(fit_sizes or []) - set(order)
    if unknown:
        raise UserError(f"--fit_sizes names sizes with no QAT-grid runs: {', '.join(sorted(unknown))} "
                        f"(sizes present: {', '.join(sorted(order, key=order.get)) or 'none'})")
    rep = {"qat": qat_report(recs, order, args.ref_warmdown),
           "penalty_law": penalty_report(recs, order, fit_sizes, args.level, args.ref_lr, args.ref_warmdown),
           "grid_distance": grid_report(recs, order)}
    count = defaultdict(int)
    for x in recs:
        count[x["variant"]] += 1
    rep["qat"]["family"] = qat_family(rep["qat"], rep["penalty_law"], max(sorted(count), key=count.get) if count else "")
    return rep


def variant_label(v, grid):
    """A variant named by what differs from the grid's ('optimizer=adamw'); '' for the grid itself."""
    base = set(grid.split(","))
    return ",".join(p for p in v.split(",") if p and p not in base)


def interaction_tests(rows):
    """The interaction rows' tests from their per-seed penalties alone (so --refamily recomputes them):
    each row's repeated-measures F with the Greenhouse-Geisser correction (epsilon, p_gg: 3 warmdowns on
    3 seeds leave 4 error dof and no sphericity to assume), and as a robustness line its F against the
    error pooled over every row (pooled: F, df1, df2, p), valid only where the rows' error variances agree,
    which bartlett tests (-> the check, also returned)."""
    for r in rows:
        wds = r["warmdowns"]
        r["per_seed"] = {sd: {float(w): v for w, v in pen.items()} for sd, pen in r["per_seed"].items()}  # JSON: str keys
        y = [[r["per_seed"][sd][w] for w in wds] for sd in sorted(r["per_seed"])]
        t = rm_gg(y)
        r.update(F=t["F"], df1=t["df1"], df2=t["df2"], p=t["p"], ms_error=t["ms_error"], epsilon=t["epsilon"],
                 p_gg=t["p_gg"])
    for r, pooled in zip(rows, pooled_rm_f(rows)):
        r["pooled"] = pooled
    return bartlett([r["ms_error"] for r in rows], [r["df2"] for r in rows]) if rows else None


def verdict_rows(q, p):
    """Every report row a family hypothesis decides (interaction, transition, move, lack of fit, N-D
    coefficient, probe contrast): the rows that carry p_holm / passed / mde."""
    rows = list(q["interaction"]) + [r for t in q["int4_transition"] or [] for r in t["rows"]] + list(q["moves"])
    rows += [g["lack_of_fit"] for g in p["laws"] if g.get("lack_of_fit")]
    for g in p.get("laws_nd") or []:
        rows += list(g.get("coefs") or [])[1:] + ([g["lack_of_fit"]] if g.get("lack_of_fit") else [])
    return rows + list(p.get("variant_contrasts") or [])


def qat_family(q, p, grid=""):
    """The study's declared family: every statement its write-up decides, one hypothesis each, decided
    together by stats.decide_family (Holm within the family, the one rule: adjusted p < 0.05 over >= 3
    seeds). Per (variant, size, bits) the bits x warmdown interaction (repeated-measures F; effect: the
    largest change of the penalty from the reference warmdown, with its interval); per INT4 size the transition
    (wd ref against wd short, paired t); per bit-width whether the short-vs-ref gain moves with size;
    per law its lack of fit; the N-D law's exponents; each probe's penalty against the grid's. Beside a
    null, the effect its own test detects with 80% power at the strictest Holm step (a paired t's by
    decide_family; an F test's or a coefficient's by its `power` function: rm_anova_mde, lack_of_fit_mde,
    coef_mde). Each source row gains p_holm, passed and mde (and its verdict words: int4 from_size, the
    contrasts' verdict)."""
    lab = lambda v: (lambda t: f"[{t}] " if t else "")(variant_label(v, grid))
    bname = lambda b: "FP16" if b == 16 else f"INT{b}"
    # one family per hypothesis: with probe variants present (sweep.sh qat-probes reads the grid too), the
    # grid's own hypotheses belong to qat's family, and this one holds the probes' only
    # own: every hypothesis of another variant, and the grid variant's that rest on a cell the grid does not
    # run at every warmdown (the paper grid's INT4 sizes and extra sizes come from the probes)
    probes = any(c["variant"] != grid for c in q.get("cells") or [])
    wds = defaultdict(set)
    for c in q.get("cells") or []:
        if c["variant"] == grid:
            wds[(c["bits"], c["size"])] |= {w["warmdown"] for w in c["warmdowns"]}
    full = max((len(w) for w in wds.values()), default=0)
    grid_cells = {k for k, w in wds.items() if len(w) == full}
    mine = lambda v, *cells: not probes or v != grid or any(c not in grid_cells for c in cells)
    q["family_scope"] = "probes" if probes else "grid"
    at = lambda r: (r["bits"], r["size"])
    for row in verdict_rows(q, p):  # a stored row another family decides keeps no verdict of an earlier analysis
        for k in ("p_holm", "passed", "mde"):
            row.pop(k, None)
    q["interaction_pooling"] = interaction_tests([r for r in q["interaction"] if mine(r["variant"], at(r))])
    interaction_tests([r for r in q["interaction"] if not mine(r["variant"], at(r))])  # decided in qat's family
    pairs = []  # (hypothesis, the report row it decides)
    for r in (r for r in q["interaction"] if mine(r["variant"], at(r))):
        big = max(r["did"], key=lambda d: abs(d["effect"] or 0))
        cell = f"{lab(r['variant'])}INT{r['bits']} at {r['size']}"
        h = model_hypothesis(
            f"{cell}: the penalty (INT{r['bits']} - FP16) changes over "
            f"warmdowns {'/'.join(f(w) for w in r['warmdowns'])} (bits x warmdown interaction)",
            f"repeated-measures F({r['df1']}, {r['df2']}), seeds as blocks, Greenhouse-Geisser p (epsilon "
            f"{f(r['epsilon'], '.2f')}); effect: penalty at wd {f(big['warmdown'])} - at wd {f(big['against'])}",
            r["n_seeds"], big["effect"], big["ci"], r["p_gg"],
            plan={"ms_error": r["ms_error"], "df2": r["df2"], "k": len(r["warmdowns"])})
        pairs.append((dict(h, power=lambda a, r=r: rm_anova_mde(r["ms_error"], r["n_seeds"], len(r["warmdowns"]), a)), r))
        ref = r["ref_warmdown"]
        eq = equivalence_hypothesis(
            f"{cell}: the penalty is the same at every warmdown, within +-{f(QAT_MARGIN)} nats of wd {f(ref)} "
            "(the seed's null, no bits x warmdown interaction)",
            {f"wd {f(w)} - wd {f(ref)}": {sd: p[w] - p[ref] for sd, p in r["per_seed"].items()}
             for w in r["warmdowns"] if w != ref}, QAT_MARGIN)
        pairs.append((eq, r.setdefault("equivalence", {})))
    for t in q["int4_transition"] or []:
        for r in (r for r in t["rows"] if mine(t["variant"], (4, r["size"]))):
            pairs.append((model_hypothesis(
                f"{lab(t['variant'])}INT4 at {r['size']}: wd {f(t['short_warmdown'])} against wd {f(t['ref_warmdown'])} "
                f"(loss at {f(t['short_warmdown'])} - at {f(t['ref_warmdown'])}; higher: wd {f(t['ref_warmdown'])} lower)",
                "paired t over seeds", r["n"],
                r["mean_diff"], r["ci"], r["p"], sd=r["sd"], per_seed=r["per_seed"]), r))
    for r in (r for r in q["moves"] if mine(r["variant"], (r["bits"], r["small"]), (r["bits"], r["large"]))):
        pairs.append((model_hypothesis(
            f"{lab(r['variant'])}{bname(r['bits'])}: the gain of wd {f(r['ref_warmdown'])} over wd {f(r['short_warmdown'])} "
            f"changes from {r['small']} to {r['large']} (the best warmdown moves with size)",
            "paired t over seed numbers of the difference in differences", r["n"], r["effect"], r["ci"], r["p"],
            sd=r["sd"], per_seed=r["per_seed"]), r))
    for g in (g for g in p["laws"] if mine(g["variant"], *((g["bits"], z) for z in g["fit_sizes"]))):
        lf = g.get("lack_of_fit")
        if lf:
            n = min(r["n"] for r in g["sizes"] if r["role"] == "fit")
            total = sum(r["n"] for r in g["sizes"] if r["role"] == "fit")
            pairs.append((dict(model_hypothesis(
                f"{lab(g['variant'])}INT{g['bits']}: the penalty departs from the law alpha + beta ln N at its fit sizes "
                f"({', '.join(g['fit_sizes'])})", f"lack-of-fit F({lf['df1']}, {lf['df2']}) against the pooled seed "
                "variance; effect: RMS departure (nats)", n, lf["rms"], None, lf["p"],
                plan={"ms_pe": lf.get("ms_pe"), "df1": lf["df1"], "df2": lf["df2"], "n_total": total}),
                power=lambda a, lf=lf, total=total: lack_of_fit_mde(lf, total, a)), lf))
    for g in p.get("laws_nd") or []:
        if g.get("k") is None:
            continue
        n = min(c["n"] for c in g["cells"] if c["in_nd_fit"] and c["penalty"] > 0)
        for c in g["coefs"][1:]:
            what = {"gamma_D": "tokens D at fixed N", "gamma_N": "size N at fixed D"}[c["name"]]
            pairs.append((dict(model_hypothesis(
                f"{lab(g['variant'])}INT{g['bits']} N-D law: {c['name']} != 0 (the penalty changes with {what})",
                f"OLS t on {g['dof']} dof over the {g['n']} fit cells' mean penalties (log space)", n, c["est"],
                [c["lo"], c["hi"]], c["p"], plan={"se": c["se"], "dof": g["dof"]}),
                power=lambda a, c=c, dof=g["dof"]: coef_mde(c["se"], dof, a)), c))
        lf = g.get("lack_of_fit")
        if lf:
            total = sum(c["n"] for c in g["cells"] if c["in_nd_fit"] and c["penalty"] > 0)
            pairs.append((dict(model_hypothesis(
                f"{lab(g['variant'])}INT{g['bits']}: the penalty departs from the N-D law at its {g['n']} fit cells",
                f"lack-of-fit F({lf['df1']}, {lf['df2']}) against the pooled seed variance; effect: RMS departure (nats)",
                n, lf["rms"], None, lf["p"], plan={"ms_pe": lf.get("ms_pe"), "df1": lf["df1"], "df2": lf["df2"],
                                                    "n_total": total}),
                power=lambda a, lf=lf, total=total: lack_of_fit_mde(lf, total, a)), lf))
    for r in p.get("variant_contrasts") or []:
        pairs.append((model_hypothesis(
            f"{lab(r['variant'])}INT{r['bits']} at {r['size']}: the penalty differs from the grid's (probe - grid)",
            "paired t over seeds", r["n"], r["mean_diff"], r["ci"], r["p"], sd=r["sd"], per_seed=r["per_seed"]), r))
    fam = decide_family([h for h, _ in pairs], BETTER_LEVEL)
    fam["grid_variant"], fam["scope"], fam["margin"] = grid, q["family_scope"], QAT_MARGIN
    for h, (_, row) in zip(fam["hypotheses"], pairs):
        power = h.pop("power", None)  # an F or coefficient test: its own detectable effect, not a paired t's
        if power is not None:
            h["mde"] = power(fam["alpha"] / max(fam["m"], 1))
        row.update(p_holm=h["p_holm"], passed=h["passed"], mde=h["mde"])
        if h.get("margin") is not None:
            row.update(margin=h["margin"], p=h["p"], effect=h["effect"], ci90=h["ci"])
    for r in p.get("variant_contrasts") or []:
        r["verdict"] = ("smaller" if r["mean_diff"] < 0 else "larger") if r["passed"] else "not distinguishable"
    for t in q["int4_transition"] or []:
        for r in reversed(t["rows"]):  # ref lower at this size and every larger one (a row another family decides: stop)
            if not (r.get("passed") and r["mean_diff"] > 0):
                break
            t["from_size"] = r["size"]
    return fam


def qat_decide(rep):
    """The QAT family decided again from a stored report (analyze.py --refamily): the qat and penalty_law
    sections -> the same sections with the family and the rows' verdict fields."""
    q, p = rep["qat"], rep["penalty_law"]
    q["family"] = qat_family(q, p, (q.get("family") or {}).get("grid_variant", ""))
    return {"qat": q, "penalty_law": p}


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


# -----------------------------------------------------------------------------
# The confirmatory waves' outcomes (studies/waves/*.toml `outcome_fn = "qat.NAME"`, with its `args`), from a
# report (the stored pilot's, or the wave's own): {"per_seed": {seed: value}} (a t over seeds) or {"contrasts":
# {name: {seed: d}}} (TOST), with "gated_out": the seeds a gate dropped.

GRID = {"schedule": "wsd", "optimizer": "muon", "budget": "x1"}  # the grid's cell, however records() names it


def _cell(rep, bits, size, wd, schedule="wsd"):
    """{seed: deployed loss} of the grid's cell (LR 1, Muon, the x1 budget) at bits, size, warmdown and schedule:
    no variant, or one naming only these (wave 5's folder holds cosine runs beside the grid: schedule=wsd)."""
    for c in rep.get("qat", {}).get("cells", []):
        v = dict(p.split("=", 1) for p in (c.get("variant") or "").split(",") if "=" in p)
        if set(v) <= set(GRID) and {**GRID, **v} == dict(GRID, schedule=schedule) and \
                (c["bits"], c["size"], c.get("lr")) == (bits, size, 1.0):
            for w in c["warmdowns"]:
                if abs(w["warmdown"] - wd) < 1e-9:
                    return w["per_seed"]
    return {}


def _penalty(rep, bits, size, wd, schedule="wsd"):
    q, fp = _cell(rep, bits, size, wd, schedule), _cell(rep, 16, size, wd, schedule)
    return {s: q[s] - fp[s] for s in q if s in fp and q[s] is not None and fp[s] is not None}


def null_contrasts(rep, bits, sizes):
    """The seed's null at each size: the penalty (INT-bits - FP16) at wd 0.1 and at 0.6 minus at 0.33."""
    out = {}
    for size in sizes:
        ref = _penalty(rep, bits, size, 0.33)
        for wd in (0.1, 0.6):
            p = _penalty(rep, bits, size, wd)
            out[f"{size} wd{wd:g}"] = {s: p[s] - ref[s] for s in p if s in ref}
    return {"contrasts": out}


def wd_gain(rep, bits, size):
    """Per seed the loss at wd 0.1 minus at wd 0.33 (+ = wd 0.33 lower)."""
    a, b = _cell(rep, bits, size, 0.1), _cell(rep, bits, size, 0.33)
    return {"per_seed": {s: a[s] - b[s] for s in a if s in b}}


def transition(rep, size):
    """Per seed INT4's wd_gain minus FP16's: what of wd 0.33's gain is specific to quantisation."""
    g4, g16 = wd_gain(rep, 4, size)["per_seed"], wd_gain(rep, 16, size)["per_seed"]
    return {"per_seed": {s: g4[s] - g16[s] for s in g4 if s in g16}}


def law_departures(rep, fit, at):
    """{size in at: {seed: penalty - the seed's own alpha + beta ln N fitted at the sizes `fit`}}, INT4 at wd
    0.33, seeds holding every size; the seeds dropped for a missing size are gated out."""
    sizes = tuple(dict.fromkeys(list(fit) + list(at)))
    pens = {z: _penalty(rep, 4, z, 0.33) for z in sizes}
    every = set.union(*(set(p) for p in pens.values())) if pens else set()
    keep = set.intersection(*(set(p) for p in pens.values())) if all(pens.values()) else set()
    out = {z: {} for z in at}
    x = np.log([parse_size(z) for z in fit])
    for s in keep:
        coef = np.polyfit(x, [pens[z][s] for z in fit], 1)
        for z in at:
            out[z][s] = float(pens[z][s] - np.polyval(coef, np.log(parse_size(z))))
    return {"contrasts": {f"departure at {z}": v for z, v in out.items()},
            "gated_out": [str(s) for s in sorted(every - keep, key=str)]}


def grid_ratio(rep, size):
    """Per seed ln(INT4-QAT weights' mean distance to the INT4 grid / FP16's), pre-warmdown (wd 0.33's warmdown
    checkpoint); a seed whose FP16 distance is outside 0.2-0.3 (the no-snapping baseline 0.25) is gated out."""
    rows = [r for r in (rep.get("grid_distance") or {}).get("rows", [])
            if r.get("key") == "overall" and r.get("size") == size and r.get("bits") == 4 and not r.get("variant")
            and abs(r.get("warmdown", 0) - 0.33) < 1e-9]
    per = rows[0]["per_seed"] if rows else {}
    ok = {s: v for s, v in per.items() if v.get("fp16") and v.get("qat") and 0.2 <= v["fp16"] <= 0.3}
    return {"contrasts": {"ln ratio": {s: float(np.log(v["qat"] / v["fp16"])) for s, v in ok.items()}},
            "gated_out": [str(s) for s in sorted(set(per) - set(ok))]}


def best_warmdown(rep, bits, sizes, ref=0.33, others=(0.1, 0.6), ni_margin=None):
    """Wave 5: per (bit-width, size) cell and other warmdown w, per seed the deployed loss at w minus at ref (+: ref
    lower): qat-1's 'the optimal warmdown is 33% at every cell', and with one bit-width and w 0.1 qat-7's 'no
    schedule preference' on the loss itself (directional: decisions.directional_iut; a null: TOST); with ni_margin,
    qat-8's 'not a clean wd10 region': every contrast above -ni_margin (decisions.noninferior_iut)."""
    diff = lambda a, b: {s: a[s] - b[s] for s in a if s in b and None not in (a[s], b[s])}
    cs = {f"{'FP16' if b == 16 else f'INT{b}'} {z} wd{w:g}": diff(_cell(rep, b, z, w), _cell(rep, b, z, ref))
          for b in bits for z in sizes for w in others}
    return {"hypothesis": noninferior_iut("", cs, ni_margin)} if ni_margin else {"contrasts": cs}


def cosine_null(rep, bits, size, ref=0.33):
    """Wave 5, qat-3's schedule shape: per bit-width, per seed the penalty (INT-b - FP16) under cosine minus under
    WSD at `ref` (a cosine run records warmdown ref; its schedule ignores it)."""
    pc, pw = ({b: _penalty(rep, b, size, ref, sch) for b in bits} for sch in ("cosine", "wsd"))
    return {"contrasts": {f"INT{b} {size}": {s: pc[b][s] - pw[b][s] for s in pc[b] if s in pw[b]} for b in bits}}


def _law(rep, sizes, bits, wd):
    """({size: {seed: penalty}} on the seeds holding every size, {size: N} (the penalty law's, else the name),
    the seeds dropped for a missing size)."""
    pens = {z: p for z in sizes for p in [_penalty(rep, bits, z, wd)] if p}  # a size without runs is left out
    every, keep = set().union(*map(set, pens.values())), set.intersection(*map(set, pens.values()))
    ns = {r["size"]: r["n_params"] for law in (rep.get("penalty_law") or {}).get("laws", []) for r in law["sizes"]}
    return ({z: {s: p[s] for s in keep} for z, p in pens.items()}, {z: ns.get(z) or parse_size(z) for z in pens},
            [str(s) for s in sorted(every - keep, key=str)])


def law_lof(rep, sizes, bits=3, wd=0.33, margin=QAT_MARGIN, slope=True):
    """Wave 5, qat-4: the penalty at wd over `sizes` tested for lack of fit about alpha + beta ln N, seeds as blocks,
    decided both ways at an rms departure of `margin`, and (slope) beta's interval excluding 0 (lof_equivalence)."""
    pens, ns, out = _law(rep, sizes, bits, wd)
    return {"hypothesis": lof_equivalence("", pens, {z: math.log(n) for z, n in ns.items()}, margin, slope=slope), "gated_out": out}


def law_pi(rep, fit, held, bits=3, wd=0.33, margin=QAT_MARGIN):
    """Wave 5, qat-5 by the seed's own criterion: the law fitted on the fit sizes' seed means, each held-out size's
    mean inside its 95% prediction interval (decisions.pi_criterion)."""
    pens, ns, out = _law(rep, list(fit) + list(held), bits, wd)
    return {"hypothesis": pi_criterion("", pens, ns, [z for z in fit if z in ns], [z for z in held if z in ns], margin),
            "gated_out": out}
