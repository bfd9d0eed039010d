"""
What eval.py writes, apart from the measuring: an arm's summary.json entry (bucket means with 95% intervals over
windows and seeds, exact where every position was scored and the stratified design estimate otherwise, and the
per-seed per-window values the paired tests read), the JSON / CSV text of its files, and --combine: the same eval on
several base models, its contrasts over the bases.
"""
import csv
import io
import json
import math
import os
import platform
import re
import subprocess
import time
import warnings

import numpy as np
import torch

from configurator import ConfigError
from lab.engine.checks import check_out_dir
from data.common import atomic_write_text, read_json
from lab.verdicts.compare import stamp_gates, across_bases, between_kinds, compare, first_difference, vs_best, vs_reference, vs_self
from lab.verdicts.summary_md import SINK_EPS, bases_markdown, summary_markdown
from lab.measure.outcomes import summarize_retrieval
from lab.measure.scoring import bucket_ends
from lab.measure.temperature_law import law_summary
from lab.measure.arm_specs import scaling_extras
from lab.stats import seeds_mean_ci


def position_parts(model, runs):
    """The learned position parts of an arm's model as each seed's checkpoint holds them, the record of how far they
    moved: {name: [values per seed]} for learned frequencies' alpha (one per pair) and what a room lists in its
    position_params (the log-position scale and bias, one per head, per layer); None without any."""
    return {n: [[round(x, 5) for x in r['ckpt']['model'][n].flatten().tolist()] for r in runs]
            for n in model.position_parts()} or None


def bucket_windows(losses, mask, lo, hi):
    """Per seed and window, a bucket's mean loss: over every position when all were scored ('exact'), and over the
    design's sampled positions ('design'; every arm has those). losses [S, W, T], mask [W, T]. -> (exact or None,
    design), each [S, W]."""
    part, m = losses[:, :, lo:hi], mask[:, lo:hi]
    design = np.stack([[row[mm].mean() for row, mm in zip(seed, m)] for seed in part])
    return (part.mean(-1) if np.isfinite(part).all() else None), design


def first_token_buckets(per_run, L, ends):
    """The sink strength: the mean attention weight (layers, heads, entropy windows, seeds) the queries of each bucket
    put on the first token; None where the arm's form does not measure it (the truncated crop)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        first = np.nanmean(np.stack([p['sink'] for p in per_run]), axis=0)
        got = {f"{lo}-{hi}": float(np.nanmean(first[lo:hi])) for lo, hi in zip([0] + ends, ends)}
    return {k: (None if math.isnan(v) else round(v, 6)) for k, v in got.items()}


def sink_head_buckets(per_run, L, ends):
    """Sinks counted per head: for each bucket, every layer's and head's mean weight on the first token over the
    bucket's measured queries (entropy windows and seeds averaged), how many heads pass SINK_EPS and the largest
    weight. {bucket: dict(heads=k, of=n_layer * n_head, max=w, weights=[[layer][head]]) or None where the arm's form
    does not measure it (the truncated crop)}."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)
        w = np.nanmean(np.stack([p['sink_heads'] for p in per_run]), axis=0)  # [n_layer, n_head, T]
        out = {}
        for lo, hi in zip([0] + ends, ends):
            b = np.nanmean(w[..., lo:hi], axis=-1)
            out[f"{lo}-{hi}"] = None if np.isnan(b).any() else dict(
                heads=int((b > SINK_EPS).sum()), of=int(b.size), max=round(float(b.max()), 6),
                weights=b.round(4).tolist())
    return out


def entropy_sampled(ent, moving_from):
    """{'entropy_positions': n}: how many positions past moving_from the entropy diagnostic scored (its grid, one
    forward each), for an arm whose scale moves; {} for the rest (every position scored). Recorded per arm, so that
    parts merged with another --grid still say how each arm was sampled."""
    return {} if moving_from >= len(ent) else {'entropy_positions': int(np.isfinite(ent[moving_from:]).sum())}


