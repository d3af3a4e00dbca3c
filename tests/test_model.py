"""Correctness of model.py's architectural flags: tiny dims, CPU, one thread (conftest)."""
import io
import math

import pytest
import torch
import torch.nn.functional as F

import train
from conftest import tiny_config
from model import (GPT, GPTConfig, QATLinear, alibi_attention, alibi_slopes, apply_rope, attend,
                   band_attention, hope_record, layer_plan)

V = 64


def cfg(**kw):
    base = dict(vocab_size=V, block_size=32, n_layer=2, n_head=4, n_kv_head=4, n_embd=32)
    return GPTConfig(**{**base, **kw})


def model(seed=0, **kw):
    """A GPT whose zero-initialised output projections are made random, so every branch matters."""
    torch.manual_seed(seed)
    m = GPT(cfg(**kw))
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("c_proj.weight"):
                p.normal_(std=p.shape[1] ** -0.5)
    return m.eval()


def tokens(T, B=2, seed=1):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def reference_attention(q, k, v, window=0, slopes=None):
    """Dense T x T reference: explicit causal (band) mask, ALiBi bias, repeated KV heads."""
    T, g = q.shape[2], q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None]
    allowed = (j <= i) & ((i - j < window) if window else True)
    bias = torch.zeros(q.shape[1], T, T)
    if slopes is not None:
        bias = -slopes.view(-1, 1, 1) * (i - j).float()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.masked_fill(~allowed, float("-inf")))


# Small grid of flag combinations: every one builds, trains a step and round-trips its state_dict.
GRID = [
    {},
    dict(qk_norm="layer"),
    dict(qk_norm="head", n_kv_head=2),
    dict(norm_order="post"),
    dict(window=8, global_every=2),
    dict(n_layer=3, window=8, layer_pattern="w,g,w"),
    dict(pos="nope"),
    dict(pos="alibi", window=8, global_every=2),
    dict(pos="hope", hope_cutoff=8),
    dict(pos="expe", expe_dims=4),
    dict(pos="expe", expe_on="qk", expe_dims=4),
    dict(pos="learned"),
    dict(pos="sinusoidal"),
    dict(rope_frac=0.5),
    dict(n_layer=3, pos_pattern="rope,alibi,nope"),
    dict(n_layer=4, window=8, global_every=4, swan=True, logn_scale=True),
    dict(chunk_layers="all", chunk_size=8, chunk_topk=2),
    dict(chunk_layers="1", chunk_size=8, chunk_encoder="linear", chunk_bypass=False, chunk_dense_train=True),
    dict(n_layer=3, chunk_layers="1", chunk_size=8, window=4, n_kv_head=2, qk_norm="head", norm_order="post"),
    dict(window=8, global_every=2, rope_scaling="yarn", rope_factor=4.0, rope_scaling_layers="global"),
    dict(mlp="swiglu", pos="alibi", qk_norm="layer", n_kv_head=1, bits=4),
]


@pytest.mark.parametrize("flags", GRID, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()) or "default")
def test_grid_builds_trains_and_round_trips(flags):
    torch.manual_seed(0)
    m = GPT(cfg(**flags))
    for name, p in m.named_parameters():  # Muon takes the 2-D block params; everything else is 1-D or an embedding
        assert p.ndim == 1 or name.startswith(("blocks.", "wte.", "wpe.", "lm_head.")), name
    x = tokens(32)
    before = m(x)[0].detach()
    _, loss = m(x, tokens(32, seed=2))
    loss.backward()
    assert math.isfinite(loss.item())
    torch.optim.SGD(m.parameters(), lr=0.1).step()
    after = m(x)[0].detach()
    assert not torch.equal(before, after)
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    torch.manual_seed(123)
    m2 = GPT(cfg(**flags))
    m2.load_state_dict(torch.load(io.BytesIO(buf.getvalue()), weights_only=True))
    assert torch.equal(m2(x)[0], after)


CAUSAL = [f for f in GRID if f != dict(pos="learned")] + [
    dict(pos="learned", window=8, global_every=2),
    dict(chunk_layers="all", chunk_size=8, chunk_topk=3, window=8, block_size=64),
]


@pytest.mark.parametrize("flags", CAUSAL, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()) or "default")
def test_causality(flags):
    """Changing a future token never changes an earlier logit (T spans several windows and chunks)."""
    m = model(**flags)
    T = 64 if flags.get("pos") != "learned" else 32
    x = tokens(T, B=1)
    with torch.no_grad():
        a = m(x)[0]
        for p in (T // 2 + 3, T - 1):
            y = x.clone()
            y[0, p] = (y[0, p] + 1) % V
            b = m(y)[0]
            assert torch.allclose(a[:, :p], b[:, :p], atol=1e-6, rtol=0), p
            assert not torch.allclose(a[:, p], b[:, p])


@pytest.mark.parametrize("T,W", [(64, 16), (50, 16), (37, 8), (16, 16)])
@pytest.mark.parametrize("alibi", [False, True])
def test_windowed_equals_dense_band_mask(T, W, alibi):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, T, 8), torch.randn(2, 2, T, 8), torch.randn(2, 2, T, 8)
    slopes = alibi_slopes(4) if alibi else None
    ref = reference_attention(q, k, v, W, slopes)
    assert torch.allclose(band_attention(q, k, v, W, slopes), ref, atol=1e-5)
    assert torch.allclose(attend(q, k, v, W, slopes), ref, atol=1e-5)


