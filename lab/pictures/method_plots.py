"""
The method pictures beside lab/pictures/eval_plots.py's loss and entropy curves, drawn from eval.py's files like every
picture: the frequency ratio of every arm's RoPE per pair over the bands (rope_ramp.png), the fine-tunes' loss past L
against their steps (finetune_curves.png), and issue 33's clipping sweep against the critical dimension (clip_sweep.png).
"""
import itertools
import os
import textwrap

import matplotlib
matplotlib.use('Agg')
import matplotlib.ticker  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lab.pictures.plot_kit import MARKERS, RC, RIGHT, note, read_csv, rotary_dims, save, styles  # noqa: E402
from lab.rope_table import bands, freq_ratio  # noqa: E402
from lab.measure.arm_specs import scaling_name  # noqa: E402
from rope_config import rope_inv_freq  # noqa: E402

BAND_COLORS = {'high': '#d8f0d8', 'middle': '#fdf1c7', 'low': '#d9e8f7'}


def plot_ramp(out_dir, summary):
    s, arms = summary['settings'], summary['arms']
    rope = [a for a in arms if a['pos_emb'] == 'rope']
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(12, 6))
        if not rope:
            ax.text(0.5, 0.5, 'no RoPE arm', ha='center', transform=ax.transAxes)
            return save(fig, os.path.join(out_dir, 'rope_ramp.png'))
        d, b, L = rotary_dims(rope[0]), rope[0]['rope_base'], rope[0]['train_len']
        i = 0
        for name, run in itertools.groupby(bands(d, b, L)):  # shade runs of equal band
            j = i + len(list(run)) - 1
            ax.axvspan(i - 0.5, j + 0.5, color=BAND_COLORS[name], zorder=0)
            note(ax, (i + j) / 2, 1.0, name, ha='center', fontsize=12)
            i = j + 1
        st, lines = styles(arms), []  # configs with the same curve share a line: 'ntk s=8 = dynamic (at l=128)'
        for a in rope:
            seq_len = s['T'] if a['dynamic'] else None
            r = freq_ratio(rotary_dims(a), a['rope_base'], a['rope_scaling'], seq_len).numpy()
            af = rope_inv_freq(rotary_dims(a), a['rope_base'], a['rope_scaling'], seq_len)[1]
            label = 'plain RoPE' if a['rope_scaling'] is None else scaling_name(a['rope_scaling'])
            label += f" (at l={s['T']})" if a['dynamic'] else ''
            same = next((ln for ln in lines if len(ln[0]) == len(r) and np.allclose(ln[0], r, rtol=1e-6)
                         and abs(ln[3] - af) < 1e-9), None)
            if same is None:
                lines.append((r, [label], st[a['name']], af))
            elif label not in same[1]:
                same[1].append(label)
        floor = min(ln[0][ln[0] > 0].min() for ln in lines if (ln[0] > 0).any()) / 4  # a stopped pair (0) sits here
        for k, (r, labels, style, af) in enumerate(lines):
            label = textwrap.fill(' = '.join(labels), 42, subsequent_indent='   ')
            label += '' if af == 1 else f"\n   (cos, sin × {af:.3f})"
            ax.plot(np.arange(len(r)), np.where(r > 0, r, floor), marker=MARKERS[k % len(MARKERS)], ms=max(3, 10 - k),
                    label=label, **dict(style, ls='-', lw=max(1.2, 3.0 - 0.3 * k)))
        stopped = any((ln[0] == 0).any() for ln in lines)
        if stopped:  # (the floor they are drawn at)
            ax.text(-0.3, floor * 1.06, "θ' = 0: stopped (p-RoPE, clip)", va='bottom', fontsize=11, color='0.25')
        ax.set_yscale('log', base=2)
        ax.set_ylim((floor if stopped else floor * 4) / 1.3, 1.5)  # (no stopped pair: the lowest ratio's own floor)
        ax.set_xlim(-0.5, d // 2 - 0.5)
        ax.set(xlabel=f'pair i (head_dim {d}, base {b:g}); wavelength grows to the right',
               ylabel="θ'ᵢ / θᵢ  (1 = kept, 1/s = PI)",
               title=f"RoPE frequency ratio per pair — bands at L={L}: high > 32 turns in L, low < 1 turn")
        ax.grid(alpha=0.3, which='both')
        ax.legend(**RIGHT)
        return save(fig, os.path.join(out_dir, 'rope_ramp.png'))


def plot_finetune(out_dir, summary):
    path = os.path.join(out_dir, 'finetune_curves.csv')
    if not os.path.isfile(path):
        return None
    rows, st = read_csv(path), styles(summary['arms'])
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(11, 6))
        for n in dict.fromkeys(r['arm'] for r in rows):  # the mean over an arm's seeds at each step
            by_iter = {}
            for r in rows:
                if r['arm'] == n and (r['val_loss_beyond_L'] or r['val_loss']):
                    by_iter.setdefault(int(r['iter']), []).append(float(r['val_loss_beyond_L'] or r['val_loss']))
            pts = sorted((it, float(np.mean(v))) for it, v in by_iter.items())
            ax.plot(*zip(*pts), marker='o', ms=5, label=n, **dict(st.get(n, {}), ls='-'))
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set(xlabel='fine-tune step', ylabel='validation loss beyond L (nats)',
               title=f"Fine-tuning: loss on positions ≥ L={summary['settings']['L']} at the fine-tune length")
        ax.grid(alpha=0.3)
        ax.legend(**RIGHT)
        return save(fig, os.path.join(out_dir, 'finetune_curves.png'))


