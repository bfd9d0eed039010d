"""
A study sized to decide, for a real model (issue 58): one window per document, a passkey planted in every window and
scored in the same forward, and a family of contrasts declared in the config before anything runs.

    python -m lab.doc_study config/real_model_cpu.py              # make real-model
    python -m lab.doc_study config/real_model_cpu.py --plot_only=True

The unit is the window: each comes from its own document (a play), drawn once with the seed, so windows vary
independently; positions inside one window only sharpen its mean and are never the unit of a test. Every window of
T tokens is the document's text with two things planted (the natural-language passkey of the literature, Mohtashami &
Jaggi 2023): the key sentence ' The pass key is 48213. Remember it. 48213 is the pass key.' at a distance drawn in
[key_lo, key_hi] tokens before the window's last sentence, ' What is the pass key? The pass key is 48213'. One
forward scores it all, as the model generates: the loss columns read the text's tokens only (the planted ones left
out), and the key's digits are scored teacher-forced: greedy exact match holds iff every digit is the argmax given
the digits before it, and the digits' summed loss is a continuous paired outcome. A few shorter rows (control_len
tokens, the key control_lo..control_hi back: inside L) run the first arm alone, the passkey's positive control: a
model that cannot find a key inside L says nothing about finding one past it.

The family: `family` lists 'A | B | kind | column' rows (kind loss, digits (the summed loss) or exact); each row is
a paired test over the windows (paired t; exact: McNemar with Newcombe's interval), Holm across the whole family,
one of better / worse / equivalent (inside the row's margin) / unresolved. Only static arms (one forward of T): a
moving scale (Dynamic NTK) needs a forward per position, and eval.py samples it.

Each (arm, window) is saved as it finishes (out_dir/parts/, or parts_dir: a second study of the same windows with more
arms and its own family reads the first's and measures only what it adds), so a stopped run resumes; the files
(windows.csv, per_window.csv, position_loss.csv, summary.json, summary.md) are written atomically at the end, then the
pictures (lab/pictures/doc_study_plots.py) from them.
"""
import json
import os
import time
import warnings

import numpy as np
import torch

from configurator import ConfigError, get_config
from data.common import DataError, atomic_write, atomic_write_text, data_dir_of, load_meta, load_split
from lab.engine.cli import cli
from lab.engine.device import autocast_context, pick_device
from lab.measure import passkey_text
from lab.measure.arms import ARM_DEFAULTS, arm_model, parse_contrasts, plan_arms
from lab.measure.forms import arm_form
from lab.measure.scoring import score, scoring_plan
from lab.verdicts.family import field, judge
from lab.stats import mean_ci
from lab.verdicts.summary_json import provenance
from rope_config import is_dynamic

DEFAULTS = dict(
    base='gguf:smollm2',    # the model (a run folder, gguf:<name>, hf:<folder>)
    ckpt='',                # fine-tuned runs of it as arms too (finetune_long.py folders, comma-separated)
    rope_types='default',   # the arms, as eval.py's --rope_types (static ones only)
    dataset='',             # '' = the base's dataset
    eval_len=12288,         # T
    windows=12,             # one per document, drawn with the seed among those that hold T + 1 tokens
    seed=1337,
    key_lo=9000, key_hi=11500,        # the key sentence's distance before the question (tokens)
    control_rows=4, control_len=7168, control_lo=5000, control_hi=6500,  # the first arm's passkey inside L
    columns='0-8192,8192-12288,10240-12288',  # the loss columns (token positions lo-hi)
    family='',              # 'A | B | kind | column; ...': the pre-declared contrasts (kind: loss, digits, exact)
    margin_loss=0.02,       # equivalence margin of a loss difference (nats per token)
    margin_digits=0.5,      # of the five digits' summed loss (nats)
    margin_exact=0.10,      # of exact match (fraction)
    bin=64,                 # position_loss.csv's bins (tokens)
    out_dir='out/real-model',
    parts_dir='',           # where each (arm, window) is kept; '' = out_dir/parts (a second study of the same windows
                            # names the first's, and runs only the arms it adds)
    device='auto', dtype='auto', progress=True,
    plot=True, plot_only=False,
)
KINDS = ('loss', 'digits', 'exact')


# ----------------------------------------------------------------------------- the windows


