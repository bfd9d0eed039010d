"""
The pictures a person reads at a glance (issue 34), drawn like every picture from eval.py's files only:

  headline.png  loss against position for the arms that tell the story, zero-shot and fine-tuned side by side:
                the base, its crop, PI, NTK-aware, YaRN and one attention map (ReRoPE); L and s·L marked, each line
                labelled at its end, one colour per method (METHOD_COLORS) in both panels
  families.png  loss against position, one small panel per family of arms (frequency scalings, dynamic types,
                attention maps, fine-tunes, the 2025-26 designs), the base and the crop in every panel; from the
                per-bucket means and intervals of summary.json where a study's position CSV is not kept (lab.pictures.redraw)
  retrieval_families.png  the passkey by distance in the same panels

Each is skipped (None) when its arms are not in the eval. The verdicts' pictures are lab/pictures/verdict_plots.py's.
"""
import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lab.pictures.plot_kit import (METHOD_COLORS, RC, headline_arms, method_of as kit_method, read_columns,  # noqa: E402
                                   references, save, smooth)

METHOD_COLORS = dict(METHOD_COLORS, other='#444444')  # (an arm of no known method, in the families)
LABELS = {'base': 'plain RoPE (the base)', 'crop': 'the crop (last L tokens)', 'linear': 'PI', 'ntk': 'NTK-aware',
          'yarn': 'YaRN', 'rerope': 'ReRoPE', 'default': 'plain RoPE fine-tuned'}
VARIANT_LS = ['-', '--', ':', '-.', (0, (5, 1, 1, 1, 1, 1))]  # a method's second, third, ... arm in one panel
FAMILIES = ('frequency scalings, zero-shot', 'dynamic types, zero-shot', 'attention maps, zero-shot', 'fine-tuned',
            'the 2025-26 designs')


def smoothed(y, w):
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
            edge = ax.get_xaxis_transform()  # the length labels just above the frame, where no curve runs
            ax.text(s['L'], 1.0, f"L = {s['L']}", va='bottom', ha='center', fontsize=12, color='0.3', transform=edge)
            far = sorted({a['seq_len'] for _, a in arms if a['kind'] == 'fine-tuned' and a['seq_len'] < s['T']} |
                         {round(a['factor'] * s['L']) for _, a in arms if a['kind'] == 'zero-shot' and a.get('factor')
                          and a['factor'] * s['L'] < s['T']})
            for n in far:
                ax.axvline(n, color='0.3', lw=1.0, ls='--')
                ax.text(n, 1.0, f"s·L = {n}", va='bottom', ha='center', fontsize=12, color='0.3', transform=edge)
            ax.set_xlim(0, s['T'])
            ax.set_ylim(None, top * 1.02)
            ax.set_xlabel('token position')
            how = 'switched at inference' if kind == 'zero-shot' else 'trained briefly at the longer length'
            ax.set_title(f"{kind}: {how}", pad=24)
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel(f'loss (nats; mean of {w} positions)')
        floor = '; the crop is the floor to beat' if any(r == 'crop' for _, v in panels for r, _ in v) else ''
        fig.suptitle(f"Plain RoPE breaks past L{floor} (T = {s['T']}, {s['num_windows']} held-out windows)", fontsize=15,
                     y=1.07)
        fig.subplots_adjust(wspace=0.45)
        return save(fig, os.path.join(out_dir, 'headline.png'))


def method_of(arm):
    """The colour key of an arm (lab.pictures.plot_kit.method_of), 'other' where the kit has none."""
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


