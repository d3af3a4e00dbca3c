"""
The paper grids' rehearsal on CPU (SCALE=paper REHEARSE=1 bash sweep.sh STUDY; the rule that shrinks
every line is sweep.sh's rehearse_lines). Two commands that sweep.sh calls:

    python tools/rehearse.py pack FILE             run FILE's grid lines one after the other in this process
    python tools/rehearse.py outcomes STUDY DIR    each outcome of STUDY in DIR/analysis.json with its runs

pack: each line runs as `python tools/chain.py LINE` runs it (every script in a fresh __main__), so a
pack pays Python's and torch's start-up once for many lines; a failed line is reported and the next
one runs (the rehearsal looks for every trap, not the first). Exit 1 if any line failed.

outcomes: one row per outcome of the study, the number of runs (or seed x cell values, as the
analysis counts them) it rests on, and its state. An outcome with no runs, a key missing from the
analysis, or a refusal for a reason other than the values of barely trained models fails the
rehearsal (exit 1). Refusals on values (a gate not met, a non-positive penalty) are listed as such:
the rehearsal's models are trained for a few steps, so they say nothing about the trained ones.
"""
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from anywhere: the project's libraries
import cli
from tools.chain import chain
from studies.longctx import OUTCOMES as LONGCTX_OUTCOMES, RETRIEVAL

# Words of the analyses' refusals that come from the numbers (untrained models), not from the design
NO_KEYS = "no key tokens in any run (key-token share 0): LongPPL has no value"  # barely trained models: a value, not a design fault
VALUE_WORDS = ("positive", "learned in distribution", "not learned", "gate", "nan", "singular", "rank", "key tokens")


def run_pack(path):
    """Every line of the file, in order, through tools/chain.py's chain in this process -> exit status."""
    with open(path) as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    failed = []
    for i, line in enumerate(lines, 1):
        t0 = time.time()
        print(f"# [{i}/{len(lines)}] {line}", flush=True)
        if any(not s.split()[1:2] or not s.split()[1].endswith(".py") for s in line.split(" && ")):
            code = os.system(line) and 1  # not python steps only: a shell (chain would exec it)
        else:
            try:
                code = chain(line)
            except Exception:  # a crash of a step (a traceback, as its own process would print): next line
                traceback.print_exc()
                code = 1
        if code == cli.STOPPED:
            print(f"# STOPPED by a signal at line {i}", flush=True)
            return code
        print(f"# {'FAILED (exit %s)' % code if code else 'done'} line {i} in {time.time() - t0:.1f}s", flush=True)
        if code:
            failed.append(i)
    if failed:
        print(f"# FAILED lines {failed} of {path}", flush=True)
    return 1 if failed else 0


# -- outcomes: study -> [(name, function(analysis) -> (runs, refusal or None))]. A KeyError or TypeError
# means the analysis lacks what the outcome reads: the rehearsal fails on it.

def _sum(xs):
    return int(sum(x or 0 for x in xs))


def _qat_cells(a):
    cells = a["qat"]["cells"]
    return _sum(w["n"] for c in cells for w in c["warmdowns"]), None if a["qat"]["verdict"] else "no verdict"


def _qat_interaction(a):
    rows = a["qat"]["interaction"]
    ok = [r for r in rows if r.get("p") is not None]
    why = None if ok else ("no bit-width beside FP16" if not rows else "no F test computed")
    return _sum(2 * r["n_seeds"] * len(r["warmdowns"]) for r in ok), why


def _int4_transition(a):
    rows = [r for t in a["qat"]["int4_transition"] for r in t["rows"]]
    return _sum(2 * r["n"] for r in rows), None if rows else "no INT4 beside FP16 at two warmdowns"


def _laws(key):
    def f(a):
        laws = a["penalty_law"][key]
        if key == "laws":
            fitted = [l for l in laws if l.get("fit")]
            runs = _sum(s["n"] for l in fitted for s in l["sizes"])
        else:  # "error" there is the laws' prediction error, not a refusal
            fitted = [l for l in laws if l.get("gamma_D") is not None and l.get("n")]
            runs = _sum(l["n"] for l in fitted)
        why = None if fitted else "; ".join(sorted({str(l.get("message")) for l in laws})) or "no law"
        return runs, why
    return f