def test_band_attention_groups_blocks_when_memory_bound(monkeypatch):
    import model as M
    monkeypatch.setattr(M, "MAX_SCORES", 4 * 4 * 8 * 16)  # forces several SDPA calls
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 60, 8), torch.randn(1, 4, 60, 8), torch.randn(1, 4, 60, 8)
    assert torch.allclose(M.band_attention(q, k, v, 8), reference_attention(q, k, v, 8), atol=1e-5)
    assert torch.allclose(M.alibi_attention(q, k, v, alibi_slopes(4)),
                          reference_attention(q, k, v, 0, alibi_slopes(4)), atol=1e-5)


def test_global_alibi_and_gqa_kernels_match_reference():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 40, 8), torch.randn(2, 1, 40, 8), torch.randn(2, 1, 40, 8)
    assert torch.allclose(alibi_attention(q, k, v, alibi_slopes(4)),
                          reference_attention(q, k, v, 0, alibi_slopes(4)), atol=1e-5)
    assert torch.allclose(attend(q, k, v), reference_attention(q, k, v), atol=1e-5)


@pytest.mark.parametrize("flags", [{}, dict(window=8, global_every=2, pos="alibi"), dict(qk_norm="head"),
                                   dict(chunk_layers="1", chunk_size=8)])
def test_gqa_equals_explicit_kv_repetition(flags):
    """n_kv_head=2 gives the same logits as 4 KV heads whose weights repeat each KV head twice."""
    g = model(n_kv_head=2, **flags)
    full = GPT(cfg(n_kv_head=4, **flags)).eval()
    sd = g.state_dict()
    for name, p in list(sd.items()):
        if name.endswith(("c_k.weight", "c_v.weight")):
            sd[name] = p.view(2, -1, p.shape[1]).repeat_interleave(2, 0).reshape(-1, p.shape[1])
    full.load_state_dict(sd)
    x = tokens(64)
    with torch.no_grad():
        assert torch.allclose(g(x)[0], full(x)[0], atol=1e-5)


def test_alibi_slopes():
    # powers of two: the geometric sequence 2^(-8h/H), unchanged
    assert torch.allclose(alibi_slopes(8), torch.tensor([2.0 ** -k for k in range(1, 9)]))
    assert torch.allclose(alibi_slopes(4), torch.tensor([2.0 ** -k for k in (2, 4, 6, 8)]))
    assert torch.allclose(alibi_slopes(16), torch.tensor([2.0 ** (-k / 2) for k in range(1, 17)]))
    # other head counts, by hand from the reference get_slopes: the 4 (8) slopes of the largest power
    # of two, then the 8-head (16-head) slopes at positions 0, 2, ... i.e. the 1st, 3rd, ... of them
    h6 = [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8] + [2 ** -1, 2 ** -3]
    h12 = [2.0 ** -k for k in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]
    assert torch.equal(alibi_slopes(6), torch.tensor(h6))
    assert torch.equal(alibi_slopes(12), torch.tensor(h12))
    assert torch.equal(alibi_slopes(5), torch.tensor([0.25, 2 ** -4, 2 ** -6, 2 ** -8, 0.5]))
    # what the old rule 2^(-8h/H) gave for H = 6: not the reference
    assert not torch.allclose(alibi_slopes(6), torch.tensor([2.0 ** (-8 * h / 6) for h in range(1, 7)]))


def test_hope_keeps_high_frequencies_and_freezes_low_ones():
    m = GPT(cfg(pos="hope", hope_cutoff=16, n_head=2, n_kv_head=2))  # head_dim 16: 8 pairs
    cos_r, sin_r = m.rope_cos_sin(40, "cpu")
    cos_h, sin_h = m.rope_cos_sin(40, "cpu", hope=True)
    wavelen = 2 * math.pi / m.inv_freq_plain
    hi, lo = wavelen <= 16, wavelen > 16
    assert hi.any() and lo.any()
    assert torch.equal(cos_h[:, hi], cos_r[:, hi]) and torch.equal(sin_h[:, hi], sin_r[:, hi])
    assert torch.equal(cos_h[:, lo], torch.ones_like(cos_h[:, lo])) and not sin_h[:, lo].any()
    # on a vector: the dropped pairs are identical at every position (position-independent)
    x = torch.randn(1, 1, 1, 16).expand(1, 1, 40, 16)
    y = apply_rope(x, cos_h, sin_h)
    d = 8
    lo_dims = torch.cat([torch.nonzero(lo).flatten(), torch.nonzero(lo).flatten() + d])
    assert torch.equal(y[..., lo_dims], x[..., lo_dims])
    # default cutoff is block_size
    assert torch.equal(GPT(cfg(pos="hope", n_head=2, n_kv_head=2)).hope_keep, (wavelen <= 32).float())
    # the run record counts the pairs HoPE leaves unrotated (model.hope_record); none without HoPE layers
    assert hope_record(m) == dict(pairs=8, removed=int(lo.sum()), cutoff=16, head_dim=16)
    assert 0 < int(lo.sum()) < 8 and hope_record(GPT(cfg())) is None


