"""train.py: configuration, data windows, the loop lowers the loss, resume is exact, torchrun/DDP agrees."""
import json
import os
import re

import numpy as np
import pytest
import torch

from conftest import run, tiny_cfg
from data.common import load_meta
from data.checkpoints import load_checkpoint
from configurator import ConfigError
from data.common import DataError, doc_windows
from lab.engine.checks import check_settings
from train import DEFAULTS, batch_function, get_config, get_lr, train


def test_get_config_layers(tmp_path):
    conf = tmp_path / 'c.py'
    conf.write_text("batch_size = 7\nlearning_rate = 1e-2\n_private = 3\n")
    cfg = get_config([str(conf), '--batch_size=9', '--out_dir=somewhere', '--learning_rate=1'], DEFAULTS)
    assert cfg['batch_size'] == 9 and cfg['out_dir'] == 'somewhere'
    assert cfg['learning_rate'] == 1.0 and isinstance(cfg['learning_rate'], float)  # int accepted for float
    with pytest.raises(ConfigError, match='bach_size'):
        get_config(['--bach_size=3'], DEFAULTS)
    with pytest.raises(ConfigError, match='batch_size'):
        get_config(['--batch_size=big'], DEFAULTS)
    with pytest.raises(ConfigError, match='does not exist'):
        get_config([str(tmp_path / 'missing.py')], DEFAULTS)


def test_lr_schedule():
    cfg = dict(DEFAULTS, learning_rate=1.0, min_lr=0.1, warmup_iters=10, lr_decay_iters=110)
    assert get_lr(0, cfg) == pytest.approx(1 / 11)
    assert get_lr(10, cfg) == pytest.approx(1.0)
    assert get_lr(60, cfg) == pytest.approx(0.55)      # halfway down the cosine
    assert get_lr(500, cfg) == pytest.approx(0.1)
    assert get_lr(60, dict(cfg, decay_lr=False)) == 1.0


def test_doc_windows_inside_documents_and_fixed(char_data):
    docs = load_meta(char_data)['docs']['val'] + [['extra', 100000, 100050]]
    starts = doc_windows(docs, 100, 50, seed=3)
    assert starts == doc_windows(docs, 100, 50, seed=3) and starts != doc_windows(docs, 100, 50, seed=4)
    for s in starts:
        assert any(a <= s and s + 100 <= b for _, a, b in docs)
    with pytest.raises(DataError, match='longer than'):
        doc_windows(docs, 10 ** 6, 4, seed=0)


def test_training_lowers_loss_and_logs(char_data, tmp_path):
    row = train(tiny_cfg(char_data, tmp_path, max_iters=30, eval_interval=15))
    rows = [json.loads(l) for l in open(tmp_path / 'log.jsonl')]
    assert [r['iter'] for r in rows] == [0, 15, 30] and rows[-1] == row
    assert rows[-1]['val_loss'] < rows[0]['val_loss'] - 0.5  # from ~ln(68) = 4.2 down
    assert rows[0]['val_loss'] == pytest.approx(np.log(68), abs=0.3)
    ck = load_checkpoint(str(tmp_path))
    assert ck['iter_num'] == 30 and ck['model_args']['pos_emb'] == 'rope'
    assert ck['lineage']['train_len'] == 32 and ck['dataset']['vocab_size'] == 68


def test_resume_continues_exactly(char_data, tmp_path):
    """20 steps in one go == 10 steps, save, resume for 10 more: same weights, same iteration, same log."""
    full = tiny_cfg(char_data, tmp_path / 'full', max_iters=20, eval_interval=10, dropout=0.1)
    train(full)
    half = tiny_cfg(char_data, tmp_path / 'half', max_iters=10, eval_interval=10, dropout=0.1, lr_decay_iters=200)
    train(half)
    train(dict(half, max_iters=20, init_from='resume'))
    a, b = load_checkpoint(str(tmp_path / 'full')), load_checkpoint(str(tmp_path / 'half'))
    assert a['iter_num'] == b['iter_num'] == 20
    assert all(torch.equal(a['model'][k], b['model'][k]) for k in a['model'])
    assert [r['val_loss'] for r in a['log']] == [r['val_loss'] for r in b['log']]


def test_refuses_to_overwrite_a_run(char_data, tiny_run):
    before = open(os.path.join(tiny_run, 'ckpt.pt'), 'rb').read()
    with pytest.raises(ConfigError, match='already holds a run'):
        train(tiny_cfg(char_data, tiny_run, max_iters=1))
    assert open(os.path.join(tiny_run, 'ckpt.pt'), 'rb').read() == before


