"""lab/position_maps.py and the attention it hands the model's `attend` seam (ReRoPE, Leaky ReRoPE, Self-Extend):
the scores against q_i·R(pos(i, j))·k_j built explicitly from each method's definition, the reductions to plain RoPE,
chunking, errors, and the arms eval.py makes of them."""
import math
import os

import pytest
import torch
import torch.nn.functional as F

import eval as ev
import finetune_long
from lab.measure.diagnostics import attention_entropy
from lab.position_maps import far_logits, mapped_attention, mapped_logits
from lab.position_maps import check_position_map, parse_position_map, position_map_name, position_map_positions
from model import GPT, GPTConfig
from data.checkpoints import load_checkpoint, model_args, model_from_checkpoint
from rope_config import rope_inv_freq

V = 50
REROPE, LEAKY, SELF_EXTEND = ({'method': 'rerope', 'window': 4}, {'method': 'leaky_rerope', 'window': 4, 'k': 2.5},
                              {'method': 'self_extend', 'window': 6, 'group': 3})
MAPS = [REROPE, LEAKY, SELF_EXTEND]
YARN = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 8, 'beta_fast': 4.0}


def make(**kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=16, vocab_size=V, n_layer=2, n_head=2, n_embd=32, **kw)).eval()


def relative(pm, i, j):
    """The relative position at which query i sees key j, written from each method's definition."""
    w, d = pm['window'], i - j
    if d < w:
        return d
    if pm['method'] == 'rerope':
        return min(d, w)
    if pm['method'] == 'leaky_rerope':
        return w + (d - w) / pm['k']
    G = pm['group']
    return i // G - j // G + (w - w / G)


def log_scale(pm, i, L):
    """The reference patches' query scale: max(1, log(i + 1)/log L) when the map's log_scale is on (the default of
    ReRoPE and Leaky ReRoPE, not of Self-Extend), else 1."""
    on = pm.get('log_scale', pm['method'] != 'self_extend')
    return max(1.0, math.log(i + 1) / math.log(L)) if on else 1.0


def rotation(a, inv_freq):
    """The d x d matrix of RoPE at position a (rotate-half layout), built pair by pair: pair p turns the plane of
    coordinates (p, p + d/2) by the angle a * theta_p."""
    h = len(inv_freq)
    R = torch.zeros(2 * h, 2 * h, dtype=torch.float64)
    for p, theta in enumerate(inv_freq.tolist()):
        c, s = math.cos(a * theta), math.sin(a * theta)
        R[p, p], R[p, p + h], R[p + h, p], R[p + h, p + h] = c, -s, s, c
    return R


def direct_logits(pm, q, k, inv_freq, factor, L=16):
    """logit[b, h, i, j] = scale(i) · factor² · (R(relative(i, j)) q_i) · k_j / sqrt(d) for j <= i, -inf above the
    diagonal (scale: log_scale above, for a model trained at L).
    q_i·R(-r)·k_j, i.e. (R(r) q_i)·k_j, is the score of q at position i + r against k at i (the attention factor
    multiplies cos and sin of both)."""
    B, H, T, d = q.shape
    out = torch.full((B, H, T, T), float('-inf'), dtype=torch.float64)
    for i in range(T):
        for j in range(i + 1):
            out[:, :, i, j] = ((q[:, :, i].double() @ rotation(relative(pm, i, j), inv_freq).T)
                               * k[:, :, j].double()).sum(-1) * factor ** 2 / math.sqrt(d) * log_scale(pm, i, L)
    return out


def c_proj_input(m, x, attend, layer=0):
    """Run m(x, attend=attend) and capture one layer's attention output (the input of c_proj, heads merged)."""
    got = []
    hook = m.transformer.h[layer].attn.c_proj.register_forward_pre_hook(lambda mod, args: got.append(args[0]))
    try:
        m(x, attend=attend)
    finally:
        hook.remove()
    return got[0]


