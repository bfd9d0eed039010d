"""
The scoring protocol of eval.py: every arm is scored as it runs when generating, position p by a forward over p + 1
tokens. The forward lengths 1..T are cut into runs over which an arm's RoPE tables do not change (constant_runs), and
each run is scored with one forward: a static arm is one run (one forward of T), LongRoPE two (short factors to L,
long ones past it). Dynamic NTK / YaRN move at every length past L: there every window is scored at sampled random
positions per bucket (design_positions: stratified, seeded, the same for every arm), each at exactly its own length;
samples=0 scores every position (exact, slow). Retrieval tokens are scored the same way (score), each at the length
it is emitted at.
"""
import numpy as np
import torch

from rope_config import is_dynamic, rope_inv_freq


def bucket_ends(L, T):
    """L, 2L, 4L, ... below T, then T: the ends of the position buckets and the context cuts of ppl_at."""
    ends, e = [], L
    while e < T:
        ends.append(e)
        e *= 2
    return ends + [T]


def constant_runs(model, T):
    """The forward lengths 1..T cut into maximal runs (a, b) over which the arm's RoPE tables (inv_freq and attention
    factor) stay the same, so one forward of any length in [a, b] scores positions a-1..b-1 exactly as generation
    does: [(1, T)] for a static arm or another position encoding; LongRoPE [(1, L), (L + 1, T)] (short factors, then
    long ones); Dynamic NTK / YaRN [(1, L)] and then one run per length. Found by bisection: the tables move
    monotonically with the length, so the lengths sharing a's tables are one interval from a."""
    c = model.config
    if c.pos_emb != 'rope' or not is_dynamic(c.rope_scaling):
        return [(1, T)]
    table = lambda n: rope_inv_freq(model.head_dim, c.rope_base, c.rope_scaling, n, model.rotary_dim)  # noqa: E731
    runs, a = [], 1
    while a <= T:
        ref, lo, hi = table(a), a, T
        while lo < hi:
            mid = (lo + hi + 1) // 2
            same = table(mid)
            lo, hi = (mid, hi) if same[1] == ref[1] and torch.equal(same[0], ref[0]) else (lo, mid - 1)
        runs.append((a, lo))
        a = lo + 1
    return runs


def scoring_plan(model, T, samples, max_runs=16):
    """(runs, moving_from): positions p < moving_from are scored exactly, one forward per constant run; positions
    from moving_from on belong to a scale that moves at every length (more than max_runs runs: Dynamic NTK / YaRN
    past their first run) and are scored at sampled positions, each at its own length. samples=0: everything
    exact (moving_from = T), one forward per run; the cost is printed by eval.py."""
    runs = constant_runs(model, T)
    return runs, T if samples == 0 or len(runs) <= max_runs else runs[0][1]


def design_positions(L, T, n, samples, seed):
    """Where a moving-scale arm is scored: for each of n windows and each position bucket, `samples` positions drawn
    at random, one per equal-width stratum of the bucket (every position when the bucket is smaller), seeded, the
    same for every arm. Unbiased for the bucket's mean and, unlike a fixed grid, not tied to the same tokens in every
    window. Returns a list of n sorted int lists."""
    rng = np.random.default_rng([seed, 7])
    out = [[] for _ in range(n)]
    for lo, hi in zip([0] + bucket_ends(L, T), bucket_ends(L, T)):
        m = min(samples, hi - lo)
        edges = lo + (np.arange(m + 1) * (hi - lo)) // m
        for w in range(n):
            out[w] += (edges[:-1] + (rng.random(m) * (edges[1:] - edges[:-1])).astype(int)).tolist()
    return out


def row_tables(model, pos):
    """The tables forward(rope=) takes, one (cos, sin) (B, 1, T, head_dim) per RoPE group, for position ids pos (B, T)
    whose rows end at different lengths: a dynamic type scales each row for its own length (max of its ids + 1).
    None when one table serves every row."""
    if not getattr(model, 'rope_dynamic', False) or len(set(pos.amax(-1).tolist())) < 2:  # (rope_dynamic: RoPE only)
        return None
    groups = [[model.rope_tables(row, g) for row in pos] for g in range(len(model.rope_groups))]  # [group][row]
    return [tuple(torch.stack(t)[:, None] for t in zip(*rows)) for rows in groups]  # rows stacked: (cos, sin)


