"""
The second confirmatory wave: one family per seed paper (two for the QAT seed: Phase 2's grid, Phase 5's
probes), each restated in the tiny grid's terms and declared here before any of its runs. Which claims:
up to four hypotheses per family, chosen by this project among the claims ledger's rows
(studies/claims.py): rows the first wave left open, and re-tests of rows it decided on another outcome
or other cells (cracks: passkey exact match for the loss; qat: every size and INT3; swan: the tasks).
Rows measurable here but left open are the ledger's "not tested" rows. The pilots shaped two choices,
said where they are made (sort_reaches tests sort, whose pilot curve rises; int4_transition, which the
issue that asked for this wave wrote after the pilot showed FP16 sharing INT4's wd33 gain); otherwise they
only plan the seed counts.

Amended once, before any qat, longctx or posenc run (git log: the amendment commit follows the
declaration and precedes those sweeps; lengen's runs had started, and nothing of lg-bounds, swan, hope
or expe changed but wording): the INT4 null restricted to the seed's 'below 50M' sizes, the law tested
size by size and on held-out sizes (Phase 5's family), the cracks bound taken from the seed's own
'not predictive' value, a unanimous contrast decided by an exact sign test, dropped seeds named.

    CONFIRM=2 bash sweep.sh STUDY        the wave's cells of one run-study (qat, longctx, lengen, posenc) at
                                         its fresh seeds (200 on: not the pilot's 0-2 nor wave 1's 100-115)
    python analyze.py --power results/STUDY --confirm --wave 2
                                         the seed count of each family, planned on the stored pilot

A family's runs come from one run-study (its sweep), except the encoding families (swan, hope, expe),
whose tasks are lengen's runs and whose text and passkey are posenc's: posenc's analysis reads both.
The rule is wave 1's (confirm.confirmatory_family): Holm within the family, adjusted p < 0.05, in the
declared direction (every t is two-sided); an equivalence hypothesis passes when its TOST (90% interval
inside +-margin) does; a pass against the declared direction is "opposite to the seed", and an
equivalence whose whole 90% interval lies outside the margin is "not equivalent" (both refuted in the
ledger). A contrast with the same sign and size in every seed has no t statistic: it is decided by the
exact two-sided sign test, p = 2 * 0.5^n (wave 1 leaves it undefined).
"""
from collections import defaultdict

import numpy as np

WAVE = 2
SEED_START = 200  # fresh: the pilots used 0-2, wave 1 100-115, the paper grids 0-9
LG_LENS = (8, 32)  # lg-bounds: the training lengths N (block 128 holds the 3N evaluation of N = 32)
LG_BUDGETS = (1, 2)  # lg-bounds: the training steps, in multiples of the task's recipe
LG_TASKS = ("copy", "sort")  # copy is the simpler of the two in the declared order (lengen.THRESHOLD_PREDICTED)
TASKS = ("copy", "sort")  # the tasks every compared encoding learns in distribution (parity_scratch: not SWAN, ExPE)
QAT_FIT = ("14K", "25K", "39K")
QAT_ALL = ("6K", "14K", "25K", "39K", "55K")
QAT_MARGIN = 0.01  # nats: wave 1's margin for the seed's null
MINOR = 0.10  # cracks: "minor" = a single feature moves passkey exact match by less than 0.10 (see below)
# cracks: short-context training loss "does not predict" = no more than the seed's own training loss, which its
# review of arXiv 2608.10296 (Section 3) reports as R^2 = 0.29 and the paper calls not predictive: |r| < 0.539
R_BOUND = float(np.sqrt(0.29))
QAT_NULL4 = ("14K", "25K")  # INT4's null: the seed's 'below 50M'; 39K stands for its 50M/100M (int4_wd33)
QAT_HELD = ("6K", "55K")  # Phase 5's held-out sizes of the tiny grid

# run-study -> its wave-2 sweep: the cells, the planned seeds and the cap (5 h of measured wall in all, on
# 2 cores: the cap is what the run-study's share of that buys, from wave 1's measured seconds per job).
RUNS = {
    "qat": {"cells": "sizes 6K-55K; at 14K, 25K, 39K: FP16, INT4, INT3 x warmdown {0.1, 0.33, 0.6}; at 6K and "
                     "55K: FP16 and INT4 at warmdown 0.33 (the law's held-out sizes); LR 1, Muon + WSD; the INT4 "
                     "weight-to-grid probe on every 39K FP16 and INT4 run: 31 runs a seed",
            "cap": 16},
    "longctx": {"cells": "wave 1's 10 cells (<= 1 or >= 3 of QK-norm, GQA, SWA, pretraining context 64), pretrain, "
                         "extend (NTK, 5% of the tokens, to 512), evaluate loss AND passkey exact match at 512 before "
                         "and after (wave 1 scored no passkey): 10 jobs a seed",
                "cap": 10},
    "lengen": {"cells": "lg-bounds: NoPE, copy and sort at their recipe depth, N in {8, 32} x steps {1x, 2x the "
                        "recipe}, block 128; the encodings: copy and sort (the tasks all five learn), RoPE, SWAN, "
                        "HoPE, ExPE, sinusoidal at N = 16: 18 runs a seed",
               "cap": 10},
    "posenc": {"cells": "text (300 steps at 128): RoPE, HoPE, ExPE, sinusoidal; passkey (600 steps at 128): RoPE, "
                        "HoPE, chunk attention and its three remove-one ablations; evaluated at 128-1024: 10 runs a seed",
               "cap": 10},
}
# The seed counts live in studies/seeds.tsv, from analyze.py --power results/STUDY --confirm --wave 2 (each
# run-study runs the largest count its families ask for, at least 8, at most its cap), committed with this
# declaration; the write-ups quote the plan.
def seeds(study):
    """The run-study's wave-2 seeds (studies/seeds.tsv, which sweep.sh reads too)."""
    from studies.confirm import wave_seeds
    return wave_seeds(WAVE)[study]


