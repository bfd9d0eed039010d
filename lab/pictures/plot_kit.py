"""
What every picture shares (plot.py and lab/pictures/*): reading eval.py's files (every CSV and summary.json is checked
as it is read; a missing, torn or hand-edited file is one DataError or ValueError naming the file, the field and the
fix), the look (font sizes, one colour per method, line styles by kind of arm, PNG bytes), the story's smoothing
along positions, and which arms tell the story (headline_arms: the headline, the retrieval pictures, the heatmaps).
"""
import csv
import io
import json
import os

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from data.common import DataError  # noqa: E402


def read(path, load, missing='write it', bad='is unreadable'):
    """load(f) of the UTF-8 file at path; DataError naming the file when it is missing or cannot be read."""
    if not os.path.isfile(path):
        raise DataError(f"{path} not found; run eval.py (without --plot_only) to {missing} first")
    try:
        with open(path, newline='', encoding='utf-8') as f:
            return load(f)
    except (OSError, UnicodeDecodeError, csv.Error, json.JSONDecodeError) as e:
        raise DataError(f"{path} {bad} ({e}); rerun eval.py to write it again") from None


def read_csv(path):
    """A CSV as a list of {column: text} rows."""
    return read(path, lambda f: list(csv.DictReader(f)))


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


# The summary.json fields every picture reads: a file without them is refused up front, with the field named.
NEEDS = {'settings': ('T', 'L', 'dataset', 'num_windows'),
         'arm': ('name', 'kind', 'pos_emb', 'rope_type', 'settings', 'position_map', 'head_dim', 'rope_base',
                 'train_len', 'rope_scaling', 'dynamic')}


def read_summary(out_dir):
    """summary.json, checked for the fields every picture needs; ValueError naming the file and the field."""
    path = os.path.join(out_dir, 'summary.json')
    summary = read(path, json.load, 'measure', 'is not readable JSON')
    s, arms = (summary.get('settings'), summary.get('arms')) if isinstance(summary, dict) else (None, None)
    if not isinstance(s, dict) or not isinstance(arms, list) or not arms:
        raise ValueError(f"{path} has no 'settings' object or no 'arms' list; rerun eval.py to write it again")
    missing = [f"settings.{k}" for k in NEEDS['settings'] if k not in s] + \
        [f"arms[{i}].{k}" for i, a in enumerate(arms) for k in NEEDS['arm'] if not isinstance(a, dict) or k not in a]
    if missing:
        raise ValueError(f"{path} lacks {missing[0]}" + (f" (and {len(missing) - 1} more fields)" if len(missing) > 1
                         else '') + "; it was not written by this eval.py: rerun eval.py to write it again")
    return summary


# ----------------------------------------------------------------------------- the look

RC = {'font.size': 13, 'axes.titlesize': 15, 'axes.labelsize': 14, 'legend.fontsize': 11, 'xtick.labelsize': 12,
      'ytick.labelsize': 12, 'axes.spines.top': False, 'axes.spines.right': False, 'figure.dpi': 110}
COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22',
          '#7f7f7f']
MARKERS = ['o', 's', '^', 'D', 'v', 'P', 'X', '<', '>', 'h']
RIGHT = dict(loc='upper left', bbox_to_anchor=(1.01, 1.0), frameon=False)  # a legend beside the axes


def rotary_dims(arm):
    """The dims that turn in an arm's heads (summary.json's rotary_dim; head_dim in files written before it)."""
    return arm.get('rotary_dim') or arm['head_dim']


def family(arm):
    """Colour key, from summary.json's structured fields: the position encoding, the rope type and its non-default
    settings, whatever the scale, so 'yarn s=8 β_fast=8 zero-shot' and 'yarn s=4 β_fast=8 ft100' share a colour; and
    the position map's method, whatever its window ('rerope w=64 zero-shot' and 'rerope w=32 zero-shot')."""
    return json.dumps([arm['pos_emb'], arm.get('rope_type'), arm.get('settings') or {},
                       (arm.get('position_map') or {}).get('method')], sort_keys=True)


