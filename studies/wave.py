"""
The confirmatory waves' one engine. A wave is a declaration, studies/waves/<file>.toml: its run-studies (seeds,
cap, cells, job lines), its families and their hypotheses (claim, direction, margin, outcome function, error
term), its rule and the words a referee reads; the schema, key by key: docs/hacking.md, "Adding a wave". This
module reads them and does the rest: the seeds and job lines sweep.sh runs, the seed plan (on the stored pilot;
for a rung, on the tiny tests it reruns), the decision (Holm within each family, in the declared direction, TOST
for a claimed null, the wave's rule for a contrast the same in every seed), the runs' checks (the declared seeds;
one CPU model within each seed's cells) and the write-ups' generated sections.

    python -m studies.wave seeds NAME STUDY [--out OUT]   the run-study's declared seeds, space-separated
    python -m studies.wave grid NAME STUDY [--out OUT]    its job lines ([[runs.STUDY.jobs]]), seed by seed

Two layouts: "family" (wave 1: one family per run-study, picked from the study's own exploratory family or
computed, stored as confirmatory.family) and "families" (wave 2 on: families of computed hypotheses, stored as
confirmatory.families). The outcome functions live in the studies' own files (studies/qat.py, longctx.py,
lengen.py, posenc.py), named "module.function" in the wave file.
"""
import argparse
import glob
import importlib
import itertools
import json
import os
import sys
import tomllib
from collections import defaultdict

from cli import UserError
from studies.common import ci, f, hypothesis_status, table, verdict_words
# studies.stats, decisions and rung (scipy: 1.8 s to import here) are imported inside the functions that decide:
# sweep.sh and the tests call `seeds` and `grid` often, and those need the declaration only (0.3 s)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "studies", "waves")
_WAVES = {}


def load(path):
    """One wave file, with `file`: its path from the repository root (the messages name it)."""
    with open(path, "rb") as fh:
        w = tomllib.load(fh)
    w["file"] = os.path.relpath(os.path.abspath(path), ROOT)
    return w


def waves():
    """{name: wave} of every studies/waves/*.toml, in wave order (read once)."""
    if not _WAVES:
        ws = sorted((load(p) for p in glob.glob(os.path.join(FOLDER, "*.toml"))), key=lambda w: w["wave"])
        _WAVES.update((w["name"], w) for w in ws)
    return _WAVES


def get(key):
    """A wave by its name (confirm2) or its number (2, '2')."""
    for w in waves().values():
        if str(key) in (w["name"], str(w["wave"])):
            return w
    raise UserError(f"no wave {key!r} in studies/waves/ (have: "
                    + ", ".join(f"{w['name']} ({w['wave']})" for w in waves().values()) + ")")


def rung():
    """The larger rung's wave (kind = "rung": its hypotheses rerun tiny tests), or None."""
    return next((w for w in waves().values() if w.get("kind") == "rung"), None)


def seeds(w, study):
    return list(w["runs"][study]["seeds"])


def families_of(w, study):
    """The wave's families whose runs are a run-study's."""
    return [k for k, v in w["families"].items() if v["runs"] == study]


def reads(study):
    """The other run-studies' sections a run-study's families read (posenc's: lengen's task runs), any wave."""
    return list(dict.fromkeys(r for w in waves().values() for r in w["runs"].get(study, {}).get("reads", [])))


def call(name, rep, args=None):
    """A declared function "module.function" (studies/<module>.py) on a report, with its declared args."""
    mod, fn = name.rsplit(".", 1)
    return getattr(importlib.import_module(f"studies.{mod}"), fn)(rep, **(args or {}))


def find(fams, wave, family, hid):
    """A decided hypothesis of {(wave, family): family} by its id, or None."""
    fam = fams.get((wave, family))
    return next((h for h in (fam or {}).get("hypotheses", []) if h.get("id") == hid), None)


def mirrors(w):
    """{(wave, family, id) of a tiny test: (rung family, rung hypothesis id)} of a rung."""
    return {tuple(m): (name, d["id"]) for name, fam in w["families"].items() for d in fam["hypotheses"]
            for m in d.get("mirrors", ())}


def not_rerun(w):
    """{(wave, family, id): why} of the tiny tests behind a decided claim that a rung does not rerun."""
    return {tuple(x["test"]): x["why"] for x in w.get("not_rerun", ())}


def skipped(w, tiny_status, tests):
    """Why a claim with tiny tests has none at the rung (the rung's skipped and not_rerun reasons), or None."""
    if tiny_status == "undecided":
        return w["skipped"]["undecided"]
    if any(t[1] in ("cracks", "longctx") for t in tests):
        return w["skipped"]["cracks"]
    why = [not_rerun(w)[tuple(t)] for t in tests if tuple(t) in not_rerun(w)]
    return "; ".join(why) or None


# -----------------------------------------------------------------------------
# Building and deciding a family

RAW = ("claim", "test", "n", "effect", "sd", "ci", "p", "per_seed", "margin")
DECLARATION = ("paper", "runs", "seed_text", "gates", "failure_rule")  # a family's keys stored with its decision


def pick(family, match):
    """The one hypothesis of a decided family whose claim holds every substring of match."""
    hits = [h for h in (family or {}).get("hypotheses", []) if all(m in h["claim"] for m in match)]
    if len(hits) != 1:
        raise ValueError(f"the declared hypothesis {match} matches {len(hits)} of the study's hypotheses, not 1")
    return hits[0]


