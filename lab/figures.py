"""
The pictures a person reads at a glance (issue 34, first part), drawn like every picture from eval.py's files only:

  headline.png  loss against position for the arms that tell the story, zero-shot and fine-tuned side by side:
                the base, its crop, PI, NTK-aware, YaRN and one attention map (ReRoPE); L and s·L marked, each line
                labelled at its end, one colour per method (METHOD_COLORS) in both panels
  verdicts.png  the verdicts as a forest plot: each named contrast, each arm against the crop and against its own
                crop, at the last bucket, in loss and in passkey exact match: the paired difference with its 95%
                interval, the equivalence margin as a band, the verdict as the marker

Either is skipped (None) when its arms or verdicts are not in the eval.
"""
import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lab.plot_kit import METHOD_COLORS, RC, method_of as kit_method, read_columns, save  # noqa: E402

METHOD_COLORS = dict(METHOD_COLORS, other='#444444')  # (an arm of no known method, in the families)
LABELS = {'base': 'plain RoPE (the base)', 'crop': 'the crop (last L tokens)', 'linear': 'PI', 'ntk': 'NTK-aware',
          'yarn': 'YaRN', 'rerope': 'ReRoPE', 'default': 'plain RoPE fine-tuned'}
VARIANT_LS = ['-', '--', ':', '-.', (0, (5, 1, 1, 1, 1, 1))]  # a method's second, third, ... arm in one panel
FAMILIES = ('frequency scalings, zero-shot', 'dynamic types, zero-shot', 'attention maps, zero-shot', 'fine-tuned',
            'the 2025-26 designs')
VERDICT_MARKS = {'better': dict(marker='o', color='#2ca02c', mfc='#2ca02c'),
                 'worse': dict(marker='s', color='#d62728', mfc='#d62728'),
                 'equivalent': dict(marker='D', color='#555555', mfc='#555555'),
                 'unresolved': dict(marker='o', color='black', mfc='white')}


def references(arms):
    """(the first base, its sliding crop control), either None when the eval has none."""
    return (next((a for a in arms if a['kind'] == 'base'), None),
            next((a for a in arms if (a.get('crop') or {}).get('form') == 'sliding' and a['kind'] != 'fine-tuned'
                  and not a.get('self_crop_of')), None))


def headline_arms(summary):
    """{'zero-shot': [(role, arm)], 'fine-tuned': [(role, arm)]}: the base and its crop in both, then the first
    zero-shot PI, NTK-aware, YaRN (β_fast = 8 when there is one) and ReRoPE; the fine-tuned PI, YaRN and plain
    control with the most steps (no PoSE, no temperature). Roles key METHOD_COLORS."""
    arms = summary['arms']
    plain = [a for a in arms if not a.get('crop') and not a.get('temperature') and not a.get('pose')]
    ref = [(r, a) for r, a in zip(('base', 'crop'), references(arms)) if a]

    def pick(kind, role):
        got = [a for a in plain if a['kind'] == kind and (
            (a.get('position_map') or {}).get('method') == role if role == 'rerope' else
            not a.get('position_map') and a.get('rope_type') == role)]
        if kind == 'fine-tuned':
            got = sorted(got, key=lambda a: -a['finetune_steps'])
        return next((a for a in got if 'β_fast=8' in a['name']), got[0] if got else None)
    out = {}
    for kind, roles in (('zero-shot', ('linear', 'ntk', 'yarn', 'rerope')), ('fine-tuned', ('linear', 'yarn', 'default'))):
        chosen = [(r, pick(kind, r)) for r in roles]
        out[kind] = ref + [(r, a) for r, a in chosen if a]
    return out


def smoothed(y, w):
    from plot import smooth  # the story's smoothing (plot.py), one definition
    return smooth(np.asarray(y, dtype=float), w)


def spread(ys, gap):
    """Label heights: the ys in order, each at least gap above the one below (for labels at the lines' ends)."""
    order, out = np.argsort(ys), np.array(ys, dtype=float)
    for k in range(1, len(order)):
        out[order[k]] = max(out[order[k]], out[order[k - 1]] + gap)
    return out