@pytest.mark.parametrize('scaling', [None, YARN], ids=['plain', 'yarn'])
@pytest.mark.parametrize('pm', MAPS, ids=lambda pm: pm['method'])
def test_scores_equal_direct_construction(pm, scaling):
    """Logits, probabilities and outputs of the first layer against the explicit rotation of every (i, j) pair,
    composed with the model's rope_scaling (YaRN: other frequencies and an attention factor)."""
    m, T = make(rope_scaling=scaling), 13
    x = torch.randint(0, V, (2, T))
    h, rope = m.transformer.h[0].ln_1(m.transformer.wte(x)), m.rope_tables(T)
    attn = m.transformer.h[0].attn
    q, k, v = attn.qkv(h, None)
    qr, kr, _ = attn.qkv(h, rope)  # what the attend seam gets: q and k rotated at their own positions
    inv_freq, factor = rope_inv_freq(16, 10000.0, scaling, T)
    if scaling:
        assert factor > 1.1 and not torch.equal(inv_freq, rope_inv_freq(16)[0])
    direct = direct_logits(pm, q, k, inv_freq, factor)
    logits = mapped_logits(m, pm)
    got = logits(0, qr, kr, 0, T)
    assert torch.allclose(got.double(), direct, atol=1e-5) and torch.equal(got.isinf(), direct.isinf())
    assert torch.equal(far_logits(qr, kr, pm, m.rope_freqs(T)[0], 0, T, L=16), got)
    assert torch.allclose(logits(0, qr, kr, 5, 9), direct[:, :, 5:9, :9].float(), atol=1e-5)  # a chunk: queries 5..8
    probs = direct.softmax(-1)
    got_probs = torch.cat([F.pad(logits(0, qr, kr, s, min(s + 4, T)).softmax(-1), (0, T - min(s + 4, T)))
                           for s in range(0, T, 4)], dim=2)
    assert torch.allclose(got_probs.double(), probs, atol=1e-6)
    merged = lambda t: t.transpose(1, 2).reshape(2, T, 32)
    y = mapped_attention(m, pm, chunk=4)(0, qr, kr, v)
    assert torch.allclose(merged(y).double(), merged(probs @ v.double()), atol=1e-6)
    y = c_proj_input(m, x, mapped_attention(m, pm, chunk=4))  # the same through the model's forward
    assert torch.allclose(y.double(), merged(probs @ v.double()), atol=1e-6)


def test_far_map_reaches_what_the_docstrings_say():
    """ReRoPE stops at w; Leaky ReRoPE w=64, k=16 at T=1024 reaches 64 + 959/16 = 123.9375 < L = 128; Self-Extend
    w=32, G=4 reaches exactly L - 1 = 127 at T = (L - w)·G + w = 416, and 128 one token later."""
    def reach(pm, T):
        qp, kp = position_map_positions(check_position_map(pm), torch.arange(T))
        return (qp[-1] - kp[0]).item()
    assert reach({'method': 'rerope', 'window': 64}, 1024) == 64
    assert reach({'method': 'leaky_rerope', 'window': 64, 'k': 16}, 1024) == 123.9375
    assert reach({'method': 'self_extend', 'window': 32, 'group': 4}, 416) == 127
    assert reach({'method': 'self_extend', 'window': 32, 'group': 4}, 417) == 128


@pytest.mark.parametrize('on', [1, 0], ids=['log', 'no-log'])
@pytest.mark.parametrize('pm', MAPS, ids=lambda pm: pm['method'])
def test_log_scale_equals_direct_construction(pm, on):
    """With the query's log scale on, every score of query i (near and far) is scale(i) times the unscaled one; off,
    the map is the plain construction even past L. L = 5 here (given to mapped_logits), so queries 5..12 are scaled;
    by default L is the model's block_size (16: nothing scaled below 16)."""
    m, T, pm = make(), 13, dict(pm, log_scale=on)
    x = torch.randint(0, V, (2, T))
    h, attn = m.transformer.h[0].ln_1(m.transformer.wte(x)), m.transformer.h[0].attn
    q, k, _ = attn.qkv(h, None)
    qr, kr, _ = attn.qkv(h, m.rope_tables(T))
    direct = direct_logits(pm, q, k, rope_inv_freq(16)[0], 1.0, L=5)
    got = mapped_logits(m, pm, L=5)(0, qr, kr, 0, T)
    assert torch.allclose(got.double(), direct, atol=1e-5) and torch.equal(got.isinf(), direct.isinf())
    assert torch.allclose(mapped_logits(m, pm)(0, qr, kr, 0, T).double(), direct_logits(pm, q, k, rope_inv_freq(16)[0],
                                                                                        1.0), atol=1e-5)
    if on:
        assert not torch.allclose(got, mapped_logits(m, dict(pm, log_scale=0), L=5)(0, qr, kr, 0, T), atol=1e-3)


@pytest.mark.parametrize('pm', [dict(REROPE, window=64), dict(LEAKY, window=64, k=16), dict(SELF_EXTEND, window=32,
                                group=16, log_scale=1)], ids=lambda pm: pm['method'])
