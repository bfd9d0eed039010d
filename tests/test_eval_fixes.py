"""eval.py's defects found in the restructure (each test failed on the code before its fix, commit 6c97447), on the
`lab` fixture's tiny model and eval (conftest.py)."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import eval as ev
import train
from conftest import EVAL_L as L, EVAL_T as T, ROOT
from data.common import load_meta


def test_two_arms_with_one_name_both_get_their_folder(lab, tmp_path):
    """Two different runs named alike ('base (L=16)'): EVERY one gets its folder's name (before, only the first did,
    so the second kept the bare name)."""
    twin = str(tmp_path / 'twin')
    shutil.copytree(lab['base'], twin)
    arms, _, _ = ev.plan_arms(dict(ev.DEFAULTS, ckpt=f"{lab['base']},{twin}", eval_len=T))
    assert [a['name'] for a in arms] == ['base (L=16) [base]', 'base (L=16) [twin]']


def test_training_mix_lists_the_copy_settings(lab, tmp_path):
    """summary.json's training_mix reads a run's copy_* settings (it looked for mix_* keys, which no run has)."""
    run = str(tmp_path / 'copy')
    train.train(dict(train.DEFAULTS, out_dir=run, dataset=lab['data'], block_size=L, batch_size=4, n_layer=1, n_head=2,
                     n_embd=16, max_iters=4, eval_interval=4, eval_iters=1, progress=False, device='cpu',
                     copy_share=0.5, copy_span_lo=2, copy_span_hi=4, copy_fixed_iters=2))
    out = str(tmp_path / 'eval')
    summary = ev.main([f'--ckpt={lab["base"]},{run}', f'--eval_len={2 * L}', '--num_windows=2', '--entropy_windows=1',
                       '--retrieval_examples=0', '--grid=2', f'--out_dir={out}', '--device=cpu', '--progress=False',
                       '--plot=False'])
    mix, name = summary['settings']['training_mix'], {a['checkpoint']: a['name'] for a in summary['arms']}
    assert mix[name[run]] == dict(copy_share=0.5, copy_span_lo=2, copy_span_hi=4, copy_fixed_iters=2,
                                  copy_max_distance=0, copy_words=0.0)
    assert mix[name[lab["base"]]] == dict(copy_share=0.0, copy_span_lo=8, copy_span_hi=32, copy_fixed_iters=0,
                                          copy_max_distance=0, copy_words=0.0)
    with open(os.path.join(out, 'summary.json'), encoding='utf-8') as f:
        assert json.load(f)['settings']['training_mix'] == mix


def test_smooth_wider_than_T_is_refused_before_measuring(lab, tmp_path, monkeypatch):
    """--smooth > T (the plots' moving average wider than the curve) is refused before any arm is measured: exit 2,
    one line, out_dir not created."""
    out = str(tmp_path / 'out')
    args = [f"--ckpt={lab['base']}", f'--eval_len={T}', f'--smooth={T + 1}', f'--out_dir={out}', '--device=cpu',
            '--progress=False', '--num_windows=2', '--entropy_windows=1', '--retrieval_examples=0']
    r = subprocess.run([sys.executable, os.path.join(ROOT, 'eval.py'), *args], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f'error: smooth={T + 1} ') and f'--smooth <= {T}' in r.stderr
    assert not os.path.exists(out)
    monkeypatch.setattr(ev, 'measure_arm', lambda *a, **k: pytest.fail('an arm was measured'))
    with pytest.raises(ValueError, match=f'smooth={T + 1}'):
        ev.main(args)
    assert not os.path.exists(out)


def test_a_dataset_with_other_characters_is_refused(lab, tmp_path):
    """Same vocabulary size, two characters swapped: the token ids mean other characters, so eval.py refuses (it
    compared only the sizes and measured nonsense); nothing is written."""
    data, out = str(tmp_path / 'data'), str(tmp_path / 'out')
    shutil.copytree(lab['data'], data)
    meta = load_meta(data)
    itos = list(meta['itos'])
    itos[5], itos[6] = itos[6], itos[5]
    with open(os.path.join(data, 'meta.json'), 'w', encoding='utf-8') as f:
        json.dump(dict(meta, itos=itos), f)
    args = [f"--ckpt={lab['base']}", f'--dataset={data}', f'--eval_len={2 * L}', '--num_windows=2',
            '--entropy_windows=1', '--retrieval_examples=0', f'--out_dir={out}', '--device=cpu', '--progress=False']
    with pytest.raises(ValueError, match=r'different characters') as e:
        ev.main(args)
    assert lab['base'] in str(e.value) and data in str(e.value)
    assert not os.path.exists(out)


def test_a_fine_tune_with_copies_is_named_by_its_mix():
    """A fine-tune trained with synthetic copies is another arm than the text-only one ('default copy≤120 ft10'), so
    both can be evaluated side by side; a base's own mix does not enter its name."""
    from lab.measure.arms import ckpt_arm

    def ckpt(share, cap, tuned=True):
        lineage = dict(train_len=16, seq_len=64, base_checkpoint='base', finetune_steps=10, pose=None) if tuned else None
        return dict(model_args=dict(block_size=64 if tuned else 16, rope_scaling=None, pos_emb='rope'), lineage=lineage,
                    config=dict(copy_share=share, copy_max_distance=cap, seed=1))
    assert ckpt_arm('a', ckpt(0.0, 0))['name'] == 'default ft10'
    assert ckpt_arm('a', ckpt(0.5, 0))['name'] == 'default copy ft10'
    assert ckpt_arm('a', ckpt(0.5, 120))['name'] == 'default copy≤120 ft10'
    assert ckpt_arm('a', ckpt(0.5, 120, tuned=False))['name'] == 'base (L=16)'


def test_runs_with_one_name_are_told_apart_by_their_run_folders(lab, tmp_path):
    """Two fine-tunes of the same configuration in two run folders (e.g. plain fine-tunes at two lengths): each arm is
    named after its run folder (the one holding arms.json), not after the arm or seed folder both share."""
    other = str(tmp_path / 'ft-again')
    shutil.copytree(lab['ft'], other)
    arms, _, _ = ev.plan_arms(dict(ev.DEFAULTS, ckpt=f"{lab['ft']},{other}", eval_len=T))
    names = [a['name'] for a in arms]
    assert names == [f"default ft10 [{os.path.basename(lab['ft'])}]", f"yarn s=4 β_fast=8 ft10 [{os.path.basename(lab['ft'])}]",
                     'default ft10 [ft-again]', 'yarn s=4 β_fast=8 ft10 [ft-again]']


def test_combine_bases_reads_each_summary_and_refuses_other_windows(lab, tmp_path):
    """--combine: the same eval twice gives every named contrast and every crop comparison its own difference, an
    interval that is the windows' alone (the two 'bases' agree exactly: no base-to-base variance, but not zero width)
    and (2/2) agreement; an eval on other windows is refused with one line, and nothing is written."""
    one, other = tmp_path / 'one', tmp_path / 'other'
    s1 = ev.main([f'--base={lab["base"]}', '--rope_types=default,crop:form=sliding,linear', f'--eval_len={T}',
                  '--num_windows=4', '--retrieval_examples=0', '--entropy_windows=1', f'--out_dir={one}',
                  '--contrasts=linear s=4 zero-shot | base (L=16)', '--device=cpu', '--progress=False', '--plot=False'])
    shutil.copytree(one, other)
    s = json.loads((other / 'summary.json').read_text(encoding='utf-8'))
    for a in s['arms']:  # another base that happens to give the same numbers (the same base twice is refused)
        a['checkpoint'] = a['checkpoint'] + '-twin'
    (other / 'summary.json').write_text(json.dumps(s), encoding='utf-8')
    out = ev.main([f'--combine={one},{other}', f'--out_dir={tmp_path / "bases"}'])
    loss = out['comparisons']['loss']
    assert list(loss) == list(s1['arms'][0]['buckets'])
    for c, rows in loss.items():
        assert [r['name'] for r in rows] == ['linear s=4 zero-shot vs base (L=16)', 'base (L=16) vs crop w=16 (sliding)',
                                             'linear s=4 zero-shot vs crop w=16 (sliding)']
        named = s1['settings']['contrasts']['loss'][c][0]
        assert rows[0]['diff'] == pytest.approx(named['diff'], abs=1e-6) and rows[0]['ci'][0] < rows[0]['ci'][1]
        assert rows[0]['diffs'] == pytest.approx([named['diff']] * 2, abs=1e-6)
        assert rows[0]['verdicts'] == [named['verdict']] * 2
    assert (tmp_path / 'bases' / 'bases.md').read_text(encoding='utf-8').startswith('# The same comparisons on 2 base')
    s = json.loads((other / 'summary.json').read_text(encoding='utf-8'))
    s['settings']['windows'] = s['settings']['windows'][::-1]
    (other / 'summary.json').write_text(json.dumps(s), encoding='utf-8')
    with pytest.raises(ValueError, match='another windows'):
        ev.main([f'--combine={one},{other}', f'--out_dir={tmp_path / "bases2"}'])
    assert not (tmp_path / 'bases2').exists()
    with pytest.raises(ValueError, match='give two or more'):
        ev.main([f'--combine={one}', f'--out_dir={tmp_path / "bases2"}'])


def test_run_folder_finds_the_fine_tunes_out_dir(tmp_path):
    """A multi-arm fine-tune keeps seeds under arm folders (char-ft/default/seed1337), a one-arm fine-tune right under
    its out_dir (char-ft-plain400/seed1337); both are named by the folder holding arms.json; a lone run by its own."""
    from lab.measure.arms import run_folder
    for d in ('char-ft/default/seed1337', 'char-ft-plain400/seed1337', 'char-longrope-s8'):
        (tmp_path / d).mkdir(parents=True)
    for d in ('char-ft', 'char-ft-plain400'):
        (tmp_path / d / 'arms.json').write_text('{}')
    assert run_folder(tmp_path / 'char-ft/default/seed1337') == 'char-ft'
    assert run_folder(tmp_path / 'char-ft-plain400/seed1337') == 'char-ft-plain400'
    assert run_folder(tmp_path / 'char-longrope-s8') == 'char-longrope-s8'


def test_no_passkey_test_draws_no_retrieval_picture(lab, tmp_path, capsys):
    """retrieval_examples=0 (make quick) drew an empty retrieval.png saying 'skipped'; now none is written, the line
    says why, and one left by an earlier run in that out_dir is removed (it showed other arms)."""
    out = tmp_path / 'eval'
    out.mkdir()
    (out / 'retrieval.png').write_bytes(b'an earlier run')
    ev.main([f'--ckpt={lab["base"]}', f'--eval_len={2 * L}', '--num_windows=2', '--entropy_windows=1',
             '--retrieval_examples=0', '--grid=2', f'--out_dir={out}', '--device=cpu', '--progress=False'])
    assert 'skipped retrieval.png: the passkey test was off (retrieval_examples=0)' in capsys.readouterr().out
    assert not (out / 'retrieval.png').exists() and (out / 'loss_vs_position.png').exists()



def test_arms_measured_side_by_side_equal_one_after_another(lab, tmp_path):
    """workers=2 (forked processes of one thread, costliest arm first) gives every arm the numbers of workers=1, in the
    same order: the moving-scale arm's sampled losses and its passkey outcomes included."""
    args = [f'--ckpt={lab["base"]}', '--rope_types=linear,dynamic', f'--eval_len={T}', '--num_windows=4',
            '--entropy_windows=1', '--retrieval_examples=2', '--retrieval_len=6', '--retrieval_pos=2', '--grid=2',
            '--samples=4', '--needles=0', '--depth_len=0', '--recall_len=0', '--device=cpu', '--progress=False',
            '--plot=False']
    (tmp_path / 'one').mkdir()
    (tmp_path / 'one' / 'families.png').write_bytes(b'an earlier run')  # --plot=False: its pictures would be stale
    one = ev.main(args + ['--workers=1', f'--out_dir={tmp_path / "one"}'])
    assert not list((tmp_path / 'one').glob('*.png')) and (tmp_path / 'one' / 'summary.json').is_file()
    two = ev.main(args + ['--workers=2', f'--out_dir={tmp_path / "two"}'])
    assert one['settings']['workers'] == 1 and two['settings']['workers'] == 2
    assert [a['name'] for a in one['arms']] == [a['name'] for a in two['arms']]
    for a, b in zip(one['arms'], two['arms']):
        assert a['buckets'].keys() == b['buckets'].keys() and a['buckets'] == pytest.approx(b['buckets'], abs=1e-5)
        for ra, rb in zip(a['retrieval'], b['retrieval']):
            assert ra['per_example']['exact'] == rb['per_example']['exact']
            np.testing.assert_allclose(ra['per_example']['gain'], rb['per_example']['gain'], atol=1e-4)


def test_the_costliest_arms_are_measured_first():
    """Moving-scale arms first (LongRoPE, dynamic by its short/long switch, is two runs: not moving), then by seeds."""
    from lab.measure.workers import cost
    arms = [dict(scaling=None, runs=[1]), dict(scaling={'rope_type': 'longrope'}, runs=[1]),
            dict(scaling={'rope_type': 'dynamic_yarn'}, runs=[1]), dict(scaling={'rope_type': 'yarn'}, runs=[1, 2, 3]),
            dict(scaling=None, crop={'form': 'truncated'}, runs=[1])]
    assert sorted(range(5), key=lambda i: -cost(arms[i])) == [2, 3, 4, 0, 1]


def _die_on_b(arm):
    if arm['x'] == 'b':
        os._exit(3)  # a worker killed mid-arm (out of memory, kill -9)
    return arm['x'].upper()


def test_a_killed_worker_stops_the_eval_instead_of_hanging():
    """multiprocessing.Pool waits forever for a task whose worker died; the executor raises instead."""
    from concurrent.futures.process import BrokenProcessPool
    from lab.measure.workers import map_arms
    arms = [{'x': x, 'scaling': None, 'runs': [1]} for x in 'abc']
    with pytest.raises(BrokenProcessPool):
        map_arms(_die_on_b, arms, (), workers=2, progress=False)
    assert [r for r, _ in map_arms(_die_on_b, [arms[0], arms[2]], (), workers=2, progress=False)] == ['A', 'C']


def test_workers_without_fork_is_one_line_or_one_process(monkeypatch):
    """Off Linux the default is one process; an explicit --workers=2 where fork does not exist is refused in one line."""
    import multiprocessing
    from configurator import ConfigError
    from lab.measure import workers
    monkeypatch.setattr(workers.sys, 'platform', 'win32')
    monkeypatch.setattr(multiprocessing, 'get_all_start_methods', lambda: ['spawn'])
    assert workers.worker_count(0, 'cpu', 5) == 1 and workers.worker_count(2, 'cuda', 5) == 1
    with pytest.raises(ConfigError, match='workers=2 needs processes started by fork'):
        workers.worker_count(2, 'cpu', 5)


def test_moving_examples_scores_the_first_windows_past_L_and_pairs_on_them(lab, tmp_path):
    """--moving_examples=2: Dynamic NTK scores the passkey's rows past L for the first 2 retrieval windows only (the
    others None, null in summary.json), inside L every row (one forward there); those outcomes equal the full run's,
    n counts the scored ones, and its paired tests against the base use the examples both scored."""
    args = [f'--ckpt={lab["base"]}', '--rope_types=default,dynamic', f'--eval_len={T}', '--num_windows=4',
            '--entropy_windows=1', '--retrieval_examples=4', '--retrieval_len=6', '--retrieval_pos=2', '--grid=2',
            '--samples=4', '--device=cpu', '--progress=False', '--workers=1', '--plot=False']
    full = ev.main(args + [f'--out_dir={tmp_path / "full"}'])
    part = ev.main(args + ['--moving_examples=2', f'--out_dir={tmp_path / "part"}'])
    assert part['settings']['moving_examples'] == 2
    by = {a['name']: a for a in part['arms']}
    dyn, ref = by['dynamic zero-shot'], {a['name']: a for a in full['arms']}['dynamic zero-shot']
    base = next(a for a in part['arms'] if a['kind'] == 'base')
    past = [b['bucket'] for b in dyn['retrieval'] if b['distance_lo'] >= L]
    assert past and len(past) < len(dyn['retrieval'])
    for b, rb in zip(dyn['retrieval'], ref['retrieval']):
        ex, want = b['per_example']['exact'][0], rb['per_example']['exact'][0]
        if b['bucket'] in past:
            assert ex[:2] == want[:2] and ex[2:] == [None, None] and b['n'] == 2
            assert b['per_example']['gain'][0][:2] == pytest.approx(rb['per_example']['gain'][0][:2], abs=1e-5)
        else:
            assert ex == want and b['n'] == 4
    assert all(None not in r['per_example']['exact'][0] for r in base['retrieval'])  # a static arm scores them all
    from lab.verdicts.compare import paired
    x, y = paired(dyn, base, past[-1], 'exact_match')
    assert x.shape == y.shape == (1, 2)
    row = part['settings']['vs_best']['exact_match'][past[-1]]['arms']
    assert any(name == 'dynamic zero-shot' or row[name]['b'] == 'dynamic zero-shot' for name in row)
    saved = json.load(open(tmp_path / 'part' / 'summary.json'))
    got = next(a for a in saved['arms'] if a['name'] == 'dynamic zero-shot')['retrieval'][-1]['per_example']
    assert got['exact'][0][2:] == [None, None]


def test_rejudge_recomputes_the_comparisons_from_the_stored_values(lab, tmp_path):
    """--rejudge=folder: a summary.json judged again runs no model; the lab's own eval comes back with the same
    comparisons, and an old-style zero-width 0/1 interval (a paired t with no discordant pair) gets Newcombe's back.
    A folder without a summary.json is one line, and nothing is written."""
    src = tmp_path / 'src'
    shutil.copytree(lab['out'], src)
    again = ev.main([f'--rejudge={src}', f'--out_dir={tmp_path / "again"}'])
    s = lab['summary']['settings']
    assert again['settings']['vs_best'] == json.loads(json.dumps(s['vs_best']))
    assert again['settings']['contrasts'] == json.loads(json.dumps(s['contrasts']))
    old = json.loads((src / 'summary.json').read_text(encoding='utf-8'))
    col = next(iter(old['settings']['vs_best']['exact_match']))
    row = next(iter(old['settings']['vs_best']['exact_match'][col]['arms'].values()))
    row.update(ci=[0.0, 0.0], verdict='equivalent')  # what the paired t gave for concordant pairs
    (src / 'summary.json').write_text(json.dumps(old), encoding='utf-8')
    fixed = ev.main([f'--rejudge={src}', f'--out_dir={tmp_path / "fixed"}'])['settings']
    assert fixed['vs_best'] == again['settings']['vs_best'] and fixed['rejudged']['source'] == str(src)
    assert not any(r['ci'][0] == r['ci'][1] for c in fixed['vs_best']['exact_match'].values()
                   for r in c['arms'].values())
    assert (tmp_path / 'fixed' / 'summary.md').read_text(encoding='utf-8').startswith('# Loss by position')
    r = subprocess.run([sys.executable, 'eval.py', f'--rejudge={tmp_path / "none"}', f'--out_dir={tmp_path / "x"}'],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and 'summary.json' in r.stderr
    assert not (tmp_path / 'x').exists()


def test_self_crop_pairs_every_arm_with_its_own_window(lab, tmp_path):
    """--self_crop=sliding: each fine-tune held to its fine-tune length (64 = T here: the same computation, so
    'equivalent (identical)') and to L, a zero-shot scaling to L; not the base (the crop control is its crop) nor a
    dynamic arm; settings.vs_self pairs each with its own arm and summary.md has the table. A bad form is one line
    naming the setting."""
    s = ev.main([f'--ckpt={lab["base"]},{lab["ft"]}', '--rope_types=default,linear,dynamic', f'--eval_len={T}',
                 '--num_windows=4',
                 '--entropy_windows=1', '--retrieval_examples=0', '--self_crop=sliding', '--device=cpu',
                 '--progress=False', f'--out_dir={tmp_path / "self"}', '--plot=False'])
    names = [a['name'] for a in s['arms']]
    base = next(a['name'] for a in s['arms'] if a['kind'] == 'base')
    tuned = [a['name'] for a in s['arms'] if a['kind'] == 'fine-tuned' and not a.get('self_crop_of')]
    assert f"{base} held to {L} (sliding)" not in names and len(tuned) == 2
    assert 'linear s=4 zero-shot held to 16 (sliding)' in names and not any('dynamic zero-shot held' in n for n in names)
    for t in tuned:
        assert f"{t} held to {L} (sliding)" in names and f"{t} held to {T} (sliding)" in names
    rows = {r['name']: r for c in s['settings']['vs_self']['loss'].values() for r in c if r['name'].endswith(f'{T} (sliding)')}
    assert rows and all(r['identical'] and r['verdict'] == 'equivalent' for r in rows.values())
    past = [c for c in s['settings']['vs_self']['loss'] if int(c.split('-')[0]) >= L]
    held = [r for c in past for r in s['settings']['vs_self']['loss'][c] if r['name'].endswith(f'{L} (sliding)')]
    assert held and not any(r['identical'] for r in held)  # past L the crop to L sees less
    assert 'against its own crop' in (tmp_path / 'self' / 'summary.md').read_text(encoding='utf-8')
    assert s['settings']['vs_crop'] == {}  # a self crop is not the crop control
    with pytest.raises(ValueError, match='self_crop'):
        ev.main([f'--ckpt={lab["base"]}', '--self_crop=window', f'--out_dir={tmp_path / "bad"}'])
    assert not (tmp_path / 'bad').exists()


def test_exclude_draws_a_test_split_that_shares_no_token_with_the_dev_eval(lab, tmp_path):
    """--exclude=<dev eval>: every loss and retrieval window of this eval lies outside every window of the dev eval
    (theirs T + 1 tokens, ours too), the settings name the dev eval; another split is refused in one line."""
    dev = lab['summary']['settings']
    s = ev.main([f'--ckpt={lab["base"]}', f'--eval_len={T}', '--num_windows=24', '--retrieval_examples=12',
                 '--retrieval_len=6', '--retrieval_pos=2', '--entropy_windows=1', '--grid=2', f'--exclude={lab["out"]}',
                 '--seed=7', '--device=cpu', '--progress=False', f'--out_dir={tmp_path / "test"}',
                 '--plot=False'])['settings']
    taken = [(w, w + dev['T'] + 1) for w in dev['windows'] + dev['retrieval']['windows']]
    mine = [(w, w + s['T'] + 1) for w in s['windows'] + s['retrieval']['windows']]
    assert len(mine) == 36 and s['excluded'] == lab['out']
    assert not any(a < d and c < b for a, b in mine for c, d in taken)  # no overlap with any dev window
    other = json.loads(open(os.path.join(lab['out'], 'summary.json'), encoding='utf-8').read())
    other['settings']['split'] = 'train'
    bad = tmp_path / 'train.json'
    bad.write_text(json.dumps(other), encoding='utf-8')
    with pytest.raises(ValueError, match="split 'train'"):
        ev.main([f'--ckpt={lab["base"]}', f'--eval_len={T}', f'--exclude={bad}', f'--out_dir={tmp_path / "x"}'])
    assert not (tmp_path / 'x').exists()


def test_merge_of_parts_equals_the_eval_run_at_once(lab, tmp_path):
    """--merge: one eval measured in two parts (other arms, the same windows) gives the summary of the eval run at
    once: the same arms, CSV columns and comparisons, with a contrast across the parts. The same folder twice, an arm
    in both parts, or a part of another eval is refused in one line, and nothing is written."""
    common = [f'--base={lab["base"]}', f'--eval_len={T}', '--num_windows=4', '--retrieval_examples=4',
              '--retrieval_len=4', '--retrieval_cue=2', '--retrieval_pos=2',
              '--entropy_windows=1', '--device=cpu', '--progress=False', '--plot=False', '--workers=1']
    pair = '--contrasts=linear s=4 zero-shot | dynamic zero-shot'
    whole = ev.main(common + ['--rope_types=default,crop:form=sliding,linear,dynamic', pair,
                              f'--out_dir={tmp_path / "whole"}'])
    for name, types in (('a', 'default,crop:form=sliding'), ('b', 'linear,dynamic')):
        ev.main(common + [f'--rope_types={types}', f'--out_dir={tmp_path / name}'])
    merged = ev.main([f'--merge={tmp_path / "a"},{tmp_path / "b"}', pair, f'--out_dir={tmp_path / "m"}',
                      '--plot=False'])
    whole, stored = (json.loads((tmp_path / d / 'summary.json').read_text(encoding='utf-8')) for d in ('whole', 'm'))
    assert [a['name'] for a in merged['arms']] == [a['name'] for a in whole['arms']]
    assert stored['arms'] == whole['arms']  # as written (7 significant digits)
    for key in ('vs_best', 'contrasts', 'vs_crop', 'design', 'windows'):
        assert stored['settings'][key] == whole['settings'][key], key
    assert merged['settings']['contrasts']['loss'] and [p['folder'] for p in merged['settings']['merged']] == \
        [str(tmp_path / 'a'), str(tmp_path / 'b')]
    for f in ('position_loss.csv', 'attention_entropy.csv', 'retrieval.csv'):
        assert (tmp_path / 'm' / f).read_text(encoding='utf-8') == (tmp_path / 'whole' / f).read_text(encoding='utf-8')
    again = ev.main([f'--merge={tmp_path / "a"},{tmp_path / "b"}', f'--out_dir={tmp_path / "m2"}', '--plot=False'])
    assert again['settings']['contrasts'] is None  # no part named one: only the column's best and the crop
    dyn = [a for a in stored['arms'] if a['dynamic']][0]['scoring']  # its entropy past L: one forward per grid point
    for grid in (2, 3):  # a part with another --grid merges; each moving arm records how its entropy was sampled
        ev.main(common + ['--rope_types=dynamic', f'--grid={grid}', f'--out_dir={tmp_path / f"g{grid}"}'])
    got = ev.main([f'--merge={tmp_path / "a"},{tmp_path / "g2"}', f'--out_dir={tmp_path / "mg"}', '--plot=False'])
    n = [a for a in got['arms'] if a['dynamic']][0]['scoring']['entropy_positions']
    assert n < [a for a in ev.main([f'--merge={tmp_path / "a"},{tmp_path / "g3"}', f'--out_dir={tmp_path / "mg3"}',
                                    '--plot=False'])['arms'] if a['dynamic']][0]['scoring']['entropy_positions']
    assert 0 < n < dyn['entropy_positions'] and 'entropy_positions' not in stored['arms'][0]['scoring']
    ev.main(common + ['--rope_types=ntk', '--num_windows=3', f'--out_dir={tmp_path / "other"}'])
    for parts, words in ((f'{tmp_path / "a"},{tmp_path / "a"}', 'two or more different'),
                         (f'{tmp_path / "a"},{tmp_path / "whole"}', "arm 'base (L=16)' is in both"),
                         (f'{tmp_path / "a"},{tmp_path / "other"}', 'another num_windows')):
        with pytest.raises(ValueError, match=re.escape(words)):
            ev.main([f'--merge={parts}', f'--out_dir={tmp_path / "no"}'])
        assert not (tmp_path / 'no').exists()


def test_merge_names_the_commits_of_its_parts_and_a_changed_tree(lab, tmp_path):
    """--merge joined parts made at different commits, or from a tree with uncommitted changes, without a word in
    summary.md. Now summary.json keeps each part's provenance (command, commit, changed) and summary.md names each
    part's commit and says that the parts come from different commits and a changed tree; parts of one clean commit
    say so too."""
    from badinput import edit_json
    common = [f'--base={lab["base"]}', f'--eval_len={T}', '--num_windows=2', '--retrieval_examples=0',
              '--entropy_windows=1', '--device=cpu', '--progress=False', '--plot=False', '--workers=1']
    for name, types in (('a', 'default'), ('b', 'linear')):
        ev.main(common + [f'--rope_types={types}', f'--out_dir={tmp_path / name}'])

    def merged(commits, changed):
        for name, commit, ch in zip('ab', commits, changed):
            edit_json(tmp_path / name / 'summary.json', lambda s: s['settings']['provenance'].update(commit=commit,
                                                                                                       changed=ch))
        out = tmp_path / f'm{commits[1][0]}{changed[1]}'
        ev.main([f'--merge={tmp_path / "a"},{tmp_path / "b"}', f'--out_dir={out}', '--plot=False'])
        stored = json.loads((out / 'summary.json').read_text(encoding='utf-8'))['settings']['merged']
        return stored, (out / 'summary.md').read_text(encoding='utf-8')
    stored, md = merged(['1' * 40, '2' * 40], [False, True])
    assert [(p['provenance']['commit'], p['provenance']['changed']) for p in stored] == [('1' * 40, False),
                                                                                         ('2' * 40, True)]
    assert all(p['provenance']['command'].startswith('python eval.py ') for p in stored)
    line = next(ln for ln in md.splitlines() if ln.startswith('Merged from 2 parts'))
    assert f"{tmp_path / 'a'} at commit 1111111, {tmp_path / 'b'} at commit 2222222 (with uncommitted changes)" in line
    assert 'different commits and a changed tree' in line
    _, md = merged(['1' * 40, '1' * 40], [False, False])
    assert 'at commit 1111111; one commit, no tree changed.' in md


def test_combine_minus_gives_each_contrast_between_two_kinds_of_base(lab, tmp_path, capsys):
    """--combine_minus: two kinds of base (here copies of one eval, the second kind's base arm renamed as a sink base's
    is, and its linear arm's windows raised by 0.1 plus a per-pair offset) -> each contrast's difference between the
    kinds, pairs a random factor: -0.105 on average, better, with an interval as wide as the pairs disagree; the renamed
    base's rows meet the first kind's as 'base vs ...'; a missing pair or a lone --combine_minus is one line."""
    from badinput import check_refused
    one = tmp_path / 'a0'
    ev.main([f'--base={lab["base"]}', '--rope_types=default,crop:form=sliding,linear', f'--eval_len={T}',
             '--num_windows=4', '--retrieval_examples=0', '--entropy_windows=1', f'--out_dir={one}',
             '--contrasts=linear s=4 zero-shot | base (L=16)', '--device=cpu', '--progress=False', '--plot=False'])
    text = (one / 'summary.json').read_text(encoding='utf-8')
    for i, (kind, shift) in enumerate([('a', 0), ('a', 0), ('b', 0.1), ('b', 0.1), ('b', 0.1)]):
        s = json.loads(text.replace('base (L=16)', 'base sinks (L=16)') if kind == 'b' else text)
        for a in s['arms']:
            a['checkpoint'] += f'-{i}'
            if a['name'].startswith('linear') and shift:
                a['per_window'] = {c: (np.array(v) + shift + 0.002 * i).tolist() for c, v in a['per_window'].items()}
        os.makedirs(tmp_path / f'{kind}{i}', exist_ok=True)
        (tmp_path / f'{kind}{i}' / 'summary.json').write_text(json.dumps(s), encoding='utf-8')
    a, b = f"{tmp_path / 'a0'},{tmp_path / 'a1'}", f"{tmp_path / 'b2'},{tmp_path / 'b3'}"
    out = ev.main([f'--combine={a}', f'--combine_minus={b}', f'--out_dir={tmp_path / "kinds"}'])
    assert out['minus']['bases'] == [f"{lab['base']}-2", f"{lab['base']}-3"]
    for c, rows in out['between']['loss'].items():
        by = {r['name']: r for r in rows}
        assert list(by) == ['base', 'crop w=16 (sliding)', 'linear s=4 zero-shot', 'linear s=4 zero-shot vs base',
                            'base vs crop w=16 (sliding)', 'linear s=4 zero-shot vs crop w=16 (sliding)']
        for name in ('linear s=4 zero-shot', 'linear s=4 zero-shot vs crop w=16 (sliding)'):
            lin = by[name]  # the arm itself and its contrast with the crop move alike
            assert lin['diff'] == pytest.approx(-0.105, abs=1e-6) and lin['verdict'] == 'better'
            assert lin['firsts'][0] - lin['seconds'][0] == pytest.approx(-0.104, abs=1e-6)
            assert lin['ci'][0] < -0.105 < lin['ci'][1] and lin['ci'][1] - lin['ci'][0] > 0.002  # the pairs disagree
        assert by['base']['seconds'] == pytest.approx(by['base']['firsts'], abs=1e-9)  # the renamed base still meets
        assert by['base vs crop w=16 (sliding)']['diff'] == pytest.approx(0, abs=1e-9)
    md = (tmp_path / 'kinds' / 'bases.md').read_text(encoding='utf-8')
    assert '## Between the two kinds' in md and '| linear s=4 zero-shot vs crop w=16 (sliding) | -0.105 [' in md
    check_refused(ev.main, [f'--combine={a}', f"--combine_minus={b},{tmp_path / 'b4'}", f'--out_dir={tmp_path / "no"}'],
                  'one per combine folder', capsys, [tmp_path])
    check_refused(ev.main, [f'--combine_minus={b}', f'--out_dir={tmp_path / "no"}'], 'pairs with --combine', capsys,
                  [tmp_path])


def test_rejudge_and_combine_refuse_files_that_are_not_one_eval_per_base(lab, tmp_path, capsys):
    """--rejudge / --combine given a list, a summary without its fields, an eval without a base, the same folder twice
    or the same base's eval twice: one line naming the file or the folders (they ended in a traceback or, for the
    same base twice, were combined as two bases), nothing written."""
    from badinput import check_refused
    good, twin, bad = tmp_path / 'good', tmp_path / 'twin', tmp_path / 'bad'
    shutil.copytree(lab['out'], good)
    shutil.copytree(lab['out'], twin)
    bad.mkdir()
    out = tmp_path / 'out'
    s = json.loads((good / 'summary.json').read_text(encoding='utf-8'))
    for content, rejudged in (([1, 2], True), ({'settings': {}}, True),
                              (dict(s, arms=[a for a in s['arms'] if a['kind'] != 'base']), False)):
        (bad / 'summary.json').write_text(json.dumps(content), encoding='utf-8')
        words = [str(bad)] + (['not an eval summary'] if rejudged else ['no base arm'])
        check_refused(ev.main, [f'--combine={good},{bad}', f'--out_dir={out}'], words, capsys, [tmp_path])
        if rejudged:
            check_refused(ev.main, [f'--rejudge={bad}', f'--out_dir={out}'], words, capsys, [tmp_path])
    check_refused(ev.main, [f'--combine={good},{good}', f'--out_dir={out}'], 'names a folder twice', capsys, [tmp_path])
    check_refused(ev.main, [f'--combine={good},{twin}', f'--out_dir={out}'], ['the same base', lab['base']], capsys,
                  [tmp_path])
