"""CoPE (pos_emb='cope', lab/cope.py): positions on hand-built gates (0/1 by construction, so p_ij counts the open
gates exactly; fractional ones interpolate), the clamp at npos_max - 1, logits / attend / attend(at=) against a direct
masked-softmax construction, the KV cache, bfloat16 autocast, the two crop forms on one layer, a tiny model trained by
train.py and reloaded (a checkpoint keeps its npos_max), the refusals (one line each, naming the fix), and what it
counts: the mean gate per kind of token on a hand-built model whose heads count lines and everything else."""
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lab.cope as cope_mod
from badinput import assert_refused, call
from configurator import ConfigError
from conftest import assert_attention_paths, bias_refusal
from data.common import atomic_torch_save
from data.checkpoints import model_args
from lab.cope import (CLASSES, CoPEAttention, cope_gates, cope_interpolate, cope_logits, cope_positions, counts_table,
                      gate_sums, token_class, what_it_counts)
from model import GPT, GPTConfig

V = 50


def make(n_head=2, block_size=16, n_layer=2, seed=0, **kw):
    """A random CoPE GPT whose position embeddings are N(0, 1) (a new one's are zeros: NoPE until trained)."""
    torch.manual_seed(seed)
    m = GPT(GPTConfig(block_size=block_size, vocab_size=V, n_layer=n_layer, n_head=n_head, n_embd=16 * n_head,
                      pos_emb='cope', **kw)).eval()
    with torch.no_grad():
        for b in m.transformer.h:
            b.attn.cope_e.normal_()
    return m


def open_closed(is_open, M=300.0):
    """q, k (1, 1, T, 2) with q_i = (M, 0) and k_j = (±1, 0): a_ij = ±M/√2, so the gate of key j is exactly 1.0 in
    float32 where is_open[j] and exactly 0.0 where not (σ(-212) underflows)."""
    T = len(is_open)
    q = torch.tensor([[M, 0.0]] * T)[None, None]
    k = torch.tensor([[1.0 if o else -1.0, 0.0] for o in is_open])[None, None]
    return q, k


def test_positions_count_exactly_the_open_gates():
    """Keys open on a pattern (a newline every few tokens): the gates are 0/1 and p_ij is the number of open keys
    among j..i, counted in Python; above the diagonal 0. With npos_max = 4 every count past 3 is held at 3."""
    is_open = [1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0]
    q, k = open_closed(is_open)
    T = len(is_open)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    a, g = cope_gates(q, k, causal)
    assert a.dtype == g.dtype == torch.float32
    assert torch.equal(g[0, 0], causal.float() * torch.tensor(is_open, dtype=torch.float32))  # exactly 0 or 1
    p = cope_positions(g, npos_max=100)[0, 0]
    for i in range(T):
        for j in range(T):
            assert p[i, j].item() == (sum(is_open[j:i + 1]) if j <= i else 0), (i, j)
    assert p[11, 0].item() == 5 and p[11, 4].item() == 3 and p[9, 7].item() == 0  # 5 open in 0..11; none in 7..9
    held = cope_positions(g, npos_max=4)[0, 0]
    assert torch.equal(held, p.clamp(max=3)) and held.max().item() == 3 and p.max().item() == 5


def test_fractional_positions_interpolate_between_the_integer_logits():
    """z = (0, 10, 30, 60) at positions 0..3: p = 0.5 -> 5, 1.25 -> 15, 2.75 -> 52.5; an integer p reads z itself.
    Through cope_logits: q ⟂ k gives every gate σ(0) = 1/2, so p_ij = (i - j + 1)/2, and e[n] = (n², 0), q = (1, 0)
    give z_i[n] = n²: logit_ij = the interpolation of n² at (i - j + 1)/2 (a = 0)."""
    z = torch.tensor([[0.0, 10.0, 30.0, 60.0]])
    p = torch.tensor([[0.0, 0.5, 1.0, 1.25, 2.0, 2.75, 3.0]])
    assert cope_interpolate(z, p).tolist() == [[0.0, 5.0, 10.0, 15.0, 30.0, 52.5, 60.0]]
    T = 6
    q = torch.tensor([[1.0, 0.0]] * T)[None, None]
    k = torch.tensor([[0.0, 1.0]] * T)[None, None]
    e = torch.tensor([[float(n * n) for n in range(8)], [0.0] * 8])  # (d, npos_max)
    out = cope_logits(q, k, e, torch.ones(T, T, dtype=torch.bool).tril())[0, 0]
    for i in range(T):
        for j in range(T):
            if j > i:
                assert out[i, j].item() == -math.inf
                continue
            pos = (i - j + 1) / 2
            lo, hi = math.floor(pos), math.ceil(pos)
            assert out[i, j].item() == pytest.approx((1 - (pos - lo)) * lo * lo + (pos - lo) * hi * hi), (i, j)
    assert out[5, 0].item() == 9.0 and out[5, 1].item() == pytest.approx(0.5 * 4 + 0.5 * 9)  # p = 3, then 2.5