def test_bench_prints_tokens_per_second(char_data):
    p = run(['train.py', f'--dataset={char_data}', '--bench=True', '--max_iters=6', '--block_size=32',
             '--batch_size=4', '--n_layer=1', '--n_embd=32', '--progress=False'])
    assert p.returncode == 0, p.stderr
    line = [l for l in p.stdout.splitlines() if l.startswith('bench:')][0]
    assert 'tokens/s' in line and 'MFU n/a' in line  # no invented peak on CPU


# 2 gloo processes x 1 micro-batch == 1 process x 2 micro-batches: a tiny model, a few steps on the CPU
DDP = ['--max_iters=4', '--eval_interval=4', '--eval_iters=2', '--batch_size=4', '--gradient_accumulation_steps=2',
       '--device=cpu', '--progress=False', '--learning_rate=1e-2', '--warmup_iters=0']
TINY_MODEL = ['--block_size=32', '--n_layer=1', '--n_head=2', '--n_embd=32']


def torchrun(script, *args):
    """script under `torchrun --standalone --nproc_per_node=2` (gloo on the CPU, one thread per process)."""
    return run(['-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=2', script, *args],
               env=dict(os.environ, OMP_NUM_THREADS='1'), timeout=240)


def assert_same_weights(a, b, atol=1e-5):
    for k in a['model']:
        assert torch.allclose(a['model'][k], b['model'][k], atol=atol), k


def test_torchrun_two_processes_match_single_process(char_data, tmp_path):
    """2 gloo processes x 1 micro-batch == 1 process x 2 micro-batches (same data, same update)."""
    common = [f'--dataset={char_data}', *DDP, *TINY_MODEL]
    single = run(['train.py', *common, f'--out_dir={tmp_path / "single"}'])
    assert single.returncode == 0, single.stderr
    ddp = torchrun('train.py', *common, f'--out_dir={tmp_path / "ddp"}')
    assert ddp.returncode == 0, ddp.stderr[-2000:]
    a, b = load_checkpoint(str(tmp_path / 'single')), load_checkpoint(str(tmp_path / 'ddp'))
    assert a['iter_num'] == b['iter_num'] == 4
    assert a['log'][-1]['val_loss'] < a['log'][0]['val_loss']  # it did train
    assert_same_weights(a, b)


def test_logged_tokens_per_second_is_the_rate_since_the_last_log(monkeypatch):
    """Regression: with the bar disabled (progress=False) the rate used to grow with every log interval."""
    import train as train_mod
    from tqdm import tqdm
    now = iter([102.0, 104.0, 106.0])
    monkeypatch.setattr(train_mod.time, 'time', lambda: next(now))
    clock, bar = dict(t=100.0, iter=0, tok_s=0.0, loss=None), tqdm(total=30, disable=True)
    rates = []
    for it in (10, 20, 30):  # 10 steps of 1000 tokens every 2 s
        train_mod.log_step(clock, it, 1.5, 1000, bar, 1e-3)
        rates.append(clock['tok_s'])
    assert rates == [5000.0, 5000.0, 5000.0] and clock['loss'] == 1.5


