"""The ``evalstop-gym`` command line.

Each subcommand lives in its own module of ``evalstop_gym.commands`` exposing
``add_parser(subparsers)``, which registers its flags and sets ``func`` (called
with the parsed args, returning an exit code); modules are found by name, so a
new command is one new file. ``ORDER`` in a module sorts it in ``--help``.
Bad input exits 2 with a one-line error, no traceback; so does a missing optional
dependency, with the extra that installs it (:mod:`evalstop_gym.extras`).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from .config import ConfigError, UsageError
from .extras import MissingExtra, missing_extra

__all__ = ["main", "build_parser", "UsageError"]


def command_modules() -> list:
    from . import commands

    mods = [importlib.import_module(f"{commands.__name__}.{m.name}")
            for m in pkgutil.iter_modules(commands.__path__)]
    mods = [m for m in mods if hasattr(m, "add_parser")]
    return sorted(mods, key=lambda m: (getattr(m, "ORDER", 100), m.__name__))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalstop-gym",
        description="Simulate a multi-tenant LLM fine-tuning GPU cluster with EvalStop.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod in command_modules():
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
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


if __name__ == "__main__":
    sys.exit(main())