def study_windows(docs, T, n, seed):
    """n documents with at least T + 1 tokens, drawn without replacement with the seed, and a start in each uniform
    over what fits: [(title, start)], in draw order. DataError when fewer documents are long enough."""
    long = [d for d in docs if d[2] - d[1] >= T + 1]
    if len(long) < n:
        raise DataError(f"{n} windows of {T} tokens, one per document, need {n} documents of at least {T + 1} tokens; "
                        f"the data has {len(long)}: ask for fewer (--windows) or shorter ones (--eval_len)")
    rng = np.random.default_rng([seed, 58])
    picked = rng.choice(len(long), size=n, replace=False)
    return [(long[i][0], int(long[i][1] + rng.integers(0, long[i][2] - long[i][1] - T))) for i in picked]


def plant(text, meta, key, distance, T):
    """A row of T + 1 tokens: text (at least T + 1 tokens of one document) with the key sentence planted `distance`
    tokens before the question, the question and the answer at the end. Returns (row, text_mask (T,) True where the
    target of position p is a text token, answer positions (the positions p whose targets are the key's digits))."""
    p = passkey_text.parts(meta)
    sentence, lead, answer = passkey_text.key_tokens(meta, key)
    tail = np.concatenate([p['question'], lead, answer])
    q = T + 1 - len(tail)  # the question's first token
    at = q - distance      # the key sentence's first token
    if at < 1:
        raise ValueError(f"a key {distance} tokens before the question does not fit in {T} tokens")
    body = text[:q - len(sentence)]
    row = np.concatenate([body[:at], sentence, body[at:], tail])
    kind = np.concatenate([np.zeros(at), np.ones(len(sentence)), np.zeros(q - len(sentence) - at),
                           np.ones(len(tail))])  # 1 = planted
    assert len(row) == T + 1
    text_mask = kind[1:] == 0  # the target of position p is row[p + 1]
    answer_at = np.arange(T + 1 - len(answer), T + 1) - 1
    return row.astype(np.int64), text_mask, answer_at


def build_rows(cfg, meta, tokens, docs, T):
    """The study's rows and the control rows, each a dict(title, start, key, distance, row, text_mask, answer_at)."""
    rng = np.random.default_rng([cfg['seed'], 59])
    drawn = study_windows(docs, T, cfg['windows'] + cfg['control_rows'], cfg['seed'])
    out = []
    for i, (title, start) in enumerate(drawn):
        control = i >= cfg['windows']
        n, lo, hi = (cfg['control_len'], cfg['control_lo'], cfg['control_hi']) if control else \
            (T, cfg['key_lo'], cfg['key_hi'])
        key = str(int(rng.integers(10 ** (passkey_text.DIGITS - 1), 10 ** passkey_text.DIGITS)))
        distance = int(rng.integers(lo, hi + 1))
        try:
            row, mask, ans = plant(np.asarray(tokens[start:start + n + 1], dtype=np.int64), meta, key, distance, n)
        except ValueError as e:
            which = 'control_hi < control_len' if control else 'key_hi < eval_len'
            raise ConfigError(f"{e}: set {which}, leaving room for the key sentence and the question") from None
        out.append(dict(title=title, start=start, key=key, distance=distance, control=control, row=row,
                        text_mask=mask, answer_at=ans))
    return out


# ----------------------------------------------------------------------------- measuring


def part_path(cfg, arm, i):
    slug = ''.join(c if c.isalnum() or c in '.=-' else '_' for c in arm['name'])
    return os.path.join(cfg['parts_dir'] or os.path.join(cfg['out_dir'], 'parts'), slug, f"{i:02d}.npz")


def measure(model, arm, row, ctx):
    """One forward of the row through the arm's form: per-position loss and argmax hit (numpy, T)."""
    T = len(row['row']) - 1
    plan = scoring_plan(model, T, 0)
    if len(plan[0]) > 1:
        raise ConfigError(f"arm {arm['name']!r} changes its tables with the length (a moving or two-table scale); "
                          f"this study runs static arms in one forward: measure it with eval.py")
    form = arm_form(model, arm, plan, ctx, 1)
    if form.truncated:
        raise ConfigError(f"arm {arm['name']!r}: the truncated crop is a forward per position; use "
                          f"crop:form=sliding:sink=4 here")
    rows = torch.from_numpy(row['row'])[None]
    loss, hit = score(model, rows, [list(range(T))], plan, ctx, 1, form.attend)
    return loss[0].astype(np.float32), hit[0]


