"""
LongRoPE's search (Ding et al. 2024), the algorithm: candidates are per-pair rescale factors (long_factor), generation 0
is a few formula curves (PI, NTK, YaRN as factors) and their mutants, every later generation keeps the best few and
adds children by crossover and mutation. search_longrope.py runs it on a model (scoring, files, the run it writes).
"""
import math
import os
import time

import numpy as np
from tqdm import tqdm

from rope import ROPE_SCALING, plain_inv_freq
from rope_config import parse_arms

UPPER = 1.25                  # factors lie in [1, UPPER x s] (the paper's search space)


def seed_curves(specs, s, L, head_dim, base):
    """Generation 0's curves: each arm spec as per-pair factors f_i = theta_i / theta'_i at length s x L (float64),
    clipped to [1, UPPER x s]. PI: all s; NTK: s^(2i/(d-2)); YaRN: 1 in the fast band up to s in the slow one."""
    theta = plain_inv_freq(head_dim, base)
    out = []
    for name, sc in parse_arms(specs, s, L):
        # theta' in float64 from the table's function (rope_inv_freq's float32 could make a flat curve wiggle)
        scaled = theta if sc is None else ROPE_SCALING[sc['rope_type']][1](head_dim, base, sc, round(s * L))[0]
        out.append((name, np.clip((theta / scaled).numpy(), 1.0, UPPER * s)))
    return out


def mutate(f, rng, p, step, upper):
    """Each factor moves with probability p (at least one does): f_i x exp(step x N(0, 1)), clipped to [1, upper].
    Its neighbours are pushed along (min with it before, max with it after), so a non-decreasing curve stays so."""
    f = np.array(f, dtype=np.float64)
    hit = rng.random(len(f)) < p
    if not hit.any():
        hit[rng.integers(len(f))] = True
    for i in np.flatnonzero(hit):
        v = float(np.clip(f[i] * math.exp(step * rng.standard_normal()), 1.0, upper))
        f[:i], f[i + 1:], f[i] = np.minimum(f[:i], v), np.maximum(f[i + 1:], v), v
    return f


def crossover(a, b, rng):
    """Each factor from parent a or parent b (probability 1/2), then a running maximum so the child is
    non-decreasing; it stays within the parents' range."""
    return np.maximum.accumulate(np.where(rng.random(len(a)) < 0.5, np.asarray(a), np.asarray(b)))


def children(parents, n, rng, cfg, upper):
    """n new (curve, origin) from the parents: round(search_crossover x n) crossovers of two different parents,
    the rest mutants of one."""
    n_cross = round(cfg['search_crossover'] * n)
    out = []
    for k in range(n):
        if k < n_cross:
            i, j = rng.choice(len(parents), 2, replace=False)
            out.append((crossover(parents[i], parents[j], rng), 'crossover'))
        else:
            f = parents[rng.integers(len(parents))]
            out.append((mutate(f, rng, cfg['search_mutation'], cfg['search_step'], upper), 'mutation'))
    return out


def longrope_scaling(long_factor, s, L):
    """The rope_scaling of a candidate: short factors 1 (plain frequencies up to L; the temperature applies at every
    length, as in Hugging Face), the candidate past L."""
    return {'rope_type': 'longrope', 'factor': float(s), 'original_max_position_embeddings': int(L),
            'short_factor': [1.0] * len(long_factor), 'long_factor': [float(x) for x in long_factor]}

def best_of(cands, k=1):
    """The k lowest-loss candidates (first found wins a tie)."""
    return sorted(cands, key=lambda c: c['loss'])[:k]

def generation(g, state, seeds, cfg):
    """Generation g's new (curve, origin) pairs. 0: the seed curves, then mutants of them in turn up to the
    population; later: children of the search_parents best candidates so far. Drawn from a generator seeded
    with (seed, g), so a resumed search draws what an uninterrupted one would."""
    rng, P, upper = np.random.default_rng([cfg['seed'], g]), cfg['search_population'], UPPER * cfg['factor']
    if g > 0:
        parents = [np.array(c['long_factor']) for c in best_of(state['candidates'], cfg['search_parents'])]
        return children(parents, P - cfg['search_parents'], rng, cfg, upper)
    mutants = [(mutate(seeds[i % len(seeds)][1], rng, cfg['search_mutation'], cfg['search_step'], upper),
                f'mutation of {seeds[i % len(seeds)][0]}') for i in range(P - len(seeds))]
    return [(f, f'seed {name}') for name, f in seeds] + mutants


def search(cfg, state, seeds, loss_of, save):
    """Run generations state['generation'] + 1 .. search_generations, scoring each new curve with loss_of(curve);
    save(state) is called after each generation (every candidate, the log, the cost). Returns the best candidate."""
    out_dir, P, k, G = cfg['out_dir'], cfg['search_population'], cfg['search_parents'], cfg['search_generations']
    seen = {tuple(c['long_factor']) for c in state['candidates']}
    bar = tqdm(total=P + G * (P - k), initial=P + state['generation'] * (P - k) if state['generation'] >= 0 else 0,
               unit='cand', disable=not cfg['progress'], dynamic_ncols=True, desc=os.path.basename(out_dir.rstrip('/')))
    for g in range(state['generation'] + 1, G + 1):
        t0, c0, losses = time.time(), time.process_time(), []
        for f, origin in generation(g, state, seeds, cfg):
            key = tuple(float(x) for x in f)
            if key not in seen:  # a child equal to a known candidate has its score already
                seen.add(key)
                losses.append(loss_of(key))
                state['candidates'].append(dict(generation=g, origin=origin, loss=losses[-1], long_factor=list(key)))
            bar.update(1)
        best = best_of(state['candidates'])[0]
        state['elapsed_s'] += time.time() - t0
        state['cpu_s'] += time.process_time() - c0
        state['log'].append(dict(generation=g, best_loss=best['loss'], best_origin=best['origin'],
                                 best_generation=best['generation'], new=len(losses),
                                 mean_new_loss=float(np.mean(losses)) if losses else None,
                                 elapsed_s=round(state['elapsed_s'], 2), cpu_min=round(state['cpu_s'] / 60, 3),
                                 **({'references': state['references']} if g == 0 else {})))
        state['generation'] = g
        save(state)
        bar.set_postfix(best=f"{best['loss']:.4f}")
        tqdm.write(f"generation {g}: best {best['loss']:.4f} ({best['origin']}, generation {best['generation']}), "
                   f"{len(losses)} new, {state['cpu_s'] / 60:.2f} CPU min so far")
    bar.close()
    return best_of(state['candidates'])[0]


