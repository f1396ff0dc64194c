"""The network room: the listener, one `Connection` per client (framing, flow control,
response order) and the `Router` (version checks, dispatch, errors as data)."""
