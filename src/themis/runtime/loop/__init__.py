"""The scheduling loop: one tick that answers commands, admits apps, collects reports,
runs rounds and applies successive halving, through parts that each receive what they
use. Imports ``state`` and ``workers``; never the API."""
