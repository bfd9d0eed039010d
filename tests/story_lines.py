"""
How much of the spine is the story: every non-blank line of the files a learner reads to follow train a base ->
switch its RoPE -> fine-tune -> plot loss against position, sorted into four kinds:

  story       the method, the model, the loop, the measurement and the picture, with their docstrings and comments
  validation  refusing bad input: check functions, and inside any function an `if ...: raise` (or a loop of them)
  extras      what is only there for a room or a second format (Hugging Face's forms, a seam's registry)
  plumbing    imports, styles, logging, the settings machinery, `if __name__ == '__main__'`

Each top-level function, class, method and assignment of the spine is named in KINDS below (a new one must be
named, or the test fails: somebody decides where it belongs). Module docstrings count as story.
configurator.py is in the spine's size but not on the reading path (nanoGPT's learners skip its configurator too):
its lines are listed, not counted in the share.

    python tests/story_lines.py      # the table; tests/test_spine.py holds the sizes and the share to their limits
"""
import ast
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = ('rope.py', 'rope_config.py', 'model.py', 'train.py', 'finetune_long.py', 'eval.py', 'plot.py')
SPINE = PATH + ('configurator.py',)
V, X, P = 'validation', 'extras', 'plumbing'
KINDS = {  # file -> {name: kind}; a name not listed is an error, 'story' is written out too
    'rope.py': {n: 'story' for n in (
        'rope_cos_sin apply_rope plain_inv_freq wavelengths rotations_within critical_dimension linear_inv_freq '
        'ntk_inv_freq dynamic_inv_freq _ramp _blend ntk_by_parts_inv_freq yarn_correction_range yarn_inv_freq '
        'yarn_mscale yarn_attention_factor dynamic_yarn_scale llama3_inv_freq longrope_inv_freq longrope_start_tokens '
        'longrope_attention_factor base_bound abf_inv_freq partial_inv_freq proportional_inv_freq neox_partial_inv_freq '
        'clipped_inv_freq yarn_log_inv_freq telechat3_mscale ntk_mixed_inv_freq ntk_alpha_inv_freq').split()},
    'rope_config.py': dict(
        check_bands=V, check_yarn=V, check_llama3=V, check_longrope=V, check_masks=V, check_engine_ntk=V, longrope_theta='story', yarn_theta='story',
        RopeType='story', BANDS='story', PLACEMENTS='story', PLACEMENT='story', YARN='story', ROPE_SCALING='story', ROPE_TYPES='story', DYNAMIC_TYPES='story',
        COMMON_KEYS='story', type_keys=P, all_type_keys=P, _check_factors=V, _check_types=V, check_scaling=V, HF_ONLY_KEYS=X,
        _number=X, _hf_rope_dict=X, is_dynamic='story', rope_inv_freq='story',
        scaled_theta='story', LayerSpec='story', LAYER_KINDS='story', CONV_KERNEL='story', SCALE_LAYERS='story',
        parse_layers='story', scaled_layers='story'),
    'model.py': {**{n: 'story' for n in (
        'POS_EMBS GPTConfig layer_specs rope_groups SINUSOIDAL_SCALE sinusoidal_table allowed local_attention rotate CausalSelfAttention CausalSelfAttention.__init__ '
        'CausalSelfAttention.qkv CausalSelfAttention.attend CausalSelfAttention.forward MLP MLP.__init__ MLP.forward '
        'NORMS MLPS SwiGLU SwiGLU.forward RMSNorm RMSNorm.__init__ RMSNorm.forward norm '
        'Block Block.__init__ Block.forward GPT GPT.__init__ GPT._init_weights GPT.get_num_params GPT.head_dim '
        'GPT.rotary_dim GPTConfig.rotary_dim GPT.with_alpha GPT.position_parts '
        'GPT.set_rope_scaling GPT._build_rope GPT.rope_freqs GPT.rope_tables GPT.forward GPT.configure_optimizers '
        'GPT.generate sample_next').split()},
        'GPTConfig.attention_class': X, 'GPTConfig.__post_init__': V, 'CausalSelfAttention.logits': X,
        'GPT._last_layer_at': X,
        'ATTENTION': X, 'ATTENTION_ROOMS': P, 'attention_class': P, 'BIASES': X, 'GPT._apply': P,
        'check_generate': V, 'check_config': V, 'check_forward': V, 'layer_seam': 'story', 'GPT.embed': 'story'},
    'train.py': {**{n: 'story' for n in (
        'DEFAULTS run_config get_lr VAL_SEED load_data batch_function estimate_loss new_lineage build_model Run '
        'setup_run save_checkpoint restore_state train_step train evaluate').split()}, 'log_step': P, 'main': P},
    'finetune_long.py': dict(DEFAULTS='story', extended_model='story', main='story'),
    'eval.py': dict(DEFAULTS='story', FILES=P, PROTOCOL='story', measure_run='story', measure_arm='story',
                    write_outputs='story', prepare='story', main='story'),
    'plot.py': {},  # the list of pictures; the drawing is lab/pictures/eval_plots.py's (a room never imports a script)
    'configurator.py': dict(ROOT=P, ConfigError=V, is_input_error=P, check_seed=V, get_config=P),
}


