"""
Settings for every script, in one small module (nanoGPT's configurator.py, made strict):

    defaults  <-  config files (python files that assign some of the names)  <-  --key=value

in the order given on the command line. Values are python literals (--max_iters=100, --decay_lr=False,
--rope_type=yarn) or bare strings. An unknown key or a value of the wrong type is an error naming it.
Every script runs its main() through lab/engine/cli.py's cli(), which turns a bad input into one line and exit code 2;
which errors are bad inputs is said here, beside ConfigError (is_input_error), where every room can ask.
(Which device and number format to run in, and torchrun's ranks: lab/engine/device.py.)
"""
import ast
import linecache
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))  # the repository


class ConfigError(ValueError):
    """A bad setting: the message names it and says what to do."""


def is_input_error(e):
    """Whether e is a bad input, reported in one line (lab/engine/cli.py's cli, the eval's worker processes) rather
    than a bug shown with its traceback: a ConfigError or a DataError (data/common.py's, the one bad-data error), a file
    the system refuses (OSError), or a ValueError raised on purpose, by a `raise` statement in one of this repository's
    .py files (rope_config.py, model.py, lab/... check their settings that way)."""
    data = sys.modules.get('data.common')  # (a DataError exists only once data.common is loaded; none imported here)
    if isinstance(e, (ConfigError, OSError)) or data is not None and isinstance(e, data.DataError):
        return True
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next  # the frame the exception was raised in
    if tb is None:
        return False
    path = os.path.abspath(tb.tb_frame.f_code.co_filename)
    ours = path.startswith(ROOT + os.sep) and path.endswith('.py') and 'site-packages' not in path
    return ours and linecache.getline(path, tb.tb_lineno).lstrip().startswith('raise')


def check_seed(seed, where='seed'):
    """A seed as every generator here takes it: a whole number in [0, 2**63) (numpy refuses negative seeds, torch
    overflows past 64 bits). ConfigError naming `where` otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 63:
        raise ConfigError(f"{where}={seed!r} is out of range; a seed is a whole number from 0 to 2**63 - 1")


def get_config(argv, defaults, start=None, source=None):
    """defaults (or `start`, e.g. a resumed run's stored settings) <- config files (argv entries without '--')
    <- --key=value. Unknown keys and wrong types are errors; so are those of `start` when `source` names the file it
    was read from. A `seed` setting must be a whole number in [0, 2**63)."""
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

    for key, val in (start or {}).items() if source else ():
        setkey(key, val, source)
    for arg in argv:
        if not arg.startswith('--'):
            if not os.path.isfile(arg):
                raise ConfigError(f"config file {arg} does not exist; see config/ for the shipped ones "
                                  f"(settings are given as --key=value)")
            scope = {}
            try:  # one namespace, as a module runs: a comprehension in the file sees the file's own names
                with open(arg) as f:
                    exec(f.read(), scope)
            except Exception as e:  # a typo in the file: say which file and what, not a traceback
                raise ConfigError(f"config file {arg} does not run ({type(e).__name__}: {e}); fix it") from None
            for k, v in scope.items():
                if not k.startswith('_') and not callable(v) and not isinstance(v, type(os)):
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
    if 'seed' in defaults:
        check_seed(cfg['seed'])
    return cfg
