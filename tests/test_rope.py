import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab.rope_table  # noqa: E402
import lab.measure.arm_specs  # noqa: E402
import rope  # noqa: E402
import rope_config  # noqa: E402
from rope import apply_rope, rope_cos_sin, rotations_within, wavelengths, yarn_correction_range  # noqa: E402
from rope_config import ROPE_TYPES, check_scaling, is_dynamic, rope_inv_freq  # noqa: E402
from lab.rope_table import bands, freq_ratio  # noqa: E402
from lab.measure.arm_specs import parse_arm, parse_arms  # noqa: E402

D, B, L = 128, 10000.0, 4096
PLAIN = rope_inv_freq(D, B)[0]


def cfg(t, factor=8.0, L=L, n=D // 2, **kw):
    """A config of type t; longrope gets n per-pair factors: all 1 for l <= L, all s (PI's curve) past L."""
    lists = {'short_factor': [1.0] * n, 'long_factor': [factor] * n} if t == 'longrope' else {}
    return {'rope_type': t, 'factor': factor, 'original_max_position_embeddings': L, **lists, **kw}


def close(a, b, tol=1e-6):
    return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64),
                          rtol=tol, atol=0)


# ---------------------------------------------------------------- rotation itself

def test_rotation_preserves_norm():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 50, 64)
    cos, sin = rope_cos_sin(rope_inv_freq(64)[0], 50)
    y = apply_rope(x, cos, sin)
    assert y.shape == x.shape
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-5)
    assert not torch.allclose(y[:, :, 1:], x[:, :, 1:], atol=1e-3)  # it did rotate (position 0 is identity)
    assert torch.allclose(y[:, :, 0], x[:, :, 0])


