"""
The confirmatory families: per study, at most four of its seed's own headline claims, restated in the
tiny grid's terms, declared here (test, direction, margin, error term, outcome, cells, gates, seeds)
before any confirmatory run, and tested on fresh seeds that the stored 3-seed pilot never used. Holm runs
within each family only; every other comparison a study reports is exploratory (estimates and intervals,
no verdict word).

    CONFIRM=1 bash sweep.sh STUDY       the declared cells at the declared seeds (only those)
    python analyze.py --power results/STUDY --confirm
                                        the seed count: planned on the pilot, at the family's Holm steps

How a family is planned (analyze.py --power --confirm, stats.power_plan): each hypothesis is built from the
pilot's stored per-seed values exactly as it will be built from the fresh runs; its sd is replaced by the
80% upper confidence bound (stats.sd_upper: a 3-seed sd can be a third of the truth); the level is
0.05 / m, Holm's strictest step; the target is the declared margin for a claimed null (power at a true
difference of 0) and the pilot's own effect for a claimed difference. The seed count is the largest any
hypothesis of the family needs, at least MIN_CONFIRM_SEEDS, at most the declared cap (the 4-hour budget
of the five studies on 2 idle cores); where the cap binds, the effect detectable at the cap is stated.

A hypothesis passes when its Holm-adjusted p < 0.05 over its seeds AND its effect has the declared
direction (an equivalence hypothesis: its 90% interval inside +-margin). Passed against the declared
direction is reported as "opposite to the seed", never as a pass.
"""
import json
import os
from collections import defaultdict

import numpy as np

from cli import UserError
from studies.common import CONFIRM_BEGIN, CONFIRM_END, ci, f, table, verdict_words
from studies.stats import decide_family, paired_hypothesis, power_plan

MIN_CONFIRM_SEEDS = 8
# One machine kind for every fresh seed: the stored QAT reruns moved by up to 0.06 nats between CPU kinds,
# so a family whose seeds ran on two kinds would mix a machine effect into its error term. The kind is the
# record's versions.cpu_capability; analyze.py --confirm refuses a folder whose runs disagree on it.
MACHINE = "the project's 2-core development CPU (x86-64; versions.cpu_capability as recorded in each result.json)"


def fresh(n, start=100):
    """n fresh seeds, disjoint from the pilot's 0-2 and from the paper grids' 0-9."""
    return list(range(start, start + n))


# The extrapolation each posenc seed claims, beside the ratio the tiny grid tests (8x: 128 to 1,024).
SEED_RATIO = {"swan": "the seed: 'substantially longer' than the training length, SWAN-GPT, arXiv 2504.08719",
              "chunk": "the seed: 'trained on a 4K context to 32 million tokens', arXiv 2510.17196"}