def run_arms(cfg, arms, rows, device, ctx):
    """Every (arm, row) once, each saved as it finishes and skipped when its file is there; returns the seconds
    each arm's new forwards took."""
    from tqdm import tqdm
    timing, prov = {}, provenance(None)
    made_by = (prov['commit'] or 'unknown')[:12] + (' with uncommitted changes' if prov['changed'] else '')
    for a, arm in enumerate(arms):
        todo = [i for i, r in enumerate(rows) if (a == 0 or not r['control'])
                and not os.path.exists(part_path(cfg, arm, i))]
        if not todo:
            continue
        model = arm_model(arm, arm['runs'][0]['ckpt']).to(device).eval()
        t0 = time.time()
        for i in tqdm(todo, desc=arm['name'], disable=not cfg['progress']):
            t1 = time.time()
            loss, hit = measure(model, arm, rows[i], ctx)
            seconds = round(time.time() - t1, 1)
            path = part_path(cfg, arm, i)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write(path, lambda f: np.savez(f, loss=loss, hit=hit, key=rows[i]['key'],
                                                   start=rows[i]['start'], made_by=made_by, seconds=seconds))
        timing[arm['name']] = round(time.time() - t0, 1)
        del model
    return timing


def load_part(cfg, arm, i, row):
    """(loss, hit) of one (arm, window), checked against the window it must be."""
    return read_part(cfg, arm, i, row)[:2]


def read_part(cfg, arm, i, row):
    """(loss, hit, the commit that measured it, its forward's seconds; 'not recorded' and None for the first
    studies' parts, whose times are in their committed run logs)."""
    with np.load(part_path(cfg, arm, i)) as z:
        if str(z['key']) != row['key'] or int(z['start']) != row['start']:
            raise ConfigError(f"{part_path(cfg, arm, i)} was measured on another window (settings changed since); "
                              f"delete {os.path.dirname(os.path.dirname(part_path(cfg, arm, i)))} and run again")
        return (z['loss'], z['hit'], str(z['made_by']) if 'made_by' in z.files else 'not recorded',
                float(z['seconds']) if 'seconds' in z.files else None)


# ----------------------------------------------------------------------------- outcomes and the family


def parse_columns(spec, T):
    cols = []
    for c in [c.strip() for c in spec.split(',') if c.strip()]:
        try:
            lo, hi = (int(x) for x in c.split('-'))
        except ValueError:
            raise ConfigError(f"column {c!r} must be 'lo-hi' token positions, like 8192-12288") from None
        if not 0 <= lo < hi <= T:
            raise ConfigError(f"column {c!r} must lie in 0-{T} with lo < hi")
        cols.append((c, lo, hi))
    return cols


def outcomes(loss, hit, row, cols):
    """A window's outcomes: each loss column's mean over its text positions, the digits' summed loss, exact match."""
    out = {f"loss {c}": float(loss[lo:hi][row['text_mask'][lo:hi]].mean()) for c, lo, hi in cols}
    out['digits'] = float(loss[row['answer_at']].sum())
    out['exact'] = float(hit[row['answer_at']].all())
    return out


def parse_family(spec, names, cols):
    """'A | B | kind | column; ...' -> [dict(a, b, kind, column)], arm names resolved as eval's contrasts are."""
    rows = []
    for entry in [e.strip() for e in spec.split(';') if e.strip()]:
        parts = [p.strip() for p in entry.split('|')]
        if len(parts) != 4:
            raise ConfigError(f"family row {entry!r} must be 'A | B | kind | column' (kind: {', '.join(KINDS)})")
        a, b, kind, col = parts
        (a, b), = parse_contrasts(f"{a} | {b}", names)
        if kind not in KINDS:
            raise ConfigError(f"family row {entry!r}: kind {kind!r} must be one of {', '.join(KINDS)}")
        if kind == 'loss' and col not in [c for c, _, _ in cols]:
            raise ConfigError(f"family row {entry!r}: column {col!r} is not among columns={','.join(c for c, _, _ in cols)}")
        rows.append(dict(a=a, b=b, kind=kind, column=col if kind == 'loss' else 'passkey'))
    if not rows:
        raise ConfigError("family is empty: declare the contrasts before the run ('A | B | kind | column; ...')")
    return rows


def margins_of(cfg):
    return {'loss': cfg['margin_loss'], 'digits': cfg['margin_digits'], 'exact': cfg['margin_exact']}


# ----------------------------------------------------------------------------- writing


def csv_text(header, rows):
    fmt = lambda v: f"{v:.6f}" if isinstance(v, float) else str(v)  # noqa: E731
    return '\n'.join([','.join(header)] + [','.join(fmt(v) for v in r) for r in rows]) + '\n'


