"""rope_config.py: the table of rope types checks a config (every bad field named), fills its defaults and drives
the arm specs, the flags and the per-pair table."""
import pytest
import torch

import lab.rope_table
import lab.measure.arm_specs
from lab.measure.arm_specs import parse_arm, parse_arms, slug
from rope_config import ROPE_TYPES, all_type_keys, check_scaling, rope_inv_freq, type_keys
from test_rope import cfg


@pytest.mark.parametrize('scaling, field', [
    ({'rope_type': 'rope3'}, 'rope_type'),
    ({'factor': 2.0}, 'rope_type'),
    ({'rope_type': 'linear', 'factor': 2.0, 'beta': 3}, "'beta'"),
    ({'rope_type': 'linear', 'factor': 2.0, 'beta_fast': 3}, 'beta_fast'),  # a key of another type
    ({'rope_type': 'linear', 'factor': 0.5}, 'factor'),
    ({'rope_type': 'yarn', 'original_max_position_embeddings': 128}, 'factor'),
    ({'rope_type': 'ntk', 'factor': 'big'}, 'factor'),
    ({'rope_type': 'yarn', 'factor': 2.0}, 'original_max_position_embeddings'),
    ({'rope_type': 'dynamic', 'factor': 2.0}, 'original_max_position_embeddings'),
    ({'rope_type': 'ntk_by_parts', 'factor': 2.0}, 'original_max_position_embeddings'),
    ({'rope_type': 'dynamic_yarn', 'factor': 2.0}, 'original_max_position_embeddings'),
    ({'rope_type': 'llama3', 'factor': 2.0}, 'original_max_position_embeddings'),
    ({'rope_type': 'yarn', 'factor': 2.0, 'original_max_position_embeddings': 0}, 'original_max_position_embeddings'),
    (cfg('yarn', beta_fast=1.0, beta_slow=1.0), 'beta_fast'),
    (cfg('ntk_by_parts', beta_fast=4.0, beta_slow=8.0), 'beta_fast'),
    (cfg('llama3', low_freq_factor=5.0, high_freq_factor=4.0), 'low_freq_factor'),
    (cfg('yarn', mscale=0.7), 'mscale_all_dim'),
    (cfg('yarn', truncate='no'), 'truncate'),
    (cfg('yarn', attention_factor=0.0), 'attention_factor'),
    (cfg('longrope', long_factor=2.0), 'long_factor'),
    (cfg('longrope', long_factor=[]), 'long_factor'),
    (cfg('longrope', long_factor=[1.0, float('nan')]), 'long_factor'),
    (cfg('longrope', short_factor=[1.0, 0.0]), 'short_factor'),
    (cfg('longrope', short_factor=[1.0, -2.0]), 'short_factor'),
    (cfg('longrope', short_factor=[True, 1.0]), 'short_factor'),
    (cfg('longrope', attention_factor=0.0), 'attention_factor'),
    (cfg('longrope', start_token_idx=-1), 'start_token_idx'),
    (cfg('longrope', start_token_idx=4.0), 'start_token_idx'),
    (cfg('longrope', start_token_idx=True), 'start_token_idx'),
    (cfg('yarn', start_token_idx=4), 'start_token_idx'),  # longrope's key only
    ({'rope_type': 'longrope', 'factor': 4.0, 'original_max_position_embeddings': 128, 'short_factor': [1.0]},
     'long_factor'),
    ({'rope_type': 'longrope', 'original_max_position_embeddings': 128, 'short_factor': [1.0], 'long_factor': [1.0]},
     'factor'),  # no silent s = 1: the default temperature needs s
    ({'rope_type': 'longrope', 'factor': 4.0, 'short_factor': [1.0], 'long_factor': [1.0]},
     'original_max_position_embeddings'),
    ([('rope_type', 'yarn')], 'rope_scaling'),
    (cfg('yarn', original_max_position_embeddings=1.5), r"'original_max_position_embeddings'.*training length L"),
    (cfg('yarn', original_max_position_embeddings=True), r"'original_max_position_embeddings'.*training length L"),
    (cfg('linear', original_max_position_embeddings=0), r"'original_max_position_embeddings'.*training length L"),
])
def test_bad_scaling_names_the_field(scaling, field):
    with pytest.raises(ValueError, match=field):
        check_scaling(scaling)
    with pytest.raises(ValueError, match=field):
        rope_inv_freq(64, 10000.0, scaling)


