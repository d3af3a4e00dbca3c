"""studies/stats.py against the field's libraries: every function that statsmodels (or scipy) also
provides is checked against the library call, on the per-seed values stored in results/ and on seeded
random designs. stats.py itself stays numpy and scipy only (its outputs regenerate the stored analyses
byte for byte); statsmodels is a test dependency (requirements.txt).

  stats.py                                   library
  holm                                       statsmodels.stats.multitest.multipletests(method="holm")
  paired_z, paired_p, paired_hypothesis      scipy.stats.ttest_rel / ttest_1samp, DescrStatsW.ttest_mean,
                                             DescrStatsW.tconfint_mean
  tost, equivalence_hypothesis's TOSTs       statsmodels.stats.weightstats.ttost_paired, DescrStatsW.ttost_mean
  min_detectable_effect, seeds_needed,       statsmodels.stats.power.TTestPower (power, solve_power),
  coef_mde, tost_power's two sides           ttest_power
  f_noncentrality_for_power, rm_anova_mde,   statsmodels.stats.power.FTestPowerF2 (ncc=0), ftest_power_f2
  lack_of_fit_mde
  ols, ols_coef_tests, r2_in_sample, loo_r2  statsmodels OLS: params, bse, conf_int, tvalues, pvalues,
                                             rsquared, get_influence().resid_press
  nested_f, interaction_f, lack_of_fit_f,    OLSResults.compare_f_test, f_test, t_test (nested models and
  remove_one                                 linear hypotheses on the cell-means model)
  predict_interval, predict_nd               OLSResults.get_prediction(...).summary_frame(alpha) obs_ci_*
  seed_noise_check                           WLS with weights 1 / se^2, cov_type="fixed scale" (scale 1)
  blocked_factorial (pooled error)           OLS on seed dummies plus the +-1-coded factorial terms
  repeated_measures_f                        statsmodels.stats.anova.AnovaRM
  wave 5: directional and non-inferiority    each contrast's scipy ttest_1samp (two-sided; one-sided "greater"
  intersection-unions, law_lof, law_pi       at -margin) and DescrStatsW intervals; the lack-of-fit F by
                                             compare_f_test of nested OLS fits; prediction intervals as above

No library has these, so they are kept with their sources in stats.py and checked there
(tests/test_stats.py): gg_epsilon (Greenhouse & Geisser 1959, Box 1954: AnovaRM has no sphericity
correction), the intersection-union test over TOSTs (Berger 1982; its TOSTs are checked here),
pooled_rm_f, factorial_pooling_check. The exact sign test of wave 2 (studies/wave.py) is
scipy.stats.binomtest, checked here on any stored hypothesis that uses it.

Tolerances. SAME (relative 1e-9): the same formula evaluated in another order of floating-point
operations (observed agreement about 1e-11 at worst, tail p values included). POWER_ABS (1e-9 in
power): the library's power function evaluated at the effect stats.py solved for (the same noncentral
t / F; only the root finder's tolerance is left). SOLVED (relative 1e-5): an effect both sides solve for, where
statsmodels' solve_power stops at its own tolerance (observed ~2e-6). solve_power is compared only where
it finds the root: TTestPower's at n 3 and level 0.05 / 25 returns an effect of 5.5 sd (power 0.17),
FTestPowerF2's at F(1, 6) and F(2, 4) an f2 near 0 (power 0.05), both flagged as converged; and
ttest_power is nan far in the noncentral t's tail (a coefficient on 2 dof at 0.05 / 25). stats.py's
brentq on a widening bracket (min_detectable_effect, f_noncentrality_for_power) has none of these, so it
stays; its roots are checked instead with the library's power function, which is reliable there."""
import gc
import glob
import itertools
import json
import math
import os
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scistats
from statsmodels.regression.linear_model import OLS, WLS
from statsmodels.stats.anova import AnovaRM
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import FTestPowerF2, TTestPower, ftest_power_f2, ttest_power
from statsmodels.stats.weightstats import DescrStatsW, ttost_paired
from statsmodels.tools.sm_exceptions import SingularMatrixWarning

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from studies import stats  # noqa: E402

SAME, SOLVED, POWER_ABS = 1e-9, 1e-5, 1e-9
RETRIEVAL = ("retrieval", "retrieval_gain", "retrieval_more")  # gated per run in longctx: not refitted here


def load_docs():
    paths = sorted(set(glob.glob(os.path.join(ROOT, "results", "*", "analysis.json"))
                       + glob.glob(os.path.join(ROOT, "results", "*", "*", "analysis.json"))))
    out = {}
    for p in paths:
        with open(p) as f:
            out[os.path.relpath(p, ROOT)] = json.load(f)
    return out


DOCS = load_docs()


def families(docs):
    """(path, family) for every decided family stored anywhere in an analysis (study and confirmatory)."""
    def walk(o):
        if isinstance(o, dict):
            if isinstance(o.get("hypotheses"), list) and "alpha" in o:
                yield o
            for v in o.values():
                yield from walk(v)
        elif isinstance(o, list):
            for v in o:
                yield from walk(v)
    return [(p, fam) for p, d in docs.items() for fam in walk(d)]


def holm_library(ps):
    """multipletests(method="holm")'s adjusted p's. It calls gc.collect() each time, which with the stored
    analyses in memory takes ~0.2 s: the objects alive now are frozen out of that collection meanwhile."""
    gc.freeze()
    try:
        return multipletests(ps, method="holm")[1]
    finally:
        gc.unfreeze()


def close(a, b, rel=SAME, scale=0.0):
    """a and b agree to rel (relative) or, for values near 0, to rel * scale (the size of the problem)."""
    return a is not None and b is not None and math.isclose(a, b, rel_tol=rel, abs_tol=rel * scale)


def flat(per):
    return np.array([v for v in per.values() if v is not None], dtype=float)


def contrasts(h):
    per = h.get("per_seed") or {}
    return per if per and all(isinstance(v, dict) for v in per.values()) else {"": per}


def kind(h):
    """Which library check a stored hypothesis's p rests on."""
    t = h.get("test", "")
    if h.get("kind") in ("iut", "ni", "lof", "pi"):  # wave 5's intersection-union, non-inferiority and law tests
        return "w5 " + h["kind"]
    if h.get("margin") is not None:
        return "tost"
    if "sign test" in t:
        return "sign"
    for prefix, k in (("factorial t", "factorial"), ("repeated-measures F", "rm"), ("lack-of-fit F", "lof"),
                      ("OLS t", "ols t"), ("nested F", "nested F")):
        if t.startswith(prefix):
            return k
    if h.get("per_seed") and not any(isinstance(v, dict) for v in h["per_seed"].values()):
        return "t"
    return None


def hypotheses(docs, k):
    """(where, hypothesis) of every stored hypothesis whose p rests on library check k (kind)."""
    return ((where, h) for where, fam in families(docs) for h in fam["hypotheses"] if kind(h) == k)


