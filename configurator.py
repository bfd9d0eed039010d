"""
Settings for every script, in one small module (nanoGPT's configurator.py, made strict):

    defaults  <-  config files (python files that assign some of the names)  <-  --key=value

in the order given on the command line. Values are python literals (--max_iters=100, --decay_lr=False,
--rope_type=yarn) or bare strings. An unknown key or a value of the wrong type is an error naming it.
Every script runs its main() through cli(), which turns a bad input into one line and exit code 2.
Also here: which device and which number format to run in.
"""
import ast
import os
import sys
from contextlib import nullcontext

import torch


class ConfigError(ValueError):
    """A bad setting: the message names it and says what to do."""


def get_config(argv, defaults, start=None):
    """defaults (or `start`, e.g. a resumed run's stored settings) <- config files (argv entries without '--')
    <- --key=value. Unknown keys and wrong types are errors."""
    cfg = dict(start or defaults)

    def setkey(key, val, where):
        if key not in defaults:
            raise ConfigError(f"unknown setting {key!r} ({where}); known settings: {', '.join(sorted(defaults))}")
        want = type(defaults[key])
        if want is float and isinstance(val, int) and not isinstance(val, bool):
            val = float(val)
        if defaults[key] is not None and not isinstance(val, want) or (want is int and isinstance(val, bool)):
            raise ConfigError(f"setting {key}={val!r} ({where}) should be a {want.__name__}, like {defaults[key]!r}")
        cfg[key] = val

    for arg in argv:
        if not arg.startswith('--'):
            if not os.path.isfile(arg):
                raise ConfigError(f"config file {arg} does not exist; see config/ for the shipped ones "
                                  f"(settings are given as --key=value)")
            scope = {}
            try:
                with open(arg) as f:
                    exec(f.read(), {}, scope)
            except Exception as e:  # a typo in the file: say which file and what, not a traceback
                raise ConfigError(f"config file {arg} does not run ({type(e).__name__}: {e}); fix it") from None
            for k, v in scope.items():
                if not k.startswith('_'):
                    setkey(k, v, arg)
        else:
            if '=' not in arg:
                example = 'True' if isinstance(defaults.get(arg[2:]), bool) else '<value> (several values: a,b,c)'
                raise ConfigError(f"argument {arg} should look like --key=value, e.g. {arg}={example}")
            key, val = arg[2:].split('=', 1)
            if not isinstance(defaults.get(key), str):  # a text setting takes the text as typed: --seeds=1337, --start=1984
                try:
                    val = ast.literal_eval(val)
                except (ValueError, SyntaxError):
                    pass  # a bare string
            setkey(key, val, 'command line')
    return cfg


def cli(main):
    """Run a script's main(argv); a bad input (ValueError) ends in one line naming the problem and exit code 2.
    -h/--help prints the script's docstring and its settings with their defaults."""
    script = sys.modules['__main__']
    if {'-h', '--help'} & set(sys.argv[1:]):
        print(script.__doc__.strip() + '\n\nSettings (--key=value) and defaults:')
        for k, v in getattr(script, 'DEFAULTS', {}).items():
            print(f"  --{k}={v!r}")
        return
    try:
        main(sys.argv[1:])
    except ValueError as e:
        if os.environ.get('LONGCTX_DEBUG'):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


def pick_device(name):
    """'auto' -> cuda, else mps, else cpu; an explicit name is checked against this machine."""
    if name == 'auto':
        return 'cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu'
    kind = name.split(':')[0]
    if kind not in ('cpu', 'cuda', 'mps'):
        raise ConfigError(f"device={name!r} is unknown; use auto, cpu, cuda, cuda:N or mps")
    if kind == 'cuda' and not torch.cuda.is_available() or kind == 'mps' and not torch.backends.mps.is_available():
        raise ConfigError(f"device={name!r} is not available on this machine; use --device=cpu or --device=auto")
    return name


def autocast_context(device_type, dtype, training=False):
    """(dtype actually run, context). 'auto' is bfloat16 on CUDA when supported, else float32. bfloat16 runs
    under autocast on CUDA and on CPU alike. float16 needs loss scaling to train, which this engine does not do,
    so training refuses it; evaluation may use it on CUDA. RoPE tables stay float32 either way (rope.py)."""
    if dtype == 'auto':
        dtype = 'bfloat16' if device_type == 'cuda' and torch.cuda.is_bf16_supported() else 'float32'
    if dtype not in ('float32', 'bfloat16', 'float16'):
        raise ConfigError(f"dtype={dtype!r} is unknown; use auto, float32, bfloat16 or float16")
    if dtype == 'float16' and (training or device_type != 'cuda'):
        raise ConfigError("dtype=float16 " + ("would train without loss scaling (gradients underflow)" if training
                          else "runs on CUDA only") + "; use --dtype=bfloat16 or --dtype=float32")
    if dtype == 'float32':
        return dtype, nullcontext()
    return dtype, torch.autocast(device_type=device_type, dtype=getattr(torch, dtype))
