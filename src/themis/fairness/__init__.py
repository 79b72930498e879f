"""Finish-time fairness (DESIGN §3): T_sh, T_id = T_cluster * N_avg, and rho."""
