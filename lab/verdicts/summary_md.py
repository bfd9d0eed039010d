"""
summary.md and bases.md: an eval's summary.json (eval.py) and a combine's bases.json (eval.py --combine) as Markdown
tables, one row an arm or a contrast; marks and verdicts come from lab.verdicts.compare's results in them. Reads and draws
nothing (the pictures are plot.py's).
"""
import numpy as np

from lab.verdicts.compare import CONTROL, no_control, not_judged, paired

SINK_EPS = 0.3  # a sink head puts more than this mean weight on the first token (Gu et al. 2024, "When Attention
                # Sink Emerges in Language Models": Sink^eps, the share of heads over layers with eps = 0.3)


def header(first, cols):
    return [f"| {first} | " + ' | '.join(cols) + ' |', '|---' * (len(cols) + 1) + '|']


def table(title, cols, arms, cell):
    return ['', title, ''] + header('arm', cols) + \
        [f"| {a['name']} | " + ' | '.join(cell(a, c) for c in cols) + ' |' for a in arms]


ROOM_TABLES = [  # (kind in settings.vs_best, arm field, the table's title from settings)
    ('exact_match', 'retrieval', lambda s: f"Passkey ({s['retrieval']['len']} tokens at position "
     f"{s['retrieval']['pos']}, cue {s['retrieval']['cue']}, {s['retrieval']['examples']} examples per bucket, the "
     f"same for every arm and seed): exact match [95% interval, seeds as repeated looks] / gain over the no-copy "
     f"control (nats), by distance; marks as above:"),
    ('passkey_depth', 'passkey_depth', lambda s: f"Depth passkey ({s['passkey_depth']['len']} tokens, first copy "
     f"at a random depth, so distance and position vary apart): exact match [95% interval] by distance:"),
    ('needles', 'needles', lambda s: f"Multi-key needles ({s['needles']['needles']} key-value records in the "
     f"window, one asked; key {s['needles']['key_len']}, value {s['needles']['value_len']} tokens): exact match of "
     f"the value [95% interval] by distance from the asked needle to the query:"),
    ('needles_mq', 'needles_mq', lambda s: "Multi-query needles (the same, two keys asked one after the other; "
     "both values must be exact):"),
    ('recall_gain', 'recall', lambda s: f"Natural-text recall (a held-out line of {s['recall']['len']} tokens "
     f"repeated at distance d): gain over the same line with no earlier copy (nats) [95% interval] by distance:"),
    ('needles_words', 'needles_words', lambda s: f"Needles in a format the base never trained on "
     f"({s['needles_words']['needles']} records ' <word> is <digits>', keys words of the play, values of "
     f"{s['needles_words']['value_len']} digits; the multi-key needles above are the trained alphabet): exact match "
     f"of the value [95% interval] by distance:"),
    ('needles_mv', 'needles_mv', lambda s: f"Multi-value needles (one key written with {s['needles_mv']['values']} "
     f"values among {s['needles_mv']['distractors']} other records; after the key every value in the order written, "
     f"all exact): exact match by distance from the key's first record to the query:"),
    ('tracking', 'tracking', lambda s: "Variable tracking (A:K and K:V at two places, the query A: asks for V, which "
     "no literal match finds): exact match of V by distance from the earlier record to the query:"),
    ('passkey_text', 'passkey_text', lambda s: f"Natural-language passkey ({s['passkey_text']['format']}: a "
     f"{s['passkey_text']['digits']}-digit key in filler text, asked at the end, greedy exact match; "
     f"{s['passkey_text']['examples']} examples per bucket): exact match [95% interval] by distance:"),
]
KIND_NAMES = {'loss': 'loss', 'exact_match': 'passkey exact match', 'passkey_depth': 'depth-passkey exact match',
              'needles': 'needle exact match', 'needles_mq': 'multi-query needle exact match',
              'recall_gain': 'natural-text recall gain', 'needles_words': 'word-needle exact match',
              'needles_mv': 'multi-value needle exact match', 'tracking': 'variable-tracking exact match',
              'passkey_text': 'natural-language passkey exact match'}
