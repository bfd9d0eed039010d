"""
LongRoPE's search (Ding et al. 2024) on a trained model: one rescale factor per RoPE pair for a target scale s,
found by an evolutionary search that scores each candidate by the loss at s x L (forward passes only, no
gradient), written as a run that eval.py evaluates and finetune_long.py fine-tunes.

    python search_longrope.py --init_from=out/char-base --factor=8 --out_dir=out/longrope-s8
    python search_longrope.py --init_from=resume --out_dir=out/longrope-s8 --search_generations=16  # continue/extend
    python eval.py --ckpt=out/char-base,out/longrope-s8 --rope_types=yarn:beta_fast=8 --eval_len=1024
    python finetune_long.py --init_from=out/longrope-s8 --rope_type=keep --out_dir=out/ft-longrope-s8

Candidate: long_factor f (f_i = theta_i / theta'_i), non-decreasing from the fastest pair to the slowest
(f_i >= f_{i-1}: a slower pair is never squeezed less than a faster one) and inside [1, 1.25 s], the paper's
search space, together with n-hat (start_token_idx): the first n-hat positions keep plain RoPE (the paper's
retained start tokens), drawn from search_start_tokens (the paper's {0, 1, 2, 4, ..., 256}; '0' searches f alone).
short_factor stays all 1, as for a base model used at lengths <= L; every candidate runs with LongRoPE's temperature
sqrt(1 + ln s / ln L) (rope.longrope_attention_factor) on the positions >= n-hat.
Score: mean next-token loss over search_windows fixed windows of s x L tokens, drawn (seeded, each inside one
document) from the TRAINING split (meta['docs']['train'] and the train tokens). The held-out plays are never looked
at by the search; only the run written at the end is evaluated on them, once (train.py's row in log.jsonl).
Search: the reference implementation's (microsoft/LongRoPE evolution/, dim_mono; details in lab/longrope_search.py).
Generation 0 is the search_seeds curves (PI, NTK, YaRN written as per-pair factors, n-hat 0) plus mutants of them,
search_population in all. Every later generation keeps the search_parents best candidates so far and adds
search_population - search_parents children: a share search_crossover by crossover, the rest by mutation (each
factor redrawn with probability search_mutation from the search_grid steps between its neighbours, n-hat from its
set). Candidates that are not non-decreasing or were scored before are rejected and redrawn, so every one scored is
new, and the best score cannot get worse from one generation to the next.
Budgets: the defaults are the demo's (16 + 5 x 8 = 56 candidates on 16 windows, under a minute on 2 cores);
config/studies/search_longrope_ref.py is the reference's (population 64, 32 parents, 40 generations: 64 + 40 x 32 = 1344).
Hugging Face's longrope has no n-hat: lab/hf/export.py refuses a run with start_token_idx > 0.

Outputs in out_dir: search.jsonl (one row per generation: best loss, where it came from, cost so far),
search_state.json (every candidate and its score, rewritten atomically after each generation; --init_from=resume
continues from it and reaches the same result), then ckpt.pt and log.jsonl as `finetune_long.py --max_iters=0`
writes them: the base weights with the best rope_scaling, lineage rope_type 'longrope', factor s, finetune_steps 0,
and train.py's one evaluation row on held-out windows (for eval.py; the search did not use it).
"""

import json
import math
import os
import time

import numpy as np


from configurator import ConfigError, get_config
from lab.engine.cli import cli
from lab.engine.checks import check_out_dir
from lab.engine.device import setup_device
from data.common import DataError, atomic_write_text, check_vocab, doc_windows, read_json
from data.checkpoints import load_checkpoint, model_from_checkpoint, train_len
from lab.longrope_search import UPPER, longrope_scaling, needle_rows, parse_start_tokens, search, seed_curves
from lab.measure.scoring import score
from model import GPTConfig
from lab.measure.arm_specs import parse_arms
from finetune_long import extended_model
from train import DEFAULTS as TRAIN_DEFAULTS, estimate_loss, load_data, train

