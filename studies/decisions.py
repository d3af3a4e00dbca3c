"""
Decisions that are not one mean of per-seed contrasts (studies/stats.py holds those), first declared by wave 5
(studies/waves/wave5.toml):

    directional_iut   every one of several per-seed contrasts lies in the declared direction (intersection-union)
    noninferior_iut   a one-sided null: every one of several per-seed contrasts lies above -margin
    lof_equivalence   a log-linear law's lack of fit over sizes, seeds as blocks, decided both ways at an rms departure
    pi_criterion      the QAT seed's own criterion for its law: held-out sizes inside their 95% prediction intervals

Each returns a hypothesis (the keys stats.paired_hypothesis returns) with `kind` ("iut", "ni", "lof", "pi") and
what `again` needs to decide it again from its stored values (studies/wave.py: redecide); `plan` plans the lof and
pi kinds (an iut is planned as the paired t of its deciding contrast, and iut_power gives the whole one's power).
A pi hypothesis is decided by the seed's rule, not by a p: its `rule` ({passed, refuted, words}) is read by
wave.in_declared_direction, and its p is None, so it is not counted in its family's Holm m. An ni or lof one is
passed by Holm in its family and refuted by its own rule (after_holm, applied there).
"""
import math

import numpy as np
from scipy import stats as scistats
from scipy.optimize import brentq

from studies.stats import PLAN_CONF, _first_n, loglinear_fit, paired_hypothesis, predict_interval, sd_upper


def _p(h):
    """A contrast's two-sided p; a contrast the same in every seed (no t) by the exact sign test (the wave's
    rule holm+sign), p = 2 * 0.5^n."""
    return h["p"] if h["p"] is not None or h["n"] < 2 else min(1.0, 2 * 0.5 ** h["n"])


def directional_iut(claim, contrasts, direction, sesoi=None):
    """"Every contrast lies in the declared direction" (+1 / -1) over k per-seed contrasts ({name: {seed: d}}), by
    the intersection-union test (Berger 1982): each contrast's paired t over seeds (n - 1 dof). When every mean lies
    in the declared direction, p = the largest p (no adjustment) and that contrast decides; when some mean lies
    against it, the one of those with the smallest p decides, p = min(1, k x its p) (Bonferroni over 'some contrast
    against'), so that its pass is 'opposite' at the family's level. With a sesoi, 'negligible' is Bonferroni too:
    `negligible_in` names every contrast whose (1 - 0.05 / k) interval lies inside +-sesoi, whatever the others
    do (wave.in_declared_direction reads it: one such cell refutes 'in every cell'); with every mean in the
    declared direction such a cell decides. ci: the deciding contrast's (1 - 0.05 / k) interval."""
    rows = {k: paired_hypothesis(k, v) for k, v in contrasts.items()}
    rows = {k: h for k, h in rows.items() if h["n"] >= 2 and h["effect"] is not None}
    per = {k: {str(s): float(x) for s, x in v.items() if x is not None} for k, v in contrasts.items()}
    base = {"claim": claim, "kind": "iut", "per_seed": per}
    if not rows:
        return {**base, "test": "none: no contrast has 2 seeds", "n": 0, "effect": None, "sd": None, "ci": None,
                "p": None}
    k = len(rows)
    bonf = 1 - 0.05 / k
    wide = {c: paired_hypothesis(c, contrasts[c], level=bonf)["ci"] for c in rows}
    small = [c for c in rows if sesoi and wide[c] and max(map(abs, wide[c])) < sesoi]
    against = [c for c, h in rows.items() if direction * h["effect"] <= 0]
    if against:
        worst = min(against, key=lambda c: _p(rows[c]) if _p(rows[c]) is not None else 1.0)
        p = None if _p(rows[worst]) is None else min(1.0, k * _p(rows[worst]))
        how = f"{len(against)} of {k} against the declared direction: p = {k} x the smallest of their p's"
    else:
        ps = [_p(h) for h in rows.values()]
        p = None if None in ps else max(ps)
        worst = (min(small, key=lambda c: max(map(abs, wide[c]))) if small
                 else max(rows, key=lambda c: _p(rows[c]) if _p(rows[c]) is not None else 1.0))
        how = f"every one in the declared direction: p = the largest of the {k} p's"
    w = rows[worst]
    neg = f"; inside +-{sesoi:g} at {bonf:.2%}: {', '.join(small)}" if small else ""
    return {**base, "test": f"paired t over seeds per contrast, intersection-union ({how}); effect: {worst}, its "
            f"{bonf:.2%} interval (Bonferroni over {k}){neg}", "n": min(h["n"] for h in rows.values()),
            "effect": w["effect"], "sd": w["sd"], "ci": wide[worst], "p": p, "deciding": worst, "negligible_in": small,
            "contrasts": {c: {x: h[x] for x in ("n", "effect", "sd", "ci", "p")} for c, h in rows.items()}}


