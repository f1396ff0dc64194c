"""One module per Kafka API family; each exports `HANDLERS: dict[int, Handler]`."""
