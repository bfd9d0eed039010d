"""Issue 60 item 7: every bad input on the new surface (GGUF and Hugging Face folders, the pinned file, lengths,
settings that would change nothing, eval.py --merge, resumed runs) is refused before anything is written: one line
naming the file or the setting and the fix, exit 2, no traceback, no file created or changed; what is legal still runs.

Each table row is what a new user would try. Before the fixes here, the GGUF rows with missing, zero or mistyped
metadata ended in TypeError / ZeroDivisionError tracebacks (or named rope.dimension_count for a missing head count,
or loaded '64' as a number), a q / ffn tensor of the wrong width in torch.cat's RuntimeError, a wrong block_count as
"a weight the GPT has no place for"; an HF config.json without a field in KeyError, a mistyped one in TypeError
(tie_word_embeddings "false" loaded as true), a safetensors header that disagrees with its data in numpy's reshape
error, a shard the index lists but the folder lacks in a bare errno line, an index that puts a tensor in a shard
without it loaded anyway; --partial_rotary_factor on a model that turns nothing trained and wrote its checkpoint, a
rotary-only temperature on layers that turn nothing ran, an asked-for --passkey_text that cannot fit was skipped; and
--merge of a part without its retrieval.csv dropped that part's arms from the merged retrieval.csv."""
import json
import os
import shutil

import numpy as np
import pytest

import lab.hf.gguf
import lab.hf.weights  # noqa: F401  registers hf:
from badinput import assert_refused, call, check_refused, snapshot
from data.checkpoints import load_checkpoint

gguf = pytest.importorskip('gguf')
from test_real_model import LLAMA_CONFIG, gguf_tensors, hf_weights, write_folder, write_gguf  # noqa: E402

SMALL = ['--n_layer=2', '--n_head=2', '--n_embd=16', '--block_size=32', '--batch_size=2', '--max_iters=2',
         '--eval_interval=2', '--eval_iters=1', '--device=cpu', '--compile=False', '--progress=False']
EVAL = ['--entropy_windows=1', '--eval_len=64', '--num_windows=2', '--retrieval_examples=2', '--retrieval_len=8',
        '--retrieval_cue=2', '--retrieval_pos=0', '--needles=0', '--word_needles=0', '--mv_values=0',
        '--tracking=False', '--depth_len=0', '--recall_len=0', '--plot=False', '--progress=False', '--device=cpu',
        '--workers=1']


def load_main(argv):
    """What every tool does with a model reference: load it (data.checkpoints.load_checkpoint)."""
    load_checkpoint(argv[0])


# ----------------------------------------------------------------------------- GGUF

@pytest.fixture(scope='module')
def ggufs(tmp_path_factory):
    root, t = tmp_path_factory.mktemp('ggufs'), gguf_tensors(hf_weights())
    out = {'ok': write_gguf(root / 'ok.gguf', t)}
    for name, kw in {'no_ctx': dict(drop=('llama.context_length',)),
                     'no_heads': dict(drop=('llama.attention.head_count',)),
                     'zero_heads': dict(meta={'{arch}.attention.head_count': 0}),
                     'str_ctx': dict(meta={'{arch}.context_length': '64'}),
                     'str_base': dict(meta={'{arch}.rope.freq_base': 'x'}),
                     'kv_3': dict(meta={'{arch}.attention.head_count_kv': 3}),
                     'blocks_1': dict(meta={'{arch}.block_count': 1})}.items():
        out[name] = write_gguf(root / f'{name}.gguf', t, **kw)
    narrow = dict(t, **{'blk.0.ffn_up.weight': t['blk.0.ffn_up.weight'][:, :10].copy()})
    out['narrow'] = write_gguf(root / 'narrow.gguf', narrow)
    return out


@pytest.mark.parametrize('case, names', [
    ('no_ctx', ['no_ctx.gguf', 'llama.context_length is missing']),
    ('no_heads', ['llama.attention.head_count is missing']),
    ('zero_heads', ['llama.attention.head_count = 0', 'whole number >= 1']),
    ('str_ctx', ["llama.context_length = '64'"]),
    ('str_base', ["llama.rope.freq_base = 'x'"]),
    ('kv_3', ['llama.attention.head_count_kv = 3']),
    ('blocks_1', ['llama.block_count = 1', 'tensors of 2 layers']),
    ('narrow', ['tensor blk.0.ffn_up.weight has shape (96, 10)'])])
def test_a_damaged_gguf_is_refused_naming_its_key(ggufs, case, names, capsys):
    check_refused(lab.hf.gguf.main, [f'--gguf={ggufs[case]}'], names, capsys, [os.path.dirname(ggufs[case])])


def test_a_sound_gguf_still_loads_and_knobs_read_its_metadata(ggufs, capsys):
    from lab import knobs
    assert call(lab.hf.gguf.main, [f'--gguf={ggufs["ok"]}'], capsys)[0] == 0
    assert_refused(*call(knobs.main, [f'--ckpt=gguf:{ggufs["no_ctx"]}', '--T=128'], capsys),
                   ['llama.context_length is missing'])  # (before: "int() argument must be ... not 'NoneType'")


