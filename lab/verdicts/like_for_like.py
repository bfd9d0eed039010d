"""
Like with like (issue 58 item 4): each contrast the real model's study declared (SmolLM2-135M, L = 8,192, at
s = T/L = 1.5: assets/studies/real_model_plays and real_model_maps, lab.doc_study) beside the same contrast on
the miniature at the same factor (the demo's base, L = 128, at T = 192 = 1.5 x L on its dev windows:
assets/studies/mini_s15, `make mini-s15`), both against the same control (the sink-kept crop at cache positions,
which shows no distance past L), in the matching column (past L: 128-192 against the real model's declared past-L
column; inside L: 0-128 against 0-8,192). The lesson reads two verdicts, each recomputed here from the per-window
values its file stores (Holm within each side's own declared family): kept (the same word, 'inside the margin'
included), both inside the margin (each side equivalent or inside it), reversed (better <-> worse), unresolved (the
real model's test cannot decide), moved (any other change, e.g. worse -> equivalent). It compares equal factors only;
a factor change is a column of its own, never 'moved'. The word is a reading of two files, not a test of the
difference between the two models.

  python -m lab.verdicts.like_for_like          # writes assets/studies/like_for_like.{json,md}
  python -m lab.verdicts.like_for_like --check  # recomputes and compares with the committed files; writes nothing
"""
import argparse
import json
import os

from data.common import DataError, atomic_write_text, read_json
from lab.engine.cli import cli
from lab.verdicts.compare import family
from lab.verdicts.family import judge
from lab.verdicts.summary_md import units

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINI = 'assets/studies/mini_s15/summary.json'
REAL = ['assets/studies/real_model_plays/summary.json', 'assets/studies/real_model_maps/summary.json']
OUT = 'assets/studies/like_for_like'
# each method's arm on each side: (miniature, SmolLM2); the maps' knobs keep every distance below L on both
ARMS = {'as trained': ('base (L=128)', 'base (L=8192)'),
        'crop': ('crop w=128 sink=4 cache (sliding)', 'crop w=8192 sink=4 cache (sliding)'),
        'PI': ('linear s=1.5 zero-shot', 'linear s=1.5 zero-shot'), 'YaRN': ('yarn s=1.5 zero-shot', 'yarn s=1.5 zero-shot'),
        'NTK-aware': ('ntk s=1.5 zero-shot', 'ntk s=1.5 zero-shot'),
        'ReRoPE': ('rerope w=64 zero-shot', 'rerope w=4096 zero-shot'),
        'Self-Extend': ('self_extend w=32 G=4 zero-shot', 'self_extend w=2048 G=4 zero-shot')}
METHOD = {real: m for m, (_, real) in ARMS.items()}


def where(column, L):
    """'inside L' for a column 'lo-hi' that ends at or before L, else 'past L'."""
    return 'inside L' if int(column.split('-')[1]) <= L else 'past L'


def mini_column(s, at):
    """The miniature's last bucket that lies where the real model's column does (inside or past its L)."""
    want = [b for b in s['arms'][0]['buckets'] if where(b, s['settings']['L']) == at]
    return want[-1] if want else None


def mini_verdicts(s):
    """{(a, b): {column: row}} of the miniature's named contrasts, recomputed with Holm across them per column."""
    by = {a['name']: a for a in s['arms']}
    stored = s['settings'].get('contrasts', {}).get('loss', {})
    out = {}
    for col, rows in stored.items():
        for r in family(by, [(x['a'], x['b']) for x in rows], 'loss', col, s['settings']['margins']):
            out.setdefault((r['a'], r['b']), {})[col] = r
    return out


def lesson(mini, real):
    """Two verdicts read together; 'inside the margin' is part of the word (a size, not only a sign)."""
    small = lambda c: c['verdict'] == 'equivalent' or c['inside_margin']  # noqa: E731
    if real['verdict'] == 'unresolved':
        return 'unresolved'
    if (mini['verdict'], mini['inside_margin']) == (real['verdict'], real['inside_margin']):
        return 'kept'
    if small(mini) and small(real):
        return 'both inside the margin'
    return 'reversed' if {mini['verdict'], real['verdict']} == {'better', 'worse'} else 'moved'