MARK = {'equivalent': ' ≈', 'unresolved': ' ?', 'worse': '', 'better': ' !'}  # against the column's best (*)


def mark(summary, kind, column, name):
    vb = summary['settings']['vs_best'][kind][column]
    if vb['best'] == name:
        rows = list(vb['arms'].values())  # (each row holds the best arm: every row gated = its base fails the room)
        return '' if rows and all(not_judged(summary, kind, r) for r in rows) else ' *'
    if not_judged(summary, kind, vb['arms'][name]):  # a room the base fails inside L: no verdict to mark
        return ''
    return MARK[vb['arms'][name]['verdict']]


def room_gate(summary, kind, ref):
    """Why no difference in a room is judged, or None: every stored row against a column's best carries not_judged
    (its first reason), or, in a summary written before the gate was stored, the base ref fails the room inside L."""
    if 'gate' not in summary['settings']:
        return no_control(summary, kind, [ref['name']])
    rows = [r for vb in (summary['settings'].get('vs_best') or {}).get(kind, {}).values() for r in vb['arms'].values()]
    why = [not_judged(summary, kind, r) for r in rows]
    return why[0] if why and all(why) else None


def units(kind):
    """(unit, how a difference in it is written): nats for loss, recall gain and a passkey's digits' summed loss,
    points for exact match."""
    if kind in ('loss', 'recall_gain', 'digits'):
        return 'nats', lambda v: f"{v:+.3f}"
    return 'points', lambda v: f"{100 * v:+.0f}"


def word(r):
    """A comparison's verdict, 'better' / 'worse' marked when the whole interval lies inside the margin, 'equivalent'
    when the two arms gave exactly the same values (a zero-width interval)."""
    return r['verdict'] + (', inside the margin' if r.get('inside_margin') else ' (identical)' if r.get('identical')
                           else '')


def diff_cell(r, fmt, gated=False):
    return f"{fmt(r['diff'])} [{fmt(r['ci'][0])}, {fmt(r['ci'][1])}] {'not judged' if gated else word(r)}"


def contrast_table(title, rows_by_col, fmt, summary=None, kind='loss'):
    """One row per contrast, one column per bucket; with the summary, a room's rows whose base fails it inside L
    (compare.no_control) read 'not judged', the reason under the title."""
    cols = list(rows_by_col)
    rows = rows_by_col[cols[0]]
    why = [[summary and not_judged(summary, kind, rows_by_col[c][i]) for c in cols] for i in range(len(rows))]
    first = next((w for row in why for w in row if w), None)  # (each cell is gated on its own: a crop's structural
    if first:                                                 # zero is past its window only)
        title += f" (not judged where so marked: {first})"
    return ['', title, ''] + header('contrast', cols) + \
        [f"| {r['a']} vs {r['b']} | " + ' | '.join(diff_cell(rows_by_col[c][i], fmt, bool(why[i][j]))
                                                   for j, c in enumerate(cols)) + ' |' for i, r in enumerate(rows)]


def _shares(buckets, L, labels, label):
    """The share of each label over what was emitted in the buckets past L (pooled over seeds and examples);
    label(per_example, i, e): example i's emitted value e as a label."""
    got = dict.fromkeys(labels, 0)
    for b in [b for b in buckets if b['distance_lo'] >= L]:
        pe = b['per_example']
        for row in pe['emitted']:
            for i, e in enumerate(row):
                if e is not None:
                    got[label(pe, i, e)] += 1
    total = sum(got.values()) or 1
    return {c: v / total for c, v in got.items()}


def emitted_shares(buckets, L, k):
    """The needles' emitted-record shares over the buckets past L, k records a row: asked (the asked record's value),
    oldest / nearest (another record, the first / last one in the row), other, none (no record's value: -1)."""
    return _shares(buckets, L, ('asked', 'oldest', 'nearest', 'other', 'none'), lambda pe, i, e:
                   'asked' if e == pe['rank'][i] else 'none' if e < 0 else 'oldest' if e == 0 else
                   'nearest' if e == k - 1 else 'other')


