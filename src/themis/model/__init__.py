"""The nouns of the problem: cluster topology, model profiles, apps and jobs, and their
mutable progress state shared by the simulator and the runtime."""