def _h(id, claim, direction, compute, outcome, error, why, margin=None, **kw):
    return {"id": id, "claim": claim, "direction": direction, "margin": margin, "compute": compute,
            "outcome": outcome, "error": error, "why": why, **kw}


PAIRED = "paired t over seeds (n - 1 dof)"
IUT = "seeds (n - 1 dof) of each contrast; TOST, intersection-union over the contrasts"
FAMILIES = {
    "qat-w2": {
        "paper": "qat", "runs": "qat",
        "seed_text": "the QAT seed's abstract: 'finds the optimal warmdown is 33% at every (bit-width, size) cell'; "
                     "'below 50M ... no individual size shows a statistically significant schedule preference'; "
                     "'The INT6 penalty follows a log-linear scaling law'; 'For INT4 ... at 50M and 100M, wd33 is "
                     "decisively optimal'",
        "gates": ["every run finishes with a finite deployed val loss (a seed missing one is dropped from the "
                  "hypotheses that need it, and named)"],
        "failure_rule": "a seed missing a run after one retry is dropped from each hypothesis that reads it",
        "hypotheses": [
            _h("int4_null_sizes", "INT4: the penalty (INT4 - FP16) is the same at warmdowns 0.1 and 0.6 as at 0.33, "
               "within +-0.01 nats, at 14K and 25K", 0, "qat_null_int4",
               "deployed val loss; per seed the penalty at wd w minus at wd 0.33, 4 contrasts (2 sizes x 2 warmdowns)",
               IUT, "the seed: 'below 50M ... no individual size shows a statistically significant schedule "
               "preference'; 39K stands for its 50M/100M, where INT4's wd33 is decisive (int4_transition)",
               margin=QAT_MARGIN),
            _h("int3_null_sizes", "INT3: the penalty (INT3 - FP16) is the same at warmdowns 0.1 and 0.6 as at 0.33, "
               "within +-0.01 nats, at every tiny size (14K, 25K, 39K)", 0, "qat_null_int3",
               "as int4_null_sizes, INT3", IUT,
               "INT3 is the tiny grid's harshest bit-width (its penalty has the most range); the QAT abstract "
               "states its null 'at every (bit-width, size) cell' it ran", margin=QAT_MARGIN),
            _h("int4_transition", "INT4 at 39K: wd 0.33's gain over wd 0.1 is larger than FP16's (the wd33 "
               "preference is specific to quantisation)", +1, "qat_transition",
               "per seed (INT4 loss at wd 0.1 - at wd 0.33) - (FP16 loss at wd 0.1 - at wd 0.33), nats", PAIRED,
               "the abstract: 'For INT4 the picture is sharper than the higher precisions: at 50M and 100M, wd33 is "
               "decisively optimal'; 39K is the tiny grid's largest size; INT4 against FP16 tests what is specific "
               "to quantisation (wave 1 tested INT4 alone)"),
            _h("law_fit", "the INT4 penalty at wd 0.33 follows alpha + beta ln N over 6K-55K: at each of the five "
               "sizes its mean departure from the law is within +-0.01 nats", 0, "qat_law",
               "per seed and size the residual of the INT4 - FP16 penalty about that seed's least-squares alpha + "
               "beta ln N over 6K, 14K, 25K, 39K, 55K (nats): 5 contrasts", IUT,
               "the abstract's law is for INT6 ('The INT6 penalty follows a log-linear scaling law'); INT6's tiny "
               "penalty is below the seed noise, so the law is tested on INT4, the highest bit-width with range (a deviation)", margin=QAT_MARGIN),
        ],
    },
    "qat-phase5": {
        "paper": "qat", "runs": "qat",
        "seed_text": "the QAT seed's abstract, Phase 5: the law's 'fit on Phase 2 predicts the five held-out Phase 5 "
                     "sizes ... within their 95% prediction intervals (5/5)'; 'pre-warmdown, INT6-QAT weights sit at "
                     "essentially the same distance from the INT6 grid as FP16 weights (ratio ~ 1.04)'",
        "gates": ["grid probe: the FP16 weights' mean distance to the INT4 grid lies in 0.2-0.3 (weights spread over "
                  "many grid steps sit at 0.25 of a step on average, the no-snapping baseline; snapped weights would "
                  "sit near 0, so the ratio's range is 0-1); a seed outside it is dropped and named"],
        "failure_rule": "a seed without both 39K warmdown checkpoints probed, or missing a law size, is dropped from "
                        "that hypothesis and named",
        "hypotheses": [
            _h("law_heldout", "the INT4 penalty law fitted at 14K, 25K, 39K predicts the held-out 6K and 55K: the "
               "mean departure at each is within +-0.01 nats", 0, "qat_law_heldout",
               "per seed the INT4 - FP16 penalty at wd 0.33 at 6K and at 55K minus that seed's alpha + beta ln N "
               "fitted at 14K, 25K, 39K (nats): 2 contrasts", IUT,
               "the seed's held-out prediction (Phase 2 fit, Phase 5 sizes); the tiny grid's held-out sizes; INT4 "
               "for INT6 as in law_fit", margin=QAT_MARGIN),
            _h("grid_ratio", "at 39K, pre-warmdown (the warmdown checkpoint at wd 0.33), INT4-QAT weights sit at the "
               "same distance from the INT4 grid as FP16 weights: ln(d_QAT / d_FP16) within +-0.1 (a ratio in "
               "0.905-1.105)", 0, "grid_ratio",
               "per seed ln(mean distance of the INT4-QAT weights to the INT4 grid / that of the FP16 weights), in "
               "units of the grid step", "seeds (n - 1 dof); TOST at +-0.1",
               "the seed's 'essentially the same' (ratio ~1.04) as an equivalence; INT4 is the tiny grid's "
               "bit-width with range (the seed's is INT6)", margin=0.1),
        ],
    },
    "cracks": {
        "paper": "cracks", "runs": "longctx",
        "seed_text": "arXiv 2608.10296 abstract: 'a compoundingly negative effect on long context extensibility. Any "
                     "one of these choices alone has a minor impact on long context performance, but combining three "
                     "or more can drop the performance downstream by up to 47%. Furthermore, these differences are "
                     "not detectable from short-context loss or validation datasets.'",
        "gates": ["the extension extends (not a hypothesis): per seed the mean over its cells of the parent's loss at "
                  "512 minus the extended model's is above 0 by a one-sided t over seeds at 0.05; without it the "
                  "family is not read",
                  "no per-cell learning gate: a feature that stops a model learning passkey in distribution is part "
                  "of its downstream effect (the in-distribution exact match of every cell is reported beside)"],
        "failure_rule": "a seed missing any of its 10 cells after one retry is dropped from the family and named",
        "hypotheses": [
            _h("count_slope", "passkey exact match at 512 after the extension falls with the number of features",
               -1, "cracks_slope", "per seed the OLS slope of exact match at 512 (130 samples) on the feature count "
               "(0, 1, 3, 4) over its 10 cells (per feature)", "t over seeds (n - 1 dof) of the per-seed slope",
               "the abstract's 'compoundingly negative effect', on the downstream stand-in (wave 1 used the loss, "
               "which the seed says misses it)"),
            _h("compound", "cells with three or more features have a lower passkey exact match at 512 after the "
               "extension than cells with at most one", -1, "cracks_compound",
               "per seed the mean exact match at 512 of the 5 cells with >= 3 features minus that of the 5 with <= 1",
               "t over seeds (n - 1 dof)", "the abstract's 'combining three or more can drop the performance "
               "downstream'"),
            _h("minor", "any one feature alone moves passkey exact match at 512 after the extension by less than "
               "0.10 from the no-feature cell", 0, "cracks_minor",
               "per seed exact match of each single-feature cell minus the no-feature cell's: 4 contrasts", IUT,
               "the abstract's 'any one of these choices alone has a minor impact'; the margin 0.10 is larger than "
               "the seed's own 'a point or two' of HELMET (about 4% of its best score) because a 130-sample exact "
               "match has a binomial sd near 0.04", margin=MINOR),
            _h("short_loss", "within each pretraining context, the short-context training loss does not predict "
               "passkey exact match at 512 after the extension: |within-context r| < 0.539 (R^2 < 0.29)", 0,
               "cracks_short_loss",
               "per seed the Fisher z of the pooled within-context Pearson r (each context's mean removed) between "
               "the pretraining run's smoothed final training loss and exact match at 512, over its 10 cells",
               "seeds (n - 1 dof); TOST at +-atanh(0.539) = +-0.602 in z",
               "the abstract's 'not detectable from short-context loss'; the bound is the seed's own training-loss "
               "R^2 0.29, which it calls not predictive (review, Section 3); within each context because the short "
               "context is itself a feature and also raises the loss", margin=float(np.arctanh(R_BOUND))),
        ],
    },
    "lg-bounds": {
        "paper": "lg-bounds", "runs": "lengen",
        "seed_text": "the length-generalisation (LG) bounds abstract: 'transformers eventually achieve length "
                     "generalization once the training sequence length exceeds some finite threshold' (its prior "
                     "work, whose threshold it bounds), 'we verify these insights empirically', 'richer training "
                     "data is required for generalization on more complex tasks'",
        "gates": ["in distribution: a run whose exact match on lengths 1-N is below 0.9 counts with its measured "
                  "score past N (a threshold not reached is the outcome, not a dropped run); the in-distribution "
                  "curve is reported beside"],
        "failure_rule": "a seed missing a run after one retry is dropped from the hypotheses that read it",
        "hypotheses": [
            _h("sort_rise", "sort (NoPE): exact match past N (N+1..2N) is higher when trained at N = 32 than at N = 8, "
               "at the same training steps", +1, "lg_sort_rise",
               "per seed, averaged over the two step budgets: score past N at N = 32 minus at N = 8", PAIRED,
               "the threshold claim: past some N, the model generalises; the steps are held fixed across N so a "
               "longer N is not a smaller budget per length"),
            _h("copy_rise", "copy (NoPE): exact match past N is higher when trained at N = 32 than at N = 8, at the "
               "same training steps", +1, "lg_copy_rise", "as sort_rise, copy", PAIRED, "as sort_rise"),
            _h("sort_reaches", "sort (NoPE) at N = 32, twice the recipe's steps: the per-seed min(in-distribution, "
               "past-N) exact match exceeds 0.9 (the threshold is reached)", +1, "lg_sort_reaches",
               "per seed min(exact match on 1..N, on N+1..2N) - 0.9 at N = 32, 2x steps",
               "one-sample t over seeds (n - 1 dof)",
               "the threshold is finite: the design must be able to reach it (sort is the task the pilot's "
               "curve rises on)"),
            _h("richer", "copy, the simpler task in this project's declared order (copy < sort < parity_scratch; "
               "the abstract names no tasks, so a failure refutes the order, not the seed), generalises past N "
               "better than sort at N = 32: copy's score past N minus sort's > 0", +1,
               "lg_richer", "per seed, averaged over the two budgets: copy's score past N minus sort's at N = 32",
               PAIRED, "'richer training data is required for ... more complex tasks': at one N the simpler task "
               "should be the one past its threshold"),
        ],
    },
    "swan": {
        "paper": "swan", "runs": "posenc",
        "seed_text": "SWAN-GPT (arXiv 2504.08719) abstract: 'robustly generalizes to sequence lengths substantially "
                     "longer than those seen during training'",
        "gates": ["per task and seed: both runs (SWAN, RoPE) reach exact match >= 0.95 in distribution; a seed "
                  "failing on a task is dropped from the hypothesis and named"],
        "failure_rule": "as the gate",
        "hypotheses": [
            _h("swan_tasks", "SWAN scores higher than RoPE past the training length on the algorithmic tasks, pooled "
               "over copy and sort", +1, "swan_tasks",
               "per seed the mean over copy and sort of (SWAN - RoPE) exact match on lengths 17-48 (trained on 1-16)",
               PAIRED, "wave 1 tested SWAN on text and passkey; the abstract's claim is general: the tasks it learns"),
        ],
    },
    "hope": {
        "paper": "hope", "runs": "posenc",
        "seed_text": "HoPE abstract: 'These enhances model's context awareness and extrapolation, as validated by "
                     "extensive experiments'",
        "gates": ["tasks: both runs >= 0.95 in distribution per task and seed (as swan); passkey: both runs >= 0.9 "
                  "exact match at 128 (wave 1's gate); text: none"],
        "failure_rule": "a seed failing a gate is dropped from that hypothesis and named",
        "hypotheses": [
            _h("hope_text", "HoPE's mean text loss past the training length (256-1024) is lower than RoPE's", -1,
               "hope_text", "mean val loss at 256, 512, 1024 (trained at 128), HoPE - RoPE (nats)", PAIRED,
               "'extrapolation', on language modelling"),
            _h("hope_passkey", "HoPE's passkey exact match past the training length is higher than RoPE's", +1,
               "hope_passkey", "passkey exact match at 256, 512, 1024, HoPE - RoPE", PAIRED,
               "'context awareness and extrapolation', on retrieval"),
            _h("hope_tasks", "HoPE scores higher than RoPE past N on copy and sort, pooled", +1, "hope_tasks",
               "per seed the mean over copy and sort of (HoPE - RoPE) exact match on 17-48", PAIRED,
               "'extrapolation', on the tasks it learns"),
        ],
    },
    "expe": {
        "paper": "expe", "runs": "posenc",
        "seed_text": "ExPE abstract: 'our ExPE embeddings significantly reduce perplexity compared to rotary and "
                     "sinusoidal embeddings, when tested on sequences longer than those used in training'",
        "gates": ["tasks: both runs >= 0.95 in distribution per task and seed; text: none"],
        "failure_rule": "a seed failing a gate is dropped from that hypothesis and named",
        "hypotheses": [
            _h("expe_rope_text", "ExPE's mean text loss past the training length is lower than RoPE's (two-sided: "
               "a higher loss that passes is refuted)", -1, "expe_rope_text",
               "mean val loss at 256, 512, 1024, ExPE - RoPE (nats)", PAIRED + ", two-sided",
               "the abstract's perplexity claim, against rotary"),
            _h("expe_sin_text", "ExPE's mean text loss past the training length is lower than sinusoidal's "
               "(two-sided; worse = refuted)", -1, "expe_sin_text",
               "mean val loss at 256, 512, 1024, ExPE - sinusoidal (nats)", PAIRED + ", two-sided",
               "the abstract's perplexity claim, against sinusoidal"),
            _h("expe_rope_tasks", "ExPE scores higher than RoPE past N on copy and sort, pooled (two-sided)", +1,
               "expe_rope_tasks", "per seed the mean over copy and sort of (ExPE - RoPE) exact match on 17-48",
               PAIRED + ", two-sided", "'can extrapolate to sequences of lengths longer', on the tasks it learns"),
            _h("expe_sin_tasks", "ExPE scores higher than sinusoidal past N on copy and sort, pooled (two-sided)", +1,
               "expe_sin_tasks", "per seed the mean over copy and sort of (ExPE - sinusoidal) exact match on 17-48",
               PAIRED + ", two-sided", "as expe_rope_tasks, against sinusoidal"),
        ],
    },
    "chunk": {
        "paper": "chunk", "runs": "posenc",
        "seed_text": "chunk attention (arXiv 2510.17196) abstract: 'we demonstrate that a combination of three design "
                     "principles is critical: (1) an expressive, non-linear Chunk Encoder with a dedicated CLS token "
                     "... (2) a Bypassing Residual Path ... (3) enforced selection sparsity during pre-training'",
        "gates": ["the full model learns passkey in distribution (exact match >= 0.9 at 128) in that seed (run); no gate on "
                  "an ablation: an ablation that fails to learn the task scores what it scores (that failure is "
                  "the evidence the principle predicts)"],
        "failure_rule": "a seed whose full model misses its gate is dropped from all three and named",
        "hypotheses": [
            _h(f"chunk_{a}", f"removing principle {i} ({what}) lowers passkey exact match past the training length "
               "below the full model's", -1, f"chunk_{a}",
               f"passkey exact match at 256, 512, 1024, chunk-{a} - chunk (no gate on the ablation)", PAIRED,
               f"the abstract's principle {i}: each is 'critical'")
            for i, (a, what) in enumerate((("linear", "a linear chunk encoder without CLS"),
                                           ("fused", "no bypassing residual path"),
                                           ("dense", "dense retrieval in training")), 1)
        ],
    },
}


