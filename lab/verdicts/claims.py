"""
A record behind each claim (issue 31 item 6; modded-nanogpt keeps one statistics file per record): every comparison
that README.md or docs/results.md states in numbers is listed in CLAIMS with the summary it comes from, and
`python -m lab.verdicts.claims` writes assets/test/claims/<id>.json for each, holding the command, commit, torch version and
machine that made the summary (its provenance), the comparison recomputed with this version's code from the values
the summary stores, and those raw values, unit by unit (windows or examples, seeds), so that a reader can redo the
test with any tool; assets/test/claims/README.md lists them. `python -m lab.verdicts.claims --check` recomputes every claim and
compares it with its record and with the sentence that states it (tests/test_claims.py does the same). This room writes
numbers; their forest plot, assets/test/claims.png, is lab/pictures/verdict_plots.py's (`python -m lab.pictures.redraw
claims` draws it).

A claim: id, file (a summary.json under assets/), table (contrasts, vs_self, or vs_crop:<crop arm>), kind (loss,
exact_match, needles, ...), column (a bucket), a and b (arm names: A - B, the verdict A's), said: (doc, quote) pairs,
the words in README.md or docs/results.md that state it (each must hold the difference as printed and the verdict).
table 'between': file a bases.json of `eval.py --combine --combine_minus` over committed evals, a the row's name (an
arm or a contrast; lab.verdicts.compare.between_kinds), b what it is set against (the same on the other kind).
table 'family': file a summary.json of lab.doc_study (the real model's study), a row of its declared family
(kind loss, digits or exact; column a loss column or 'passkey'), recomputed with the whole family (Holm) by
lab.doc_study.judge from the per-window values the summary stores.
"""
import argparse
import functools
import json
import os

import numpy as np

from data.common import atomic_write_text, read_json
from lab.engine.cli import cli
from lab.verdicts.family import field, judge
from lab.verdicts.compare import ROOMS, between_kinds, between_values, family, not_judged, unit_values
from lab.verdicts.summary_md import units

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'assets', 'test', 'claims')
TEST = 'assets/test/summary.json'
Y8, Y8FT, PLAIN = 'yarn s=8 β_fast=8 zero-shot', 'yarn s=4 β_fast=8 ft100', 'default ft100'
CROP = 'crop w=128 (sliding)'


def claim(id, a, b, column, *said, table='vs_self', kind='loss', file=TEST):
    """said: (doc, quote) pairs, or quotes in docs/results.md."""
    said = [x if isinstance(x, tuple) else (DOC, x) for x in said]
    return dict(id=id, file=file, table=table, kind=kind, column=column, a=a, b=b, said=said)


DOC, RM = 'docs/results.md', 'README.md'
VS_CROP = f'vs_crop:{CROP}'
GATED, CHUNKED, HYB80, APE = (f'assets/test/designs/{d}/summary.json' for d in ('gated', 'chunked', 'hybrid_w80', 'ape'))
ALIBI_OWN, FIRE_OWN, COPE_OWN = (f'assets/test/designs/{d}_own/summary.json' for d in ('alibi', 'fire', 'cope'))
FOPE_OWN, CONV_OWN, INKLING_OWN = (f'assets/test/designs/{d}_own/summary.json' for d in ('fope', 'conv', 'inkling'))
LEROPE, POSE8, LEROPE_LR = (f'assets/test/designs/{d}/summary.json' for d in ('lerope', 'pose_random_8x',
                                                                             'lerope_pos_lr'))
