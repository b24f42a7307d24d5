"""The glue between ``evalstop-gym <command>`` and an ``agents`` module.

A module serving a subcommand exposes ``HELP``, ``DESCRIPTION``,
``add_arguments(parser)`` and ``run(args) -> exit code``; importing it must
stay cheap (no torch), since ``evalstop-gym --help`` builds every parser.
"""

from __future__ import annotations

import importlib


def subcommand(sub, name: str, module: str) -> None:
    """Register ``name`` on the subparsers ``sub``, served by the module ``<module>`` of this package."""
    mod = importlib.import_module(f".{module}", __package__)
    p = sub.add_parser(name, help=mod.HELP, description=mod.DESCRIPTION)
    mod.add_arguments(p)
    p.set_defaults(func=mod.run)
