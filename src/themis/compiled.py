"""Which modules the compiled core compiles, and whether this installation has them.

The one list of the modules mypyc compiles: the build backend (``tools/themis_build.py``,
when ``THEMIS_COMPILE=1``) compiles exactly these, ``benchmarks/compiled_core.py``
measures them, and ``themis --version`` says which of them this installation imports as
extension modules. A pure install (the default ``pip install``) runs the same sources
interpreted and decides the same: the compiled build is checked byte for byte against it.

Only the standard library, and no import of the listed modules: the backend loads this
file by path before anything is installed, and ``themis --version`` must stay instant.
"""

from __future__ import annotations

import importlib.machinery
from dataclasses import dataclass
from pathlib import Path

#: The hot modules of the profile (docs/benchmarks.md, "Where the time goes"): the
#: arbiter's round, the agents' bids, placement and state, fairness, the simulator engine,
#: the Themis policy and the auction's Python side (the solver calls numpy and HiGHS).
#: Not ``themis.policies.base``: its ``Policy`` would become an extension class, which
#: the registered (class-decorated) Themis policy and the interpreted policies may not
#: subclass ("Non-extension classes may not inherit from extension classes"). Nor
#: ``themis.auction.lp_path``: it compiles, but its warm start copies an LP with
#: ``object.__new__``, which a compiled class refuses at run time.
CORE_MODULES: tuple[str, ...] = (
    "themis.arbiter.round",
    "themis.arbiter.round_state",
    "themis.arbiter.visibility",
    "themis.arbiter.ranking",
    "themis.arbiter.renewal",
    "themis.arbiter.offer",
    "themis.arbiter.bidding",
    "themis.arbiter.leftover",
    "themis.arbiter.reservation",
    "themis.agent.agent",
    "themis.agent.app_scheduler",
    "themis.model.placement",
    "themis.model.state",
    "themis.model.cluster",
    "themis.fairness.ftf",
    "themis.fairness.shares",
    "themis.simulator.engine",
    "themis.simulator.events",
    "themis.policies.themis",
    "themis.auction.partial_allocation",
    "themis.auction.bids",
    "themis.auction.solver",
    "themis.auction.budget",
    "themis.mechanism.pool",
    "themis.model.workload",
    "themis.model.profiles",
)

#: The other policies' own modules, which the 12-policy comparison spends its time in.
#: Not ``themis.policies._ranked``: its ``RankedPolicy`` would become an extension class,
#: which LAS and SRTF (registered by a class decorator, so classes mypyc leaves
#: interpreted) may not subclass.
POLICY_MODULES: tuple[str, ...] = (
    "themis.policies.fifo",
    "themis.policies.max_min",
    "themis.policies.srtf",
    "themis.policies.las",
    "themis.policies.tiresias",
    "themis.policies.optimus",
    "themis.policies.slaq",
    "themis.policies.gandiva",
    "themis.policies.gavel",
    "themis.policies.ftf_oracle",
    "themis.policies._books",
    "themis.policies._quantum",
    "themis.policies._deficit_rounds",
    "themis.policies._ftf_program",
    "themis.policies._gavel_mechanism",
    "themis.policies._gavel_program",
)

#: Everything ``THEMIS_COMPILE=1`` compiles, in one mypyc group (one shared library, so
#: that calls between these modules are native calls).
MODULES: tuple[str, ...] = CORE_MODULES + POLICY_MODULES


def source_path(module: str) -> str:
    """``themis.arbiter.round`` -> ``themis/arbiter/round.py`` (relative to ``src``)."""
    return module.replace(".", "/") + ".py"


@dataclass(frozen=True)
class CoreStatus:
    """Which of ``MODULES`` this installation imports compiled, and which interpreted."""

    compiled: tuple[str, ...]
    interpreted: tuple[str, ...]

    def describe(self) -> str:
        """One phrase for ``themis --version``."""
        if not self.compiled:
            return "pure Python"
        if not self.interpreted:
            return f"compiled core: {len(self.compiled)} modules"
        return (
            f"compiled core: {len(self.compiled)} of {len(MODULES)} modules; "
            f"not compiled: {', '.join(self.interpreted)}"
        )


def core_status(package_dir: Path | None = None) -> CoreStatus:
    """Which listed modules have an extension module beside their source.

    Python's path finder tries extension suffixes before ``.py``, so a module with a
    ``.so`` here is the one ``import`` loads; looking at files instead of importing keeps
    numpy and the rest out of ``themis --version``.
    """
    root = Path(__file__).parent if package_dir is None else package_dir
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    compiled, interpreted = [], []
    for module in MODULES:
        *packages, name = module.split(".")[1:]
        folder = root.joinpath(*packages)
        if any((folder / f"{name}{suffix}").is_file() for suffix in suffixes):
            compiled.append(module)
        else:
            interpreted.append(module)
    return CoreStatus(tuple(compiled), tuple(interpreted))
