"""
LongRoPE's search (Ding et al. 2024), the algorithm. search_longrope.py runs it on a model (scoring, files, the run
it writes). It follows the reference implementation, github.com/microsoft/LongRoPE:
  evolution/algorithms/genetic_base.py  GeneticAlgorithm.run_genetic_algorithm (the loop), Individual.__eq__
  evolution/algorithms/dim_mono.py      DimMonoGeneticAlgorithm.mutate / .crossover (the operators)
  evolution/default_hyper_params/dim_mono.json  population 64, 40 iterations, 16 mutations + 16 crossovers, 32
                                        parents, max_crossover_try 20, list_step 0.01 (the reference budget)
  rope/longrope.py                      MixedLongRoPEScaledRotaryEmbedding(start_token_idx): n-hat, see rope.py
and the paper for what the released code leaves out: generation 0 seeded with PI, NTK and YaRN (the code seeds YaRN
alone), the factor bounds [1, 1.25 s] and the n-hat search space {0, 1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64, 128,
256} (the paper's search-space table; the released code never searches n-hat, it only applies a given one).

A candidate is (n_hat, f): f = long_factor, one factor per pair (theta'_i = theta_i / f_i), non-decreasing from the
fastest pair to the slowest, in [1, 1.25 s]; n_hat: the first n_hat positions keep plain RoPE.
  mutate     every gene moves with probability p (0.3): a factor is redrawn uniformly from the grid lo, lo + step,
             ... (step 0.01) up to hi, where lo / hi are its neighbours' current values (1 below the first pair,
             1.25 s above the last), so the curve stays non-decreasing; n_hat is redrawn from its candidate set.
             Passes repeat on the mutated curve until it is monotone and not already seen.
  crossover  starts from the better parent; genes in turn, each picked with probability p, take the other parent's
             value with probability 1/2; the first candidate along the way that is monotone and unseen is the child
             (max_crossover_try passes over the genes); none: the better parent is mutated instead. Parents that are
             the same candidate give no crossover.
  seen       np.allclose with any candidate made so far (the reference's Individual.__eq__), so nothing is scored twice.
  loop       generation 0: the seed curves (n_hat 0), then mutants of them in turn up to the population. Every later
             generation: the parents = the search_parents best so far (the reference's top-k of its population, which
             holds the best so far), then the mutations (a parent drawn at random each), then the crossovers (two
             different parents, the better one first). population - parents new candidates a generation.
"""
import math
import os
import time

import numpy as np
from tqdm import tqdm

from rope import plain_inv_freq
from rope_config import scaled_theta
from lab.measure.arm_specs import parse_arms

UPPER = 1.25                  # factors lie in [1, UPPER x s] (the paper's search space; the released code: 1 + s)
START_TOKENS = '0,1,2,4,8,12,16,20,24,28,32,64,128,256'  # the paper's n-hat candidates
MAX_PASSES = 1000             # a mutation that finds nothing new in this many passes gives up (the reference loops on)


def seed_curves(specs, s, L, head_dim, base):
    """Generation 0's curves: each arm spec as per-pair factors f_i = theta_i / theta'_i at length s x L (float64),
    clipped to [1, UPPER x s]. PI: all s; NTK: s^(2i/(d-2)); YaRN: 1 in the fast band up to s in the slow one."""
    theta = plain_inv_freq(head_dim, base)
    out = []
    for name, sc in parse_arms(specs, s, L):
        # theta' in float64 from the table's function (rope_inv_freq's float32 could make a flat curve wiggle)
        scaled = theta if sc is None else scaled_theta(head_dim, base, sc, round(s * L))[0]
        out.append((name, np.clip((theta / scaled).numpy(), 1.0, UPPER * s)))
    return out


def parse_start_tokens(text, T):
    """'0,1,2,4' -> (0, 1, 2, 4): the n-hat candidates, distinct whole numbers >= 0 in increasing order, those >= T
    (the window length s x L: the whole window would stay plain) left out; ValueError naming the setting otherwise."""
    try:
        vals = [int(x) for x in text.split(',') if x.strip()]
    except ValueError:
        raise ValueError(f"search_start_tokens={text!r} should be whole numbers separated by commas, like "
                         f"{START_TOKENS} (0 alone: n-hat not searched)") from None
    if not vals or any(v < 0 for v in vals) or sorted(set(vals)) != vals:
        raise ValueError(f"search_start_tokens={text!r} should list distinct whole numbers >= 0 in increasing order, "
                         f"like {START_TOKENS}")
    if vals[0] >= T:
        raise ValueError(f"search_start_tokens={text!r} lists no value below factor x L = {T} (the window length); "
                         f"add 0 at least")
    return tuple(v for v in vals if v < T)


