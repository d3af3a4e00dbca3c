"""
The claims ledger's data: every sentence of the seed abstracts that states a result, quoted exactly, in the
seeds' order, each with its restatement in the tiny grid's terms and the confirmatory hypotheses that decide
it ([wave, family, id] of studies/waves/wave1.toml and wave2.toml), or why none does. EXCLUDED holds
every other sentence (or part of one) of the same abstracts with the reason it is out, so that the rule can
be audited. Pure data: no imports.

A row: id; paper (a key of PAPERS, or "fragment"); quote (a verbatim substring of the abstract, whitespace
collapsed); tiny (the claim in this project's terms: outcome, cells, direction or margin); tests (tuples
(wave, family, hypothesis id)); untestable (None, or why no hypothesis decides it); prior_work (True only for
a claim the abstract attributes to earlier work). The one row for a paper the seeds only cite also carries
cited=True and paraphrase=True (its quote is a paraphrase, not the paper's words); on every other row both
are absent, meaning False.
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
        "A row's tests are every declared confirmatory hypothesis, of either wave, that decides it in tiny "
        "terms; a row without one says why: a proof rather than a measurement, a scale, system or benchmark the "
        "harness does not have, no measurable quantity stated, or a measurement that exists but is not in a "
        "confirmatory family.")

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

_QAT_NULL = [(1, "qat", "null"), (2, "qat-w2", "int4_null_sizes"), (2, "qat-w2", "int3_null_sizes")]
_QAT_INT4 = [(1, "qat", "int4_wd33")]
_LG = [(2, "lg-bounds", "sort_rise"), (2, "lg-bounds", "copy_rise"), (2, "lg-bounds", "sort_reaches")]
_CHUNK_EXTRAP = [(1, "posenc", "chunk_text"), (1, "posenc", "chunk_passkey")]
_EXPE_TEXT = [(2, "expe", "expe_rope_text"), (2, "expe", "expe_sin_text")]
_EXPE_TASKS = [(2, "expe", "expe_rope_tasks"), (2, "expe", "expe_sin_tasks")]
_SWAN = [(1, "posenc", "swan_text"), (1, "posenc", "swan_passkey"), (2, "swan", "swan_tasks")]
_HOPE = [(2, "hope", "hope_text"), (2, "hope", "hope_passkey"), (2, "hope", "hope_tasks")]
_CRACKS = [(1, "longctx", "compound"), (1, "longctx", "count_slope"), (2, "cracks", "compound"),
           (2, "cracks", "count_slope")]

_CRACKS_SCALE = ("the seed extends 7B models from 4K/8K to 32K and scores HELMET; the tiny grid extends from 64/128 "
                 "to 512 and scores the loss at 512 (wave 1) and passkey exact match at 512 (wave 2)")


def _row(id, paper, quote, tiny, tests=(), untestable=None, prior_work=False):
    return {"id": id, "paper": paper, "quote": quote, "tiny": tiny, "tests": list(tests),
            "untestable": untestable, "prior_work": prior_work}


CLAIMS = [
    # --- qat -------------------------------------------------------------------------------------------------
    _row("qat-1", "qat",
         "A 720-run factorial grid (Phase 2) over bit-width x warmdown fraction x LR magnitude x model size x seed "
         "(FP16/INT8/INT6, 15M-100M, 5 seeds) finds the optimal warmdown is 33% at every (bit-width, size) cell.",
         "Deployed val loss, LR 1, Muon + WSD: the quantisation penalty (INT4 or INT3 minus FP16) is the same at "
         "warmdowns 0.1, 0.33 and 0.6 within +-0.01 nats, INT4 at 39K (wave 1) and INT4 and INT3 at each of 14K, "
         "25K, 39K (wave 2); INT4/INT3 stand in for INT8/INT6, whose tiny penalties are below seed noise, and the "
         "tests decide the schedule's independence of bit-width, not that 0.33 is best.",
         _QAT_NULL),
    _row("qat-2", "qat",
         "The primary hypothesis -- that INT6 QAT requires a different schedule than higher-precision training -- "
         "is falsified at FP16/INT8/INT6.",
         "The same equivalences as qat-1, read as the falsified alternative: quantised training (INT4, INT3) needs "
         "no different warmdown than FP16, its penalty moving by less than +-0.01 nats across 0.1, 0.33, 0.6.",
         _QAT_NULL),
    _row("qat-3", "qat",
         "The null is robust under all three setup changes.",
         "The INT3 penalty is the same at warmdowns 0.1, 0.33 and 0.6 within +-0.01 nats with AdamW at 25K and with "
         "3x the steps at 14K (the seed's up to 9x); the third change, the cosine shape, has no warmdown axis, so "
         "it has no null to test.",
         [(1, "qat-probes", "adamw_null"), (1, "qat-probes", "long_null")]),
    _row("qat-4", "qat",
         "The INT6 penalty follows a log-linear scaling law",
         "The INT4 penalty (minus FP16) at warmdown 0.33 follows alpha + beta ln N over 6K-55K: at each of the five "
         "sizes the mean departure from each seed's own fitted law is within +-0.01 nats (INT4 stands in for INT6, "
         "whose tiny penalty is below seed noise).",
         [(2, "qat-w2", "law_fit")]),
    _row("qat-5", "qat",
         "whose fit on Phase 2 predicts the five held-out Phase 5 sizes (5M, 8M, 175M, 250M, 350M) within their 95% "
         "prediction intervals (5/5)",
         "Fitted per seed on 14K, 25K and 39K, the INT4 penalty law predicts the held-out 6K and 55K: the mean "
         "departure at each is within +-0.01 nats (an equivalence in place of the seed's 95% prediction intervals).",
         [(2, "qat-phase5", "law_heldout")]),
    _row("qat-6a", "qat",
         "For INT4 the picture is sharper than the higher precisions",
         "INT4 at 39K: wd 0.33's gain over wd 0.1 is larger than FP16's (INT4's gain minus FP16's > 0): what is "
         "specific to quantisation in qat-6's wd33 preference.",
         [(2, "qat-w2", "int4_transition")]),
    _row("qat-6", "qat",
         "at 50M and 100M, wd33 is decisively optimal (paired z ~ 12-15, 10/10 seeds)",
         "INT4 at 39K (the tiny grid's largest size, standing for 50M/100M): warmdown 0.33 gives a lower deployed "
         "val loss than 0.1 (wave 1).",
         _QAT_INT4),
    _row("qat-7", "qat",
         "below 50M, across the six tested sizes from 3M to 30M, no individual size shows a statistically "
         "significant schedule preference and the per-size mean penalty oscillates within seed-level noise",
         "INT4's penalty is the same at warmdowns 0.1 and 0.6 as at 0.33 within +-0.01 nats at 14K and 25K (one "
         "intersection-union test; 39K stands for the seed's 50M/100M, qat-6).",
         [(2, "qat-w2", "int4_null_sizes")]),
    _row("qat-8", "qat",
         "The boundary is therefore a transition between a noise-dominated regime below 50M and a decisive wd33 "
         "regime at and above 50M, not a clean wd10 region.",
         "Decided only through its two parts, the wd33 regime at 39K (qat-6) and the INT4 null at 14K-25K (qat-7); "
         "no hypothesis locates the size at which INT4's schedule preference changes.",
         _QAT_INT4 + [(2, "qat-w2", "int4_null_sizes")]),
    _row("qat-9", "qat",
         "A weight-to-grid-distance probe falsifies the simplest mechanism for the FP16/INT8/INT6 null result "
         "(rapid grid-snapping): pre-warmdown, INT6-QAT weights sit at essentially the same distance from the INT6 "
         "grid as FP16 weights (ratio ~ 1.04).",
         "At 39K, at the warmdown checkpoint of the wd 0.33 runs, INT4-QAT weights sit at the same mean distance "
         "from the INT4 grid as FP16 weights: ln(d_QAT / d_FP16) within +-0.1 (ratio 0.905-1.105); INT4 stands "
         "in for INT6.",
         [(2, "qat-phase5", "grid_ratio")]),

    # --- lg-bounds ---------------------------------------------------------------------------------------------
    _row("lg-bounds-1", "lg-bounds",
         "Prior work by Huang et al. (2025) established that transformers eventually achieve length generalization "
         "once the training sequence length exceeds some finite threshold",
         "NoPE at the tasks' recipe depth, steps held fixed: exact match on N+1..2N is higher trained at N = 32 "
         "than at N = 8, for sort and for copy, and sort at N = 32 with 2x the steps reaches min(in-distribution, "
         "past-N) exact match above 0.9.",
         _LG, prior_work=True),
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
         "NoPE copy and sort, N in {8, 32} x {1x, 2x} the recipe's steps: past-N exact match rises from N = 8 to "
         "32 for each task, sort reaches 0.9 at N = 32 with 2x steps, and copy's past-N score exceeds sort's at "
         "N = 32.",
         _LG + [(2, "lg-bounds", "richer")]),
    _row("lg-bounds-6", "lg-bounds",
         "formalize the intuition that richer training data is required for generalization on more complex tasks",
         "At N = 32 (NoPE, averaged over the 1x and 2x step budgets) copy's exact match past N exceeds sort's: the "
         "simpler task in the declared order copy < sort < parity_scratch is the one past its threshold.",
         [(2, "lg-bounds", "richer")]),

    # --- chunk (arXiv 2510.17196) ----------------------------------------------------------------------------
    _row("chunk-1", "chunk",
         "we demonstrate that a combination of three design principles is critical: (1) an expressive, non-linear "
         "Chunk Encoder with a dedicated CLS token to produce representations for retrieval",
         "Passkey trained at 128: the chunk model with a linear chunk encoder without CLS scores a lower exact "
         "match at 256, 512, 1024 than the full chunk model.",
         [(2, "chunk", "chunk_linear")]),
    _row("chunk-2", "chunk",
         "(2) a Bypassing Residual Path to stably integrate retrieved global information without it being "
         "overridden by the local residual stream",
         "Passkey trained at 128: the chunk model without the bypassing residual path (retrieval fused into the "
         "residual stream) scores a lower exact match at 256, 512, 1024 than the full chunk model.",
         [(2, "chunk", "chunk_fused")]),
    _row("chunk-3", "chunk",
         "(3) enforced selection sparsity during pre-training to bridge the train-test distribution gap",
         "Passkey trained at 128: the chunk model trained with dense retrieval (no enforced selection sparsity) "
         "scores a lower exact match at 256, 512, 1024 than the full chunk model.",
         [(2, "chunk", "chunk_dense")]),
    _row("chunk-4", "chunk",
         "By combining these principles, we establish a new state-of-the-art for training-free length extrapolation",
         "None: a ranking against other published systems has no tiny counterpart.",
         untestable="a ranking against other systems' published numbers on RULER and BABILong; the harness has "
                    "neither benchmark and compares chunk attention only with the RoPE and SWAN models it trains "
                    "itself (chunk-5)"),
    _row("chunk-5", "chunk",
         "successfully generalizing models trained on a 4K context to 32 million tokens on RULER and BABILong",
         "Trained at 128 and evaluated at 256, 512, 1024 (8x, not the seed's 8,000x): chunk attention's mean text "
         "loss is below RoPE's and its passkey exact match above RoPE's.",
         _CHUNK_EXTRAP),

    # --- expe ------------------------------------------------------------------------------------------------
    _row("expe-1", "expe",
         "An absolute positional embedding method that can extrapolate to sequences of lengths longer than the ones "
         "it was trained on.",
         "Copy and sort trained on lengths 1-16: ExPE's exact match on 17-48, pooled over the two tasks, is above "
         "RoPE's and above sinusoidal's (two-sided; below = refuted).",
         _EXPE_TASKS),
    _row("expe-2", "expe",
         "enhances the model's ability to generalize to more extended sequences",
         "ExPE beats RoPE and sinusoidal past the training length: a lower mean text loss at 256-1024 (trained at "
         "128) and a higher copy/sort exact match on 17-48 (trained on 1-16), each two-sided.",
         _EXPE_TEXT + _EXPE_TASKS),
    _row("expe-3", "expe",
         "In causal language modeling, our ExPE embeddings significantly reduce perplexity compared to rotary and "
         "sinusoidal embeddings, when tested on sequences longer than those used in training.",
         "Text trained at 128: ExPE's mean val loss at 256, 512, 1024 is below RoPE's and below sinusoidal's "
         "(two-sided; higher = refuted).",
         _EXPE_TEXT),

    # --- swan (arXiv 2504.08719) -----------------------------------------------------------------------------
    _row("swan-1", "swan",
         "We present a decoder-only Transformer architecture that robustly generalizes to sequence lengths "
         "substantially longer than those seen during training.",
         "SWAN (windowed RoPE layers, every 2nd layer global NoPE) against RoPE: lower mean text loss and higher "
         "passkey exact match at 256-1024 (trained at 128; SWAN evaluated with log-n scaling, RoPE without), higher "
         "copy/sort exact match on 17-48 (trained on 1-16; no log-n scaling).",
         _SWAN),
    _row("swan-2", "swan",
         "Experiments demonstrate strong performance on sequence lengths significantly longer than the training "
         "length without the need for additional long-context training.",
         "As swan-1, with no training past the training length: SWAN beats RoPE at 256-1024 on text loss and "
         "passkey, and on copy/sort past length 16.",
         _SWAN),
    _row("swan-3", "swan",
         "This robust length extrapolation is achieved through our novel architecture",
         "The architecture's share: on copy/sort (wave 2, no log-n scaling) the architecture alone; on text and "
         "passkey (wave 1) SWAN is evaluated with log-n scaling and RoPE without, so those tests measure the "
         "architecture and the scaling together.",
         _SWAN),
    _row("swan-4", "swan",
         "enhanced by a straightforward dynamic scaling of attention scores during inference",
         "SWAN evaluated with log-n scaling has a lower loss / higher passkey score past 128 than the same model "
         "evaluated without it.",
         untestable="not in a confirmatory family: posenc evaluates SWAN with log-n scaling on (evaluate.py --logn) "
                    "and no run or hypothesis compares it with the scaling off"),
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
         "A trained RoPE run converted by extend.py --method swan and trained on for a few steps at 128 has a lower "
         "loss at 256-1024 than its RoPE parent.",
         untestable="not in a confirmatory family: extend.py --method swan converts a trained RoPE run and "
                    "docs/longcontext.md measured it once (one seed, exploratory), but no sweep runs the conversion "
                    "and no declared hypothesis tests it"),

    # --- hope ------------------------------------------------------------------------------------------------
    _row("hope-1", "hope",
         "Firstly, we present empirical analyses on various PEs, demonstrating that models inherently learn "
         "attention with only a local-decay pattern while forming a U-shape pattern globally, contradicting the "
         "principle of long-term decay.",
         "Text runs trained at 128, evaluated at 1024: the mean attention weight per log2 distance bucket falls "
         "from distance 1 and rises again at the far buckets (a U), not a monotone decay.",
         untestable="not in a confirmatory family: the attention-by-distance probe exists (evaluate.py, posenc "
                    "reports it per text cell as attn_by_distance, read descriptively), its U-shape has no "
                    "declared test yet"),
    _row("hope-2", "hope",
         "found that the U-shape attention is caused by some learned components",
         "Removing or freezing the low-frequency rotary components of a RoPE model flattens the far end of its "
         "attention-by-distance profile.",
         untestable="a causal attribution to specific rotary components: it needs an ablation or attribution of "
                    "RoPE's frequency components against the attention-by-distance profile, which no probe, run or "
                    "hypothesis here does"),
    _row("hope-3", "hope",
         "which are also the key factor limiting RoPE's expressiveness and extrapolation",
         "Only through the intervention: HoPE, which leaves those components unrotated, extrapolates better than "
         "RoPE (lower text loss and higher passkey exact match at 256-1024, higher copy/sort exact match on "
         "17-48); expressiveness has no test.",
         _HOPE),
    _row("hope-4", "hope",
         "HoPE achieves two major advantages: (1) Without constraints imposed by long-term decay, contradictory "
         "factors that limit spontaneous attention optimization and model extrapolation performance are removed.",
         "Only its consequence for extrapolation: HoPE beats RoPE past the training length as in hope-3; "
         "'spontaneous attention optimization' has no measure here.",
         _HOPE),
    _row("hope-5", "hope",
         "(2) Components representing positions and semantics are are optimized.",
         "None: no quantity to measure.",
         untestable="states no measurable quantity: the abstract does not say which components represent positions "
                    "or semantics, nor what 'optimized' is measured by"),
    _row("hope-6", "hope",
         "These enhances model's context awareness and extrapolation, as validated by extensive experiments.",
         "HoPE against RoPE: lower mean text loss at 256-1024 and higher passkey exact match at 256-1024 (trained at "
         "128), higher copy/sort exact match on 17-48 (trained on 1-16).",
         _HOPE),

    # --- cracks (arXiv 2608.10296) ---------------------------------------------------------------------------
    _row("cracks-1", "cracks",
         "However, we demonstrate that this is not the case in the long context setting.",
         "Architecture matters for extension: over the 10 cells (<= 1 or >= 3 of QK-norm, GQA, SWA, pretraining "
         "context 64), more features give a worse result at 512 after the extension; " + _CRACKS_SCALE + ".",
         _CRACKS),
    _row("cracks-2", "cracks",
         "Specifically, we show that a set of four minor architectural decisions --- all made by at least one of "
         "the Olmo, Llama, and Qwen dense model families --- have a compoundingly negative effect on long context "
         "extensibility.",
         "Over the 10 cells, extended with NTK from 64/128 to 512: the loss at 512 rises with the feature count and "
         ">= 3 features sit above <= 1 (wave 1); passkey exact match at 512 falls with the count and >= 3 sit below "
         "<= 1 (wave 2); the seed's ratio is 4K/8K to 32K and its outcome HELMET.",
         _CRACKS),
    _row("cracks-3", "cracks",
         "Any one of these choices alone has a minor impact on long context performance",
         "Each single-feature cell's passkey exact match at 512 after extending from 64/128 is within +-0.10 of the "
         "no-feature cell's (the seed: a point or two of HELMET at 32K after extending from 4K/8K).",
         [(2, "cracks", "minor")]),
    _row("cracks-4", "cracks",
         "combining three or more can drop the performance downstream by up to 47%",
         "Cells with >= 3 features end with a higher loss at 512 (wave 1) and a lower passkey exact match at 512 "
         "(wave 2) than cells with <= 1, and both fall with the count; the tests decide the direction, not the 47% "
         "(HELMET at 32K from 4K/8K in the seed, passkey at 512 from 64/128 here).",
         _CRACKS),
    _row("cracks-5", "cracks",
         "Furthermore, these differences are not detectable from short-context loss or validation datasets.",
         "Within each pretraining context (64 or 128), the pretraining run's smoothed final training loss does not "
         "predict passkey exact match at 512 after the extension: |within-context r| < 0.5 (the seed: HELMET at "
         "32K); validation sets are not tested apart.",
         [(2, "cracks", "short_loss")]),
    _row("cracks-6", "cracks",
         "We show that much of the variation in long context ability across model families is driven by these "
         "architectural features",
         "None: the tiny grid has its own factorial cells, not model families.",
         untestable="a claim about real model families (Olmo, Llama, Qwen at 7B and their long-context scores); "
                    "the tiny grid has no model families to explain"),
    _row("cracks-7", "cracks",
         "detectable from applying context extension early in pretraining",
         "The main recipe applied to an intermediate pretraining checkpoint predicts the post-extension result at "
         "512 of the final checkpoint (the seed: HELMET at 32K).",
         untestable="not in a confirmatory family: studies/longctx.py has the early-extension diagnostic "
                    "(train.py --save_at, extend.py --ckpt, early_report, exploratory), and no declared hypothesis "
                    "decides it"),
    _row("cracks-8", "cracks",
         "This pool includes several architectures that outperform the Llama 3 architecture on long context "
         "extensibility.",
         "None decided: Llama 3's feature set is the GQA-only cell here, and the no-feature cell against it is one "
         "of cracks-3's contrasts, declared as an equivalence (the opposite direction).",
         untestable="not in a confirmatory family: its tiny counterpart (cells scoring above the GQA-only cell, "
                    "Llama 3's feature set, on passkey exact match at 512) is measured per cell by longctx, "
                    "exploratory; the one declared contrast touching it, no-feature against GQA-only inside "
                    "cracks-3's 'minor', tests no difference, not an advantage"),
    _row("cracks-9", "cracks",
         "In an analysis of our ablation models, we identify patterns in attention sink behavior and attention "
         "distributions across context that are attributable to specific architectural differences.",
         "QK-norm lowers the attention-sink rate of the pretrained roots, and the sink rate tracks the loss at 512 "
         "after extension within each pretraining context.",
         untestable="not in a confirmatory family: longctx measures every root's sink rate and sink strength "
                    "(evaluate.py, longctx.sink_path, exploratory); the pilot's sink rate was 0 in every root but its "
                    "sink strength varies (0.017-0.044, higher at pretraining context 64), and no declared hypothesis "
                    "tests a feature's effect on it; longctx reports no attention-by-distance profile"),

    # --- nope: cited by the seeds, not a seed ------------------------------------------------------------------
    dict(_row("nope-1", "nope",
              "NoPE outperforms explicit position encodings, RoPE among them, at length generalisation on reasoning "
              "tasks",
              "Copy, sort and parity_scratch trained on lengths 1-16 (each learned in distribution): NoPE's exact "
              "match on 17-48 is higher than RoPE's, per task.",
              [(1, "lengen", "copy_nope"), (1, "lengen", "sort_nope"), (1, "lengen", "parity_scratch_nope")]),
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
