"""
Which models eval.py compares, and under which names: the arms.

An arm is a run folder (a base model, or a fine-tune from finetune_long.py), a zero-shot scaling or position map
(ReRoPE, Self-Extend) switched on in the base model (--rope_types), a fine-tune with a position map switched on
(--position_map) or with another scaling in place of its own (--retune), or the seeds of one fine-tuned
configuration taken together. Each arm carries its checkpoint(s), its training length L (from the checkpoint's
lineage, never re-typed), the length it was fine-tuned at and its rope config. Everything here is validation:
nothing is measured.

An arm is known by its identity (IDENTITY: what it is, field by field, never its name), and a person names it by
its display name ('yarn s=4 β_fast=8 ft100', for tables) or its id ('yarn_s4_beta_fast8_ft100', ASCII, unique in
the eval, for --contrasts and --retune). Runs group into one arm of several seeds only when their identities agree.
"""
import os
import re

from configurator import ConfigError
from data.common import DataError, data_dir_of, read_json, read_jsonl
from data.checkpoints import checkpoint_exists, checkpoint_ref, load_checkpoint, model_from_checkpoint
from lab.crop import crop_name, is_crop_spec, parse_crop, self_crop_arms
from lab.position_maps import POSITION_MAPS, is_position_map_spec, parse_position_map, position_map_name
from rope_config import ROPE_TYPES, is_dynamic
from lab.measure.arm_specs import (ALIASES, check_over_trained_in, learned_tag, parse_arm, rope_tag, scaling_name,
                                   slug)
from lab.measure.combine import check_arm
from lab.temperature import parse_temperature, split_temperature, with_temperature

# What an arm is: the fields its identity is made of, in the order a difference between two runs is reported.
# kind ('base', 'zero-shot', 'fine-tuned'); the rope config switched on (scaling); the training length L and the
# fine-tune length seq_len; the fine-tune's steps; the base checkpoint it was fine-tuned from (realpath); the run
# folder (run_dir: the folder holding finetune_long.py's arms.json, else the run's own folder, realpath); PoSE; the
# copy mix; the crop, position map and --retune switched on at eval; the training settings (the checkpoint's
# 'config' less TRAINING_IGNORED and the copy_* keys, which are copy_mix). The seed is not in it: seeds of one
# identity are one arm.
IDENTITY = ('kind', 'scaling', 'L', 'seq_len', 'steps', 'base_checkpoint', 'run_dir', 'pose', 'copy_mix', 'crop',
            'position_map', 'retune', 'temperature', 'training')
# Settings stored in a checkpoint's 'config' that do not change what is trained, so two seeds of one arm may differ
# in them: seed (what varies across an arm's runs) and seeds (the list a multi-seed run was started with); out_dir
# and overwrite (where the run was written); init_from ('scratch', or 'resume' for a seed continued after an
# interruption: the base is compared as base_checkpoint); device (the machine it ran on); compile (the same
# computation, compiled); progress and log_interval (what was printed).
TRAINING_IGNORED = ('seed', 'seeds', 'out_dir', 'overwrite', 'init_from', 'device', 'compile', 'progress',
                    'log_interval')


def lineage_of(ckpt):
    L = ckpt['model_args']['block_size']
    return dict(dict(train_len=L, seq_len=L, base_checkpoint=None, finetune_steps=0, pose=None),
                **(ckpt.get('lineage') or {}))


def expand_ckpts(paths):
    """Run folders; a folder with arms.json (a multi-arm fine-tune) stands for its arms' run folders."""
    out = []
    for p in paths:
        aj = os.path.join(p, 'arms.json')
        if not os.path.isfile(aj):
            out.append(p)
            continue
        fix = "rerun finetune_long.py or pass the arm folders themselves"
        runs = read_json(aj, fix)
        runs = runs.get('arms') if isinstance(runs, dict) else None
        if not isinstance(runs, list) or not all(isinstance(a, dict) and isinstance(a.get('folder'), str) for a in runs):
            raise DataError(f"{aj} has no 'arms' list of objects with a 'folder' each; {fix}")
        out += [os.path.join(p, a['folder']) for a in runs]
    return out


