"""``evalstop-gym evaluate``: hand-coded or learned policies on held-out seeds; see agents.evaluate."""

ORDER = 31


def add_parser(sub) -> None:
    from agents.cli import subcommand

    subcommand(sub, "evaluate", "evaluate")