# line styles for a second, third, ... arm that would otherwise draw the same colour and the same line
# ('yarn s=4 β_fast=8 ft100' beside 'yarn s=8 β_fast=8 ft100'): dotted, long dashes, dash-dot-dot
REPEAT_LS = [(0, (1, 1.5)), (0, (8, 3)), (0, (4, 1.5, 1, 1.5, 1, 1.5))]


# one colour per method in every picture (issue 34): a method keeps its colour whatever its scale or settings
METHOD_COLORS = {'base': 'black', 'crop': '#7f7f7f', 'linear': '#d62728', 'ntk': '#ff7f0e', 'yarn': '#1f77b4',
                 'rerope': '#2ca02c', 'default': '#9467bd', 'ntk_by_parts': '#8c564b', 'dynamic': '#bcbd22',
                 'dynamic_yarn': '#17becf', 'llama3': '#e377c2', 'longrope': '#6b3d9a', 'abf': '#b15928',
                 'proportional': '#a6761d', 'clip': '#666600', 'leaky_rerope': '#66a61e', 'self_extend': '#1b9e77',
                 'dca': '#e7298a', 'sinusoidal': '#393b79', 'alibi': '#637939', 'none': '#843c39', 'learned': '#7b4173',
                 'fire': '#8c6d31', 'cope': '#e7ba52'}


def method_of(arm):
    """An arm's method, the key of its colour: 'crop' for a crop, its position map's method, else its rope type
    ('default': plain RoPE), else its position encoding (sinusoidal, alibi, fire, cope, none, learned); None for what
    has no fixed colour."""
    if arm.get('crop'):
        return 'crop'
    m = (arm.get('position_map') or {}).get('method') or (arm.get('rope_type') if arm.get('pos_emb', 'rope') == 'rope'
                                                          else arm.get('pos_emb'))
    return m if m in METHOD_COLORS else None


def styles(arms):
    """{arm name: line style}: the first base black, every other arm its method's colour (METHOD_COLORS; a family
    of its own for a method without one), dashed zero-shot, dash-dotted PoSE; a second arm of the same colour and
    dash gets another dash (REPEAT_LS)."""
    out, colors, taken = {}, {}, {}
    for a in arms:
        if a['kind'] == 'base' and not any(o['color'] == 'black' for o in out.values()):
            out[a['name']] = dict(color='black', ls='-', lw=2.4)  # the first base model; other bases get colours
            continue
        m = method_of(a)
        c = METHOD_COLORS[m] if m else colors.setdefault(family(a), COLORS[len(colors) % len(COLORS)])
        ls = '--' if a['kind'] == 'zero-shot' else '-.' if a.get('pose') else '-'
        k = taken[c, ls] = taken.get((c, ls), -1) + 1
        out[a['name']] = dict(color=c, ls=REPEAT_LS[(k - 1) % len(REPEAT_LS)] if k else ls, lw=2.0)
    return out


def save(fig, path):
    """(path, the figure as PNG bytes): plot_all writes every picture once all of them are drawn."""
    buf = io.BytesIO()
    fig.savefig(buf, format='png', dpi=130, bbox_inches='tight')
    plt.close(fig)
    return path, buf.getvalue()


def note(ax, x, y, text, **kw):
    """text at data x, hanging from height y (a fraction of the axes)."""
    ax.text(x, y, text, transform=ax.get_xaxis_transform(), va='top', **kw)


def smooth(y, w):
    """Centred moving average of width w over the scored (finite) positions (shorter at the ends)."""
    ok = np.isfinite(y)
    if w <= 1:
        return y
    k = np.ones(w)
    num, den = np.convolve(np.where(ok, y, 0.0), k, 'same'), np.convolve(ok.astype(float), k, 'same')
    return np.where(ok, num / np.maximum(den, 1), np.nan)


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
