"""Shared fixtures: the committed fixture corpus prepared once per session, and a tiny trained RoPE model."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FIXTURE_CORPUS = os.path.join(ROOT, 'tests', 'fixtures', 'corpus')
if os.environ.get('PYTEST_XDIST_WORKER'):  # pytest -n N: N workers share the cores, so one thread each (and in the
    os.environ['OMP_NUM_THREADS'] = '1'   # scripts they start): two 2-thread torch jobs on 2 cores run 8-14x slower
    import torch
    torch.set_num_threads(1)

# A tiny model that trains in seconds on 2 CPU cores; L = 32 so 4 x L = 128 stays cheap.
TINY = dict(block_size=32, batch_size=16, n_layer=2, n_head=2, n_embd=64, learning_rate=3e-3,
            warmup_iters=10, min_lr=3e-4, eval_iters=4, progress=False, seed=1337)


# The slowest files (torchrun launches, whole scripts in subprocesses, every picture), scheduled first: the two workers
# (pytest.ini) take whole files in collection order, and one of these last would leave a worker alone on it at the end.
SLOW_FIRST = ('test_train_bugs.py', 'test_gpu_check.py', 'test_fixes.py', 'test_eval.py', 'test_figures.py',
              'test_real_model.py', 'test_eval_fixes.py', 'test_train.py', 'test_reliability.py', 'test_finetune.py',
              'test_spine.py', 'test_tokenizer.py', 'test_pipeline.py', 'test_hf_export.py', 'test_bad_input_eval.py',
              'test_sample.py', 'test_frequencies.py', 'test_layers.py', 'test_combine_features.py')  # by --durations=0


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(os.path.basename(str(item.fspath)), len(rank)))  # (stable: the rest as found)


def at_positions(logits, loss, at):
    """A stand-in model's (logits, loss) kept at positions at (B, K), as GPT.forward(at=) returns them (None: all)."""
    if at is None:
        return logits, loss
    return logits.gather(1, at[..., None].expand(-1, -1, logits.size(-1))), loss.gather(1, at)


def assert_attention_paths(model, x, q, k, v, direct, layer=0):
    """A bias-carrying attention class (FIRE, CoPE) on every path against `direct`, its masked softmax built by hand
    for the layer's q, k, v of x (B = 2, T = 20): attend, logits per query chunk of 6 (softmax, then v), attend(at=)
    for scattered queries, the model's forward(at=); and the class matters (plain causal SDPA differs)."""
    import torch
    import torch.nn.functional as F
    attn, T, H = model.transformer.h[layer].attn, x.size(1), q.size(1)
    assert (attn.attend(q, k, v) - direct).abs().max() < 1e-5
    manual = torch.cat([F.pad(attn.logits(q, k, s, min(s + 6, T)).softmax(-1), (0, T - min(s + 6, T)))
                        for s in range(0, T, 6)], dim=2) @ v
    assert (manual - direct).abs().max() < 1e-5
    at = torch.tensor([[0, 5, 19], [3, 4, 17]])
    rows = direct.gather(2, at[:, None, :, None].expand(-1, H, -1, direct.size(-1)))
    qa = q.gather(2, at[:, None, :, None].expand(-1, H, -1, q.size(-1)))
    assert (attn.attend(qa, k, v, at) - rows).abs().max() < 1e-5
    full = model(x)[0]
    assert (model(x, at=at)[0] - full.gather(1, at[..., None].expand(-1, -1, full.size(-1)))).abs().max() < 1e-5
    assert (F.scaled_dot_product_attention(q, k, v, is_causal=True) - direct).abs().max() > 1e-2



def twins(cfg, field, values, **kw):
    """One GPT per value of a config field, the same seed and so the same weights, q and k rows x10 so that
    positions and scales show in the attention (a design at its init against its plain twin)."""
    import torch
    from model import GPT, GPTConfig
    out = []
    for value in values:
        torch.manual_seed(0)
        m = GPT(GPTConfig(**cfg, **{field: value}, **kw)).eval()
        with torch.no_grad():
            for blk in m.transformer.h:
                blk.attn.c_attn.weight.mul_(10.0)
        out.append(m)
    return out