def test_number_formats_say_what_runs():
    from lab.engine.device import autocast_context
    dtype, ctx = autocast_context('cpu', 'bfloat16', training=True)  # runs bf16 on the CPU, as printed
    with ctx:
        assert dtype == 'bfloat16' and (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    assert autocast_context('cpu', 'auto')[0] == 'float32'
    with pytest.raises(ConfigError, match='float16 would train without loss scaling'):
        autocast_context('cuda', 'float16', training=True)
    with pytest.raises(ConfigError, match='float16 runs on CUDA only'):
        autocast_context('cpu', 'float16')


def test_resume_reads_the_checkpoint_once(char_data, tmp_path, monkeypatch):
    import train as train_mod
    cfg = tiny_cfg(char_data, tmp_path / 'run', max_iters=4, eval_interval=2)
    train(cfg)
    calls = []
    real = train_mod.load_checkpoint
    monkeypatch.setattr(train_mod, 'load_checkpoint', lambda *a, **k: calls.append(a) or real(*a, **k))
    train_mod.main([f'--out_dir={tmp_path / "run"}', '--init_from=resume', '--max_iters=6'])
    assert len(calls) == 1 and load_checkpoint(str(tmp_path / 'run'))['iter_num'] == 6


def test_insert_repeats_spans_copies_reproducible_and_identity():
    from lab.copy_mix import insert_repeats
    w = torch.randint(0, 5, (200, 41))  # "text" of ids 0..4; the strings draw from 0..67 except eot 3
    out = insert_repeats(w, torch.Generator().manual_seed(0), 0.5, 4, 9, 68, exclude=3)
    assert out.shape == w.shape and torch.equal(out, insert_repeats(w, torch.Generator().manual_seed(0), 0.5, 4, 9, 68, 3))
    assert not torch.equal(out, insert_repeats(w, torch.Generator().manual_seed(1), 0.5, 4, 9, 68, 3))
    changed = (out != w).any(1)
    assert 70 < changed.sum() < 130  # about half the windows
    g = torch.Generator().manual_seed(0)
    torch.rand(200, generator=g)
    for i in range(200):  # replay the draws: both copies inside the window, the second equals the first
        if not changed[i]:
            continue
        draw = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=g))
        k = draw(4, 9)
        d = draw(k, 41 - k)
        s = draw(0, 41 - k - d)
        key = torch.tensor([t for t in range(68) if t != 3])[torch.randint(67, (k,), generator=g)]
        assert 4 <= k <= 9 and k <= d and s + d + k <= 41
        assert torch.equal(out[i, s:s + k], key) and torch.equal(out[i, s + d:s + d + k], key) and not (key == 3).any()
        rest = torch.ones(41, dtype=torch.bool)
        rest[s:s + k] = rest[s + d:s + d + k] = False
        assert torch.equal(out[i, rest], w[i, rest])  # the text around them is untouched
    g = torch.Generator().manual_seed(0)
    assert insert_repeats(w, g, 0.0, 4, 9, 68) is w and torch.equal(g.get_state(), torch.Generator().manual_seed(0).get_state())
    with pytest.raises(ValueError, match='fit twice'):  # lab/copy_mix.py raises ValueError (a DataError before)
        insert_repeats(w, g, 0.5, 4, 21, 68)


def test_insert_repeats_max_distance_caps_every_copy():
    """copy_max_distance: every second copy starts at most that far after the first (found by matching the keys), the
    uncapped draw reaches past it on the same windows, and a cap below the longest span is refused."""
    from lab.copy_mix import insert_repeats
    w = torch.full((400, 201), 3, dtype=torch.long)  # a constant text (token 3 = excluded), so every copy is visible
    dists = {}
    for cap in (0, 40):
        out = insert_repeats(w, torch.Generator().manual_seed(5), 1.0, 8, 8, 68, exclude=3, max_distance=cap)
        d = []
        for row in out:
            changed = (row != 3).nonzero().flatten().tolist()
            first, second = changed[:8], changed[8:16]
            assert len(changed) == 16 and torch.equal(row[first], row[second])
            d.append(second[0] - first[0])
        dists[cap] = d
    assert min(dists[40]) >= 8 and max(dists[40]) == 40 and max(dists[0]) > 150
    with pytest.raises(ValueError, match='copy_max_distance=6'):
        insert_repeats(w, torch.Generator().manual_seed(5), 1.0, 4, 8, 68, exclude=3, max_distance=6)


