"""Issue 63: learned RoPE frequencies (Mistral Large 4's LeRoPE, model.py's learned_freqs): pair i turns at
m * theta_i * exp(alpha_i), alpha learned, one for the model, 0 at init (the plain model bit for bit); exact under the
KV cache; switched on over a plain base by finetune_long.py (with the log-position query scale) and reloaded; refused
where it cannot be honest."""
import math

import pytest
import torch

import finetune_long
import train as train_mod
from configurator import ConfigError
from conftest import tiny_cfg, twins
from data.checkpoints import load_checkpoint, model_from_checkpoint
from lab import kv_cache
from model import GPT, GPTConfig
from rope import plain_inv_freq, rope_cos_sin
from rope_config import rope_inv_freq

CFG = dict(block_size=32, vocab_size=20, n_layer=2, n_head=2, n_embd=16)  # head_dim 8: 4 pairs
ALPHA = torch.tensor([0.3, -0.2, 0.1, 0.05])
YARN = {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 32, 'beta_fast': 8}
DYNAMIC = {'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 32}


def pair(**kw):
    """The model with learned frequencies and its plain twin, the same weights (q and k x10 so positions show)."""
    return twins(CFG, 'learned_freqs', (True, False), **kw)


def set_alpha(m, alpha=ALPHA):
    with torch.no_grad():
        m.rope_alpha.copy_(alpha)
    return m


@pytest.mark.parametrize('kw', [{}, dict(rope_scaling=YARN), dict(partial_rotary_factor=0.5),
                                dict(layers='rope,rope:base=500'), dict(rope_scaling=DYNAMIC)])
def test_at_init_it_is_the_plain_model_bit_for_bit(kw):
    m, plain = pair(**kw)
    x = torch.randint(0, 20, (2, 80))  # past L = 32: a dynamic type rescales
    with torch.no_grad():
        assert torch.equal(m(x)[0], plain(x)[0])
    pairs = m.config.rotary_dim // 2  # alpha: the turning pairs only (2 of 4 under p = 0.5), float32 zeros, learned
    assert m.rope_alpha.shape == (pairs,) and m.rope_alpha.dtype == torch.float32 and not m.rope_alpha.any()
    assert set(m.state_dict()) - set(plain.state_dict()) == {'rope_alpha'} and plain.rope_alpha is None


def test_the_angle_is_position_times_inv_freq_times_exp_alpha():
    m, plain = set_alpha(pair()[0]), pair()[1]
    theta = plain_inv_freq(8, 10000.0)  # 1, 0.1, 0.01, 0.001 (float64, by the formula)
    ang = torch.arange(40.0, dtype=torch.float64)[:, None] * theta * ALPHA.double().exp()
    cos, sin = (t.detach() for t in m.rope_tables(40))
    assert torch.allclose(cos.double(), torch.cat((ang, ang), -1).cos(), atol=1e-5)
    assert torch.allclose(sin.double(), torch.cat((ang, ang), -1).sin(), atol=1e-5)
    assert math.isclose(float(cos[10, 0]), math.cos(10 * math.exp(0.3)), abs_tol=1e-5)  # cos(13.4986) = 0.5566
    # the forward is the plain model's with those tables, handed in (forward's rope= seam)
    x = torch.randint(0, 20, (2, 40))
    c32, s32 = torch.cat((ang, ang), -1).cos().float(), torch.cat((ang, ang), -1).sin().float()
    with torch.no_grad():
        got, want = m(x)[0], plain(x, rope=[(c32, s32)])[0]
        assert torch.allclose(got, want, atol=1e-5) and (got - plain(x)[0]).abs().max() > 1e-2  # (alpha moves them)


def test_with_yarn_the_yarn_frequencies_times_exp_alpha_and_the_same_attention_factor():
    m = set_alpha(pair(rope_scaling=YARN)[0])
    inv, af = rope_inv_freq(8, 10000.0, YARN)
    assert math.isclose(af, 0.1 * math.log(4) + 1, rel_tol=1e-6)  # YaRN's mscale, 1.1386: untouched by alpha
    got_inv, got_af = m.rope_freqs(None)
    assert torch.equal(got_inv, inv * ALPHA.exp()) and got_af == af
    ang = torch.arange(100.0)[:, None] * (inv * ALPHA.exp())
    cos, sin = m.rope_tables(100)
    assert torch.allclose(cos, torch.cat((ang, ang), -1).cos() * af, atol=1e-5)
    assert torch.allclose(sin, torch.cat((ang, ang), -1).sin() * af, atol=1e-5)


def test_a_dynamic_type_recomputes_then_multiplies_and_pass_through_pairs_stay_still():
    m = set_alpha(pair(rope_scaling=DYNAMIC)[0])
    for l in (20, 32, 90):  # (HF's dynamic_rope_update, then forward's inv_freq * alpha.exp())
        assert torch.equal(m.rope_freqs(l)[0], rope_inv_freq(8, 10000.0, DYNAMIC, l)[0] * ALPHA.exp())
    assert not torch.equal(m.rope_freqs(90)[0], m.rope_freqs(32)[0])  # (it did rescale past L)
    p = set_alpha(pair(partial_rotary_factor=0.5)[0], ALPHA[:2])  # pairs 0, 1 turn (base over 4 dims), 2, 3 never
    inv = p.rope_freqs(None)[0]
    assert torch.allclose(inv, torch.tensor([math.exp(0.3), 0.01 * math.exp(-0.2), 0.0, 0.0]))
    assert torch.equal(p.rope_tables(50)[0][:, [2, 3, 6, 7]], torch.ones(50, 4))  # cos 1: they never turn


def test_longrope_start_tokens_turn_at_the_learned_plain_frequencies():
    sc = {'rope_type': 'longrope', 'factor': 4.0, 'original_max_position_embeddings': 32, 'start_token_idx': 4,
          'short_factor': [1.0, 1.5, 2.0, 3.0], 'long_factor': [1.0, 2.0, 4.0, 6.0]}
    m = set_alpha(pair(rope_scaling=sc)[0])
    cos, _ = m.rope_tables(10)
    want, _ = rope_cos_sin(plain_inv_freq(8, 10000.0).float() * ALPHA.exp(), 4)  # rows < n-hat: plain RoPE, learned
    assert torch.allclose(cos[:4], want, atol=1e-6) and not torch.allclose(cos[4:], rope_cos_sin(
        plain_inv_freq(8, 10000.0).float() * ALPHA.exp(), 10)[0][4:], atol=1e-3)


def test_a_training_step_moves_alpha():
    torch.manual_seed(1)
    m = GPT(GPTConfig(**CFG, learned_freqs=True, rope_scaling=YARN))
    opt = m.configure_optimizers(0.1, 1e-2, (0.9, 0.99), 'cpu')
    assert any(p is m.rope_alpha for g in opt.param_groups if g['weight_decay'] == 0.0 for p in g['params'])
    x = torch.randint(0, 20, (4, 64))
    m(x[:, :-1], x[:, 1:])[1].backward()
    assert m.rope_alpha.grad is not None and (m.rope_alpha.grad.abs() > 0).all()
    opt.step()
    assert (m.rope_alpha.abs() > 1e-4).all()  # Adam's first step: about lr on every pair


@pytest.mark.parametrize('kw', [{}, dict(attention='logpos'), dict(rope_scaling=DYNAMIC)])
def test_the_kv_cache_is_exact(kw):
    m = set_alpha(pair(**kw)[0])
    with torch.no_grad():
        for blk in m.transformer.h:
            if kw.get('attention') == 'logpos':
                blk.attn.logpos_scale.fill_(0.4)
                blk.attn.logpos_bias.fill_(0.8)
    assert kv_cache.blocker(m) is None
    x = torch.randint(0, 20, (2, 6))
    assert torch.equal(kv_cache.generate(m, x, 40, top_k=1), m.generate(x, 40, top_k=1))  # (past L = 32)


def test_an_alpha_changed_between_calls_refills_the_cache():
    m = set_alpha(pair()[0])
    x = torch.randint(0, 20, (1, 12))
    cache = kv_cache.KVCache()
    with torch.no_grad():
        cache.forward(m, x[:, :8])
        set_alpha(m, ALPHA * 3)  # a training step in between
        got = cache.forward(m, x[:, 8:])
        assert torch.allclose(got, m(x)[0][:, 8:], atol=1e-5) and cache.length == 12


def test_refused_where_it_cannot_be_honest(tmp_path):
    with pytest.raises(ValueError, match="learned_freqs=True learns RoPE's frequencies, but pos_emb='alibi'"):
        GPTConfig(**CFG, pos_emb='alibi', learned_freqs=True)
    from lab.hf.folder import check_positions
    m = pair()[0]
    with pytest.raises(ValueError, match="no Hugging Face rope type carries alpha"):
        check_positions(dict(vars(m.config)), 'GPT-NeoX')
    with pytest.raises(ValueError, match="log-position query scale"):
        check_positions(dict(vars(GPTConfig(**CFG, attention='logpos'))), "HF's Llama")
    # a change that would drop a weight (logpos -> causal) is no switch: refused, not loaded loosely
    lp = GPT(GPTConfig(**CFG, attention='logpos'))
    ckpt = {'model': lp.state_dict(), 'model_args': dict(vars(lp.config))}
    with pytest.raises(ValueError, match="a change may only add parameters"):
        model_from_checkpoint(ckpt, attention='causal')
    with pytest.raises(ValueError, match="a change may only add parameters"):  # a weight missing that no change adds
        model_from_checkpoint(dict(ckpt, model={k: v for k, v in ckpt['model'].items() if 'ln_f' not in k}),
                              learned_freqs=True)
    from lab.engine.sweep import switched_on
    cfg = dict(finetune_long.DEFAULTS, init_from='base')
    for args, kw, msg in (({'attention': 'causal'}, dict(attention='sinks'), "--attention=logpos\\); train"),
                          ({'attention': 'sinks'}, dict(attention='sinks_logpos'), "none for 'sinks'"),
                          ({'learned_freqs': True}, dict(learned_freqs=False), "dropping its alpha"),
                          ({}, dict(learned_freqs=1), "should be True or False")):
        with pytest.raises(ConfigError, match=msg):
            switched_on(dict(cfg, **kw), args)
    assert switched_on(dict(cfg, attention='logpos', learned_freqs=True), {'attention': 'causal'}) == \
        {'attention': 'logpos', 'learned_freqs': True}
    assert switched_on(dict(cfg, attention='smear_keys_logpos'), {'attention': 'smear_keys'}) == \
        {'attention': 'smear_keys_logpos'}
    assert switched_on(cfg, {'attention': 'logpos', 'learned_freqs': True}) == {}  # None: the base's own


FT = ['--rope_type=yarn:beta_fast=8', '--factor=4', '--eval_interval=2', '--eval_iters=1', '--batch_size=2',
      '--progress=False']


def test_a_fine_tune_switches_them_on_over_a_plain_base_and_reloads(char_data, tmp_path):
    base = tmp_path / 'base'
    train_mod.train(dict(tiny_cfg(char_data, base, max_iters=2, eval_interval=2), eval_iters=1, batch_size=4))
    on = ['--learned_freqs=True', '--attention=logpos']
    finetune_long.main([f'--init_from={base}', f'--out_dir={tmp_path / "zs"}', '--max_iters=0', *on, *FT])
    finetune_long.main([f'--init_from={base}', f'--out_dir={tmp_path / "ft"}', '--max_iters=2', *on, *FT])
    b, zs, ft = (load_checkpoint(str(tmp_path / d)) for d in ('base', 'zs', 'ft'))
    x = torch.randint(0, b['model_args']['vocab_size'], (2, 128))
    # at their identity init (alpha 0, scale 0, bias 1) the switched model is the base with YaRN on, bit for bit
    assert zs['model_args']['learned_freqs'] and zs['model_args']['attention'] == 'logpos'
    assert not zs['model']['rope_alpha'].any() and (zs['model']['transformer.h.0.attn.logpos_bias'] == 1).all()
    yarn = model_from_checkpoint(b).eval()
    yarn.set_rope_scaling(zs['model_args']['rope_scaling'])
    with torch.no_grad():
        assert torch.equal(model_from_checkpoint(zs).eval()(x)[0], yarn(x)[0])
    # two steps later both learned parts moved, and the file reloads (weights_only) to the same logits as the model
    # rebuilt by hand: the base switched on, then the fine-tune's weights
    moved = ft['model']['rope_alpha'], ft['model']['transformer.h.1.attn.logpos_scale']
    assert all(t.abs().min() > 0 for t in moved)
    by_hand = GPT(GPTConfig(**{**b['model_args'], 'block_size': 128, 'rope_scaling': ft['model_args']['rope_scaling'],
                               'learned_freqs': True, 'attention': 'logpos'})).eval()
    by_hand.load_state_dict(ft['model'])
    with torch.no_grad():
        assert torch.equal(model_from_checkpoint(ft).eval()(x)[0], by_hand(x)[0])
    # eval.py names it apart from a plain YaRN fine-tune
    from lab.measure.arms import arm_ids, ckpt_arm
    name = ckpt_arm(str(tmp_path / 'ft'), ft)['name']
    assert name == 'yarn s=4 β_fast=8 learned-freqs logpos ft2'
    assert arm_ids([name]) == ['yarn_s4_beta_fast8_learned-freqs_logpos_ft2']


def test_the_learned_position_parts_train_at_their_own_learning_rate_and_name_their_arm(char_data, tmp_path):
    """--pos_lr_scale=30: alpha (and the log-position scale and bias) in an AdamW group of their own at 30 x the
    scheduled learning rate. Adam's first steps move a parameter by about lr per step whatever its gradient's size, so
    alpha moves ~30 x as far as at scale 1 over the same two steps; the arm is named apart. A model without learned
    position parts refuses the setting, and so does a resumed run that would change it."""
    base = tmp_path / 'base'
    train_mod.train(dict(tiny_cfg(char_data, base, max_iters=2, eval_interval=2), eval_iters=1, batch_size=4))
    for scale in (1, 30):
        finetune_long.main([f'--init_from={base}', f'--out_dir={tmp_path / f"ft{scale}"}', '--max_iters=2',
                            '--learned_freqs=True', f'--pos_lr_scale={scale}', *FT])
    one, fast = (load_checkpoint(str(tmp_path / f'ft{s}')) for s in (1, 30))
    ratio = fast['model']['rope_alpha'].abs() / one['model']['rope_alpha'].abs()
    assert ((ratio > 25) & (ratio < 35)).all(), ratio
    from lab.measure.arms import ckpt_arm
    assert ckpt_arm(str(tmp_path / 'ft30'), fast)['name'] == 'yarn s=4 β_fast=8 learned-freqs pos-lr30 ft2'
    assert ckpt_arm(str(tmp_path / 'ft1'), one)['name'] == 'yarn s=4 β_fast=8 learned-freqs ft2'
    import eval as ev  # summary.json keeps each seed's learned position parts, the record of how far they moved
    s = ev.main([f'--ckpt={tmp_path / "ft30"}', '--rope_types=default', '--eval_len=64', '--num_windows=4',
                 '--retrieval_examples=0', f'--out_dir={tmp_path / "eval"}', '--device=cpu', '--progress=False'])
    arm = next(a for a in s['arms'] if a['name'].endswith('pos-lr30 ft2'))
    assert arm['position_parts'] == {'rope_alpha': [[round(x, 5) for x in fast['model']['rope_alpha'].tolist()]]}
    with pytest.raises(ConfigError, match='--pos_lr_scale=10.0 differs from the run.s own 30.0'):  # (its optimizer's)
        finetune_long.main(['--init_from=resume', f'--out_dir={tmp_path / "ft30"}', '--pos_lr_scale=10'])
    with pytest.raises(ConfigError, match='--pos_lr_scale=30 .* has none; add --learned_freqs=True'):
        finetune_long.main([f'--init_from={base}', f'--out_dir={tmp_path / "plain"}', '--max_iters=2',
                            '--pos_lr_scale=30', *FT])
    assert not (tmp_path / 'plain').exists()  # refused before the sweep writes anything
    with pytest.raises(ValueError, match=r'pos_lr_scale=30 .*\(learned_freqs=False, no logpos'):  # train.py's path
        GPT(GPTConfig(**CFG)).configure_optimizers(0.0, 1e-3, (0.9, 0.99), 'cpu', pos_lr_scale=30)


def test_the_log_position_scale_joins_the_learned_position_group():
    """The logpos room lists its scale and bias as position_params: with pos_lr_scale they leave the plain groups for
    the scaled one, beside alpha; at 1 the groups are as before (no third group)."""
    m = GPT(GPTConfig(**CFG, learned_freqs=True, attention='logpos'))
    own = {id(m.rope_alpha)} | {id(getattr(b.attn, n)) for b in m.transformer.h for n in ('logpos_scale', 'logpos_bias')}
    opt = m.configure_optimizers(0.1, 1e-3, (0.9, 0.99), 'cpu', pos_lr_scale=30)
    assert len(opt.param_groups) == 3 and opt.param_groups[2]['lr_scale'] == 30
    assert {id(p) for p in opt.param_groups[2]['params']} == own
    assert not own & {id(p) for g in opt.param_groups[:2] for p in g['params']}
    assert sum(p.numel() for g in opt.param_groups for p in g['params']) == sum(p.numel() for p in m.parameters())
    assert len(m.configure_optimizers(0.1, 1e-3, (0.9, 0.99), 'cpu').param_groups) == 2
    logpos_only = GPT(GPTConfig(**CFG, attention='logpos')).configure_optimizers(0.1, 1e-3, (0.9, 0.99), 'cpu', 30)
    assert len(logpos_only.param_groups[2]['params']) == 2 * CFG['n_layer']
    from lab.verdicts.summary_json import position_parts  # what an eval records of them, per seed
    parts = position_parts(m, [{'ckpt': {'model': m.state_dict()}}] * 2)
    assert list(parts) == ['rope_alpha'] + [f'transformer.h.{i}.attn.logpos_{n}' for i in range(CFG['n_layer'])
                                            for n in ('scale', 'bias')]
    assert parts['transformer.h.1.attn.logpos_bias'] == [[1.0] * CFG['n_head']] * 2
    assert position_parts(GPT(GPTConfig(**CFG)), [{'ckpt': {'model': {}}}]) is None
