"""
A fine-tune sweep (finetune_long.py): every arm (a RoPE config) x every seed, planned and checked before anything
trains, one run folder each (out_dir/<arm>/seed<n>, or out_dir itself for a single run), and out_dir/arms.json, written
before the first run and after each, so an interrupted sweep resumes as a whole: runs with a checkpoint continue from
it, the others start from the base. Every arm starts from the same weights with the same seed, data order and steps.

    plan_arms   the runs: [Arm(name, folder, seed, rope_scaling, the settings train() gets)]
    check_run   what train() would refuse only after earlier arms have trained
    Sweep       arms.json and the table printed at the end
"""
import json
import os
from dataclasses import dataclass

from configurator import ConfigError, check_seed, get_config
from lab.engine.device import autocast_context, ddp_ranks, pick_device
from data.common import DataError, atomic_write_text, check_vocab, read_json
from data.checkpoints import checkpoint_args, load_checkpoint, train_len
from lab.engine import batches
from lab.measure.arm_specs import learned_tag, parse_arms, scaling_name, slug
from lab.engine.checks import MODEL_KEYS
from model import ATTENTION_ROOMS, GPTConfig, attention_class
from rope_config import all_type_keys, rope_inv_freq

DEFAULT_FACTOR = 4.0  # s when --factor is not given (0)


@dataclass
class Arm:
    """One run of a sweep: an arm (its name and rope_scaling, None: unscaled RoPE) at one seed."""
    name: str
    folder: str   # relative to out_dir ('' for a single arm with a single seed)
    seed: int
    scaling: dict
    cfg: dict     # the settings train() runs it with
    switched: dict = None  # model settings switched on over the base's (switched_on), {} or None: none


def resumes(cfg):
    """--init_from=resume of a whole sweep: out_dir holds arms.json and no run of its own."""
    out = cfg['out_dir']
    return cfg['init_from'] == 'resume' and os.path.isfile(os.path.join(out, 'arms.json')) and \
        not os.path.isfile(os.path.join(out, 'ckpt.pt'))


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


def rope_arms(cfg, args, L):
    """([(name, rope_scaling)], the factor s) of the settings, for a base of model args `args` trained at L."""
    if cfg['factor'] and not cfg['factor'] >= 1:
        raise ConfigError(f"factor={cfg['factor']} must be >= 1 (the new length over L={L})")
    if cfg['rope_type'] != 'keep':
        factor = cfg['factor'] or DEFAULT_FACTOR
        spec = ('default,' if cfg['plain'] else '') + cfg['rope_type']
        return parse_arms(spec, factor, L, flags={k: cfg[k] for k in all_type_keys()}), factor
    if cfg['plain']:  # keep: e.g. a searched longrope run, its scaling as it is, at its own factor
        raise ConfigError("rope_type=keep fine-tunes the checkpoint's own RoPE scaling alone; drop --plain=True")
    own = (args['rope_scaling'] or {}).get('factor')
    ignored = [f'--{k}={cfg[k]}' for k in all_type_keys() if cfg[k] is not None] + \
        [f"--factor={cfg['factor']}"] * (cfg['factor'] not in (0, own))
    if ignored:
        raise ConfigError(f"rope_type=keep uses the checkpoint's own rope_scaling (factor {own}); {ignored[0]} would "
                          f"be ignored: drop it, or name a rope type instead")
    return [(scaling_name(args['rope_scaling']), args['rope_scaling'])], own or DEFAULT_FACTOR


def switched_on(cfg, args):
    """{setting: value} of what --attention and --learned_freqs switch on over a base of model args `args` (None,
    or the base's own value: nothing): Mistral Large 4's two learned position parts, each the base's function at its
    init and learned from there: the log-position query scale (--attention=logpos over causal, smear_keys_logpos
    over smear_keys: scale 0, bias 1) and learned RoPE frequencies (--learned_freqs=True: alpha 0). Anything else
    is refused in one line."""
    out, att, own = {}, cfg.get('attention'), args.get('attention') or 'causal'
    if att not in (None, own):
        want = 'logpos' if own == 'causal' else f'{own}_logpos'
        if att != want or want not in ATTENTION_ROOMS:
            raise ConfigError(f"--attention={att!r} over {cfg['init_from']} (attention={own!r}): a fine-tune "
                              f"switches on only the log-position query scale, the base's model at init ("
                              + (f"--attention={want}" if want in ATTENTION_ROOMS else f"none for {own!r}")
                              + f"); train attention={att!r} from scratch with train.py")
        out['attention'] = att
    learned, own = cfg.get('learned_freqs'), bool(args.get('learned_freqs'))
    if learned is not None and not isinstance(learned, bool):
        raise ConfigError(f"learned_freqs={learned!r} should be True or False (None: the base's)")
    if learned not in (None, own):
        if not learned:
            raise ConfigError(f"--learned_freqs=False over {cfg['init_from']}, whose RoPE frequencies were "
                              f"learned: dropping its alpha would change the model; drop --learned_freqs")
        out['learned_freqs'] = True
    return out


