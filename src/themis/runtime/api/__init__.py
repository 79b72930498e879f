"""The HTTP API: routes, auth, typed models, the dashboard, the CLI's client and the
server thread. Reads the store, queues commands for the loop, never calls into it."""