def _picked(w, name, d, rep):
    """Wave 1's form: a hypothesis picked from the study's own family (its per-seed gate, if any, applied and the
    seeds it drops named), or computed from its runs."""
    from studies.stats import paired_hypothesis
    if "outcome_fn" in d:
        return paired_hypothesis(d["claim"], call(d["outcome_fn"], rep, d.get("args"))["per_seed"],
                                 "t over seeds (n - 1 dof)")
    gate = call(d["gate_fn"], rep, d.get("gate_args")) if "gate_fn" in d else None
    try:
        h = {k: v for k, v in pick(rep[w["families"][name]["exploratory"]].get("family"), d["match"]).items()
             if k in RAW}
    except ValueError as e:  # the cell left the study's family (its gate): no test, said why
        h = paired_hypothesis(d["claim"], {}, f"none: {e}")
    h["claim"] = d["claim"]
    if gate is not None and d.get("margin") is None:  # the declared per-seed gate, then the same paired t
        kept = {str(s): v for s, v in (h.get("per_seed") or {}).items() if str(s) in gate}
        h = dict(paired_hypothesis(d["claim"], kept, h["test"]), gated_out=sorted(set(h.get("per_seed") or {}) - set(kept)))
    return h


def _computed(w, name, d, rep):
    """A hypothesis from its outcome function: a t over seeds ({"per_seed"}), TOST ({"contrasts"} of a claimed
    null; of a directional one, every contrast in its direction: decisions.directional_iut) or the function's own
    test ({"hypothesis"}: studies/decisions.py); under the rule "holm+sign" a contrast with the same sign and size
    in every seed (no t) by the exact sign test."""
    from studies.decisions import directional_iut
    from studies.stats import equivalence_hypothesis, paired_hypothesis
    v = call(d["outcome_fn"], rep, d.get("args"))
    if "hypothesis" in v:  # a test that is not one mean of per-seed contrasts (studies/decisions.py)
        h = dict(v["hypothesis"], claim=d["claim"])
    elif "contrasts" in v and d["direction"]:  # every contrast in the declared direction: intersection-union
        h = directional_iut(d["claim"], v["contrasts"], d["direction"], d.get("sesoi"))
    elif "contrasts" in v:
        cs = dict(v["contrasts"])
        h = (equivalence_hypothesis(d["claim"], cs, d["margin"]) if cs and all(cs.values()) else
             {"claim": d["claim"], "test": "none: no runs", "n": 0, "effect": None, "sd": None, "ci": None,
              "p": None, "per_seed": {}, "margin": d["margin"]})
    else:
        h = sign_test(w, paired_hypothesis(d["claim"], v["per_seed"], d["error"]), v["per_seed"])
    dropped_fn = w["families"][name].get("dropped_fn")  # the failure rule's dropped seeds, named in each hypothesis
    if dropped_fn and call(dropped_fn, rep):
        v = {**v, "gated_out": sorted(set(v.get("gated_out") or []) | set(call(dropped_fn, rep)))}
    if v.get("gated_out"):
        h["gated_out"] = v["gated_out"]
    return h


def sign_test(w, h, per_seed):
    """Under the rule "holm+sign", a contrast with the same sign and size in every seed (its t undefined) decided
    by the exact two-sided sign test, p = 2 * 0.5^n (under "holm" it stays undefined and never passes)."""
    vals = [x for x in per_seed.values() if x is not None]
    if (w["rule"] == "holm+sign" and h.get("p") is None and h.get("n", 0) >= 2 and vals
            and (all(x > 0 for x in vals) or all(x < 0 for x in vals))):
        h.update(p=min(1.0, 2 * 0.5 ** len(vals)),
                 test=f"exact two-sided sign test over seeds (every seed the same contrast, {vals[0]:+.4g})")
    return h


def hypotheses(w, name, rep):
    """A declared family's hypotheses (undecided) from a report; each carries its declaration (id, outcome,
    error, why, `declared`: the direction; margin, sesoi and source where declared)."""
    out = []
    for d in w["families"][name]["hypotheses"]:
        h = (_picked if w["layout"] == "family" else _computed)(w, name, d, rep)
        h.update({k: d[k] for k in ("id", "outcome", "error", "why")}, declared=d["direction"])
        for k in ("margin", "sesoi", "source"):
            if d.get(k) is not None:
                h[k] = d[k]
        out.append(h)
    return out


def in_declared_direction(fam):
    """A decided family's passes kept only in each hypothesis's declared direction ('declared': +1 / -1; 0 for a
    null); a pass the other way is marked 'opposite' (refuted) and not passed. A directional hypothesis with a
    declared sesoi whose interval lies inside +-sesoi is 'negligible' (refuted: no effect of interest), never
    passed (an intersection-union: any cell's Bonferroni interval, `negligible_in`). A hypothesis with its own `rule`
    (decisions.pi_criterion, no p; an ni or lof one gets it after Holm, decisions.after_holm) is passed or refuted
    by it. Returns fam, changed in place."""
    from studies.decisions import after_holm
    for h in fam["hypotheses"]:
        if h.get("kind") in ("ni", "lof"):  # wave 5: Holm's pass, then its own refutation (decisions.after_holm)
            h["rule"] = after_holm(h)
        if h.get("rule"):
            h.update(passed=h["rule"]["passed"], opposite=h["rule"]["refuted"])
            continue
        sign = 0 if h["effect"] is None else (1 if h["effect"] > 0 else -1)
        h["opposite"] = bool(h["passed"] and h["declared"] and sign != h["declared"])
        h["passed"] = bool(h["passed"] and not h["opposite"])
        if h.get("sesoi") is not None and h.get("ci"):  # an intersection-union: any cell inside, Bonferroni
            h["negligible"] = bool(h["declared"] and (bool(h["negligible_in"]) if "negligible_in" in h
                                                      else max(abs(x) for x in h["ci"]) < h["sesoi"]))
            h["passed"] = h["passed"] and not h["negligible"]
    return fam


