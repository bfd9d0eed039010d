"""lab/hf/export.py (a run as a GPT-NeoX folder) and lab.hf.config.from_hf (Hugging Face's rope configs read back).
Without transformers: the config and the weight names, shapes and layout against the issue's table for every
exportable rope type, the frequencies HF is told to compute against rope_config.rope_inv_freq, refusals in one line.
With transformers (skipped otherwise): every exportable type loaded by AutoModelForCausalLM (no custom code), logits
compared at T = 2L and greedy generations compared token for token."""
import json
import os
import struct

import pytest
import torch

from conftest import run
from lab.hf import export as hf_export
from lab.hf import folder as hf_folder
from lab.hf.export import export
from lab.hf.folder import NATIVE, read_safetensors_header
from lab.hf.weights import neox_order
from model import GPT, GPTConfig
from data.checkpoints import model_args
from rope_config import check_scaling, rope_inv_freq
from lab.hf.config import from_hf
from lab.measure.arm_specs import parse_arm

L, C, H = 16, 32, 2  # tiny: head_dim 16 (8 pairs); 2L = 32 tokens
ITOS = ['\x00', '\n', ' ', ':', 'A', 'B', 'C', 'E', 'M', 'O', 'R'] + [chr(c) for c in range(ord('a'), ord('z') + 1)]
LR_SHORT, LR_LONG = [1.0 + 0.05 * i for i in range(8)], [1.0 + 3.0 * i / 7 for i in range(8)]
CASES = {  # id -> rope_scaling; every exportable type, with the settings the issue lists
    'default': None,
    'linear': {'rope_type': 'linear', 'factor': 4.0},
    'ntk': {'rope_type': 'ntk', 'factor': 4.0},
    'dynamic_s1': {'rope_type': 'dynamic', 'factor': 1.0, 'original_max_position_embeddings': L},
    'dynamic_s4': {'rope_type': 'dynamic', 'factor': 4.0, 'original_max_position_embeddings': L},
    'ntk_by_parts': {'rope_type': 'ntk_by_parts', 'factor': 4.0, 'original_max_position_embeddings': L,
                     'beta_fast': 8.0},
    'yarn': {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L, 'beta_fast': 8.0},
    'yarn_af': {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L, 'attention_factor': 1.5},
    'yarn_mscale': {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L, 'mscale': 1.0,
                    'mscale_all_dim': 0.5, 'truncate': False},
    'llama3': {'rope_type': 'llama3', 'factor': 4.0, 'original_max_position_embeddings': L},
    'longrope': {'rope_type': 'longrope', 'factor': 4.0, 'original_max_position_embeddings': L,
                 'short_factor': LR_SHORT, 'long_factor': LR_LONG},
}
BIAS = {'yarn', 'default'}  # these cases also carry (non-zero) biases