def families_of(study):
    """The wave-2 families whose runs are a run-study's."""
    return [k for k, v in FAMILIES.items() if v["runs"] == study]


# -----------------------------------------------------------------------------
# Per-seed outcomes, from an analysis report (the pilot's stored analysis.json, or the wave's own); each
# returns {"per_seed": {seed: value}} (a paired or one-sample t) or {"contrasts": {name: {seed: d}}} (TOST),
# with "gated_out": the seeds a gate dropped.

def _qat_cell(rep, bits, size, wd):
    for c in rep.get("qat", {}).get("cells", []):
        if c.get("variant") == "" and c["bits"] == bits and c["size"] == size and c.get("lr") == 1.0:
            for w in c["warmdowns"]:
                if abs(w["warmdown"] - wd) < 1e-9:
                    return w["per_seed"]
    return {}


def _penalty(rep, bits, size, wd):
    q, fp = _qat_cell(rep, bits, size, wd), _qat_cell(rep, 16, size, wd)
    return {s: q[s] - fp[s] for s in q if s in fp and q[s] is not None and fp[s] is not None}


def _null(rep, bits, sizes=None):
    out = {}
    for size in sizes or (QAT_NULL4 if bits == 4 else QAT_FIT):
        ref = _penalty(rep, bits, size, 0.33)
        for wd in (0.1, 0.6):
            p = _penalty(rep, bits, size, wd)
            out[f"{size} wd{wd:g}"] = {s: p[s] - ref[s] for s in p if s in ref}
    return {"contrasts": out}


