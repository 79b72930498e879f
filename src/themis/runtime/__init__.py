"""The real runtime: Themis scheduling real training jobs on a Ray cluster.

Four rooms, each importing only the rooms below it (``tools/import_scan.py`` holds the
order), and one composition root above them:

- ``state``: what survives a restart (the SQLite store, the state lock, the app file as
  submitted, token hashes, replay of a state directory as a workload). Imports no room.
- ``workers``: trial processes on Ray (the launcher and its job actors, the lease API
  training code runs under, sealed checkpoints, the Ray cluster and its inventory, the
  reaper). Imports ``state`` at most.
- ``loop``: the scheduling tick and its parts (commands, admission, rounds, leases,
  reports, successive halving, inventory changes, status, metrics). Imports ``state`` and
  ``workers``.
- ``api``: HTTP routes, auth, typed request and response models, the dashboard, the
  CLI's client, the uvicorn server. Reads the store and queues commands for the loop.

Ray is imported by ``workers`` only and FastAPI/uvicorn by ``api`` only; the CLI imports
them inside ``themis serve``.
"""

#: The rooms, lowest first: each imports only itself and the rooms before it
#: (``tools/import_scan.py`` enforces it).
__rooms__ = ("state", "workers", "loop", "api")
