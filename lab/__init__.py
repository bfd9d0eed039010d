"""
The lab's extras, one room each. The core (rope.py, rope_config.py, model.py) imports none of them; a room imports
the core and never a script; the scripts (train.py, finetune_long.py, eval.py, sample.py, search_longrope.py) use
the rooms through their public functions, and deleting a room costs them only the lines that call it. Importing
this package imports nothing (lab.stats needs no torch); a script that loads checkpoints imports lab.alibi,
lab.copy_mix, lab.sinks and lab.temperature, which register their attention classes with model.py.

  specs            arm specs ('yarn:beta_fast=8'), readable names, folder slugs (every script)
  rope_table       the per-pair table of every rope type (python -m lab.rope_table)
  attention        attention a query chunk at a time (alibi, crop, position_maps, diagnostics)
  alibi            ALiBi, the relative-bias baseline (attention of pos_emb='alibi')
  arms             eval.py's arms: identities, ids, seed groups, the base, zero-shot / mapped / retuned arms (eval.py)
  report           summary.md and bases.md from summary.json / bases.json (eval.py)
  summary          an arm's summary.json entry, the files' JSON/CSV text, --combine over bases (eval.py)
  scoring          the protocol: each position scored as generated, constant runs, sampled design (eval.py)
  kv_cache         the KV cache and cached decoding (sample.py)
  position_maps    ReRoPE, Leaky ReRoPE, Self-Extend, Dual Chunk Attention and their exact attention (eval.py)
  diagnostics      attention entropy and the weight on the first token, the sink strength (eval.py)
  batches          training batches with PoSE windows, synthetic copies, mixed windows (train.py's batch hook)
  sweep            finetune_long.py's arms x seeds: plan, checks, arms.json, resume
  ddp              several processes and Ctrl-C: agreed stops, every rank's RNG, one process group (train.py)
  pose             PoSE position ids (lab.batches)
  copy_mix         synthetic copies in training windows and smeared keys (lab.batches; attention='smear_keys')
  crop             the crop control: the base held to its last L tokens, sliding and truncated (eval.py, lab/arms.py)
  retrieval        the retrieval rooms' examples: passkey, depth passkey, needles, recall (eval.py)
  ruler            RULER's harder needles: an untrained format, several values, two hops (lab.retrieval's rooms)
  outcomes         the rooms scored with an arm, and their outcomes over seeds (eval.py)
  stats            intervals, paired tests and verdicts (compare, retrieval)
  compare          eval.py's arms compared: contrasts, vs best, vs the crop, over bases, break positions (eval.py)
  longrope_search  LongRoPE's evolutionary search, LongRoPE2's needle objective (search_longrope.py)
  bench            FLOPs per token, MFU and the timed steps of train.py --bench=True
  hf_export        a run as a GPT-NeoX folder for transformers (python -m lab.hf_export)
  device           cpu / cuda / mps, the number format (autocast) and torchrun's ranks (every script)
  checks           what train.py and eval.py refuse before they run: ranges, out_dir, init_from, vocabulary, windows
  forms            how an arm runs at evaluation (causal, a position map, a crop) and the measurements beside its
                   loss: attention entropy, passkeys, retrieval rooms (eval.py)
  plot_kit         reading eval.py's files with their checks, and the pictures' shared look (plot.py, retrieval_plots)
  retrieval_plots  retrieval.png, retrieval_depth.png, retrieval_rooms.png, retrieval_heatmaps.png (plot.py)
  figures          headline.png, families.png, retrieval_families.png: the story's arms, one panel a family (plot.py)
  verdict_plots    verdicts.png (forest plot), verdict_grid.png (every room's verdicts), claims.png (plot.py, redraw)
  redraw           every committed PNG in assets/ redrawn from committed files (python -m lab.redraw [--check])
  method_plots     rope_ramp.png, finetune_curves.png and clip_sweep.png (plot.py)
  claims           the record behind each claim of README.md and docs/results.md (python -m lab.claims)
  agreement        do two runs of one eval reach the same verdicts? (python -m lab.agreement a.json b.json)
  temperature      the attention temperature's shapes as query factors (Llama 4, Ministral 3, log-n, DroPE, SSMax)
                   and Scalable-Softmax trained in (attention='ssmax'; eval.py's qtemp arms, lab.forms)
  hf_config        Hugging Face's rope configs read back: one dict, a config.json, the per-layer form (layer_types)
  sinks            learned attention sinks, one logit per head in every softmax (attention='sinks', gpt-oss)
  cli              how a script runs its main: one line and exit 2 for a bad input, a traceback for a bug
"""
