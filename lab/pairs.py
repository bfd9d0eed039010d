"""
Which rotary pairs each arm uses (issue 47): per layer, head and pair, how much of the attention logit each RoPE pair
carries inside the trained length L and past it, for any run and arm eval.py takes. q and k split into d/2 pairs
(rotate-half layout, as rope.apply_rope: pair i is (x[i], x[i + d/2])); the logit of query m and key n is

    q(m).k(n) / sqrt(d) = sum_i c_i(m, n) / sqrt(d),    c_i(m, n) = Re[q_i(m) conj(k_i(n)) e^{i(m-n) theta_i}]
                                                                  = q[i] k[i] + q[i+d/2] k[i+d/2]  (q, k rotated),

and |c_i| <= |q_i(m)| |k_i(n)|, since a rotation keeps norms. Per bucket of queries (inside: m < L; past: L <= m < T),
for every layer, head and pair, each a mean over the bucket's queries of a mean over the keys each query sees:

  norm        |q_i(m)| |k_i(n)|, keys weighted alike (the layer's own mask: causal, its window): what pair i could carry
  used        sum_n p(m, n) |c_i(m, n)|, keys weighted by the attention p: what it moves in the logits the model uses
  signed      sum_n p(m, n) c_i(m, n): its signed part of the attention-weighted logit (sum over pairs: that x sqrt(d))
  norm_share, used_share: norm and used divided by their sum over pairs (each row sums to 1)

Only the pairs that turn are counted: under a partial rotation (GPT-NeoX's rotary_pct) the first rotary_dim / 2 pairs;
the share of |q_i||k_i| and of the attention-weighted |c_i| that the pass-through pairs carry is each arm's
'pass_through' (inside and past L).

A zero-shot scaling changes no weight, so layer 0's norm stays as it was (YaRN's attention factor multiplies cos and
sin, so there every norm is times mscale^2); what it changes is what the rotation does with them: used and signed.
The layer's row (head 'all') averages the heads' norm, used and signed first, then takes shares; the model's (the
JSON's 'pairs') averages the layers' too. The critical pair (rope.critical_dimension over the rotary dims, b and L) is
the first pair whose wavelength 2 pi / theta_i exceeds L: pairs below it turned at least once in training.

    python -m lab.pairs --ckpt=out/char-base-copy --rope_types=default,linear,ntk,yarn:beta_fast=8,abf:new_base=1e6
    python -m lab.pairs --ckpt=out/char-ft --eval_len=1024 --out_dir=out/pairs-ft  # fine-tunes (seeds averaged)
    python -m lab.pairs --ckpt=gguf:smollm2 --rope_types=default,yarn --eval_len=12288 --num_windows=1 --queries=64
    python -m lab.pairs --plot_only=True --out_dir=out/pairs  # pair_usage.png again from pair_usage.json

Arms are eval.py's (lab.measure.arms.plan_arms), except the position maps (they rotate q and k again inside
attention), the crop and the temperatures (they reshape the softmax around q.k). The windows are held-out windows of
the run's data picked as eval.py picks them (data.common.doc_windows). Each arm runs one forward of T tokens per window
(a dynamic type at s = T/L, the YaRN paper's Table 1 form), q and k read through the model's attend seam; every query
is measured, or --queries evenly spaced ones per bucket (the cost is O(queries x T x d) per head and layer instead of
O(T^2 x d): for a long T, a real model's). Writes pair_usage.csv (every layer, head, pair and bucket), pair_usage.json
(the settings, each arm's fields, per layer and over the model) and pair_usage.png (lab/pictures/pair_plots.py, drawn
from the JSON), each atomically.
"""
import os
import time
from contextlib import nullcontext

import numpy as np
import torch

