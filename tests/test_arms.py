"""lab/measure/arms.py, eval.py's planner (issue 29, "arms have identities, not names"): the base is found by its path, seeds
group only when everything but the seed agrees, and every arm has an ASCII id that --contrasts and --retune take.
Each test failed on the planner before (arms.py at commit 1378a1a): see the docstrings."""
import os
import re
import shutil

import pytest
import torch

import eval as ev
from badinput import two_seeds  # noqa: F401  (tiny_run's linear s=4 fine-tune, seeds 1 and 2: ft/seed1, ft/seed2)
from lab.measure.arms import arm_id, arm_ids, parse_contrasts, plan_arms


def plan(**kw):
    return plan_arms(dict(ev.DEFAULTS, **kw))


def edit_ckpt(run, change):
    """Rewrite run/ckpt.pt as change(checkpoint dict) leaves it."""
    path = os.path.join(run, 'ckpt.pt')
    ckpt = torch.load(path, map_location='cpu', weights_only=True)
    change(ckpt)
    torch.save(ckpt, path)


@pytest.fixture
def ft_copy(two_seeds, tmp_path):  # noqa: F811
    """A copy of the two-seed run folder that a test may damage."""
    out = str(tmp_path / 'ft')
    shutil.copytree(two_seeds, out)
    return out


def test_the_base_is_found_by_its_path_not_its_place_in_the_list(tiny_run, two_seeds, tmp_path):  # noqa: F811
    """--ckpt=<two seeds>,base,x --base=base: the base was looked up by zipping the seed-grouped arms with the
    ungrouped paths, so it came out as x (here a fine-tune), and the zero-shot arms were built on that fine-tune."""
    x = str(tmp_path / 'x')
    shutil.copytree(os.path.join(two_seeds, 'seed1'), x)
    arms, base, _ = plan(ckpt=f"{two_seeds},{tiny_run},{x}", base=tiny_run, rope_types='yarn')
    assert base['checkpoint'] == tiny_run and base['kind'] == 'base'
    zs = next(a for a in arms if a['kind'] == 'zero-shot')
    assert zs['checkpoint'] == tiny_run and zs['L'] == 32 and zs['scaling']['original_max_position_embeddings'] == 32


def test_the_base_in_ckpt_and_in_rope_types_default_is_one_arm(tiny_run, two_seeds):  # noqa: F811
    """--ckpt=<two seeds>,base --base=base --rope_types=default,yarn stopped with "'base (L=32)' is given twice": the
    base was not found among the arms (the same zip), so 'default' added it a second time."""
    arms, base, _ = plan(ckpt=f"{two_seeds},{tiny_run}", base=tiny_run, rope_types='default,yarn')
    assert [a['name'] for a in arms] == ['linear s=4 ft2', 'base (L=32)', 'yarn s=16 zero-shot']
    assert arms[1] is base and arms[0]['seeds'] == [1, 2]


@pytest.mark.parametrize('change, field, values', [
    (lambda c: (c['lineage'].update(seq_len=96), c['config'].update(block_size=96)), 'seq_len', '(128 vs 96)'),
    (lambda c: c['config'].update(learning_rate=1e-3), 'learning_rate', '(0.0003 vs 0.001)'),
], ids=['seq_len', 'learning_rate'])
def test_runs_of_one_name_that_differ_in_more_than_the_seed_are_refused(ft_copy, change, field, values):
    """Two seeds of one run folder and one name, one fine-tuned at another length or learning rate: they were averaged
    as one 2-seed arm (labelled by the first); now one line names the field and both values."""
    edit_ckpt(os.path.join(ft_copy, 'seed2'), change)
    with pytest.raises(ValueError, match=f"share the name 'linear s=4 ft2' in run folder .* differ in {field} ") as e:
        plan(ckpt=ft_copy)
    assert values in str(e.value) and 'seed1' in str(e.value) and 'seed2' in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_runs_identical_but_for_the_seed_are_one_arm(ft_copy):
    """Seeds that differ only in what does not change training (a seed resumed on another device, printing on) are one
    arm with every seed, an id and an identity without the seed (before: no id, no identity)."""
    edit_ckpt(os.path.join(ft_copy, 'seed2'), lambda c: c['config'].update(init_from='resume', device='cuda',
                                                                            progress=True))
    arms, _, _ = plan(ckpt=ft_copy)
    assert len(arms) == 1
    a = arms[0]
    assert a['name'] == 'linear s=4 ft2' and a['id'] == 'linear_s4_ft2' and a['seeds'] == [1, 2]
    assert [r['checkpoint'] for r in a['runs']] == [os.path.join(ft_copy, 'seed1'), os.path.join(ft_copy, 'seed2')]
    fields = dict(a['identity'])
    assert fields['seq_len'] == 128 and fields['run_dir'] == os.path.realpath(ft_copy) and 'seed' not in fields
    assert 'learning_rate' in dict(fields['training']) and 'seed' not in dict(fields['training'])