# ---- checks on the stored values: each returns (number of numbers compared, mismatches) ----

def check_holm(docs):
    n, bad = 0, []
    for where, fam in families(docs):
        ps = [h["p"] for h in fam["hypotheses"]]
        idx = [i for i, p in enumerate(ps) if p is not None]
        if not idx:
            continue
        lib = holm_library([ps[i] for i in idx])
        mine = stats.holm(ps)
        for i, want in zip(idx, lib):
            n += 1
            stored = fam["hypotheses"][i].get("p_holm")
            if not (mine[i] == float(want) and stored == float(want)):  # the same products and maxima: bit for bit
                bad.append(f"{where} #{i}: holm {mine[i]}, stored {stored}, multipletests {want}")
    return n, bad


def t_library(a):
    """The library's one-sample t test of a against 0 and its 95% interval; None where the sd is 0."""
    if a.size < 2 or np.ptp(a) <= 1e-12 * max(1.0, float(np.abs(a).max())):
        return None
    d = DescrStatsW(a)
    return scistats.ttest_1samp(a, 0.0).pvalue, d.ttest_mean(0.0)[1], d.tconfint_mean(0.05)


def check_t(docs):
    n, bad = 0, []
    for where, h in hypotheses(docs, "t"):
        a = flat(h["per_seed"])
        lib = t_library(a)
        if lib is None:  # stats.py's convention, not the library's: round-off contrasts p 1, equal ones no p
            want = 1.0 if a.size > 1 and np.abs(a).max() < 1e-12 else None
            n += 1
            if h["p"] != want:
                bad.append(f"{where} {h['claim']}: sd 0, stored p {h['p']}, want {want}")
            continue
        p_scipy, p_sm, (lo, hi) = lib
        n += 1
        unread = h.get("not_read") and h["p"] is None  # a rung test below its minimum of seeds: no p, by rule
        if not ((unread or (close(h["p"], p_scipy) and close(h["p"], p_sm)))
                and close(h["effect"], float(a.mean()), scale=hi - lo)
                and close(h["ci"][0], lo, scale=hi - lo) and close(h["ci"][1], hi, scale=hi - lo)):
            bad.append(f"{where} {h['claim']}: stored p {h['p']} ci {h['ci']}, library p {p_scipy} / {p_sm} ci {lo, hi}")
    return n, bad


def check_tost(docs):
    n, bad = 0, []
    for where, h in hypotheses(docs, "tost"):
        cs = {k: flat(v) for k, v in contrasts(h).items()}
        ps = [DescrStatsW(a).ttost_mean(-h["margin"], h["margin"])[0] if t_library(a) else None for a in cs.values()]
        want = None if any(p is None for p in ps) else max(ps)  # intersection-union: the largest TOST p
        worst = max(cs, key=lambda k: abs(cs[k].mean()))
        lo, hi = DescrStatsW(cs[worst]).tconfint_mean(0.10)  # the TOST's (1 - 2 alpha) interval
        n += 1
        ok = (h["p"] is None) if want is None else close(h["p"], want)
        if not (ok and close(h["ci"][0], lo, scale=hi - lo) and close(h["ci"][1], hi, scale=hi - lo)
                and close(h["effect"], float(cs[worst].mean()), scale=hi - lo)):
            bad.append(f"{where} {h['claim']}: stored p {h['p']} ci {h['ci']}, ttost_mean p {want} ci {lo, hi}")
    return n, bad


def check_iut(docs):
    """Wave 5's directional intersection-union (decisions.directional_iut): each contrast's paired t and 95%
    interval (scipy / statsmodels); the hypothesis's p, the largest contrast p, or, where contrasts lie against the
    declared direction, the Bonferroni p of the strongest of them (m x its p); its interval, the deciding
    contrast's at the Bonferroni level (1 - 0.05 / m)."""
    n, bad = 0, []
    for where, h in hypotheses(docs, "w5 iut"):
        cs = {k: flat(v) for k, v in h["per_seed"].items()}
        m, lib = len(cs), {k: t_library(a) for k, a in cs.items()}
        for k, (p, _, (lo, hi)) in lib.items():
            c = h["contrasts"][k]
            n += 1
            if not (close(c["p"], p) and close(c["ci"][0], lo, scale=hi - lo) and close(c["ci"][1], hi, scale=hi - lo)):
                bad.append(f"{where} {h['id']} {k}: stored p {c['p']} ci {c['ci']}, library p {p} ci {lo, hi}")
        against = [k for k in cs if np.sign(cs[k].mean()) != h["declared"]]
        want = min(1.0, m * min(lib[k][0] for k in against)) if against else max(v[0] for v in lib.values())
        deciding = (min(against, key=lambda k: lib[k][0]) if against else max(lib, key=lambda k: lib[k][0]))
        lo, hi = DescrStatsW(cs[deciding]).tconfint_mean(0.05 / m)
        n += 1
        if not (close(h["p"], want) and h["deciding"] == deciding and close(h["ci"][0], lo, scale=hi - lo) and close(h["ci"][1], hi, scale=hi - lo)):
            bad.append(f"{where} {h['id']}: stored p {h['p']} ci {h['ci']}, library p {want} ci {lo, hi}")
    return n, bad


def check_ni(docs):
    """Wave 5's non-inferiority intersection-union (decisions.noninferior_iut): per contrast the one-sided t that
    its mean is above -margin (scipy, alternative "greater") and its 90% interval; the hypothesis's p, the
    largest; its effect and interval, the deciding contrast's."""
    n, bad = 0, []
    for where, h in hypotheses(docs, "w5 ni"):
        cs = {k: flat(v) for k, v in h["per_seed"].items()}
        ps = {k: scistats.ttest_1samp(a, -h["margin"], alternative="greater").pvalue for k, a in cs.items()}
        for k, a in cs.items():
            lo, hi = DescrStatsW(a).tconfint_mean(0.10)
            c = h["contrasts"][k]
            n += 1
            if not (close(c["p"], ps[k]) and close(c["ci"][0], lo, scale=hi - lo) and close(c["ci"][1], hi, scale=hi - lo)):
                bad.append(f"{where} {h['id']} {k}: stored p {c['p']} ci {c['ci']}, library p {ps[k]} ci {lo, hi}")
        n += 1
        if not close(h["p"], max(ps.values())) or h["deciding"] != max(ps, key=ps.get) \
                or h["effect"] != h["contrasts"][h["deciding"]]["effect"]:
            bad.append(f"{where} {h['id']}: stored p {h['p']}, library p {max(ps.values())}")
    return n, bad