@pytest.mark.parametrize('t', ROPE_TYPES)
def test_scores_depend_only_on_relative_position(t):
    torch.manual_seed(1)
    d, T = 32, 40
    inv, af = rope_inv_freq(d, 10000.0, None if t == 'default' else cfg(t, 4.0, L=16, n=d // 2), seq_len=T)
    cos, sin = rope_cos_sin(inv, T, af)
    q, k = torch.randn(d), torch.randn(d)
    qs, ks = apply_rope(q.expand(T, d), cos, sin), apply_rope(k.expand(T, d), cos, sin)
    scores = qs @ ks.T  # scores[m, n] = q(m).k(n)
    for delta in (-7, 0, 3, 25):
        diag = torch.diagonal(scores, offset=-delta)  # entries with m - n = delta
        assert torch.allclose(diag, diag[0].expand_as(diag), atol=1e-4), (t, delta)
    assert not torch.allclose(scores[5, 0], scores[6, 0])  # ...and it does depend on m - n


def test_rotate_half_equals_complex_form_after_permutation():
    # Reference in the spirit of litgpt's test_rope: the interleaved layout, pairs (x[2i], x[2i+1]) rotated as
    # complex numbers by e^{i m theta_i}, equals rotate-half after moving x[2i] -> i, x[2i+1] -> i + d/2.
    torch.manual_seed(2)
    d, T = 16, 12
    inv, _ = rope_inv_freq(d, 500.0)
    v = torch.randn(3, T, d, dtype=torch.float64)  # interleaved layout
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv.double()
    rot = torch.polar(torch.ones_like(angles), angles)
    ref = torch.view_as_real(torch.view_as_complex(v.reshape(3, T, d // 2, 2)) * rot).reshape(3, T, d)
    perm = torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))
    cos, sin = rope_cos_sin(inv, T, dtype=torch.float64)
    out = apply_rope(v[..., perm], cos, sin)
    assert torch.allclose(out, ref[..., perm], atol=1e-6)
    assert not torch.allclose(apply_rope(v, cos, sin), ref, atol=1e-3)  # without the permutation: different


# ---------------------------------------------------------------- the methods

@pytest.mark.parametrize('t', ROPE_TYPES)
def test_factor_one_is_plain(t):
    sc = cfg(t, 1.0)
    for l in ((None, 1000, L) if t in ('dynamic', 'dynamic_yarn') else (None, 3 * L)):
        inv, af = rope_inv_freq(D, B, sc, seq_len=l)
        assert inv.dtype == torch.float32 and inv.shape == (D // 2,)
        if t in ('abf', 'clip', 'ntk_alpha'):  # theta changed without the factor: a raised base, slow pairs stopped
            assert not torch.equal(inv, PLAIN) and af == 1.0, (t, l)
        else:
            assert torch.equal(inv, PLAIN) and af == 1.0, (t, l)


def test_pi_at_m_equals_plain_at_m_over_s():
    inv, af = rope_inv_freq(D, B, cfg('linear', 4.0))
    m = torch.arange(0, 9000, 7)
    c1, s1 = rope_cos_sin(inv, m)
    c2, s2 = rope_cos_sin(PLAIN, m / 4.0)
    assert af == 1.0 and torch.allclose(c1, c2, atol=2e-4) and torch.allclose(s1, s2, atol=2e-4)
    assert close(freq_ratio(D, B, cfg('linear', 4.0)), torch.full((D // 2,), 0.25))


def test_ntk_keeps_pair0_and_last_pair_is_pi():
    s = 8.0
    inv, af = rope_inv_freq(D, B, {'rope_type': 'ntk', 'factor': s})  # L not needed for static NTK
    pi, _ = rope_inv_freq(D, B, cfg('linear', s))
    assert inv[0] == PLAIN[0] == 1.0 and af == 1.0
    assert close(inv[-1], pi[-1])
    r = freq_ratio(D, B, {'rope_type': 'ntk', 'factor': s})
    assert torch.all(r[1:] < r[:-1])  # the squeeze grows smoothly from pair 0 to the last
    # b' = b * s^(d/(d-2))
    assert close(inv[10], (B * s ** (D / (D - 2))) ** (-20 / D))


def test_yarn_correction_range_numbers():
    assert yarn_correction_range(D, B, L) == (20, 46)
    lo, hi = yarn_correction_range(D, B, L, truncate=False)
    assert abs(lo - 20.94) < 0.01 and abs(hi - 45.03) < 0.01
    # from the ORIGINAL L; a bug computing it from s*L would shift it
    assert yarn_correction_range(D, B, 8 * L) == (35, 60)
    # high is clamped to d-1 (not d/2-1): at L=150000 the ramp reaches past the last pair
    assert yarn_correction_range(D, B, 150000) == (45, 71)
    assert yarn_correction_range(32, B, 128) == (0, 6)  # small L: low clamps at 0


def test_yarn_bands_and_ramp():
    s = 8.0
    r = rotations_within(D, B, L)
    ratio = freq_ratio(D, B, cfg('yarn', s))
    assert torch.all(ratio[r > 32] == 1.0)                 # > beta_fast turns in L: untouched
    assert close(ratio[r < 1], torch.full_like(ratio[r < 1], 1 / s))  # < beta_slow turns: exactly PI
    assert ratio[20] == 1.0 and ratio[21] < 1.0 and ratio[45] > 1 / s + 1e-3 and close(ratio[46], 1 / s)
    ramp = (30 - 20) / (46 - 20)
    assert close(ratio[30], (1 - ramp) + ramp / s)  # 0.66346...
    # last pair stays PI when high (71) is beyond d/2-1: partially kept, not pure PI
    assert freq_ratio(D, B, cfg('yarn', s, L=150000))[-1] > 1 / s + 0.01
    # truncate=False is honoured
    r2 = freq_ratio(D, B, cfg('yarn', s, truncate=False))
    dim = lambda n: D * math.log(L / (2 * math.pi * n)) / (2 * math.log(B))
    assert not close(r2[30], ratio[30], 1e-3) and close(r2[30], 1 - (30 - dim(32)) / (dim(1) - dim(32)) * (1 - 1 / s))


def test_yarn_mscale_and_logit_growth():
    inv, af = rope_inv_freq(D, B, cfg('yarn', 8.0))
    assert abs(af - 1.2079442) < 1e-7 and abs(rope.yarn_mscale(8.0) - (0.1 * math.log(8) + 1)) < 1e-12
    assert rope_inv_freq(D, B, cfg('yarn', 8.0, attention_factor=1.5))[1] == 1.5
    af2 = rope_inv_freq(D, B, cfg('yarn', 8.0, mscale=0.707, mscale_all_dim=0.707))[1]
    assert af2 == 1.0
    af3 = rope_inv_freq(D, B, cfg('yarn', 8.0, mscale=1.0, mscale_all_dim=0.5))[1]
    assert abs(af3 - (0.1 * math.log(8) + 1) / (0.05 * math.log(8) + 1)) < 1e-12
    # mscale multiplies both cos and sin (once): cos^2 + sin^2 = mscale^2, and every logit grows by mscale^2
    T = 64
    c1, s1 = rope_cos_sin(inv, T)
    c2, s2 = rope_cos_sin(inv, T, af)
    assert torch.allclose(c2 ** 2 + s2 ** 2, torch.full_like(c2, af ** 2), rtol=1e-5)
    torch.manual_seed(3)
    q, k = torch.randn(T, D), torch.randn(T, D)
    logits1 = apply_rope(q, c1, s1) @ apply_rope(k, c1, s1).T
    logits2 = apply_rope(q, c2, s2) @ apply_rope(k, c2, s2).T
    assert torch.allclose(logits2, logits1 * af ** 2, rtol=1e-4, atol=1e-4)
    # ntk_by_parts and llama3 have no temperature
    assert rope_inv_freq(D, B, cfg('ntk_by_parts', 8.0))[1] == 1.0 and rope_inv_freq(D, B, cfg('llama3', 8.0))[1] == 1.0


def test_ntk_by_parts_paper_form():
    s = 8.0
    r = rotations_within(D, B, L)
    ratio = freq_ratio(D, B, cfg('ntk_by_parts', s))
    assert torch.all(ratio[r > 32] == 1.0) and close(ratio[r < 1], torch.full_like(ratio[r < 1], 1 / s))
    i = 30  # middle band: gamma linear in rotations, not in pair index (unlike YaRN)
    g = (r[i] - 1) / (32 - 1)
    assert close(ratio[i], g + (1 - g) / s) and not close(ratio[i], freq_ratio(D, B, cfg('yarn', s))[i], 1e-2)


def test_llama3_equals_by_parts_with_alpha1_beta4():
    s = 8.0
    ll = freq_ratio(D, B, cfg('llama3', s))
    bp = freq_ratio(D, B, cfg('ntk_by_parts', s, beta_fast=4.0, beta_slow=1.0))
    assert close(ll, bp, 1e-6)
    lam = wavelengths(D, B)
    assert torch.all(ll[lam < L / 4] == 1.0) and close(ll[lam > L], torch.full_like(ll[lam > L], 1 / s))
    mid = (lam >= L / 4) & (lam <= L)
    assert mid.sum() >= 3 and torch.all((ll[mid] > 1 / s - 1e-6) & (ll[mid] < 1 + 1e-6))


def test_llama3_with_equal_factors_is_a_step():
    """low_freq_factor = high_freq_factor (Llama 4 Scout: 1 and 1): no ramp, theta kept below wavelength L/low and
    divided by s above it (the ramp's formula would divide by zero)."""
    s = 16.0
    ll = freq_ratio(D, B, cfg('llama3', s, low_freq_factor=1.0, high_freq_factor=1.0))
    lam = wavelengths(D, B)
    assert torch.isfinite(ll).all() and (lam < L).sum() >= 3 and (lam > L).sum() >= 3
    assert torch.all(ll[lam < L] == 1.0) and close(ll[lam > L], torch.full_like(ll[lam > L], 1 / s))
    near = freq_ratio(D, B, cfg('llama3', s, low_freq_factor=1.0, high_freq_factor=1.0 + 1e-9))  # the ramp's limit
    assert close(ll, near, 1e-6)


def test_dynamic_types():
    plain = PLAIN
    for a in (1.0, 2.0):
        dyn = cfg('dynamic', a)
        for l in (None, 0, 100, L):  # plain at l <= L
            assert torch.equal(rope_inv_freq(D, B, dyn, l)[0], plain)
        # at l = s*L equal to static NTK with s' = a*s - a + 1 (a = 1: the paper's s = l/L)
        ntk = {'rope_type': 'ntk', 'factor': a * 4 - a + 1}
        assert close(rope_inv_freq(D, B, dyn, 4 * L)[0], rope_inv_freq(D, B, ntk)[0])
    dyy = cfg('dynamic_yarn', 1.0)
    assert torch.equal(rope_inv_freq(D, B, dyy, L)[0], plain) and rope_inv_freq(D, B, dyy, L)[1] == 1.0
    inv, af = rope_inv_freq(D, B, dyy, 4 * L)
    inv_s, af_s = rope_inv_freq(D, B, cfg('yarn', 4.0))
    assert torch.equal(inv, inv_s) and af == af_s > 1.0  # mscale follows s_l
    # a fine-tuned factor is a floor: s_l = max(factor, l/L)
    assert torch.equal(rope_inv_freq(D, B, cfg('dynamic_yarn', 4.0), 2 * L)[0], inv_s)
    assert torch.equal(rope_inv_freq(D, B, cfg('dynamic_yarn', 4.0), None)[0], inv_s)
    assert is_dynamic(dyy) and is_dynamic(cfg('dynamic')) and not is_dynamic(cfg('yarn')) and not is_dynamic(None)


def test_dynamic_ntk_returns_to_plain_after_long_input():
    sc = cfg('dynamic', 1.0)
    short1, _ = rope_inv_freq(D, B, sc, 1000)
    long_, _ = rope_inv_freq(D, B, sc, 8 * L)
    short2, _ = rope_inv_freq(D, B, sc, 1000)
    assert not torch.equal(long_, PLAIN) and torch.equal(short1, PLAIN) and torch.equal(short2, PLAIN)
    mid, _ = rope_inv_freq(D, B, sc, 2 * L)  # shrinking 8L -> 2L also recomputes
    assert close(mid, rope_inv_freq(D, B, {'rope_type': 'ntk', 'factor': 2.0})[0])


# ---------------------------------------------------------------- the worked numbers (seed note 003)

def test_worked_numbers_d128_L4096():
    deg = torch.rad2deg(PLAIN.double())
    assert abs(deg[0] - 57.2958) < 1e-4                       # pair 0: 1 rad per token
    assert abs(rotations_within(D, B, L)[0] - 651.9) < 0.1     # ~652 turns within L
    assert abs(deg[-1] - 0.0066164) < 1e-7                    # last pair per token
    assert abs(deg[-1] * L - 27.10) < 0.005                    # ... over all of L
    boundary = D * math.log(L / (2 * math.pi)) / (2 * math.log(B))
    assert abs(boundary - 45.03) < 0.005
    r = rotations_within(D, B, L)
    assert torch.all(r[:46] >= 1) and torch.all(r[46:] < 1)   # pairs 0..45 complete a turn
    assert abs(wavelengths(D, B)[0] - 2 * math.pi) < 1e-9
    bd = bands(D, B, L)
    assert bd[:21] == ['high'] * 21 and bd[21:46] == ['middle'] * 25 and bd[46:] == ['low'] * 18


# ---------------------------------------------------------------- precision

def test_cos_sin_float32_under_bf16_autocast():
    inv, _ = rope_inv_freq(64)
    with torch.autocast(device_type='cpu', dtype=torch.bfloat16):
        cos, sin = rope_cos_sin(inv, torch.arange(300))
        cb, sb = rope_cos_sin(inv, torch.arange(300), dtype=torch.bfloat16)
    assert cos.dtype == sin.dtype == torch.float32 and cos.shape == (300, 64)
    assert not torch.equal(cos[256], cos[257]) and not torch.equal(sin[256], sin[257])
    assert torch.allclose(cos[257, :32], torch.cos(257 * inv.double()).float(), atol=1e-4)
    assert cb.dtype == torch.bfloat16 and torch.equal(cb, cos.to(torch.bfloat16))
    assert torch.equal(sb, sin.to(torch.bfloat16))
    # positions stay exact far past 256 (float32 is exact to 2^24)
    c, _ = rope_cos_sin(inv, torch.tensor([100000, 100001]))
    assert not torch.equal(c[0], c[1])


def test_apply_rope_keeps_dtype_and_broadcasts():
    inv, _ = rope_inv_freq(32)
    cos, sin = rope_cos_sin(inv, 10)
    x = torch.randn(2, 4, 10, 32, dtype=torch.bfloat16)
    assert apply_rope(x, cos, sin).dtype == torch.bfloat16
    with pytest.raises(ValueError, match='head_dim'):
        apply_rope(torch.randn(10, 16), cos, sin)


def test_critical_dimension_worked_numbers():
    """d = 32, b = 1e4, L = 128: (16) * log_1e4(128 / 2pi) = 5.236 -> d_extra = 12, T_extra = 2pi * 1e4^(12/32)."""
    d_extra, t_extra = rope.critical_dimension(32, 10000.0, 128)
    assert d_extra == 12 and t_extra == pytest.approx(198.692, abs=1e-3)
    # d_extra / 2 is the number of pairs that turn at least once within L; T_extra is the next pair's wavelength
    assert d_extra // 2 == int((rotations_within(32, 10000.0, 128) >= 1).sum())
    assert t_extra == pytest.approx(wavelengths(32, 10000.0)[d_extra // 2].item(), rel=1e-9)
    assert rope.critical_dimension(128, 10000.0, 4096)[0] == 92  # 64 * log_1e4(651.9) = 45.03 -> 2 * 46


def test_cli_table_prints_the_critical_dimension(capsys):
    lab.rope_table.main(['--head_dim', '32', '--L', '128', '--factor', '4'])
    out = capsys.readouterr().out
    assert 'd_extra = 12' in out and 'T_extra = 198.7' in out


# ---------------------------------------------------------------- LongRoPE (Hugging Face's 'longrope')

def lr_cfg(**kw):
    """d = 8 (4 pairs), b = 1e4: theta = 1, 0.1, 0.01, 0.001. L = 128, s = 4."""
    return {'rope_type': 'longrope', 'factor': 4.0, 'original_max_position_embeddings': 128,
            'short_factor': [1.0, 1.5, 2.0, 2.0], 'long_factor': [1.0, 2.0, 4.0, 8.0], **kw}


def test_longrope_switches_from_short_to_long_factors_past_L():
    """HF: inv_freq = 1 / (ext_factors * base^(2i/d)), ext = long_factor when seq_len > original length."""
    short, long_ = [1.0, 0.1 / 1.5, 0.01 / 2, 0.001 / 2], [1.0, 0.05, 0.0025, 0.000125]
    for l, want in ((None, short), (1, short), (128, short), (129, long_), (4 * 128, long_)):
        inv, af = rope_inv_freq(8, 10000.0, lr_cfg(), l)
        assert inv.dtype == torch.float32 and close(inv, want, 1e-6), l
        assert af == pytest.approx(3 / math.sqrt(7), abs=1e-12)  # sqrt(1 + ln 4 / ln 128) = sqrt(1 + 2/7)
    assert is_dynamic(lr_cfg()) and 'longrope' in rope_config.DYNAMIC_TYPES
    # a long input leaves nothing behind: the next short one is short again
    assert close(rope_inv_freq(8, 10000.0, lr_cfg(), 100)[0], short, 1e-6)


def test_longrope_attention_factor():
    assert rope.longrope_attention_factor(4.0, 128) == pytest.approx(1.1338934, abs=1e-7)
    assert rope.longrope_attention_factor(8.0, 4096) == pytest.approx(math.sqrt(1 + 3 / 12), abs=1e-12)  # 1.1180
    assert rope.longrope_attention_factor(1.0, 128) == 1.0
    assert rope_inv_freq(8, 10000.0, lr_cfg(factor=1.0))[1] == 1.0
    assert rope_inv_freq(8, 10000.0, lr_cfg(attention_factor=1.25), 1000)[1] == 1.25  # an explicit one wins


def test_longrope_lists_are_checked_copied_and_sized():
    src = lr_cfg(short_factor=(1, 1, 1, 1))
    sc = check_scaling(src)
    assert sc['short_factor'] == [1.0, 1.0, 1.0, 1.0] and all(type(x) is float for x in sc['short_factor'])
    sc['long_factor'][0] = 99.0
    assert src['long_factor'][0] == 1.0 and check_scaling(sc) == sc  # a copy; idempotent
    assert 'beta_fast' not in sc and 'attention_factor' not in sc
    with pytest.raises(ValueError, match=r"long_factor'\] has 3 values but head_dim = 8 has 4 pairs"):
        rope_inv_freq(8, 10000.0, lr_cfg(long_factor=[1.0, 2.0, 4.0]))
    with pytest.raises(ValueError, match='short_factor.*head_dim = 16 has 8 pairs'):
        rope_inv_freq(16, 10000.0, lr_cfg(), 1000)  # both lists are checked, whatever the length


def test_longrope_arm_specs_and_names():
    with pytest.raises(ValueError, match='needs short_factor and long_factor.*search_longrope.py'):
        parse_arm('longrope', 4, 128)
    with pytest.raises(ValueError, match='long_factor is a list .* cannot be written in an arm spec'):
        parse_arm('longrope:long_factor=2', 4, 128)
    flags = {'short_factor': [1.0] * 4, 'long_factor': [1.0, 2.0, 4.0, 8.0], 'beta_fast': 8.0}
    arms = parse_arms('longrope,yarn', 4, 128, flags=flags)  # lists come as flags (finetune_long.py --long_factor=[...])
    assert [n for n, _ in arms] == ['longrope s=4', 'yarn s=4 β_fast=8']
    assert arms[0][1] == check_scaling(lr_cfg(short_factor=[1.0] * 4))
    assert lab.measure.arm_specs.scaling_name(lr_cfg(attention_factor=1.0)) == 'longrope s=4 attention_factor=1'


def test_longrope_start_tokens_keep_plain_rope():
    """n-hat (start_token_idx, the reference's MixedLongRoPEScaledRotaryEmbedding): 0 or absent is the old config and
    the old tables bit for bit; with n-hat = 5 the rows of positions < 5 are plain RoPE's (attention factor 1), those
    >= 5 the scaled ones (long factors past L, with the temperature), for int T and for position tensors."""
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=11, n_layer=1, n_head=2, n_embd=16, dropout=0.0))  # head_dim 8
    plain = [m.rope_tables(T) for T in (16, 300)]
    sc = dict(lr_cfg(), long_factor=[1.0, 2.0, 4.0, 8.0])
    assert check_scaling(dict(sc, start_token_idx=0)) == check_scaling(sc) and 'start_token_idx' not in \
        check_scaling(dict(sc, start_token_idx=0))
    m.set_rope_scaling(sc)
    scaled = [m.rope_tables(T) for T in (16, 300)] + [m.rope_tables(torch.arange(3, 200)[None].expand(2, -1))]
    m.set_rope_scaling(dict(sc, start_token_idx=0))
    zero = [m.rope_tables(T) for T in (16, 300)] + [m.rope_tables(torch.arange(3, 200)[None].expand(2, -1))]
    assert all(torch.equal(a, b) for x, y in zip(scaled, zero) for a, b in zip(x, y))  # n-hat 0: bit for bit
    m.set_rope_scaling(dict(sc, start_token_idx=5))
    assert m.config.rope_scaling['start_token_idx'] == 5
    for (pc, ps), (sc_, ss), T in zip(plain, scaled, (16, 300)):
        cos, sin = m.rope_tables(T)
        assert torch.equal(cos[:5], pc[:5]) and torch.equal(sin[:5], ps[:5])  # plain, no temperature
        assert torch.equal(cos[5:], sc_[5:]) and torch.equal(sin[5:], ss[5:])  # scaled (T = 300 > L: long factors)
        assert not torch.equal(cos[:5], sc_[:5])
    ids = torch.tensor([[0, 3, 4, 5, 6, 250], [2, 4, 6, 8, 10, 12]])  # (B, T) ids, e.g. PoSE's: by id, not by slot
    cos, _ = m.rope_tables(ids)
    want = torch.where((ids < 5)[:, None, :, None], plain[1][0][ids][:, None], scaled[1][0][ids][:, None])
    assert cos.shape == (2, 1, 6, 8) and torch.equal(cos[0], want[0])
    x = torch.randint(0, 11, (1, 40))
    m.set_rope_scaling(dict(sc, start_token_idx=40))  # every position below n-hat: the plain model's logits
    both = m(x)[0]
    m.set_rope_scaling(None)
    assert torch.allclose(both, m(x)[0], atol=1e-6)
