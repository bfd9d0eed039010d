"""lab/knobs.py (python -m lab.knobs, issue 47 item 7): every method's knobs for a target length, checked against
numbers worked by hand, against the knobs the lab's own arms use, on a real model's config (SmolLM2-135M), from a
checkpoint folder and a GGUF's metadata, and bad inputs refused in one line."""
import json
import math
import os
import runpy

import pytest
import torch

from badinput import assert_refused, call
from conftest import ROOT
from lab import knobs
from lab.position_maps import parse_position_map

SMOLLM2 = dict(architectures=['LlamaForCausalLM'], model_type='llama', hidden_size=576, num_attention_heads=9,
               num_key_value_heads=3, num_hidden_layers=30, intermediate_size=1536, max_position_embeddings=8192,
               rope_theta=100000.0, rope_scaling=None, tie_word_embeddings=True, vocab_size=49152)


def table(rows):
    """{(method, knob): value} of knobs' rows."""
    return {(m, k): v for m, k, v, _, _ in rows}


def run_json(argv, capsys):
    """main(argv + --json=True) -> the printed dict."""
    capsys.readouterr()
    assert knobs.main([*argv, '--json=True']) == 0
    return json.loads(capsys.readouterr().out)


def value(out, method, knob):
    return out['knobs'][method][knob]['value']


def arm_maps(rope_types):
    """{method: position map} of the position-map arms in a config's rope_types."""
    maps = (parse_position_map(e) for e in rope_types.split(',') if e.split(':')[0] in ('rerope', 'leaky_rerope',
                                                                                        'self_extend', 'dca'))
    return {pm['method']: pm for pm in maps}


def test_the_char_demo_by_hand():
    """L = 128, T = 1024, d = 32 (16 pairs), b = 1e4:
    s = 1024/128 = 8; PI factor 8; NTK b' = 1e4 * 8^(32/30) = 1e4 * 2^3.2 = 1e4 * 9.18959 = 91,895.9, and Dynamic NTK
    at l = T has s_T = 8, the same base.
    YaRN dim(n) = d ln(L/(2 pi n)) / (2 ln b) = 16 ln(20.3718/n) / 9.21034:
      beta_fast = 32: 16 ln(0.636620)/9.21034 = 16 (-0.451583)/9.21034 = -0.7845 -> floor -1 -> clamped to low = 0;
      beta_slow = 1:  16 ln(20.3718)/9.21034 = 16 (3.014199)/9.21034 = 5.2361 -> ceil high = 6;
      as wavelengths L/32 = 4 and L/1 = 128 tokens. L/2pi = 20.37 turns of pair 0 < 32: the caution row.
    mscale = 1 + 0.1 ln 8 = 1 + 0.1 (2.079442) = 1.2079; logits x 1.2079^2 = 1.4591.
    Llama 3.1: wavelengths 2 pi 1e4^(i/16): pair 2 19.87 < L/4 = 32 < pair 3 35.33; pair 5 111.7 < L = 128 < pair 6
    198.7: pairs 0-2 kept, 6-15 PI.
    Critical dimension: 16 log_1e4(20.3718) = 5.236 -> 2 ceil = 12; T_extra = 2 pi 1e4^(12/32) = 2 pi 31.623 = 198.7.
    Base bound at T: 0.0424 * 1024^1.628 = 3,373.9.
    Self-Extend, w = L/2 = 64: G >= (1024 - 64)/(128 - 64) = 960/64 = 15 -> G = 15; the smallest divisor of 64 >= 15
    is 16; farthest position 1023//16 + 64 - 64/16 = 63 + 60 = 123 <= 127.
    Leaky ReRoPE: k >= (1023 - 64)/(127 - 64) = 959/63 = 15.22 -> 16. DCA: S = 3*128/4 = 96, w = 128/16 = 8.
    LongRoPE: f in [1, 1.25*8 = 10]; attention factor sqrt(1 + ln 8/ln 128) = sqrt(1 + 3/7) = sqrt(10/7) = 1.1952."""
    t = table(knobs.knobs(128, 1024, 32, 1e4))
    assert t['scale', 's'] == 8 and t['linear', 'factor'] == 8 and t['yarn', 'factor'] == 8
    assert t['ntk', "base b'"] == pytest.approx(1e4 * 8 ** (32 / 30), rel=1e-9) == pytest.approx(91895.87, abs=0.01)
    assert t['dynamic', 'base at l = T'] == pytest.approx(t['ntk', "base b'"], rel=1e-9)
    assert (t['yarn', 'low (pair)'], t['yarn', 'high (pair)']) == (0, 6)
    assert (t['yarn', 'low (wavelength)'], t['yarn', 'high (wavelength)']) == (4, 128)
    assert t['yarn', 'caution'] == pytest.approx(128 / (2 * math.pi))
    assert t['yarn', 'mscale'] == t['yarn', 'attention_factor'] == pytest.approx(1.2079, abs=5e-5)
    assert t['yarn', 'logit scale'] == pytest.approx(1.4591, abs=5e-5)
    assert (t['llama3', 'high_freq_wavelen'], t['llama3', 'low_freq_wavelen']) == (32, 128)
    formulas = {(m, k): f for m, k, _, f, _ in knobs.knobs(128, 1024, 32, 1e4)}
    assert 'pairs 0-2' in formulas['llama3', 'high_freq_wavelen']
    assert 'pairs 6-15' in formulas['llama3', 'low_freq_wavelen']
    assert t['plain', 'd_extra'] == 12 and t['plain', 'T_extra'] == pytest.approx(198.7, abs=0.05)
    assert t['abf', 'base bound at T'] == pytest.approx(3373.9, abs=0.05)
    assert (t['self_extend', 'window w'], t['self_extend', 'group G (rule)'], t['self_extend', 'group G (divides w)'],
            t['self_extend', 'farthest position']) == (64, 15, 16, 123)
    assert t['rerope', 'window w'] == 64 and t['leaky_rerope', 'k'] == 16
    assert (t['dca', 'chunk S'], t['dca', 'local window w']) == (96, 8)
    assert (t['longrope', 'f_i lower'], t['longrope', 'f_i upper']) == (1, 10)
    assert t['longrope', 'attention factor'] == pytest.approx(math.sqrt(10 / 7))
    assert t['longrope', 'n-hat candidates'] == [0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64, 128, 256]


