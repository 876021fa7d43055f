"""The performance data protocol: messages, codec, validation and ZeroMQ helpers."""
