"""
The statistics of the studies, as pure functions (numpy and scipy only, no records, no models):
analyze.py's study blocks call them, tests/test_stats.py checks them against hand-worked numbers.

Each function says its formula and where it comes from. Seeds: the QAT LR-schedule study ("QAT
seed", no arXiv id) and "Cracks in the Foundation" (arXiv 2608.10296, "long-context seed"). Read top
to bottom: paired comparisons and the one rule for "better", seed summaries and intervals of a
mean, the log-linear law and its intervals, OLS and its tests (nested F, leave-one-out, factorial
designs, remove-one, lack of fit, interaction), the N-D law (arXiv 2505.14302). Holm's adjustment and the
minimum detectable effect (power) sit beside the one rule, with a study's family of hypotheses
(paired_hypothesis, model_hypothesis, decide_family) that every verdict word is decided by.
"""
import itertools
import math

import numpy as np
from scipy import stats as scistats

def sd1(values):
    """Sample standard deviation (ddof 1) over seeds; None below 2 values."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


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


def paired_acc(a, b):
    """Paired comparison of accuracies over common seeds (a, b: {seed: value}): d = a - b, mean
    difference, paired z (paired_z's statistic; positive: a is higher), seeds where a is higher / lower."""
    seeds = sorted(s for s in set(a) & set(b) if a[s] is not None and b[s] is not None)
    if not seeds:
        return None
    pz = paired_z([a[s] for s in seeds], [b[s] for s in seeds])
    return {"n": pz["n"], "mean_diff": pz["mean_diff"], "z": pz["z"], "p": paired_p(pz["z"], pz["n"]),
            "wins": pz["wins_b"], "losses": pz["wins_a"]}


def paired_p(z, n):
    """Two-sided p of the paired t test whose statistic is paired_z's z, on n - 1 dof (the sd of the
    differences is estimated, never known); None below 2 seeds or for an undefined z."""
    if n < 2 or z is None or math.isnan(z):
        return None
    return 0.0 if math.isinf(z) else float(2 * scistats.t.sf(abs(z), n - 1))


# The one rule for "better" in every study: the paired t test over matched seeds (paired_p) at
# level BETTER_LEVEL, with at least MIN_SEEDS seeds; otherwise "not distinguishable", with the numbers.
BETTER_LEVEL, MIN_SEEDS = 0.05, 3


def distinguishable(p):
    """A paired comparison (paired_acc) passes the rule for "better" / "worse" (sign: its mean_diff)."""
    return p is not None and p["n"] >= MIN_SEEDS and p["p"] is not None and p["p"] < BETTER_LEVEL


def holm(pvalues):
    """Holm's step-down adjustment within one family (Holm 1979): sort the m raw p's, p_(i) -> max over
    j <= i of min(1, (m - j + 1) p_(j)), in the input order. None (no test) is kept and not counted in m; so is
    NaN, as the stored files hold it (null). Controls the family-wise error rate at the level, any dependence."""
    idx = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    m, out, run = len(idx), list(pvalues), 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: pvalues[i])):
        run = max(run, min(1.0, (m - rank) * pvalues[i]))
        out[i] = run
    return out


def t_power(sd, n, effect, level=BETTER_LEVEL):
    """The exact power of a two-sided paired t test on n seeds (n - 1 dof) at this level for a true mean paired
    difference `effect`, given the sd of the differences: P(|T| > t_{1-level/2}) under the noncentral t with
    noncentrality effect sqrt(n) / sd. None below 2 seeds or without an sd."""
    if n < 2 or sd is None or not sd > 0 or effect is None:
        return None
    dof, crit, nc = n - 1, scistats.t.ppf(1 - level / 2, n - 1), abs(effect) * math.sqrt(n) / sd
    # the far tail's cdf underflows to nan at large noncentrality: it is 0 there
    return float(scistats.nct.sf(crit, dof, nc) + np.nan_to_num(scistats.nct.cdf(-crit, dof, nc)))


def min_detectable_effect(sd, n, level=BETTER_LEVEL, power=0.8):
    """The smallest mean paired difference a two-sided paired t test on n seeds (n - 1 dof) detects
    with this power at this level, given the sd of the differences: the d at which the exact power
    P(|T| > t_{1-level/2}) under the noncentral t (noncentrality d sqrt(n) / sd) reaches `power`
    (n = 3: 3.26 sd; n = 10: 1.00 sd). None below 2 seeds or without an sd."""
    if n < 2 or sd is None or not sd > 0:
        return None
    from scipy.optimize import brentq
    achieved = lambda nc: t_power(sd, n, nc * sd / math.sqrt(n), level) - power  # noqa: E731 (nc: the noncentrality)
    # few dof at a strict level (a 1-dof coefficient test at 0.05 / 24: t_crit ~ 300) need a far larger
    # noncentrality than 100: widen the bracket; past 1e6, no effect is detectable (inf)
    import warnings
    with warnings.catch_warnings():  # scipy's series warn far in the tail; the root is still found
        warnings.simplefilter("ignore", RuntimeWarning)
        hi = 100.0
        while achieved(hi) < 0:
            if hi > 1e6:
                return math.inf
            hi *= 10
        return float(brentq(achieved, 0.0, hi) * sd / math.sqrt(n))


def seeds_needed(sd, effect, level=BETTER_LEVEL, power=0.8, max_n=1000):
    """Seeds a two-sided paired t test needs to detect a mean paired difference `effect` with this
    power at this level, given the sd of the differences: the smallest n >= MIN_SEEDS whose
    min_detectable_effect is <= |effect|, that is, whose power at |effect| reaches `power` (one noncentral t a
    step, not a root-find); None when max_n seeds are not enough or sd is missing."""
    if sd is None or not sd > 0 or not effect:
        return None
    return _first_n(lambda n: (t_power(sd, n, effect, level) or 0) >= power, max_n)