def bias_refusal(pos_emb, make, case, extra=None):
    """The message of one refused use of a model whose position encoding lives in its attention class (FIRE, CoPE):
    another attention class, a rope scaling (in the config or switched on), a position map, position ids, a layer
    pattern, the export; extra: the room's own cases. make() builds a small model of that pos_emb."""
    import pytest
    import torch
    import lab.temperature  # noqa: F401  registers attention='ssmax'
    from lab.hf.export import check_exportable
    from lab.position_maps import mapped_logits
    from model import GPTConfig
    cases = {
        'attention class': lambda: GPTConfig(pos_emb=pos_emb, attention='ssmax'),
        'rope scaling in the config': lambda: GPTConfig(pos_emb=pos_emb, rope_scaling={'rope_type': 'linear',
                                                                                       'factor': 2.0}),
        'rope scaling switched on': lambda: make().set_rope_scaling({'rope_type': 'yarn', 'factor': 4.0}),
        'position map': lambda: mapped_logits(make(), {'method': 'rerope', 'window': 4}),
        'position ids': lambda: make()(torch.zeros(1, 8, dtype=torch.long), pos=torch.arange(8)),
        'layer pattern': lambda: GPTConfig(pos_emb=pos_emb, layers='rope,nope'),
        'export': lambda: check_exportable(dict(vars(make().config))),
        **(extra or {})}
    with pytest.raises(ValueError) as e:
        cases[case]()
    return str(e.value)


def run(args, **kw):
    """Run a project script in a subprocess from the repo root; returns CompletedProcess (text)."""
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, **kw)


@pytest.fixture(scope='session')
def char_data(tmp_path_factory):
    """The fixture corpus prepared at character level (val = tempest)."""
    out = tmp_path_factory.mktemp('char_data')
    from data.shakespeare_char.prepare import main as prepare
    prepare(['--src', FIXTURE_CORPUS, '--out_dir', str(out)])
    return str(out)


def tiny_cfg(data_dir, out_dir, **kw):
    from train import DEFAULTS
    return dict(DEFAULTS, **TINY, dataset=data_dir, out_dir=str(out_dir),
                **dict(dict(max_iters=200, lr_decay_iters=200, eval_interval=100), **kw))


@pytest.fixture(scope='session')
def tiny_run(char_data, tmp_path_factory):
    """A tiny char RoPE model trained 200 steps at L=32 (a few seconds); returns its run folder."""
    from train import train
    out = tmp_path_factory.mktemp('tiny_run')
    train(tiny_cfg(char_data, out))
    return str(out)


EVAL_L, EVAL_T, EVAL_N = 16, 64, 24  # the `lab` eval's L, T and windows


@pytest.fixture(scope='session')
def lab(tmp_path_factory, char_data):
    """A tiny char model (L=16, 400 steps), two short fine-tunes of it (plain and YaRN at 64 = 4L) and one eval at
    T = 64 of every kind of arm: what tests/test_eval.py and tests/test_eval_fixes.py read."""
    import torch
    import eval as ev
    import finetune_long
    import train
    L, T, N = EVAL_L, EVAL_T, EVAL_N
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small runs faster on one thread
    root, data = tmp_path_factory.mktemp('evallab'), char_data  # char_data: conftest.py, val = tempest
    base, ft, out = str(root / 'base'), str(root / 'ft'), str(root / 'eval')
    train.train(dict(train.DEFAULTS, out_dir=base, dataset=data, block_size=L, batch_size=32, n_layer=2, n_head=2,
                     n_embd=48, max_iters=400, eval_interval=400, eval_iters=2, learning_rate=1e-2, warmup_iters=5,
                     lr_decay_iters=400, min_lr=1e-3, progress=False, device='cpu'))
    finetune_long.main([f'--init_from={base}', '--rope_type=yarn:beta_fast=8', '--plain=True', '--factor=4',
                        '--max_iters=10', '--eval_interval=5', '--eval_iters=2', f'--out_dir={ft}', '--progress=False',
                        '--device=cpu'])
    summary = ev.main([f'--ckpt={base},{ft}', '--rope_types=default,linear,ntk,dynamic,yarn:beta_fast=8,dynamic_yarn',
                       f'--eval_len={T}', f'--num_windows={N}', '--retrieval_len=6', '--retrieval_pos=2',
                       '--retrieval_examples=12', '--grid=5', f'--out_dir={out}', '--device=cpu', '--progress=False'])
    torch.set_num_threads(threads)
    return dict(root=root, data=data, base=base, ft=ft, out=out, summary=summary)