def _contrasts(a):
    rows = a["penalty_law"]["variant_contrasts"]
    return _sum(2 * r["n"] for r in rows), None if rows else "no variant beside the main recipe"


def _grid_distance(a):
    rows = a["grid_distance"]["rows"]
    return _sum(2 * r["n"] for r in rows), None if rows else "no grid.json (evaluate.py --tasks grid)"


def _longctx(key):
    def f(a):
        lc = a["longctx"]
        if key in RETRIEVAL and key not in lc["outcomes"]:  # gated: refused as retrieval is (not learned)
            return _longctx_retrieval(a)
        o = lc["outcomes"].get(key) or {"n": 0}
        why = "empty (no value in any run of the main recipe)" if key in lc.get("empty_outcomes", []) else None
        keys = lc["outcomes"].get("key_frac") or {}
        no_keys = (keys.get("n") and not any(c.get("mean") for c in keys.get("cells", []))) \
            or lc.get("constant_outcomes", {}).get("key_frac") == 0
        runs = int(keys.get("n") or lc["outcomes"].get("loss", {}).get("n") or 0)
        if key in ("longppl", "key_frac") and no_keys and (why or key == "key_frac"):
            # no key tokens in any run (a key-token share of 0 everywhere): a value of barely trained models
            return runs, NO_KEYS
        if key in lc.get("constant_outcomes", {}):  # e.g. a gain of exactly 0: the extension trained nothing
            return runs, f"one value in every run ({lc['constant_outcomes'][key]:g}): no spread, does the intervention act?"
        return int(o["n"] or 0), why if o["n"] else (why or "no runs")
    return f


def _longctx_retrieval(a):
    r = a["longctx"]["retrieval"]
    return _sum(c["n"] for c in r["cells"]), None if r.get("usable") else r.get("verdict", "not usable")


def _longctx_gain(a):
    g = [x for x in a["longctx"]["gain"] if not x.get("flagged")]
    return _sum(x["gain_parent"]["n"] for x in g), None if g else "no recipe"


def _by_length(field, training):
    """posenc / lengen: runs of the cells of this training kind that have a value at some length."""
    def f(a):
        study = "posenc" if "posenc" in a else "lengen"
        cells = [c for c in a[study]["cells"] if training is None or c.get("training") == training]
        n = 0
        for c in cells:
            stats = c
            for k in field:
                stats = stats.get(k) or {}
            if stats and all(isinstance(v, dict) and "n" in v for v in stats.values()):
                n += max(v["n"] for v in stats.values())
            elif stats:  # retrieval: task -> {exact: length -> stats}
                n += max((max(s["n"] for s in t["exact"].values()) for t in stats.values() if t.get("exact")), default=0)
        if not n and field == ("longppl_by_length",):  # no key tokens in any run: a value of barely trained models
            keys = [[v for v in (c.get("key_frac_by_length") or {}).values() if v.get("n")] for c in cells]
            if any(keys) and not any(v.get("mean") for k in keys for v in k):
                return _sum(max((v["n"] for v in k), default=0) for k in keys), \
                    NO_KEYS
        return n, None if n else "no cell with a value"
    return f


def _exports(folder):
    """longctx: main-recipe extensions (RUN-ntkT-f0.05, not the LongPPL evaluator's, seed 100 as
    sweep.sh's EVAL_SEED) with an hf folder,
    which tools/export.py writes only after its logits check passed."""
    import glob
    runs = [r for r in glob.glob(os.path.join(folder, "*-ntk*-f0.05")) if not r.split("-ntk")[0].endswith("_s100")]
    done = [r for r in runs if os.path.exists(os.path.join(r, "hf", "config.json"))]
    if not runs:
        return 0, "no main-recipe run"
    return len(done), None if len(done) == len(runs) else f"{len(runs) - len(done)} of {len(runs)} not exported"


def _threshold(a):
    rows = a["lengen"]["threshold"]["rows"]
    return _sum(r["n"] for row in rows for r in row["by_train_len"]), None if rows else "no threshold rows"


