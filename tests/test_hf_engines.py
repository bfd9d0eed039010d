"""lab/hf/engines.py, the table of how inference engines read a rope config. Without transformers: every row well
formed (a cited source with a version, a known engine, warn conditions that parse) and the coverage the issue asks
for. With transformers (skipped otherwise): the 'transformers 5.x' rows against the installed version: the types
ROPE_INIT_FUNCTIONS has and lacks, the rope fields each init function reads (from its source text), and the
behaviours the rows and their warn entries state."""
import inspect
import re

import pytest

from lab.hf.engines import (COMMON_FIELDS, ENGINES, FACTOR_ON, LLAMA_CPP_FLAGS, READINGS, TESTED, READ,
                            WARN_PREFIXES, Reading, readings)

CORE = ('default', 'linear', 'dynamic', 'yarn', 'llama3', 'longrope')
T5 = 'transformers 5.x'


def parse_condition(cond):
    """[(negated, kind, field)] of a warn condition ('&'-joined terms, '!' negates one); ValueError for anything the
    inspector could not evaluate."""
    out = []
    for t in cond.split('&'):
        neg, t = t.startswith('!'), t.lstrip('!')
        if t in ('always', 'nested'):
            out.append((neg, t, None))
            continue
        for prefix in WARN_PREFIXES:
            if t.startswith(prefix) and re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', t[len(prefix):]):
                out.append((neg, prefix[:-1], t[len(prefix):]))
                break
        else:
            raise ValueError(f"unparseable warn condition {cond!r}")
    return out


def test_applies_evaluates_conjunctions_and_negations():
    from lab.hf.engines import applies
    cond = 'lacks:original_max_position_embeddings&!top:original_max_position_embeddings'
    assert applies(cond, {'factor'}, {})
    assert not applies(cond, {'factor'}, {'original_max_position_embeddings': 4096})
    assert not applies(cond, {'original_max_position_embeddings'}, {})
    assert applies('top:rope_scaling&top:rope_parameters', set(), {'rope_scaling': {}, 'rope_parameters': {}}) is False
    assert applies('top:rope_scaling&top:rope_parameters', set(), {'rope_scaling': {'a': 1}, 'rope_parameters': {'b': 1}})
    assert applies('always', set(), {})
    nested = {'rope_parameters': {'full_attention': {'rope_type': 'yarn'}, 'sliding_attention': {'rope_type': 'default'}}}
    assert applies('has:truncate&nested', {'truncate'}, nested) and not applies('has:truncate&nested', {'truncate'},
                                                                               {'rope_parameters': {'truncate': True}})


def test_rows_are_well_formed():
    seen = set()
    for r in READINGS:
        assert isinstance(r, Reading) and r.engine in ENGINES, r
        assert (r.engine, r.rope_type) not in seen, f"two rows for {r.engine} / {r.rope_type}"
        seen.add((r.engine, r.rope_type))
        assert '@' in r.source and r.source.split('@', 1)[1].strip(), r.source
        assert r.factor_on in FACTOR_ON, r
        assert r.checked == (TESTED if r.engine == T5 else READ), r
        assert isinstance(r.reads, tuple) and all(isinstance(f, str) and f for f in r.reads), r
        assert isinstance(r.supported, bool) and r.L_from and r.note, r
        if not r.supported:
            assert r.reads == () and r.factor_on == 'none', r
        assert isinstance(r.warn, tuple)
        for w in r.warn:
            assert isinstance(w, tuple) and len(w) == 2 and all(isinstance(x, str) and x for x in w), w
            parse_condition(w[0])


@pytest.mark.parametrize('cond', ['has:', 'top', 'lacks:two words', 'sometimes', 'has:factor;x'])
def test_bad_conditions_do_not_parse(cond):
    with pytest.raises(ValueError):
        parse_condition(cond)


