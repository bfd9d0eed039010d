"""Issue 59 item 3: the four RoPE variants only the inference engines ship, as rope types: Grok's 'yarn_log' (SGLang),
TeleChat3's YaRN temperature 0.07 ln s + 1 ('yarn_telechat', vLLM), NTK-mixed ('ntk_mixed', vLLM's 'ntk' with mixed_b)
and Hunyuan's alpha-NTK ('ntk_alpha', vLLM/SGLang's DynamicNTKAlphaRotaryEmbedding). Every expected number is worked
by hand from the engine's formula at head_dim 8 and base 1e4, where theta_i = 10^-i = 1, 0.1, 0.01, 0.001; then the
table row's checks, rope_inv_freq, a tiny model's forward, the arm specs and the Hugging Face export."""
import math

import pytest
import torch

import rope_config
from lab.hf import export as hf_export
from lab.hf.config import from_hf
from lab.measure.arm_specs import parse_arm, parse_arms, slug
from model import GPT, GPTConfig
from rope import rope_cos_sin
from rope_config import DYNAMIC_TYPES, ROPE_TYPES, check_scaling, rope_inv_freq

D, B = 8, 1e4
THETA = [1.0, 0.1, 0.01, 0.001]
NEW = ('yarn_log', 'yarn_telechat', 'ntk_mixed', 'ntk_alpha')


def inv(scaling, seq_len=None, d=D):
    """(theta' as float64 list, attention factor) through the table, as the model gets them."""
    f, af = rope_inv_freq(d, B, scaling, seq_len)
    return f.double().tolist(), af


def near(got, want, rel=1e-6):
    assert got == pytest.approx(want, rel=rel, abs=0), (got, want)


def sc(t, s=8.0, L=1000, **kw):
    return {'rope_type': t, 'factor': s, 'original_max_position_embeddings': L, **kw}


def test_the_four_are_rope_types_and_static():
    """All four are static in the engines (a cos/sin table built once), so none is in DYNAMIC_TYPES."""
    assert set(NEW) <= set(ROPE_TYPES) and not set(NEW) & set(DYNAMIC_TYPES)
    for t in NEW:
        assert inv(sc(t), 10) == inv(sc(t), 10 ** 6)  # the forward's length changes nothing


# ----------------------------------------------------------------------------- Grok's yarn_log (SGLang)

def test_yarn_log_blends_in_log_space_by_hand():
    """d = 8, L = 1000: dim(n) = 8 ln(1000/(2 pi n)) / (2 ln 1e4); dim(32) = 0.697 -> low = 0, dim(1) = 2.202 -> high = 3,
    so ramp_i = i/3. At s = 8: theta'_i = theta_i / 8^(i/3) = theta_i / 2^i. YaRN's linear blend, theta_i (1 - r + r/s),
    gives 0.1 * 17/24 and 0.01 * 5/12 in the ramp: the log blend squeezes the ramp pairs more; the ends agree."""
    dim = lambda n: 8 * math.log(1000 / (2 * math.pi * n)) / (2 * math.log(1e4))  # noqa: E731
    assert (math.floor(dim(32)), math.ceil(dim(1))) == (0, 3)
    got, af = inv(sc('yarn_log'))
    near(got, [1.0, 0.05, 0.0025, 0.000125])
    near(got, [t / 8 ** (i / 3) for i, t in enumerate(THETA)])
    assert af == 1.0  # the engine computes mscale and leaves it off cos/sin
    yarn, _ = inv(sc('yarn'))
    near(yarn, [1.0, 0.1 * 17 / 24, 0.01 * 5 / 12, 0.000125])
    assert got[0] == yarn[0] and got[3] == pytest.approx(yarn[3]) and got[1] < yarn[1] and got[2] < yarn[2]


