"""Types of the C extension built from _columnar.c (see columnar.py for the layout)."""

RawHeaders = tuple[
    bytes | None, int, bytes, int, bytes, bytes, bytes | None, int, bytes, bytes
]
RawColumns = tuple[
    int, bytes, bytes, bytes, bytes | None, int, bytes, bytes, bytes | None, int, bytes, bytes,
    RawHeaders | None,
]

class ColumnBuilder:
    def __init__(self, include_headers: bool) -> None: ...
    @property
    def rows(self) -> int: ...
    @property
    def data_bytes(self) -> int: ...
    def append(
        self,
        records: bytes | bytearray | memoryview,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int,
        start_offset: int,
        end_offset: int,
    ) -> int: ...
    def finish(self) -> RawColumns: ...
