"""
The verdicts as pictures (issue 34), drawn like every picture from files alone:

  verdicts.png      a forest plot at the last bucket, in loss and in passkey exact match: each arm against the crop
                    control, each arm against its own crop (where the eval has them), the named contrasts; the
                    paired difference with its 95% interval, the equivalence margin as a band, the verdict as marker
  verdict_grid.png  every room at once: one row per comparison, one column per room (loss, passkey, depth passkey,
                    the needle rooms, recall, tracking) at its last bucket, the cell coloured by the verdict and
                    holding the difference, so one look says where an arm wins and where it merely ties
  claims.png        (lab.pictures.redraw) the forest plot of every claims record in assets/test/claims: what README.md and
                    docs/results.md state in numbers, each with its interval and margin

The verdict words are lab.stats's: better / worse (the interval excludes 0 and is not inside the margin),
equivalent (the interval inside ± the margin), unresolved (neither); a room whose base fails it inside L has no
positive control, so its cells read 'not judged' and the forest plot leaves its rows out (the not_judged each row stores: lab.verdicts.compare.stamp_gates).
"""
import glob
import os

import numpy as np

from data.common import read_json
from lab.pictures.plot_kit import RC, plt, save  # (and the Agg backend)
from lab.verdicts.compare import not_judged
from lab.verdicts.summary_md import KIND_NAMES, units

VERDICT_MARKS = {'better': dict(marker='o', color='#2ca02c', mfc='#2ca02c'),
                 'worse': dict(marker='s', color='#d62728', mfc='#d62728'),
                 'equivalent': dict(marker='D', color='#555555', mfc='#555555'),
                 'unresolved': dict(marker='o', color='black', mfc='white')}
CELL = {'better': '#a8dba8', 'worse': '#f4b0b0', 'equivalent': '#d9d9d9', 'unresolved': 'white',  # grid cells
        'identical': '#eeeeee', 'not judged': '#dce6f2'}  # (not judged: the base fails the room inside L)
SHORT = {'loss': 'loss', 'exact_match': 'passkey', 'passkey_depth': 'depth\npasskey', 'needles': 'needles',
         'needles_mq': 'multi-query\nneedles', 'recall_gain': 'recall\ngain', 'needles_words': 'word\nneedles',
         'needles_mv': 'multi-value\nneedles', 'tracking': 'variable\ntracking', 'passkey_text': 'passkey\n(text)',
         'digits': "passkey\ndigits' loss", 'exact': 'passkey'}
DIGITS = "nats, a passkey's digits summed"  # the real model's passkey outcome (lab.doc_study)
BAND = '#cfe8cf'  # the equivalence margin
SIGN = {'equivalent': ' ≈', 'unresolved': ' ?'}  # a grid cell's verdict in its text too (readable without colour)


def scale(kind):
    """(factor, unit): a room's exact match in points, loss and recall gain in nats."""
    unit, _ = units(kind)
    return (1 if unit == 'nats' else 100), unit


def tables(summary, kind):
    """[(title, column, {name: row})] at kind's last bucket: every arm against the first crop control, every arm
    against its own crop (settings.vs_self), the named contrasts; a row has diff, ci, verdict and identical."""
    s, out = summary['settings'], []
    crops = s.get('vs_crop') or {}
    if crops:
        crop = next(iter(crops))
        rows = crops[crop].get(kind) or {}
        if rows:
            col = list(rows)[-1]
            out.append((f"each arm − {crop}", col, dict(rows[col])))
    for title, table in (('each arm − its own crop', (s.get('vs_self') or {}).get(kind) or {}),
                         ('named contrasts', (s.get('contrasts') or {}).get(kind) or {})):
        if table:
            col = list(table)[-1]
            out.append((title, col, {r['name'].replace(' vs ', '  −  '): r for r in table[col]}))
    return out


def verdict_rows(summary, kinds=('loss', 'exact_match')):
    """[(panel title, kind, [(label, diff, ci, verdict)])]: the forest plot's panels, per kind its tables()."""
    panels = [(f"{title}, {kind}, {col}", kind, [(n, r['diff'], r['ci'], r['verdict']) for n, r in rows.items()
                                                 if not (r.get('identical') and title.startswith('each arm − crop'))
                                                 and not not_judged(summary, kind, r)])
              for kind in kinds for title, col, rows in tables(summary, kind)]  # (left out: the crop against itself)
    return [p for p in panels if p[2]]