def check_law5(docs):
    """Wave 5's law tests. law_lof: the lack-of-fit F as the nested comparison of OLS models (seeds + ln N against
    seeds + size dummies: OLSResults.compare_f_test) and the per-seed slopes' t (scipy); law_pi: the held-out
    sizes' 95% prediction intervals from OLS on the fit sizes' means (get_prediction's obs_ci)."""
    n, bad = 0, []
    for where, h in hypotheses(docs, "w5 lof"):
        sizes, seeds = list(h["per_seed"]), sorted(set().union(*h["per_seed"].values()))
        y = np.array([h["per_seed"][z][sd] for z in sizes for sd in seeds])
        S = np.array([[float(sd == t) for t in seeds] for _ in sizes for sd in seeds])
        x = np.array([[h["x"][z]] for z in sizes for _ in seeds])
        D = np.array([[float(z == t) for t in sizes[1:]] for z in sizes for _ in seeds])
        full, lin = OLS(y, np.hstack([S, D])).fit(), OLS(y, np.hstack([S, x])).fit()
        F, p, _ = full.compare_f_test(lin)
        X = np.array([h["x"][z] for z in sizes])
        slopes = np.array([np.polyfit(X, [h["per_seed"][z][sd] for z in sizes], 1)[0] for sd in seeds])
        sp, _, (lo, hi) = t_library(slopes)
        n += 2
        if not (close(h["F"], F) and close(h["lof_p"], p) and list(h["df"]) == [len(sizes) - 2, int(full.df_resid)]):
            bad.append(f"{where} {h['id']}: stored F {h['F']} p {h['lof_p']} df {h['df']}, compare_f_test F {F} p {p}")
        if not (close(h["slope"]["p"], sp) and close(h["slope"]["ci"][0], lo, scale=hi - lo)
                and close(h["slope"]["ci"][1], hi, scale=hi - lo)
                and close(h["slope"]["effect"], float(slopes.mean()), scale=hi - lo)):
            bad.append(f"{where} {h['id']}: stored slope {h['slope']}, library p {sp} ci {lo, hi}")
    for where, h in hypotheses(docs, "w5 pi"):
        mean = {z: float(flat(v).mean()) for z, v in h["per_seed"].items()}
        X = np.array([[1.0, math.log(h["n_params"][z])] for z in h["fit"]])
        fit = OLS(np.array([mean[z] for z in h["fit"]]), X).fit()
        for z in h["held_sizes"]:
            f = fit.get_prediction(np.array([[1.0, math.log(h["n_params"][z])]])).summary_frame(alpha=0.05).iloc[0]
            held = h["held"][z]
            n += 1
            if not (close(held["pred"], f["mean"]) and close(held["lo"], f["obs_ci_lower"], scale=held["half"])
                    and close(held["hi"], f["obs_ci_upper"], scale=held["half"]) and close(held["mean"], mean[z])):
                bad.append(f"{where} {h['id']} {z}: stored {held}, library {dict(f)}")
    return n, bad


def check_sign(docs):
    n, bad = 0, []
    for where, h in hypotheses(docs, "sign"):
        a = flat(contrasts(h)[next(iter(contrasts(h)))])
        want = scistats.binomtest(int((a > 0).sum()), a.size, 0.5).pvalue
        n += 1
        if not close(h["p"], want):
            bad.append(f"{where} {h['claim']}: stored p {h['p']}, binomtest {want}")
    return n, bad


def lib_t_power(d, nobs, level, df=None):
    """statsmodels' two-sided t power; where it is nan (far in the noncentral t's tail, as the module's note says),
    its one-sided power at level / 2: the other tail, P(T < -t_crit), is then below 1e-12."""
    p = ttest_power(d, nobs, level, df=df)
    return p if math.isfinite(p) else ttest_power(d, nobs, level / 2, df=df, alternative="larger")


def check_power(docs):
    """Every stored detectable effect (mde, at the family's alpha / m) has 80% power by the library's
    power function for its test: the paired / one-sample t (TTestPower), a coefficient's t (noncentrality
    est / se on its dof), the repeated-measures F (noncentrality n mde^2 / (2 ms_error)) and the
    lack-of-fit F (n_total mde^2 / ms_pe), the F's by ftest_power_f2 with ncc=0 (f2 = lambda / (df1 + df2))."""
    n, bad = 0, []
    for where, fam in families(docs):
        level = fam["alpha"] / max(fam["m"], 1)
        for h in fam["hypotheses"]:
            if h.get("mde") is None:
                continue
            plan = h.get("plan") or {}
            if plan.get("ms_error"):
                d1, d2 = plan["k"] - 1, (h["n"] - 1) * (plan["k"] - 1)
                power = ftest_power_f2(h["n"] * h["mde"] ** 2 / (2 * plan["ms_error"]) / (d1 + d2), d1, d2, level, ncc=0)
            elif plan.get("ms_pe"):
                d1, d2 = plan["df1"], plan["df2"]
                power = ftest_power_f2(plan["n_total"] * h["mde"] ** 2 / plan["ms_pe"] / (d1 + d2), d1, d2, level, ncc=0)
            elif plan.get("se"):
                power = lib_t_power(h["mde"] / plan["se"], 1, level, df=plan["dof"])
            else:
                power = lib_t_power(h["mde"] / h["sd"], h["n"], level)
            n += 1
            if not abs(power - 0.8) < POWER_ABS:
                bad.append(f"{where} {h['claim']}: stored mde {h['mde']} has library power {power}")
    return n, bad


def anova_rm(per_seed):
    """AnovaRM's F, dofs and p of {seed: {condition: y}}."""
    df = pd.DataFrame([(sd, str(w), v) for sd, row in per_seed.items() for w, v in row.items()],
                      columns=["seed", "cond", "y"])
    return AnovaRM(df, "y", "seed", within=["cond"]).fit().anova_table.iloc[0]


def check_rm(docs):
    n, bad = 0, []
    for where, d in docs.items():
        for r in (d.get("qat") or {}).get("interaction") or []:
            F, d1, d2, p = anova_rm(r["per_seed"])
            wds = sorted(next(iter(r["per_seed"].values())), key=float)
            mine = stats.repeated_measures_f([[row[w] for w in wds] for _, row in sorted(r["per_seed"].items())])
            n += 1
            if not (close(r["F"], F) and close(r["p"], p) and (r["df1"], r["df2"]) == (d1, d2) and close(mine["F"], F)):
                bad.append(f"{where} {r['bits']} {r['size']}: stored F {r['F']} p {r['p']}, AnovaRM F {F} p {p}")
            key = next(w for w in wds if float(w) == r["ref_warmdown"])
            for did in r["did"]:  # each warmdown's difference in differences: the paired t over seeds
                w = next(x for x in wds if float(x) == did["warmdown"])
                lib = t_library(np.array([row[w] - row[key] for row in r["per_seed"].values()]))
                n += 1
                if lib and not (close(did["p"], lib[0]) and close(did["ci"][0], lib[2][0], scale=lib[2][1] - lib[2][0])):
                    bad.append(f"{where} {r['bits']} {r['size']} wd {w}: stored p {did['p']}, library {lib[0]}")
    return n, bad


