"""``evalstop-gym train``: train a learned stop-policy or scheduler (stable-baselines3); see evalstop_gym.agents.train."""

ORDER = 30


def add_parser(sub) -> None:
    from evalstop_gym.agents.cli import subcommand

    subcommand(sub, "train", "train")
