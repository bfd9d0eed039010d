"""
Do two runs of one eval reach the same verdicts? Every paired comparison summary.json stores (each arm against each
column's best, the named contrasts, each arm against each crop) is read from both files and matched by what it
compares; the answer is the share that kept its word, the ones that reversed (better <-> worse), and how the rest
moved. Only the comparisons the lab judges count: a row that is not judged (its base fails the room inside L: the
not_judged summary.json stores on it) or identical (the same values, or within the round-off floor) is left out. For
a rerun on another machine, another torch, other seeds:

  python -m lab.verdicts.agreement assets/demo/summary.json assets/demo/xeon_summary.json
"""
import argparse
import collections

from data.common import DataError, read_json
from lab.engine.cli import cli
from lab.verdicts.compare import not_judged


def verdicts(summary):
    """{(table, kind, column, A, B): verdict} of every judged comparison in summary.json's settings: rows not judged
    (compare.not_judged: the reason the row stores, or for an older summary the rule decided now) and identical ones
    (the same values, e.g. the crop against itself; summaries written before 'identical' was stored mark only the
    crop itself) left out."""
    s, out = summary['settings'], {}

    def judged(kind, r, col):
        return not r.get('identical') and not not_judged(summary, kind, r, col)
    for kind, cols in (s.get('contrasts') or {}).items():
        for col, rows in cols.items():
            out.update({('contrast', kind, col, r['a'], r['b']): r['verdict'] for r in rows if judged(kind, r, col)})
    for crop, kinds in (s.get('vs_crop') or {}).items():
        for kind, cols in kinds.items():
            for col, rows in cols.items():
                out.update({('crop', kind, col, n, crop): r['verdict'] for n, r in rows.items()
                            if n != crop and judged(kind, r, col)})
    for kind, cols in (s.get('vs_best') or {}).items():
        for col, vb in cols.items():
            out.update({('best', kind, col, n, vb['best']): r['verdict'] for n, r in vb['arms'].items()
                        if judged(kind, r, col)})
    return out


def agreement(a, b):
    """(n in both, n the same word, [reversed keys], Counter of (a's word, b's word) for the ones that moved)."""
    va, vb = verdicts(a), verdicts(b)
    both = [k for k in va if k in vb]
    moved = collections.Counter((va[k], vb[k]) for k in both if va[k] != vb[k])
    flipped = [k for k in both if {va[k], vb[k]} == {'better', 'worse'}]
    return len(both), len(both) - sum(moved.values()), flipped, moved


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('a', help="one run's summary.json")
    ap.add_argument('b', help="the other's")
    args = ap.parse_args(argv)
    fix = "pass two eval.py outputs (out_dir/summary.json)"
    runs = [read_json(path, fix) for path in (args.a, args.b)]
    for path, run in zip((args.a, args.b), runs):
        try:
            verdicts(run)
        except (KeyError, TypeError, AttributeError) as e:
            raise DataError(f"{path} is not an eval's summary.json (reading its settings: {e!r}); {fix}") from None
    n, same, flipped, moved = agreement(*runs)
    if not n:
        raise DataError("the two summaries share no comparison (other arms or buckets); nothing to compare")
    print(f"{n} judged verdicts in both (of {len(verdicts(runs[0]))} and {len(verdicts(runs[1]))}: against a column's "
          f"best, the others compare with another best arm; not judged and identical rows left out); {same} kept their "
          f"word ({100 * same / n:.1f}%); {len(flipped)} reversed")
    for (x, y), k in moved.most_common():
        print(f"  {x} -> {y}: {k}")
    for key in flipped:
        print('  reversed: ' + ' | '.join(key))
    return 0


if __name__ == '__main__':
    cli(main)
