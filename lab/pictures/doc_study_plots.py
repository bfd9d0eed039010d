"""
The pictures of lab/measure/doc_study.py, drawn from its files alone: headline.png (each arm's loss against token
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
    fam = s['family']
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(fam) + 1.2))
    for i, r in enumerate(fam):
        k = 100 if r['kind'] == 'exact' else 1
        ax.errorbar(k * r['diff'], i, xerr=[[k * (r['diff'] - r['ci'][0])], [k * (r['ci'][1] - r['diff'])]], fmt='o',
                    color=COLOURS[r['verdict']], capsize=3)
        ax.text(1.01, i, r['verdict'], transform=ax.get_yaxis_transform(), va='center', color=COLOURS[r['verdict']])
    ax.axvline(0, color='k', lw=0.8)
    ax.set_yticks(range(len(fam)))
    unit = {'loss': 'nats/token', 'digits': "digits' nats", 'exact': 'points'}
    ax.set_yticklabels([f"{r['a']} − {r['b']}\n{r['column'] if r['kind'] == 'loss' else 'passkey'} ({unit[r['kind']]})"
                        for r in fam], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel('A − B with its 95% interval (windows paired; Holm across the family)')
    ax.set_title('the declared family')
    return save(fig, os.path.join(out_dir, 'verdicts.png'))


def draw_all(out_dir):
    """Draw both pictures from out_dir's files; returns the paths written."""
    s = read(os.path.join(out_dir, 'summary.json'), json.load, 'write it (python -m lab.measure.doc_study)')
    out = []
    for path, png in (headline(out_dir, s), verdicts(out_dir, s)):
        atomic_write(path, lambda f, png=png: f.write(png))
        out.append(path)
    return out
