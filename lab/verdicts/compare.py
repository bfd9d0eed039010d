"""
The arms compared: eval.py's summary.json arms as table columns (each loss bucket and each retrieval room's distance
bucket) of paired comparisons (lab/stats.py's paired tests, Holm per column, the four verdicts): named contrasts,
every arm against the column's best or a reference arm (the crop), against an arm of another eval of the same
windows, and the same contrasts over several base models (where a curve breaks: lab/verdicts/breaks.py).
Only numpy, the standard library and lab/stats.py are used.
"""

import numpy as np

from lab.stats import FLOOR, compare_family, holm, newcombe_paired, paired_diff, seed_pairs, under_floor, verdict

# eval.py's settings of the verdicts (its DEFAULTS include them)
DEFAULTS = dict(
    contrasts='',           # named paired comparisons 'arm A | arm B; arm C | arm D' (arm ids, or display names)
    margin_loss=0.02,       # equivalence margin of a loss difference (nats)
    margin_exact=0.10,      # equivalence margin of an exact-match difference (fraction)
    rejudge='',             # an eval folder whose summary.json is judged again with these statistics (runs no model)
    combine='',             # eval folders of the same arms on other base models (out/a,out/b,...): the named contrasts and
                            # the crop comparisons across bases, into out_dir/bases.json and bases.md (runs no model)
    combine_minus='',       # with combine: the same evals on bases of another kind, one per combine folder in its order
                            # (e.g. without the sink, the same seeds): each contrast's difference between the two kinds,
                            # the pairs a random factor (between_kinds), also in bases.json and bases.md
    merge='',               # eval folders of one eval measured in parts (the same windows, other arms): one summary of
                            # all their arms, every comparison computed again (lab/verdicts/merge.py; runs no model)
)


def margins(cfg):
    """The equivalence margins of eval's settings, by outcome."""
    return {'loss': cfg['margin_loss'], 'exact_match': cfg['margin_exact']}


# kind of a compared column -> (the arm's field, the per-example outcome): the passkey and the rooms of lab/measure/retrieval.py
ROOMS = {'exact_match': ('retrieval', 'exact'), 'passkey_depth': ('passkey_depth', 'exact'),
         'needles': ('needles', 'exact'), 'needles_mq': ('needles_mq', 'exact'), 'recall_gain': ('recall', 'gain'),
         'needles_words': ('needles_words', 'exact'), 'needles_mv': ('needles_mv', 'exact'),  # lab/measure/ruler.py's
         'tracking': ('tracking', 'exact'),
         'passkey_text': ('passkey_text', 'exact')}  # the natural-language passkey (lab/measure/passkey_text.py)


# A room's verdicts are reported only where the arms' base passes the room inside L at least this often (its positive
# control). The lab's copying bases find 75-100% of what they were trained to copy inside L and 0-12% of the rooms in
# untrained formats (word needles, multi-value, tracking); any gate between splits them the same way. One half, not
# 80%: a base at 24 of 32 (75%, interval 57-89%) plainly copies, and a difference past L against it is not floor
# against floor.
CONTROL = 0.5


def inside_l(arm, kind, L):
    """An arm's exact match in a room over its distance buckets inside L (every distance < L; examples pooled), the
    room's positive control; None for loss and gain columns, or where the arm has no bucket inside L."""
    if kind == 'loss' or ROOMS[kind][1] != 'exact':
        return None
    rows = [r for r in arm.get(ROOMS[kind][0]) or [] if r['distance_hi'] < L]
    n = sum(r['n'] for r in rows)
    return sum(r['exact_match'] * r['n'] for r in rows) / n if n else None