DEFAULTS = dict(
    init_from='',             # the base run folder (from train.py), or 'resume' to continue the search in out_dir
    out_dir='out/longrope',
    dataset='',               # empty: the base run's dataset
    factor=8.0,               # the target scale s: candidates are scored at s x L tokens
    search_population=16,     # candidates per generation (the paper's P; the reference 64)
    search_parents=8,         # the best candidates kept as parents from one generation to the next (top-k; ref. 32)
    search_generations=5,     # generations after the initial population (the reference's iterations: 40)
    search_mutation=0.3,      # probability that a gene (a factor, n-hat) is redrawn, in mutation and crossover (ref.)
    search_crossover=0.5,     # share of the children made by crossover, the rest by mutation (ref. 16 + 16)
    search_crossover_tries=20,  # passes over the genes before a crossover gives up (ref. max_crossover_try)
    search_grid=0.01,         # a redrawn factor is its lower neighbour + a whole number of these steps (ref. list_step)
    search_start_tokens='0,1,2,4,8,12,16,20,24,28,32,64,128,256',  # n-hat's candidates (the paper's); '0': not searched
    search_windows=16,        # training windows of s x L tokens that score a candidate
    search_objective='loss',  # loss: every token's (LongRoPE); needle: the answer tokens of needles planted past L
                              # in those windows (LongRoPE2's needle-driven objective)
    search_seeds='linear,ntk,yarn,yarn:beta_fast=8',  # generation 0's curves, as arm specs (default s, L)
    batch_size=8,             # windows per forward
    eval_iters=8,             # held-out batches of the final checkpoint's one evaluation (train.py's)
    seed=1337, device='auto', dtype='auto', progress=True,
    overwrite=False,          # start afresh over an earlier search in out_dir
)
FIX = ("it was not written by this search or was edited: restore it, or start afresh with --init_from=<base run "
       "folder> --overwrite=True")
RESUMABLE = ('init_from', 'search_generations', 'batch_size', 'eval_iters', 'device', 'progress', 'overwrite')
STATE, LOG = 'search_state.json', 'search.jsonl'

# ----------------------------------------------------------------------------- settings, state, scoring


def settings(argv):
    """(settings, the stored search state or None). With --init_from=resume: the stored settings, then argv on top;
    only the RESUMABLE ones may change (search_generations can grow to extend a finished search)."""
    cfg = get_config(argv, DEFAULTS)
    out_dir, path = cfg['out_dir'], os.path.join(cfg['out_dir'], STATE)
    if cfg['init_from'] != 'resume':
        if not cfg['init_from']:
            raise ConfigError("pass --init_from=<run folder of the base model> (or --init_from=resume)")
        for name in (STATE, 'ckpt.pt'):
            if os.path.exists(os.path.join(out_dir, name)) and not cfg['overwrite']:
                raise ConfigError(f"{out_dir} already holds a run ({name}); pass --init_from=resume to continue the "
                                  f"search, --overwrite=True to replace it, or another --out_dir")
        return dict(cfg, init_from=os.path.abspath(cfg['init_from'])), None  # stored absolute: found from anywhere
    if not os.path.isfile(path):
        raise ConfigError(f"no search to resume in {out_dir}: {path} is missing; start one with "
                          f"--init_from=<base run folder>")
    state = read_json(path, FIX)
    if not isinstance(state, dict) or not isinstance(state.get('config'), dict):
        raise DataError(f"{path} has no 'config' object; {FIX}")
    stored = {**DEFAULTS, **state['config'], 'out_dir': out_dir}  # the search is the folder its state was found in,
    cfg = get_config(argv, DEFAULTS, start=stored, source=path)     # however that folder is spelled or wherever it moved
    changed = [k for k in DEFAULTS if k not in RESUMABLE and cfg[k] != stored[k]]
    if changed:
        raise ConfigError(f"the search in {out_dir} was started with "
                          f"{', '.join(f'{k}={stored[k]!r}' for k in changed)}; a resumed search keeps its settings "
                          f"except {', '.join(RESUMABLE[1:])} (start a new one in another --out_dir)")
    return dict(cfg, init_from=stored['init_from']), state


