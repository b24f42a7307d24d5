"""``evalstop-gym train``: train a learned stop-policy or scheduler (stable-baselines3); see agents.train."""

ORDER = 30


def add_parser(sub) -> None:
    from agents.cli import subcommand

    subcommand(sub, "train", "train")