def forest(ax, rows, kind, margin, title):
    """One forest panel: per row its difference (the verdict's marker) and 95% interval, the margin as a band."""
    unit = scale(kind)[0]
    for k, (label, d, ci, v) in enumerate(rows):
        y = len(rows) - 1 - k
        ax.plot(np.multiply(ci, unit), [y, y], color='0.35', lw=1.4)
        ax.plot([d * unit], [y], ls='none', ms=8, clip_on=False, **VERDICT_MARKS[v])
    ax.axvspan(-margin * unit, margin * unit, color=BAND, zorder=0)
    ax.axvline(0, color='0.4', lw=1.0)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows][::-1], fontsize=10)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    if unit == 1:  # nats: from ±0.01 to ±3 in one panel
        ax.set_xscale('symlog', linthresh=0.05)
        lo, hi = ax.get_xlim()
        ax.set_xlim(lo * 1.3 if lo < 0 else lo, hi * 1.3 if hi > 0 else hi)  # (the end markers whole)
        lo, hi = ax.get_xlim()
        ticks = [t for t in (-2, -1, -0.3, -0.1, -margin, 0, margin, 0.1, 0.3, 1, 2) if lo <= t <= hi]
        ax.set_xticks(ticks, [f"{t:+g}".replace('-', '−') if t else '0' for t in ticks], fontsize=10)
    else:
        ax.margins(x=0.06)
    better = '< 0: A better' if kind == 'loss' else '> 0: A better'
    ax.set(xlabel=f"A − B, {scale(kind)[1]} ({better})", title=title)
    ax.grid(alpha=0.3, axis='x')


def legend_above(fig, margins):
    """The verdict words and the margin band, once, above every panel."""
    handles = [plt.Line2D([], [], ls='none', ms=8, label=v, **m) for v, m in VERDICT_MARKS.items()]
    handles.append(plt.Rectangle((0, 0), 1, 1, color=BAND, label=margins))
    fig.legend(handles=handles, loc='lower center', bbox_to_anchor=(0.5, 1.0), ncol=5, frameon=False, fontsize=12)


def margin_text(margins):
    return f"equivalence margin (±{margins['loss']:g} nats, ±{margins['exact_match'] * 100:g} points)"


def plot_verdicts(out_dir, summary):
    """verdicts.png: the forest plot of the verdicts at the last bucket (loss in nats, the passkey in points), one
    panel per table (verdict_rows), or None without any."""
    panels = verdict_rows(summary)
    if not panels:
        return None
    margins = summary['settings']['margins']
    ncol = 2 if len(panels) > 1 else 1
    nrow = -(-len(panels) // ncol)
    n = max(len(rows) for *_, rows in panels)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(nrow, ncol, figsize=(10 * ncol, (2.2 + 0.32 * n) * nrow), squeeze=False)
        for ax, (title, kind, rows) in zip(axes.flat, panels):
            forest(ax, rows, kind, margins['loss' if kind == 'loss' else 'exact_match'], title)
        for ax in axes.flat[len(panels):]:
            ax.axis('off')
        legend_above(fig, margin_text(margins))
        fig.tight_layout(h_pad=2.0, w_pad=3.0)
        return save(fig, os.path.join(out_dir, 'verdicts.png'))


def grid_rows(summary):
    """[(title, kinds, [(label, {kind: (diff, verdict, column)})])]: per table of tables() one panel, its rows the
    comparisons, its columns the kinds (rooms) the eval measured, each at its last bucket; verdict 'identical' where
    both arms gave the same values (a row identical everywhere, the crop against itself, is left out)."""
    panels = {}
    for kind in KIND_NAMES:
        for title, col, rows in tables(summary, kind):
            table = panels.setdefault(title, {})
            for name, r in rows.items():
                v = 'not judged' if not_judged(summary, kind, r) else \
                    'identical' if r.get('identical') else r['verdict']
                table.setdefault(name, {})[kind] = (r['diff'], v, col)
    return [(title, [k for k in KIND_NAMES if any(k in c for c in table.values())],
             [(n, c) for n, c in table.items() if any(v != 'identical' for _, v, _ in c.values())])
            for title, table in panels.items()]


def plot_verdict_grid(out_dir, summary):
    """verdict_grid.png: one panel per table (grid_rows), a coloured cell per comparison and room; None without
    verdicts."""
    panels = grid_rows(summary)
    if not panels:
        return None
    heights = [len(rows) + 2 for *_, rows in panels]
    width = max(len(kinds) for _, kinds, _ in panels)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(panels), 1, figsize=(6 + 1.25 * width, 0.36 * sum(heights) + 1),
                                 gridspec_kw=dict(height_ratios=heights), squeeze=False)
        for ax, (title, kinds, rows) in zip(axes[:, 0], panels):
            for i, (_, cells) in enumerate(rows):
                for j, kind in enumerate(kinds):
                    if kind not in cells:
                        continue
                    d, v, _ = cells[kind]
                    ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=CELL[v], edgecolor='0.55', lw=0.6))
                    ax.text(j, i, v if v in ('identical', 'not judged') else units(kind)[1](d) + SIGN.get(v, ''),
                            ha='center', va='center', fontsize=9)
            ax.set_xlim(-0.5, len(kinds) - 0.5)
            ax.set_ylim(len(rows) - 0.5, -0.5)
            ax.set_yticks(range(len(rows)), [n for n, _ in rows], fontsize=10)
            cols = {c for _, cells in rows for *_, c in cells.values()}
            ax.set_xticks(range(len(kinds)), [SHORT[k] for k in kinds], fontsize=10)
            ax.xaxis.tick_top()
            ax.tick_params(length=0)
            ax.spines[:].set_visible(False)
            ax.set_title(f"{title} (last bucket{'s' if len(cols) > 1 else ''}: {', '.join(sorted(cols))})",
                         fontsize=13, pad=40)
        handles = [plt.Rectangle((0, 0), 1, 1, facecolor=c, edgecolor='0.55', label=v) for v, c in CELL.items()]
        fig.legend(handles=handles, loc='lower center', bbox_to_anchor=(0.5, 1.0), ncol=len(CELL), frameon=False,
                   fontsize=12, title_fontsize=11,
                   title=f"A − B in nats (loss, recall gain: < 0 better for loss, > 0 for gain) or exact-match points "
                         f"(> 0 better); ≈ equivalent, ? unresolved; {margin_text(summary['settings']['margins'])}")
        fig.tight_layout()
        return save(fig, os.path.join(out_dir, 'verdict_grid.png'))