def copy_tag(ckpt):
    """' copy' for a fine-tune trained with synthetic copies mixed in (lab/copy_mix.py), ' copy≤d' when their
    distance was capped at d, '+words<share>' when that share of them were word-needle records; '' for text only."""
    cfg = ckpt.get('config') or {}
    if not cfg.get('copy_share'):
        return ''
    return ' copy' + (f"≤{cfg['copy_max_distance']}" if cfg.get('copy_max_distance') else '') + \
        (f"+words{cfg['copy_words']:g}" if cfg.get('copy_words') else '')


def mixed_tag(cfg):
    """LongRoPE2's mixed windows in an arm's name: ' mixed' when a share of the steps were short (so the arm had that
    share fewer long tokens than a plain fine-tune of the same steps), ' mixed in-step' when every step held its long
    windows and short ones beside them."""
    return (' mixed in-step' if cfg.get('mixed_in_step') else ' mixed') if cfg.get('mixed_short') else ''


def ckpt_arm(path, ckpt):
    lin, args = lineage_of(ckpt), ckpt['model_args']
    sc, derived = args.get('rope_scaling'), bool(lin['base_checkpoint'])
    tuned = derived and lin['finetune_steps'] > 0  # a 0-step run (--max_iters=0, a LongRoPE search) is zero-shot
    att = args.get('attention', '')
    lay = (f" {args['layers']}" if args.get('layers') else '') + (' ssmax' if 'ssmax' in att else '') \
        + (' sinks' if 'sinks' in att else '') + (' gated' if 'gated' in att else '') \
        + (' inkling' if att == 'inkling' else '') + (' fope' if 'fope' in att else '') \
        + (' learned' if att.endswith('fope_learned') else '') \
        + (f" neox p={args['partial_rotary_factor']:g}" if args.get('partial_rotary_factor', 1.0) < 1 else '') \
        + (f" {scaling_name(sc).replace(' s=1', '')}" if sc and not derived else '') \
        + learned_tag(args, ckpt.get('config'))  # p-RoPE, clipped: trained in; Mistral Large 4's learned parts
    tags = learned_tag(args, ckpt.get('config')) + (' needles' if lin.get('search_objective') == 'needle' else '') + \
        mixed_tag(ckpt.get('config') or {})  # the learned position parts; LongRoPE2's objective, its mixed windows
    pose = (' pose random' if lin['pose'].get('ids') == 'random' else ' pose') if lin['pose'] else ''
    name = (f"{rope_tag(args, derived)}{tags}{pose}{copy_tag(ckpt)} ft{lin['finetune_steps']}"
            if tuned else f"{rope_tag(args, derived)}{tags} zero-shot" if derived else
            f"base{lay} (L={lin['train_len']})" if args['pos_emb'] == 'rope' else
            f"{args['pos_emb']} (L={lin['train_len']})")
    cfg = ckpt.get('config') or {}
    copy_mix = {k: v for k, v in cfg.items() if k.startswith('copy_')}
    return dict(name=name, checkpoint=path, kind='fine-tuned' if tuned else 'zero-shot' if derived else 'base', ckpt=ckpt, scaling=sc,
                L=lin['train_len'], seq_len=lin['seq_len'], steps=lin['finetune_steps'] if tuned else 0,
                pose=lin['pose'], seed=cfg.get('seed'), run_dir=run_dir(path), copy_mix=copy_mix,
                base_checkpoint=checkpoint_ref(lin['base_checkpoint']) if derived else None,
                training={k: v for k, v in cfg.items() if k not in TRAINING_IGNORED and k not in copy_mix})


