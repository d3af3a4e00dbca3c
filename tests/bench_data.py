"""
Benchmark of data.py (not collected by pytest; run by hand and report the numbers):

    nice python tests/bench_data.py                    # 1 GiB corpus, --procs 1 and 2, in /tmp
    nice python tests/bench_data.py --mb 64 --procs 1  # a quick look

1. A synthetic .jsonl corpus of at least --mb MiB of text: the bundled plays cut into scenes
   (runs of paragraphs), each copy perturbed (5% of words swapped with their neighbour, 3%
   replaced by a random word of the plays) and the scenes shuffled, so the text does not repeat.
2. Throughput of `python data.py prepare` (MB/s of document text, end to end: start-up, the
   checking pre-pass, tokenizing, shards, checksums) for each --procs, against plain
   single-process tiktoken encode_ordinary on the same text (encode calls only).
3. Start-up: a child process imports torch and data.py, calls load_corpus and draws one
   get_batch (it builds no model: train.py is being rewritten, so the lead re-measures with it).
   Seconds from spawning the process to the batch, and the child's peak RSS (ru_maxrss), for
   (a) the prepared corpus, (b) the bundled corpus (its cache cold once, then warm), (c) a folder
   of header-format shards written here with numpy (the first start validates it, then cached).
   Targets: (a) within 2 s and 200 MB of (b) warm.
The folder is deleted afterwards unless --keep; the table also goes to --json.
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import data  # noqa: E402

PROBE = r"""
import json, sys, time
t0 = time.time()
import torch  # train.py imports it anyway; nothing is built with it
sys.path.insert(0, {root!r})
import data
t1 = time.time()
corpus = data.load_corpus({data!r}, "cl100k_base", 4096, {cache!r})
t2 = time.time()
x, y = data.get_batch(corpus.train, 16, 256, 0, 0)
t3 = time.time()
print(json.dumps(dict(start=t0, ready=t3, import_s=t1 - t0, load_s=t2 - t1, batch_s=t3 - t2)))
"""


def scenes():
    """The bundled plays as runs of 2..40 paragraphs."""
    rng, out = random.Random(0), []
    with tarfile.open(data.DEFAULT_DATA) as tar:
        for m in sorted((m for m in tar.getmembers() if m.name.endswith(".txt")), key=lambda m: m.name):
            paras = [p for p in tar.extractfile(m).read().decode().split("\n\n") if p.strip()]
            i = 0
            while i < len(paras):
                n = rng.randint(2, 40)
                out.append("\n\n".join(paras[i:i + n]) + "\n")
                i += n
    return out


def generate(path, mib, seed=0):
    """-> (text bytes, documents). Word swaps and substitutions keep it English-like, not repeated."""
    rng, units = random.Random(seed), scenes()
    vocab = sorted(set(w for u in units[:2000] for w in re.findall(r"[A-Za-z']+", u)))
    n_bytes = n_docs = 0
    with open(path, "w") as f:
        while n_bytes < mib * 2 ** 20:
            rng.shuffle(units)
            for u in units:
                w = u.split(" ")
                for _ in range(len(w) // 20):
                    i = rng.randrange(len(w) - 1)
                    w[i], w[i + 1] = w[i + 1], w[i]
                for _ in range(len(w) // 33):
                    w[rng.randrange(len(w))] = rng.choice(vocab)
                text = " ".join(w)
                f.write(json.dumps({"text": text}) + "\n")
                n_bytes, n_docs = n_bytes + len(text.encode()), n_docs + 1
                if n_bytes >= mib * 2 ** 20:
                    break
    return n_bytes, n_docs


def tiktoken_reference(path, max_bytes):
    """MB/s of plain enc.encode_ordinary over the texts (encode calls only, one process)."""
    enc = data.get_tokenizer("cl100k_base", 4096)
    n = secs = 0
    with open(path) as f:
        for line in f:
            text = json.loads(line)["text"]
            t = time.perf_counter()
            enc.encode_ordinary(text)
            secs += time.perf_counter() - t
            n += len(text.encode())
            if max_bytes and n >= max_bytes:
                break
    return n / 1e6 / secs


def child(args, env=None):
    """Run a child process -> (stdout, wall s, peak RSS MB of it and its children)."""
    with tempfile.TemporaryFile("w+") as err:
        t = time.time()
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)  # not p.wait(): wait4 also gives the child's resource usage
        if os.waitstatus_to_exitcode(status):
            err.seek(0)
            sys.exit(f"child failed ({os.waitstatus_to_exitcode(status)}): {err.read().strip()}")
    child.cpu_s = usage.ru_utime + usage.ru_stime  # the child and the processes it waited for (pool workers)
    return out, time.time() - t, t, usage.ru_maxrss / 1024


def probe(path, cache, env):
    out, wall, spawned, rss = child([sys.executable, "-c", PROBE.format(root=ROOT, data=path, cache=cache)], env)
    r = json.loads(out.strip().splitlines()[-1])
    return dict(ready_s=r["ready"] - spawned, import_s=r["import_s"], load_s=r["load_s"], batch_s=r["batch_s"],
                rss_mb=rss)


def median_probe(path, cache, env, n=3):
    runs = [probe(path, cache, env) for _ in range(n)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def numpy_shards(folder, train_tokens, val_tokens, per_shard, vocab=4096):
    """Header-format shards written with numpy (the reference layout), not data.write_shard."""
    os.makedirs(folder)
    rng = np.random.default_rng(0)
    names = [(f"fineweb_train_{i:06d}.bin", min(per_shard, train_tokens - i * per_shard))
             for i in range(-(-train_tokens // per_shard))] + [("fineweb_val_000000.bin", val_tokens)]
    for name, n in names:
        header = np.zeros(256, dtype="<i4")
        header[:3] = 20240520, 1, n
        with open(os.path.join(folder, name), "wb") as f:
            f.write(header.tobytes())
            f.write(rng.integers(0, vocab, n, dtype=np.uint16).astype("<u2").tobytes())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=float, default=1024, help="MiB of document text to generate (default 1024)")
    p.add_argument("--procs", default="1,2", help="prepare process counts to measure (default 1,2)")
    p.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary folder goes (default /tmp)")
    p.add_argument("--ref_mb", type=float, default=0, help="MB of text for the tiktoken reference (0 = all)")
    p.add_argument("--keep", action="store_true", help="keep the generated files")
    p.add_argument("--json", default="", help="write the results here (default DIR/bench_data.json)")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="bench_data_", dir=args.dir)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = {}
    try:
        src = os.path.join(work, "corpus.jsonl")
        t = time.time()
        text_bytes, docs = generate(src, args.mb)
        res["corpus"] = dict(text_mb=text_bytes / 1e6, file_mb=os.path.getsize(src) / 1e6, docs=docs,
                             generate_s=time.time() - t)
        print(f"corpus: {text_bytes / 1e6:,.0f} MB of text in {docs:,} documents ({time.time() - t:.0f}s)", flush=True)
        res["tiktoken_mb_s"] = tiktoken_reference(src, args.ref_mb * 1e6)
        print(f"tiktoken encode_ordinary, 1 process: {res['tiktoken_mb_s']:.2f} MB/s", flush=True)
        prepared = {}
        for procs in [int(x) for x in args.procs.split(",")]:
            out = os.path.join(work, f"prepared_{procs}")
            _, wall, _, rss = child([sys.executable, os.path.join(ROOT, "data.py"), "prepare", src, out,
                                     "--procs", str(procs), "--quiet"], env)
            res[f"prepare_procs{procs}"] = dict(mb_s=text_bytes / 1e6 / wall, wall_s=wall, cpu_s=child.cpu_s,
                                                peak_rss_mb=rss, load1=os.getloadavg()[0])
            print(f"prepare --procs {procs}: {text_bytes / 1e6 / wall:.2f} MB/s ({wall:.0f}s wall, {child.cpu_s:.0f}s "
                  f"CPU, peak RSS {rss:.0f} MB)", flush=True)
            prepared[procs] = out
        outs = list(prepared.values())
        same = [json.load(open(os.path.join(o, "manifest.json")))["shards"] for o in outs]
        res["prepared_identical"] = all([s["sha256"] for s in x] == [s["sha256"] for s in same[0]] for x in same)
        m = json.load(open(os.path.join(outs[0], "manifest.json")))
        res["tokens"] = dict(train=m["n_train_tokens"], val=m["n_val_tokens"], shards=len(m["shards"]))
        cache = os.path.join(work, "cache")
        res["start_a_prepared"] = median_probe(outs[0], cache, env)
        res["start_b_bundled_cold"] = probe("", cache, env)
        res["start_b_bundled"] = median_probe("", cache, env)
        shards = os.path.join(work, "fineweb")
        numpy_shards(shards, min(m["n_train_tokens"], 2 * 10 ** 8), 10 ** 7, 5 * 10 ** 7)
        res["start_c_shards_first"] = probe(shards, cache, env)
        res["start_c_shards"] = median_probe(shards, cache, env)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    a, b = res["start_a_prepared"], res["start_b_bundled"]
    res["targets"] = dict(start_within_2s=a["ready_s"] - b["ready_s"] <= 2, rss_within_200mb=a["rss_mb"] - b["rss_mb"] <= 200)
    report(res)
    path = args.json or os.path.join(args.dir, "bench_data.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=2)
    print(f"wrote {path}")


def report(res):
    c, t = res["corpus"], res["tokens"]
    print(f"\ncorpus: {c['text_mb']:,.0f} MB of text ({c['file_mb']:,.0f} MB .jsonl), {c['docs']:,} documents -> "
          f"{t['train']:,} train + {t['val']:,} val tokens in {t['shards']} shards")
    print(f"{'throughput':<44}{'MB/s':>8}{'wall s':>9}{'CPU s':>8}{'peak RSS MB':>13}")
    print(f"{'tiktoken encode_ordinary, 1 process':<44}{res['tiktoken_mb_s']:>8.2f}")
    for k, v in res.items():
        if k.startswith("prepare_procs"):
            print(f"{'data.py prepare --procs ' + k[13:]:<44}{v['mb_s']:>8.2f}{v['wall_s']:>9.0f}{v['cpu_s']:>8.0f}"
                  f"{v['peak_rss_mb']:>13.0f}")
    loads = ", ".join(f"{v['load1']:.1f}" for k, v in res.items() if k.startswith("prepare_procs"))
    print(f"(1-minute load average at the end of each prepare: {loads}, on {os.cpu_count()} cores)")
    print(f"(shards identical across --procs: {res['prepared_identical']})")
    print(f"\n{'start-up: spawn -> corpus + first batch':<44}{'ready s':>8}{'import':>8}{'load':>8}{'batch':>8}"
          f"{'RSS MB':>8}")
    names = dict(start_a_prepared="(a) prepared corpus", start_b_bundled_cold="(b) bundled, cold cache (prepares)",
                 start_b_bundled="(b) bundled, warm cache", start_c_shards_first="(c) numpy shards, first (validates)",
                 start_c_shards="(c) numpy shards, later starts")
    for k, name in names.items():
        r = res[k]
        print(f"{name:<44}{r['ready_s']:>8.2f}{r['import_s']:>8.2f}{r['load_s']:>8.2f}{r['batch_s']:>8.3f}"
              f"{r['rss_mb']:>8.0f}")
    print(f"targets: (a) start within 2 s of (b): {res['targets']['start_within_2s']}; "
          f"RSS within 200 MB: {res['targets']['rss_within_200mb']}")


if __name__ == "__main__":
    main()
