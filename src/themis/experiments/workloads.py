"""A workload as the command line describes it: a trace or a generator spec, then variants.

``simulate`` and ``compare`` take a trace (``--trace``) and optional variants
(``--gang-mix``, ``--model-share``, ``--contention``); ``--seeds`` reruns everything
per seed. Keeping "which workload, for which seed" in one place means that a seed
changes the same things everywhere: the model draw of traces without models, the
generated workload, the variants' draws, and (through ``PolicyOptions``) the policy's
random choices.

A generated workload is named in ``--trace`` as ``generate:jobs=1500,load=1.5`` (keys:
``jobs``, ``load``, ``min_trials``, ``max_trials``; the rest of ``themis trace generate``'s
options come from the run: the cluster size for the load, the profiles, the seed). It is
drawn again for every seed, so ``--seeds 5`` compares policies over five workloads of the
same distribution, not five replays of one draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from themis.errors import ThemisError
from themis.experiments.variants import compress_arrivals, with_gang_mix, with_model_share
from themis.model.cluster import Cluster
from themis.model.profiles import ModelProfile
from themis.model.workload import Workload
from themis.workload.generator import GeneratorSpec, generate

#: ``--trace generate:KEY=VALUE,...`` names a generated workload instead of a file.
GENERATE_PREFIX = "generate:"
#: The generator's keys a ``generate:`` spec may set, with their types.
GENERATE_KEYS: dict[str, type] = {
    "jobs": int,
    "load": float,
    "min_trials": int,
    "max_trials": int,
    "online_halving": int,
}


_KINDS = {int: "an integer", float: "a number"}
#: Jobs of a ``generate:`` spec without ``jobs=`` (as ``themis trace generate``).
DEFAULT_JOBS = 1000


def is_generated(trace: str) -> bool:
    return trace.startswith(GENERATE_PREFIX)


def parse_generate(trace: str, gpus: int, seed: int) -> GeneratorSpec:
    """The generator spec of ``generate:jobs=1500,load=1.5`` for a ``gpus``-GPU cluster
    and ``seed``; unset keys keep ``themis trace generate``'s defaults (1000 jobs,
    load 1.0, 1..16 trials)."""
    body = trace[len(GENERATE_PREFIX) :]
    values: dict[str, int | float] = {}
    for item in (part.strip() for part in body.split(",")) if body.strip() else ():
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in GENERATE_KEYS:
            known = ", ".join(GENERATE_KEYS)
            raise ThemisError(
                f"'{item}' is not KEY=VALUE with KEY one of {known} (e.g. "
                "generate:jobs=1500,load=1.5)",
                field="--trace",
            )
        try:
            values[key] = GENERATE_KEYS[key](text.strip())
        except ValueError:
            raise ThemisError(
                f"'{key}' must be {_KINDS[GENERATE_KEYS[key]]}, got '{text.strip()}'",
                field="--trace",
            ) from None
    # jobs: ``themis trace generate``'s default; the other keys default as GeneratorSpec's.
    chosen: dict[str, Any] = {"jobs": DEFAULT_JOBS, **values}
    spec = GeneratorSpec(seed=seed, gpus=gpus, **chosen)
    spec.check()
    return spec


def generated_workload(
    trace: str, cluster: Cluster, profiles: dict[str, ModelProfile], seed: int
) -> Workload:
    """The workload ``generate:...`` names, drawn with ``seed``."""
    spec = parse_generate(trace, cluster.size, seed)
    workload = generate(spec, profiles)
    body = trace[len(GENERATE_PREFIX) :]
    return replace(workload, source=f"generated ({body}, seed {seed})")


@dataclass(frozen=True)
class Variants:
    """Changes applied to a loaded workload, in this order: gangs resized to Philly's
    mix, a share of apps switched to one model family, arrivals compressed. The order
    is the paper experiment's (its VGG sweep resizes gangs first); each variant keeps
    what the others set (``experiments/variants.py``)."""

    gang_mix: bool = False
    #: (family, share): ``share`` of the apps train a model whose name starts with family.
    model_share: tuple[str, float] | None = None
    contention: float = 1.0

    def check(self) -> None:
        if self.model_share is not None:
            family, share = self.model_share
            if not family:
                raise ThemisError("needs FAMILY=SHARE, e.g. vgg=0.5", field="--model-share")
            if not (math.isfinite(share) and 0 <= share <= 1):
                raise ThemisError(f"share must be in [0, 1], got {share}", field="--model-share")
        if not (math.isfinite(self.contention) and self.contention > 0):
            raise ThemisError(f"must be a number > 0, got {self.contention}", field="--contention")

    @property
    def any(self) -> bool:
        return self.gang_mix or self.model_share is not None or self.contention != 1.0

    def apply(self, workload: Workload, cluster: Cluster, seed: int) -> Workload:
        """The workload with every variant applied; ``seed`` drives their draws. Gangs are
        capped at one machine of ``cluster`` (a larger rigid gang could never run at its
        best span, and at all on a one-machine cluster)."""
        if self.gang_mix:
            machine = max(len(gpus) for gpus in cluster.machine_gpus.values())
            workload = with_gang_mix(workload, seed=seed, max_gang=machine)
        if self.model_share is not None:
            family, share = self.model_share
            members = tuple(sorted(m for m in workload.profiles if m.startswith(family)))
            if not members:
                known = ", ".join(sorted(workload.profiles))
                raise ThemisError(
                    f"no model name starts with '{family}' (models: {known})",
                    field="--model-share",
                )
            try:
                workload = with_model_share(workload, share, members, seed=seed)
            except ThemisError as exc:
                raise ThemisError(
                    f"{exc.message}: every model starts with '{family}'", field="--model-share"
                ) from None
        if self.contention != 1.0:
            workload = compress_arrivals(workload, self.contention)
        return workload

    def to_dict(self) -> dict[str, object]:
        return {
            "gang_mix": self.gang_mix,
            "model_share": (
                None
                if self.model_share is None
                else f"{self.model_share[0]}={self.model_share[1]:g}"
            ),
            "contention": self.contention,
        }


def parse_model_share(text: str | None, vgg_share: float | None) -> tuple[str, float] | None:
    """``--model-share FAMILY=SHARE`` or ``--vgg-share S`` (its shorthand), not both."""
    if text is not None and vgg_share is not None:
        raise ThemisError("give --model-share or --vgg-share, not both", field="--vgg-share")
    if vgg_share is not None:
        return ("vgg", vgg_share)
    if text is None:
        return None
    family, sep, share = text.partition("=")
    try:
        value = float(share)
    except ValueError:
        value = math.nan
    if not sep or not family.strip() or math.isnan(value):
        raise ThemisError(
            f"must be FAMILY=SHARE (e.g. vgg=0.5), got '{text}'", field="--model-share"
        )
    return (family.strip(), value)