def qat_transition(rep, size="39K"):
    g4, g16 = _gain(rep, 4, size), _gain(rep, 16, size)
    return {"per_seed": {s: g4[s] - g16[s] for s in g4 if s in g16}}


def _gain(rep, bits, size="39K"):
    a, b = _qat_cell(rep, bits, size, 0.1), _qat_cell(rep, bits, size, 0.33)
    return {s: a[s] - b[s] for s in a if s in b}


def _law_departures(rep, fit, at):
    """{size in at: {seed: penalty - the seed's own alpha + beta ln N fitted at the sizes `fit`}}, INT4 at wd
    0.33, seeds holding every size; and the seeds dropped for a missing size."""
    from studies.common import parse_size
    sizes = tuple(dict.fromkeys(fit + at))
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


def qat_law(rep):
    return _law_departures(rep, QAT_ALL, QAT_ALL)


def qat_law_heldout(rep):
    return _law_departures(rep, QAT_FIT, QAT_HELD)


def grid_ratio(rep, size="39K"):
    rows = [r for r in (rep.get("grid_distance") or {}).get("rows", [])
            if r.get("key") == "overall" and r.get("size") == size and r.get("bits") == 4 and not r.get("variant")
            and abs(r.get("warmdown", 0) - 0.33) < 1e-9]
    per = rows[0]["per_seed"] if rows else {}
    ok = {s: v for s, v in per.items() if v.get("fp16") and v.get("qat") and 0.2 <= v["fp16"] <= 0.3}
    return {"contrasts": {"ln ratio": {s: float(np.log(v["qat"] / v["fp16"])) for s, v in ok.items()}},
            "gated_out": [str(s) for s in sorted(set(per) - set(ok))]}