def summarize_arm(arm, per_run, run, ent):
    """One arm's summary.json entry. Bucket means are exact (every position) where the arm was scored everywhere,
    else the design estimate (stratified sampled positions); the 95% interval carries windows and seeds
    (lab.stats.seeds_mean_ci). per_window / per_window_design keep [seed][window] values for paired tests."""
    L, T = run['L'], run['T']
    ends = bucket_ends(L, T)
    losses = np.stack([p['loss'] for p in per_run])
    buckets, cis, exact, design, how = {}, {}, {}, {}, {}
    for lo, hi in zip([0] + ends, ends):
        label = f"{lo}-{hi}"
        ex, de = bucket_windows(losses, run['mask'], lo, hi)
        buckets[label], cis[label] = seeds_mean_ci(ex if ex is not None else de)
        how[label] = 'exact' if ex is not None else 'sampled'
        exact[label] = None if ex is None else ex.round(6).tolist()
        design[label] = de.round(6).tolist()
    model = per_run[0]['model']
    sc = arm['scaling']
    half = [L // 2] if L >= 2 else []
    out = dict(name=arm['name'], id=arm['id'], checkpoint=arm['checkpoint'], kind=arm['kind'], train_len=arm['L'],
               seq_len=arm['seq_len'], finetune_steps=arm['steps'], pose=arm['pose'], rope_scaling=sc,
               rope_type=(sc or {}).get('rope_type', 'default') if model.config.pos_emb == 'rope' else None,
               factor=(sc or {}).get('factor'), settings=scaling_extras(sc), pos_emb=model.config.pos_emb,
               position_map=arm.get('position_map'), crop=arm.get('crop'), self_crop_of=arm.get('self_crop_of'),
               temperature=arm.get('temperature'), layers=arm['runs'][0]['ckpt']['model_args'].get('layers'),
               seeds=arm['seeds'],
               head_dim=model.head_dim, rotary_dim=model.rotary_dim, rope_base=model.config.rope_base,
               position_parts=position_parts(model, arm['runs']),
               dynamic=arm['dynamic'],
               scoring=dict(constant_runs=per_run[0]['runs'], moving_from=per_run[0]['moving_from'], buckets=how,
                            **entropy_sampled(ent, per_run[0]['moving_from'])),
               buckets=buckets, buckets_ci=cis,
               ppl_at={c: float(np.mean([p['ppl'][c] for p in per_run])) for c in per_run[0]['ppl']},
               retrieval=summarize_retrieval([p['ret'] for p in per_run]) if per_run[0]['ret'] else [],
               entropy_buckets={f"{lo}-{hi}": float(np.nanmean(ent[lo:hi]))
                                for lo, hi in zip([0] + half + ends, half + ends)},
               first_token_buckets=first_token_buckets(per_run, L, ends),
               sink_heads=sink_head_buckets(per_run, L, ends),
               per_window=exact, per_window_design=design,
               **{n: summarize_retrieval([p['rooms'][n] for p in per_run]) for n in run['rooms']})
    law = law_summary([p.get('law') for p in per_run], L, T)
    if law:  # --temperature_law: beta_c per bucket and the fitted law (lab/measure/temperature_law.py)
        out['temperature_law'] = law
    if len(per_run) > 1:
        out['buckets_seed_sd'] = {k: float(np.std(np.mean(v if exact[k] is None else exact[k], axis=1), ddof=1))
                                  for k, v in design.items()}
    return out


def csv_text(header, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator='\n')
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def rounded(obj, digits=7):
    """obj with every float rounded to `digits` significant digits (JSON size, not precision: losses are ~1e-6)."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    return [rounded(v, digits) for v in obj] if isinstance(obj, (list, tuple)) else obj


def json_text(obj):
    """Indented JSON, floats to 7 significant digits, innermost lists (per-window and per-example values) on one
    line each."""
    text = json.dumps(rounded(obj), indent=1, ensure_ascii=False)
    flat = lambda m: '[' + ', '.join(x.strip() for x in m.group(1).split(',')) + ']'  # noqa: E731
    return re.sub(r'\[\s*\n\s*((?:-?[0-9][0-9.e+-]*|true|false|null)(?:,\s*(?:-?[0-9][0-9.e+-]*|true|false|null))*)\s*\]',
                  flat, text) + '\n'


def per_position_csv(names, cols):
    """position,<arm>,...; an empty cell where a dynamic arm was not scored (off its grid)."""
    return csv_text(['position'] + names, [[p] + ['' if math.isnan(c[p]) else f"{c[p]:.6f}" for c in cols]
                                           for p in range(len(cols[0]))])


def retrieval_csv(results):
    """retrieval.csv: the passkey test per arm and distance bucket (exact match and gain, with their intervals)."""
    rows = [[a['name'], r['bucket'], r['distance_lo'], r['distance_hi'], r['n'], f"{r['exact_match']:.6f}",
             f"{r['exact_match_ci'][0]:.6f}", f"{r['exact_match_ci'][1]:.6f}", f"{r['repeat_loss']:.6f}",
             f"{r['control_loss']:.6f}", f"{r['gain']:.6f}", f"{r['gain_ci'][0]:.6f}", f"{r['gain_ci'][1]:.6f}"]
            for a in results for r in a['retrieval']]
    return csv_text(['arm', 'bucket', 'distance_lo', 'distance_hi', 'n', 'exact_match', 'exact_match_lo',
                     'exact_match_hi', 'repeat_loss', 'control_loss', 'gain', 'gain_lo', 'gain_hi'], rows)


def finetune_csv(arms):
    """finetune_curves.csv: every seed's evaluation rows of every fine-tuned arm (not its mapped or retuned copies);
    None when no arm was fine-tuned."""
    rows = [[a['name'], run.get('seed'), r['iter'], r.get('val_loss'), r.get('val_loss_beyond_L'), a['L'], a['seq_len']]
            for a in arms if a['kind'] == 'fine-tuned' and not a.get('position_map') and not a.get('retuned')
            and not a.get('temperature')
            for run in a['runs'] for r in run['log']]
    return csv_text(['arm', 'seed', 'iter', 'val_loss', 'val_loss_beyond_L', 'train_len', 'seq_len'],
                    [[('' if v is None else v) for v in r] for r in rows]) if rows else None


def comparisons(results, pairs, margins):
    """summary.json's paired comparisons: every arm against each column's best, the named contrasts (pairs), every
    arm against each crop control and against its own crops (--self_crop)."""
    return dict(vs_best=vs_best(results, margins), contrasts=compare(results, pairs, margins) if pairs else None,
                vs_crop={a['name']: vs_reference(results, a['name'], margins) for a in results
                         if a.get('crop') and not a.get('self_crop_of')},
                vs_self=vs_self(results, margins))


def summary_settings(cfg, run, results, margins, protocol, timing):
    """summary.json's settings: the data, windows, design and protocol of the run, every paired comparison (vs the best
    of each column, the named contrasts, vs each crop), the rooms' settings and the time each arm took."""
    arms = run['arms']
    return dict(T=run['T'], L=run['L'], num_windows=len(run['starts']), seed=cfg['seed'], split=cfg['split'],
             windows=run['starts'],
             window_docs=[next(t for t, a, b in run['docs'] if a <= w < b) for w in run['starts']],
             data_dir=portable(run['data_dir']), dataset=run['meta']['dataset'],
             tokenizer=run['meta']['tokenizer'], vocab_size=run['meta']['vocab_size'],
             checkpoints=sorted({r['checkpoint'] for a in arms for r in a['runs']}),
             base=run['base']['checkpoint'] if run['base'] else None, rope_types=cfg['rope_types'],
             position_map=cfg['position_map'] or None, temperature=cfg['temperature'] or None,
             factor=cfg['factor'] or None, finetune_lengths=sorted({a['seq_len'] for a in arms if a['kind'] == 'fine-tuned'}),
             device=run['device'], dtype=run['dtype'], batch_size=cfg['batch_size'], workers=run.get('workers', 1),
             torch=torch.__version__,
             protocol=protocol, samples=cfg['samples'], moving_examples=cfg['moving_examples'], grid=cfg['grid'],
             design=run['design'],
             margins=margins, **comparisons(results, run['contrasts'], margins),
             training_mix={a['name']: {k: v for k, v in (a['ckpt'].get('config') or {}).items() if k.startswith('copy_')}
                           for a in arms},
             entropy=dict(windows=cfg['entropy_windows'], chunk=cfg['entropy_chunk']),
             retrieval=dict(examples=cfg['retrieval_examples'], len=cfg['retrieval_len'], cue=cfg['retrieval_cue'],
                            pos=cfg['retrieval_pos'], windows=run['ret_starts'], buckets=[b[0] for b in run['buckets']]),
             **{n: r['settings'] for n, r in run['rooms'].items()}, rooms_skipped=run['rooms_skipped'] or None,
             plot=dict(log_x=cfg['log_x'], smooth=cfg['smooth']), arm_seconds=timing,
             **({'excluded': cfg['exclude']} if cfg.get('exclude') else {}),  # a test split: the dev eval it avoids
             provenance=provenance(run.get('argv')))


