"""
The pictures of an eval.py run, drawn only from the CSV/JSON files eval.py wrote in its out_dir (plotting never
loads a model or a checkpoint), so `python eval.py --plot_only=True --out_dir=<dir>` redraws them at any time:

  loss_vs_position.png   smoothed loss per position per arm, lines at L, at the fine-tune length(s) and at T_extra,
                         the critical-dimension bound of plain RoPE (Liu et al. 2023)
  rope_ramp.png          theta'_i/theta_i per pair for every arm's RoPE config, high/middle/low bands shaded
  attention_entropy.png  mean attention entropy per query position per arm
  retrieval.png          passkey test: in-context gain and exact match per distance bucket
  finetune_curves.png    loss beyond L vs fine-tune step (when the arms have fine-tune logs)

Zero-shot arms are dashed, fine-tuned arms solid (PoSE fine-tunes dash-dotted), in one colour per method (whatever
the scale); the base model is black.
"""
import csv
import io
import json
import os
import textwrap

import matplotlib
matplotlib.use('Agg')
import matplotlib.ticker  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from data.common import DataError, atomic_write  # noqa: E402
from rope_config import bands, critical_dimension, freq_ratio, rope_inv_freq, scaling_name  # noqa: E402

RC = {'font.size': 13, 'axes.titlesize': 15, 'axes.labelsize': 14, 'legend.fontsize': 11, 'xtick.labelsize': 12,
      'ytick.labelsize': 12, 'axes.spines.top': False, 'axes.spines.right': False, 'figure.dpi': 110}
COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22',
          '#7f7f7f']
MARKERS = ['o', 's', '^', 'D', 'v', 'P', 'X', '<', '>', 'h']
BAND_COLORS = {'high': '#d8f0d8', 'middle': '#fdf1c7', 'low': '#d9e8f7'}


def read_csv(path):
    """A CSV as a list of {column: text} rows."""
    if not os.path.isfile(path):
        raise DataError(f"{path} not found; run eval.py (without --plot_only) to write it first")
    try:
        with open(path, newline='', encoding='utf-8') as f:
            return list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DataError(f"{path} is unreadable ({e}); rerun eval.py to write it again") from None


def read_columns(path, names):
    """position,<arm>,... -> {arm: float array over positions} for the arms `names`, NaN where one was not scored."""
    rows = read_csv(path)
    gone = [n for n in names if not rows or n not in rows[0]]
    if gone:
        raise DataError(f"{path} has no column for arm {gone[0]!r} of summary.json; rerun eval.py to write both again")
    try:
        return {n: np.array([float(r[n]) if r[n] != '' else np.nan for r in rows]) for n in names}
    except (TypeError, ValueError) as e:
        raise DataError(f"{path} holds a cell that is not a number ({e}); rerun eval.py to write it again") from None


def family(arm):
    """Colour key, from summary.json's structured fields: the position encoding, the rope type and its non-default
    settings, whatever the scale, so 'yarn s=8 β_fast=8 zero-shot' and 'yarn s=4 β_fast=8 ft100' share a colour; and
    the position map's method, whatever its window ('rerope w=64 zero-shot' and 'rerope w=32 zero-shot')."""
    return json.dumps([arm['pos_emb'], arm.get('rope_type'), arm.get('settings') or {},
                       (arm.get('position_map') or {}).get('method')], sort_keys=True)


# line styles for a second, third, ... arm that would otherwise draw the same colour and the same line
# ('yarn s=4 β_fast=8 ft100' beside 'yarn s=8 β_fast=8 ft100'): dotted, long dashes, dash-dot-dot
REPEAT_LS = [(0, (1, 1.5)), (0, (8, 3)), (0, (4, 1.5, 1, 1.5, 1, 1.5))]


