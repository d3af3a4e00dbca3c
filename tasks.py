"""
Synthetic tasks: generated here, scored here. Used by train.py (task mixing and the
pure algorithmic-task mode) and by evaluate.py (scoring models past their training length).

A. retrieval samples (passkey 2305.16300; RULER 2404.06654; JSON key-value 2307.03172)
B. scoring without free generation: teacher-forced log-prob, argmax exact match, ranking
C. training mix: one fixed-length sequence made of samples + filler
D. algorithmic train-short / test-long tasks over a tiny symbolic vocabulary

Everything is deterministic given the random.Random passed in. Tokenizer = a tiktoken.Encoding;
prompts are built by concatenating separately encoded pieces (each piece starts at a natural
pre-token boundary, usually a space), never by re-encoding the whole text.
"""
import functools
import math
import random
from collections import Counter

import numpy as np
import torch

# -----------------------------------------------------------------------------
# text material (plain ASCII; words below are single tokens in cl100k's first 4096 ranks)

FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
WORDS = """able about above account action address after again against along amount area around
array attack author away back base become before begin being below best better between black
block body book border both break build button call card care case catch cell change check child
city class clear client close code color column come command comment company config content
control copy cost could country course cover create current custom data date days deal default
design device display does doing done double down during each echo effect element email enough
error even event every example except face fact fail false family field file final find fire
first float follow font food form format found four free full future game give global going good
great group grow hand handle hard have head health height help here high history hold home hope
host house human image import index info input item java json just keep kind know label large
last late lead learn least left length less level life light like limit line link list little
live load local long look love made main major make many mark market mass match mean media meet
message method might mind miss mode model money month more most move much must name near need
network never news next night node null number object offer often once online only open option
order other output over pack page param parent part pass past path people person pick place plan
play player point port post power present press price print private problem process product
program project public query quick range read real reason record render report request rest
result return review right role room root said same save school search season second section
seem seen select self send sent server service session short should show side sign since single
site size small social some sort source space special stand start state static status step still
stop store story string strong style subject success such super support sure switch system table
take talk target task team tell test text than that their them then there these they thing think
this those three through time title today token told took total track true turn type under until
update user using valid value version very video view visit void wait want watch water website
week well were what when where which while width will window with within without word work world
would write year young your""".split()

N_DISTRACTORS = 4  # alternative answers per sample for ranking


@functools.lru_cache(maxsize=None)
def word_pool(enc, need=0):
    """WORDS that encode to exactly one token with a leading space; ValueError if fewer than
    `need` (a small vocabulary has few whole-word tokens)."""
    pool = tuple(w for w in WORDS if len(enc.encode_ordinary(" " + w)) == 1)
    if len(pool) < need:
        raise ValueError(f"only {len(pool)} single-token words in this vocabulary; the task needs {need}")
    return pool


@functools.lru_cache(maxsize=None)
def _number_len(enc, digits):
    """Most common token count of ' NNNN' for numbers with this many digits (' ' included)."""
    r = random.Random(0)
    c = Counter(len(enc.encode_ordinary(" %d" % r.randrange(10 ** (digits - 1), 10 ** digits))) for _ in range(200))
    return c.most_common(1)[0][0]


def rand_number(enc, rng, digits):
    """Random number string whose ' '-prefixed tokenization has the usual length, so all
    numbers of a task (answer, distractor needles, ranking alternatives) have equal token count.
    (cl100k splits digits into groups of 3; truncated vocabularies split those groups further.)"""
    while True:
        s = str(rng.randrange(10 ** (digits - 1), 10 ** digits))
        if len(enc.encode_ordinary(" " + s)) == _number_len(enc, digits):
            return s


def rand_hex(rng, n=8):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


@functools.lru_cache(maxsize=None)
def _sentence_end_ids(enc):
    ends = set()
    for t in range(enc.n_vocab):
        try:
            s = enc.decode_single_token_bytes(t).decode("utf-8").rstrip(" ")
        except (KeyError, UnicodeDecodeError):
            continue
        if s.endswith((".", "!", "?", "\n")):
            ends.add(t)
    return frozenset(ends)

