"""
Extend a trained model's context: switch its RoPE to a scaled form (PI, NTK, YaRN, ...) and fine-tune it
briefly at the longer length with train.py's engine.

    python finetune_long.py --init_from=out/char-base --rope_type=yarn --factor=4 --out_dir=out/ft-yarn
    python finetune_long.py --init_from=out/char-base --rope_type=yarn --max_iters=0 --out_dir=out/zs-yarn
    python finetune_long.py config/finetune_long_char_cpu.py      # every method + the plain control
    python finetune_long.py --init_from=resume --out_dir=out/ft-yarn   # continue an interrupted run (or sweep)

Several arms (--rope_type=linear,ntk,yarn:beta_fast=8, --plain=True) or seeds (--seeds=1337,1338) write one folder
per run under out_dir and out_dir/arms.json (lab/engine/sweep.py); every arm starts from the same weights with the same seed,
data order and steps. --rope_type=keep fine-tunes the init checkpoint's own rope_scaling (a search_longrope.py run).
--pose=True trains on PoSE windows (Zhu et al. 2023: lab/pose.py): pose_len tokens whose position ids skip forward.
--attention=logpos and --learned_freqs=True switch on Mistral Large 4's learned position parts in every arm (a per-head
log-position query scale, RoPE's frequencies times exp(alpha)), the base's model at init: learned in the fine-tune.
"""

import os

from configurator import ConfigError, get_config
from lab.engine.cli import cli
from lab.engine.device import ddp_ranks
from lab.engine import sweep
from data.checkpoints import checkpoint_ref, load_checkpoint, model_from_checkpoint
from rope_config import all_type_keys
from lab.measure.arm_specs import check_over_trained_in, trained_in
from lab.engine.ddp import in_group
from lab.engine.checks import check_settings
from train import DEFAULTS as TRAIN_DEFAULTS, load_data, run_config, train

DEFAULTS = dict(
    TRAIN_DEFAULTS,
    init_from='',            # the base run folder (from train.py), or 'resume' to continue out_dir
    out_dir='out/finetune',
    dataset='',              # empty: the base run's dataset
    rope_type='yarn',        # one type or a comma list: linear,ntk,ntk_by_parts,yarn:beta_fast=8,llama3,...
                             # or keep: the init checkpoint's own rope_scaling, and its factor
    plain=False,             # add the control arm 'default' (unscaled RoPE, just training at the longer length)
    factor=0.0,              # s = new length / L; 0: 4 (with rope_type=keep: the checkpoint's own)
    block_size=0,            # the new training length; 0 means factor x L
    attention=None,          # None: the base's; logpos: a learned log-position query scale (lab/temperature.py)
    learned_freqs=None,      # None: the base's; True: learned RoPE frequencies, theta * exp(alpha) (model.py)
    seeds='',                # several seeds per arm, e.g. 1337,1338,1339 (one folder each); '' = just --seed
    # per-type settings from rope_config.py's table (None: that type's default); each goes to the types using it
    **{key: None for key in all_type_keys()},
    # the YaRN paper's recipe, scaled down: short warm-up, low constant learning rate, no weight decay
    max_iters=100, learning_rate=3e-4, warmup_iters=20, decay_lr=False, weight_decay=0.0,
    batch_size=8, eval_interval=20, eval_iters=8,
)


def extended_model(base, base_path, scaling, L, T, layers=None, switched=None):
    """(model, lineage) of a base checkpoint switched to `scaling` (None: unscaled) for training or scoring at T:
    what finetune_long.py fine-tunes and search_longrope.py writes. The base path is stored absolute. layers: a new
    layer pattern on the same weights (--layers=4*nope removes RoPE: DroPE's recalibration, at T = L). switched:
    learned parts switched on over the base at their init (sweep.switched_on), the only weights the base lacks."""
    model = model_from_checkpoint(base, **({} if layers is None else {'layers': layers}), **(switched or {}))
    model.set_rope_scaling(scaling)  # context extension by RoPE scaling: the same weights, new rotation frequencies
    model.config.block_size = T
    searched = {k: v for k, v in (base.get('lineage') or {}).items() if k == 'search_objective'}  # (LongRoPE2's)
    return model, dict(train_len=L, seq_len=T, base_checkpoint=checkpoint_ref(base_path),
                       rope_type=scaling['rope_type'] if scaling else 'default',
                       factor=scaling['factor'] if scaling else None, finetune_steps=0, **searched)


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    resuming = sweep.resumes(cfg)
    if cfg['init_from'] == 'resume' and not resuming:  # one arm, with its own stored settings
        cfg, ckpt = run_config(argv, DEFAULTS)
        train(cfg, ckpt=ckpt)
        return
    if resuming:  # a sweep: its stored settings, the command line on top; runs with a checkpoint continue
        cfg = sweep.stored_config(argv, DEFAULTS, cfg['out_dir'])
    if not cfg['init_from']:
        raise ConfigError("pass --init_from=<run folder of the base model> (or --init_from=resume)")
    base = load_checkpoint(cfg['init_from'])
    L, T, plan = sweep.plan_arms(cfg, base, resuming)  # every (arm, seed): its folder, RoPE and settings
    own = trained_in(base)
    for arm in plan:  # a rope type trained into the base (p-RoPE, clipped) is kept, not replaced: one line otherwise
        check_over_trained_in(own, arm.scaling, f"init_from={cfg['init_from']}", f"--rope_type arm {arm.name!r}",
                              "fine-tune its own with --rope_type=keep (no --plain; --block_size=T for the length)")
    check_settings(plan[0].cfg, ddp_ranks()[1])  # train.py's checks, then the arms against the data and the model:
    sweep.check_run(cfg, base, plan, *load_data(plan[0].cfg, T)[:2])  # all before anything is written
    record = sweep.Sweep(cfg, L, T, plan)  # arms.json, for more than one run
    for arm in plan:
        record.start(arm)
        if resuming and os.path.isfile(os.path.join(arm.cfg['out_dir'], 'ckpt.pt')):
            row = train(dict(arm.cfg, init_from='resume'))
        else:
            model, lineage = extended_model(base, cfg['init_from'], arm.scaling, L, T, arm.cfg['layers'], arm.switched)
            row = train(arm.cfg, model=model, lineage=lineage)
        record.done(arm, row)
    record.report()


if __name__ == '__main__':
    cli(in_group(main))