def styles(arms):
    out, colors, taken = {}, {}, {}
    for a in arms:
        if a['kind'] == 'base' and not any(o['color'] == 'black' for o in out.values()):
            out[a['name']] = dict(color='black', ls='-', lw=2.4)  # the first base model; other bases get colours
            continue
        c = colors.setdefault(family(a), COLORS[len(colors) % len(COLORS)])
        ls = '--' if a['kind'] == 'zero-shot' else '-.' if a.get('pose') else '-'
        k = taken[c, ls] = taken.get((c, ls), -1) + 1
        out[a['name']] = dict(color=c, ls=REPEAT_LS[(k - 1) % len(REPEAT_LS)] if k else ls, lw=2.0)
    return out


def smooth(y, w):
    """Centred moving average of width w over the scored (finite) positions (shorter at the ends)."""
    ok = np.isfinite(y)
    if w <= 1:
        return y
    k = np.ones(w)
    num, den = np.convolve(np.where(ok, y, 0.0), k, 'same'), np.convolve(ok.astype(float), k, 'same')
    return np.where(ok, num / np.maximum(den, 1), np.nan)


def save(fig, path):
    """(path, the figure as PNG bytes): plot_all writes every picture once all of them are drawn."""
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=130, bbox_inches='tight')
    plt.close(fig)
    return path, buf.getvalue()


def theory_line(ax, arms, T):
    """The critical-dimension bound of plain RoPE for the base model (rope.critical_dimension), dotted."""
    base = next((a for a in arms if a['kind'] == 'base' and a['pos_emb'] == 'rope'), None)
    if base is None:
        return
    d_extra, t_extra = critical_dimension(base['head_dim'], base['rope_base'], base['train_len'])
    if t_extra < T:
        ax.axvline(t_extra, color='black', lw=1.4, ls=(0, (1, 2)), zorder=1)
        ax.text(t_extra, 0.86, f" T_extra≈{t_extra:.0f}\n (d_extra={d_extra})", transform=ax.get_xaxis_transform(),
                va='top', ha='left', color='0.15', fontsize=11)


def length_lines(ax, s):
    ax.axvline(s['L'], color='0.35', lw=1.6, zorder=1)
    ax.text(s['L'], 1.0, f" L={s['L']}", transform=ax.get_xaxis_transform(), va='top', ha='left', color='0.25',
            fontsize=12)
    for n in s.get('finetune_lengths', []):
        ax.axvline(n, color='0.35', lw=1.4, ls=':', zorder=1)
        ax.text(n, 0.93, f" fine-tuned at {n}", transform=ax.get_xaxis_transform(), va='top', ha='left',
                color='0.25', fontsize=12)


def curves(ax, names, cols, st, w, log_x):
    """One smoothed line per arm; a dynamic arm's line joins its scored positions (dense, then its grid)."""
    T = len(cols[names[0]])
    x = np.arange(1, T + 1) if log_x else np.arange(T)
    ys = []
    for n in names:
        ys.append(smooth(cols[n], w))
        ok = np.isfinite(ys[-1])
        ax.plot(x[ok], ys[-1][ok], label=n, **st[n])
    if log_x:
        ax.set_xscale('log')
        ax.set_xlim(1, T)
    else:
        ax.set_xlim(0, T - 1)
    return np.array(ys)


def panels(arms):
    """Arms split for readability: zero-shot arms | fine-tuned arms, each panel with the base model(s) in black."""
    base = [a['name'] for a in arms if a['kind'] == 'base']
    groups = [(title, base + [a['name'] for a in arms if a['kind'] == kind])
              for kind, title in (('zero-shot', 'zero-shot: scaling or position map switched on, no training'),
                                  ('fine-tuned', 'fine-tuned at the longer length'))]
    return [g for g in groups if len(g[1]) > len(base)] or [('', base)]


