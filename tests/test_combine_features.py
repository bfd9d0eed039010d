"""Issue 45, features that combine honestly: an arm's own crop is built by the arm's own code (its temperature, its
attention class), so the two differ only by the window; SSMax counts only the keys a crop leaves it, so on one layer
the two crop forms agree for every attention class; a zero-shot scaling or a fine-tune's rope type does not silently
replace a rope type trained into the base; a temperature aimed at no layer is refused like a rope scaling aimed at
none; --exclude refuses a dev eval of other data and a damaged file. Each test failed before its fix (see its
docstring); the models are tiny and randomly initialised unless an eval needs a checkpoint (trained 2 steps)."""
import json
import math
import os
from contextlib import nullcontext

import numpy as np
import pytest
import torch

import eval as ev
import lab.alibi, lab.gated, lab.sinks, lab.temperature  # noqa: E401,F401  register the lab's attention classes
from lab.measure import diagnostics
from badinput import FT, check_refused
from configurator import ConfigError
from lab.crop import self_crop_arms
from lab.measure.arms import plan_arms
from lab.measure.forms import arm_form
from lab.measure.scoring import scoring_plan
from lab.temperature import parse_temperature, with_temperature
from model import GPT, GPTConfig

V, T = 40, 16


def tiny(n_layer=4, sharpen=10.0, **kw):
    """A random GPT whose attention is sharp enough (q, k weights x sharpen) that a temperature moves its losses."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(**dict(dict(block_size=16, vocab_size=V, n_layer=n_layer, n_head=2, n_embd=32), **kw))).eval()
    with torch.no_grad():
        for block in m.transformer.h:
            if not hasattr(block.attn, 'c_attn'):  # (a conv layer, lab/conv.py: no attention to sharpen)
                continue
            block.attn.c_attn.weight.mul_(sharpen)
            if isinstance(getattr(block.attn, 'sink', None), torch.nn.Parameter):  # (Inkling's are per query)
                block.attn.sink.copy_(torch.tensor([1.5, -0.5]))  # a sink that takes a share of the attention
            if hasattr(block.attn, 'ssmax'):
                block.attn.ssmax.copy_(torch.tensor([[0.5], [0.9]]))
    return m


@pytest.fixture(scope='module')
def rows():
    return torch.randint(0, V, (3, T + 1), generator=torch.Generator().manual_seed(1))


def losses(model, arm, rows):
    """The arm's per-position losses [rows, T] as eval.py's measure_run scores them (its form's scorer)."""
    form = arm_form(model, arm, scoring_plan(model, T, 0), nullcontext(), 4)
    return np.stack(form.scorer(rows, [list(range(T))] * rows.size(0))[0])


# ------------------------------------------------------------------------- 1. an arm's own crop keeps its temperature


@pytest.mark.parametrize('spec', ['qtemp:shape=ssmax:s=0.5', 'qtemp:shape=logn', 'qtemp:shape=llama4:beta=0.5:floor=2'])
def test_a_self_crop_is_the_arm_held_to_its_window(spec, rows):
    """--self_crop on an arm with a query temperature (a fine-tune of L = 4 at 12, + qtemp): before, the truncated
    self-crop ran the untempered model (its losses inside the window were not the arm's: 0.02 to 0.3 nats off);
    now both forms run the arm's own temperature, so inside the window each equals the arm, and past it each differs."""
    model, w = tiny(), 12
    arm = dict(name='default ft10 + qtemp', kind='fine-tuned', L=4, seq_len=w, scaling=None,
               temperature=parse_temperature(spec))
    arms = [arm]
    self_crop_arms({'self_crop': 'both'}, arms)
    crops = {(a['crop']['window'], a['crop']['form']): a for a in arms[1:]}
    assert set(crops) == {(4, 'sliding'), (4, 'truncated'), (12, 'sliding'), (12, 'truncated')}
    own, plain = losses(model, arm, rows), losses(model, dict(arm, temperature=None), rows)
    assert np.abs(own[:, :w] - plain[:, :w]).max() > 1e-3  # the temperature matters inside the window
    for form in ('sliding', 'truncated'):
        held = losses(model, crops[(w, form)], rows)
        assert crops[(w, form)]['temperature'] == arm['temperature']
        assert np.abs(held[:, :w] - own[:, :w]).max() < 1e-6, form  # inside the window: the arm itself
        assert np.abs(held[:, w:] - own[:, w:]).max() > 1e-4, form  # past it: the window hides keys


def test_the_crop_control_takes_a_temperature_in_both_forms(tiny_bases, tmp_path):
    """'crop+qtemp:...' was refused for the truncated form ('the truncated crop has none'); both forms now run the
    temperature in a whole eval (loss, entropy, retrieval), each arm named for both features, and inside L both
    crops are the tempered base, position by position."""
    import csv
    s = ev.main([f'--base={tiny_bases["plain"]}', '--rope_types=qtemp:shape=ssmax:s=0.3,crop+qtemp:shape=ssmax:s=0.3',
                 *EVAL, '--retrieval_examples=2', '--retrieval_len=6', '--retrieval_pos=2', '--grid=2',
                 f'--out_dir={tmp_path / "e"}'])
    names = [a['name'] for a in s['arms']]
    assert names == ['qtemp ssmax s=0.3 zero-shot', 'crop w=16 (sliding) + qtemp ssmax s=0.3 zero-shot',
                     'crop w=16 (truncated) + qtemp ssmax s=0.3 zero-shot']
    rows = list(csv.DictReader(open(tmp_path / 'e' / 'position_loss.csv', encoding='utf-8')))
    curve = {n: np.array([float(r[n]) for r in rows]) for n in names}
    for n in names[1:]:
        assert np.abs(curve[n][:16] - curve[names[0]][:16]).max() < 1e-5, n
        assert np.abs(curve[n][16:] - curve[names[0]][16:]).max() > 1e-3, n


def test_the_truncated_crops_entropy_keeps_the_temperature(rows):
    """The attention-entropy diagnostic of a tempered truncated crop runs the temperature too: inside the window,
    the tempered arm's entropy."""
    from lab.measure.diagnostics import truncated_entropy
    from lab.measure.diagnostics import entropy_at
    model, w = tiny(), 12
    arm = dict(name='x', kind='zero-shot', L=4, seq_len=16, scaling=None,
               temperature=parse_temperature('qtemp:shape=ssmax:s=0.5'))
    plan = scoring_plan(model, T, 0)
    form = arm_form(model, dict(arm, crop={'window': w, 'form': 'truncated'}), plan, nullcontext(), 4)
    own = arm_form(model, arm, plan, nullcontext(), 4)
    ps = [0, 5, 11]
    got = truncated_entropy(model, rows[:, :T], ps, w, nullcontext(), 4, 256, form.crop_logits)
    want = entropy_at(model, rows[:, :T], ps, T, 256, nullcontext(), own.logits)[0]
    plain = entropy_at(model, rows[:, :T], ps, T, 256, nullcontext())[0]
    assert np.allclose(got[ps], want[ps], atol=1e-5) and np.abs(got[ps] - plain[ps]).max() > 1e-3


@pytest.mark.parametrize('kw', [{}, dict(attention='sinks'), dict(attention='ssmax'), dict(attention='gated'),
                                dict(pos_emb='alibi'), dict(n_kv_head=1), dict(layers='rope:w=5,nope')])
def test_attention_entropy_of_the_last_query_alone(kw):
    """last_only (one forward per moving-scale position) runs each layer's own attention and scores just the last
    query beside it: the full chunked path's last column, the rest NaN, for every attention class, under a dynamic
    scale too (the run's length sets it)."""
    m = tiny(n_layer=2, sharpen=1.0, **kw)
    for layer in m.transformer.h:  # learned parameters away from their zero / constant initial values
        for name in ('sink', 'ssmax'):
            if hasattr(layer.attn, name):
                getattr(layer.attn, name).data.uniform_(-1, 1)
    x = torch.randint(0, V, (2, 23))  # (past block_size: the dynamic scale moves)
    for sc in ([None, {'rope_type': 'dynamic', 'factor': 1.0, 'original_max_position_embeddings': 8}]
               if m.config.pos_emb == 'rope' else [None]):
        if sc:
            m.set_rope_scaling(sc)
        full, f_full = diagnostics.attention_entropy(m, x, chunk=7, first_key=True)
        last, f_last = diagnostics.attention_entropy(m, x, chunk=7, first_key=True, last_only=True)
        assert torch.allclose(last[..., -1], full[..., -1], atol=1e-5) and last[..., :-1].isnan().all()
        assert torch.allclose(f_last[..., -1], f_full[..., -1], atol=1e-5)
        assert (full[..., -1] > 0.1).all()  # (not the trivial one-key distribution)


# ----------------------------------------------------------------------------- 2. one layer: the two crop forms agree


ONE_LAYER = {  # one-layer models of every attention class the crop applies to (smeared keys excepted: a key there
    'causal': {}, 'sinks': dict(attention='sinks'),  # reads the token before it, one past a sliding window)
    'ssmax': dict(attention='ssmax'), 'alibi': dict(pos_emb='alibi'), 'nope': dict(pos_emb='none')}


@pytest.mark.parametrize('kind', list(ONE_LAYER) + ['qtemp ssmax', 'qtemp logn'])
def test_one_layer_crop_forms_agree_for_every_attention(kind, rows):
    """On one layer the sliding crop and the truncated crop see the same keys at the same distances, so they give the
    same loss (lab/crop.py's docstring). Before, SSMax under the sliding crop scaled by ln(p + 1), counting keys the
    crop hides (0.06 nats at w = 4); a query temperature was dropped by the truncated form."""
    w = 4
    model = tiny(n_layer=1, **ONE_LAYER.get(kind, {}))
    temp = parse_temperature(f"qtemp:shape={kind.split()[1]}") if kind.startswith('qtemp') else None
    arm = dict(name=kind, kind='zero-shot', L=4, seq_len=16, scaling=None, temperature=temp)
    slide, cut = (losses(model, dict(arm, crop={'window': w, 'form': f}), rows) for f in ('sliding', 'truncated'))
    assert np.abs(slide - cut).max() < 1e-5
    assert np.abs(slide[:, w:] - losses(model, arm, rows)[:, w:]).max() > 1e-3  # (the crop does hide keys)


def test_ssmax_under_a_crop_counts_the_keys_it_sees(rows):
    """The factor itself: under a sliding crop of w, SSMax's query at p multiplies by s ln(min(p + 1, w))."""
    from lab.crop import window_logits
    model = tiny(n_layer=1, attention='ssmax')
    attn, w = model.transformer.h[0].attn, 4
    q, k = (torch.randn(1, 2, T, 16, generator=torch.Generator().manual_seed(s)) for s in (2, 3))
    got = window_logits(model, w)(0, q, k, 0, T)
    n = torch.arange(1, T + 1).clamp(max=w).float()
    want = (q * (attn.ssmax * torch.log(n))[..., None]) @ k.transpose(-2, -1) / math.sqrt(16)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None]
    ok = (j <= i) & (j > i - w)
    assert torch.allclose(got[..., ok], want.expand_as(got)[..., ok], atol=1e-5)


