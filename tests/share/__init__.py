"""Share groups (KIP-932): pure state machines and real share consumers."""