def choice_shares(buckets, L, labels):
    """lab/measure/ruler.py's rooms: the share of each choice label (and 'none') emitted over the buckets past L."""
    return _shares(buckets, L, labels, lambda pe, i, e: e)


CHOICES = {'needles_mv': ['first', 'later', 'other', 'none'], 'tracking': ['answer', 'one hop', 'other', 'none']}
EMITTED = {'needles_mv': "Multi-value needles: which value the model starts to write after the key (past L): the first "
                         "one written (right), a later one of the key (the nearest: a 'copy the latest match' "
                         "shortcut), a distractor's, or none:",
           'tracking': "Variable tracking: what the model starts to write after A: (past L): V (two hops, right), K "
                       "(one hop: the value of the literal match A:K), a distractor's value, or none:"}


def per_play_table(s, arms, small=0.05):
    """Beside every small loss effect past L (|diff| < small nats: against a crop, against its own crop, a named
    contrast), the same paired difference within each held-out play (settings.window_docs; n windows): whether an
    effect is carried by every play or by a few windows of one."""
    plays = sorted(set(s.get('window_docs') or []))
    if len(plays) < 2:
        return []
    by, L = {a['name']: a for a in arms}, s['L']
    rows = [(c, r) for fam in [*(s.get('vs_crop') or {}).values(), s.get('vs_self') or {}, s.get('contrasts') or {}]
            for c, got in (fam.get('loss') or {}).items() if int(c.split('-')[0]) >= L
            for r in (got.values() if isinstance(got, dict) else got) if 0 < abs(r['diff']) < small]
    if not rows:
        return []
    docs = np.array(s['window_docs'])
    lines = ['', f"Small loss effects past L (|A − B| < {small:g} nats) within each held-out play (windows): A − B "
             f"per play, then over all windows with its verdict:", '',
             f"| A vs B | bucket | " + ' | '.join(f"{p} ({int((docs == p).sum())})" for p in plays) + ' | all |',
             '|---' * (len(plays) + 3) + '|']
    for col, r in rows:
        x, y = paired(by[r['a']], by[r['b']], col, 'loss')
        d = x.mean(0) - y.mean(0)
        lines.append(f"| {r['a']} vs {r['b']} | {col} | " + ' | '.join(f"{d[docs == p].mean():+.3f}" for p in plays)
                     + f" | {r['diff']:+.3f} {word(r)} |")
    return lines


def comparable_mean(arm, ref, column):
    """A sampled arm's bucket mean on the exact rows' scale: ref's exact mean plus the paired difference arm - ref on
    the positions both were scored at (lab.verdicts.compare.paired's design means; the difference of their means)."""
    design = lambda a: np.mean(np.array(a['per_window_design'][column], dtype=float))  # noqa: E731
    return float(ref['buckets'][column] + design(arm) - design(ref))


def at_commit(p):
    """'at commit abc1234', and ' (with uncommitted changes)' when tracked files differed from it (a provenance)."""
    return f"at commit {(p.get('commit') or '?')[:7]}{' (with uncommitted changes)' if p.get('changed') else ''}"


def merged_provenance(parts):
    """One line on the parts of a merged study (eval.py --merge; settings.merged): each part's commit, and whether the
    parts come from different commits or any from a tree with uncommitted changes (then their code may differ)."""
    provs = [p.get('provenance') or {} for p in parts]  # summaries written before issue 31 have none
    commits = [v.get('commit') for v in provs]
    at = [f"{p['folder']} {at_commit(v)}" for p, v in zip(parts, provs)]
    differ = [w for w, bad in (('different commits', len(set(commits) - {None}) > 1),
                               ('a changed tree', any(v.get('changed') for v in provs)),
                               ('an unrecorded commit', None in commits)) if bad]
    return (f"Merged from {len(parts)} parts: {', '.join(at)}; " +
            (f"they come from {' and '.join(differ)}, so their code may differ." if differ else
             "one commit, no tree changed."))


