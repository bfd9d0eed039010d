"""
The pictures of an eval.py run, drawn only from the CSV/JSON files eval.py wrote in its out_dir (plotting never
loads a model or a checkpoint), so `python eval.py --plot_only=True --out_dir=<dir>` redraws them at any time:

  loss_vs_position.png   smoothed loss per position per arm, lines at L, at the fine-tune length(s) and at T_extra,
                         the critical-dimension bound of plain RoPE (Liu et al. 2023)
  rope_ramp.png          theta'_i/theta_i per pair for every arm's RoPE config, high/middle/low bands shaded
  attention_entropy.png  mean attention entropy per query position per arm
  retrieval.png          passkey test: in-context gain and exact match per distance bucket
  retrieval_depth.png    depth passkey: exact match per (depth, distance) cell, for the base and the best arms
  finetune_curves.png    loss beyond L vs fine-tune step (when the arms have fine-tune logs)
  clip_sweep.png         loss and passkey against the pairs left rotating (a p-RoPE sweep at inference, issue 33)
  headline.png           the story's arms, zero-shot and fine-tuned side by side; families.png /
                         retrieval_families.png one small panel per family of arms, loss and passkey (lab/pictures/figures.py);
                         verdicts.png the forest plot of the verdicts, verdict_grid.png every room's verdicts at
                         once (lab/pictures/verdict_plots.py);
                         retrieval_heatmaps.png depth x distance per headline arm (lab/pictures/retrieval_plots.py)

Zero-shot arms are dashed, fine-tuned arms solid (PoSE fine-tunes dash-dotted), in one colour per method (whatever
the scale); the base model is black. The styles and the checked reading of eval's files are lab/pictures/plot_kit.py's;
the retrieval rooms' pictures are lab/pictures/retrieval_plots.py's, rope_ramp and finetune_curves lab/pictures/method_plots.py's; the Markdown tables (summary.md, bases.md) lab/verdicts/summary_md.py's.
The drawing is lab/pictures/eval_plots.py's: the loss and entropy curves, and plot_all, which draws every picture above
(eval.py calls it here; lab.pictures.redraw calls it for every committed picture, and a room never imports a script).
"""
from lab.pictures.eval_plots import OPTIONAL, SOURCES, plot_all  # noqa: F401  (eval.py's plot.plot_all)