# ----------------------------------------------------------------------------- checkpoints for the evals below


@pytest.fixture(scope='module')
def tiny_bases(char_data, tmp_path_factory):
    """Bases trained 2 steps at L = 16: plain RoPE, clipped RoPE and p-RoPE trained in, and a NoPE model."""
    from conftest import tiny_cfg
    from train import train
    root, out = tmp_path_factory.mktemp('combine'), {}
    for name, kw in (('plain', {}), ('clip', dict(rope_scaling={'rope_type': 'clip',
                                                                 'original_max_position_embeddings': 16})),
                     ('prope', dict(rope_scaling={'rope_type': 'proportional', 'partial_rotary_factor': 0.25})),
                     ('nope', dict(pos_emb='none'))):
        out[name] = str(root / name)
        train(dict(tiny_cfg(char_data, out[name], max_iters=2, eval_interval=2, **kw), block_size=16, eval_iters=1))
    return out


EVAL = ['--eval_len=64', '--num_windows=2', '--entropy_windows=1', '--retrieval_examples=0', '--depth_len=0',
        '--needles=0', '--recall_len=0', '--word_needles=0', '--mv_values=0', '--tracking=False', '--device=cpu',
        '--progress=False', '--workers=1', '--plot=False']


# ------------------------------------------------------------------------- 3. a trained-in rope type is not replaced


