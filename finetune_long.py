"""
Extend a trained model's context: switch its RoPE to a scaled form (PI, NTK, YaRN, ...) and fine-tune it
briefly at the longer length with train.py's engine.

    python finetune_long.py --init_from=out/char-base --rope_type=yarn --factor=4 --out_dir=out/ft-yarn
    python finetune_long.py --init_from=out/char-base --rope_type=yarn --max_iters=0 --out_dir=out/zs-yarn
    python finetune_long.py --init_from=out/char-base --rope_type=yarn --pose=True --out_dir=out/ft-yarn-pose
    python finetune_long.py config/finetune_long_char_cpu.py      # every method + the plain control
    python finetune_long.py --init_from=resume --out_dir=out/ft-yarn   # continue an interrupted arm
    python finetune_long.py --init_from=resume --out_dir=out/char-ft   # ... or every arm of a multi-arm run
    python finetune_long.py --init_from=out/longrope-s4 --rope_type=keep --out_dir=out/ft-longrope  # searched factors

One arm (one rope type) writes its run into out_dir. Several arms (--rope_type=linear,ntk,yarn:beta_fast=8 or
--plain=True) write one folder per arm under out_dir plus out_dir/arms.json; every arm starts from the same
weights with the same seed, data order and steps, so the comparison is apples to apples.
--rope_type=keep fine-tunes the init checkpoint's own rope_scaling at its own factor (a run of search_longrope.py,
whose per-pair lists do not fit in an arm spec; --short_factor=[...] --long_factor=[...] also make a longrope arm).

PoSE (--pose=True, Zhu et al. 2023): every arm trains on windows of pose_len tokens (0: the base's L), each two
chunks of text with the second chunk's text and position ids skipped forward at random, as the authors' code does
(lab/pose.py); its evaluations still run the full new length with ordinary positions. Arms are named '<method> pose'
('yarn s=4 pose').
"""

import json
import os

from configurator import ConfigError, autocast_context, check_seed, cli, ddp_ranks, get_config, pick_device
from data.common import DataError, atomic_write_text, check_vocab, read_json
from lab import copy_mix
from model import checkpoint_args, load_checkpoint, train_len
from rope_config import all_type_keys, parse_arms, rope_inv_freq, scaling_name, slug
from train import DEFAULTS as TRAIN_DEFAULTS, check_settings, extended_model, load_data, run_config, train

DEFAULTS = dict(
    TRAIN_DEFAULTS,
    init_from='',            # the base run folder (from train.py), or 'resume' to continue out_dir
    out_dir='out/finetune',
    dataset='',              # empty: the base run's dataset
    rope_type='yarn',        # one type or a comma list: linear,ntk,ntk_by_parts,yarn:beta_fast=8,llama3,...
                             # or keep: the init checkpoint's own rope_scaling, and its factor
    plain=False,             # add the control arm 'default' (unscaled RoPE, just training at the longer length)
    factor=4.0,              # s = new length / L
    block_size=0,            # the new training length; 0 means factor x L
    seeds='',                # several seeds per arm, e.g. 1337,1338,1339 (one folder each); '' = just --seed
    # per-type settings from rope.py's table (None: that type's default); each goes to the listed types using it
    **{key: None for key in all_type_keys()},
    # the YaRN paper's recipe, scaled down: short warm-up, low constant learning rate, no weight decay
    max_iters=100, learning_rate=3e-4, warmup_iters=20, decay_lr=False, weight_decay=0.0,
    batch_size=8, eval_interval=20, eval_iters=8,
)
MODEL_KEYS = ('n_layer', 'n_head', 'n_embd', 'dropout', 'bias', 'pos_emb', 'rope_base', 'attention')


def parse_seeds(cfg):
    """--seeds=1337,1338 -> [1337, 1338]; '' -> [--seed]. Every entry a distinct whole number in [0, 2**63)."""
    try:
        seeds = [int(x) for x in cfg['seeds'].split(',')] if cfg['seeds'].strip() else [cfg['seed']]
    except ValueError:
        raise ConfigError(f"seeds={cfg['seeds']!r} should be whole numbers separated by commas, like 1337,1338,1339") from None
    if len(set(seeds)) < len(seeds):
        raise ConfigError(f"seeds={cfg['seeds']!r} lists a seed twice; list each once")
    for seed in seeds:
        check_seed(seed, f"seeds={cfg['seeds']!r}: seed" if cfg['seeds'] else 'seed')
    return seeds