def direct_attention(e, q, k, v, npos):
    """softmax(q·k/√d + interpolated q·e at p_ij, causal) · v from the formula, one (i, j) at a time in Python floats:
    g_it = σ(q_i·k_t/√d), p_ij = min(Σ_{t=j..i} g_it, npos - 1), z_i[n] = q_i·e[:, n]."""
    B, H, T, d = q.shape
    q, k, v, e = (x.double() for x in (q, k, v, e))
    out = torch.zeros(B, H, T, d, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(T):
                a = [(q[b, h, i] @ k[b, h, t]).item() / math.sqrt(d) for t in range(i + 1)]
                g = [1 / (1 + math.exp(-x)) for x in a]
                z = (q[b, h, i] @ e).tolist()
                logits = []
                for j in range(i + 1):
                    p = min(sum(g[j:]), npos - 1)
                    lo, hi = math.floor(p), math.ceil(p)
                    logits.append(a[j] + (1 - (p - lo)) * z[lo] + (p - lo) * z[hi])
                w = torch.tensor(logits, dtype=torch.float64).softmax(-1)
                out[b, h, i] = w @ v[b, h, :i + 1]
    return out.float()


@pytest.mark.parametrize('chunk', [7, 256])
def test_logits_attend_and_at_agree_with_a_direct_construction(monkeypatch, chunk):
    """T = 20 > L = 16 with npos_max = 6 (some positions clamped): the chunked path (chunks that do not divide T, and
    one chunk), the score function (logits, per query chunk), attend(at=) for scattered queries and the model's
    forward(at=) all give the direct masked softmax; the position term matters (causal SDPA without it differs)."""
    whole = cope_mod.chunked_attention
    monkeypatch.setattr(cope_mod, 'chunked_attention',
                        lambda q, k, v, logits, _=None, dropout=0.0: whole(q, k, v, logits, chunk, dropout))
    monkeypatch.setattr(cope_mod, 'NPOS_MAX', 6)
    mdl = make(n_head=4)
    blk, x = mdl.transformer.h[0], torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(3))
    assert blk.attn.cope_e.shape == (16, 6)
    with torch.no_grad():
        blk.attn.c_attn.weight.mul_(3.0)  # gates spread over (0, 1), positions past 5 clamped
        q, k, v = blk.attn.qkv(blk.ln_1(mdl.transformer.wte(x)), None)
        gates = cope_gates(q, k, torch.ones(20, 20, dtype=torch.bool).tril())[1]
        assert cope_positions(gates, 1000).max().item() > 6 and 0.05 < gates[gates > 0].mean().item() < 0.95
        assert_attention_paths(mdl, x, q, k, v, direct_attention(blk.attn.cope_e, q, k, v, 6))


