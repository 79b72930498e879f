"""Trace-driven discrete-event simulation in virtual seconds."""

from themis.simulator.engine import Conditions, SimulationResult, Simulator, simulate

__all__ = ["Conditions", "SimulationResult", "Simulator", "simulate"]
