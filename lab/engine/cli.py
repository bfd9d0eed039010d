"""
How every script runs its main(argv): a bad input ends in one line and exit code 2, a bug in its traceback
(configurator.py reads the settings; this is what the scripts do with the errors).
"""
import os
import sys

from configurator import is_input_error


def cli(main):
    """Run a script's main(argv). A bad input ends in one line, `error: <message>`, and exit code 2: a ConfigError or
    a DataError, a ValueError the project raises on purpose (its traceback ends at a `raise` statement in one of this
    repository's .py files: rope_config.py, model.py, lab/... check their settings that way), and a file the system
    refuses (OSError: disk full, permissions; its message names the file). Any other exception is a bug, in the project
    or in code being tried out (`a, b = [1, 2, 3]` in a main, a ValueError from inside numpy or torch), and shows its
    full traceback. LONGCTX_DEBUG=1 in the environment shows the traceback of the one-line errors too.
    -h/--help prints the script's docstring and its settings with their defaults (a module command with its own
    argparse prints its own). A main that returns an int exits with it (`--check` commands: 1 when a check fails)."""
    script = sys.modules['__main__']
    if {'-h', '--help'} & set(sys.argv[1:]) and hasattr(script, 'DEFAULTS'):
        print(script.__doc__.strip() + '\n\nSettings (--key=value) and defaults:')
        for k, v in getattr(script, 'DEFAULTS', {}).items():
            print(f"  --{k}={v!r}")
        return
    try:
        code = main(sys.argv[1:])
    except (ValueError, OSError) as e:
        if os.environ.get('LONGCTX_DEBUG') or not is_input_error(e):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    if type(code) is int and code:  # (a main that returns its results, eval's, exits 0)
        sys.exit(code)