def test_kv_cache_is_exact_and_greedy_decoding_agrees():
    """Every old key's position counts the new query's gates: the cache runs CoPE's attend over the cached keys with
    the new queries' positions, so the cached logits equal a full forward and greedy decoding past L (positions
    clamped at L) equals recomputing the prefix."""
    from lab.kv_cache import KVCache, blocker, generate
    mdl = make()
    assert blocker(mdl) is None
    x = torch.randint(0, V, (2, 40), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full = mdl(x)[0]
        cache = KVCache()
        got = torch.cat([cache.forward(mdl, x[:, :9]), cache.forward(mdl, x[:, 9:10]), cache.forward(mdl, x[:, 10:40])],
                        1)
        assert (got - full).abs().max() < 1e-5
        for b in mdl.transformer.h:  # without its positions (e = 0: NoPE) the logits move: the check above sees them
            b.attn.cope_e.zero_()
        assert (mdl(x)[0] - full).abs().max() > 1e-2
    mdl = make()
    prompt = x[:, :5]
    cached, recomputed = generate(mdl, prompt, 35, top_k=1), mdl.generate(prompt, 35, top_k=1)
    assert cached.shape == (2, 40) and torch.equal(cached, recomputed)


def test_scores_stay_float32_under_bfloat16_autocast():
    """Every gate open: p_i0 = i + 1 exactly up to 600 (bfloat16 would step by 4 there); under bfloat16 autocast the
    scores are the float32 ones, bit for bit."""
    q, k = open_closed([1] * 600)
    causal = torch.ones(600, 600, dtype=torch.bool).tril()
    p = cope_positions(cope_gates(q, k, causal)[1], 1000)[0, 0]
    assert torch.equal(p[:, 0], torch.arange(1, 601, dtype=torch.float32))
    torch.manual_seed(0)
    q, k, e = torch.randn(1, 2, 300, 8), torch.randn(1, 2, 300, 8), torch.randn(8, 301)
    causal = torch.ones(300, 300, dtype=torch.bool).tril()
    plain = cope_logits(q, k, e, causal)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        under = cope_logits(q, k, e, causal)
    assert under.dtype == torch.float32 and torch.equal(under, plain)


def test_the_crop_forms_agree_on_one_layer():
    """One layer, crop w = 8, T = 24 (lab/crop.py): key j's position counts the gates of keys j..i, all inside the
    window when j is, so the sliding crop (scores masked after) and the truncated one (a fresh forward over the window)
    give the same losses everywhere, past w too; and past w they differ from the uncropped model."""
    from lab.crop import truncated_scores, window_attention
    mdl = make(n_layer=1)
    with torch.no_grad():
        mdl.transformer.h[0].attn.c_attn.weight.mul_(5.0)  # sharp attention and gates: the positions show in the losses
    rows = torch.randint(0, V, (3, 25), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = mdl(rows[:, :-1], attend=window_attention(mdl, 8))[0]
        whole = F.cross_entropy(mdl(rows[:, :-1])[0].transpose(1, 2), rows[:, 1:], reduction='none')
    sliding = F.cross_entropy(logits.transpose(1, 2), rows[:, 1:], reduction='none')
    cut = torch.tensor(np.stack(truncated_scores(mdl, rows, [list(range(24))] * 3, 8)[0]), dtype=torch.float32)
    assert (sliding - cut).abs().max() < 1e-5
    assert (whole[:, :8] - cut[:, :8]).abs().max() < 1e-5 and (whole[:, 8:] - cut[:, 8:]).abs().max() > 1e-3


def test_a_checkpoint_keeps_the_npos_max_it_trained_with(monkeypatch):
    """A model built with NPOS_MAX = 5 loads into one built with the default (block_size + 1 = 17): its e's shape wins,
    the logits are the same; a head dim that does not match is still refused by load_state_dict."""
    monkeypatch.setattr(cope_mod, 'NPOS_MAX', 5)
    small = make()
    monkeypatch.setattr(cope_mod, 'NPOS_MAX', None)
    again = GPT(GPTConfig(**model_args(small))).eval()
    assert again.transformer.h[0].attn.cope_e.shape == (16, 17)
    again.load_state_dict(small.state_dict())
    assert again.transformer.h[0].attn.cope_e.shape == (16, 5)
    x = torch.randint(0, V, (2, 30))
    assert torch.equal(again(x)[0], small(x)[0])
    state = dict(small.state_dict(), **{'transformer.h.0.attn.cope_e': torch.zeros(8, 17)})
    with pytest.raises(RuntimeError, match='size mismatch for transformer.h.0.attn.cope_e'):
        again.load_state_dict(state)


def test_trains_reloads_and_reads_what_it_counts(char_data, tmp_path, capsys):
    """A tiny CoPE model trained by train.py: the loss goes down and e moves off zero; the checkpoint reloads with
    weights_only=True into the same logits (3 x L, positions clamped); e is decayed with the matrices; eval names its
    arm 'cope (L=32)' and its crops and refuses a rope type; python -m lab.cope prints one row per layer and head,
    the numbers of what_it_counts, and writes them as JSON."""
    import eval as ev
    import train
    from conftest import tiny_cfg
    from data.common import load_meta
    from data.checkpoints import load_checkpoint, model_from_checkpoint
    from lab.measure.arms import plan_arms
    torch.manual_seed(0)
    meta = load_meta(char_data)
    model = GPT(GPTConfig(block_size=32, vocab_size=meta['vocab_size'], n_layer=2, n_head=2, n_embd=64,
                          pos_emb='cope'))
    run = tmp_path / 'cope'
    row = train.train(tiny_cfg(char_data, run, pos_emb='cope', max_iters=30, eval_interval=15), model=model)
    log = [r['val_loss'] for r in (load_checkpoint(str(run))['log'])]
    assert len(log) == 3 and log[-1] < log[0] - 0.5 and row['val_loss'] == log[-1]  # from ~ln(68) = 4.2
    assert all(b.attn.cope_e.abs().max().item() > 1e-3 for b in model.transformer.h)
    ckpt = torch.load(run / 'ckpt.pt', map_location='cpu', weights_only=True)
    again = model_from_checkpoint(ckpt).eval()
    x = torch.randint(0, again.config.vocab_size, (2, 96))
    model.eval()
    assert torch.equal(again(x)[0], model(x)[0])
    names = {id(p): n for n, p in model.named_parameters()}
    decay = [names[id(p)] for p in model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), 'cpu').param_groups[0]['params']]
    assert [n for n in decay if 'cope' in n] == ['transformer.h.0.attn.cope_e', 'transformer.h.1.attn.cope_e']
    cfg = dict(ev.DEFAULTS, base=str(run), eval_len=64)
    assert [a['name'] for a in plan_arms(dict(cfg, rope_types='default,crop'))[0]] == \
        ['cope (L=32)', 'crop w=32 (sliding)', 'crop w=32 (truncated)']
    with pytest.raises(ConfigError, match="has no RoPE; --rope_types needs a rope model"):
        plan_arms(dict(cfg, rope_types='default,linear'))
    out = tmp_path / 'counts.json'
    capsys.readouterr()  # (what training printed)
    assert cope_mod.main([f'--ckpt={run}', '--eval_len=96', '--num_windows=2', f'--out={out}']) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"what CoPE's gates open on: {run}, 2 windows x 96 tokens of its held-out text")
    assert printed[2].split() == ['layer', 'head', *CLASSES, 'opens', 'most', 'on'] and len(printed) == 3 + 4 + 1
    got = json.load(open(out))
    assert [(r['layer'], r['head']) for r in got['heads']] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    cells = printed[3].split()
    assert cells[:2] == ['0', '0'] and float(cells[2]) == pytest.approx(got['heads'][0]['gate']['newline'], abs=5e-4)
    assert sum(got['share'].values()) == pytest.approx(1.0) and got['share']['letters'] > 0.5
    assert all(0 < v < 1 for r in got['heads'] for v in r['gate'].values() if v is not None)
    text = tmp_path / 'lines.txt'  # a text of its own: 2 windows of L = 32 characters, the rest left out
    text.write_text('Full fathom five thy father lies;\nOf his bones are coral made;\nThose are pearls.\n')
    assert cope_mod.main([f'--ckpt={run}', f'--text={text}']) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"what CoPE's gates open on: {run}, 2 windows x 32 tokens of {text}")
    kinds = [token_class(c) for c in text.read_text()[:64]]
    assert printed[1] == 'keys: ' + ', '.join(f"{c} {100 * kinds.count(c) / 64:.1f}%" for c in CLASSES)
    assert printed[1] == 'keys: newline 3.1%, space 15.6%, punctuation 3.1%, letters 78.1%, other 0.0%'


