"""
--merge: one eval measured in parts -> one summary, judged as if its arms had run together (no model runs).

A study too long for one sitting (the real model's: an arm is ~25 to 90 thread-minutes) is run as several evals of
the same settings, each with some of the arms. The windows, the dynamic arms' sampled positions and the passkey
examples follow from the seed, so the parts measured the same tokens; this checks that they did (every setting that
decides what is measured must agree), joins the arms and their CSV columns, and computes every comparison again over
all of them: each column's best, every arm against each crop, and the named contrasts, which may now pair arms of
different parts.
"""
import csv
import os

from configurator import ConfigError
from data.common import atomic_write_text
from lab.engine.checks import check_out_dir
from lab.measure.arms import parse_contrasts
from lab.measure.temperature_law import law_csv
from lab.verdicts.compare import stamp_gates
from lab.verdicts.summary_json import comparisons, csv_text, json_text, provenance, read_summary
from lab.verdicts.summary_md import summary_markdown

# settings that may differ between parts: which arms ran, how, where, and what was judged from them
PER_PART = {'rope_types', 'checkpoints', 'finetune_lengths', 'training_mix', 'workers', 'batch_size', 'device',
            'arm_seconds', 'provenance', 'vs_best', 'contrasts', 'vs_crop', 'vs_self', 'margins', 'rejudged',
            'merged', 'position_map', 'temperature', 'factor', 'plot', 'torch', 'data_dir',
            'grid'}  # (grid: where a moving-scale arm's entropy is sampled; each arm records its count, scoring)
FIRST = ('dataset', 'tokenizer', 'split', 'T', 'L', 'num_windows', 'seed', 'windows', 'base')  # named first when differing
COLUMNS = ('position_loss.csv', 'attention_entropy.csv')  # one column per arm, one row per position