def test_hope_model_uses_hope_tables():
    m = model(pos="hope", hope_cutoff=8)
    pe = m.positions(16, "cpu")
    cos, sin = m.rope_cos_sin(16, "cpu", hope=True)
    assert torch.equal(pe["layers"][0][0], cos) and torch.equal(pe["layers"][0][1], sin)
    q, k, _, q0, k0 = m.blocks[0].attn.qkv(torch.randn(1, 16, 32), pe)
    assert torch.equal(q, apply_rope(q0, cos, sin)) and torch.equal(k, apply_rope(k0, cos, sin))


def test_partial_rope_leaves_tail_dims():
    m = model(rope_frac=0.5)  # head_dim 8: the first 4 dims rotate, the last 4 pass through
    assert m.rope_dims == 4
    x = torch.randn(1, 20, 32)
    q, k, _, q0, k0 = m.blocks[0].attn.qkv(x, m.positions(20, "cpu"))
    assert torch.equal(q[..., 4:], q0[..., 4:]) and not torch.equal(q[..., :4], q0[..., :4])


def test_expe_dims_equal_linear_position_function():
    m = model(pos="expe", expe_on="qk", expe_dims=3, expe_start=0.5, expe_slope=0.25, qk_norm="head")
    T = 20
    q, k, _, q0, k0 = m.blocks[1].attn.qkv(torch.randn(2, T, 32), m.positions(T, "cpu"))
    want = (0.5 + 0.25 * torch.arange(T, dtype=torch.float32))[:, None].expand(T, 3)
    for t, t0 in ((q, q0), (k, k0)):
        assert torch.equal(t[..., :3], want.expand_as(t[..., :3]))
        assert torch.equal(t[..., 3:], t0[..., 3:])  # the rest untouched (no rotation)
    # default slope: 1 / block_size
    pe = model(pos="expe", expe_on="qk").positions(T, "cpu")["layers"][0]
    assert torch.allclose(pe[:, 0], 1.0 + torch.arange(T) / 32)


def first_block_input(m, idx):
    """The residual stream entering the first block (after every embedding-level position)."""
    seen = []
    h = m.blocks[0].register_forward_hook(lambda mod, args, out: seen.append(args[0].detach()))
    m(idx)
    h.remove()
    return seen[0]


def test_expe_on_embedding_sets_first_dims_of_first_block_input():
    """ExPE as published (arXiv 2509.19569): dims 0..e-1 of the first block's input are S + theta * n,
    the rest is the token embedding, and no layer adds another positional signal."""
    m = model(pos="expe", expe_dims=3, expe_start=0.5, expe_slope=0.25)
    assert [l.pos for l in m.plan] == ["nope", "nope"]
    idx = tokens(40)  # past block_size: ExPE is defined at every position
    x = first_block_input(m, idx)
    n = torch.arange(40, dtype=torch.float32)
    assert torch.equal(x[..., :3], (0.5 + 0.25 * n)[None, :, None].expand(2, 40, 3))
    assert torch.equal(x[..., 3:], m.wte(idx)[..., 3:])
    # default theta: 1 / block_size
    x = first_block_input(model(pos="expe", expe_dims=2), idx)
    assert torch.allclose(x[0, :, 0], 1.0 + n / 32)


def test_expe_on_embedding_projects_q_and_k_in_fp32_under_autocast():
    """Under bf16 autocast ExPE's embedded positions reach every layer's q and k through fp32
    projections (bf16 would round S + slope * n), as the q/k variant attends in fp32; RoPE's stay bf16."""
    for kw, want in ((dict(pos="expe", expe_dims=3), torch.float32), (dict(), torch.bfloat16)):
        m = model(**kw)
        seen = []
        hooks = [blk.attn.c_k.register_forward_hook(lambda mod, i, o: seen.append(o.dtype)) for blk in m.blocks]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            _, loss = m(tokens(20), tokens(20))
        for h in hooks:
            h.remove()
        assert seen == [want] * len(m.blocks) and torch.isfinite(loss), kw