def _cracks_cells(rep):
    """{seed: [row]} of the main recipe's final extensions, seeds holding all 10 declared cells."""
    lc = rep.get("longctx") or {}
    by = defaultdict(dict)
    for w in lc.get("runs", []):
        if (w["recipe"] == lc.get("main_recipe") and w["ckpt"] == "final" and not w.get("control")
                and not w.get("training_free") and w.get("exact") is not None and (w["count"] <= 1 or w["count"] >= 3)):
            by[str(w["seed"])][w["cell"]] = w
    return {s: list(c.values()) for s, c in by.items() if len(c) == 10}


def _cracks_dropped(rep):
    """Seeds with some but not all of the 10 declared cells (the failure rule: dropped and named)."""
    lc = rep.get("longctx") or {}
    seen = {str(w["seed"]) for w in lc.get("runs", []) if w["recipe"] == lc.get("main_recipe")}
    return sorted(seen - set(_cracks_cells(rep)))


def cracks_slope(rep):
    return {"per_seed": {s: float(np.polyfit([w["count"] for w in ws], [w["exact"] for w in ws], 1)[0])
                         for s, ws in _cracks_cells(rep).items()}}


def cracks_compound(rep):
    return {"per_seed": {s: float(np.mean([w["exact"] for w in ws if w["count"] >= 3])
                                  - np.mean([w["exact"] for w in ws if w["count"] <= 1]))
                         for s, ws in _cracks_cells(rep).items()}}


def cracks_minor(rep):
    out = defaultdict(dict)
    for s, ws in _cracks_cells(rep).items():
        none = next(w["exact"] for w in ws if w["count"] == 0)
        for w in ws:
            if w["count"] == 1:
                out[w["cell"]][s] = w["exact"] - none
    return {"contrasts": dict(out)}


def cracks_short_loss(rep):
    out = {}
    for s, ws in _cracks_cells(rep).items():
        x, y = [], []
        for ctx in {w["ctx"] for w in ws}:
            g = [w for w in ws if w["ctx"] == ctx and w.get("train_loss_smooth") is not None]
            mx, my = np.mean([w["train_loss_smooth"] for w in g]), np.mean([w["exact"] for w in g])
            x += [w["train_loss_smooth"] - mx for w in g]
            y += [w["exact"] - my for w in g]
        den = float(np.sqrt(np.sum(np.square(x)) * np.sum(np.square(y))))
        if den > 0:
            r = float(np.clip(np.dot(x, y) / den, -0.999999, 0.999999))
            out[s] = float(np.arctanh(r))
    return {"contrasts": {"within-context z": out}}


LG_DEPTH = 3  # copy's and sort's recipe depth (sweep.sh lengen_recipe)


def _lg_row(rep, task):
    """{iters: row} of the NoPE threshold rows of a task at its recipe depth (a row per step budget; the
    pilot's rows, stored before rows carried iters, are one budget)."""
    rows = [r for r in ((rep.get("lengen") or {}).get("threshold") or {}).get("rows", [])
            if r["task"] == task and r["encoding"] == "nope" and r["n_layer"] == LG_DEPTH]
    return {r.get("iters") or 0: r for r in rows}


def _lg_points(rep, task):
    """{budget (iters): {N: point}} of the NoPE threshold rows of a task at its recipe depth."""
    return {b: {p["train_len"]: p for p in r["by_train_len"]} for b, r in _lg_row(rep, task).items()}


