"""``evalstop-gym targets``: learned models against the best hand-coded policies; see evalstop_gym.agents.targets."""

ORDER = 32


def add_parser(sub) -> None:
    from evalstop_gym.agents.cli import subcommand

    subcommand(sub, "targets", "targets")
