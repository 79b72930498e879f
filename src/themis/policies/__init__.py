"""Scheduling policies behind one interface (``base.Policy``), found by name in ``registry``."""

from themis.policies.base import Assignment, Policy, PolicyOptions, Schedule, SchedulingView
from themis.policies.registry import make_policy, policy_names, register

__all__ = [
    "Assignment",
    "Policy",
    "PolicyOptions",
    "Schedule",
    "SchedulingView",
    "make_policy",
    "policy_names",
    "register",
]
