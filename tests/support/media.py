"""Real image and PDF bytes built in the test, no files in the repository: a PNG of any size (one pixel changeable),
a JPEG header, a PDF of any page count."""

from __future__ import annotations

import random
import struct
import zlib


def png(
    width: int = 4, height: int = 3, *, changed: tuple[int, int] | None = None, shade: int = 0, noisy: bool = False
) -> bytes:
    """A valid RGB PNG; ``changed`` flips one pixel's red value, so the bytes (and the digest) differ by it.

    ``noisy``: seeded random pixels, which do not compress (a PNG of about 3 bytes a pixel).
    """
    rows = []
    noise = random.Random(shade).randbytes(width * height * 3) if noisy else b""
    for y in range(height):
        if noisy:
            rows.append(b"\x00" + noise[y * width * 3 : (y + 1) * width * 3])
            continue
        row = bytearray()
        for x in range(width):
            red = (x * 40 + shade) % 256
            if changed == (x, y):
                red ^= 0xFF
            row += bytes((red, (y * 60) % 256, 128))
        rows.append(b"\x00" + bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )


def png_header(width: int, height: int) -> bytes:
    """Only the signature and header of a PNG claiming this size (what the pixel limit reads)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + b"IHDR"
        + header
        + struct.pack(">I", zlib.crc32(b"IHDR" + header))
    )


def jpeg_header(width: int, height: int) -> bytes:
    """A JPEG's start: SOI, an APP0 segment, then a baseline start of frame holding the size."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def pdf(pages: int = 2) -> bytes:
    """A minimal PDF of ``pages`` empty pages."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode())
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>"] * pages
    body = b"%PDF-1.4\n"
    offsets = []
    for i, obj in enumerate(objects):
        offsets.append(len(body))
        body += f"{i + 1} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(body)
    body += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    body += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    body += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return body