def plot_positions(out_dir, summary, w, log_x, what):
    """loss_vs_position.png (what='loss') or attention_entropy.png (what='entropy'): one panel per arm group."""
    s, arms = summary['settings'], summary['arms']
    if what == 'loss':
        csv_name, png, ylabel, title = ('position_loss.csv', 'loss_vs_position.png', f'loss (nats), mean over {w} '
                                        f'positions', f"Loss vs position — {s['dataset']}, {s['num_windows']} held-out "
                                        f"windows of {s['T']} tokens")
    else:
        csv_name, png, ylabel, title = ('attention_entropy.csv', 'attention_entropy.png', 'attention entropy (nats)',
                                        f"Attention entropy vs query position — mean over layers, heads, "
                                        f"{s['entropy']['windows']} windows")
    cols = read_columns(os.path.join(out_dir, csv_name), [a['name'] for a in arms])
    groups, st = panels(arms), styles(arms)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(groups), figsize=(8.5 * len(groups), 7.5), sharey=True, squeeze=False)
        ys = []
        for ax, (sub, group) in zip(axes[0], groups):
            ys.append(curves(ax, group, cols, st, w, log_x))
            length_lines(ax, s if 'zero-shot' not in sub else dict(s, finetune_lengths=[]))
            if what == 'loss':
                theory_line(ax, arms, s['T'])
            ax.set_xlabel(('token' if what == 'loss' else 'query') + ' position' + (' + 1 (log scale)' if log_x else ''))
            ax.set_title(sub, fontsize=13)
            ax.grid(alpha=0.3)
            ax.legend(loc='upper center', bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
        ys = np.concatenate(ys)
        if what == 'loss':  # a curve that blows up leaves the chart instead of flattening the rest
            top = min(np.nanmax(ys), 2.5 * np.nanmean(ys[:, :s['L']], axis=1).min())
            axes[0, 0].set_ylim(np.nanmin(ys) - 0.05 * (top - np.nanmin(ys)), top)
            for ax in axes[0] if np.nanmax(ys) > top else []:
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
            label = 'plain RoPE' if a['rope_scaling'] is None else scaling_name(a['rope_scaling'])
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
    """Exact match and gain over the no-copy control vs distance, per arm, with 95% intervals."""
    s, arms = summary['settings'], summary['arms']
    rows, st = read_csv(os.path.join(out_dir, 'retrieval.csv')), styles(arms)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, 2, figsize=(15, 6.5))
        if not rows:
            axes[0].text(0.5, 0.5, 'passkey test skipped (retrieval_examples=0)', ha='center', transform=axes[0].transAxes)
            return save(fig, os.path.join(out_dir, 'retrieval.png'))
        buckets = list(dict.fromkeys(r['bucket'] for r in rows))
        names = list(dict.fromkeys(r['arm'] for r in rows))
        for ax, (col, lo, hi, scale, label) in zip(axes, (
                ('exact_match', 'exact_match_lo', 'exact_match_hi', 100, 'exact match (%), greedy, 95% interval'),
                ('gain', 'gain_lo', 'gain_hi', 1, 'gain (nats): control loss − repeat loss'))):
            for j, n in enumerate(names):
                mine = {r['bucket']: r for r in rows if r['arm'] == n}
                y = np.array([float(mine[b][col]) for b in buckets]) * scale
                err = np.abs(np.array([[float(mine[b][lo]), float(mine[b][hi])] for b in buckets]).T * scale - y)
                ax.errorbar(np.arange(len(buckets)) + (j - (len(names) - 1) / 2) * 0.03, y, yerr=err, label=n,
                            marker=MARKERS[j % len(MARKERS)], ms=6, capsize=3, **st[n])
            first_beyond = next((i for i, r in enumerate(buckets) if int(r.split('-')[0]) >= s['L']), None)
            if first_beyond is not None:
                ax.axvline(first_beyond - 0.5, color='0.35', lw=1.6)
                ax.text(first_beyond - 0.5, 1.0, f" beyond L={s['L']}", transform=ax.get_xaxis_transform(), va='top')
            for n in s.get('finetune_lengths', []):
                k = next((i for i, r in enumerate(buckets) if int(r.split('-')[0]) >= n), None)
                if k is not None:
                    ax.axvline(k - 0.5, color='0.35', lw=1.4, ls=':')
            ax.axhline(0, color='0.3', lw=0.8)
            ax.set_xticks(np.arange(len(buckets)), buckets)
            ax.set_xlabel('distance between the copies (tokens)')
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0].set_ylim(-3, 103)
        axes[1].legend(loc='upper left', bbox_to_anchor=(1.01, 1.0), frameon=False)
        fig.suptitle(f"Passkey: a random {s['retrieval']['len']}-token string repeated at a distance (first "
                     f"{s['retrieval']['cue']} given), {s['retrieval']['examples']} examples per bucket")
        return save(fig, os.path.join(out_dir, 'retrieval.png'))


