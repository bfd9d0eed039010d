"""Issue 60 item 8: every tool walked over one partial-rotary (p = 0.5: 8 of 16 dims turn), grouped-head (4 query
heads, 2 key/value heads), windowed (rope:w=8,rope) character base, the composition lab/measure/combine.py's table
does not reach: the fine-tunes (YaRN, PoSE), eval's arms, sample.py with and without the KV cache, lab.knobs from
the checkpoint and from a config of the same numbers, lab.pairs, a tiny LongRoPE search, the export (refused by name:
GPT-NeoX has no grouped heads, nor sliding windows) and lab.hf.inspect on a config.json of the same model."""
import json
import math
import os

import pytest
import torch

from rope import critical_dimension

from conftest import run

L, T, ROT = 16, 64, 8  # training length, eval length, rotary dims per head (16 * 0.5)
MODEL = dict(n_layer=2, n_head=4, n_kv_head=2, n_embd=64, partial_rotary_factor=0.5, layers='rope:w=8,rope')
CONFIG = {'architectures': ['GPTNeoXForCausalLM'], 'model_type': 'gpt_neox', 'hidden_size': 64,
          'num_attention_heads': 4, 'num_key_value_heads': 2, 'num_hidden_layers': 2, 'max_position_embeddings': L,
          'rope_theta': 10000.0, 'rotary_pct': 0.5, 'vocab_size': 68}  # the same numbers as an HF config.json


@pytest.fixture(scope='module')
def base(char_data, tmp_path_factory):
    import train
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp('composite')
    train.train(dict(train.DEFAULTS, out_dir=str(root / 'base'), dataset=char_data, block_size=L, batch_size=16,
                     max_iters=80, eval_interval=80, eval_iters=2, learning_rate=1e-2, warmup_iters=5,
                     lr_decay_iters=80, min_lr=1e-3, progress=False, device='cpu', **MODEL))
    yield dict(root=root, base=str(root / 'base'), data=char_data)
    torch.set_num_threads(threads)


@pytest.fixture(scope='module')
def tuned(base):
    import finetune_long
    out = {}
    for name, extra in (('yarn', []), ('pose', ['--pose=True'])):
        out[name] = str(base['root'] / name)
        finetune_long.main([f"--init_from={base['base']}", '--rope_type=yarn', '--factor=4', '--max_iters=4',
                            '--eval_interval=4', '--eval_iters=2', f'--out_dir={out[name]}', '--progress=False',
                            '--device=cpu', *extra])
    return out


def args_of(folder):
    return torch.load(os.path.join(folder, 'ckpt.pt'), map_location="cpu", weights_only=True)['model_args']


def test_the_base_is_the_composition(base):
    """train.py builds grouped heads (n_kv_head was no setting of train.py: train() dropped it, the CLI refused it)."""
    from data.checkpoints import load_checkpoint, model_from_checkpoint
    args = args_of(base['base'])
    assert {k: args[k] for k in MODEL} == MODEL
    m = model_from_checkpoint(load_checkpoint(base['base']))
    assert m.rotary_dim == ROT and m.head_dim == 16 and m.transformer.h[0].attn.kv_dim == 2 * 16


@pytest.mark.parametrize('arm', ['yarn', 'pose'])
def test_finetune_keeps_the_composition(base, tuned, arm):
    ckpt = torch.load(os.path.join(tuned[arm], 'ckpt.pt'), map_location="cpu", weights_only=True)
    assert {k: ckpt['model_args'][k] for k in MODEL} == MODEL
    sc = ckpt['model_args']['rope_scaling']
    assert sc['rope_type'] == 'yarn' and sc['factor'] == 4.0 and sc['original_max_position_embeddings'] == L
    assert ckpt['lineage']['finetune_steps'] == 4 and ckpt['model_args']['block_size'] == 4 * L
    assert bool(ckpt['config']['pose']) == (arm == 'pose')
    rows = [json.loads(r) for r in open(os.path.join(tuned[arm], 'log.jsonl'))]
    assert rows and all(math.isfinite(r['val']) for r in rows if 'val' in r)


def test_eval_scores_every_arm(base, tuned, tmp_path):
    import eval as ev
    out = tmp_path / 'eval'
    ev.main([f"--ckpt={base['base']},{tuned['yarn']},{tuned['pose']}", '--rope_types=default,yarn,ntk,crop,rerope:window=8',
             f'--eval_len={T}', '--num_windows=4', '--retrieval_len=6', '--retrieval_pos=2', '--retrieval_examples=4',
             '--grid=3', f'--out_dir={out}', '--device=cpu', '--progress=False', '--plot=False'])
    arms = json.load(open(out / 'summary.json'))['arms']
    names = [a['name'] for a in arms]
    for want in ('yarn s=4 zero-shot', 'ntk s=4 zero-shot', 'crop w=16 (sliding)', 'rerope w=8 zero-shot'):
        assert want in names
    assert sum(a['finetune_steps'] == 4 for a in arms) == 2  # the YaRN and PoSE fine-tunes
    for a in arms:
        if a['buckets']:
            assert a['layers'] == MODEL['layers'] and len(a['buckets']) == 3
            assert all(math.isfinite(v) for v in a['buckets'].values()), a['name']
    assert sum(bool(a['buckets']) for a in arms) >= 7
    yarn0 = next(a for a in arms if a['name'] == 'yarn s=4 zero-shot')
    base0 = arms[0]
    assert yarn0['buckets'][f'{2 * L}-{T}'] != base0['buckets'][f'{2 * L}-{T}']  # the scaling acts


