"""A GGUF's tokenizer by its path and sha256 (issue 60 item 2): `gguf:<any path>` works from any folder in every tool,
and a fine-tune of a real model is taken like any other run. Every test runs in a folder of its own, away from the
GGUF's, with the cache dir (data.sources.DEFAULT_CACHE_DIR) an empty folder: nothing is found by luck.

The model is test_real_model.py's tiny Llama whose GGUF carries its own byte-level BPE (bpe_gguf, 259 tokens, L = 64);
the chain is test_real_model_ft.py's: the fixture plays prepared in the file's BPE, a YaRN fine-tune of two steps at
128, then eval.py, sample.py, lab.pairs and lab.hf.export on the run, each called in this process (seconds)."""
import json
import os
import shutil

import pytest
import torch

from conftest import FIXTURE_CORPUS
from data import sources
from data.common import DataError, load_meta
from data.checkpoints import load_checkpoint
from test_real_model import bpe_gguf

pytest.importorskip('gguf')
VOCAB = 259  # bpe_gguf's tokens: <|endoftext|>, the 256 bytes, two merges
# eval.py at a toy size: 2 windows of 128 (2 L), one word needle (lab/measure/ruler.py, which reads the tokenizer)
EVAL = ['--eval_len=128', '--num_windows=2', '--entropy_windows=1', '--retrieval_examples=2', '--needles=0',
        '--word_needles=1', '--mv_values=0', '--tracking=False', '--depth_len=0', '--recall_len=0', '--plot=False',
        '--progress=False', '--device=cpu', '--workers=1']
SAMPLE = ['--start=the theme', '--max_new_tokens=6', '--num_samples=1', '--temperature=0', '--progress=False',
          '--device=cpu']


@pytest.fixture(scope='module')
def ft(tmp_path_factory):
    """(the GGUF's absolute path, the prepared data, the fine-tuned run), made from a folder that is not the GGUF's
    with an empty cache dir."""
    root = tmp_path_factory.mktemp('gguf_tok')
    os.makedirs(root / 'models')
    path = bpe_gguf(root / 'models' / 'tok.gguf')
    with pytest.MonkeyPatch.context() as mp:
        elsewhere(mp, root / 'fixture')
        from data.shakespeare_smollm2.prepare import main as prepare
        import finetune_long
        prepare(['--gguf', path, '--src', FIXTURE_CORPUS, '--out_dir', str(root / 'data')])
        finetune_long.main([f'--init_from=gguf:{path}', f'--dataset={root / "data"}', '--rope_type=yarn', '--factor=2',
                            '--batch_size=2', '--max_iters=2', '--eval_interval=2', '--eval_iters=1',
                            '--progress=False', '--device=cpu', f'--out_dir={root / "ft"}'])
    return path, str(root / 'data'), str(root / 'ft')


def elsewhere(mp, folder):
    """Work from folder (new, empty) with an empty cache dir beside it."""
    os.makedirs(folder)
    os.makedirs(str(folder) + '-cache')
    mp.chdir(folder)
    mp.setattr(sources, 'DEFAULT_CACHE_DIR', str(folder) + '-cache')
    mp.setenv('LONGCTX_CACHE', str(folder) + '-cache')


@pytest.fixture
def away(tmp_path, monkeypatch):
    elsewhere(monkeypatch, tmp_path / 'work')
    return tmp_path


def test_sample_reads_a_gguf_by_its_path_from_another_folder(away, capsys):
    """gguf:<absolute path> from another folder, the cache empty: the checkpoint records the file by its absolute
    path and sha256, and sample.py writes text in the file's own BPE (before: the tokenizer was looked up by the
    file's name alone, in the working folder and the cache, and sample.py refused)."""
    import sample
    os.makedirs(away / 'models')
    path = bpe_gguf(away / 'models' / 'tok.gguf')
    sample.main([f'--ckpt=gguf:{path}', *SAMPLE])
    out = capsys.readouterr().out
    assert out.startswith('the theme') and len(out.splitlines()[0]) > len('the theme')
    ds = load_checkpoint(f'gguf:{path}')['dataset']
    assert ds['tokenizer_file'] == os.path.realpath(path) and ds['tokenizer_sha256'] == sources.file_sha256(path)