def longctx_frames(lc):
    """{outcome: DataFrame of the main recipe's final runs} as outcome_report fits them (retrieval aside)."""
    rows = [w for w in lc["runs"] if w["recipe"] == lc["main_recipe"] and w["ckpt"] == "final"]
    out = {}
    for key, o in lc["outcomes"].items():
        if key in RETRIEVAL:
            continue
        feats = [e["feature"] for e in o["effects"]]
        rs = [w for w in rows if w[key] is not None]
        out[key] = (o, feats, pd.DataFrame([{**{f: w[f] for f in feats}, "count": sum(w[f] for f in feats),
                                              "cell": w["cell"], "seed": w["seed"], "y": w[key]} for w in rs]))
    return rows, out


def check_longctx(docs):
    """Per stored outcome: the count / additive / pairwise / saturated models as statsmodels formulas
    (coefficients, se, 95% intervals, residual sd, R^2, dof), their nested F tests (compare_f_test), the
    remove-one increments and their equality F (t_test / f_test on the cell-means model); the family's
    factorial pooled t (OLS on seed dummies and the +-1-coded terms) and its nested F hypothesis."""
    n, bad = 0, []
    for where, d in docs.items():
        lc = d.get("longctx")
        if not lc:
            continue
        rows, frames = longctx_frames(lc)
        for key, (o, feats, df) in frames.items():
            scale = float(df["y"].abs().max())
            add = " + ".join(feats)
            forms = {"count": "y ~ count", "additive": "y ~ " + add, "pairwise": f"y ~ ({add})**2",
                     "saturated": "y ~ " + " * ".join(feats)}
            with warnings.catch_warnings():  # a fractional design (confirm runs) is rank-deficient: min-norm, as ols
                warnings.simplefilter("ignore", SingularMatrixWarning)
                fits = {m: OLS.from_formula(f, df).fit() for m, f in forms.items()}
            for m in o["models"]:
                fit = fits[m["model"]]
                ci = fit.conf_int(0.05)
                n += 1
                ok = (close(m["r2"], fit.rsquared) and close(m["s"], math.sqrt(fit.scale), scale=scale)
                      and m["dof"] == fit.df_resid)
                for c in m["coefs"]:
                    name = "Intercept" if c["name"] == "intercept" else c["name"]
                    want = (("est", fit.params[name]), ("se", fit.bse[name]), ("lo", ci.loc[name, 0]),
                            ("hi", ci.loc[name, 1]))
                    ok &= all(close(c[k], float(v), scale=scale) for k, v in want)
                if not ok:
                    bad.append(f"{where} {key} {m['model']}: stored fit differs from statsmodels OLS")
            for t in o["tests"]:
                small, big = t["test"].split(" vs ")
                F, p, df1 = fits[big].compare_f_test(fits[small])
                n += 1
                if not (close(t["F"], F) and close(t["p"], p) and t["df1"] == df1 and t["df2"] == fits[big].df_resid):
                    bad.append(f"{where} {key} {t['test']}: stored F {t['F']} p {t['p']}, compare_f_test {F} {p}")
            cells = sorted(df["cell"].unique())
            cm = OLS(df["y"].to_numpy(), (df["cell"].to_numpy()[:, None] == np.array(cells)).astype(float)).fit()
            full, ro, idx = "1" * len(feats), o["remove_one"], []
            for i, inc in enumerate(ro["increments"]):
                c = full[:i] + "0" + full[i + 1:]
                if inc["increment"] is None:
                    continue
                idx.append(cells.index(c))
                R = np.zeros(len(cells))
                R[cells.index(full)], R[cells.index(c)] = 1, -1
                tt = cm.t_test(R)
                lo, hi = tt.conf_int(0.05)[0]
                n += 1
                if not (close(inc["increment"], float(tt.effect[0]), scale=scale) and close(inc["lo"], lo, scale=scale)
                        and close(inc["hi"], hi, scale=scale)):
                    bad.append(f"{where} {key} remove-one {inc['feature']}: stored {inc}, t_test {tt.effect[0]} {lo, hi}")
            if len(idx) > 1:
                R = np.zeros((len(idx) - 1, len(cells)))
                for r, (a, b) in enumerate(zip(idx, idx[1:])):
                    R[r, a], R[r, b] = 1, -1
                ft = cm.f_test(R)
                n += 1
                if not (close(ro["equal"]["F"], float(ft.fvalue)) and close(ro["equal"]["p"], float(ft.pvalue))):
                    bad.append(f"{where} {key} remove-one equal: stored {ro['equal']}, f_test {ft.fvalue} {ft.pvalue}")
        fam = lc.get("family") or {}
        fx = fam.get("factorial")
        if fx:
            feats = [e["name"] for e in fx["effects"] if " x " not in e["name"]]
            rs = [w for w in rows if w["loss"] is not None and w["seed"] in fx["seeds"]]
            seeds = sorted({w["seed"] for w in rs})
            terms = [S for r in range(1, len(feats) + 1) for S in itertools.combinations(range(len(feats)), r)]
            names = [" x ".join(feats[i] for i in S) for S in terms]
            X = np.array([[float(w["seed"] == s) for s in seeds] + [np.prod([2 * w[feats[i]] - 1 for i in S]) for S in terms]
                          for w in rs])
            fit = OLS(np.array([w["loss"] for w in rs]), X).fit()
            ci = fit.conf_int(0.05)
            for e in fx["effects"]:
                j = len(seeds) + names.index(e["name"])
                n += 1
                if not (close(e["effect"], 2 * fit.params[j], scale=1.0) and close(e["se_pooled"], 2 * fit.bse[j])
                        and close(e["p_pooled"], fit.pvalues[j]) and close(e["ci_pooled"][0], 2 * ci[j, 0], scale=1.0)
                        and close(e["ci_pooled"][1], 2 * ci[j, 1], scale=1.0) and fx["dof_pooled"] == fit.df_resid):
                    bad.append(f"{where} factorial {e['name']}: stored p {e['p_pooled']}, OLS p {fit.pvalues[j]}")
            for h in fam["hypotheses"]:
                if kind(h) == "factorial":
                    j = len(seeds) + names.index(h["claim"].split()[0])
                    n += 1
                    if not close(h["p"], fit.pvalues[j]):
                        bad.append(f"{where} {h['claim']}: stored p {h['p']}, OLS p {fit.pvalues[j]}")
        for h in fam.get("hypotheses") or []:
            if kind(h) == "nested F":
                want = next(t for t in frames["loss"][0]["tests"] if t["test"] == "count vs additive")["p"]
                n += 1
                if h["p"] != want:
                    bad.append(f"{where} {h['claim']}: stored p {h['p']}, its nested F {want}")
    return n, bad