def arm_model(arm, ckpt):
    """The model one run of an arm runs: its checkpoint rebuilt and, for a zero-shot or retuned arm, the arm's scaling
    switched on (the same weights, new rotation frequencies); a position map, crop or temperature is added by its form
    (lab/measure/forms.py), not here."""
    model = model_from_checkpoint(ckpt)
    if (arm['kind'] == 'zero-shot' or arm.get('retuned')) and model.config.pos_emb == 'rope':
        model.set_rope_scaling(arm['scaling'])
    return model


def identity(arm):
    """The arm's identity: ((field, value), ...) over IDENTITY, hashable (dicts as sorted pairs)."""
    def frozen(v):
        if isinstance(v, dict):
            return tuple(sorted((k, frozen(x)) for k, x in v.items()))
        return tuple(map(frozen, v)) if isinstance(v, (list, tuple)) else v
    return tuple((f, frozen(arm.get(f))) for f in IDENTITY)


def identity_difference(a, b):
    """(field, value in a, value in b) of the first identity field where two arms differ (a training setting by its
    own key, 'learning_rate'), or None. A setting one checkpoint does not store (an older train.py) is not compared."""
    for f in IDENTITY:
        va, vb = a.get(f), b.get(f)
        if f == 'training':
            key = next((k for k in va if k in vb and va[k] != vb[k]), None)
            if key is not None:
                return key, va[key], vb[key]
        elif va != vb:
            return f, va, vb
    return None


def arm_id(name):
    """The ASCII id of a display name: 'yarn s=4 β_fast=8 ft100' -> 'yarn_s4_beta_fast8_ft100' (the rope part is the
    fine-tune's folder slug), 'base (L=128)' -> 'base_L128', 'default copy≤120 ft100' -> 'default_copy_le120_ft100',
    'X @ Y' -> 'X_at_Y', 'X + Y' -> 'X_plus_Y', 'default ft100 [char-ft]' -> 'default_ft100_char-ft'."""
    s = slug(name.replace('≤', ' le').replace('@', ' at ').replace('+', ' plus '))
    return re.sub(r'[^A-Za-z0-9.-]+', '_', s).strip('_') or 'arm'


def arm_ids(names):
    """The ids of an eval's arms, in order: arm_id of each display name, '_2', '_3' appended to a later one whose id an
    earlier arm already has (so an arm's id does not change when arms are added after it)."""
    out = []
    for name in names:
        i = first = arm_id(name)
        n = 2
        while i in out:
            i, n = f"{first}_{n}", n + 1
        out.append(i)
    return out


def find_base(cfg, arms):
    """The model the zero-shot arms switch a scaling on (see the docstring), or None. --base is found among the arms
    by the realpath of each arm's runs (a seed group's runs each), so it is that arm whatever the order of --ckpt."""
    if cfg['base']:
        real = os.path.realpath(cfg['base'])
        for a in arms:
            run = next((r for r in a.get('runs', [a]) if os.path.realpath(r['checkpoint']) == real), None)
            if run is not None:
                return a if len(a.get('runs', [a])) == 1 else run
        return ckpt_arm(cfg['base'], load_checkpoint(cfg['base']))
    base = next((a for a in arms if a['kind'] == 'base'), None)
    if base is None and cfg['rope_types']:
        named = lineage_of(arms[0]['ckpt'])['base_checkpoint']
        if not checkpoint_exists(named):  # (a run folder, or a loader's gguf:<file> / hf:<folder>)
            raise ConfigError(f"--rope_types needs a base model: the fine-tunes name {named}, which does not exist "
                              f"here; pass --base=<run folder of the base model, or its gguf:<file> / hf:<folder>>")
        base = ckpt_arm(named, load_checkpoint(named))
    return base