def portable(path):
    """A data folder as a committed file may name it: relative to the repository when inside it, else its name alone
    (no absolute path of the machine that ran it)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rel = os.path.relpath(os.path.abspath(path), root)
    return os.path.basename(os.path.normpath(path)) if rel.startswith('..') else rel


def provenance(argv):
    """Where a summary came from (issue 31's record behind each claim): the command, the commit and whether tracked
    files differed from it, the date, torch, Python and the machine."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def git(*args):
        try:
            out = subprocess.run(['git', '-C', root, *args], capture_output=True, text=True, timeout=20)
            return out.stdout.strip() if out.returncode == 0 else None
        except (OSError, subprocess.SubprocessError):
            return None
    cpu = next((ln.split(':', 1)[1].strip() for ln in _lines('/proc/cpuinfo') if ln.startswith('model name')), None)
    return dict(command=None if argv is None else ' '.join(['python eval.py', *argv]), commit=git('rev-parse', 'HEAD'),
                changed=git('status', '--porcelain', '--untracked-files=no') not in (None, ''),
                date=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), torch=torch.__version__,
                python=platform.python_version(), machine=f"{platform.system()} {platform.machine()}, "
                                                          f"{os.cpu_count()} cores" + (f", {cpu}" if cpu else ''))


def _lines(path):
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            return f.read().splitlines()
    except OSError:
        return []


