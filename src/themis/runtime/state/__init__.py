"""What survives a restart of the arbiter: the store, its lock, the submitted app file, token
hashes, and a state directory read back as a workload. Imports no other room."""
