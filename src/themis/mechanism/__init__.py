"""The mechanism: what the simulator and the Ray runtime both keep, whatever the policy.

The view a policy reads and the schedule it answers (``view``), the rules every schedule
keeps (``checks``), the running jobs a schedule stops and a policy's changes read as a
schedule (``diff``), the free pool the mechanism lends its policies (``pool``), and the
books a mechanism that tracks no changes hands its views (``books``). Neither the
simulator nor the runtime imports the other: both import this room
(docs/architecture.md).
"""