def test_sinusoidal_equals_the_formula():
    """PE[n, 2i] = sin(n / 10000^(2i/d)), PE[n, 2i+1] = cos(...) (arXiv 1706.03762), added to wte at
    rms 0.02 (the token embedding's init std)."""
    m = model(pos="sinusoidal")
    assert [l.pos for l in m.plan] == ["nope", "nope"]
    idx, d = tokens(40), 32
    want = torch.tensor([[math.sin(n / 10000 ** (i / d)) if i % 2 == 0 else math.cos(n / 10000 ** ((i - 1) / d))
                          for i in range(d)] for n in range(40)])
    x = first_block_input(m, idx)
    assert torch.allclose(x - m.wte(idx), 0.02 * 2 ** 0.5 * want.expand(2, 40, d), atol=1e-6)
    assert abs((x - m.wte(idx)).pow(2).mean().sqrt().item() - 0.02) < 1e-3


def test_learned_positions_refuse_past_block_size():
    m = model(pos="learned")
    m(tokens(32))
    with pytest.raises(ValueError, match="block_size"):
        m(tokens(33))


def test_logn_scaling_is_identity_within_training_length():
    flags = dict(n_layer=3, window=8, global_every=3, swan=True)
    m = model(**flags)
    for T, same in ((32, True), (24, True), (64, False)):
        x = tokens(T)
        with torch.no_grad():
            m.config.logn_scale = False
            off = m(x)[0]
            m.config.logn_scale = True  # switched at evaluation time, no retraining
            on = m(x)[0]
        assert torch.equal(on, off) == same, T
    # a windowed-only model is unaffected at any length
    w = model(window=8)
    x = tokens(64)
    with torch.no_grad():
        off = w(x)[0]
        w.config.logn_scale = True
        assert torch.equal(w(x)[0], off)
    # the factor itself: 1 up to L, ln(pos+1)/ln(L) beyond; rope_original_len sets L
    pe = model(logn_scale=True, rope_original_len=16).positions(64, "cpu")["logn"].flatten()
    assert torch.all(pe[:16] == 1) and torch.isclose(pe[63], torch.tensor(math.log(64) / math.log(16)))


def test_layer_patterns():
    c = cfg(n_layer=8, window=8, global_every=4)
    assert [l.window for l in layer_plan(c)] == [8, 8, 8, 0] * 2
    c = cfg(n_layer=5, window=8, global_every=4, swan=True)
    plan = layer_plan(c)
    assert [l.pos for l in plan] == ["rope", "rope", "rope", "nope", "rope"]
    assert [l.window for l in plan] == [8, 8, 8, 0, 8]
    c = cfg(n_layer=3, window=4, layer_pattern="g,w,g", pos_pattern="alibi,rope,nope")
    assert [(l.window, l.pos) for l in layer_plan(c)] == [(0, "alibi"), (4, "rope"), (0, "nope")]
    assert [l.window for l in layer_plan(cfg(window=8))] == [8, 8]
    assert [l.window for l in layer_plan(cfg())] == [0, 0]
    # chunk layers: local window = window, else chunk_size
    assert [(l.window, l.chunk) for l in layer_plan(cfg(chunk_layers="1", chunk_size=8))] == [(0, False), (8, True)]
    assert [l.window for l in layer_plan(cfg(chunk_layers="all", chunk_size=8, window=4))] == [4, 4]
    # rope_scaling_layers=global: windowed layers keep plain RoPE
    plan = layer_plan(cfg(window=8, global_every=2, rope_scaling_layers="global"))
    assert [l.scaled for l in plan] == [False, True]


def test_qk_norm_shapes_and_effect():
    assert GPT(cfg(qk_norm="layer")).blocks[0].attn.q_norm.weight.shape == (32,)
    assert GPT(cfg(qk_norm="layer", n_kv_head=2)).blocks[0].attn.k_norm.weight.shape == (16,)
    assert GPT(cfg(qk_norm="head")).blocks[0].attn.q_norm.weight.shape == (8,)
    m = model(qk_norm="head", pos="nope")
    q, k, _, _, _ = m.blocks[0].attn.qkv(torch.randn(1, 10, 32) * 5, m.positions(10, "cpu"))
    assert torch.allclose(q.pow(2).mean(-1), torch.ones(1), atol=1e-3)
    m = model(qk_norm="layer", pos="nope")
    q, *_ = m.blocks[0].attn.qkv(torch.randn(1, 10, 32) * 5, m.positions(10, "cpu"))
    assert torch.allclose(q.transpose(1, 2).reshape(1, 10, 32).pow(2).mean(-1), torch.ones(1), atol=1e-3)


def test_post_norm_block():
    m = model(norm_order="post", n_layer=1)
    blk, x = m.blocks[0], torch.randn(1, 8, 32)
    pe = m.positions(8, "cpu")
    h = x + blk.ln_1(blk.attn(x, pe)[0])
    assert torch.allclose(blk(x, pe), h + blk.ln_2(blk.mlp(h)), atol=1e-6)