def claim_rows(claims_dir):
    """[(kind, [(label, diff, ci, verdict, margin)])] of every claims record in claims_dir (lab.verdicts.claims' JSON), loss-like
    kinds (nats) first, then the exact-match kinds (points)."""
    records = [read_json(p, 'rewrite the records: python -m lab.verdicts.claims')
               for p in sorted(glob.glob(os.path.join(claims_dir, '*.json')))]
    out = {}
    for r in records:
        c, res = r['comparison'], r['result']
        unit = DIGITS if c['kind'] == 'digits' else scale(c['kind'])[1]  # (a sum over five tokens: its own panel)
        label = f"{r['id']}: {SHORT[c['kind']].replace(chr(10), ' ')} {c['column']}"
        out.setdefault(unit, []).append((label, res['diff'], res['ci'], res['verdict'], r['margin']))
    return [(u, out[u]) for u in ('nats', DIGITS, 'points') if u in out]


def plot_claims(claims_dir, path):
    """claims.png: every claim's paired difference, interval and verdict, nats and points in their own panels;
    None when claims_dir holds no record."""
    panels = claim_rows(claims_dir)
    if not panels:
        return None
    with plt.rc_context(RC):
        fig, axes = plt.subplots(len(panels), 1, figsize=(11, 1.2 + 0.34 * sum(len(r) + 4 for _, r in panels)),
                                 gridspec_kw=dict(height_ratios=[len(r) + 4 for _, r in panels]), squeeze=False)
        widest = {}  # per unit, the widest margin of its claims (the band drawn)
        for ax, (unit, rows) in zip(axes[:, 0], panels):
            kind, widest[unit] = ('exact_match' if unit == 'points' else 'loss'), max(m for *_, m in rows)
            forest(ax, [r[:4] for r in rows], kind, widest[unit], f"the claims in {unit} ({len(rows)})")
        legend_above(fig, 'equivalence margin (±' + ', ±'.join(
            f"{m * (100 if u == 'points' else 1):g} {u}" for u, m in widest.items()) + ')')
        fig.tight_layout()
        return save(fig, path)


def write_claims_png(claims_dir):
    """claims.png beside claims_dir (assets/test/claims -> assets/test/claims.png), written atomically; its path."""
    from data.common import atomic_write
    path, png = plot_claims(claims_dir, os.path.join(os.path.dirname(claims_dir), 'claims.png'))
    atomic_write(path, lambda f: f.write(png))
    return path