from configurator import ConfigError, get_config
from data.common import atomic_write_text, data_dir_of, doc_windows, load_meta, load_split
from lab.attention import attention_probs, sink_of, sink_rows
from lab.engine.checks import check_eval_data, check_out_dir, check_ranges
from lab.engine.cli import cli
from lab.engine.device import autocast_context, pick_device
from lab.measure.arm_specs import scaling_extras
from lab.measure.arms import arm_model, expand_ckpts, plan_arms
from lab.model_facts import describe
from lab.pictures.pair_plots import draw_pairs
from lab.verdicts.summary_json import csv_text, json_text
from rope import critical_dimension

DEFAULTS = dict(
    ckpt='',            # runs, comma-separated: run folders (a base, fine-tunes), gguf:smollm2 or <file>, hf:<folder>
    base='',            # the model --rope_types switches a scaling on; '' = the first --ckpt that is not a fine-tune
    rope_types='',      # zero-shot arms, as eval.py takes them: default,linear,ntk,yarn:beta_fast=8,abf:new_base=1e6
    factor=0.0,         # their scale s; 0 = T/L (dynamic types: 1, the scale then follows the length)
    eval_len=0,         # T, the window length; 0 = 4 x L
    num_windows=4,      # held-out windows of T tokens
    seed=1337,          # picks the windows
    split='val',        # 'val': the held-out text
    dataset='',         # '' = the runs' dataset
    batch_size=1,       # windows per forward
    queries=0,          # query positions per bucket, evenly spaced (0: every one); a long T: the cost is O(queries x T)
    out_dir='out/pairs',
    device='auto', dtype='auto',
    plot=True,          # draw pair_usage.png after measuring
    plot_only=False,    # only redraw pair_usage.png from out_dir's pair_usage.json
)
FILES = ('pair_usage.csv', 'pair_usage.json', 'pair_usage.png')
BUCKETS = ('inside', 'past')  # queries at m < L, and at L <= m < T
RAW = ('norm', 'used', 'signed')  # what pair_totals sums; the shares follow from norm and used
MEASURES = ('norm', 'norm_share', 'used', 'used_share', 'signed')
ELEMENTS = 2 ** 24  # the largest (windows x heads x queries x keys x pairs) tensor a chunk of queries builds


