"""The lab's reading of a model's rope config equals transformers' own rope initialisation (issue 59 item 2): for every
rope type transformers implements and for published configs written here as dicts (their rope and shape fields as the
model's config.json has them), lab.hf.inspect.describe gives, per kind of layer, the inverse frequencies and the
attention factor that transformers' ROPE_INIT_FUNCTIONS (or the model's compute_default_rope_parameters) compute from
the same config, within 1e-6 relative. transformers is a test-only reference: these skip without it. Also the
inspector's command on them, and its bad input."""
import json

import pytest
import torch

from lab.hf.inspect import describe

LLAMA31 = dict(model_type='llama', hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, num_hidden_layers=32,
               max_position_embeddings=131072, rope_theta=500000.0,
               rope_scaling=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                 original_max_position_embeddings=8192, rope_type='llama3'))
LLAMA32 = dict(LLAMA31, hidden_size=2048, head_dim=64, num_hidden_layers=16,
               rope_scaling=dict(LLAMA31['rope_scaling'], factor=32.0))
QWEN25_YARN = dict(model_type='qwen2', hidden_size=3584, num_attention_heads=28, num_key_value_heads=4, num_hidden_layers=28,
                   max_position_embeddings=32768, rope_theta=1000000.0,  # its model card's YaRN block, 4 x 32k
                   rope_scaling=dict(factor=4.0, original_max_position_embeddings=32768, type='yarn'))
QWEN3 = dict(model_type='qwen3', hidden_size=4096, head_dim=128, num_attention_heads=32, num_key_value_heads=8,
             num_hidden_layers=36, max_position_embeddings=40960, rope_theta=1000000.0, rope_scaling=None)
QWEN3_YARN = dict(QWEN3, max_position_embeddings=131072,
                  rope_scaling=dict(rope_type='yarn', factor=4.0, original_max_position_embeddings=32768))
DEEPSEEK_V3 = dict(model_type='deepseek_v3', hidden_size=7168, num_attention_heads=128, num_key_value_heads=128,
                   num_hidden_layers=61, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, kv_lora_rank=512,
                   q_lora_rank=1536, max_position_embeddings=163840, rope_theta=10000,
                   rope_scaling=dict(beta_fast=32, beta_slow=1, factor=40, mscale=1.0, mscale_all_dim=1.0,
                                     original_max_position_embeddings=4096, type='yarn'))
# Phi-3.5-mini's rope fields: L at the top level, no factor; its factor lists here are Phi-3-128k's published ones
# (48 per list, head_dim 96), which the reading does not depend on
PHI_LONG = [1.03, 1.05, 1.05, 1.08, 1.23, 1.23, 1.3, 1.45, 1.6, 1.65, 1.9, 2.86, 3.69, 5.42, 5.49, 5.49, 9.09, 11.58,
            15.66, 15.77, 15.79, 18.36, 21.99, 23.08, 30.01, 32.35, 32.59, 35.56, 39.95, 53.84, 56.2, 57.95, 59.29,
            59.77, 59.92, 61.19, 61.96, 62.5, 63.37, 63.48, 63.48, 63.66, 63.85, 64.08, 64.76, 64.8, 64.81, 64.81]
PHI_SHORT = [1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.25, 1.25, 1.4, 1.45, 1.55, 1.85, 1.9] + [2.0] * 19 + \
    [2.1, 2.1, 2.2, 2.35, 2.35, 2.35, 2.35, 2.4, 2.4, 2.65, 2.7, 2.9, 2.95, 3.05, 3.05, 3.05]
PHI35 = dict(model_type='phi3', hidden_size=3072, num_attention_heads=32, num_key_value_heads=32, num_hidden_layers=32,
             max_position_embeddings=131072, original_max_position_embeddings=4096, rope_theta=10000.0,
             rope_scaling=dict(long_factor=PHI_LONG, short_factor=PHI_SHORT, type='longrope'))
GEMMA3 = dict(model_type='gemma3_text', hidden_size=2560, head_dim=256, num_attention_heads=8, num_key_value_heads=4,
              num_hidden_layers=34, max_position_embeddings=131072, rope_theta=1000000.0, rope_local_base_freq=10000.0,
              sliding_window=1024, sliding_window_pattern=6, rope_scaling=dict(factor=8.0, rope_type='linear'))
GPT_OSS = dict(model_type='gpt_oss', hidden_size=2880, head_dim=64, num_attention_heads=64, num_key_value_heads=8,
               num_hidden_layers=24, max_position_embeddings=131072, rope_theta=150000, sliding_window=128,
               layer_types=['sliding_attention', 'full_attention'] * 12, num_local_experts=32,
               rope_scaling=dict(beta_fast=32.0, beta_slow=1.0, factor=32.0, original_max_position_embeddings=4096,
                                 rope_type='yarn', truncate=False))