def plan_arms(cfg, base, resuming=False):
    """(L, T, [Arm, ...]) of a sweep from the base checkpoint `base`, checked before any training (train.py's own checks
    of the settings and the data, and check_run, come next)."""
    args = checkpoint_args(base)
    if args['pos_emb'] != 'rope':
        raise ConfigError(f"{cfg['init_from']} uses pos_emb={args['pos_emb']!r}; context extension needs a rope model")
    L = train_len(base)
    arms, factor = rope_arms(cfg, args, L)
    switched = switched_on(cfg, args)  # (--attention=logpos, --learned_freqs=True: on in every arm)
    T = cfg['block_size'] or round(factor * L)
    if T < L:
        raise ConfigError(f"block_size={T} is shorter than the base model's training length L={L}; "
                          f"pass a longer --block_size or leave it 0 for factor x L")
    learned = learned_tag({**args, **switched}, cfg)  # (its name as eval.py will give it: ' learned-freqs logpos')
    arms = [(name + learned, sc) for name, sc in arms]
    if cfg['pose']:
        arms = [(name + (' pose random' if cfg['pose_ids'] == 'random' else ' pose'), sc) for name, sc in arms]
    run_cfg = dict(cfg, block_size=T, factor=factor, init_from='scratch', dataset=cfg['dataset'] or
                   base['dataset']['dataset'], pose_len=(cfg['pose_len'] or L) if cfg['pose'] else 0,
                   **{k: switched.get(k, args.get(k)) for k in MODEL_KEYS  # the base's model, with what the command
                      if k not in ('rope_scaling', 'layers')},               # line switches on over it (switched_on)
                   layers=args.get('layers') if cfg['layers'] is None else cfg['layers'])  # (a new pattern: DroPE)
    seeds = parse_seeds(cfg)
    folder = lambda name, seed: '/'.join(p for p in (slug(name) if len(arms) > 1 else '', f'seed{seed}' if len(seeds) > 1 else '') if p)
    plan = [Arm(name, folder(name, seed), seed, scaling,
                dict(run_cfg, seed=seed, out_dir=os.path.join(cfg['out_dir'], folder(name, seed))), switched)
            for name, scaling in arms for seed in seeds]
    for arm in plan:
        run_dir = arm.cfg['out_dir']
        if os.path.exists(os.path.join(run_dir, 'ckpt.pt')) and not (cfg['overwrite'] or resuming):
            raise ConfigError(f"{run_dir} already holds a run; pass --init_from=resume to continue it (a run that was "
                              f"stopped), --overwrite=True to replace it, or another --out_dir")
        if resuming and os.path.exists(os.path.join(run_dir, 'ckpt.pt')):
            load_checkpoint(run_dir)  # a torn arm is named now, not after the arms before it have trained again
    return L, T, plan


