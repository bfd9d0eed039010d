"""
The retrieval rooms' pictures, drawn by plot_all (lab/pictures/eval_plots.py) with plot_kit's styles from eval.py's files:

  retrieval.png          passkey test: in-context gain and exact match per distance bucket
  retrieval_depth.png    depth passkey: exact match per (depth, distance) cell, for the base and the best arms
  retrieval_rooms.png    the needle rooms, trained format beside untrained (lab/measure/ruler.py): exact match and what is emitted
"""
import os

import numpy as np

from lab.pictures.plot_kit import (MARKERS, RC, RIGHT, headline_arms, method_of, plt, read_csv, save,  # (Agg)
                                   styles)
import matplotlib  # noqa: E402


def first_at(los, n):
    """The index of the first bucket whose lower edge is >= n (None: none is)."""
    return next((i for i, lo in enumerate(los) if lo >= n), None)


def plot_retrieval(out_dir, summary, most=9):
    """Exact match and gain over the no-copy control vs distance, per arm, with 95% intervals; with more than `most`
    arms, the headline figure's arms only."""
    s, arms = summary['settings'], summary['arms']
    rows, st = read_csv(os.path.join(out_dir, 'retrieval.csv')), styles(arms)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, 2, figsize=(15, 6.5))
        if not rows:
            axes[0].text(0.5, 0.5, 'passkey test skipped (retrieval_examples=0)', ha='center', transform=axes[0].transAxes)
            return save(fig, os.path.join(out_dir, 'retrieval.png'))
        buckets = list(dict.fromkeys(r['bucket'] for r in rows))
        names = list(dict.fromkeys(r['arm'] for r in rows))
        if len(names) > most:  # a thicket: the headline's arms only (every arm: retrieval_families.png)
            names = [n for n in dict.fromkeys(a['name'] for v in headline_arms(summary).values() for _, a in v)
                     if n in names] or names[:most]
        los = [int(b.split('-')[0]) for b in buckets]
        for ax, (col, scale, label) in zip(axes, (('exact_match', 100, 'exact match (%), greedy, 95% interval'),
                                                  ('gain', 1, 'gain (nats): control loss − repeat loss'))):
            for j, n in enumerate(names):
                mine = {r['bucket']: r for r in rows if r['arm'] == n}
                y = np.array([float(mine[b][col]) for b in buckets]) * scale
                lo_hi = np.array([[float(mine[b][col + '_lo']), float(mine[b][col + '_hi'])] for b in buckets]).T
                err = np.abs(lo_hi * scale - y)
                ax.errorbar(np.arange(len(buckets)) + (j - (len(names) - 1) / 2) * 0.03, y, yerr=err, label=n,
                            marker=MARKERS[j % len(MARKERS)], ms=6, capsize=3, **st[n])
            k = first_at(los, s['L'])
            if k is not None:
                ax.axvline(k - 0.5, color='0.35', lw=1.6)
                ax.text(k - 0.5, 1.0, f" beyond L={s['L']}", transform=ax.get_xaxis_transform(),
                        va='bottom')  # above the frame, where no error bar reaches
            for k in (first_at(los, n) for n in s.get('finetune_lengths', [])):
                if k is not None:
                    ax.axvline(k - 0.5, color='0.35', lw=1.4, ls=':')
            ax.axhline(0, color='0.3', lw=0.8)
            ax.set_xticks(np.arange(len(buckets)), buckets)
            ax.set(xlabel='distance between the copies (tokens)', ylabel=label)
            ax.grid(alpha=0.3)
        axes[0].set_ylim(-3, 103)
        axes[1].legend(**RIGHT)
        fig.suptitle(f"Passkey: a random {s['retrieval']['len']}-token string repeated at a distance (first "
                     f"{s['retrieval']['cue']} given), {s['retrieval']['examples']} examples per bucket" +
                     (f"; {len(names)} of {len(summary['arms'])} arms (all: retrieval_families.png)"
                      if len(names) < len(summary['arms']) else ''))
        return save(fig, os.path.join(out_dir, 'retrieval.png'))


