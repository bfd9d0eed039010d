"""Issue 29's layout and fixes that belong to no single room: the import rules (issue 61: the foundations at the bottom,
every import going down the layers; training imports what training needs), `import lab.stats` without torch, and
`make bases` running the demo's eval it combines when that is missing (B9)."""
import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ('train', 'finetune_long', 'eval', 'sample', 'search_longrope', 'plot')  # (not configurator: the settings
# and the errors every room may use, below them all)
# The layers, lowest first: a module imports nothing from a layer above its own. Outside them stand the data package,
# the engine's runners (batches, sweeps, DDP, masked_bench), lab/hf, the tools that read everything (knobs, pairs,
# model_facts, longrope_search, rope_table) and the real model's study (lab.doc_study: measure, verdicts and
# pictures run in turn), each of which may import any layer (no script, and never in a circle: the checks below).
LAYERS = (
    ('spine', ('configurator', 'rope', 'rope_config', 'model')),
    ('foundations', ('lab.spec', 'lab.stats', 'lab.attention', 'lab.smeared_keys', 'lab.engine.cli',
                     'lab.engine.checks', 'lab.engine.device')),
    ('methods', ('lab.position_maps', 'lab.crop', 'lab.temperature', 'lab.sinks', 'lab.gated', 'lab.alibi', 'lab.fire',
                 'lab.cope', 'lab.pose', 'lab.copy_mix', 'lab.kv_cache', 'lab.conv',
                 'lab.fope', 'lab.inkling')),
    ('measure', 'lab.measure.'),   # every module of the package
    ('verdicts', 'lab.verdicts.'),
    ('pictures', 'lab.pictures.'),
)
STANDING_APART = ('lab.doc_study',)


def imports(path):
    """The top-level module names a file imports ('lab.stats', 'model', ...), function-local ones too."""
    tree = ast.parse(open(path).read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def modules(root):
    """{dotted name: path} of the project's importable code under root: the top-level files, lab/ and data/."""
    out = {}
    for folder in ('.', 'lab', 'data'):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            if folder == '.' and dirpath != os.path.join(root, '.'):
                continue
            for f in files:
                if f.endswith('.py'):
                    rel = os.path.relpath(os.path.join(dirpath, f), root)[:-3].replace(os.sep, '.')
                    out[rel[:-len('.__init__')] if rel.endswith('__init__') else rel] = os.path.join(dirpath, f)
    return out


def import_graph(root):
    """{module: set of project modules it imports}, at module level or inside a function alike; `from a import b`
    is an edge to a.b where a.b is a module, else to a."""
    mods, graph = modules(root), {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(open(path, encoding='utf-8').read())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                deps |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                         for a in node.names}
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def find_cycle(graph):
    """One import circle as [a, b, ..., a], or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = 'open'
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 'open':
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d)):
                return found
        state[m] = 'done'
        stack.pop()
    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_house_has_no_import_circle():
    """Imports only go down: no circle among the project's modules, function-local imports included (one hidden
    inside a function is still a circle: the two files cannot be understood, or moved, apart)."""
    assert find_cycle(import_graph(ROOT)) is None


def test_a_planted_circle_is_found(tmp_path):
    """The walk sees a circle closed by an import inside a function, through `from package import module`."""
    (tmp_path / 'lab' / 'kit').mkdir(parents=True)
    (tmp_path / 'lab' / '__init__.py').write_text('')
    (tmp_path / 'lab' / 'kit' / '__init__.py').write_text('')
    (tmp_path / 'lab' / 'kit' / 'a.py').write_text('from lab.kit import b\n')
    (tmp_path / 'lab' / 'kit' / 'b.py').write_text('def f():\n    from lab.kit.c import g\n    return g\n')
    (tmp_path / 'lab' / 'kit' / 'c.py').write_text('import os\n\ndef g():\n    import lab.kit.a\n')
    (tmp_path / 'top.py').write_text('import lab.kit.a\n')
    assert find_cycle(import_graph(str(tmp_path))) == ['lab.kit.a', 'lab.kit.b', 'lab.kit.c', 'lab.kit.a']
    (tmp_path / 'lab' / 'kit' / 'c.py').write_text('import os\n')
    assert find_cycle(import_graph(str(tmp_path))) is None


def test_lab_stats_imports_without_torch():
    """B10: lab/__init__ imported copy_mix (torch) for its registration side effect; now the package imports nothing."""
    code = "import sys, lab.stats, lab.verdicts.compare; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == 'False'


@pytest.mark.parametrize('core', ['rope.py', 'rope_config.py', 'model.py', 'configurator.py'])
def test_the_spine_imports_no_room(core):
    """The spine (and configurator, the settings and errors below everything) imports no room and no script;
    configurator imports no project module at all."""
    got = imports(os.path.join(ROOT, core))
    assert not any(m == 'lab' or m.startswith('lab.') for m in got)
    assert not got & set(SCRIPTS + ('data', 'data.common', 'data.checkpoints', 'data.sources'))
    if core == 'configurator.py':
        assert not got & set(modules(ROOT)), got


def test_rooms_never_import_a_script():
    """Every script, plot.py among them: its drawing is lab/pictures/eval_plots.py's, which redraw calls."""
    graph = import_graph(ROOT)
    for name in sorted(m for m in graph if m.startswith('lab.') or m.startswith('data.')):
        bad = graph[name] & set(SCRIPTS)
        assert not bad, f"{name} imports the script(s) {bad}"


