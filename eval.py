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

Protocol: every arm is scored as it runs when generating. Position p is predicted by a forward over p + 1
tokens; for static scalings one forward of T tokens gives exactly that at every position. A dynamic arm's
scale follows the length, so positions where its scale is still the shortest-length one come from one forward
of that length, and beyond it a grid of positions per bucket (--grid, evenly spaced) is scored exactly, each by
its own forward of p + 1 tokens. ppl_at[n] is the YaRN paper's Table 1 form: one forward of the first n tokens
(dynamic arms at s = n/L). Intervals: 95%, Student t over windows for losses, Wilson for exact match.

Outputs in out_dir: position_loss.csv, attention_entropy.csv, retrieval.csv, finetune_curves.csv (when arms have
fine-tune logs), summary.json, summary.md (printed), and plot.py's PNGs. Everything is validated before
anything is written, and every file is written atomically.
"""

import csv
import io
import json
import math
import os
import time

import numpy as np
import torch
from tqdm import tqdm

from arms import plan_arms
from configurator import ConfigError, autocast_context, check_out_dir, cli, get_config, pick_device
from data.common import atomic_write_text, check_vocab, data_dir_of, doc_windows, load_meta, load_split
from lab.diagnostics import entropy_at
from lab.position_maps import mapped_attention, mapped_logits
from lab.retrieval import average_retrieval, passkey_examples, retrieval_scores
from lab.stats import mean_ci, paired_vs_best
from model import model_from_checkpoint
from rope_config import is_dynamic, rope_inv_freq, scaling_extras

DEFAULTS = dict(
    ckpt='',                # run folders, comma-separated
    base='',                # base run for the zero-shot arms; '' = the first --ckpt that is not a fine-tune
    rope_types='',          # zero-shot arms: default,linear,ntk,dynamic,yarn,yarn:beta_fast=8,ntk:factor=8,...
                            # or maps: rerope:window=64,leaky_rerope:window=64:k=16,self_extend:window=32:group=4
    position_map='',        # a map also switched on in every fine-tuned arm (as another arm), e.g. rerope:window=256
    factor=0.0,             # zero-shot scale s; 0 = T/L (dynamic types: 1, the scale then follows l/L)
    eval_len=0,             # T; 0 = max(4 x the longest fine-tune length, 8 x L)
    num_windows=32,         # held-out windows of T tokens, the same for every arm
    seed=1337,              # picks the windows and the passkey strings
    dataset='',             # '' = the checkpoints' dataset (a name under data/ or a folder)
    batch_size=8,
    grid=16,                # dynamic arms: positions per bucket scored exactly past their shortest-length scale
    entropy_windows=4,      # windows for the attention entropy (manual attention, chunked)
    entropy_chunk=256,      # query chunk of that path: memory O(chunk x T)
    retrieval_examples=32,  # passkey examples per distance bucket, from their own windows (0 = skip the test)
    retrieval_len=24,       # tokens in the passkey string
    retrieval_cue=4,        # its first tokens, given at the repeat (the cue); the rest are scored
    retrieval_pos=8,        # where the first copy starts
    out_dir='out/eval',
    device='auto', dtype='auto', progress=True,
    plot_only=False,        # only redraw the PNGs from out_dir's CSV/JSON
    log_x=False,            # log-scale position axis in the plots
    smooth=0,               # moving-average width of the curves in the plots; 0 = T/32
)
FILES = ('position_loss.csv', 'attention_entropy.csv', 'retrieval.csv', 'finetune_curves.csv', 'summary.json',
         'summary.md')
PROTOCOL = ("Every arm is scored as it generates: position p by a forward over p + 1 tokens (static scalings: one "
            "forward of T; dynamic ones: exactly, on a grid past their shortest-length scale; passkey strings at the "
            "scale of their last token); ppl_at[n] = one forward of the first n tokens; 95% intervals over windows "
            "(t) and examples (Wilson).")

# ----------------------------------------------------------------------------- statistics


# ----------------------------------------------------------------------------- measuring


def bucket_ends(L, T):
    """L, 2L, 4L, ... below T, then T: the ends of the position buckets and the context cuts of ppl_at."""
    ends, e = [], L
    while e < T:
        ends.append(e)
        e *= 2
    return ends + [T]


def constant_len(model, T):
    """The longest forward length <= T whose RoPE tables equal those of a 1-token forward: a dynamic arm scores
    every position below it with one forward. T for static arms and other position encodings."""
    c = model.config
    if c.pos_emb != 'rope' or not is_dynamic(c.rope_scaling):
        return T
    table = lambda n: rope_inv_freq(model.head_dim, c.rope_base, c.rope_scaling, n)
    ref, lo, hi = table(1), 1, T  # the tables change monotonically with the length: bisect
    while lo < hi:
        mid = (lo + hi + 1) // 2
        same = table(mid)
        lo, hi = (mid, hi) if same[1] == ref[1] and torch.equal(same[0], ref[0]) else (lo, mid - 1)
    return lo


@torch.no_grad()
def nll(model, seq, positions, n0, ctx, hits=False, attend=None):
    """NLL of seq[:, p + 1] given seq[:, :p + 1] for each p in positions (B, len) on the CPU, each scored as the
    model generates: positions below n0 (and every position of a static arm) from one forward; any other p by a
    forward of exactly p + 1 tokens. With hits=True also whether the argmax is the target."""
    positions = list(positions)
    loss, hit = torch.empty(seq.size(0), len(positions)), torch.zeros(seq.size(0), len(positions), dtype=torch.bool)
    near = [j for j, p in enumerate(positions) if p < n0]
    groups = ([(max(positions[j] for j in near) + 1, near)] if near else []) + \
        [(p + 1, [j]) for j, p in enumerate(positions) if p >= n0]
    for n, cols in groups:
        with ctx:
            logits, l = model(seq[:, :n], seq[:, 1:n + 1], reduction='none', attend=attend)
        idx = torch.tensor([positions[j] for j in cols], device=seq.device)
        loss[:, cols] = l[:, idx].float().cpu()
        if hits:
            hit[:, cols] = (logits[:, idx].argmax(-1) == seq[:, idx + 1]).cpu()
    return loss, hit


def scored_positions(L, T, n0, grid):
    """Every position of a static arm; for a dynamic one, every position below n0 and `grid` evenly spaced ones
    per bucket beyond it."""
    if n0 >= T:
        return list(range(T))
    out, lo = list(range(n0)), 0
    for hi in bucket_ends(L, T):
        a = max(lo, n0)
        if a < hi:
            out += sorted(set(np.linspace(a, hi - 1, min(grid, hi - a)).round().astype(int).tolist()))
        lo = hi
    return out


def measure_arm(arm, run, cfg, device, ctx):
    """Everything measured for one arm (each of its seeds' runs): per-position losses, buckets with intervals,
    ppl_at (Table 1 form), retrieval, entropy. Returns (result dict, per-window loss array [N, T])."""
    L, T, B = run['L'], run['T'], cfg['batch_size']
    per_run = []
    for r in arm['runs']:
        model = model_from_checkpoint(r['ckpt'])
        if arm['kind'] == 'zero-shot':
            model.set_rope_scaling(arm['scaling'])
        pm = arm.get('position_map')
        attend = mapped_attention(model, pm) if pm else None
        model.to(device).eval()
        n0 = constant_len(model, T)
        where = scored_positions(L, T, n0, cfg['grid'])
        loss = np.full((len(run['starts']), T), np.nan)
        for i in range(0, len(run['starts']), B):
            seq = run['seqs'][i:i + B].to(device)
            loss[i:i + B, where] = nll(model, seq, where, n0, ctx, attend=attend)[0].numpy()
        ppl = {}
        for c in bucket_ends(L, T):
            cut = loss[:, :c] if n0 >= T else np.concatenate(
                [nll(model, run['seqs'][i:i + B].to(device), range(c), c, ctx, attend=attend)[0].numpy()
                 for i in range(0, len(run['starts']), B)])
            ppl[str(c)] = math.exp(float(np.mean(cut)))
        ent = entropy_at(model, run['seqs'][:cfg['entropy_windows'], :T].to(device), where, n0,
                         cfg['entropy_chunk'], ctx, mapped_logits(model, pm) if pm else None)
        ret = retrieval_scores(model, run['buckets'], run['examples'], cfg['retrieval_len'], cfg['retrieval_cue'],
                               n0, ctx, device, B, attend) if run['examples'] else []
        per_run.append(dict(loss=loss, ppl=ppl, ent=ent, ret=ret, model=model))
    loss = np.mean([p['loss'] for p in per_run], axis=0)
    scored = np.isfinite(loss).all(axis=0)  # the positions this arm was scored at (all windows alike)
    curve = np.full(T, np.nan)
    curve[scored] = loss[:, scored].mean(axis=0)
    return summarize_arm(arm, per_run, L, T), curve, per_run[0]['ent']


def summarize_arm(arm, per_run, L, T):
    """One arm's summary.json entry; several seeds are averaged (mean, and sd across seeds)."""
    ends = bucket_ends(L, T)
    loss = np.mean([p['loss'] for p in per_run], axis=0)  # [windows, T], seeds averaged per window
    buckets, cis, per_window = {}, {}, {}
    for lo, hi in zip([0] + ends, ends):
        w = np.nanmean(loss[:, lo:hi], axis=1)
        label = f"{lo}-{hi}"
        buckets[label], cis[label] = mean_ci(w)
        per_window[label] = w
    model = per_run[0]['model']
    sc = arm['scaling']
    out = dict(name=arm['name'], checkpoint=arm['checkpoint'], kind=arm['kind'], train_len=arm['L'],
               seq_len=arm['seq_len'], finetune_steps=arm['steps'], pose=arm['pose'], rope_scaling=sc,
               rope_type=(sc or {}).get('rope_type', 'default') if model.config.pos_emb == 'rope' else None,
               factor=(sc or {}).get('factor'), settings=scaling_extras(sc), pos_emb=model.config.pos_emb,
               position_map=arm.get('position_map'),
               head_dim=model.head_dim, rope_base=model.config.rope_base, dynamic=arm['dynamic'],
               buckets=buckets, buckets_ci=cis,
               ppl_at={c: float(np.mean([p['ppl'][c] for p in per_run])) for c in per_run[0]['ppl']},
               retrieval=per_run[0]['ret'] if len(per_run) == 1 else average_retrieval([p['ret'] for p in per_run]),
               entropy_buckets={f"{lo}-{hi}": float(np.nanmean(per_run[0]['ent'][lo:hi]))
                                for lo, hi in zip([0] + ([L // 2] if L >= 2 else []) + ends,
                                                  ([L // 2] if L >= 2 else []) + ends)})
    if len(per_run) > 1:
        out['seeds'] = arm['seeds']
        out['buckets_seed_sd'] = {k: float(np.std([np.nanmean(p['loss'][:, int(k.split('-')[0]):int(k.split('-')[1])])
                                                   for p in per_run], ddof=1)) for k in buckets}
    out['_per_window'] = per_window
    return out


# ----------------------------------------------------------------------------- writing


def csv_text(header, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator='\n')
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def per_position_csv(names, cols):
    """position,<arm>,...; an empty cell where a dynamic arm was not scored (off its grid)."""
    return csv_text(['position'] + names, [[p] + ['' if math.isnan(c[p]) else f"{c[p]:.6f}" for c in cols]
                                           for p in range(len(cols[0]))])


def write_outputs(cfg, run, results, pos_cols, ent_cols, timing, t0):
    """summary.json / .md and the CSVs, atomically, then the PNGs."""
    out_dir, arms = cfg['out_dir'], run['arms']
    s = dict(T=run['T'], L=run['L'], num_windows=len(run['starts']), seed=cfg['seed'], windows=run['starts'],
             window_docs=[next(t for t, a, b in run['docs'] if a <= w < b) for w in run['starts']],
             data_dir=os.path.abspath(run['data_dir']), dataset=run['meta']['dataset'],
             tokenizer=run['meta']['tokenizer'], vocab_size=run['meta']['vocab_size'],
             checkpoints=sorted({r['checkpoint'] for a in arms for r in a['runs']}),
             base=run['base']['checkpoint'] if run['base'] else None, rope_types=cfg['rope_types'],
             position_map=cfg['position_map'] or None,
             factor=cfg['factor'] or None, finetune_lengths=sorted({a['seq_len'] for a in arms if a['kind'] == 'fine-tuned'}),
             device=run['device'], dtype=run['dtype'], batch_size=cfg['batch_size'], torch=torch.__version__,
             protocol=PROTOCOL, grid=cfg['grid'], vs_best=paired_vs_best(results),
             training_mix={a['name']: {k: v for k, v in (a['ckpt'].get('config') or {}).items() if k.startswith('copy_')}
                           for a in arms},
             entropy=dict(windows=cfg['entropy_windows'], chunk=cfg['entropy_chunk']),
             retrieval=dict(examples=cfg['retrieval_examples'], len=cfg['retrieval_len'], cue=cfg['retrieval_cue'],
                            pos=cfg['retrieval_pos'], windows=run['ret_starts'], buckets=[b[0] for b in run['buckets']]),
             plot=dict(log_x=cfg['log_x'], smooth=cfg['smooth']), arm_seconds=timing)
    for r in results:  # each window's bucket mean (seeds averaged), so the paired differences can be recomputed
        r['per_window'] = {k: [round(float(x), 6) for x in v] for k, v in r.pop('_per_window').items()}
    summary = dict(settings=s, arms=results)
    import plot
    md = plot.summary_markdown(summary)
    names = [a['name'] for a in arms]
    ret_rows = [[a['name'], r['bucket'], r['distance_lo'], r['distance_hi'], r['n'], f"{r['exact_match']:.6f}",
                 f"{r['exact_match_ci'][0]:.6f}", f"{r['exact_match_ci'][1]:.6f}", f"{r['repeat_loss']:.6f}",
                 f"{r['control_loss']:.6f}", f"{r['gain']:.6f}", f"{r['gain_ci'][0]:.6f}", f"{r['gain_ci'][1]:.6f}"]
                for a in results for r in a['retrieval']]
    ft_rows = [[a['name'], run.get('seed'), r['iter'], r.get('val_loss'), r.get('val_loss_beyond_L'), a['L'],
                a['seq_len']] for a in arms if a['kind'] == 'fine-tuned' and not a.get('position_map')
               for run in a['runs'] for r in run['log']]  # every seed's curve, read and checked by plan_arms
    files = {'position_loss.csv': per_position_csv(names, pos_cols), 'attention_entropy.csv': per_position_csv(names, ent_cols),
             'retrieval.csv': csv_text(['arm', 'bucket', 'distance_lo', 'distance_hi', 'n', 'exact_match', 'exact_match_lo',
                                        'exact_match_hi', 'repeat_loss', 'control_loss', 'gain', 'gain_lo',
                                        'gain_hi'], ret_rows),
             'summary.json': json.dumps(summary, indent=1, ensure_ascii=False) + '\n', 'summary.md': md}
    if ft_rows:
        files['finetune_curves.csv'] = csv_text(['arm', 'seed', 'iter', 'val_loss', 'val_loss_beyond_L', 'train_len',
                                                 'seq_len'],
                                                [[('' if v is None else v) for v in r] for r in ft_rows])
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


def validate(cfg):
    """Check every setting, arm, the data and the windows before anything runs; returns the run's inputs."""
    for key in ('num_windows', 'batch_size', 'entropy_chunk', 'retrieval_len', 'retrieval_cue', 'entropy_windows', 'grid'):
        if cfg[key] < 1:
            raise ConfigError(f"{key}={cfg[key]} must be a positive integer")
    for key in ('retrieval_pos', 'eval_len', 'smooth', 'retrieval_examples'):
        if cfg[key] < 0:
            raise ConfigError(f"{key}={cfg[key]} must be >= 0")
    if cfg['entropy_windows'] > cfg['num_windows']:
        raise ConfigError(f"entropy_windows={cfg['entropy_windows']} is more than num_windows={cfg['num_windows']}; "
                          f"it uses the first eval windows")
    if cfg['factor'] and not cfg['factor'] >= 1:
        raise ConfigError(f"factor={cfg['factor']} must be >= 1 (s = T/L of the zero-shot rope arms), or 0 for T/L")
    check_out_dir(cfg['out_dir'])
    arms, base, T = plan_arms(cfg)
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
    docs, val = meta['docs']['val'], load_split(data_dir, 'val', meta)
    room = sum((end - start) // (T + 1) for _, start, end in docs)
    if cfg['num_windows'] > room:
        raise ConfigError(f"num_windows={cfg['num_windows']} windows of {T + 1} tokens need more held-out text than "
                          f"{data_dir} has (its validation documents hold {room} such windows without overlap); "
                          f"lower --num_windows or --eval_len")
    K, cue, pos, R = cfg['retrieval_len'], cfg['retrieval_cue'], cfg['retrieval_pos'], cfg['retrieval_examples']
    L = base['L'] if base else max(a['L'] for a in arms)
    if R and (cue >= K or pos + 2 * K > L):
        raise ConfigError(f"passkey test: retrieval_cue={cue} must be < retrieval_len={K}, and retrieval_pos + "
                          f"2 x retrieval_len = {pos + 2 * K} must fit in L={L}; change them or set retrieval_examples=0")
    starts = doc_windows(docs, T + 1, cfg['num_windows'], cfg['seed'])
    ret_starts = doc_windows(docs, T + 1, R, cfg['seed'] + 1) if R else []
    buckets, examples = passkey_examples(val, ret_starts, bucket_ends(L, T), T, L, K, pos, vocab, meta['eot_token'],
                                         cfg['seed'])
    device = pick_device(cfg['device'])
    dtype, _ = autocast_context(device.split(':')[0], cfg['dtype'])
    seqs = torch.from_numpy(np.stack([np.asarray(val[s:s + T + 1], dtype=np.int64) for s in starts]))
    return dict(arms=arms, base=base, T=T, L=L, data_dir=data_dir, meta=meta, docs=docs, starts=starts, seqs=seqs,
                ret_starts=ret_starts, buckets=buckets, examples=examples, device=device, dtype=dtype)


def main(argv):
    cfg = get_config(argv, DEFAULTS)
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