def plot_retrieval_depth(out_dir, summary, room='passkey_depth', most=3):
    """retrieval_depth.png: exact match over (depth, distance) cells of the depth-and-distance passkey
    (lab.retrieval.passkey_depth_examples), from summary.json: each arm's settings[room] and arms[i][room] buckets
    with per_example exact [seeds][examples], depth and distance [examples]. One panel per arm shown: the base, the
    zero-shot arm and the fine-tuned arm with the highest mean exact match beyond L (at most `most`). Depth bins
    0, L/2, L, 2L, ... T (the first copy's position); a cell gives its exact match over examples and seeds and its
    number of examples; cells with no example are left grey."""
    s, arms = summary['settings'], summary['arms']
    L, T, path = s['L'], s['T'], os.path.join(out_dir, 'retrieval_depth.png')
    have = [a for a in arms if a.get(room)]
    beyond = lambda a: np.mean([b['exact_match'] for b in a[room] if b['distance_lo'] >= L] or [0.0])  # noqa: E731
    shown = [next((a for a in have if a['kind'] == kind), None) if kind == 'base' else
             max((a for a in have if a['kind'] == kind), key=beyond, default=None)
             for kind in ('base', 'zero-shot', 'fine-tuned')]
    shown = ([a for a in shown if a is not None] or have)[:most]
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, max(1, len(shown)), figsize=(6.5 * max(1, len(shown)) + 1.5, 6), squeeze=False)
        if not shown:
            axes[0, 0].text(0.5, 0.5, f'no {room} results (test skipped)', ha='center', transform=axes[0, 0].transAxes)
            return save(fig, path)
        edges = [0, L // 2] + [e for e in (L * 2 ** k for k in range(32)) if e < T] + [T]
        edges = sorted(set(edges))
        cmap = matplotlib.colormaps['viridis'].with_extremes(bad='0.88')
        for ax, a in zip(axes[0], shown):
            labels = [b['bucket'] for b in a[room]]
            hits, counts = np.zeros((len(edges) - 1, len(labels))), np.zeros((len(edges) - 1, len(labels)), int)
            for j, b in enumerate(a[room]):
                pe = b['per_example']
                exact = np.asarray(pe['exact'], dtype=float).mean(0)  # each example over the arm's seeds
                rows = np.searchsorted(edges, np.asarray(pe['depth']), side='right') - 1
                for i, x in zip(rows, exact):
                    hits[i, j] += x
                    counts[i, j] += 1
            grid = np.ma.masked_where(counts == 0, 100 * hits / np.maximum(counts, 1))
            im = ax.imshow(grid, origin='lower', aspect='auto', cmap=cmap, vmin=0, vmax=100)
            for i, j in zip(*np.nonzero(counts)):
                ax.text(j, i, f"{grid[i, j]:.0f}%\nn={counts[i, j]}", ha='center', va='center', fontsize=9,
                        color='white' if grid[i, j] < 60 else 'black')
            ax.set_xticks(np.arange(len(labels)), labels, rotation=30)
            ax.set_yticks(np.arange(len(edges) - 1), [f"{lo}-{hi}" for lo, hi in zip(edges, edges[1:])])
            first_beyond = next((j for j, b in enumerate(a[room]) if b['distance_lo'] >= L), None)
            if first_beyond is not None:
                ax.axvline(first_beyond - 0.5, color='white', lw=2)
            ax.set_title(a['name'], fontsize=13)
            ax.set_xlabel('distance between the copies (tokens)')
            ax.spines[['top', 'right']].set_visible(True)
        axes[0, 0].set_ylabel("depth: the first copy's position")
        fig.colorbar(im, ax=axes[0].tolist(), label='exact match (%)', fraction=0.03)
        r = s[room]
        fig.suptitle(f"Passkey by depth and distance: a random {r.get('len', '?')}-token string at a random depth "
                     f"and again at a distance, {r.get('examples', '?')} examples per distance bucket (L={L})")
        return save(fig, path)


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
        ax.set_xlabel('fine-tune step')
        ax.set_ylabel('validation loss beyond L (nats)')
        ax.set_title(f"Fine-tuning: loss on positions ≥ L={summary['settings']['L']} at the fine-tune length")
        ax.grid(alpha=0.3)
        ax.legend(loc='upper left', bbox_to_anchor=(1.01, 1.0), frameon=False)
        return save(fig, os.path.join(out_dir, 'finetune_curves.png'))


# What each picture reads from summary.json: a file without them is refused up front with the field named, and a
# picture whose own fields are missing is skipped (with a line saying so) instead of taking the others down with it.
NEEDS = {'settings': ('T', 'L', 'dataset', 'num_windows'),
         'arm': ('name', 'kind', 'pos_emb', 'rope_type', 'settings', 'position_map', 'head_dim', 'rope_base',
                 'train_len', 'rope_scaling', 'dynamic')}
SOURCES = {'loss_vs_position.png': 'position_loss.csv', 'rope_ramp.png': 'summary.json',
           'attention_entropy.png': 'attention_entropy.csv', 'retrieval.png': 'retrieval.csv',
           'retrieval_depth.png': 'summary.json',
           'finetune_curves.png': 'finetune_curves.csv'}  # the file each picture is drawn from
OPTIONAL = {'attention_entropy.png': ('entropy',), 'retrieval.png': ('retrieval',),
            'retrieval_depth.png': ('passkey_depth',)}


def read_summary(out_dir):
    """summary.json, checked for the fields every picture needs; ValueError naming the file and the field."""
    path = os.path.join(out_dir, 'summary.json')
    if not os.path.isfile(path):
        raise ValueError(f"{path} not found; run eval.py (without --plot_only) to measure first")
    try:
        with open(path, encoding='utf-8') as f:
            summary = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not readable JSON ({e}); rerun eval.py to write it again") from None
    s, arms = (summary.get('settings'), summary.get('arms')) if isinstance(summary, dict) else (None, None)
    if not isinstance(s, dict) or not isinstance(arms, list) or not arms:
        raise ValueError(f"{path} has no 'settings' object or no 'arms' list; rerun eval.py to write it again")
    missing = [f"settings.{k}" for k in NEEDS['settings'] if k not in s] + \
        [f"arms[{i}].{k}" for i, a in enumerate(arms) for k in NEEDS['arm'] if not isinstance(a, dict) or k not in a]
    if missing:
        raise ValueError(f"{path} lacks {missing[0]}" + (f" (and {len(missing) - 1} more fields)" if len(missing) > 1
                         else '') + "; it was not written by this eval.py: rerun eval.py to write it again")
    return summary


def plot_all(out_dir, log_x=False, smooth=0):
    """Draw every PNG from out_dir's CSV/JSON, then write them (none when one cannot be drawn); returns their paths."""
    summary = read_summary(out_dir)
    if smooth > summary['settings']['T']:
        raise ValueError(f"smooth={smooth} is wider than the {summary['settings']['T']} positions evaluated; pass "
                         f"--smooth <= {summary['settings']['T']} (0: T/32)")
    w = smooth or max(1, summary['settings']['T'] // 32)
    steps = [('loss_vs_position.png', lambda: plot_positions(out_dir, summary, w, log_x, 'loss')),
             ('rope_ramp.png', lambda: plot_ramp(out_dir, summary)),
             ('attention_entropy.png', lambda: plot_positions(out_dir, summary, w, log_x, 'entropy')),
             ('retrieval.png', lambda: plot_retrieval(out_dir, summary)),
             ('retrieval_depth.png', lambda: plot_retrieval_depth(out_dir, summary)),
             ('finetune_curves.png', lambda: plot_finetune(out_dir, summary))]
    out = []
    for name, draw in steps:
        gone = [k for k in OPTIONAL.get(name, ()) if k not in summary['settings']]
        if gone:
            print(f"skipped {name}: summary.json has no settings.{gone[0]}")
            continue
        try:
            out.append(draw())
        except DataError:
            raise
        except (KeyError, IndexError, TypeError, ValueError) as e:  # a hand-edited CSV or summary.json
            raise DataError(f"{name} cannot be drawn from {os.path.join(out_dir, SOURCES[name])} and summary.json "
                            f"({type(e).__name__}: {e}); rerun eval.py to write them again") from None
    for path, png in [p for p in out if p]:
        atomic_write(path, lambda f: f.write(png))
    return [p[0] for p in out if p]


# ----------------------------------------------------------------------------- the Markdown report

def table(title, cols, arms, cell):
    return ['', title, '', '| arm | ' + ' | '.join(cols) + ' |', '|---' * (len(cols) + 1) + '|'] + \
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
]
KIND_NAMES = {'loss': 'loss', 'exact_match': 'passkey exact match', 'passkey_depth': 'depth-passkey exact match',
              'needles': 'needle exact match', 'needles_mq': 'multi-query needle exact match',
              'recall_gain': 'natural-text recall gain'}
MARK = {'equivalent': ' ≈', 'unresolved': ' ?', 'worse': '', 'better': ' !'}  # against the column's best (*)


def mark(s, kind, column, name):
    vb = s['vs_best'][kind][column]
    return ' *' if vb['best'] == name else MARK[vb['arms'][name]['verdict']]


def contrast_table(title, rows_by_col, fmt):
    cols = list(rows_by_col)
    names = [f"{r['a']} vs {r['b']}" for r in rows_by_col[cols[0]]]
    return ['', title, '', '| contrast | ' + ' | '.join(cols) + ' |', '|---' * (len(cols) + 1) + '|'] + \
        [f"| {n} | " + ' | '.join(f"{fmt(r['diff'])} [{fmt(r['ci'][0])}, {fmt(r['ci'][1])}] {r['verdict']}"
                                  for r in (rows_by_col[c][i] for c in cols)) + ' |' for i, n in enumerate(names)]


def summary_markdown(summary):
    s, arms = summary['settings'], summary['arms']
    m = s['margins']
    rule = (f"Verdicts are paired tests on the same windows or examples, seeds inside the interval, Holm-corrected "
            f"within each column: better/worse = adjusted p < 0.05; equivalent = the 95% paired interval inside "
            f"±{m['loss']:g} nats (loss) or ±{100 * m['exact_match']:g} points (exact match); unresolved = neither.")
    lines = [f"# Loss by position: {s['dataset']}, {s['num_windows']} windows of T={s['T']} tokens, L={s['L']}", '',
             f"Windows: seed {s['seed']}, inside {'held-out' if s.get('split', 'val') == 'val' else 'TRAINING'} "
             f"documents, the same for every arm. {s['protocol']}", '', rule]
    sampled = [f"{a['name']} ({', '.join(k for k, v in a['scoring']['buckets'].items() if v == 'sampled')})"
               for a in arms if 'sampled' in a['scoring']['buckets'].values()]
    lines += table('Mean loss (nats) per position bucket ± the half-width of its 95% interval over windows and seeds '
                   '(* = best in the column; against it: ≈ equivalent, ? unresolved, no mark worse)' +
                   (f"; sampled positions, not every one: {'; '.join(sampled)}" if sampled else '') + ':',
                   list(arms[0]['buckets']), arms,
                   lambda a, c: f"{a['buckets'][c]:.3f} ± {(a['buckets_ci'][c][1] - a['buckets_ci'][c][0]) / 2:.3f}"
                   + mark(s, 'loss', c, a['name']))
    lines += table('Perplexity with the context cut to n tokens (one forward of the first n tokens):',
                   list(arms[0]['ppl_at']), arms, lambda a, c: f"{a['ppl_at'][c]:.3f}")
    for kind, field, title in ROOM_TABLES:
        if not arms[0].get(field):
            continue
        gain = kind == 'recall_gain'
        lines += table(title(s), [x['bucket'] for x in arms[0][field]], arms,
                       lambda a, c, field=field, kind=kind, gain=gain: next(
                           (f"{x['gain']:+.3f} [{x['gain_ci'][0]:+.3f}, {x['gain_ci'][1]:+.3f}]" if gain else
                            f"{100 * x['exact_match']:.0f}% [{100 * x['exact_match_ci'][0]:.0f}-"
                            f"{100 * x['exact_match_ci'][1]:.0f}]" + (f" / {x['gain']:+.2f}" if 'gain' in x else ''))
                           for x in a[field] if x['bucket'] == c) + mark(s, kind, c, a['name']))
    for kind, rows in (s.get('contrasts') or {}).items():
        unit = 'nats' if kind in ('loss', 'recall_gain') else 'points'
        lines += contrast_table(f"Named contrasts, {KIND_NAMES[kind]}: difference A − B ({unit}) [95% paired "
                                f"interval] verdict of A:", rows,
                                (lambda v: f"{v:+.3f}") if unit == 'nats' else (lambda v: f"{100 * v:+.0f}"))
    for crop, rows in (s.get('vs_crop') or {}).items():
        lines += table(f"Against the crop control {crop}: loss difference (nats) and its verdict per bucket; 'better' "
                       f"past L means the arm uses context the crop cannot see:", list(rows['loss']),
                       [a for a in arms if a['name'] != crop],
                       lambda a, c, rows=rows: f"{rows['loss'][c][a['name']]['diff']:+.3f} "
                                               f"{rows['loss'][c][a['name']]['verdict']}")
    lines += table('Mean attention entropy (nats) by query position (seeds averaged):',
                   list(arms[0]['entropy_buckets']), arms, lambda a, c: f"{a['entropy_buckets'][c]:.2f}")
    return '\n'.join(lines) + '\n'


def bases_markdown(out):
    """bases.md: each named contrast (and every arm against the crop) per column, its mean difference over the base
    models with the t interval over bases, the verdict, and on how many bases that base's own verdict agrees."""
    m = out['margins']
    lines = [f"# The same comparisons on {len(out['bases'])} base models", '',
             'Bases: ' + ', '.join(out['bases']) + '.', '',
             f"Each cell: the mean over bases of A − B, its 95% t interval over the bases (df = bases − 1: base-to-base "
             f"variation, which holds each base's own window or example noise), the verdict (Holm within the column; "
             f"equivalent = inside ±{m['loss']:g} nats or ±{100 * m['exact_match']:g} points), and (k/n) the bases "
             f"whose own paired verdict is the same."]
    for kind, rows in out['comparisons'].items():
        unit = 'nats' if kind in ('loss', 'recall_gain') else 'points'
        fmt = (lambda v: f"{v:+.3f}") if unit == 'nats' else (lambda v: f"{100 * v:+.0f}")
        cols = list(rows)
        names = list(dict.fromkeys(r['name'] for c in cols for r in rows[c]))
        by = {(c, r['name']): r for c in cols for r in rows[c]}
        lines += ['', f"{KIND_NAMES[kind].capitalize()}, A − B ({unit}):", '', '| contrast | ' + ' | '.join(cols) + ' |',
                  '|---' * (len(cols) + 1) + '|']
        for n in names:
            cells = [(lambda r: f"{fmt(r['diff'])} [{fmt(r['ci'][0])}, {fmt(r['ci'][1])}] {r['verdict']} "
                                f"({sum(v == r['verdict'] for v in r['verdicts'])}/{len(r['verdicts'])})")(by[c, n])
                     if (c, n) in by else '' for c in cols]
            lines.append(f"| {n} | " + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'
