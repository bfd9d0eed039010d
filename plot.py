"""
The pictures of an eval.py run, drawn only from the CSV/JSON files eval.py wrote in its out_dir (plotting never
loads a model or a checkpoint), so `python eval.py --plot_only --out_dir=<dir>` redraws them at any time:

  loss_vs_position.png   smoothed loss per position per arm, lines at L and at the fine-tune length(s)
  rope_ramp.png          theta'_i/theta_i per pair for every arm's RoPE config, high/middle/low bands shaded
  attention_entropy.png  mean attention entropy per query position per arm
  retrieval.png          passkey test: in-context gain and exact match per distance bucket
  finetune_curves.png    loss beyond L vs fine-tune step (when the arms have fine-tune logs)

Zero-shot arms are dashed, fine-tuned arms solid, in one colour per method (whatever the scale); the base
model is black.
"""
import csv
import json
import os
import re
import textwrap

import matplotlib
matplotlib.use('Agg')
import matplotlib.ticker  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from data.common import atomic_write  # noqa: E402
from rope import bands, freq_ratio, rope_inv_freq  # noqa: E402

RC = {'font.size': 13, 'axes.titlesize': 15, 'axes.labelsize': 14, 'legend.fontsize': 11, 'xtick.labelsize': 12,
      'ytick.labelsize': 12, 'axes.spines.top': False, 'axes.spines.right': False, 'figure.dpi': 110}
COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22',
          '#7f7f7f']
MARKERS = ['o', 's', '^', 'D', 'v', 'P', 'X', '<', '>', 'h']
BAND_COLORS = {'high': '#d8f0d8', 'middle': '#fdf1c7', 'low': '#d9e8f7'}


def read_csv(path):
    if not os.path.isfile(path):
        raise ValueError(f"{path} not found; run eval.py (without --plot_only) to write it first")
    with open(path, newline='', encoding='utf-8') as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def read_columns(path):
    """position,<arm>,... -> (arm names, float array [T, arms])."""
    header, rows = read_csv(path)
    return header[1:], np.array([[float(v) for v in r[1:]] for r in rows], dtype=np.float64)


def method(name):
    """'yarn s=4 ft100' and 'yarn s=4 zero-shot' share a method (and a colour)."""
    return re.sub(r' (zero-shot|ft\d+)( \[.*\])?$', '', name)


def family(name):
    """Colour key: the method without its scale, so 'yarn s=8 β_fast=8 zero-shot' and 'yarn s=4 β_fast=8 ft100' match."""
    return re.sub(r' s=[0-9.e+-]+', '', method(name))


def styles(arms):
    out, colors = {}, {}
    for a in arms:
        if a['kind'] == 'base' and not any(o['color'] == 'black' for o in out.values()):
            out[a['name']] = dict(color='black', ls='-', lw=2.4)  # the first base model; other bases get colours
            continue
        c = colors.setdefault(family(a['name']), COLORS[len(colors) % len(COLORS)])
        out[a['name']] = dict(color=c, ls='--' if a['kind'] == 'zero-shot' else '-', lw=2.0)
    return out


def smooth(y, w):
    """Centred moving average of width w (shorter at the ends)."""
    if w <= 1:
        return y
    k = np.ones(w)
    return np.convolve(y, k, 'same') / np.convolve(np.ones_like(y), k, 'same')


def save(fig, path):
    atomic_write(path, lambda f: fig.savefig(f, format='png', dpi=130, bbox_inches='tight'))
    plt.close(fig)
    return path


def length_lines(ax, s):
    ax.axvline(s['L'], color='0.35', lw=1.6, zorder=1)
    ax.text(s['L'], 1.0, f" L={s['L']}", transform=ax.get_xaxis_transform(), va='top', ha='left', color='0.25',
            fontsize=12)
    for n in s.get('finetune_lengths', []):
        ax.axvline(n, color='0.35', lw=1.4, ls=':', zorder=1)
        ax.text(n, 0.93, f" fine-tuned at {n}", transform=ax.get_xaxis_transform(), va='top', ha='left',
                color='0.25', fontsize=12)


def curves(ax, names, data, st, w, log_x):
    x = np.arange(1, data.shape[0] + 1) if log_x else np.arange(data.shape[0])
    ys = []
    for j, n in enumerate(names):
        ys.append(smooth(data[:, j], w))
        ax.plot(x, ys[-1], label=n, **st[n])
    if log_x:
        ax.set_xscale('log')
        ax.set_xlim(1, data.shape[0])
    else:
        ax.set_xlim(0, data.shape[0] - 1)
    return np.array(ys)