def tiny(scaling=None, bias=False, vocab=len(ITOS), **kw):
    """A 2-layer GPT whose weights make every part visible in the logits: q/k/v x10 (attention of order 1, so a wrong
    rotation moves the logits), the tied embedding x10 (logits of order 1, greedy text that does not just repeat),
    LayerNorm gains and every bias random (a misplaced one shows)."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=L, vocab_size=vocab, n_layer=2, n_head=H, n_embd=C, bias=bias, rope_scaling=scaling,
                      **kw)).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if 'c_attn.weight' in name or name == 'transformer.wte.weight':
                p.mul_(10.0)
            elif name.endswith('bias') or 'ln' in name:
                p.copy_(torch.randn_like(p) * 0.3 + (1.0 if 'ln' in name and name.endswith('weight') else 0.0))
    return m


def write_run(folder, m, tokenizer='char'):
    os.makedirs(folder, exist_ok=True)
    ds = {'dataset': 'tiny', 'tokenizer': tokenizer, 'vocab_size': m.config.vocab_size,
          'itos': ITOS if tokenizer == 'char' else None}
    torch.save({'model': m.state_dict(), 'model_args': model_args(m), 'dataset': ds,
                'lineage': {'train_len': L, 'seq_len': m.config.block_size, 'base_checkpoint': None}},
               os.path.join(folder, 'ckpt.pt'))
    return str(folder)


def exported(tmp_path, case, **kw):
    m = tiny(CASES[case], bias=case in BIAS)
    out, config, _ = export(write_run(tmp_path / 'run', m), str(tmp_path / 'hf'), **kw)
    return m, out, config


def read_safetensors(path):
    """{name: tensor} from a safetensors file, read back here by hand (float32 only)."""
    header = read_safetensors_header(path)
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        f.seek(8 + n)
        data = f.read()
    return {k: torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).reshape(v['shape'])
            for k, v in header.items() if k != '__metadata__' for a, b in [v['data_offsets']]}


# ----------------------------------------------------------------------------- without transformers

@pytest.mark.parametrize('case', list(CASES))
def test_config_follows_the_table_and_hf_computes_our_frequencies(tmp_path, case):
    m, out, config = exported(tmp_path, case)
    with open(os.path.join(out, 'config.json')) as f:
        assert json.load(f) == json.loads(json.dumps(config))
    fixed = dict(architectures=['GPTNeoXForCausalLM'], model_type='gpt_neox', use_parallel_residual=False,
                 hidden_act='gelu', layer_norm_eps=1e-5, attention_bias=True, tie_word_embeddings=True,
                 intermediate_size=4 * C, hidden_size=C, num_attention_heads=H, num_hidden_layers=2,
                 vocab_size=len(ITOS), attention_dropout=0.0, hidden_dropout=0.0, rotary_pct=1.0, eos_token_id=0)
    assert {k: config[k] for k in fixed} == fixed
    rp, sc, M = config['rope_parameters'], CASES[case], config['max_position_embeddings']
    assert rp['partial_rotary_factor'] == 1.0 and rp['rope_theta'] == config['rotary_emb_base']
    t, s = (sc or {}).get('rope_type', 'default'), (sc or {}).get('factor', 1.0)
    want_type = {'ntk': 'default', 'ntk_by_parts': 'longrope'}.get(t, t)
    assert rp['rope_type'] == want_type
    if t in ('yarn', 'llama3', 'longrope', 'ntk_by_parts'):  # L inside the rope parameters, M = s L
        assert rp['original_max_position_embeddings'] == L and M == s * L
    else:
        assert 'original_max_position_embeddings' not in rp
        assert M == {'default': L, 'dynamic': L}.get(t, s * L)  # dynamic: HF reads L from max_position_embeddings
    if t == 'ntk':
        assert rp['rope_theta'] == 10000.0 * s ** (16 / 14) and config['rope_scaling'] is None
    if t == 'ntk_by_parts':
        assert rp['short_factor'] == rp['long_factor'] and rp['attention_factor'] == 1.0
    # 4.x rope_scaling says what 5.x rope_parameters says: either one read alone gives the same frequencies
    only5 = {k: v for k, v in config.items() if k not in ('rope_scaling', 'rotary_emb_base', 'rotary_pct')}
    only4 = {k: v for k, v in config.items() if k != 'rope_parameters'}
    bare = dict(rp, original_max_position_embeddings=L) if t == 'dynamic' else rp  # no max_position_embeddings
    for form in (config, only5, only4, bare):
        back, theta = from_hf(form)
        for n in (L // 2, L, L + 1, 2 * L, 4 * L, 8 * L):
            want_f, want_af = rope_inv_freq(16, 10000.0, sc, n)
            got_f, got_af = rope_inv_freq(16, theta, back, n)
            torch.testing.assert_close(got_f, want_f, rtol=2e-7, atol=0)  # ntk_by_parts: theta / (theta / theta')
            assert got_af == pytest.approx(want_af, rel=1e-15)
        if t in NATIVE:  # read back as it was (longrope: plus its attention factor, made explicit)
            assert theta == 10000.0 and back == (dict(check_scaling(sc), attention_factor=rope_inv_freq(
                16, 10000.0, sc)[1]) if t == 'longrope' else check_scaling(sc))


@pytest.mark.parametrize('bias', [False, True])
def test_weights_are_named_shaped_and_laid_out_as_gpt_neox(tmp_path, bias):
    m = tiny(CASES['yarn'], bias=bias)
    out, _, n = export(write_run(tmp_path / 'run', m), str(tmp_path / 'hf'))
    w = read_safetensors(os.path.join(out, 'model.safetensors'))
    hd, V = C // H, len(ITOS)
    want = {'gpt_neox.embed_in.weight': (V, C), 'embed_out.weight': (V, C), 'gpt_neox.final_layer_norm.weight': (C,),
            'gpt_neox.final_layer_norm.bias': (C,)}
    for i in range(2):
        p = f'gpt_neox.layers.{i}.'
        want.update({p + 'input_layernorm.weight': (C,), p + 'input_layernorm.bias': (C,),
                     p + 'post_attention_layernorm.weight': (C,), p + 'post_attention_layernorm.bias': (C,),
                     p + 'attention.query_key_value.weight': (3 * C, C), p + 'attention.query_key_value.bias': (3 * C,),
                     p + 'attention.dense.weight': (C, C), p + 'attention.dense.bias': (C,),
                     p + 'mlp.dense_h_to_4h.weight': (4 * C, C), p + 'mlp.dense_h_to_4h.bias': (4 * C,),
                     p + 'mlp.dense_4h_to_h.weight': (C, 4 * C), p + 'mlp.dense_4h_to_h.bias': (C,)})
    assert {k: tuple(v.shape) for k, v in w.items()} == want and n == m.get_num_params()
    sd = m.state_dict()
    assert torch.equal(w['embed_out.weight'], w['gpt_neox.embed_in.weight'])
    for i in range(2):
        p, q = f'transformer.h.{i}.', f'gpt_neox.layers.{i}.'
        qkv = w[q + 'attention.query_key_value.weight']
        for h in range(H):
            for j in range(3):  # GPT-NeoX rows: head h, then q/k/v j; ours: q/k/v j, then head h
                assert torch.equal(qkv[(3 * h + j) * hd:(3 * h + j + 1) * hd],
                                   sd[p + 'attn.c_attn.weight'][j * C + h * hd:j * C + (h + 1) * hd])
        assert torch.equal(w[q + 'mlp.dense_4h_to_h.weight'], sd[p + 'mlp.c_proj.weight'])
        assert torch.equal(w[q + 'input_layernorm.weight'], sd[p + 'ln_1.weight'])
        for name, ours in (('attention.dense.bias', 'attn.c_proj.bias'), ('mlp.dense_h_to_4h.bias', 'mlp.c_fc.bias'),
                           ('post_attention_layernorm.bias', 'ln_2.bias')):
            assert torch.equal(w[q + name], sd[p + ours] if bias else torch.zeros_like(w[q + name]))
    with open(os.path.join(out, 'model.safetensors'), 'rb') as f:
        n_head = struct.unpack('<Q', f.read(8))[0]
        assert n_head % 8 == 0 and os.path.getsize(f.name) == 8 + n_head + sum(v.numel() * 4 for v in w.values())


def test_folder_has_tokenizer_generation_config_and_readme(tmp_path):
    _, out, config = exported(tmp_path, 'dynamic_s4')
    names = set(os.listdir(out))
    assert names == {'config.json', 'model.safetensors', 'generation_config.json', 'README.md', 'vocab.json',
                     'tokenizer.json', 'tokenizer_config.json'}
    with open(os.path.join(out, 'vocab.json'), encoding='utf-8') as f:
        assert json.load(f) == {c: i for i, c in enumerate(ITOS)}
    with open(os.path.join(out, 'generation_config.json')) as f:
        assert json.load(f)['eos_token_id'] == 0
    with open(os.path.join(out, 'README.md'), encoding='utf-8') as f:
        text = f.read()
    assert 'AutoModelForCausalLM.from_pretrained' in text and "json.load(open(f'{folder}/vocab.json'" in text
    assert 'use_cache=False' in text  # dynamic: transformers' state and the cache are explained
    assert not [n for n in os.listdir(out) if n.endswith('.tmp')]


def test_refusals_are_one_line_and_name_the_way_out(tmp_path):
    def refused(args, **kw):
        folder = write_run(tmp_path / 'r', tiny(**kw))
        with pytest.raises(ValueError) as e:
            hf_export.main([f'--ckpt={folder}', f'--out_dir={tmp_path / "hf"}', *args])
        assert '\n' not in str(e.value)
        return str(e.value)
    assert 'smeared keys' in refused([], attention='smear_keys') and "attention='causal'" in refused(
        [], attention='smear_keys')
    for pe, word in (('alibi', 'ALiBi'), ('sinusoidal', 'sinusoidal'), ('learned', 'learned'), ('none', 'NoPE')):
        msg = refused([], pos_emb=pe)
        assert word in msg and 'RoPE run' in msg
    msg = refused([], scaling={'rope_type': 'dynamic_yarn', 'factor': 1.0, 'original_max_position_embeddings': L})
    assert 'Dynamic YaRN' in msg and '--rope_type=yarn --factor=' in msg
    assert 'Dynamic YaRN' in refused(['--rope_type=dynamic_yarn'])
    msg = refused([], scaling=dict(CASES['longrope'], start_token_idx=4))  # LongRoPE's n-hat: HF has no key for it
    assert "start_token_idx'] = 4" in msg and '--search_start_tokens=0' in msg
    assert 'start_token_idx' not in hf_export.hf_config(model_args(tiny(dict(CASES['longrope'], start_token_idx=0))),
                                                        L)['rope_parameters']  # 0: exported as before
    assert 'position maps' in refused(['--rope_type=rerope:window=8'])
    assert '--factor=<s>' in refused(['--rope_type=yarn'])
    assert 'with --rope_type only' in refused(['--factor=4'])
    os.makedirs(tmp_path / 'hf', exist_ok=True)
    (tmp_path / 'hf' / 'x').write_text('x')
    assert '--overwrite=True' in refused([])
    assert 'run folder itself' in refused([f'--out_dir={tmp_path / "r"}', '--overwrite=True'])


def test_command_line_writes_a_folder_and_overwrites_only_when_asked(tmp_path):
    folder = write_run(tmp_path / 'run', tiny())
    r = run(['-m', 'lab.hf.export', f'--ckpt={folder}', f'--out_dir={tmp_path / "hf"}', '--rope_type=yarn:beta_fast=8',
             '--factor=4'], timeout=120)
    assert r.returncode == 0 and "rope_type 'yarn'" in r.stdout, r.stderr
    with open(tmp_path / 'hf' / 'config.json') as f:
        assert json.load(f)['rope_parameters']['beta_fast'] == 8.0
    r = run(['-m', 'lab.hf.export', f'--ckpt={folder}', f'--out_dir={tmp_path / "hf"}'], timeout=120)
    assert r.returncode == 2 and r.stderr.count('\n') == 1 and r.stderr.startswith('error: ')


# ----------------------------------------------------------------------------- reading Hugging Face's forms

def test_from_hf_reads_4x_5x_and_whole_configs():
    lin = {'rope_type': 'linear', 'factor': 2.0}
    assert from_hf({'type': 'linear', 'factor': 2}) == (lin, None)
    five = {'rope_type': 'linear', 'factor': 2.0, 'rope_theta': 5e5, 'partial_rotary_factor': 1.0}
    assert from_hf(five) == (lin, 5e5)
    assert from_hf({'rope_type': 'default', 'rope_theta': 1e4}) == (None, 1e4)
    assert from_hf({'rope_type': 'proportional', 'rope_theta': 1e6, 'partial_rotary_factor': 0.25}) == \
        ({'rope_type': 'proportional', 'partial_rotary_factor': 0.25, 'factor': 1.0}, 1e6)  # Gemma 4's global layers
    # a whole config: transformers 5 takes rope_scaling over rope_parameters; dynamic NTK's L is max_position_embeddings
    llama = {'max_position_embeddings': 4096, 'rope_theta': 5e5, 'rope_scaling': {'type': 'dynamic', 'factor': 2.0},
             'rope_parameters': {'rope_type': 'default'}}
    assert from_hf(llama) == ({'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 4096}, 5e5)
    yarn = from_hf({'max_position_embeddings': 512, 'rope_parameters': {'rope_type': 'yarn', 'rope_theta': 1e4,
                                                                        'original_max_position_embeddings': 128}})[0]
    assert yarn['factor'] == 4.0 and yarn['beta_fast'] == 32.0  # factor = M / L, defaults filled as check_scaling does
    neox = {'model_type': 'gpt_neox', 'rotary_emb_base': 1e4, 'max_position_embeddings': 2048}
    with pytest.raises(ValueError, match="GPT-NeoX's partial rotation"):
        from_hf(neox)  # GPT-NeoX's default rotates 25% of each head
    assert from_hf(dict(neox, rotary_pct=1.0)) == (None, 1e4)
    for bad, match in (({'type': 'linear', 'rope_type': 'yarn', 'factor': 2.0}, 'give one'),
                       ({'rope_type': 'axial', 'rope_theta': 1e4}, 'no counterpart'),
                       ({'rope_type': 'linear', 'factor': 2.0, 'partial_rotary_factor': 0.5}, 'partial rotation'),
                       ({'rope_type': 'linear', 'factor': 2.0, 'rope_theta': -1}, 'rope_theta'),
                       ({'rope_type': 'linear'}, 'factor')):
        with pytest.raises(ValueError, match=match):
            from_hf(bad)


def test_the_lab_accepts_hf_forms_wherever_it_reads_a_rope_scaling():
    assert check_scaling({'type': 'yarn', 'factor': 4, 'original_max_position_embeddings': L}) == \
        check_scaling({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L})
    five = {'rope_type': 'linear', 'factor': 2.0, 'rope_theta': 5e5, 'partial_rotary_factor': 1.0}
    cfg = GPTConfig(n_embd=C, n_head=H, rope_base=5e5, rope_scaling=five)
    assert cfg.rope_scaling == {'rope_type': 'linear', 'factor': 2.0}  # stored in the lab's form
    with pytest.raises(ValueError, match='set rope_base=500000'):
        GPTConfig(n_embd=C, n_head=H, rope_scaling=five)
    with pytest.raises(ValueError, match='from_hf'):
        check_scaling(five)  # no base to check rope_theta against
    torch.testing.assert_close(rope_inv_freq(16, 5e5, five)[0],
                               rope_inv_freq(16, 5e5, {'type': 'linear', 'factor': 2})[0])
    m = tiny()
    m.set_rope_scaling({'type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': L, 'rope_theta': 1e4})
    assert m.config.rope_scaling == {'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': L}


def test_gpt2_run_without_tokenizer_files_names_them(tmp_path, monkeypatch):
    monkeypatch.setattr(hf_folder, 'gpt2_files_on_disk', lambda: None)
    m = tiny(vocab=50257)
    out, config, _ = export(write_run(tmp_path / 'run', m, tokenizer='gpt2'), str(tmp_path / 'hf'))
    assert config['eos_token_id'] == 50256 and 'vocab.json' not in os.listdir(out)
    with open(os.path.join(out, 'README.md'), encoding='utf-8') as f:
        text = f.read()
    assert "AutoTokenizer.from_pretrained('openai-community/gpt2')" in text and 'merges.txt' in text


# ----------------------------------------------------------------------------- with transformers
# Tolerance on logits: the two sides compute inv_freq differently (transformers in float32 arithmetic, the lab in
# float64 rounded once), which lands 0.5-2.4 float32 ulps apart and moves logits ~1e-3 at T = 1024 for a 30M model;
# at T = 2L = 32 on this 2-layer model the difference is ~1e-6, so 1e-4 has room and still sits far below what a
# wrong rope moves (the sensitivity check: another rope moves these logits by > 100 x TOL).
TOL = 1e-4
STATEFUL = {'dynamic_s1', 'dynamic_s4', 'longrope'}  # frequencies depend on the length: transformers' cache goes stale


def load_hf(out):
    transformers = pytest.importorskip('transformers')
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()  # no trust_remote_code: no custom code
    assert type(hf).__name__ == 'GPTNeoXForCausalLM' and hf.dtype == torch.float32
    return hf


@pytest.mark.parametrize('case', list(CASES))
def test_transformers_loads_every_exportable_type_with_our_logits(tmp_path, case):
    pytest.importorskip('transformers')
    m, out, config = exported(tmp_path, case)
    hf = load_hf(out)
    assert {k: v for k, v in hf.config.rope_parameters.items() if k != 'type'} == config['rope_parameters']
    torch.manual_seed(1)
    x = torch.randint(len(ITOS), (2, 2 * L))
    with torch.no_grad():
        for T in (L, 2 * L):  # up to L and past it (longrope switches factors, dynamic grows)
            ours = m(x[:, :T])[0]
            diff = (hf(x[:, :T]).logits - ours).abs().max().item()
            assert diff < TOL, f"{case} T={T}: max logit difference {diff:.2e}"
        other = tiny(None if CASES[case] else CASES['linear'], bias=case in BIAS)
        assert (other(x)[0] - ours).abs().max().item() > 100 * TOL  # the tolerance can tell ropes apart


@pytest.mark.parametrize('case', list(CASES))
def test_greedy_generation_of_the_export_equals_the_labs(tmp_path, case):
    pytest.importorskip('transformers')
    m, out, _ = exported(tmp_path, case)
    hf = load_hf(out)
    prompt, n = torch.tensor([[10, 9, 8, 7, 9, 3]]), 40  # 'ROMEO:' + 40 tokens: past L and 2L
    ours = m.generate(prompt, n, top_k=1)[0]
    theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                         do_sample=False, use_cache=case not in STATEFUL, eos_token_id=None, pad_token_id=0)[0]
    if not torch.equal(ours, theirs):  # allowed only at a float32 near-tie of the two best tokens
        k = int((ours != theirs).nonzero()[0])
        top2 = torch.topk(m(ours[None, :k])[0][0, -1], 2).values
        assert (top2[0] - top2[1]).item() < TOL, f"{case}: diverges at token {k} without a near-tie"


def test_char_tokenizer_loads_with_autotokenizer(tmp_path):
    transformers = pytest.importorskip('transformers')
    _, out, _ = exported(tmp_path, 'default')
    tok = transformers.AutoTokenizer.from_pretrained(out)
    text = 'ROMEO:\nAbc  xyz\x00'
    assert tok(text).input_ids == [ITOS.index(c) for c in text]
    assert tok.decode([ITOS.index(c) for c in text]) == text and tok.eos_token_id == 0


def test_gpt2_run_ships_gpt2s_tokenizer(tmp_path):
    transformers = pytest.importorskip('transformers')
    from data.sources import gpt2_encoding, gpt2_files_on_disk
    if gpt2_files_on_disk() is None:
        pytest.skip("no GPT-2 tokenizer files on this machine (the data step fetches them)")
    out, config, _ = export(write_run(tmp_path / 'run', tiny(vocab=50257), tokenizer='gpt2'), str(tmp_path / 'hf'))
    tok = transformers.AutoTokenizer.from_pretrained(out)
    text = "ROMEO: But soft, what light through yonder window breaks?\n  It is the east, and Juliet is the sun! 1234"
    ids = gpt2_encoding().encode_ordinary(text)
    assert tok(text).input_ids == ids and tok.decode(ids) == text and tok.eos_token_id == 50256


@pytest.mark.parametrize('spec', ['', 'yarn:beta_fast=8'])
def test_a_trained_run_generates_the_same_200_tokens_in_transformers(tiny_run, tmp_path, spec):
    """The issue's 'done when' on the suite's trained char run (L = 32): 200 greedy tokens (past 6L) from a prompt, as
    trained and with YaRN switched on at export, equal the lab's model.generate (top_k=1, as sample.py --top_k=1)."""
    transformers = pytest.importorskip('transformers')
    from data.checkpoints import load_checkpoint, model_from_checkpoint
    args = [f'--rope_type={spec}', '--factor=4'] if spec else []
    hf_export.main([f'--ckpt={tiny_run}', f'--out_dir={tmp_path / "hf"}', *args])
    ckpt = load_checkpoint(tiny_run)
    m = model_from_checkpoint(ckpt).eval()
    if spec:
        m.set_rope_scaling(parse_arm(spec, 4.0, 32))
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / 'hf')
    prompt = tok('ROMEO:\n', return_tensors='pt').input_ids
    hf = load_hf(tmp_path / 'hf')
    ours = m.generate(prompt, 200, top_k=1)[0]
    theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=200, min_new_tokens=200,
                         do_sample=False, eos_token_id=None, pad_token_id=0)[0]
    if not torch.equal(ours, theirs):
        k = int((ours != theirs).nonzero()[0])
        top2 = torch.topk(m(ours[None, :k])[0][0, -1], 2).values
        assert (top2[0] - top2[1]).item() < TOL, f"diverges at token {k} without a near-tie"


