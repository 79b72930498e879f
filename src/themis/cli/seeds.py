"""``--seeds`` of ``compare`` and ``experiment paper``: which seeds to run.

A seed count or list is checked here, before any workload is read, so that a typo costs
nothing; what a seed changes is ``RunConfig.with_seed``'s and ``experiments/paper.py``'s
business.
"""

from __future__ import annotations

import click

from themis.errors import ThemisError

#: ``--seeds``: run everything once per seed (``compare``, ``experiment paper``).
seeds_option = click.option(
    "--seeds",
    default=None,
    metavar="N|A,B,...",
    help="Run once per seed and show the median and range (min-max): N means seeds "
    "0..N-1, a list names them (0,3,7). A seed redraws the models, a generated workload, "
    "the variants and the policy's random choices. Not with --seed.",
)

#: Most seeds one ``--seeds N`` may ask for: a guard against a typo costing hours.
MAX_SEEDS = 100


def parse_seeds(text: str | None, seed_given: bool) -> list[int] | None:
    """``--seeds``: ``N`` is seeds ``0..N-1``, ``A,B,...`` those seeds (each once, >= 0);
    ``None`` when not given. ``seed_given``: ``--seed`` was on the command line too."""
    if text is None:
        return None
    if seed_given:
        raise ThemisError("give --seed or --seeds, not both", field="--seeds")
    parts = [p.strip() for p in text.split(",")]
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        raise ThemisError(
            f"must be a count N or a list of seeds A,B,..., got '{text}'", field="--seeds"
        ) from None
    if len(numbers) == 1:
        count = numbers[0]
        if not 1 <= count <= MAX_SEEDS:
            raise ThemisError(f"a count must be in 1..{MAX_SEEDS}, got {count}", field="--seeds")
        return list(range(count))
    if any(n < 0 for n in numbers):
        raise ThemisError(f"seeds must be >= 0, got '{text}'", field="--seeds")
    if len(set(numbers)) != len(numbers):
        raise ThemisError(f"a seed is listed twice in '{text}'", field="--seeds")
    return numbers


def _source(name: str) -> click.core.ParameterSource | None:
    return click.get_current_context().get_parameter_source(name)


def seed_given() -> bool:
    """Whether ``--seed`` was given as well as ``--seeds``, at the same level: both on the
    command line, or both in a ``--config`` file (a flag overrides a file)."""
    sources = _source("seed"), _source("seeds")
    file = click.core.ParameterSource.DEFAULT_MAP
    return sources[0] is click.core.ParameterSource.COMMANDLINE or sources == (file, file)


def seeds_from_config_yield(seeds: str | None) -> str | None:
    """``--seeds``, unless it came from a ``--config`` file and ``--seed`` was given on
    the command line (which overrides it)."""
    if (
        _source("seeds") is click.core.ParameterSource.DEFAULT_MAP
        and _source("seed") is click.core.ParameterSource.COMMANDLINE
    ):
        return None
    return seeds


def seed_on_command_line(name: str = "seed") -> bool:
    """Whether the option ``name`` of the running click command was given explicitly."""
    source = click.get_current_context().get_parameter_source(name)
    return source is click.core.ParameterSource.COMMANDLINE