def _lg_score(p):
    return p["at_2x"]["per_seed"]


def _lg_rise(rep, task):
    out = defaultdict(list)
    for b, pts in _lg_points(rep, task).items():
        if len(pts) < 2:
            continue
        lo, hi = pts[min(pts)], pts[max(pts)]
        a, z = _lg_score(hi), _lg_score(lo)
        for s in a:
            if s in z and a[s] is not None and z[s] is not None:
                out[s].append(a[s] - z[s])
    return {"per_seed": {s: float(np.mean(v)) for s, v in out.items() if len(v) == len(_lg_points(rep, task))}}


def lg_sort_rise(rep):
    return _lg_rise(rep, "sort")


def lg_copy_rise(rep):
    return _lg_rise(rep, "copy")


def lg_sort_reaches(rep):
    pts = _lg_points(rep, "sort")
    b = max(pts) if pts else None
    if b is None:
        return {"per_seed": {}}
    p = pts[b][max(pts[b])]
    ind, past = p["in_dist"]["per_seed"], _lg_score(p)
    return {"per_seed": {s: min(ind[s], past[s]) - 0.9 for s in past if s in ind and None not in (ind[s], past[s])}}


def _lg_multiples(pts):
    """{multiple of the task's smallest step budget: its points}: each task's budgets are its own recipe's steps
    times LG_BUDGETS (copy 600 and 1200, sort 800 and 1600), so two tasks pair by the multiple, not the steps."""
    lo = min(pts) if pts else 0
    return {(round(b / lo) if lo else 1): p for b, p in pts.items()}


def lg_richer(rep):
    c, s_ = _lg_multiples(_lg_points(rep, "copy")), _lg_multiples(_lg_points(rep, "sort"))
    out = defaultdict(list)
    for b in set(c) & set(s_):
        if not set(c[b]) & set(s_[b]):
            continue
        N = max(set(c[b]) & set(s_[b]))
        a, z = _lg_score(c[b][N]), _lg_score(s_[b][N])
        for s in a:
            if s in z and None not in (a[s], z[s]):
                out[s].append(a[s] - z[s])
    n = len(set(c) & set(s_))
    return {"per_seed": {s: float(np.mean(v)) for s, v in out.items() if len(v) == n}}


def _lengen_cell(rep, task, enc):
    return next((c for c in (rep.get("lengen") or {}).get("cells", [])
                 if c["task"] == task and c["encoding"] == enc and not c.get("variant")), None)


def _tasks_pooled(rep, enc, ref, level=0.95):
    """Per seed the mean over TASKS of (enc - ref) score past N; a seed is kept when both runs of every task
    reach `level` in distribution (the tasks each learns), else gated out."""
    per, out, dropped = {}, {}, set()
    for t in TASKS:
        a, b = _lengen_cell(rep, t, enc), _lengen_cell(rep, t, ref)
        if a is None or b is None:
            return {"per_seed": {}, "gated_out": []}
        for s, v in a["score"]["per_seed"].items():
            if s not in b["score"]["per_seed"]:
                continue
            ok = all((c["in_dist"]["per_seed"].get(s) or 0) >= level for c in (a, b))
            if not ok:
                dropped.add(s)
            per.setdefault(s, []).append(v - b["score"]["per_seed"][s])
    for s, v in per.items():
        if s not in dropped and len(v) == len(TASKS):
            out[s] = float(np.mean(v))
    return {"per_seed": out, "gated_out": [str(s) for s in sorted(dropped)]}


def _posenc_cell(rep, training, enc):
    return next((c for c in (rep.get("posenc") or {}).get("cells", [])
                 if c["training"] == training and c["encoding"] == enc), None)


def _text_past(rep, enc, ref):
    a, b = _posenc_cell(rep, "text", enc), _posenc_cell(rep, "text", ref)
    if a is None or b is None:
        return {"per_seed": {}}

    def past(c):
        out = defaultdict(list)
        for L, v in c["loss_by_length"].items():
            if int(L) > c["train_len"]:
                for s, x in v["per_seed"].items():
                    out[s].append(x)
        return {s: float(np.mean(v)) for s, v in out.items()}
    pa, pb = past(a), past(b)
    return {"per_seed": {s: pa[s] - pb[s] for s in pa if s in pb}}


def _passkey_at(c, L):
    return c["retrieval"]["passkey"]["exact"].get(str(L), {}).get("per_seed", {})


def _passkey_past(rep, enc, ref, gate_both=True, level=0.9):
    a, b = _posenc_cell(rep, "task_mix:passkey", enc), _posenc_cell(rep, "task_mix:passkey", ref)
    if a is None or b is None:
        return {"per_seed": {}}
    ga, gb = _passkey_at(a, a["train_len"]), _passkey_at(b, b["train_len"])
    keep, drop = {}, []
    for s, v in a["score"]["per_seed"].items():
        if s not in b["score"]["per_seed"]:
            continue
        ok = (gb.get(s) or 0) >= level and (not gate_both or (ga.get(s) or 0) >= level)
        if ok:
            keep[s] = v - b["score"]["per_seed"][s]
        else:
            drop.append(s)
    return {"per_seed": keep, "gated_out": [str(s) for s in sorted(drop)]}