def hand_counter():
    """A one-layer CoPE model over the characters '\\n', ' ', 'a', '.' whose head 0 opens only on newlines (counts
    lines) and head 1 only on spaces (counts words): q = the c_attn bias (10, 0, 0, 0) in both heads; head 0's k[0] =
    10·x[0] of the LayerNorm'd embedding x, 2 for the newline and about -1.8 for the others (a = q·k/2 = 100 or -90:
    the gates 1.0 and ~1e-39), head 1's k[0] = 20·x[2] - 5, x[2] 0.89 for the space and 0 for the others (a = 64 or
    -25)."""
    m = GPT(GPTConfig(block_size=16, vocab_size=4, n_layer=1, n_head=2, n_embd=8, pos_emb='cope', bias=True)).eval()
    attn = m.transformer.h[0].attn
    with torch.no_grad():
        m.transformer.wte.weight.copy_(torch.tensor([[1.0, -1, 0, 0, 0, 0, 0, 0], [-1, 1, 0.5, -0.5, 0, 0, 0, 0],
                                                     [-1, 1, 0, 0, 0.3, -0.3, 0, 0], [-1, 1, 0, 0, 0, 0, 0.2, -0.2]]))
        attn.c_attn.weight.zero_()
        attn.c_attn.bias.zero_()
        attn.c_attn.bias[[0, 4]] = 10.0  # q = (10, 0, 0, 0) in each head
        attn.c_attn.weight[8, 0], attn.c_attn.weight[12, 2], attn.c_attn.bias[12] = 10.0, 20.0, -5.0  # k[0] of each
    return m