def pair_norms(x):
    """|x_i| of each rotary pair of x [..., d] (rotate-half: pair i is (x[i], x[i + d/2])) -> [..., d/2]."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.sqrt(x1 * x1 + x2 * x2)


def pair_contributions(q, k):
    """c_i(m, n) = q[m, i] k[n, i] + q[m, i + d/2] k[n, i + d/2] of rotated q [..., Q, d], k [..., K, d]: pair i's
    part of q(m).k(n) (the sum over pairs is the dot product) -> [..., Q, K, d/2]."""
    (q1, q2), (k1, k2) = q.chunk(2, dim=-1), k.chunk(2, dim=-1)
    return q1[..., :, None, :] * k1[..., None, :, :] + q2[..., :, None, :] * k2[..., None, :, :]


def query_chunks(T, L, queries, step):
    """[(s, e)]: runs of consecutive query positions, each at most step long, over every position below T, or over
    `queries` evenly spaced ones in each bucket (0..L-1 and L..T-1: the ends always in)."""
    picked = range(T) if not queries else sorted({int(round(x)) for lo, hi in ((0, L), (L, T))
                                                  for x in np.linspace(lo, hi - 1, min(queries, hi - lo))})
    out = []
    for m in picked:
        if out and out[-1][1] == m and m - out[-1][0] < step:
            out[-1][1] = m + 1
        else:
            out.append([m, m + 1])
    return out


@torch.no_grad()
def pair_totals(model, x, L, ctx=None, queries=0):
    """One forward of the windows x (B, T), q and k read at every layer's attend seam (each layer then runs its own
    attention); every query, or `queries` evenly spaced ones per bucket (query_chunks). -> (sums over the windows and
    over each bucket's queries of the per-query norm, used and signed (RAW, see the module docstring): float64
    [3, n_layer, n_head, 2 buckets, d/2]; the queries summed, per bucket)."""
    T, c, P = x.size(1), model.config, model.head_dim // 2
    totals = torch.zeros(len(RAW), c.n_layer, c.n_head, len(BUCKETS), P, dtype=torch.float64)
    spans = ((0, min(L, T)), (min(L, T), T))
    step = max(1, ELEMENTS // (x.size(0) * c.n_head * T * P))  # queries per chunk: memory O(chunk x T x P)
    chunks = query_chunks(T, min(L, T), queries, step)

    def attend(layer, q, k, v):
        attn, sink = model.transformer.h[layer].attn, sink_of(model, layer)
        qf, kf = q.float(), k.float()
        qn, kn = pair_norms(qf), pair_norms(kf)
        for s, e in chunks:
            att = attn.logits(q, k, s, e)  # the layer's own scores: its mask (causal, window) and its class
            p, seen = attention_probs(att, sink_rows(sink, s, e)), torch.isfinite(att).float()
            cont = pair_contributions(qf[:, :, s:e], kf[:, :, :e])
            got = torch.stack((qn[:, :, s:e] * (seen @ kn[:, :, :e]) / seen.sum(-1, keepdim=True),
                               (p[..., None] * cont.abs()).sum(-2), (p[..., None] * cont).sum(-2)))
            for b, (lo, hi) in enumerate(spans):
                a, z = max(s, lo), min(e, hi)
                if a < z:
                    totals[:, layer, :, b] += got[:, :, :, a - s:z - s].sum(dim=(1, 3)).double().cpu()
        return attn.attend(q, k, v)
    with ctx or nullcontext():
        model(x, attend=attend)
    counts = [sum(max(0, min(e, hi) - max(s, lo)) for s, e in chunks) for lo, hi in spans]
    return totals.numpy(), np.array(counts) * x.size(0)


def shares(x):
    """x [..., pairs] divided by its sum over pairs."""
    return x / x.sum(-1, keepdims=True)


def pair_table(totals, counts):
    """pair_totals' sums (summed over batches and seeds) -> {measure: [n_layer, n_head + 1, 2 buckets, d/2]} of means
    (MEASURES; head index n_head is 'all': the heads' norm, used and signed averaged, then the shares)."""
    norm, used, signed = (np.concatenate((m, m.mean(axis=1, keepdims=True)), axis=1)
                          for m in totals / counts[:, None])
    return dict(norm=norm, norm_share=shares(norm), used=used, used_share=shares(used), signed=signed)


def model_pairs(table):
    """Over the whole model (every layer's head 'all' averaged, then the shares): {bucket: {measure: [d/2]}}."""
    norm, used, signed = (table[m][:, -1].mean(axis=0) for m in RAW)
    got = dict(norm=norm, norm_share=shares(norm), used=used, used_share=shares(used), signed=signed)
    return {b: {m: got[m][i].tolist() for m in MEASURES} for i, b in enumerate(BUCKETS)}


# ----------------------------------------------------------------------------- the arms, the windows, the files

def plan(cfg):
    """The arms (eval.py's, checked), L, T and the windows: one line naming the problem before any model runs."""
    check_ranges(cfg, positive=('num_windows', 'batch_size'), nonneg=('eval_len', 'factor', 'queries'))
    if cfg['factor'] and not cfg['factor'] >= 1:
        raise ConfigError(f"factor={cfg['factor']} must be >= 1 (s of the --rope_types arms), or 0 for T/L")
    if cfg['split'] not in ('val', 'train'):
        raise ConfigError(f"split={cfg['split']!r} must be 'val' (the held-out text) or 'train'")
    check_out_dir(cfg['out_dir'])
    paths = expand_ckpts([p for p in cfg['ckpt'].split(',') if p]) + ([cfg['base']] if cfg['base'] else [])
    if not paths:
        raise ConfigError("no run to measure; pass --ckpt=<run folder> (or gguf:smollm2), and zero-shot arms with "
                          "--rope_types=default,linear,yarn:beta_fast=8,...")
    facts = [describe(p) for p in paths]  # (a GGUF's metadata only: the weights load once, below)
    for f in facts:
        f.need_rope(f"lab.pairs --ckpt={f.source}")
    L = max(f.L for f in facts)
    T = cfg['eval_len'] or 4 * L
    if T <= L:
        raise ConfigError(f"eval_len={T} is not above the trained length L={L}, so no query is past L; pass "
                          f"--eval_len > {L} (0: 4 x L = {4 * L})")
    arms, base, _ = plan_arms(dict(cfg, eval_len=T))
    for a in arms:
        what = 'a position map' if a.get('position_map') else 'the crop' if a.get('crop') else \
            'a temperature' if a.get('temperature') else None
        if what:
            raise ConfigError(f"arm {a['name']!r} is {what}: lab.pairs reads each pair off q.k of the q and k the "
                              f"model rotated (a map rotates them again inside attention, a crop or temperature "
                              f"reshapes the softmax), so it takes rope types and fine-tunes only; drop the arm")
    first = (arms or [base])[0]
    data_dir = data_dir_of(cfg['dataset'] or (first['ckpt'].get('dataset') or {}).get('dataset', ''))
    meta = load_meta(data_dir)
    docs, data = meta['docs'][cfg['split']], load_split(data_dir, cfg['split'], meta)
    check_eval_data(dict(cfg, smooth=0), first, meta, data_dir, docs, T)  # the vocabulary, room for the windows
    starts = doc_windows(docs, T + 1, cfg['num_windows'], cfg['seed'])  # eval.py's picker (T + 1: its targets)
    seqs = torch.from_numpy(np.stack([np.asarray(data[s:s + T], dtype=np.int64) for s in starts]))
    return dict(arms=arms, L=L, T=T, starts=[int(s) for s in starts], seqs=seqs, data_dir=data_dir, meta=meta)


def arm_fields(arm, model, T):
    """What the JSON says of an arm: its identity's fields as eval.py's summary.json names them (so the picture
    styles it as every picture does), its frequencies at T (the first RoPE group's) and the critical pair."""
    sc, cfg = arm['scaling'], model.config
    theta, factor = model.rope_freqs(T) if model.rope_groups else (None, None)
    P = model.rotary_dim // 2  # the pairs that turn (a partial rotation's others pass through: 'pass_through')
    return dict(name=arm['name'], id=arm['id'], checkpoint=arm['checkpoint'], kind=arm['kind'], train_len=arm['L'],
                seq_len=arm['seq_len'], finetune_steps=arm['steps'], pose=arm['pose'], seeds=arm['seeds'],
                rope_scaling=sc, rope_type=(sc or {}).get('rope_type', 'default'), factor=(sc or {}).get('factor'),
                settings=scaling_extras(sc), pos_emb=cfg.pos_emb, position_map=None, layers=cfg.layers,
                head_dim=model.head_dim, rotary_dim=model.rotary_dim, rope_base=cfg.rope_base, n_layer=cfg.n_layer,
                n_head=cfg.n_head,
                rope_layers=[g is not None for g in model.rope_index],
                theta=None if theta is None else theta[:P].double().cpu().tolist(), attention_factor=factor,
                critical_pair=min(P, max(0, critical_dimension(model.rotary_dim, cfg.rope_base, arm['L'])[0] // 2)))


def measure_arm(arm, run, cfg, device, ctx):
    """Every run (seed) of an arm over the windows: (pair_table, the arm's JSON entry: its fields, 'layers' ({bucket:
    {measure: [layer][pair]}}, head 'all') and 'pairs' (over the model: {bucket: {measure: [pair]}}))."""
    totals, counts = 0, 0
    for r in arm['runs']:
        model = arm_model(arm, r['ckpt']).to(device).eval()
        for i in range(0, len(run['seqs']), cfg['batch_size']):
            t, n = pair_totals(model, run['seqs'][i:i + cfg['batch_size']].to(device), arm['L'], ctx, cfg['queries'])
            totals, counts = totals + t, counts + n
    R, whole = model.rotary_dim // 2, model_pairs(pair_table(totals, counts))  # the turning pairs; every pair
    table = pair_table(totals[..., :R], counts)
    layers = {b: {m: table[m][:, -1, i].tolist() for m in MEASURES} for i, b in enumerate(BUCKETS)}
    passing = {b: {m: 1 - sum(whole[b][m + '_share'][:R]) for m in ('norm', 'used')} for b in BUCKETS}
    return table, dict(arm_fields(arm, model, run['T']), layers=layers, pairs=model_pairs(table), pass_through=passing)


def pairs_csv(results):
    """arm,layer,head,pair,bucket and the MEASURES: one row per arm, layer, head (and 'all'), pair and bucket."""
    rows = []
    for table, a in results:
        n_layer, n_head = table['norm'].shape[:2]
        for layer in range(n_layer):
            for h in range(n_head):
                for b, bucket in enumerate(BUCKETS):
                    for i in range(table['norm'].shape[-1]):
                        rows.append([a['name'], layer, 'all' if h == n_head - 1 else h, i, bucket] +
                                    [f"{table[m][layer, h, b, i]:.6g}" for m in MEASURES])
    return csv_text(['arm', 'layer', 'head', 'pair', 'bucket', *MEASURES], rows)


def pairs_json(results, run, cfg, argv):
    """The JSON's object: the settings and each arm's entry (measure_arm)."""
    settings = dict(T=run['T'], L=run['L'], num_windows=len(run['starts']), windows=run['starts'], seed=cfg['seed'],
                    queries=cfg['queries'] or 'all',
                    split=cfg['split'], dataset=run['meta']['dataset'], buckets=dict(inside=[0, run['L']],
                                                                                      past=[run['L'], run['T']]),
                    layout='rotate-half: pair i is (x[i], x[i + d/2])', measures=list(MEASURES), command=list(argv))
    return dict(settings=settings, arms=[a for _, a in results])


def headline(a):
    """One line for an arm: the shares of the pairs that turn within L, inside L and past it."""
    k, inside, past = a['critical_pair'], a['pairs']['inside'], a['pairs']['past']
    pct = lambda x: f"{100 * sum(x[:k]):.0f}%"  # noqa: E731
    return (f"{a['name']}: pairs 0-{k - 1} (a full turn within L={a['train_len']}) carry "
            f"{pct(inside['norm_share'])} of |q_i||k_i| and {pct(inside['used_share'])} of the attention-weighted "
            f"|c_i| inside L; "
            f"{pct(past['norm_share'])} and {pct(past['used_share'])} past L" if k else
            f"{a['name']}: no pair turns within L={a['train_len']}")


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    json_path, png_path = (os.path.join(cfg['out_dir'], f) for f in FILES[1:])
    if cfg['plot_only']:
        print(f"wrote {draw_pairs(json_path, png_path)}")
        return 0
    device = pick_device(cfg['device'])
    _, ctx = autocast_context(device.split(':')[0], cfg['dtype'])
    t0, run = time.time(), plan(cfg)
    results = []
    for arm in run['arms']:
        t = time.time()
        results.append(measure_arm(arm, run, cfg, device, ctx))
        print(f"{headline(results[-1][1])} ({time.time() - t:.1f}s)", flush=True)
    out = pairs_json(results, run, cfg, argv)
    atomic_write_text(os.path.join(cfg['out_dir'], FILES[0]), pairs_csv(results))
    atomic_write_text(json_path, json_text(out))
    if cfg['plot']:
        draw_pairs(json_path, png_path)
    elif os.path.exists(png_path):  # an earlier run's picture would show other numbers
        os.remove(png_path)
    print(f"pairs: {len(run['arms'])} arms x {len(run['starts'])} windows x {run['T']} tokens in "
          f"{time.time() - t0:.1f}s; wrote {', '.join(FILES if cfg['plot'] else FILES[:2])} to {cfg['out_dir']}")
    return 0


if __name__ == '__main__':
    cli(main)
