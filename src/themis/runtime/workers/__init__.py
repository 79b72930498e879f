"""Trial processes on Ray: the launcher and job actors, the lease API that training code
runs under, sealed checkpoints, the Ray cluster and its GPU inventory, the reaper.
Imports ``state`` at most; never the loop or the API."""