LLAMA4 = dict(model_type='llama4_text',  # Scout's text config: llama3 with low = high = 1 (a step)
              hidden_size=5120, head_dim=128, num_attention_heads=40, num_key_value_heads=8,
              num_hidden_layers=48, max_position_embeddings=10485760, rope_theta=500000.0, attention_chunk_size=8192,
              attn_temperature_tuning=True, floor_scale=8192, attn_scale=0.1, no_rope_layer_interval=4,
              rope_scaling=dict(factor=16.0, high_freq_factor=1.0, low_freq_factor=1.0,
                                original_max_position_embeddings=8192, rope_type='llama3'))
MINISTRAL3 = dict(model_type='ministral3', hidden_size=4096, head_dim=128, num_attention_heads=32, num_key_value_heads=8,
                  num_hidden_layers=34, max_position_embeddings=262144,
                  rope_parameters=dict(type='yarn', rope_theta=1000000.0, factor=16.0, original_max_position_embeddings=16384,
                                       beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0,
                                       llama_4_scaling_beta=0.1))
SMOLLM2 = dict(model_type='llama', hidden_size=576, num_attention_heads=9, num_key_value_heads=3, num_hidden_layers=30,
               max_position_embeddings=8192, rope_theta=100000, rope_scaling=None)
# the other types transformers implements, on a small Llama (and a partial rotation, GPT-NeoX's form)
SMALL = dict(model_type='llama', hidden_size=512, num_attention_heads=8, num_key_value_heads=8, num_hidden_layers=2,
             max_position_embeddings=4096, rope_theta=10000.0)
DYNAMIC = dict(SMALL, rope_scaling=dict(rope_type='dynamic', factor=2.0))
LINEAR = dict(SMALL, rope_scaling=dict(rope_type='linear', factor=4.0))
YARN_MSCALE = dict(SMALL, rope_scaling=dict(rope_type='yarn', factor=8.0, original_max_position_embeddings=1024,
                                            mscale=0.707, mscale_all_dim=0.707, beta_fast=16.0))
YARN_PARTIAL = dict(SMALL, partial_rotary_factor=0.5,
                    rope_scaling=dict(rope_type='yarn', factor=4.0, original_max_position_embeddings=1024))
PROPORTIONAL = dict(SMALL, rope_scaling=dict(rope_type='proportional', partial_rotary_factor=0.25))
PUBLISHED = dict(llama31=LLAMA31, llama32=LLAMA32, qwen25_yarn=QWEN25_YARN, qwen3=QWEN3, qwen3_yarn=QWEN3_YARN,
                 deepseek_v3=DEEPSEEK_V3, phi35=PHI35, gemma3=GEMMA3, gpt_oss=GPT_OSS, llama4=LLAMA4,
                 ministral3=MINISTRAL3, smollm2=SMOLLM2, dynamic=DYNAMIC, linear=LINEAR, yarn_mscale=YARN_MSCALE,
                 yarn_partial=YARN_PARTIAL, proportional=PROPORTIONAL)


def hf_config(d):
    transformers = pytest.importorskip('transformers')
    return transformers.AutoConfig.for_model(**json.loads(json.dumps(d)))