LR30, BOTH30 = (f'yarn s=4 β_fast=8 learned-freqs {t}pos-lr30 ft100' for t in ('', 'logpos '))
Y8P, Y8R, Y8F = (f'yarn s=8 β_fast=8 {t}ft100' for t in ('pose ', 'pose random ', ''))
SINKS = 'assets/test/designs/sinks_seeds/bases.json'
PROPE = 'assets/test/designs/prope_seeds/bases.json'
REAL, REAL_MAPS = (f'assets/studies/real_model_{d}/summary.json' for d in ('plays', 'maps'))
R_BASE, R_CROP, R_YARN = 'base (L=8192)', 'crop w=8192 sink=4 cache (sliding)', 'yarn s=1.5 zero-shot'
R_RR = 'rerope w=4096 zero-shot'
RR, SE, DY = 'rerope w=64 zero-shot', 'self_extend w=64 G=32 zero-shot', 'dynamic_yarn zero-shot'
CLAIMS = [  # the test split's claims, in the order docs/results.md states them
    # each arm against its own weights held to a window (loss, nats)
    claim('yarn-zero-shot-own-crop-256', Y8, f'{Y8} held to 128 (sliding)', '256-512', '−0.016 [−0.025, −0.008] better',
          (RM, '−0.016 [−0.025, −0.008] at 256–512, better')),
    claim('yarn-zero-shot-own-crop-512', Y8, f'{Y8} held to 128 (sliding)', '512-1024', '−0.039 [−0.049, −0.028] better'),
    claim('yarn-ft-own-crop-128', Y8FT, f'{Y8FT} held to 128 (sliding)', '128-256', '−0.008 [−0.013, −0.004] better'),
    claim('yarn-ft-own-crop-256', Y8FT, f'{Y8FT} held to 128 (sliding)', '256-512', '−0.032 [−0.040, −0.024] better',
          (RM, '−0.032 [−0.040, −0.024] at 256–512, better')),
    claim('yarn-ft-own-crop-512', Y8FT, f'{Y8FT} held to 512 (sliding)', '512-1024', '+1.197 [+1.174, +1.219] worse'),
    claim('plain-ft-own-crop-128', PLAIN, f'{PLAIN} held to 128 (sliding)', '128-256', '+0.050 [+0.042, +0.057] worse',
          (RM, '+0.050 [+0.042, +0.057] at 128–256, worse')),
    claim('plain-ft-own-crop-256', PLAIN, f'{PLAIN} held to 128 (sliding)', '256-512', '+0.124 [+0.113, +0.135] worse'),
    claim('plain-ft-own-crop-512', PLAIN, f'{PLAIN} held to 512 (sliding)', '512-1024', '+0.258 [+0.246, +0.271] worse'),
    # against the base's crop
    claim('base-vs-crop-512', 'base (L=128)', CROP, '512-1024', '+2.142 [+2.115, +2.169] worse', table=VS_CROP),
    claim('yarn-zero-shot-vs-crop-512', Y8, CROP, '512-1024', '+0.275 [+0.260, +0.289] worse', table=VS_CROP),
    claim('yarn-ft-vs-crop-256', Y8FT, CROP, '256-512', '−0.031 [−0.040, −0.022] better', table=VS_CROP),
    claim('yarn-ft-vs-crop-512', Y8FT, CROP, '512-1024', '+1.154 [+1.130, +1.178] worse', table=VS_CROP),
    claim('rerope-vs-crop-256', RR, CROP, '256-512', '−0.020 [−0.028, −0.012] better', table=VS_CROP),
    claim('rerope-vs-crop-512', RR, CROP, '512-1024', '−0.021 [−0.030, −0.011] better',
          (RM, '−0.021 [−0.030, −0.011] at 512–1024, better'), table=VS_CROP),
    claim('self-extend-vs-crop-256', SE, CROP, '256-512', '−0.022 [−0.030, −0.014] better', table=VS_CROP),
    claim('self-extend-vs-crop-512', SE, CROP, '512-1024', '−0.029 [−0.039, −0.020] better', table=VS_CROP),
    # named contrasts (loss)
    claim('dynamic-vs-static-yarn-512', DY, Y8, '512-1024', '−0.066 [−0.087, −0.046] better', table='contrasts'),
    claim('self-extend-vs-rerope-512', SE, RR, '512-1024', '−0.009 [−0.012, −0.006] better, inside the margin',
          table='contrasts'),
    claim('yarn-ft-vs-plain-256', Y8FT, PLAIN, '256-512', '−0.198 [−0.214, −0.181] better', table='contrasts'),
    claim('yarn-ft-vs-plain-512', Y8FT, PLAIN, '512-1024', '+0.713 [+0.696, +0.730] worse', table='contrasts'),
    # retrieval at 512-1024 (points)
    claim('rerope-passkey-vs-crop-512', RR, CROP, '512-1024', '+78 [+68, +85] better', table=VS_CROP,
          kind='exact_match'),
    claim('yarn-zero-shot-passkey-vs-crop-512', Y8, CROP, '512-1024', '+33 [+24, +43] better', table=VS_CROP,
          kind='exact_match'),
    claim('yarn-zero-shot-needles-vs-crop-512', Y8, CROP, '512-1024', '+72 [+62, +80] better', table=VS_CROP,
          kind='needles'),
    claim('self-extend-vs-rerope-passkey-512', SE, RR, '512-1024', '−24 [−32, −15] worse', table='contrasts',
          kind='exact_match'),
    claim('dynamic-vs-static-yarn-passkey-512', DY, Y8, '512-1024', '−4 [−19, +11] unresolved', table='contrasts',
          kind='exact_match'),
    # the designs of issue 47 on the test split (make designs-test): each base against its crop
    claim('gated-vs-crop-512', 'base gated (L=128)', CROP, '512-1024',
          '+1.950 [+1.924, +1.975] worse than its crop at 512–1024',
          (RM, 'gated +1.950 [+1.924, +1.975] worse than its crop'), table=VS_CROP, file=GATED),
    claim('gated-rerope-vs-crop-512', RR, CROP, '512-1024', '−0.020 [−0.028, −0.012] better', table=VS_CROP, file=GATED),
    claim('gated-rerope-passkey-vs-crop-512', RR, CROP, '512-1024', 'finds the passkey +81 [+71, +87] better than the crop',
          table=VS_CROP, kind='exact_match', file=GATED),
    claim('chunked-vs-own-crop-512', 'base 3*rope:c=32,nope (L=128)', CROP, '512-1024',
          '+0.007 [+0.006, +0.008] worse than its own crop at 512–1024, inside the ±0.02 margin', table=VS_CROP, file=CHUNKED),
    claim('hybrid-w80-vs-own-crop-512', 'base 3*rope:w=80,nope (L=128)', CROP, '512-1024',
          'on the test split −0.010 [−0.013, −0.007] better, inside the margin',
          (RM, 'the hybrid beats its own crop past L by a hair, −0.010 [−0.013, −0.007] better, inside the margin'),
          table=VS_CROP, file=HYB80),
    claim('hybrid-w80-llama4-nope-512', 'qtemp llama4 on nope zero-shot', 'base 3*rope:w=80,nope (L=128)', '512-1024',
          'now helps a little: −0.002 [−0.003, −0.002] better', table='contrasts', file=HYB80),
    # FIRE, CoPE and ALiBi beside the pure-text RoPE base and its crop (the ape study's arms)
    claim('fire-vs-alibi-512', 'fire (L=128)', 'alibi (L=128)', '512-1024', '+0.341 [+0.331, +0.351] worse',
          (RM, 'FIRE stays behind ALiBi (+0.341 [+0.331, +0.351] worse)'), table='contrasts', file=APE),
    claim('fire-vs-crop-512', 'fire (L=128)', CROP, '512-1024', 'FIRE is +0.393 [+0.383, +0.402] worse than the crop',
          table=VS_CROP, file=APE),
    claim('cope-vs-crop-512', 'cope (L=128)', CROP, '512-1024', 'CoPE breaks, +0.979 [+0.962, +0.996] worse than the crop',
          table=VS_CROP, file=APE),
    claim('alibi-vs-crop-512', 'alibi (L=128)', CROP, '512-1024', '+0.052 [+0.046, +0.058] worse than the crop',
          table=VS_CROP, file=APE),
    # ALiBi, FIRE and CoPE each against its own crop (make own-crops-test; FIRE's truncated: its normaliser reads the
    # query's absolute position): issue 62 item 2
    claim('alibi-vs-own-crop-512', 'alibi (L=128)', CROP, '512-1024', '+0.001 [+0.000, +0.001] worse, inside the margin',
          (RM, 'ALiBi is its own crop (+0.001 [+0.000, +0.001] worse, inside the margin'), table=VS_CROP,
          file=ALIBI_OWN),
    claim('fire-vs-own-crop-512', 'fire (L=128)', 'crop w=128 (truncated)', '512-1024',
          'FIRE is +0.346 [+0.319, +0.373] worse than its own crop', (RM, 'FIRE +0.346 [+0.319, +0.373] worse'),
          table='vs_crop:crop w=128 (truncated)', file=FIRE_OWN),
    claim('cope-vs-own-crop-512', 'cope (L=128)', CROP, '512-1024', 'CoPE +1.008 [+0.992, +1.025] worse than its own crop',
          table=VS_CROP, file=COPE_OWN),
    # issue 63: the 2026 bases against their own crops (make own-crops-2026; FoPE's truncated: its tables are absolute)
    claim('fope-vs-own-crop-512', 'base fope clip (L=128)', 'crop w=128 (truncated)', '512-1024',
          'FoPE is +0.718 [+0.676, +0.760] worse than its own crop',
          (RM, 'FoPE +0.718 [+0.676, +0.760] worse than its own crop'), table='vs_crop:crop w=128 (truncated)',
          file=FOPE_OWN),
    claim('conv-vs-own-crop-512', 'base conv,rope:w=32,conv,rope proportional p=0.5 on full (L=128)', CROP,
          '512-1024', '+0.062 [+0.059, +0.064] worse than its own crop',
          (RM, 'convolutions +0.062 [+0.059, +0.064] worse'),
          table=VS_CROP, file=CONV_OWN),
    claim('inkling-vs-own-crop-512', 'base 3*nope:w=64,nope inkling (L=128)', CROP, '512-1024',
          '+0.021 [+0.019, +0.022] worse than its own crop', (RM, 'Inkling-2 +0.021 [+0.019, +0.022] worse'),
          table=VS_CROP, file=INKLING_OWN),
    # issue 63: the learned position parts fine-tuned in (make lerope), randomized ids at 8 x L (make pose-random-8x)
    claim('lerope-vs-yarn-ft-256', 'yarn s=4 β_fast=8 learned-freqs logpos ft100', Y8FT, '256-512',
          '−0.001 [−0.001, −0.000] better, inside the margin',
          (RM, 'plain YaRN does (−0.001 [−0.001, −0.000] better, inside the margin'), table='contrasts',
          file=LEROPE),
    claim('lerope-passkey-vs-yarn-ft-256', 'yarn s=4 β_fast=8 learned-freqs logpos ft100', Y8FT, '256-512',
          '−2 [−6, +3] equivalent', table='contrasts', kind='exact_match', file=LEROPE),
    claim('lerope-pos-lr-freqs-vs-yarn-ft-256', LR30, Y8FT, '256-512', '−0.002 [−0.005, +0.001] equivalent',
          table='contrasts', file=LEROPE_LR),
    claim('lerope-pos-lr-freqs-passkey-vs-yarn-ft-256', LR30, Y8FT, '256-512', '−8 [−15, −1] worse',
          table='contrasts', kind='exact_match', file=LEROPE_LR),
    claim('lerope-pos-lr-vs-yarn-ft-256', BOTH30, Y8FT, '256-512', '−0.001 [−0.005, +0.003] equivalent',
          (RM, 'at 30 × that rate, −0.001 [−0.005, +0.003] equivalent'), table='contrasts', file=LEROPE_LR),
    claim('lerope-pos-lr-passkey-vs-yarn-ft-256', BOTH30, Y8FT, '256-512', '−12 [−19, −4] worse',
          (RM, 'the passkey there −12 [−19, −4] worse'), table='contrasts', kind='exact_match', file=LEROPE_LR),
    claim('pose-random-vs-full-8x-512', Y8R, Y8F, '512-1024', '+0.698 [+0.678, +0.719] worse',
          (RM, '+0.698 [+0.678, +0.719] worse than the full fine-tune'), table='contrasts', file=POSE8),
    claim('pose-random-passkey-vs-full-8x-512', Y8R, Y8F, '512-1024', '−29 [−39, −21] worse', table='contrasts',
          kind='exact_match', file=POSE8),
    claim('pose-vs-full-8x-512', Y8P, Y8F, '512-1024', '+0.085 [+0.073, +0.097] worse', table='contrasts',
          file=POSE8),
    # three learned-sink bases against three plain ones (make sinks-seeds), seeds paired: each row the first kind's
    # value minus the second's, the pairs a random factor (lab.verdicts.compare.between_kinds)
    claim('sinks-yarn-gap-seeds-512', f'{Y8} vs {CROP}', f'{Y8} vs {CROP}', '512-1024',
          "YaRN's gap to the crop at 512–1024 moves by +0.006 [−0.163, +0.175], unresolved",
          (RM, 'whether a learned sink moves YaRN β8\'s gap to the crop is unresolved (+0.006 [−0.163, +0.175] at 512–1024, unresolved'),
          table='between', file=SINKS),
    claim('sinks-base-break-seeds-512', f'base vs {CROP}', f'base vs {CROP}', '512-1024',
          'breaks less past L than the plain one, −0.448 [−0.815, −0.082] at 512–1024 against its own crop (each pair '
          'lower), yet unresolved',
          table='between', file=SINKS),
    claim('sinks-base-inside-seeds-128', 'base', 'base', '0-128',
          'the two kinds are alike, −0.003 [−0.022, +0.016] at 0–128, unresolved', table='between', file=SINKS),
    # three p-RoPE bases (p = 0.25) against the same three plain ones (make prope-seeds)
    claim('prope-inside-seeds-128', 'base', 'base', '0-128', 'costs +0.049 [+0.040, +0.057] inside L (0–128, worse',
          (RM, "p-RoPE's cost inside L holds (+0.049 [+0.040, +0.057] at 0–128, worse"), table='between', file=PROPE),
    claim('prope-break-seeds-256', f'base vs {CROP}', f'base vs {CROP}', '256-512',
          'breaks less than the plain one past L, −1.152 [−1.724, −0.580] at 256–512 against its own crop (better',
          table='between', file=PROPE),
    # the real model (SmolLM2-135M at T = 12,288 = 1.5 L, 12 windows one per play; make real-model): its declared
    # family, each row recomputed with the whole family (Holm) from the per-window values
    claim('real-base-vs-crop-10240', R_BASE, R_CROP, '10240-12288', '+0.424 [+0.379, +0.469] | worse',
          (RM, '+0.424 [+0.379, +0.469] worse'), table='family', file=REAL),
    claim('real-yarn-vs-base-8192', R_YARN, R_BASE, '8192-12288', '−0.211 [−0.233, −0.190] | better',
          (RM, '−0.211 [−0.233, −0.190] past L, better'), table='family', file=REAL),
    claim('real-yarn-vs-pi-8192', R_YARN, 'linear s=1.5 zero-shot', '8192-12288', '−0.678 [−0.783, −0.573] | better',
          (RM, '−0.678 [−0.783, −0.573] better'), table='family', file=REAL),
    claim('real-yarn-vs-crop-8192', R_YARN, R_CROP, '8192-12288', '+0.003 [−0.001, +0.007] | equivalent',
          (RM, '+0.003 [−0.001, +0.007], equivalent'), table='family', file=REAL),
    claim('real-yarn-inside-L', R_YARN, R_BASE, '0-8192', '+0.012 [+0.010, +0.013] | worse, inside the margin',
          (RM, '+0.012 [+0.010, +0.013] inside L (worse, inside the margin'), table='family', file=REAL),
    claim('real-yarn-passkey-digits', R_YARN, R_BASE, 'passkey', '−8.160 [−12.081, −4.239] | better',
          (RM, "digits' loss −8.160 [−12.081, −4.239], better"), table='family', kind='digits', file=REAL),
    # its second target (make real-model-maps): ReRoPE and Self-Extend on the same windows, their own family
    claim('real-rerope-vs-base-8192', R_RR, R_BASE, '8192-12288', '−0.211 [−0.232, −0.191] | better', table='family',
          file=REAL_MAPS),
    claim('real-rerope-vs-crop-8192', R_RR, R_CROP, '8192-12288', '+0.003 [−0.004, +0.011] | equivalent',
          (RM, 'ReRoPE +0.003 [−0.004, +0.011] against the crop, equivalent'), table='family', file=REAL_MAPS),
    claim('real-self-extend-vs-rerope-8192', 'self_extend w=2048 G=4 zero-shot', R_RR, '8192-12288',
          '−0.009 [−0.013, −0.005] | better, inside the margin', table='family', file=REAL_MAPS),
    claim('real-rerope-vs-yarn-8192', R_RR, R_YARN, '8192-12288', '−0.000 [−0.005, +0.005] | equivalent',
          table='family', file=REAL_MAPS),
    claim('real-rerope-inside-L', R_RR, R_BASE, '0-8192', '+0.000 [−0.000, +0.001] | equivalent', table='family',
          file=REAL_MAPS),
    claim('real-rerope-passkey-digits', R_RR, R_BASE, 'passkey', '−17.817 [−19.733, −15.900] | better',
          (RM, "digits' loss −17.817 [−19.733, −15.900], better"), table='family', kind='digits', file=REAL_MAPS),
    # (the rooms in formats the base never trained on, lab/measure/ruler.py: word needles, multi-value needles and
    # variable tracking, are no claims: the base finds 0-4% of them inside L, so they have no positive control)
]