# study -> its declaration. Each hypothesis: id; claim (the seed's words, restated); match (substrings
# that pick exactly one hypothesis of the study's own family, computed from the confirm runs as from the
# pilot), or compute (a function of the report, for a hypothesis the exploratory family lacks); direction
# (+1 / -1: the sign of the effect the seed predicts; 0: equivalence within margin); the outcome and the
# error term in words; why (the seed's wording that picks this cell).
CONFIRM = {
    "qat": {
        "seed_text": "the QAT seed's abstract: 'the optimal warmdown is 33% at every (bit-width, size) "
                     "cell'; 'for INT4 ... at 50M and 100M, wd33 is decisively optimal'",
        "cells": "39K (the largest tiny size, as 50M/100M are the seed's largest INT4 sizes) x {FP16, INT4} x "
                 "warmdown {0.1, 0.33, 0.6}, LR 1, Muon + WSD (the grid's recipe): 6 runs a seed",
        "gates": ["every run finishes with a finite deployed val loss (a run that does not is rerun once with "
                  "--resume, then its seed is dropped from every hypothesis and reported)"],
        "failure_rule": "a seed missing any of the 6 runs after one retry is dropped from the family and named",
        "seeds": None, "cap": 24,
        "hypotheses": [
            {"id": "null", "direction": 0, "margin": 0.01,
             "claim": "INT4 at 39K: the penalty (INT4 - FP16) is the same at warmdowns 0.1, 0.33 and 0.6 within "
                      "+-0.01 nats (the seed's null: the best schedule does not depend on bit-width)",
             "match": ["INT4 at 39K", "the same at every warmdown"],
             "outcome": "deployed val loss (nats/token); per seed the penalty INT4 - FP16 at each warmdown",
             "error": "seeds (n - 1 dof) of each contrast wd w - wd 0.33; TOST, intersection-union over both",
             "why": "the seed's central claim is a null; INT4 is the tiny grid's highest bit-width with a penalty "
                    "that has range (INT8/INT6 penalties are below the seed noise at 39K)"},
            {"id": "int4_wd33", "direction": +1, "margin": None,
             "claim": "INT4 at 39K: wd 0.33 gives a lower loss than wd 0.1 (the seed: wd33 decisively optimal for "
                      "INT4 at its largest sizes)",
             "match": ["INT4 at 39K: wd 0.1 against wd 0.33"],
             "outcome": "deployed val loss of the INT4 run at wd 0.1 minus at wd 0.33 (nats); + = wd 0.33 lower",
             "error": "paired t over seeds (n - 1 dof)",
             "why": "the seed's INT4 transition is stated at its largest sizes; 39K is the tiny grid's largest"},
        ],
    },
    "qat-probes": {
        "seed_text": "QAT seed, Phase 5: 'The null is robust under all three setup changes' (optimiser AdamW, "
                     "schedule shape, training length up to 9x)",
        "cells": "AdamW at 25K and 3x the steps at 14K (the pilot's probe sizes), each {FP16, INT3} x warmdown "
                 "{0.1, 0.33, 0.6}: 12 runs a seed. Cosine has no warmdown, so no null to test",
        "gates": ["every run finishes with a finite deployed val loss (as qat)"],
        "failure_rule": "a seed missing a run of a probe after one retry is dropped from that probe's hypothesis",
        "seeds": None, "cap": 16,
        "hypotheses": [
            {"id": "adamw_null", "direction": 0, "margin": 0.01,
             "claim": "AdamW, INT3 at 25K: the penalty is the same at warmdowns 0.1, 0.33 and 0.6 within +-0.01 nats",
             "match": ["INT3 at 25K", "the same at every warmdown"],  # the one equivalence cell at 25K
             "outcome": "deployed val loss; per seed the penalty INT3 - FP16 at each warmdown",
             "error": "seeds (n - 1 dof) of each contrast; TOST, intersection-union",
             "why": "the seed's optimiser probe; INT3 is the tiny probes' bit-width (the largest penalty)"},
            {"id": "long_null", "direction": 0, "margin": 0.01,
             "claim": "3x training, INT3 at 14K: the penalty is the same at warmdowns 0.1, 0.33 and 0.6 within "
                      "+-0.01 nats",
             "match": ["INT3 at 14K", "the same at every warmdown"],
             "outcome": "deployed val loss; per seed the penalty INT3 - FP16 at each warmdown",
             "error": "seeds (n - 1 dof) of each contrast; TOST, intersection-union",
             "why": "the seed's training-length probe (3x: the tiny probes' longest budget at every warmdown)"},
        ],
    },
    "longctx": {
        "seed_text": "arXiv 2608.10296 abstract: 'a compoundingly negative effect on long context extensibility ... "
                     "combining three or more can drop the performance downstream by up to 47%'; counting the "
                     "features predicts performance",
        "cells": "the 10 cells of the 2^4 factorial (QK-norm x GQA x SWA x pretraining context 64) with at most one "
                 "or at least three features: pretrain, extend with the main recipe (NTK, 5% of the tokens, "
                 "to 512), evaluate the loss at 512 before and after",
        "gates": ["the extension extends: hypothesis 'extends' below is the gate, and the compounding claims are "
                  "read only if it passes"],
        "failure_rule": "a seed missing any of its 10 cells after one retry is dropped from the family and named",
        "seeds": None, "cap": 10,
        "hypotheses": [
            {"id": "extends", "direction": +1, "margin": None,
             "claim": "the extension lowers the loss at the target below the unextended parent's (the gate)",
             "match": ["the extension lowers the loss at the target below the unextended parent's"],
             "outcome": "per seed the mean over its cells of parent loss at 512 minus extended loss at 512 (nats)",
             "error": "t over seeds (n - 1 dof) of the seed's mean",
             "why": "an intervention must work before its effects are compared"},
            {"id": "compound", "direction": +1, "margin": None,
             "claim": "cells with three or more features extend worse (higher loss at the target after extension) "
                      "than cells with at most one",
             "compute": "compound",
             "outcome": "per seed the mean post-extension loss at 512 of the 5 cells with >= 3 features minus that "
                        "of the 5 cells with <= 1 (nats)",
             "error": "t over seeds (n - 1 dof): every cell of a seed shares its initialisation draw",
             "why": "the abstract's 'combining three or more' against fewer"},
            {"id": "count_slope", "direction": +1, "margin": None,
             "claim": "the post-extension loss at the target rises with the number of features",
             "compute": "count_slope",
             "outcome": "per seed the OLS slope of post-extension loss at 512 on the feature count (0, 1, 3, 4) "
                        "over its 10 cells (nats per feature)",
             "error": "t over seeds (n - 1 dof) of the per-seed slope",
             "why": "the seed's count predictor, as a direction a slope can test"},
        ],
    },
    "lengen": {
        "seed_text": "the NoPE abstract (arXiv 2305.19466), which is not a seed but a paper the seeds cite ('Cracks "
                     "in the Foundation', arXiv 2608.10296, lists it; SWAN-GPT's abstract builds on 'layers without "
                     "positional encodings (NoPE)'): NoPE outperforms explicit position encodings, RoPE among them, at "
                     "length generalisation on reasoning tasks",
        "cells": "copy, sort and parity_scratch (the tiny tasks NoPE and RoPE both learn in distribution in the pilot; "
                 "ExPE and SWAN do not learn parity_scratch), NoPE and "
                 "RoPE, each at its task's recipe, trained on lengths 1-16, scored on 17-48: 6 runs a seed",
        "gates": ["in distribution: exact match >= 0.95 on lengths 1-16 for both runs of a (task, seed) pair"],
        "failure_rule": "a seed whose NoPE or RoPE run misses the gate on a task is dropped from that task's "
                        "hypothesis and named; the hypothesis is tested on the seeds that remain",
        "seeds": None, "cap": 16,
        "hypotheses": [
            {"id": f"{t}_nope", "direction": +1, "margin": None,
             "claim": f"{t}: NoPE scores higher than RoPE past the training length",
             "match": [f"{t}: nope vs rope: score"],
             "outcome": "exact match on lengths 17-48 (the task's score past N), NoPE minus RoPE",
             "error": "paired t over seeds (n - 1 dof)",
             "why": "the NoPE abstract's claim, on each task the tiny models learn"} for t in ("copy", "sort",
                                                                                           "parity_scratch")
        ],
    },
    "posenc": {
        "seed_text": "SWAN-GPT (arXiv 2504.08719) and chunk attention (arXiv 2510.17196) abstracts: each extrapolates "
                     "past its training length, where RoPE does not",
        "cells": "RoPE, SWAN and chunk attention, each trained at 128 twice per seed (text; passkey retrieval), "
                 "evaluated at 128-1024: 6 runs a seed",
        "gates": ["passkey runs: exact match >= 0.9 at the training length 128 for both runs of a pair (the recipe "
                  "learns the task in distribution)"],
        "failure_rule": "a seed whose passkey pair misses the gate is dropped from that retrieval hypothesis and "
                        "named; text hypotheses have no gate",
        "seeds": None, "cap": 12,
        "hypotheses": [
            {"id": f"{e}_text", "direction": -1, "margin": None,
             "claim": f"{e}: the mean text loss past the training length is lower than RoPE's (tested: 8x, trained "
                      f"at 128, scored to 1,024; {SEED_RATIO[e]})",
             "match": [f"text: {e} vs rope: mean text loss past training"],
             "outcome": "mean val loss at 256, 512, 1024 (nats), encoding minus RoPE",
             "error": "paired t over seeds (n - 1 dof)",
             "why": "the abstracts' extrapolation claim, on language modelling"} for e in ("swan", "chunk")
        ] + [
            {"id": f"{e}_passkey", "direction": +1, "margin": None,
             "claim": f"{e}: passkey exact match past the training length is higher than RoPE's (tested: 8x, "
                      f"trained at 128, scored to 1,024; {SEED_RATIO[e]})",
             "match": [f"task_mix:passkey: {e} vs rope: retrieval score"],
             "outcome": "passkey exact match at 256, 512, 1024, encoding minus RoPE",
             "error": "paired t over seeds (n - 1 dof)",
             "why": "the abstracts' extrapolation claim, on retrieval"} for e in ("swan", "chunk")
        ],
    },
}
# The seed counts, from analyze.py --power results/STUDY --confirm on the stored pilot (filled in by hand from
# that output, committed with this declaration; the write-ups quote the plan).
SEEDS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds.tsv")