def check_same_data(arms):
    """One dataset and vocabulary for every arm. A model loaded from gguf: or hf: (its lineage names a 'source') was
    trained on no data of ours: its data is not compared, its vocabulary is (size, and the tokenizer file's sha256
    where both record one), so it sits beside the runs fine-tuned from it."""
    def sig(a):
        ds, loaded = a['ckpt'].get('dataset') or {}, (a['ckpt'].get('lineage') or {}).get('source')
        return (None if loaded else os.path.realpath(data_dir_of(ds.get('dataset') or '?')),
                a['ckpt']['model_args']['vocab_size'], ds.get('tokenizer_sha256'))
    ref = next((a for a in arms if sig(a)[0] is not None), arms[0])
    for a in arms:
        (d1, v1, h1), (d2, v2, h2) = sig(ref), sig(a)
        if v1 != v2 or None not in (d1, d2) and d1 != d2 or h1 and h2 and h1 != h2:
            raise ConfigError(f"checkpoints from different data: {ref['checkpoint']} (data {d1 or 'its own'}, vocab "
                              f"{v1}{f', tokenizer sha256 {h1[:12]}' if h1 else ''}) and {a['checkpoint']} (data "
                              f"{d2 or 'its own'}, vocab {v2}{f', tokenizer sha256 {h2[:12]}' if h2 else ''}); "
                              f"evaluate models of one dataset together")


def zero_shot_arms(cfg, base, arms, T):
    """The --rope_types entries as arms on the base model: a rope scaling, or a position map ('rerope:window=64') on
    the base's own RoPE."""
    seen_default = False
    for entry in [e.strip() for e in cfg['rope_types'].split(',') if e.strip()]:
        if base is None:
            raise ConfigError("--rope_types needs a base model; pass --base=<run folder> or a base in --ckpt")
        entry, temp = split_temperature(entry)  # 'yarn:attention_factor=1+qtemp:shape=ministral' (lab/temperature.py)
        if temp:  # the arms of `entry` once more with the temperature, in place of the plain ones
            zero_shot_arms(dict(cfg, rope_types=entry), base, added := [], T)
            arms += [with_temperature(dict(a, kind='zero-shot', steps=0, name='' if a is base else a['name']), temp)
                     for a in added]
            continue
        rope_type = entry.split(':')[0]
        if is_crop_spec(entry):  # the crop control (lab/crop.py): the base held to its last w tokens, two forms
            try:
                crops = parse_crop(entry, base['L'])
            except ValueError as e:
                raise ConfigError(str(e)) from None
            arms += [dict(base, name=crop_name(c), kind='zero-shot', crop=c, steps=0) for c in crops]
            continue
        if rope_type not in ('default', 'plain') and base['ckpt']['model_args']['pos_emb'] != 'rope':
            raise ConfigError(f"the base {base['checkpoint']} has no RoPE; --rope_types needs a rope model")
        if is_position_map_spec(entry):
            pm = parse_position_map(entry)
            arms.append(dict(base, name=f"{position_map_name(pm)} zero-shot", kind='zero-shot', position_map=pm,
                             steps=0))
            continue
        if ALIASES.get(rope_type, rope_type) not in ROPE_TYPES:
            raise ConfigError(f"arm {entry!r}: {rope_type!r} is neither a rope type ({', '.join(ROPE_TYPES)}), a "
                              f"position map ({', '.join(POSITION_MAPS)}) nor the crop control (crop)")
        factor = cfg['factor'] or (1.0 if is_dynamic({'rope_type': rope_type}) else T / base['L'])
        sc = parse_arm(entry, factor, base['L'])
        if sc is not None and base['kind'] == 'base':  # a rope type trained into the base is not replaced silently
            try:
                check_over_trained_in(base['scaling'], sc, base['checkpoint'], f"arm {entry!r}",
                                      "evaluate the base as trained ('default')")
            except ValueError as e:
                raise ConfigError(str(e)) from None
        if sc is None:
            if seen_default:
                raise ConfigError(f"arm {base['name']!r} is given twice in --rope_types; list it once")
            seen_default = True
            if all(a is not base for a in arms):
                arms.append(base)
        else:
            arms.append(dict(base, name=f"{scaling_name(sc)} zero-shot", kind='zero-shot', scaling=sc, steps=0))