def test_word_needle_records_write_the_rooms_format_and_split_the_copy_windows(char_data):
    """copy_words (lab/copy_mix.py): a share of the copy windows carries 4 records ' <word> is <digits>' (training
    words of 5 letters, the first digits distinct) at non-overlapping places and one of them written again after all
    four, as lab.measure.ruler's word-needle room writes them; one draw splits the copy windows between records and
    strings (about 25% / 25% / 50% untouched at share 0.5 and words 0.5); copy_words=0 draws exactly what it drew
    before; out-of-range settings and windows too short for the records are one line."""
    from lab import copy_mix
    from lab.engine.batches import add_records
    from lab.measure.ruler import decode, encode, play_words
    meta, train_ids = load_meta(char_data), np.fromfile(os.path.join(char_data, 'train.bin'), dtype=np.uint16)
    cfg = dict(copy_share=0.5, copy_fixed_iters=0, copy_span_lo=8, copy_span_hi=32, copy_words=0.5)
    with pytest.raises(ValueError, match=r'>= 4 digit tokens in the vocabulary \(it has 2\)'):  # the fixture's text
        add_records(copy_mix.settings(cfg, meta, 128), meta, train_ids, 128)
    words = torch.from_numpy(play_words(train_ids, meta, 6))  # its words; ten capitals stand in for the digits
    m = dict(copy_mix.settings(cfg, meta, 128), records=dict(words=words, digits=torch.tensor(encode(
        meta, 'ABCDEFGHIJ')), mid=encode(meta, ' is '), value_len=5))
    space, = encode(meta, ' ')
    w = torch.full((400, 129), space, dtype=torch.long)  # a text of spaces, so every record is visible
    out = copy_mix.mix(w, torch.Generator().manual_seed(3), m, 10)
    kinds = {'records': 0, 'strings': 0, 'text': 0}
    for row in out:
        text = decode(meta, row.tolist())
        recs = re.findall(r' ([a-z]{5}) is ([A-J]{5})', text)
        if recs:
            assert len(recs) == 5 and recs[-1] in recs[:4] and len({k for k, _ in recs[:4]}) == 4
            assert len({v[0] for _, v in recs[:4]}) == 4  # the first digit names the record
            kinds['records'] += 1
        else:
            kinds['strings' if (row != space).any() else 'text'] += 1
    assert 70 < kinds['records'] < 130 and 70 < kinds['strings'] < 130 and 160 < kinds['text'] < 240, kinds
    plain = copy_mix.settings(dict(cfg, copy_words=0), meta, 128)
    assert torch.equal(copy_mix.mix(w, torch.Generator().manual_seed(3), plain, 10),
                       copy_mix.insert_repeats(w, torch.Generator().manual_seed(3), 0.5, 8, 32, meta['vocab_size'],
                                               meta['eot_token']))
    for bad, said in ((dict(cfg, copy_words=1.5), 'copy_words=1.5'), (dict(cfg, copy_share=0.0), 'copy_share > 0'),
                      (dict(cfg, copy_max_distance=40), 'copy_max_distance=40 would not hold')):
        with pytest.raises(ValueError, match=re.escape(said)):
            copy_mix.settings(bad, meta, 128)
    with pytest.raises(ValueError, match='need windows of 75 tokens, these are 33'):
        copy_mix.insert_records(w[:, :33], torch.Generator(), [0], **m['records'])


def plain_step(data, T, B, gen, n_micro):
    """One step of train.py's own batches (nanoGPT's random windows: no PoSE, no copies) from the generator gen."""
    cfg = dict(DEFAULTS, block_size=T, batch_size=B, gradient_accumulation_steps=n_micro)
    return batch_function(cfg, None, data, T, gen, 'cpu')[0](0)


def seeded(seed):
    return torch.Generator().manual_seed(seed)


def test_copy_mix_in_batches_share_zero_unchanged(char_data):
    from lab.engine.batches import Batches
    from lab.copy_mix import settings
    copy_mix = lambda cfg, meta: settings(cfg, meta, cfg['block_size'])  # the window trained: block_size here
    meta, data = load_meta(char_data), np.arange(5000, dtype=np.uint16) % 60
    plain = plain_step(data, 32, 4, seeded(7), 2)
    off = Batches(data, 32, 4, seeded(7), 'cpu', copy=copy_mix(dict(DEFAULTS, block_size=32), meta)).step(2)
    assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b, _), (c, d, _) in zip(plain, off))
    mix = copy_mix(dict(DEFAULTS, block_size=32, copy_share=1.0, copy_span_lo=4, copy_span_hi=8), meta)
    on, again = Batches(data, 32, 4, seeded(7), 'cpu', copy=mix).step(2), Batches(data, 32, 4, seeded(7), 'cpu', copy=mix).step(2)
    for (x, y, _), (x2, y2, _), (px, _, _) in zip(on, again, plain):
        assert torch.equal(x, x2) and torch.equal(y, y2) and torch.equal(x[:, 1:], y[:, :-1])
        assert (x != px).any(1).all()  # every window got its string (share 1), same text windows underneath
    with pytest.raises(ValueError, match='copy_span_hi'):  # lab.copy_mix.settings raises ValueError
        copy_mix(dict(DEFAULTS, block_size=32, copy_share=0.5, copy_span_hi=20), meta)


