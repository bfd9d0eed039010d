"""
Measure how models predict tokens past their training length L, then draw the pictures (plot.py).

    python eval.py --ckpt=out/char-base,out/finetune --rope_types=linear,ntk,dynamic,yarn,yarn:beta_fast=8
    python eval.py --ckpt=out/char-base --eval_len=1024 --num_windows=32 --out_dir=out/eval
    python eval.py --plot_only=True --out_dir=out/eval --log_x=True     # redraw the PNGs from the CSV/JSON

Arms. Every --ckpt run folder (comma-separated) is an arm; a folder holding arms.json (a multi-arm
finetune_long.py run) stands for all of its arms, and the seeds of one arm (--seeds) are aggregated into one row.
Every --rope_types entry is a zero-shot arm: that RoPE scaling switched on in the base model (--base, else the
first --ckpt that is not a fine-tune, else the base a fine-tune names), with s = T/L unless the entry sets a
factor (yarn:factor=8:beta_fast=8; dynamic types default to factor 1). 'default' is the base model as trained.
An entry can also be a position map on the base's RoPE (lab/position_maps.py): rerope:window=64,
leaky_rerope:window=64:k=16, self_extend:window=32:group=4; --position_map=<such a spec> adds every fine-tuned arm
once more with that map ('yarn s=4 ft100 + rerope w=256').

Protocol: every arm is scored as it runs when generating: position p is predicted by a forward over p + 1 tokens.
The forward lengths 1..T are cut into runs over which an arm's RoPE tables do not change (constant_runs), and each
run is scored with one forward: a static arm is one run (one forward of T), LongRoPE two (short factors to L, long
ones past it). Dynamic NTK / YaRN move at every length past L: there every window is scored at --samples random
positions per bucket (stratified, seeded, the same for every arm), each at exactly its own length; --samples=0
scores every position (exact, slow). Passkey tokens are scored the same way, each at the length it is emitted at.
ppl_at[n] is the YaRN paper's Table 1 form: one forward of the first n tokens (dynamic arms at s = n/L).

Comparisons (--contrasts, and every arm against the best of each column) are paired tests on the same windows or
passkey examples, with seeds inside the interval (lab/stats.py, lab/compare.py), Holm-corrected per column, ending
in better, worse, equivalent (inside --margin_loss / --margin_exact) or unresolved. Bucket intervals carry windows
and seeds.

Outputs in out_dir: position_loss.csv, attention_entropy.csv, retrieval.csv, finetune_curves.csv (when arms have
fine-tune logs), summary.json, summary.md (printed), and plot.py's PNGs. Everything is validated before
anything is written, and every file is written atomically.
"""

import math
import os
import time
import warnings

import numpy as np
import torch
from tqdm import tqdm

from configurator import ConfigError, autocast_context, check_out_dir, check_ranges, cli, get_config, pick_device
from data.common import (atomic_write_text, check_vocab, data_dir_of, doc_windows, load_meta, load_split,
                         window_slots)
import lab.alibi, lab.copy_mix  # noqa: E401,F401  register their attention classes, so every checkpoint loads
from lab.arms import parse_contrasts, plan_arms
from lab.crop import truncated_entropy, truncated_scores, window_attention, window_logits
from lab.diagnostics import entropy_at
from lab.position_maps import mapped_attention, mapped_logits
from lab.report import summary_markdown
from lab.outcomes import room_scores
from lab.retrieval import eval_rooms, retrieval_scores
from lab.scoring import bucket_ends, grid_positions, sampled_design, score, scoring_plan
from lab.summary import (combine_bases, finetune_csv, json_text, per_position_csv, retrieval_csv, summarize_arm,
                         summary_settings)
from model import model_from_checkpoint

