"""lab/hf/export_llama.py (issue 59 items 4-5): a real model extended here, exported in its own format, and the serving
engines' lines for it (lab/hf/serve.py), and lab.knobs handing its pick to the exporter.

Every model here is written by the test: a tiny Llama-shaped GPT (RMSNorm, SwiGLU, grouped-query heads, tied and
untied) saved as a run folder; tiny GGUF and Hugging Face folders from tests/test_real_model.py's helpers (Llama with a
byte-level BPE in the GGUF, Qwen2 with q/k/v biases, Mistral with a sliding window); a 2-layer slice of the real
SmolLM2 GGUF when it is on this machine. With transformers (skipped otherwise): AutoModelForCausalLM loads each folder
with no custom code and its logits equal the lab's (model.py, the same rope switched on) within 1e-4 past L; the
tokenizers AutoTokenizer builds encode as the lab's."""
import json
import os

import pytest
import torch

from badinput import assert_refused, call
from conftest import run
from data.checkpoints import load_checkpoint, model_args, model_from_checkpoint
from lab import knobs
from lab.hf import export_llama, serve
from lab.hf import export as hf_export
from lab.hf.config import from_hf
from lab.hf.export import export
from lab.hf.folder import read_safetensors_header
from lab.hf.weights import HF_NAMES
from lab.measure.arm_specs import parse_arm
from model import GPT, GPTConfig
from rope_config import rope_inv_freq
from test_hf_export import ITOS, write_run
from test_real_model import (LLAMA_CONFIG, MISTRAL_CONFIG, QWEN2_CONFIG, REAL, bpe_gguf, hf_weights, write_folder,
                             write_slice)

L, C, H, KV, F = 16, 32, 4, 2, 48  # the tiny run: head_dim 8 (4 pairs), 2 kv heads for 4 query heads
TOL = 1e-4
SPECS = {'yarn': 'yarn', 'linear': 'linear', 'llama3': 'llama3', 'default': ''}  # case -> --rope_type (factor 4)