def check_laws(docs):
    """The QAT penalty laws: the log-linear law (alpha, beta, s, R^2) and its held-out prediction intervals
    (get_prediction's obs_ci at the stored level), its lack of fit (compare_f_test of the law fitted on
    the per-seed values within the cell-means model: the same F when every fit size has the same seeds),
    the seed-noise check (WLS with the known variances se^2 = sd^2 / n), and the N-D law (OLS in log space:
    coefficients with their t tests and intervals, prediction intervals, the pure-error mean square)."""
    n, bad = 0, []
    for where, d in docs.items():
        pl = d.get("penalty_law")
        if not pl:
            continue
        level = pl["level"]
        for g in pl["laws"]:
            if not g.get("fit"):
                continue
            fs = [s for s in g["sizes"] if s["role"] == "fit"]
            X = np.column_stack([np.ones(len(fs)), np.log([s["n_params"] for s in fs])])
            y = np.array([s["penalty"] for s in fs])
            fit = OLS(y, X).fit()
            scale = float(np.abs(y).max())
            n += 1
            if not (close(g["alpha"], fit.params[0], scale=scale) and close(g["beta"], fit.params[1], scale=scale)
                    and close(g["fit"]["s"], math.sqrt(fit.scale), scale=scale) and close(g["fit"]["r2"], fit.rsquared)):
                bad.append(f"{where} INT{g['bits']} law: stored {g['alpha'], g['beta']}, OLS {fit.params}")
            held = [s for s in g["sizes"] if s["role"] == "held-out"]
            if held:
                x0 = np.column_stack([np.ones(len(held)), np.log([s["n_params"] for s in held])])
                fr = fit.get_prediction(x0).summary_frame(alpha=1 - level)
                for s, (_, row) in zip(held, fr.iterrows()):
                    n += 1
                    if not all(close(s[k], row[c], scale=scale) for k, c in
                               (("pred", "mean"), ("lo", "obs_ci_lower"), ("hi", "obs_ci_upper"))):
                        bad.append(f"{where} INT{g['bits']} {s['size']}: stored interval {s['lo'], s['hi']}, "
                                   f"get_prediction {row['obs_ci_lower'], row['obs_ci_upper']}")
            lf = g.get("lack_of_fit")
            sizes = {len(s["per_seed"]) for s in fs}
            if lf and len(sizes) == 1:
                yy = np.concatenate([flat(s["per_seed"]) for s in fs])
                grp = np.repeat(np.arange(len(fs)), len(fs[0]["per_seed"]))
                law = OLS(yy, X[grp]).fit()
                cm = OLS(yy, (grp[:, None] == np.arange(len(fs))).astype(float)).fit()
                F, p, df1 = cm.compare_f_test(law)
                n += 1
                if not (close(lf["F"], F) and close(lf["p"], p) and close(lf["ms_pe"], cm.scale) and lf["df1"] == df1):
                    bad.append(f"{where} INT{g['bits']} lack of fit: stored F {lf['F']}, compare_f_test {F}")
            sc = g.get("seed_check")
            if sc:
                se = np.array([s["sd"] / math.sqrt(s["n"]) for s in fs])
                w = WLS(y, X, weights=1 / se ** 2).fit(cov_type="fixed scale", cov_kwds={"scale": 1.0})
                n += 1
                ok = (close(sc["alpha"], w.params[0], scale=scale) and close(sc["beta"], w.params[1], scale=scale)
                      and close(sc["beta_se"], w.bse[1]) and close(sc["chi2"], w.ssr))
                for s, hh in zip(held, sc["held"]):
                    pr = w.get_prediction(np.array([[1.0, math.log(s["n_params"])]]))
                    z = (s["penalty"] - pr.predicted_mean[0]) / math.sqrt(s["sd"] ** 2 / s["n"] + pr.var_pred_mean[0])
                    ok &= close(hh["pred"], pr.predicted_mean[0], scale=scale) and close(hh["z"], z, scale=1.0)
                if not ok:
                    bad.append(f"{where} INT{g['bits']} seed check: stored {sc}, WLS {w.params} {w.bse} {w.ssr}")
        for g in pl.get("laws_nd") or []:
            if g.get("k") is None:
                continue
            fc = [c for c in g["cells"] if c["in_nd_fit"] and c["penalty"] > 0]
            row = lambda c: [1.0, math.log(c["tokens"]), -math.log(c["n_params"])]
            fit = OLS(np.log([c["penalty"] for c in fc]), np.array([row(c) for c in fc])).fit()
            ci = fit.conf_int(1 - level)
            n += 1
            ok = close(g["k"], math.exp(fit.params[0])) and g["dof"] == fit.df_resid
            for j, c in enumerate(g["coefs"]):
                ok &= all(close(c[k], float(v), scale=1.0) for k, v in (("est", fit.params[j]), ("se", fit.bse[j]),
                          ("lo", ci[j, 0]), ("hi", ci[j, 1]), ("t", fit.tvalues[j])))
                ok &= close(c["p"], fit.pvalues[j])
            for c in g["cells"]:
                fr = fit.get_prediction(np.array([row(c)])).summary_frame(alpha=1 - level).iloc[0]
                ok &= all(close(c[k], math.exp(fr[col])) for k, col in
                          (("pred_nd", "mean"), ("lo_nd", "obs_ci_lower"), ("hi_nd", "obs_ci_upper")))
            lf = g.get("lack_of_fit")
            if lf:
                yy = np.concatenate([flat(c["per_seed"]) for c in fc])
                grp = np.concatenate([[i] * len(c["per_seed"]) for i, c in enumerate(fc)])
                ok &= close(lf["ms_pe"], OLS(yy, (grp[:, None] == np.arange(len(fc))).astype(float)).fit().scale)
            if not ok:
                bad.append(f"{where} INT{g['bits']} N-D law: stored fit differs from statsmodels OLS")
    return n, bad


# ---- the stored values ----

def test_there_are_stored_analyses_to_check():
    assert len(DOCS) >= 10 and len(families(DOCS)) >= 20


def test_every_stored_hypothesis_has_a_library_check():
    """Each stored p is one of the kinds checked below; a new kind of test fails here until it is checked."""
    missing = [(w, h["claim"], h.get("test")) for w, fam in families(DOCS) for h in fam["hypotheses"]
               if h.get("p") is not None and kind(h) is None]
    assert not missing, missing[:5]


@pytest.mark.parametrize("check, least", [(check_holm, 200), (check_t, 150), (check_tost, 20), (check_sign, 0),
                                          (check_power, 200), (check_rm, 20), (check_longctx, 100), (check_laws, 6),
                                          (check_iut, 13), (check_ni, 5), (check_law5, 4)],
                         ids=lambda x: getattr(x, "__name__", str(x)))
