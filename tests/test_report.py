"""Tests of lab/verdicts/summary_md.py, summary.md and bases.md from hand-made summaries with known tables, and of the room rule:
lab.verdicts.summary_md imports no script (plot.py, eval.py) and no matplotlib."""
import subprocess
import sys

from conftest import ROOT
from lab.verdicts.summary_md import bases_markdown, summary_markdown


def test_report_imports_no_script():
    code = "import sys, lab.verdicts.summary_md; print(sorted({'plot', 'eval', 'matplotlib'} & set(sys.modules)))"
    r = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == '[]', r.stdout + r.stderr


def summary():
    def arm(name, loss, sampled=False):
        return dict(name=name, scoring=dict(buckets={'0-16': 'exact', '16-64': 'sampled' if sampled else 'exact'}),
                    buckets={'0-16': loss, '16-64': loss + 1}, buckets_ci={'0-16': [loss - 0.1, loss + 0.1],
                                                                          '16-64': [loss + 0.5, loss + 1.5]},
                    ppl_at={'16': 3.0, '64': 9.5}, entropy_buckets={'0-16': 1.234, '16-64': 2.5})
    verdicts = {'base (L=16)': dict(verdict='worse'), 'yarn s=4 zero-shot': dict(verdict='equivalent')}
    vs_best = {'loss': {c: dict(best='yarn s=4 zero-shot' if c == '16-64' else 'base (L=16)', arms=verdicts)
                        for c in ('0-16', '16-64')}}
    s = dict(dataset='chars', num_windows=4, T=64, L=16, seed=1337, protocol='Same windows.',
             margins=dict(loss=0.02, exact_match=0.05), vs_best=vs_best)
    base, yarn = arm('base (L=16)', 1.5), arm('yarn s=4 zero-shot', 1.25, sampled=True)
    base.update(kind='base', per_window={'0-16': [[1.5] * 4], '16-64': [[2.4, 2.6, 2.3, 2.7]]},
                per_window_design={'0-16': [[1.5] * 4], '16-64': [[2.6, 2.4, 2.7, 2.5]]})
    yarn.update(kind='zero-shot', per_window={'0-16': [[1.25] * 4], '16-64': None},
                per_window_design={'0-16': [[1.25] * 4], '16-64': [[2.1, 2.3, 2.4, 2.2]]})
    return dict(settings=s, arms=[base, yarn])


def test_summary_markdown_tables():
    md = summary_markdown(summary()).split('\n')
    assert md[0] == '# Loss by position: chars, 4 windows of T=64 tokens, L=16'
    assert md[2] == 'Windows: seed 1337, inside held-out documents, the same for every arm. Same windows.'
    assert '±0.02 nats (loss) or ±5 points (exact match)' in md[4]
    assert md[6].endswith("; sampled positions, not every one: yarn s=4 zero-shot (16-64). † = base (L=16)'s exact "
                          "mean plus the paired difference on the sampled positions (the sampled positions alone run "
                          "above the exact means), comparable with the exact rows:")
    # the sampled cell: 2.5 (the base's exact mean) + 2.25 - 2.55 (the two arms on the sampled positions) = 2.200
    assert md[8:12] == ['| arm | 0-16 | 16-64 |', '|---|---|---|', '| base (L=16) | 1.500 ± 0.100 * | 2.500 ± 0.500 |',
                        '| yarn s=4 zero-shot | 1.250 ± 0.100 ≈ | 2.200† (sampled 2.250 ± 0.500) * |']
    assert '| base (L=16) | 3.000 | 9.500 |' in md and '| yarn s=4 zero-shot | 1.23 | 2.50 |' in md
    assert md[-1] == '' and not any('Passkey' in line or 'contrast' in line for line in md)


def test_bases_markdown_cells():
    row = dict(name='yarn vs crop', diff=0.1, ci=[0.02, 0.18], verdict='better', verdicts=['better', 'unresolved'])
    out = dict(bases=['a', 'b'], margins=dict(loss=0.02, exact_match=0.05),
               comparisons={'exact_match': {'128-256': [row], '256-512': []},
                            'loss': {'0-16': [dict(row, diff=-0.25, ci=[-0.5, 0.0], verdict='unresolved')]}})
    md = bases_markdown(out).split('\n')
    assert md[0] == '# The same comparisons on 2 base models' and md[2] == 'Bases: a, b.'
    i = md.index('Passkey exact match, A − B (points):')
    assert md[i + 2:i + 5] == ['| contrast | 128-256 | 256-512 |', '|---|---|---|',
                               '| yarn vs crop | +10 [+2, +18] better (1/2) |  |']
    i = md.index('Loss, A − B (nats):')
    assert md[i + 4] == '| yarn vs crop | -0.250 [-0.500, +0.000] unresolved (1/2) |'


def test_emitted_shares_sort_the_needles_first_tokens():
    """Past L (distance_lo >= L) only: 4 records, asked ranks [0, 3, 1, 2] and per seed the emitted ranks; a right
    first token counts as asked even when the asked record is the oldest; -1 is none."""
    from lab.verdicts.summary_md import emitted_shares
    past = dict(distance_lo=16, per_example=dict(rank=[0, 3, 1, 2], emitted=[[0, 0, 3, -1], [0, 3, None, 2]]))
    inside = dict(distance_lo=0, per_example=dict(rank=[1], emitted=[[0]]))
    got = emitted_shares([inside, past], L=16, k=4)
    # scored: (0,0) asked, (3,0) oldest, (1,3) nearest, (2,-1) none, (0,0) asked, (3,3) asked, (2,2) asked
    assert got == {'asked': 4 / 7, 'oldest': 1 / 7, 'nearest': 1 / 7, 'other': 0.0, 'none': 1 / 7}


def test_small_effects_are_shown_play_by_play():
    """A loss effect of -0.01 past L against the crop, over 4 windows of two plays: play a's windows differ by -0.02
    and -0.02, play b's by 0 and 0; the table gives each play's mean and the overall row with its verdict."""
    from lab.verdicts.summary_md import per_play_table
    arm = lambda name, v: dict(name=name, per_window={'16-64': [v]}, per_window_design={'16-64': [v]})  # noqa: E731
    arms = [arm('A', [0.98, 0.98, 1.0, 1.0]), arm('crop', [1.0] * 4)]
    row = dict(a='A', b='crop', diff=-0.01, verdict='unresolved')
    s = dict(L=16, window_docs=['a', 'a', 'b', 'b'], vs_crop={'crop': {'loss': {'0-16': {}, '16-64': {'A': row}}}})
    lines = per_play_table(s, arms)
    assert lines[3] == '| A vs B | bucket | a (2) | b (2) | all |'
    assert lines[5] == '| A vs crop | 16-64 | -0.020 | +0.000 | -0.010 unresolved |'
    assert per_play_table(dict(s, window_docs=['a'] * 4), arms) == []  # one play: nothing to split