def decide(w, name, rep):
    """The family decided on a report of the wave's runs: Holm within it; passed only in the declared direction
    (an equivalence hypothesis: inside its margin); a family gate (gate_fn) that fails leaves it unread."""
    from studies.rung import below_minimum
    from studies.stats import decide_family
    fam = in_declared_direction(decide_family(below_minimum(w, name, hypotheses(w, name, rep))))
    decl = w["families"][name]
    if w["layout"] == "family":  # wave 1 stored its declaration whole
        run = w["runs"][decl["runs"]]
        fam["study"], fam["declaration"] = name, {"seed_text": decl["seed_text"], "cells": run["cells"],
                                                  "gates": decl["gates"], "failure_rule": decl["failure_rule"],
                                                  "seeds": None, "cap": run["cap"]}
        return fam
    fam["family"], fam["wave"] = name, w["wave"]
    fam["declaration"] = {k: decl[k] for k in DECLARATION if k in decl}
    if decl.get("gate_fn"):
        fam["gate"] = call(decl["gate_fn"], rep)
        if not fam["gate"]["passed"]:
            for h in fam["hypotheses"]:  # untestable: the gate's measure has no range here (the claim is untestable)
                h.update(passed=False, opposite=False, not_read=decl["gate_failed"],
                         **({"untestable": True} if fam["gate"].get("untestable") else {}))
    return fam


def redecide(w, fam):
    """A stored decided family decided again by the wave's rule from the per-seed values its hypotheses store (no
    runs read): each a t over seeds, or for a claimed null TOST over its contrasts; Holm; the declared direction;
    a failed family gate leaves it unread. tests/test_waves.py holds every stored analysis to it."""
    from studies.decisions import again
    from studies.stats import decide_family, equivalence_hypothesis, paired_hypothesis
    hs = []
    for h in fam["hypotheses"]:
        per = h.get("per_seed") or {}
        if h.get("kind"):  # studies/decisions.py's tests, from the values they store
            x = again(h)
        elif h.get("margin") is not None:
            cs = per if per and all(isinstance(v, dict) for v in per.values()) else {"": per}
            x = (equivalence_hypothesis(h["claim"], cs, h["margin"]) if all(cs.values()) else
                 {"claim": h["claim"], "n": 0, "effect": None, "sd": None, "ci": None, "p": None, "margin": h["margin"]})
        else:
            x = sign_test(w, paired_hypothesis(h["claim"], per, h["test"]), per)
        hs.append({**x, **{k: h[k] for k in ("id", "declared", "sesoi", "planned") if k in h}})
    from studies.rung import below_minimum
    out = in_declared_direction(decide_family(below_minimum(w, fam.get("family"), hs)))
    if fam.get("gate") and not fam["gate"]["passed"]:
        for h in out["hypotheses"]:
            h.update(passed=False, opposite=False, **({"untestable": True} if fam["gate"].get("untestable") else {}))
    return out


# -----------------------------------------------------------------------------
# The runs: the declared seeds, one machine; the wall; the confirmatory key of an analysis

def cpu_model(run):
    """The CPU model a run was recorded on: versions.cpu_model (vendor, family, model, stepping, name), else the
    older records' versions.cpu, else cpu_capability."""
    v = run.get("versions") or {}
    m = v.get("cpu_model") or v.get("cpu") or v.get("cpu_capability")
    return ", ".join(f"{k} {x}" for k, x in m.items()) if isinstance(m, dict) else str(m)


def check_runs(w, study, runs):
    """The runs' seeds and machine, refused (UserError) when a run has a seed the run-study did not declare, when
    a seed's runs were recorded on two CPU models (a machine effect inside its contrasts), or, under
    machine_rule "one kind", when the runs span two CPU kinds (versions.cpu_capability) ->
    {seeds_used, machine, seeds_by_cpu}."""
    declared = seeds(w, study)
    used = sorted({r["config"].get("seed") for r in runs if r["config"].get("seed") is not None})
    bad = [x for x in used if x not in declared]
    if bad:
        raise UserError(f"--confirm {study}: runs with seeds {bad} outside the declared fresh seeds "
                        f"{declared[0]}-{declared[-1]} ({w['file']})")
    kinds = sorted({str((r.get("versions") or {}).get("cpu_capability")) for r in runs})
    if w.get("machine_rule") == "one kind" and len(kinds) > 1:
        raise UserError(f"--confirm {study}: runs from {len(kinds)} CPU kinds ({', '.join(kinds)}); the family's "
                        "seeds must share one machine kind")
    models = defaultdict(set)
    for r in runs:
        if r["config"].get("seed") is not None:
            models[r["config"]["seed"]].add(cpu_model(r))
    for s in used:
        if len(models[s]) > 1:
            raise UserError(f"--confirm {study}: seed {s} has runs on {len(models[s])} CPU models "
                            f"({'; '.join(sorted(models[s]))}); the cells of one seed must share one CPU model "
                            f"(families {', '.join(families_of(w, study))})")
    by_cpu = defaultdict(list)
    for s in used:
        by_cpu[next(iter(models[s]))].append(s)
    cpus = sorted({str((r.get("versions") or {}).get("cpu")) for r in runs})
    # seeds by CPU model: stored only where it says something (a model recorded, or several), so an analysis of
    # the older records is what it was
    new = any((r.get("versions") or {}).get("cpu_model") for r in runs) or len(by_cpu) > 1
    return {"seeds_used": used, "machine": {"cpu_capability": kinds[0] if len(kinds) == 1 else (kinds or None),
                                            "cpu": cpus}, "seeds_by_cpu": dict(by_cpu) if new else None}