def layer_of(name):
    """The index of name's layer in LAYERS, or None for a module standing apart."""
    if name in STANDING_APART:
        return None
    for i, (_, members) in enumerate(LAYERS):
        if name in members if isinstance(members, tuple) else name.startswith(members):
            return i
    return None


def upward_imports(graph):
    """['a (layer) imports b (higher layer)', ...] over graph."""
    out = []
    for name in sorted(graph):
        mine = layer_of(name)
        for dep in sorted(graph[name]):
            theirs = layer_of(dep)
            if mine is not None and theirs is not None and theirs > mine:
                out.append(f"{name} ({LAYERS[mine][0]}) imports {dep} ({LAYERS[theirs][0]})")
    return out


def test_imports_only_go_down_the_layers():
    """Issue 61 item 1: the foundations at the bottom. The methods borrowed arm_specs' spec helpers (lab.spec now),
    the retrieval rooms' and diagnostics' code, and the copy mixer's smeared keys (lab.smeared_keys); the measuring
    rooms the verdicts' statistics (lab.stats); the claims drew their picture; redraw imported plot.py."""
    graph = import_graph(ROOT)
    assert upward_imports(graph) == []
    named = {m for _, members in LAYERS if isinstance(members, tuple) for m in members}
    assert named <= set(graph), named - set(graph)  # every module a layer names exists


def test_an_upward_import_is_found(tmp_path):
    """The layer walk sees a method importing a measuring room inside a function."""
    graph = {'lab.crop': {'lab.measure.diagnostics', 'model'}, 'lab.measure.diagnostics': {'lab.attention'},
             'lab.attention': set(), 'model': set(), 'lab.doc_study': {'lab.pictures.redraw'},
             'lab.pictures.redraw': set()}
    assert upward_imports(graph) == ['lab.crop (methods) imports lab.measure.diagnostics (measure)']


def test_no_module_imports_a_moved_path():
    """Every `import lab.x` / `from lab.x import ...` names a module or package that exists (lab.verdicts.stats is
    lab.stats now), in the project and in the tests alike; `from <package> import x` names a module (lab's package
    files define nothing)."""
    mods = modules(ROOT)
    packages = {m for m, path in mods.items() if path.endswith('__init__.py')}
    paths = list(mods.values()) + [os.path.join(ROOT, 'tests', f) for f in os.listdir(os.path.join(ROOT, 'tests'))
                                   if f.endswith('.py')]
    for path in paths:
        tree = ast.parse(open(path, encoding='utf-8').read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                         if node.module in packages and node.module.startswith('lab')]
            else:
                continue
            for n in names:
                assert not n.startswith('lab.verdicts.stats'), f"{path} imports {n}: it is lab.stats"
                if n == 'lab' or n.startswith('lab.'):
                    assert n in mods, f"{path} imports {n}, which does not exist"


# The import closures (issue 61 item 3): what a script pulls in before it runs a line of main
CLOSURES = {
    'train': ('scipy', 'lab.hf.tokenizer', 'lab.measure.retrieval', 'lab.measure.ruler', 'lab.stats', 'lab.verdicts'),
    'finetune_long': ('scipy', 'lab.hf.tokenizer', 'lab.measure.retrieval', 'lab.measure.ruler', 'lab.stats'),
    'eval': ('lab.copy_mix', 'lab.engine.batches', 'lab.verdicts.merge', 'lab.hf.tokenizer'),
}


@pytest.mark.parametrize('script', sorted(CLOSURES))
def test_a_script_imports_what_it_needs(script):
    """`import train` (and finetune_long) loads no retrieval room, no HF tokenizer and no scipy: training needs none
    of them (the copy mix's word records import the ruler room on the one path that writes them); eval loads neither
    the copy mixer nor --merge's room on a measuring run."""
    code = f"import sys, {script}; print(' '.join(m for m in {CLOSURES[script]!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.strip() == '', f"import {script} loads {out.stdout.strip()}"