def depth_edges(L, T):
    """Depth bins 0, L/2, L, 2L, 4L, ... T."""
    return sorted({0, L // 2, T} | {e for e in (L * 2 ** k for k in range(32)) if e < T})


def depth_panel(ax, a, room, edges, L, fontsize=9):
    """One arm's heatmap of a room with depths (per_example depth and exact [seeds][examples]): exact match per
    (depth, distance) cell over examples and seeds, with n; grey where no example fell; a white line at L."""
    labels = [b['bucket'] for b in a[room]]
    hits, counts = np.zeros((len(edges) - 1, len(labels))), np.zeros((len(edges) - 1, len(labels)), int)
    for j, b in enumerate(a[room]):
        pe = b['per_example']
        exact = np.array([[np.nan if v is None else v for v in r] for r in pe['exact']]).mean(0)  # over seeds
        for i, x in zip(np.searchsorted(edges, np.asarray(pe['depth']), side='right') - 1, exact):
            if not np.isnan(x):  # (an example a moving-scale arm did not score: None)
                hits[i, j] += x
                counts[i, j] += 1
    grid = np.ma.masked_where(counts == 0, 100 * hits / np.maximum(counts, 1))
    im = ax.imshow(grid, origin='lower', aspect='auto', cmap=matplotlib.colormaps['viridis'].with_extremes(bad='0.88'),
                   vmin=0, vmax=100)
    for i, j in zip(*np.nonzero(counts)):
        ax.text(j, i, f"{grid[i, j]:.0f}%\nn={counts[i, j]}", ha='center', va='center', fontsize=fontsize,
                color='white' if grid[i, j] < 60 else 'black')
    ax.set_xticks(np.arange(len(labels)), labels, rotation=30)
    ax.set_yticks(np.arange(len(edges) - 1), [f"{lo}-{hi}" for lo, hi in zip(edges, edges[1:])])
    k = first_at([b['distance_lo'] for b in a[room]], L)
    if k is not None:
        ax.axvline(k - 0.5, color='white', lw=2)
    ax.set_title(a['name'], fontsize=13)
    ax.spines[['top', 'right']].set_visible(True)
    return im


def plot_heatmaps(out_dir, summary, room='passkey_depth'):
    """retrieval_heatmaps.png: the field's needle-in-a-haystack picture, one depth x distance panel per arm the
    headline figure shows (lab.pictures.plot_kit.headline_arms: the base, the crop, PI, NTK-aware, YaRN, ReRoPE, the
    fine-tunes) and Self-Extend and Dynamic YaRN; None when the eval has no depth passkey or fewer than two of the
    headline's arms."""
    s = summary['settings']
    shown = {a['name']: a for v in headline_arms(summary).values() for _, a in v if a.get(room)}
    for m in ('self_extend', 'dynamic_yarn'):  # the other zero-shot arms the docs discuss, the first of each
        a = next((a for a in summary['arms'] if method_of(a) == m and a['kind'] == 'zero-shot' and a.get(room)), None)
        if a and len(shown) > 1:
            shown.setdefault(a['name'], a)
    shown = list(shown.values())
    if len(shown) < 2:
        return None
    ncol = min(4, len(shown))
    nrow = -(-len(shown) // ncol)
    edges = depth_edges(s['L'], s['T'])
    with plt.rc_context(RC):
        fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol + 1.5, 4.6 * nrow), squeeze=False)
        for k, (ax, a) in enumerate(zip(axes.flat, shown)):
            im = depth_panel(ax, a, room, edges, s['L'], fontsize=8)
            ax.tick_params(labelsize=10)
            if k % ncol:
                ax.set_yticklabels([])  # the depths once per row
        for ax in axes.flat[len(shown):]:
            ax.axis('off')
        fig.subplots_adjust(hspace=0.6, wspace=0.08)
        for ax in axes[:, 0]:
            ax.set_ylabel("depth of the first copy")
        for ax in axes[-1]:
            ax.set_xlabel('distance (tokens)')
        fig.colorbar(im, ax=axes.ravel().tolist(), label='exact match (%)', fraction=0.02)
        fig.suptitle(f"Depth passkey by depth and distance, per arm ({s[room].get('examples', '?')} examples per "
                     f"distance bucket; white line: L = {s['L']}; grey: no example)", fontsize=15)
        return save(fig, os.path.join(out_dir, 'retrieval_heatmaps.png'))


def plot_retrieval_depth(out_dir, summary, room='passkey_depth', most=3):
    """retrieval_depth.png: exact match per (depth, distance) cell of the depth passkey (lab.measure.retrieval), from
    summary.json's settings[room] and arms[i][room] buckets (per_example exact [seeds][examples], depth [examples]).
    One panel per arm shown, at most `most`: the base, and the zero-shot and the fine-tuned arm best beyond L. Depth
    bins 0, L/2, L, 2L, ... T; a cell: its exact match over examples and seeds, and n; grey: no example."""
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
        edges = depth_edges(L, T)
        for ax, a in zip(axes[0], shown):
            im = depth_panel(ax, a, room, edges, L)
            ax.set_xlabel('distance between the copies (tokens)')
        axes[0, 0].set_ylabel("depth: the first copy's position")
        fig.colorbar(im, ax=axes[0].tolist(), label='exact match (%)', fraction=0.03)
        r = s[room]
        fig.suptitle(f"Passkey by depth and distance: a random {r.get('len', '?')}-token string at a random depth "
                     f"and again at a distance, {r.get('examples', '?')} examples per distance bucket (L={L})")
        return save(fig, path)


ROOMS = [('needles', 'needles (trained alphabet)'), ('needles_words', "word needles ' <word> is <digits>'"),
         ('needles_mv', 'multi-value needles'), ('tracking', 'variable tracking (two hops)')]
EMITTED_COLORS = {'asked': '#2ca02c', 'first': '#2ca02c', 'answer': '#2ca02c', 'oldest': '#ff7f0e',
                  'nearest': '#d62728', 'later': '#d62728', 'one hop': '#d62728', 'other': '#9467bd', 'none': '0.75'}


def plot_rooms(out_dir, summary):
    """retrieval_rooms.png: the needle rooms side by side, the trained format beside what the base never trained on
    (lab/measure/ruler.py). Top: exact match by distance bucket per arm, 95% intervals; bottom: what each arm starts to write
    after the key past L (lab.verdicts.summary_md's emitted shares: the right value in green, a shortcut's in red/orange)."""
    from lab.verdicts.summary_md import CHOICES, choice_shares, emitted_shares
    s, arms = summary['settings'], summary['arms']
    rooms = [(r, t) for r, t in ROOMS if arms and arms[0].get(r)]
    st, L = styles(arms), s['L']
    with plt.rc_context(RC):
        fig, axes = plt.subplots(2, max(1, len(rooms)), figsize=(6 * max(1, len(rooms)) + 3, 12), squeeze=False,
                                 gridspec_kw=dict(hspace=0.5))
        if not rooms:
            axes[0, 0].text(0.5, 0.5, 'no needle rooms (tests skipped)', ha='center', transform=axes[0, 0].transAxes)
            return save(fig, os.path.join(out_dir, 'retrieval_rooms.png'))
        for (room, title), ax, bx in zip(rooms, axes[0], axes[1]):
            labels = [b['bucket'] for b in arms[0][room]]
            for j, a in enumerate(arms):
                y = np.array([100 * b['exact_match'] for b in a[room]])
                err = np.abs(np.array([b['exact_match_ci'] for b in a[room]]).T * 100 - y)
                ax.errorbar(np.arange(len(labels)) + (j - (len(arms) - 1) / 2) * 0.02, y, yerr=err, label=a['name'],
                            marker=MARKERS[j % len(MARKERS)], ms=5, capsize=2, **st[a['name']])
            k = first_at([b['distance_lo'] for b in arms[0][room]], L)
            if k is not None:
                ax.axvline(k - 0.5, color='0.35', lw=1.6)
            ax.set_xticks(np.arange(len(labels)), labels, rotation=30)
            ax.set(title=title, xlabel='distance to the query (tokens)', ylim=(-3, 103))
            ax.grid(alpha=0.3)
            if 'emitted' not in arms[0][room][0]['per_example']:
                bx.axis('off')
                continue
            shares = [choice_shares(a[room], L, CHOICES[room]) if room in CHOICES else
                      emitted_shares(a[room], L, s[room]['needles']) for a in arms]
            left = np.zeros(len(arms))
            for c in shares[0]:
                w = np.array([100 * x[c] for x in shares])
                bx.barh(np.arange(len(arms)), w, left=left, color=EMITTED_COLORS[c], label=c, edgecolor='white')
                left += w
            bx.set_yticks(np.arange(len(arms)), [a['name'] for a in arms] if room == rooms[0][0] else [])
            bx.invert_yaxis()
            bx.set(xlim=(0, 100), xlabel=f'first token written after the key, past L={L} (%)')
            bx.legend(loc='lower center', bbox_to_anchor=(0.5, 1.0), ncol=5, frameon=False, fontsize=10)
        axes[0, 0].set_ylabel('exact match (%), greedy, 95% interval')
        axes[0, -1].legend(**RIGHT)
        fig.suptitle(f"Needles: the trained format beside formats the base never saw (L={L}; "
                     f"{s[rooms[0][0]]['examples']} examples per bucket)")
        return save(fig, os.path.join(out_dir, 'retrieval_rooms.png'))
