"""Experiments: many simulations planned together, run in parallel, reported as one."""