# ----------------------------------------------------------------------------- one claim


@functools.lru_cache(maxsize=8)
def load(file):
    """A summary, read once (callers do not change it)."""
    return read_json(os.path.join(ROOT, file), "restore it from git (git checkout -- assets/) or rerun its eval")


def kinds_of(s):
    """A combine's bases.json with --combine_minus -> (the first kind's summaries, the second's), each as committed."""
    return tuple([load(os.path.join(f, 'summary.json')) for f in folders] for folders in
                 (s['folders'], s['minus']['folders']))


def family_row(rows, c):
    return next(r for r in rows if (r['a'], r['b'], r['kind'], r['column']) == (c['a'], c['b'], c['kind'], c['column']))


def stored(s, c):
    """The comparison as the summary stores it."""
    if c['table'] == 'family':
        return family_row(s['family'], c)
    if c['table'] == 'between':
        return next(r for r in s['between'][c['kind']][c['column']] if r['name'] == c['a'])
    st, (table, _, ref) = s['settings'], c['table'].partition(':')
    if table == 'vs_crop':
        return st['vs_crop'][ref][c['kind']][c['column']][c['a']]
    return next(r for r in st[table][c['kind']][c['column']] if r['a'] == c['a'] and r['b'] == c['b'])


def recompute(s, c):
    """The comparison recomputed from the summary's per-window / per-example values with lab.verdicts.compare: the whole
    family of its table column (Holm counts every pair in it)."""
    if c['table'] == 'family':
        declared = [{k: r[k] for k in ('a', 'b', 'kind', 'column')} for r in s['family']]
        return family_row(judge(declared, s['arms'], s['settings']['margins']), c)
    if c['table'] == 'between':
        rows = between_kinds(*kinds_of(s), s['margins'])[c['kind']][c['column']]
        return next(r for r in rows if r['name'] == c['a'])
    results, st, (table, _, ref) = s['arms'], s['settings'], c['table'].partition(':')
    if table == 'contrasts':
        pairs = [(r['a'], r['b']) for r in st['contrasts'][c['kind']][c['column']]]
    elif table == 'vs_self':
        pairs = [(a['self_crop_of'], a['name']) for a in results if a.get('self_crop_of')]
    else:
        pairs = [(a['name'], ref) for a in results if a['name'] != ref]
    rows = family({a['name']: a for a in results}, pairs, c['kind'], c['column'], st['margins'])
    return next(r for r in rows if r['a'] == c['a'] and r['b'] == c['b'])