@pytest.mark.parametrize('base, entry', [('clip', 'linear'), ('clip', 'yarn:beta_fast=8'), ('prope', 'linear'),
                                         ('prope', 'proportional:partial_rotary_factor=0.5')])
def test_a_zero_shot_scaling_over_a_trained_in_rope_type_is_refused(tiny_bases, tmp_path, capsys, base, entry):
    """Before, 'linear' on a clipped or p-RoPE base made 'linear s=4 zero-shot': PI over every pair, the stopped ones
    turning again. Now refused in one line naming the base's type and the new one (nothing written)."""
    trained = {'clip': 'clip', 'prope': 'proportional'}[base]
    check_refused(ev.main, [f'--base={tiny_bases[base]}', f'--rope_types=default,{entry}', *EVAL,
                            f'--out_dir={tmp_path / "e"}'], [trained, entry.split(':')[0], 'default'], capsys,
                  [tmp_path, tiny_bases[base]])


def test_p_rope_takes_its_own_factor_and_the_trained_in_base_runs_as_trained(tiny_bases):
    """What the refusal points to: p-RoPE scaled with its own factor (PI on the pairs that turn, the stopped ones
    stay stopped), named so; 'default' is the base as trained."""
    arms = plan_arms(dict(ev.DEFAULTS, base=tiny_bases['prope'], eval_len=64,
                          rope_types='default,proportional:partial_rotary_factor=0.25'))[0]
    assert [a['name'] for a in arms] == ['base proportional p=0.25 (L=16)', 'proportional s=4 p=0.25 zero-shot']
    assert arms[1]['scaling']['partial_rotary_factor'] == 0.25 and arms[1]['scaling']['factor'] == 4.0