# A study's family: the hypotheses its write-up decides, each a dict with claim, test, n, effect,
# its seed-level 95% interval, raw p and (decide_family) the Holm-adjusted p within the family.
# A verdict word needs `passed`: adjusted p < BETTER_LEVEL over >= MIN_SEEDS seeds (the one rule).
# Beside a null: the smallest effect its test detects with 80% power at the family's strictest
# Holm step (level / m), from its own n and observed sd, so "not distinguishable" says what it missed.


def same_everywhere(a):
    """Every value equal up to float round-off (differences of equal numbers computed in different orders
    leave ~1e-16): then an sd over them is round-off, and a t statistic on it is not a test."""
    a = np.asarray(a, dtype=float)
    return bool(np.ptp(a) <= 1e-12 * max(1.0, float(np.abs(a).max())))


def paired_hypothesis(claim, diffs, test="paired t over seeds", level=0.95):
    """One hypothesis from its per-seed effects {seed: d} (d = A - B of matched seeds, or any per-seed
    contrast whose mean is tested against 0): n, effect = mean d, sd of d, the t interval over seeds
    (n - 1 dof), the raw two-sided p of the one-sample t test (= the paired t test) and the per-seed d.
    With sd 0 (every seed the same non-zero contrast) the test is undefined: p None, so the hypothesis
    is not counted in its family's m and never passes (decide_family marks it undefined)."""
    d = {s: float(v) for s, v in diffs.items() if v is not None and not math.isnan(float(v))}
    a = np.array(list(d.values()), dtype=float)
    n = int(a.size)
    mean = float(a.mean()) if n else None
    sd = sd1(a)
    half = t_half_width(a, level) if n > 1 else None
    if n < 2:
        p = None
    elif np.abs(a).max() < 1e-12:  # every seed's contrast is round-off: no effect, not an infinitely sure one
        p = 1.0
    elif same_everywhere(a):  # every seed the same non-zero contrast: the t statistic is undefined, not infinite
        p = None
    else:
        p = float(2 * scistats.t.sf(abs(mean) / (sd / math.sqrt(n)), n - 1))
    return {"claim": claim, "test": test, "n": n, "effect": mean, "sd": sd,
            "ci": [mean - half, mean + half] if half is not None and not math.isnan(half) else None,
            "p": p, "per_seed": {str(s): v for s, v in d.items()}}


def model_hypothesis(claim, test, n, effect, ci, p, sd=None, per_seed=None, plan=None):
    """One hypothesis decided by a test that is not a mean of per-seed contrasts (an F test, a
    regression coefficient): the caller gives its numbers; n counts the seeds it rests on. sd, when
    given, is the sd of a per-seed contrast whose detectable effect is quoted beside a null; plan, the
    error terms its power is planned from (plan_row: ms_error, df2, k | ms_pe, df1, df2, n_total | se, dof)."""
    h = {"claim": claim, "test": test, "n": int(n), "effect": effect, "sd": sd, "ci": ci, "p": p,
         "per_seed": per_seed}
    if plan:
        h["plan"] = plan
    return h


def decide_family(hypotheses, alpha=BETTER_LEVEL, power=0.8):
    """The family decided: each hypothesis gains p_holm (holm over the family's raw p's), passed
    (p_holm < alpha with n >= MIN_SEEDS), undefined (no p: no test), direction (+1 / -1 / 0: the sign
    of its effect when a difference passed; 0 for an equivalence hypothesis, which has a `margin` and
    passes as "equivalent within +-margin") and mde (min_detectable_effect at alpha / m, the strictest
    Holm step, from its n and sd; None without an sd, and for an equivalence hypothesis). Returns {"alpha", "m", "rule", "hypotheses"}; the input dicts are not changed."""
    hyps = [dict(h) for h in hypotheses]
    m = sum(h["p"] is not None for h in hyps)
    for h, adj in zip(hyps, holm([h["p"] for h in hyps])):
        h["p_holm"] = adj
        h["passed"] = bool(adj is not None and h["n"] >= MIN_SEEDS and adj < alpha)
        h["undefined"] = h["p"] is None  # no test (sd 0, too few seeds): neither passed nor a null
        equivalence = h.get("margin") is not None
        h["direction"] = ((1 if h["effect"] > 0 else -1 if h["effect"] < 0 else 0)
                          if h["passed"] and not equivalence else 0)
        h["mde"] = (min_detectable_effect(h.get("sd"), h["n"], alpha / max(m, 1), power)
                    if h.get("sd") is not None and not equivalence else None)
    return {"alpha": alpha, "m": m, "rule": f"Holm-adjusted p < {alpha:g} over >= {MIN_SEEDS} seeds",
            "hypotheses": hyps}


# Equivalence: a claimed null ("the same", "no interaction") is a verdict only as a test of its own,
# with a margin declared before the runs: failing to reject a difference is not evidence of none, and
# Holm makes rejecting harder, so without it the protocol leans towards agreeing with the seed.


def tost(diffs, margin):
    """Two one-sided t tests (Schuirmann 1987) of a mean per-seed contrast d against the margin +-delta:
    H0 |mean d| >= delta, rejected when both t_lo = (mean + delta) / se > t and t_hi = (mean - delta) / se
    < -t on n - 1 dof; p = max of the two one-sided p's (the (1 - 2 alpha) interval lies inside the margin
    exactly when p < alpha). -> n, mean, sd, p, ci90 (the 90% t interval); p None below 2 seeds or with sd 0."""
    a = np.array([float(v) for v in diffs.values() if v is not None], dtype=float)
    n = int(a.size)
    out = {"n": n, "mean": float(a.mean()) if n else None, "sd": sd1(a), "p": None, "ci90": None}
    if n < 2 or same_everywhere(a):  # every seed the same contrast: no t statistic
        return out
    se = out["sd"] / math.sqrt(n)
    p_lo = float(scistats.t.sf((out["mean"] + margin) / se, n - 1))
    p_hi = float(scistats.t.cdf((out["mean"] - margin) / se, n - 1))
    half = float(scistats.t.ppf(0.95, n - 1) * se)
    out.update(p=max(p_lo, p_hi), ci90=[out["mean"] - half, out["mean"] + half])
    return out