def panels(arms):
    """Arms split for readability: zero-shot arms | fine-tuned arms, each panel with the base model(s) in black."""
    base = [a['name'] for a in arms if a['kind'] == 'base']
    groups = [(title, base + [a['name'] for a in arms if a['kind'] == kind])
              for kind, title in (('zero-shot', 'zero-shot: scaling switched on, no training'),
                                  ('fine-tuned', 'fine-tuned at the longer length'))]
    return [g for g in groups if len(g[1]) > len(base)] or [('', base)]


def plot_positions(out_dir, summary, w, log_x, what):
    """loss_vs_position.png (what='loss') or attention_entropy.png (what='entropy'): one panel per arm group."""
    s, arms = summary['settings'], summary['arms']
    csv_name, png, ylabel, title = {
        'loss': ('position_loss.csv', 'loss_vs_position.png', f'loss (nats), mean over {w} positions',
                 f"Loss vs position — {s['dataset']}, {s['num_windows']} held-out windows of {s['T']} tokens"),
        'entropy': ('attention_entropy.csv', 'attention_entropy.png', 'attention entropy (nats)',
                    f"Attention entropy vs query position — mean over layers, heads, {s['entropy']['windows']} windows"),
    }[what]
    names, data = read_columns(os.path.join(out_dir, csv_name))
    groups, st = panels(arms), styles(arms)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(groups), figsize=(8.5 * len(groups), 7.5), sharey=True, squeeze=False)
        ys = []
        for ax, (sub, group) in zip(axes[0], groups):
            ys.append(curves(ax, group, data[:, [names.index(n) for n in group]], st, w, log_x))
            length_lines(ax, s if 'zero-shot' not in sub else dict(s, finetune_lengths=[]))
            ax.set_xlabel(('token' if what == 'loss' else 'query') + ' position' + (' + 1 (log scale)' if log_x else ''))
            ax.set_title(sub, fontsize=13)
            ax.grid(alpha=0.3)
            ax.legend(loc='upper center', bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
        ys = np.concatenate(ys)
        if what == 'loss':  # a curve that blows up leaves the chart instead of flattening the rest
            top = min(ys.max(), 2.5 * ys[:, :s['L']].mean(axis=1).min())
            axes[0, 0].set_ylim(ys.min() - 0.05 * (top - ys.min()), top)
            for ax in axes[0] if ys.max() > top else []:
                ax.text(0.99, 0.99, f"clipped at {top:.2f}", transform=ax.transAxes, ha='right', va='top', color='0.4')
        axes[0, 0].set_ylabel(ylabel)
        fig.suptitle(title)
        return save(fig, os.path.join(out_dir, png))


def plot_ramp(out_dir, summary):
    s, arms = summary['settings'], summary['arms']
    rope = [a for a in arms if a['pos_emb'] == 'rope']
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(12, 6))
        if not rope:
            ax.text(0.5, 0.5, 'no RoPE arm', ha='center', transform=ax.transAxes)
            return save(fig, os.path.join(out_dir, 'rope_ramp.png'))
        d, b, L = rope[0]['head_dim'], rope[0]['rope_base'], rope[0]['train_len']
        band = bands(d, b, L)
        i = 0
        while i < len(band):  # shade runs of equal band
            j = i
            while j + 1 < len(band) and band[j + 1] == band[i]:
                j += 1
            ax.axvspan(i - 0.5, j + 0.5, color=BAND_COLORS[band[i]], zorder=0)
            ax.text((i + j) / 2, 1.0, band[i], transform=ax.get_xaxis_transform(), ha='center', va='top', fontsize=12)
            i = j + 1
        st, lines = styles(arms), []  # configs with the same curve share a line: 'ntk s=8 = dynamic (at l=128)'
        for a in rope:
            seq_len = s['T'] if a['dynamic'] else None
            r = freq_ratio(a['head_dim'], a['rope_base'], a['rope_scaling'], seq_len).numpy()
            af = rope_inv_freq(a['head_dim'], a['rope_base'], a['rope_scaling'], seq_len)[1]
            label = 'plain RoPE' if a['rope_scaling'] is None else method(a['name'])
            label += f" (at l={s['T']})" if a['dynamic'] else ''
            same = next((ln for ln in lines if len(ln[0]) == len(r) and np.allclose(ln[0], r, rtol=1e-6)
                         and abs(ln[3] - af) < 1e-9), None)
            if same is None:
                lines.append((r, [label], st[a['name']], af))
            elif label not in same[1]:
                same[1].append(label)
        for k, (r, labels, style, af) in enumerate(lines):
            label = textwrap.fill(' = '.join(labels), 42, subsequent_indent='   ')
            label += '' if af == 1 else f"\n   (cos, sin × {af:.3f})"
            ax.plot(np.arange(len(r)), r, marker=MARKERS[k % len(MARKERS)], ms=max(3, 10 - k), label=label,
                    **dict(style, ls='-', lw=max(1.2, 3.0 - 0.3 * k)))
        lowest = min(ln[0].min() for ln in lines)
        ax.set_yscale('log', base=2)
        ax.set_ylim(lowest / 1.3, 1.5)
        ax.set_xlim(-0.5, d // 2 - 0.5)
        ax.set_xlabel(f'pair i (head_dim {d}, base {b:g}); wavelength grows to the right')
        ax.set_ylabel("θ'ᵢ / θᵢ  (1 = kept, 1/s = PI)")
        ax.set_title(f"RoPE frequency ratio per pair — bands at L={L}: high > 32 turns in L, low < 1 turn")
        ax.grid(alpha=0.3, which='both')
        ax.legend(loc='upper left', bbox_to_anchor=(1.01, 1.0), frameon=False)
        return save(fig, os.path.join(out_dir, 'rope_ramp.png'))


def plot_retrieval(out_dir, summary):
    s, arms = summary['settings'], summary['arms']
    _, rows = read_csv(os.path.join(out_dir, 'retrieval.csv'))
    st = styles(arms)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, 2, figsize=(14, 6))
        if not rows:
            axes[0].text(0.5, 0.5, 'passkey test skipped (retrieval_windows=0)', ha='center', transform=axes[0].transAxes)
            return save(fig, os.path.join(out_dir, 'retrieval.png'))
        buckets = list(dict.fromkeys(r[1] for r in rows))
        names = list(dict.fromkeys(r[0] for r in rows))
        width = 0.8 / len(names)
        for k, (col, ax, label) in enumerate(((7, axes[0], 'in-context gain (nats): first-copy − repeat loss'),
                                              (8, axes[1], 'exact match (%), greedy'))):
            for j, n in enumerate(names):
                vals = {r[1]: float(r[col]) * (100 if col == 8 else 1) for r in rows if r[0] == n}
                ax.bar(np.arange(len(buckets)) + (j - (len(names) - 1) / 2) * width, [vals[b] for b in buckets], width,
                       color=st[n]['color'], hatch='//' if st[n]['ls'] == '--' else None, edgecolor='white', label=n)
            beyond = [i for i, b in enumerate(buckets) if int(b.split('-')[0]) >= s['L']]
            if beyond:
                ax.axvline(beyond[0] - 0.5, color='0.35', lw=1.4, ls=':')
                ax.text(beyond[0] - 0.5, 1.0, ' beyond L', transform=ax.get_xaxis_transform(), va='top', fontsize=12)
            ax.axhline(0, color='0.3', lw=0.8)
            ax.set_xticks(np.arange(len(buckets)), buckets)
            ax.set_xlabel('distance between the copies (tokens)')
            ax.set_ylabel(label)
            if col == 8:
                ax.set_ylim(0, 105)
        axes[1].legend(loc='upper left', bbox_to_anchor=(1.01, 1.0), frameon=False)
        fig.suptitle(f"Passkey test: a random {s['retrieval']['len']}-token string repeated at a distance "
                     f"(first {s['retrieval']['cue']} tokens given), {s['retrieval']['windows']} windows per bucket")
        return save(fig, os.path.join(out_dir, 'retrieval.png'))


