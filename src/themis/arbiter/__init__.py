"""The arbiter: owns the GPUs, runs one round per batch of freed GPUs (DESIGN §5)."""