def mapped_arms(cfg, arms):
    """--position_map: every fine-tuned arm once more with that map switched on, 'yarn s=4 ft100 + rerope w=256'
    (a map over a fine-tuned scaled model reaches past the length it was fine-tuned at; see lab/position_maps.py)."""
    tuned = [a for a in arms if a['kind'] == 'fine-tuned']
    for temp in [t for t in (cfg.get('temperature') or '').split(';') if t.strip()]:  # the same for temperatures
        arms += [with_temperature(a, parse_temperature(temp)) for a in tuned]
    if not cfg.get('position_map'):
        return
    pm = parse_position_map(cfg['position_map'])
    if not tuned:
        raise ConfigError(f"--position_map={cfg['position_map']} applies to fine-tuned arms and --ckpt has none; "
                          f"for the base model list it in --rope_types instead")
    arms += [dict(a, name=f"{a['name']} + {position_map_name(pm)}", position_map=pm) for a in tuned]


def retuned_arms(cfg, arms, T):
    """--retune='arm | spec; ...' (the arm by its id or display name): a fine-tuned arm once more with another
    scaling switched on in place of its own, named 'arm @ scaling' (the YaRN paper's Dynamic scaling on a YaRN
    fine-tune; an s=4 fine-tune run at s=8). The spec fills what it does not set from the arm: its factor, and its
    original length (a scaled arm's own original_max_position_embeddings; an unscaled fine-tune's training length, so
    'default_ft100 | yarn:factor=2' squeezes only the pairs that the 512-token fine-tune never saw turn)."""
    listed = [(a, i) for a, i in zip(arms, arm_ids([a['name'] for a in arms]))
              if a['kind'] == 'fine-tuned' and not a.get('position_map')]
    tuned = {**{i: a for a, i in listed}, **{a['name']: a for a, _ in listed}}  # by id and by display name
    for item in [x.strip() for x in (cfg.get('retune') or '').split(';') if x.strip()]:
        parts = [p.strip() for p in item.split('|')]
        if len(parts) != 2 or parts[0] not in tuned:
            raise ConfigError(f"retune {item!r} must be a fine-tuned arm's id (or name), '|' and an arm spec, e.g. "
                              f"'yarn_s4_beta_fast8_ft100 | dynamic_yarn:factor=4'; the fine-tuned arms are: "
                              f"{', '.join(a['name'] for a, _ in listed) or 'none'}"
                              f"{' (ids: ' + ', '.join(i for _, i in listed) + ')' if listed else ''}")
        a, own = tuned[parts[0]], tuned[parts[0]]['scaling'] or {}
        L = own.get('original_max_position_embeddings') or a['seq_len']
        try:
            sc = parse_arm(parts[1], own.get('factor') or T / L, L)
            if own.get('rope_type') in ('clip', 'proportional'):  # kept from its base (--rope_type=keep): stopped pairs
                check_over_trained_in(own, sc, a['checkpoint'], 'the new scaling', "retune it with its own type's "
                                      "factor, or evaluate it as tuned")
        except ValueError as e:
            raise ConfigError(f"retune {item!r}: {e}") from None
        arms.append(dict(a, name=f"{a['name']} @ {scaling_name(sc)}", scaling=sc, retuned=True,
                         retune={'from': a['scaling']}))


