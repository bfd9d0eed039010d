"""
pair_usage.png, drawn from lab.pairs' pair_usage.json alone: which rotary pairs each arm uses. The top two rows have,
per arm (in its colour and dash, as in every picture), the share of |q_i||k_i| (what each pair could carry) and of
the attention-weighted |c_i| (what it moves in the logits the model uses) per pair over the whole model, for queries
inside L and past it; below, one row per arm: the used share per layer and pair, inside L and past it, on one scale.
The critical pair (the first whose wavelength exceeds L) is marked on every panel.
"""
import json
import os

import numpy as np

from data.common import DataError, atomic_write
from lab.pictures.plot_kit import RC, note, plt, save, styles  # (and the Agg backend)

NEEDS = ('name', 'kind', 'pos_emb', 'rope_type', 'settings', 'train_len', 'head_dim', 'critical_pair', 'rope_layers',
         'layers', 'pairs')


def read_pairs(path):
    """pair_usage.json, checked for what the picture reads; DataError naming the file and the field."""
    fix = "rerun python -m lab.pairs to write it again"
    if not os.path.isfile(path):
        raise DataError(f"{path} not found; run python -m lab.pairs (without --plot_only) to measure it first")
    try:
        with open(path, encoding='utf-8') as f:
            got = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path} is not readable JSON ({e}); {fix}") from None
    s, arms = (got.get('settings'), got.get('arms')) if isinstance(got, dict) else (None, None)
    if not isinstance(s, dict) or not isinstance(arms, list) or not arms or not all(isinstance(a, dict) for a in arms):
        raise DataError(f"{path} has no 'settings' object or no 'arms' list; {fix}")
    missing = [f"settings.{k}" for k in ('T', 'L') if k not in s] + \
        [f"arms[{i}].{k}" for i, a in enumerate(arms) for k in NEEDS if k not in a]
    if missing:
        raise DataError(f"{path} lacks {missing[0]}; it was not written by lab.pairs: {fix}")
    return got


def mark_critical(ax, k, text=True, color='0.3'):
    """The critical pair k: a line between pairs k - 1 and k (pairs 0..k-1 turned at least once within L)."""
    ax.axvline(k - 0.5, color=color, ls='--', lw=1.2)
    if text:
        note(ax, k - 0.5, 0.97, f" critical dimension: pairs 0-{k - 1} turn within L", ha='left', fontsize=10,
             color='0.25')


def draw_pairs(path, png):
    """pair_usage.png from pair_usage.json at path, written atomically to png; returns png."""
    got = read_pairs(path)
    s, arms = got['settings'], got['arms']
    L, T = s['L'], s['T']
    try:
        fig = figure(arms, L, T)
    except (KeyError, IndexError, TypeError, ValueError) as e:  # a hand-edited file
        raise DataError(f"pair_usage.png cannot be drawn from {path} ({type(e).__name__}: {e}); rerun python -m "
                        f"lab.pairs to write it again") from None
    out, data = save(fig, png)
    atomic_write(out, lambda f: f.write(data))
    return out


def figure(arms, L, T):
    """The figure: the model-wide shares on top (norm, used; inside L, past L), each arm's used share by layer and pair
    below."""
    st, P = styles(arms), max(a.get('rotary_dim', a['head_dim']) // 2 for a in arms)
    n_layer = max(len(a['rope_layers']) for a in arms)
    high = max(max(max(row) for row in a['layers'][b]['used_share']) for a in arms for b in ('inside', 'past'))
    row_h = max(2.2, 0.15 * n_layer + 1.0)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(2 + len(arms), 2, figsize=(15, 9 + len(arms) * row_h), layout='constrained',
                                 gridspec_kw=dict(height_ratios=[4.5, 4.5] + [row_h] * len(arms)), squeeze=False)
        spans = (('inside', f"queries inside L (m < {L})"), ('past', f"queries past L ({L} ≤ m < {T})"))
        for row, (measure, what) in zip(axes[:2], (('norm_share', '|q_i|·|k_i|, every key alike'),
                                                    ('used_share', '|c_i| weighted by attention'))):
            top = max(max(a['pairs'][b][measure]) for a in arms for b, _ in spans)
            for ax, (bucket, span) in zip(row, spans):
                for a in arms:
                    y = a['pairs'][bucket][measure]
                    ax.plot(range(len(y)), y, marker='o', ms=3.5, label=a['name'], **st[a['name']])
                mark_critical(ax, arms[0]['critical_pair'])
                ax.set(ylabel='share', title=f"{what}: {span}", xlim=(-0.5, P - 0.5), ylim=(0, top * 1.12))
                ax.grid(alpha=0.3)
        for ax in axes[1, :2]:
            ax.set_xlabel('pair i (wavelength grows to the right); mean over layers and heads')
        axes[0, 1].legend(loc='center right', fontsize=10)  # (the slow pairs' side is empty)
        for r, (row, a) in enumerate(zip(axes[2:], arms)):
            for ax, (bucket, _) in zip(row, spans):
                grid = np.array(a['layers'][bucket]['used_share'], dtype=float)
                im = ax.imshow(grid, aspect='auto', cmap='viridis', vmin=0, vmax=high, interpolation='nearest')
                mark_critical(ax, a['critical_pair'], text=False, color='white')
                ax.set_yticks(range(len(grid)))
                ax.set_yticklabels([f"{i}" + ('' if rope else ' NoPE') for i, rope in enumerate(a['rope_layers'])],
                                   fontsize=8 if len(grid) > 12 else 10)
                ax.set_title(f"{a['name']}: used share, {bucket} L", fontsize=12)
                ax.set_ylabel('layer')
                if r == len(arms) - 1:
                    ax.set_xlabel('pair i')
        fig.colorbar(im, ax=axes[2:].ravel().tolist(), shrink=min(1.0, 6 / (len(arms) * row_h)), pad=0.01,
                     label='used share (one scale for every arm)')
        fig.suptitle(f"Which rotary pairs carry the attention logit (T = {T}, L = {L}; dashed: the critical "
                     f"dimension, the first pair whose wavelength exceeds L)", fontsize=14)
    return fig
