"""
The claims ledger's data: every sentence of the seed abstracts that states a result, quoted exactly, in the
seeds' order, each split into the parts (findings) it states, each part with the confirmatory tests that decide
it ([wave, family, id] of studies/waves/*.toml) or why none does. EXCLUDED holds every other sentence (or part of
one) of the same abstracts with the reason it is out, so that the rule can be audited. Pure data: no imports.

A row: id; paper (a key of PAPERS, or "fragment"); quote (a verbatim substring of the abstract, whitespace
collapsed); tiny (the claim in this project's terms: outcome, cells, direction or margin, and what stands in
for what); parts (below); beside (tests shown in the row that do not decide it, each with why); prior_work (True
only for a claim the abstract attributes to earlier work); tests (every [wave, family, id] the row names, its
parts' and beside, derived); untestable (None, or, for a row no part of which has a test, why). The one row for a
paper the seeds only cite also carries cited=True and paraphrase=True (its quote is a paraphrase, not the paper's
words); on every other row both are absent, meaning False.

A part: label (which finding, in a few words); words (a verbatim sub-span of the quote: the finding's words);
tests (each {test, rests_on, superseded_by, why}); untested (None, or why no test decides it: a reason starting
"not in a confirmatory family" marks a part testable here but not tested, any other one a part that cannot be
tested here); stand_in (what stands in for the seed's bit-widths, sizes, lengths or benchmarks, or None);
at_least (None, or k: the part holds when k of its tests are confirmed, as "several" of cracks-8).
A test's rests_on names this project's assumption (a task order, a fixed step budget, a window that grows with
N, this project's ExPE values) or a baseline or direction the sentence does not state: a refutation that rests
on it leaves the part undecided, never refuted. superseded_by names the later tests that replace it (the
superseded test and why stay in the row, out of the status rule); a superseding test not yet run leaves the part
pending.
"""

RULE = ("A sentence of a seed abstract is in the ledger when it states an empirical or theoretical finding of "
        "the paper: what was measured, proved or shown (\"finds\", \"we show\", \"is falsified\", "
        "\"demonstrate\", \"achieves\", \"reduce perplexity\", \"generalizes\"), including a conclusion drawn "
        "from those findings. It is out when it is motivation or background, prior work described as such, a "
        "description of the method or of the experiments without a result, a design property that holds by "
        "construction, a statement of significance, practical advice, or a call to action (\"we release\"); the "
        "one exception is a prior result the abstract asserts as the premise it builds on and that this project "
        "tests (Huang et al.'s finite-threshold result in the length-generalisation bounds abstract), which is "
        "in and marked prior_work. A sentence holding several findings is split into several rows, each "
        "quoting its own exact sub-span, and a sentence's non-result part (a framing clause, a motivation) is "
        "listed in EXCLUDED; every quote is a verbatim substring of its abstract after collapsing whitespace. "
        "Within a row, each finding the quote states is a part, and each part is tested on the outcome its own "
        "words name (a 'schedule preference' on the loss, a 'penalty' on the penalty, 'the optimal warmdown' on "
        "which warmdown is best); a part no test decides says why: a proof rather than a measurement, a scale, "
        "system or benchmark the harness does not have, no measurable quantity stated, or a measurement that "
        "exists but is not in a confirmatory family. A later wave's test of a part supersedes an earlier one "
        "where it redoes it (a graded outcome for one at its floor, a design without the earlier one's "
        "assumption); the earlier test and the reason stay in the row.")

# Paper keys, in the seeds' order (the fragment has no paper).
PAPERS = {
    "qat": "the QAT learning-rate-schedule abstract (from-initialisation quantisation-aware training of sub-100M "
           "decoder language models: does the optimal schedule depend on bit-width?)",
    "lg-bounds": "the length-generalisation bounds abstract (quantitative bounds on the training length "
                 "required for length generalisation; builds on Huang et al. 2025)",
    "chunk": "the chunk-based sparse attention dissection (arXiv 2510.17196)",
    "expe": "Exact Positional Embeddings (ExPE)",
    "swan": "SWAN-GPT (arXiv 2504.08719)",
    "hope": "High-frequency rotary Position Encoding (HoPE)",
    "cracks": "Cracks in the Foundation: Seemingly Minor Architectural Choices Impact Long Context Extension "
              "(arXiv 2608.10296)",
    "nope": "The Impact of Positional Encoding on Length Generalization in Transformers (NoPE, arXiv 2305.19466; "
            "cited by the seeds, not a seed)",
}

# Where the margins of waves 1-2 come from (those waves declared their margins without a `source`; from wave 4 on
# every margin and sesoi is declared with its source, stored with the hypothesis, and the ledger reads it there).
# The rung's margins are its tiny tests'.
MARGIN_SOURCES = {
    "qat": "qat.QAT_MARGIN, declared before wave 1's runs: under half the pilot's smallest INT4 penalty (+0.023 at "
           "14K), the size of the FP16 warmdown moves the study reads",
    "grid_ratio": "the seed's 'essentially the same' distance (ratio ~ 1.04, ln 0.039) read as |ln ratio| < 0.1 "
                  "(ratio 0.905-1.105)",
    "minor": "wider than the seed's review's 'a point or two' of HELMET (about 4% of its best score), because a "
             "130-sample exact match has a binomial sd near 0.04",
    "short_loss": "the seed's own training-loss R^2 0.29, which it calls not predictive (its review, Section 3): "
                  "|r| < 0.539, atanh 0.602 in z",
}
SOURCE_OF = {(1, "qat", "null"): "qat", (1, "qat-probes", "adamw_null"): "qat", (1, "qat-probes", "long_null"): "qat",
             (2, "qat-w2", "int4_null_sizes"): "qat", (2, "qat-w2", "int3_null_sizes"): "qat",
             (2, "qat-w2", "law_fit"): "qat", (2, "qat-phase5", "law_heldout"): "qat",
             (2, "qat-phase5", "grid_ratio"): "grid_ratio", (2, "cracks", "minor"): "minor",
             (2, "cracks", "short_loss"): "short_loss"}

# What the project's assumptions are, in the words the rows use (a refutation resting on one leaves its part
# undecided).
FIXED_STEPS = ("this project's design, not the seed's: the steps held fixed across N (a longer N gets fewer examples "
               "per input length) and a test window N+1..2N that doubles with N")
GROWING_WINDOW = "this project's test window N+1..2N, which grows with N (the abstract names no evaluation lengths)"
N32_LARGEST = "this project's N = 32 as the largest training length: 'some finite threshold' may lie above it"
TASK_ORDER = ("this project's task order copy < sort < parity_scratch: the abstract names no tasks, so a failure "
              "refutes the order, not the seed")
EXPE_VALUES = ("this project's ExPE values (model.py: S + theta * n in the first 2 embedding dims, S = 1.0, theta = "
               "1 / block_size, unscaled), which nothing in the repository shows to be the paper's (arXiv 2509.19569)")
