"""
eval.py's pictures: the loss and attention-entropy curves along positions (loss_vs_position.png,
attention_entropy.png, with lines at L, at the fine-tune lengths and at T_extra), and plot_all, which draws every
picture of an eval's out_dir from the CSV/JSON files alone by calling each picture's module (plot.py lists them;
lab.pictures.redraw calls plot_all for every committed picture).
"""
import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from data.common import DataError, atomic_write  # noqa: E402
from lab.pictures.plot_kit import RC, read_columns, read_summary, rotary_dims, save, smooth, styles  # noqa: E402
from rope import critical_dimension  # noqa: E402


def length_lines(ax, s, arms, theory):
    """Lines at L and at the fine-tune lengths; with theory, the critical-dimension bound T_extra of plain RoPE for
    the base model (rope.critical_dimension), dotted, when it falls inside the window. Each is named in the legend,
    not on the chart, so no label sits on a curve."""
    ax.axvline(s['L'], color='0.35', lw=1.6, zorder=1, label=f"L = {s['L']} (trained length)")
    for n in s.get('finetune_lengths', []):
        ax.axvline(n, color='0.35', lw=1.4, ls=':', zorder=1, label=f"fine-tuned at {n}")
    base = next((a for a in arms if a['kind'] == 'base' and a['pos_emb'] == 'rope'), None)
    if theory and base is not None:
        d_extra, t_extra = critical_dimension(rotary_dims(base), base['rope_base'], base['train_len'])
        if t_extra < s['T']:
            ax.axvline(t_extra, color='black', lw=1.4, ls=(0, (1, 2)), zorder=1,
                       label=f"T_extra ≈ {t_extra:.0f} (d_extra = {d_extra}): plain RoPE's bound")


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
    ax.set_xlim(*((1, T) if log_x else (0, T - 1)))
    return np.array(ys)


def panels(arms):
    """Arms split for readability: zero-shot arms | fine-tuned arms, each panel with the base model(s) in black."""
    base = [a['name'] for a in arms if a['kind'] == 'base']
    groups = [(title, base + [a['name'] for a in arms if a['kind'] == kind])
              for kind, title in (('zero-shot', 'zero-shot: a scaling, a position map or the crop, no training'),
                                  ('fine-tuned', 'fine-tuned at the longer length'))]
    return [g for g in groups if len(g[1]) > len(base)] or [('', base)]


