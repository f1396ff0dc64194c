"""The asyncio broker, in rooms: `server` (wiring and lifecycle), `net/` (listener, connection,
router), `handlers/` (one module per API family), the services that bind pure parts to the loop
(replication, groups, cluster), and metrics. Layering is enforced by import-linter."""