def equivalence_hypothesis(claim, contrasts, margin, test=None):
    """One equivalence hypothesis over one or more per-seed contrasts ({name: {seed: d}}): every contrast
    within +-margin, by the intersection-union test (Berger 1982: p = the largest TOST p, no
    adjustment within it). effect: the contrast with the largest |mean|, with its 90% interval as ci
    (the TOST interval); sd that contrast's sd over seeds; per_seed {name: {seed: d}}."""
    res = {k: tost(v, margin) for k, v in contrasts.items()}
    worst = max(res, key=lambda k: abs(res[k]["mean"] or 0))
    ps = [r["p"] for r in res.values()]
    w = res[worst]
    return {"claim": claim, "test": test or f"TOST over seeds, margin +-{margin:g} (intersection-union over "
            f"{len(res)} contrast{'s' * (len(res) > 1)}); effect: {worst}, 90% interval",
            "n": min(r["n"] for r in res.values()), "effect": w["mean"], "sd": w["sd"], "ci": w["ci90"],
            "p": None if any(p is None for p in ps) else max(ps), "margin": margin,
            "per_seed": {k: {str(s): float(x) for s, x in v.items()} for k, v in contrasts.items()}}


def gg_epsilon(y):
    """Greenhouse-Geisser epsilon of a repeated-measures design y [n seeds x k conditions] (Greenhouse &
    Geisser 1959; Box 1954): with S the k x k covariance of the conditions over seeds and C = I - J / k,
    eps = tr(C S C)^2 / ((k - 1) tr((C S C)^2)), in [1 / (k - 1), 1]; 1 under sphericity. The
    corrected test refers F to F(eps (k - 1), eps (n - 1)(k - 1)). None below 2 seeds or 3 conditions
    (k = 2 is always spherical: eps 1)."""
    y = np.asarray(y, dtype=float)
    n, k = y.shape
    if k == 2:
        return 1.0
    if n < 2 or k < 2:
        return None
    C = np.eye(k) - np.ones((k, k)) / k
    D = C @ np.cov(y, rowvar=False) @ C
    den = (k - 1) * float(np.trace(D @ D))
    if not den > 0:
        return None
    return float(min(1.0, max(1.0 / (k - 1), np.trace(D) ** 2 / den)))


def rm_gg(y):
    """repeated_measures_f with the Greenhouse-Geisser correction: adds epsilon and p_gg (the F on
    epsilon-scaled dof; p itself when epsilon is undefined or F is not finite)."""
    r = repeated_measures_f(y)
    eps = gg_epsilon(y)
    r["epsilon"] = eps
    r["p_gg"] = (float(scistats.f.sf(r["F"], eps * r["df1"], eps * r["df2"]))
                 if eps is not None and math.isfinite(r["F"]) else r["p"])
    return r


def pooled_rm_f(cells):
    """The repeated-measures F of each cell against the error pooled over all cells (a robustness line
    beside the per-cell test: more dof, valid only when the cells' error variances agree, see bartlett):
    cells [{F, df1, df2, ms_error}] -> [{F, df1, df2, p}], df2 the summed error dof."""
    ok = [c for c in cells if c.get("ms_error") is not None and math.isfinite(c.get("F", math.nan))]
    df2 = sum(c["df2"] for c in ok)
    if not ok or not df2:
        return [None for _ in cells]
    ms = sum(c["ms_error"] * c["df2"] for c in ok) / df2
    out = []
    for c in cells:
        if c not in ok or not ms > 0:
            out.append(None)
            continue
        F = c["F"] * c["ms_error"] / ms  # the cell's mean square for the conditions over the pooled error
        out.append({"F": F, "df1": c["df1"], "df2": df2, "p": float(scistats.f.sf(F, c["df1"], df2))})
    return out


def bartlett(variances, dofs):
    """Bartlett's test that k error variances s_i^2 on v_i dof are equal (Bartlett 1937), from the
    variances themselves: T = ((V ln s_p^2 - sum v_i ln s_i^2) / (1 + (sum 1/v_i - 1/V) / (3 (k - 1))),
    V = sum v_i, s_p^2 the pooled variance; T ~ chi2(k - 1). -> statistic, df, p, ratio (largest /
    smallest variance); None below 2 positive variances."""
    pairs = [(float(s), int(v)) for s, v in zip(variances, dofs) if s is not None and s > 0 and v > 0]
    k = len(pairs)
    if k < 2:
        return None
    V = sum(v for _, v in pairs)
    sp = sum(s * v for s, v in pairs) / V
    num = V * math.log(sp) - sum(v * math.log(s) for s, v in pairs)
    T = num / (1 + (sum(1 / v for _, v in pairs) - 1 / V) / (3 * (k - 1)))
    return {"statistic": T, "df": k - 1, "p": float(scistats.chi2.sf(T, k - 1)),
            "ratio": max(s for s, _ in pairs) / min(s for s, _ in pairs)}


POOL_LEVEL = 0.05  # the pooling check's level, declared with the design (a conventional preliminary test)