def noninferior_iut(claim, contrasts, margin, level=0.05):
    """A one-sided null over k per-seed contrasts ({name: {seed: d}}): every contrast lies above -margin (none is
    below it by an effect of interest), by the intersection-union test: each contrast's one-sided t of mean >
    -margin (n - 1 dof), p = the largest (no adjustment; passed by Holm in its family). Refuted when some
    contrast's one-sided (1 - level / k) upper bound lies below -margin (Bonferroni over the k, as
    directional_iut's 'opposite'); else undecided. effect: the deciding (largest-p) contrast, ci its 90% interval
    (its lower end is the one-sided 95% bound); `refuted_by` names the contrasts that refute."""
    rows = {}
    for c, v in contrasts.items():
        a = np.array([float(x) for x in v.values() if x is not None], dtype=float)
        if a.size < 2:
            continue
        m, sd = float(a.mean()), float(a.std(ddof=1))
        se, dof = sd / math.sqrt(a.size), a.size - 1
        p = float(scistats.t.sf((m + margin) / se, dof)) if se > 0 else (0.0 if m > -margin else 1.0)
        t90 = scistats.t.ppf(0.95, dof) * se
        rows[c] = {"n": int(a.size), "effect": m, "sd": sd, "ci": [m - t90, m + t90], "p": p, "se": se, "dof": dof}
    per = {c: {str(s): float(x) for s, x in v.items() if x is not None} for c, v in contrasts.items()}
    base = {"claim": claim, "kind": "ni", "margin": margin, "per_seed": per}
    if not rows:
        return {**base, "test": "none: no contrast has 2 seeds", "n": 0, "effect": None, "sd": None, "ci": None,
                "p": None, "refuted_by": []}
    k = len(rows)
    refuted = [c for c, r in rows.items() if r["effect"] + scistats.t.ppf(1 - level / k, r["dof"]) * r["se"] < -margin]
    worst = max(rows, key=lambda c: rows[c]["p"])
    w = rows[worst]
    return {**base, "test": f"one-sided t over seeds per contrast that its mean is above -{margin:g}, intersection-union "
            f"over {k} (p = the largest); refuted when a one-sided {1 - level / k:.2%} upper bound (Bonferroni over "
            f"{k}) lies below -{margin:g}; effect: {worst}, 90% interval", "n": min(r["n"] for r in rows.values()),
            "effect": w["effect"], "sd": w["sd"], "ci": w["ci"], "p": max(r["p"] for r in rows.values()),
            "deciding": worst, "refuted_by": refuted,
            "contrasts": {c: {x: r[x] for x in ("n", "effect", "sd", "ci", "p")} for c, r in rows.items()}}