def test_stored_values_agree_with_the_library(check, least):
    n, bad = check(DOCS)
    assert n >= least, f"{check.__name__}: only {n} stored numbers found to check"
    assert not bad, "\n".join(bad[:10])


def test_a_changed_stored_value_fails_the_library_checks():
    """Each check compares numbers: a stored value moved a little is reported (each check run on a copy of
    the one analysis it was moved in)."""
    def moved(check, find, move):
        for where, d in DOCS.items():
            doc = json.loads(json.dumps(d))
            x = find(where, doc)
            if x is not None:
                move(x)
                return check({where: doc})[1]
        raise AssertionError(f"{check.__name__}: nothing stored to move")

    hyp = lambda pred: lambda w, d: next((h for _, f in families({w: d}) for h in f["hypotheses"] if pred(h)), None)
    cases = [
        (check_holm, hyp(lambda h: h.get("p_holm")), lambda h: h.update(p_holm=h["p_holm"] * 0.5)),
        (check_t, hyp(lambda h: kind(h) == "t" and h["p"] not in (None, 1.0)), lambda h: h.update(p=h["p"] * (1 + 1e-6))),
        (check_tost, hyp(lambda h: kind(h) == "tost" and h["p"] is not None),
         lambda h: h["ci"].__setitem__(1, h["ci"][1] + 1e-6 * (h["ci"][1] - h["ci"][0]))),
        (check_power, hyp(lambda h: h.get("mde") and not h.get("plan")), lambda h: h.update(mde=h["mde"] * 1.001)),
        (check_rm, lambda w, d: next(iter((d.get("qat") or {}).get("interaction") or []), None),
         lambda r: r.update(F=r["F"] * (1 + 1e-6))),
        (check_longctx, lambda w, d: (d.get("longctx") or {}).get("outcomes", {}).get("loss"),
         lambda o: o["models"][1]["coefs"][1].update(se=o["models"][1]["coefs"][1]["se"] * (1 + 1e-6))),
        (check_laws, lambda w, d: next((s for g in (d.get("penalty_law") or {}).get("laws", []) for s in g["sizes"]
                                        if g.get("fit") and s["role"] == "held-out"), None),
         lambda s: s.update(hi=s["hi"] + 1e-6)),
        (check_iut, hyp(lambda h: h.get("kind") == "iut"), lambda h: h.update(p=h["p"] * (1 + 1e-6))),
        (check_ni, hyp(lambda h: h.get("kind") == "ni"), lambda h: h.update(p=h["p"] * (1 - 1e-6))),
        (check_law5, hyp(lambda h: h.get("kind") == "lof"), lambda h: h.update(F=h["F"] * (1 + 1e-6))),
        (check_law5, hyp(lambda h: h.get("kind") == "pi"),
         lambda h: h["held"][h["held_sizes"][0]].update(hi=h["held"][h["held_sizes"][0]]["hi"] + 1e-6)),
    ]
    for check, find, move in cases:
        assert moved(check, find, move), f"{check.__name__} did not notice a changed value"


# ---- random designs (seeded), edge cases included ----

RNG = np.random.default_rng(20260)


def test_holm_is_multipletests_bit_for_bit():
    cases = [[0.01], [0.0, 1.0], [0.02, 0.02, 0.02], [0.3, 0.5, 0.9, 0.04], [0.01, None, 0.04, 0.03, None]]
    cases += [list(RNG.uniform(0, 0.3, m) ** RNG.uniform(1, 4)) for m in (2, 5, 12, 40)]
    cases += [list(np.round(RNG.uniform(0, 0.1, 10), 2))]  # ties
    for ps in cases:
        idx = [i for i, p in enumerate(ps) if p is not None]
        want = holm_library([ps[i] for i in idx])
        got = stats.holm(ps)
        assert [got[i] for i in idx] == [float(x) for x in want]
        assert all(got[i] is None for i in range(len(ps)) if i not in idx)


def test_paired_t_is_ttest_rel_and_ttest_mean():
    for n, scale, offset in ((2, 1.0, 0.0), (3, 1e-3, 5.0), (10, 1.0, 1e3), (16, 1e-6, 0.0), (40, 2.0, -3.0)):
        a = offset + RNG.normal(0, 1, n)
        b = a + scale * RNG.normal(0.5, 1, n)
        pz = stats.paired_z(a, b)
        want = scistats.ttest_rel(a, b)
        assert close(pz["z"], want.statistic) and close(stats.paired_p(pz["z"], n), want.pvalue)
        h = stats.paired_hypothesis("", dict(enumerate(a - b)))
        d = DescrStatsW(a - b)
        lo, hi = d.tconfint_mean(0.05)
        assert close(h["p"], d.ttest_mean(0.0)[1])
        assert close(h["ci"][0], lo, scale=hi - lo) and close(h["ci"][1], hi, scale=hi - lo)
        acc = stats.paired_acc(dict(enumerate(a)), dict(enumerate(b)))
        assert close(acc["p"], want.pvalue)
        assert close(stats.t_half_width(a - b), (hi - lo) / 2)
    # every seed the same contrast: the library's t is infinite / undefined, stats.py gives no p (not 0)
    assert stats.paired_hypothesis("", {0: 0.1, 1: 0.1, 2: 0.1})["p"] is None


def test_tost_is_ttost_paired():
    for n, shift, margin in ((2, 0.0, 1.0), (3, 0.2, 0.5), (10, -0.4, 0.5), (16, 0.0, 0.05), (8, 1.5, 0.5)):
        a = RNG.normal(0, 1, n)
        b = a - shift - 0.3 * RNG.normal(0, 1, n)
        t = stats.tost(dict(enumerate(a - b)), margin)
        p = ttost_paired(a, b, -margin, margin)[0]
        lo, hi = DescrStatsW(a - b).tconfint_mean(0.10)
        assert close(t["p"], p) and close(t["ci90"][0], lo, scale=hi - lo) and close(t["ci90"][1], hi, scale=hi - lo)
    # the intersection-union test (Berger 1982, no library): the largest of the library's TOST p's
    cs = {f"c{i}": dict(enumerate(RNG.normal(0.1 * i, 0.2, 6))) for i in range(3)}
    h = stats.equivalence_hypothesis("", cs, 0.5)
    assert close(h["p"], max(DescrStatsW(flat(c)).ttost_mean(-0.5, 0.5)[0] for c in cs.values()))