@torch.no_grad()
def score(model, rows, positions, plan, ctx, batch_size, attend=None, preds=False):
    """The NLL (and whether the argmax is the target) of rows[r, p + 1] given rows[r, :p + 1] for every p in
    positions[r], each scored as the model generates (see scoring_plan): positions in one constant run share a
    forward (of the run's longest needed length); a moving-scale position gets a forward of exactly p + 1 tokens,
    the k-th such position of every row in one batched forward whose position ids stop at each row's own p (a
    dynamic type scales each row for its own length; later tokens do not reach p through causal attention).
    rows: LongTensor [R, n]; positions: R int lists. Returns (loss, hit): R float / bool numpy arrays, and with
    preds=True also the argmax tokens (R int arrays)."""
    runs, moving_from = plan
    ends, device = [b for _, b in runs], next(iter(model.parameters()), rows).device
    jobs = {}
    for r, ps in enumerate(positions):
        k = 0
        for j, p in enumerate(ps):
            key = ('moving', k) if p >= moving_from else ('run', int(np.searchsorted(ends, p + 1)))
            k += key[0] == 'moving'
            jobs.setdefault(key, []).append((r, j, p))
    loss = [np.full(len(ps), np.nan) for ps in positions]
    hit = [np.zeros(len(ps), dtype=bool) for ps in positions]
    pred = [np.zeros(len(ps), dtype=np.int64) for ps in positions]
    for key, items in jobs.items():
        wide = 4 * batch_size if key[0] == 'moving' else batch_size  # one position per row: rows are cheap
        for i in range(0, len(items), wide if key[0] == 'moving' else len(items)):
            part = items[i:i + wide] if key[0] == 'moving' else items
            rs = sorted({r for r, _, _ in part})
            for c in range(0, len(rs), wide):
                chunk = rs[c:c + wide]
                mine = [it for it in part if it[0] in chunk]
                n = max(p for _, _, p in mine) + 1
                x = rows[chunk, :n + 1].to(device)
                slot, per, col = {r: i for i, r in enumerate(chunk)}, [[] for _ in chunk], []
                for r, _, p in mine:  # each row's scored positions in order, and each item's place among them
                    col.append(len(per[slot[r]]))
                    per[slot[r]].append(p)
                pos = rope = None
                if key[0] == 'moving':  # one position per row: its forward stops there
                    stop = torch.tensor([ps[0] for ps in per], device=x.device)
                    pos = torch.minimum(torch.arange(n, device=x.device)[None], stop[:, None])
                    rope = row_tables(model, pos)
                K = max(len(ps) for ps in per)
                at = None if attend is not None or 4 * K > n else torch.tensor(  # few per row: the last layer runs
                    [ps + ps[-1:] * (K - len(ps)) for ps in per], device=x.device)  # only their queries
                with ctx:
                    logits, l = model(x[:, :-1], x[:, 1:], reduction='none', pos=pos, attend=attend, rope=rope, at=at)
                rows_at = torch.tensor([slot[r] for r, _, _ in mine])
                pos_at = torch.tensor([p for _, _, p in mine])
                col = pos_at if at is None else torch.tensor(col)
                got_l = l[rows_at, col].float().cpu().numpy()
                got_p = logits[rows_at, col].argmax(-1)
                got_h = (got_p == x[rows_at, pos_at + 1]).cpu().numpy()
                for (r, j, _), gl, gh, gp in zip(mine, got_l, got_h, got_p.cpu().numpy()):
                    loss[r][j], hit[r][j], pred[r][j] = gl, gh, gp
    return (loss, hit, pred) if preds else (loss, hit)


def grid_positions(L, T, n0, grid):
    """The attention-entropy diagnostic's positions: every position below n0, then `grid` evenly spaced ones per
    bucket (each needs its own forward when the scale moves)."""
    if n0 >= T:
        return list(range(T))
    out, lo = list(range(n0)), 0
    for hi in bucket_ends(L, T):
        a = max(lo, n0)
        if a < hi:
            out += sorted(set(np.linspace(a, hi - 1, min(grid, hi - a)).round().astype(int).tolist()))
        lo = hi
    return out


def sampled_design(L, T, n, samples, seed):
    """design_positions for n windows (samples=0: every position) and its mask [n, T] (True where a window is scored
    by every arm; the bucket means of 'design' read it)."""
    design = design_positions(L, T, n, samples or T, seed)
    mask = np.zeros((n, T), dtype=bool)
    for w, d in enumerate(design):
        mask[w, d] = True
    return design, mask