def test_log_scale_at_1023_with_L_128(pm):
    """Hand-computed: log(1024)/log(128) = 10 ln 2 / (7 ln 2) = 10/7 = 1.4286. The query at p = 1023 has every logit,
    near (j > 1023 - w) and far, equal to the unscaled logit times 10/7; queries at p < L = 128 (p = 127: log 128 /
    log 128 = 1) have exactly the unscaled logits; p = 128 is scaled by log(129)/log(128) = 1.001604."""
    torch.manual_seed(0)
    T = 1024
    q, k = torch.randn(1, 2, T, 8), torch.randn(1, 2, T, 8)
    inv_freq = rope_inv_freq(8)[0]
    logits = lambda p, s, e: far_logits(q, k, p, inv_freq, s, e, L=128)
    on, off = logits(pm, 1023, T), logits(dict(pm, log_scale=0), 1023, T)
    assert torch.allclose(on, off * 1.4285714, rtol=1e-6) and torch.allclose(on, off * (10 / 7), rtol=1e-6)
    assert (off[..., :1023 - pm['window']].abs() > 0).all()  # far keys present, and near ones (j > 1023 - w)
    assert torch.equal(logits(pm, 0, 128), logits(dict(pm, log_scale=0), 0, 128))
    below = logits(pm, 100, 128)
    assert torch.equal(below, logits(dict(pm, log_scale=0), 100, 128))
    at_L = logits(pm, 128, 129)[..., :129]
    assert torch.allclose(at_L, logits(dict(pm, log_scale=0), 128, 129)[..., :129] * 1.001604, rtol=1e-6)
    with pytest.raises(ValueError, match='log_scale=1 needs L'):
        far_logits(q, k, pm, inv_freq, 0, 4)


def test_self_extend_positions_by_hand():
    """Self-Extend, w = 6, G = 3: shift w - w/G = 4; q at floor(i/3) + 4, k at floor(j/3). So query 10 sees key 1
    (distance 9) at 3 - 0 + 4 = 7 and key 4 (distance 6) at 3 - 1 + 4 = 6. The demo-sized w = 32, G = 16: shift 30,
    query 1023 at 63 + 30 = 93, key 0 at 0: the farthest distance at T = 1024 is 93 < 128."""
    qp, kp = position_map_positions(check_position_map(SELF_EXTEND), torch.arange(12))
    assert qp.tolist() == [4, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 7] and kp.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert (qp[10] - kp[1]).item() == 7 and (qp[10] - kp[4]).item() == 6
    qp, kp = position_map_positions(check_position_map({'method': 'self_extend', 'window': 32, 'group': 16}),
                                    torch.arange(1024))
    assert qp[1023].item() == 93 and kp[0].item() == 0 and qp[32].item() == 32  # query 32, key 0: 2 + 30 = i - j
    with pytest.raises(ValueError, match=r"\['group'\] = 12 for method 'self_extend' does not divide window = 32: set "
                                         r"a group among 1, 2, 4, 8, 16, 32"):
        check_position_map({'method': 'self_extend', 'window': 32, 'group': 12})


def logits_and_entropy(m, x, chunk=8, pm=None):
    """Logits and attention entropies of m on x, under the position map pm when given (the way it is applied now:
    per forward, through the attend seam and the diagnostics' score function)."""
    if pm is None:
        return m(x)[0], attention_entropy(m, x, chunk)
    return m(x, attend=mapped_attention(m, pm))[0], attention_entropy(m, x, chunk, logits=mapped_logits(m, pm))


@pytest.mark.parametrize('pm', [dict(REROPE, window=30, log_scale=0), dict(LEAKY, window=30, log_scale=0),
                                dict(SELF_EXTEND, window=42), dict(LEAKY, k=1.0, log_scale=0),
                                dict(SELF_EXTEND, group=1)],
                         ids=['rerope_w=T', 'leaky_w=T', 'self_extend_w>T', 'leaky_k=1', 'self_extend_G=1'])
def test_reductions_to_plain_rope(pm):
    """window >= T: every key is near; leaky k = 1 and Self-Extend G = 1: the far map is plain RoPE. Without the log
    scale (T = 30 > block_size = 16, where it would act), all give the ordinary model's logits and attention
    entropies (its SDPA path)."""
    m, x = make(), torch.randint(0, V, (2, 30))
    plain, plain_ent = logits_and_entropy(m, x)
    mapped, ent = logits_and_entropy(m, x, pm=pm)
    assert torch.allclose(mapped, plain, atol=1e-5) and torch.allclose(ent, plain_ent, atol=1e-5)