def raw(s, c):
    """The values the test pairs: per arm [seed][unit] (None: not scored), the seeds, and what each unit is; for a
    'between' claim each kind's [pair][unit] values (the arm, or its contrast A - B) and the pairs' folders."""
    if c['table'] == 'family':
        f = field(c)
        return dict(a=[s['arms'][c['a']][f]], b=[s['arms'][c['b']][f]], units=s['windows'])
    if c['table'] == 'between':
        first, second = kinds_of(s)
        x, y = next((x, y) for k, x, y in between_values(first, second, c['kind'], c['column']) if k == c['a'])
        st = first[0]['settings']
        return dict(a=[u.tolist() for u in x], b=[u.tolist() for u in y], pairs=list(zip(s['folders'], s['minus']['folders'])),
                    units=[dict(window=w, play=p) for w, p in zip(st['windows'], st['window_docs'])])
    by, st = {a['name']: a for a in s['arms']}, s['settings']
    vals = {k: [[None if np.isnan(v) else float(v) for v in row] for row in unit_values(by[c[k]], c['column'], c['kind'])]
            for k in ('a', 'b')}
    if c['kind'] == 'loss':
        unit = [dict(window=w, play=p) for w, p in zip(st['windows'], st['window_docs'])]
    else:
        unit = [dict(example=i, window=w) for i, w in enumerate(st['retrieval']['windows'])]
    return dict(a=vals['a'], b=vals['b'], seeds_a=by[c['a']].get('seeds'), seeds_b=by[c['b']].get('seeds'), units=unit)


