"""The GPU recipe's code path on CPU (issue 58 item 7): finetune_long.py fine-tunes a Llama read from a GGUF file
(gguf:<file>, the loader make real-model-gpu uses on gguf:smollm2) with YaRN for two steps, on the fixture plays
in the file's own BPE, at a tiny size: a 2-layer Llama written by the test (L = 64; SmolLM2 itself refuses a
training length below its L = 8,192, where a step on 2 cores takes minutes). The run loads back with weights_only,
keeps its GGUF base in its lineage, and names its arm as the GPU study's family does (config/real_model_gpu.py)."""
import os

from conftest import run
from test_real_model import bpe_gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_finetune_long_on_a_gguf_llama(tmp_path):
    from data.checkpoints import load_checkpoint
    from lab.measure.arms import ARM_DEFAULTS, plan_arms
    path = bpe_gguf(tmp_path / 'tok.gguf')
    env = dict(os.environ, LONGCTX_CACHE=str(tmp_path), OMP_NUM_THREADS='1')
    r = run(['data/shakespeare_smollm2/prepare.py', '--gguf', path, '--src',
             os.path.join(ROOT, 'tests', 'fixtures', 'corpus'), '--out_dir', str(tmp_path / 'data')], env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    r = run(['finetune_long.py', f'--init_from=gguf:{path}', f'--dataset={tmp_path / "data"}', '--rope_type=yarn',
             '--factor=2', '--batch_size=2', '--max_iters=2', '--eval_interval=2', '--eval_iters=1', '--progress=False',
             '--device=cpu', f'--out_dir={tmp_path / "ft"}'], env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-800:]
    ckpt = load_checkpoint(str(tmp_path / 'ft'))
    args = ckpt['model_args']
    assert args['rope_scaling']['rope_type'] == 'yarn' and args['rope_scaling']['factor'] == 2
    assert (args['n_layer'], args['mlp'], args['block_size']) == (2, 'swiglu', 128)
    assert ckpt['lineage']['base_checkpoint'] == f'gguf:{os.path.realpath(path)}'
    arms, _, _ = plan_arms(dict(ARM_DEFAULTS, ckpt=str(tmp_path / 'ft'), eval_len=256))
    assert [a['id'] for a in arms] == ['yarn_s2_ft2']  # (config/real_model_gpu.py names 'yarn_s2_ft50')
