"""themis: finish-time fair GPU cluster scheduling (Themis, NSDI 2020).

The package is laid out by concept: ``model`` (cluster, profiles, jobs, apps),
``fairness`` (finish-time fairness), ``auction`` (Partial Allocation), ``agent`` (one per
app), ``arbiter`` (the round mechanism), ``policies`` (Themis and baselines behind one
interface), ``simulator`` (discrete-event replay), ``workload`` (trace readers),
``reports`` (metrics and output files) and ``cli``.
"""

from themis.errors import ThemisError

__all__ = ["ThemisError"]
__version__ = "0.1.0"
