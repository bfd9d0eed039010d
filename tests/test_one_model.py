"""Issue 60 item 1: one description of the model that every tool reads (lab/model_facts.py), and what it mends:
every export round-trips (export -> hf: load -> the same logits -> sample.py writes the same text) for a character,
a GPT-2 BPE and a partial-rotary run; knobs and pairs read the rotary dims from it; LongRoPE's start tokens leave the
pass-through pairs alone; the sweep checks a per-pair list against the pairs that turn and stores the base's model;
plot.py's T_extra line counts the rotary dims; an export writes a rotary fraction transformers turns back into the
same dims."""
import json
import os

import matplotlib
import pytest
import torch

matplotlib.use('Agg')

from conftest import run  # noqa: E402
from data.checkpoints import load_checkpoint, model_from_checkpoint  # noqa: E402
from lab.hf.export import export  # noqa: E402
from lab.engine.checks import MODEL_KEYS  # noqa: E402
from lab.model_facts import describe  # noqa: E402
from test_hf_export import ITOS, L, tiny, write_run  # noqa: E402

PROMPT = 'ROMEO: '
YARN_ROTARY = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': L, 'attention_factor_on': 'rotary'}
RUNS = {  # case -> (tiny()'s settings, tokenizer)
    'char': (dict(), 'char'),
    'partial_yarn': (dict(scaling=YARN_ROTARY, partial_rotary_factor=0.5), 'char'),  # 4 of 8 pairs turn, YaRN on them
    'gpt2': (dict(vocab=50257), 'gpt2'),
}