def confirm_wall(folders):
    """The measured wall time of the sweep (sweep.sh writes OUT/<name>/STUDY/wall.json, or for a rung's one
    sweep OUT/<name>/wall.json: seconds summed over its sittings, and how many): {seconds, sittings, text}."""
    for d in list(folders) + [os.path.dirname(os.path.normpath(d)) for d in folders]:
        try:
            with open(os.path.join(d, "wall.json")) as fh:
                w = json.load(fh)
        except (OSError, ValueError):
            continue
        s, n = int(w.get("seconds", 0)), int(w.get("sittings", 1))
        return {"seconds": s, "sittings": n, "jobs": w.get("jobs"),
                "text": f"{s // 3600} h {s % 3600 // 60} min {s % 60} s on {w.get('cores', '?')} cores with "
                        f"JOBS={w.get('jobs', '?')}, in {n} sitting{'s' * (n > 1)}"}
    return None


def confirmatory(w, study, rep, runs, folders):
    """(analysis.json's `confirmatory`, its markdown) of a run-study's runs of the wave: its families decided, the
    runs checked, the wall."""
    fams = {k: decide(w, k, rep) for k in families_of(w, study)}
    check = check_runs(w, study, runs)
    by_cpu = check.pop("seeds_by_cpu")
    if w["layout"] == "family":
        (fam,) = fams.values()
        fam.update(check)
    for fam in fams.values():
        if by_cpu:
            fam["seeds_by_cpu"] = by_cpu
    if w["layout"] == "family":
        return {"family": fam, "wall": confirm_wall(folders)}, confirm_md(w, fam)
    out = {"wave": w["wave"]}
    if w.get("kind") == "rung":
        out.update(rung=w["name"], size=w["runs"][study]["size"])
    out.update(families=fams, wall=confirm_wall(folders), **check)
    return out, families_md(w, fams)


# -----------------------------------------------------------------------------
# Planning: the seed count, on the stored pilot (or, for a rung, on the tiny tests it reruns)

def tiny_family(w, name, tiny):
    """A rung family's tiny counterpart for the planner: each hypothesis's first mirrored tiny test, as stored,
    Holm over the rung family's size. tiny: {(wave, family): decided family} (ledger.load_families)."""
    hs = []
    for d in w["families"][name]["hypotheses"]:
        h = find(tiny, *d["mirrors"][0])
        hs.append(dict(h) if h else {"claim": d["claim"], "n": 0, "effect": None, "sd": None, "margin": d.get("margin")})
    return {"alpha": 0.05, "m": len(hs), "hypotheses": hs}


def plan(w, study, basis):
    """The run-study's seed count: power_plan of each of its families (80% power at the family's Holm steps on the
    80% upper sd bound; the target: a null's margin, else the pilot's (a rung: the tiny) effect) on basis, the
    pilot's report (a rung: the tiny families); the largest count asked, at least min_seeds, at most the cap. A
    rung leaves an undecided tiny test out of the count (its effect would ask for seeds to find what the tiny
    size did not show); wave 1 asks the cap when any hypothesis has no count.
    -> {families: {name: plan}, needed, seeds, cap, capped, at_seeds: {name: plan}}."""
    from studies.stats import decide_family, power_plan
    fams, needs = {}, []
    both = any("target" in d or "sesoi" in d for k in families_of(w, study) for d in w["families"][k]["hypotheses"])
    for name in families_of(w, study):
        fam = tiny_family(w, name, basis) if w.get("kind") == "rung" else decide_family(hypotheses(w, name, basis))
        p = power_plan(fam)
        decl = w["families"][name]["hypotheses"]
        if both:  # a wave that declares targets and sesois: both ends planned
            p = dict(p, rows=[plan_both(h, d, p["level"]) for h, d in zip(fam["hypotheses"], decl)])
        fams[name] = (fam, p)
        for r, h in zip(p["rows"], fam["hypotheses"]):
            if w.get("kind") != "rung" or hypothesis_status(h)[0] in ("confirmed", "refuted"):
                needs += [r["seeds_needed"]] + ([r["sesoi_seeds_needed"]] if r.get("sesoi") is not None else [])
    known = [n for n in needs if n is not None]
    need = max(known) if known and (w["layout"] != "family" or len(known) == len(needs)) else None
    cap = w["runs"][study]["cap"]
    n = cap if need is None else min(cap, max(w["min_seeds"], need))
    return {"families": {k: p for k, (_, p) in fams.items()}, "needed": need, "seeds": n, "cap": cap,
            "capped": need is None or need > cap or (both and None in needs), "at_seeds": {
                k: power_plan(fam, seeds=n) if not both else
                dict(p, rows=[plan_both(h, d, p["level"], len(w["families"][k].get("seeds") or ()) or n)
                              for h, d in zip(fam["hypotheses"], w["families"][k]["hypotheses"])])
                for k, (fam, p) in fams.items()}}


def plan_record(w, study, basis):
    """The plan as data, for analysis.json: {family: {id: planned}} at the seeds the wave runs, each planned
    {seeds, target, power (a difference: the paired t's power at its target, on the sd's 80% upper bound; a claimed
    null: TOST's power at its margin), seeds_needed, sesoi, sesoi_power (to refute: a 95% interval inside +-sesoi
    when the true effect is 0), sesoi_seeds_needed}; the ledger gives it beside each test."""
    from studies.stats import t_power
    p, out = plan(w, study, basis), {}
    for name, pl in p["families"].items():
        out[name] = {}
        for d, r, a in zip(w["families"][name]["hypotheses"], pl["rows"], p["at_seeds"][name]["rows"]):
            power = (a["detectable"] if a.get("detectable_is") else
                     t_power(a["sd_plan"], a["planned_seeds"], a["target"], p["families"][name]["level"])
                     if a["kind"] == "paired t" else None)
            out[name][d["id"]] = {"seeds": a["planned_seeds"], "target": a["target"], "power": power,
                                  "seeds_needed": r["seeds_needed"], "sesoi": r.get("sesoi"),
                                  "sesoi_power": a.get("sesoi_power"), "sesoi_seeds_needed": r.get("sesoi_seeds_needed")}
    return out


