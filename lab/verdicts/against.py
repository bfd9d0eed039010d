"""
One eval's arms against arms of other evals of the same windows: a new base paired with the demo's base, its crop
or a design's base that sit committed in assets/, without training those again. Every eval of the same T, seed and
room settings reads the same tokens and examples (they follow from the seed), so the comparison is the usual paired
test on those units (lab.verdicts.compare.vs_arm_of; Holm within each column over this eval's arms), and a room's
row is not judged where either side's base fails the room inside L (compare.no_control).

  python -m lab.verdicts.against --eval=out/char-eval-gated --against=assets/demo:base_L128,assets/studies/sinks:base_sinks_L128

An arm is named by its id or its display name; the other eval's arms are shown as `name [folder]`. Writes
<eval>/against.json and against.md (the eval's own files are left as they are) and prints the Markdown.
"""
import json
import os

from configurator import ConfigError, get_config
from data.common import atomic_write_text
from lab.engine.cli import cli
from lab.verdicts.compare import margins, no_control, structural_zero, vs_arm_of
from lab.verdicts.summary_json import read_summary
from lab.verdicts.summary_md import diff_cell, units

DEFAULTS = dict(
    eval='',            # the eval folder whose arms are compared (its summary.json)
    against='',         # folder:arm,... (arm: an id or a display name) of other evals of the same windows
    margin_loss=0.02,   # equivalence margins, as eval.py's
    margin_exact=0.10,
)


def references(spec):
    """'folder:arm,folder:arm' -> [(folder, arm)], ConfigError on a malformed entry."""
    out = []
    for item in (x.strip() for x in spec.split(',') if x.strip()):
        folder, sep, arm = item.rpartition(':')
        if not sep or not folder or not arm:
            raise ConfigError(f"against={item!r}: write folder:arm (e.g. assets/demo:base_L128)")
        out.append((folder, arm))
    if not out:
        raise ConfigError("against is empty: name one or more folder:arm of evals of the same windows")
    return out


def find_arm(summary, arm, folder):
    hit = next((a for a in summary['arms'] if arm in (a.get('id'), a['name'])), None)
    if hit is None:
        have = ', '.join(a.get('id') or a['name'] for a in summary['arms'])
        raise ConfigError(f"{folder} has no arm {arm!r}; it has {have}")
    return hit


def against(summary, others, m):
    """[(folder, other summary, arm)] -> [dict(reference, folder, rows={kind: {column: {name: row}}})], each row one
    arm of summary against that arm; a room row carries not_judged (the reason) where either base fails inside L."""
    out = []
    for folder, other, arm in others:
        ref = find_arm(other, arm, folder)
        label = f"{ref['name']} [{folder}]"
        renamed = dict(other, arms=[dict(a, name=f"{a['name']} [{folder}]") for a in other['arms']])
        try:
            rows = vs_arm_of(summary, renamed, m, ref=label)
        except ValueError as e:
            raise ConfigError(f"{folder}: {e}") from None
        both = dict(summary, arms=summary['arms'] + renamed['arms'])  # (a crop on either side: its structural zero)
        for kind, cols in rows.items():
            for c, col in cols.items():
                for name, r in col.items():
                    why = no_control(summary, kind, [name]) or no_control(other, kind, [ref['name']]) or \
                        structural_zero(both, kind, c, r)
                    if why:
                        r['not_judged'] = why
        out.append(dict(reference=label, folder=folder, rows=rows))
    return out


def markdown(found, folder):
    lines = [f"# {folder}: its arms against arms of other evals of the same windows", '',
             "Paired on the same windows (loss, nats) or examples (rooms, points); Holm within each column; "
             "diff = arm - reference.", '']
    for f in found:
        lines += [f"## against {f['reference']}", '']
        for kind, cols in f['rows'].items():
            fmt = units(kind)[1]
            names = list(next(iter(cols.values())))
            lines += [f"{kind}:", '', '| arm | ' + ' | '.join(cols) + ' |', '|---' * (len(cols) + 1) + '|']
            lines += [f"| {n} | " + ' | '.join(diff_cell(cols[c][n], fmt, bool(cols[c][n].get('not_judged')))
                                               for c in cols) + ' |' for n in names]
            why = next((cols[c][n]['not_judged'] for c in cols for n in names if cols[c][n].get('not_judged')), None)
            lines += ([f"(not judged: {why})"] if why else []) + ['']
    return '\n'.join(lines)


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    if not cfg['eval']:
        raise ConfigError("--eval is empty: name the eval folder whose arms are compared (e.g. out/char-eval-gated)")
    summary = read_summary(cfg['eval'], f"run eval.py with --out_dir={cfg['eval']} first")
    others = [(folder, read_summary(folder, f"pass a folder holding an eval's summary.json"), arm)
              for folder, arm in references(cfg['against'])]
    found = against(summary, others, margins(cfg))
    md = markdown(found, cfg['eval'])
    text = json.dumps(found, indent=1, ensure_ascii=False) + '\n'
    atomic_write_text(os.path.join(cfg['eval'], 'against.json'), text)
    atomic_write_text(os.path.join(cfg['eval'], 'against.md'), md)
    print(md)
    print(f"wrote {cfg['eval']}/against.json and against.md ({len(found)} references)")
    return 0


if __name__ == '__main__':
    cli(main)
