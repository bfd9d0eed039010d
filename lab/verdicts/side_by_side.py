"""
Does the miniature's lesson hold on a real model? Each comparison the miniature makes about the headline methods
(assets/demo/summary.json: the 0.8M character model, L = 128, zero-shot at s = 8, its last bucket 512-1024) is made
again, with the same paired test, on SmolLM2-135M (assets/studies/real_model/summary.json: L = 8,192, s = 1.5, its
last bucket 8,192-12,288), and the two verdicts are set side by side: kept (the same word), reversed (better <->
worse), unresolved (the real model's test cannot decide), or moved (any other change, e.g. better -> equivalent).
Both sides are recomputed from the per-window values their summaries store (Holm within each group of rows), so
every row can be redone from the two committed files. A passkey row whose base fails the room inside L on either
side (lab.verdicts.compare.no_control, the rule eval.py stores on its own rows as not_judged) is left out, named
under the table: it is no verdict to keep or reverse.



  python -m lab.verdicts.side_by_side            # writes assets/studies/real_model/side_by_side.{json,md}
  python -m lab.verdicts.side_by_side --check    # recomputes and compares with the committed files
"""
import argparse
import json
import os

from data.common import DataError, atomic_write_text, read_json
from lab.engine.cli import cli
from lab.verdicts.compare import family, no_control
from lab.verdicts.summary_md import units

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MINI, REAL = 'assets/demo/summary.json', 'assets/studies/real_model/summary.json'
OUT = 'assets/studies/real_model/side_by_side'
# the arms on each side: (miniature's name, SmolLM2's name); YaRN at its default beta_fast = 32 on both
ARMS = {'PI': ('linear s=8 zero-shot', 'linear s=1.5 zero-shot'), 'NTK-aware': ('ntk s=8 zero-shot', 'ntk s=1.5 zero-shot'),
        'YaRN': ('yarn s=8 zero-shot', 'yarn s=1.5 zero-shot'), 'Dynamic NTK': ('dynamic zero-shot', 'dynamic zero-shot'),
        'ReRoPE': ('rerope w=64 zero-shot', 'rerope w=4096 zero-shot'),
        'Self-Extend': ('self_extend w=64 G=32 zero-shot', 'self_extend w=2048 G=4 zero-shot'),
        'as trained': ('base (L=128)', 'base (L=8192)'), 'crop': ('crop w=128 (sliding)', 'crop w=8192 (sliding)')}
GROUPS = {'contrasts': [('YaRN', 'PI'), ('YaRN', 'NTK-aware'), ('Dynamic NTK', 'NTK-aware'), ('Self-Extend', 'ReRoPE')],
          'against the crop': [(m, 'crop') for m in ('as trained', 'PI', 'NTK-aware', 'YaRN', 'Dynamic NTK', 'ReRoPE',
                                                     'Self-Extend')]}
# the passkey on each side: the miniature's is its trained copy format, SmolLM2's the natural-language one
PASSKEY = {'mini': 'exact_match', 'real': 'passkey_text'}


def last_column(s, kind):
    """The farthest bucket: the last loss bucket, or the passkey's farthest distance bucket ([] when it has none)."""
    arm = s['arms'][0]
    if kind == 'loss':
        return [list(arm['buckets'])[-1]]
    return [r['bucket'] for r in arm.get({'exact_match': 'retrieval'}.get(kind, kind)) or []][-1:]


def present(summaries):
    """{group: [pairs]} of the GROUPS pairs whose four arms both summaries hold (a study run in part has fewer)."""
    names = {side: {a['name'] for a in s['arms']} for side, s in summaries.items()}
    have = lambda m, side: ARMS[m][side == 'real'] in names[side]  # noqa: E731
    return {g: [(a, b) for a, b in pairs if all(have(m, side) for m in (a, b) for side in names)]
            for g, pairs in GROUPS.items()}


def judge(s, side, kind, groups):
    """{group: {column: [row per pair]}} of one side: each group's pairs in its farthest bucket, Holm within it."""
    by = {a['name']: a for a in s['arms']}
    return {g: {c: family(by, [(ARMS[a][side == 'real'], ARMS[b][side == 'real']) for a, b in pairs], kind, c,
                          s['settings']['margins']) for c in last_column(s, kind)}
            for g, pairs in groups.items() if pairs}


def outcome(mini, real):
    if real == 'unresolved':
        return 'unresolved'
    if mini == real:
        return 'kept'
    return 'reversed' if {mini, real} == {'better', 'worse'} else 'moved'