def read_summary(folder, missing):
    """folder/summary.json as eval.py writes it (settings and arms), else ConfigError naming the file."""
    path = os.path.join(folder, 'summary.json')
    s = read_json(path, missing)
    if not (isinstance(s, dict) and isinstance(s.get('settings'), dict) and isinstance(s.get('arms'), list)
            and all(isinstance(a, dict) and isinstance(a.get('name'), str) for a in s['arms'])):
        raise ConfigError(f"{path} is not an eval summary (a settings object and a list of named arms); pass the "
                          f"folder eval.py wrote it to")
    return s


def rejudge(folder, out_dir, margins):
    """--rejudge: the comparisons of an eval's summary.json recomputed with this version's statistics from the
    per-window and per-example values it stores (no model runs): every arm against each column's best, the named
    contrasts it holds (the same pairs) and every arm against each crop, each row's gate stored on it
    (compare.stamp_gates); summary.json (settings.rejudged says from where) and summary.md written to out_dir. The arms' own means and intervals are kept as stored."""
    check_out_dir(out_dir)
    s = read_summary(folder, f"rejudge reads an eval folder's summary.json; {folder} has none")
    st, results = s['settings'], s['arms']
    pairs = [(r['a'], r['b']) for r in next(iter(next(iter((st.get('contrasts') or {}).values()), {}).values()), [])]
    try:
        st.update(margins=margins, **comparisons(results, pairs, margins),
                  rejudged=dict(source=folder, statistics='lab.verdicts.stats: Newcombe intervals for 0/1 outcomes'))
    except (KeyError, TypeError) as e:
        raise ConfigError(f"{folder}/summary.json lacks the per-window or per-example values a comparison needs "
                          f"({e!r}); it is older than the paired tests: evaluate again instead") from None
    stamp_gates(s)
    md = summary_markdown(s)
    os.makedirs(out_dir, exist_ok=True)
    atomic_write_text(os.path.join(out_dir, 'summary.json'), json_text(s))
    atomic_write_text(os.path.join(out_dir, 'summary.md'), md)
    print(f"eval: {len(results)} arms of {folder} judged again; wrote summary.json, summary.md to {out_dir}")
    return s