def plan_both(h, d, level, seeds=None, power=0.8):
    """A directional hypothesis planned at both ends (a wave that declares `target` and `sesoi`): the seeds for 80%
    power at its declared target (the seed's effect in the outcome's units; else the pilot's effect), and the seeds
    for 80% power to refute it, the probability that its 95% interval lies inside +-sesoi when the true effect is 0
    (the rule in_declared_direction applies). A claimed null keeps plan_row's plan at its margin."""
    from studies.decisions import plan
    from studies.stats import PLAN_CONF, _first_n, plan_row, sd_upper, tost_power
    if h.get("kind") in ("lof", "pi"):
        return dict(plan(h, level, seeds, power), sesoi=None, sesoi_power=None, sesoi_seeds_needed=None)
    row = plan_row(h, level, seeds, d.get("target"), power)
    row.update(sesoi=d.get("sesoi"), sesoi_power=None, sesoi_seeds_needed=None)
    if h.get("kind") == "iut":  # wave 5: the whole intersection-union, every contrast at its own stored mean
        from studies.decisions import iut_power
        row["iut_power"] = iut_power(h, level, seeds)
    if d.get("sesoi") is not None and d["direction"] and h.get("sd") and h["n"] >= 2:
        up = sd_upper(h["sd"], h["n"] - 1, PLAN_CONF)
        refute = lambda k: tost_power(up, k, d["sesoi"], 0.025)  # a 95% interval inside +-sesoi
        row.update(sesoi_power=refute(seeds or h["n"]), sesoi_seeds_needed=_first_n(lambda k: (refute(k) or 0) >= power))
    return row


def _detectable(a):
    iut = f"; all pass: power {a['iut_power']:.2f}" if a.get("iut_power") is not None else ""
    return (f"power {a['detectable']:.2f} at the margin" if a.get("detectable_is") and a["detectable"] is not None
            else f(a["detectable"], ".3g")) + iut


def plan_md(w, study, basis):
    """The seed plan of a run-study's declaration (plan) as markdown."""
    p = plan(w, study, basis)
    n = p["seeds"]
    if w["layout"] == "family":
        (name,) = p["families"]
        rows = [[h["id"], r["kind"], str(r["n"]), f(r["sd"], ".3g"), f(r["sd_plan"], ".3g"), f(r["target"], "+.3g"),
                 f(r["seeds_needed"]), _detectable(a)]
                for h, r, a in zip(w["families"][name]["hypotheses"], p["families"][name]["rows"], p["at_seeds"][name]["rows"])]
        why = (f"the cap ({p['cap']}) binds: the planner asks for {f(p['needed'])}, and the detectable effect at "
               f"{n} seeds stands beside each hypothesis" if p["capped"] else
               f"the planner asks for {f(p['needed'])}; the family runs {n} (at least {w['min_seeds']})")
        return ([f"The plan on the stored pilot (seeds 0-2), level 0.05/{len(rows)} (Holm's strictest step), 80% "
                 f"power, sd at its 80% upper confidence bound; target: the margin of a claimed null, else the pilot's "
                 f"effect. Seeds: {why}.", ""]
                + table(["id", "test", "pilot seeds", "pilot sd", "sd planned on", "target", "seeds needed",
                         f"detectable at {n} seeds"], rows) + [""])
    rows = [[name, h["id"], r["kind"], str(r["n"]), f(r["sd"], ".3g"), f(r["sd_plan"], ".3g"), f(r["target"], "+.3g"),
             f(r["seeds_needed"]), _detectable(a)]
            + ([f(r.get("sesoi"), ".3g"), f(r.get("sesoi_seeds_needed")) if r.get("sesoi") is not None else "-",
                f(a.get("sesoi_power"), ".2f")] if "sesoi" in r else [])
            for name, pl in p["families"].items()
            for h, r, a in zip(w["families"][name]["hypotheses"], pl["rows"], p["at_seeds"][name]["rows"])]
    sesoi = ["sesoi", "seeds needed to refute", f"power to refute at {n} seeds"] if rows and len(rows[0]) > 9 else []
    t = w["text"]
    why = (t["plan_capped"] if p["capped"] else t["plan_uncapped"]).format(cap=p["cap"], needed=f(p["needed"]), n=n)
    on = "tiny" if w.get("kind") == "rung" else "pilot"
    return ([t["plan"].format(why=why), ""]
            + table(["family", "id", "test", f"{on} seeds", f"{on} sd", "sd planned on", "target", "seeds needed",
                     f"detectable at {n} seeds"] + sesoi, rows) + [""])


# -----------------------------------------------------------------------------
# Markdown: the declaration, the decided families, the write-ups' generated sections

def _fields(w, study):
    """The fields a wave's [text] templates fill for one run-study."""
    s, run = seeds(w, study), w["runs"][study]
    pairs = sorted({tuple(d["params"]) for k in families_of(w, study) for d in w["families"][k]["hypotheses"]
                    if "params" in d})
    return {"study": study, "name": w["name"], "cells": run["cells"], "n": len(s), "first": s[0], "last": s[-1],
            "cap": run["cap"], "min_seeds": w["min_seeds"], "machine": w["machine"], "declared_in": w["declared_in"],
            "size": run.get("size"), "params": ", ".join(f"{a:,} -> {b:,}" for a, b in pairs)}