def test_paired_t_power_is_ttestpower():
    tp = TTestPower()
    for n, level in ((3, 0.05), (5, 0.05), (10, 0.05), (16, 0.05 / 3), (30, 0.01), (3, 0.05 / 25), (2, 0.05 / 24)):
        mde = stats.min_detectable_effect(2.0, n, level)
        assert abs(tp.power(effect_size=mde / 2.0, nobs=n, alpha=level) - 0.8) < POWER_ABS
        if n >= 5:  # where the library finds the root (the module docstring)
            assert close(mde / 2.0, tp.solve_power(effect_size=None, nobs=n, alpha=level, power=0.8), rel=SOLVED)
            # a coefficient's t: noncentrality est / se on its residual dof
            assert abs(ttest_power(stats.coef_mde(0.5, n - 1, level) / 0.5, 1, level, df=n - 1) - 0.8) < POWER_ABS
    for effect, level in ((1.0, 0.05), (0.5, 0.05), (0.3, 0.01)):  # seeds: the first integer past the library's n
        nobs = tp.solve_power(effect_size=effect, nobs=None, alpha=level, power=0.8)
        assert stats.seeds_needed(1.0, effect, level) == max(stats.MIN_SEEDS, math.ceil(nobs))


def test_tost_power_is_two_one_sided_ttestpowers():
    """tost_power = P(T_lo > t) + P(T_hi < -t) - 1, each side the library's one-sided t power."""
    for sd, n, margin, true in ((1.0, 10, 1.0, 0.0), (0.5, 4, 0.6, 0.1), (2.0, 30, 1.0, -0.3)):
        lo = ttest_power((true + margin) / sd, n, 0.05, alternative="larger")
        hi = ttest_power((true - margin) / sd, n, 0.05, alternative="smaller")
        assert close(stats.tost_power(sd, n, margin, 0.05, true), max(0.0, lo + hi - 1))


def test_f_power_is_ftestpower():
    """The noncentrality at which an F test has 80% power: the library's f2 times (df1 + df2) (ncc 0)."""
    for d1, d2, level in ((1, 6, 0.05), (2, 4, 0.05), (2, 14, 0.05), (2, 30, 0.05 / 12), (3, 45, 0.01)):
        lam = stats.f_noncentrality_for_power(d1, d2, level)
        assert abs(ftest_power_f2(lam / (d1 + d2), d1, d2, level, ncc=0) - 0.8) < POWER_ABS
        if d2 >= 14:  # where the library's solver finds the root (the module docstring)
            f2 = FTestPowerF2().solve_power(effect_size=None, df_num=d1, df_denom=d2, alpha=level, power=0.8, ncc=0)
            assert close(lam, float(np.squeeze(f2)) * (d1 + d2), rel=SOLVED)
    mde = stats.rm_anova_mde(2e-4, 8, 3, 0.05)
    assert abs(ftest_power_f2(8 * mde ** 2 / (2 * 2e-4) / 16, 2, 14, 0.05, ncc=0) - 0.8) < POWER_ABS
    lof = {"ms_pe": 3e-4, "df1": 1, "df2": 45}
    mde = stats.lack_of_fit_mde(lof, 48, 0.05)
    assert abs(ftest_power_f2(48 * mde ** 2 / 3e-4 / 46, 1, 45, 0.05, ncc=0) - 0.8) < POWER_ABS