DEFAULTS = dict(
    ckpt='',                # run folders, comma-separated
    base='',                # base run for the zero-shot arms; '' = the first --ckpt that is not a fine-tune
    rope_types='',          # zero-shot arms: default,linear,ntk,dynamic,yarn,yarn:beta_fast=8,ntk:factor=8,...
                            # or maps: rerope:window=64,leaky_rerope:window=64:k=16,self_extend:window=32:group=4
    position_map='',        # a map also switched on in every fine-tuned arm (as another arm), e.g. rerope:window=256
    retune='',              # fine-tuned arms again with another scaling: 'yarn_s4_beta_fast8_ft100 | dynamic_yarn:factor=4; ...'
    factor=0.0,             # zero-shot scale s; 0 = T/L (dynamic types: 1, the scale then follows l/L)
    eval_len=0,             # T; 0 = max(4 x the longest fine-tune length, 8 x L)
    num_windows=32,         # held-out windows of T tokens, the same for every arm
    seed=1337,              # picks the windows, the passkey strings and the dynamic arms' scored positions
    split='val',            # 'val': the held-out plays; 'train' only to choose a method's knob (never on what is scored)
    dataset='',             # '' = the checkpoints' dataset (a name under data/ or a folder)
    batch_size=8,
    samples=32,             # moving-scale arms (Dynamic NTK/YaRN): random positions per bucket and window, each
                            # scored at its own length; 0 = every position its own forward (exact; slow, cost printed)
    grid=16,                # the entropy diagnostic of such arms: evenly spaced positions per bucket
    contrasts='',           # named paired comparisons 'arm A | arm B; arm C | arm D' (arm ids, or display names)
    margin_loss=0.02,       # equivalence margin of a loss difference (nats)
    margin_exact=0.10,      # equivalence margin of an exact-match difference (fraction)
    entropy_windows=4,      # windows for the attention entropy (manual attention, chunked)
    entropy_chunk=256,      # query chunk of that path: memory O(chunk x T)
    retrieval_examples=32,  # passkey examples per distance bucket, from their own windows (0 = skip the test)
    retrieval_len=24,       # tokens in the passkey string
    retrieval_cue=4,        # its first tokens, given at the repeat (the cue); the rest are scored
    retrieval_pos=8,        # where the first copy starts
    depth_len=12,           # the depth passkey: string length, its first copy at a random depth (0 = skip)
    needles=4,              # multi-key needles: records per window, one (and two) asked (0 = skip)
    needle_key=4, needle_value=4,  # tokens of a needle's key and value
    recall_len=16,          # natural-text recall: tokens of the held-out line repeated (0 = skip)
    out_dir='out/eval',
    device='auto', dtype='auto', progress=True,
    plot_only=False,        # only redraw the PNGs from out_dir's CSV/JSON
    combine='',             # eval folders of the same arms on other base models (out/a,out/b,...): the named contrasts and
                            # the crop comparisons across bases, into out_dir/bases.json and bases.md (runs no model)
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
    """One checkpoint of an arm (one seed): per-position losses [windows, T] (NaN where not scored), ppl_at,
    attention entropy, passkey outcomes, and the number of forwards its scoring plan took."""
    L, T, B = run['L'], run['T'], cfg['batch_size']
    model = model_from_checkpoint(r['ckpt'])
    if arm['kind'] == 'zero-shot' or arm.get('retuned'):
        model.set_rope_scaling(arm['scaling'])
    pm, crop = arm.get('position_map'), arm.get('crop') or {}
    w, truncated = crop.get('window'), crop.get('form') == 'truncated'
    attend = mapped_attention(model, pm) if pm else window_attention(model, w) if crop and not truncated else None
    model.to(device).eval()
    plan = scoring_plan(model, T, cfg['samples'])
    scorer = (lambda rows, where: truncated_scores(model, rows, where, w, ctx, B)) if truncated else \
        (lambda rows, where, plan=plan: score(model, rows, where, plan, ctx, B, attend))  # noqa: E731
    n0 = w if truncated else plan[1]  # the truncated crop costs a forward per position: sampled past its window
    where = [list(range(T)) if n0 >= T else list(range(n0)) + [p for p in d if p >= n0] for d in run['design']]
    loss = np.full((len(where), T), np.nan)
    for i, got in enumerate(scorer(run['seqs'], where)[0]):
        loss[i, where[i]] = got
    if len(plan[0]) > 1:  # Table 1 form: one forward of the first c tokens (the scale of a c-token input)
        ppl = {str(c): math.exp(float(np.mean(np.concatenate(
            score(model, run['seqs'], [list(range(c))] * len(where), ([(1, c)], c), ctx, B, attend)[0]))))
            for c in bucket_ends(L, T)}
    else:  # one forward of T is every cut at once (causal); a sampled arm: each bucket weighted by its size
        ppl = {str(c): math.exp(float(np.mean(sum(np.nanmean(loss[:, lo:hi], axis=1) * (hi - lo) for lo, hi in
                                                  zip([0] + bucket_ends(L, c), bucket_ends(L, c))) / c)))
               for c in bucket_ends(L, T)}
    first = plan[0][0][1]  # the entropy diagnostic: exact below the first run's end, a grid beyond
    x = run['seqs'][:cfg['entropy_windows'], :T].to(device)
    ent = truncated_entropy(model, x, grid_positions(L, T, w, cfg['grid']), w, ctx, B, cfg['entropy_chunk']) \
        if truncated else entropy_at(model, x, grid_positions(L, T, first, cfg['grid']), first, cfg['entropy_chunk'],
                                     ctx, mapped_logits(model, pm) if pm else window_logits(model, w) if crop else None)
    ret = retrieval_scores(scorer, run['buckets'], run['examples'], cfg['retrieval_len'], cfg['retrieval_cue']) \
        if run['examples'] else []
    rooms = {n: room_scores(scorer, r['buckets'], r['examples']) for n, r in run['rooms'].items()}
    return dict(loss=loss, ppl=ppl, ent=ent, ret=ret, rooms=rooms, model=model, runs=len(plan[0]), moving_from=n0)


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
    s = summary_settings(cfg, run, results, margins(cfg), PROTOCOL, timing)  # the run's record (lab/summary.py)
    summary = dict(settings=s, arms=results)
    import plot
    md = summary_markdown(summary)
    names = [a['name'] for a in arms]
    files = {'position_loss.csv': per_position_csv(names, pos_cols), 'attention_entropy.csv': per_position_csv(names, ent_cols),
             'retrieval.csv': retrieval_csv(results), 'summary.json': json_text(summary), 'summary.md': md}
    ft = finetune_csv(arms)  # every seed's fine-tune curve, read and checked by plan_arms
    if ft:
        files['finetune_curves.csv'] = ft
    os.makedirs(out_dir, exist_ok=True)
    for name, text in files.items():
        atomic_write_text(os.path.join(out_dir, name), text)
    for stale in ('finetune_curves.csv', 'finetune_curves.png'):  # from an earlier run with fine-tuned arms
        if 'finetune_curves.csv' not in files and os.path.exists(os.path.join(out_dir, stale)):
            os.remove(os.path.join(out_dir, stale))
    pngs = plot.plot_all(out_dir, log_x=cfg['log_x'], smooth=cfg['smooth'])
    print(md)
    print(f"eval: {len(arms)} arms x {len(run['starts'])} windows x {run['T']} tokens in {time.time() - t0:.1f}s; wrote "
          f"{', '.join(sorted(files) + [os.path.basename(p) for p in pngs])} to {out_dir}")
    return summary


# ----------------------------------------------------------------------------- main

def check_numbers(cfg):
    """The numeric settings, each in its range: ConfigError naming the first that is not."""
    check_ranges(cfg, positive=('num_windows', 'batch_size', 'entropy_chunk', 'retrieval_len', 'retrieval_cue',
                                'entropy_windows', 'grid', 'needle_key', 'needle_value'),
                 nonneg=('retrieval_pos', 'eval_len', 'smooth', 'retrieval_examples', 'samples', 'depth_len', 'needles',
                         'recall_len'))
    if cfg['entropy_windows'] > cfg['num_windows']:
        raise ConfigError(f"entropy_windows={cfg['entropy_windows']} is more than num_windows={cfg['num_windows']}; "
                          f"it uses the first eval windows")
    if cfg['factor'] and not cfg['factor'] >= 1:
        raise ConfigError(f"factor={cfg['factor']} must be >= 1 (s = T/L of the zero-shot rope arms), or 0 for T/L")
    for key in ('margin_loss', 'margin_exact'):
        if not cfg[key] > 0:
            raise ConfigError(f"{key}={cfg[key]} must be > 0 (the equivalence margin of a paired difference)")


def validate(cfg):
    """Check every setting, arm, the data and the windows before anything runs; returns the run's inputs."""
    check_numbers(cfg)
    check_out_dir(cfg['out_dir'])
    arms, base, T = plan_arms(cfg)
    contrasts = parse_contrasts(cfg['contrasts'], [a['name'] for a in arms])
    first = (arms or [base])[0]
    data_dir = data_dir_of(cfg['dataset'] or (first['ckpt'].get('dataset') or {}).get('dataset', ''))
    meta = load_meta(data_dir)
    vocab = first['ckpt']['model_args']['vocab_size']
    if meta['vocab_size'] != vocab:
        raise ConfigError(f"{data_dir} has a vocabulary of {meta['vocab_size']} but the models have {vocab}; "
                          f"evaluate on the dataset they were trained on")
    check_vocab(first['ckpt'].get('dataset') or {}, meta, data_dir, first['checkpoint'])  # the mapping, not only its size
    if cfg['smooth'] > T:
        raise ConfigError(f"smooth={cfg['smooth']} is wider than the {T} positions evaluated; pass --smooth <= {T} "
                          f"(0: T/32)")
    if cfg['split'] not in ('val', 'train'):
        raise ConfigError(f"split={cfg['split']!r} must be 'val' (the held-out plays) or 'train' (to choose a knob)")
    docs, val = meta['docs'][cfg['split']], load_split(data_dir, cfg['split'], meta)
    room = window_slots(docs, T + 1)
    if cfg['num_windows'] > room:
        raise ConfigError(f"num_windows={cfg['num_windows']} windows of {T + 1} tokens need more held-out text than "
                          f"{data_dir} has (its validation documents hold {room} such windows without overlap); "
                          f"lower --num_windows or --eval_len")
    L = base['L'] if base else max(a['L'] for a in arms)
    starts = doc_windows(docs, T + 1, cfg['num_windows'], cfg['seed'])
    ret_starts, buckets, examples, rooms, skipped = eval_rooms(cfg, val, docs, T, L, meta)  # the retrieval rooms
    device = pick_device(cfg['device'])
    dtype, _ = autocast_context(device.split(':')[0], cfg['dtype'])
    seqs = torch.from_numpy(np.stack([np.asarray(val[s:s + T + 1], dtype=np.int64) for s in starts]))
    design, mask = sampled_design(L, T, len(starts), cfg['samples'], cfg['seed'])  # where moving-scale arms are scored
    return dict(arms=arms, base=base, T=T, L=L, data_dir=data_dir, meta=meta, docs=docs, starts=starts, seqs=seqs,
                ret_starts=ret_starts, buckets=buckets, examples=examples, device=device, dtype=dtype,
                design=design, mask=mask, contrasts=contrasts, rooms=rooms, rooms_skipped=skipped)


def margins(cfg):
    return {'loss': cfg['margin_loss'], 'exact_match': cfg['margin_exact']}


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    if cfg['combine']:
        return combine_bases(cfg['combine'], cfg['out_dir'], margins(cfg))
    if cfg['plot_only']:
        import plot
        if cfg['smooth'] < 0:
            raise ConfigError(f"smooth={cfg['smooth']} must be >= 0 (0: T/32)")
        for p in plot.plot_all(cfg['out_dir'], log_x=cfg['log_x'], smooth=cfg['smooth']):
            print(f"wrote {p}")
        return None
    t0 = time.time()
    run = validate(cfg)
    _, ctx = autocast_context(run['device'].split(':')[0], cfg['dtype'])
    results, pos_cols, ent_cols, timing = [], [], [], {}
    for arm in tqdm(run['arms'], unit='arm', disable=not cfg['progress'], dynamic_ncols=True):
        t = time.time()
        res, pos_loss, ent = measure_arm(arm, run, cfg, run['device'], ctx)
        results.append(res)
        pos_cols.append(pos_loss)
        ent_cols.append(ent)
        timing[arm['name']] = round(time.time() - t, 2)
    return write_outputs(cfg, run, results, pos_cols, ent_cols, timing, t0)


if __name__ == '__main__':
    cli(main)