def sweep_arms(summary):
    """The clipping sweep's arms: (pairs kept, arm) for every zero-shot p-RoPE arm at factor 1, and their base itself
    (plain RoPE: every pair); empty unless there are at least three."""
    out = [(int(a['rope_scaling']['partial_rotary_factor'] * a['head_dim'] // 2), a) for a in summary['arms']
           if a['kind'] == 'zero-shot' and (a.get('rope_scaling') or {}).get('rope_type') == 'proportional'
           and a['rope_scaling']['factor'] == 1 and not a.get('position_map') and not a.get('temperature')]
    base = next((a for a in summary['arms'] if a['kind'] == 'base' and out and a['checkpoint'] == out[0][1]['checkpoint']
                 and a.get('rope_scaling') is None), None)
    return sorted(out + [(base['head_dim'] // 2, base)], key=lambda t: t[0]) if base and len(out) >= 2 else []


def plot_clip_sweep(out_dir, summary):
    """clip_sweep.png: loss inside L and far past it, and the passkey's exact match per distance, against the number of
    pairs left rotating (the rest stopped), the critical dimension's count marked; None without a sweep."""
    from rope import critical_dimension
    arms = sweep_arms(summary)
    if not arms:
        return None
    s, base = summary['settings'], arms[-1][1]
    k_crit = critical_dimension(rotary_dims(base), base['rope_base'], base['train_len'])[0] // 2
    labels = list(base['buckets'])
    crop = next((a for a in summary['arms'] if (a.get('crop') or {}).get('form') and a['kind'] != 'fine-tuned'), None)
    with plt.rc_context(RC):
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(15, 5.5))
        ks = [k for k, _ in arms]
        for label, colour in zip((labels[0], labels[-1]), ('#1f77b4', '#d62728')):
            y = [a['buckets'][label] for _, a in arms]
            lo, hi = zip(*(a['buckets_ci'][label] for _, a in arms))
            ax.errorbar(ks, y, yerr=[np.subtract(y, lo), np.subtract(hi, y)], marker='o', color=colour, capsize=3,
                        label=f"positions {label}")
            if crop:
                ax.axhline(crop['buckets'][label], color=colour, ls=':', lw=1.2, label=f"the crop, {label}")
        far = [(k, r) for k, a in arms for r in a.get('retrieval') or []]
        for bucket in dict.fromkeys(r['bucket'] for _, r in far):  # inside L too: what stopping pairs costs there
            pts = [(k, r['exact_match']) for k, r in far if r['bucket'] == bucket]
            inside = next(r['distance_lo'] for _, r in far if r['bucket'] == bucket) < s['L']
            bx.plot(*zip(*pts), marker='o', ls='-' if inside else '--',
                    label=f"distance {bucket}" + (' (inside L)' if inside else ''))
        for axis in (ax, bx):
            axis.axvline(k_crit, color='0.3', ls='--', lw=1.2)
            note(axis, k_crit, 0.97, f" critical dimension: pairs 0-{k_crit - 1} turn within L", ha='left',
                 fontsize=11, color='0.25')
            axis.set_xticks(range(0, base['head_dim'] // 2 + 1, 2))
            axis.set_xlabel(f"pairs still rotating (the fastest k of {base['head_dim'] // 2}; the rest stopped)")
            axis.grid(alpha=0.3)
        ax.set(ylabel='loss (nats)', title=f"Loss by how many pairs turn (T = {s['T']}, L = {s['L']})")
        bx.set(ylabel='passkey exact match', ylim=(-0.03, 1.03), title='Passkey by how many pairs turn')
        ax.legend(fontsize=10)
        if far:
            bx.legend(fontsize=10)
        return save(fig, os.path.join(out_dir, 'clip_sweep.png'))