def wave_seeds(wave):
    """{study: [seeds]} of a confirmatory wave, from studies/seeds.tsv (sweep.sh reads the same file)."""
    out = {}
    with open(SEEDS_FILE) as fh:
        for line in fh:
            if line.strip() and not line.startswith("#"):
                study, w, first, count = line.split()
                if int(w) == wave:
                    out[study] = fresh(int(count), int(first))
    return out


PLANNED = {k: len(v) for k, v in wave_seeds(1).items()}
PILOT_SEEDS = {0, 1, 2}


def seeds(study):
    """The study's declared fresh seeds (studies/seeds.tsv, which sweep.sh reads too)."""
    return wave_seeds(1)[study]


def section(study):
    return "qat" if study.startswith("qat") else study


def longctx_cells(rep):
    """{seed: {count: [post-extension loss at the target]}} of the main recipe's final runs, seeds with
    every one of the 10 declared cells (count <= 1 or >= 3) only."""
    lc = rep["longctx"]
    rows = [w for w in lc["runs"] if w["recipe"] == lc["main_recipe"] and w["ckpt"] == "final"
            and w.get("loss") is not None and (w["count"] <= 1 or w["count"] >= 3)]
    by = defaultdict(dict)
    for w in rows:
        by[w["seed"]][w["cell"]] = w
    return {s: c for s, c in by.items() if len(c) == 10}