def is_guard(node):
    """An `if` whose body only raises (with no else), or a loop whose body is such ifs: refusing bad input."""
    if isinstance(node, ast.If):
        return not node.orelse and all(isinstance(s, ast.Raise) for s in node.body)
    if isinstance(node, ast.For):
        return all(is_guard(s) for s in node.body)
    return isinstance(node, ast.Raise)


def line_kinds(path, kinds):
    """{line number: kind} for every non-blank line of the file; KeyError naming a definition not in kinds."""
    src = open(path).read()
    lines = src.splitlines()
    tree = ast.parse(src)
    out, seen = {}, set()

    def mark(node, kind, end=None):
        start = min([node.lineno] + [d.lineno for d in getattr(node, 'decorator_list', [])])
        for i in range(start, (end or node.end_lineno) + 1):
            out[i] = kind

    def guards(node, kind):
        if kind == 'story':
            for sub in ast.walk(node):
                block = [s for f in ('body', 'orelse') if isinstance(getattr(sub, f, None), list)
                         for s in getattr(sub, f)]
                for s in block:
                    if is_guard(s):
                        mark(s, V)

    for i in range(1, len(lines) + 1):
        out[i] = 'story'  # comments and section headers between definitions, the module docstring
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mark(node, P)
        elif isinstance(node, ast.If):  # if __name__ == '__main__'
            mark(node, P)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)):
            name = node.name if hasattr(node, 'name') else getattr(
                node.targets[0] if isinstance(node, ast.Assign) else node.target, 'id', '?')
            seen.add(name)
            if name not in kinds:
                raise KeyError(f"{os.path.basename(path)}: {name} is not in tests/story_lines.py's KINDS; say which "
                               f"kind it is")
            methods = [m for m in node.body if isinstance(m, ast.FunctionDef)] if isinstance(node, ast.ClassDef) else []
            mark(node, kinds[name])
            if not methods:
                guards(node, kinds[name])
            for m in methods:
                key = f"{name}.{m.name}"
                seen.add(key)
                if key not in kinds:
                    raise KeyError(f"{os.path.basename(path)}: {key} is not in tests/story_lines.py's KINDS")
                mark(m, kinds[key])
                guards(m, kinds[key])
    stale = set(kinds) - seen
    if stale:
        raise KeyError(f"{os.path.basename(path)}: KINDS names {sorted(stale)[0]}, which the file no longer defines")
    return {i: k for i, k in out.items() if lines[i - 1].strip()}


def count(root=ROOT):
    """{file: {'lines': wc -l, kind: non-blank lines}} for every spine file."""
    table = {}
    for f in SPINE:
        path = os.path.join(root, f)
        kinds = line_kinds(path, KINDS[f])
        row = {'lines': len(open(path).read().splitlines())}
        for k in ('story', V, X, P):
            row[k] = sum(1 for v in kinds.values() if v == k)
        table[f] = row
    return table


def share(table, files=PATH):
    """The story's share of the non-blank lines of `files`."""
    story = sum(table[f]['story'] for f in files)
    return story / sum(table[f][k] for f in files for k in ('story', V, X, P))


if __name__ == '__main__':
    t = count()
    cols = ('lines', 'story', V, X, P)
    print(f"{'file':18s}" + ''.join(f"{c:>12s}" for c in cols) + f"{'story share':>13s}")
    for f, row in t.items():
        print(f"{f:18s}" + ''.join(f"{row[c]:12d}" for c in cols) + f"{share(t, (f,)):13.1%}")
    print(f"spine: {sum(r['lines'] for r in t.values())} lines; rope.py + model.py: "
          f"{t['rope.py']['lines'] + t['model.py']['lines']}; story share of the reading path ({', '.join(PATH)}): "
          f"{share(t):.1%} (with configurator.py: {share(t, SPINE):.1%})")
    sys.exit(0)