KEYS = ('diff', 'ci', 'p', 'p_holm', 'verdict', 'inside_margin', 'identical', 'method')


def record(c):
    s = load(c['file'])
    r = recompute(s, c)
    st = kinds_of(s)[0][0]['settings'] if c['table'] == 'between' else s['settings']  # (a between's: its first eval's)
    exact = c['kind'] not in ('loss', 'digits') and (c['kind'] == 'exact' or ROOMS[c['kind']][1] == 'exact')
    return dict(id=c['id'], said=[list(x) for x in c['said']], file=c['file'],
                comparison={k: c[k] for k in ('table', 'kind', 'column', 'a', 'b')},
                result={k: r[k] for k in KEYS},
                margin=st['margins'][c['kind'] if c['table'] == 'family' else 'exact_match' if exact else 'loss'],
                provenance=st.get('provenance') or dict(torch=st.get('torch'), note='this summary predates the '
                                                        'provenance record: its command is in the Makefile'),
                values=raw(s, c), recompute=f"python -m lab.verdicts.claims --check {c['id']}")


def problems(c, rec=None):
    """What is wrong with a claim: its recomputed comparison against the stored one, its committed record and its
    sentence (the difference as printed, the verdict). [] when it holds."""
    rec = rec if rec is not None else record(c)  # the comparison recomputed, with its raw values
    r, old, out = rec['result'], stored(load(c['file']), c), []
    why = None if c['table'] in ('family', 'between') else not_judged(load(c['file']), c['kind'], old)  # the stored gate
    if why:  # floor against floor: the room does not test what the claim says
        out.append(f"{c['id']}: {why}, so the room does not test what the claim says; state it as not judged, "
                   f"not as a verdict")
    if r['verdict'] != old['verdict'] or not np.allclose([r['diff'], *r['ci']], [old['diff'], *old['ci']], atol=1e-6):
        out.append(f"{c['id']}: recomputed {r['diff']:+.4f} {r['verdict']}, the summary stores {old['diff']:+.4f} "
                   f"{old['verdict']}")
    path = os.path.join(OUT, f"{c['id']}.json")
    if not os.path.exists(path) or _read(path) != json.loads(json.dumps(rec)):
        out.append(f"{c['id']}: assets/test/claims/{c['id']}.json is missing or stale; run python -m lab.verdicts.claims")
    fmt = units(c['kind'])[1]
    shown = fmt(r['diff']).replace('-', '−')
    for doc, quote in c['said']:
        with open(os.path.join(ROOT, doc), encoding='utf-8') as f:
            if ' '.join(quote.split()) not in ' '.join(f.read().split()):  # Markdown wraps its lines anywhere
                out.append(f"{c['id']}: {doc} no longer says {quote!r}")
        if shown not in quote and shown.lstrip('+') not in quote or r['verdict'] not in quote:
            out.append(f"{c['id']}: {quote!r} does not state {shown} {r['verdict']}")
    return out