def plot_finetune(out_dir, summary):
    path = os.path.join(out_dir, 'finetune_curves.csv')
    if not os.path.isfile(path):
        return None
    _, rows = read_csv(path)
    st = styles(summary['arms'])
    with plt.rc_context(RC):
        fig, ax = plt.subplots(figsize=(11, 6))
        for n in dict.fromkeys(r[0] for r in rows):
            pts = [(int(r[1]), float(r[3] or r[2])) for r in rows if r[0] == n and (r[3] or r[2])]
            ax.plot(*zip(*pts), marker='o', ms=5, label=n, **dict(st.get(n, {}), ls='-'))
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlabel('fine-tune step')
        ax.set_ylabel('validation loss beyond L (nats)')
        ax.set_title(f"Fine-tuning: loss on positions ≥ L={summary['settings']['L']} at the fine-tune length")
        ax.grid(alpha=0.3)
        ax.legend(loc='upper left', bbox_to_anchor=(1.01, 1.0), frameon=False)
        return save(fig, os.path.join(out_dir, 'finetune_curves.png'))


def plot_all(out_dir, log_x=False, smooth=0):
    """Draw every PNG from out_dir's CSV/JSON; returns the paths written."""
    path = os.path.join(out_dir, 'summary.json')
    if not os.path.isfile(path):
        raise ValueError(f"{path} not found; run eval.py (without --plot_only) to measure first")
    with open(path, encoding='utf-8') as f:
        summary = json.load(f)
    w = smooth or max(1, summary['settings']['T'] // 32)
    out = [plot_positions(out_dir, summary, w, log_x, 'loss'), plot_ramp(out_dir, summary),
           plot_positions(out_dir, summary, w, log_x, 'entropy'),
           plot_retrieval(out_dir, summary), plot_finetune(out_dir, summary)]
    return [p for p in out if p]