def compound(rep):
    out = {}
    for s, cells in longctx_cells(rep).items():
        hi = [w["loss"] for w in cells.values() if w["count"] >= 3]
        lo = [w["loss"] for w in cells.values() if w["count"] <= 1]
        out[s] = float(np.mean(hi) - np.mean(lo))
    return out


def count_slope(rep):
    out = {}
    for s, cells in longctx_cells(rep).items():
        x = np.array([w["count"] for w in cells.values()], dtype=float)
        y = np.array([w["loss"] for w in cells.values()])
        out[s] = float(np.polyfit(x, y, 1)[0])
    return out


COMPUTE = {"compound": compound, "count_slope": count_slope}


def lengen_gate(rep, d, level=0.95):
    """Seeds whose NoPE and RoPE runs of the hypothesis's task both reach `level` exact match in distribution."""
    task = d["id"].rsplit("_", 1)[0]
    cells = {c["encoding"]: c for c in rep["lengen"]["cells"] if c["task"] == task and not c.get("variant")}
    ok = [set(s for s, v in cells[e]["in_dist"]["per_seed"].items() if v is not None and v >= level)
          for e in ("nope", "rope") if e in cells]
    return {str(s) for s in set.intersection(*ok)} if len(ok) == 2 else set()


def posenc_gate(rep, d, level=0.9):
    """Retrieval hypotheses: seeds whose passkey runs of the encoding and of RoPE both reach `level` exact
    match at the training length; text hypotheses have no gate (None)."""
    if not d["id"].endswith("_passkey"):
        return None
    enc = d["id"].split("_")[0]
    ok = []
    for e in (enc, "rope"):
        c = next((c for c in rep["posenc"]["cells"] if c["training"] == "task_mix:passkey" and c["encoding"] == e), None)
        if c is None:
            return set()
        at = c["retrieval"]["passkey"]["exact"].get(str(c["train_len"]), {}).get("per_seed", {})
        ok.append({str(s) for s, v in at.items() if v is not None and v >= level})
    return ok[0] & ok[1]