EXPE_DEFAULTS = ("model.py's ExPE, as every ExPE run here used it: S + theta * n written into the first expe_dims = 2 "
                 "dims of the token embedding (expe_on embed), S = expe_start = 1.0, theta = expe_slope = 0, read as "
                 "1 / block_size (the signal grows by 1 over the training length), no trained parameters, no rescaling "
                 "(the 2 dims carry 1-2 in training and up to 9 at 1024, against the embedding's 0.02 init rms; the "
                 "sinusoidal table was rescaled to that rms for this reason). The form matches the paper's abstract; "
                 "nothing in the repository says where 2, 1.0 and 1 / block_size come from, so they are not shown to be "
                 "the paper's values (arXiv 2509.19569), and every ExPE refutation here rests on them.")
STAND_IN_QAT = "INT4 and INT3 stand in for INT8 and INT6, whose tiny penalties are below seed noise"


def _t(wave, family, id, rests_on=None, superseded_by=(), why=None):
    return {"test": (wave, family, id), "rests_on": rests_on, "superseded_by": [tuple(x) for x in superseded_by],
            "why": why}


def _p(label, words, tests=(), untested=None, stand_in=None, at_least=None):
    return {"label": label, "words": words, "tests": [t if isinstance(t, dict) else _t(*t) for t in tests],
            "untested": untested, "stand_in": stand_in, "at_least": at_least}


def _row(id, paper, quote, tiny, parts=None, tests=(), untestable=None, prior_work=False, beside=(), stand_in=None):
    """A row; a row of one finding may give its tests (or why it has none) for one part spanning the quote."""
    parts = parts if parts is not None else [_p("the sentence", quote, tests, untestable, stand_in)]
    beside = [dict(_t(*b["test"]), why=b["why"]) for b in beside]
    named = [t["test"] for p in parts for t in p["tests"]] + [b["test"] for b in beside]
    named += [s for p in parts for t in p["tests"] for s in t["superseded_by"]]
    untested = [p["untested"] for p in parts if not p["tests"]]
    return {"id": id, "paper": paper, "quote": quote, "tiny": tiny, "parts": parts, "beside": beside,
            "tests": list(dict.fromkeys(named)), "prior_work": prior_work,
            "untestable": "; ".join(untested) if len(untested) == len(parts) else None}


def _sup(test, by, why, rests_on=None):
    return _t(*test, rests_on=rests_on, superseded_by=by, why=why)


# --- the tests the rows share ------------------------------------------------------------------------------------
_PENALTY_NOT_BEST = ("tests that the penalty does not depend on the warmdown, which holds whichever warmdown is "
                     "best; the words name which warmdown is best")
_BEST33 = [(5, "qat-sched", "best33")]
_OWN = [(5, "qat-sched", "int4_own_null")]
# the tiny sizes' training length: wave 5's small-size refutations rest on it, and the abstract states no budget
_BUDGET = ("every size trained at 20 tokens a non-embedding parameter, from 122 steps at 6K (189 at 10K, 272 at 14K) "
           "to 1085 at 55K (the abstract states no token budget; a short run may favour a long stay at the peak "
           "learning rate)")
_BELOW_50M = "6K-25K for the seed's sizes below 50M; " + _BUDGET
_QAT_NULL = [(1, "qat", "null"), (2, "qat-w2", "int4_null_sizes"), (2, "qat-w2", "int3_null_sizes")]
_QAT_INT4 = [(1, "qat", "int4_wd33")]
_OWN_NOT_PENALTY = ("tested the penalty (INT4 - FP16), not INT4's own loss, which 'schedule preference' names; stored "
                    "(wave 2, read descriptively): INT4's own loss prefers wd 0.1 at 14K (by 0.0077 nats, 15 of 16 "
                    "seeds) and wd 0.33 at 25K (by 0.012, 16 of 16)")

_LG5 = [(5, "lg-bounds", "rise_copy"), (5, "lg-bounds", "rise_sort"), (5, "lg-bounds", "rise_fixed")]
_LG_RISE = [
    _sup((2, "lg-bounds", "sort_rise"), _LG5, "steps held fixed across N: a longer N gets fewer examples per input "
         "length; wave 5 grows the steps with N and adds a test on the same lengths at both N", rests_on=FIXED_STEPS),
    _sup((2, "lg-bounds", "copy_rise"), _LG5, "its fall is the 1x step budget's alone (past-N exact match 0.235 at "
         "N = 8 to 0.073 at N = 32 at 1x; 0.254 to 0.268 at 2x), read on a window that doubles with N",
         rests_on=FIXED_STEPS),
    _sup((2, "lg-bounds", "sort_reaches"), _LG5, "reaching 0.9 by N = 32 is right-censored: a miss says nothing of a "
         "threshold above 32, so it could refute what the words do not say ('some finite threshold')",
         rests_on="this project's N = 32 as the largest training length: 'some finite threshold' may lie above it"),
    _t(5, "lg-bounds", "rise_copy", rests_on=GROWING_WINDOW + "; and " + N32_LARGEST),
    _t(5, "lg-bounds", "rise_sort", rests_on=GROWING_WINDOW + "; and " + N32_LARGEST),
    _t(5, "lg-bounds", "rise_fixed", rests_on=N32_LARGEST),
]
_LG_RICHER = [
    _sup((2, "lg-bounds", "richer"), [(5, "lg-bounds", "richer")], "averaged over the 1x step budget, at which copy "
         "collapsed (its fall is lg-bounds-1's fixed-budget artefact); wave 5 reads N = 32 at 4x the recipe",
         rests_on=TASK_ORDER),
    _t(5, "lg-bounds", "richer", rests_on=TASK_ORDER),
]

_CHUNK_WHY = ("wave 2's 600-step recipe learned passkey in 6 of 10 roots, leaving 6 seeds; wave 5 declared a rerun on a "
              "recipe whose full model learns it in at least 9 of 10 pilot roots, and its pilot struck it: no recipe "
              "within the budget learned in 9 of 10 (1200 steps: 2 of the first 4 roots; 1800: 0 of the first 2; "
              "each stopped once 9 of 10 was out of reach), so the row stays on this test, undecided for that reason")
_CHUNK_EXTRAP = [(1, "posenc", "chunk_text"), (1, "posenc", "chunk_passkey")]
_SWAN = [(1, "posenc", "swan_text"), (1, "posenc", "swan_passkey"), (2, "swan", "swan_tasks")]

_EXPE_ROPE_TEXT = _t(2, "expe", "expe_rope_text", rests_on=EXPE_VALUES)
_EXPE_SIN_TEXT = _t(2, "expe", "expe_sin_text", rests_on=EXPE_VALUES)
_EXPE_ROPE_TASKS = _t(2, "expe", "expe_rope_tasks", rests_on=EXPE_VALUES)
_EXPE_SIN_TASKS = _t(2, "expe", "expe_sin_tasks", rests_on=EXPE_VALUES)

_HOPE_TEXT = (2, "hope", "hope_text")
_HOPE_PASSKEY = _sup((2, "hope", "hope_passkey"), [(5, "hope", "passkey_rank")], "exact match near its floor past 128 "
                     "for both encodings (HoPE - RoPE +0.035): it could not show a difference of interest; wave 5 "
                     "grades retrieval by the rank credit")