def tiny_llama(tie=True, **kw):
    """A 2-layer Llama-shaped GPT whose every part shows in the logits: q/k/v x10 (sharp attention, so a wrong rotation
    moves the logits), the embedding x10, RMSNorm gains random around 1."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=L, vocab_size=len(ITOS), n_layer=2, n_head=H, n_kv_head=KV, n_embd=C, n_ffn=F,
                      norm='rmsnorm', mlp='swiglu', tie_embeddings=tie, **kw)).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if 'c_attn.weight' in name or 'wte' in name or 'lm_head' in name:
                p.mul_(10.0)
            elif 'ln' in name:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
    return m


def load_hf(out, arch):
    transformers = pytest.importorskip('transformers')
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()  # no trust_remote_code: no custom code
    assert type(hf).__name__ == arch and hf.dtype == torch.float32
    return hf


def max_diff(a, b):
    with torch.no_grad():
        return (a - b).abs().max().item()


def ids(n, vocab, seed=1):
    return torch.randint(vocab, (1, n), generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- a tiny run: the config, the weights

@pytest.mark.parametrize('tie', [True, False], ids=['tied', 'untied'])
@pytest.mark.parametrize('case', list(SPECS))
def test_tiny_llama_exports_as_llama_with_our_logits(tmp_path, case, tie):
    """(a), (b): a tiny Llama run exported with YaRN / linear / llama3 at factor 4 (and as it is): LlamaForCausalLM,
    the model's fields, the rope in both forms (each alone gives the lab's rope back), max_position_embeddings = 4L with
    L inside the rope, weights under HF's names that the hf: loader reads back exactly; transformers' logits at 4L
    equal the lab's with the same rope, and the tolerance tells the ropes apart."""
    m, notes = tiny_llama(tie), []
    out, config, _ = export(write_run(tmp_path / 'run', m), str(tmp_path / 'hf'), False, SPECS[case],
                            4.0 if SPECS[case] else 0.0, notes)
    assert notes[0].startswith(f"wrote {out}: LlamaForCausalLM")
    with open(os.path.join(out, 'config.json')) as f:
        assert json.load(f) == json.loads(json.dumps(config))
    want = dict(architectures=['LlamaForCausalLM'], model_type='llama', hidden_size=C, intermediate_size=F,
                num_hidden_layers=2, num_attention_heads=H, num_key_value_heads=KV, head_dim=C // H, hidden_act='silu',
                rms_norm_eps=1e-5, tie_word_embeddings=tie, vocab_size=len(ITOS), torch_dtype='float32', eos_token_id=0,
                max_position_embeddings=L if case == 'default' else 4 * L)
    assert {k: config[k] for k in want} == want
    rp, sc = config['rope_parameters'], parse_arm(SPECS[case] or 'default', 4.0, L)
    assert rp['rope_type'] == case and rp['rope_theta'] == config['rope_theta'] == 10000.0
    assert rp.get('original_max_position_embeddings') == (L if case in ('yarn', 'llama3') else None)
    assert 'attention_factor' not in rp  # YaRN's comes from the factor, once, in HF as in the lab
    only5 = {k: v for k, v in config.items() if k not in ('rope_scaling', 'rope_theta')}
    only4 = {k: v for k, v in config.items() if k != 'rope_parameters'}
    for form in (config, only5, only4):  # either form alone: the lab's frequencies and attention factor
        back, theta = from_hf(form)
        for n in (L, 4 * L):
            got, want = rope_inv_freq(C // H, theta, back, n), rope_inv_freq(C // H, 1e4, sc, n)
            assert torch.equal(got[0], want[0]) and got[1] == want[1]
    names = read_safetensors_header(os.path.join(out, 'model.safetensors'))
    assert ('lm_head.weight' in names) == (not tie) and HF_NAMES['q'].format(i=1) in names
    assert names[HF_NAMES['k'].format(i=0)]['shape'] == [KV * C // H, C]
    back = load_checkpoint('hf:' + out)  # the hf: loader (the same name table) reads every weight back, exactly
    assert back['model'].keys() == m.state_dict().keys()
    assert all(torch.equal(back['model'][k], v) for k, v in m.state_dict().items())
    hf = load_hf(out, 'LlamaForCausalLM')
    m.set_rope_scaling(sc)
    x = ids(4 * L, len(ITOS))
    with torch.no_grad():
        ours = m(x)[0]
        assert max_diff(hf(x).logits, ours) < TOL, case
        m.set_rope_scaling(None if sc else parse_arm('linear', 4.0, L))
        assert max_diff(m(x)[0], ours) > 100 * TOL  # another rope: far outside the tolerance


def test_char_run_ships_its_tokenizer_and_readme_says_how_to_serve(tmp_path):
    """A char run's tokenizer as the GPT-NeoX export writes it (AutoTokenizer reads it); README.md names the source,
    the rope and the engines' lines."""
    transformers = pytest.importorskip('transformers')
    notes = []
    out = export(write_run(tmp_path / 'run', tiny_llama()), str(tmp_path / 'hf'), False, 'yarn', 4.0, notes)[0]
    tok = transformers.AutoTokenizer.from_pretrained(out)
    assert tok('ROMEO: ab').input_ids == [ITOS.index(c) for c in 'ROMEO: ab']
    text = open(os.path.join(out, 'README.md'), encoding='utf-8').read()
    assert "rope_type 'yarn'" in text and 'original_max_position_embeddings 16' in text
    assert f"vllm serve {out} --max-model-len 64" in text and notes[-1] in text and 'tokenizer.json' in notes[1]


# ----------------------------------------------------------------------------- real formats: GGUF, hf: folders

def test_gguf_with_bpe_exports_model_tokenizer_and_engine_lines(tmp_path):
    """A tiny Llama GGUF with its own byte-level BPE (L = 64): YaRN x4 -> LlamaForCausalLM at T = 256 = 4L with the
    lab's logits; tokenizer.json built from the GGUF encodes and decodes as the lab's GGUFTokenizer; the GGUF's eos id
    in config.json; llama-server is told YaRN on the GGUF itself, vLLM needs no override."""
    from lab.hf.tokenizer import GGUFTokenizer
    path = bpe_gguf(tmp_path / 'tok.gguf')
    notes = []
    out, config, _ = export('gguf:' + path, str(tmp_path / 'hf'), False, 'yarn', 4.0, notes)
    assert config['eos_token_id'] == 0 and config['max_position_embeddings'] == 256
    assert notes[1] == 'tokenizer: tokenizer.json from tok.gguf'
    assert notes[2] == f"vLLM: vllm serve {out} --max-model-len 256"
    assert notes[3] == (f"llama.cpp: llama-server -m {os.path.abspath(path)} --rope-scaling yarn --rope-scale 4 "
                        f"--yarn-orig-ctx 64 --yarn-beta-fast 32 --yarn-beta-slow 1 -c 256")
    transformers = pytest.importorskip('transformers')
    tok, lab = transformers.AutoTokenizer.from_pretrained(out), GGUFTokenizer(path)
    for text in ('the theme', 'then the  hat\n\tthere 12', 'Ünïcode ☃ the'):
        assert tok(text).input_ids == lab.encode(text) and tok.decode(lab.encode(text)) == text
    assert tok.eos_token == '<|endoftext|>' and tok.decode([0]) == '<|endoftext|>'
    ckpt = load_checkpoint('gguf:' + path)
    m = model_from_checkpoint(ckpt).eval()
    m.set_rope_scaling(parse_arm('yarn', 4.0, 64))
    x = ids(256, ckpt['model_args']['vocab_size'])
    with torch.no_grad():
        ours = m(x)[0]
        assert max_diff(load_hf(out, 'LlamaForCausalLM')(x).logits, ours) < TOL


@pytest.mark.parametrize('kind', ['llama', 'qwen2', 'mistral'])
def test_hf_folders_export_as_their_own_architecture(tmp_path, kind):
    """hf: folders (L = 64) with YaRN x4: Llama as LlamaForCausalLM with its tokenizer files copied, Qwen2 as
    Qwen2ForCausalLM with its q/k/v biases, Mistral as MistralForCausalLM with its sliding window; logits at 256 = 4L
    equal the lab's. A folder without tokenizer files says so in the output and README.md."""
    config, kw = {'llama': (LLAMA_CONFIG, {}), 'qwen2': (QWEN2_CONFIG, dict(bias=True, untied=True)),
                  'mistral': (MISTRAL_CONFIG, dict(untied=True))}[kind]
    folder = write_folder(tmp_path / kind, config, hf_weights(**kw))
    if kind == 'llama':  # a tokenizer beside it: the one a BPE GGUF of the same vocabulary size would carry
        from lab.hf.tokenizer import gguf_tokenizer_files
        files, _ = gguf_tokenizer_files(bpe_gguf(tmp_path / 'tok.gguf'), 64)
        for name, text in files.items():
            (tmp_path / kind / name).write_text(text, encoding='utf-8')
    notes = []
    out, got, _ = export('hf:' + folder, str(tmp_path / 'hf'), False, 'yarn', 4.0, notes)
    arch = export_llama.ARCHS[kind]
    assert got['architectures'] == [arch] and got['model_type'] == kind
    assert (got['bos_token_id'], got['eos_token_id']) == (config['bos_token_id'], config['eos_token_id'])
    assert got.get('sliding_window') == (16 if kind == 'mistral' else None)
    readme = open(os.path.join(out, 'README.md'), encoding='utf-8').read()
    if kind == 'llama':
        assert {'tokenizer.json', 'tokenizer_config.json'} <= set(os.listdir(out)) and 'copied from' in notes[1]
        with open(os.path.join(out, 'tokenizer_config.json')) as f:
            assert json.load(f)['model_max_length'] == 256  # the extended length (the source's said 64)
    else:
        assert notes[1].startswith('no tokenizer written: the source folder') and 'no tokenizer written' in readme
    if kind == 'mistral':
        assert notes[-1].startswith('llama.cpp: cannot express the sliding window of 16 keys')
    hf = load_hf(out, arch)
    if kind == 'llama':
        pytest.importorskip('transformers').AutoTokenizer.from_pretrained(out)
    m = model_from_checkpoint(load_checkpoint('hf:' + folder)).eval()
    m.set_rope_scaling(parse_arm('yarn', 4.0, 64))
    x = ids(256, 96)
    with torch.no_grad():
        assert max_diff(hf(x).logits, m(x)[0]) < TOL, kind


# ----------------------------------------------------------------------------- (c) the real SmolLM2, two layers

@pytest.fixture(scope='module')
def smollm2_run(tmp_path_factory):
    """SmolLM2-135M's first 2 layers (test_real_model.write_slice: the real file's raw tensors, block_count 2) as a run
    folder whose L is 64, so that T = 256 is the extended length s*L at s = 4: YaRN's ramp then spans pairs 0-7 of 32
    (base 1e5), kept, ramped and interpolated pairs all present, as at the real L = 8192 (pairs 10-20) where s*L would
    be 32768 tokens. Its tokenizer is the real file's."""
    if not REAL:
        pytest.skip("the SmolLM2 GGUF is not on this machine (python -m lab.hf.gguf fetches it)")
    from data.sources import gguf_identity
    from lab.hf.gguf import read_gguf
    d = tmp_path_factory.mktemp('smol')
    ckpt = load_checkpoint('gguf:' + write_slice(read_gguf(REAL[0]), d / 'slice.gguf'))
    assert ckpt['model_args']['n_layer'] == 2
    run_dir = d / 'run'
    run_dir.mkdir()
    torch.save({'model': ckpt['model'], 'model_args': ckpt['model_args'], 'lineage': {'train_len': 64},
                'dataset': dict(ckpt['dataset'], **gguf_identity(REAL[0]))}, run_dir / 'ckpt.pt')  # (its tokenizer)
    return str(run_dir)


def test_real_smollm2_slice_exports_with_transformers_logits(smollm2_run, tmp_path):
    transformers = pytest.importorskip('transformers')
    from lab.hf.tokenizer import gguf_tokenizer
    notes = []
    out, config, _ = export(smollm2_run, str(tmp_path / 'hf'), False, 'yarn', 4.0, notes)
    assert (config['num_attention_heads'], config['num_key_value_heads'], config['head_dim'], config['bos_token_id'],
            config['eos_token_id'], config['rope_theta']) == (9, 3, 64, 1, 2, 1e5)
    tok, lab = transformers.AutoTokenizer.from_pretrained(out), gguf_tokenizer(REAL[0])
    text = "ROMEO: But soft, what light through yonder window breaks? It is 1597, and 42 ways.\n\n  Indented."
    assert tok(text).input_ids == lab.encode(text) and tok.decode(lab.encode(text)) == text
    m = model_from_checkpoint(load_checkpoint(smollm2_run)).eval()
    m.set_rope_scaling(parse_arm('yarn', 4.0, 64))
    x = torch.tensor([(lab.encode(text * 8) * 4)[:256]])
    with torch.no_grad():
        ours, theirs = m(x)[0], load_hf(out, 'LlamaForCausalLM')(x).logits
        assert max_diff(theirs, ours) < TOL and ours.abs().max().item() > 10
        m.set_rope_scaling(None)
        assert max_diff(m(x)[0], ours) > 100 * TOL


# ----------------------------------------------------------------------------- the engines' lines

def engine_lines(scaling, **kw):
    """The engines' lines for the tiny model with a rope config (no files written)."""
    args = model_args(tiny_llama(rope_scaling=scaling, **kw))
    config = export_llama.hf_llama_config(args, L, {})
    return serve.engine_lines(config, 'out/hf/m', rope_inv_freq(C // H, 1e4, scaling)[1], None, 1e4)


def test_engine_lines_say_what_each_engine_cannot_express():
    lines = engine_lines(parse_arm('yarn', 4.0, L))
    assert lines[0] == 'vLLM: vllm serve out/hf/m --max-model-len 64'
    assert lines[1].startswith('llama.cpp: python convert_hf_to_gguf.py out/hf/m --outfile out/hf/m.gguf --outtype f32')
    assert lines[2] == ('llama.cpp: llama-server -m out/hf/m.gguf --rope-scaling yarn --rope-scale 4 '
                        '--yarn-orig-ctx 16 --yarn-beta-fast 32 --yarn-beta-slow 1 -c 64')
    af = engine_lines(parse_arm('yarn:attention_factor=1', 4.0, L))  # Ministral's: config.json carries it
    assert af[0].startswith('vLLM: vllm serve out/hf/m --max-model-len 64   # attention factor 1 from config.json')
    assert af[1].startswith("llama.cpp: cannot express YaRN's attention factor 1 ")
    assert engine_lines(parse_arm('yarn:truncate=false', 4.0, L))[-1].startswith(
        'llama.cpp: cannot express YaRN with truncate=false')
    dyn = engine_lines(parse_arm('dynamic', 1.0, L))
    assert dyn[0].startswith('vLLM: cannot express Dynamic NTK')
    assert dyn[1].startswith('llama.cpp: cannot express Dynamic NTK')
    l3 = engine_lines(parse_arm('llama3', 4.0, L))
    assert l3[0].startswith('vLLM: vllm serve') and "llama.cpp: cannot express Llama 3.1's per-pair factors" in l3[1]
    nbp = engine_lines(parse_arm('ntk_by_parts:beta_fast=8', 4.0, L))  # as longrope, attention factor 1
    over = json.loads(nbp[0].split('--hf-overrides ')[1].strip("'"))['rope_parameters']  # (vLLM reads no
    assert (over['short_mscale'], over['long_mscale'], over['rope_theta']) == (1.0, 1.0, 1e4)  # attention_factor)
    assert over['short_factor'] == over['long_factor'] and nbp[1].startswith('llama.cpp: cannot express per-pair')
    lr = engine_lines({'rope_type': 'longrope', 'factor': 4.0, 'original_max_position_embeddings': L,
                       'short_factor': [1.0] * 4, 'long_factor': [1.0, 2.0, 3.0, 4.0]})
    assert lr[0].startswith("vLLM: cannot express LongRoPE's switch")
    ntk = engine_lines(parse_arm('ntk', 4.0, L))  # a raised base
    assert ntk[-1] == f"llama.cpp: llama-server -m out/hf/m.gguf --rope-freq-base {1e4 * 4 ** (8 / 6):.10g} -c 64"
    assert engine_lines(parse_arm('linear', 4.0, L))[-1].endswith('--rope-scaling linear --rope-scale 4 -c 64')
    for spec, what in (('rerope:window=8', 'ReRoPE'), ('self_extend:window=8:group=2', 'Self-Extend'),
                       ('dca:chunk=12:window=2', 'DCA'), ('crop:form=sliding', 'the crop'),
                       ('yarn+qtemp:shape=logn', 'a query temperature')):
        assert [line.split(':')[0] for line in serve.cannot(serve.not_rope_what(spec))] == ['vLLM', 'llama.cpp']
        assert serve.cannot(serve.not_rope_what(spec))[0].startswith(f"vLLM: cannot express {what}")


# ----------------------------------------------------------------------------- (d) bad input; the command lines

@pytest.mark.parametrize('argv,names', [
    (['--rope_type=rerope:window=8'], ['ReRoPE', 'position maps', 'pass a rope type']),
    (['--rope_type=self_extend:window=8:group=2'], ['Self-Extend', 'vLLM']),
    (['--rope_type=dca:chunk=12:window=2'], ['DCA']),
    (['--rope_type=crop:form=sliding'], ['the crop', 'llama-server']),
    (['--rope_type=yarn+qtemp:shape=logn', '--factor=4'], ['query temperature']),
    (['--rope_type=dynamic_yarn'], ['Dynamic YaRN', '--rope_type=yarn --factor=']),
    (['--rope_type=yarn'], ['--factor=<s>']),
])
def test_bad_rope_types_are_refused_by_name_and_nothing_is_written(tmp_path, capsys, argv, names):
    folder = write_run(tmp_path / 'run', tiny_llama())
    code, err = call(hf_export.main, [f'--ckpt={folder}', f'--out_dir={tmp_path / "hf"}', *argv], capsys)
    assert_refused(code, err, names)
    assert not os.path.exists(tmp_path / 'hf')


def test_models_hf_llama_cannot_express_are_refused_in_one_line(tmp_path, capsys):
    for kw, names in ((dict(layers='rope:w=8,rope'), ['per-layer pattern', 'windows on some layers only']),
                      (dict(layers='rope,nope'), ['NoPE layers']), (dict(bias=True), ['bias=True', 'qkv_bias']),
                      (dict(attention='gated'), ['gated attention'])):
        folder = write_run(tmp_path / 'run', tiny_llama(**kw))
        code, err = call(hf_export.main, [f'--ckpt={folder}', f'--out_dir={tmp_path / "hf"}'], capsys)
        assert_refused(code, err, names)
        assert not os.path.exists(tmp_path / 'hf')
    os.makedirs(tmp_path / 'hf')
    (tmp_path / 'hf' / 'x').write_text('x')
    code, err = call(hf_export.main, [f'--ckpt={write_run(tmp_path / "run", tiny_llama())}',
                                      f'--out_dir={tmp_path / "hf"}'], capsys)
    assert_refused(code, err, ['exists and is not empty', '--overwrite=True'])
    assert os.listdir(tmp_path / 'hf') == ['x']


def test_the_commands_print_the_folder_and_the_engine_lines(tmp_path, capsys):
    """python -m lab.hf.export on a GGUF prints the folder, the tokenizer and both engines' lines; lab.knobs --export
    picks YaRN at s = T/L with its band edges, calls the exporter and prints what it chose; --export needs --ckpt."""
    path = bpe_gguf(tmp_path / 'tok.gguf')
    r = run(['-m', 'lab.hf.export', f'--ckpt=gguf:{path}', '--rope_type=yarn', '--factor=4',
             f'--out_dir={tmp_path / "hf"}'], timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    out = r.stdout.splitlines()
    assert out[0].startswith(f"wrote {tmp_path / 'hf'}: LlamaForCausalLM") and '(L = 64)' in out[0]
    assert out[2].startswith('vLLM: vllm serve') and out[3].startswith('llama.cpp: llama-server -m')
    assert knobs.main([f'--ckpt=gguf:{path}', '--T=256', '--beta_fast=8', f'--export={tmp_path / "k"}']) == 0
    printed = capsys.readouterr().out.splitlines()
    chose = next(line for line in printed if line.startswith('export: '))
    assert chose.startswith('export: yarn:beta_fast=8:beta_slow=1 factor=4 (s = T/L = 256/64') and \
        chose.endswith(f"-> {tmp_path / 'k'}")
    assert any(line.startswith('vLLM: vllm serve') for line in printed)
    with open(tmp_path / 'k' / 'config.json') as f:
        rp = json.load(f)['rope_parameters']
    assert (rp['rope_type'], rp['factor'], rp['original_max_position_embeddings'], rp['beta_fast']) == \
        ('yarn', 4.0, 64, 8.0)
    for argv, names in ((['--config=x.json', '--T=256', '--export=y'], ['--ckpt']),
                        ([f'--ckpt=gguf:{path}', '--T=256', '--L=32', '--export=y'], ['--L']),
                        ([f'--ckpt=gguf:{path}', '--T=256', '--overwrite=True'], ['--export'])):
        assert_refused(*call(knobs.main, argv, capsys), names)
    assert not os.path.exists('y')


def test_roundtrip_command_records_the_exported_folders_logits_against_the_labs(tmp_path, capsys):
    """python -m lab.hf.roundtrip (make bridge's whole-model check) on a tiny GGUF exported with YaRN x4: the JSON it
    writes holds a difference below TOL at T = 256 = 4L and the same argmax at every position; with the rope left off
    on the lab's side the difference is large (the check can fail)."""
    pytest.importorskip('transformers')
    from lab.hf import roundtrip
    path = bpe_gguf(tmp_path / 'tok.gguf')
    out, _, _ = export('gguf:' + path, str(tmp_path / 'hf'), False, 'yarn', 4.0, [])
    args = [f'--folder={out}', f'--ckpt=gguf:{path}', '--T=256', f'--out={tmp_path / "rt.json"}']
    got = roundtrip.main(args + ['--rope_type=yarn', '--factor=4'])
    assert got['max_abs_diff'] < TOL and got['same_argmax'] == 256
    assert json.load(open(tmp_path / 'rt.json'))['rope']['factor'] == 4.0
    assert roundtrip.main(args)['max_abs_diff'] > 100 * TOL