def summary_md(s):
    fam = s['family']
    L, T = s['settings']['L'], s['settings']['T']
    lines = [f"# {s['settings']['base']}: one window per play, T = {T:,} (L = {L:,})", '',
             f"{len(s['windows'])} windows, each from its own play; a passkey in each, scored in the same forward. "
             f"Family of {len(fam)} contrasts declared before the run, Holm across it.", '',
             '| arm | ' + ' | '.join(s['fields']) + ' |', '|---|' + '---|' * len(s['fields'])]
    for name, v in s['arms'].items():
        cells = []
        for f in s['fields']:
            x = np.array(v[f], dtype=float)
            m, (lo, hi) = (x.mean(), mean_ci(x)[1]) if len(x) > 1 else (x.mean(), (np.nan, np.nan))
            cells.append(f"{m:.0%}" if f == 'exact' else f"{m:.3f} [{lo:.3f}, {hi:.3f}]")
        lines.append(f"| {name} | " + ' | '.join(cells) + ' |')
    lines += ['', '| A − B | outcome | difference [95%] | p (Holm) | verdict |', '|---|---|---|---|---|']
    for r in fam:
        f = (lambda x: f"{100 * x:+.0f}") if r['kind'] == 'exact' else (lambda x: f"{x:+.3f}")
        lines.append(f"| {r['a']} − {r['b']} | {field(r)} | {f(r['diff'])} [{f(r['ci'][0])}, {f(r['ci'][1])}] | "
                     f"{r['p_holm']:.2g} | {r['verdict']}{' (inside the margin)' if r['inside_margin'] else ''} |")
    c = s['control']
    if c:
        lines += ['', f"Positive control ({c['arm']}, key {c['distance'][0]:,}–{c['distance'][1]:,} tokens back in "
                      f"{c['len']:,}-token rows, inside L): {int(sum(c['exact']))} of {len(c['exact'])} keys exact, digits' "
                      f"summed loss {np.mean(c['digits']):.3f}."]
    return '\n'.join(lines) + '\n'


