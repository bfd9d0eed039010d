"""
The per-pair picture of every rope type side by side: wavelength, turns within L, band, theta'/theta and the attention
factor, and the critical dimension of plain RoPE.

    python -m lab.rope_table --head_dim 64 --L 256 --factor 4
"""
from lab.engine.cli import cli
from rope import base_bound, critical_dimension, rotations_within, wavelengths
from rope_config import DYNAMIC_TYPES, ROPE_TYPES, rope_inv_freq, type_keys

def freq_ratio(head_dim, base, scaling, seq_len=None):
    """theta'_i / theta_i per pair for any config (1 = untouched, 1/s = PI)."""
    return rope_inv_freq(head_dim, base, scaling, seq_len)[0] / rope_inv_freq(head_dim, base)[0]

def bands(head_dim, base, L, beta_fast=32.0, beta_slow=1.0):
    """'high' (r_i > beta_fast), 'low' (r_i < beta_slow) or 'middle', per pair."""
    return ['high' if r > beta_fast else 'low' if r < beta_slow else 'middle'
            for r in rotations_within(head_dim, base, L).tolist()]

def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(description="Per pair: wavelength, turns within L, band, theta'/theta per type.")
    p.add_argument('--head_dim', type=int, default=64)
    p.add_argument('--L', type=int, default=256, help='training length')
    p.add_argument('--factor', type=float, default=4.0, help="scale s = L'/L")
    p.add_argument('--base', type=float, default=10000.0)
    p.add_argument('--beta_fast', type=float, default=32.0)
    p.add_argument('--beta_slow', type=float, default=1.0)
    p.add_argument('--seq_len', type=int, default=None, help='length l for the dynamic types (default s*L)')
    a = p.parse_args(argv)
    d, b, L, s = a.head_dim, a.base, a.L, a.factor
    l = a.seq_len if a.seq_len is not None else round(s * L)
    cols = []
    for t in ROPE_TYPES:
        if any(typ is list for typ, _ in type_keys(t).values()):
            continue  # longrope: searched factors, no formula to show (search_longrope.py)
        sc = {'rope_type': t, 'factor': 1.0 if t in DYNAMIC_TYPES else s, 'original_max_position_embeddings': L}
        if 'beta_fast' in type_keys(t):  # ntk_by_parts and the YaRNs
            sc.update(beta_fast=a.beta_fast, beta_slow=a.beta_slow)
        if t == 'proportional':  # p-RoPE as Gemma 4 ships it, over plain RoPE (p = 1 with s is PI)
            sc.update(partial_rotary_factor=0.25, factor=1.0)
        sc = None if t == 'default' else sc
        inv, af = rope_inv_freq(d, b, sc, l)
        cols.append((t, (inv / rope_inv_freq(d, b)[0]).tolist(), af))
    band = bands(d, b, L, a.beta_fast, a.beta_slow)
    lam, rot = wavelengths(d, b).tolist(), rotations_within(d, b, L).tolist()
    print(f"head_dim={d} base={b:g} L={L} s={s:g}; dynamic types at l={l} with factor 1; "
          f"bands: high r>{a.beta_fast:g}, low r<{a.beta_slow:g}; theta'/theta (1 = kept, {1 / s:.3f} = PI)")
    short = {'ntk_by_parts': 'by_parts', 'dynamic_yarn': 'dyn_yarn', 'abf': 'abf 1e6', 'proportional': 'p=0.25',
             'yarn_telechat': 'yarn_tc3', 'ntk_mixed': 'ntk_mix', 'ntk_alpha': 'α=1000'}
    print(f"{'pair':>4} {'wavelen':>9} {'turns/L':>8} {'band':<6}" + ''.join(f"{short.get(t, t):>9}" for t, *_ in cols))
    for i in range(d // 2):
        print(f"{i:>4} {lam[i]:>9.1f} {rot[i]:>8.2f} {band[i]:<6}" + ''.join(f"{r[i]:>9.3f}" for _, r, _ in cols))
    print(f"{'attention factor (x cos, sin)':<30}" + ''.join(f"{af:>9.3f}" for _, _, af in cols))
    d_extra, t_extra = critical_dimension(d, b, L)
    print(f"critical dimension (Liu et al. 2023): d_extra = {d_extra} (pairs 0..{d_extra // 2 - 1} turn within L), "
          f"T_extra = {t_extra:.1f} tokens: plain RoPE is expected to break near there")
    print(f"base bound (Men et al. 2024): retrieving over L' tokens needs b >= 0.0424 L'^1.628 = {base_bound(L):,.0f} at "
          f"L, {base_bound(s * L):,.0f} at s*L; b = {b:g} suffices up to L' = {(b / 0.0424) ** (1 / 1.628):,.0f}")

if __name__ == '__main__':
    cli(main)
