"""
A declared family of paired contrasts over independent units (lab/doc_study.py's windows, one per document):
each row A - B a paired test on one outcome (paired t; 0/1 outcomes McNemar with Newcombe's interval), the p-values
Holm-adjusted across the whole family, each row one of better / worse / equivalent (inside its kind's margin) /
unresolved. lab.verdicts.claims recomputes a claim's row with it from the per-window values a summary stores.
"""
import numpy as np

from lab.stats import holm, paired_diff, under_floor, verdict


def field(row):
    return f"loss {row['column']}" if row['kind'] == 'loss' else row['kind']


def judge(family, values, margins):
    """The family's rows, each a paired test over the windows, Holm across the family: rows with diff (A - B), ci,
    p, p_holm, verdict. values: {arm: {field: [per window]}}."""
    out = []
    for r in family:
        a, b = (np.array(values[x][field(r)], dtype=float)[None] for x in (r['a'], r['b']))
        out.append(dict(r, **paired_diff(a, b, binary=r['kind'] == 'exact'),
                        identical=r['kind'] != 'exact' and under_floor(a, b)))  # within round-off: the same model
    for r, ph in zip(out, holm([r['p'] for r in out])):
        m = margins[r['kind']]
        r.update(identical=r['identical'] or r['diff'] == r['ci'][0] == r['ci'][1] == 0)
        r.update(p_holm=ph, margin=m, verdict='equivalent' if r['identical'] else
                 verdict(r['ci'], ph, m, higher_is_better=r['kind'] == 'exact'))
        r['inside_margin'] = r['verdict'] in ('better', 'worse') and -m <= r['ci'][0] and r['ci'][1] <= m
    return out