def sample(ckpt):
    r = run(['sample.py', f'--ckpt={ckpt}', f'--start={PROMPT}', '--max_new_tokens=24', '--num_samples=1',
             '--top_k=1', '--device=cpu', '--progress=False'], timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout[r.stdout.find(PROMPT):]  # the text, then a rule (GPT-2's first line names its files)


@pytest.mark.parametrize('case', list(RUNS))
def test_every_export_round_trips_to_the_same_text(tmp_path, case):
    """Before: hf:<a character run's export> was refused (its tokenizer.json is no byte-level BPE) and a partial
    rotation's export was refused by the hf: loader ('no counterpart in model.py's GPT')."""
    kw, tokenizer = RUNS[case]
    if tokenizer == 'gpt2':
        from data.sources import gpt2_files_on_disk
        if gpt2_files_on_disk() is None:
            pytest.skip("no GPT-2 tokenizer files on this machine (the data step fetches them)")
    m = tiny(**kw)
    folder = write_run(tmp_path / 'run', m, tokenizer=tokenizer)
    out, _, _ = export(folder, str(tmp_path / 'hf'))
    back = model_from_checkpoint(load_checkpoint('hf:' + out)).eval()
    assert back.config.rotary_dim == m.config.rotary_dim and back.config.rope_scaling == m.config.rope_scaling
    x = torch.randint(0, len(ITOS), (2, 2 * L))
    with torch.no_grad():
        assert torch.allclose(back(x)[0], m(x)[0], atol=1e-5, rtol=0)
    own, theirs = describe(folder), describe('hf:' + out)
    for k in ('rotary_dim', 'head_dim', 'L', 'rotates'):
        assert getattr(own, k) == getattr(theirs, k), k
    text = sample('hf:' + out)
    assert text.startswith(PROMPT) and len(text) > len(PROMPT) + 20 and text == sample(folder)


def test_longrope_start_tokens_leave_the_pass_through_pairs_alone():
    """Before: rows inside n-hat took plain RoPE over the whole head, turning the 4 pairs that never turn."""
    from model import GPT, GPTConfig
    sc = {'rope_type': 'longrope', 'factor': 4.0, 'original_max_position_embeddings': 32, 'start_token_idx': 4,
          'long_factor': [1.0, 2.0, 3.0, 4.0], 'short_factor': [1.0] * 4}
    m = GPT(GPTConfig(block_size=32, vocab_size=10, n_layer=1, n_head=2, n_embd=32, partial_rotary_factor=0.5,
                      rope_scaling=sc))
    cos, sin = m.rope_tables(64)
    assert sin[:, 4:8].abs().max() == 0 and sin[:, 12:16].abs().max() == 0  # (cos there: 1, or the temperature)
    assert sin[1:4, :4].abs().min() > 0  # rows inside n-hat still turn the rotary pairs (plainly)


def test_the_sweep_sizes_a_per_pair_list_to_the_turning_pairs_and_stores_the_base(tmp_path):
    """Before: finetune_long.py checked a LongRoPE list against head_dim / 2 = 8 pairs on a base where 4 turn (the
    model then refused it for the opposite reason), and stored train.py's defaults for n_kv_head, layers and
    partial_rotary_factor instead of the base's."""
    from finetune_long import DEFAULTS
    from lab.engine.sweep import check_run, plan_arms
    from configurator import ConfigError
    base_m = tiny(partial_rotary_factor=0.5, n_kv_head=1)
    base = torch.load(os.path.join(write_run(tmp_path / 'base', base_m), 'ckpt.pt'), weights_only=True)
    meta = {'vocab_size': len(ITOS), 'docs': {'val': [(0, 0, 10 ** 6)]}, 'dataset': 'tiny', 'tokenizer': 'char',
            'itos': ITOS}
    for n, ok in ((4, True), (8, False)):
        cfg = dict(DEFAULTS, init_from=str(tmp_path / 'base'), out_dir=str(tmp_path / f'ft{n}'), rope_type='longrope',
                   long_factor=[2.0] * n, short_factor=[1.0] * n, device='cpu', dataset='tiny')
        try:
            _, _, plan = plan_arms(cfg, base)
            check_run(cfg, base, plan, str(tmp_path), meta)
            assert ok, n
        except ConfigError as e:
            assert not ok and 'does not fit the model' in str(e), str(e)
        else:
            stored = {k: plan[0].cfg[k] for k in MODEL_KEYS if k != 'rope_scaling'}
            assert stored == {k: base['model_args'][k] for k in stored}


def test_knobs_and_pairs_refuse_a_model_that_rotates_nothing(tmp_path):
    from model import GPT, GPTConfig
    m = GPT(GPTConfig(block_size=L, vocab_size=len(ITOS), n_layer=1, n_head=2, n_embd=32, pos_emb='alibi'))
    folder = write_run(tmp_path / 'alibi', m)
    for args in (['-m', 'lab.knobs', f'--ckpt={folder}', '--T=64'],
                 ['-m', 'lab.pairs', f'--ckpt={folder}', f'--out_dir={tmp_path / "p"}']):
        r = run(args, timeout=60)
        assert r.returncode != 0 and 'Traceback' not in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert 'rotates nothing' in r.stderr and "pos_emb='alibi'" in r.stderr
    assert not (tmp_path / 'p').exists()


def test_the_t_extra_line_counts_the_rotary_dims():
    """Before: plot.py took critical_dimension over summary.json's head_dim (16), not the 8 dims that turn."""
    import matplotlib.pyplot as plt
    from lab.pictures.eval_plots import length_lines
    from rope import critical_dimension
    arm = dict(kind='base', pos_emb='rope', head_dim=16, rotary_dim=8, rope_base=10000.0, train_len=16)
    fig, ax = plt.subplots()
    length_lines(ax, {'L': 16, 'T': 10 ** 6}, [arm], True)
    label = next(t for t in ax.get_legend_handles_labels()[1] if 'T_extra' in t)
    plt.close(fig)
    assert f"d_extra = {critical_dimension(8, 1e4, 16)[0]}" in label
    assert critical_dimension(8, 1e4, 16)[1] != critical_dimension(16, 1e4, 16)[1]


def test_an_export_writes_the_rotary_fraction_transformers_turns_back_into_the_same_dims(tmp_path):
    """Before: partial_rotary_factor 0.1875 of 16 dims turns 2 in the lab (a whole pair) and was written as rotary_pct
    0.1875, which transformers turns into int(16 x 0.1875) = 3 rotating dims: another model."""
    m = tiny(partial_rotary_factor=0.1875)
    out, config, _ = export(write_run(tmp_path / 'run', m), str(tmp_path / 'hf'))
    with open(os.path.join(out, 'config.json'), encoding='utf-8') as f:
        written = json.load(f)
    assert int(16 * written['rotary_pct']) == m.config.rotary_dim == 2
    assert int(16 * written['rope_parameters']['partial_rotary_factor']) == 2