def test_partial_rotary_exports_with_yarn_placed_as_hf_places_it(tmp_path):
    """GPT-NeoX's partial rotation (partial_rotary_factor 0.5: 8 of 16 dims turn) with YaRN, its attention factor on
    the rotary dims only (HF's cos/sin): rotary_pct and partial_rotary_factor 0.5, the placement key not written, q/k
    rows in NeoX's rotary order; with transformers, our logits to TOL and greedy text equal. The factor on every dim
    is another model: refused in one line, nothing written."""
    sc = dict(CASES['yarn'], attention_factor_on='rotary')
    m = tiny(sc, bias=True, partial_rotary_factor=0.5)
    out, config, _ = export(write_run(tmp_path / 'run', m), str(tmp_path / 'hf'))
    rp = config['rope_parameters']
    assert config['rotary_pct'] == rp['partial_rotary_factor'] == 0.5 and 'attention_factor_on' not in rp
    assert 'attention_factor_on' not in config['rope_scaling'] and rp['beta_fast'] == 8.0
    assert neox_order(16, 8) == [0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15]
    whole = tiny(CASES['yarn'], partial_rotary_factor=0.5)
    with pytest.raises(ValueError, match='partial_rotary_factor=0.5 with an attention factor on every dim'):
        export(write_run(tmp_path / 'run2', whole), str(tmp_path / 'hf2'))
    assert not os.path.exists(tmp_path / 'hf2')
    pytest.importorskip('transformers')
    hf = load_hf(out)
    torch.manual_seed(1)
    x = torch.randint(len(ITOS), (2, 2 * L))
    with torch.no_grad():
        for T in (L, 2 * L):
            ours = m(x[:, :T])[0]
            assert (hf(x[:, :T]).logits - ours).abs().max().item() < TOL
        m.set_rope_scaling(CASES['yarn'])  # the factor on every dim: a model the tolerance tells apart
        assert (m(x)[0] - ours).abs().max().item() > 100 * TOL
        m.set_rope_scaling(sc)
    prompt, n = torch.tensor([[10, 9, 8, 7, 9, 3]]), 40
    theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                         do_sample=False, eos_token_id=None, pad_token_id=0)[0]
    assert torch.equal(m.generate(prompt, n, top_k=1)[0], theirs)
