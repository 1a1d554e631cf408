"""flagproxy: a fast Unleash-compatible flag evaluation proxy and flag server."""

__version__ = "0.1.0"
