"""Share groups on the event loop (KIP-932, ARCHITECTURE D15): `service.py`."""