_HOPE_RANK = (5, "hope", "passkey_rank")
_HOPE_EXTRAP = [_HOPE_TEXT, _HOPE_PASSKEY, _HOPE_RANK]
# wave 2's tasks test, beside the extrapolation rows: its exact match sat at the floor, and wave 5's graded twin was
# struck by its pilot, so by wave 5's declaration (pilot_p3) the rows rest on the rank credit and wave 2's text
_HOPE_TASKS_BESIDE = {"test": (2, "hope", "hope_tasks"), "why": (
    "exact match near its floor past N for both encodings (HoPE - RoPE -0.0026); wave 5's graded twin on the tasks "
    "(answer-token accuracy) was struck by its pilot (P3: sort's token accuracy past 16 sat below its floor), so, as "
    "wave 5 declared, the extrapolation part rests on the passkey rank credit and wave 2's text loss")}

_C4 = "cracks4-compound"
_CRACKS_W12 = ("ten cells (<= 1 or >= 3 features) confound 'three or more' with the short context (4 of 5 such cells "
               "pretrain at 64) and no test tested compounding itself; wave 1's outcome was the loss at 512, wave 2's "
               "passkey exact match was bimodal by root; wave 4 runs all 16 cells on a graded outcome")
_C4_TESTS = [(4, _C4, "compound"), (4, _C4, "compound_arch"), (4, _C4, "count_slope")]
_CRACKS_COMPOUND = [_sup(t, _C4_TESTS, _CRACKS_W12)
                    for t in ((1, "longctx", "compound"), (1, "longctx", "count_slope"), (2, "cracks", "compound"),
                              (2, "cracks", "count_slope"))] + _C4_TESTS
_DROP = [(4, "cracks4-drop", "drop"), (4, "cracks4-drop", "drop3"), (4, "cracks4-drop", "drop_exact")]
_CRACKS_SCALE = ("the seed extends 7B models from 4K/8K to 32K and scores HELMET (its review); the tiny grid extends "
                 "from 64/128 to 512 and scores the passkey answer's log-likelihood at 512 (wave 4; waves 1 and 2: the "
                 "loss and passkey exact match at 512)")