def after_holm(h):
    """The verdict rule of a wave-5 hypothesis decided in its family by Holm but refuted by its own rule
    (wave.in_declared_direction, after Holm's pass is known): a one-sided null (noninferior_iut: refuted by its
    Bonferroni bound) or a law that must also scale (lof_equivalence with slope: refuted when the rms departure's
    interval lies above the margin; a flat law is undecided, never passed). -> {passed, refuted, words}."""
    m = h["margin"]
    if h["kind"] == "ni":
        bad = h.get("refuted_by") or []
        words = (f"refuted: below -{m:g} at {', '.join(bad)} (Bonferroni bound)" if bad else
                 f"passed, as the seed: above -{m:g} in every contrast" if h["passed"] else
                 f"undecided: not shown above -{m:g} in every contrast")
        return {"passed": bool(h["passed"] and not bad), "refuted": bool(bad), "words": words}
    lo = (h.get("ci") or [None])[0]
    refuted = lo is not None and lo > m
    sl = h.get("slope") or {}
    flat = sl.get("ci") is not None and sl["ci"][0] <= 0 <= sl["ci"][1]
    words = (f"refuted: the rms departure's interval lies above {m:g}" if refuted else
             f"passed, as the seed: within rms {m:g} of a law whose slope's 95% interval excludes 0" if h["passed"] else
             "undecided: the slope's 95% interval includes 0 (nothing scales)" if flat else
             f"undecided: not shown within rms {m:g} of the law")
    return {"passed": bool(h["passed"] and not refuted), "refuted": bool(refuted), "words": words}


def _ncf_sf(F, df1, df2, lam):
    return float(scistats.f.sf(F, df1, df2) if lam <= 0 else scistats.ncf.sf(F, df1, df2, lam))


def lof_equivalence(claim, groups, x, margin, level=0.90, slope=False):
    """A law y = a + b x tested for lack of fit over m sizes with n seeds as blocks (sizes x seeds: the error is
    the size x seed interaction), decided both ways at an rms departure `margin` of the size means from the law.
    groups: {size: {seed: y}} (the seeds every size has are used); x: {size: regressor (ln N)}.
    F = MS_lof / MS_(size x seed) on (m - 2, (m - 1)(n - 1)) dof, SS_lof = n x the sum of the size means' squared
    departures from their least-squares line; at an rms departure delta its noncentrality is n m delta^2 / sigma^2
    (sigma^2 estimated by MS_(size x seed)). effect: the rms departure's estimate sqrt(max(0, (MS_lof - MS_e)
    (m - 2) / (n m))); ci: its `level` interval (the noncentral F inverted); p: the equivalence p, P(F <= F_obs)
    at an rms departure of `margin` (small: the departure is below the margin); lof_p: the plain lack-of-fit test
    (departure 0), descriptive. slope: the law must also scale (a flat penalty passes no law): each seed's
    least-squares slope in x, its paired t over seeds; p = the larger of the two p's (intersection-union), and
    `slope` holds beta's mean and 95% interval (after_holm: a slope interval holding 0 is 'nothing scales')."""
    sizes = [z for z in groups if groups[z]]
    seeds = sorted(set.intersection(*(set(map(str, groups[z])) for z in sizes)), key=str) if sizes else []
    val = lambda z, s: groups[z][s] if s in groups[z] else groups[z][int(s)]
    m, n = len(sizes), len(seeds)
    base = {"claim": claim, "kind": "lof", "margin": margin, "n": n, "sd": None, "needs_slope": bool(slope),
            "per_seed": {z: {s: float(val(z, s)) for s in seeds} for z in sizes}, "x": {z: float(x[z]) for z in sizes}}
    Y = np.array([[val(z, s) for s in seeds] for z in sizes], dtype=float)
    resid = Y - Y.mean(1, keepdims=True) - Y.mean(0, keepdims=True) + Y.mean() if m and n else None
    if m < 3 or n < 2 or not (resid ** 2).sum() > 0:
        return {**base, "test": "none: needs 3 sizes, 2 seeds and a size x seed error", "effect": None, "ci": None,
                "p": None}
    xs = np.array([x[z] for z in sizes], dtype=float)
    df1, df2 = m - 2, (m - 1) * (n - 1)
    ms_e = float((resid ** 2).sum() / df2)
    dep = Y.mean(1) - np.polyval(np.polyfit(xs, Y.mean(1), 1), xs)
    ms_lof = float(n * (dep ** 2).sum() / df1)
    F = ms_lof / ms_e
    sf = lambda d: _ncf_sf(F, df1, df2, n * m * d ** 2 / ms_e)  # P(F' >= F_obs) at an rms departure d: up in d
    tail = (1 - level) / 2

    def root(fn):  # the d >= 0 where fn(d) = 0, fn increasing; 0 when fn(0) >= 0
        if fn(0.0) >= 0:
            return 0.0
        hi = max(margin, 1e-6)
        while fn(hi) < 0 and hi < 1e3:
            hi *= 2
        return float(brentq(fn, 0.0, hi))
    ci = [root(lambda d: sf(d) - tail), root(lambda d: tail - (1.0 - sf(d)))]
    p, extra, words = 1.0 - sf(margin), {}, ""
    if slope:
        b = paired_hypothesis("slope", {s: float(np.polyfit(xs, Y[:, j], 1)[0]) for j, s in enumerate(seeds)})
        extra = {"slope": {k: b[k] for k in ("n", "effect", "sd", "ci", "p")}, "equivalence_p": p}
        p = None if b["p"] is None else max(p, b["p"])
        words = (f"; and the slope beta {b['effect']:+.3g} per unit x, 95% interval excluding 0 "
                 f"(intersection-union: p = the larger)")
    return {**base, "test": f"lack of fit about the law over {', '.join(sizes)}, seeds as blocks: F = {F:.3g} on ({df1}, {df2}) dof; "
            f"equivalence at an rms departure of {margin:g} by the noncentral F, {level:.0%} interval{words}",
            "effect": math.sqrt(max(0.0, (ms_lof - ms_e) * df1 / (n * m))), "sd": math.sqrt(ms_e), "ci": ci,
            "p": p, **extra, "F": F, "df": [df1, df2], "lof_p": float(scistats.f.sf(F, df1, df2)),
            "departures": {z: float(d) for z, d in zip(sizes, dep)}, "plan": {"ms_e": ms_e, "m": m}}