def ols_agrees(X, y):
    X2 = X[:, None] if X.ndim == 1 else X
    A = np.column_stack([np.ones(len(y)), X2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularMatrixWarning)
        fit = OLS(y, A).fit()
    mine = stats.ols(X, y, level=0.9)
    scale = float(np.abs(y).max())
    ci = fit.conf_int(0.10)
    assert mine["dof"] == fit.df_resid and close(mine["sse"], fit.ssr, scale=scale ** 2) and close(mine["r2"], fit.rsquared)
    for j, c in enumerate(stats.ols_coef_tests(mine)):
        assert close(c["est"], fit.params[j], scale=scale) and close(c["se"], fit.bse[j], scale=scale)
        assert close(c["lo"], ci[j, 0], scale=scale) and close(c["hi"], ci[j, 1], scale=scale)
        if c["se"] > 1e-8 * scale:  # an aliased column's se is round-off on both sides
            assert close(c["t"], fit.tvalues[j], rel=1e-7, scale=1.0) and close(c["p"], fit.pvalues[j], rel=1e-7)
    assert close(stats.r2_in_sample(X, y), fit.rsquared)
    return fit


def test_ols_is_statsmodels_ols():
    x = RNG.normal(size=12)
    ols_agrees(x, 1 + 2 * x + RNG.normal(size=12))  # 1-D
    X = RNG.normal(size=(20, 3))
    fit = ols_agrees(X, X @ [0.5, -1, 0] + RNG.normal(size=20))
    press = fit.get_influence().resid_press  # leave-one-out residuals: loo_r2 = 1 - PRESS / SST
    y = fit.model.endog
    assert close(stats.loo_r2(X, y), 1 - float((press ** 2).sum()) / float(((y - y.mean()) ** 2).sum()))
    ols_agrees(np.column_stack([X, X[:, 0]]), X[:, 0] + RNG.normal(size=20))  # rank-deficient: min-norm on both sides
    Z = np.array(list(itertools.product((0, 1), repeat=3)) * 2, dtype=float)
    ols_agrees(stats.factorial_design(Z, "saturated")[0], RNG.normal(size=16) + 3)  # 8 dof, the cell means
    ols_agrees(RNG.normal(size=(5, 3)), RNG.normal(size=5) * 1e-4 + 7.0)  # 1 residual dof, an offset


def test_nested_f_and_interaction_f_are_compare_f_test():
    X = RNG.normal(size=(25, 4))
    y = X @ [1.0, 0.3, 0.0, 0.0] + RNG.normal(size=25)
    small, big = stats.ols(X[:, :2], y), stats.ols(X, y)
    lib_big, lib_small = (OLS(y, np.column_stack([np.ones(25), x])).fit() for x in (X, X[:, :2]))
    F, p, df1 = lib_big.compare_f_test(lib_small)
    got = stats.nested_f(small, big)
    assert close(got["F"], F) and close(got["p"], p) and got["df1"] == df1
    a, b, block = (np.repeat([0, 1, 2], 8), np.tile(np.repeat([0, 1], 4), 3), np.tile([0, 1, 2, 3], 6))
    y = 0.5 * a + 0.3 * b + 0.4 * (a == 2) * b + 0.2 * block + RNG.normal(0, 0.3, 24)
    df = pd.DataFrame({"y": y, "a": a, "b": b, "block": block})
    F, p, df1 = OLS.from_formula("y ~ C(a) * C(b) + C(block)", df).fit().compare_f_test(
        OLS.from_formula("y ~ C(a) + C(b) + C(block)", df).fit())
    got = stats.interaction_f(y, a, b, block)
    assert close(got["F"], F) and close(got["p"], p) and got["df1"] == df1 == 2


def test_prediction_intervals_are_get_prediction():
    x = np.exp(RNG.uniform(8, 12, 5))
    y = 0.04 + 0.002 * np.log(x) + RNG.normal(0, 0.003, 5)
    fit = stats.loglinear_fit(x, y)
    new = np.exp([7.0, 10.0, 13.0])
    yhat, lo, hi = stats.predict_interval(fit, new, level=0.9)
    fr = OLS(y, np.column_stack([np.ones(5), np.log(x)])).fit().get_prediction(
        np.column_stack([np.ones(3), np.log(new)])).summary_frame(alpha=0.1)
    for got, col in ((yhat, "mean"), (lo, "obs_ci_lower"), (hi, "obs_ci_upper")):
        assert all(close(g, w, scale=0.1) for g, w in zip(got, fr[col]))
    N, D = np.array([1e4, 1e4, 3e4, 3e4, 9e4, 9e4]), np.array([2e5, 6e5, 6e5, 2e6, 2e6, 5e6])
    y = 0.5 * D ** 0.1 / N ** 0.3 * np.exp(RNG.normal(0, 0.05, 6))
    nd = stats.loglinear_nd_fit(N, D, y)
    ols_nd = OLS(np.log(y), np.column_stack([np.ones(6), np.log(D), -np.log(N)])).fit()
    fr = ols_nd.get_prediction(np.array([[1.0, math.log(4e6), -math.log(2e5)]])).summary_frame(alpha=0.05).iloc[0]
    pred, lo, hi = stats.predict_nd(nd, 2e5, 4e6)
    assert close(pred, math.exp(fr["mean"]))
    assert close(lo, math.exp(fr["obs_ci_lower"])) and close(hi, math.exp(fr["obs_ci_upper"]))


def test_lack_of_fit_f_is_the_law_within_the_cell_means_model():
    """With the law's values from OLS on the per-seed values (unequal seeds per x included), the
    lack-of-fit F is compare_f_test of the law against the cell-means model."""
    xs, ns = [1.0, 2.0, 3.0, 4.5], [3, 5, 4, 6]
    x = np.repeat(xs, ns)
    y = 0.2 + 0.1 * x + 0.05 * (x == 3.0) + RNG.normal(0, 0.05, x.size)
    grp = np.repeat(np.arange(4), ns)
    law = OLS(y, np.column_stack([np.ones(x.size), x])).fit()
    cm = OLS(y, (grp[:, None] == np.arange(4)).astype(float)).fit()
    F, p, df1 = cm.compare_f_test(law)
    got = stats.lack_of_fit_f([y[grp == i] for i in range(4)], [law.params[0] + law.params[1] * v for v in xs])
    assert close(got["F"], F) and close(got["p"], p) and got["df1"] == df1 and close(got["ms_pe"], cm.scale)


def test_remove_one_is_a_linear_hypothesis_on_the_cell_means():
    Z = np.array(list(itertools.product((0, 1), repeat=3)) * 3)
    y = Z @ [0.3, -0.1, 0.2] + 0.2 * Z.prod(1) + RNG.normal(0, 0.1, len(Z))
    cells = sorted({tuple(z) for z in Z.tolist()})
    cm = OLS(y, np.array([[float(tuple(z) == c) for c in cells] for z in Z.tolist()])).fit()
    got = stats.remove_one(Z, y, cm.scale, int(cm.df_resid), level=0.9)
    idx = []
    for i, inc in enumerate(got["increments"]):
        one = tuple(0 if j == i else 1 for j in range(3))
        R = np.zeros(len(cells))
        R[cells.index((1, 1, 1))], R[cells.index(one)] = 1, -1
        tt = cm.t_test(R)
        lo, hi = tt.conf_int(0.10)[0]
        assert close(inc["increment"], float(tt.effect[0]), scale=1.0) and close(inc["lo"], lo) and close(inc["hi"], hi)
        idx.append(cells.index(one))
    ft = cm.f_test(np.array([[1.0 * (c == idx[r]) - 1.0 * (c == idx[r + 1]) for c in range(len(cells))] for r in range(2)]))
    assert close(got["equal"]["F"], float(ft.fvalue)) and close(got["equal"]["p"], float(ft.pvalue))


def test_seed_noise_check_is_wls_with_the_known_variances():
    pts = [(n, 0.05 - 0.003 * math.log(n) + RNG.normal(0, 0.002), sd, k)
           for n, sd, k in ((1e4, 0.01, 3), (3e4, 0.006, 5), (1e5, 0.008, 4), (3e5, 0.004, 6))]
    held = [(1e6, 0.01, 0.005, 4)]
    got = stats.seed_noise_check(pts, held)
    X = np.column_stack([np.ones(4), np.log([p[0] for p in pts])])
    w = WLS(np.array([p[1] for p in pts]), X, weights=[p[3] / p[2] ** 2 for p in pts]).fit(
        cov_type="fixed scale", cov_kwds={"scale": 1.0})
    pr = w.get_prediction(np.array([[1.0, math.log(1e6)]]))
    z = (0.01 - pr.predicted_mean[0]) / math.sqrt(0.005 ** 2 / 4 + pr.var_pred_mean[0])
    assert close(got["beta"], w.params[1], scale=0.01) and close(got["beta_se"], w.bse[1]) and close(got["chi2"], w.ssr)
    assert close(got["p_lack_of_fit"], scistats.chi2.sf(w.ssr, 2)) and close(got["held"][0]["z"], z, scale=1.0)


def test_blocked_factorial_pooled_t_is_ols_with_seed_blocks():
    k, n = 3, 4
    cells = list(itertools.product((0, 1), repeat=k))
    data = {s: {c: float(0.3 * c[0] - 0.2 * c[1] * c[2] + 0.4 * s + RNG.normal(0, 0.1)) for c in cells} for s in range(n)}
    bf = stats.blocked_factorial(data, k)
    terms = [S for r in range(1, k + 1) for S in itertools.combinations(range(k), r)]
    X = np.array([[float(s == j) for j in range(n)] + [np.prod([2 * c[i] - 1 for i in S]) for S in terms]
                  for s in range(n) for c in cells])
    fit = OLS(np.array([data[s][c] for s in range(n) for c in cells]), X).fit()
    for j, e in enumerate(bf["effects"]):
        assert close(e["effect"], 2 * fit.params[n + j], scale=1.0) and close(e["p_pooled"], fit.pvalues[n + j])
        assert close(e["p_seed"], scistats.ttest_1samp(flat(e["per_seed"]), 0.0).pvalue)


def test_repeated_measures_f_is_anovarm():
    for n, k in ((2, 3), (3, 3), (5, 2), (10, 4), (16, 3)):
        y = RNG.normal(0, 1, (n, 1)) + RNG.normal(0, 0.3, (n, k)) + np.linspace(0, 0.2, k)
        F, d1, d2, p = anova_rm({s: {c: y[s, c] for c in range(k)} for s in range(n)})
        got = stats.repeated_measures_f(y)
        assert close(got["F"], F) and close(got["p"], p) and (got["df1"], got["df2"]) == (d1, d2)
        if k == 2:  # the paired t test
            assert close(got["p"], scistats.ttest_rel(y[:, 0], y[:, 1]).pvalue)
