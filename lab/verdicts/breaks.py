"""
Where each arm breaks, measured against its control (issue 62): for an eval folder's position_loss.csv, each arm's
break_against the crop (break_against: the first position past `start` where the 32-token mean of arm − crop
exceeds its mean over `ref` by 0.1 nats), beside the plain rule on the arm's own curve (break_position) and
the crop's own trip under that plain rule. Writes breaks.json into the folder (atomically) and prints the table.

    python -m lab.verdicts.breaks assets/studies/frequencies --start=512 --ref=128,512
    python -m lab.verdicts.breaks assets/studies/abf_matched --start=512 --ref=128,512
    python -m lab.verdicts.breaks assets/studies/long_s8_2048 --control_from=assets/studies/eval2048 --start=1024 --ref=128,1024
"""
import argparse
import csv
import json
import os

import numpy as np

from configurator import ConfigError
from data.common import atomic_write_text
from lab.engine.cli import cli


def break_position(curve, start, ref, rise=0.1, smooth=32):
    """Where a loss-by-position curve breaks: the first position p >= start at which the running mean of the
    `smooth` positions ending at p lies more than `rise` nats above the mean over positions [ref[0], ref[1]) (the
    range the model was trained on, past the first L). NaN cells (unscored positions) are skipped in both means.
    Returns p, or None when the curve never rises that far. E.g. a plain fine-tune at 512: start 512, ref (128, 512)."""
    c = np.asarray(curve, dtype=float)
    base = np.nanmean(c[ref[0]:ref[1]])
    for p in range(max(start, smooth - 1), len(c)):
        w = c[p - smooth + 1:p + 1]
        if np.isfinite(w).any() and np.nanmean(w) > base + rise:
            return p
    return None


def break_against(curve, control, start, ref, rise=0.1, smooth=32):
    """Where an arm breaks relative to a control on the same windows (its crop, or the base inside L): break_position
    of the difference curve - control, so a place where the control's own loss rises (text that is harder there)
    is not called the arm's break. The crop on the frequencies study's windows trips the plain rule at 847 itself."""
    return break_position(np.asarray(curve, dtype=float) - np.asarray(control, dtype=float), start, ref, rise, smooth)


def read_curves(folder):
    """{arm: per-position loss (NaN where unscored)} of a folder's position_loss.csv; ConfigError naming the file."""
    path = os.path.join(folder, 'position_loss.csv')
    if not os.path.isfile(path):
        raise ConfigError(f"{path} does not exist; pass an eval folder (it writes position_loss.csv)")
    with open(path, encoding='utf-8', newline='') as f:
        rows = list(csv.reader(f))
    data = np.array([[float(x) if x else np.nan for x in r[1:]] for r in rows[1:]])
    return {name: data[:, i] for i, name in enumerate(rows[0][1:])}


def breaks(curves, control, start, ref):
    """[{arm, plain, against_control}] for every arm but the control, and the control's own plain trip."""
    if control not in curves:
        raise ConfigError(f"control {control!r} is not an arm of position_loss.csv; pick one of {', '.join(curves)}")
    c = curves[control]
    rows = [dict(arm=a, plain=break_position(y, start, ref), against_control=break_against(y, c, start, ref))
            for a, y in curves.items() if a != control]
    return rows, break_position(c, start, ref)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('folder')
    ap.add_argument('--control', default='', help="the control arm; '' = the first arm named 'crop ...'")
    ap.add_argument('--control_from', default='', help='another eval folder on the same windows holding the control')
    ap.add_argument('--start', type=int, required=True, help='the first position a break may be at (e.g. 512)')
    ap.add_argument('--ref', required=True, help='lo,hi: the positions the arm was trained on (e.g. 128,512)')
    args = ap.parse_args(argv)
    curves = read_curves(args.folder)
    others = read_curves(args.control_from) if args.control_from else curves
    control = args.control or next((a for a in others if a.startswith('crop')), '')
    if args.control_from and control in others:
        n = min(len(others[control]), *(len(y) for y in curves.values()))
        curves = {**{a: y[:n] for a, y in curves.items() if a != control}, control: others[control][:n]}
    try:
        lo, hi = (int(x) for x in args.ref.split(','))
    except ValueError:
        raise ConfigError(f"--ref={args.ref!r} must be two positions lo,hi (e.g. 128,512)") from None
    rows, trip = breaks(curves, control, args.start, (lo, hi))
    out = dict(control=control, control_from=args.control_from or None, start=args.start, ref=[lo, hi], rise=0.1, smooth=32, control_plain=trip, arms=rows,
               rule="against_control: break_against (arm minus control); plain: break_position (lab.verdicts.breaks)")
    atomic_write_text(os.path.join(args.folder, 'breaks.json'), json.dumps(out, indent=1) + '\n')
    print(f"{control} itself trips the plain rule at {trip}" if trip else f"{control} never trips the plain rule")
    for r in rows:
        print(f"  {r['arm']}: against the control {r['against_control'] or 'none'} (plain rule {r['plain'] or 'none'})")
    return 0


if __name__ == '__main__':
    cli(main)