def test_the_lab_arms_follow_the_rules():
    """The demo (config/eval_char_cpu.py at L = 128, T = eval_len = 1024): yarn s = 8 = T/L; with beta_fast = 8 (its
    arms) low = floor(16 ln(20.3718/8)/9.21034) = floor(16 (0.934712)/9.21034) = floor(1.6238) = 1; Self-Extend w = 64,
    G = 32: 64 + 960/32 = 94 <= 128 (G >= 15); ReRoPE w = 64 < 128; Leaky k = 16 = the computed one.
    config/studies/eval_frequencies_cpu.py's DCA chunk 96, window 8 are 3L/4 and L/16."""
    L = runpy.run_path(os.path.join(ROOT, 'config', 'train_shakespeare_char_cpu.py'))['block_size']
    demo = runpy.run_path(os.path.join(ROOT, 'config', 'eval_char_cpu.py'))
    T = demo['eval_len']
    t = table(knobs.knobs(L, T, 32, 1e4, beta_fast=8.0))
    assert (L, T, t['yarn', 'factor'], t['yarn', 'low (pair)']) == (128, 1024, 8, 1)
    maps = arm_maps(demo['rope_types'])
    se = maps['self_extend']
    assert se['window'] == t['self_extend', 'window w'] and se['group'] >= t['self_extend', 'group G (rule)']
    assert se['window'] + (T - se['window']) / se['group'] <= L and se['window'] % se['group'] == 0
    assert maps['rerope']['window'] == t['rerope', 'window w'] < L
    assert maps['leaky_rerope']['k'] == t['leaky_rerope', 'k']
    dca = arm_maps(runpy.run_path(os.path.join(ROOT, 'config', 'studies', 'eval_frequencies_cpu.py'))['rope_types'])['dca']
    assert (dca['chunk'], dca['window']) == (t['dca', 'chunk S'], t['dca', 'local window w'])


