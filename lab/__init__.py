"""
The lab's rooms. The spine (rope.py, rope_config.py, model.py) imports none of them; a room imports the spine and
never a script; the scripts (train.py, finetune_long.py, eval.py, sample.py, search_longrope.py, plot.py) use the
rooms through their public functions. Imports only go down and never in a circle (tests/test_spine.py walks the
graph, function-local imports included): spine and configurator (the settings, and which errors are bad inputs) <-
the foundations (spec, stats, attention, smeared_keys; engine's cli, checks, device) <- the methods <- measure/ <-
verdicts/ <- pictures/, with the tools that read everything (knobs, pairs, model_facts, longrope_search, rope_table,
doc_study) and engine's runners above them. A script imports what it runs: `import train` loads 18 project
modules, 2,968 lines (27 and 4,717 before issue 61 item 3: no retrieval room, no scipy), finetune_long 23 (3,472),
eval 40 (7,864; docs/results.md, "The import closures"). Importing this package imports nothing (lab.stats needs no
torch). No room is imported for its side effect: each registry names the room that fills each entry and imports it on
first use (model.ATTENTION_ROOMS for the attention classes, data.checkpoints.LOADER_MODULES for gguf: and hf:,
data.sources.TOKENIZER_ROOMS for a real model's tokenizer).

The foundations the methods share:

  spec             an arm spec's key=value settings typed by a room's keys (position maps, the crop, temperatures,
                   and arm_specs' rope types)
  stats            intervals, paired tests and the four verdicts: better, worse, equivalent, unresolved (numpy, scipy)
  smeared_keys     smeared keys (attention='smear_keys'): each key mixes in the previous token's, the copy mix's
                   bases; temperature, sinks and gated build their smear_keys_* classes on it

The methods and controls a learner came for, one file each:

  position_maps    ReRoPE, Leaky ReRoPE, Self-Extend, Dual Chunk Attention and their exact attention
  crop             the crop control: the base held to its last L tokens, sliding and truncated
  temperature      the attention temperature's shapes as query factors (Llama 4, Ministral 3, log-n, DroPE, SSMax)
                   and Scalable-Softmax trained in (attention='ssmax')
  sinks            learned attention sinks, one logit per head in every softmax (attention='sinks', gpt-oss)
  gated            gated attention: each head's output times a sigmoid gate of the layer's input (attention='gated',
                   Qwen3-Next)
  fope             FoPE: clipped RoPE whose cos/sin each key/value head mixes across the pairs that turn
                   (attention='fope', Intern-S1-Pro; needs rope_type 'clip')
  conv             a short gated causal convolution in place of attention, a layer kind (layers='conv,rope:w=32,...',
                   LFM2 / LFM3): the local position source beside a few RoPE layers
  alibi            ALiBi, the relative-bias baseline (attention of pos_emb='alibi')
  fire             FIRE, a learned bias of the distance over the query's position, progressive interpolation
                   (attention of pos_emb='fire')
  cope             CoPE, contextual positions: a key's position counts the tokens the query's gates open on, and
                   what each head counts (attention of pos_emb='cope'; python -m lab.cope)
  inkling          Inkling-2's attention, no RoPE: a relative bias mixed per query from a learned bank of profiles
                   by the hidden state, zero past a reach, per-query sinks, short convolutions on k and v
                   (attention='inkling')
  pose             PoSE position ids: train short, see long positions
  copy_mix         synthetic copies in training windows (with smeared keys, lab/smeared_keys.py), so a base retrieves
  kv_cache         the KV cache and cached decoding (sample.py)
  longrope_search  LongRoPE's evolutionary search of per-pair factors, LongRoPE2's needle objective (search_longrope.py)
  rope_table       the per-pair table of every rope type (python -m lab.rope_table)
  knobs            which knobs for my length: every method's settings for a target T (python -m lab.knobs)
  doc_study        a real model's study (make real-model): one window per document, a passkey planted in each, a
                   family of contrasts declared before the run, judged with Holm (measure, verdicts, pictures)
  pairs            which rotary pairs each arm uses: each pair's share of the attention logit per layer and head,
                   inside L and past it (python -m lab.pairs)
  model_facts      what a model is, read once from a run, a GGUF or an HF folder (rotary dims and the pairs that
                   turn, layers, grouped heads, L, a trained-in rope type, the tokenizer): what every tool reads
  attention        attention a query chunk at a time, and masked attention fused (banded blocks, log-sum-exp merges):
                   the helpers the methods above share

The machinery around them, one package per concern:

  measure/   how an arm is measured: its spec and identity (arm_specs, arms), how it runs (forms), the scoring
             protocol (scoring), the retrieval rooms (placement, retrieval, ruler, rooms, outcomes), diagnostics,
             arms measured side by side in worker processes (workers)
  verdicts/  from numbers to words, with lab/stats.py: paired comparisons (compare), summary.json (summary_json)
             and summary.md (summary_md), the claims records (claims), two runs' agreement (agreement)
  pictures/  every PNG from eval.py's files: the shared kit (plot_kit), eval's curves and plot_all (eval_plots, which
             plot.py lists), the story's figures, retrieval, verdicts, methods and claims pictures, and redraw
             (every committed picture from committed files)
  engine/    what the scripts run on: training batches (batches), finetune_long.py's sweeps (sweep), several
             processes (ddp), the device (device), FLOPs and MFU (bench), one-line errors (cli, checks)
  hf/        Hugging Face: rope configs read back (config), a run exported as a transformers folder (export), real
             models' weights loaded into model.py (gguf: llama.cpp's files; weights: Hugging Face folders)
"""
