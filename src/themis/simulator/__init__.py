"""Trace-driven discrete-event simulation in virtual seconds."""

from themis.simulator.engine import SimulationResult, Simulator, simulate

__all__ = ["SimulationResult", "Simulator", "simulate"]