def factorial_pooling_check(ms_main, df_main, ms_high, df_high):
    """Whether seed x contrast error strata may be pooled in a blocked 2^k factorial (the standard
    analysis: seed blocks, one error from all seed x contrast terms): F = MS(seed x main effects) /
    MS(seed x higher-order terms) on (df_main, df_high); pooling is the rule when p > POOL_LEVEL (the
    strata show no difference), else each effect keeps its own seed x effect error."""
    F = ms_main / ms_high if ms_high > 0 else math.inf
    p = float(scistats.f.sf(F, df_main, df_high)) if math.isfinite(F) else 0.0
    return {"F": F, "df1": df_main, "df2": df_high, "p": p, "pool": p > POOL_LEVEL, "level": POOL_LEVEL}


def blocked_factorial(cells_by_seed, k):
    """The standard analysis of a replicated 2^k factorial with seeds as blocks (Box, Hunter & Hunter,
    ch. 5-6): cells_by_seed {seed: {cell: y}}, cell a k-tuple of 0/1, every seed with all 2^k cells.
    Per seed each effect E_S = mean of y where prod_{i in S} x_i = +1 minus where -1 (x = 2 cell - 1),
    for every non-empty subset S; the seed block cancels in every contrast. Each effect is tested two
    ways: over its own seeds (t on n - 1 dof: the seed x S stratum alone) and against the seed x contrast
    error pooled over all 2^k - 1 effects (t on (2^k - 1)(n - 1) dof), the pooling check
    (factorial_pooling_check: seed x main effects against seed x higher-order terms) saying which one a
    family uses. -> {n, effects: [{terms, per_seed, effect, sd, p_seed, se_pooled, p_pooled, ci_pooled}],
    pooling, dof_pooled}; None when no two seeds have every cell."""
    cells = list(itertools.product((0, 1), repeat=k))
    seeds = sorted(s for s, c in cells_by_seed.items() if all(x in c for x in cells))
    n = len(seeds)
    if n < 2:
        return None
    sign = lambda cell, S: np.prod([2 * cell[i] - 1 for i in S])
    effects = []
    for r in range(1, k + 1):
        for S in itertools.combinations(range(k), r):
            per = {s: float(sum(sign(c, S) * cells_by_seed[s][c] for c in cells) / (len(cells) / 2)) for s in seeds}
            effects.append({"terms": list(S), "per_seed": per})
    for e in effects:
        a = np.array(list(e["per_seed"].values()))
        e.update(effect=float(a.mean()), sd=sd1(a))
        e["var"] = e["sd"] ** 2
        e["p_seed"] = (float(2 * scistats.t.sf(abs(e["effect"]) / (e["sd"] / math.sqrt(n)), n - 1))
                       if e["sd"] else None)
    main = [e for e in effects if len(e["terms"]) == 1]
    high = [e for e in effects if len(e["terms"]) > 1]
    dof = len(effects) * (n - 1)
    pooled_var = float(np.mean([e["var"] for e in effects]))
    for e in effects:
        se = math.sqrt(pooled_var / n)
        half = float(scistats.t.ppf(0.975, dof) * se)
        e.update(se_pooled=se, ci_pooled=[e["effect"] - half, e["effect"] + half],
                 p_pooled=float(2 * scistats.t.sf(abs(e["effect"]) / se, dof)) if se > 0 else None)
        del e["var"]
    check = (factorial_pooling_check(float(np.mean([e["sd"] ** 2 for e in main])), len(main) * (n - 1),
                                     float(np.mean([e["sd"] ** 2 for e in high])), len(high) * (n - 1))
             if main and high else None)
    return {"n": n, "seeds": seeds, "effects": effects, "pooling": check, "dof_pooled": dof}


# Power before the run (analyze.py --power DIR): for each hypothesis of a stored family, the effect its
# test detects at the planned seeds and the seeds an effect needs, both at the family's strictest Holm
# step (alpha / m). A pilot's sd is itself a draw: from 3 seeds its 95% interval is [0.52, 6.3] times
# the point value, so a plan on the point value is a coin toss. Plans use an upper confidence bound of
# the sd (PLAN_CONF, one-sided, from the chi-square of the pilot's dof), for t, F, equivalence and
# coefficient tests alike.
PLAN_CONF = 0.8


def sd_upper(sd, dof, conf=PLAN_CONF):
    """One-sided upper confidence bound of a standard deviation estimated on dof degrees of freedom:
    sd sqrt(dof / chi2_{1 - conf}(dof)) (dof 2, conf 0.8: 2.12 sd). None without an sd."""
    if sd is None or not dof or dof < 1:
        return None
    return float(sd * math.sqrt(dof / scistats.chi2.ppf(1 - conf, dof)))


def tost_power(sd, n, margin, level=BETTER_LEVEL, true_diff=0.0):
    """Power of tost on n seeds at this level when the true mean contrast is true_diff (default 0): the
    probability that the (1 - 2 level) t interval lies inside +-margin, by the noncentral t of each side
    (exact for one side, the standard approximation for both: P(T_lo > t) + P(T_hi < -t) - 1)."""
    if sd is None or not sd > 0 or n < 2:
        return None
    dof, se = n - 1, sd / math.sqrt(n)
    crit = scistats.t.ppf(1 - level, dof)
    lo = scistats.nct.sf(crit, dof, (true_diff + margin) / se)
    hi = scistats.nct.cdf(-crit, dof, (true_diff - margin) / se)
    return float(max(0.0, lo + hi - 1))


