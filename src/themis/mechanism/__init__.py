"""The mechanism: what the simulator and the Ray runtime both keep, whatever the policy.

The view a policy reads and the schedule it answers (``view``), the rules every schedule
keeps (``checks``), the running jobs a schedule stops (``diff``) and the free pool the
simulator lends its policies (``pool``). Neither the simulator nor the runtime imports
the other: both import this room (docs/architecture.md).
"""
