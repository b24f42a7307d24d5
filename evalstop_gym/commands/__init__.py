"""Subcommands of the ``evalstop-gym`` CLI, one module each."""