GATES = {"lengen": lengen_gate, "posenc": posenc_gate}


def pick(family, match):
    """The one hypothesis of a decided family whose claim holds every substring of match."""
    hits = [h for h in (family or {}).get("hypotheses", []) if all(m in h["claim"] for m in match)]
    if len(hits) != 1:
        raise ValueError(f"the declared hypothesis {match} matches {len(hits)} of the study's hypotheses, not 1")
    return hits[0]


RAW = ("claim", "test", "n", "effect", "sd", "ci", "p", "per_seed", "margin")


def hypotheses(study, rep):
    """The declared family's hypotheses (undecided), built from a study's report: picked from its own
    family, or computed from its runs; each carries its declaration (id, direction, outcome, error, why)."""
    fam = rep[section(study)].get("family")
    out = []
    for d in CONFIRM[study]["hypotheses"]:
        gate = GATES[study](rep, d) if study in GATES else None
        if "compute" in d:
            h = paired_hypothesis(d["claim"], COMPUTE[d["compute"]](rep), "t over seeds (n - 1 dof)")
        else:
            try:
                h = {k: v for k, v in pick(fam, d["match"]).items() if k in RAW}
            except ValueError as e:  # the cell left the study's family (its gate): no test, said why
                h = paired_hypothesis(d["claim"], {}, f"none: {e}")
            h["claim"] = d["claim"]
            if gate is not None and d["margin"] is None:  # the declared per-seed gate, then the same paired t
                kept = {str(s): v for s, v in (h.get("per_seed") or {}).items() if str(s) in gate}
                h = dict(paired_hypothesis(d["claim"], kept, h["test"]),
                         gated_out=sorted(set(h.get("per_seed") or {}) - set(kept)))
        for k in ("id", "outcome", "error", "why"):
            h[k] = d[k]
        h["declared"] = d["direction"]  # the seed's sign (decide_family's "direction" is the observed one)
        if d["margin"] is not None:
            h["margin"] = d["margin"]
        out.append(h)
    return out


def in_declared_direction(fam):
    """A decided family's passes kept only in each hypothesis's declared direction ('declared': +1 / -1; 0 for a
    null); a pass the other way is marked 'opposite' (refuted) and not passed. Returns fam, changed in place."""
    for h in fam["hypotheses"]:
        sign = 0 if h["effect"] is None else (1 if h["effect"] > 0 else -1)
        h["opposite"] = bool(h["passed"] and h["declared"] and sign != h["declared"])
        h["passed"] = bool(h["passed"] and not h["opposite"])
    return fam


