"""
Measure how models predict tokens past their training length L, then draw the pictures (plot.py).

    python eval.py --ckpt=out/char-base,out/finetune --rope_types=linear,ntk,dynamic,yarn,yarn:beta_fast=8
    python eval.py --ckpt=out/char-base --eval_len=1024 --num_windows=32 --out_dir=out/eval
    python eval.py --plot_only=True --out_dir=out/eval --log_x=True     # redraw the PNGs from the CSV/JSON
    python eval.py --merge=out/part1,out/part2 --out_dir=out/eval       # one eval measured in parts, judged as one

Arms (lab/measure/arms.py). Every --ckpt run folder is an arm (a folder with arms.json: all of its arms; the seeds of one arm
are one row). Every --rope_types entry is a zero-shot arm: that scaling switched on in the base model, with s = T/L
unless the entry sets a factor (yarn:factor=8:beta_fast=8); 'default' is the base as trained. An entry can also be a
position map (rerope:window=64, self_extend:window=32:group=4: lab/position_maps.py) or the crop (lab/crop.py).

Protocol: every arm is scored as it runs when generating: position p is predicted by a forward over p + 1 tokens.
The lengths 1..T are cut into runs over which an arm's RoPE tables do not change (lab/measure/scoring.py): a static arm is one
forward of T, LongRoPE two; Dynamic NTK / YaRN move at every length past L, so each window is scored there at
--samples random positions per bucket (the same for every arm), each at its own length. ppl_at[n] is the YaRN paper's
Table 1 form: one forward of the first n tokens. Comparisons are paired tests on the same windows or examples, seeds
inside the interval, ending in better, worse, equivalent (inside --margin_loss / --margin_exact) or unresolved.

Outputs in out_dir, each written atomically once everything is validated: position_loss.csv, attention_entropy.csv,
retrieval.csv, finetune_curves.csv, temperature_law.csv (--temperature_law=True), summary.json, summary.md (printed)
and plot.py's PNGs.
"""

import math
import os
import time
import warnings

import numpy as np
import torch

from configurator import ConfigError, get_config
from lab.engine.cli import cli
from data.common import atomic_write_text, data_dir_of, doc_windows, load_meta, load_split
from lab.verdicts import compare
from lab.measure import forms, passkey_text, retrieval, temperature_law
from lab.measure.arms import arm_model, parse_contrasts, plan_arms
from lab.engine.device import autocast_context, pick_device
from lab.engine.checks import check_eval_data, check_eval_settings, without_windows_of
from lab.measure.forms import arm_form, side_measures
from lab.verdicts.summary_md import summary_markdown
from lab.measure.rooms import eval_rooms
from lab.measure.scoring import bucket_ends, sampled_design, score, scoring_plan
from lab.verdicts.summary_json import (combine_bases, finetune_csv, json_text, per_position_csv, rejudge, retrieval_csv,
                         summarize_arm, summary_settings)
from lab.measure.workers import check_memory, map_arms, worker_count

DEFAULTS = dict(
    ckpt='',                # run folders, comma-separated
    base='',                # base run for the zero-shot arms; '' = the first --ckpt that is not a fine-tune
    rope_types='',          # zero-shot arms: default,linear,ntk,dynamic,yarn,yarn:beta_fast=8,ntk:factor=8,...
                            # or maps: rerope:window=64,leaky_rerope:window=64:k=16,self_extend:window=32:group=4
    position_map='',        # a map also switched on in every fine-tuned arm (as another arm), e.g. rerope:window=256
    retune='',              # fine-tuned arms again with another scaling: 'yarn_s4_beta_fast8_ft100 | dynamic_yarn:factor=4; ...'
    self_crop='',           # sliding | truncated | both: every arm also held to its own window (L; a fine-tune's length)
    factor=0.0,             # zero-shot scale s; 0 = T/L (dynamic types: 1, the scale then follows l/L)
    eval_len=0,             # T; 0 = max(4 x the longest fine-tune length, 8 x L)
    num_windows=32,         # held-out windows of T tokens, the same for every arm
    seed=1337,              # picks the windows, the passkey strings and the dynamic arms' scored positions
    split='val',            # 'val': the held-out plays; 'train' only to choose a method's knob (never on what is scored)
    exclude='',             # an eval folder whose windows this one must not touch (a test split beside the dev one)
    dataset='',             # '' = the checkpoints' dataset (a name under data/ or a folder)
    batch_size=8,
    samples=32,             # moving-scale arms (Dynamic NTK/YaRN): random positions per bucket and window, each
                            # scored at its own length; 0 = every position its own forward (exact; slow, cost printed)
    **forms.DEFAULTS,       # the attention-entropy diagnostic (lab/measure/forms.py)
    **temperature_law.DEFAULTS,  # beta_c of each row and its law in n (lab/measure/temperature_law.py; off by default)
    **retrieval.DEFAULTS,   # the passkey test and the retrieval rooms (lab/measure/retrieval.py)
    **passkey_text.DEFAULTS,  # the natural-language passkey (lab/measure/passkey_text.py; a real model's room)
    **compare.DEFAULTS,     # named contrasts, equivalence margins, --combine over bases (lab/verdicts/compare.py)
    out_dir='out/eval',
    device='auto', dtype='auto', progress=True,
    workers=0,              # processes of one thread measuring arms side by side on a CPU (0: one per core, on Linux)
    plot=True,              # draw the PNGs after measuring (False: the CSV/JSON only; --plot_only draws them later)
    plot_only=False,        # only redraw the PNGs from out_dir's CSV/JSON
    log_x=False,            # log-scale position axis in the plots
    smooth=0,               # moving-average width of the curves in the plots; 0 = T/32
)
FILES = ('position_loss.csv', 'attention_entropy.csv', 'retrieval.csv', 'finetune_curves.csv', 'summary.json',
         'summary.md')