def test_what_it_counts_on_a_hand_built_case():
    """gate_sums on hand-set gates against the means by hand; the token classes of the char vocabulary; then a model
    built to count lines and words: head 0's mean gate is 1 on newlines and 0 elsewhere, head 1's 1 on spaces and 0
    elsewhere, each the class it opens most on, and each cell equals the mean of σ(q·k/√d) over the pairs, computed
    directly on the same model with softer gates."""
    assert [token_class(c) for c in ('\n', ' ', 'a', 'Z', '.', ',', '&', '3', '\x00', ' the', '\n\n', '')] == \
        ['newline', 'space', 'letters', 'letters', 'punctuation', 'punctuation', 'punctuation', 'other', 'other',
         'letters', 'newline', 'other']
    g = torch.tensor([[0.9, 0, 0, 0], [0.1, 0.2, 0, 0], [0.3, 0.4, 0.5, 0], [0.7, 0.6, 0.8, 1.0]])[None, None]
    classes = torch.tensor([[0, 3, 1, 3]])  # newline, letters, space, letters
    sums, pairs = gate_sums(g, classes)
    assert pairs.tolist() == [4, 2, 0, 4, 0]  # key j is seen by T - j queries
    means = (sums[0] / pairs.clamp(min=1)).tolist()
    assert means[0] == pytest.approx((0.9 + 0.1 + 0.3 + 0.7) / 4) and means[1] == pytest.approx((0.5 + 0.8) / 2)
    assert means[3] == pytest.approx((0.2 + 0.4 + 0.6 + 1.0) / 4)
    m = hand_counter()
    text = 'aa a.\na a\n\naaa. a\n'  # ids: '\n' 0, ' ' 1, 'a' 2, '.' 3
    x = torch.tensor([['\n a.'.index(c) for c in text]])
    vocab = [token_class(c) for c in '\n a.']
    got = what_it_counts(m, x, vocab)
    h0, h1 = (r['gate'] for r in got['heads'])
    assert h0['newline'] == pytest.approx(1.0, abs=1e-6) and h1['space'] == pytest.approx(1.0, abs=1e-6)
    assert all(h0[c] == pytest.approx(0.0, abs=1e-6) for c in ('space', 'letters', 'punctuation'))
    assert all(h1[c] == pytest.approx(0.0, abs=1e-6) for c in ('newline', 'letters', 'punctuation'))
    assert h0['other'] is None and [r['opens_most_on'] for r in got['heads']] == ['newline', 'space']
    assert got['share'] == pytest.approx({'newline': 4 / 18, 'space': 3 / 18, 'letters': 9 / 18,
                                          'punctuation': 2 / 18, 'other': 0.0})
    attn = m.transformer.h[0].attn  # the same cells from q and k directly, on a model with softer gates
    with torch.no_grad():
        attn.c_attn.weight.mul_(0.02)
        q, k, _ = attn.qkv(m.transformer.h[0].ln_1(m.transformer.wte(x)), None)
    soft = what_it_counts(m, x, vocab)
    for r in soft['heads']:
        for c in CLASSES[:4]:
            keys = [j for j, ch in enumerate(text) if vocab['\n a.'.index(ch)] == c]
            want = np.mean([torch.sigmoid(q[0, r['head'], i] @ k[0, r['head'], j] / 2).item()
                            for j in keys for i in range(j, len(text))])
            assert r['gate'][c] == pytest.approx(want, abs=1e-6), (r['head'], c)
    assert 0.3 < soft['heads'][0]['gate']['newline'] < 0.99 and 'opens most on' in counts_table(soft)
    two = torch.cat((x, x.roll(7, 1)))  # windows add up: one forward of both, or one each, the same means
    one_by_one, together = what_it_counts(m, two, vocab, batch_size=1), what_it_counts(m, two, vocab, batch_size=2)
    for a, b in zip(one_by_one['heads'], together['heads']):
        assert all(a['gate'][c] == pytest.approx(b['gate'][c], abs=1e-6) for c in CLASSES[:4])
    assert one_by_one['heads'][0]['gate']['newline'] == pytest.approx(1 / (1 + math.exp(-2)), abs=1e-4)  # σ(10·0.4/2)