def test_yarn_log_takes_the_band_edges():
    """beta_fast = 2: dim(2) = 8 ln(1000/(4 pi)) / (2 ln 1e4) = 1.90 -> low = 1; ramp = 0, 0, 1/2, 1:
    pair 2 is theta_2 / sqrt(8) (the geometric mean of theta_2 and theta_2 / 8)."""
    got, _ = inv(sc('yarn_log', beta_fast=2.0))
    near(got, [1.0, 0.1, 0.01 / math.sqrt(8), 0.001 / 8])


def test_yarn_log_edge_when_the_range_is_one_pair_follows_grok():
    """L = 6 < 2 pi: both correction dims are below 0, so low = high = 0. Grok's ramp moves low down by 0.001 (pair 0
    ramps fully: every pair is PI's theta/s); HF's yarn moves high up (pair 0 kept)."""
    got, _ = inv(sc('yarn_log', L=6))
    near(got, [t / 8 for t in THETA])
    assert inv(sc('yarn', L=6))[0][0] == 1.0


# ----------------------------------------------------------------------------- TeleChat3's YaRN temperature (vLLM)

def test_yarn_telechat_is_yarn_with_temperature_0_07_ln_s_plus_1():
    """The frequencies are YaRN's; the factor on cos and sin is 0.07 ln 8 + 1 = 1.1455609 (YaRN's: 0.1 ln 8 + 1 =
    1.2079442); 1 at s = 1."""
    got, af = inv(sc('yarn_telechat'))
    near(got, [1.0, 0.1 * 17 / 24, 0.01 * 5 / 12, 0.000125])
    assert af == pytest.approx(1.1455609, abs=1e-7) and af == pytest.approx(0.07 * math.log(8) + 1, rel=1e-15)
    assert inv(sc('yarn'))[1] == pytest.approx(1.2079442, abs=1e-7)
    assert inv(sc('yarn_telechat', s=1.0))[1] == 1.0
    # truncate is honoured (vLLM passes it to YaRN's correction range): the same curve as yarn's without it
    near(inv(sc('yarn_telechat', truncate=False))[0], inv(sc('yarn', truncate=False))[0])
    assert inv(sc('yarn_telechat', truncate=False))[0] != got


def test_yarn_telechat_temperature_sits_on_cos_and_sin():
    """As in vLLM's YaRN cos/sin cache, both tables carry the factor: q.k at equal positions grows by af^2."""
    f, af = rope_inv_freq(D, B, sc('yarn_telechat'))
    cos, sin = rope_cos_sin(f, 5, af, dtype=torch.float64)
    assert torch.allclose(cos ** 2 + sin ** 2, torch.full_like(cos, af * af), rtol=1e-6, atol=0)


# ----------------------------------------------------------------------------- NTK-mixed (vLLM's ntk + mixed_b)

def test_ntk_mixed_by_hand():
    """s = 16, d/2 = 4 pairs, m = i + 1 = 1..4, a = ln 16 / 4^b, lambda_m = exp(a m^b) = 16^((m/4)^b):
    b = 1:   lambda = 2, 4, 8, 16            (vLLM's 'ntk' with no mixed_b: (b s)^(-2i/d) / s^(2/d))
    b = 0.5: lambda = 4^sqrt(m) = 4, 7.103, 11.036, 16
    b = 2:   lambda = 16^(m^2/16) = 2^(1/4), 2, 2^(9/4), 16
    The last pair is always PI (lambda = s); pair 0 is divided too (m counts from 1)."""
    s = 16.0
    near(inv(sc('ntk_mixed', s, mixed_b=1.0))[0], [0.5, 0.025, 0.00125, 0.0000625])
    near(inv(sc('ntk_mixed', s))[0], [0.5, 0.025, 0.00125, 0.0000625])  # mixed_b defaults to 1: vLLM's plain ntk
    near(inv(sc('ntk_mixed', s))[0], [(B * s) ** (-2 * i / D) / s ** (2 / D) for i in range(4)])
    near(inv(sc('ntk_mixed', s, mixed_b=0.5))[0], [t / 4 ** math.sqrt(i + 1) for i, t in enumerate(THETA)])
    near(inv(sc('ntk_mixed', s, mixed_b=0.5))[0], [0.25, 0.1 / 7.1029933, 0.01 / 11.035665, 0.001 / 16])
    near(inv(sc('ntk_mixed', s, mixed_b=2.0))[0], [2 ** -0.25, 0.05, 0.01 / 2 ** 2.25, 0.001 / 16])
    near(inv(sc('ntk_mixed', s, mixed_b=0.0))[0], [t / s for t in THETA])  # b = 0: lambda = s everywhere, PI
    assert inv(sc('ntk_mixed', s, mixed_b=0.625))[1] == 1.0
    # not the lab's 'ntk' (b' = b s^(d/(d-2)), pair 0 kept), though both end in PI
    ntk = inv({'rope_type': 'ntk', 'factor': s})[0]
    assert ntk[0] == 1.0 and inv(sc('ntk_mixed', s))[0][0] == 0.5 and ntk[3] == pytest.approx(0.0000625)