def group_seeds(arms):
    """Fine-tuned runs of one name from one run folder with distinct seeds become one arm with a list of runs, when
    their identities agree; one that differs in anything but the seed is refused, naming the field (they would be
    averaged as if they were seeds of one configuration). The same name from another run folder is another arm."""
    out = []
    for a in arms:
        same = next((o for o in out if o['kind'] == a['kind'] == 'fine-tuned' and o['name'] == a['name']
                     and o['run_dir'] == a['run_dir'] and a['seed'] not in o['seeds']), None)
        if same is None:
            out.append(dict(a, runs=[a], seeds=[a['seed']]))
            continue
        diff = identity_difference(same, a)
        if diff:
            field, mine, theirs = diff
            raise ConfigError(f"{same['checkpoint']} and {a['checkpoint']} share the name {a['name']!r} in run "
                              f"folder {a['run_dir']} but differ in {field} ({mine!r} vs {theirs!r}), so they are not "
                              f"seeds of one arm; pass them from separate run folders or leave one out")
        same['runs'].append(a)
        same['seeds'].append(a['seed'])
    return out


def run_root(path):
    """The folder a checkpoint's run was written to: the nearest of it, its parent and grandparent that holds
    finetune_long.py's arms.json (out/char-ft for out/char-ft/default/seed1337), else its own folder."""
    p = os.path.abspath(path)
    for up in (p, os.path.dirname(p), os.path.dirname(os.path.dirname(p))):
        if os.path.isfile(os.path.join(up, 'arms.json')):
            return up
    return p


def run_folder(path):
    """The name of the run folder (run_root): 'char-ft' for out/char-ft/default/seed1337."""
    return os.path.basename(run_root(path))


def run_dir(path):
    """The run folder (run_root) as a realpath: the run-folder field of an arm's identity."""
    return os.path.realpath(run_root(path))


# The settings plan_arms reads, at eval.py's defaults: what a room that plans arms without eval.py starts from
# (lab.doc_study, lab.engine.masked_bench)
ARM_DEFAULTS = dict(ckpt='', base='', rope_types='', position_map='', retune='', self_crop='', factor=0.0, eval_len=0,
                    temperature='')


def plan_arms(cfg):
    """Load and validate every arm: ([arm dict, ...], the base arm or None, T)."""
    paths = expand_ckpts([p for p in cfg['ckpt'].split(',') if p])
    if not paths and not (cfg['base'] and cfg['rope_types']):
        raise ConfigError("no arm to evaluate; pass --ckpt=<run folder>[,<run folder>...] and/or "
                          "--base=<run folder> --rope_types=<types>")
    real = [os.path.realpath(p) for p in paths]
    dup = next((p for p, r in zip(paths, real) if real.count(r) > 1), None)
    if dup:
        raise ConfigError(f"checkpoint {dup} is given twice; list each run folder once")
    arms = group_seeds([ckpt_arm(p, load_checkpoint(p)) for p in paths])
    for run in [r for a in arms if a['kind'] == 'fine-tuned' for r in a['runs']]:
        run['log'] = finetune_log(run)  # read now: a damaged log is named before anything is measured
    names = [a['name'] for a in arms]
    for name in sorted({n for n in names if names.count(n) > 1}):  # the same readable name: each gets its run
        group = [a for a in arms if a['name'] == name]             # folder's name (finetune_long's out_dir)
        tags = [run_folder(a['checkpoint']) for a in group]
        if len(set(tags)) < len(tags):  # else the last folder of its path where the runs differ
            parts = [os.path.abspath(a['checkpoint']).split(os.sep) for a in group]
            i = next((-i for i in range(1, min(map(len, parts)) + 1) if len({p[-i] for p in parts}) > 1), -1)
            tags = [p[i] for p in parts]
        for a, tag in zip(group, tags):
            a['name'] += f" [{tag}]"
    base = find_base(cfg, arms)
    check_same_data(arms + ([base] if base else []))
    everyone = arms + ([base] if base else [])
    tuned = [a['seq_len'] for a in arms if a['kind'] == 'fine-tuned']
    T = cfg['eval_len'] or max([8 * max(a['L'] for a in everyone)] + [4 * t for t in tuned])
    for a in everyone:
        if T < a['L']:
            raise ConfigError(f"eval_len={T} is shorter than the training length L={a['L']} of {a['checkpoint']}; "
                              f"pass --eval_len >= {a['L']} (or 0 for the default)")
        if a['ckpt']['model_args']['pos_emb'] == 'learned' and T > a['ckpt']['model_args']['block_size']:
            raise ConfigError(f"{a['checkpoint']} has learned positions up to {a['ckpt']['model_args']['block_size']}; "
                              f"it cannot run at eval_len={T}; leave it out or lower --eval_len")
    zero_shot_arms(cfg, base, arms, T)
    if cfg['factor'] and not any(a['kind'] == 'zero-shot' and a.get('scaling') and not a.get('position_map')
                                 for a in arms):
        raise ConfigError(f"--factor={cfg['factor']} sets the scale of the zero-shot rope arms (--rope_types) and there "
                          f"is none; drop --factor or list rope types in --rope_types")
    mapped_arms(cfg, arms)
    retuned_arms(cfg, arms, T)
    self_crop_arms(cfg, arms)
    names = [a['name'] for a in arms]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ConfigError(f"arm {dup!r} is given twice; give each arm different settings")
    for a, i in zip(arms, arm_ids(names)):
        a['dynamic'] = is_dynamic(a['scaling'])
        a.setdefault('runs', [a])
        a.setdefault('seeds', [a.get('seed')])
        a['id'], a['identity'] = i, identity(a)
    twin = next(((a, b) for j, a in enumerate(arms) for b in arms[j + 1:] if a['identity'] == b['identity']), None)
    if twin:
        raise ConfigError(f"arms {twin[0]['name']!r} ({twin[0]['checkpoint']}) and {twin[1]['name']!r} "
                          f"({twin[1]['checkpoint']}) are one run twice: same settings, seed and run folder; list "
                          f"one of them")
    for a in arms:  # features that do not combine (lab/measure/combine.py's table), before any model runs
        check_arm(a)
    return arms, base, T