PROTOCOL = ("Every arm is scored as it generates: position p by a forward over p + 1 tokens (one forward per run of "
            "lengths with the same RoPE tables: static arms one of T, LongRoPE two; Dynamic NTK/YaRN at random "
            "stratified positions per window, each at its own length; passkey tokens each at the length they are "
            "emitted at); ppl_at[n] = one forward of the first n tokens; 95% intervals carry windows (or examples) "
            "and seeds.")

# ----------------------------------------------------------------------------- measuring

def measure_run(arm, r, run, cfg, device, ctx):
    """One checkpoint of an arm (one seed): per-position losses [windows, T] (NaN where not scored), ppl_at, and the
    side measurements (attention entropy, passkey and room outcomes), with the number of forwards its plan took."""
    L, T, B = run['L'], run['T'], cfg['batch_size']
    model = arm_model(arm, r['ckpt'])  # the switch: the same weights, new rotation frequencies
    model.to(device).eval()
    plan = scoring_plan(model, T, cfg['samples'])  # the runs of forward lengths with the same RoPE tables
    form = arm_form(model, arm, plan, ctx, B)  # causal attention, a position map or a crop (lab/measure/forms.py)
    where = [list(range(T)) if form.n0 >= T else list(range(form.n0)) + [p for p in d if p >= form.n0]
             for d in run['design']]
    loss = np.full((len(where), T), np.nan)
    for i, got in enumerate(form.scorer(run['seqs'], where)[0]):
        loss[i, where[i]] = got
    if len(plan[0]) > 1:  # Table 1 form: one forward of the first c tokens (the scale of a c-token input)
        ppl = {str(c): math.exp(float(np.mean(np.concatenate(
            score(model, run['seqs'], [list(range(c))] * len(where), ([(1, c)], c), ctx, B, form.attend)[0]))))
            for c in bucket_ends(L, T)}
    else:  # one forward of T is every cut at once (causal); a sampled arm: each bucket weighted by its size
        ppl = {str(c): math.exp(float(np.mean(sum(np.nanmean(loss[:, lo:hi], axis=1) * (hi - lo) for lo, hi in
                                                  zip([0] + bucket_ends(L, c), bucket_ends(L, c))) / c)))
               for c in bucket_ends(L, T)}
    return dict(loss=loss, ppl=ppl, **side_measures(model, form, plan, run, cfg, ctx), model=model, runs=len(plan[0]),
                moving_from=form.n0)


def measure_arm(arm, run, cfg, device, ctx):
    """Everything measured for one arm, over its seeds' runs: (summary entry, per-position mean loss [T], entropy)."""
    per_run = [measure_run(arm, r, run, cfg, device, ctx) for r in arm['runs']]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # positions no window scored stay NaN
        curve = np.nanmean(np.stack([p['loss'] for p in per_run]), axis=(0, 1))
        ent = np.nanmean(np.stack([p['ent'] for p in per_run]), axis=0)
        return summarize_arm(arm, per_run, run, ent), curve, ent


# ----------------------------------------------------------------------------- writing

def write_outputs(cfg, run, results, pos_cols, ent_cols, timing, t0):
    """summary.json / .md and the CSVs, atomically, then the PNGs."""
    out_dir, arms = cfg['out_dir'], run['arms']
    s = summary_settings(cfg, run, results, compare.margins(cfg), PROTOCOL, timing)  # the run's record (lab/verdicts/summary_json.py)
    summary = compare.stamp_gates(dict(settings=s, arms=results))  # each row's gate stored with its verdict
    import plot
    md = summary_markdown(summary)
    names = [a['name'] for a in arms]
    files = {'position_loss.csv': per_position_csv(names, pos_cols), 'attention_entropy.csv': per_position_csv(names, ent_cols),
             'retrieval.csv': retrieval_csv(results), 'summary.json': json_text(summary), 'summary.md': md}
    ft = finetune_csv(arms)  # every seed's fine-tune curve, read and checked by plan_arms
    if ft:
        files['finetune_curves.csv'] = ft
    law = temperature_law.law_csv(results)  # --temperature_law's table, from summary.json's fields
    if law:
        files['temperature_law.csv'] = law
    os.makedirs(out_dir, exist_ok=True)
    for name, text in files.items():
        atomic_write_text(os.path.join(out_dir, name), text)
    for made, stale in (('finetune_curves.csv', ('finetune_curves.csv', 'finetune_curves.png')),  # an earlier run's,
                        ('temperature_law.csv', ('temperature_law.csv',))):  # with fine-tunes or the diagnostic on
        for name in stale if made not in files else ():
            if os.path.exists(os.path.join(out_dir, name)):
                os.remove(os.path.join(out_dir, name))
    pngs = plot.plot_all(out_dir, log_x=cfg['log_x'], smooth=cfg['smooth']) if cfg['plot'] else []
    if not cfg['plot']:  # an earlier run's pictures would show other numbers
        for stale in (os.path.join(out_dir, n) for n in plot.SOURCES if os.path.exists(os.path.join(out_dir, n))):
            os.remove(stale)
    print(md)
    print(f"eval: {len(arms)} arms x {len(run['starts'])} windows x {run['T']} tokens in {time.time() - t0:.1f}s; wrote "
          f"{', '.join(sorted(files) + [os.path.basename(p) for p in pngs])} to {out_dir}")
    return summary