def plot_headline(out_dir, summary, w):
    """headline.png, or None when the eval has no base, crop or scaled arms to tell the story with."""
    chosen = headline_arms(summary)
    if len(chosen['zero-shot']) < 3 or not chosen['zero-shot'][0][0] == 'base':
        return None
    s = summary['settings']
    panels = [(k, v) for k, v in chosen.items() if len(v) > 2]
    names = [a['name'] for _, v in panels for _, a in v]
    cols = read_columns(os.path.join(out_dir, 'position_loss.csv'), list(dict.fromkeys(names)))
    x = np.arange(s['T'])
    curves = {n: smoothed(cols[n], w) for n in names}
    top = min(max(np.nanmax(c) for c in curves.values()), 4.0)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(panels), figsize=(8.5 * len(panels), 6), sharey=True, squeeze=False)
        for ax, (kind, arms) in zip(axes[0], panels):
            ends = []
            for role, a in arms:
                y = np.clip(curves[a['name']], None, top)
                ax.plot(x, y, color=METHOD_COLORS[role], lw=2.6 if role in ('base', 'crop') else 2.0,
                        ls=':' if role == 'crop' else '-')
                last = np.nanmean(y[-max(1, w):])
                ends.append((last, LABELS[role] + (f" s={a['factor']:g}" if a.get('factor') and role not in
                                                    ('base', 'crop', 'default') else ''), METHOD_COLORS[role]))
            heights = spread([e[0] for e in ends], (top - 1.0) * 0.045)
            for (_, text, colour), h in zip(ends, heights):
                ax.text(s['T'] * 1.01, h, text, color=colour, va='center', fontsize=12)
            ax.axvline(s['L'], color='0.3', lw=1.2)
            ax.text(s['L'], top, f" L = {s['L']}", va='top', fontsize=12, color='0.3')
            far = sorted({a['seq_len'] for _, a in arms if a['kind'] == 'fine-tuned' and a['seq_len'] < s['T']} |
                         {round(a['factor'] * s['L']) for _, a in arms if a['kind'] == 'zero-shot' and a.get('factor')
                          and a['factor'] * s['L'] < s['T']})
            for n in far:
                ax.axvline(n, color='0.3', lw=1.0, ls='--')
                ax.text(n, top, f" s·L = {n}", va='top', fontsize=12, color='0.3')
            ax.set_xlim(0, s['T'])
            ax.set_ylim(None, top * 1.02)
            ax.set(xlabel='token position', title=f"{kind}: {'switched at inference' if kind == 'zero-shot' else 'trained briefly at the longer length'}")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel(f'loss (nats; mean of {w} positions)')
        floor = '; the crop is the floor to beat' if any(r == 'crop' for _, v in panels for r, _ in v) else ''
        fig.suptitle(f"Plain RoPE breaks past L{floor} (T = {s['T']}, {s['num_windows']} held-out windows)", fontsize=15,
                     y=1.01)
        fig.subplots_adjust(wspace=0.45)
        return save(fig, os.path.join(out_dir, 'headline.png'))