# ----------------------------------------------------------------------------- Hunyuan's alpha-NTK

def test_ntk_alpha_by_hand():
    """b' = 1e4 * alpha^(8/6), theta'_i = b'^(-i/4) = 10^-i * alpha^(-i/3): alpha = 16 gives 10^-i * 2^(-4i/3), the
    last pair theta_3 / 16; Hunyuan's alpha = 1000 (the default) gives 10^(-2i). The factor (s) is not used."""
    near(inv(sc('ntk_alpha', alpha=16.0))[0], [1.0, 0.1 * 2 ** (-4 / 3), 0.01 * 2 ** (-8 / 3), 0.001 / 16])
    near(inv(sc('ntk_alpha', alpha=16.0))[0], [(B * 16 ** (8 / 6)) ** (-2 * i / 8) for i in range(4)])
    got, af = inv({'rope_type': 'ntk_alpha'})  # no factor, no L needed: Hunyuan's {'alpha': 1000, 'factor': 1}
    near(got, [1.0, 1e-2, 1e-4, 1e-6])
    assert af == 1.0 and check_scaling({'rope_type': 'ntk_alpha'})['factor'] == 1.0
    assert inv(sc('ntk_alpha', s=4.0)) == inv(sc('ntk_alpha', s=64.0))
    assert inv(sc('ntk_alpha', alpha=16.0)) == inv({'rope_type': 'ntk', 'factor': 16.0})  # NTK-aware at s = alpha
    assert inv(sc('ntk_alpha', alpha=1.0))[0] == inv(None)[0]


# ----------------------------------------------------------------------------- the table rows check their keys

@pytest.mark.parametrize('scaling, field', [
    (sc('yarn_log', beta_fast=1.0), 'beta_fast'),
    (sc('yarn_log', beta_slow=0.0), 'beta_slow'),
    (sc('yarn_log', truncate=False), "'truncate' is not used by rope_type 'yarn_log'"),  # Grok always truncates
    (sc('yarn_log', attention_factor=1.0), "'attention_factor' is not used"),
    ({'rope_type': 'yarn_log', 'factor': 4.0}, 'original_max_position_embeddings'),
    (sc('yarn_telechat', beta_fast=0.5), 'beta_fast'),
    (sc('yarn_telechat', mscale=1.0), "'mscale' is not used by rope_type 'yarn_telechat'"),
    (sc('yarn_telechat', truncate='no'), 'truncate'),
    (sc('yarn_telechat', attention_factor_on='heads'), 'attention_factor_on'),
    ({'rope_type': 'yarn_telechat', 'factor': 4.0}, 'original_max_position_embeddings'),
    (sc('ntk_mixed', mixed_b=-0.5), 'mixed_b'),
    (sc('ntk_mixed', mixed_b='0.6'), 'mixed_b'),
    (sc('ntk_mixed', mixed_b=float('inf')), 'mixed_b'),
    (sc('ntk_mixed', 0.5), 'factor'),
    ({'rope_type': 'ntk_mixed'}, 'factor'),
    (sc('ntk_mixed', alpha=2.0), "'alpha' is not used by rope_type 'ntk_mixed'"),
    (sc('ntk_alpha', alpha=0.5), 'alpha'),
    (sc('ntk_alpha', alpha=float('nan')), 'alpha'),
    (sc('ntk_alpha', alpha=True), 'alpha'),
    (sc('ntk_alpha', mixed_b=1.0), "'mixed_b' is not used"),
])
def test_bad_keys_are_one_line_value_errors_naming_the_field(scaling, field):
    for call in (lambda: check_scaling(scaling), lambda: rope_inv_freq(D, B, scaling)):
        with pytest.raises(ValueError, match=field) as e:
            call()
        assert '\n' not in str(e.value)