def combine_bases(folders, out_dir, margins, minus=''):
    """--combine: each folder's summary.json (the same eval, on another base model) -> the named contrasts and every
    arm against the crop, bases as a paired random factor (lab.verdicts.compare.across_bases), in out_dir/bases.json and
    .md. --combine_minus (minus): the same evals on bases of another kind, one per folder in order; the same tables for
    them and each contrast's difference between the two kinds, the pairs a random factor (compare.between_kinds)."""
    dirs, sums, bases = read_bases(folders, 'combine')
    check_out_dir(out_dir)
    out = dict(folders=dirs, bases=bases, margins=margins, comparisons=tabled(across_bases, folders, sums, margins))
    if minus:
        other = read_bases(minus, 'combine_minus')
        if len(other[0]) != len(dirs):
            raise ConfigError(f"combine_minus={minus!r} names {len(other[0])} eval folder(s) for combine's {len(dirs)}; "
                              f"give one per combine folder, in the same order (its pair: the same seed, say)")
        both = next((b for b in other[2] if b in bases), None)
        if both:
            raise ConfigError(f"{both} is in both combine and combine_minus; each kind of base has its own evals")
        check_same_windows(dirs[:1] + other[0], sums[:1] + other[1])
        out['minus'] = dict(folders=other[0], bases=other[2],
                            comparisons=tabled(across_bases, minus, other[1], margins))
        out['between'] = tabled(between_kinds, f"{folders} and {minus}", sums, other[1], margins)
    md = bases_markdown(out)
    os.makedirs(out_dir, exist_ok=True)
    atomic_write_text(os.path.join(out_dir, 'bases.json'), json_text(out))
    atomic_write_text(os.path.join(out_dir, 'bases.md'), md)
    print(md)
    print(f"eval: {len(dirs)} bases combined{' with ' + str(len(dirs)) + ' of another kind' if minus else ''}; "
          f"wrote bases.json, bases.md to {out_dir}")
    return out


def read_bases(folders, flag):
    """--combine's (or --combine_minus's) folders -> (dirs, summaries, base checkpoints): two or more evals of the
    same windows on different base models, each with its base arm; ConfigError naming the folder otherwise."""
    dirs = [d.strip() for d in folders.split(',') if d.strip()]
    if len(dirs) < 2:
        raise ConfigError(f"{flag}={folders!r} names {len(dirs)} eval folder(s); give two or more, "
                          f"comma-separated, each holding a summary.json from eval.py")
    if len(set(dirs)) < len(dirs):
        raise ConfigError(f"{flag}={folders!r} names a folder twice; give each base's eval once")
    sums = [read_summary(d, f"run eval.py with --out_dir={d} first") for d in dirs]
    bases = [next((a['checkpoint'] for a in s['arms'] if a.get('kind') == 'base'), None) for s in sums]
    for d, b in zip(dirs, bases):
        if b is None:
            raise ConfigError(f"{d}/summary.json has no base arm ('default' in --rope_types, or a --ckpt base); "
                              f"--{flag} compares base models: evaluate each with its base")
    twice = next((b for i, b in enumerate(bases) if b in bases[:i]), None)
    if twice:
        raise ConfigError(f"two of {folders!r} evaluated the same base {twice}; combine evals of different base models")
    check_same_windows(dirs, sums)
    return dirs, sums, bases


def check_same_windows(dirs, sums):
    for d, s in zip(dirs[1:], sums[1:]):
        key = first_difference(s, sums[0], ('T', 'L', 'windows', 'seed', 'split'))
        if key:
            raise ConfigError(f"{d} was evaluated with another {key} than {dirs[0]}; combine evals of the same "
                              f"settings (windows, T, seed) on different base models")


def tabled(fn, folders, *args):
    """fn(*args), its missing per-unit values as one ConfigError naming the folders."""
    try:
        return fn(*args)
    except (KeyError, TypeError) as e:
        raise ConfigError(f"the summaries of {folders!r} lack the per-window or per-example values a comparison needs "
                          f"({e!r}); evaluate them again with this version") from None
