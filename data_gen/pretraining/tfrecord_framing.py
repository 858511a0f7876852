"""TFRecord framing without TensorFlow, byte for byte what tf.io.TFRecordWriter writes (no compression).

Each record is: its length (uint64, little-endian), the masked CRC32C of those 8 bytes (uint32), the data, and
the masked CRC32C of the data (uint32). The mask is TensorFlow's (and LevelDB's): rotate right by 15 bits and
add 0xa282ead8. Beam workers frame records this way so that they never import TensorFlow (about 560 MB each).
The CRC32C comes from google-crc32c (requirements-beam.txt), the implementation Beam's own tfrecordio prefers.

Example:
>>> framed = frame_record(b"hello")
>>> len(framed), framed[:8]
(21, b'\\x05\\x00\\x00\\x00\\x00\\x00\\x00\\x00')
"""

import struct
from typing import BinaryIO, Iterable

__all__ = ["frame_record", "masked_crc32c", "write_records"]

_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    """TensorFlow's masked CRC32C of `data`.

    Example:
    >>> hex(masked_crc32c(b""))
    '0xa282ead8'
    """
    import google_crc32c  # the beam extra; imported here so that data_gen imports without it

    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """`data` framed as one TFRecord (see the module docstring).

    Example:
    >>> frame_record(b"")[8:12] == struct.pack("<I", masked_crc32c(struct.pack("<Q", 0)))
    True
    """
    length = struct.pack("<Q", len(data))
    return b"".join((length, struct.pack("<I", masked_crc32c(length)), data, struct.pack("<I", masked_crc32c(data))))


def write_records(handle: BinaryIO, records: Iterable[bytes]) -> int:
    """Writes `records` framed to the binary file `handle`; returns the number of bytes written.

    Example:
    >>> import io
    >>> write_records(io.BytesIO(), [b"a", b"bc"])
    35
    """
    written = 0
    for record in records:
        framed = frame_record(record)
        handle.write(framed)
        written += len(framed)
    return written