def test_the_validators_say_what_to_do():
    with pytest.raises(ValueError) as e:
        check_scaling(sc('ntk_mixed', mixed_b=-1.0))
    assert "rope_scaling['mixed_b'] = -1.0 for rope_type 'ntk_mixed': must be >= 0" in str(e.value)
    with pytest.raises(ValueError) as e:
        check_scaling(sc('ntk_alpha', alpha=0.5))
    assert "rope_scaling['alpha'] = 0.5 for rope_type 'ntk_alpha': must be >= 1" in str(e.value)
    with pytest.raises(ValueError, match='head_dim = 2.*ntk_alpha'):  # b' uses d/(d-2)
        rope_inv_freq(2, B, sc('ntk_alpha'))


def test_defaults_are_filled_as_the_engines_have_them():
    assert check_scaling(sc('yarn_log')) == dict(sc('yarn_log'), beta_fast=32.0, beta_slow=1.0)
    assert check_scaling(sc('yarn_telechat')) == dict(sc('yarn_telechat'), beta_fast=32.0, beta_slow=1.0, truncate=True)
    assert check_scaling(sc('ntk_mixed'))['mixed_b'] == 1.0 and check_scaling(sc('ntk_alpha'))['alpha'] == 1000.0
    assert check_scaling({'rope_type': 'ntk_mixed', 'factor': 2, 'mixed_b': 1})['mixed_b'] == 1.0  # ints become floats


# ----------------------------------------------------------------------------- rope_inv_freq and a tiny model

@pytest.mark.parametrize('t', NEW)
def test_tiny_model_forward_uses_the_tables_of_the_type(t):
    """GPT with the type built in, and switched on later: its cos/sin are rope_cos_sin(rope_inv_freq(...)) at 2L, the
    logits are finite, and they differ from plain RoPE's."""
    L = 16
    scaling = {'rope_type': t, 'factor': 4.0, 'original_max_position_embeddings': L, **({'alpha': 16.0} if
                                                                                       t == 'ntk_alpha' else {})}
    torch.manual_seed(0)
    kw = dict(block_size=L, vocab_size=40, n_layer=2, n_head=2, n_embd=32)
    built = GPT(GPTConfig(rope_scaling=scaling, **kw)).eval()
    plain = GPT(GPTConfig(**kw)).eval()
    plain.load_state_dict(built.state_dict())
    f, af = rope_inv_freq(16, 10000.0, scaling)
    cos, sin = built.rope_tables(2 * L)
    want_cos, want_sin = rope_cos_sin(f, 2 * L, af)
    assert torch.equal(cos, want_cos) and torch.equal(sin, want_sin)
    x = torch.randint(0, 40, (2, 2 * L))
    with torch.no_grad():
        out = built(x)[0]
        assert torch.isfinite(out).all() and not torch.allclose(out, plain(x)[0], atol=1e-4)
        plain.set_rope_scaling(scaling)
        assert torch.equal(plain(x)[0], out)


# ----------------------------------------------------------------------------- arm specs (eval.py, finetune_long.py)

