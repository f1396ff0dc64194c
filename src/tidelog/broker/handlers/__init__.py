"""One module per Kafka API family. Each exports `handlers(deps) -> HandlerTable`, where `deps`
is a frozen dataclass naming exactly the services the family uses (never the whole broker);
`server.handler_table` binds them per broker instance. Shared types: `context.py`."""