def family_md(w, name):
    """One declared family: its seed text, gates and failure rule, and a row per hypothesis (the last column: why,
    or for a rung the tiny tests it reruns; sesoi and source where any hypothesis declares them)."""
    fam = w["families"][name]
    hs = fam["hypotheses"]
    rung_ = any("mirrors" in d for d in hs)
    extra = [k for k in ("sesoi", "source") if any(k in d for d in hs)]
    L = [f"**Family `{name}`** ({fam['seed_text']}). Gates: " + "; ".join(fam["gates"])
         + f". A seed that fails: {fam['failure_rule']}.", ""]
    rows = [[d["id"], d["claim"], {1: "+", -1: "-", 0: "equivalence"}[d["direction"]],
             f(d["margin"], ".3g") if d.get("margin") is not None else "-", d["outcome"], d["error"],
             ", ".join(f"w{x} {fa}/{i}" for x, fa, i in d["mirrors"]) if rung_ else d["why"],
             *[f(d[k], ".3g") if k == "sesoi" and k in d else d.get(k, "-") for k in extra]] for d in hs]
    return L + table(["id", "hypothesis", "direction", "margin", "outcome", "error term",
                      "reruns (tiny)" if rung_ else "why", *extra], rows) + [""]


def declaration_md(w, study):
    if w["layout"] == "family":
        return _declaration1(w, study)
    L = [w["text"]["declaration"].format(**_fields(w, study)), ""]
    for name in families_of(w, study):
        L += family_md(w, name)
    return L


def words(h):
    """A hypothesis's verdict in words (the families layout)."""
    if h.get("rule"):
        return h["rule"]["words"]
    if h.get("not_read"):  # a failed family gate, or a rung test below its minimum of seeds (studies/rung.py)
        return f"not read: {h['not_read']}"
    if h.get("opposite"):
        return "passed OPPOSITE to the seed (refuted)"
    if h.get("negligible"):
        return f"refuted: interval inside +-{f(h['sesoi'], '.3g')} (no effect of interest)"
    if h["passed"] and h.get("margin") is None and not h.get("undefined"):
        return "passed, as the seed"
    return verdict_words(h)


def families_md(w, fams):
    """The decided families, one table each."""
    runs = [w["runs"].get(w["families"].get(k, {}).get("runs"), {}) for k in fams]
    label = w["text"]["families"].format(sizes=", ".join(sorted({r["size"] for r in runs if r.get("size")})))
    L = []
    for name, fam in fams.items():
        rows = []
        for h in fam["hypotheses"]:
            lo, hi = h["ci"] if h.get("ci") else (None, None)
            gated = f" ({len(h['gated_out'])} gated out: {', '.join(h['gated_out'])})" if h.get("gated_out") else ""
            rows.append([h["id"], h["claim"], f"{h['n']}{gated}", ci(h["effect"], lo, hi, "+.3g"), f(h["p"], ".2g"),
                         f(h["p_holm"], ".2g"), words(h)])
        L += [f"### {label}, family `{name}` ({fam['m']} tests, Holm within them)", ""]
        L += table(["id", "hypothesis", "seeds", "effect [interval]", "p", "p (Holm)", "verdict"], rows) + [""]
    return L


def machine_line(c):
    """The decided runs' seeds and machine, in words."""
    used = c.get("seeds_used") or []
    if not used:
        return "No seeds."
    by = next((fam["seeds_by_cpu"] for fam in (c.get("families") or {}).values() if fam.get("seeds_by_cpu")), None)
    where = (f"on one CPU kind (cpu_capability {(c.get('machine') or {}).get('cpu_capability')})" if not by else
             "one CPU model a seed: " + "; ".join(f"{m} ({', '.join(map(str, s))})" for m, s in by.items()))
    return f"Seeds {used[0]}-{used[-1]} ({len(used)}) {where}."


def across_md(w, fams, tiny):
    """Each rung hypothesis beside the tiny test(s) it reruns: both verdicts, both effects, the difference."""
    from studies.rung import across
    rows = []
    for name, fam in fams.items():
        for h in fam["hypotheses"]:
            d = next(x for x in w["families"][name]["hypotheses"] if x["id"] == h["id"])
            for m in d["mirrors"]:
                t = find(tiny, *m)
                a = across(t, h)
                ct = (t or {}).get("ci") or (None, None)
                rows.append([f"{name}/{h['id']}", f"w{m[0]} {m[1]}/{m[2]}", hypothesis_status(t)[0],
                             ci((t or {}).get("effect"), *ct, "+.3g"), hypothesis_status(h)[0],
                             ci(h.get("effect"), *(h.get("ci") or (None, None)), "+.3g"),
                             ci(a["diff"], *(a["diff_ci"] or (None, None)), "+.3g"), a["verdict"]])
    return (["Each rung test beside the tiny test it reruns: the difference is rung minus tiny, with its 95% Welch "
             "interval (different seeds at the two sizes); holds = the same status, weakens = decided at tiny and "
             "undecided here, flips = confirmed at one size and refuted at the other.", ""]
            + table(["rung test", "tiny test", "tiny", "tiny effect", "rung", "rung effect", "difference", "across sizes"],
                    rows) + [""])