def plot_families(out_dir, summary, w, buckets=False):
    """families.png: loss against position, one small panel per family of arms (FAMILIES), the base and the crop in
    each; with buckets, each arm's per-bucket mean and 95% interval from summary.json instead of the smoothed
    position_loss.csv (a committed study keeps no position CSV, lab.pictures.redraw); None with no arm but references."""
    panels = family_panels(summary)
    if not panels:
        return None
    s = summary['settings']
    names = list(dict.fromkeys(a['name'] for _, lines in panels for a, _ in lines))
    if buckets:
        labels = list(next(a for _, ls in panels for a, _ in ls)['buckets'])  # 0-128, 128-256, ...: one x each
        curves = {a['name']: np.array([a['buckets'][b] for b in a['buckets']]) for _, ls in panels for a, _ in ls}
        cis = {a['name']: np.array([a['buckets_ci'][b] for b in a['buckets']]).T for _, ls in panels for a, _ in ls}
    else:
        cols = read_columns(os.path.join(out_dir, 'position_loss.csv'), names)
        curves = {n: smoothed(cols[n], w) for n in names}
    top = min(max(np.nanmax(c) for c in curves.values()), 4.0)
    with plt.rc_context(RC):
        fig, axes = panel_grid(len(panels), 6.4)
        for ax, (title, lines) in zip(axes.flat, panels):
            for a, st in lines:
                y = np.clip(curves[a['name']], None, top)
                if buckets:
                    err = np.abs(np.clip(cis[a['name']], None, top) - y)
                    ax.errorbar(np.arange(len(y)), y, yerr=err, marker='o', ms=5, capsize=3, label=a['name'], **st)
                else:
                    ax.plot(np.arange(s['T']), y, label=a['name'], **st)
            if buckets:
                bucket_axis(ax, labels, [int(b.split('-')[0]) for b in labels], s['L'])
            else:
                ax.axvline(s['L'], color='0.3', lw=1.0)
                ax.set_xlim(0, s['T'])
        how = 'mean per position bucket, 95% intervals' if buckets else f'mean of {w} positions'
        return finish(fig, axes, [t for t, _ in panels], f"loss (nats; {how.split(',')[0]})",
                      os.path.join(out_dir, 'families.png'),
                      f"Loss against token position by family ({how}; T = {s['T']}, L = {s['L']} marked; the base "
                      f"black, the crop grey dotted in every panel)")


def panel_grid(n, height):
    """(fig, axes) for n small panels, three a row, one y scale."""
    ncol = min(3, n)
    return plt.subplots(-(-n // ncol), ncol, figsize=(7.2 * ncol, height * -(-n // ncol)), sharey=True, squeeze=False)


def bucket_axis(ax, labels, los, L):
    """One x position per bucket, labelled, and the line at L between the buckets below it and above it (los:
    each bucket's lower edge)."""
    ax.axvline(sum(lo < L for lo in los) - 0.5, color='0.3', lw=1.0)
    ax.set_xticks(range(len(labels)), labels)


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
    with plt.rc_context(RC):
        fig, axes = panel_grid(len(panels), 6.0)
        for ax, (title, lines) in zip(axes.flat, panels):
            labels = [b['bucket'] for b in lines[0][0]['retrieval']]
            for k, (a, st) in enumerate(lines):
                x = np.arange(len(labels)) + (k - len(lines) / 2) * 0.04  # a little apart, so intervals show
                y = [100 * b['exact_match'] for b in a['retrieval']]
                lo, hi = zip(*((100 * b['exact_match_ci'][0], 100 * b['exact_match_ci'][1]) for b in a['retrieval']))
                err = [np.clip(np.subtract(y, lo), 0, None), np.clip(np.subtract(hi, y), 0, None)]  # (a sampled
                ax.errorbar(x, y, yerr=err, marker='o', ms=5, capsize=2,  # arm's interval need not hold its mean)
                            label=a['name'], **st)
            bucket_axis(ax, labels, [b['distance_lo'] for b in lines[0][0]['retrieval']], s['L'])
            ax.set_ylim(-3, 103)
        return finish(fig, axes, [t for t, _ in panels], 'passkey exact match (%)',
                      os.path.join(out_dir, 'retrieval_families.png'),
                      f"Passkey by distance and family ({s['retrieval']['examples']} examples a bucket, 95% intervals; "
                      f"the line: L = {s['L']})")
