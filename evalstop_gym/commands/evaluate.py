"""``evalstop-gym evaluate``: hand-coded or learned policies on held-out seeds; see evalstop_gym.agents.evaluate."""

ORDER = 31


def add_parser(sub) -> None:
    from evalstop_gym.agents.cli import subcommand

    subcommand(sub, "evaluate", "evaluate")