def pi_criterion(claim, groups, n_params, fit, held, margin, level=0.95):
    """The QAT seed's own criterion for its law: y = alpha + beta ln N fitted (OLS, k - 2 dof) on the seed means
    at the `fit` sizes; each `held` size's seed mean must lie inside its `level` prediction interval (the textbook
    formula, stats.predict_interval). Decided by the rule, not a p: refuted when a held-out mean lies outside its
    interval; passed when every one lies inside and every interval's half-width is at most `margin` (an interval
    that could have shown a departure of interest); else undecided (inside intervals too wide to test).
    groups: {size: {seed: y}} (the seeds every size has are used); n_params: {size: N}. effect: the held-out
    size furthest out (in half-widths) as its mean minus the law's prediction, ci that +- the half-width."""
    sizes = list(fit) + list(held)
    seeds = (sorted(set.intersection(*(set(map(str, groups[z])) for z in sizes)), key=str)
             if all(groups.get(z) for z in sizes) else [])
    val = lambda z, s: groups[z][s] if s in groups[z] else groups[z][int(s)]
    base = {"claim": claim, "kind": "pi", "margin": margin, "n": len(seeds), "p": None, "sd": None,
            "fit": list(fit), "held_sizes": list(held), "n_params": {z: float(n_params[z]) for z in sizes},
            "per_seed": {z: {s: float(val(z, s)) for s in seeds} for z in sizes}}
    if len(seeds) < 2 or len(fit) < 3 or not held:
        return {**base, "test": "none: needs 3 fit sizes, a held-out size and 2 seeds", "effect": None, "ci": None,
                "rule": {"passed": False, "refuted": False, "words": "undefined: no test"}}
    mean = {z: float(np.mean([val(z, s) for s in seeds])) for z in sizes}
    law = loglinear_fit([n_params[z] for z in fit], [mean[z] for z in fit])
    yhat, lo, hi = predict_interval(law, [n_params[z] for z in held], level)
    rows = {z: {"mean": mean[z], "pred": float(y), "lo": float(a), "hi": float(b), "half": float((b - a) / 2),
                "inside": bool(a <= mean[z] <= b)} for z, y, a, b in zip(held, yhat, lo, hi)}
    worst = max(held, key=lambda z: abs(rows[z]["mean"] - rows[z]["pred"]) / max(rows[z]["half"], 1e-300))
    w, inside = rows[worst], all(r["inside"] for r in rows.values())
    widest = max(r["half"] for r in rows.values())
    words = ("refuted: " + ", ".join(z for z, r in rows.items() if not r["inside"]) + f" outside its {level:.0%} "
             "prediction interval" if not inside else f"passed, as the seed: inside every {level:.0%} prediction "
             f"interval, each at most +-{margin:g}" if widest <= margin else
             f"undecided: inside, but an interval is wider than +-{margin:g} (half-width {widest:.3g})")
    d = w["mean"] - w["pred"]
    return {**base, "test": f"the seed's criterion: the held-out means against the {level:.0%} prediction intervals "
            f"of the law fitted on the means at {', '.join(fit)} ({len(fit) - 2} dof); inside "
            f"{sum(r['inside'] for r in rows.values())}/{len(rows)}; effect: {worst}, mean - prediction",
            "effect": d, "ci": [d - w["half"], d + w["half"]], "held": rows,
            "law": {k: law[k] for k in ("alpha", "beta", "s", "n")},
            "rule": {"passed": inside and widest <= margin, "refuted": not inside, "words": words}}