def hf_rope(config, layer_type=None, seq_len=None):
    """transformers' (inv_freq, attention_factor) for a config (and a layer type of a per-layer one)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    rp = config.rope_parameters[layer_type] if layer_type else config.rope_parameters
    t = rp.get('rope_type', 'default')
    if t == 'default':  # the model's own rotary class computes it (Gemma 3's per layer type)
        import importlib
        pkg = config.model_type.removesuffix('_text')
        mod = importlib.import_module(f'transformers.models.{pkg}.modeling_{pkg}')
        rot = next(getattr(mod, n) for n in dir(mod) if n.endswith('RotaryEmbedding')
                   and hasattr(getattr(mod, n), 'compute_default_rope_parameters'))
        return rot.compute_default_rope_parameters(config, **(dict(layer_type=layer_type) if layer_type else {}))
    kw = dict(layer_type=layer_type) if layer_type else {}
    return ROPE_INIT_FUNCTIONS[t](config, None, seq_len, **kw)


def close(a, b, rel=1e-6):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    return a.shape == b.shape and bool(((a - b).abs() <= rel * b.abs().clamp_min(1e-30)).all())


@pytest.mark.parametrize('name', list(PUBLISHED))
def test_the_lab_reads_each_config_as_transformers_initialises_it(name):
    """Per kind of layer, theta'_i and the attention factor equal transformers' within 1e-6 relative (dynamic types at
    3 x their L, so the scale moves; LongRoPE at L and past it, where its long factors switch on)."""
    d = PUBLISHED[name]
    config = hf_config(d)
    info = describe(d, name)
    per_type = isinstance(config.rope_parameters, dict) and all(isinstance(v, dict) for v in config.rope_parameters.values())
    for g in info['groups']:
        if not g['rope']:
            continue
        lt = ('sliding_attention' if g['window'] else 'chunked_attention' if g['chunk'] else 'full_attention') \
            if per_type else None
        lt = lt if not per_type or lt in config.rope_parameters else 'full_attention'
        t = (g['scaling'] or {}).get('rope_type', 'default')
        lengths = [None]
        if t in ('dynamic', 'longrope'):
            L = g['L']
            lengths = [L, 3 * L]
        for n in lengths:
            inv, af = hf_rope(config, lt, n)
            if n is None:
                ours, our_af = g['inv_freq'], g['attention_factor']
            else:
                from rope_config import rope_inv_freq
                o, our_af = rope_inv_freq(info['head_dim'], g['base'], g['scaling'], n, info['rotary_dim'])
                ours = o[:info['rotary_dim'] // 2]
            assert close(ours, inv.double()), (name, lt, n, ours[:4], inv[:4])
            assert abs(our_af - float(af)) <= 1e-6 * abs(float(af)), (name, lt, n, our_af, af)


def test_phi35_reads_its_top_level_L_so_the_long_factors_and_the_factor_switch_on():
    """The bug the issue names: L was max_position_embeddings (131,072), the attention factor 1.0 and the long factors
    never on; now L = 4,096 (top level), s = 32, attention factor sqrt(1 + ln 32 / ln 4096) = 1.1902."""
    g, = describe(PHI35)['groups']
    assert g['L'] == 4096 and g['factor'] == 32.0
    assert abs(g['attention_factor'] - (1 + __import__('math').log(32) / __import__('math').log(4096)) ** 0.5) < 1e-12
    assert abs(g['attention_factor'] - 1.1902) < 1e-4


def test_per_layer_forms_are_read_layer_by_layer():
    """Gemma 3: 5 local layers at 1e4 unscaled to 1 global at 1e6 with linear 8; gpt-oss: YaRN on both kinds; Llama 4:
    chunked RoPE layers scaled, every 4th layer NoPE; layer_rope_theta (0 = NoPE) gives per-layer bases."""
    g = {(x['window'], x['base']): x for x in describe(GEMMA3)['groups']}
    assert len(g[(1024, 10000.0)]['layers']) == 29 and g[(1024, 10000.0)]['scaling'] is None
    assert g[(None, 1000000.0)]['layers'] == [5, 11, 17, 23, 29] and g[(None, 1000000.0)]['scaling']['factor'] == 8.0
    assert {x['scaling']['rope_type'] for x in describe(GPT_OSS)['groups']} == {'yarn'}
    l4 = describe(LLAMA4)
    nope = [x for x in l4['groups'] if not x['rope']][0]
    assert nope['layers'] == list(range(3, 48, 4)) and [x for x in l4['groups'] if x['rope']][0]['chunk'] == 8192
    assert any('NoPE' in where for where, _, _ in l4['temperatures'])
    granite = dict(SMALL, num_hidden_layers=4, layer_rope_theta=[10000.0, 0, 500000.0, 0])
    got = {(x['rope'], x['base']): x['layers'] for x in describe(granite)['groups']}
    assert got[(True, 10000.0)] == [0] and got[(True, 500000.0)] == [2] and sorted(
        sum((v for (r, _), v in got.items() if not r), [])) == [1, 3]


def test_the_temperatures_transformers_applies_in_the_attention():
    """DeepSeek-V3: softmax scale x (0.1 ln 40 + 1)^2 = 1.8739 (the cos/sin factor is 1: mscale / mscale_all_dim);
    Ministral 3: queries x (1 + 0.1 ln(1 + floor(p / 16,384)))."""
    (where, what, v), = describe(DEEPSEEK_V3)['temperatures']
    assert where == 'softmax scale' and abs(v - (0.1 * __import__('math').log(40) + 1) ** 2) < 1e-12
    assert describe(DEEPSEEK_V3)['groups'][0]['attention_factor'] == 1.0
    (where, what, _), = describe(MINISTRAL3)['temperatures']
    assert 'every layer' in where and '16384' in what


def test_inspect_command_prints_each_layer_kind_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    from badinput import assert_refused, call
    from lab.hf import inspect as I
    p = tmp_path / 'config.json'
    p.write_text(json.dumps(PHI35))
    assert I.main([str(p), '--json']) == 0
    out = json.loads(capsys.readouterr().out)
    assert out['groups'][0]['L'] == 4096
    bad = {'unknown.json': dict(SMALL, rope_scaling=dict(rope_type='warp', factor=2.0)),
           'wrongtype.json': dict(SMALL, rope_scaling=dict(rope_type='linear', factor='four')),
           'nohead.json': dict(model_type='llama', max_position_embeddings=4096),
           'lengths.json': dict(SMALL, rope_scaling=dict(rope_type='yarn', factor=4.0,
                                                         original_max_position_embeddings=0)),
           'theta.json': dict(SMALL, num_hidden_layers=2, layer_rope_theta=[1e4])}
    for fname, d in bad.items():
        (tmp_path / fname).write_text(json.dumps(d))
        code, err = call(I.main, [tmp_path / fname], capsys)
        assert code == 2 and fname in err, (fname, err)
    (tmp_path / 'list.json').write_text('[1]')
    assert_refused(*call(I.main, [tmp_path / 'list.json'], capsys), ['list.json'])
    assert_refused(*call(I.main, [tmp_path / 'none.json'], capsys), ['none.json', 'not found'])


def test_the_engines_names_for_the_engine_only_types():
    """Hunyuan's {'type': 'dynamic', 'alpha': 1000} reads as ntk_alpha (b' = b 1000^(d/(d-2)), static); vLLM's 'ntk'
    as ntk_mixed (b = 1: pair 0 squeezed by s^(2/d))."""
    from lab.hf.config import from_hf
    sc, theta = from_hf(dict(SMALL, rope_scaling=dict(type='dynamic', alpha=1000.0, factor=1.0)))
    assert sc['rope_type'] == 'ntk_alpha' and sc['alpha'] == 1000.0 and theta == 10000.0
    g, = describe(dict(SMALL, rope_scaling=dict(type='dynamic', alpha=1000.0, factor=1.0)))['groups']
    d = 64
    want = (10000.0 * 1000.0 ** (d / (d - 2))) ** (-2 / d)  # pair 1 at the raised base (float32 tables)
    assert abs(g['inv_freq'][1] / want - 1) < 1e-6
    sc, _ = from_hf(dict(rope_type='ntk', factor=4.0))
    assert sc['rope_type'] == 'ntk_mixed' and sc['mixed_b'] == 1.0


def test_inspect_reads_a_gguf_and_an_export_and_refuses_what_has_no_rope(tmp_path, capsys):
    """A GGUF is read as the lab loads it (its rope keys named); an exported folder's two rope forms agree, so no engine
    warns about which one wins; Qwen2.5's card (M = L, factor 4) gets the M != s x L note; a GPT-2 config and a GGUF of
    another architecture are one line each, naming the file."""
    from badinput import assert_refused, call
    from lab.hf import inspect as I
    from test_real_model import gguf_tensors, hf_weights, write_gguf
    good = write_gguf(tmp_path / 'tiny.gguf', gguf_tensors(hf_weights()))
    assert I.main([good]) == 0
    out = capsys.readouterr().out
    assert 'tiny.gguf: GGUF' in out and 'llama.rope.freq_base' in out and 'plain RoPE' in out
    both = dict(SMOLLM2, max_position_embeddings=32768,
                rope_scaling=dict(rope_type='yarn', factor=4.0, original_max_position_embeddings=8192),
                rope_parameters=dict(rope_type='yarn', factor=4.0, original_max_position_embeddings=8192,
                                     rope_theta=100000))
    report = I.report(describe(both), I.engine_readings(both))
    assert 'factor s = 4.0, L = 8192' in report and 'both rope_scaling and rope_parameters' not in report
    split = dict(both, rope_parameters=dict(both['rope_parameters'], factor=2.0))  # the two forms disagree
    assert 'both rope_scaling and rope_parameters' in I.report(describe(split), I.engine_readings(split))
    assert 'is not s x L = 131,072' in I.report(describe(QWEN25_YARN), [])
    (tmp_path / 'gpt2.json').write_text(json.dumps(dict(model_type='gpt2', n_embd=768, n_head=12)))
    assert_refused(*call(I.main, [tmp_path / 'gpt2.json'], capsys), ['gpt2.json', 'no rope'])
    other = write_gguf(tmp_path / 'gemma.gguf', gguf_tensors(hf_weights()), arch='gemma')
    assert_refused(*call(I.main, [other], capsys), ['gemma.gguf', 'architecture'])


@pytest.mark.parametrize('name', ['llama31', 'qwen25_yarn', 'deepseek_v3', 'phi35', 'gemma3', 'gpt_oss', 'llama4',
                                  'ministral3', 'smollm2'])
def test_the_report_gives_every_engine_a_reading_with_its_source(name):
    """For each published config the printed report holds a line for each of the five engines, each with its source
    file and version, and one section per kind of layer."""
    from lab.hf.engines import ENGINES
    from lab.hf.inspect import engine_readings, report
    d = PUBLISHED[name]
    info = describe(d, name)
    text = report(info, engine_readings(d), name)
    for engine in ENGINES:
        assert any(line.startswith(f"- {engine}, ") and ' @ ' in line for line in text.splitlines()), (name, engine)
    assert text.count('\n## ') == len(info['groups']) + 1