# ----------------------------------------------------------------------------- main

def prepare(cfg):
    """Check every setting, arm, the data and the windows before anything runs; returns the run's inputs."""
    check_eval_settings(cfg)  # ranges, margins, split, out_dir (lab/engine/checks.py)
    arms, base, T = plan_arms(cfg)
    contrasts = parse_contrasts(cfg['contrasts'], [a['name'] for a in arms])
    first = (arms or [base])[0]
    data_dir = data_dir_of(cfg['dataset'] or (first['ckpt'].get('dataset') or {}).get('dataset', ''))
    meta = load_meta(data_dir)
    docs, val = meta['docs'][cfg['split']], load_split(data_dir, cfg['split'], meta)
    docs = without_windows_of(cfg['exclude'], docs, cfg['split'], meta)  # a test split: no token of those windows
    check_eval_data(cfg, first, meta, data_dir, docs, T)  # vocabulary, smoothing, enough text for the windows
    L = base['L'] if base else max(a['L'] for a in arms)
    starts = doc_windows(docs, T + 1, cfg['num_windows'], cfg['seed'])  # non-overlapping, the same for every arm
    seqs = torch.from_numpy(np.stack([np.asarray(val[s:s + T + 1], dtype=np.int64) for s in starts]))
    design, mask = sampled_design(L, T, len(starts), cfg['samples'], cfg['seed'])  # where moving-scale arms are scored
    ret_starts, buckets, examples, rooms, skipped = eval_rooms(cfg, val, docs, T, L, meta)  # the retrieval rooms
    device = pick_device(cfg['device'])
    dtype, _ = autocast_context(device.split(':')[0], cfg['dtype'])
    return dict(arms=arms, base=base, T=T, L=L, data_dir=data_dir, meta=meta, docs=docs, starts=starts, seqs=seqs,
                ret_starts=ret_starts, buckets=buckets, examples=examples, device=device, dtype=dtype,
                design=design, mask=mask, contrasts=contrasts, rooms=rooms, rooms_skipped=skipped)


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    if cfg['combine_minus'] and not cfg['combine']:
        raise ConfigError("--combine_minus pairs with --combine: pass --combine=<evals of one kind of base> beside it")
    if cfg['combine']:
        return combine_bases(cfg['combine'], cfg['out_dir'], compare.margins(cfg), cfg['combine_minus'])
    if cfg['rejudge']:
        return rejudge(cfg['rejudge'], cfg['out_dir'], compare.margins(cfg))
    if cfg['merge'] or cfg['plot_only']:  # parts of one eval joined (runs no model), then its pictures drawn again
        from lab.verdicts.merge import merge_parts  # (only this path reads parts: a measuring run never loads it)
        merged = merge_parts(cfg['merge'], cfg['out_dir'], compare.margins(cfg), cfg['contrasts'], list(argv)) \
            if cfg['merge'] else None
        if cfg['plot_only'] or cfg['plot']:
            import plot
            for p in plot.plot_all(cfg['out_dir'], log_x=cfg['log_x'], smooth=cfg['smooth']):
                print(f"wrote {p}")
        return merged
    t0 = time.time()
    run = dict(prepare(cfg), argv=list(argv))  # argv: the command, for summary.json's provenance
    _, ctx = autocast_context(run['device'].split(':')[0], cfg['dtype'])
    run['workers'] = worker_count(cfg['workers'], run['device'], len(run['arms']))  # arms side by side on CPU cores
    check_memory(run['arms'], run['T'], cfg['batch_size'], run['workers'], run['device'])  # before any arm runs
    measured = map_arms(measure_arm, run['arms'], (run, cfg, run['device'], ctx), run['workers'], cfg['progress'])
    results, pos_cols, ent_cols = (list(x) for x in zip(*[m for m, _ in measured]))
    timing = {arm['name']: round(sec, 2) for arm, (_, sec) in zip(run['arms'], measured)}
    return write_outputs(cfg, run, results, pos_cols, ent_cols, timing, t0)


if __name__ == '__main__':
    cli(main)