class Seen:
    """Every candidate made so far, as rows (n_hat, f_0, ..., f_{n-1}); `in` is np.allclose with any of them."""
    def __init__(self, n_pairs):
        self.rows = np.empty((0, n_pairs + 1))

    def __contains__(self, cand):
        row = np.concatenate(([cand[0]], cand[1]))
        return bool(np.isclose(self.rows, row).all(axis=1).any())

    def add(self, cand):
        self.rows = np.vstack([self.rows, np.concatenate(([cand[0]], cand[1]))])


def monotone(f):
    return bool(np.all(np.diff(f) >= 0))


def between(lo, hi, step):
    """The grid lo, lo + step, ... <= hi (empty when hi < lo), each value at most hi."""
    if hi < lo:
        return np.empty(0)
    return np.minimum(lo + step * np.arange(math.floor((hi - lo) / step + 1e-9) + 1), hi)


def mutate(cand, rng, seen, p, step, upper, start_tokens):
    """A new (n_hat, f) from cand, added to seen; None when MAX_PASSES passes found nothing monotone and unseen."""
    n_hat, f = int(cand[0]), np.array(cand[1], dtype=np.float64)
    for _ in range(MAX_PASSES):
        if len(start_tokens) > 1 and rng.random() < p:
            n_hat = int(start_tokens[rng.integers(len(start_tokens))])
        for i in range(len(f)):
            if rng.random() < p:
                grid = between(f[i - 1] if i else 1.0, f[i + 1] if i + 1 < len(f) else upper, step)
                if len(grid):
                    f[i] = grid[rng.integers(len(grid))]
        if monotone(f) and (n_hat, f) not in seen:
            seen.add((n_hat, f))
            return n_hat, f
    return None


def crossover(a, b, rng, seen, p, tries):
    """A child of a (the better parent) and b, added to seen; None when the parents are the same candidate or tries
    passes over the genes found nothing monotone and unseen. Gene 0 is n_hat, then the factors."""
    if a[0] == b[0] and np.allclose(a[1], b[1]):
        return None
    genes, other = np.concatenate(([a[0]], a[1])), np.concatenate(([b[0]], b[1]))
    for _ in range(tries):
        for i in range(len(genes)):
            if rng.random() < p:
                if rng.random() < 0.5:
                    genes[i] = other[i]
                child = (int(genes[0]), genes[1:].copy())
                if monotone(child[1]) and child not in seen:
                    seen.add(child)
                    return child
    return None


def longrope_scaling(long_factor, s, L, start_token_idx=0):
    """The rope_scaling of a candidate: short factors 1 (plain frequencies up to L; the temperature applies at every
    length, as in Hugging Face), the candidate past L, and n-hat when it is not 0."""
    return {'rope_type': 'longrope', 'factor': float(s), 'original_max_position_embeddings': int(L),
            'short_factor': [1.0] * len(long_factor), 'long_factor': [float(x) for x in long_factor],
            **({'start_token_idx': int(start_token_idx)} if start_token_idx else {})}


def best_of(cands, k=1):
    """The k lowest-loss candidates (first found wins a tie)."""
    return sorted(cands, key=lambda c: c['loss'])[:k]


def generation(g, state, seeds, cfg, seen, start_tokens):
    """Generation g's new ((n_hat, f), origin) pairs, each added to seen. 0: the seed curves (n_hat 0), then mutants
    of them in turn up to the population; later: search_population - search_parents children of the search_parents
    best so far, mutations first, then crossovers (see the module's docstring). Drawn from a generator seeded with
    (seed, g), and seen holds exactly the candidates scored before, so a resumed search draws what an uninterrupted
    one would."""
    rng, P, k = np.random.default_rng([cfg['seed'], g]), cfg['search_population'], cfg['search_parents']
    ops = dict(p=cfg['search_mutation'], step=cfg['search_grid'], upper=UPPER * cfg['factor'],
               start_tokens=start_tokens)
    out = []
    if g == 0:
        for name, f in seeds:
            if (0, f) not in seen:
                seen.add((0, f))
                out.append(((0, np.array(f, dtype=np.float64)), f'seed {name}'))
        for i in range(P - len(out)):
            name, f = seeds[i % len(seeds)]
            child = mutate((0, f), rng, seen, **ops)
            if child is not None:
                out.append((child, f'mutation of {name}'))
        return out
    parents = [(c.get('start_token_idx', 0), np.array(c['long_factor'])) for c in best_of(state['candidates'], k)]
    n_cross = round(cfg['search_crossover'] * (P - k))
    for _ in range(P - k - n_cross):
        child = mutate(parents[rng.integers(len(parents))], rng, seen, **ops)
        if child is not None:
            out.append((child, 'mutation'))
    for _ in range(n_cross):
        i, j = sorted(rng.choice(len(parents), 2, replace=False))
        child = crossover(parents[i], parents[j], rng, seen, ops['p'], cfg['search_crossover_tries'])
        origin = 'crossover'
        if child is None:  # the reference: mutate the better parent instead
            child, origin = mutate(parents[i], rng, seen, **ops), 'mutation (no new crossover)'
        if child is not None:
            out.append((child, origin))
    return out