def test_coverage():
    for engine in ENGINES:
        for t in CORE:
            assert len(readings(engine, t)) == 1, (engine, t)
    for engine in ('vLLM', 'SGLang', 'llama.cpp'):
        assert readings(engine, 'deepseek_yarn')[0].supported
    assert not readings(T5, 'deepseek_yarn')[0].supported
    assert set(readings('vLLM', 'yarn')[0].reads) == set(readings(T5, 'yarn')[0].reads)  # vLLM 0.34 reads as HF


def test_engines_and_flags():
    assert set(ENGINES) == {'transformers 4.x', 'transformers 5.x', 'vLLM', 'SGLang', 'llama.cpp'}
    for name, e in ENGINES.items():
        assert set(e) == {'version', 'config_form', 'override', 'source'}, name
        assert all(isinstance(v, str) and v for v in e.values()) and '@' in e['source'], name
    assert '--hf-overrides' in ENGINES['vLLM']['override'] and '#28006' in ENGINES['vLLM']['override']
    for field, f in LLAMA_CPP_FLAGS.items():
        assert set(f) == {'flag', 'gguf', 'note', 'source'} and '@' in f['source'], field
        assert f['flag'] is None or f['flag'].startswith('--'), field
        assert f['gguf'] is None or f['gguf'].startswith(('{arch}.rope.', 'tensor ')), field
    assert LLAMA_CPP_FLAGS['factor']['flag'].startswith('--rope-scale ')
    assert LLAMA_CPP_FLAGS['original_max_position_embeddings']['gguf'] == '{arch}.rope.scaling.original_context_length'


def test_readings_filter():
    assert readings() == READINGS
    assert {r.rope_type for r in readings('vLLM')} >= set(CORE)
    assert {r.engine for r in readings(rope_type='yarn')} == set(ENGINES)
    assert readings('vLLM', 'no_such_type') == []


# ----------------------------------------------------------------------------- against the installed transformers


@pytest.fixture(scope='module')
def tf():
    transformers = pytest.importorskip('transformers')
    if not transformers.__version__.startswith('5.'):
        pytest.skip(f"the 'transformers 5.x' rows need transformers 5, found {transformers.__version__}")
    return transformers


def fields_read(fn):
    """The rope-dict keys a transformers init function reads: rope_parameters[...] / rope_parameters.get(...)."""
    src = inspect.getsource(fn)
    keys = re.findall(r"rope_parameters(?:_dict)?\[\s*['\"](\w+)['\"]\s*\]", src)
    keys += re.findall(r"rope_parameters(?:_dict)?\.get\(\s*['\"](\w+)['\"]", src)
    return set(keys)


def test_types_match_rope_init_functions(tf):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    rows = {r.rope_type: r for r in readings(T5)}
    for t, r in rows.items():
        if t == 'default':
            assert t not in ROPE_INIT_FUNCTIONS and r.supported  # the model's own compute_default_rope_parameters
        else:
            assert (t in ROPE_INIT_FUNCTIONS) == r.supported, t
    assert set(ROPE_INIT_FUNCTIONS) <= set(rows), "a rope type of the installed transformers has no row"


def test_reads_match_the_init_functions(tf):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    for r in readings(T5):
        if not r.supported or r.rope_type == 'default':
            continue
        read = fields_read(ROPE_INIT_FUNCTIONS[r.rope_type])
        assert read - set(COMMON_FIELDS), r.rope_type  # the pattern found the function's reads
        assert read - set(COMMON_FIELDS) <= set(r.reads), (r.rope_type, read - set(r.reads))
        assert set(r.reads) <= read, (r.rope_type, set(r.reads) - read)


def llama(**kw):
    from transformers import LlamaConfig
    return LlamaConfig.from_dict(dict(dict(model_type='llama', hidden_size=64, num_attention_heads=2, rope_theta=1e4,
                                           max_position_embeddings=4096), **kw))