def _read(path):
    return read_json(path, "rewrite the records: python -m lab.verdicts.claims")


def index(records):
    lines = ['# The record behind each claim', '',
             'Each comparison that README.md or docs/results.md states in numbers, recomputed from the summary it names '
             'by `python -m lab.verdicts.claims` (this file and one JSON per claim: the command, commit, torch and machine '
             'behind the summary, the test, and the raw per-window or per-example values). `python -m lab.verdicts.claims '
             '--check` recomputes them all.', '',
             '| claim | A − B | column | difference [95%] | verdict | from | commit |', '|---|---|---|---|---|---|---|']
    for r in records:
        c, x, p = r['comparison'], r['result'], r['provenance']
        fmt, src = units(c['kind'])[1], os.path.relpath(os.path.join(ROOT, r['file']), OUT)  # the summary, from here
        lines.append(f"| [{r['id']}]({r['id']}.json) | {c['a']} − {c['b']} | {c['kind']} {c['column']} | "
                     f"{fmt(x['diff'])} [{fmt(x['ci'][0])}, {fmt(x['ci'][1])}] | {x['verdict']} | "
                     f"[{r['file']}]({src}) | "
                     f"{(p.get('commit') or 'not recorded')[:7]} |")
    return '\n'.join(lines) + '\n'