# ----------------------------------------------------------------------------- Hugging Face folders

def damaged_header(folder, tensor, **change):
    """Rewrite one tensor's entry in model.safetensors' JSON header (the data left as it is)."""
    path = os.path.join(folder, 'model.safetensors')
    data = open(path, 'rb').read()
    n = int.from_bytes(data[:8], 'little')
    header = json.loads(data[8:8 + n])
    header[tensor].update(change)
    text = json.dumps(header).encode()
    text += b' ' * (-len(text) % 8)
    open(path, 'wb').write(len(text).to_bytes(8, 'little') + text + data[8 + n:])


@pytest.fixture(scope='module')
def folders(tmp_path_factory):
    root, w = tmp_path_factory.mktemp('hf_folders'), hf_weights()
    out = {'ok': write_folder(root / 'ok', LLAMA_CONFIG, w)}
    configs = {'no_layers': {k: v for k, v in LLAMA_CONFIG.items() if k != 'num_hidden_layers'},
               'str_width': dict(LLAMA_CONFIG, hidden_size='64'),
               'tie_str': dict(LLAMA_CONFIG, tie_word_embeddings='false'),
               'scaling_5': dict(LLAMA_CONFIG, rope_scaling=5),
               'short_types': dict(LLAMA_CONFIG, layer_types=['full_attention'])}
    for name, config in configs.items():
        out[name] = write_folder(root / name, config, w)
    out['header'] = write_folder(root / 'header', LLAMA_CONFIG, w)
    damaged_header(out['header'], 'model.norm.weight', shape=[65])
    out['no_shard'] = write_folder(root / 'no_shard', LLAMA_CONFIG, w, shards=2)
    os.remove(os.path.join(out['no_shard'], 'model-00002-of-00002.safetensors'))
    out['index'] = write_folder(root / 'index', LLAMA_CONFIG, w, shards=2)
    path = os.path.join(out['index'], 'model.safetensors.index.json')
    index = json.load(open(path))
    first = sorted(k for k, f in index['weight_map'].items() if f.startswith('model-00001'))[0]
    index['weight_map'][first] = 'model-00002-of-00002.safetensors'
    json.dump(index, open(path, 'w'))
    return out


@pytest.mark.parametrize('case, names', [
    ('no_layers', ['config.json has no num_hidden_layers']),
    ('str_width', ["hidden_size = '64'", 'whole number']),
    ('tie_str', ["tie_word_embeddings = 'false'", 'true or false']),
    ('scaling_5', ['rope_scaling = 5', 'must be a dict']),
    ('short_types', ['layer_types', 'num_hidden_layers = 2']),
    ('header', ["model.norm.weight's header gives shape [65]", 'disagrees with its data']),
    ('no_shard', ['model-00002-of-00002.safetensors is missing']),
    ('index', ['model.safetensors.index.json puts', 'does not hold it'])])
def test_a_damaged_hf_folder_is_refused_naming_the_field_or_file(folders, case, names, capsys):
    check_refused(load_main, [f'hf:{folders[case]}'], names, capsys, [folders[case]])


def test_a_sound_hf_folder_still_loads(folders, capsys):
    assert call(load_main, [f'hf:{folders["ok"]}'], capsys)[0] == 0


def test_a_pinned_file_whose_sha256_moved_is_refused_by_name(ggufs, tmp_path, monkeypatch, capsys):
    """A run records its GGUF tokenizer by path and sha256; the file changed under it is refused, naming both."""
    from data import sources
    copy = tmp_path / 'tok.gguf'
    shutil.copy(ggufs['ok'], copy)
    monkeypatch.setattr(sources, 'DEFAULT_CACHE_DIR', str(tmp_path / 'cache'))

    def find(argv):
        sources.find_gguf(str(copy), '0' * 64)
    assert_refused(*call(find, [], capsys), [str(copy), '0' * 64])


# ----------------------------------------------------------------------------- settings that would change nothing

@pytest.fixture(scope='module')
def runs(char_data, tmp_path_factory):
    """Tiny runs (2 steps): a RoPE base, a NoPE one (pos_emb=none) and a windowed-RoPE + NoPE hybrid."""
    import train
    root, out = tmp_path_factory.mktemp('surface_runs'), {}
    for name, extra in (('rope', []), ('none', ['--pos_emb=none']), ('hybrid', ['--layers=rope:w=8,nope'])):
        out[name] = str(root / name)
        train.main([f'--dataset={char_data}', f'--out_dir={out[name]}', *SMALL, *extra])
    return out