def plan_arms(cfg, base, resuming=False):
    """Validate everything and return [(name, folder, seed, rope_scaling, run_cfg), ...] before any training;
    folder is relative to out_dir ('' for a single arm with a single seed)."""
    args = checkpoint_args(base)
    if args['pos_emb'] != 'rope':
        raise ConfigError(f"{cfg['init_from']} uses pos_emb={args['pos_emb']!r}; context extension needs a rope model")
    L = train_len(base)
    if cfg['factor'] < 1:
        raise ConfigError(f"factor={cfg['factor']} must be >= 1 (the new length over L={L})")
    if cfg['rope_type'] == 'keep':  # e.g. a searched longrope run: its scaling as it is, at its own factor
        if cfg['plain']:
            raise ConfigError("rope_type=keep fine-tunes the checkpoint's own RoPE scaling alone; drop --plain=True")
        given = [k for k in all_type_keys() if cfg[k] is not None]
        own = (args['rope_scaling'] or {}).get('factor')
        if given or cfg['factor'] not in (DEFAULTS['factor'], own):
            raise ConfigError(f"rope_type=keep uses the checkpoint's own rope_scaling (factor {own}); "
                              f"--{(given or ['factor'])[0]} would be ignored: drop it, or name a rope type instead")
        arms, factor = [(scaling_name(args['rope_scaling']), args['rope_scaling'])], \
            (args['rope_scaling'] or {}).get('factor', cfg['factor'])
    else:
        spec = ('default,' if cfg['plain'] else '') + cfg['rope_type']
        arms, factor = parse_arms(spec, cfg['factor'], L, flags={k: cfg[k] for k in all_type_keys()}), cfg['factor']
    T = cfg['block_size'] or round(factor * L)
    if T < L:
        raise ConfigError(f"block_size={T} is shorter than the base model's training length L={L}; "
                          f"pass a longer --block_size or leave it 0 for factor x L")
    if cfg['pose']:
        arms = [(name + ' pose', sc) for name, sc in arms]
    run_cfg = dict(cfg, block_size=T, init_from='scratch', dataset=cfg['dataset'] or base['dataset']['dataset'],
                   pose_len=(cfg['pose_len'] or L) if cfg['pose'] else 0, **{k: args[k] for k in MODEL_KEYS})
    check_settings(run_cfg, ddp_ranks()[1])
    check_run(cfg, run_cfg, base, args, arms, T)
    seeds = parse_seeds(cfg)
    folder = lambda name, seed: '/'.join(p for p in (slug(name) if len(arms) > 1 else '', f'seed{seed}' if len(seeds) > 1 else '') if p)
    plan = [(name, folder(name, seed), seed, scaling,
             dict(run_cfg, seed=seed, out_dir=os.path.join(cfg['out_dir'], folder(name, seed))))
            for name, scaling in arms for seed in seeds]
    for *_, run_cfg in plan:
        run_dir = run_cfg['out_dir']
        if os.path.exists(os.path.join(run_dir, 'ckpt.pt')) and not (cfg['overwrite'] or resuming):
            raise ConfigError(f"{run_dir} already holds a run; pass --overwrite=True to replace it or another --out_dir")
        if resuming and os.path.exists(os.path.join(run_dir, 'ckpt.pt')):
            load_checkpoint(run_dir)  # a torn arm is named now, not after the arms before it have trained again
    return L, T, plan


