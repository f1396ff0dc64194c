"""Transactions on the loop (D14), mirroring `broker/groups/`: `service` (TransactionService:
the pure `tidelog.coordinator.transactions` coordinator bound to `__transaction_state`, one
operation per transactional id at a time, the timeout timer), `markers` (writing COMMIT/ABORT
control batches into partition logs, the path a WriteTxnMarkers handler uses), `loading`
(replaying `__transaction_state`)."""