COMPUTE = {
    "qat_null_int4": lambda r: _null(r, 4), "qat_null_int3": lambda r: _null(r, 3),
    "qat_transition": qat_transition, "qat_law": qat_law, "qat_law_heldout": qat_law_heldout,
    "grid_ratio": grid_ratio,
    "cracks_slope": cracks_slope, "cracks_compound": cracks_compound, "cracks_minor": cracks_minor,
    "cracks_short_loss": cracks_short_loss,
    "lg_sort_rise": lg_sort_rise, "lg_copy_rise": lg_copy_rise, "lg_sort_reaches": lg_sort_reaches,
    "lg_richer": lg_richer,
    "swan_tasks": lambda r: _tasks_pooled(r, "swan", "rope"),
    "hope_text": lambda r: _text_past(r, "hope", "rope"), "hope_passkey": lambda r: _passkey_past(r, "hope", "rope"),
    "hope_tasks": lambda r: _tasks_pooled(r, "hope", "rope"),
    "expe_rope_text": lambda r: _text_past(r, "expe", "rope"), "expe_sin_text": lambda r: _text_past(r, "expe", "sinusoidal"),
    "expe_rope_tasks": lambda r: _tasks_pooled(r, "expe", "rope"),
    "expe_sin_tasks": lambda r: _tasks_pooled(r, "expe", "sinusoidal"),
    # the ablation has no gate; the full model (the reference here) has its own
    **{f"chunk_{a}": (lambda a: lambda r: _passkey_past(r, f"chunk-{a}", "chunk", gate_both=False))(a)
       for a in ("linear", "fused", "dense")},
}


# -----------------------------------------------------------------------------
# Deciding and planning a family (the rule of wave 1: studies/confirm.py)

def hypotheses(name, rep, families=None, compute=None):
    """A wave-2 family's hypotheses (undecided) from a report: each computed, with its declaration (families,
    compute: another wave's declarations built by the same rule, the larger rung's)."""
    from studies.stats import equivalence_hypothesis, paired_hypothesis
    out = []
    for d in (families or FAMILIES)[name]["hypotheses"]:
        v = (compute or COMPUTE)[d["compute"]](rep)
        if "contrasts" in v:
            cs = {k: c for k, c in v["contrasts"].items()}
            h = (equivalence_hypothesis(d["claim"], cs, d["margin"]) if cs and all(cs.values()) else
                 {"claim": d["claim"], "test": "none: no runs", "n": 0, "effect": None, "sd": None, "ci": None,
                  "p": None, "per_seed": {}, "margin": d["margin"]})
        else:
            h = paired_hypothesis(d["claim"], v["per_seed"], d["error"])
        if h.get("p") is None and h.get("n", 0) >= 2 and "contrasts" not in v:  # unanimous: no t, the sign test
            vals = [x for x in v["per_seed"].values() if x is not None]
            if vals and (all(x > 0 for x in vals) or all(x < 0 for x in vals)):
                h.update(p=min(1.0, 2 * 0.5 ** len(vals)),
                         test=f"exact two-sided sign test over seeds (every seed the same contrast, {vals[0]:+.4g})")
        if d["compute"].startswith("cracks_") and _cracks_dropped(rep):
            v = {**v, "gated_out": sorted(set(v.get("gated_out") or []) | set(_cracks_dropped(rep)))}
        if v.get("gated_out"):
            h["gated_out"] = v["gated_out"]
        h.update({k: d[k] for k in ("id", "outcome", "error", "why")}, declared=d["direction"])
        if d["margin"] is not None:
            h["margin"] = d["margin"]
        out.append(h)
    return out


def decide(name, rep, families=None, compute=None, wave=WAVE):
    """The family decided: Holm within it; passed only in the declared direction; 'opposite' marks a pass the
    other way (refuted)."""
    from studies.confirm import in_declared_direction
    from studies.stats import decide_family
    fam = in_declared_direction(decide_family(hypotheses(name, rep, families, compute)))
    fam["family"], fam["wave"] = name, wave
    fam["declaration"] = {k: v for k, v in (families or FAMILIES)[name].items() if k != "hypotheses"}
    if name == "cracks":  # the declared gate: the family is read only when the extension extends
        fam["gate"] = extends_gate(rep)
        if not fam["gate"]["passed"]:
            for h in fam["hypotheses"]:
                h.update(passed=False, opposite=False, not_read="the gate failed: the extension does not extend")
    return fam


def extends_gate(rep):
    """cracks' gate: per seed the mean over its 10 cells of the parent's loss at the target minus the extended
    model's (gain_parent), above 0 by a one-sided t over seeds at 0.05."""
    import math
    from scipy import stats as st
    per = {s: float(np.mean([w["gain_parent"] for w in ws])) for s, ws in _cracks_cells(rep).items()
           if all(w.get("gain_parent") is not None for w in ws)}
    a = np.array(list(per.values()))
    p = None
    if a.size >= 2 and a.std(ddof=1) > 0:
        p = float(st.t.sf(a.mean() / (a.std(ddof=1) / math.sqrt(a.size)), a.size - 1))
    return {"test": "one-sided t over seeds that the mean gain > 0 (nats)", "n": int(a.size),
            "effect": float(a.mean()) if a.size else None, "p": p, "passed": bool(p is not None and p < 0.05),
            "per_seed": per}


def plan(study, pilot, min_seeds=8):
    """The seed count of a run-study's wave-2 sweep, planned on its pilot report: for each of its families,
    power_plan at the family's Holm steps on the 80% upper sd bound (the margin of a claimed null, else the
    pilot's effect); the sweep runs the largest count any family asks for, at least min_seeds, at most the
    cap. -> {families: {name: {plan, needed}}, needed, seeds, cap, capped, at_seeds: {name: plan}}."""
    from studies.stats import decide_family, power_plan
    fams, needs = {}, []
    for name in families_of(study):
        fam = decide_family(hypotheses(name, pilot))
        p = power_plan(fam)
        need = [r["seeds_needed"] for r in p["rows"]]
        fams[name] = {"family": fam, "plan": p, "needed": need}
        needs += need
    known = [n for n in needs if n is not None]
    need = max(known) if known else None
    cap = RUNS[study]["cap"]
    n = cap if need is None else min(cap, max(min_seeds, need))
    return {"families": {k: {"plan": v["plan"], "needed": v["needed"]} for k, v in fams.items()}, "needed": need,
            "unplanned": [h["id"] for k in fams for h, r in zip(FAMILIES[k]["hypotheses"], fams[k]["plan"]["rows"])
                          if r["seeds_needed"] is None],
            "seeds": n, "cap": cap, "capped": need is None or need > cap,
            "at_seeds": {k: power_plan(v["family"], seeds=n) for k, v in fams.items()}}