def test_unknown_type_lists_accepted_values():
    with pytest.raises(ValueError) as e:
        check_scaling({'rope_type': 'yarn2'})
    assert all(t in str(e.value) for t in ROPE_TYPES)


@pytest.mark.parametrize('kw, field', [
    (dict(head_dim=63), 'head_dim'), (dict(head_dim=0), 'head_dim'), (dict(head_dim=-4), 'head_dim'),
    (dict(head_dim=64, base=1.0), 'base'), (dict(head_dim=64, base=0.5), 'base'),
    (dict(head_dim=64, scaling=cfg('dynamic'), seq_len=-1), 'seq_len'),
    (dict(head_dim=2, scaling={'rope_type': 'ntk', 'factor': 2.0}), 'head_dim'),
])
def test_bad_arguments_name_the_field(kw, field):
    with pytest.raises(ValueError, match=field):
        rope_inv_freq(**kw)


def test_check_scaling_fills_defaults_and_copies():
    src = {'rope_type': 'yarn', 'factor': 4, 'original_max_position_embeddings': 256}
    sc = check_scaling(src)
    assert sc == {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 256,
                  'beta_fast': 32.0, 'beta_slow': 1.0, 'truncate': True}
    assert src == {'rope_type': 'yarn', 'factor': 4, 'original_max_position_embeddings': 256}  # untouched
    assert check_scaling(None) is None and check_scaling(sc) == sc  # idempotent (model.py stores the result)
    assert check_scaling({'rope_type': 'dynamic', 'original_max_position_embeddings': 256})['factor'] == 1.0
    assert check_scaling(cfg('llama3'))['high_freq_factor'] == 4.0


def test_cli_view(capsys):
    lab.rope_table.main(['--head_dim', '64', '--L', '256', '--factor', '4'])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + 32 + 3 and lines[1].split()[4:] == ['default', 'linear', 'ntk', 'abf', '1e6', 'dynamic',
                                                                 'by_parts', 'yarn', 'dyn_yarn', 'llama3', 'p=0.25',
                                                                 'clip', 'yarn_log', 'yarn_tc3', 'ntk_mix', 'α=1000']
    assert lines[-1].endswith('b = 10000 suffices up to L\' = 1,996')  # Men et al.'s bound: (1e4 / 0.0424)^(1/1.628)
    assert lines[2].split()[:4] == ['0', '6.3', '40.74', 'high'] and lines[-4].split()[3] == 'low'
    last = lines[-4].split()[4:]  # last pair: every scaled type is PI there; abf's b' = 1e6 turns it 100^(-62/64)
    assert last == ['1.000', '0.250', '0.250', '0.012'] + ['0.250'] * 5 + ['0.000', '0.000'] + ['0.250'] * 3 + ['0.001']
    # (p-RoPE, clip: stopped; ntk_alpha: alpha = 1000 divides the last pair by alpha, as NTK at s = alpha)
    assert lines[-3].split()[-9:] == ['1.139', '1.139', '1.000', '1.000', '1.000', '1.000', '1.097', '1.000', '1.000']
    # (yarn, dynamic yarn: mscale(4) = 0.1 ln 4 + 1; TeleChat3's yarn: 0.07 ln 4 + 1)
    with pytest.raises(ValueError, match='head_dim'):
        lab.rope_table.main(['--head_dim', '63'])