def no_control(summary, kind, names):
    """Why a room's comparison of the named arms is not judged, or None: the base each arm comes from (the base arm
    with its checkpoint, else the eval's base) fails the room inside L (inside_l < CONTROL), so a difference past L
    would be floor against floor, not extension. Loss and gain columns, and evals without a base arm, are not gated."""
    if kind == 'loss' or ROOMS[kind][1] != 'exact':  # (before reading the summary: loss tables of any summary pass)
        return None
    arms, L = summary['arms'], summary['settings']['L']
    bases = {a['checkpoint']: a for a in arms if a.get('kind') == 'base'}
    main = bases.get(summary['settings'].get('base')) or next(iter(bases.values()), None)
    by = {a['name']: a for a in arms}
    for name in names:
        base = bases.get(by[name]['checkpoint'], main) if name in by else main
        rate = None if base is None else inside_l(base, kind, L)
        if rate is not None and rate < CONTROL:
            return f"no positive control: {base['name']} finds {100 * rate:.0f}% inside L, under {100 * CONTROL:.0f}%"
    return None


def stored_rows(settings):
    """(kind, column, row) for every paired comparison summary.json's settings store: against each column's best, the
    named contrasts, against each crop and against an arm's own crops."""
    for kind, cols in (settings.get('vs_best') or {}).items():
        for col, vb in cols.items():
            yield from ((kind, col, r) for r in vb['arms'].values())
    for table in ('contrasts', 'vs_self'):
        for kind, cols in (settings.get(table) or {}).items():
            yield from ((kind, col, r) for col, rows in cols.items() for r in rows)
    for kinds in (settings.get('vs_crop') or {}).values():
        for kind, cols in kinds.items():
            yield from ((kind, col, r) for col, rows in cols.items() for r in rows.values())


def stamp_gates(summary):
    """The gate stored with the verdict, when summary.json is written (eval.py, --rejudge, --merge): every comparison
    row whose base fails the room inside L gets not_judged = the reason (no_control, the one place that decides it);
    settings.gate records the control rate and the round-off floor (stats.FLOOR) the rows were judged with, and tells
    a reader that the rows carry the gate. Returns the summary."""
    st = summary['settings']
    for kind, column, r in stored_rows(st):
        r.pop('not_judged', None)
        why = no_control(summary, kind, (r['a'], r['b'])) or structural_zero(summary, kind, column, r)
        if why:
            r['not_judged'] = why
    st['gate'] = dict(control=CONTROL, floor=FLOOR)
    return summary


def structural_zero(summary, kind, column, row):
    """Why a retrieval row against a crop past its window is not judged, or None (issue 62: floors are not ties). A
    crop of window w finds nothing at distances >= w by construction; against that zero an arm that finds nothing
    too is floor against floor, and 'equivalent' is no tie. What such a row can say is whether the arm retrieves at
    all: its 'better' (and an unresolved) stands."""
    if kind == 'loss' or ROOMS[kind][1] != 'exact':
        return None
    by = {a['name']: a for a in summary['arms']}
    for crop, other in ((row.get('b'), row.get('a')), (row.get('a'), row.get('b'))):
        c = (by.get(crop) or {}).get('crop')
        bucket = next((b for b in (by.get(crop) or {}).get(ROOMS[kind][0]) or [] if b['bucket'] == column), None)
        if not c or bucket is None or bucket['distance_lo'] < c['window']:
            continue
        theirs = next((b for b in (by.get(other) or {}).get(ROOMS[kind][0]) or [] if b['bucket'] == column), None)
        if theirs is not None and theirs['exact_match'] == 0:
            return (f"floor against a structural zero: {crop} cannot reach a distance >= {c['window']}, and "
                    f"{other} finds none either")
        if row.get('verdict') == 'equivalent':
            return (f"no tie against a structural zero: {crop} cannot reach a distance >= {c['window']}; the "
                    f"question is whether {other} retrieves at all")
    return None


def not_judged(summary, kind, row, column=None):
    """Why a stored comparison row is not judged, or None: the reason summary.json stores on it (stamp_gates), or, in
    a summary written before the gate was stored (no settings.gate), the same rule decided now (the crop's structural
    zero where the caller names the row's column)."""
    if 'gate' in summary['settings']:
        return row.get('not_judged')
    return no_control(summary, kind, (row.get('a'), row.get('b'))) or \
        (structural_zero(summary, kind, column, row) if column else None)