def verdict_rows(summary, kinds=('loss', 'exact_match')):
    """[(panel title, kind, [(label, diff, ci, verdict)])] at each kind's last bucket: the named contrasts, every arm
    against the first crop control, every arm against its own crop (settings.vs_self, when the eval has them)."""
    s, out = summary['settings'], []
    for kind in kinds:
        tables = [('named contrasts', (s.get('contrasts') or {}).get(kind) or {}),
                  ('each arm − its own crop', (s.get('vs_self') or {}).get(kind) or {})]
        crops = s.get('vs_crop') or {}
        if crops:
            crop = next(iter(crops))
            rows = (crops[crop].get(kind) or {})
            if rows:
                col = list(rows)[-1]
                out.append((f"each arm − {crop}, {kind}, {col}", kind, [
                    (n, r['diff'], r['ci'], r['verdict']) for n, r in rows[col].items() if not r.get('identical')]))
        for title, table in tables:
            if table:
                col = list(table)[-1]
                out.append((f"{title}, {kind}, {col}", kind, [(r['name'].replace(' vs ', '  −  '), r['diff'], r['ci'],
                                                               r['verdict']) for r in table[col]]))
    return out


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
        fig, axes = plt.subplots(nrow, ncol, figsize=(10 * ncol, (1.6 + 0.32 * n) * nrow), squeeze=False)
        for ax, (title, kind, rows) in zip(axes.flat, panels):
            unit = 100 if kind != 'loss' else 1  # retrieval in points
            margin = margins['loss' if kind == 'loss' else 'exact_match'] * unit
            for k, (label, d, ci, v) in enumerate(rows):
                y = len(rows) - 1 - k
                ax.plot(np.multiply(ci, unit), [y, y], color='0.35', lw=1.4)
                ax.plot([d * unit], [y], ls='none', ms=8, **VERDICT_MARKS[v])
            ax.axvspan(-margin, margin, color='#cfe8cf', zorder=0)
            ax.axvline(0, color='0.4', lw=1.0)
            ax.set_yticks(range(len(rows)), [r[0] for r in rows][::-1], fontsize=10)
            if kind == 'loss':
                ax.set_xscale('symlog', linthresh=0.05)
                lo, hi = ax.get_xlim()
                ticks = [t for t in (-2, -1, -0.3, -0.1, -margin, 0, margin, 0.1, 0.3, 1, 2) if lo <= t <= hi]
                ax.set_xticks(ticks, [f"{t:+g}".replace('-', '−') if t else '0' for t in ticks], fontsize=10)
            ax.set(xlabel='A − B, nats (< 0: A better)' if kind == 'loss' else
                   'A − B, exact-match points (> 0: A better)', title=title)
            ax.grid(alpha=0.3, axis='x')
        for ax in axes.flat[len(panels):]:
            ax.axis('off')
        for v, mark in VERDICT_MARKS.items():  # the legend: the verdict words and the margins
            axes[0][0].plot([], [], ls='none', ms=8, label=v, **mark)
        axes[0][0].fill_between([], [], color='#cfe8cf', label=f"equivalence margin (±{margins['loss']:g} nats, "
                                f"±{margins['exact_match'] * 100:g} points)")
        fig.legend(*axes[0][0].get_legend_handles_labels(), loc='lower center', bbox_to_anchor=(0.5, 1.0), ncol=5,
                   frameon=False, fontsize=12)  # above every panel
        fig.subplots_adjust(wspace=1.05, hspace=0.35, top=1 - 0.55 / fig.get_figheight())  # (the legend just above)
        return save(fig, os.path.join(out_dir, 'verdicts.png'))


def method_of(arm):
    """The colour key of an arm (lab.plot_kit.method_of), 'other' where the kit has none."""
    return kit_method(arm) or 'other'


def family_of(arm, base):
    """Which small multiple an arm belongs to (FAMILIES), or None for the base and every crop (the crop control is
    a reference in each panel; an arm's own crop is in the verdicts, not here)."""
    if arm is base or arm.get('crop'):
        return None
    if arm.get('temperature') or arm.get('layers') or arm['kind'] == 'base' or arm.get('pos_emb') != 'rope':
        return FAMILIES[4]
    if arm['kind'] == 'fine-tuned':
        return FAMILIES[3]
    if arm.get('position_map'):
        return FAMILIES[2]
    return FAMILIES[1] if arm.get('dynamic') else FAMILIES[0]