def refusal(case):
    """Run one refused use of a CoPE model; returns the error's message."""
    return bias_refusal('cope', make, case, {
        'what it counts of another model': lambda: what_it_counts(GPT(GPTConfig(block_size=8, vocab_size=V, n_layer=1,
                                                                                n_head=2, n_embd=16)),
                                                                  torch.zeros(1, 4, dtype=torch.long), ['other'] * V),
    })


@pytest.mark.parametrize('case, fix', [
    ('attention class', "attention='ssmax' would be dropped; use attention='causal' with CoPE, or another pos_emb"),
    ('rope scaling in the config', "rope_scaling is set but pos_emb='cope'; scaling only applies to pos_emb='rope'"),
    ('rope scaling switched on', "pos_emb='cope'; RoPE scaling needs pos_emb='rope'"),
    ('position map', "this model has pos_emb='cope': evaluate it without a map"),
    ('position ids', "(CoPE reads distances from the token order: pass none)"),
    ('layer pattern', "which needs pos_emb='rope'"),
    ('export', "pos_emb='cope' (CoPE: positions that count the tokens gates open on): GPT-NeoX has RoPE only; export "
               "a RoPE run"),
    ('what it counts of another model', "pos_emb='rope': only a CoPE model (pos_emb='cope') has gates to read")])
def test_refusals_are_one_line_naming_the_fix(case, fix):
    message = refusal(case)
    assert fix in message and '\n' not in message, message


@pytest.mark.parametrize('argv, names', [
    ([], ['--ckpt=<run folder of a CoPE model>']),
    (['--ckpt={tmp}/nowhere'], ['nowhere', 'does not exist']),
    (['--ckpt={rope}'], ["uses pos_emb='rope': no CoPE gates to read", '--pos_emb=cope']),
    (['--ckpt={rope}', '--num_windows=0'], ['num_windows=0', 'positive integer']),
    (['--ckpt={cope}', '--text={tmp}/missing.txt'], ['missing.txt is not a file']),
])
def test_the_command_refuses_bad_input_in_one_line(argv, names, tmp_path, capsys):
    """python -m lab.cope: no run, a missing one, a run of another position encoding, a bad count, a missing text file:
    one line each, exit 2, naming the setting (checked before any data or model is read)."""
    for name, pe in (('rope', 'rope'), ('cope', 'cope')):
        atomic_torch_save({'model': {}, 'model_args': {'pos_emb': pe}, 'dataset': {}}, str(tmp_path / name / 'ckpt.pt'))
    argv = [a.format(tmp=tmp_path, rope=tmp_path / 'rope', cope=tmp_path / 'cope') for a in argv]
    assert_refused(*call(cope_mod.main, argv, capsys), names)


def test_the_attention_class_is_registered_and_the_default_model_is_untouched():
    """pos_emb='cope' takes CoPEAttention in every layer and adds only e there, (head dim) x (block_size + 1) zeros
    in a new model; the default config's attention is still plain causal attention."""
    torch.manual_seed(0)
    mdl = GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_embd=32, pos_emb='cope'))
    assert all(type(b.attn) is CoPEAttention and not b.attn.cope_e.any() for b in mdl.transformer.h)
    assert GPTConfig().attention_class == 'causal' and GPTConfig(pos_emb='cope').attention_class == 'cope'
    none = GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_embd=32, pos_emb='none'))
    extra = sum(p.numel() for p in mdl.parameters()) - sum(p.numel() for p in none.parameters())
    assert extra == 2 * 16 * 17
    x = torch.randint(0, V, (2, 12))
    none.load_state_dict({k: v for k, v in mdl.state_dict().items() if 'cope' not in k})
    assert torch.allclose(mdl.eval()(x)[0], none.eval()(x)[0], atol=1e-5)  # e = 0: a new CoPE model is NoPE