def _first_n(ok, max_n=1000):
    """The smallest n in [MIN_SEEDS, max_n] with ok(n), None when there is none; ok is monotone in n (power
    and detectable effects only improve with seeds), so a bisection finds the same n a scan would."""
    lo, hi = MIN_SEEDS, max_n
    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def plan_row(h, level, seeds=None, effect=None, power=0.8, conf=PLAN_CONF):
    """The plan of one decided hypothesis: its test kind, the sd (or error mean square) bound it is
    planned on, the effect detectable at the planned seeds and the seeds needed for the target effect
    (an equivalence test: its margin, at a true contrast of 0). Kinds: 'equivalence' (margin), 'rm F'
    (ms_error, k), 'lack of fit' (ms_pe), 'coefficient' (se, dof), 'paired t' (sd); 'none' without them."""
    n0 = h["n"]
    n = seeds or n0
    target = effect if effect is not None else h.get("effect")
    row = {"claim": h["claim"], "n": n0, "sd": h.get("sd"), "effect": h.get("effect"), "planned_seeds": n,
           "target": target, "kind": "none", "sd_plan": None, "detectable": None, "seeds_needed": None}
    plan = h.get("plan") or {}
    if h.get("margin") is not None and h.get("sd"):
        up = sd_upper(h["sd"], n0 - 1, conf)
        row.update(kind="equivalence", sd_plan=up, target=h["margin"],
                   detectable=tost_power(up, n, h["margin"], level),
                   seeds_needed=_first_n(lambda k: (tost_power(up, k, h["margin"], level) or 0) >= power))
        row["detectable_is"] = "power at the margin"
    elif plan.get("ms_error") and plan.get("k"):
        ms = plan["ms_error"] * sd_upper(1.0, plan["df2"], conf) ** 2
        row.update(kind="rm F", sd_plan=math.sqrt(ms), detectable=rm_anova_mde(ms, n, plan["k"], level, power))
        if target:
            row["seeds_needed"] = _first_n(lambda k: (rm_anova_mde(ms, k, plan["k"], level, power) or math.inf) <= abs(target))
    elif plan.get("ms_pe") and plan.get("n_total"):
        ms = plan["ms_pe"] * sd_upper(1.0, plan["df2"], conf) ** 2
        per = plan["n_total"] / max(n0, 1)  # runs per seed
        lof = lambda k: lack_of_fit_mde({"ms_pe": ms, "df1": plan["df1"], "df2": plan["df2"] + int((k - n0) * per)},
                                        k * per, level, power)
        row.update(kind="lack of fit", sd_plan=math.sqrt(ms), detectable=lof(n))
        if target:
            row["seeds_needed"] = _first_n(lambda k: (lof(k) or math.inf) <= abs(target))
    elif plan.get("se") and plan.get("dof"):
        se = plan["se"] * sd_upper(1.0, plan["dof"], conf)
        co = lambda k: coef_mde(se * math.sqrt(n0 / k), plan["dof"], level, power)  # se ~ 1 / sqrt(seeds)
        row.update(kind="coefficient", sd_plan=se, detectable=co(n))
        if target:
            row["seeds_needed"] = _first_n(lambda k: (co(k) or math.inf) <= abs(target))
    elif h.get("sd"):
        up = sd_upper(h["sd"], n0 - 1, conf)
        row.update(kind="paired t", sd_plan=up, detectable=min_detectable_effect(up, n, level, power),
                   seeds_needed=seeds_needed(up, target, level, power) if target else None)
    return row


def power_plan(family, seeds=None, effect=None, power=0.8, conf=PLAN_CONF):
    """One plan_row per hypothesis of a decided family (decide_family), at level alpha / m (the strictest
    Holm step), on the PLAN_CONF upper bound of each hypothesis's sd: the effect detectable at the
    planned seeds (`seeds`, default its own n) and the seeds needed for `effect` (default: its observed
    effect; for an equivalence hypothesis, power 0.8 at a true contrast of 0), in its own units."""
    level = family["alpha"] / max(family["m"], 1)
    return {"level": level, "power": power, "conf": conf,
            "rows": [plan_row(h, level, seeds, effect, power, conf) for h in family["hypotheses"]]}


def seed_stats(per_seed):
    """{seed: value} -> mean, sd (ddof 1; None below 2 seeds), n and the values, over the non-missing ones."""
    v = {s: x for s, x in per_seed.items() if x is not None}
    a = np.array(list(v.values()), dtype=float)
    return {"mean": float(a.mean()) if a.size else None, "sd": sd1(a),
            "n": int(a.size), "per_seed": v}


def t_half_width(values, level=0.95):
    """Half-width of the level confidence interval of a mean over runs, the t interval:
    t_{(1+level)/2, n-1} * sd(ddof 1) / sqrt(n); nan below 2 values."""
    v = np.asarray(values, dtype=float)
    return scistats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else math.nan


def binomial_half_width(p, n, level=0.95):
    """Half-width of the level sampling CI of a mean of k exact-match rates p[i], each over n[i]
    samples (normal approximation to the binomial): z_{(1+level)/2} * sqrt(sum p(1-p)/n) / k."""
    p, n = np.asarray(p, dtype=float), np.asarray(n)
    return scistats.norm.ppf(0.5 + level / 2) * math.sqrt(float(np.sum(p * (1 - p) / n))) / len(p)


def samples_for_ci(seeds, half=0.05, level=0.95):
    """Samples per run so that a cell mean over `seeds` runs has a 95% sampling CI half-width <= half
    whatever the exact-match rate: z^2 * max p(1-p) / (half^2 * seeds), p(1-p) <= 1/4."""
    z = scistats.norm.ppf(0.5 + level / 2)
    return math.ceil(z * z * 0.25 / (half * half * seeds))


def pearson(x, y):
    """Pearson's r (scipy.stats.pearsonr); None when x or y is constant (r undefined)."""
    return float(scistats.pearsonr(x, y)[0]) if np.ptp(x) and np.ptp(y) else None


def spearman(x, y):
    """Spearman's rank correlation (scipy.stats.spearmanr); None when x or y is constant."""
    return float(scistats.spearmanr(x, y)[0]) if np.ptp(x) and np.ptp(y) else None

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
    t = scistats.t.ppf((1 + level) / 2, n - 2)
    half = t * fit["s"] * np.sqrt(1 + 1 / n + (x0 - fit["xbar"]) ** 2 / fit["sxx"])
    return yhat, yhat - half, yhat + half