def test_partial_rotary_factor_on_a_model_that_turns_nothing_is_refused_before_a_checkpoint(char_data, tmp_path,
                                                                                          capsys):
    import train
    base = [f'--dataset={char_data}', *SMALL, '--partial_rotary_factor=0.5']
    for extra in (['--pos_emb=none'], ['--layers=nope,nope']):
        out = tmp_path / extra[0].split('=')[1].replace(',', '_')
        check_refused(train.main, [*base, f'--out_dir={out}', *extra], ['partial_rotary_factor=0.5', 'drop it'],
                      capsys, [out])
    out = tmp_path / 'legal'  # on a RoPE model it runs
    assert call(train.main, [*base, f'--out_dir={out}'], capsys)[0] == 0 and (out / 'ckpt.pt').exists()


@pytest.mark.parametrize('model, arm, names', [
    ('none', 'qtemp:shape=logn:on=rotary', ["on='rotary'", 'use on=all']),
    ('hybrid', 'qtemp:shape=logn:layers=nope:on=rotary', ["on='rotary'", "layers='nope'"]),
    ('none', 'qtemp:shape=logn:layers=rope', ["layers='rope'"]),
    ('none', 'yarn', ['no RoPE'])])
def test_a_temperature_or_scaling_on_layers_that_turn_nothing_is_refused(runs, tmp_path, model, arm, names, capsys):
    import eval as ev
    out = tmp_path / 'eval'
    check_refused(ev.main, [f'--ckpt={runs[model]}', f'--rope_types={arm}', *EVAL, f'--out_dir={out}'], names, capsys,
                  [out])


def test_an_asked_for_passkey_text_that_cannot_fit_is_refused(runs, tmp_path, capsys):
    import eval as ev
    out = tmp_path / 'eval'
    check_refused(ev.main, [f'--ckpt={runs["rope"]}', '--passkey_text=2', *EVAL, f'--out_dir={out}'],
                  ['passkey_text=2', 'set passkey_text=0'], capsys, [out])  # (the fixture's text: no digits)


def test_lengths_past_the_data_or_memory_are_refused_before_the_work(runs, tmp_path, capsys):
    import eval as ev
    import finetune_long
    out = tmp_path / 'o'
    check_refused(ev.main, [f'--ckpt={runs["rope"]}', *EVAL, '--eval_len=100000000', f'--out_dir={out}'],
                  ['eval_len'], capsys, [out])
    check_refused(finetune_long.main, [f'--init_from={runs["rope"]}', '--rope_type=linear', '--factor=2',
                                       '--block_size=100000000', f'--out_dir={out}', '--max_iters=2', '--device=cpu',
                                       '--progress=False'], ['block_size=100000000'], capsys, [out])


# ----------------------------------------------------------------------------- eval.py --merge, resumed runs

def test_a_merge_never_drops_a_parts_arm(runs, tmp_path, capsys):
    import eval as ev
    p1, p2, out = tmp_path / 'p1', tmp_path / 'p2', tmp_path / 'merged'
    assert call(ev.main, [f'--ckpt={runs["rope"]}', *EVAL, f'--out_dir={p1}'], capsys)[0] == 0
    assert call(ev.main, [f'--base={runs["rope"]}', '--rope_types=linear', *EVAL, f'--out_dir={p2}'], capsys)[0] == 0
    merge = [f'--merge={p1},{p2}', f'--out_dir={out}', '--plot=False']
    saved = (p2 / 'retrieval.csv').read_text()
    os.remove(p2 / 'retrieval.csv')
    check_refused(ev.main, merge, [str(p2 / 'retrieval.csv'), 'linear s=2 zero-shot'], capsys, [out, p1, p2])
    (p2 / 'retrieval.csv').write_text(saved)  # whole parts merge, every arm's rows kept
    assert call(ev.main, merge, capsys)[0] == 0
    rows = (out / 'retrieval.csv').read_text()
    assert 'linear s=2 zero-shot' in rows and 'base (L=32)' in rows


def test_a_killed_run_is_resumed_or_refused_never_restarted_over(runs, tmp_path, capsys):
    """A run stopped after its first checkpoint (as a kill leaves it): the same command again is refused naming
    --init_from=resume, the checkpoint unchanged; --init_from=resume continues it."""
    import finetune_long
    import train
    run = tmp_path / 'run'
    shutil.copytree(runs['rope'], run)
    args = [f'--out_dir={run}', *SMALL]
    check_refused(train.main, args, ['already holds a run', '--init_from=resume'], capsys, [run])
    assert call(train.main, [f'--out_dir={run}', '--init_from=resume', '--max_iters=4'], capsys)[0] == 0
    assert json.loads((run / 'log.jsonl').read_text().splitlines()[-1])['iter'] == 4
    ft = tmp_path / 'ft'
    ft_args = [f'--init_from={runs["rope"]}', '--rope_type=linear', '--factor=2', f'--out_dir={ft}', '--max_iters=2',
               '--eval_interval=2', '--eval_iters=1', '--batch_size=2', '--progress=False', '--device=cpu']
    assert call(finetune_long.main, ft_args, capsys)[0] == 0
    before = snapshot(ft)
    check_refused(finetune_long.main, ft_args, ['already holds a run', '--init_from=resume'], capsys, [ft])
    assert snapshot(ft) == before