def test_key_precedence_and_saving(tf):
    c = llama(rope_scaling={'rope_type': 'linear', 'factor': 4.0}, rope_parameters={'rope_type': 'yarn', 'factor': 2.0})
    assert c.rope_parameters['rope_type'] == 'linear'  # rope_scaling wins (W_T5, the config_form)
    saved = c.to_dict()
    assert 'rope_scaling' not in saved and 'rope_theta' not in saved and saved['rope_parameters']['rope_theta'] == 1e4
    assert llama().rope_scaling == {'rope_type': 'default', 'rope_theta': 1e4}  # the alias, non-None
    assert any(c == 'top:rope_scaling&top:rope_parameters' for c, _ in readings(T5, 'yarn')[0].warn)
    assert any(c == 'top:rope_parameters&!top:rope_scaling' for c, _ in readings('transformers 4.x', 'yarn')[0].warn)


def test_top_level_original_length_wins(tf):
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    yarn = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 2048}
    c = llama(rope_scaling=dict(yarn), original_max_position_embeddings=512, max_position_embeddings=8192)
    inv, _ = ROPE_INIT_FUNCTIONS['yarn'](c, 'cpu')
    assert c.rope_parameters['original_max_position_embeddings'] == 512
    ref, _ = ROPE_INIT_FUNCTIONS['yarn'](llama(rope_scaling=dict(yarn, original_max_position_embeddings=512),
                                               max_position_embeddings=8192), 'cpu')
    assert torch.equal(inv, ref)
    for t in ('yarn', 'llama3', 'longrope'):
        assert any(w[0] == 'top:original_max_position_embeddings' for w in readings(T5, t)[0].warn), t
    missing = llama(rope_scaling={'rope_type': 'yarn', 'factor': 4.0}, max_position_embeddings=8192)
    assert missing.rope_parameters['original_max_position_embeddings'] == 8192  # W5_NO_L: L = the extended length


def test_dynamic_takes_L_from_max_position_embeddings(tf):
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    c = llama(rope_scaling={'rope_type': 'dynamic', 'factor': 4.0, 'original_max_position_embeddings': 1024})
    f = ROPE_INIT_FUNCTIONS['dynamic']
    assert torch.equal(f(c, 'cpu', seq_len=2048)[0], f(c, 'cpu', seq_len=4096)[0])  # plain up to M = 4096, not 1024
    assert not torch.equal(f(c, 'cpu', seq_len=4096)[0], f(c, 'cpu', seq_len=8192)[0])
    assert readings(T5, 'dynamic')[0].L_from == 'config.max_position_embeddings'


def test_yarn_attention_factor(tf):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS, yarn_get_mscale
    f = ROPE_INIT_FUNCTIONS['yarn']
    base = {'rope_type': 'yarn', 'factor': 16.0, 'original_max_position_embeddings': 256}
    assert f(llama(rope_scaling=dict(base)), 'cpu')[1] == pytest.approx(yarn_get_mscale(16.0))
    assert f(llama(rope_scaling=dict(base, attention_factor=1.0)), 'cpu')[1] == 1.0
    assert f(llama(rope_scaling=dict(base, mscale=1.0, mscale_all_dim=1.0)), 'cpu')[1] == 1.0
    assert f(llama(rope_scaling=dict(base, mscale=0.707, mscale_all_dim=0)), 'cpu')[1] == \
        pytest.approx(yarn_get_mscale(16.0))  # one of the pair 0: the plain get_mscale(s)
    assert readings(T5, 'yarn')[0].factor_on == 'cos/sin'