def test_arm_specs_accept_them():
    arms = parse_arms('yarn_log:beta_fast=8,yarn_telechat,ntk_mixed:mixed_b=0.625,ntk_alpha:alpha=1000', 4, 128)
    assert [n for n, _ in arms] == ['yarn_log s=4 β_fast=8', 'yarn_telechat s=4', 'ntk_mixed s=4 mixed_b=0.625',
                                    'ntk_alpha s=4 alpha=1000']  # alpha always named: it is the method, as abf's b'
    assert [slug(n) for n, _ in arms] == ['yarn_log_s4_beta_fast8', 'yarn_telechat_s4', 'ntk_mixed_s4_mixed_b0.625',
                                          'ntk_alpha_s4_alpha1000']
    assert arms[2][1] == {'rope_type': 'ntk_mixed', 'factor': 4.0, 'original_max_position_embeddings': 128,
                          'mixed_b': 0.625}
    assert parse_arm('ntk_alpha', 1, 128)['alpha'] == 1000.0
    assert parse_arm('yarn_log', 4, 128, flags={'beta_fast': 8.0, 'mixed_b': 0.5})['beta_fast'] == 8.0  # flags go
    assert parse_arm('ntk_mixed', 4, 128, flags={'beta_fast': 8.0, 'mixed_b': 0.5})['mixed_b'] == 0.5   # where used
    for spec, match in (('ntk_mixed:mixed_b=fast', 'mixed_b'), ('ntk_alpha:alpha=0.5', 'alpha'),
                        ('ntk_alpha:mixed_b=1', 'key one of'), ('yarn_log:truncate=false', 'key one of')):
        with pytest.raises(ValueError, match=match):
            parse_arm(spec, 4, 128)


# ----------------------------------------------------------------------------- the Hugging Face export

@pytest.mark.parametrize('t', NEW)
def test_export_maps_them_as_static_per_pair_curves(t):
    """As ntk_by_parts: 'longrope' with equal short and long factors f_i = theta_i / theta'_i and an explicit
    attention factor, which transformers reads back to the same frequencies at every length."""
    scaling = check_scaling({'rope_type': t, 'factor': 4.0, 'original_max_position_embeddings': 16})
    rp, M = hf_export.hf_rope(16, 10000.0, scaling, 16, 16)
    assert rp['rope_type'] == 'longrope' and rp['short_factor'] == rp['long_factor'] and M == 64
    assert rp['attention_factor'] == rope_inv_freq(16, 10000.0, scaling)[1]
    back, theta = from_hf(rp)
    for n in (8, 16, 17, 64, 256):
        torch.testing.assert_close(rope_inv_freq(16, theta, back, n)[0], rope_inv_freq(16, 10000.0, scaling, n)[0],
                                   rtol=2e-7, atol=0)
        assert rope_inv_freq(16, theta, back, n)[1] == pytest.approx(rope_inv_freq(16, 10000.0, scaling)[1], rel=1e-15)


@pytest.mark.parametrize('t', ['yarn_log', 'yarn_telechat'])
def test_transformers_computes_the_export_logits(tmp_path, t):
    """The exported folder in transformers (no custom code) gives the lab's logits at L and 2L."""
    pytest.importorskip('transformers')
    from test_hf_export import ITOS, L, TOL, load_hf, tiny, write_run
    m = tiny({'rope_type': t, 'factor': 4.0, 'original_max_position_embeddings': L, 'beta_fast': 8.0})
    out, _, _ = hf_export.export(write_run(tmp_path / 'run', m), str(tmp_path / 'hf'))
    hf = load_hf(out)
    torch.manual_seed(1)
    x = torch.randint(len(ITOS), (2, 2 * L))
    with torch.no_grad():
        for T in (L, 2 * L):
            assert (hf(x[:, :T]).logits - m(x[:, :T])[0]).abs().max().item() < TOL, (t, T)
