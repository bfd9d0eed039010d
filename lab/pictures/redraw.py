"""
Every picture committed in assets/, redrawn from the committed CSV/JSON alone (no model, no checkpoint):

  python -m lab.pictures.redraw           # redraw them all (32 s on 2 cores)
  python -m lab.pictures.redraw --check   # every committed PNG has a recipe below and every recipe's files are committed

The demo's run (assets/summary.json and its CSVs) is drawn by plot.plot_all, as `eval.py --plot_only=True` draws it.
Every other study is its eval's summary.json kept as assets/<study>_summary.json (and, where it is kept,
<study>_position_loss.csv): plot_all draws the pictures PLAN names for it in a scratch folder, and each is written
as assets/<study>_<picture>; a study without its position CSV gets families.png from its per-bucket means and
intervals. assets/claims.png is the forest plot of every record in assets/claims (lab.verdicts.claims).
"""
import argparse
import glob
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ASSETS = os.path.join(ROOT, 'assets')
DEMO = ('loss_vs_position.png', 'rope_ramp.png', 'attention_entropy.png', 'retrieval.png', 'retrieval_depth.png',
        'retrieval_rooms.png', 'finetune_curves.png', 'headline.png', 'verdicts.png', 'verdict_grid.png',
        'families.png', 'retrieval_heatmaps.png', 'retrieval_families.png')
# study: {picture plot_all draws: the name it is committed as}; the studies docs/results.md shows in pictures
PLAN = {
    'test': ('families.png', 'retrieval_families.png', 'retrieval_rooms.png', 'retrieval_heatmaps.png', 'verdicts.png',
             'verdict_grid.png'),
    'ape': ('loss_vs_position.png', 'verdicts.png'),
    'designs': ('families.png', 'retrieval_families.png', 'verdict_grid.png'),
    'frequencies': ('loss_vs_position.png', 'verdict_grid.png'),
    'eval2048': ('families.png',),
    'long_s8_2048': ('families.png',),
    'slow_pairs': ('families.png',),
    'clip_sweep': {'clip_sweep.png': 'clip_sweep.png'},
}
KEPT = ('position_loss.csv', 'retrieval.csv', 'attention_entropy.csv', 'finetune_curves.csv')  # where committed


def recipes(assets=ASSETS):
    """[(study or None for the demo, {picture: committed name}, {file plot_all reads: committed path})]."""
    out = [(None, {p: p for p in DEMO}, {'summary.json': os.path.join(assets, 'summary.json')})]
    for study, pictures in PLAN.items():
        names = pictures if isinstance(pictures, dict) else {p: f"{study}_{p}" for p in pictures}
        files = {f: os.path.join(assets, f"{study}_{f}") for f in ('summary.json',) + KEPT}
        out.append((study, names, {f: p for f, p in files.items() if f == 'summary.json' or os.path.exists(p)}))
    return out


def check(assets=ASSETS):
    """Problems, one line each: a committed PNG no recipe draws, a recipe whose summary is not committed."""
    drawn = {n for _, names, _ in recipes(assets) for n in names.values()} | {'claims.png'}
    committed = {os.path.basename(p) for p in glob.glob(os.path.join(assets, '*.png'))}
    return ([f"assets/{n} has no recipe in lab/pictures/redraw.py (add its study to PLAN, or remove the picture)"
             for n in sorted(committed - drawn)] +
            [f"lab/pictures/redraw.py draws assets/{n}, which is not committed: run python -m lab.pictures.redraw"
             for n in sorted(drawn - committed)] +
            [f"{p} is not committed, so the pictures of {study or 'the demo'} cannot be redrawn"
             for study, _, files in recipes(assets) for p in files.values() if not os.path.exists(p)])


def redraw(only=None, assets=ASSETS):
    """Draw every recipe's pictures (or those of the studies named in only; 'demo', 'claims') into assets/;
    returns the paths written."""
    import plot
    from data.common import atomic_write
    from lab.pictures.verdict_plots import write_claims_png
    written = []
    for study, names, files in recipes(assets):
        if only and (study or 'demo') not in only:
            continue
        if study is None:
            written += plot.plot_all(assets, only=list(names))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            for f, p in files.items():
                shutil.copy(p, os.path.join(tmp, f))
            for path in plot.plot_all(tmp, only=list(names)):
                target = os.path.join(assets, names[os.path.basename(path)])
                with open(path, 'rb') as f:
                    png = f.read()
                atomic_write(target, lambda f: f.write(png))
                written.append(target)
    if not only or 'claims' in only:
        written.append(write_claims_png(os.path.join(assets, 'claims')))
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--check', action='store_true', help='list what cannot be redrawn; draw nothing')
    ap.add_argument('studies', nargs='*', help=f"only these: demo, claims, {', '.join(PLAN)}")
    args = ap.parse_args(argv)
    bad = [s for s in args.studies if s not in ('demo', 'claims', *PLAN)]
    if bad:
        print(f"no study named {bad[0]!r}; choose from demo, claims, {', '.join(PLAN)}", file=sys.stderr)
        return 2
    if args.check:
        problems = check()
        print('\n'.join(problems) or "every committed picture in assets/ has a recipe and its files")
        return 1 if problems else 0
    for p in redraw(args.studies):
        print(f"wrote {os.path.relpath(p, ROOT)}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
