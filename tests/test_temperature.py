"""The temperature family (lab/temperature.py, issue 32): each shape's factor against its formula written out, a
tempered attention against softmax((f_i q_i . k_j) / sqrt(d)) v built by hand, only the layers it aims at, Scalable-
Softmax trained in against its direct construction, and the arms in a real eval (names, one-line refusals)."""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import EVAL_N, EVAL_T
from lab.kv_cache import blocker, generate
from lab.temperature import parse_temperature, query_factors, split_temperature, tempered, temperature_name
from model import GPT, GPTConfig

V, L = 40, 16


def tiny(layers=None, attention='causal'):
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=L, vocab_size=V, n_layer=4, n_head=2, n_embd=32, layers=layers,
                      attention=attention)).eval()
    with torch.no_grad():
        for block in m.transformer.h:
            block.attn.c_attn.weight.mul_(10.0)
    return m


@pytest.mark.parametrize('spec, p, want', [
    ('qtemp:shape=llama4', [0, 126, 127, 255, 1023], [1, 1, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3),
                                                       1 + 0.1 * math.log(9)]),
    ('qtemp:shape=llama4:beta=0.2:floor=64', [62, 63, 127], [1, 1 + 0.2 * math.log(2), 1 + 0.2 * math.log(3)]),
    ('qtemp:shape=ministral', [0, 127, 128, 256, 1023], [1, 1, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3),
                                                         1 + 0.1 * math.log(8)]),
    ('qtemp:shape=logn', [0, 127, 1023], [1, 1, 10 / 7]),
    ('qtemp:shape=drope:c=0.3', [0, 127, 511], [1, 1, 1 + 0.3 * math.log(4)]),
    ('qtemp:shape=drope', [1023], [10 / 7]),  # c = 1/ln L: the log-n scale
    ('qtemp:shape=ssmax:s=0.2', [0, 9, 127], [0, 0.2 * math.log(10), 0.2 * math.log(128)])])
def test_each_shape_is_its_formula(spec, p, want):
    got = query_factors(parse_temperature(spec), torch.tensor(p), 128)
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float32), atol=1e-6)


def test_ssmax_counts_the_keys_a_window_shows():
    t = parse_temperature('qtemp:shape=ssmax:s=0.5')
    assert torch.allclose(query_factors(t, torch.tensor([3, 40]), 16, window=8),
                          torch.tensor([0.5 * math.log(4), 0.5 * math.log(8)]))


def hand_attention(q, k, v, f, window=None):
    T = q.size(2)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    s = (q * f[:, None]) @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    mask = (j <= i) & ((i - j < window) if window else True)
    return F.softmax(s.masked_fill(~mask, float('-inf')), -1) @ v