def check_settings(cfg, n_seeds, T):
    P, k = cfg['search_population'], cfg['search_parents']
    if cfg['search_objective'] not in ('loss', 'needle'):
        raise ConfigError(f"search_objective={cfg['search_objective']!r}: use loss (every token, LongRoPE) or needle "
                          f"(the answer tokens of needles past L, LongRoPE2)")
    if not cfg['factor'] > 1:
        raise ConfigError(f"factor={cfg['factor']} must be > 1: the search scores candidates at factor x L tokens")
    if not 2 <= k < P:
        raise ConfigError(f"search_parents={k} must be at least 2 (crossover takes two) and below "
                          f"search_population={P} (room for children)")
    if n_seeds > P:
        raise ConfigError(f"search_seeds has {n_seeds} curves but search_population={P}; list fewer or raise it")
    for key in ('search_windows', 'batch_size', 'eval_iters', 'search_crossover_tries'):
        if cfg[key] < 1:
            raise ConfigError(f"{key}={cfg[key]} must be a positive integer")
    check_out_dir(cfg['out_dir'])
    if cfg['search_generations'] < 0:
        raise ConfigError(f"search_generations={cfg['search_generations']} must be >= 0 (0: the initial population only)")
    if not (0 < cfg['search_mutation'] <= 1 and 0 < cfg['search_grid'] <= 1 and 0 <= cfg['search_crossover'] <= 1):
        raise ConfigError(f"search_mutation={cfg['search_mutation']} must be in (0, 1], search_grid="
                          f"{cfg['search_grid']} in (0, 1] and search_crossover={cfg['search_crossover']} in [0, 1]")
    try:
        return parse_start_tokens(cfg['search_start_tokens'], T)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def check_state(state, path, cfg, L, T, head_dim):
    """A resumed search's state holds what search() reads, of the right types and lengths, for this base model;
    DataError naming the file and the field otherwise."""
    def bad(what):
        raise DataError(f"{path}: {what}; {FIX}")
    num = lambda v: type(v) in (int, float) and not math.isnan(v)  # noqa: E731 (inf: a candidate that diverged)
    for key, want in (('L', L), ('T', T), ('head_dim', head_dim)):
        if type(state.get(key)) is not int or state[key] != want:
            bad(f"{key} is {state.get(key)!r} but the base model {cfg['init_from']} gives {want}")
    g, log, cands = state.get('generation'), state.get('log'), state.get('candidates')
    if type(g) is not int or g < -1:
        bad(f"generation is {g!r}, not a whole number >= -1")
    if not all(num(state.get(k)) for k in ('elapsed_s', 'cpu_s')):
        bad("elapsed_s and cpu_s must be numbers (seconds)")
    if not isinstance(state.get('references'), dict) or not all(num(v) for v in state['references'].values()):
        bad("references must map the seed arms' names to their losses")
    if not isinstance(log, list) or len(log) != g + 1 or not all(isinstance(r, dict) for r in log):
        bad(f"log must be a list of {g + 1} rows, one per generation done")
    if not isinstance(cands, list) or g >= 0 and not cands:
        bad("candidates must be a list of the candidates scored")
    n, upper = head_dim // 2, UPPER * cfg['factor']
    start_tokens = parse_start_tokens(cfg['search_start_tokens'], T)  # checked by check_settings already
    for i, c in enumerate(cands):
        if not isinstance(c, dict) or type(c.get('generation')) is not int or not isinstance(c.get('origin'), str) \
                or not num(c.get('loss')):
            bad(f"candidates[{i}] lacks an integer generation, an origin or a numeric loss")
        if c.get('start_token_idx') not in start_tokens or type(c['start_token_idx']) is not int:
            bad(f"candidates[{i}].start_token_idx is {c.get('start_token_idx')!r}, not one of search_start_tokens "
                f"({cfg['search_start_tokens']})")
        f = c['long_factor'] if isinstance(c.get('long_factor'), list) else []
        if len(f) != n or not all(num(x) and 1 <= x <= upper for x in f):
            bad(f"candidates[{i}].long_factor must be {n} numbers in [1, {upper:g}] (one per pair of head_dim "
                f"{head_dim})")


def save_state(out_dir, state):
    """search_state.json and search.jsonl, each rewritten atomically."""
    atomic_write_text(os.path.join(out_dir, STATE), json.dumps(state) + '\n')
    atomic_write_text(os.path.join(out_dir, LOG), ''.join(json.dumps(r) + '\n' for r in state['log']))


