"""The arbiter: owns the GPUs, runs one round per batch of freed GPUs (docs/design.md §5)."""