CLAIMS = [
    # --- qat -------------------------------------------------------------------------------------------------
    _row("qat-1", "qat",
         "A 720-run factorial grid (Phase 2) over bit-width x warmdown fraction x LR magnitude x model size x seed "
         "(FP16/INT8/INT6, 15M-100M, 5 seeds) finds the optimal warmdown is 33% at every (bit-width, size) cell.",
         "Which warmdown gives the lowest deployed val loss (LR 1, Muon + WSD): at each of FP16 and INT3 x 14K, 25K, "
         "39K, wd 0.33 beats wd 0.1 and wd 0.6 (wave 5, best33, 12 contrasts, sesoi 0.01 nats). Waves 1 and 2 tested that "
         "the penalty does not depend on the warmdown (qat-2), which holds whichever warmdown is best. Stored, read "
         "descriptively (wave 2, not a test): wd 0.1 is best at 14K for FP16, INT4 and INT3 (INT4 3.6285 against "
         "3.6362 at wd 0.33, 15 of 16 seeds). The seed's LR magnitude axis is held at LR 1.",
         [_p("which warmdown is best, in every cell", "finds the optimal warmdown is 33% at every (bit-width, size) cell",
             [_sup(t, _BEST33, _PENALTY_NOT_BEST) for t in _QAT_NULL] + _BEST33,
             stand_in="INT3 stands in for INT6 (INT8 has no stand-in: its tiny penalty is below seed noise); 14K-39K "
                      "for the seed's 15M-100M; " + _BUDGET)]),
    _row("qat-2", "qat",
         "The primary hypothesis -- that INT6 QAT requires a different schedule than higher-precision training -- "
         "is falsified at FP16/INT8/INT6.",
         "Quantised training needs no different warmdown than FP16: the penalty (INT4 or INT3 minus FP16) moves by "
         "less than +-0.01 nats across warmdowns 0.1, 0.33 and 0.6, INT4 at 39K (wave 1) and INT4 and INT3 at 14K, "
         "25K, 39K (wave 2): no bits x warmdown interaction, so the best warmdown is FP16's at every bit-width.",
         tests=_QAT_NULL, stand_in=STAND_IN_QAT),
    _row("qat-3", "qat",
         "The null is robust under all three setup changes.",
         "The penalty is the same across warmdowns within +-0.01 nats under each change: AdamW (INT3 at 25K) and 3x "
         "the steps (INT3 at 14K; the seed's up to 9x), wave 1; the cosine shape, which has no warmdown axis: the "
         "penalty (INT3) at 25K is the same under cosine as under WSD at wd 0.33 (wave 5, cosine_null).",
         [_p("the optimiser change (AdamW)", "The null is robust under all three setup changes.",
             [(1, "qat-probes", "adamw_null")], stand_in=STAND_IN_QAT),
          _p("the training-length change (3x; the seed's up to 9x)", "The null is robust under all three setup changes.",
             [(1, "qat-probes", "long_null")], stand_in=STAND_IN_QAT + "; 3x the steps for the seed's up to 9x"),
          _p("the schedule-shape change (cosine)", "The null is robust under all three setup changes.",
             [(5, "qat-sched", "cosine_null")], stand_in="INT3 stands in for INT6 (INT8 has no stand-in)")]),
    _row("qat-4", "qat",
         "The INT6 penalty follows a log-linear scaling law",
         "The INT3 penalty (minus FP16) at warmdown 0.33 follows alpha + beta ln N over 6K-55K with a slope: the lack "
         "of fit of the size means about the line, as an rms departure, is below 0.01 nats, decided both ways, and the "
         "slope's 95% interval excludes 0 (a flat penalty is no scaling law: undecided) (wave 5, law_lof). "
         "Wave 2 tested each size's departure as its own equivalence and stayed undecided.",
         tests=[_sup((2, "qat-w2", "law_fit"), [(5, "qat-law", "law_lof")], "five correlated per-size residuals on 3 "
                     "dof, each its own equivalence, could not decide; 'follows a law' is a lack-of-fit question, which "
                     "law_lof decides both ways"), (5, "qat-law", "law_lof")],
         stand_in="INT3 stands in for INT6, whose tiny penalty is below seed noise (INT4's penalty is flat over the "
                  "tiny sizes); 6K-55K for 5M-350M"),
    _row("qat-5", "qat",
         "whose fit on Phase 2 predicts the five held-out Phase 5 sizes (5M, 8M, 175M, 250M, 350M) within their 95% "
         "prediction intervals (5/5)",
         "The seed's own criterion: the INT3 penalty law fitted on the seed means at 10K-39K (four sizes, as Phase 2) "
         "puts the held-out 6K and 55K inside their 95% prediction intervals (wave 5, law_pi: outside refutes, "
         "inside intervals at most +-0.01 wide confirms). Wave 2 used an equivalence in place of the intervals.",
         tests=[_sup((2, "qat-phase5", "law_heldout"), [(5, "qat-law", "law_pi")], "an equivalence of the mean "
                     "departure in place of the seed's own criterion, the 95% prediction intervals"),
                (5, "qat-law", "law_pi")],
         stand_in="INT3 stands in for INT6; 10K-39K for Phase 2's 15M-100M; two held-out sizes, 6K below and 55K above, "
                  "for Phase 5's five"),
    _row("qat-6a", "qat",
         "For INT4 the picture is sharper than the higher precisions",
         "INT4 at 39K: wd 0.33's gain over wd 0.1 is larger than FP16's (wave 2, int4_transition, declared without a "
         "smallest effect of interest: it can confirm or stay undecided, never refute; its interval [-0.0045, "
         "+0.0009] lies inside +-0.01). Wave 5 declared and then dropped the same contrast with a sesoi of 0.01 "
         "(int4_sharper): it is the penalty at wd 0.1 minus at wd 0.33, which qat-2's null already holds within "
         "+-0.01 at INT4 39K, and the seed's own 'sharper' is a paired z across bit-widths (12-15 at 50M/100M), which "
         "the tiny grid's unequal quantisation noise would decide by the noise. The row stays on wave 2's test.",
         tests=[(2, "qat-w2", "int4_transition")],
         stand_in="FP16 for 'the higher precisions' (FP16/INT8/INT6); 39K for the seed's 50M/100M"),
    _row("qat-6", "qat",
         "at 50M and 100M, wd33 is decisively optimal (paired z ~ 12-15, 10/10 seeds)",
         "INT4 at 39K (the tiny grid's largest size, standing for 50M/100M): warmdown 0.33 gives a lower deployed "
         "val loss than 0.1 (wave 1; the seed's INT4 sweep compares wd33 with wd10). Stored (wave 2): wd 0.33 is "
         "also INT4's best warmdown of the three at 39K.",
         tests=_QAT_INT4, stand_in="39K for the seed's 50M and 100M (INT4 is the seed's own bit-width)"),
    _row("qat-7", "qat",
         "below 50M, across the six tested sizes from 3M to 30M, no individual size shows a statistically "
         "significant schedule preference and the per-size mean penalty oscillates within seed-level noise",
         "Two findings. The schedule preference, on the loss itself: INT4's own deployed val loss at wd 0.1 is the "
         "same as at wd 0.33 within +-0.01 nats at 6K, 10K, 14K and 25K (wave 5, int4_own_null). The penalty: INT4's "
         "penalty is the same at wd 0.1 and 0.6 as at 0.33 within +-0.01 at 14K and 25K (wave 2). 39K stands for the "
         "seed's 50M/100M (qat-6).",
         [_p("no schedule preference at any size (the loss)",
             "no individual size shows a statistically significant schedule preference",
             [_sup((2, "qat-w2", "int4_null_sizes"), _OWN, _OWN_NOT_PENALTY)] + _OWN,
             stand_in="6K-25K for the seed's six sizes 3M-30M (INT4 is the seed's own bit-width); " + _BUDGET),
          _p("the penalty within seed noise", "the per-size mean penalty oscillates within seed-level noise",
             [(2, "qat-w2", "int4_null_sizes")], stand_in="14K and 25K for the seed's 3M-30M")]),
    _row("qat-8", "qat",
         "The boundary is therefore a transition between a noise-dominated regime below 50M and a decisive wd33 "
         "regime at and above 50M, not a clean wd10 region.",
         "Below '50M' (6K-25K) INT4's own loss shows no warmdown preference of 0.01 nats or more, either way (wave "
         "5, int4_own_null, qat-7's test), and wd 0.1 does not beat wd 0.33 by 0.01 or more at any size there (wave "
         "5, no_wd10: 'not a clean wd10 region', one-sided); at 39K wd 0.33 beats wd 0.1 (wave 1, as qat-6). Where "
         "the transition lies is not tested: no size between 25K and 39K.",
         [_p("a noise-dominated regime below 50M", "a noise-dominated regime below 50M",
             [_sup((2, "qat-w2", "int4_null_sizes"), _OWN, _OWN_NOT_PENALTY)] + _OWN,
             stand_in=_BELOW_50M),
          _p("a decisive wd33 regime at and above 50M", "a decisive wd33 regime at and above 50M", _QAT_INT4,
             stand_in="39K for the seed's 50M and 100M"),
          _p("not a clean wd10 region", "not a clean wd10 region",
             [_sup((2, "qat-w2", "int4_null_sizes"), [(5, "qat-sched", "no_wd10")], _OWN_NOT_PENALTY),
              (5, "qat-sched", "no_wd10")], stand_in=_BELOW_50M),
          _p("a transition (where it lies)", "The boundary is therefore a transition",
             untested="not in a confirmatory family: no size between 25K and 39K is run, and no declared test locates "
                      "a change point")]),
    _row("qat-9", "qat",
         "A weight-to-grid-distance probe falsifies the simplest mechanism for the FP16/INT8/INT6 null result "
         "(rapid grid-snapping): pre-warmdown, INT6-QAT weights sit at essentially the same distance from the INT6 "
         "grid as FP16 weights (ratio ~ 1.04).",
         "At 39K, at the warmdown checkpoint of the wd 0.33 runs, INT4-QAT weights sit at the same mean distance "
         "from the INT4 grid as FP16 weights: ln(d_QAT / d_FP16) within +-0.1 (ratio 0.905-1.105); the "
         "mechanism's falsification follows from it.",
         tests=[(2, "qat-phase5", "grid_ratio")], stand_in="INT4 stands in for INT6; 39K for 15M-100M"),

    # --- lg-bounds ---------------------------------------------------------------------------------------------
    _row("lg-bounds-1", "lg-bounds",
         "Prior work by Huang et al. (2025) established that transformers eventually achieve length generalization "
         "once the training sequence length exceeds some finite threshold",
         "NoPE copy and sort: exact match on N+1..2N rises from N = 8 to N = 32 with the steps grown with N (N = 8 at "
         "1x the recipe, N = 32 at 4x: wave 5's pilot), per task; and on the same lengths 33-64 at both N, pooled "
         "(wave 5). A rise is what a threshold at or below N = 32 predicts, and so does a gradual gain with N: it is "
         "consistent with the claim and does not locate the threshold, and 'eventually' cannot be refuted on a "
         "finite grid of N. Wave 2 "
         "held the steps fixed across N: copy's fall there is its 1x budget's, and a window that doubles with N "
         "makes the test harder at the larger N; the row rests on no refutation made under those assumptions. The "
         "tasks and NoPE are this project's choice.",
         [_p("past-N exact match rises with the training length",
             "once the training sequence length exceeds some finite threshold", _LG_RISE),
          _p("length generalisation achieved past the threshold", "transformers eventually achieve length generalization",
             untested="not in a confirmatory family: no declared test reads whether a model past the threshold "
                      "generalises (a criterion past N at the largest N), and N = 8 and 32 alone cannot tell a "
                      "threshold from a gradual gain; read descriptively (wave 5, N = 32 at 4x): sort's exact match "
                      "on 33-64 is 0.961, copy's 0.426")], prior_work=True),
    _row("lg-bounds-2", "lg-bounds",
         "In this work, we provide the first quantitative bounds on the required training length for length "
         "generalization to occur.",
         "None as a measurement: the tiny grid measures whether past-N exact match rises with N (lg-bounds-1), "
         "not a bound on N.",
         untestable="a theoretical result (bounds proved, with a priority claim, 'first'), not a measurement; its "
                    "empirical counterpart is lg-bounds-5"),
    _row("lg-bounds-3", "lg-bounds",
         "In all scenarios, we prove that LG occurs when the internal behavior of the transformer on longer "
         "sequences can be \"simulated\" by its behavior on shorter sequences seen during training.",
         "None as a measurement: it would need a probe of whether a model's internal computation at length L is "
         "reproduced at the training lengths.",
         untestable="a theorem, not a measurement, and the harness has no probe of 'simulation' of internal "
                    "behaviour across lengths; its empirical counterpart is lg-bounds-5"),
    _row("lg-bounds-4", "lg-bounds",
         "Our bounds give qualitative estimates for the length of training data required for a transformer to "
         "generalize",
         "None as a measurement: the bounds' estimates are not computed for the tiny tasks; the direction they "
         "predict (longer N, better past-N score) is lg-bounds-1.",
         untestable="a property of the proved bounds, not a measurement; its empirical counterpart is lg-bounds-5"),
    _row("lg-bounds-5", "lg-bounds",
         "we verify these insights empirically",
         "The insights this project can measure: the finite threshold (lg-bounds-1's tests) and richer data for "
         "more complex tasks (lg-bounds-6's test, which rests on this project's task order); the bounds' own "
         "estimates are not computed for the tiny tasks.",
         [_p("the finite threshold's prediction: a rise with N", "we verify these insights empirically", _LG_RISE),
          _p("richer data for more complex tasks", "we verify these insights empirically", _LG_RICHER),
          _p("the bounds' quantitative estimates", "we verify these insights empirically",
             untested="the bounds are proved, not computed, and not for the tiny tasks (lg-bounds-2 to -4)")]),
    _row("lg-bounds-6", "lg-bounds",
         "formalize the intuition that richer training data is required for generalization on more complex tasks",
         "At N = 32 and 4x each task's recipe (NoPE; wave 5's pilot), copy's exact match on 33-64 exceeds sort's (wave 5): the "
         "simpler task in this project's order copy < sort < parity_scratch is the one past its threshold. The "
         "abstract names no tasks: a failure refutes the order, not the seed, and leaves the row undecided.",
         tests=_LG_RICHER),

    # --- chunk (arXiv 2510.17196) ----------------------------------------------------------------------------
    _row("chunk-1", "chunk",
         "we demonstrate that a combination of three design principles is critical: (1) an expressive, non-linear "
         "Chunk Encoder with a dedicated CLS token to produce representations for retrieval",
         "Passkey trained at 128: the chunk model with a linear chunk encoder without CLS scores a lower exact "
         "match at 256, 512, 1024 than the full chunk model (wave 2). Wave 5's rerun on a recipe the full model "
         "learns was struck by its pilot: none within the budget learned in 9 of 10 roots. Each principle is removed "
         "alone; 'to produce "
         "representations for retrieval' is what the encoder is built for.",
         tests=[_t(2, "chunk", "chunk_linear", why=_CHUNK_WHY)],
         stand_in="passkey at 8x (128 to 1,024) for RULER and BABILong at 8,000x"),
    _row("chunk-2", "chunk",
         "(2) a Bypassing Residual Path to stably integrate retrieved global information without it being "
         "overridden by the local residual stream",
         "Passkey trained at 128: the chunk model without the bypassing residual path (retrieval fused into the "
         "residual stream) scores a lower exact match at 256-1024 than the full chunk model (wave 2; wave 5's rerun "
         "was struck by its pilot, as chunk-1). The mechanism (the retrieved information overridden) is not measured.",
         [_p("the bypass is critical", "(2) a Bypassing Residual Path",
             [_t(2, "chunk", "chunk_fused", why=_CHUNK_WHY)],
             stand_in="passkey at 8x for RULER and BABILong at 8,000x"),
          _p("its mechanism", "to stably integrate retrieved global information without it being overridden by the "
             "local residual stream",
             untested="no probe here measures whether the retrieved information is overridden by the residual stream")]),
    _row("chunk-3", "chunk",
         "(3) enforced selection sparsity during pre-training to bridge the train-test distribution gap",
         "Passkey trained at 128: the chunk model trained with dense retrieval (no enforced selection sparsity) "
         "scores a lower exact match at 256-1024 than the full chunk model (wave 2; wave 5's rerun was struck by its "
         "pilot, as chunk-1). The train-test distribution gap it bridges is not measured.",
         [_p("sparse selection in training is critical", "(3) enforced selection sparsity during pre-training",
             [_t(2, "chunk", "chunk_dense", why=_CHUNK_WHY)],
             stand_in="passkey at 8x for RULER and BABILong at 8,000x"),
          _p("its mechanism", "to bridge the train-test distribution gap",
             untested="no measure here of the train-test distribution gap the sparsity is said to bridge")]),
    _row("chunk-4", "chunk",
         "By combining these principles, we establish a new state-of-the-art for training-free length extrapolation",
         "None: a ranking against other published systems has no tiny counterpart.",
         untestable="a ranking against other systems' published numbers on RULER and BABILong; the harness has "
                    "neither benchmark and compares chunk attention only with the RoPE and SWAN models it trains "
                    "itself (chunk-5)"),
    _row("chunk-5", "chunk",
         "successfully generalizing models trained on a 4K context to 32 million tokens on RULER and BABILong",
         "Trained at 128 and evaluated at 256, 512, 1024: chunk attention's mean text loss is below RoPE's and its "
         "passkey exact match above RoPE's.",
         tests=_CHUNK_EXTRAP, stand_in="8x (128 to 1,024) for the seed's 8,000x (4K to 32M); text loss and passkey "
                                       "for RULER and BABILong"),

    # --- expe ------------------------------------------------------------------------------------------------
    _row("expe-1", "expe",
         "An absolute positional embedding method that can extrapolate to sequences of lengths longer than the ones "
         "it was trained on.",
         "The sentence states a capability and names no baseline; this project reads 'can extrapolate' as beating "
         "RoPE (which does not) past the training length: copy/sort exact match on 17-48 (trained on 1-16) and text "
         "loss at 256-1024 (trained at 128). ExPE passes on the tasks (+0.112) and loses on text, a loss that rests "
         "on this project's ExPE values (not shown to be the paper's). Its one refutation on the tasks is against "
         "sinusoidal, a baseline this sentence does not name (expe-3's names it, for perplexity): shown beside, it "
         "does not count here. " + EXPE_DEFAULTS,
         tests=[_EXPE_ROPE_TASKS, _EXPE_ROPE_TEXT],
         beside=[{"test": (2, "expe", "expe_sin_tasks"), "why": "refuted against sinusoidal on the tasks: a baseline "
                  "this sentence does not name (expe-3's names it, for perplexity), so it does not count for this row"}]),
    _row("expe-2", "expe",
         "enhances the model's ability to generalize to more extended sequences",
         "ExPE beats the embeddings the abstract compares it with (rotary and sinusoidal, expe-3) past the training "
         "length: a lower mean text loss at 256-1024 (trained at 128) and a higher copy/sort exact match on 17-48 "
         "(trained on 1-16). Its refutations rest on this project's ExPE values (expe-1 says which), which nothing "
         "shows to be the paper's.",
         tests=[_EXPE_ROPE_TEXT, _EXPE_SIN_TEXT, _EXPE_ROPE_TASKS, _EXPE_SIN_TASKS]),
    _row("expe-3", "expe",
         "In causal language modeling, our ExPE embeddings significantly reduce perplexity compared to rotary and "
         "sinusoidal embeddings, when tested on sequences longer than those used in training.",
         "Text trained at 128: ExPE's mean val loss at 256, 512, 1024 is below RoPE's and below sinusoidal's. ExPE "
         "loses to both, on this project's ExPE values (2 dims, S = 1, theta = 1 / block_size, unscaled against the "
         "embedding's 0.02 rms), which nothing in the repository shows to be the paper's: the refutation rests on "
         "them.",
         tests=[_EXPE_ROPE_TEXT, _EXPE_SIN_TEXT]),

    # --- swan (arXiv 2504.08719) -----------------------------------------------------------------------------
    _row("swan-1", "swan",
         "We present a decoder-only Transformer architecture that robustly generalizes to sequence lengths "
         "substantially longer than those seen during training.",
         "SWAN (windowed RoPE layers, every 2nd layer global NoPE) against RoPE: lower mean text loss and higher "
         "passkey exact match at 256-1024 (trained at 128; SWAN evaluated with log-n scaling, RoPE without), higher "
         "copy/sort exact match on 17-48 (trained on 1-16; no log-n scaling).",
         tests=_SWAN, stand_in="8x (128 to 1,024) for 'substantially longer'"),
    _row("swan-2", "swan",
         "Experiments demonstrate strong performance on sequence lengths significantly longer than the training "
         "length without the need for additional long-context training.",
         "As swan-1, with no training past the training length: SWAN beats RoPE at 256-1024 on text loss and "
         "passkey, and on copy/sort past length 16.",
         tests=_SWAN, stand_in="8x for 'significantly longer'"),
    _row("swan-3", "swan",
         "This robust length extrapolation is achieved through our novel architecture",
         "The architecture's share: on copy/sort (wave 2, no log-n scaling) the architecture alone; on text and "
         "passkey (wave 1) SWAN is evaluated with log-n scaling and RoPE without, so those tests measure the "
         "architecture and the scaling together.",
         tests=_SWAN),
    _row("swan-4", "swan",
         "enhanced by a straightforward dynamic scaling of attention scores during inference",
         "One SWAN checkpoint evaluated with and without log-n scaling: a lower text loss and a higher passkey answer "
         "log-probability past 128 with it (wave 5; an effect inside +-0.05 refutes 'enhanced').",
         tests=[(5, "swan", "logn_text"), (5, "swan", "logn_passkey")],
         stand_in="a 0.1M model trained at 128 and read at 256-1024 for the seed's models and lengths; the sesoi "
                  "(0.05) is the study's margin, many times the pilot's log-n effects"),
    _row("swan-5", "swan",
         "In addition, SWAN-GPT is more computationally efficient than standard GPT architectures, resulting in "
         "cheaper training and higher throughput.",
         "SWAN trains and evaluates faster per token than RoPE at equal size and length.",
         untestable="a throughput claim no hypothesis times: the harness's sliding window is a blocked band kernel "
                    "(model.band_attention: O(T x W) scores through a boolean-masked SDPA call, while full causal "
                    "attention takes the unmasked fused kernel), and at the tiny lengths (128, windows of 32) "
                    "attention is a small share of a step on a shared 2-core CPU, so a timing would measure the "
                    "kernels and the machine, not the architecture's efficiency at the seed's lengths"),
    _row("swan-6", "swan",
         "Further, we demonstrate that existing pre-trained decoder-only models can be efficiently converted to "
         "the SWAN architecture with minimal continued training, enabling longer contexts.",
         "A trained RoPE run converted by extend.py --method swan and trained on for 60 steps (20% of its 300: wave "
         "5's pilot) has a lower mean text loss at 256-1024 than the same parent trained on for the same 60 steps "
         "unconverted (wave 5). The parent is this project's own tiny model, not an existing pre-trained one.",
         tests=[_t(5, "swan", "convert", rests_on="this project's stand-ins: its own tiny RoPE model (300 steps at "
                   "128) for an existing pre-trained one, and 60 steps (the pilot's 20%) for 'minimal continued "
                   "training', which the abstract does not quantify")]),

    # --- hope ------------------------------------------------------------------------------------------------
    _row("hope-1", "hope",
         "Firstly, we present empirical analyses on various PEs, demonstrating that models inherently learn "
         "attention with only a local-decay pattern while forming a U-shape pattern globally, contradicting the "
         "principle of long-term decay.",
         "RoPE's text run at its training length 128, attention-by-distance probe on 16 windows, each distance "
         "bucket's mean weight over uniform causal attention's: a local decay, D = ln(distance 1 / the smallest "
         "middle bucket) > 0, and a global U, U = ln(the farthest bucket / the same minimum) > 0, both (wave 5, "
         "u_shape). The other PEs are reported beside, not tested.",
         [_p("a local decay and a U-shape globally",
             "attention with only a local-decay pattern while forming a U-shape pattern globally",
             [(5, "hope", "u_shape")],
             stand_in="RoPE for 'various PEs'; attention measured against uniform causal attention's")]),
    _row("hope-2", "hope",
         "found that the U-shape attention is caused by some learned components",
         "Through the seed's own intervention: HoPE, whose low-frequency components are position-independent, has a "
         "smaller U than RoPE at 128 (wave 5, u_cause). No post-hoc ablation of a trained RoPE model's components.",
         tests=[_t(5, "hope", "u_cause", rests_on="this project's inference that HoPE's position-independent "
                   "components remove the cause the seed names: a HoPE model trained from scratch may learn other "
                   "attention, so a larger U under HoPE does not show that RoPE's components do not cause RoPE's U")]),
    _row("hope-3", "hope",
         "which are also the key factor limiting RoPE's expressiveness and extrapolation",
         "Only through the intervention: HoPE, which leaves those components unrotated, extrapolates better than "
         "RoPE: lower text loss at 256-1024 (wave 2) and a higher passkey rank credit past 128 (wave 5, in place of "
         "wave 2's exact matches at their floor; its twin on the tasks, answer-token accuracy, was struck by wave 5's "
         "pilot: sort's token accuracy sat below its floor). Expressiveness has no measure here.",
         [_p("extrapolation", "which are also the key factor limiting RoPE's expressiveness and extrapolation",
             _HOPE_EXTRAP),
          _p("expressiveness", "which are also the key factor limiting RoPE's expressiveness and extrapolation",
             untested="no measure of expressiveness in this harness")], beside=[_HOPE_TASKS_BESIDE]),
    _row("hope-4", "hope",
         "HoPE achieves two major advantages: (1) Without constraints imposed by long-term decay, contradictory "
         "factors that limit spontaneous attention optimization and model extrapolation performance are removed.",
         "Only its consequence for extrapolation, as hope-3; 'spontaneous attention optimization' has no measure "
         "here.",
         [_p("model extrapolation performance", "model extrapolation performance", _HOPE_EXTRAP),
          _p("spontaneous attention optimization", "spontaneous attention optimization",
             untested="no measure of 'spontaneous attention optimization' in this harness")], beside=[_HOPE_TASKS_BESIDE]),
    _row("hope-5", "hope",
         "(2) Components representing positions and semantics are are optimized.",
         "None: no quantity to measure.",
         untestable="states no measurable quantity: the abstract does not say which components represent positions "
                    "or semantics, nor what 'optimized' is measured by"),
    _row("hope-6", "hope",
         "These enhances model's context awareness and extrapolation, as validated by extensive experiments.",
         "HoPE against RoPE (trained at 128, or on 1-16 for the tasks): context awareness as retrieval, a higher "
         "passkey rank credit past 128 (wave 5); extrapolation as a lower text loss at 256-1024 (wave 2) and the rank "
         "credit (wave 5; the tasks' answer-token accuracy was struck by its pilot, as hope-3).",
         [_p("context awareness", "These enhances model's context awareness", [_HOPE_PASSKEY, _HOPE_RANK]),
          _p("extrapolation", "extrapolation", [_HOPE_TEXT, _HOPE_RANK])], beside=[_HOPE_TASKS_BESIDE]),

    # --- cracks (arXiv 2608.10296) ---------------------------------------------------------------------------
    _row("cracks-1", "cracks",
         "However, we demonstrate that this is not the case in the long context setting.",
         "Architecture matters for extension: over the full 2^4 factorial of QK-norm, GQA, SWA and the short "
         "pretraining context, the features compound (a cell's cost above the sum of its features' single costs, over "
         "the cells with three or more and, inside each context, for QK-norm, GQA and SWA together) and the outcome "
         "falls with the feature count (wave 4); " + _CRACKS_SCALE + ".",
         tests=_CRACKS_COMPOUND),
    _row("cracks-2", "cracks",
         "Specifically, we show that a set of four minor architectural decisions --- all made by at least one of "
         "the Olmo, Llama, and Qwen dense model families --- have a compoundingly negative effect on long context "
         "extensibility.",
         "Over the 16 cells extended with NTK from 64/128 to 512: a cell with three or more features costs more than "
         "the sum of its single features' costs, and the outcome falls with the count (wave 4); the seed's ratio "
         "is 4K/8K to 32K and its outcome HELMET (its review).",
         tests=_CRACKS_COMPOUND),
    _row("cracks-3", "cracks",
         "Any one of these choices alone has a minor impact on long context performance",
         "Each single-feature cell's outcome at 512 after the extension is within +-minor of the no-feature cell's, "
         "minor being 2 / 26.5 of the pilot's best-to-worst spread (the seed's review: a single feature costs 'a point "
         "or two' of HELMET against a 26.5-point spread), wave 4.",
         tests=[_sup((2, "cracks", "minor"), [(4, "cracks4-minor", "minor")], "a margin of 0.10 exact match, wider "
                     "than the review's 'a point or two' allows, on an outcome bimodal by root; wave 4 takes the margin "
                     "from the review's own ratio"), (4, "cracks4-minor", "minor")]),
    _row("cracks-4", "cracks",
         "combining three or more can drop the performance downstream by up to 47%",
         "The declared worst cell (all four features), and the mean of the four three-feature cells, score below the "
         "declared best (none) at 512, on the answer log-likelihood and (all four) on exact match (wave 4); the relative drop on exact match is reported beside the "
         "seed's 47% (HELMET at 32K from 4K/8K in its review; passkey at 512 from 64/128 here), not tested.",
         [_p("combining three or more can drop the performance", "combining three or more can drop the performance "
             "downstream", [_sup(t, _DROP, _CRACKS_W12) for t in ((1, "longctx", "compound"), (1, "longctx", "count_slope"),
                                                                   (2, "cracks", "compound"), (2, "cracks", "count_slope"))]
             + _DROP),
          _p("by up to 47%", "by up to 47%",
             untested="not in a confirmatory family: drop_exact reports the relative drop with its interval beside the "
                      "seed's 47%, and no declared test decides it")]),
    _row("cracks-5", "cracks",
         "Furthermore, these differences are not detectable from short-context loss or validation datasets.",
         "Within each pretraining context, the root's validation loss at its pretraining length does not predict the "
         "outcome at 512 after the extension: |within-context r| < 0.539 (the seed's review: R^2 0.29 is 'not "
         "predictive'), wave 4. The harness has one validation split, so one measure stands for both parts.",
         [_p("short-context loss", "not detectable from short-context loss",
             [_sup((2, "cracks", "short_loss"), [(4, "cracks4-short", "short_loss")], "ten cells and passkey exact "
                   "match, bimodal by root; wave 4: 16 cells, a graded outcome"), (4, "cracks4-short", "short_loss")]),
          _p("validation datasets", "validation datasets", [(4, "cracks4-short", "short_loss")],
             stand_in="the one validation split (text, at the pretraining length) for the seed's validation datasets")]),
    _row("cracks-6", "cracks",
         "We show that much of the variation in long context ability across model families is driven by these "
         "architectural features",
         "None: the tiny grid has its own factorial cells, not model families.",
         untestable="a claim about real model families (Olmo, Llama, Qwen at 7B and their long-context scores); "
                    "the tiny grid has no model families to explain"),
    _row("cracks-7", "cracks",
         "detectable from applying context extension early in pretraining",
         "The main recipe applied to the 0.75 checkpoint of every root orders the cells as the final extension does: "
         "a positive within-context rank correlation (wave 4; the seed's early checkpoints are earlier).",
         tests=[(4, "cracks4-early", "early_rank")]),
    _row("cracks-8", "cracks",
         "This pool includes several architectures that outperform the Llama 3 architecture on long context "
         "extensibility.",
         "Llama 3's feature set is the GQA-only cell at the long context; 'several' = at least two of the three cells "
         "with at most one feature, none of them GQA, at the long context (0000, 1000, 0010) score above it at 512 "
         "after the extension (wave 4, declared before the runs); refuted when two or more are refuted.",
         [_p("several architectures outperform Llama 3's", "several architectures that outperform the Llama 3 "
             "architecture", [(4, "cracks4-llama", f"beats_llama_{c}") for c in ("0000", "1000", "0010")],
             at_least=2)]),
    _row("cracks-9", "cracks",
         "In an analysis of our ablation models, we identify patterns in attention sink behavior and attention "
         "distributions across context that are attributable to specific architectural differences.",
         "QK-norm changes the roots' attention-sink strength and their attention entropy at the pretraining length "
         "(wave 4). The declared directions (QK-norm lowers the sink: the seed's review; QK-norm raises the entropy: "
         "this project's reading) are not the sentence's, which names none: a pass the other way refutes only the "
         "direction.",
         [_p("attention sink behaviour attributable to an architectural feature", "patterns in attention sink behavior",
             [_t(4, "cracks4-sinks", "qk_sink", rests_on="the review's direction (QK-norm lowers the sink); the "
                 "sentence names no direction")]),
          _p("attention distributions attributable to an architectural feature", "attention distributions across context",
             [_t(4, "cracks4-attention", "qk_entropy", rests_on="this project's direction (QK-norm flattens attention); "
                 "the sentence names no direction")])],
         beside=[{"test": (4, "cracks4-sinks", "sink_predicts"), "why": "the review's association of sink strength "
                  "with long-context performance, not this sentence's finding"}]),

    # --- nope: cited by the seeds, not a seed ------------------------------------------------------------------
    dict(_row("nope-1", "nope",
              "NoPE outperforms explicit position encodings, RoPE among them, at length generalisation on reasoning "
              "tasks",
              "Copy, sort and parity_scratch trained on lengths 1-16 (each learned in distribution): NoPE's exact "
              "match on 17-48 is higher than RoPE's, per task.",
              tests=[(1, "lengen", "copy_nope"), (1, "lengen", "sort_nope"), (1, "lengen", "parity_scratch_nope")]),
         cited=True, paraphrase=True),
]