@pytest.mark.parametrize('pm', MAPS, ids=lambda pm: pm['method'])
def test_map_leaves_the_window_alone_and_changes_the_rest(pm):
    """Queries up to w see every key at its true distance (each map gives exactly w at i - j = w): logits as plain
    RoPE. Every later query does not (an untrained model attends almost uniformly, so the change is small but far
    above float noise, ~1e-7). A forward of the first n tokens gives the full forward's first n logits (the map
    depends on i and j only), which eval.py's protocol relies on."""
    m, x = make(), torch.randint(0, V, (2, 24))
    plain = m(x)[0]
    attend = mapped_attention(m, pm)
    mapped = m(x, attend=attend)[0]
    w = pm['window']
    assert torch.allclose(mapped[:, :w + 1], plain[:, :w + 1], atol=1e-6)
    assert ((mapped[:, w + 1:] - plain[:, w + 1:]).abs().amax(dim=(0, 2)) > 2e-5).all()
    for n in (5, 17):
        assert torch.allclose(m(x[:, :n], attend=attend)[0], mapped[:, :n], atol=1e-5)


def test_gradients_match_the_sdpa_path_when_every_key_is_near():
    """The map path can train (e.g. fine-tuning with a map): with window >= T its gradients are plain RoPE's."""
    x, y = torch.randint(0, V, (2, 20)), torch.randint(0, V, (2, 20))
    grads = []
    for pm in (None, dict(SELF_EXTEND, window=21)):
        m = make().train()
        m(x, y, attend=mapped_attention(m, pm) if pm else None)[1].backward()
        grads.append({n: p.grad for n, p in m.named_parameters()})
    assert all(torch.allclose(grads[1][n], g, atol=1e-6) for n, g in grads[0].items())
    m = make().train()  # window < T: far keys exist; the in-place merge still differentiates
    m(x, y, attend=mapped_attention(m, REROPE))[1].backward()
    g = m.transformer.h[0].attn.c_attn.weight.grad
    assert g.isfinite().all() and not torch.allclose(g, grads[0]['transformer.h.0.attn.c_attn.weight'], atol=1e-6)


def test_chunks_give_the_one_chunk_result():
    m, x = make(), torch.randint(0, V, (2, 23))
    attn = m.transformer.h[0].attn
    q, k, v = attn.qkv(m.transformer.h[0].ln_1(m.transformer.wte(x)), m.rope_tables(23))
    one = mapped_attention(m, SELF_EXTEND, chunk=64)(0, q, k, v)
    for chunk in (1, 5, 8):
        assert torch.allclose(mapped_attention(m, SELF_EXTEND, chunk=chunk)(0, q, k, v), one, atol=1e-6)
        assert torch.allclose(m(x, attend=mapped_attention(m, SELF_EXTEND, chunk=chunk))[0],
                              m(x, attend=mapped_attention(m, SELF_EXTEND, chunk=64))[0], atol=1e-6)
    logits = mapped_logits(m, SELF_EXTEND)
    assert torch.allclose(attention_entropy(m, x, 4, logits), attention_entropy(m, x, 64, logits), atol=1e-6)


def test_a_map_keeps_weights_and_applies_the_same_on_a_reloaded_checkpoint(tmp_path):
    """A map is applied per forward (model(x, attend=mapped_attention(model, pm))), not stored in the model: it
    touches no weight, is normalized like before, and the same map on the reloaded checkpoint gives the same logits
    (older checkpoints stored position_map=None in model_args: they load too). Without it: plain RoPE again."""
    pm = {'method': 'leaky_rerope', 'window': 3, 'k': 4}
    assert check_position_map(pm) == {'method': 'leaky_rerope', 'window': 3, 'k': 4.0, 'log_scale': 1}
    m = make()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    x = torch.randint(0, V, (1, 20))
    mapped = m(x, attend=mapped_attention(m, pm))[0]
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items()) and before.keys() == m.state_dict().keys()
    assert 'position_map' not in model_args(m)
    for args in (model_args(m), dict(model_args(m), position_map=None)):  # the new format and the old one
        torch.save({'model': m.state_dict(), 'model_args': args}, tmp_path / 'ckpt.pt')
        m2 = model_from_checkpoint(load_checkpoint(str(tmp_path))).eval()
        assert m2.config == m.config and torch.equal(m2(x, attend=mapped_attention(m2, pm))[0], mapped)
    assert torch.allclose(m(x)[0], make()(x)[0]) and (m(x)[0] - mapped).abs().max() > 1e-6