def summary_markdown(summary):
    s, arms = summary['settings'], summary['arms']
    m = s['margins']
    rule = (f"Verdicts are paired tests on the same windows or examples, seeds inside the interval, Holm-corrected "
            f"within each column: better/worse = adjusted p < 0.05; equivalent = the 95% paired interval inside "
            f"±{m['loss']:g} nats (loss) or ±{100 * m['exact_match']:g} points (exact match); unresolved = neither. "
            f"A room's differences are judged only where the base passes it inside L (at least {100 * CONTROL:.0f}%: "
            f"its positive control); elsewhere they read 'not judged'.")
    lines = [f"# Loss by position: {s['dataset']}, {s['num_windows']} windows of T={s['T']} tokens, L={s['L']}", '',
             f"Windows: seed {s['seed']}, inside {'held-out' if s.get('split', 'val') == 'val' else 'TRAINING'} "
             f"documents, the same for every arm. {s['protocol']}", '', rule]
    if s.get('provenance'):  # summaries written before issue 31 have none
        p = s['provenance']
        lines += ['', f"Made by `{p['command']}` {at_commit(p)}, {p['date']}, torch {p['torch']}, {p['machine']}."]
    if s.get('merged'):
        lines += ['', merged_provenance(s['merged'])]
    sampled = [f"{a['name']} ({', '.join(k for k, v in a['scoring']['buckets'].items() if v == 'sampled')})"
               for a in arms if 'sampled' in a['scoring']['buckets'].values()]
    ref = next((a for a in arms if a.get('kind') == 'base'), None)

    def loss_cell(a, c):
        half = f"{a['buckets'][c]:.3f} ± {(a['buckets_ci'][c][1] - a['buckets_ci'][c][0]) / 2:.3f}"
        if 'per_window' not in a or a['per_window'][c] is not None or ref is None or ref['per_window'][c] is None:
            return half + mark(summary, 'loss', c, a['name'])
        return f"{comparable_mean(a, ref, c):.3f}† (sampled {half})" + mark(summary, 'loss', c, a['name'])
    lines += table('Mean loss (nats) per position bucket ± the half-width of its 95% interval over windows and seeds '
                   '(* = best in the column; against it: ≈ equivalent, ? unresolved, no mark worse)' +
                   (f"; sampled positions, not every one: {'; '.join(sampled)}" if sampled else '') +
                   (f". † = {ref['name']}'s exact mean plus the paired difference on the sampled positions (the "
                    f"sampled positions alone run above the exact means), comparable with the exact rows"
                    if sampled and ref else '') + ':',
                   list(arms[0]['buckets']), arms, loss_cell)
    lines += table('Perplexity with the context cut to n tokens (one forward of the first n tokens):',
                   list(arms[0]['ppl_at']), arms, lambda a, c: f"{a['ppl_at'][c]:.3f}")
    for kind, field, title in ROOM_TABLES:
        if not arms[0].get(field):
            continue
        gain, why = kind == 'recall_gain', ref and room_gate(summary, kind, ref)
        lines += table(title(s) + (f" (no marks: {why}; no difference in this room is judged)" if why else ''),
                       [x['bucket'] for x in arms[0][field]], arms,
                       lambda a, c, field=field, kind=kind, gain=gain: next(
                           (f"{x['gain']:+.3f} [{x['gain_ci'][0]:+.3f}, {x['gain_ci'][1]:+.3f}]" if gain else
                            f"{100 * x['exact_match']:.0f}% [{100 * x['exact_match_ci'][0]:.0f}-"
                            f"{100 * x['exact_match_ci'][1]:.0f}]" + (f" / {x['gain']:+.2f}" if 'gain' in x else ''))
                           for x in a[field] if x['bucket'] == c) + mark(summary, kind, c, a['name']))
    for room, what in (('needles', 'Needles'), ('needles_words', 'Word needles')):
        if arms[0].get(room) and 'emitted' in arms[0][room][0]['per_example']:
            lines += table(f"{what}: whose value the model starts to write after the asked key (greedy first token), "
                           "pooled over seeds and over the buckets past L (in the bucket's n): the asked record, the "
                           "oldest one (a 'copy the oldest' shortcut), the nearest one, another, or none:",
                           ['asked', 'oldest', 'nearest', 'other', 'none'], arms,
                           lambda a, c, room=room: f"{100 * emitted_shares(a[room], s['L'], s[room]['needles'])[c]:.0f}%")
    for room, labels in CHOICES.items():
        if arms[0].get(room):
            lines += table(EMITTED[room], labels, arms, lambda a, c, room=room, labels=labels:
                           f"{100 * choice_shares(a[room], s['L'], labels)[c]:.0f}%")
    for kind, rows in (s.get('contrasts') or {}).items():
        unit, fmt = units(kind)
        lines += contrast_table(f"Named contrasts, {KIND_NAMES[kind]}: difference A − B ({unit}) [95% paired "
                                f"interval] verdict of A:", rows, fmt, summary, kind)
    for kind, rows in (s.get('vs_self') or {}).items():
        unit, fmt = units(kind)
        lines += contrast_table(f"Each arm against its own crop (the same weights held to a window; negative loss or "
                                f"positive retrieval: it uses what the window cannot see), {KIND_NAMES[kind]}: A − B "
                                f"({unit}) [95% paired interval] verdict of A:", rows, fmt, summary, kind)
    for crop, rows in (s.get('vs_crop') or {}).items():
        lines += table(f"Against the crop control {crop}: loss difference (nats) and its verdict per bucket; 'better' "
                       f"past L means the arm uses context the crop cannot see:", list(rows['loss']),
                       [a for a in arms if a['name'] != crop],
                       lambda a, c, rows=rows: f"{rows['loss'][c][a['name']]['diff']:+.3f} "
                                               f"{word(rows['loss'][c][a['name']])}")
    lines += per_play_table(s, arms)
    lines += table('Mean attention entropy (nats) by query position (seeds averaged):',
                   list(arms[0]['entropy_buckets']), arms, lambda a, c: f"{a['entropy_buckets'][c]:.2f}")
    sinks = [a for a in arms if a.get('first_token_buckets')]
    if sinks:  # (summaries written before issue 33 lack it)
        lines += table('Sink strength: the mean attention weight on the first token by query position (layers, heads '
                       'and entropy windows averaged; a learned sink\'s share not counted; - where not measured):',
                       list(sinks[0]['first_token_buckets']), sinks,
                       lambda a, c: '-' if a['first_token_buckets'][c] is None else f"{a['first_token_buckets'][c]:.3f}")
    heads = [a for a in arms if a.get('sink_heads')]
    if heads:  # (summaries written before issue 46 lack it)
        lines += table(f"Sink heads: how many of the layers' heads put more than {SINK_EPS} of their attention on the "
                       f"first token, on average over a bucket's queries (Gu et al. 2024's Sink^eps, eps = {SINK_EPS}), "
                       f"and the largest head's weight; - where not measured:",
                       list(heads[0]['sink_heads']), heads,
                       lambda a, c: '-' if a['sink_heads'].get(c) is None else
                       f"{a['sink_heads'][c]['heads']}/{a['sink_heads'][c]['of']} (max {a['sink_heads'][c]['max']:.2f})")
    lines += law_table(arms)
    return '\n'.join(lines) + '\n'