def section(w, study, conf=None, basis=None):
    """A write-up's generated section of the wave: the declaration, the seed plan on basis (the pilot's report; a
    rung: the tiny families), then (once run) the decided families from RESULTS/STUDY/<name>/analysis.json, a
    family gate's line, the comparison with the tiny size (a rung) and the measured wall."""
    if w["layout"] == "family":
        return _section1(w, study, conf, basis)
    c = (conf or {}).get("confirmatory") or {}
    fams, t = c.get("families"), w["text"]
    state = "declared and run" if fams else "declared before its runs; results pending"
    L = ["## " + t["title"].format(state=state, size=w["runs"][study].get("size")), ""]
    planned = basis is not None if w.get("kind") == "rung" else bool(basis)  # a rung plans on no tiny result too
    L += declaration_md(w, study)
    if planned and w["runs"][study].get("pilot_fn"):  # the wave's own pilot, reported before the plan made on it
        L += call(w["runs"][study]["pilot_fn"], basis)
    L += plan_md(w, study, basis) if planned else []
    if fams:
        L += [machine_line(c), ""] + families_md(w, fams)
        for name, fam in fams.items():
            g = fam.get("gate")
            if g and w["families"].get(name, {}).get("gate_line"):
                L += [w["families"][name]["gate_line"].format(effect=f(g["effect"], "+.3g"), n=g["n"], p=f(g["p"], ".2g"),
                                                              result="passed" if g["passed"] else "FAILED"), ""]
        if w.get("kind") == "rung" and basis is not None:
            L += across_md(w, fams, basis)
    if c.get("wall"):
        L += [t["wall"].format(study=study, wall=c["wall"]["text"]), ""]
    if t.get("closing"):
        L += [t["closing"].format(**_fields(w, study)), ""]
    return L


def markers(w):
    return f"<!-- {w['marker']} -->", f"<!-- /{w['marker']} -->"


def with_section(w, readme, study, conf=None, basis=None):
    """README text with the wave's section regenerated; None without its markers."""
    begin, end = markers(w)
    if begin not in readme or end not in readme:
        return None
    head, rest = readme.split(begin, 1)
    return head + begin + "\n\n" + "\n".join(section(w, study, conf, basis)) + "\n" + end + rest.split(end, 1)[1]


# -----------------------------------------------------------------------------
# Wave 1's form (layout "family"): its declaration, family, section and the front page of its verdicts

def _declaration1(w, study):
    fam, run, s = w["families"][study], w["runs"][study], seeds(w, study)
    L = [f"Declared before any confirmatory run ({w['declared_in']}). The seed's claims: {fam['seed_text']}.", "",
         f"- **Cells**: {run['cells']}.",
         f"- **Seeds**: {len(s)} fresh seeds, {s[0]}-{s[-1]} (the pilot used 0-2), planned by "
         f"`python analyze.py --power results/{study} --confirm` (80% power at the family's Holm steps on the 80% "
         f"upper bound of each pilot sd; at least {w['min_seeds']}, cap {run['cap']}).",
         f"- **Machine**: {w['machine']}; every run of the family on one kind.",
         "- **Gates**: " + "; ".join(fam["gates"]) + ".",
         f"- **A seed that fails**: {fam['failure_rule']}.",
         "- **Rule**: Holm within these hypotheses only, adjusted p < 0.05, in the declared direction; a claimed null "
         "passes as equivalent when its TOST p (90% interval inside the margin) does. Everything else in this "
         "write-up is exploratory.", ""]
    rows = [[d["id"], d["claim"], {1: "+", -1: "-", 0: "equivalence"}[d["direction"]],
             f(d["margin"]) if d.get("margin") is not None else "-", d["outcome"], d["error"], d["why"]]
            for d in fam["hypotheses"]]
    return L + table(["id", "hypothesis", "direction", "margin", "outcome", "error term", "why this cell"], rows) + [""]


def result_words(w, study, h):
    """A wave-1 hypothesis's verdict in words: a pass named against the seed's (or the cited paper's) declared
    direction; a gate's (`gate = true`) as 'gate passed' / 'gate failed'."""
    fam = w["families"].get(study) or {}
    if any(d.get("gate") and d["id"] == h.get("id") for d in fam.get("hypotheses", ())):
        if h["passed"] and not h.get("opposite"):
            return "gate passed"
        return "gate failed: " + ("passed in the opposite direction" if h.get("opposite") else verdict_words(h))
    cited = fam.get("cited")
    if h.get("opposite"):
        return "passed OPPOSITE to the " + ("cited paper" if cited else "seed")
    if h.get("negligible"):
        return f"refuted: interval inside +-{f(h['sesoi'], '.3g')} (no effect of interest)"
    if h["passed"] and h.get("margin") is None and not h.get("undefined"):
        return "passed, as the cited paper (not a seed)" if cited else "passed, as the seed"
    return verdict_words(h)


def declared_claim(w, study, h):
    """A decided hypothesis's claim as the declaration words it now (the stored one, when the id is gone)."""
    d = next((d for d in w["families"].get(study, {}).get("hypotheses", []) if d["id"] == h.get("id")), None)
    return d["claim"] if d else h["claim"]


def confirm_md(w, fam):
    """A decided wave-1 family (with its runs' check) as markdown."""
    used = fam.get("seeds_used") or []
    rows = []
    for h in fam["hypotheses"]:
        lo, hi = h["ci"] if h.get("ci") else (None, None)
        rows.append([h["id"], declared_claim(w, fam["study"], h), str(h["n"]), ci(h["effect"], lo, hi, "+.3g"),
                     f(h["p"], ".2g"), f(h["p_holm"], ".2g"), result_words(w, fam["study"], h)])
    m = fam.get("machine") or {}
    return ([f"## Confirmatory family: {fam['study']}", "",
             f"Seeds {used[0]}-{used[-1]} ({len(used)})" if used else "No seeds.",
             f"on one CPU kind (cpu_capability {m.get('cpu_capability')}); {fam['m']} hypotheses, Holm within them "
             "(a claimed null: TOST, its 90% interval; the others: 95% intervals over seeds). Every other table and "
             "family of this analysis is exploratory: only this family was declared before the runs.", ""]
            + table(["id", "hypothesis", "seeds", "effect [interval]", "p", "p (Holm)", "verdict"], rows) + [""])


