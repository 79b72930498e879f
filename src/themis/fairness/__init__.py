"""Finish-time fairness (docs/design.md §3): T_sh, T_id = T_cluster * N_avg, and rho."""