@pytest.mark.parametrize('T, s, ntk, mscale, low, high, G, Gw, reach', [
    (12288, 1.5, 151974.8, 1.04055, 10, 20, 2, 2, 8191),
    (32768, 4.0, 418293.7, 1.13863, 10, 20, 7, 8, 7679)])
def test_smollm2_from_its_config(tmp_path, capsys, T, s, ntk, mscale, low, high, G, Gw, reach):
    """SmolLM2-135M's config.json (L = 8192, b = 1e5, head_dim = 576/9 = 64). YaRN's pairs do not depend on T:
    dim(32) = 32 ln(8192/(2 pi 32))/ln 1e5 = 32 ln(40.7437)/11.5129 = 32 (3.707303)/11.5129 = 10.304 -> 10,
    dim(1) = 32 ln(1303.80)/11.5129 = 32 (7.173039)/11.5129 = 19.937 -> 20.
    T = 12,288: s = 1.5; b' = 1e5 * 1.5^(64/62) = 1e5 e^(1.032258 * 0.405465) = 1e5 e^0.418545 = 151,974.8;
      mscale 1 + 0.1 ln 1.5 = 1.04055; Self-Extend w = 4096: G >= (12288 - 4096)/4096 = 2, reach 12287//2 + 4096 - 2048
      = 8191 = L - 1. The lab's real-model arm (w = 2048, G = 4): 2048 + 10240/4 = 4608 <= 8192.
    T = 32,768: s = 4; b' = 1e5 * 4^(64/62) = 1e5 * 2^2.064516 = 418,293.7; mscale 1 + 0.1 ln 4 = 1.13863;
      G >= 28672/4096 = 7, the smallest divisor of 4096 >= 7 is 8; reach 32767//8 + 4096 - 512 = 4095 + 3584 = 7679.
    Critical dimension 2 ceil(19.937) = 40, T_extra = 2 pi 1e5^(40/64) = 8,378.8."""
    path = tmp_path / 'config.json'
    path.write_text(json.dumps(SMOLLM2))
    out = run_json([f'--config={path}', f'--T={T}'], capsys)
    assert (out['L'], out['head_dim'], out['base']) == (8192, 64, 1e5)
    assert value(out, 'scale', 's') == s and value(out, 'ntk', "base b'") == pytest.approx(ntk, abs=0.05)
    assert value(out, 'yarn', 'mscale') == pytest.approx(mscale, abs=5e-6)
    assert (value(out, 'yarn', 'low (pair)'), value(out, 'yarn', 'high (pair)')) == (low, high)
    assert (value(out, 'self_extend', 'group G (rule)'), value(out, 'self_extend', 'group G (divides w)'),
            value(out, 'self_extend', 'farthest position')) == (G, Gw, reach)
    assert value(out, 'plain', 'd_extra') == 40 and value(out, 'plain', 'T_extra') == pytest.approx(8378.76, abs=0.01)
    real = runpy.run_path(os.path.join(ROOT, 'config', 'eval_real_model_cpu.py'))
    if T == real['eval_len']:  # the lab's own real-model arms at their T
        maps = arm_maps(real['rope_types'])
        w, g = maps['self_extend']['window'], maps['self_extend']['group']
        assert g >= knobs.self_extend_group(8192, T, w)[0] and w + (T - w) / g <= 8192
        assert maps['rerope']['window'] == 8192 // 2 == value(out, 'rerope', 'window w')


def test_the_text_table(capsys):
    """One header line, then method | knob | value | formula | source on every row."""
    capsys.readouterr()
    knobs.main(['--L=128', '--T=1024', '--head_dim=32', '--base=10000'])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('L=128 -> T=1,024 (s = 8), head_dim=32 (16 pairs), base=10000')
    assert all(line.count(' | ') == 4 for line in lines[1:]) and len(lines) == len(knobs.knobs(128, 1024, 32, 1e4)) + 2
    se = next(line for line in lines if line.startswith('self_extend') and 'group G (rule)' in line)
    assert [c.strip() for c in se.split(' | ')][2:4] == ['15', 'smallest G with w + (T-w)/G <= L: ceil((T-w)/(L-w))']


