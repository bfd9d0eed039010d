"""
The pictures of lab/doc_study.py, drawn from its files alone: headline.png (each arm's loss against token
position, the mean over the windows of the text's tokens in bins, L marked, the windows' passkey score in the legend)
and verdicts.png (the declared family: each contrast's difference and 95% interval, coloured by its verdict).
"""
import json
import os

import numpy as np

from data.common import atomic_write
from lab.pictures.plot_kit import plt, read, read_columns, save

COLOURS = {'better': '#1a9850', 'worse': '#d73027', 'equivalent': '#4575b4', 'unresolved': '#999999'}


def headline(out_dir, s):
    names = list(s['arms'])
    cols = read_columns(os.path.join(out_dir, 'position_loss.csv'), names)
    x = np.arange(len(cols[names[0]])) * s['settings']['bin'] + s['settings']['bin'] / 2
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for n in names:
        exact = np.mean(s['arms'][n]['exact'])
        ax.plot(x, cols[n], lw=1.4, label=f"{n} (passkey {exact:.0%})")
    L = s['settings']['L']
    ax.axvline(L, color='k', ls=':', lw=1)
    ax.text(L, 0.98, ' L', transform=ax.get_xaxis_transform(), va='top')
    ax.set_xlabel('token position')
    ax.set_ylabel(f"loss (nats), mean of {len(s['windows'])} windows, {s['settings']['bin']}-token bins")
    ax.set_title(f"{s['settings']['base']} at T = {s['settings']['T']:,}: one window per play")
    lo = min(np.nanmin(c[len(c) // 8:]) for c in cols.values())
    ax.set_ylim(lo - 0.1, max(np.nanpercentile(c, 99) for c in cols.values()) + 0.1)
    ax.legend(fontsize=8, loc='upper left')
    return save(fig, os.path.join(out_dir, 'headline.png'))


def verdicts(out_dir, s):
    """One panel per outcome (a loss in nats a token, the digits' summed nats, exact-match points), each row's
    difference with its 95% interval, the equivalence margin shaded, the verdict beside it."""
    fam = s['family']
    kinds = [k for k in ('loss', 'digits', 'exact') if any(r['kind'] == k for r in fam)]
    rows = {k: [r for r in fam if r['kind'] == k] for k in kinds}
    fig, axes = plt.subplots(len(kinds), 1, figsize=(8.5, 0.55 * len(fam) + 0.9 * len(kinds)), squeeze=False,
                             gridspec_kw=dict(height_ratios=[len(rows[k]) + 0.6 for k in kinds]))
    unit = {'loss': 'nats a token', 'digits': "the digits' summed nats", 'exact': 'points of exact match'}
    for ax, k in zip(axes[:, 0], kinds):
        f = 100 if k == 'exact' else 1
        m = f * rows[k][0]['margin']
        ax.axvspan(-m, m, color='#dddddd', lw=0)
        for i, r in enumerate(rows[k]):
            c = COLOURS[r['verdict']]
            ax.errorbar(f * r['diff'], i, xerr=[[f * (r['diff'] - r['ci'][0])], [f * (r['ci'][1] - r['diff'])]],
                        fmt='o', color=c, capsize=3)
            word = r['verdict'] + (', inside the margin' if r.get('inside_margin') else '')
            ax.text(1.01, i, word, transform=ax.get_yaxis_transform(), va='center', color=c, fontsize=8)
        ax.axvline(0, color='k', lw=0.8)
        ax.set_yticks(range(len(rows[k])))
        ax.set_yticklabels([f"{r['a']} − {r['b']}" + (f"\n{r['column']}" if k == 'loss' else '') for r in rows[k]],
                           fontsize=7)
        ax.set_ylim(len(rows[k]) - 0.5, -0.5)
        ax.set_xlabel(f"A − B, {unit[k]} (shaded: the ±{m:g} margin)", fontsize=8)
    axes[0, 0].set_title('the declared family: windows paired, Holm across it')
    fig.tight_layout()
    return save(fig, os.path.join(out_dir, 'verdicts.png'))


def draw_all(out_dir):
    """Draw both pictures from out_dir's files; returns the paths written."""
    s = read(os.path.join(out_dir, 'summary.json'), json.load, 'write it (python -m lab.doc_study)')
    out = []
    for path, png in (headline(out_dir, s), verdicts(out_dir, s)):
        atomic_write(path, lambda f, png=png: f.write(png))
        out.append(path)
    return out