def room_bucket(arm, kind, column):
    return next(r for r in arm[ROOMS[kind][0]] if r['bucket'] == column)


def unit_values(arm, column, kind):
    """[seed][unit] values of one arm for a paired test: a loss bucket's per-window means (exact when the arm has
    them, else the design's), or a passkey / needle / recall bucket's per-example outcomes."""
    if kind == 'loss':
        return np.array(arm['per_window'][column] if arm['per_window'][column] is not None
                        else arm['per_window_design'][column])
    return np.array([[np.nan if v is None else v for v in r]
                     for r in room_bucket(arm, kind, column)['per_example'][ROOMS[kind][1]]], dtype=float)


def paired(a, b, column, kind):
    """(values of a, values of b) on the same units: both arms' exact bucket means when both have them, else both
    arms' means over the same sampled positions; in a room, the examples both arms scored."""
    if kind == 'loss' and (a['per_window'][column] is None or b['per_window'][column] is None):
        return np.array(a['per_window_design'][column]), np.array(b['per_window_design'][column])
    x, y = unit_values(a, column, kind), unit_values(b, column, kind)
    if kind == 'loss':
        return x, y
    both = ~np.isnan(x).any(0) & ~np.isnan(y).any(0)  # a moving-scale arm scores a room's first windows only
    return x[:, both], y[:, both]


def columns(results):
    """The compared columns: (kind, column) for every loss bucket and every distance bucket of the passkey and of
    each retrieval room the arms were measured on."""
    return [('loss', c) for c in results[0]['buckets']] + \
        [(kind, r['bucket']) for kind, (field, _) in ROOMS.items() for r in results[0].get(field) or []]


def mean_of(arm, kind, column):
    """The value a column ranks arms by, lower = better: the loss, else minus exact match (or minus the gain)."""
    if kind == 'loss':
        return arm['buckets'][column]
    return -room_bucket(arm, kind, column)['exact_match' if ROOMS[kind][1] == 'exact' else 'gain']


def family(by, pairs, kind, column, margins):
    """One table column's paired comparisons of arm pairs [(a, b), ...], Holm-corrected together
    (lab.stats.compare_family): rows with a, b, diff = a - b, ci, p, p_holm and the verdict of a against b. Arms with
    several seeds each are paired by seed value (their 'seeds' lists), never by list position: ValueError when two
    such arms ran different seeds."""
    fam = [(f"{x} vs {y}", *paired(by[x], by[y], column, kind), (by[x].get('seeds'), by[y].get('seeds')))
           for x, y in pairs]
    exact = kind != 'loss' and ROOMS[kind][1] == 'exact'
    rows = compare_family(fam, margins['exact_match' if exact else 'loss'], binary=exact,
                          higher_is_better=kind != 'loss')
    return [dict(r, a=x, b=y) for r, (x, y) in zip(rows, pairs)]


def compare(results, pairs, margins):
    """The named contrasts in every column: {kind: {column: [row per pair]}}."""
    by, out = {a['name']: a for a in results}, {}
    for kind, c in columns(results):
        out.setdefault(kind, {})[c] = family(by, pairs, kind, c, margins)
    return out


def vs_best(results, margins):
    """Per column, every arm against the column's best mean (lowest loss, highest exact match), Holm within the
    column: {kind: {column: dict(best=name, arms={name: row})}}."""
    by, out = {a['name']: a for a in results}, {}
    for kind, c in columns(results):
        best = min(results, key=lambda a: mean_of(a, kind, c))['name']
        rows = family(by, [(a['name'], best) for a in results if a['name'] != best], kind, c, margins)
        out.setdefault(kind, {})[c] = dict(best=best, arms={r['a']: r for r in rows})
    return out


