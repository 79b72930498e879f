"""One agent per app: it answers the arbiter's questions (its rho now, its rho with each
GPU bundle) and splits granted GPUs among the app's jobs."""
