"""Delayed and scheduled delivery (D16): the timer log, the wheel and the deliverer."""