def plot_positions(out_dir, summary, w, log_x, what):
    """loss_vs_position.png (what='loss') or attention_entropy.png (what='entropy'): one panel per arm group."""
    s, arms = summary['settings'], summary['arms']
    if what == 'loss':
        csv_name, png, ylabel = 'position_loss.csv', 'loss_vs_position.png', f'loss (nats), mean over {w} positions'
        title = f"Loss vs position — {s['dataset']}, {s['num_windows']} held-out windows of {s['T']} tokens"
    else:
        csv_name, png, ylabel = 'attention_entropy.csv', 'attention_entropy.png', 'attention entropy (nats)'
        title = f"Attention entropy vs query position — mean over layers, heads, {s['entropy']['windows']} windows"
    cols = read_columns(os.path.join(out_dir, csv_name), [a['name'] for a in arms])
    groups, st = panels(arms), styles(arms)
    with plt.rc_context(RC):
        fig, axes = plt.subplots(1, len(groups), figsize=(8.5 * len(groups), 7.5), sharey=True, squeeze=False)
        ys = []
        for ax, (sub, group) in zip(axes[0], groups):
            ys.append(curves(ax, group, cols, st, w, log_x))
            length_lines(ax, s if 'zero-shot' not in sub else dict(s, finetune_lengths=[]), arms, what == 'loss')
            ax.set_xlabel(('token' if what == 'loss' else 'query') + ' position' + (' + 1 (log scale)' if log_x else ''))
            ax.set_title(sub, fontsize=13)
            ax.grid(alpha=0.3)
            ax.legend(loc='upper center', bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
        ys = np.concatenate(ys)
        if what == 'loss':  # a curve that blows up leaves the chart instead of flattening the rest
            top = min(np.nanmax(ys), 2.5 * np.nanmean(ys[:, :s['L']], axis=1).min())
            axes[0, 0].set_ylim(np.nanmin(ys) - 0.05 * (top - np.nanmin(ys)), top)
            if np.nanmax(ys) > top:  # said in the title, where it covers no curve
                title += f" (curves clipped at {top:.2f})"
        axes[0, 0].set_ylabel(ylabel)
        fig.suptitle(title)
        return save(fig, os.path.join(out_dir, png))


# What each picture is drawn from, and the summary.json settings it needs (absent: the picture is skipped)
SOURCES = {'loss_vs_position.png': 'position_loss.csv', 'rope_ramp.png': 'summary.json',  # what each is drawn from
           'attention_entropy.png': 'attention_entropy.csv', 'retrieval.png': 'retrieval.csv',
           'retrieval_depth.png': 'summary.json', 'finetune_curves.png': 'finetune_curves.csv',
           'retrieval_rooms.png': 'summary.json', 'clip_sweep.png': 'summary.json', 'headline.png': 'position_loss.csv',
           'verdicts.png': 'summary.json', 'verdict_grid.png': 'summary.json', 'families.png': 'position_loss.csv',
           'retrieval_heatmaps.png': 'summary.json', 'retrieval_families.png': 'summary.json'}
OPTIONAL = {'attention_entropy.png': ('entropy',), 'retrieval.png': ('retrieval',),
            'retrieval_depth.png': ('passkey_depth',), 'retrieval_rooms.png': ('needles',),
            'retrieval_heatmaps.png': ('passkey_depth',), 'retrieval_families.png': ('retrieval',)}


def plot_all(out_dir, log_x=False, smooth=0, only=None):
    """Draw every PNG (or those named in only) from out_dir's CSV/JSON, then write them (none when one cannot be
    drawn); returns their paths."""
    if smooth < 0:
        raise ValueError(f"smooth={smooth} must be >= 0 (0: T/32)")
    summary = read_summary(out_dir)
    if smooth > summary['settings']['T']:
        raise ValueError(f"smooth={smooth} is wider than the {summary['settings']['T']} positions evaluated; pass "
                         f"--smooth <= {summary['settings']['T']} (0: T/32)")
    w = smooth or max(1, summary['settings']['T'] // 32)
    from lab.pictures.retrieval_plots import plot_heatmaps, plot_retrieval, plot_retrieval_depth, plot_rooms  # (use this file)
    from lab.pictures.method_plots import plot_clip_sweep, plot_finetune, plot_ramp  # per pair, the fine-tunes, the clip sweep
    from lab.pictures.figures import plot_families, plot_headline, plot_retrieval_families  # (issue 34's)
    from lab.pictures.verdict_plots import plot_verdict_grid, plot_verdicts
    steps = [('loss_vs_position.png', lambda: plot_positions(out_dir, summary, w, log_x, 'loss')),
             ('rope_ramp.png', lambda: plot_ramp(out_dir, summary)),
             ('attention_entropy.png', lambda: plot_positions(out_dir, summary, w, log_x, 'entropy')),
             ('retrieval.png', lambda: plot_retrieval(out_dir, summary)),
             ('retrieval_depth.png', lambda: plot_retrieval_depth(out_dir, summary)),
             ('retrieval_rooms.png', lambda: plot_rooms(out_dir, summary)),
             ('finetune_curves.png', lambda: plot_finetune(out_dir, summary)),
             ('clip_sweep.png', lambda: plot_clip_sweep(out_dir, summary)),
             ('headline.png', lambda: plot_headline(out_dir, summary, w)),
             ('verdicts.png', lambda: plot_verdicts(out_dir, summary)),
             ('verdict_grid.png', lambda: plot_verdict_grid(out_dir, summary)),
             ('families.png', lambda: plot_families(out_dir, summary, w,  # (per bucket: a study kept without it)
                                                    not os.path.exists(os.path.join(out_dir, 'position_loss.csv')))),
             ('retrieval_heatmaps.png', lambda: plot_heatmaps(out_dir, summary)),
             ('retrieval_families.png', lambda: plot_retrieval_families(out_dir, summary))]
    unknown = sorted(set(only or ()) - {n for n, _ in steps})
    if unknown:
        raise ValueError(f"no picture named {unknown[0]}; plot.py draws {', '.join(n for n, _ in steps)}")
    out, skipped = [], []
    for name, draw in [(n, d) for n, d in steps if only is None or n in only]:
        gone = [k for k in OPTIONAL.get(name, ()) if k not in summary['settings']]
        off = name == 'retrieval.png' and not (summary['settings'].get('retrieval') or {}).get('examples')
        if gone or off:
            print(f"skipped {name}: " + (f"summary.json has no settings.{gone[0]}" if gone else
                                         "the passkey test was off (retrieval_examples=0)"))
            skipped.append(os.path.join(out_dir, name))  # a file of that name is an earlier run's: removed below
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
    for path in (p for p in skipped if os.path.exists(p)):
        os.remove(path)
    return [p[0] for p in out if p]
