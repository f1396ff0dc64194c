"""A batch's records under another codec: topic-level `compression.type` (Kafka's LogValidator).

Only a topic whose `compression.type` names a codec pays for this (D2 holds elsewhere): the
records section (after the 61-byte header, see records/batch.py) is decompressed, bounded, and
compressed with the topic's codec. The records themselves are not touched, so offsets deltas,
timestamps, keys and the producer's id, epoch and sequence stay as sent; the header changes
in three places:

    8   batchLength   int32    61 - 12 + the new records section
    17  crc           uint32   CRC32C over attributes .. end, recomputed
    21  attributes    int16    bits 0-2: the new codec (the other bits kept)

A batch already in the topic's codec, or a control batch (never compressed), is returned as is.
"""

from __future__ import annotations

import struct

from tidelog.records.batch import (
    ATTR_CODEC_MASK,
    ATTRIBUTES_POSITION,
    BATCH_LENGTH_POSITION,
    CRC_POSITION,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Codec,
    RecordBatch,
    crc32c,
)
from tidelog.records.codecs import compress, decompress

# compression.type values that name a codec (`producer` keeps the batch's own).
TOPIC_CODECS: dict[str, Codec] = {
    "uncompressed": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


def recompress(batch: RecordBatch, codec: Codec, max_uncompressed_bytes: int) -> RecordBatch:
    """`batch` with its records section under `codec`, in a new writable buffer (the log
    rewrites the base offset in place). Raises CorruptRecordError for a bad records section
    or one that inflates past `max_uncompressed_bytes`."""
    if batch.is_control or batch.codec == codec:
        return batch
    raw = decompress(batch.codec, batch.records_bytes, max_uncompressed_bytes)
    body = compress(codec, raw)
    out = bytearray(HEADER_SIZE + len(body))
    out[:HEADER_SIZE] = batch.buffer[:HEADER_SIZE]
    out[HEADER_SIZE:] = body
    _I32.pack_into(out, BATCH_LENGTH_POSITION, len(out) - LOG_OVERHEAD)
    attributes = (batch.attributes & ~ATTR_CODEC_MASK) | int(codec)
    _I16.pack_into(out, ATTRIBUTES_POSITION, attributes)
    _U32.pack_into(out, CRC_POSITION, crc32c(memoryview(out)[CRC_START:]))
    return RecordBatch(out)