def seed_noise_check(fit_pts, held_pts):
    """The law checked against the seed noise rather than the OLS residual sd, which has n - 2 degrees
    of freedom: with 3 fit sizes the 95% prediction interval uses t = 12.7 and covers almost anything.
    Points are (N, mean penalty, sd over seeds, seeds). Weighted least squares with the known variances
    se^2 = sd^2 / seeds: the lack-of-fit chi^2 of the fit sizes (n - 2 dof) and its p-value, and per
    held-out size z = (P - Phat) / sqrt(se^2 + var(Phat)). None when a point lacks an sd over >= 2 seeds."""
    pts = list(fit_pts) + list(held_pts)
    if len(fit_pts) < 3 or any(p[2] is None or not p[2] > 0 or p[3] < 2 for p in pts):
        return None
    x = np.log([p[0] for p in fit_pts])
    y = np.array([p[1] for p in fit_pts])
    se = np.array([p[2] / math.sqrt(p[3]) for p in fit_pts])
    X = np.stack([np.ones_like(x), x], 1)
    cov = np.linalg.inv(X.T @ np.diag(1 / se ** 2) @ X)
    coef = cov @ X.T @ np.diag(1 / se ** 2) @ y
    chi2 = float((((y - X @ coef) / se) ** 2).sum())
    held = []
    for n, pen, sd, k in held_pts:
        x0 = np.array([1.0, math.log(n)])
        held.append({"pred": float(x0 @ coef), "z": (pen - float(x0 @ coef)) / math.sqrt(sd ** 2 / k + float(x0 @ cov @ x0))})
    return {"alpha": float(coef[0]), "beta": float(coef[1]), "beta_se": math.sqrt(cov[1, 1]), "chi2": chi2,
            "dof": len(fit_pts) - 2, "p_lack_of_fit": float(scistats.chi2.sf(chi2, len(fit_pts) - 2)), "held": held}


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


def loo_r2(X, y, groups=None):
    """Leave-one-out R^2 (long-context seed, arXiv 2608.10296: 0.61 for feature count -> HELMET 32K):
    refit without run i, predict run i; R^2_LOO = 1 - sum (y_i - yhat_-i)^2 / sum (y_i - ybar)^2.
    groups: leave out one group at a time instead (e.g. every seed of a cell: prediction of an unseen
    feature combination). Negative when the predictor does worse than the mean. nan when n <= 1 +
    columns, y is constant, or a refit has fewer rows than coefficients."""
    A, y = _design(X, y)
    n = len(y)
    sst = float(((y - y.mean()) ** 2).sum())
    g = np.arange(n) if groups is None else np.asarray(groups)
    folds = [g == u for u in dict.fromkeys(g.tolist())]
    if n <= A.shape[1] or sst == 0 or any((~f).sum() < A.shape[1] for f in folds):
        return math.nan
    press = 0.0
    for out in folds:
        press += float(((y[out] - A[out] @ _ols(A[~out], y[~out])) ** 2).sum())
    return 1 - press / sst


def ols(X, y, names=None, level=0.95):
    """OLS with intercept (X 1-D or 2-D): coefficients with level-confidence intervals from t
    quantiles on the n - rank residual dof (scipy.scistats.t), SSE, dof, residual sd s, R^2 (nan when
    saturated or y constant). A rank-deficient design gets the minimum-norm solution."""
    A, y = _design(X, y)
    names = ["intercept"] + list(names or [f"x{i}" for i in range(1, A.shape[1])])
    beta = _ols(A, y)
    sse = float(((y - A @ beta) ** 2).sum())
    dof = len(y) - int(np.linalg.matrix_rank(A))
    s2 = sse / dof if dof > 0 else math.nan
    se = np.sqrt(np.clip(np.diag(np.linalg.pinv(A.T @ A)), 0, None) * s2)
    t = scistats.t.ppf((1 + level) / 2, dof) if dof > 0 else math.nan
    sst = float(((y - y.mean()) ** 2).sum())
    return {"coefs": [{"name": nm, "est": float(b), "se": float(e), "lo": float(b - t * e), "hi": float(b + t * e)}
                      for nm, b, e in zip(names, beta, se)],
            "n": len(y), "dof": dof, "sse": sse, "s": math.sqrt(s2) if dof > 0 else math.nan,
            "r2": 1 - sse / sst if dof > 0 and sst > 0 else math.nan}


def nested_f(small, big):
    """F test of a model against a larger one that nests it (ols results): F, df1, df2, p."""
    df1, df2 = small["dof"] - big["dof"], big["dof"]
    if df1 <= 0 or df2 <= 0 or big["sse"] <= 0:
        return {"F": math.nan, "df1": df1, "df2": df2, "p": math.nan}
    F = (small["sse"] - big["sse"]) / df1 / (big["sse"] / df2)
    return {"F": F, "df1": df1, "df2": df2, "p": float(scistats.f.sf(F, df1, df2))}


def factorial_design(Z, model, names=None):
    """Design columns for 0/1 factor columns Z [n, k] (named names): 'count' (their sum), 'additive'
    (the k axes), 'pairwise' (axes and their k(k-1)/2 products), 'saturated' (every product: the
    cell means). -> (X [n, m], column names)."""
    Z = np.asarray(Z, dtype=float)
    k = Z.shape[1]
    names = names or [f"f{i}" for i in range(k)]
    if model == "count":
        return Z.sum(1, keepdims=True), ["count"]
    subsets = [c for r in range(1, {"additive": 1, "pairwise": 2, "saturated": k}[model] + 1)
               for c in itertools.combinations(range(k), r)]
    return (np.column_stack([Z[:, list(c)].prod(1) for c in subsets]),
            [":".join(names[i] for i in c) for c in subsets])


