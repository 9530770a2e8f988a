"""The transactional outbox carried out through dramatiq (DESIGN §7): senders, the dispatcher,
the relay and the worker. The public names are exported from `turnframe_runtime`."""
