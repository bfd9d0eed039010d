"""FIRE (pos_emb='fire', lab/fire.py): the bias at known distances against a hand computation, progressive
interpolation (the argument stays in [0, 1] and is squeezed past L_thr), logits / attend / attend(at=) against a
direct masked-softmax construction, the KV cache, bfloat16 autocast, the crop's two forms, a tiny model trained by
train.py and reloaded, the optimizer's weight-decay groups, and the refusals (one line each, naming the fix)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lab.fire as fire_mod
from configurator import ConfigError
from conftest import assert_attention_paths, bias_refusal
from lab.fire import EPS, FIREAttention, fire_argument, fire_bias
from model import GPT, GPTConfig

V = 50
C, L_THR = 0.5, 4.0  # the hand-set ψ's c and threshold
W1, B1 = [[2.0], [-1.0]], [-0.5, 0.8]  # a 2-unit f_θ: hidden = relu(w1·x + b1)
W2, B2 = [[1.0, 0.5], [-2.0, 1.0]], [0.1, -0.3]  # two heads: out = w2·hidden + b2


def make(n_head=2, block_size=16, **kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=block_size, vocab_size=V, n_layer=2, n_head=n_head, n_embd=16 * n_head,
                         pos_emb='fire', **kw)).eval()


def by_hand(i, j, c=C, L=L_THR):
    """b(i, j) per head from the formula, in Python floats: ψ(x) = log(c x + 1), x = ψ(i - j) / ψ(max(L, i))."""
    psi = lambda x: math.log(c * x + 1)  # noqa: E731
    x = psi(i - j) / (psi(max(L, i)) + EPS)
    hidden = [max(0.0, w[0] * x + b) for w, b in zip(W1, B1)]
    return [sum(w * h for w, h in zip(row, hidden)) + b for row, b in zip(W2, B2)]


def hand_params():
    return (torch.tensor(C), torch.tensor(L_THR), torch.tensor(W1), torch.tensor(B1), torch.tensor(W2),
            torch.tensor(B2))


def test_bias_at_known_distances_equals_the_hand_computation():
    """Queries 2 (below L_thr: normaliser ψ(4) = ln 3) and 9 (past it: ψ(9) = ln 5.5) against keys 0..9."""
    c, L, *mlp = hand_params()
    bias = fire_bias(torch.tensor([2, 9]), 10, c, L, *mlp)
    assert bias.shape == (2, 2, 10)  # (H, Q, K)
    for q, i in enumerate((2, 9)):
        for j in range(10):
            want = by_hand(i, j) if j <= i else [-math.inf, -math.inf]
            assert bias[:, q, j].tolist() == pytest.approx(want, abs=1e-6), (i, j)
    # the argument itself at two distances: ψ(2)/ψ(4) = ln 2/ln 3, ψ(6)/ψ(9) = ln 4/ln 5.5
    x = fire_argument(torch.tensor([2, 9]), 10, c, L)
    assert x[0, 0].item() == pytest.approx(math.log(2) / math.log(3), abs=1e-6)
    assert x[1, 3].item() == pytest.approx(math.log(4) / math.log(5.5), abs=1e-6)
    assert x[0, 2].item() == 0.0 and x[0, 5].item() == 0.0  # distance 0, and a future key (masked in the bias)
    # head 0 at (2, 0): x = 0.63093, hidden (0.76186, 0.16907), 0.76186 + 0.5 * 0.16907 + 0.1
    assert bias[0, 0, 0].item() == pytest.approx(0.946395, abs=1e-5)


def test_the_layer_uses_its_parameters_and_the_documented_init():
    """The attention's bias is fire_bias of its own parameters, L_thr = |m|·L0 (m = -0.5, L0 = block_size/4 = 8 ->
    4); at init c = 0.1, m = 1, L0 = block_size/4, f_θ 32 wide."""
    attn = make(block_size=32).transformer.h[0].attn
    assert attn.fire_c.item() == pytest.approx(0.1) and attn.fire_m.item() == 1.0 and attn.fire_L0.item() == 8.0
    assert attn.fire_w1.shape == (32, 1) and attn.fire_w2.shape == (2, 32)
    with torch.no_grad():
        for p in (attn.fire_w1, attn.fire_b1, attn.fire_w2, attn.fire_b2):
            p.zero_()
        attn.fire_w1[:2], attn.fire_b1[:2] = torch.tensor(W1), torch.tensor(B1)  # units 2..31 stay dead (all zero)
        attn.fire_w2[:, :2], attn.fire_b2[:] = torch.tensor(W2), torch.tensor(B2)
        attn.fire_c.fill_(C)
        attn.fire_m.fill_(-0.5)
    assert attn.threshold().item() == L_THR
    bias = attn.bias(torch.arange(12), 12)
    for i, j in ((3, 0), (3, 3), (7, 1), (11, 0), (11, 10)):
        assert bias[:, i, j].tolist() == pytest.approx(by_hand(i, j), abs=1e-6), (i, j)


def test_progressive_interpolation_keeps_the_argument_in_the_trained_range():
    """c = 0.1, L_thr = 32 (L = 128): at every query up to 16 L the argument lies in [0, 1]; past L_thr the key at
    j = 0 sits at 1 (the normaliser is the query's own ψ(i)) and a fixed distance is squeezed toward 0 as i grows;
    below L_thr the bias is a function of i - j alone (each row the one before, shifted)."""
    c, L = torch.tensor(0.1), torch.tensor(32.0)
    i = torch.arange(2048)
    x = fire_argument(i, 2048, c, L)
    causal = torch.arange(2048)[None, :] <= i[:, None]
    seen = x[causal]
    assert seen.min().item() == 0.0 and seen.max().item() <= 1.0
    past = x[33:, 0]  # i > L_thr, j = 0: ψ(i) / (ψ(i) + eps)
    assert (past > 1 - 1e-5).all() and (past <= 1).all()
    assert x[31, 0].item() == pytest.approx(math.log(4.1) / math.log(4.2), abs=1e-6)  # ψ(31)/ψ(32), below L_thr
    d = 10
    far = torch.stack([x[q, q - d] for q in range(40, 2048, 100)])  # queries 40, 140, ..., 2040
    assert (far[1:] < far[:-1]).all() and far[-1].item() == pytest.approx(math.log(2) / math.log(205), abs=1e-6)
    for q in range(d, 31):  # below the threshold: x(q, q - d) does not depend on q
        assert x[q, q - d].item() == pytest.approx(x[d, 0].item(), abs=1e-7)


def direct_attention(attn, q, k, v):
    """softmax(q·k/√hd + b(i, j), causal) · v with b from the formula, one (i, j) at a time in Python floats."""
    T, H = q.size(2), q.size(1)
    c, L = abs(attn.fire_c.item()), attn.threshold().item()
    w1, b1, w2, b2 = (p.detach().double() for p in (attn.fire_w1, attn.fire_b1, attn.fire_w2, attn.fire_b2))
    bias = torch.full((H, T, T), -math.inf, dtype=torch.float64)
    for i in range(T):
        for j in range(i + 1):
            x = math.log(c * (i - j) + 1) / (math.log(c * max(L, i) + 1) + EPS)
            bias[:, i, j] = w2 @ torch.relu(w1[:, 0] * x + b1) + b2
    att = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.size(-1)) + bias
    return (att.softmax(-1) @ v.double()).float()


@pytest.mark.parametrize('chunk', [7, 256])
def test_logits_attend_and_at_agree_with_a_direct_construction(monkeypatch, chunk):
    """T = 20 > L = 16, L_thr = 4: the chunked path (chunks that do not divide T, and one chunk), the score function
    (logits, per query chunk), attend(at=) for scattered queries, and the model's forward(at=) all give the direct
    masked softmax; the bias matters (causal SDPA without it differs)."""
    whole = fire_mod.chunked_attention
    monkeypatch.setattr(fire_mod, 'chunked_attention',
                        lambda q, k, v, logits, _=None, dropout=0.0: whole(q, k, v, logits, chunk, dropout))
    mdl = make(n_head=4)
    blk, x = mdl.transformer.h[0], torch.randint(0, V, (2, 20))
    q, k, v = blk.attn.qkv(blk.ln_1(mdl.transformer.wte(x)), None)
    assert_attention_paths(mdl, x, q, k, v, direct_attention(blk.attn, q, k, v))


def test_kv_cache_is_exact_and_greedy_decoding_agrees():
    """FIRE's bias reads the query's position: the cache runs its attend with the new queries' positions, so the
    cached logits equal a full forward and greedy decoding past L (and past L_thr) equals recomputing the prefix."""
    from lab.kv_cache import KVCache, blocker, generate
    mdl = make()
    assert blocker(mdl) is None
    x = torch.randint(0, V, (2, 40))
    full = mdl(x)[0]
    cache = KVCache()
    got = torch.cat([cache.forward(mdl, x[:, :9]), cache.forward(mdl, x[:, 9:10]), cache.forward(mdl, x[:, 10:40])], 1)
    assert (got - full).abs().max() < 1e-5
    with torch.no_grad():  # without its bias (f_θ's output zeroed) the logits move: the check above sees the bias
        for b in mdl.transformer.h:
            b.attn.fire_w2.zero_()
            b.attn.fire_b2.zero_()
        assert (mdl(x)[0] - full).abs().max() > 1e-3
    mdl = make()
    prompt = x[:, :5]
    cached, recomputed = generate(mdl, prompt, 35, top_k=1), mdl.generate(prompt, 35, top_k=1)
    assert cached.shape == (2, 40) and torch.equal(cached, recomputed)


def test_bias_stays_float32_under_bfloat16_autocast():
    """Past L_thr neighbouring arguments differ by less than bfloat16 resolves: the bias is computed with autocast
    off, the same numbers as without autocast."""
    c, L, *_ = hand_params()
    mlp = [torch.randn(32, 1), torch.randn(32), torch.randn(2, 32), torch.randn(2)]
    i = torch.arange(500, 516)
    plain = fire_bias(i, 516, c, L, *mlp)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        under = fire_bias(i, 516, c, L, *mlp)
    assert under.dtype == torch.float32 and torch.equal(under, plain)


@pytest.mark.parametrize('threshold, agree', [(4.0, False), (64.0, True)])
def test_the_crop_forms_differ_on_one_layer_unless_the_threshold_covers_every_query(threshold, agree):
    """One layer, crop w = 8, T = 24 (lab/crop.py): both forms agree at p < w; past w the sliding crop scores the
    window with ψ(max(L_thr, p)) and the truncated one with ψ(max(L_thr, w - 1)), so they differ when L_thr = 4 and
    agree when L_thr = 64 covers every query (then the bias is a function of i - j alone)."""
    from lab.crop import truncated_scores, window_attention
    torch.manual_seed(0)
    mdl = GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=1, n_head=2, n_embd=32, pos_emb='fire')).eval()
    with torch.no_grad():
        mdl.transformer.h[0].attn.fire_m.fill_(threshold / 4.0)  # L0 = 16 / 4
        mdl.transformer.h[0].attn.c_attn.weight.mul_(10.0)  # sharp attention: the bias shows in the losses
    rows = torch.randint(0, V, (3, 25), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = mdl(rows[:, :-1], attend=window_attention(mdl, 8))[0]
    sliding = F.cross_entropy(logits.transpose(1, 2), rows[:, 1:], reduction='none')
    cut = torch.tensor(np.stack(truncated_scores(mdl, rows, [list(range(24))] * 3, 8)[0]), dtype=torch.float32)
    assert (sliding[:, :8] - cut[:, :8]).abs().max() < 1e-5
    gap = (sliding[:, 8:] - cut[:, 8:]).abs().max().item()
    assert gap < 1e-5 if agree else gap > 1e-3


def test_trains_reloads_and_decays_only_the_matrices(char_data, tmp_path):
    """A tiny FIRE model trained by train.py: the loss goes down, c and the threshold multiplier learn, the
    checkpoint reloads with weights_only=True into the same logits, eval names its base arm 'fire (L=32)' and its
    crop, and refuses a rope type. Weight decay: f_θ's two matrices; not its biases, c or the multiplier."""
    import eval as ev
    import train
    from conftest import tiny_cfg
    from data.common import load_meta
    from data.checkpoints import load_checkpoint, model_from_checkpoint
    from lab.measure.arms import plan_arms
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=32, vocab_size=load_meta(char_data)['vocab_size'], n_layer=2, n_head=2,
                          n_embd=64, pos_emb='fire'))
    run = tmp_path / 'fire'
    row = train.train(tiny_cfg(char_data, run, pos_emb='fire', max_iters=30, eval_interval=15), model=model)
    log = [r['val_loss'] for r in (load_checkpoint(str(run))['log'])]
    assert len(log) == 3 and log[-1] < log[0] - 0.5 and row['val_loss'] == log[-1]  # from ~ln(68) = 4.2
    for blk in model.transformer.h:
        assert blk.attn.fire_c.item() != pytest.approx(0.1, abs=1e-4) and blk.attn.fire_m.item() != 1.0
    ckpt = torch.load(run / 'ckpt.pt', map_location='cpu', weights_only=True)
    again = model_from_checkpoint(ckpt).eval()
    x = torch.randint(0, again.config.vocab_size, (2, 96))
    model.eval()
    assert torch.equal(again(x)[0], model(x)[0])  # 3 x L, past the threshold and the training length
    names = {id(p): n for n, p in model.named_parameters()}
    decay, no_decay = (sorted(names[id(p)].split('.')[-1] for p in g['params'] if 'fire' in names[id(p)])
                       for g in model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), 'cpu').param_groups)
    assert decay == ['fire_w1', 'fire_w1', 'fire_w2', 'fire_w2']
    assert no_decay == sorted(['fire_b1', 'fire_b2', 'fire_c', 'fire_m'] * 2)
    cfg = dict(ev.DEFAULTS, base=str(run), eval_len=64)
    assert [a['name'] for a in plan_arms(dict(cfg, rope_types='default,crop'))[0]] == \
        ['fire (L=32)', 'crop w=32 (sliding)', 'crop w=32 (truncated)']
    with pytest.raises(ConfigError, match="has no RoPE; --rope_types needs a rope model"):
        plan_arms(dict(cfg, rope_types='default,linear'))