def main(argv):
    ap = argparse.ArgumentParser(description='write (or --check) the record behind each claim')
    ap.add_argument('--check', action='store_true', help='recompute every claim and compare; write nothing')
    ap.add_argument('ids', nargs='*', help='only these claims')
    args = ap.parse_args(argv)
    todo = [c for c in CLAIMS if not args.ids or c['id'] in args.ids]
    if args.ids and len(todo) < len(set(args.ids)):
        raise ValueError(f"no claim named {sorted(set(args.ids) - {c['id'] for c in CLAIMS})}; see lab/verdicts/claims.py")
    records = [record(c) for c in todo]
    if args.check:
        bad = [p for c, r in zip(todo, records) for p in problems(c, r)]
        print('\n'.join(bad) or f"all {len(todo)} claims hold")
        return 1 if bad else 0
    os.makedirs(OUT, exist_ok=True)
    for r in records:
        atomic_write_text(os.path.join(OUT, f"{r['id']}.json"), json.dumps(r, indent=1, ensure_ascii=False) + '\n')
    if not args.ids:
        atomic_write_text(os.path.join(OUT, 'README.md'), index(records))
    print(f"wrote {len(records)} claim records to {os.path.relpath(OUT, ROOT)}; their picture, assets/test/claims.png: "
          f"python -m lab.pictures.redraw claims")
    return 0


if __name__ == '__main__':
    cli(main)
