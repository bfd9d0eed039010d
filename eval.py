"""
Measure how models predict tokens past their training length L, then draw the pictures (plot.py).

    python eval.py --ckpt out/char-base out/finetune --rope_types=linear,ntk,dynamic,yarn,yarn:beta_fast=8
    python eval.py --ckpt=out/char-base,out/finetune --eval_len=1024 --num_windows=32 --out_dir=out/eval
    python eval.py --plot_only --out_dir=out/eval --log_x=True        # redraw the PNGs from the CSV/JSON

Arms. Every --ckpt run folder is an arm (a folder holding arms.json, made by a multi-arm finetune_long.py,
stands for all of its arms); several folders go space-separated after a bare --ckpt (up to the next --option;
put config files before it), or comma-separated in --ckpt=a,b. Every --rope_types entry is a zero-shot arm: that RoPE scaling switched on in the base model
(--base, else the first --ckpt that is not a fine-tune, else the base a fine-tune names), with factor
s = T/L unless the entry sets one (yarn:factor=8:beta_fast=8; dynamic types default to factor 1, i.e.
s = l/L). 'default' is the base model as trained. L always comes from the checkpoint's lineage.

Measurement. The same num_windows windows of T+1 tokens (seeded, each inside one held-out document)
for every arm; per-position NLL in nats, float32 on CPU (autocast on CUDA). Dynamic types (dynamic,
dynamic_yarn, longrope) depend on the forward length, so they are scored as they would run: positions
[l_{k-1}, l_k) come from a forward of length l_k, l_k = L, 2L, 4L, ..., T.

Outputs in out_dir: position_loss.csv, attention_entropy.csv, retrieval.csv, finetune_curves.csv (when
arms have fine-tune logs), summary.json (every setting + per-arm buckets, ppl_at, retrieval, entropy),
summary.md (printed), and the PNGs of plot.py. Everything is validated before anything is written, and
every file is written atomically.
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

from configurator import ConfigError, autocast_context, cli, get_config, pick_device
from data.common import atomic_write_text, data_dir_of, doc_windows, fetch_windows, load_meta, load_split
from model import load_checkpoint, model_from_checkpoint
from rope import DYNAMIC_TYPES, is_dynamic, parse_arms, scaling_name

DEFAULTS = dict(
    ckpt='',                # run folders, comma-separated (or space-separated after a bare --ckpt)
    base='',                # base run for the zero-shot arms; '' = the first --ckpt that is not a fine-tune
    rope_types='',          # zero-shot arms: default,linear,ntk,dynamic,yarn,yarn:beta_fast=8,ntk:factor=8,...
    factor=0.0,             # zero-shot scale s; 0 = T/L (dynamic types: 1, the scale then follows l/L)
    eval_len=0,             # T; 0 = max(4 x the longest fine-tune length, 8 x L)
    num_windows=32,         # held-out windows of T tokens, the same for every arm
    seed=1337,              # picks the windows and the passkey strings
    dataset='',             # '' = the checkpoints' dataset (a name under data/ or a folder)
    batch_size=8,
    entropy_windows=4,      # windows for the attention entropy (manual attention, chunked)
    entropy_chunk=256,      # query chunk of that path: memory O(chunk x T)
    retrieval_windows=8,    # passkey examples per distance bucket (0 = skip the test)
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


def parse_args(argv):
    """get_config, plus: values after a bare --ckpt are run folders, and a bare --flag of a boolean is --flag=True."""
    rest, ckpts, grab = [], [], False
    for a in argv:
        if a == '--ckpt':
            grab = True
        elif grab and not a.startswith('--'):
            ckpts += [p for p in a.split(',') if p]
        elif a.startswith('--ckpt='):
            grab, ckpts = False, ckpts + [p for p in a[len('--ckpt='):].split(',') if p]
        else:
            grab = False
            rest.append(a + '=True' if a.startswith('--') and isinstance(DEFAULTS.get(a[2:]), bool) else a)
    cfg = get_config(rest, DEFAULTS)
    if ckpts:
        cfg['ckpt'] = ','.join(ckpts)
    return cfg


# ----------------------------------------------------------------------------- arms

def lineage_of(ckpt):
    L = ckpt['model_args']['block_size']
    return dict(dict(train_len=L, seq_len=L, base_checkpoint=None, finetune_steps=0), **(ckpt.get('lineage') or {}))


def expand_ckpts(paths):
    """Run folders; a folder with arms.json (a multi-arm fine-tune) stands for its arms' sub-folders."""
    out = []
    for p in paths:
        aj = os.path.join(p, 'arms.json')
        if not os.path.isfile(aj):
            out.append(p)
            continue
        try:
            with open(aj, encoding='utf-8') as f:
                out += [os.path.join(p, os.path.basename(os.path.normpath(a['run_dir']))) for a in json.load(f)['arms']]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{aj} is unreadable ({e}); rerun finetune_long.py or pass the arm folders themselves")
    return out