def test_chunk_retrieval_is_sparse_and_trains_landmarks():
    m = model(chunk_layers="0", chunk_size=8, chunk_topk=2, n_layer=1, window=4).train()
    r = m.blocks[0].attn.retr
    _, loss = m(tokens(32), tokens(32, seed=3))
    loss.backward()
    for p in (r.cls, r.c_lm.weight, r.c_enc.weight, r.c_proj.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0
    # top-k is hard: a query attends to exactly k chunks of C tokens (checked through the output:
    # making a non-selected chunk's values huge leaves the branch unchanged)
    torch.manual_seed(0)
    B, H, T, D = 1, 4, 32, 8
    x, q, k, v = torch.randn(B, T, 32), torch.randn(B, H, T, D), torch.randn(B, H, T, D), torch.randn(B, H, T, D)
    lm = r.landmarks(x)
    assert lm.shape == (B, H, 4, D)
    with torch.no_grad():
        y = r(x, q, k, v)
        s = 31  # last query, own chunk 3: chunks 0..2 are candidates, two are chosen
        sc = (q[:, :, s:s + 1] @ lm.transpose(-1, -2))[..., :3]
        dropped = sc.argmin(-1).flatten()
        v2 = v.clone()
        for h in range(H):
            c = dropped[h].item()
            v2[0, h, c * 8:(c + 1) * 8] += 1000
        assert torch.allclose(r(x, q, k, v2)[0, s], y[0, s], atol=1e-4)
        assert torch.equal(y[0, :8], torch.zeros(8, 32))  # the first chunk has nothing to retrieve


def chunk_parts(m, x):
    """The chunk layer's three parts on x [1, T, E]: landmarks (principle 1), the selected chunks
    (principle 3) and the layer's (attention output, retrieval residual) (principle 2)."""
    a = m.blocks[1].attn
    pe = m.positions(x.shape[1], "cpu")
    _, _, v, q0, k0 = a.qkv(x, pe)
    r = a.retr
    lm = r.landmarks(x)
    kc, vc = (t.reshape(1, t.shape[1], -1, r.C, t.shape[-1]) for t in (k0, v))
    _, _, idx, _ = r._retrieve(q0, r.C, lm, kc, vc)
    return lm, idx.sort(-1).values, a(x, pe)


@pytest.mark.parametrize("flag, value", [("chunk_encoder", "linear"), ("chunk_bypass", False),
                                         ("chunk_dense_train", True)])
def test_chunk_ablation_flag_changes_only_its_part(flag, value):
    """Each ablation of arXiv 2510.17196's principles, on the same weights, changes exactly its part:
    the landmark encoder (1), the residual path of the retrieved output (2), the selection in training
    (3); the other two parts are equal to the full model's, by a forward on fixed weights."""
    base = dict(chunk_layers="1", chunk_size=8, chunk_topk=2)
    full = model(**base).train()
    abl = GPT(cfg(**base, **{flag: value})).train()
    abl.load_state_dict(full.state_dict())
    x = torch.randn(1, 32, 32, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        (lm_f, idx_f, (y_f, r_f)), (lm_a, idx_a, (y_a, r_a)) = chunk_parts(full, x), chunk_parts(abl, x)
    same_lm, same_sel = torch.equal(lm_f, lm_a), torch.equal(idx_f, idx_a)
    assert same_lm == (flag != "chunk_encoder")
    assert same_sel == (flag != "chunk_dense_train") or flag == "chunk_encoder"  # new landmarks may select anew
    assert r_f is not None
    if flag == "chunk_bypass":  # retrieval joins the local heads before the shared c_proj: no own residual
        assert r_a is None and not torch.allclose(y_a, y_f)
        a = full.blocks[1].attn
        _, _, v, q0, k0 = a.qkv(x, full.positions(32, "cpu"))
        with torch.no_grad():
            heads = a.retr(x, q0, k0, v, project=False)
            assert torch.allclose(y_a, y_f + a.c_proj(heads), atol=1e-5)  # c_proj(local + retrieved)
            assert torch.allclose(r_f, a.retr.c_proj(heads), atol=1e-6)   # the full model's own path
    else:  # local attention unchanged, retrieval keeps its own path
        assert torch.equal(y_a, y_f) and r_a is not None
        assert not torch.equal(r_a, r_f)  # its own part changed the branch
    if flag == "chunk_dense_train":  # every past chunk while training, top-k at evaluation: equal to full
        assert idx_a.shape[-1] == 4 and idx_f.shape[-1] == 2  # all 4 chunks (later ones get weight 0)
        full.eval(), abl.eval()
        with torch.no_grad():
            assert torch.equal(full(tokens(32))[0], abl(tokens(32))[0])


def reference_retrieval(r, x, q, k, v):
    """Per-query loop: top-k past complete chunks by landmark score, attention within each chunk,
    mixed by the softmax of the selected landmark scores."""
    B, H, T, D = q.shape
    C, g = r.C, H // k.shape[1]
    lm = r.landmarks(x)
    y = torch.zeros(B, H, T, D)
    for b in range(B):
        for h in range(H):
            for i in range(C, T):
                own = i // C
                s = lm[b, h, :own] @ q[b, h, i] / math.sqrt(D)
                top = s.topk(min(r.K, own))
                for w, c in zip(torch.softmax(top.values, 0), top.indices):
                    kk, vv = (t[b, h // g, c * C:(c + 1) * C] for t in (k, v))
                    y[b, h, i] += w * (torch.softmax(kk @ q[b, h, i] / math.sqrt(D), 0) @ vv)
    return r.c_proj(y.transpose(1, 2).reshape(B, T, H * D))


@pytest.mark.parametrize("max_scores", [None, 4 * 2 * 8 * 8 * 2 * 3])
def test_chunk_retrieval_matches_per_query_reference(monkeypatch, max_scores):
    import model as M
    if max_scores:
        monkeypatch.setattr(M, "MAX_SCORES", max_scores)  # several query blocks
    m = model(chunk_layers="0", chunk_size=8, chunk_topk=2, n_layer=1, n_kv_head=2)
    r = m.blocks[0].attn.retr
    torch.manual_seed(0)
    x, q = torch.randn(2, 36, 32), torch.randn(2, 4, 36, 8)
    k, v = torch.randn(2, 2, 36, 8), torch.randn(2, 2, 36, 8)
    with torch.no_grad():
        assert torch.allclose(r(x, q, k, v), reference_retrieval(r, x, q, k, v), atol=1e-5)


def test_new_projections_are_quantised():
    flags = dict(qk_norm="head", chunk_layers="all", chunk_size=8, window=8, pos="alibi", mlp="swiglu")
    m16, m4 = model(bits=16, **flags), GPT(cfg(bits=4, **flags)).eval()
    m4.load_state_dict(m16.state_dict())
    linears = [mod for mod in m4.blocks.modules() if isinstance(mod, torch.nn.Linear)]
    assert linears and all(isinstance(mod, QATLinear) and mod.bits == 4 for mod in linears)
    x = tokens(32)
    with torch.no_grad():
        assert not torch.allclose(m4(x)[0], m16(x)[0], atol=1e-4)
        # the retrieval branch alone (its encoder, landmark and output projections) also changes
        a16, a4 = m16.blocks[0].attn, m4.blocks[0].attn
        h = torch.randn(1, 32, 32)
        q, k, v, q0, k0 = a16.qkv(h, m16.positions(32, "cpu"))
        assert not torch.allclose(a16.retr(h, q0, k0, v), a4.retr(h, q0, k0, v), atol=1e-4)


@pytest.mark.parametrize("flags,match", [
    (dict(n_kv_head=3), "n_kv_head"),
    (dict(window=33), "window"),
    (dict(window=-1), "window"),
    (dict(pos="sinusoid"), "pos"),
    (dict(qk_norm="rms"), "qk_norm"),
    (dict(norm_order="sandwich"), "norm_order"),
    (dict(rope_scaling_layers="local"), "rope_scaling_layers"),
    (dict(window=8, layer_pattern="w,w,g"), "layer_pattern"),
    (dict(window=8, layer_pattern="w,x"), "layer_pattern"),
    (dict(layer_pattern="w,g"), "window=0"),
    (dict(pos_pattern="rope,rope,nope"), "pos_pattern"),
    (dict(pos_pattern="rope,learned"), "pos_pattern"),
    (dict(global_every=2), "global_every"),
    (dict(swan=True), "swan"),
    (dict(swan=True, window=8), "swan"),  # no global layer
    (dict(swan=True, window=8, global_every=2, pos="alibi"), "swan"),
    (dict(rope_frac=0.0), "rope_frac"),
    (dict(rope_frac=1.5), "rope_frac"),
    (dict(hope_cutoff=-1), "hope_cutoff"),
    (dict(expe_dims=33), "expe_dims"),
    (dict(expe_on="qk", expe_dims=9), "expe_dims"),
    (dict(expe_on="input"), "expe_on"),
    (dict(n_layer=2, pos_pattern="expe,rope"), "expe_on=qk"),
    (dict(chunk_encoder="attn"), "chunk_encoder"),
    (dict(pos="expe", expe_dims=0), "expe_dims"),
    (dict(chunk_layers="all", chunk_size=32), "chunk"),
    (dict(chunk_layers="all", chunk_size=8, chunk_topk=0), "chunk"),
    (dict(chunk_layers="2"), "chunk_layers"),
    (dict(chunk_layers="a,b"), "chunk_layers"),
])
def test_bad_configs_raise(flags, match):
    with pytest.raises(ValueError, match=match) as e:
        cfg(**flags)
    assert "\n" not in str(e.value)


def test_command_line_flags_reach_the_model():
    c = train.parse_args(["--qk_norm", "head", "--window", "16", "--global_every", "2", "--pos_pattern",
                          "rope,nope", "--logn_scale", "true", "--chunk_layers", "0", "--chunk_size", "8",
                          "--rope_frac", "0.5", "--size", "0.1M", "--block_size", "32"])
    assert c.model == dict(qk_norm="head", window=16, global_every=2, pos_pattern="rope,nope",
                           logn_scale=True, chunk_layers="0", chunk_size=8, rope_frac=0.5, block_size=32)
    m = train.model_config(c, V)
    assert (m.qk_norm, m.window, m.logn_scale) == ("head", 16, True)
    with pytest.raises(train.UserError, match="window"):
        train.model_config(train.parse_args(["--window", "999", "--block_size", "32"]), V)


def test_tiny_train_run_records_flags(tmp_path):
    cfg_ = tiny_config(tmp_path, model={"qk_norm": "head", "window": 16, "global_every": 2})
    result = train.train(cfg_)
    mc = result["model_config"]
    assert (mc["qk_norm"], mc["window"], mc["global_every"]) == ("head", 16, 2)
    assert math.isfinite(result["metrics"]["val_loss"])


@pytest.mark.parametrize("tied", [True, False])
def test_forward_rows_scores_only_those_positions(tied):
    """GPT.forward(rows=...) gives the full logits at those rows, and no others (evaluate.py's
    retrieval scoring relies on it at long T)."""
    m = model(tie_embeddings=tied)
    idx = tokens(16)
    rows = torch.tensor([[3, 15, 0], [7, 7, 1]])
    full, _ = m(idx)
    part, loss = m(idx, rows=rows)
    assert loss is None and part.shape == (2, 3, V)
    assert torch.allclose(part, full.gather(1, rows[..., None].expand(-1, -1, V)), atol=1e-6)


# ---------------------------------------------------------------- fused kernels, fp32 positions, memory

def record_sdpa(monkeypatch):
    """Patch SDPA to record (q heads, k heads, v heads, q/k/v head dims, mask?, enable_gqa, q dtype)."""
    calls, sdpa = [], F.scaled_dot_product_attention

    def rec(q, k, v, **kw):
        calls.append(dict(hq=q.shape[1], hk=k.shape[1], hv=v.shape[1], dims={q.shape[-1], k.shape[-1], v.shape[-1]},
                          mask=kw.get("attn_mask") is not None, gqa=kw.get("enable_gqa", False), dtype=q.dtype))
        return sdpa(q, k, v, **kw)
    monkeypatch.setattr(F, "scaled_dot_product_attention", rec)
    return calls


@pytest.mark.parametrize("flags", [dict(window=8, global_every=2, n_kv_head=2),
                                   dict(pos="alibi", n_kv_head=1),
                                   dict(pos="alibi", window=8, global_every=2, n_kv_head=2),
                                   dict(pos="expe", window=8, global_every=2, n_kv_head=2)])
def test_sdpa_calls_get_query_heads_and_a_fused_head_dim(monkeypatch, flags):
    """Every SDPA call of a window + GQA, an ALiBi and an ExPE model (training forward and backward):
    K/V with as many heads as Q (a mask or float32 meets no GQA kernel but math) and a head dim that
    is a multiple of 8 (ALiBi's extra column padded: 8 + 1 -> 16 here, 64 + 1 -> 72 at 50M)."""
    calls = record_sdpa(monkeypatch)
    m = model(n_embd=32, **flags).train()  # head dim 8
    _, loss = m(tokens(32), tokens(32, seed=2))
    loss.backward()
    assert calls and all(c["hq"] == c["hk"] == c["hv"] == 4 and not c["gqa"] for c in calls), calls
    assert all(len(c["dims"]) == 1 and c["dims"].pop() % 8 == 0 for c in calls), calls
    assert any(c["mask"] for c in calls) == bool(flags.get("window"))
    if flags.get("pos") == "alibi":
        assert all(c["dtype"] == torch.float32 for c in calls)


def test_bf16_causal_gqa_stays_native_and_masked_calls_expand(monkeypatch):
    """Under bf16 autocast (as on CUDA) the unmasked causal call keeps grouped K/V for flash
    (enable_gqa), while the windowed layers' masked calls get expanded K/V."""
    calls = record_sdpa(monkeypatch)
    m = model(window=8, global_every=2, n_kv_head=2)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        m(tokens(32))
    masked, causal = [c for c in calls if c["mask"]], [c for c in calls if not c["mask"]]
    assert masked and all(c["hk"] == 4 and not c["gqa"] for c in masked)
    assert causal and all(c["hk"] == 2 and c["gqa"] for c in causal)


def test_expe_positions_stay_float32_under_autocast(monkeypatch):
    """ExPE on q, k (expe_on=qk): S + slope * n reaches attention unrounded under bf16 autocast (bf16
    would make it a staircase of 8-token steps at 1024), and the layer attends in fp32."""
    calls, sdpa = [], F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda q, k, v, **kw: (calls.append((q, k)), sdpa(q, k, v, **kw))[1])
    m = model(pos="expe", expe_on="qk", expe_dims=2, block_size=1024, n_layer=1)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        m(tokens(1024, B=1))
    q, k = calls[0]
    exact = 1.0 + torch.arange(1024, dtype=torch.float32) / 1024
    assert q.dtype == k.dtype == torch.float32 and torch.equal(k[0, 0, :, 0], exact)
    assert len(torch.unique(k[0, 0, :, 0])) == 1024  # bf16 would leave ~130 distinct values


def test_attention_probs_are_float32_under_autocast():
    from model import attention_probs
    torch.manual_seed(0)
    q, k = torch.randn(4, 16, 8), torch.randn(4, 48, 8)
    want = attention_probs(q, k, start=32, window=8, slopes=alibi_slopes(4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = attention_probs(q, k, start=32, window=8, slopes=alibi_slopes(4))
    assert got.dtype == torch.float32 and torch.equal(got, want)


def test_chunk_retrieval_recomputes_gathered_keys_in_backward(monkeypatch):
    """Training saves no gathered K/V block ([B, H, n, K, C, D], ~20 GB a layer at the paper posenc
    config): each query block is recomputed in the backward pass, with the same gradients."""
    import model as M
    monkeypatch.setattr(M, "MAX_SCORES", 4 * 2 * 8 * 8 * 2 * 3)  # several query blocks
    m = model(chunk_layers="0", chunk_size=8, chunk_topk=2, n_layer=1, n_kv_head=2).train()
    r = m.blocks[0].attn.retr
    torch.manual_seed(0)
    x = torch.randn(2, 36, 32, requires_grad=True)
    q, k, v = (torch.randn(2, h, 36, 8, requires_grad=True) for h in (4, 2, 2))

    def forward_saving():
        """(output, bytes of the distinct storages autograd saves for the backward pass)"""
        saved = {}
        with torch.autograd.graph.saved_tensors_hooks(
                lambda t: (saved.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()), t)[1],
                lambda t: t):
            y = r(x, q, k, v)
        for t in (x, q, k, v):
            t.grad = None
        y.square().sum().backward()
        return y, sum(saved.values()), [t.grad.clone() for t in (x, q, k, v)]
    y, kept, grads = forward_saving()
    monkeypatch.setattr(M, "checkpoint", lambda fn, *a, use_reentrant: fn(*a))  # no recompute: saves everything
    y2, kept2, grads2 = forward_saving()
    gathered = 2 * 2 * 4 * (36 - 8) * 2 * 8 * 8 * 4  # K and V of every query's 2 chunks, fp32 bytes
    assert kept2 > gathered > 3 * kept
    assert torch.equal(y, y2) and all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, grads2))


def test_chunk_blocks_are_sized_for_the_device(monkeypatch):
    import types
    import model as M
    assert M.gather_budget(torch.device("cpu")) == M.MAX_SCORES // 2
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(total_memory=141 * 2 ** 30))
    n = M.gather_budget(torch.device("cuda", 0))
    assert n == int(141 * 2 ** 30 * M.GATHER_DEVICE_FRAC) // 4
    per_query = 64 * 10 * 2 * 64 * 64  # 50M posenc: B 64, 10 heads, top-2 chunks of 64, head dim 64
    assert 50 < n // per_query < 200  # ~100 queries a block (CPU: 3), one block's keys ~2.2 GB


def test_sdpa_backend_setting_per_call_kind():
    """sdpa_backend: parsed per call kind, applied to 16-bit calls only (bf16 autocast on CPU here),
    the same loss on the math kernel as torch's choice, and a backend that cannot take a call raises
    instead of falling back silently; a bad value is a ValueError naming the part."""
    import model
    assert model.parse_sdpa_backend("auto") == {}
    assert model.parse_sdpa_backend("math") == dict(causal="math", gqa="math", mask="math")
    assert model.parse_sdpa_backend("causal:flash,mask:efficient") == dict(causal="flash", mask="efficient")
    for bad in ("fast", "causal:fast", "dense:flash"):
        with pytest.raises(ValueError, match="bad sdpa_backend part"):
            GPTConfig(sdpa_backend=bad)
    x = torch.randint(0, 256, (2, 33), generator=torch.Generator().manual_seed(0))
    losses = {}
    try:
        for spec in ("auto", "math", "efficient"):
            torch.manual_seed(0)
            m = GPT(GPTConfig(vocab_size=256, block_size=32, n_layer=2, n_head=4, n_kv_head=2, n_embd=64,
                              sdpa_backend=spec))
            assert model._SDPA_POLICY == model.parse_sdpa_backend(spec)
            try:
                with torch.autocast("cpu", torch.bfloat16):
                    losses[spec] = m(x[:, :-1], x[:, 1:])[1].item()
            except RuntimeError as e:  # CPU has no memory-efficient kernel
                losses[spec] = str(e)
        with torch.no_grad():
            assert m(x[:, :-1], x[:, 1:])[1].isfinite()  # fp32 calls keep torch's dispatch under any setting
    finally:
        model.set_sdpa_backend("auto")
    assert abs(losses["auto"] - losses["math"]) < 2e-2  # bf16: another kernel, the same attention
    assert "No viable backend" in losses["efficient"] or "No available kernel" in losses["efficient"]