def family_panels(summary, most=6):
    """[(title, [(arm, style)])]: one panel per family present, the base and the crop first in each, then at most
    `most` of the family's arms (a family with more fills more panels), styles: one colour per method, a method's
    variants told apart by the line style."""
    arms = summary['arms']
    base, crop = references(arms)
    refs = [(a, dict(color=METHOD_COLORS[r], ls=':' if r == 'crop' else '-', lw=2.6))
            for r, a in (('base', base), ('crop', crop)) if a]
    panels = []
    for fam in FAMILIES:
        members = [a for a in arms if family_of(a, base) == fam]
        size = -(-len(members) // -(-len(members) // most)) if members else most  # split evenly: 7 -> 4 + 3
        for k in range(0, len(members), size):
            used, lines = {}, []
            for a in members[k:k + size]:
                m = method_of(a)
                n = used[m] = used.get(m, -1) + 1
                lines.append((a, dict(color=METHOD_COLORS[m], ls=VARIANT_LS[n % len(VARIANT_LS)], lw=2.0)))
            title = fam + (f" ({k // size + 1})" if len(members) > size else '')
            panels.append((title, refs + lines))
    return panels


def plot_families(out_dir, summary, w):
    """families.png: loss against position, one small panel per family of arms (FAMILIES), the base and the crop in
    each; None when the eval has no arm but references."""
    panels = family_panels(summary)
    if not panels:
        return None
    s = summary['settings']
    names = list(dict.fromkeys(a['name'] for _, lines in panels for a, _ in lines))
    cols = read_columns(os.path.join(out_dir, 'position_loss.csv'), names)
    curves = {n: smoothed(cols[n], w) for n in names}
    top = min(max(np.nanmax(c) for c in curves.values()), 4.0)
    ncol = min(3, len(panels))
    nrow = -(-len(panels) // ncol)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(nrow, ncol, figsize=(7.2 * ncol, 6.4 * nrow), sharey=True, squeeze=False)
        for ax, (title, lines) in zip(axes.flat, panels):
            for a, st in lines:
                ax.plot(np.arange(s['T']), np.clip(curves[a['name']], None, top), label=a['name'], **st)
            ax.axvline(s['L'], color='0.3', lw=1.0)
            ax.set_xlim(0, s['T'])
        return finish(fig, axes, [t for t, _ in panels], 'loss (nats)', os.path.join(out_dir, 'families.png'),
                      f"Loss against token position by family (T = {s['T']}, L = {s['L']} marked; the base black, the "
                      f"crop grey dotted in every panel)")


def finish(fig, axes, titles, ylabel, path, suptitle):
    """The family figures' common ending: titles, grids, each legend below its panel, unused panels off."""
    for ax, title in zip(axes.flat, titles):
        ax.set_title(title, fontsize=14)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=10, loc='upper left', bbox_to_anchor=(0, -0.1), ncol=2, frameon=False)
    for ax in axes.flat[len(titles):]:
        ax.axis('off')
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    fig.suptitle(suptitle, fontsize=15, y=1.0)
    fig.tight_layout()
    return save(fig, path)


def plot_retrieval_families(out_dir, summary):
    """retrieval_families.png: the passkey's exact match by distance bucket with its 95% interval, in the same
    family panels as families.png (the base and the crop in each); None without passkey results."""
    panels = [(t, [(a, st) for a, st in lines if a.get('retrieval')]) for t, lines in family_panels(summary)]
    panels = [(t, lines) for t, lines in panels if len(lines) > 2]
    if not panels:
        return None
    s = summary['settings']
    ncol = min(3, len(panels))
    nrow = -(-len(panels) // ncol)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(nrow, ncol, figsize=(7.2 * ncol, 6.0 * nrow), sharey=True, squeeze=False)
        for ax, (title, lines) in zip(axes.flat, panels):
            labels = [b['bucket'] for b in lines[0][0]['retrieval']]
            for k, (a, st) in enumerate(lines):
                x = np.arange(len(labels)) + (k - len(lines) / 2) * 0.04  # a little apart, so intervals show
                y = [100 * b['exact_match'] for b in a['retrieval']]
                lo, hi = zip(*((100 * b['exact_match_ci'][0], 100 * b['exact_match_ci'][1]) for b in a['retrieval']))
                err = [np.clip(np.subtract(y, lo), 0, None), np.clip(np.subtract(hi, y), 0, None)]  # (a sampled
                ax.errorbar(x, y, yerr=err, marker='o', ms=5, capsize=2,  # arm's interval need not hold its mean)
                            label=a['name'], **st)
            inside = sum(b['distance_lo'] < s['L'] for b in lines[0][0]['retrieval'])
            ax.axvline(inside - 0.5, color='0.3', lw=1.0)
            ax.set_xticks(range(len(labels)), labels)
            ax.set_ylim(-3, 103)
        return finish(fig, axes, [t for t, _ in panels], 'passkey exact match (%)',
                      os.path.join(out_dir, 'retrieval_families.png'),
                      f"Passkey by distance and family ({s['retrieval']['examples']} examples a bucket, 95% intervals; "
                      f"the line: L = {s['L']})")