def confirmatory_family(study, rep):
    """The declared family decided on a report of the confirm runs: Holm within it; passed only in the
    declared direction (an equivalence hypothesis: inside its margin); 'opposite' marks a pass the other way."""
    fam = in_declared_direction(decide_family(hypotheses(study, rep)))
    fam["study"], fam["declaration"] = study, {k: v for k, v in CONFIRM[study].items() if k != "hypotheses"}
    return fam


def confirm_plan(study, pilot):
    """The seed count of a study's confirmatory family, planned on the pilot's report: power_plan of the
    family at its Holm steps (UCB sd); -> {plan, needed, seeds, cap, capped}."""
    fam = decide_family(hypotheses(study, pilot))
    plan = power_plan(fam)
    needs = [r["seeds_needed"] for r in plan["rows"]]
    need = max((n for n in needs if n is not None), default=None) if all(n is not None for n in needs) else None
    cap = CONFIRM[study]["cap"]
    n = cap if need is None else min(cap, max(MIN_CONFIRM_SEEDS, need))
    at_cap = power_plan(fam, seeds=n)
    return {"plan": plan, "needed": need, "seeds": n, "cap": cap, "capped": need is None or need > cap,
            "at_seeds": at_cap}


def check_confirm_runs(study, runs):
    """The confirm runs' seeds and machine, refused (UserError) when a run is a pilot seed, a seed the study
    did not declare, or from a second CPU kind (versions.cpu_capability): -> {seeds_used, machine}."""
    return check_wave_runs(study, runs, seeds(study))


def check_wave_runs(study, runs, declared):
    """check_confirm_runs against a wave's declared seeds."""
    used = sorted({r["config"].get("seed") for r in runs if r["config"].get("seed") is not None})
    bad = [x for x in used if x not in declared]
    if bad:
        raise UserError(f"--confirm {study}: runs with seeds {bad} outside the declared fresh seeds "
                        f"{declared[0]}-{declared[-1]} (studies/seeds.tsv)")
    kinds = sorted({str((r.get("versions") or {}).get("cpu_capability")) for r in runs})
    if len(kinds) > 1:
        raise UserError(f"--confirm {study}: runs from {len(kinds)} CPU kinds ({', '.join(kinds)}); the family's "
                        "seeds must share one machine kind")
    cpus = sorted({str((r.get("versions") or {}).get("cpu")) for r in runs})
    return {"seeds_used": used, "machine": {"cpu_capability": kinds[0] if kinds else None, "cpu": cpus}}


def declaration_md(study):
    """The declared design of a study's confirmatory family, as markdown (the write-up's generated
    'confirmatory' section holds it, before and after the runs)."""
    c = CONFIRM[study]
    n = PLANNED[study]
    L = [f"Declared before any confirmatory run (studies/confirm.py). The seed's claims: {c['seed_text']}.", "",
         f"- **Cells**: {c['cells']}.",
         f"- **Seeds**: {n} fresh seeds, {seeds(study)[0]}-{seeds(study)[-1]} (the pilot used 0-2), planned by "
         f"`python analyze.py --power results/{study} --confirm` (80% power at the family's Holm steps on the 80% "
         f"upper bound of each pilot sd; at least {MIN_CONFIRM_SEEDS}, cap {c['cap']}).",
         f"- **Machine**: {MACHINE}; every run of the family on one kind.",
         "- **Gates**: " + "; ".join(c["gates"]) + ".",
         f"- **A seed that fails**: {c['failure_rule']}.",
         "- **Rule**: Holm within these hypotheses only, adjusted p < 0.05, in the declared direction; a claimed null "
         "passes as equivalent when its TOST p (90% interval inside the margin) does. Everything else in this "
         "write-up is exploratory.", ""]
    rows = [[h["id"], h["claim"], {1: "+", -1: "-", 0: "equivalence"}[h["direction"]],
             f(h["margin"]) if h["margin"] is not None else "-", h["outcome"], h["error"], h["why"]]
            for h in c["hypotheses"]]
    return L + table(["id", "hypothesis", "direction", "margin", "outcome", "error term", "why this cell"], rows) + [""]


