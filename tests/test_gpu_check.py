"""make gpu-check, run tiny on the CPU so that its lines never rot: the Makefile's own commands (read with make -n),
each with a tiny model on the fixture corpus appended, must run and print what the GPU run reports."""
import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

TINY = ['--device=cpu', '--progress=False']
TINY_MODEL = ['--compile=False', '--n_layer=1', '--n_head=2', '--n_embd=32', '--block_size=32', '--batch_size=4',
              '--gradient_accumulation_steps=1', '--dropout=0.0']


def test_gpu_check_runs_tiny_on_the_cpu(char_data, tmp_path):
    if shutil.which('make') is None:
        pytest.skip('make is not installed')
    out = subprocess.run(['make', '-n', 'gpu-check', 'PY=python'], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = [shlex.split(ln)[1:] for ln in out.stdout.replace('\\\n', '').splitlines() if ln.startswith('python ')]
    assert [ln[0] for ln in lines] == ['data/shakespeare/prepare.py', 'train.py', 'train.py', 'finetune_long.py',
                                       'eval.py', 'data/shakespeare_smollm2/prepare.py', 'eval.py']
    # the BPE prepare is tested in test_data.py: here the char fixture; the real model's two lines: test below
    lines = lines[:5]
    base, ft, ev = tmp_path / 'base', tmp_path / 'ft', tmp_path / 'eval'
    extra = {1: [f'--dataset={char_data}', f'--out_dir={tmp_path / "bench"}', *TINY_MODEL, '--max_iters=6'],
             2: [f'--dataset={char_data}', f'--out_dir={base}', *TINY_MODEL, '--max_iters=8', '--eval_interval=4',
                 '--eval_iters=2'],
             3: [f'--init_from={base}', f'--out_dir={ft}', '--compile=False', '--max_iters=4', '--eval_interval=2',
                 '--eval_iters=2', '--batch_size=2'],
             4: [f'--ckpt={base},{ft}', f'--out_dir={ev}', '--eval_len=128', '--num_windows=4', '--retrieval_examples=2',
                 '--retrieval_len=6', '--retrieval_pos=2', '--needles=0', '--depth_len=0', '--recall_len=0',
                 '--entropy_windows=1', '--grid=2', '--samples=4']}
    printed = []
    for i, args in enumerate(lines[1:], start=1):
        # the 60 timed steps of the bench line are cut to 6 here (--max_iters given twice: the last one wins)
        res = subprocess.run([sys.executable, *args, *TINY, *extra[i]], cwd=ROOT, capture_output=True, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS='1'))
        assert res.returncode == 0, (args, res.stderr[-2000:])
        printed.append(res.stdout)
    assert 'bench: ' in printed[0] and 'tokens/s' in printed[0] and 'MFU n/a per device' in printed[0]
    assert os.path.isfile(base / 'ckpt.pt') and os.path.isfile(ft / 'arms.json')
    assert 'eval: 7 arms' in printed[3] and os.path.isfile(ev / 'loss_vs_position.png')


def test_gpu_checks_real_model_lines_run_tiny_on_the_cpu(tmp_path):
    """Its last two lines (SmolLM2's BPE data, then config/eval_real_model_cpu.py at 10,240) on a tiny Llama GGUF
    (L = 256) that carries a byte-level BPE: its data prepared with that file's tokenizer from the fixture corpus, the
    config's 8 arms at T = 384 = 1.5 L with the position maps' knobs scaled to L (the config's are for L = 8,192)."""
    if shutil.which('make') is None:
        pytest.skip('make is not installed')
    from conftest import FIXTURE_CORPUS
    from lab.hf.tokenizer import byte_spelling
    from test_real_model import gguf_tensors, hf_weights, write_gguf
    out = subprocess.run(['make', '-n', 'gpu-check', 'PY=python'], cwd=ROOT, capture_output=True, text=True)
    prep, ev = [shlex.split(ln)[1:] for ln in out.stdout.replace('\\\n', '').splitlines() if ln.startswith('python ')][-2:]
    assert prep == ['data/shakespeare_smollm2/prepare.py'] and ev[:2] == ['eval.py', 'config/eval_real_model_cpu.py']
    tokens = ['<|endoftext|>'] + sorted(byte_spelling(), key=byte_spelling().get) + ['Ġt', 'he']
    meta = {'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.pre': 'smollm', 'tokenizer.ggml.tokens': tokens,
            'tokenizer.ggml.token_type': [3] + [1] * (len(tokens) - 1), 'tokenizer.ggml.merges': ['Ġ t', 'h e'],
            'tokenizer.ggml.eos_token_id': 0, '{arch}.vocab_size': len(tokens), '{arch}.context_length': 256}
    tiny = write_gguf(tmp_path / 'tiny.gguf', gguf_tensors(hf_weights(vocab=len(tokens))), meta=meta)
    env = dict(os.environ, LONGCTX_CACHE=str(tmp_path), OMP_NUM_THREADS='1')
    data = tmp_path / 'data'
    res = subprocess.run([sys.executable, *prep, f'--gguf={tiny}', f'--src={FIXTURE_CORPUS}', f'--out_dir={data}'],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    knobs = 'default,crop:form=sliding,linear,ntk,yarn,dynamic,rerope:window=128,self_extend:window=64:group=4'
    pairs = ['yarn_s1.5_zero-shot | linear_s1.5_zero-shot', 'self_extend_w64_G4_zero-shot | rerope_w128_zero-shot']
    res = subprocess.run([sys.executable, *ev, *TINY, f'--base=gguf:{tiny}', f'--dataset={data}', '--eval_len=384',
                          f'--rope_types={knobs}', f'--contrasts={"; ".join(pairs)}', '--passkey_text=2',
                          '--entropy_windows=1', '--grid=2', f'--out_dir={tmp_path / "eval"}'],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert 'eval: 8 arms' in res.stdout
    with open(tmp_path / 'eval' / 'summary.json', encoding='utf-8') as f:
        st = json.load(f)['settings']
    # the natural-language passkey is judged like every room: each arm against the crop, and the named contrasts
    cols = st['vs_crop']['crop w=256 (sliding)']['passkey_text']  # its distance buckets
    assert cols and set(st['contrasts']['passkey_text']) == set(cols)
    assert all(len(rows) == 2 for rows in st['contrasts']['passkey_text'].values())