def test_one_name_from_two_run_folders_is_two_arms_even_with_distinct_seeds(two_seeds, tmp_path):  # noqa: F811
    """Seed 1 of one run folder and seed 2 of another (say plain fine-tunes at two lengths) were merged into one
    2-seed arm because their names matched; now each is its own arm, told apart by its run folder's name."""
    one, other = tmp_path / 'ft-one', tmp_path / 'ft-other'
    shutil.copytree(two_seeds, one)
    shutil.copytree(two_seeds, other)
    arms, _, _ = plan(ckpt=f"{one / 'seed1'},{other / 'seed2'}")
    assert [(a['name'], a['seeds']) for a in arms] == [('linear s=4 ft2 [ft-one]', [1]),
                                                       ('linear s=4 ft2 [ft-other]', [2])]
    assert [a['id'] for a in arms] == ['linear_s4_ft2_ft-one', 'linear_s4_ft2_ft-other']


def test_one_run_twice_in_one_run_folder_is_refused(ft_copy):
    """A seed folder copied inside its run folder is the same training twice: refused (it was a second arm)."""
    shutil.copytree(os.path.join(ft_copy, 'seed1'), os.path.join(ft_copy, 'seed1-again'))
    with pytest.raises(ValueError, match='one run twice'):
        plan(ckpt=f"{ft_copy},{os.path.join(ft_copy, 'seed1-again')}")


def test_ids_are_ascii_unique_and_name_arms_in_contrasts_and_retune(tiny_run, two_seeds):  # noqa: F811
    """Every arm has an id: ASCII, typable, unique in the eval; --contrasts and --retune take it as well as the
    display name (before: no id; a contrast or retune by id was 'no arm is named')."""
    arms, _, _ = plan(ckpt=f"{tiny_run},{two_seeds}", rope_types='default,yarn:beta_fast=8,rerope:window=8',
                      position_map='rerope:window=8', retune='linear_s4_ft2 | yarn:factor=8')
    names, ids = [a['name'] for a in arms], [a['id'] for a in arms]
    assert ids == ['base_L32', 'linear_s4_ft2', 'yarn_s16_beta_fast8_zero-shot', 'rerope_w8_zero-shot',
                   'linear_s4_ft2_plus_rerope_w8', 'linear_s4_ft2_at_yarn_s8']
    assert names[-1] == 'linear s=4 ft2 @ yarn s=8' and arms[-1]['scaling']['factor'] == 8.0
    assert all(i.isascii() and re.fullmatch(r'[A-Za-z0-9._-]+', i) for i in ids)
    assert len(set(ids)) == len(ids) and ids == arm_ids(names)
    pairs = parse_contrasts('yarn_s16_beta_fast8_zero-shot | base_L32; linear s=4 ft2 @ yarn s=8 | linear_s4_ft2',
                               names)
    assert pairs == [('yarn s=16 β_fast=8 zero-shot', 'base (L=32)'), ('linear s=4 ft2 @ yarn s=8', 'linear s=4 ft2')]
    with pytest.raises(ValueError, match="no arm is named 'yarn_s16' or has that id; the arm ids are: base_L32, "
                                         "linear_s4_ft2, yarn_s16_beta_fast8_zero-shot"):
        parse_contrasts('yarn_s16 | base_L32', names)
    with pytest.raises(ValueError, match='two different arms'):
        parse_contrasts('base_L32 | base (L=32)', names)  # one arm by its id and its name
    with pytest.raises(ValueError, match=r"the fine-tuned arms are: linear s=4 ft2 \(ids: linear_s4_ft2\)"):
        plan(ckpt=two_seeds, retune='linear_s4 | yarn:factor=8')


def test_arm_id_of_every_kind_of_name():
    """The id keeps the fine-tune folders' slug for the rope part and spells the rest in ASCII; a later arm whose id
    an earlier one has gets _2 (earlier ids never change when arms are added)."""
    assert arm_id('yarn s=4 β_fast=8 ft100') == 'yarn_s4_beta_fast8_ft100'
    assert arm_id('ntk_by_parts s=4 β_fast=0.3 β_slow=0.25 ft100') == \
        'ntk_by_parts_s4_beta_fast0.3_beta_slow0.25_ft100'
    assert arm_id('yarn s=4 β_fast=8 copy≤120 ft100') == 'yarn_s4_beta_fast8_copy_le120_ft100'
    assert arm_id('default ft100 [char-ft-plain400]') == 'default_ft100_char-ft-plain400'
    assert arm_id('base (L=128)') == 'base_L128' and arm_id('crop w=128 (sliding)') == 'crop_w128_sliding'
    assert arm_ids(['a=1', 'a1', 'a 1', 'b']) == ['a1', 'a1_2', 'a_1', 'b']
    assert arm_ids(['x=1', 'x1', 'x1_2']) == ['x1', 'x1_2', 'x1_2_2']