def gated(summaries, kinds, a, b):
    """Why a pair is not judged on either side (its base fails the room inside L), or None."""
    return next((w for side, s in summaries.items()
                 if (w := no_control(s, kinds[side], [ARMS[m][side == 'real'] for m in (a, b)]))), None)


def table(mini, real, skipped=None):
    """The rows: for each group, each pair both summaries hold and each measure (loss, passkey), both sides'
    difference and verdict in the farthest bucket, and the outcome. A pair not judged on either side is left out
    (appended to skipped as (a, b, measure, why) when a list is given)."""
    rows, groups = [], present({'mini': mini, 'real': real})
    if not any(groups.values()):
        raise DataError(f"{MINI} and {REAL} share none of the table's arms ({', '.join(ARMS)}); they are not the "
                        f"evals this table reads (make demo / make real-model-all)")
    for measure in ('loss', 'passkey'):
        kinds = {'mini': 'loss', 'real': 'loss'} if measure == 'loss' else PASSKEY
        sides = {side: judge(s, side, kinds[side], groups) for side, s in (('mini', mini), ('real', real))}
        for group, pairs in groups.items():
            for i, (a, b) in enumerate(pairs):
                cell = {side: [(c, rs[i]) for c, rs in sides[side][group].items()] for side in sides}
                if not cell['mini'] or not cell['real']:
                    continue  # (a passkey with no bucket on one side)
                why = gated({'mini': mini, 'real': real}, kinds, a, b)
                if why:
                    (skipped if skipped is not None else []).append((a, b, measure, why))
                    continue
                rows.append(dict(group=group, a=a, b=b, measure=measure,
                                 **{side: dict(column=c, diff=r['diff'], ci=r['ci'], verdict=r['verdict'])
                                    for side, [(c, r)] in cell.items()},
                                 outcome=outcome(cell['mini'][0][1]['verdict'], cell['real'][0][1]['verdict'])))
    return rows


def markdown(rows, skipped=()):
    lines = [f"| | comparison | miniature ({MINI}) | SmolLM2-135M ({REAL}) | lesson |", '|---|---|---|---|---|']
    for r in rows:
        fmt = units('loss' if r['measure'] == 'loss' else 'exact_match')[1]
        show = lambda c: f"{c['column']}: {fmt(c['diff'])} [{fmt(c['ci'][0])}, {fmt(c['ci'][1])}] {c['verdict']}"  # noqa: E731
        lines.append(f"| {r['measure']} | {r['a']} vs {r['b']} | {show(r['mini'])} | {show(r['real'])} | "
                     f"**{r['outcome']}** |")
    done = {(r['a'], r['b']) for r in rows}
    left = [f"{a} vs {b}" for pairs in GROUPS.values() for a, b in pairs if (a, b) not in done]
    left = [x for x in left if not any((a, b) == tuple(x.split(' vs ')) for a, b, *_ in skipped)]
    gate = ''.join(f"\nNot judged, {m}: {a} vs {b} ({why}).\n" for a, b, m, why in skipped)
    return '\n'.join(lines) + '\n' + gate + (f"\nNot run on SmolLM2 yet (its summary lacks an arm): {'; '.join(left)}.\n"
                                             if left else '')


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--check', action='store_true', help='recompute and compare with the committed files; write nothing')
    args = ap.parse_args(argv)
    fix = "restore it from git or rerun its eval (make demo / make real-model-all)"
    skipped = []
    rows = table(*(read_json(os.path.join(ROOT, f), fix) for f in (MINI, REAL)), skipped)
    text, md = json.dumps(rows, indent=1, ensure_ascii=False) + '\n', markdown(rows, skipped)
    if args.check:
        stale = [f"{OUT}{ext}" for ext, new in (('.json', text), ('.md', md))
                 if not os.path.isfile(os.path.join(ROOT, OUT + ext)) or open(os.path.join(ROOT, OUT + ext),
                                                                               encoding='utf-8').read() != new]
        print('\n'.join(f"{p} is missing or stale; run python -m lab.verdicts.side_by_side" for p in stale)
              or f"all {len(rows)} rows recompute to the committed table")
        return 1 if stale else 0
    for ext, new in (('.json', text), ('.md', md)):
        atomic_write_text(os.path.join(ROOT, OUT + ext), new)
    print(f"wrote {OUT}.json and .md: {len(rows)} rows, " + ', '.join(
        f"{sum(r['outcome'] == o for r in rows)} {o}" for o in ('kept', 'reversed', 'unresolved', 'moved')))
    return 0


if __name__ == '__main__':
    cli(main)
