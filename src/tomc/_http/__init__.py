"""The HTTP server the inspector and the gateway share: uvicorn on a socket bound up front,
deadlines for slow clients, the Host and cross-site checks, and secrets kept out of log lines."""