EXCLUDED = [
    {"paper": "fragment", "quote": "LLMs sharply declines beyond their max training lengths.",
     "why": "a fragment of an abstract, attached to no paper, restating background (long-context decline)"},
    {"paper": "qat",
     "quote": "We test whether the optimal learning-rate schedule depends on bit-width during from-initialisation "
              "quantisation-aware training (QAT) for sub-100M decoder language models.",
     "why": "the study's question, no result"},
    {"paper": "qat",
     "quote": "A 625-run follow-up (Phase 5) probes the null along five axes: optimiser (AdamW), schedule shape "
              "(cosine), training length (up to 9x more iterations), an extended size sweep (5M-350M), and an INT4 "
              "sweep from 3M to 100M.",
     "why": "method: the follow-up's design; its results are qat-3 to qat-8"},
    {"paper": "qat",
     "quote": "Practical recommendation: at sub-100M scale, tune the LR schedule once at FP16 and apply unchanged to "
              "INT8/INT6 QAT; for INT4 at 50M+ use wd33; for INT4 below 50M the schedule choice is in the noise.",
     "why": "practical advice, not a finding; its INT4 parts restate qat-6 and qat-7"},
    {"paper": "lg-bounds",
     "quote": "We study the problem of length generalization (LG) in transformers: the ability of a model trained on "
              "shorter sequences to maintain performance when evaluated on much longer, previously unseen inputs.",
     "why": "the problem's definition, no result"},
    {"paper": "lg-bounds",
     "quote": "but left open the question of how large it must be",
     "why": "motivation: the gap in prior work the paper fills (the prior result itself is lg-bounds-1)"},
    {"paper": "lg-bounds",
     "quote": r"Motivated by previous empirical and theoretical work, we analyze LG in several distinct problem "
              r"settings: $\ell_\infty$ error control vs. average error control over an input distribution, "
              r"infinite-precision softmax attention vs. finite-precision attention (which reduces to an argmax) in "
              r"the transformer, and one- vs. two-layer transformers.",
     "why": "method: the settings analysed, no result"},
    {"paper": "lg-bounds",
     "quote": "These results sharpen our theoretical understanding of the mechanisms underlying extrapolation in "
              "transformers",
     "why": "a statement of significance with no finding of its own"},
    {"paper": "chunk",
     "quote": "Effectively processing long contexts is a critical challenge for language models.",
     "why": "background"},
    {"paper": "chunk",
     "quote": "While standard Transformers are limited by quadratic complexity and poor length extrapolation, "
              "alternative architectures like sliding window attention and state space models sacrifice the ability "
              "to effectively utilize the full context due to their fixed-size memory.",
     "why": "background on other architectures (prior work described as such)"},
    {"paper": "chunk",
     "quote": "Chunk-based sparse attention has emerged as a promising paradigm for extreme length generalization, "
              "yet the key architectural principles underpinning its success are not yet fully understood.",
     "why": "motivation"},
    {"paper": "chunk",
     "quote": "In this work, we present a systematic dissection of these models to identify the core components "
              "driving their performance.",
     "why": "method, no result"},
    {"paper": "chunk",
     "quote": "Through a unified framework and comprehensive ablation studies,",
     "why": "method: the lead-in of the sentence whose findings are chunk-1 to chunk-3"},
    {"paper": "chunk",
     "quote": "We provide a theoretical motivation for intra-chunk information processing and landmark generation.",
     "why": "a motivation for design choices, stated without a proved or measured result"},
    {"paper": "chunk",
     "quote": "Our findings provide a clear and empirically-grounded set of design principles for developing future, "
              "highly-capable long-context language models.",
     "why": "a statement of significance restating chunk-1 to chunk-3"},
    {"paper": "expe",
     "quote": "Positional encoding plays a crucial role in transformers, significantly impacting model performance "
              "and length generalization.",
     "why": "background"},
    {"paper": "expe",
     "quote": "Prior research has introduced absolute positional encoding (APE) and relative positional encoding "
              "(RPE) to distinguish token positions in given sequences.",
     "why": "prior work described as such"},
    {"paper": "expe",
     "quote": "This paper introduces a novel approach to position embeddings in transformer models, named \"Exact "
              "Positional Embeddings\" (ExPE).",
     "why": "method, no result"},
    {"paper": "expe",
     "quote": "Traditional transformer models rely on absolute or relative position embeddings to incorporate "
              "positional information into token embeddings, which often struggle with extrapolation to sequences "
              "longer than those seen during training.",
     "why": "background on other methods, asserted without a measurement of this paper"},
    {"paper": "expe",
     "quote": "Our proposed method utilizes a novel embedding strategy that encodes exact positional information by "
              "overriding specific dimensions of the embedding vectors, thereby enabling a more precise "
              "representation of token positions.",
     "why": "method; 'a more precise representation' is a design property, not a measurement"},
    {"paper": "expe",
     "quote": "The proposed approach not only maintains the integrity of the original embeddings",
     "why": "a design property of the method (only the overridden dimensions change), stated without a measurement"},
    {"paper": "swan",
     "quote": "Our model, SWAN-GPT, interleaves layers without positional encodings (NoPE) and sliding-window "
              "attention layers equipped with rotary positional encodings (SWA-RoPE).",
     "why": "method, no result"},
    {"paper": "swan",
     "quote": "Overall, our work presents an effective approach for scaling language models to longer contexts in a "
              "robust and efficient manner.",
     "why": "a summary restating swan-1, swan-5 and swan-6"},
    {"paper": "hope",
     "quote": "Many positional encodings (PEs) are designed to exhibit long-term decay, based on an entrenched and "
              "long-standing inductive opinion: tokens farther away from the current position carry less relevant "
              "information.",
     "why": "background"},
    {"paper": "hope",
     "quote": "We argue that long-term decay is outdated in the era of LLMs, as LLMs are now applied to tasks "
              "demanding precise retrieval of in-context information from arbitrary positions.",
     "why": "a position argued (motivation), not a finding"},
    {"paper": "hope",
     "quote": "Furthermore, we conduct a detailed analysis of rotary position encoding (RoPE, a prevalent relative "
              "positional encoding in LLMs), and",
     "why": "method: the lead-in of the sentence whose findings are hope-2 and hope-3"},
    {"paper": "hope",
     "quote": "Inspired by these insights, we propose High-frequency rotary Position Encoding (HoPE).",
     "why": "method, no result"},
    {"paper": "hope",
     "quote": "HoPE replaces the specific components in RoPE with position-independent ones, retaining only "
              "high-frequency signals, which also breaks the principle of long-term decay in theory.",
     "why": "method; breaking long-term decay holds by construction ('in theory'), not a measurement"},
    {"paper": "cracks",
     "quote": "One might imagine that architectural variations within the dense transformer paradigm have a limited "
              "effect on accuracy.",
     "why": "the view the paper argues against (motivation)"},
    {"paper": "cracks",
     "quote": "We demonstrate this with controlled ablations that hold data, tokenizer, and extension recipe fixed "
              "while varying normalization, GQA, pretraining context length, and sliding window attention.",
     "why": "method: the ablation design behind cracks-1 to cracks-7"},
    {"paper": "cracks",
     "quote": "After over 170,000 GPU hours of training, we release the resulting set of models as OlmPool, a set of "
              "26 comparable 7B models with checkpoints before and after long-context extension.",
     "why": "a release (call to action), no result"},
]