def remove_one(Z, y, s2, dof, level=0.95):
    """The remove-one test of the count hypothesis: the increment of each feature on top of the
    others, mean(all features) - mean(all but feature i), with a level-CI from the pooled
    within-cell variance s2 on dof degrees of freedom; and the F test that the increments are equal
    (the count hypothesis: equal means of the k cells with one feature removed)."""
    Z, y = np.asarray(Z, dtype=int), np.asarray(y, dtype=float)
    k = Z.shape[1]
    full = y[Z.sum(1) == k]
    t = scistats.t.ppf((1 + level) / 2, dof) if dof > 0 else math.nan
    out, cells = [], []
    for i in range(k):
        one = np.ones(k, dtype=int)
        one[i] = 0
        c = y[(Z == one).all(1)]
        if not len(full) or not len(c):
            out.append({"feature": i, "increment": None, "lo": None, "hi": None, "n": [len(full), len(c)]})
            continue
        cells.append(c)
        inc, se = float(full.mean() - c.mean()), math.sqrt(s2 * (1 / len(full) + 1 / len(c)))
        out.append({"feature": i, "increment": inc, "lo": inc - t * se, "hi": inc + t * se, "n": [len(full), len(c)]})
    test = {"F": math.nan, "df1": len(cells) - 1, "df2": dof, "p": math.nan}
    if len(cells) > 1 and dof > 0 and s2 > 0:
        grand = np.concatenate(cells).mean()
        F = sum(len(c) * (c.mean() - grand) ** 2 for c in cells) / (len(cells) - 1) / s2
        test.update(F=float(F), p=float(scistats.f.sf(F, len(cells) - 1, dof)))
    return {"increments": out, "equal": test}

def lack_of_fit_f(groups, fitted, n_coef=2):
    """Lack of fit of a law against the replicate (seed) noise, the textbook F test. groups[i]: the
    replicates (one value per seed) at the i-th of m x-values; fitted[i]: the law's value there.
    MS_pe = sum of within-group squared deviations / (sum n_i - m), the pooled seed variance;
    MS_lof = sum n_i (mean_i - fitted_i)^2 / (m - n_coef); F = MS_lof / MS_pe on (m - n_coef,
    sum n_i - m) dof. Unlike a chi^2 that treats each group's sample sd as known, the seed variance
    here is an estimate with its own dof. None without replicates or lack-of-fit dof."""
    groups = [np.asarray(g, dtype=float) for g in groups]
    m, n = len(groups), sum(len(g) for g in groups)
    df1, df2 = m - n_coef, n - m
    ss_pe = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
    if df1 < 1 or df2 < 1 or ss_pe <= 0:
        return None
    ss_lof = sum(len(g) * (float(g.mean()) - yh) ** 2 for g, yh in zip(groups, fitted))
    F = (ss_lof / df1) / (ss_pe / df2)
    return {"F": F, "df1": df1, "df2": df2, "p": float(scistats.f.sf(F, df1, df2)), "ms_lof": ss_lof / df1,
            "ms_pe": ss_pe / df2}


def dummies(labels):
    """0/1 columns [n, levels - 1] of a factor (the first level, in sorted order, is the baseline)."""
    levels = sorted(set(labels), key=str)
    return np.array([[float(x == v) for v in levels[1:]] for x in labels]).reshape(len(labels), len(levels) - 1)


def interaction_f(y, a, b, block):
    """Two-way ANOVA of factors a and b with a blocking factor (matched seeds): the F test of the a x b
    interaction, nested_f of y ~ a + b + block within y ~ a * b + block."""
    A, B, S = dummies(a), dummies(b), dummies(block)
    AB = np.column_stack([A[:, i] * B[:, j] for i in range(A.shape[1]) for j in range(B.shape[1])])
    small = ols(np.column_stack([A, B, S]), y)
    return nested_f(small, ols(np.column_stack([A, B, S, AB]), y))


# The QAT bits x warmdown interaction as a repeated-measures test. interaction_f above lets one seed
# effect stand for both bit-widths: a seed's bit-width effect (seed x bits) then sits in the error and
# the F test loses its size and its power. Taking, per seed, the penalty p_sw = L_b,s,w - L_16,s,w at
# each warmdown w puts seed x bits in its own stratum (a constant of seed s over w: a block) and
# cancels seed x warmdown; what is left for the error is the seed x bits x warmdown residual, the
# interaction's error term in the split-plot model.

def repeated_measures_f(y):
    """One-way repeated-measures ANOVA of y [n seeds x k conditions] with seeds as blocks (the textbook
    subjects-by-treatments design): SS_cond = n sum_j (ybar_.j - ybar)^2, SS_seed = k sum_i (ybar_i. -
    ybar)^2, SS_err = SS_total - SS_cond - SS_seed; F = (SS_cond / (k - 1)) / (SS_err / ((n - 1)(k - 1))).
    For k = 2 it is the paired t test (F = t^2). Exact under compound symmetry (iid seed x condition
    errors), as the QAT model's penalty has; no sphericity correction. -> F, df1, df2, p, ms_error, n, k,
    means (per condition); F and p nan without error dof; with no error variance (up to round-off) p is
    0 when the condition means differ and 1 when they do not (as paired_hypothesis with sd 0)."""
    y = np.asarray(y, dtype=float)
    if y.ndim != 2 or not np.all(np.isfinite(y)):
        raise ValueError("repeated_measures_f needs a finite [seeds x conditions] array")
    n, k = y.shape
    grand = y.mean()
    ss_cond = n * float(((y.mean(0) - grand) ** 2).sum())
    # the residual directly (not SS_total minus the rest, which cancels to round-off noise)
    ss_err = float(((y - y.mean(1, keepdims=True) - y.mean(0) + grand) ** 2).sum())
    df1, df2 = k - 1, (n - 1) * (k - 1)
    out = {"F": math.nan, "df1": df1, "df2": df2, "p": math.nan, "ms_error": None, "n": n, "k": k,
           "means": y.mean(0).tolist()}
    if df1 < 1 or df2 < 1:
        return out
    out["ms_error"] = ss_err / df2
    tiny = y.size * (64 * np.finfo(float).eps * max(1.0, float(np.abs(y).max()))) ** 2  # zero up to round-off
    if ss_err > tiny:
        out["F"] = (ss_cond / df1) / out["ms_error"]
        out["p"] = float(scistats.f.sf(out["F"], df1, df2))
    else:  # every seed moved by exactly the same amount: sure of a change, unless there is none
        out["F"], out["p"] = (math.inf, 0.0) if ss_cond > tiny else (0.0, 1.0)
    return out


