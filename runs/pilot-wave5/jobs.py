# Wave 5's pilots (studies/waves/wave5.toml, [constants] pilot_p2 ... pilot_p5): seeds 950-959 (no confirmatory wave
# uses 950-999), seed by seed. Every line is the wave's own line (studies.wave.grid of wave5.toml) at a pilot seed,
# its records under runs/pilot-wave5/STUDY; only what a pilot varies differs: the SWAN conversion also at 15 and 60
# steps (P4), the chunk runs' folders carry _i<steps> (P5a at 1200, P5c at 1800). Run from the repository root:
#     python runs/pilot-wave5/jobs.py > runs/pilot-wave5/jobs.txt          P1-P4 and P5a (about 30 min of wall)
#     bash tools/run_lines.sh runs/pilot-wave5 < runs/pilot-wave5/jobs.txt
#     python runs/pilot-wave5/jobs.py --decide                            each rule's outcome from the records
#     python runs/pilot-wave5/jobs.py p5b | bash tools/run_lines.sh runs/pilot-wave5   (P5a passed: the ablations)
#     python runs/pilot-wave5/jobs.py p5c | bash tools/run_lines.sh runs/pilot-wave5   (P5a failed: 1800 steps)
# P1 qat, seeds 950-954 (13 runs a seed): 25K under cosine (FP16, INT3) and WSD wd 0.33 (FP16, INT4, INT3); 6K and
#    10K: INT4 at wd 0.1 and 0.33, FP16 and INT3 at 0.33. Fixes nothing: plans cosine_null, int4_own_null and no_wd10
#    at 6K, 10K (no stored run) and the INT3 law at 10K.
# P2 lg-bounds, seeds 950-952: copy and sort, NoPE, N = 8 at 0.5x the recipe and N = 32 at 2x (wave 2's x2 lines):
#    the rule's runs (both N must learn in distribution), and the engine plans lg-bounds on the pilot's own cells.
# P3 the tasks' graded outcome, seeds 950-952: copy and sort x RoPE, HoPE at N = 16 (answer-token accuracy per bin).
# P4 SWAN, seeds 950-952: the RoPE text parent (16 probe windows), converted and, as the control, trained on without
#    conversion, for 15, 30 and 60 steps; SWAN text and passkey evaluated with and without log-n scaling.
# P5a chunk, seeds 950-959: the full model at 1200 steps. P5b (if >= 9 of 10 learn): the three ablations at 1200,
#    seeds 950-952. P5c (if not): the full model at 1800 steps, seeds 950-959.
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from studies import wave  # noqa: E402

D = "runs/pilot-wave5"
# the declaration as committed before the pilots (studies/waves/wave5.toml as of commit ba006ce, copied): the
# amendment the pilots fixed changes the wave's lines, never what the pilot ran
W = wave.load(os.path.join(ROOT, D, "wave5.declared.toml"))


def lines(study, seeds, block, keep=lambda ln: True):
    """The wave's lines of one [[runs.STUDY.jobs]] block at the pilot seeds (one seed's lines at a time)."""
    w = {**W, "runs": {study: {**W["runs"][study], "seeds": list(seeds),
                               "jobs": [{k: v for k, v in W["runs"][study]["jobs"][block].items() if k != "seeds"}]}}}
    return [ln for ln in wave.grid(w, study, f"{D}/{study}") if keep(ln)]


def conversions(line):
    """P4: the RoPE parent's line with its conversion and control at 15, 30 and 60 steps (the wave's: 30)."""
    steps = line.split(" && ")
    n = str(W["constants"]["swan_iters"])
    out = steps[:2]  # training and its evaluation; then each conversion and control, with its evaluation
    for k in ("15", "30", "60"):
        out += [re.sub(rf"(--iters |-swan|-more){n}\b", rf"\g<1>{k}", s) for s in steps[2:]]
    return " && ".join(out)


def chunk(line, steps):
    return re.sub(r"(_passkey_ctx128_s\d+)", rf"\1_i{steps}", line).replace(
        f"--iters {W['constants']['chunk_steps']} ", f"--iters {steps} ")


def first_sitting():
    out = []
    for s in range(950, 960):
        if s <= 954:  # P1
            out += lines("qat", [s], 3)  # the cosine runs
            out += lines("qat", [s], 0, lambda ln: "--size 25K " in ln and "--warmdown 0.33 " in ln)
            out += lines("qat", [s], 1)  # 6K, 10K
        if s <= 952:  # P2, P3, P4
            out += lines("lengen", [s], 0) + lines("lengen", [s], 1) + lines("lengen", [s], 2)
            out += [conversions(ln) for ln in lines("posenc", [s], 0)] + lines("posenc", [s], 3)
        out += [chunk(ln, 1200) for ln in lines("posenc", [s], 4, lambda ln: "_chunk_passkey" in ln)]  # P5a
    return out