# Hypotheses that are gates (an intervention must work before its effects are compared), not seed claims:
# their verdict reads "gate passed" / "gate failed", never "as the seed".
GATE_IDS = {"extends"}


def result_words(h):
    """A confirmatory hypothesis's verdict in words: the study families' words (verdict_words), a pass
    named against the seed's declared direction; a gate's (GATE_IDS) as 'gate passed' / 'gate failed'."""
    if h.get("id") in GATE_IDS:
        if h["passed"] and not h.get("opposite"):
            return "gate passed"
        return "gate failed: " + ("passed in the opposite direction" if h.get("opposite") else verdict_words(h))
    cited = h.get("study") in CITED
    if h.get("opposite"):
        return "passed OPPOSITE to the " + ("cited paper" if cited else "seed")
    if h["passed"] and h.get("margin") is None and not h.get("undefined"):
        return "passed, as the cited paper (not a seed)" if cited else "passed, as the seed"
    return verdict_words(h)


# Families whose claim comes from a paper the seeds only cite (lengen: NoPE, arXiv 2305.19466), not a seed
CITED = {"lengen"}


def declared_claim(study, h):
    """A decided hypothesis's claim as the declaration words it now (the stored one, when the id is gone)."""
    d = next((d for d in CONFIRM.get(study, {}).get("hypotheses", []) if d["id"] == h.get("id")), None)
    return d["claim"] if d else h["claim"]


def confirm_md(fam):
    """The decided confirmatory family (confirmatory_family + check_confirm_runs) as markdown."""
    used = fam.get("seeds_used") or []
    rows = []
    for h in fam["hypotheses"]:
        lo, hi = h["ci"] if h.get("ci") else (None, None)
        rows.append([h["id"], declared_claim(fam["study"], h), str(h["n"]), ci(h["effect"], lo, hi, "+.3g"),
                     f(h["p"], ".2g"), f(h["p_holm"], ".2g"), result_words({**h, "study": fam["study"]})])
    m = fam.get("machine") or {}
    return ([f"## Confirmatory family: {fam['study']}", "",
             f"Seeds {used[0]}-{used[-1]} ({len(used)})" if used else "No seeds.",
             f"on one CPU kind (cpu_capability {m.get('cpu_capability')}); {fam['m']} hypotheses, Holm within them "
             "(a claimed null: TOST, its 90% interval; the others: 95% intervals over seeds). Every other table and "
             "family of this analysis is exploratory: only this family was declared before the runs.", ""]
            + table(["id", "hypothesis", "seeds", "effect [interval]", "p", "p (Holm)", "verdict"], rows) + [""])




def plan_md(study, pilot):
    """The seed plan of the declaration, from the pilot's report (confirm_plan) as markdown."""
    plan = confirm_plan(study, pilot)
    n = plan["seeds"]
    rows = [[h["id"], r["kind"], str(r["n"]), f(r["sd"], ".3g"), f(r["sd_plan"], ".3g"), f(r["target"], "+.3g"),
             f(r["seeds_needed"]), (f"power {a['detectable']:.2f} at the margin" if a.get("detectable_is")
                                    and a["detectable"] is not None else f(a["detectable"], ".3g"))]
            for h, r, a in zip(CONFIRM[study]["hypotheses"], plan["plan"]["rows"], plan["at_seeds"]["rows"])]
    why = (f"the cap ({plan['cap']}) binds: the planner asks for {f(plan['needed'])}, and the detectable effect at "
           f"{n} seeds stands beside each hypothesis" if plan["capped"] else
           f"the planner asks for {f(plan['needed'])}; the family runs {n} (at least {MIN_CONFIRM_SEEDS})")
    return ([f"The plan on the stored pilot (seeds 0-2), level 0.05/{len(rows)} (Holm's strictest step), 80% power, "
             f"sd at its 80% upper confidence bound; target: the margin of a claimed null, else the pilot's effect. "
             f"Seeds: {why}.", ""]
            + table(["id", "test", "pilot seeds", "pilot sd", "sd planned on", "target", "seeds needed",
                     f"detectable at {n} seeds"], rows) + [""])