def test_a_recorded_gguf_is_found_in_the_cache_by_sha256_else_refused(away):
    """The recorded path first; when the file has moved, the cache dir by name or by sha256 (under any name); when
    neither holds it, one line naming the file and its sha256."""
    import lab.hf.tokenizer  # noqa: F401  registers the 'gguf' tokenizer
    from data.sources import get_tokenizer
    path = bpe_gguf(away / 'tok.gguf')
    meta = {'dataset': 'd', 'tokenizer': 'gguf', 'vocab_size': VOCAB, **sources.gguf_identity(path)}
    want = get_tokenizer(meta)[0]('the theme')
    cache, sha = sources.DEFAULT_CACHE_DIR, meta['tokenizer_sha256']
    shutil.move(path, os.path.join(cache, 'renamed.gguf'))  # moved into the cache under another name: by sha256
    assert sources.find_gguf(meta['tokenizer_file'], sha) == os.path.join(cache, 'renamed.gguf')
    bpe_gguf(away / 'tok.gguf')  # (the same bytes again at the recorded path: found there first)
    assert sources.find_gguf(meta['tokenizer_file'], sha) == meta['tokenizer_file']
    os.remove(meta['tokenizer_file'])
    os.remove(os.path.join(cache, 'renamed.gguf'))
    with open(meta['tokenizer_file'], 'wb') as f:  # another file at the recorded path: not taken
        f.write(b'something else')
    with pytest.raises(DataError, match=rf"GGUF tokenizer file {meta['tokenizer_file']} \(sha256 {sha}\) not found"):
        get_tokenizer(meta)
    bpe_gguf(os.path.join(cache, 'tok.gguf'))  # by name in the cache
    assert get_tokenizer(meta)[0]('the theme') == want


def test_eval_takes_a_finetune_of_a_gguf_and_its_gguf_base(ft, away):
    """eval.py --ckpt=<the fine-tune> --rope_types=default: the base is the gguf:<file> its lineage names (before:
    refused, "does not exist here"), it sits beside its fine-tune (its data is not ours), and the word-needle room
    reads the tokenizer from the data's meta.json (before: skipped, the file not found by its name)."""
    import eval as ev
    path, data, run = ft
    alone = ev.main([f'--ckpt={run}', *EVAL, f'--out_dir={away / "alone"}'])  # the rooms read the data's tokenizer
    assert not alone['settings']['rooms_skipped'] and alone['settings']['needles_words']['examples'] == 2
    summary = ev.main([f'--ckpt={run}', '--rope_types=default', *EVAL, f'--out_dir={away / "eval"}'])
    assert [a['kind'] for a in summary['arms']] == ['fine-tuned', 'base']
    assert all('needles_words' in a for a in summary['arms'])  # (the room ran: its outcomes per arm)
    meta = load_meta(data)
    assert (meta['tokenizer_file'], meta['tokenizer_sha256']) == (os.path.realpath(path), sources.file_sha256(path))
    assert os.path.isfile(away / 'eval' / 'summary.json')


def test_sample_on_a_finetune_of_a_gguf(ft, away, capsys):
    """sample.py --ckpt=<the fine-tune>: the run keeps its tokenizer (path and sha256) from its data (before: refused,
    no tokenizer file recorded); a run saved without it finds it through its data's meta.json."""
    import sample
    path, _, run = ft
    sample.main([f'--ckpt={run}', *SAMPLE])
    out = capsys.readouterr().out
    assert out.startswith('the theme') and len(out.splitlines()[0]) > len('the theme')
    ckpt = load_checkpoint(run)
    assert ckpt['dataset']['tokenizer_sha256'] == sources.file_sha256(path)
    assert ckpt['lineage']['base_checkpoint'] == f'gguf:{os.path.realpath(path)}'
    old = away / 'old'  # as saved before: no tokenizer_file in the run's dataset entry
    os.makedirs(old)
    torch.save(dict(ckpt, dataset={k: v for k, v in ckpt['dataset'].items() if not k.startswith('tokenizer_')}),
               old / 'ckpt.pt')
    sample.main([f'--ckpt={old}', *SAMPLE])
    assert capsys.readouterr().out == out


def test_pairs_takes_a_finetune_of_a_gguf_and_its_base(ft, away):
    """lab.pairs --ckpt=<the fine-tune> --rope_types=default: its gguf: base found (before: refused)."""
    import lab.pairs
    _, _, run = ft
    lab.pairs.main([f'--ckpt={run}', '--rope_types=default', '--eval_len=128', '--num_windows=1', '--queries=8',
                    '--plot=False', '--device=cpu', f'--out_dir={away / "pairs"}'])
    got = json.loads((away / 'pairs' / 'pair_usage.json').read_text())
    assert len(got['arms']) == 2


def test_export_of_a_finetune_of_a_gguf_writes_its_own_tokenizer(ft, away):
    """lab.hf.export on the fine-tune writes a folder whose tokenizer.json is the GGUF's own BPE (before: the run named
    no file, and the export fell back to the pinned SmolLM2's tokenizer, fetched with pip)."""
    from lab.hf.export import main as export
    _, _, run = ft
    export([f'--ckpt={run}', f'--out_dir={away / "hf"}'])
    tok = json.loads((away / 'hf' / 'tokenizer.json').read_text())
    assert len(tok['model']['vocab']) == VOCAB and tok['model']['merges'] == ['Ġ t', 'h e']
    assert os.listdir(sources.DEFAULT_CACHE_DIR) == []  # nothing fetched
    from lab.hf.export import gguf_tokenizer_found
    ckpt = load_checkpoint(run)
    gone = dict(ckpt, dataset=dict(ckpt['dataset'], tokenizer_file=str(away / 'nowhere.gguf'),
                                   tokenizer_sha256='0' * 64))
    with pytest.raises(DataError, match=r"nowhere.gguf \(sha256 0{64}\) not found"):
        gguf_tokenizer_found(gone, run)