def ckpt_arm(path, ckpt):
    lin, args = lineage_of(ckpt), ckpt['model_args']
    sc, tuned = args.get('rope_scaling'), bool(lin['base_checkpoint'])
    name = (f"{scaling_name(sc)} ft{lin['finetune_steps']}" if tuned else
            f"base (L={lin['train_len']})" if args['pos_emb'] == 'rope' else f"{args['pos_emb']} (L={lin['train_len']})")
    return dict(name=name, checkpoint=path, kind='fine-tuned' if tuned else 'base', ckpt=ckpt, scaling=sc,
                L=lin['train_len'], seq_len=lin['seq_len'], steps=lin['finetune_steps'] if tuned else 0)


def plan_arms(cfg):
    """Load and validate every arm: [(arm dict), ...], the base arm (or None), T."""
    paths = expand_ckpts([p for p in cfg['ckpt'].split(',') if p])
    if not paths and not cfg['base']:
        raise ConfigError("no checkpoint given; pass --ckpt <run folder> [<run folder> ...] (and --rope_types=...)")
    real = [os.path.realpath(p) for p in paths]
    dup = next((p for p, r in zip(paths, real) if real.count(r) > 1), None)
    if dup:
        raise ConfigError(f"checkpoint {dup} is given twice; list each run folder once")
    arms = [ckpt_arm(p, load_checkpoint(p)) for p in paths]
    for a in arms:  # two different runs with the same readable name: add the folder name
        if sum(b['name'] == a['name'] for b in arms) > 1:
            a['name'] += f" [{os.path.basename(os.path.normpath(a['checkpoint']))}]"
    base = None
    if cfg['base']:
        same = [a for a, r in zip(arms, real) if r == os.path.realpath(cfg['base'])]
        base = same[0] if same else ckpt_arm(cfg['base'], load_checkpoint(cfg['base']))
    else:
        base = next((a for a in arms if a['kind'] == 'base'), None)
        if base is None and cfg['rope_types']:
            named = lineage_of(arms[0]['ckpt'])['base_checkpoint']
            if not os.path.exists(named):
                raise ConfigError(f"--rope_types needs a base model: the fine-tunes name {named}, which does not exist "
                                  f"here; pass --base=<run folder of the base model>")
            base = ckpt_arm(named, load_checkpoint(named))
    # one dataset and one vocabulary for all
    def data_sig(a):
        ds = a['ckpt'].get('dataset') or {}
        return os.path.realpath(data_dir_of(ds.get('dataset') or '?')), a['ckpt']['model_args']['vocab_size']
    first = arms[0] if arms else base
    for a in arms + ([base] if base else []):
        if data_sig(a) != data_sig(first):
            (d1, v1), (d2, v2) = data_sig(first), data_sig(a)
            raise ConfigError(f"checkpoints from different data: {first['checkpoint']} (data {d1}, vocab {v1}) and "
                              f"{a['checkpoint']} (data {d2}, vocab {v2}); evaluate models of one dataset together")
    # the length T
    Ls = [a['L'] for a in arms + ([base] if base else [])]
    tuned = [a['seq_len'] for a in arms if a['kind'] == 'fine-tuned']
    T = cfg['eval_len'] or max([8 * max(Ls)] + [4 * t for t in tuned])
    for a in arms + ([base] if base else []):
        if T < a['L']:
            raise ConfigError(f"eval_len={T} is shorter than the training length L={a['L']} of {a['checkpoint']}; "
                              f"pass --eval_len >= {a['L']} (or 0 for the default)")
        if a['ckpt']['model_args']['pos_emb'] == 'learned' and T > a['ckpt']['model_args']['block_size']:
            raise ConfigError(f"{a['checkpoint']} has learned positions up to {a['ckpt']['model_args']['block_size']}; "
                              f"it cannot run at eval_len={T}; leave it out or lower --eval_len")
    # zero-shot arms on the base
    seen_default = False
    for entry in [e.strip() for e in cfg['rope_types'].split(',') if e.strip()]:
        rope_type = entry.split(':')[0]
        if rope_type not in ('default', 'plain', 'none') and base['ckpt']['model_args']['pos_emb'] != 'rope':
            raise ConfigError(f"the base {base['checkpoint']} has no RoPE; --rope_types needs a rope model")
        factor = cfg['factor'] or (1.0 if is_dynamic({'rope_type': rope_type}) else T / base['L'])
        (_, sc), = parse_arms(entry, factor, base['L'])
        if sc is None:
            if seen_default:
                raise ConfigError(f"arm {base['name']!r} is given twice in --rope_types; list it once")
            seen_default = True
            if all(a is not base for a in arms):
                arms.append(base)
            continue
        arms.append(dict(base, name=f"{scaling_name(sc)} zero-shot", kind='zero-shot', scaling=sc, steps=0))
    names = [a['name'] for a in arms]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ConfigError(f"arm {dup!r} is given twice; give each arm different settings")
    for a in arms:
        a['dynamic'] = is_dynamic(a['scaling'])
    return arms, base, T