def test_a_tempered_attention_is_the_scaled_softmax_on_the_layers_it_aims_at():
    m = tiny('3*rope:w=5,nope')
    t = parse_temperature('qtemp:shape=llama4:floor=4:layers=nope')
    q, k, v = (torch.randn(1, 2, 20, 16, generator=torch.Generator().manual_seed(s)) for s in (1, 2, 3))
    attend = tempered(m, t, L=4)
    f = query_factors(t, torch.arange(20), 4)
    assert torch.allclose(attend(3, q, k, v), hand_attention(q, k, v, f), atol=1e-5)  # the NoPE layer: scaled
    assert torch.allclose(attend(0, q, k, v), hand_attention(q, k, v, torch.ones(20), window=5), atol=1e-5)
    everywhere = tempered(m, dict(t, layers='all'), L=4)
    assert torch.allclose(everywhere(0, q, k, v), hand_attention(q, k, v, f, window=5), atol=1e-5)
    x = torch.randint(0, V, (1, 20), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():  # through the model: while p + 1 < F every factor is 1: positions 0..2 are the model's
        a, b = m(x)[0], m(x, attend=attend)[0]
    assert torch.allclose(a[:, :3], b[:, :3], atol=1e-5) and not torch.allclose(a, b, atol=1e-3)


def test_ssmax_trained_in_is_its_direct_construction():
    m = tiny(attention='ssmax')
    attn = m.transformer.h[0].attn
    assert torch.allclose(attn.ssmax, torch.full((2, 1), 1 / math.log(L)))
    with torch.no_grad():
        attn.ssmax.copy_(torch.tensor([[0.3], [0.6]]))
    q, k, v = (torch.randn(1, 2, 12, 16, generator=torch.Generator().manual_seed(s)) for s in (5, 6, 7))
    ln = torch.log(torch.arange(1, 13, dtype=torch.float32))
    want = torch.cat([hand_attention(q[:, h:h + 1], k[:, h:h + 1], v[:, h:h + 1], s * ln) for h, s in
                      enumerate((0.3, 0.6))], 1)
    assert torch.allclose(attn.attend(q, k, v), want, atol=1e-5)
    scores = attn.logits(q, k, 4, 12)  # the score function the crop and the entropy diagnostic use
    assert torch.allclose(F.softmax(scores, -1) @ v, want[:, :, 4:], atol=1e-5)
    x = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        full = m(x)[0]
        at = m(x, at=torch.tensor([[3, 19], [0, 7]]))[0]
    assert torch.allclose(at[0], full[0, [3, 19]], atol=1e-5) and torch.allclose(at[1], full[1, [0, 7]], atol=1e-5)
    assert blocker(m) == "attention='ssmax'"  # the cache would bypass its attend: generate recomputes the prefix
    out = generate(m, x[:, :5], 3, top_k=1)
    with torch.no_grad():
        assert torch.equal(out[:, 5], m(x[:, :5])[0][:, -1].argmax(-1))


@pytest.mark.parametrize('spec, match', [
    ('qtemp:shape=cubic', 'S one of llama4'), ('qtemp:shape=llama4:c=1', "'c' is not a key of shape 'llama4'"),
    ('qtemp:shape=drope:c=0', 'must be a finite number > 0'), ('qtemp:shape=logn:layers=odd', "layers='odd'"),
    ('qtemp:shape=ssmax:s=x', "s='x' is not a float")])
def test_bad_temperatures_are_one_line(spec, match):
    with pytest.raises(ValueError, match=match):
        parse_temperature(spec)


def test_arm_specs_and_names():
    assert split_temperature('yarn:beta_fast=8:attention_factor=1+qtemp:shape=ministral')[0] == \
        'yarn:beta_fast=8:attention_factor=1'
    assert split_temperature('qtemp:shape=logn')[0] == 'default' and split_temperature('yarn')[1] is None
    assert temperature_name(parse_temperature('qtemp:shape=llama4:beta=0.2:layers=nope')) == 'qtemp llama4 β=0.2 on nope'
    assert temperature_name(parse_temperature('qtemp:shape=drope:c=0.3')) == 'qtemp drope c=0.3'


def test_temperature_arms_in_an_eval(lab, tmp_path):
    import eval as ev
    s = ev.main([f'--ckpt={lab["ft"]}', f'--base={lab["base"]}',
                 '--rope_types=default,qtemp:shape=logn,yarn:beta_fast=8:attention_factor=1+qtemp:shape=ministral',
                 '--temperature=qtemp:shape=drope:c=0.3', f'--eval_len={EVAL_T}', f'--num_windows={EVAL_N}',
                 '--retrieval_examples=4', '--retrieval_len=6', '--retrieval_pos=2', '--depth_len=0', '--needles=0', '--recall_len=0', '--word_needles=0',
                 '--mv_values=0', '--tracking=False', f'--out_dir={tmp_path / "e"}', '--device=cpu',
                 '--progress=False', '--workers=1', '--plot=False'])
    names = [a['name'] for a in s['arms']]
    for want in ('qtemp logn zero-shot', 'yarn s=4 β_fast=8 attention_factor=1 + qtemp ministral zero-shot',
                 'default ft10 + qtemp drope c=0.3', 'yarn s=4 β_fast=8 ft10 + qtemp drope c=0.3'):
        assert want in names, names
    by = {a['name']: a for a in s['arms']}
    plain, logn = by['base (L=16)'], by['qtemp logn zero-shot']
    # inside L every factor is 1: the same losses as the base there; past L they differ
    assert plain['buckets'] != logn['buckets'] and logn['temperature']['shape'] == 'logn'
    assert abs(plain['ppl_at']['16'] - logn['ppl_at']['16']) < 1e-5  # L = 16
    # (the truncated crop takes a temperature too since issue 45: tests/test_combine_features.py)


def test_a_temperature_and_the_crop_run_on_a_model_without_rope(char_data, tmp_path):
    """A NoPE base (pos_emb='none') takes the crop and a query temperature (make own-crops): no scaling to switch."""
    import eval as ev
    from conftest import tiny_cfg
    from train import train
    base = tmp_path / 'nope'
    train(dict(tiny_cfg(char_data, base, max_iters=20, eval_interval=20, pos_emb='none'), block_size=16))
    s = ev.main([f'--base={base}', '--rope_types=default,crop:form=sliding,qtemp:shape=logn', '--eval_len=64',
                 '--num_windows=8', '--retrieval_examples=0', '--depth_len=0', '--needles=0', '--recall_len=0',
                 '--word_needles=0', '--mv_values=0', '--tracking=False', f'--out_dir={tmp_path / "e"}',
                 '--device=cpu', '--progress=False', '--workers=1', '--plot=False'])
    assert [a['name'] for a in s['arms']] == ['none (L=16)', 'crop w=16 (sliding)', 'qtemp logn zero-shot']