@pytest.mark.parametrize('pm, match', [
    ('rerope', "position_map = 'rerope': 'method' is missing or unknown"),
    ({'window': 8}, "'method' is missing or unknown; give a dict like"),
    ({'method': 'rerop', 'window': 8}, 'method one of rerope, leaky_rerope, self_extend'),
    ({'method': 'rerope'}, r"position_map\['window'\] is missing for method 'rerope': set an int >= 1"),
    ({'method': 'rerope', 'window': 0}, r"position_map\['window'\] = 0 for method 'rerope': set an int >= 1"),
    ({'method': 'rerope', 'window': 8.5}, r"position_map\['window'\] = 8.5"),
    ({'method': 'rerope', 'window': True}, r"position_map\['window'\] = True"),
    ({'method': 'rerope', 'window': 8, 'k': 2}, "key 'k' is not used by method 'rerope'; accepted keys: method, "
                                                "window, log_scale"),
    ({'method': 'rerope', 'window': 8, 'log_scale': 2}, r"\['log_scale'\] = 2 for method 'rerope': set 0 or 1"),
    ({'method': 'leaky_rerope', 'window': 8, 'k': 2, 'log_scale': 'on'}, r"\['log_scale'\] = 'on'"),
    ({'method': 'self_extend', 'window': 8, 'group': 3}, r"\['group'\] = 3 for method 'self_extend' does not divide "
                                                         r"window = 8: set a group among 1, 2, 4, 8"),
    ({'method': 'leaky_rerope', 'window': 8, 'k': 0.5}, r"\['k'\] = 0.5 .* set a number >= 1 \(the slope divisor"),
    ({'method': 'leaky_rerope', 'window': 8, 'k': math.inf}, r"\['k'\] = inf"),
    ({'method': 'self_extend', 'window': 8}, r"\['group'\] is missing for method 'self_extend'"),
])
def test_bad_position_map_names_the_field(pm, match):
    with pytest.raises(ValueError, match=match):
        check_position_map(pm)
    m = make()
    for applied in (mapped_attention, mapped_logits):  # checked when the map is applied, before any forward
        with pytest.raises(ValueError, match=match):
            applied(m, pm)


def test_position_map_needs_rope():
    with pytest.raises(ValueError, match="re-rotates RoPE's queries and keys; this model has pos_emb='learned'"):
        mapped_attention(make(pos_emb='learned'), REROPE)
    with pytest.raises(ValueError, match="this model has pos_emb='none'"):
        mapped_logits(make(pos_emb='none'), REROPE)


def test_arm_specs_and_names():
    cases = {'rerope:window=64': ({'method': 'rerope', 'window': 64, 'log_scale': 1}, 'rerope w=64'),
             'rerope:window=64:log_scale=0': ({'method': 'rerope', 'window': 64, 'log_scale': 0}, 'rerope w=64 no-log'),
             'leaky_rerope:k=16:window=64': ({'method': 'leaky_rerope', 'window': 64, 'k': 16.0, 'log_scale': 1},
                                             'leaky_rerope w=64 k=16'),
             'leaky_rerope:window=64:k=16:log_scale=0': ({'method': 'leaky_rerope', 'window': 64, 'k': 16.0,
                                                          'log_scale': 0}, 'leaky_rerope w=64 k=16 no-log'),
             ' self_extend:window=32:group=4': ({'method': 'self_extend', 'window': 32, 'group': 4, 'log_scale': 0},
                                                'self_extend w=32 G=4'),
             'self_extend:window=32:group=16:log_scale=1': ({'method': 'self_extend', 'window': 32, 'group': 16,
                                                             'log_scale': 1}, 'self_extend w=32 G=16 log')}
    for spec, (pm, name) in cases.items():
        assert parse_position_map(spec) == pm and position_map_name(pm) == name
    for spec, match in (('rerope', r"\['window'\] is missing"), ('rerope:w=64', "'w=64' should be key=value with key "
                        "one of window"), ('rerope:window=64:window=32', 'window is given twice'),
                        ('rerope:window=x', "window='x' is not a int"), ('self_extend:window=32:group=0', 'group'),
                        ('yarn:window=3', "'yarn' is not a position map"), ('rerope:window=64:log_scale=yes',
                        "log_scale='yes' is not a int"), ('self_extend:window=32:group=12', 'does not divide window')):
        with pytest.raises(ValueError, match=match):
            parse_position_map(spec)