def refusal(case):
    """Run one refused use of a FIRE model; returns the error's message."""
    return bias_refusal('fire', make, case)


@pytest.mark.parametrize('case, fix', [
    ('attention class', "attention='ssmax' would be dropped; use attention='causal' with FIRE, or another pos_emb"),
    ('rope scaling in the config', "rope_scaling is set but pos_emb='fire'; scaling only applies to pos_emb='rope'"),
    ('rope scaling switched on', "pos_emb='fire'; RoPE scaling needs pos_emb='rope'"),
    ('position map', "this model has pos_emb='fire': evaluate it without a map"),
    ('position ids', "(FIRE reads distances from the token order: pass none)"),
    ('layer pattern', "which needs pos_emb='rope'"),
    ('export', "pos_emb='fire' (FIRE: a learned bias of the normalised distance): GPT-NeoX has RoPE only; export a "
               "RoPE run")])
def test_refusals_are_one_line_naming_the_fix(case, fix):
    message = refusal(case)
    assert fix in message and '\n' not in message, message


def test_the_attention_class_is_registered_and_the_default_model_is_untouched():
    """pos_emb='fire' takes FIREAttention in every layer and adds its parameters only there; the default config's
    attention is still plain causal attention."""
    mdl = make()
    assert all(type(b.attn) is FIREAttention for b in mdl.transformer.h)
    assert GPTConfig().attention_class == 'causal' and GPTConfig(pos_emb='fire').attention_class == 'fire'
    none = GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_embd=32, pos_emb='none'))
    extra = sum(p.numel() for p in mdl.parameters()) - sum(p.numel() for p in none.parameters())
    assert extra == 2 * (32 + 32 + 2 * 32 + 2 + 2)  # per layer: w1, b1, w2, b2, c and m
