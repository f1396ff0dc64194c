"""Security, sans-I/O (ARCHITECTURE D13): principals, SASL mechanisms, SCRAM credentials, the
ACL model and the pure authorizer. Nothing here touches sockets or asyncio."""