def check_run(cfg, run_cfg, base, args, arms, T):
    """What train() would refuse only once arms.json is written and earlier arms have trained: the device and number
    format, the data (its vocabulary, room for T tokens, a held-out document longer than T), the copy spans against the
    window trained, and each arm's RoPE config against the model (a per-pair list must have head_dim / 2 values)."""
    autocast_context(pick_device(cfg['device']).split(':')[0], cfg['dtype'], training=True)
    data_dir, meta, _, _ = load_data(run_cfg, T)
    check_vocab(base['dataset'], meta, data_dir, cfg['init_from'])
    longest = max(end - start for _, start, end in meta['docs']['val'])
    if longest <= T + 1:  # evaluation windows of T + 1 tokens lie inside one held-out document
        raise ConfigError(f"block_size={T} does not fit in a held-out document of {data_dir} (the longest has "
                          f"{longest} tokens; evaluation needs T + 1 inside one); lower --factor or --block_size")
    copy_mix.settings(run_cfg, meta, run_cfg['pose_len'] or T)  # the copy spans must fit the window trained
    for name, scaling in arms:
        try:
            rope_inv_freq(args['n_embd'] // args['n_head'], args['rope_base'], scaling)
        except ValueError as e:
            raise ConfigError(f"arm {name!r} does not fit the model of {cfg['init_from']}: {e}") from None


def stored_config(arms_file, argv):
    """The settings a multi-arm run was started with (its arms.json), with argv on top; DataError naming the file."""
    fix = "rerun finetune_long.py with the run's settings (and --overwrite=True), or pass another --out_dir"
    stored = read_json(arms_file, fix)
    stored = stored.get('config') if isinstance(stored, dict) else None
    if not isinstance(stored, dict) or not isinstance(stored.get('init_from'), str) or \
            not isinstance(stored.get('out_dir'), str):
        raise DataError(f"{arms_file} has no 'config' object with init_from and out_dir; {fix}")
    return dict(get_config(argv, DEFAULTS, start={**DEFAULTS, **stored}, source=arms_file),
                init_from=stored['init_from'])


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    arms_file = os.path.join(cfg['out_dir'], 'arms.json')
    resuming = cfg['init_from'] == 'resume' and os.path.isfile(arms_file) and \
        not os.path.isfile(os.path.join(cfg['out_dir'], 'ckpt.pt'))
    if resuming:  # several arms: the stored settings, the command line on top; finished arms are kept
        cfg = stored_config(arms_file, argv)
    elif cfg['init_from'] == 'resume':  # one arm, with its own stored settings
        cfg, ckpt = run_config(argv, DEFAULTS)
        train(cfg, ckpt=ckpt)
        return
    if not cfg['init_from']:
        raise ConfigError("pass --init_from=<run folder of the base model> (or --init_from=resume)")
    base = load_checkpoint(cfg['init_from'])
    L, T, plan = plan_arms(cfg, base, resuming)
    arms = [dict(name=name, folder=folder, rope_scaling=scaling, steps=cfg['max_iters'], seed=seed)
            for name, folder, seed, scaling, _ in plan]

    def write_arms():  # written before the first arm, so an interrupted run can be resumed as a whole
        atomic_write_text(arms_file, json.dumps({'base': cfg['init_from'], 'train_len': L, 'seq_len': T,
                                                 'arms': arms, 'config': cfg}, indent=2, ensure_ascii=False) + '\n')
    if len(plan) > 1:
        os.makedirs(cfg['out_dir'], exist_ok=True)
        write_arms()
    for arm, (name, _, seed, scaling, run_cfg) in zip(arms, plan):
        run_dir = run_cfg['out_dir']
        print(f"== arm {name!r} (seed {seed}): L={L} -> {T}, {cfg['max_iters']} steps -> {run_dir}")
        if resuming and os.path.isfile(os.path.join(run_dir, 'ckpt.pt')):
            row = train(dict(run_cfg, init_from='resume'))
        else:
            model, lineage = extended_model(base, cfg['init_from'], scaling, L, T)
            row = train(run_cfg, model=model, lineage=lineage)
        arm.update(val_loss=row['val_loss'], val_loss_beyond_L=row['val_loss_beyond_L'])
        if len(plan) > 1:
            write_arms()
    print(f"{'arm':28s} {'seed':>5s} {'val loss':>9s} {'beyond L':>9s}")
    for r in arms:
        print(f"{r['name']:28s} {r['seed']:5d} {r['val_loss']:9.4f} {r['val_loss_beyond_L'] or float('nan'):9.4f}")


if __name__ == '__main__':
    cli(main)