def finetune_log(arm):
    """The fine-tune's eval rows: the run folder's log.jsonl, else the rows stored in the checkpoint. Each row must
    hold what eval.py writes of it (finetune_curves.csv): DataError naming the file and the line otherwise."""
    path = os.path.join(arm['checkpoint'], 'log.jsonl')
    if not os.path.isfile(path):
        return list(arm['ckpt'].get('log') or [])

    def wrong(row):
        number = lambda v: v is None or type(v) in (int, float)  # noqa: E731
        if not (isinstance(row, dict) and type(row.get('iter')) is int and number(row.get('val_loss'))
                and number(row.get('val_loss_beyond_L'))):
            return "not an evaluation row (an integer 'iter'; val_loss and val_loss_beyond_L numbers or null)"
    return read_jsonl(path, "it is the run's log from train.py: rerun that fine-tune, or move the file away to use "
                            "the rows stored in its ckpt.pt", wrong)


def parse_contrasts(text, names):
    """'arm A | arm B; arm C | arm D' -> [(A, B), ...] by display name; each arm given by its id
    ('yarn_s4_beta_fast8_ft100', lab.measure.arms.arm_ids) or its display name ('yarn s=4 β_fast=8 ft100')."""
    ids = dict(zip(arm_ids(names), names))
    pairs = []
    for item in [x.strip() for x in text.split(';') if x.strip()]:
        parts = [p.strip() for p in item.split('|')]
        shape = (f"contrast {item!r} must be two different arms (ids or names) joined by '|', e.g. "
                 f"'yarn_s8_beta_fast8_zero-shot | linear_s8_zero-shot'")
        if len(parts) != 2:
            raise ConfigError(shape)
        for p in parts:
            if p not in names and p not in ids:
                raise ConfigError(f"contrast {item!r}: no arm is named {p!r} or has that id; the arm ids are: "
                                  f"{', '.join(ids)}")
        pair = tuple(p if p in names else ids[p] for p in parts)
        if pair[0] == pair[1]:
            raise ConfigError(shape)
        pairs.append(pair)
    return pairs