def law_table(arms):
    """--temperature_law's table (lab/measure/temperature_law.py): per bucket the median beta_c of its rows and the
    share with beta_c <= 1, then the fitted law p [95% interval over windows], over all rows, inside L and past L."""
    laws = [a for a in arms if a.get('temperature_law') and 'skipped' not in a['temperature_law']]
    if not laws:
        return []

    def cell(a, c):
        t = a['temperature_law']
        if c in t['buckets']:
            b = t['buckets'][c]
            return '-' if b is None else f"{b['median']:.2f} ({100 * b['concentrated']:.0f}%)"
        f = t[{'p': 'all', 'p inside L': 'inside_L'}.get(c, 'past_L')]
        return '-' if f['p'] is None else f"{f['p']:.2f} [{f['ci'][0]:.2f}, {f['ci'][1]:.2f}]"
    return table("Critical inverse temperature beta_c (Hayase & Karakida 2026; the least beta at which a row's top key "
                 "holds half the mass): median over each bucket's measured rows (layers, heads, positions, windows), "
                 "the share with beta_c <= 1 (concentrated as trained) in brackets; then p of ln beta_c = p ln ln n + "
                 "c [95% interval over windows] (p = 1/2, 1, 2: the (ln n)^1/2, ln n, (ln n)^2 laws):",
                 list(laws[0]['temperature_law']['buckets']) + ['p', 'p inside L', 'p past L'], laws, cell)