def test_nested_truncate_is_ignored(tf):
    import torch
    from transformers import Gemma3TextConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    def inv(truncate):
        c = Gemma3TextConfig(num_hidden_layers=2, layer_types=['sliding_attention', 'full_attention'], hidden_size=64,
                             num_attention_heads=2, head_dim=32, max_position_embeddings=8192,
                             rope_parameters={'full_attention': {'rope_type': 'yarn', 'factor': 4.0, 'rope_theta': 1e4,
                                                                 'original_max_position_embeddings': 2048,
                                                                 'truncate': truncate, 'beta_fast': 5.3,
                                                                 'beta_slow': 1.7},
                                              'sliding_attention': {'rope_type': 'default', 'rope_theta': 1e4}})
        return ROPE_INIT_FUNCTIONS['yarn'](c, 'cpu', layer_type='full_attention')[0]
    ignored = torch.equal(inv(True), inv(False))
    stated = any(c == 'has:truncate&nested' for c, _ in readings(T5, 'yarn')[0].warn)
    assert ignored == stated, "the transformers 5.x yarn row's truncate warning no longer matches transformers"
    flat = [ROPE_INIT_FUNCTIONS['yarn'](llama(rope_scaling={'rope_type': 'yarn', 'factor': 4.0, 'truncate': t,
                                                            'original_max_position_embeddings': 2048,
                                                            'beta_fast': 5.3, 'beta_slow': 1.7}), 'cpu')[0]
            for t in (True, False)]
    assert not torch.equal(*flat)  # a flat dict's truncate is read


def test_overrides_replace_the_dict(tf):
    c = llama()  # what vLLM's hf_overrides do to a loaded config (W_VLLM): plain setattr
    c.rope_scaling = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 1024}
    assert c.rope_parameters['rope_theta'] is None
    c = llama()
    c.rope_parameters = {'rope_type': 'yarn', 'factor': 4.0}
    assert 'rope_theta' not in c.rope_parameters and 'original_max_position_embeddings' not in c.rope_parameters


def test_layer_rope_theta(tf):
    granite = pytest.importorskip('transformers.models.granite_swa.configuration_granite_swa')
    assert '`0` sets NoPE' in inspect.getsource(granite)
    c = granite.GraniteSWAConfig(num_hidden_layers=3, hidden_size=64, num_attention_heads=2)
    assert c.layer_rope_theta == [c.rope_parameters['rope_theta']] * 3
    assert any(w[0] == 'top:layer_rope_theta' for w in readings(T5, 'default')[0].warn)


def test_a_fope_config_warns_that_the_stopped_pairs_differ_by_engine_version():
    """Intern-S1-Pro's rope dict turns FoPE on in vLLM's and SGLang's model files (fope_init_factor and its two
    siblings); the inspector says how each pads the stopped pairs, and transformers 5 (no FoPE) reads none of them."""
    from lab.hf.inspect import describe, engine_readings, report
    d = {'model_type': 'interns1_pro', 'max_position_embeddings': 262144, 'rope_theta': 5e6, 'head_dim': 128,
         'rope_scaling': {'rope_type': 'default', 'fope_init_factor': 0.5, 'fope_sep_head': True, 'num_inv_freq': None}}
    # pairs that turn within M: theta_i = 5e6^(-2i/128) > 2 pi / 262144 while i < 64 ln(262144 / 2 pi) / ln 5e6 = 44.1
    assert 'FoPE: 45 of 64 pairs turn' in report(describe(d), engine_readings(d))
    assert describe(dict(d, rope_scaling=dict(d['rope_scaling'], num_inv_freq=40)))['fope']['kept'] == 40
    got = {engine: warns for engine, _, _, warns in engine_readings(d)}
    assert any('sin 1' in w and 'PR #55243' in w for w in got['vLLM'])
    assert any('sin 1' in w and 'as vLLM 0.34.0 does' in w for w in got['SGLang'])
    assert not any('does not read' in w for w in got['vLLM'] + got['SGLang'])
    assert any('does not read fope_init_factor' in w for w in got['transformers 5.x'])
    plain = {**d, 'rope_scaling': {'rope_type': 'default'}}
    assert not any('FoPE' in w for _, _, _, warns in engine_readings(plain) for w in warns)