@pytest.mark.parametrize('args, new', [(['--rope_type=linear'], 'linear'), (['--rope_type=yarn', '--plain=True'],
                                                                            'default')])
def test_a_fine_tune_over_a_trained_in_rope_type_is_refused(tiny_bases, tmp_path, capsys, args, new):
    """finetune_long.py --rope_type=linear on a clipped base trained PI over every pair (its stopped ones turning);
    --plain=True unstopped them as 'default'. Now refused in one line, naming --rope_type=keep."""
    import finetune_long
    check_refused(finetune_long.main, [f'--init_from={tiny_bases["clip"]}', *args, f'--out_dir={tmp_path / "ft"}',
                                       *FT], ["'clip'", new, 'rope_type=keep'], capsys, [tmp_path, tiny_bases['clip']])


def test_a_retune_over_a_kept_trained_in_type_is_refused(tiny_bases, tmp_path, capsys):
    """A fine-tune of the clipped base that keeps its type (--rope_type=keep) retuned with YaRN ('arm | yarn') had
    its stopped pairs turn again under the name 'ft @ yarn' (a retune replaces the arm's scaling, and the arm did
    not say its type was the base's). Now refused in one line naming both types; a retune of a plain fine-tune runs."""
    import finetune_long
    ft = str(tmp_path / 'ft')
    finetune_long.main([f'--init_from={tiny_bases["clip"]}', '--rope_type=keep', '--block_size=32', f'--out_dir={ft}',
                        *FT])
    arms = plan_arms(dict(ev.DEFAULTS, ckpt=ft, eval_len=64))[0]
    assert arms[0]['scaling']['rope_type'] == 'clip'
    check_refused(ev.main, [f'--ckpt={ft}', f"--retune={arms[0]['name']} | yarn", *EVAL, f'--out_dir={tmp_path / "e"}'],
                  ["'clip'", "'yarn'", 'retune'], capsys, [tmp_path])
    plain = str(tmp_path / 'plain-ft')
    finetune_long.main([f'--init_from={tiny_bases["plain"]}', '--rope_type=linear', '--factor=2', '--block_size=32',
                        f'--out_dir={plain}', *FT])
    name = plan_arms(dict(ev.DEFAULTS, ckpt=plain, eval_len=64))[0][0]['name']
    got = plan_arms(dict(ev.DEFAULTS, ckpt=plain, eval_len=64, retune=f'{name} | yarn'))[0]
    assert [a['scaling']['rope_type'] for a in got] == ['linear', 'yarn']


