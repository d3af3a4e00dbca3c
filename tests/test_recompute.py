"""Every stored confirmatory test recomputes from the per-seed values stored beside it, with scipy alone and a
Holm step written here (not the project's own stats code): the raw p of each paired / one-sample t (two-sided
against 0), of each TOST (intersection-union: the largest of the contrasts' two one-sided p's), and the
Holm-adjusted p over its family. A stored number that no longer follows from its per-seed values fails."""
import glob
import json
import math
import os

import numpy as np
import pytest
from scipy import stats

from conftest import ROOT


def families():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "results", "*", "confirm*", "analysis.json"))):
        conf = json.load(open(path)).get("confirmatory") or {}
        fams = ([conf["family"]] if conf.get("family") else []) + list((conf.get("families") or {}).values())
        out += [(os.path.relpath(path, ROOT), fam) for fam in fams]
    return out


def t_p(values):
    a = np.array(values, dtype=float)
    if a.size < 2 or np.ptp(a) < 1e-12 * max(1.0, np.abs(a).max()):
        return None
    return float(stats.ttest_1samp(a, 0.0).pvalue)


def tost_p(values, margin):
    a = np.array(values, dtype=float)
    if a.size < 2 or np.ptp(a) < 1e-12 * max(1.0, np.abs(a).max()):
        return None
    lo = stats.ttest_1samp(a, -margin, alternative="greater").pvalue
    hi = stats.ttest_1samp(a, margin, alternative="less").pvalue
    return float(max(lo, hi))


def raw_p(h):
    per = h.get("per_seed") or {}
    if h.get("margin") is not None:
        contrasts = per if per and all(isinstance(v, dict) for v in per.values()) else {"": per}
        ps = [tost_p(list(v.values()), h["margin"]) for v in contrasts.values()]
        return None if not ps or any(p is None for p in ps) else max(ps)
    p = t_p(list(per.values()))
    vals = [v for v in per.values() if v is not None]
    if p is None and "sign test" in h.get("test", "") and vals and (min(vals) > 0 or max(vals) < 0):
        p = min(1.0, 2 * 0.5 ** len(vals))  # wave 2: a unanimous contrast, the exact sign test
    return p


def holm(ps):
    idx = [i for i, p in enumerate(ps) if p is not None]
    order = sorted(idx, key=lambda i: ps[i])
    out, run = [None] * len(ps), 0.0
    for k, i in enumerate(order):
        run = max(run, min(1.0, (len(idx) - k) * ps[i]))
        out[i] = run
    return out


FAMS = families()


def test_there_are_stored_families_to_check():
    assert len(FAMS) >= 5  # wave 1's five at least


@pytest.mark.parametrize("where, fam", FAMS, ids=[f"{w}:{f.get('family') or f.get('study')}" for w, f in FAMS])
def test_every_stored_p_recomputes_from_its_per_seed_values(where, fam):
    hyps = fam["hypotheses"]
    mine = [raw_p(h) if h.get("per_seed") else h.get("p") for h in hyps]
    for h, p in zip(hyps, mine):
        if h.get("p") is None:
            assert p is None, f"{where} {h.get('id')}: stored no p, the per-seed values give {p}"
        else:
            assert p is not None and math.isclose(p, h["p"], rel_tol=1e-6, abs_tol=1e-12), \
                f"{where} {h.get('id')}: stored p {h['p']}, recomputed {p}"
    for h, adj in zip(hyps, holm(mine)):
        if h.get("p_holm") is not None:
            assert math.isclose(adj, h["p_holm"], rel_tol=1e-6, abs_tol=1e-12), \
                f"{where} {h.get('id')}: stored Holm p {h['p_holm']}, recomputed {adj}"


def test_the_recomputation_fails_on_a_changed_value():
    where, fam = FAMS[0]
    h = next(x for x in fam["hypotheses"] if x.get("p") is not None and x.get("per_seed"))
    bad = json.loads(json.dumps(h))
    per = bad["per_seed"]
    inner = next(iter(per.values())) if all(isinstance(v, dict) for v in per.values()) else per
    k = next(iter(inner))
    inner[k] = inner[k] + 10 * (abs(inner[k]) + 1)
    assert not math.isclose(raw_p(bad), h["p"], rel_tol=1e-6)