# ----------------------------------------------------------------------------- measuring

def bucket_ends(L, T):
    """L, 2L, 4L, ... below T, then T: the ends of the position buckets and the context cuts of ppl_at."""
    ends, e = [], L
    while e < T:
        ends.append(e)
        e *= 2
    return ends + [T]


@torch.no_grad()
def score(model, x, y, L, dynamic, ctx, hits=False):
    """Per-token NLL (B, T) on CPU, and (hits=True) whether the argmax is the target. A dynamic model scores
    positions [l_{k-1}, l_k) with a forward of length l_k (l_k = L, 2L, ..., T), as it would run."""
    T = x.size(1)
    loss, hit, lo = torch.empty(x.shape), torch.zeros(x.shape, dtype=torch.bool), 0
    for e in bucket_ends(L, T) if dynamic else [T]:
        with ctx:
            logits, l = model(x[:, :e], y[:, :e], reduction='none')
        loss[:, lo:e] = l[:, lo:e].float().cpu()
        if hits:
            hit[:, lo:e] = (logits[:, lo:e].argmax(-1) == y[:, lo:e]).cpu()
        lo = e
    return loss, hit


def passkey_examples(val, starts, T, L, K, cue, pos, vocab_size, eot, seed):
    """The passkey test: in each held-out window a random string of K tokens (never eot) at pos, then the same
    string again at pos + d. Distances d come in buckets [0, L), [L, 2L), ... (at least K, at most T-pos-K),
    one d per window and bucket. Returns buckets [(label, lo, hi, length run)] and examples
    [dict(bucket, distance, first, repeat, key, seq)], seq = T+1 tokens (input seq[:-1], targets seq[1:])."""
    rng = np.random.default_rng(seed)
    tokens = np.array([t for t in range(vocab_size) if t != eot])
    buckets, examples, lo = [], [], 0
    for hi in bucket_ends(L, T):
        a, b = max(lo, K), min(hi, T - pos - K + 1)
        if a < b:
            for s in starts:
                d, key = int(rng.integers(a, b)), rng.choice(tokens, K)
                seq = np.array(val[s:s + T + 1], dtype=np.int64)
                seq[pos:pos + K], seq[pos + d:pos + d + K] = key, key
                examples.append(dict(bucket=len(buckets), distance=d, first=pos, repeat=pos + d, key=key, seq=seq))
            buckets.append((f"{lo}-{hi}", a, b, pos + b - 1 + K))
        lo = hi
    return buckets, examples