def _section1(w, study, conf=None, pilot=None):
    fam = ((conf or {}).get("confirmatory") or {}).get("family")
    L = [f"## Confirmatory family (declared {'and run' if conf else 'before the runs; results pending'})", ""]
    L += declaration_md(w, study) + (plan_md(w, study, pilot) if pilot else [])
    if fam:
        L += confirm_md(w, fam)[2:]
    wall = ((conf or {}).get("confirmatory") or {}).get("wall")
    if wall and wall.get("text"):
        L += [f"Measured wall time of `CONFIRM={w['wave']} bash sweep.sh {study}`: {wall['text']}.", ""]
    return L


FRONT_BEGIN, FRONT_END = "<!-- confirmatory verdicts -->", "<!-- /confirmatory verdicts -->"


def front_md(results, prefix="results/"):
    """The confirmatory verdicts page (results/wave1.md): one row per declared hypothesis of each wave-1 family,
    from RESULTS/STUDY/<name>/analysis.json (a study not yet run: its hypotheses, 'pending')."""
    rows = []
    for w in (w for w in waves().values() if w["layout"] == "family"):
        for study, decl in w["families"].items():
            path = os.path.join(results, study, w["name"], "analysis.json")
            fam = None
            if os.path.isfile(path):
                with open(path) as fh:
                    fam = ((json.load(fh).get("confirmatory") or {}).get("family"))
            hyps = {h["id"]: h for h in (fam or {}).get("hypotheses", [])}
            for d in decl["hypotheses"]:
                h, link = hyps.get(d["id"]), f"[{study}]({prefix}{study}/README.md)"
                if h is None:
                    rows.append([link, d["claim"], "-", "-", "-", "pending: not run yet"])
                    continue
                lo, hi = h["ci"] if h.get("ci") else (None, None)
                rows.append([link, d["claim"], str(h["n"]), ci(h["effect"], lo, hi, "+.3g"), f(h["p_holm"], ".2g"),
                             result_words(w, study, h)])
    return (["Each study's declared confirmatory family on its fresh seeds (Holm within the study's family; a "
             "claimed null: TOST at its margin, 90% interval; the others: 95% intervals over seeds). Generated by "
             "`python analyze.py --front results/wave1.md` from `results/STUDY/confirm/analysis.json`.", ""]
            + table(["study", "the seed's claim, in tiny terms", "seeds", "effect [interval]", "Holm p", "verdict"], rows)
            + [""])


def with_front(readme, results, prefix="results/"):
    """A page's text with its confirmatory-verdicts section regenerated (links to the write-ups with `prefix`:
    results/ from the front page's folder, none from results/ itself); None without markers."""
    if FRONT_BEGIN not in readme or FRONT_END not in readme:
        return None
    head, rest = readme.split(FRONT_BEGIN, 1)
    return head + FRONT_BEGIN + "\n\n" + "\n".join(front_md(results, prefix)) + "\n" + FRONT_END + rest.split(FRONT_END, 1)[1]


# -----------------------------------------------------------------------------
# The job lines a wave declares in data, and the command line sweep.sh calls

def _key(value):
    return str(value).lower() if isinstance(value, bool) else str(value)


def grid(w, study, folder):
    """The job lines of a run-study's [[runs.STUDY.jobs]] blocks, seed by seed (every line of one seed before the
    next seed's, so that a change of machine between sittings never falls between the cells of one contrast):
    per seed, each block in file order, its axes' Cartesian product in the order written; `line` filled by
    str.format with {seed}, {dir} (folder), each axis and each per-value field (per.AXIS."VALUE"). A block with
    its own `seeds` (a subset of the run-study's) is emitted at those only."""
    for seed in seeds(w, study):
        for job in w["runs"][study].get("jobs", ()):
            if seed not in job.get("seeds", [seed]):
                continue
            axes = job.get("axes", {})
            for combo in itertools.product(*axes.values()):
                fields = {"seed": seed, "dir": folder, **dict(zip(axes, combo))}
                for axis, value in zip(axes, combo):
                    fields.update(job.get("per", {}).get(axis, {}).get(_key(value), {}))
                yield job["line"].format(**fields)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m studies.wave", description="A confirmatory wave's seeds and job lines.")
    ap.add_argument("what", choices=("seeds", "grid", "name"))
    ap.add_argument("name", help="the wave's name (confirm, confirm2, rung1) or number")
    ap.add_argument("study", nargs="?", default="", help="one of its run-studies")
    ap.add_argument("--out", default="runs", help="grid: the records' root ({dir} is OUT/NAME/STUDY)")
    a = ap.parse_args(argv)
    try:
        w = get(a.name)
    except UserError as e:
        print(e, file=sys.stderr)
        return 2
    if a.what == "name":  # its folder name (runs/NAME/STUDY, results/STUDY/NAME); 2 when it declares no jobs there
        print(w["name"])
        return 0 if w["runs"].get(a.study, {}).get("jobs") else 2
    if a.what == "seeds":  # a run-study the wave does not run has none (sweep.sh asks for every study)
        print(" ".join(map(str, w["runs"].get(a.study, {}).get("seeds", ()))))
        return 0
    if not w["runs"].get(a.study, {}).get("jobs"):
        print(f"{w['file']} declares no jobs for {a.study!r} (its grid is sweep.sh's)", file=sys.stderr)
        return 2
    for line in grid(w, a.study, os.path.join(a.out, w["name"], a.study)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