# -----------------------------------------------------------------------------
# Markdown: the declaration, the plan, the decided families (the write-ups' generated wave-2 section)

def declaration_md(study):
    from studies.common import f, table
    from studies.confirm import MACHINE
    s = seeds(study)
    L = [f"Declared before any of its runs (studies/wave2.py). Cells: {RUNS[study]['cells']}. Seeds: {len(s)} fresh "
         f"seeds, {s[0]}-{s[-1]} (the pilot used 0-2, wave 1 100-115), planned by `python analyze.py --power "
         f"results/{study} --confirm --wave 2` (80% power at each family's Holm steps on the 80% upper bound of the "
         f"pilot's sd; at least 8, cap {RUNS[study]['cap']}). Machine: {MACHINE}; every run of the wave on one kind. "
         "Rule: Holm within each family, adjusted p < 0.05 in the declared direction; a claimed null passes as "
         "equivalent when its TOST does; a pass against the declared direction is refuted.", ""]
    for name in families_of(study):
        L += family_md(name, FAMILIES[name])
    return L


def family_md(name, fam, last=("error term", "why"), cells=lambda h: [h["error"], h["why"]]):
    """One declared family: its seed text, gates and failure rule, and a row per hypothesis (its last columns:
    `last`, filled by `cells`)."""
    from studies.common import f, table
    L = [f"**Family `{name}`** ({fam['seed_text']}). Gates: " + "; ".join(fam["gates"])
         + f". A seed that fails: {fam['failure_rule']}.", ""]
    rows = [[h["id"], h["claim"], {1: "+", -1: "-", 0: "equivalence"}[h["direction"]],
             f(h["margin"], ".3g") if h["margin"] is not None else "-", h["outcome"], *cells(h)] for h in fam["hypotheses"]]
    return L + table(["id", "hypothesis", "direction", "margin", "outcome", *last], rows) + [""]


def plan_md(study, pilot):
    from studies.common import f, table
    p = plan(study, pilot)
    n = p["seeds"]
    rows = []
    for name, v in p["families"].items():
        for h, r, a in zip(FAMILIES[name]["hypotheses"], v["plan"]["rows"], p["at_seeds"][name]["rows"]):
            det = (f"power {a['detectable']:.2f} at the margin" if a.get("detectable_is") and a["detectable"] is not None
                   else f(a["detectable"], ".3g"))
            rows.append([name, h["id"], r["kind"], str(r["n"]), f(r["sd"], ".3g"), f(r["sd_plan"], ".3g"),
                         f(r["target"], "+.3g"), f(r["seeds_needed"]), det])
    why = (f"the cap ({p['cap']}) binds: the planner asks for {f(p['needed'])}; the detectable effect at {n} seeds "
           "stands beside each hypothesis" if p["capped"] else f"the planner asks for {f(p['needed'])}; the sweep runs {n}")
    return ([f"The plan on the stored pilot (seeds 0-2), per family at its own Holm level, 80% power, sd at its 80% "
             f"upper bound; target: the margin of a claimed null, else the pilot's effect. Seeds: {why}.", ""]
            + table(["family", "id", "test", "pilot seeds", "pilot sd", "sd planned on", "target", "seeds needed",
                     f"detectable at {n} seeds"], rows) + [""])


def words(h):
    """A wave-2 hypothesis's verdict in words."""
    from studies.common import verdict_words
    if h.get("opposite"):
        return "passed OPPOSITE to the seed (refuted)"
    if h["passed"] and h.get("margin") is None and not h.get("undefined"):
        return "passed, as the seed"
    return verdict_words(h)


def families_md(fams, label="Wave 2"):
    from studies.common import ci, f, table
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


W2_BEGIN, W2_END = "<!-- wave 2 -->", "<!-- /wave 2 -->"


def section(study, conf=None, pilot=None):
    """The write-up's generated wave-2 section: the declaration, the seed plan on the pilot, then (once the
    runs are analysed) the decided families from RESULTS/STUDY/confirm2/analysis.json and the measured wall."""
    c = (conf or {}).get("confirmatory") or {}
    fams = c.get("families")
    L = [f"## Confirmatory wave 2 ({'declared and run' if fams else 'declared before its runs; results pending'})", ""]
    L += declaration_md(study) + (plan_md(study, pilot) if pilot else [])
    if fams:
        used = c.get("seeds_used") or []
        L += [f"Seeds {used[0]}-{used[-1]} ({len(used)}) on one CPU kind (cpu_capability "
              f"{(c.get('machine') or {}).get('cpu_capability')})." if used else "No seeds.", ""]
        L += families_md(fams)
        gate = (fams.get("cracks") or {}).get("gate")
        if gate:
            L += [f"The cracks gate (the extension extends): mean gain {f_(gate['effect'], '+.3g')} nats over "
                  f"{gate['n']} seeds, one-sided p {f_(gate['p'], '.2g')}: {'passed' if gate['passed'] else 'FAILED'}.", ""]
    if c.get("wall"):
        L += [f"Measured wall time of `CONFIRM=2 bash sweep.sh {study}`: {c['wall']['text']}.", ""]
    return L


def f_(x, spec):
    from studies.common import f
    return f(x, spec)


def with_section(readme, study, conf=None, pilot=None):
    """README text with its wave-2 section regenerated; None without the markers."""
    if W2_BEGIN not in readme or W2_END not in readme:
        return None
    head, rest = readme.split(W2_BEGIN, 1)
    return head + W2_BEGIN + "\n\n" + "\n".join(section(study, conf, pilot)) + "\n" + W2_END + rest.split(W2_END, 1)[1]
