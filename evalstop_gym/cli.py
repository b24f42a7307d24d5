"""The ``evalstop-gym`` command line.

Each subcommand lives in its own module of ``evalstop_gym.commands`` exposing
``add_parser(subparsers)``, which registers its flags and sets ``func`` (called
with the parsed args, returning an exit code); modules are found by name, so a
new command is one new file. ``ORDER`` in a module sorts it in ``--help``.
A command module is named after its command, so running one command imports
only its module (and what it needs), not every command's.
Bad input exits 2 with a one-line error, no traceback; so does a missing optional
dependency, with the extra that installs it (:mod:`evalstop_gym.extras`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from .config import ConfigError, UsageError
from .extras import MissingExtra, missing_extra

__all__ = ["main", "build_parser", "UsageError"]


def command_modules(only: str | None = None) -> list:
    """The command modules (just the one named ``only``, if there is such a command)."""
    from . import commands

    names = [m.name for m in pkgutil.iter_modules(commands.__path__)]
    mods = [importlib.import_module(f"{commands.__name__}.{name}") for name in names
            if only not in names or name == only]
    mods = [m for m in mods if hasattr(m, "add_parser")]
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 100), m.__name__))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone (enough to run it)."""
    parser = argparse.ArgumentParser(
        prog="evalstop-gym",
        description="Simulate a multi-tenant LLM fine-tuning GPU cluster with EvalStop.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"evalstop-gym {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod in command_modules(command):
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ConfigError, UsageError) as e:
        print(f"evalstop-gym {args.command}: error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:   # an optional dependency: say which extra installs it
        err = missing_extra(e)
        if not isinstance(err, MissingExtra):
            raise
        print(f"evalstop-gym {args.command}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:   # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error at exit
        return 141   # 128 + SIGPIPE, the shell's code for a process ended by a closed pipe


if __name__ == "__main__":
    sys.exit(main())