# ----------------------------------------------------------------------------- 4. a temperature aimed at no layer


@pytest.mark.parametrize('base, spec, aim', [('plain', 'qtemp:shape=logn:layers=nope', 'nope'),
                                             ('nope', 'qtemp:shape=logn:layers=rope', 'rope')])
def test_a_temperature_aimed_at_no_layer_is_refused(tiny_bases, tmp_path, capsys, base, spec, aim):
    """'qtemp:...:layers=nope' on an all-RoPE model gave the base's numbers under a temperature's name; now refused
    in one line, as a rope scaling aimed at no layer is (rope_config.scaled_layers), on --rope_types and
    --temperature alike."""
    check_refused(ev.main, [f'--base={tiny_bases[base]}', f'--rope_types=default,{spec}', *EVAL,
                            f'--out_dir={tmp_path / "e"}'], [f"layers='{aim}'", 'aim it at'], capsys, [tmp_path])
    arm = plan_arms(dict(ev.DEFAULTS, base=tiny_bases[base], rope_types='default', eval_len=64))[0][0]
    with pytest.raises(ConfigError, match=f"layers='{aim}'"):
        with_temperature(dict(arm, kind='fine-tuned'), parse_temperature(spec))
    assert with_temperature(arm, parse_temperature('qtemp:shape=logn'))['temperature']['layers'] == 'all'


# ----------------------------------------------------------------------------- 5. --exclude of other data, or damaged


@pytest.fixture(scope='module')
def dev_summary(tiny_bases, tmp_path_factory):
    """A dev eval's summary.json of the plain base (its settings as eval.py writes them)."""
    out = tmp_path_factory.mktemp('dev') / 'eval'
    ev.main([f'--base={tiny_bases["plain"]}', '--rope_types=default', *EVAL, f'--out_dir={out}'])
    return json.loads((out / 'summary.json').read_text(encoding='utf-8'))


def edited(summary, change):
    s = json.loads(json.dumps(summary))
    change(s)
    return s


@pytest.mark.parametrize('change, names', [
    (lambda s: s['settings'].update(dataset='shakespeare_bpe'), ["dataset 'shakespeare_bpe'", 'exclude']),
    (lambda s: s['settings'].update(tokenizer='gpt2', vocab_size=50304), ["tokenizer 'gpt2'", 'exclude']),
    (lambda s: s['settings'].update(vocab_size=99), ['vocab_size 99', 'exclude']),
    (lambda s: s['settings'].update(window_docs=['no such play'] * len(s['settings']['windows'])),
     ["'no such play'", 'exclude']),
    (lambda s: s['settings'].update(split='train'), ["split 'train'", 'exclude'])])
def test_an_exclude_of_other_data_is_refused(tiny_bases, dev_summary, tmp_path, capsys, change, names):
    """--exclude took any summary: windows of another dataset, tokenizer or split source cut "tokens" out of this
    one's documents that mean nothing here. Now refused in one line naming the file and what differs."""
    bad = tmp_path / 'dev.json'
    bad.write_text(json.dumps(edited(dev_summary, change)), encoding='utf-8')
    check_refused(ev.main, [f'--base={tiny_bases["plain"]}', '--rope_types=default', *EVAL, f'--exclude={bad}',
                            f'--out_dir={tmp_path / "e"}'], [*names, str(bad)], capsys, [tmp_path])


@pytest.mark.parametrize('text', ['{not json', '[1, 2]', '{"arms": []}', '{"settings": []}',
                                  '{"settings": {"T": 64, "split": "val"}}',
                                  '{"settings": {"T": "64", "split": "val", "windows": [1]}}',
                                  '{"settings": {"T": 64, "split": "val", "windows": [1.5]}}'])
def test_a_damaged_exclude_file_is_refused(tiny_bases, dev_summary, tmp_path, capsys, text):
    """A file that is not a summary (not JSON, a list, no settings, missing or mistyped fields) ended in a traceback
    (TypeError, KeyError); now one line naming the file, exit 2, nothing written."""
    bad = tmp_path / 'dev.json'
    bad.write_text(text, encoding='utf-8')
    check_refused(ev.main, [f'--base={tiny_bases["plain"]}', '--rope_types=default', *EVAL, f'--exclude={bad}',
                            f'--out_dir={tmp_path / "e"}'], [str(bad)], capsys, [tmp_path])