def table(mini, reals):
    """One row per real-model family row: both sides' difference and verdict, and the lesson."""
    named = mini_verdicts(mini)
    mini_name = {m: mini_arm for m, (mini_arm, _) in ARMS.items()}
    rows = []
    for path, s in reals:
        fam = [{k: r[k] for k in ('a', 'b', 'kind', 'column')} for r in s['family']]
        for r in judge(fam, s['arms'], s['settings']['margins']):
            a, b = METHOD.get(r['a']), METHOD.get(r['b'])
            real = dict(column=r['column'], diff=r['diff'], ci=r['ci'], verdict=r['verdict'],
                        inside_margin=r['inside_margin'], file=path)
            at = where(r['column'], s['settings']['L']) if r['kind'] == 'loss' else 'passkey'
            col = mini_column(mini, at) if r['kind'] == 'loss' else None
            m = named.get((mini_name.get(a), mini_name.get(b)), {}).get(col) if a and b and col else None
            mini_side = None if m is None else dict(column=col, diff=m['diff'], ci=m['ci'], verdict=m['verdict'],
                                                    inside_margin=m['inside_margin'], file=MINI)
            rows.append(dict(a=a or r['a'], b=b or r['b'], kind=r['kind'], at=at, real=real, mini=mini_side,
                             outcome=lesson(mini_side, real) if mini_side else
                             'not measured on the miniature'))
    if not any(r['mini'] for r in rows):
        raise DataError(f"{MINI} holds none of the real model's declared contrasts; rerun make mini-s15")
    return rows


def markdown(rows):
    lines = ["Like with like at s = 1.5: the real model's declared contrasts beside the miniature's same contrasts "
             "(`python -m lab.verdicts.like_for_like`; miniature: dev windows, one base; SmolLM2: 12 windows, one per "
             "play). The crop is the sink-kept crop at cache positions on both.", '',
             '| A − B | measure | miniature, s = 1.5 | SmolLM2, s = 1.5 | lesson |', '|---|---|---|---|---|']
    fmt = units('loss')[1]

    def show(c):
        if c is None:
            return '—'
        word = c['verdict'] + (', inside the margin' if c['inside_margin'] else '')
        return f"{c['column']}: {fmt(c['diff'])} [{fmt(c['ci'][0])}, {fmt(c['ci'][1])}] {word}"
    for r in rows:
        what = "digits' loss" if r['kind'] == 'digits' else f"{r['kind']} {r['at']}"
        lines.append(f"| {r['a']} − {r['b']} | {what} | {show(r['mini'])} | {show(r['real'])} | **{r['outcome']}** |")
    return '\n'.join(lines) + '\n'


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--check', action='store_true', help='recompute and compare with the committed files; write nothing')
    args = ap.parse_args(argv)
    fix = "restore it from git or rerun its study (make mini-s15 / make real-model / make real-model-maps)"
    mini = read_json(os.path.join(ROOT, MINI), fix)
    rows = table(mini, [(p, read_json(os.path.join(ROOT, p), fix)) for p in REAL])
    files = {OUT + '.json': json.dumps(rows, indent=1, ensure_ascii=False) + '\n', OUT + '.md': markdown(rows)}
    if args.check:
        stale = [p for p, new in files.items() if not os.path.isfile(os.path.join(ROOT, p))
                 or open(os.path.join(ROOT, p), encoding='utf-8').read() != new]
        print('\n'.join(f"{p} is missing or stale; run python -m lab.verdicts.like_for_like" for p in stale)
              or f"all {len(rows)} rows recompute to the committed table")
        return 1 if stale else 0
    for p, new in files.items():
        atomic_write_text(os.path.join(ROOT, p), new)
    print(markdown(rows) + f"wrote {OUT}.json and .md: {len(rows)} rows, " + ', '.join(
        f"{sum(r['outcome'] == o for r in rows)} {o}" for o in ('kept', 'both inside the margin', 'moved', 'reversed', 'unresolved')))
    return 0


if __name__ == '__main__':
    cli(main)
