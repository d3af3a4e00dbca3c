"""
The larger rung's comparison across sizes: one confirmatory test decided at the tiny size and again at a larger
one (a rung: studies/waves/rung1.toml, whose hypotheses name the tiny tests they rerun, `mirrors`), both
verdicts, the difference of the effects with its interval, and whether the verdict holds, weakens or flips.
Pure functions of two decided hypotheses: the engine (studies/wave.py, the rung's write-up sections) and the
claims ledger (studies/ledger.py, its rung column) both call them.
"""
import re

import numpy as np

from studies.common import hypothesis_status, parse_size
from studies.stats import MIN_SEEDS, seed_stats, tost_power


def _welch(a, b):
    """(b - a, its 95% Welch interval) of two independent means given as (mean, sd, n); [d, d] when both sds are 0."""
    from scipy import stats as st
    (m1, s1, n1), (m2, s2, n2) = a, b
    v1, v2 = s1 ** 2 / n1, s2 ** 2 / n2
    d = m2 - m1
    if v1 + v2 == 0:
        return d, [d, d]
    dof = (v1 + v2) ** 2 / ((v1 ** 2 / (n1 - 1)) + (v2 ** 2 / (n2 - 1)))
    half = float(st.t.ppf(0.975, dof) * np.sqrt(v1 + v2))
    return d, [d - half, d + half]


def _contrasts(h):
    """{contrast key ('wd0.1', 'ln ratio'): (mean, sd, n, full name)} of an equivalence hypothesis; for a tiny test
    over several sizes the largest size's contrast is kept (the one nearest the rung)."""
    out = {}
    for name, per in sorted((h.get("per_seed") or {}).items(), key=lambda kv: parse_size(kv[0].split(" ")[0])):
        st_ = seed_stats(per)
        if st_["n"] >= 2:  # wave 1 names a contrast 'wd 0.1 - wd 0.33', wave 2 '14K wd0.1': both are 'wd0.1'
            m = re.search(r"wd ?([0-9.]+)", name)
            out[f"wd{m.group(1)}" if m else name] = (st_["mean"], st_["sd"], st_["n"], name)
    return out


def across(tiny, rung):
    """One test at both sizes: the difference of the effects (rung - tiny, in the seed's direction: positive = the
    effect grew the seed's way) with its 95% Welch interval (the two sizes ran different seeds: independent
    samples); for a claimed null, contrast by contrast (the same warmdown at both sizes; reported: the rung's
    largest). The verdict: holds = the same status; weakens = decided at tiny, undecided here (marked underpowered
    when the rung could not have found the tiny effect, or had < 80% power at a null's margin); flips = confirmed
    at one size and refuted at the other; not learned = so many seeds gated out at the rung that fewer than the
    minimum are left (the test not read); pending = not run."""
    ts, rs = hypothesis_status(tiny)[0], hypothesis_status(rung)[0]
    out = {"tiny": ts, "rung": rs, "diff": None, "diff_ci": None, "contrast": None, "why": None}
    if tiny and rung and tiny.get("margin") is not None:
        a, b = _contrasts(tiny), _contrasts(rung)
        both = [k for k in b if k in a]
        if both:
            k = max(both, key=lambda k: abs(b[k][0]))
            d, c = _welch(a[k][:3], b[k][:3])
            out.update(diff=float(d), diff_ci=[float(x) for x in c], contrast=f"{a[k][3]} -> {b[k][3]}")
    elif tiny and rung and None not in (tiny.get("effect"), rung.get("effect"), tiny.get("sd"), rung.get("sd")) \
            and min(tiny["n"], rung["n"]) >= 2:
        sign = rung.get("declared") or tiny.get("declared") or 1
        d, c = _welch((sign * tiny["effect"], tiny["sd"], tiny["n"]), (sign * rung["effect"], rung["sd"], rung["n"]))
        out.update(diff=float(d), diff_ci=sorted(float(x) for x in c))
    out["verdict"] = verdict(ts, rs)
    if out["verdict"] == "weakens" and rung:
        if rung.get("gated_out") and ((rung.get("n") or 0) < MIN_SEEDS or rung.get("not_read")):
            out["verdict"], out["why"] = (f"not learned at the rung ({len(rung['gated_out'])} seeds gated out"
                                          + (f", {rung['n']} left: not read" if rung.get("not_read") else "") + ")",
                                          "not learned")
        elif rung.get("margin") is not None and rung.get("sd") and rung.get("n", 0) >= 2:
            pw = tost_power(rung["sd"], rung["n"], rung["margin"], 0.05)
            if pw is not None and pw < 0.8:
                out["verdict"], out["why"] = f"weakens (underpowered: power {pw:.2f} at the margin)", "underpowered"
        elif rung.get("mde") and tiny and tiny.get("effect") is not None and rung["mde"] > abs(tiny["effect"]):
            out["why"] = "underpowered"
            out["verdict"] = (f"weakens (underpowered: detectable {rung['mde']:.3g} > the tiny effect's "
                              f"{abs(tiny['effect']):.3g})")
    return out


def minimum(w, name):
    """The fewest seeds a rung family's test may rest on: the family's own `min_seeds`, else the wave's."""
    return w["families"][name].get("min_seeds", w["min_seeds"])


def below_minimum(w, name, hs):
    """A rung's hypotheses (undecided, before Holm) whose seeds, after their gates, are fewer than the family's
    minimum: stored with p None (out of the family's Holm m) and `not_read` saying why, never with a p value (issue
    59 item 2: a test on 2 of 8 seeds is not read as a p of 0.044 that a reader would recompute to a pass). Other
    waves' hypotheses, and those at or above the minimum, are returned unchanged. Changes hs in place; returns it."""
    if w.get("kind") != "rung":
        return hs
    least = minimum(w, name)
    for h in hs:
        if (h.get("n") or 0) < least:
            h.update(p=None, not_read=f"{h.get('n') or 0} seeds after its gates, below the rung's minimum of {least}")
    return hs


def verdict(tiny_status, rung_status):
    """A claim's or a test's verdict across the two sizes."""
    ts, rs = tiny_status, rung_status
    return ("pending" if rs == "pending" else "holds" if rs == ts else
            "flips" if {ts, rs} == {"confirmed", "refuted"} else
            "weakens" if ts in ("confirmed", "refuted") else f"{ts} -> {rs}")