def bases_markdown(out):
    """bases.md: each named contrast (and every arm against the crop) per column, its mean difference over the base
    models with its random-factor interval (lab.verdicts.compare.across_bases), the verdict, and on how many bases that base's
    own verdict agrees; with --combine_minus the same for the other kind's bases, then each contrast's difference between
    the two kinds (compare.between_kinds)."""
    m = out['margins']
    lines = [f"# The same comparisons on {len(out['bases'])} base models", '',
             'Bases: ' + ', '.join(out['bases']) + '.', '',
             f"Each cell: the mean over bases of A − B, its 95% interval with the bases as a paired random factor and "
             f"the windows (or examples) as units (base-to-base and unit variation; 0/1 outcomes at least Newcombe's "
             f"interval on the pooled outcomes), the verdict (Holm within the column; "
             f"equivalent = inside ±{m['loss']:g} nats or ±{100 * m['exact_match']:g} points), and (k/n) the bases "
             f"whose own paired verdict is the same."]
    lines += base_tables_md(out['comparisons'])
    if 'minus' in out:
        lines += ['', f"## The same on {len(out['minus']['bases'])} bases of the other kind", '',
                  'Bases: ' + ', '.join(out['minus']['bases']) + ' (each paired with the base above in its place).']
        lines += base_tables_md(out['minus']['comparisons'])
        lines += ['', '## Between the two kinds', '',
                  "Each cell: the mean over the pairs of an arm on the first kind's base − the same arm on its pair "
                  "of the other kind (a contrast's row: A − B on the first − A − B on the second), its 95% interval "
                  "with the pairs as a random factor and the windows as units, the verdict (Holm within the column; "
                  "the first kind's, lower loss = better), and each pair's first − second. A base arm is named "
                  "'base' so that the two kinds' bases meet. Loss and gain only."]
        for kind, rows in out['between'].items():
            unit, fmt = units(kind)
            cols = list(rows)
            by = {(c, r['name']): r for c in cols for r in rows[c]}
            lines += ['', f"{KIND_NAMES[kind].capitalize()}, first kind − second kind ({unit}):", ''] + \
                header('contrast', cols)
            for n in dict.fromkeys(r['name'] for c in cols for r in rows[c]):
                cells = [f"{diff_cell(by[c, n], fmt)} ("
                         + ', '.join(fmt(a - b) for a, b in zip(by[c, n]['firsts'], by[c, n]['seconds'])) + ')'
                         if (c, n) in by else '' for c in cols]
                lines.append(f"| {n} | " + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def base_tables_md(comparisons):
    lines = []
    for kind, rows in comparisons.items():
        unit, fmt = units(kind)
        cols = list(rows)
        names = list(dict.fromkeys(r['name'] for c in cols for r in rows[c]))
        by = {(c, r['name']): r for c in cols for r in rows[c]}
        why = next((r['no_control'] for c in cols for r in rows[c] if r.get('no_control')), None)
        lines += ['', f"{KIND_NAMES[kind].capitalize()}, A − B ({unit})" + (f" (not judged where a base fails the "
                                                                          f"room inside L: {why})" if why else '') +
                  ':', ''] + header('contrast', cols)
        for n in names:
            cells = [f"{diff_cell(by[c, n], fmt, 'no_control' in by[c, n])} "
                     f"({sum(v == by[c, n]['verdict'] for v in by[c, n]['verdicts'])}/"
                     f"{len(by[c, n]['verdicts'])})" if (c, n) in by else '' for c in cols]
            lines.append(f"| {n} | " + ' | '.join(cells) + ' |')
    return lines