def f_noncentrality_for_power(df1, df2, level=BETTER_LEVEL, power=0.8):
    """The noncentrality lambda at which an F(df1, df2) test at this level rejects with this power (the
    noncentral F's sf at the critical value equals power): what every F test's detectable effect is made of."""
    from scipy.optimize import brentq
    crit = scistats.f.ppf(1 - level, df1, df2)
    return float(brentq(lambda lam: scistats.ncf.sf(crit, df1, df2, lam) - power, 1e-9, 1e5))


def rm_anova_mde(ms_error, n, k, level=BETTER_LEVEL, power=0.8):
    """The smallest difference delta between two condition means (the other k - 2 at their midpoint)
    that repeated_measures_f detects with this power at this level: the noncentral F(k - 1, (n - 1)(k - 1))
    with noncentrality n sum_j (mu_j - mu)^2 / sigma^2 = n delta^2 / (2 ms_error). For k = 2 this is
    min_detectable_effect of the paired t test on the per-seed difference (ms_error = sd_d^2 / 2).
    None without an error variance or below 2 seeds / 2 conditions."""
    if ms_error is None or not ms_error > 0 or n < 2 or k < 2:
        return None
    return math.sqrt(2 * f_noncentrality_for_power(k - 1, (n - 1) * (k - 1), level, power) * ms_error / n)


def lack_of_fit_mde(lof, n_total, level=BETTER_LEVEL, power=0.8):
    """The smallest root mean square departure of the group means from a law (weighted by replicates, as
    law_lack_of_fit's rms) that lack_of_fit_f detects with this power: noncentrality sum n_i dev_i^2 /
    sigma^2 = n_total rms^2 / ms_pe. None without the test."""
    if not lof or not lof.get("ms_pe") or not n_total:
        return None
    return math.sqrt(f_noncentrality_for_power(lof["df1"], lof["df2"], level, power) * lof["ms_pe"] / n_total)


def coef_mde(se, dof, level=BETTER_LEVEL, power=0.8):
    """The smallest coefficient a two-sided t test (t = est / se on dof) detects with this power: the
    paired-t detectable effect with noncentrality est / se (min_detectable_effect with sd = se sqrt(dof + 1))."""
    if se is None or not se > 0 or dof < 1:
        return None
    return min_detectable_effect(se * math.sqrt(dof + 1), dof + 1, level, power)


def ols_coef_tests(fit):
    """Two-sided t test of each coefficient of an ols() fit against 0 (t = est / se on its residual dof):
    the same coefficient dicts with t and p added (None without residual dof or se)."""
    out = []
    for c in fit["coefs"]:
        ok = fit["dof"] > 0 and c["se"] > 0 and math.isfinite(c["se"])
        t = c["est"] / c["se"] if ok else None
        out.append({**c, "t": t, "p": float(2 * scistats.t.sf(abs(t), fit["dof"])) if ok else None})
    return out


def loglinear_nd_fit(N, D, y, level=0.95):
    """OLS of ln y = ln k + gamma_D ln D - gamma_N ln N (the QAT scaling law of Chen et al. 2025,
    arXiv 2505.14302, at a fixed group size): the law delta = k D^gamma_D / N^gamma_N. None when the
    design does not identify it (fewer than 4 points, or ln D and ln N collinear: D must vary at
    fixed N). Returns k, gamma_N, gamma_D, n, r2 and what predict_nd needs."""
    N, D, y = (np.asarray(v, dtype=float).ravel() for v in (N, D, y))
    if y.size < 4 or not (np.all(y > 0) and np.all(N > 0) and np.all(D > 0)):
        return None
    if not any(len(set(D[N == n])) > 1 for n in set(N)):  # D ~ N (a fixed token budget per parameter):
        return None                                       # collinear, however the floats round
    X = np.column_stack([np.ones(y.size), np.log(D), -np.log(N)])
    fit = ols(X[:, 1:], np.log(y), ["gamma_D", "gamma_N"], level)
    c = {x["name"]: x["est"] for x in fit["coefs"]}
    return {"k": math.exp(c["intercept"]), "gamma_N": c["gamma_N"], "gamma_D": c["gamma_D"], "n": int(y.size),
            "r2": fit["r2"], "s": fit["s"], "dof": fit["dof"], "xtx_inv": np.linalg.pinv(X.T @ X).tolist()}


def predict_nd(fit, N, D, level=0.95):
    """The N-D law's prediction at (N, D) and its level prediction interval (the OLS formula in log
    space, t on n - 3 dof, exponentiated): (pred, lo, hi); lo, hi None without residual dof."""
    x0 = np.array([1.0, math.log(D), -math.log(N)])
    yh = math.log(fit["k"]) + fit["gamma_D"] * x0[1] + fit["gamma_N"] * x0[2]
    if fit["dof"] < 1 or not math.isfinite(fit["s"]):
        return math.exp(yh), None, None
    half = scistats.t.ppf((1 + level) / 2, fit["dof"]) * fit["s"] * math.sqrt(1 + x0 @ np.array(fit["xtx_inv"]) @ x0)
    return math.exp(yh), math.exp(yh - half), math.exp(yh + half)