def retrieval_scores(model, buckets, examples, K, cue, L, dynamic, ctx, batch_size, device):
    """Per distance bucket: mean loss on the repeat's tokens after the cue, the same on the first copy, the
    in-context gain (first - repeat), and exact match (greedy: argmax right at every scored position given the
    true prefix, i.e. greedy decoding from the cue reproduces the string)."""
    out = []
    for b, (label, lo, hi, n) in enumerate(buckets):
        group = [e for e in examples if e['bucket'] == b]
        rep, first, exact = [], [], []
        for i in range(0, len(group), batch_size):
            chunk = group[i:i + batch_size]
            seq = torch.from_numpy(np.stack([e['seq'][:n + 1] for e in chunk])).to(device)
            loss, hit = score(model, seq[:, :-1], seq[:, 1:], L, dynamic, ctx, hits=True)
            for j, e in enumerate(chunk):  # token k of a copy at r is the target at r + k - 1
                r, f = slice(e['repeat'] + cue - 1, e['repeat'] + K - 1), slice(e['first'] + cue - 1, e['first'] + K - 1)
                rep.append(loss[j, r].mean().item())
                first.append(loss[j, f].mean().item())
                exact.append(float(hit[j, r].all()))
        out.append(dict(bucket=label, distance_lo=lo, distance_hi=hi - 1, n=len(group), repeat_loss=float(np.mean(rep)),
                        first_loss=float(np.mean(first)), gain=float(np.mean(first) - np.mean(rep)),
                        exact_match=float(np.mean(exact))))
    return out


def finetune_log(arm):
    """The fine-tune's eval rows: the run folder's log.jsonl, else the rows stored in the checkpoint."""
    path = os.path.join(arm['checkpoint'], 'log.jsonl')
    if os.path.isfile(path):
        with open(path, encoding='utf-8') as f:
            return [json.loads(line) for line in f if line.strip()]
    return list(arm['ckpt'].get('log') or [])


# ----------------------------------------------------------------------------- writing

def csv_text(header, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator='\n')
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def per_position_csv(names, cols):
    return csv_text(['position'] + names, [[p] + [f"{c[p]:.6f}" for c in cols] for p in range(len(cols[0]))])


def summary_markdown(summary):
    s, arms = summary['settings'], summary['arms']
    lines = [f"# Loss by position: {s['dataset']}, {s['num_windows']} windows of T={s['T']} tokens, L={s['L']}", '',
             f"Windows: seed {s['seed']}, inside held-out documents, the same for every arm. {s['scoring']}", '',
             'Mean loss (nats) per position bucket:', '']
    cols = list(arms[0]['buckets'])
    lines += ['| arm | ' + ' | '.join(cols) + ' |', '|---' * (len(cols) + 1) + '|']
    lines += [f"| {a['name']} | " + ' | '.join(f"{a['buckets'][c]:.3f}" for c in cols) + ' |' for a in arms]
    cuts = list(arms[0]['ppl_at'])
    lines += ['', 'Perplexity with the context cut to n tokens:', '', '| arm | ' + ' | '.join(cuts) + ' |',
              '|---' * (len(cuts) + 1) + '|']
    lines += [f"| {a['name']} | " + ' | '.join(f"{a['ppl_at'][c]:.3f}" for c in cuts) + ' |' for a in arms]
    if arms[0].get('retrieval'):
        cols = [r['bucket'] for r in arms[0]['retrieval']]
        lines += ['', f"Passkey ({s['retrieval']['len']} tokens, cue {s['retrieval']['cue']}): in-context gain "
                  f"(first-copy loss - repeat loss, nats) / exact match, by distance:", '',
                  '| arm | ' + ' | '.join(cols) + ' |', '|---' * (len(cols) + 1) + '|']
        lines += [f"| {a['name']} | " + ' | '.join(f"{r['gain']:+.2f} / {100 * r['exact_match']:.0f}%"
                                                  for r in a['retrieval']) + ' |' for a in arms]
    cols = list(arms[0]['entropy_buckets'])
    lines += ['', 'Mean attention entropy (nats) by query position:', '', '| arm | ' + ' | '.join(cols) + ' |',
              '|---' * (len(cols) + 1) + '|']
    lines += [f"| {a['name']} | " + ' | '.join(f"{a['entropy_buckets'][c]:.2f}" for c in cols) + ' |' for a in arms]
    return '\n'.join(lines) + '\n'


# ----------------------------------------------------------------------------- main

