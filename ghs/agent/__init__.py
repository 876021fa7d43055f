"""The measuring agent: samplers feed a durable outbox; a sender ships it to the manager."""