# -----------------------------------------------------------------------------
# haystacks and needle insertion


def _needle_text(key, value):
    return " One of the special magic numbers for %s is: %s." % (key, value)  # RULER needle


def _haystack(enc, n, rng, haystack=None, exclude=()):
    """At most n filler tokens. haystack: None/"repeat" (FILLER sentences repeated), "needle"
    (distractor needles with keys not in `exclude`), or a list of token ids (random window of a
    corpus, exactly n tokens). Generated filler stops at a whole sentence (a few tokens short)."""
    if n <= 0:
        return []
    if haystack is None or (isinstance(haystack, str) and haystack == "repeat"):
        sents = [enc.encode_ordinary(" " + s.strip(" .") + ".") for s in FILLER.split(". ")]
        ids = []
        while len(ids) + len(sents[0]) <= n:
            ids += sents[0]
            sents = sents[1:] + sents[:1]
        return ids
    if isinstance(haystack, str):
        assert haystack == "needle", "unknown haystack %r" % haystack
        keys = [w for w in word_pool(enc) if w not in exclude]
        ids = []
        while True:
            s = enc.encode_ordinary(_needle_text(rng.choice(keys), rand_number(enc, rng, 7)))
            if len(ids) + len(s) > n:
                break
            ids += s
        return ids + _haystack(enc, n - len(ids), rng)  # top up with filler sentences
    if len(haystack) <= n:  # short corpus: tile it
        corpus = [int(t) for t in haystack]
        return (corpus * (n // max(len(corpus), 1) + 1))[:n]
    i = rng.randrange(len(haystack) - n + 1)
    return [int(t) for t in haystack[i:i + n]]  # list, numpy array or tensor of ids


def _snap(enc, hay, pos):
    """Move pos to the nearest sentence boundary within a small window (else keep it)."""
    ends = _sentence_end_ids(enc)
    for d in range(max(16, len(hay) // 20) + 1):
        for p in (pos - d, pos + d):
            if 0 <= p <= len(hay) and (p == 0 or p == len(hay) or hay[p - 1] in ends):
                return p
    return pos


def _depth_pos(enc, hay, depth):
    return _snap(enc, hay, round(depth * len(hay)))


def _insert(hay, items):
    """items: list of (pos, ids). Insert each ids at haystack position pos (stable for equal pos).
    Returns (tokens, start index of each item in the output, in item order)."""
    order = sorted(range(len(items)), key=lambda i: (items[i][0], i))
    out, starts, prev = [], [0] * len(items), 0
    for i in order:
        pos, ids = items[i]
        out += hay[prev:pos]
        starts[i] = len(out)
        out += ids
        prev = pos
    return out + hay[prev:], starts


def _sample(task, prompt_ids, answer_ids, distractor_ids, depth, length, needle_pos=None):
    return {"task": task, "prompt_ids": prompt_ids, "answer_ids": answer_ids,
            "distractor_ids": distractor_ids, "depth": float(depth), "length": length,
            "needle_pos": needle_pos}


def _budget(task, length, *parts):
    n = length - sum(len(p) for p in parts)
    if n < 0:
        raise ValueError("length %d too short for task %s" % (length, task))
    return n


def _fresh(enc, rng, answer_ids, make, candidates=(), k=N_DISTRACTORS):
    """k distinct alternatives with the same token count as the answer: first from `candidates`
    (texts), then from make(rng) until enough."""
    out, seen = [], {tuple(answer_ids)}
    cands = list(candidates)
    rng.shuffle(cands)
    for _ in range(10000):
        if len(out) == k:
            return out
        ids = enc.encode_ordinary(cands.pop(0) if cands else make(rng))
        if len(ids) == len(answer_ids) and tuple(ids) not in seen:
            seen.add(tuple(ids))
            out.append(ids)
    raise RuntimeError("could not build %d distractors" % k)

# -----------------------------------------------------------------------------
# A. retrieval tasks: gen_<task>(enc, length, depth, rng, haystack=None) -> sample dict
# length counts prompt + answer tokens; depth in [0, 1] places the (queried) needle.


def gen_passkey(enc, length, depth, rng, haystack=None):
    # passkey retrieval, Mohtashami & Jaggi, arXiv 2305.16300
    head = enc.encode_ordinary("There is an important info hidden inside a lot of irrelevant text. "
                               "Find it and memorize it. I will quiz you about the important information there.")
    key = rand_number(enc, rng, 5)
    needle = enc.encode_ordinary(" The pass key is %s. Remember it. %s is the pass key." % (key, key))
    question = enc.encode_ordinary(" What is the pass key? The pass key is")
    answer = enc.encode_ordinary(" " + key)
    hay = _haystack(enc, _budget("passkey", length, head, needle, question, answer), rng, haystack)
    body, (pos,) = _insert(hay, [(_depth_pos(enc, hay, depth), needle)])
    distract = _fresh(enc, rng, answer, lambda r: " " + rand_number(enc, r, 5))
    return _sample("passkey", head + body + question, answer, distract, depth, length, len(head) + pos)


def gen_passkey_short(enc, length, depth, rng, haystack=None):
    # passkey retrieval (arXiv 2305.16300) without the instruction head and with one mention of the
    # key: fits a 64-token context at vocabulary 1024 (passkey needs ~120), for tiny text models'
    # pretraining task mix (the long-context study) and their exact match at the target
    key = rand_number(enc, rng, 5)
    needle = enc.encode_ordinary(" The pass key is %s." % key)
    question = enc.encode_ordinary(" The pass key is")
    answer = enc.encode_ordinary(" " + key)
    hay = _haystack(enc, _budget("passkey_short", length, needle, question, answer), rng, haystack)
    body, (pos,) = _insert(hay, [(_depth_pos(enc, hay, depth), needle)])
    distract = _fresh(enc, rng, answer, lambda r: " " + rand_number(enc, r, 5))
    return _sample("passkey_short", body + question, answer, distract, depth, length, pos)


def _niah(task, enc, length, depth, rng, haystack, n_keys=1, n_values=1, n_queries=1):
    # RULER needle-in-a-haystack family, arXiv 2404.06654 (7-digit values, word keys)
    keys = rng.sample(word_pool(enc), n_keys)
    values = {k: [rand_number(enc, rng, 7) for _ in range(n_values)] for k in keys}
    needles = [(k, v) for k in keys for v in values[k]]  # needles[0] = first queried needle
    needle_ids = [enc.encode_ordinary(_needle_text(k, v)) for k, v in needles]
    head = enc.encode_ordinary("Some special magic numbers are hidden within the following text. "
                               "Make sure to memorize it. I will quiz you about the numbers afterwards.")
    q = keys[:n_queries]
    qs = q[0] if n_queries == 1 else ", ".join(q[:-1]) + " and " + q[-1]
    if n_values > 1 or n_queries > 1:
        question = " What are all the special magic numbers for %s? The special magic numbers for %s are" % (qs, qs)
    else:
        question = " What is the special magic number for %s? The special magic number for %s is" % (qs, qs)
    question = enc.encode_ordinary(question)
    n_ans = max(n_values, n_queries)  # all numbers have the same token count: estimate is exact
    n = _budget(task, length, head, question, *needle_ids, enc.encode_ordinary(" " + ", ".join([needles[0][1]] * n_ans)))
    hay = _haystack(enc, n, rng, haystack, exclude=keys)
    items = [(_depth_pos(enc, hay, depth), needle_ids[0])]
    items += [(_snap(enc, hay, rng.randint(0, len(hay))), ids) for ids in needle_ids[1:]]
    body, starts = _insert(hay, items)
    if n_values > 1:  # all values of the key, in the order they appear in the text
        vals = [needles[i][1] for i in sorted(range(len(needles)), key=lambda i: (starts[i], i))]
    else:  # one value per queried key, in query order
        vals = [values[k][0] for k in q]
    text = lambda vs: " " + ", ".join(vs)
    answer = enc.encode_ordinary(text(vals))
    cands = [text(vals[i:] + vals[:i]) for i in range(1, len(vals))]  # wrong order / wrong key
    cands += [text([values[k][0]]) for k in keys[n_queries:]] if n_values == 1 else []
    distract = _fresh(enc, rng, answer, lambda r: text([rand_number(enc, r, 7) for _ in vals]), cands)
    return _sample(task, head + body + question, answer, distract, depth, length, len(head) + starts[0])


def gen_niah_single(enc, length, depth, rng, haystack=None):
    return _niah("niah_single", enc, length, depth, rng, haystack)


def gen_niah_multikey(enc, length, depth, rng, haystack=None):
    return _niah("niah_multikey", enc, length, depth, rng, haystack, n_keys=4)


def gen_niah_multivalue(enc, length, depth, rng, haystack=None):
    return _niah("niah_multivalue", enc, length, depth, rng, haystack, n_values=4)


def gen_niah_multiquery(enc, length, depth, rng, haystack=None):
    return _niah("niah_multiquery", enc, length, depth, rng, haystack, n_keys=4, n_queries=4)


def gen_vt(enc, length, depth, rng, haystack=None, n_hops=4, n_chains=2):
    # RULER variable tracking, arXiv 2404.06654: chain VAR A = N, VAR B = VAR A, ...; the other
    # chains are distractors. Names are single capital letters (one token each).
    letters = rng.sample("ABCDEFGHIJKLMNOPQRSTUVWXYZ", n_chains * (n_hops + 1))
    chains = [letters[c * (n_hops + 1):(c + 1) * (n_hops + 1)] for c in range(n_chains)]
    vals = [rand_number(enc, rng, 5) for _ in range(n_chains)]
    while len(set(vals)) < n_chains:
        vals = [rand_number(enc, rng, 5) for _ in range(n_chains)]
    stmts = [[enc.encode_ordinary(" VAR %s = %s." % (ch[0], v))] +
             [enc.encode_ordinary(" VAR %s = VAR %s." % (b, a)) for a, b in zip(ch, ch[1:])]
             for ch, v in zip(chains, vals)]
    question = enc.encode_ordinary(" Question: Which variables are assigned the value %s? "
                                   "Answer: The variables assigned the value %s are:" % (vals[0], vals[0]))
    text = lambda names: "".join(" " + x for x in names)
    answer = enc.encode_ordinary(text(chains[0]))
    hay = _haystack(enc, _budget("vt", length, question, answer, *sum(stmts, [])), rng, haystack)
    p0 = _depth_pos(enc, hay, depth)
    later = sorted(max(p0, _snap(enc, hay, rng.randint(p0, len(hay)))) for _ in stmts[0][1:])
    items = list(zip([p0] + later, stmts[0]))  # queried chain: first statement at depth, rest after
    for ch in stmts[1:]:
        items += list(zip(sorted(_snap(enc, hay, rng.randint(0, len(hay))) for _ in ch), ch))
    body, starts = _insert(hay, items)
    cands = [text(ch) for ch in chains[1:]]
    distract = _fresh(enc, rng, answer, lambda r: text(r.sample(letters, n_hops + 1)), cands)
    return _sample("vt", body + question, answer, distract, depth, length, starts[0])


def _swap_one(enc, rng, words, others, k=N_DISTRACTORS):
    """k distinct alternatives to the word list `words`, each with one word replaced from `others`."""
    text = lambda ws: "".join(" " + w for w in ws)
    def make(r):
        ws = list(words)
        ws[r.randrange(len(ws))] = r.choice(others)
        return text(ws)
    return _fresh(enc, rng, enc.encode_ordinary(text(words)), make, k=k)


def gen_cwe(enc, length, depth, rng, haystack=None, n_common=5):
    # RULER common-words extraction, arXiv 2404.06654 (list without numbering, to save tokens).
    # n_common words appear c times each, every other word fewer times. No needle: depth unused.
    head = enc.encode_ordinary("Below is a list of words. In these words, some appear more often "
                               "than others. Memorize the ones that appear most often.\n")
    question = enc.encode_ordinary("\nQuestion: What are the %d most common words in the above list? "
                                   "Answer: The top %d words that appear most often in the list are:" % (n_common, n_common))
    pool = list(word_pool(enc, need=n_common + N_DISTRACTORS + 5))
    rng.shuffle(pool)
    common, rare = pool[:n_common], pool[n_common:]
    n = _budget("cwe", length, head, question, [0] * n_common)  # one token per word
    c = max(3, n // (4 * n_common))
    f = max(1, math.ceil((n - n_common * c) / len(rare)))  # max count of a rare word
    c = max(c, f + 2)
    if n < n_common * c:
        raise ValueError("length %d too short for task cwe" % length)
    words = common * c + (rare * f)[:n - n_common * c]
    rng.shuffle(words)
    order = sorted(common, key=words.index)  # answer: common words in order of first appearance
    answer = enc.encode_ordinary("".join(" " + w for w in order))
    body = enc.encode_ordinary("".join(" " + w for w in words))
    return _sample("cwe", head + body + question, answer, _swap_one(enc, rng, order, rare), depth, length)


def gen_fwe(enc, length, depth, rng, haystack=None, alpha=2.0, n_vocab=30):
    # RULER frequent-words extraction, arXiv 2404.06654: word counts ~ Zipf(alpha); answer = the
    # three most frequent words, most frequent first. Counts are set (not sampled) so the top 4
    # are strictly decreasing and the answer is unique. No needle: depth unused.
    head = enc.encode_ordinary("Read the following coded text and track the frequency of each coded word. "
                               "Find the three most frequently appeared coded words.\n")
    question = enc.encode_ordinary("\nQuestion: What are the three most frequently appeared words in the "
                                   "above coded text? Answer: The three most frequently appeared words are:")
    pool = list(word_pool(enc, need=n_vocab))
    rng.shuffle(pool)
    vocab = pool[:n_vocab]
    n = _budget("fwe", length, head, question, [0] * 3)
    h = sum(r ** -alpha for r in range(1, n_vocab + 1))
    counts = [int(n * r ** -alpha / h) for r in range(1, n_vocab + 1)]
    counts[0] += n - sum(counts)
    if not counts[0] > counts[1] > counts[2] > counts[3]:
        raise ValueError("length %d too short for task fwe" % length)
    words = [w for w, c in zip(vocab, counts) for _ in range(c)]
    rng.shuffle(words)
    answer = enc.encode_ordinary("".join(" " + w for w in vocab[:3]))
    body = enc.encode_ordinary("".join(" " + w for w in words))
    return _sample("fwe", head + body + question, answer, _swap_one(enc, rng, vocab[:3], vocab[3:8]), depth, length)


def gen_json_kv(enc, length, depth, rng, haystack=None):
    # JSON key-value retrieval, Liu et al. "Lost in the Middle", arXiv 2307.03172 (8-hex keys
    # and values instead of UUIDs). depth = relative position of the queried pair among pairs.
    head = enc.encode_ordinary("Extract the value corresponding to the specified key in the JSON object below.\n\nJSON data:\n{")
    key, value = rand_hex(rng), rand_hex(rng)
    question = enc.encode_ordinary('}\n\nKey: "%s"\nCorresponding value:' % key)
    answer = enc.encode_ordinary(' "%s"' % value)
    pair = lambda k, v: enc.encode_ordinary(', "%s": "%s"' % (k, v))  # ", " dropped for the first pair below
    qpair = pair(key, value)
    n = _budget("json_kv", length, head, question, answer, qpair)
    pairs, used, seen = [], 0, {key}
    while True:
        k, v = rand_hex(rng), rand_hex(rng)
        if k in seen:
            continue
        ids = pair(k, v)
        if used + len(ids) > n:
            break
        pairs.append((k, v, ids))
        seen.add(k)
        used += len(ids)
    if not pairs:
        raise ValueError("length %d too short for task json_kv" % length)
    i = round(depth * len(pairs))
    pairs.insert(i, (key, value, qpair))
    body, pos = [], 0
    for j, (k, v, ids) in enumerate(pairs):
        ids = enc.encode_ordinary('"%s": "%s"' % (k, v)) if j == 0 else ids
        pos = len(body) + (j > 0) if j == i else pos  # skip the ',' token: needle_pos is at the key
        body += ids
    distract = _fresh(enc, rng, answer, lambda r: ' "%s"' % rand_hex(r), [' "%s"' % v for k, v, _ in pairs if k != key])
    return _sample("json_kv", head + body + question, answer, distract, depth, length, len(head) + pos)


TASKS = {
    "passkey": gen_passkey,
    "passkey_short": gen_passkey_short,
    "niah_single": gen_niah_single,
    "niah_multikey": gen_niah_multikey,
    "niah_multivalue": gen_niah_multivalue,
    "niah_multiquery": gen_niah_multiquery,
    "vt": gen_vt,
    "cwe": gen_cwe,
    "fwe": gen_fwe,
    "json_kv": gen_json_kv,
}


def make_sample(task, enc, length, depth, seed, haystack=None):
    """Same seed -> same keys/values at every depth and length (controlled sweeps)."""
    return TASKS[task](enc, length, depth, random.Random(seed), haystack)


def depth_grid(n):
    """n evenly spaced depths in [0, 1] (both ends included); n=1 -> [0.5]."""
    return [0.5] if n == 1 else [i / (n - 1) for i in range(n)]

# -----------------------------------------------------------------------------
# B. scoring without free generation. logprobs: [T, V] log-softmax, row t predicts token t+1.


def score_answer(logprobs, answer_start, answer_ids):
    """Teacher-forced log p(answer) and argmax exact match on every answer token.
    torch.argmax breaks ties toward the lowest token id (so a uniform model predicts id 0)."""
    dev = logprobs.device
    rows = torch.arange(answer_start - 1, answer_start - 1 + len(answer_ids), device=dev)
    tgt = torch.tensor(answer_ids, dtype=torch.long, device=dev)
    lp = logprobs[rows].float()
    return {"logprob": lp[torch.arange(len(answer_ids), device=dev), tgt].sum().item(),
            "exact": float(bool((lp.argmax(-1) == tgt).all()))}


def rank_credit(scores, tol=1e-6):
    """Rank credit of the true answer (scores[0], its total teacher-forced log-prob) among the
    answer and its distractors. Tie rule: the credit is split, 1/m when the true answer is among
    m candidates tied (within tol) for the best score -- the expected value of a random tie-break,
    without randomness. So a uniform model scores exactly 1/(k+1); a strictly best true answer 1.0."""
    best = max(scores)
    if scores[0] < best - tol:
        return 0.0
    return 1.0 / sum(s >= best - tol for s in scores)


# -----------------------------------------------------------------------------
# C. training mix: samples of random length and task, eot between, filler at the end


def task_sequence(tasks, enc, length, rng, haystack=None, min_len=128):
    """(ids, answer_mask), both lists of exactly `length` ints: samples back to back, each
    followed by its answer and end-of-text; answer_mask is 1 on answer tokens, so training can
    score the whole text (answers included) or only the answers. For x/y pairs ask for
    block_size + 1."""
    ids, mask, fails = [], [], 0
    while length - len(ids) - 1 >= min_len and fails < 8:
        room = length - len(ids) - 1
        task = rng.choice(list(tasks))
        try:
            s = TASKS[task](enc, rng.randint(min_len, room), rng.random(), rng, haystack)
        except ValueError:  # too short for this task (multi-needle tasks need ~180): draw again
            fails += 1
            continue
        ids += s["prompt_ids"] + s["answer_ids"] + [enc.eot_token]
        mask += [0] * len(s["prompt_ids"]) + [1] * len(s["answer_ids"]) + [0]
    if len(ids) < length:
        ids += [enc.eot_token] + _haystack(enc, length - len(ids) - 1, rng, haystack if not isinstance(haystack, str) else None)
        ids += [enc.eot_token] * (length - len(ids))
    return ids, mask + [0] * (length - len(mask))

# -----------------------------------------------------------------------------
# D. algorithmic tasks, train short / test long (e.g. Deletang et al. arXiv 2207.02098;
# Zhou et al. arXiv 2310.16028). ids = [PAD]*offset + [BOS] + input + [SEP] + answer + [EOS]

ALGO_VOCAB = ["PAD", "BOS", "SEP", "EOS"] + list("0123456789") + list("abcdefghijklmnopqrstuvwxyz") + ["+", "?"]
ALGO_ID = {s: i for i, s in enumerate(ALGO_VOCAB)}
PAD, BOS, SEP, EOS = 0, 1, 2, 3
ALGO_TASKS = ["copy", "reverse", "sort", "parity", "parity_scratch", "majority", "addition", "assoc_recall"]


def algo_input(task, n, rng):
    """Input symbols for one example of size n.
    copy/reverse/sort: n digits. parity/parity_scratch/majority: n bits. addition: two n-bit
    binary numbers, little-endian (least significant bit first), joined by '+'. assoc_recall: n
    (letter key, digit value) pairs, then '?' and a query key; keys are distinct when n <= 26, else repeat."""
    if task in ("copy", "reverse", "sort"):
        return [rng.choice("0123456789") for _ in range(n)]
    if task in ("parity", "parity_scratch", "majority", "addition"):
        x = [rng.choice("01") for _ in range(n)]
        return x + ["+"] + [rng.choice("01") for _ in range(n)] if task == "addition" else x
    if task == "assoc_recall":
        letters = "abcdefghijklmnopqrstuvwxyz"
        keys = rng.sample(letters, n) if n <= 26 else [rng.choice(letters) for _ in range(n)]
        pairs = [s for k in keys for s in (k, rng.choice("0123456789"))]
        return pairs + ["?", rng.choice(keys)]
    raise ValueError("unknown algo task %r" % task)


def algo_answer(task, x):
    """Answer symbols for input symbols x (pure; the ground truth for every algo task).
    parity: one bit, the parity of x (a single-token answer transformers are known not to learn
    at these sizes). parity_scratch: the scratchpad form (Anil et al. arXiv 2207.04901): n bits,
    bit i = parity of x[:i+1], so each answer bit needs only the previous answer bit and input bit
    i; the last bit is the parity, and exact match is over the whole scratchpad. majority: '1' iff more than half the bits are 1 (ties -> '0'). addition: n+1 bits,
    little-endian. assoc_recall: value of the query key's latest occurrence."""
    if task == "copy":
        return list(x)
    if task == "reverse":
        return list(x)[::-1]
    if task == "sort":
        return sorted(x)
    if task == "parity":
        return [str(x.count("1") % 2)]
    if task == "parity_scratch":
        return [str(x[:i + 1].count("1") % 2) for i in range(len(x))]
    if task == "majority":
        return ["1" if 2 * x.count("1") > len(x) else "0"]
    if task == "addition":
        n = (len(x) - 1) // 2
        num = lambda bits: int("".join(reversed(bits)), 2)
        total = num(x[:n]) + num(x[n + 1:])
        return [str((total >> i) & 1) for i in range(n + 1)]
    if task == "assoc_recall":
        return [v for k, v in zip(x[:-2:2], x[1:-2:2]) if k == x[-1]][-1:]
    raise ValueError("unknown algo task %r" % task)


def algo_example(task, n, rng, offset=0):
    """(ids, answer_mask): answer_mask is 1 on the answer tokens and the final EOS."""
    x = algo_input(task, n, rng)
    ans = algo_answer(task, x)
    ids = [PAD] * offset + [BOS] + [ALGO_ID[s] for s in x] + [SEP] + [ALGO_ID[s] for s in ans] + [EOS]
    mask = [0] * (len(ids) - len(ans) - 1) + [1] * (len(ans) + 1)
    return ids, mask


def algo_example_len(task, n, offset=0):
    """Tokens in an example of size n with `offset` PADs (fixed by task and n: answers have a set length)."""
    return len(algo_example(task, n, random.Random(0), offset)[0])


def algo_width(task, lengths, offset_max=0):
    """Columns of the longest training example of a run (inputs up to lengths[1], offsets up to
    offset_max): the one width of its batches under --compile (algo_targets)."""
    return algo_example_len(task, lengths[1], offset_max) - 1


def algo_batch(task, n_min, n_max, batch, block, rng, offset_max=0, cover=False):
    """x, y, mask: int64 [batch, block]; y = x shifted by one; mask[b, t] = 1 where y[b, t] is an
    answer token. Sizes n ~ U[n_min, n_max], or with cover=True n_min + b mod (n_max - n_min + 1)
    (evaluation: every size of the range appears, equally often); optional random left-pad of
    0..offset_max PADs (random position offsets). Right-padded with PAD (mask 0)."""
    x, y = np.full((batch, block), PAD, dtype=np.int64), np.full((batch, block), PAD, dtype=np.int64)
    mask = np.zeros((batch, block), dtype=np.int64)  # numpy rows, one tensor each at the end: 3 per row cost more
    for b in range(batch):                           # than the examples themselves
        n = n_min + b % (n_max - n_min + 1) if cover else rng.randint(n_min, n_max)
        ids, m = algo_example(task, n, rng, rng.randint(0, offset_max))
        if len(ids) > block + 1:
            raise ValueError("example of %d tokens does not fit block %d" % (len(ids), block))
        t = len(ids) - 1
        x[b, :t], y[b, :t], mask[b, :t] = ids[:-1], ids[1:], m[1:]
    return torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(mask)


def algo_exact_match(pred_ids, target_ids, mask):
    """Per-example 1.0 if every masked position is predicted right, else 0.0 (shape [batch])."""
    ok = (pred_ids == target_ids) | (mask == 0)
    return ok.all(dim=-1).float()


def algo_lengths(spec):
    """'min,max' input lengths -> (min, max). Raises ValueError."""
    try:
        lo, hi = (int(v) for v in spec.split(","))
    except ValueError:
        lo = hi = 0
    if not 1 <= lo <= hi:
        raise ValueError(f"malformed --algo_len {spec!r}: min,max with 1 <= min <= max")
    return lo, hi


def algo_targets(task, lengths, rows, block, seed, offset_max=0, cover=False, width=0):
    """A training or evaluation batch of an algorithmic task: x, and y with -1 (no loss) everywhere
    but the answer tokens. A pure function of seed (resume and DDP rely on it). The columns past
    the last answer token of every row (all PAD, no loss) are dropped: the model is causal, so
    the loss and every kept prediction are unchanged, and a batch of short examples does not pay
    for a whole padded block (positional tables come from the model's config, never from T).
    width > 0 (a compiled model, train.py --compile): every batch has that many columns instead,
    at least the longest example of the run's lengths (algo_width); the extra columns are PAD with
    no loss, so the loss and the kept predictions mean the same (equal up to float rounding): a
    width that changed every step made dynamo recompile the blocks every step, up to its limit."""
    x, y, mask = algo_batch(task, *lengths, rows, block, random.Random(str(seed)), offset_max, cover)
    used = width or int(mask.any(0).nonzero().max()) + 1
    return x[:, :used], y[:, :used].masked_fill(mask[:, :used] == 0, -1)


@torch.no_grad()
@torch.no_grad()
def algo_eval(model, task, lengths, block, seed=0, offset_max=0, n=256, device="cpu"):
    """Answer-token loss, exact match and answer-token accuracy (the share of answer tokens predicted
    right: graded where exact match sits at 0) of model on n fixed examples with input lengths in
    `lengths` (min, max), every length of the range equally often (n >= max - min + 1): the one
    evaluation of algorithmic runs, in training and in evaluate.py. fp32 whatever autocast the
    caller runs under: an exact-match score must not hinge on bf16 ties between logits."""
    x, y = algo_targets(task, lengths, n, block, ("val", seed), offset_max, cover=True)
    was = model.training
    model.eval()
    with torch.autocast(torch.device(device).type, enabled=False):
        logits, loss = model(x.to(device), y.to(device))
    model.train(was)
    mask = (y >= 0).long()
    pred = logits.argmax(-1).cpu()
    acc = algo_exact_match(pred, y.clamp_min(0), mask).float().mean().item()
    token_acc = ((pred == y) & (mask == 1)).sum().item() / max(int(mask.sum()), 1)
    return dict(loss=loss.item(), acc=acc, token_acc=token_acc, bpb=None, tokens=int(mask.sum()))
