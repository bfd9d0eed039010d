"""
Every picture, drawn from eval.py's files only (plot.py is the entry point):

  plot_kit         reading eval.py's files with their checks, and the shared look: one colour per method, the
                   headline's arms, smoothing
  eval_plots       loss_vs_position.png and attention_entropy.png, and plot_all: every picture of an eval's out_dir
  figures          headline.png, families.png, retrieval_families.png: the story's arms, one panel a family
  retrieval_plots  retrieval.png, retrieval_depth.png, retrieval_rooms.png, retrieval_heatmaps.png
  verdict_plots    verdicts.png (forest plot), verdict_grid.png (every room's verdicts), claims.png
  method_plots     rope_ramp.png, finetune_curves.png and clip_sweep.png
  pair_plots       pair_usage.png, from lab.pairs' pair_usage.json
  doc_study_plots  headline.png and verdicts.png of lab.doc_study (the real model's study)
  redraw           every committed PNG in assets/ redrawn from committed files (python -m lab.pictures.redraw)
"""