def merge_parts(folders, out_dir, margins, contrasts='', argv=None):
    """Each folder's summary.json and CSVs (the same eval, other arms) -> out_dir's summary.json / .md, the per-position
    CSVs and retrieval.csv of all the arms; settings.merged names the parts."""
    dirs = [d.strip() for d in folders.split(',') if d.strip()]
    if len(dirs) < 2 or len(set(dirs)) < len(dirs):
        raise ConfigError(f"merge={folders!r}: give two or more different eval folders, comma-separated, each holding "
                          f"a summary.json of the same eval with other arms")
    check_out_dir(out_dir)
    sums = [read_summary(d, f"run eval.py with --out_dir={d} first") for d in dirs]
    first = sums[0]['settings']
    for d, s in zip(dirs[1:], sums[1:]):
        keys = FIRST + tuple(sorted((set(first) | set(s['settings'])) - PER_PART - set(FIRST)))
        key = next((k for k in keys if first.get(k) != s['settings'].get(k)), None)
        if key:
            a, b = (repr(x.get(key)) for x in (s['settings'], first))
            raise ConfigError(f"{d} was evaluated with another {key} than {dirs[0]}"
                              + (f" ({a} vs {b})" if len(a + b) < 80 else '')
                              + "; merge parts of one eval: the same settings, other --rope_types")
    owner = {}
    for d, s in zip(dirs, sums):
        for a in s['arms']:
            if a['name'] in owner:
                raise ConfigError(f"arm {a['name']!r} is in both {owner[a['name']]} and {d}; measure each arm in one "
                                  f"part (drop it from one part's --rope_types / --ckpt)")
            owner[a['name']] = d
    results = [a for s in sums for a in s['arms']]
    names = [a['name'] for a in results]
    if contrasts:
        pairs = parse_contrasts(contrasts, names)
    else:  # the pairs the parts named, once each
        stored = [(r['a'], r['b']) for s in sums
                  for r in next(iter(next(iter((s['settings'].get('contrasts') or {}).values()), {}).values()), [])]
        pairs = list(dict.fromkeys(stored))
    settings = {k: v for k, v in first.items() if k not in PER_PART}
    settings.update(
        rope_types=','.join(s['settings'].get('rope_types') or '' for s in sums).strip(','),
        checkpoints=sorted({c for s in sums for c in s['settings'].get('checkpoints') or []}),
        finetune_lengths=sorted({n for s in sums for n in s['settings'].get('finetune_lengths') or []}),
        training_mix={k: v for s in sums for k, v in (s['settings'].get('training_mix') or {}).items()},
        arm_seconds={k: v for s in sums for k, v in (s['settings'].get('arm_seconds') or {}).items()},
        margins=margins, **comparisons(results, pairs, margins),
        merged=[dict(folder=d, arms=[a['name'] for a in s['arms']], workers=s['settings'].get('workers'),
                     device=s['settings'].get('device'), provenance=s['settings'].get('provenance')) for d, s in zip(dirs, sums)],
        provenance=provenance(argv))
    summary = stamp_gates(dict(settings=settings, arms=results))  # each row's gate stored with its verdict
    files = {name: joined_columns(dirs, name, [[a['name'] for a in s['arms']] for s in sums]) for name in COLUMNS}
    files.update({'summary.json': json_text(summary), 'summary.md': summary_markdown(summary)})
    law = law_csv(results)  # --temperature_law's table, drawn again from the parts' summary.json fields
    if law:
        files['temperature_law.csv'] = law
    for name in ('retrieval.csv', 'finetune_curves.csv'):  # a row per arm and bucket (or step): every part's rows
        texts = [_text(os.path.join(d, name)) for d in dirs]
        for d, s, t in zip(dirs, sums, texts):  # eval.py writes retrieval.csv always, the curves with a fine-tune
            tuned = [a['name'] for a in s['arms'] if a.get('kind') == 'fine-tuned' and not a.get('position_map')
                     and not a.get('retuned') and not a.get('temperature')]
            if t is None and (name == 'retrieval.csv' or tuned):
                raise ConfigError(f"{os.path.join(d, name)} is missing, so the merge would drop the rows of "
                                  f"{', '.join(tuned or [a['name'] for a in s['arms']])}; every part needs the files "
                                  f"eval.py writes beside its summary.json (evaluate that part again)")
        parts = [t.splitlines(keepends=True) for t in texts if t]
        if parts:
            files[name] = ''.join(parts[0] + [ln for t in parts[1:] for ln in t[1:]])
    os.makedirs(out_dir, exist_ok=True)
    for name, text in files.items():
        atomic_write_text(os.path.join(out_dir, name), text)
    print(files['summary.md'])
    print(f"eval: {len(results)} arms of {len(dirs)} parts merged; wrote {', '.join(sorted(files))} to {out_dir}")
    return summary


def _text(path):
    try:
        with open(path, encoding='utf-8') as f:
            return f.read()
    except FileNotFoundError:
        return None


def joined_columns(dirs, name, arm_names):
    """One per-position CSV of every part side by side: the position column once, each part's arm columns after it,
    checked against the part's summary (the same arms, the same positions)."""
    tables = []
    for d, arms in zip(dirs, arm_names):
        path = os.path.join(d, name)
        try:
            with open(path, encoding='utf-8', newline='') as f:
                rows = list(csv.reader(f))
        except OSError as e:
            raise ConfigError(f"{path}: {e.strerror or e}; every part needs the CSVs eval.py writes beside its "
                              f"summary.json (evaluate that part again)") from None
        if not rows or rows[0] != ['position'] + arms or any(len(r) != len(rows[0]) for r in rows):
            raise ConfigError(f"{path} does not hold a column for each arm of {d}/summary.json ({', '.join(arms)}); "
                              f"it is from another run: evaluate that part again")
        tables.append(rows)
    if any([r[0] for r in t] != [r[0] for r in tables[0]] for t in tables):
        raise ConfigError(f"the parts' {name} cover other positions; merge parts of one eval (the same T)")
    return csv_text(tables[0][0] + [h for t in tables[1:] for h in t[0][1:]],
                    [row + [c for t in tables[1:] for c in t[i + 1][1:]] for i, row in enumerate(tables[0][1:])])
