"""
Every picture committed in assets/, redrawn from the committed CSV/JSON alone (no model, no checkpoint):

  python -m lab.pictures.redraw           # redraw them all (32 s on 2 cores)
  python -m lab.pictures.redraw --check   # every committed PNG has a recipe below and every recipe's files are committed

Each folder of assets/ that holds pictures is an eval's out_dir as eval.py leaves it, cut to what is committed: its
summary.json and, where kept, position_loss.csv and the other CSVs. lab.pictures.eval_plots.plot_all (plot.py's)
draws the pictures PLAN names for it into the folder itself, as `eval.py --plot_only=True` would: the demo's run
(assets/demo), the test split's (assets/test) and the studies' (assets/studies/<study>). A study kept without its
position CSV gets families.png from its per-bucket means and intervals. assets/studies/pairs*/pair_usage.png is
lab.pairs' own picture, from its pair_usage.json. assets/studies/real_model_plays is lab.doc_study's out_dir
(lab.pictures.doc_study_plots). assets/test/claims.png is the forest plot of every record in assets/test/claims
(lab.verdicts.claims writes the records, `python -m lab.pictures.redraw claims` their picture).
"""
import argparse
import glob
import os

from lab.engine.cli import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ASSETS = os.path.join(ROOT, 'assets')
CLAIMS = os.path.join('test', 'claims')  # the claims records, their picture beside them (test/claims.png)
# folder under assets/: the pictures plot_all draws there (the ones README.md and docs/results.md show)
PLAN = {
    'demo': ('loss_vs_position.png', 'rope_ramp.png', 'attention_entropy.png', 'retrieval.png', 'retrieval_depth.png',
             'retrieval_rooms.png', 'finetune_curves.png', 'headline.png', 'verdicts.png', 'verdict_grid.png',
             'families.png', 'retrieval_heatmaps.png', 'retrieval_families.png'),
    'test': ('families.png', 'retrieval_families.png', 'retrieval_rooms.png', 'retrieval_heatmaps.png', 'verdicts.png',
             'verdict_grid.png'),
    'studies/ape': ('loss_vs_position.png', 'verdicts.png'),
    'studies/designs': ('families.png', 'retrieval_families.png', 'verdict_grid.png'),
    'studies/frequencies': ('loss_vs_position.png', 'verdict_grid.png'),
    'studies/engine_variants': ('loss_vs_position.png', 'verdict_grid.png'),
    'studies/abf_matched': ('loss_vs_position.png',),
    'studies/eval2048': ('families.png',),
    'studies/long_s8_2048': ('families.png',),
    'studies/slow_pairs': ('families.png',),
    'studies/clip_sweep': ('clip_sweep.png',),
    'studies/real_model': ('headline.png', 'loss_vs_position.png', 'verdict_grid.png'),
}
# folder under assets/: pictures lab.pairs draws from its own pair_usage.json (no summary.json there)
PAIRS = ('studies/pairs', 'studies/pairs_matched')  # each: pair_usage.png
# folder under assets/: a real model's study (lab.doc_study), its pictures from its own files
DOC_STUDIES = ('studies/real_model_plays', 'studies/real_model_maps')  # each: headline.png, verdicts.png (lab.pictures.doc_study_plots)
DOC_PICTURES = ('headline.png', 'verdicts.png')
NAMES = {os.path.basename(folder): folder for folder in (*PLAN, *PAIRS, *DOC_STUDIES)}  # the command line's: demo, test, ape, ...


def check(assets=ASSETS):
    """Problems, one line each: a committed PNG no recipe draws, a recipe whose summary is not committed."""
    drawn = {os.path.join(folder, p) for folder, pictures in PLAN.items() for p in pictures} | \
        {os.path.join(folder, 'pair_usage.png') for folder in PAIRS} | \
        {os.path.join(folder, p) for folder in DOC_STUDIES for p in DOC_PICTURES}
    drawn.add(CLAIMS + '.png')
    committed = {os.path.relpath(p, assets) for p in glob.glob(os.path.join(assets, '**', '*.png'), recursive=True)}
    return ([f"assets/{n} has no recipe in lab/pictures/redraw.py (add its folder to PLAN, or remove the picture)"
             for n in sorted(committed - drawn)] +
            [f"lab/pictures/redraw.py draws assets/{n}, which is not committed: run python -m lab.pictures.redraw"
             for n in sorted(drawn - committed)] +
            [f"assets/{folder}/summary.json is not committed, so its pictures cannot be redrawn"
             for folder in (*PLAN, *DOC_STUDIES) if not os.path.exists(os.path.join(assets, folder, 'summary.json'))] +
            [f"assets/{folder}/pair_usage.json is not committed, so its picture cannot be redrawn"
             for folder in PAIRS if not os.path.exists(os.path.join(assets, folder, 'pair_usage.json'))])


def redraw(only=None, assets=ASSETS):
    """Draw the pictures of every folder in PLAN (or of those named in only: demo, test, a study, 'claims') in
    place; returns the paths written."""
    from lab.pictures.doc_study_plots import draw_all
    from lab.pictures.eval_plots import plot_all
    from lab.pictures.pair_plots import draw_pairs
    from lab.pictures.verdict_plots import write_claims_png
    written, wanted = [], lambda folder: (not only or os.path.basename(folder) in only) and \
        os.path.exists(os.path.join(assets, folder))
    for folder, pictures in PLAN.items():
        if wanted(folder):
            written += plot_all(os.path.join(assets, folder), only=list(pictures))
    for folder in DOC_STUDIES:
        if wanted(folder):
            written += draw_all(os.path.join(assets, folder))
    for folder in PAIRS:
        if wanted(folder):
            written.append(draw_pairs(*(os.path.join(assets, folder, f) for f in ('pair_usage.json', 'pair_usage.png'))))
    if not only or 'claims' in only:
        written.append(write_claims_png(os.path.join(assets, CLAIMS)))
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--check', action='store_true', help='list what cannot be redrawn; draw nothing')
    ap.add_argument('studies', nargs='*', help=f"only these: claims, {', '.join(NAMES)}")
    args = ap.parse_args(argv)
    bad = [s for s in args.studies if s not in ('claims', *NAMES)]
    if bad:
        raise ValueError(f"no study named {bad[0]!r}; choose from claims, {', '.join(NAMES)}")
    if args.check:
        problems = check()
        print('\n'.join(problems) or "every committed picture in assets/ has a recipe and its files")
        return 1 if problems else 0
    for p in redraw(args.studies):
        print(f"wrote {os.path.relpath(p, ROOT)}")
    return 0


if __name__ == '__main__':
    cli(main)