def main(argv):
    cfg, state = settings(argv)
    base = load_checkpoint(cfg['init_from'])
    args, s = base['model_args'], cfg['factor']
    if args['pos_emb'] != 'rope':
        raise ConfigError(f"{cfg['init_from']} uses pos_emb={args['pos_emb']!r}; the search needs a rope model")
    L = train_len(base)
    T, head_dim = round(s * L), GPTConfig(**args).rotary_dim  # the dims that turn: a partial base's factors are for its turning pairs
    seeds = seed_curves(cfg['search_seeds'], s, L, head_dim, args['rope_base'])
    start_tokens = check_settings(cfg, len(seeds), T)
    if state is not None:
        check_state(state, os.path.join(cfg['out_dir'], STATE), cfg, L, T, head_dim)
    dataset = cfg['dataset'] or base['dataset']['dataset']
    device, _, _, ctx = setup_device(cfg)
    data_dir, meta, train_data, _ = load_data(dict(cfg, dataset=dataset), 1)  # its val split is never used here
    check_vocab(base['dataset'], meta, data_dir, cfg['init_from'])
    for split in ('train', 'val'):  # scored on training windows; the run written is evaluated on held-out ones
        longest = max(end - start for _, start, end in meta['docs'][split])
        if longest <= T + 1:
            raise ConfigError(f"factor={s} x L={L} = {T} tokens (+1) do not fit in a {split} document of {data_dir} "
                              f"(the longest has {longest}); lower --factor")
    starts = doc_windows(meta['docs']['train'], T + 1, cfg['search_windows'], cfg['seed'])
    model = model_from_checkpoint(base).to(device)

    needles = needle_rows(train_data, starts, T, L, meta['vocab_size'], meta['eot_token'], cfg['seed']) \
        if cfg['search_objective'] == 'needle' else None

    def loss_of(scaling):  # mean loss of the base model with this scaling over the fixed training windows
        model.set_rope_scaling(scaling)
        if needles is None:
            loss = estimate_loss(model, train_data, starts, T, L, cfg['batch_size'], device, ctx)[0]
        else:  # the value tokens of the needles only (one forward of each row, as the model reads it)
            model.eval()
            n = needles[0].size(1)
            got = score(model, needles[0], needles[1], ([(1, n)], n), ctx, cfg['batch_size'])[0]
            loss = float(np.mean(np.concatenate(got)))
        return loss if math.isfinite(loss) else math.inf  # ranks last, never best
    os.makedirs(cfg['out_dir'], exist_ok=True)
    if state is None and os.path.exists(os.path.join(cfg['out_dir'], STATE)):  # --overwrite=True: a new search
        os.remove(os.path.join(cfg['out_dir'], STATE))
    if state is None:  # the seed arms as they ship (each with its own temperature), for comparison
        t0, c0 = time.time(), time.process_time()
        refs = {name: loss_of(sc) for name, sc in parse_arms(cfg['search_seeds'], s, L)}
        state = dict(config=cfg, L=L, T=T, head_dim=head_dim, generation=-1, candidates=[], log=[], references=refs,
                     elapsed_s=time.time() - t0, cpu_s=time.process_time() - c0)
    best = search(cfg, state, seeds, lambda f, n_hat: loss_of(longrope_scaling(f, s, L, n_hat)),
                  lambda st: save_state(cfg['out_dir'], st), start_tokens)
    write_run(cfg, base, longrope_scaling(best['long_factor'], s, L, best['start_token_idx']), L, T, dataset)
    print(f"best at s={s:g} (T={T}) on {cfg['search_windows']} training windows: {best['loss']:.4f} with n-hat "
          f"{best['start_token_idx']} ({len(state['candidates'])} candidates, {state['elapsed_s'] / 60:.2f} min, "
          f"{state['cpu_s'] / 60:.2f} CPU min); the seed arms as they ship: "
          + ', '.join(f"{n} {v:.4f}" for n, v in state['references'].items()))
    print(f"{'pair':<18}" + ''.join(f"{i:>7d}" for i in range(head_dim // 2)))
    for name, f in [(f"searched n-hat {best['start_token_idx']}", best['long_factor'])] + seeds:
        print(f"{name[:18]:<18}" + ''.join(f"{x:7.3f}" for x in f))
    return best, state


def write_run(cfg, base, scaling, L, T, dataset):
    """ckpt.pt + log.jsonl through train.py's engine with 0 steps, as finetune_long.py --max_iters=0 writes them."""
    model, lineage = extended_model(base, cfg['init_from'], scaling, L, T)
    if cfg['search_objective'] != 'loss':  # the arm's name says which objective found its factors
        lineage['search_objective'] = cfg['search_objective']
    run_cfg = {**TRAIN_DEFAULTS, **{k: v for k, v in base['model_args'].items() if k in TRAIN_DEFAULTS},
               **{k: cfg[k] for k in ('out_dir', 'batch_size', 'eval_iters', 'seed', 'device', 'dtype', 'progress')},
               'dataset': dataset, 'block_size': T, 'init_from': 'scratch', 'max_iters': 0, 'overwrite': True}
    return train(run_cfg, model=model, lineage=lineage)


if __name__ == '__main__':
    cli(main)