def again(h):
    """A stored hypothesis of one of these kinds decided again from its stored values (wave.redecide)."""
    if h["kind"] == "iut":
        return directional_iut(h["claim"], h["per_seed"], h["declared"], h.get("sesoi"))
    if h["kind"] == "lof":
        return lof_equivalence(h["claim"], h["per_seed"], h["x"], h["margin"], slope=h.get("needs_slope", False))
    if h["kind"] == "ni":
        return noninferior_iut(h["claim"], h["per_seed"], h["margin"])
    return pi_criterion(h["claim"], h["per_seed"], h["n_params"], h["fit"], h["held_sizes"], h["margin"])


def iut_power(h, level, seeds=None, conf=PLAN_CONF):
    """The power of a directional intersection-union (directional_iut) to pass whole on `seeds` seeds: the product
    over its contrasts of each one's power to pass in the declared direction at `level` (two-sided) when its true
    mean is its stored one, sd at its PLAN_CONF upper bound (the contrasts' correlation ignored). A contrast whose
    stored mean lies against the direction makes it about 0. None without contrasts."""
    rows = h.get("contrasts") or {}
    out = 1.0
    for r in rows.values():
        if not r.get("sd") or r["n"] < 2:
            return None
        k, up = seeds or r["n"], sd_upper(r["sd"], r["n"] - 1, conf)
        out *= float(scistats.nct.sf(scistats.t.ppf(1 - level / 2, k - 1), k - 1, h["declared"] * r["effect"] * math.sqrt(k) / up))
    return out if rows else None


def plan(h, level, seeds=None, power=0.8, conf=PLAN_CONF):
    """The plan of a lof or pi hypothesis (plan_row's keys). lof: the power of its equivalence test at a true
    departure of 0 on k seeds (sigma^2 at its upper bound), and the seeds that reach `power`. pi: its rule cannot
    be planned as a power; the row quotes the widest prediction half-width now (kind 'rule'), no seed count."""
    n0, k = h["n"], seeds or h["n"]
    row = {"claim": h["claim"], "n": n0, "sd": h.get("sd"), "effect": h.get("effect"), "planned_seeds": k,
           "target": h.get("margin"), "kind": "none", "sd_plan": None, "detectable": None, "seeds_needed": None}
    if h["kind"] == "pi" and h.get("held"):
        row.update(kind="rule (PI half-width)", detectable=max(r["half"] for r in h["held"].values()))
    if h["kind"] == "lof" and h.get("plan") and n0 >= 2:
        m = h["plan"]["m"]
        s2 = h["plan"]["ms_e"] * sd_upper(1.0, (m - 1) * (n0 - 1), conf) ** 2

        def pw(n):  # P(equivalence p < level) at no departure: F below the noncentral F's level quantile
            df1, df2 = m - 2, (m - 1) * (n - 1)
            return float(scistats.f.cdf(scistats.ncf.ppf(level, df1, df2, n * m * h["margin"] ** 2 / s2), df1, df2))
        row.update(kind="lof equivalence", sd_plan=math.sqrt(s2), detectable=pw(k), detectable_is="power at the margin",
                   seeds_needed=_first_n(lambda n: pw(n) >= power))
    return row