def test_a_checkpoint_folder_and_a_gguf(tmp_path, capsys):
    """A run folder: L from its lineage (train_len 128; block_size 512 after a fine-tune), head_dim 128/4 = 32. A GGUF
    (gguf:<file>, SmolLM2's metadata, one tensor): context 8192, base 1e5, head_dim 576/9 = 64; nothing downloaded."""
    gguf = pytest.importorskip('gguf')
    run = tmp_path / 'run'
    run.mkdir()
    args = dict(block_size=512, n_embd=128, n_head=4, rope_base=1e4, pos_emb='rope',
                rope_scaling={'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 128})
    torch.save({'model': {}, 'model_args': args, 'lineage': {'train_len': 128}}, run / 'ckpt.pt')
    out = run_json([f'--ckpt={run}', '--T=1024'], capsys)
    assert (out['L'], out['head_dim'], out['base'], value(out, 'yarn', 'factor')) == (128, 32, 1e4, 8)
    w = gguf.GGUFWriter(str(tmp_path / 'smol.gguf'), 'llama')
    for key, v in dict(context_length=8192, embedding_length=576, block_count=30, feed_forward_length=1536,
                       vocab_size=8, **{'attention.head_count': 9, 'attention.head_count_kv': 3}).items():
        w.add_uint32(f'llama.{key}', v)
    w.add_float32('llama.rope.freq_base', 1e5)
    w.add_tensor('token_embd.weight', torch.zeros(8, 576).numpy())
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    out = run_json([f'--ckpt=gguf:{tmp_path / "smol.gguf"}', '--T=12288'], capsys)
    assert (out['L'], out['head_dim'], out['base'], value(out, 'scale', 's')) == (8192, 64, 1e5, 1.5)


def test_partial_rotation_and_overrides(tmp_path, capsys):
    """GPT-NeoX rotates rotary_pct of each head: 0.25 * 512/8 = 16 dims; --L overrides the file's length."""
    path = tmp_path / 'config.json'
    path.write_text(json.dumps(dict(model_type='gpt_neox', hidden_size=512, num_attention_heads=8, rotary_pct=0.25,
                                    rotary_emb_base=10000, max_position_embeddings=2048)))
    out = run_json([f'--config={path}', '--T=8192'], capsys)
    assert (out['L'], out['head_dim'], out['base']) == (2048, 16, 1e4)
    assert run_json([f'--config={path}', '--T=8192', '--L=1024'], capsys)['L'] == 1024


@pytest.mark.parametrize('argv, names', [
    (['--L=128', '--T=128', '--head_dim=32'], ['T=128', 'L=128', '--T']),
    (['--L=128', '--T=1024', '--head_dim=31'], ['head_dim=31', 'even']),
    (['--L=128', '--T=1024', '--head_dim=-4'], ['head_dim=-4']),
    (['--L=128', '--T=1024', '--head_dim=32', '--base=1'], ['base=1']),
    (['--T=1024', '--head_dim=32'], ['L', '--L=']),
    (['--L=128', '--T=1024', '--head_dim=32', '--beta_fast=0.5'], ['beta_fast']),
    (['--L=128', '--T=1024', '--head_dim=32', '--window=128'], ['window=128']),
    (['--T=1024', '--config=nosuch/config.json'], ['config=nosuch/config.json', 'does not exist']),
    (['--T=1024', '--ckpt=nosuch_run'], ['nosuch_run']),
    (['--T=1024', '--config=a.json', '--ckpt=b'], ['config', 'ckpt']),
    (['--T=1024', '--head_dim=32.5'], ['head_dim']),
])
def test_bad_inputs_are_refused_in_one_line(argv, names, capsys):
    assert_refused(*call(knobs.main, argv, capsys), names)


@pytest.mark.parametrize('drop, names', [
    (('max_position_embeddings',), ['max_position_embeddings', '--L=']),
    (('hidden_size', 'num_attention_heads'), ['head_dim', 'hidden_size']),
    (('rope_theta',), ['rope_theta', '--base=']),
])
def test_a_config_lacking_a_field_is_refused_naming_it(tmp_path, capsys, drop, names):
    path = tmp_path / 'config.json'
    path.write_text(json.dumps({k: v for k, v in SMOLLM2.items() if k not in drop}))
    assert_refused(*call(knobs.main, [f'--config={path}', '--T=32768'], capsys), names)