# ----------------------------------------------------------------------------- eval.py arms

L, T = 32, 128


@pytest.fixture(scope='module')
def map_eval(tiny_run, tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = str(tmp_path_factory.mktemp('map_eval'))
    summary = ev.main([f'--ckpt={tiny_run}', '--rope_types=default,rerope:window=128:log_scale=0,rerope:window=16,'
                       'leaky_rerope:window=16:k=4,self_extend:window=8:group=4', f'--eval_len={T}',
                       '--num_windows=4', '--retrieval_examples=2', '--retrieval_len=8', '--retrieval_pos=2',
                       '--entropy_windows=2', f'--out_dir={out}', '--device=cpu', '--progress=False', '--plot=False'])
    torch.set_num_threads(threads)
    return summary


def test_eval_map_arms_names_fields_and_colours(map_eval):
    from lab.pictures import plot_kit
    arms = {a['name']: a for a in map_eval['arms']}
    assert list(arms) == ['base (L=32)', 'rerope w=128 no-log zero-shot', 'rerope w=16 zero-shot',
                          'leaky_rerope w=16 k=4 zero-shot', 'self_extend w=8 G=4 zero-shot']
    se = arms['self_extend w=8 G=4 zero-shot']
    assert se['position_map'] == {'method': 'self_extend', 'window': 8, 'group': 4, 'log_scale': 0}
    assert se['kind'] == 'zero-shot' and arms['rerope w=16 zero-shot']['position_map']['log_scale'] == 1
    assert se['rope_type'] == 'default' and se['rope_scaling'] is None and arms['base (L=32)']['position_map'] is None
    colours = {n: s['color'] for n, s in plot_kit.styles(map_eval['arms']).items()}
    assert colours['rerope w=128 no-log zero-shot'] == colours['rerope w=16 zero-shot']
    assert len({colours[n] for n in arms if n != 'rerope w=16 zero-shot'}) == 4
    # the same colour and the same kind: the second of them gets another line style, so both stay readable
    st = plot_kit.styles(map_eval['arms'])
    assert st['rerope w=128 no-log zero-shot']['ls'] == '--' and st['rerope w=16 zero-shot']['ls'] == plot_kit.REPEAT_LS[0]
    assert len({str(v['ls']) for k, v in st.items() if v['color'] == colours['rerope w=16 zero-shot']}) == 2
    # window >= T without the log scale: the same numbers as the base model
    base, wide = arms['base (L=32)'], arms['rerope w=128 no-log zero-shot']
    assert all(abs(base['buckets'][b] - wide['buckets'][b]) < 1e-5 for b in base['buckets'])
    assert abs(base['buckets']['64-128'] - arms['rerope w=16 zero-shot']['buckets']['64-128']) > 1e-3


def test_position_map_on_fine_tuned_arms_and_errors(tiny_run, tmp_path):
    ft = str(tmp_path / 'ft')
    finetune_long.main([f'--init_from={tiny_run}', '--rope_type=yarn', '--factor=2', '--max_iters=1', '--eval_iters=1',
                        '--eval_interval=1', f'--out_dir={ft}', '--progress=False', '--device=cpu', '--batch_size=2'])
    cfg = dict(ev.DEFAULTS, ckpt=f'{tiny_run},{ft}', position_map='rerope:window=48', eval_len=T)
    arms = ev.plan_arms(cfg)[0]
    assert [a['name'] for a in arms] == ['base (L=32)', 'yarn s=2 ft1', 'yarn s=2 ft1 + rerope w=48']
    assert arms[2]['position_map'] == {'method': 'rerope', 'window': 48, 'log_scale': 1} and arms[2]['scaling']['rope_type'] == 'yarn'
    with pytest.raises(ValueError, match='applies to fine-tuned arms and --ckpt has none'):
        ev.plan_arms(dict(cfg, ckpt=tiny_run))
    with pytest.raises(ValueError, match="'rerop' is neither a rope type .* a position map"):
        ev.plan_arms(dict(cfg, ckpt=tiny_run, position_map='', rope_types='rerop:window=8'))
    with pytest.raises(ValueError, match=r"position_map\['window'\] = 0"):
        ev.plan_arms(dict(cfg, ckpt=tiny_run, position_map='', rope_types='rerope:window=0'))
    assert os.path.isdir(ft)