def main(argv):
    cfg = parse_args(argv)
    out_dir = cfg['out_dir']
    if cfg['plot_only']:
        import plot
        for p in plot.plot_all(out_dir, log_x=cfg['log_x'], smooth=cfg['smooth']):
            print(f"wrote {p}")
        return
    t0 = time.time()
    for key in ('num_windows', 'batch_size', 'entropy_chunk', 'retrieval_len', 'retrieval_cue', 'entropy_windows'):
        if cfg[key] < 1:
            raise ConfigError(f"{key}={cfg[key]} must be a positive integer")
    for key in ('retrieval_pos', 'eval_len', 'smooth', 'retrieval_windows'):
        if cfg[key] < 0:
            raise ConfigError(f"{key}={cfg[key]} must be >= 0")
    for key in ('entropy_windows', 'retrieval_windows'):
        if cfg[key] > cfg['num_windows']:
            raise ConfigError(f"{key}={cfg[key]} is more than num_windows={cfg['num_windows']}; these use the eval windows")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConfigError(f"out_dir={out_dir} is a file; pass a folder")
    arms, base, T = plan_arms(cfg)
    ds = arms[0]['ckpt'].get('dataset') or {}
    data_dir = data_dir_of(cfg['dataset'] or ds.get('dataset', ''))
    meta = load_meta(data_dir)
    vocab = arms[0]['ckpt']['model_args']['vocab_size']
    if meta['vocab_size'] != vocab:
        raise ConfigError(f"{data_dir} has a vocabulary of {meta['vocab_size']} but the models have {vocab}; "
                          f"evaluate on the dataset they were trained on")
    docs = meta['docs']['val']  # load_meta has checked the document boundaries are there
    val = load_split(data_dir, 'val', meta)
    room = sum((end - start) // (T + 1) for _, start, end in docs)
    if cfg['num_windows'] > room:
        raise ConfigError(f"num_windows={cfg['num_windows']} windows of {T + 1} tokens need more held-out text than "
                          f"{data_dir} has (its validation documents hold {room} such windows without overlap); "
                          f"lower --num_windows or --eval_len")
    K, cue, pos, R = cfg['retrieval_len'], cfg['retrieval_cue'], cfg['retrieval_pos'], cfg['retrieval_windows']
    if R and (cue >= K or pos + 2 * K > T):
        raise ConfigError(f"passkey test: retrieval_cue={cue} must be < retrieval_len={K}, and retrieval_pos + "
                          f"2 x retrieval_len = {pos + 2 * K} must fit in eval_len={T}; change them or set retrieval_windows=0")
    starts = doc_windows(docs, T + 1, cfg['num_windows'], cfg['seed'])
    device = pick_device(cfg['device'])
    dtype, ctx = autocast_context(device.split(':')[0], cfg['dtype'])
    L = base['L'] if base else max(a['L'] for a in arms)

    # measure (nothing is written until every arm is done)
    X, Y = fetch_windows(val, starts, T, 'cpu')
    buckets, examples = passkey_examples(val, starts[:R], T, L, K, cue, pos, vocab, meta['eot_token'], cfg['seed'])
    B = cfg['batch_size']
    loss_cols, ent_cols, results, ret_rows, ft_rows, timing = [], [], [], [], [], {}
    bar = tqdm(total=len(arms), unit='arm', disable=not cfg['progress'], dynamic_ncols=True)
    for arm in arms:
        bar.set_description(arm['name'])
        t = time.time()
        model = model_from_checkpoint(arm['ckpt'])
        if arm['kind'] == 'zero-shot':
            model.set_rope_scaling(arm['scaling'])
        model.to(device).eval()
        loss = torch.cat([score(model, X[i:i + B].to(device), Y[i:i + B].to(device), arm['L'], arm['dynamic'], ctx)[0]
                          for i in range(0, len(starts), B)])
        pos_loss = loss.mean(0).double()
        with ctx:  # dynamic arms: one forward of length T (seq_len = T)
            ent = model.attention_entropy(X[:cfg['entropy_windows']].to(device), cfg['entropy_chunk'])
        ent = ent.float().mean(dim=(0, 1, 2)).cpu().double()
        ret = retrieval_scores(model, buckets, examples, K, cue, arm['L'], arm['dynamic'], ctx, B, device) if R else []
        ends = bucket_ends(L, T)
        ent_ends = ([L // 2] if L >= 2 else []) + ends
        results.append(dict(
            name=arm['name'], checkpoint=arm['checkpoint'], kind=arm['kind'], train_len=arm['L'],
            rope_scaling=arm['scaling'], finetune_steps=arm['steps'],
            buckets={f"{lo}-{hi}": pos_loss[lo:hi].mean().item() for lo, hi in zip([0] + ends, ends)},
            ppl_at={str(c): math.exp(pos_loss[:c].mean().item()) for c in ends},
            seq_len=arm['seq_len'], pos_emb=model.config.pos_emb, head_dim=model.head_dim,
            rope_base=model.config.rope_base, dynamic=arm['dynamic'], retrieval=ret,
            entropy_buckets={f"{lo}-{hi}": ent[lo:hi].mean().item() for lo, hi in zip([0] + ent_ends, ent_ends)}))
        loss_cols.append(pos_loss.tolist())
        ent_cols.append(ent.tolist())
        ret_rows += [[arm['name'], r['bucket'], r['distance_lo'], r['distance_hi'], r['n'], f"{r['repeat_loss']:.6f}",
                      f"{r['first_loss']:.6f}", f"{r['gain']:.6f}", f"{r['exact_match']:.6f}"] for r in ret]
        if arm['kind'] == 'fine-tuned':
            ft_rows += [[arm['name'], r['iter'], r.get('val_loss'), r.get('val_loss_beyond_L'), arm['L'], arm['seq_len']]
                        for r in finetune_log(arm)]
        timing[arm['name']] = round(time.time() - t, 2)
        bar.update(1)
        del model
    bar.close()

    names = [a['name'] for a in arms]
    settings = dict(
        T=T, L=L, num_windows=len(starts), seed=cfg['seed'], windows=[int(s) for s in starts],
        window_docs=[next(t for t, a, b in docs if a <= s < b) for s in starts],
        data_dir=os.path.abspath(data_dir), dataset=meta['dataset'], tokenizer=meta['tokenizer'], vocab_size=vocab,
        checkpoints=sorted({a['checkpoint'] for a in arms}), base=base['checkpoint'] if base else None,
        rope_types=cfg['rope_types'], factor=cfg['factor'] or None,
        finetune_lengths=sorted({a['seq_len'] for a in arms if a['kind'] == 'fine-tuned'}),
        device=device, dtype=dtype, batch_size=B, torch=torch.__version__,
        scoring="Per-position NLL (nats) of the next token, mean over the windows. Dynamic arms "
                f"({', '.join(DYNAMIC_TYPES)}) are scored by length buckets: positions [l_{{k-1}}, l_k) by a forward "
                "of length l_k, l_k = L, 2L, 4L, ..., T. ppl_at[n] = exp(mean loss over positions < n).",
        entropy=dict(windows=cfg['entropy_windows'], chunk=cfg['entropy_chunk'],
                     note="mean over layers, heads and the first windows, per query position; dynamic arms in one "
                          "forward of length T (seq_len = T)"),
        retrieval=dict(windows=R, len=K, cue=cue, pos=pos, buckets=[b[0] for b in buckets],
                       note="a random string of len tokens at pos, repeated at distance d (start to start, drawn per "
                            "bucket); scored on its tokens after the cue; gain = first-copy loss - repeat loss; exact "
                            "match = greedy reproduces every scored token"),
        plot=dict(log_x=cfg['log_x'], smooth=cfg['smooth']), arm_seconds=timing)
    summary = dict(settings=settings, arms=results)
    md = summary_markdown(summary)
    files = {'position_loss.csv': per_position_csv(names, loss_cols),
             'attention_entropy.csv': per_position_csv(names, ent_cols),
             'retrieval.csv': csv_text(['arm', 'bucket', 'distance_lo', 'distance_hi', 'n', 'repeat_loss', 'first_loss',
                                        'gain', 'exact_match'], ret_rows),
             'summary.json': json.dumps(summary, indent=1, ensure_ascii=False) + '\n', 'summary.md': md}
    if ft_rows:
        files['finetune_curves.csv'] = csv_text(['arm', 'iter', 'val_loss', 'val_loss_beyond_L', 'train_len', 'seq_len'],
                                                [[('' if v is None else v) for v in r] for r in ft_rows])
    os.makedirs(out_dir, exist_ok=True)
    for name, text in files.items():
        atomic_write_text(os.path.join(out_dir, name), text)
    for stale in ('finetune_curves.csv', 'finetune_curves.png'):  # from an earlier run with fine-tuned arms
        if 'finetune_curves.csv' not in files and os.path.exists(os.path.join(out_dir, stale)):
            os.remove(os.path.join(out_dir, stale))
    import plot
    pngs = plot.plot_all(out_dir, log_x=cfg['log_x'], smooth=cfg['smooth'])
    print(md)
    print(f"eval: {len(arms)} arms x {len(starts)} windows x {T} tokens in {time.time() - t0:.1f}s; wrote "
          f"{', '.join(sorted(files) + [os.path.basename(p) for p in pngs])} to {out_dir}")
    return summary


if __name__ == '__main__':
    cli(main)
