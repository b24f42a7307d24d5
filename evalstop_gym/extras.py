"""Which optional extra provides which third-party module, and the one-line error that says so.

The core install (``pip install evalstop-gym``) runs the simulator and the
Gymnasium envs; commands and layers that need more import it on first use.
When such an import fails, :func:`missing_extra` turns the
``ModuleNotFoundError`` into a :class:`MissingExtra` whose message names the
extra to install; the CLI prints it as one line and exits 2.
"""

from __future__ import annotations

# top-level module -> the extra of pyproject.toml that installs it
EXTRA_OF = {
    "matplotlib": "experiments", "scipy": "experiments", "tqdm": "experiments", "pyarrow": "experiments",
    "stable_baselines3": "rl", "sb3_contrib": "rl", "torch": "rl", "yaml": "rl", "tensorboard": "rl",
    "pettingzoo": "multiagent", "supersuit": "multiagent",
    "ray": "ray", "tree": "ray",
    "pygame": "render", "moviepy": "render",
    "rl_zoo3": "zoo",
    "transformers": "live", "trl": "live", "datasets": "live", "accelerate": "live", "tokenizers": "live",
    "optuna": "live",
    "duckdb": "query",
}


class MissingExtra(ModuleNotFoundError):
    """An optional dependency is not installed; the message says which extra provides it."""


def missing_extra(err: ModuleNotFoundError, what: str | None = None) -> ModuleNotFoundError:
    """``err`` as a :class:`MissingExtra` naming the extra, or ``err`` itself for modules of no extra."""
    top = (err.name or "").split(".")[0]
    extra = EXTRA_OF.get(top)
    if extra is None or isinstance(err, MissingExtra):
        return err
    need = f"{what} needs" if what else "this needs"
    out = MissingExtra(f"{need} the '{extra}' extra ({top} is not installed): "
                       f"pip install 'evalstop-gym[{extra}]'")
    out.name = err.name
    return out