def confirmatory_section(study, confirm_report=None, wall=None, pilot=None):
    """The write-up's generated confirmatory section: the declaration and its seed plan on the pilot, then
    (once the runs exist) the decided family from RESULTS/STUDY/confirm/analysis.json and the measured wall."""
    L = [f"## Confirmatory family (declared {'and run' if confirm_report else 'before the runs; results pending'})",
         ""] + declaration_md(study) + (plan_md(study, pilot) if pilot else [])
    fam = ((confirm_report or {}).get("confirmatory") or {}).get("family")
    if fam:
        L += confirm_md(fam)[2:]
    if wall:
        L += [f"Measured wall time of `CONFIRM=1 bash sweep.sh {study}`: {wall}.", ""]
    return L


def with_confirmatory(readme, study, confirm_report=None, wall=None, pilot=None):
    """README text with the section between CONFIRM_BEGIN and CONFIRM_END regenerated; None without markers."""
    if CONFIRM_BEGIN not in readme or CONFIRM_END not in readme:
        return None
    head, rest = readme.split(CONFIRM_BEGIN, 1)
    tail = rest.split(CONFIRM_END, 1)[1]
    body = confirmatory_section(study, confirm_report, wall, pilot)
    return head + CONFIRM_BEGIN + "\n\n" + "\n".join(body) + "\n" + CONFIRM_END + tail


def confirm_wall(folders):
    """The measured wall time of the confirm sweep (sweep.sh writes OUT/confirm/STUDY/wall.json: seconds
    summed over its sittings, and how many): {seconds, sittings, text}, or None."""
    # the larger rung's one sweep keeps one wall beside its run-studies' folders (runs/rung1/wall.json)
    for d in list(folders) + [os.path.dirname(os.path.normpath(d)) for d in folders]:
        try:
            with open(os.path.join(d, "wall.json")) as fh:
                w = json.load(fh)
        except (OSError, ValueError):
            continue
        s = int(w.get("seconds", 0))
        n = int(w.get("sittings", 1))
        return {"seconds": s, "sittings": n, "jobs": w.get("jobs"),
                "text": f"{s // 3600} h {s % 3600 // 60} min {s % 60} s on {w.get('cores', '?')} cores with "
                        f"JOBS={w.get('jobs', '?')}, in {n} sitting{'s' * (n > 1)}"}
    return None


FRONT_BEGIN, FRONT_END = "<!-- confirmatory verdicts -->", "<!-- /confirmatory verdicts -->"


def front_md(results, prefix="results/"):
    """The front page's confirmatory verdicts: one row per declared hypothesis of every study, from
    RESULTS/STUDY/confirm/analysis.json (a study not yet run: its hypotheses, 'pending')."""
    rows = []
    for study in CONFIRM:
        path = os.path.join(results, study, "confirm", "analysis.json")
        fam = None
        if os.path.isfile(path):
            with open(path) as fh:
                fam = ((json.load(fh).get("confirmatory") or {}).get("family"))
        hyps = {h["id"]: h for h in (fam or {}).get("hypotheses", [])}
        for d in CONFIRM[study]["hypotheses"]:
            h = hyps.get(d["id"])
            link = f"[{study}]({prefix}{study}/README.md)"
            if h is None:
                rows.append([link, d["claim"], "-", "-", "-", "pending: not run yet"])
                continue
            lo, hi = h["ci"] if h.get("ci") else (None, None)
            rows.append([link, d["claim"], str(h["n"]), ci(h["effect"], lo, hi, "+.3g"), f(h["p_holm"], ".2g"),
                         result_words({**h, "study": study})])
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