def vs_reference(results, ref, margins):
    """Every arm against one reference arm (the crop control) in every column, Holm within the column:
    {kind: {column: {name: row}}}, the verdict that of the arm against the reference."""
    by, out = {a['name']: a for a in results}, {}
    for kind, c in columns(results):
        rows = family(by, [(a['name'], ref) for a in results if a['name'] != ref], kind, c, margins)
        out.setdefault(kind, {})[c] = {r['a']: r for r in rows}
    return out


def vs_self(results, margins):
    """Every arm against its own crops (eval's --self_crop): {kind: {column: [row per (arm, its crop)]}}, Holm within the
    column, diff = arm - its crop (negative loss: the arm gains from what its window cannot see); None when no arm has
    one."""
    pairs = [(a['self_crop_of'], a['name']) for a in results if a.get('self_crop_of')]
    return compare(results, pairs, margins) if pairs else None


def across_bases(summaries, margins):
    """Contrasts measured on several base models (each summary.json an eval of the same windows and examples on
    another base): every named contrast and every arm against each crop found on every base. Bases are a paired
    random factor and windows (or examples) the units: D[base, unit] = A - B (each arm's seeds averaged), diff its
    mean, se^2 = var(unit means over bases)/N + var(base means)/bases (lab.stats.paired_diff with the bases as
    paired seeds; Welch-Satterthwaite df), so that base-to-base variation counts and three bases that happen to agree
    do not give a zero-width interval (the former t over the bases' three diffs did: ci [d, d], p = 0). For 0/1
    outcomes the interval is widened to cover Newcombe's on the pooled outcomes of every base. Holm within the
    column, the usual verdict, and beside it each base's own verdict and `holds` (every base's verdict is the same).
    Returns {kind: {column: [dict(name, diffs, verdicts, diff, ci, p, p_holm, verdict, holds, identical, method),
    ...]}}; identical as in stats.compare_family (the only 'equivalent' a zero-width interval can give)."""
    if len(summaries) < 2:
        raise ValueError(f'across_bases needs the evals of at least 2 bases, got {len(summaries)}')
    tables, arms = base_tables(summaries), [{a['name']: a for a in s['arms']} for s in summaries]
    out = {}
    for kind, cols in tables[0].items():
        exact = kind != 'loss' and ROOMS[kind][1] == 'exact'
        for col, rows in cols.items():
            found = []
            for row in rows:
                got = [next((o for o in t.get(kind, {}).get(col, []) if o['name'] == row['name']), None) for t in tables]
                if any(g is None for g in got) or any(row['a'] not in by or row['b'] not in by for by in arms):
                    continue
                vals = [paired(by[row['a']], by[row['b']], col, kind) for by in arms]
                if len({x.shape[1] for x, _ in vals}) > 1:  # not the same units on every base
                    continue
                X, Y = np.stack([x.mean(0) for x, _ in vals]), np.stack([y.mean(0) for _, y in vals])
                res = paired_diff(X, Y, paired_seeds=True)
                floor = not exact and under_floor(X, Y)  # every base's every window within round-off
                if exact:  # every base's (seed, example) pairs pooled, counted per example
                    pairs = [seed_pairs(x, y, False) for x, y in vals]
                    pooled = [np.concatenate([p[i].ravel() for p in pairs]) for i in (0, 1)]
                    nc = newcombe_paired(*pooled, per_unit=len(pooled[0]) // vals[0][0].shape[1])
                    res['ci'] = [min(res['ci'][0], nc[0]), max(res['ci'][1], nc[1])]
                why = next((w for w in (no_control(s, kind, (row['a'], row['b'])) for s in summaries) if w), None)
                found.append(dict(name=row['name'], diffs=[g['diff'] for g in got], verdicts=[g['verdict'] for g in got],
                                  diff=res['diff'], ci=res['ci'], p=res['p'], method='bases-random-factor', floor=floor,
                                  **({'no_control': why} if why else {})))  # a base fails the room inside L
            for r, ph in zip(found, holm([r['p'] for r in found])):
                r['p_holm'] = ph
                r['identical'] = r.pop('floor') or r['diff'] == r['ci'][0] == r['ci'][1] == 0  # every pair equal
                r['verdict'] = 'equivalent' if r['identical'] else verdict(
                    r['ci'], ph, margins['exact_match' if exact else 'loss'], higher_is_better=kind != 'loss')
                row = next(x for x in rows if x['name'] == r['name'])
                zero = [structural_zero(s, kind, col, dict(r, a=row['a'], b=row['b'])) for s in summaries]
                if 'no_control' not in r and all(zero):  # a crop's structural zero on every base
                    r['no_control'] = zero[0]
                r['holds'] = all(v == r['verdict'] for v in r['verdicts'])
            if found:
                out.setdefault(kind, {})[col] = found
    return out


def between_kinds(summaries, others, margins):
    """--combine with --combine_minus: does a design change an arm or a contrast? summaries are evals of bases of one
    kind (e.g. with a learned sink), others the same evals of bases of another kind (without), in pairs (the same
    seed, say). For every arm found on every base of both kinds, x[pair, unit] its value on the pair's first base and
    y on its second; for every contrast, x = A - B on the first base and y = A - B on the second (each arm's seeds
    averaged). diff = mean(x - y), the pairs a paired random factor as across_bases' bases (stats.paired_diff: se^2 =
    var(unit means over pairs)/N + var(pair means)/pairs). A base arm is matched by its kind, named 'base', so that
    'base sinks (L=128) vs crop' meets 'base (L=128) vs crop'. Loss and gain columns only: a difference of two 0/1
    differences has no exact interval here. Holm within the column. Returns {kind: {column: [dict(name, diff, ci, p,
    p_holm, verdict, inside_margin, firsts, seconds, method)]}}, firsts and seconds each kind's per-pair x and y."""
    if len(summaries) != len(others) or len(summaries) < 2:
        raise ValueError(f'between_kinds needs two or more pairs of evals, got {len(summaries)} and {len(others)}')
    out = {}
    for kind, col in columns(summaries[0]['arms']):
        if kind != 'loss' and ROOMS[kind][1] == 'exact':
            continue
        found = []
        for key, x, y in between_values(summaries, others, kind, col):
            if len({u.shape for u in [*x, *y]}) == 1:  # the same units on every base
                res = paired_diff(np.stack(x), np.stack(y), paired_seeds=True)
                found.append(dict(name=key, diff=res['diff'], ci=res['ci'], p=res['p'], method='pairs-random-factor',
                                  floor=under_floor(np.stack(x), np.stack(y)),
                                  firsts=[float(u.mean()) for u in x], seconds=[float(u.mean()) for u in y]))
        margin = margins['loss']  # (a gain is in nats too)
        for r, ph in zip(found, holm([r['p'] for r in found])):
            r['p_holm'] = ph
            r['identical'] = r.pop('floor') or r['diff'] == r['ci'][0] == r['ci'][1] == 0  # every window equal (or round-off)
            r['verdict'] = 'equivalent' if r['identical'] else verdict(r['ci'], ph, margin, higher_is_better=kind != 'loss')
            r['inside_margin'] = r['verdict'] in ('better', 'worse') and -margin <= r['ci'][0] <= r['ci'][1] <= margin
        if found:
            out.setdefault(kind, {})[col] = found
    return out


def between_values(summaries, others, kind, col):
    """between_kinds' rows of one column before the test: (name, x, y) for each arm found on every base of both kinds
    and then each contrast, x and y one array of unit values per pair (the first kind's, the second's)."""
    kinds = (summaries, others)
    named = [[keyed(t, s) for t, s in zip(base_tables(g), g)] for g in kinds]
    by_name = [[{a['name']: a for a in s['arms']} for s in g] for g in kinds]
    by_key = [[{('base' if a.get('kind') == 'base' else a['name']): a for a in s['arms']} for s in g] for g in kinds]
    for key in by_key[0][0]:  # each arm: on the first kind's base against on its pair
        if all(key in by for g in by_key for by in g):
            xy = [paired(a[key], b[key], col, kind) for a, b in zip(*by_key)]
            yield key, [x.mean(0) for x, _ in xy], [y.mean(0) for _, y in xy]
    for key in named[0][0].get(kind, {}).get(col, {}):  # each contrast: A - B on the first kind against on the second
        rows = [[t.get(kind, {}).get(col, {}).get(key) for t in g] for g in named]
        if all(r and r['a'] in by and r['b'] in by for g, b in zip(rows, by_name) for r, by in zip(g, b)):
            x, y = ([np.subtract(*(v.mean(0) for v in paired(by[r['a']], by[r['b']], col, kind)))
                     for r, by in zip(g, b)] for g, b in zip(rows, by_name))
            yield key, x, y


def keyed(table, summary):
    """A base_tables entry as {kind: {column: {key: row}}}, the key the row's name with the base arm called 'base'
    (so that the same contrast on bases of other names meets; lab.verdicts.compare.between_kinds)."""
    base = next((a['name'] for a in summary['arms'] if a.get('kind') == 'base'), None)
    def key(name):
        return ' vs '.join('base' if part == base else part for part in name.split(' vs '))
    return {k: {c: {key(r['name']): r for r in rows} for c, rows in cols.items()} for k, cols in table.items()}


def first_difference(summary, other, keys):
    """The first of `keys` whose setting differs between two eval summaries (None when they all agree)."""
    return next((k for k in keys if summary['settings'].get(k) != other['settings'].get(k)), None)


def base_tables(summaries):
    """For across_bases: each summary's named contrasts plus its every-arm-against-the-crop rows and its every arm
    against its own crop (vs_self, where the eval had --self_crop), one {kind: {column: [row, ...]}} per summary."""
    tables = []
    for s in summaries:
        rows = {k: {c: list(r) for c, r in cols.items()} for k, cols in (s['settings'].get('contrasts') or {}).items()}
        for kind, cols in [*crop_rows(s).items(), *(s['settings'].get('vs_self') or {}).items()]:
            for c, r in cols.items():
                rows.setdefault(kind, {}).setdefault(c, []).extend(r)
        tables.append(rows)
    return tables


def crop_rows(summary):
    """summary.json's every-arm-against-the-crop comparisons as contrast rows ({kind: {column: [row, ...]}}, each
    named 'arm vs crop'), so that across_bases can take them like the named contrasts."""
    out = {}
    for crop, kinds in (summary['settings'].get('vs_crop') or {}).items():
        for kind, cols in kinds.items():
            for col, arms in cols.items():
                out.setdefault(kind, {}).setdefault(col, []).extend(
                    dict(row, name=f"{arm} vs {crop}") for arm, row in arms.items())
    return out


def vs_arm_of(summary, other, margins, ref=None):
    """Every arm of one eval's summary.json against one arm of another eval of the same windows, by default its
    first crop control (e.g. the fine-tunes of `make long-s8-2048` against the crop of `make eval-2048`; ref names
    another arm, e.g. its zero-shot Dynamic YaRN): vs_reference over this file's arms plus that arm. The two files
    must share T, the windows and the rooms' examples, else the pairing would be of different text: ValueError
    naming what differs."""
    key = first_difference(summary, other, ('T', 'windows') + tuple(field for field, _ in ROOMS.values()))
    if key:
        raise ValueError(f'the two evals differ in {key}: pair only evals of the same windows and examples '
                         f'(same T, num_windows, seed and room settings)')
    pick = next((a for a in other['arms'] if (a['name'] == ref if ref else a.get('crop'))), None)
    if pick is None:
        raise ValueError(f"no arm {ref or 'crop'!r} in the other eval; it has {[a['name'] for a in other['arms']]}")
    return vs_reference([a for a in summary['arms'] if a['name'] != pick['name']] + [pick], pick['name'], margins)