def search(cfg, state, seeds, loss_of, save, start_tokens=(0,)):
    """Run generations state['generation'] + 1 .. search_generations, scoring each new candidate with
    loss_of(long_factor, n_hat); n_hat is drawn from start_tokens (parse_start_tokens). save(state) is called after
    each generation (every candidate, the log, the cost). Returns the best candidate."""
    out_dir, P, k, G = cfg['out_dir'], cfg['search_population'], cfg['search_parents'], cfg['search_generations']
    seen = Seen(len(seeds[0][1]))
    for c in state['candidates']:
        seen.add((c.get('start_token_idx', 0), np.array(c['long_factor'])))
    bar = tqdm(total=P + G * (P - k), initial=P + state['generation'] * (P - k) if state['generation'] >= 0 else 0,
               unit='cand', disable=not cfg['progress'], dynamic_ncols=True, desc=os.path.basename(out_dir.rstrip('/')))
    for g in range(state['generation'] + 1, G + 1):
        t0, c0, losses = time.time(), time.process_time(), []
        for (n_hat, f), origin in generation(g, state, seeds, cfg, seen, start_tokens):
            f = [float(x) for x in f]
            losses.append(loss_of(f, n_hat))
            state['candidates'].append(dict(generation=g, origin=origin, loss=losses[-1], start_token_idx=int(n_hat),
                                            long_factor=f))
            bar.update(1)
        best = best_of(state['candidates'])[0]
        state['elapsed_s'] += time.time() - t0
        state['cpu_s'] += time.process_time() - c0
        state['log'].append(dict(generation=g, best_loss=best['loss'], best_origin=best['origin'],
                                 best_generation=best['generation'], best_start_token_idx=best['start_token_idx'],
                                 new=len(losses), mean_new_loss=float(np.mean(losses)) if losses else None,
                                 elapsed_s=round(state['elapsed_s'], 2), cpu_min=round(state['cpu_s'] / 60, 3),
                                 **({'references': state['references']} if g == 0 else {})))
        state['generation'] = g
        save(state)
        bar.set_postfix(best=f"{best['loss']:.4f}")
        tqdm.write(f"generation {g}: best {best['loss']:.4f} ({best['origin']}, generation {best['generation']}, "
                   f"n-hat {best['start_token_idx']}), {len(losses)} new, {state['elapsed_s'] / 60:.2f} min so far")
    bar.close()
    return best_of(state['candidates'])[0]


def needle_rows(data, starts, T, L, vocab_size, eot, seed):
    """LongRoPE2's objective (Shang et al. 2025, "needle-driven" perplexity): the loss on the answer tokens of needles
    planted past L, not on every token. One multi-key needle example (lab.measure.retrieval.needle_examples: 4 records of
    4 random key and 4 value tokens, fewer when L < 40, one asked at the end) per window start, the distance of the asked record cycling
    over the buckets at >= L; rows padded with eot to one length (causal: padding after a row changes none of it).
    Returns (rows LongTensor [n, T'], positions [n lists]: where lab.measure.scoring.score scores the value tokens)."""
    import torch
    from lab.measure.retrieval import needle_examples
    buckets, examples = needle_examples(data, starts, T, L, vocab_size, eot, seed, needles=max(1, min(4, L // 8 - 1)))
    far = [b for b, (_, lo, _) in enumerate(buckets) if lo >= L]
    if not far:
        raise ValueError(f"needle objective: no distance bucket at or past L = {L} fits in {T} tokens; raise the factor")
    picked = [next(e for e in examples if e['start'] == st and e['bucket'] == far[k % len(far)])
              for k, st in enumerate(starts)]
    n = max(len(e['seq']) for e in picked)
    rows = torch.full((len(picked), n), eot, dtype=torch.long)
    for r, e in enumerate(picked):
        rows[r, :len(e['seq'])] = torch.as_tensor(np.asarray(e['seq'], dtype=np.int64))
    return rows, [list(e['where']) for e in picked]