def _posenc_ablation(a):
    rows = a["posenc"]["chunk_ablation"]
    return _sum(r["n"] for r in rows), None if rows else "no chunk ablation"


QAT = [("best warmdown per bit-width and size (qat.cells, verdict)", _qat_cells),
       ("bit-width x warmdown interaction, F test (qat.interaction)", _qat_interaction),
       ("penalty law in size (penalty_law.laws)", _laws("laws")),
       ("grid distance of the warmdown checkpoints (grid_distance)", _grid_distance)]
OUTCOMES = {
    "qat": QAT,
    "qat-probes": QAT + [("INT4 transition size (qat.int4_transition)", _int4_transition),
                         ("penalty law in size and tokens (penalty_law.laws_nd)", _laws("laws_nd")),
                         ("probe variants against the main recipe (penalty_law.variant_contrasts)", _contrasts)],
    # every outcome the analysis defines (longctx.OUTCOMES: one list), then the recipes' gains
    "longctx": [(f"{k} (longctx.outcomes.{k})", _longctx(k)) for k in LONGCTX_OUTCOMES]
               + [("gain of each extension recipe (longctx.gain)", _longctx_gain),
                  ("retrieval exact match, gated per run (longctx.retrieval)", _longctx_retrieval)],
    "posenc": [("loss by length, text runs", _by_length(("loss_by_length",), "text")),
               ("LongPPL by length, text runs", _by_length(("longppl_by_length",), "text")),
               ("retrieval exact match by length, text runs", _by_length(("retrieval",), "text")),
               ("passkey exact match by length, passkey runs", _by_length(("retrieval",), "task_mix:passkey"))],
    "lengen": [("exact match by length per task and encoding (lengen.cells)", _by_length(("by_length",), None)),
               ("training-length threshold (lengen.threshold)", _threshold)],
}


def list_outcomes(study, folder, out=None):
    """Print the outcome table (to out, default stdout) -> number of failed outcomes."""
    out = out or sys.stdout
    path = os.path.join(folder, "analysis.json")
    try:
        with open(path) as f:
            a = json.load(f)
    except (OSError, ValueError) as e:
        print(f"rehearsal of {study}: no analysis ({path}: {type(e).__name__}): every outcome fails", file=out)
        return len(OUTCOMES[study])
    if study == "posenc" and a.get("posenc", {}).get("chunk_ablation"):
        OUTCOMES[study].append(("chunk ablation, remove one principle", _posenc_ablation))
    rows = list(OUTCOMES[study])
    if study == "longctx":  # HELMET / RULER run outside on transformers: every main-recipe model exported
        rows.append(("HELMET / RULER inputs: main-recipe models exported, logits checked (RUN/hf)",
                     lambda a: _exports(folder)))
    bad = 0
    print(f"rehearsal of {study}: outcomes and the runs each rests on ({path})", file=out)
    for name, fn in rows:
        try:
            runs, why = fn(a)
        except (KeyError, TypeError, IndexError, AttributeError) as e:
            runs, why = 0, f"missing from the analysis ({type(e).__name__}: {e})"
        value = why is not None and any(w in why.lower() for w in VALUE_WORDS) and runs > 0
        state = "ok" if why is None else (f"refused on values: {why}" if value else f"FAILS: {why}")
        bad += state.startswith("FAILS") or runs == 0
        print(f"  {runs:6d} runs  {name}: {state if runs else 'FAILS: ' + (why or 'no runs')}", file=out)
    print(f"rehearsal of {study}: {'FAILED, ' + str(bad) + ' outcomes empty or refused' if bad else 'every outcome computed'}",
          file=out)
    return bad


def main(argv):
    if argv[:1] == ["pack"] and len(argv) == 2:
        return run_pack(argv[1])
    if argv[:1] == ["outcomes"] and len(argv) == 3 and argv[1] in OUTCOMES:
        return 1 if list_outcomes(argv[1], argv[2]) else 0
    print("usage: python tools/rehearse.py pack FILE | outcomes STUDY FOLDER (studies: " + ", ".join(OUTCOMES) + ")",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