def check_run(cfg, base, plan, data_dir, meta):
    """What train() would refuse only once arms.json is written and earlier arms have trained: the device and number
    format, the data (its vocabulary, a held-out document longer than T), PoSE and the copy spans against the window
    trained, pos_lr_scale against a model without learned position parts, and each arm's RoPE config against
    the model (a per-pair list must have one value per pair that turns)."""
    run_cfg, args, T = plan[0].cfg, checkpoint_args(base), plan[0].cfg['block_size']
    autocast_context(pick_device(cfg['device']).split(':')[0], cfg['dtype'], training=True)
    if cfg.get('rope_scaling') is not None:  # train.py's setting (a rope type trained in); here the arms set it
        raise ConfigError(f"rope_scaling={cfg['rope_scaling']!r} is train.py's (trained in from scratch); "
                          f"finetune_long.py sets each arm's RoPE with --rope_type (e.g. --rope_type=proportional)")
    check_vocab(base['dataset'], meta, data_dir, cfg['init_from'])
    cls = attention_class(run_cfg['attention'] or 'causal')  # (its position_params, as model.configure_optimizers reads)
    if run_cfg['pos_lr_scale'] != 1 and not (run_cfg['learned_freqs'] or getattr(cls, 'position_params', ())):
        raise ConfigError(f"--pos_lr_scale={run_cfg['pos_lr_scale']:g} scales the learning rate of learned position "
                          f"parts, and the model of {cfg['init_from']} has none; add --learned_freqs=True or "
                          f"--attention=logpos, or drop it")
    longest = max(end - start for _, start, end in meta['docs']['val'])
    if longest <= T + 1:  # evaluation windows of T + 1 tokens lie inside one held-out document
        raise ConfigError(f"block_size={T} does not fit in a held-out document of {data_dir} (the longest has "
                          f"{longest} tokens; evaluation needs T + 1 inside one); lower --factor or --block_size")
    batches.check(run_cfg, meta, train_len(base))
    c = GPTConfig(**args)
    for arm in plan:
        try:  # (a partial rotation: the method runs on the rotary dims, a per-pair list has one value per turning pair)
            rope_inv_freq(c.n_embd // c.n_head, c.rope_base, arm.scaling, None, c.rotary_dim)
        except ValueError as e:
            raise ConfigError(f"arm {arm.name!r} does not fit the model of {cfg['init_from']}: {e}") from None


def stored_config(argv, defaults, out_dir):
    """The settings a sweep was started with (its arms.json), with argv on top; DataError naming the file."""
    arms_file = os.path.join(out_dir, 'arms.json')
    fix = "rerun finetune_long.py with the run's settings (and --overwrite=True), or pass another --out_dir"
    stored = read_json(arms_file, fix)
    stored = stored.get('config') if isinstance(stored, dict) else None
    if not isinstance(stored, dict) or not isinstance(stored.get('init_from'), str) or \
            not isinstance(stored.get('out_dir'), str):
        raise DataError(f"{arms_file} has no 'config' object with init_from and out_dir; {fix}")
    return dict(get_config(argv, defaults, start={**defaults, **stored}, source=arms_file),
                init_from=stored['init_from'])


class Sweep:
    """The record of a sweep on rank 0: out_dir/arms.json when it has more than one run (written now, so an interrupted
    sweep can be resumed as a whole, and after every run), the line before each run and the table at the end."""

    def __init__(self, cfg, L, T, plan):
        self.cfg, self.L, self.T, self.plan, self.master = cfg, L, T, plan, ddp_ranks()[0] == 0
        self.rows = [dict(name=a.name, folder=a.folder, rope_scaling=a.scaling, steps=cfg['max_iters'], seed=a.seed)
                     for a in plan]
        self.write()

    def write(self):
        if len(self.plan) > 1 and self.master:
            os.makedirs(self.cfg['out_dir'], exist_ok=True)
            atomic_write_text(os.path.join(self.cfg['out_dir'], 'arms.json'), json.dumps(
                {'base': self.cfg['init_from'], 'train_len': self.L, 'seq_len': self.T, 'arms': self.rows,
                 'config': self.cfg}, indent=2, ensure_ascii=False) + '\n')

    def start(self, arm):
        if self.master:
            print(f"== arm {arm.name!r} (seed {arm.seed}): L={self.L} -> {self.T}, {self.cfg['max_iters']} steps -> "
                  f"{arm.cfg['out_dir']}")

    def done(self, arm, row):
        self.rows[self.plan.index(arm)].update(val_loss=row['val_loss'], val_loss_beyond_L=row['val_loss_beyond_L'])
        self.write()

    def report(self):
        if self.master:
            print(f"{'arm':28s} {'seed':>5s} {'val loss':>9s} {'beyond L':>9s}")
            for r in self.rows:
                beyond = r['val_loss_beyond_L'] or float('nan')
                print(f"{r['name']:28s} {r['seed']:5d} {r['val_loss']:9.4f} {beyond:9.4f}")