def test_copy_fixed_iters_warm_up_then_the_mix(char_data):
    from lab.engine.batches import Batches
    from lab.copy_mix import settings
    meta, data = load_meta(char_data), np.arange(5000, dtype=np.uint16) % 60
    mix = settings(dict(DEFAULTS, block_size=32, copy_fixed_iters=2, copy_span_hi=16), meta, 32)  # warm-up only, then plain text
    b = Batches(data, 32, 4, seeded(7), 'cpu', copy=mix)
    x, y, _ = b.step(1, it=1)[0]
    w = torch.cat([x, y[:, -1:]], 1)  # the 33 tokens: a 16-token string twice at offset 16 or 17
    assert all(torch.equal(r[:16], r[16:32]) or torch.equal(r[1:17], r[17:33]) or torch.equal(r[:16], r[17:33]) for r in w)
    plain = seeded(0)
    plain.set_state(b.gen.get_state())
    assert all(torch.equal(p, q) for p, q in zip(b.step(1, it=2)[0][:2], plain_step(data, 32, 4, plain, 1)[0][:2]))  # share 0 after the warm-up


def test_a_text_setting_takes_the_text_as_typed():
    import finetune_long
    assert get_config(['--seeds=1337', '--rope_type=yarn'], finetune_long.DEFAULTS)['seeds'] == '1337'
    assert get_config(['--out_dir=2024'], DEFAULTS)['out_dir'] == '2024'
    assert get_config(['--max_iters=7'], DEFAULTS)['max_iters'] == 7


def test_a_bare_flag_says_how_to_write_it():
    with pytest.raises(ConfigError, match=r'--out_dir should look like --key=value, e\.g\. --out_dir=<value>'):
        get_config(['--out_dir'], DEFAULTS)
    with pytest.raises(ConfigError, match=r'--compile=True'):
        get_config(['--compile'], DEFAULTS)


# ----------------------------------------------------------------------------- found in the restructure (each failed
# on the code before it, commit 6c97447)

def test_a_config_file_runs_in_one_namespace(tmp_path):
    """A comprehension in a config file sees the file's own variables, as in a module (exec with separate globals
    and locals hid them: NameError, 'config file ... does not run')."""
    import finetune_long
    conf = tmp_path / 'seeds.py'
    conf.write_text("_first = 1337\n_n = 3\nseeds = ','.join([str(_first + i) for i in range(_n)])\n"
                    "rope_type = ','.join(t for t in ('linear', 'yarn') if len(t) > _n)\n")
    cfg = get_config([str(conf)], finetune_long.DEFAULTS)
    assert cfg['seeds'] == '1337,1338,1339' and cfg['rope_type'] == 'linear,yarn'
    # a helper without the leading underscore is still taken for a setting, and named
    conf.write_text("first = 1337\nseeds = ','.join([str(first + i) for i in range(3)])\n")
    with pytest.raises(ConfigError, match="unknown setting 'first'"):
        get_config([str(conf)], finetune_long.DEFAULTS)


def test_a_config_file_may_import_and_define_helpers(tmp_path):
    """Modules and functions in a config file are tools of the file, not settings (they were 'unknown settings')."""
    conf = tmp_path / 'helpers.py'
    conf.write_text("import math\n\ndef width(layers):\n    return 32 * layers\n\n"
                    "n_layer = 2\nn_embd = width(n_layer)\nlearning_rate = math.sqrt(1e-6)\n")
    cfg = get_config([str(conf)], DEFAULTS)
    assert cfg['n_layer'] == 2 and cfg['n_embd'] == 64 and cfg['learning_rate'] == pytest.approx(1e-3)
    assert 'math' not in cfg and 'width' not in cfg


def test_the_first_log_line_has_no_train_none_and_the_dtype_is_printed(char_data, tmp_path, capsys):
    """The iter-0 line has no training loss yet: 'iter 0: val ...' (it printed 'train None'); a start line says
    what runs: parameters, T, device and the number format actually used."""
    capsys.readouterr()
    train(dict(tiny_cfg(char_data, tmp_path, max_iters=2, eval_interval=2), n_layer=1, n_embd=32))
    lines = capsys.readouterr().out.splitlines()
    iters = [l for l in lines if l.startswith('iter ')]
    assert iters[0].startswith('iter 0: val ') and 'None' not in iters[0]
    assert iters[-1].startswith('iter 2: train ')
    start = [l for l in lines if 'dtype=' in l]
    assert len(start) == 1 and lines.index(start[0]) < lines.index(iters[0])
    assert 'M params' in start[0] and 'T=32' in start[0] and 'device=cpu' in start[0] and 'dtype=float32' in start[0]


def test_check_settings_world_size_must_divide_accumulation():
    cfg = dict(DEFAULTS, gradient_accumulation_steps=4, out_dir="nowhere")
    check_settings(cfg, world=2)
    with pytest.raises(ConfigError, match='gradient_accumulation_steps=4 is not divisible by the 3 processes'):
        check_settings(cfg, world=3)