def p5b():
    return [chunk(ln, 1200) for s in range(950, 953) for ln in lines("posenc", [s], 4, lambda ln: "_chunk_passkey" not in ln)]


def p5c():
    return [chunk(ln, 1800) for s in range(950, 960) for ln in lines("posenc", [s], 4, lambda ln: "_chunk_passkey" in ln)]


def _json(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def decide():
    """Each pilot rule (wave5.toml [constants] pilot_p2 ... pilot_p5) read off the records; prints what it picks."""
    acc = {p: (_json(p) or {}).get("metrics", {}).get("val_acc")
           for n in (8, 32) for p in glob.glob(f"{D}/lengen/*_nope_Lrecipe_len{n}_*/result.json")}
    print(f"P2: N = 8 at 0.5x and N = 32 at 2x in distribution {sorted(acc.values(), key=str)}: "
          + ("0.5x (every run >= 0.9)" if len(acc) == 12 and all((a or 0) >= 0.9 for a in acc.values()) else
             "1x at N = 8, 4x at N = 32" if len(acc) == 12 else f"pending ({len(acc)} of 12 runs)"))
    tok = {}
    for p in glob.glob(f"{D}/lengen/*_len16_*/eval.json"):
        t = next(iter((_json(p) or {}).get("tasks", {}).values()), {})
        v = [b.get("token_acc") for b in t.get("by_length", {}).values() if (b.get("lo") or 0) > 16]
        m = re.search(r"0.1M_(\w+?)_(rope|hope)_len16", p)
        if m and v and None not in v:
            tok.setdefault(m.groups(), []).append(sum(v) / len(v))
    means = {k: sum(v) / len(v) for k, v in tok.items()}
    from studies.lengen import trivial_token_acc  # the floor: the task's trivial baseline on the same examples
    floor = {t: sum(trivial_token_acc(t, a, b, range(950, 953)) for a, b in ((17, 32), (33, 48))) / 2 for t in ("copy", "sort")}
    print(f"P3: token accuracy past 16, mean over seeds {means}, floors (trivial baseline) {floor}: "
          + ("token_acc" if len(means) == 4 and all(floor[t] + 0.05 <= x <= 0.95 for (t, _), x in means.items()) else
             "strike tasks_graded" if len(means) == 4 else "pending"))
    ok = {}
    for k in (15, 30, 60):
        d = []
        for p in glob.glob(f"{D}/posenc/*-swan{k}/eval.json"):
            c = _json(p.replace(f"-swan{k}", f"-more{k}"))
            a = ((_json(p) or {}).get("ppl") or {}).get("by_length", {}).get("128")
            b = ((c or {}).get("ppl") or {}).get("by_length", {}).get("128")
            if a is not None and b is not None:
                d.append(abs(a - b))
        ok[k] = (len(d), max(d) if d else None)
    pick = next((k for k in (15, 30, 60) if ok[k][0] == 3 and ok[k][1] <= 0.05), 60)
    print(f"P4: |converted - control| loss at 128, (seeds, largest) by steps {ok}: swan_iters = {pick}"
          + ("" if all(n == 3 for n, _ in ok.values()) else " (pending)"))
    for steps in (1200, 1800):
        ex = [((_json(p) or {}).get("tasks", {}).get("passkey", {}).get("by_length", {}).get("128") or {}).get("exact")
              for p in glob.glob(f"{D}/posenc/0.1M_chunk_passkey_ctx128_s*_i{steps}/eval.json")]
        if ex:
            n = sum((x or 0) >= 0.9 for x in ex)
            # two misses settle it: 9 of 10 is out of reach, so the sitting was stopped there (curtailed)
            print(f"P5 at {steps} steps: {n} of {len(ex)} full models >= 0.9 at 128: "
                  + ("adopt" if n >= 9 and len(ex) == 10 else "not adopted" if len(ex) == 10 or len(ex) - n >= 2
                     else "pending") + (" (curtailed after two misses)" if len(ex) < 10 and len(ex) - n >= 2 else ""))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "--decide":
        decide()
    else:
        print("\n".join({"": first_sitting, "p5b": p5b, "p5c": p5c}[what]()))