def test_parse_arms():
    arms = parse_arms('default,linear,yarn:beta_fast=8:attention_factor=1,ntk:factor=8', 4, 128)
    assert [n for n, _ in arms] == ['default', 'linear s=4', 'yarn s=4 β_fast=8 attention_factor=1', 'ntk s=8']
    assert arms[2][1]['beta_fast'] == 8.0 and arms[2][1]['original_max_position_embeddings'] == 128
    assert arms[0][1] is None and parse_arms('plain', 4, 128) == [('default', None)]  # the documented alias
    assert slug(arms[2][0]) == 'yarn_s4_beta_fast8_attention_factor1'
    with pytest.raises(ValueError, match='twice'):
        parse_arms('yarn,yarn', 4, 128)
    with pytest.raises(ValueError, match='unknown'):
        parse_arms('pi', 4, 128)
    with pytest.raises(ValueError, match='beta_fast'):
        parse_arms('yarn:beta_fast=fast', 4, 128)
    with pytest.raises(ValueError, match='truncate'):
        parse_arms('yarn:truncate=maybe', 4, 128)


def test_arm_keys_given_twice_are_errors_and_flags_go_where_they_apply():
    with pytest.raises(ValueError, match='beta_fast is given twice'):
        parse_arm('yarn:beta_fast=8:beta_fast=16', 4, 128)
    with pytest.raises(ValueError, match='--beta_fast=16.0 sets it too'):
        parse_arm('yarn:beta_fast=8', 4, 128, flags={'beta_fast': 16.0})
    arms = dict(parse_arms('linear,yarn,llama3', 4, 128, flags={'beta_fast': 8.0, 'high_freq_factor': 8.0,
                                                                'mscale': None}))
    assert arms['yarn s=4 β_fast=8'] == check_scaling({'rope_type': 'yarn', 'factor': 4.0, 'beta_fast': 8.0,
                                                      'original_max_position_embeddings': 128})
    assert arms['llama3 s=4 high_freq_factor=8']['high_freq_factor'] == 8.0
    assert arms['linear s=4'] == {'rope_type': 'linear', 'factor': 4.0, 'original_max_position_embeddings': 128}


def test_one_table_drives_types_and_keys():
    """Every type in the table computes, and its keys (with defaults) are what check_scaling fills in."""
    for t in ROPE_TYPES:
        lists = {k: [2.0] * 16 for k, (typ, _) in type_keys(t).items() if typ is list}  # longrope's factors
        sc = None if t == 'default' else check_scaling({'rope_type': t, 'factor': 2.0,
                                                        'original_max_position_embeddings': 64, **lists})
        inv, af = rope_inv_freq(32, 10000.0, sc, 100)
        assert inv.shape == (16,) and inv.dtype == torch.float32 and af >= 1.0
        if sc:
            assert {k for k, (_, d) in type_keys(t).items() if d is not None} <= set(sc)
    assert set(all_type_keys()) == {'beta_fast', 'beta_slow', 'truncate', 'mscale', 'mscale_all_dim',
                                    'attention_factor', 'low_freq_factor', 'high_freq_factor', 'short_factor',
                                    'long_factor', 'start_token_idx', 'new_base', 'partial_rotary_factor',
                                    'max_wavelength', 'attention_factor_on', 'mixed_b', 'alpha'}


@pytest.mark.parametrize('mscale, mscale_all_dim', [(0.0, 1.0), (1.0, 0.0), (0.0, 0.0)])
def test_yarn_mscale_zero_falls_back_to_the_plain_temperature(mscale, mscale_all_dim):
    """Hugging Face uses mscale/mscale_all_dim only when both are non-zero; else 0.1 ln s + 1."""
    sc = {'rope_type': 'yarn', 'factor': 8.0, 'original_max_position_embeddings': 128, 'mscale': mscale,
          'mscale_all_dim': mscale_all_dim}
    assert rope_inv_freq(32, 10000.0, sc)[1] == pytest.approx(1.2079442, abs=1e-7)
    both = dict(sc, mscale=1.0, mscale_all_dim=0.5)  # (0.1 ln 8 + 1) / (0.05 ln 8 + 1)
    assert rope_inv_freq(32, 10000.0, both)[1] == pytest.approx(1.2079442 / 1.1039721, abs=1e-6)
    with pytest.raises(ValueError, match="mscale"):
        check_scaling(dict(sc, mscale=-1.0))