def write(cfg, arms, rows, cols, family, timing, argv, T, L):
    windows = [r for r in rows if not r['control']]
    values, curves = {}, {}
    for a, arm in enumerate(arms):
        got = [outcomes(*load_part(cfg, arm, i, r), r, cols) for i, r in enumerate(rows) if not r['control']]
        values[arm['name']] = {k: [g[k] for g in got] for k in got[0]}
        losses = np.stack([np.where(r['text_mask'], load_part(cfg, arm, i, r)[0], np.nan)
                           for i, r in enumerate(rows) if not r['control']])
        with np.errstate(all='ignore'), warnings.catch_warnings():  # a bin of planted tokens only stays NaN
            warnings.simplefilter('ignore', RuntimeWarning)
            curves[arm['name']] = np.nanmean(losses.reshape(len(windows), -1, cfg['bin']), axis=(0, 2))
    ctrl_rows = [(i, r) for i, r in enumerate(rows) if r['control']]
    control = None
    if ctrl_rows:
        got = [outcomes(*load_part(cfg, arms[0], i, r), r, []) for i, r in ctrl_rows]
        control = dict(arm=arms[0]['name'], len=cfg['control_len'], distance=[cfg['control_lo'], cfg['control_hi']],
                       exact=[g['exact'] for g in got], digits=[g['digits'] for g in got],
                       rows=[dict(play=r['title'], start=r['start'], key=r['key'], distance=r['distance'])
                             for _, r in ctrl_rows])
    judged = judge(family, values, margins_of(cfg))
    parts = {arm['name']: [read_part(cfg, arm, i, r) for i, r in enumerate(rows) if a == 0 or not r['control']]
             for a, arm in enumerate(arms)}
    made = {n: sorted({p[2] for p in ps}) for n, ps in parts.items()}  # each part's commit (a reused part: its own)
    forward_s = {n: None if any(p[3] is None for p in ps) else round(sum(p[3] for p in ps), 1) for n, ps in parts.items()}
    fields = [f"loss {c}" for c, _, _ in cols] + ['digits', 'exact']
    settings = dict(base=cfg['base'], L=L, T=T, seed=cfg['seed'], rope_types=cfg['rope_types'],
                    key_distance=[cfg['key_lo'], cfg['key_hi']], columns=[c for c, _, _ in cols],
                    margins=margins_of(cfg), family_declared=cfg['family'], arm_seconds=timing, bin=cfg['bin'],
                    parts_made_by=made, forward_seconds=forward_s,
                    provenance=dict(provenance(None), command=' '.join(['python -m lab.doc_study', *argv])))
    s = dict(settings=settings, fields=fields,
             windows=[dict(play=r['title'], start=r['start'], key=r['key'], distance=r['distance']) for r in windows],
             arms={n: {f: v[f] for f in fields} for n, v in values.items()},
             arm_specs={a['name']: dict(scaling=a.get('scaling'), crop=a.get('crop')) for a in arms},
             family=judged, control=control)
    os.makedirs(cfg['out_dir'], exist_ok=True)
    names = list(values)
    per_window = [[n, i, w['play'], *[values[n][f][i] for f in fields]] for n in names for i, w in enumerate(s['windows'])]
    files = {'summary.json': json.dumps(s, indent=1, ensure_ascii=False) + '\n', 'summary.md': summary_md(s),
             'windows.csv': csv_text(['window', 'play', 'start', 'key', 'distance'],
                                     [[i, w['play'], w['start'], w['key'], w['distance']]
                                      for i, w in enumerate(s['windows'])]),
             'per_window.csv': csv_text(['arm', 'window', 'play', *fields], per_window),
             'position_loss.csv': csv_text(['position', *names], [[int(p * cfg['bin']), *[float(curves[n][p]) for n in names]]
                                                                  for p in range(T // cfg['bin'])])}
    for name, text in files.items():
        atomic_write_text(os.path.join(cfg['out_dir'], name), text)
    return s


# ----------------------------------------------------------------------------- main


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    if cfg['plot_only']:
        return draw(cfg['out_dir'])
    for k in ('windows', 'eval_len', 'bin'):
        if cfg[k] < 1:
            raise ConfigError(f"{k}={cfg[k]} must be >= 1")
    if cfg['eval_len'] % cfg['bin']:
        raise ConfigError(f"bin={cfg['bin']} must divide eval_len={cfg['eval_len']}")
    if not 0 < cfg['key_lo'] <= cfg['key_hi'] or not 0 < cfg['control_lo'] <= cfg['control_hi']:
        raise ConfigError("key_lo <= key_hi and control_lo <= control_hi, all > 0 (distances in tokens)")
    arms, base, T = plan_arms(dict(ARM_DEFAULTS, base=cfg['base'], ckpt=cfg['ckpt'], rope_types=cfg['rope_types'],
                                   eval_len=cfg['eval_len']))
    if not arms:
        raise ConfigError("no arm: list them in rope_types (default = the model as shipped)")
    for arm in arms:  # one forward of T each: no scale that moves with the length, no crop cut per position
        if is_dynamic(arm.get('scaling')) or (arm.get('crop') or {}).get('form') == 'truncated':
            raise ConfigError(f"arm {arm['name']!r}: " + ("the truncated crop is a forward per position; use "
                              "crop:form=sliding:sink=4 here" if arm.get('crop') else "its scale moves with the "
                              "length (a forward per position); measure it with eval.py, which samples positions"))
    L = base['L']
    if cfg['control_rows'] and cfg['control_len'] > L:
        raise ConfigError(f"control_len={cfg['control_len']}: the control rows must lie inside L = {L} (the model's "
                          f"own length); set control_len <= {L}")
    cols = parse_columns(cfg['columns'], T)
    family = parse_family(cfg['family'], [a['name'] for a in arms], cols)
    data_dir = data_dir_of(cfg['dataset'] or (base['ckpt'].get('dataset') or {}).get('dataset', ''))
    meta = load_meta(data_dir)
    # every document, both splits: the lab's split means nothing to a model trained elsewhere (any exposure of these
    # plays in its pretraining is shared by every arm and every play); one stream, the val split's offsets moved
    train, val = (np.asarray(load_split(data_dir, s, meta)) for s in ('train', 'val'))
    docs = meta['docs']['train'] + [(t, a + len(train), b + len(train)) for t, a, b in meta['docs']['val']]
    rows = build_rows(cfg, meta, np.concatenate([train, val]), docs, T)
    device = pick_device(cfg['device'])
    _, ctx = autocast_context(device.split(':')[0], cfg['dtype'])
    todo = sum(not os.path.exists(part_path(cfg, arm, i)) for a, arm in enumerate(arms) for i, r in enumerate(rows)
               if a == 0 or not r['control'])
    print(f"doc_study: {len(arms)} arms x {cfg['windows']} windows of {T:,} tokens (+ {cfg['control_rows']} control rows "
          f"for {arms[0]['name']}); {todo} forwards to run, the rest read from their parts")
    t0 = time.time()
    timing = run_arms(cfg, arms, rows, device, ctx)
    s = write(cfg, arms, rows, cols, family, timing, argv, T, L)
    print(summary_md(s))
    print(f"doc_study: measured in {time.time() - t0:.0f} s; wrote {cfg['out_dir']}")
    if cfg['plot']:
        draw(cfg['out_dir'])
    return s


def draw(out_dir):
    from lab.pictures.doc_study_plots import draw_all
    for p in draw_all(out_dir):
        print(f"wrote {p}")


if __name__ == '__main__':
    cli(main)