def test_the_methods_are_at_the_top_of_lab():
    """A reader looking for a method finds it in lab/'s listing; the machinery sits in packages named by concern."""
    top = {n[:-3] for n in os.listdir(os.path.join(ROOT, 'lab')) if n.endswith('.py') and n != '__init__.py'}
    packages = {n for n in os.listdir(os.path.join(ROOT, 'lab')) if os.path.isfile(os.path.join(ROOT, 'lab', n, '__init__.py'))}
    assert {'position_maps', 'crop', 'temperature', 'sinks', 'alibi', 'fire', 'cope', 'pose', 'kv_cache',
            'longrope_search'} <= top
    assert packages == {'measure', 'verdicts', 'pictures', 'engine', 'hf'}
    index = __import__('lab').__doc__
    for name in top | packages:  # lab/__init__.py's index names every one of them
        assert f"  {name}" in index, name


def test_make_bases_runs_the_demo_eval_it_combines_first(tmp_path):
    """B9: `make bases` stopped after ~50 minutes when out/char-eval (its --combine input) was missing."""
    import shutil
    if shutil.which('make') is None:
        pytest.skip('make is not installed')
    for name in ('Makefile', 'studies.mk'):  # the studies (bases among them) are in studies.mk, which it includes
        shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    out = subprocess.run(['make', '-n', 'bases', 'PY=python'], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith('python ')]
    first_eval = next(i for i, ln in enumerate(lines) if 'eval.py config/eval_char_cpu.py' in ln)
    combine = next(i for i, ln in enumerate(lines) if '--combine=' in ln)
    assert first_eval < combine


@pytest.mark.parametrize('script', ['train', 'finetune_long', 'eval', 'sample', 'search_longrope', 'lab.hf.export'])
def test_every_script_registers_the_attention_rooms(script):
    """From every entry point `python train.py --pos_emb=alibi` (or fire, cope) and a smeared-key checkpoint work:
    model.ATTENTION_ROOMS names the room of each class (lab.alibi, lab.fire, lab.cope, lab.smeared_keys, ...),
    imported on first use."""
    code = (f"import {script}; from model import GPTConfig; GPTConfig(pos_emb='alibi'); GPTConfig(pos_emb='fire'); "
            f"GPTConfig(pos_emb='cope'); GPTConfig(attention='smear_keys'); GPTConfig(attention='smear_keys_ssmax'); "
            f"print('ok')")
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == 'ok', out.stderr[-500:]


def test_the_spine_is_counted():
    """tests/story_lines.py counts the spine for the README (its size and story share are a signal, not a limit:
    a file is split where a concern ends, never to free lines); every definition of the spine is named there."""
    sys.path.insert(0, os.path.join(ROOT, 'tests'))
    import story_lines
    table = story_lines.count()
    assert set(table) == set(story_lines.SPINE) and all(r['lines'] > 0 for r in table.values())
    assert 0 < story_lines.share(table) <= 1


def test_story_lines_names_every_definition(tmp_path):
    """A spine definition missing from KINDS (or a KINDS name the file no longer defines) stops the count."""
    sys.path.insert(0, os.path.join(ROOT, 'tests'))
    import story_lines
    (tmp_path / 'f.py').write_text('"""doc"""\nimport os\n\ndef known():\n    if os.sep:\n        raise ValueError("x")\n'
                                   '    return 1\n\ndef new_one():\n    return 2\n')
    with pytest.raises(KeyError, match='new_one is not in'):
        story_lines.line_kinds(str(tmp_path / 'f.py'), {'known': 'story'})
    with pytest.raises(KeyError, match='no longer defines'):
        story_lines.line_kinds(str(tmp_path / 'f.py'), {'known': 'story', 'new_one': 'story', 'gone': 'story'})
    kinds = story_lines.line_kinds(str(tmp_path / 'f.py'), {'known': 'story', 'new_one': 'plumbing'})
    assert kinds == {1: 'story', 2: 'plumbing', 4: 'story', 5: 'validation', 6: 'validation', 7: 'story',
                     9: 'plumbing', 10: 'plumbing'}


def test_make_help_lists_every_target_in_its_group():
    """`make help` (and `make` alone) lists every main target of the Makefile under the groups a reader picks from,
    then points to `make help-studies`, which lists every study of studies.mk under its own groups."""
    import shutil
    if shutil.which('make') is None:
        pytest.skip('make is not installed')

    def phony(name):
        with open(os.path.join(ROOT, name)) as f:
            return [t for ln in f if ln.startswith('.PHONY:') for t in ln.split()[1:]]

    main = ['story', 'demo', 'test split', 'real model', 'GPU', 'checks', 'studies']
    for args, name, want in (([], 'Makefile', main),
                             (['help-studies'], 'studies.mk', ['real model, its parts', 'studies', '2025-26 designs'])):
        out = subprocess.run(['make', '-s', *args], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        listed = [ln.split()[0] for ln in out.stdout.splitlines() if ln.startswith('  ')]
        assert sorted(listed) == sorted(phony(name)) and len(listed) > 15
        groups = [ln.split(':')[0] for ln in out.stdout.splitlines() if ln and not ln.startswith(' ')]
        assert groups == want  # (the Makefile's last line, `studies: make help-studies lists ...`, the pointer)