def test_an_exclude_of_the_same_data_still_cuts_its_windows(tiny_bases, dev_summary, tmp_path):
    """The dev eval's own summary passes, and this eval's windows share no token with its windows."""
    path = tmp_path / 'dev.json'
    path.write_text(json.dumps(dev_summary), encoding='utf-8')
    cfg = dict(ev.DEFAULTS, base=tiny_bases['plain'], rope_types='default', eval_len=64, num_windows=2,
               retrieval_examples=0, entropy_windows=1, exclude=str(path), out_dir=str(tmp_path / 'e'))
    run = ev.prepare(cfg)
    n = dev_summary['settings']['T'] + 1
    assert not any(a < d + n and d < a + n for a in run['starts'] for d in dev_summary['settings']['windows'])
    assert not os.path.exists(tmp_path / 'e')


# ------------------------------------------------------------------------- resuming keeps the model it saved


@pytest.mark.parametrize('flag', ['--layers=rope,nope', '--n_head=4', "--rope_scaling={'rope_type': 'linear', "
                                  "'factor': 2.0}", '--attention=smear_keys_ssmax'])
def test_resume_refuses_a_model_setting_it_would_store_but_not_use(tiny_run, flag, capsys):
    """train.py --init_from=resume builds the checkpoint's model; a --layers (or another shape) on the command line
    was ignored yet stored in the resumed run's config. Now refused in one line, nothing written."""
    import train
    check_refused(train.main, ['--init_from=resume', f'--out_dir={tiny_run}', '--max_iters=400', flag],
                  [flag.split('=')[0], 'resumed run keeps the model'], capsys, [tiny_run])


def test_resume_refuses_a_checkpoint_whose_pattern_disagrees_with_its_own_config(tiny_run, tmp_path, capsys):
    """A checkpoint whose model was built with one --layers pattern but whose stored config names another (edited or
    damaged) resumed silently with the model's and stored the other; now one line naming the setting and the file."""
    import shutil
    import torch
    import train
    run = str(tmp_path / 'run')
    shutil.copytree(tiny_run, run)
    path = os.path.join(run, 'ckpt.pt')
    ckpt = torch.load(path, weights_only=True)
    ckpt['config']['layers'] = 'rope,nope'
    torch.save(ckpt, path)
    check_refused(train.main, ['--init_from=resume', f'--out_dir={run}', '--max_iters=400'],
                  ['layers=', 'inconsistent', 'ckpt.pt'], capsys, [run])


# ------------------------------------------------------------------------- numbers legal but wrong for the model


@pytest.mark.parametrize('spec, match', [
    ('qtemp:shape=drope:c=inf', 'c=inf must be a finite number > 0'),      # was accepted: NaN losses later
    ('qtemp:shape=ssmax:s=1e999', 's=1e999 must be a finite number > 0'),   # (float reads it as inf)
    ('qtemp:shape=drope:c=0.1:c=0.2', 'c is given twice'),                  # was: the last one kept
    ('qtemp:shape=drope:c=', 'a key has no value')])                        # was: a parse_value error on ''
def test_a_bad_temperature_constant_is_refused_in_one_line(spec, match):
    with pytest.raises(ValueError, match=match) as e:
        parse_temperature(spec)
    assert '\n' not in str(e.value)


def test_a_raised_base_below_the_models_base_is_refused():
    """abf with new_base = 5,000 on a base of 10,000 (a 'raised' base that lowers it) ran; now refused, naming both."""
    m = tiny(n_layer=1)
    with pytest.raises(ValueError, match=r"new_base'\] = 5000.0 .* must be above the model's rope_base = 10000"):
        m.set_rope_scaling({'rope_type': 'abf', 'new_base': 5000.0, 'factor': 1.0})
    m.set_rope_scaling({'rope_type': 'abf', 'new_base': 1e6, 'factor': 1.0})
    assert m.config.rope_scaling['new_base'] == 1e6
