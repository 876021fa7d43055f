"""Experiments behind ``ghs experiment NAME``: the model against simulation and traces."""