@pytest.mark.parametrize('ckpt', ['base', 'yarn'])
def test_sample_agrees_with_and_without_the_cache(base, tuned, ckpt):
    folder = dict(base=base['base'], **tuned)[ckpt]
    texts = {}
    for kv in (True, False):
        for how in (['--temperature=0'], ['--temperature=1.0', '--top_k=0', '--seed=7']):
            r = run(['sample.py', f'--ckpt={folder}', '--start=ROMEO', '--num_samples=1', '--max_new_tokens=50',
                     f'--kv_cache={kv}', '--device=cpu', '--progress=False', *how], timeout=120)
            assert r.returncode == 0, r.stderr
            texts[kv, how[0]] = r.stdout
    assert 'kv_cache on' in r.stderr or 'kv_cache off (--kv_cache=False)' in r.stderr
    for how in ('--temperature=0', '--temperature=1.0'):
        assert texts[True, how] == texts[False, how]
    sampled = texts[True, '--temperature=1.0'].split('\n---------------')[0]
    assert sampled.startswith('ROMEO') and len(sampled) > len('ROMEO') + 40


def test_knobs_from_the_checkpoint_is_knobs_from_the_config(base, tmp_path):
    """lab.knobs --ckpt read head_dim = n_embd // n_head = 16 on this base, --config the rotary dims, 8: two answers
    for one model (NTK's base 48,761 against 63,496 at s = 4)."""
    cfg = tmp_path / 'config.json'
    cfg.write_text(json.dumps(CONFIG))
    got = []
    for src in (f"--ckpt={base['base']}", f'--config={cfg}'):
        r = run(['-m', 'lab.knobs', src, f'--T={T}', '--json=True'], timeout=60)
        assert r.returncode == 0, r.stderr
        got.append(json.loads(r.stdout))
    assert got[0]['head_dim'] == got[1]['head_dim'] == ROT
    assert {k: v for k, v in got[0].items() if k != 'source'} == {k: v for k, v in got[1].items() if k != 'source'}


def test_pairs_names_the_rotary_pairs_only(base, tmp_path):
    from lab import pairs
    out = tmp_path / 'pairs'
    assert pairs.main([f"--ckpt={base['base']}", '--rope_types=default,linear', '--num_windows=2', f'--out_dir={out}',
                       '--device=cpu']) == 0
    got = json.load(open(out / 'pair_usage.json'))
    for a in got['arms']:  # the turning pairs only: the critical pair among them, shares over them; the 4
        assert 0 <= a['critical_pair'] < ROT // 2 and a['head_dim'] == 16 and a['rotary_dim'] == ROT  # pass-through
        assert len(a['theta']) == ROT // 2 and all(t > 0 for t in a['theta'])  # pairs' part of the logit apart
        for b in ('inside', 'past'):
            assert len(a['pairs'][b]['used_share']) == ROT // 2 and abs(sum(a['pairs'][b]['used_share']) - 1) < 1e-6
            assert 0 < a['pass_through'][b]['norm'] < 1 and 0 < a['pass_through'][b]['used'] < 1
        assert a['critical_pair'] == critical_dimension(ROT, 1e4, 16)[0] // 2  # over the rotary dims, not the head


def test_a_tiny_longrope_search(base, tmp_path):
    import search_longrope as sl
    from test_search_longrope import SMALL
    best, state = sl.main([f"--init_from={base['base']}", f"--out_dir={tmp_path / 's'}", '--search_generations=1',
                           *SMALL])
    sc = best if isinstance(best, dict) and 'rope_type' in best else torch.load(
        tmp_path / 's' / 'ckpt.pt', map_location='cpu', weights_only=True)['model_args']['rope_scaling']
    assert sc['rope_type'] == 'longrope'
    assert len(sc['long_factor']) == len(sc['short_factor']) == 4  # one per turning pair (8 of 16 dims turn)
    assert all(math.isfinite(c['loss']) for c in state['candidates'] if c.get('loss') is not None)


def test_the_export_refuses_the_window_by_name(base, tmp_path):
    out = tmp_path / 'hf'
    r = run(['-m', 'lab.hf.export', f"--ckpt={base['base']}", f'--out_dir={out}'], timeout=60)
    assert r.returncode != 0 and 'Traceback' not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert 'n_kv_head=2' in r.stderr and 'grouped-query heads' in r.stderr  # (GPT-NeoX has no windows either)
    assert not out.exists()


def test_inspect_reads_the_rotary_dims(tmp_path):
    """lab.hf.inspect on a GPT-NeoX config.json with rotary_pct 0.5 refused it as 'partial_rotary_factor = 0.25':
    it took the rotation out of the config, then from_hf put back GPTNeoXConfig's default."""
    cfg = tmp_path / 'config.json'
    cfg.write_text(json.dumps(CONFIG))
    r = run(['-m', 'lab.hf.inspect', '--json', str(cfg)], timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got['head_dim'] == 16 and got['rotary_dim'] == ROT
