"""An independent reader of Mirrorgate's encrypted store format (README, "Encryption at rest").

`decrypt_store(path, secret, out)` writes a plaintext copy of an encrypted store — the database file and,
when present, its WAL — that the `sqlite3` shell and Python's sqlite3 open as is. It is written from the
documented format, not from the Swift code, so the tests that use it also check that the files are what the
documentation says. Raises `StoreFormatError` for anything that does not verify.

Also: `open_store(path)`, a read-only sqlite3 connection to a store whether it is encrypted (with the
suite's test key, see harness.TEST_STORE_KEY) or not.
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
import tempfile
import time
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MAGIC = b"MG encrypted v1\x00"
HEADER = 4096
PAGE = 4096
RESERVE = 28
USABLE = PAGE - RESERVE
WAL_HEADER = 32
FRAME = 24 + PAGE


class StoreFormatError(Exception):
    pass


def is_encrypted(path) -> bool:
    with open(path, "rb") as f:
        return f.read(16) == MAGIC


def _hkdf(key: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(key)


def keys(path, secret: str) -> tuple[bytes, bytes]:
    """(page key, WAL checksum mask key) of the store at `path`."""
    h = Path(path).read_bytes()[:HEADER]
    if len(h) < HEADER or h[:16] != MAGIC:
        raise StoreFormatError(f"{path}: not an encrypted store")
    cipher, kdf, log2n, r, p, reserve = h[16], h[17], h[18], h[19], h[20], h[21]
    page_size, header_size = struct.unpack(">II", h[24:32])
    if (cipher, kdf, reserve, page_size, header_size) != (1, 1, RESERVE, PAGE, HEADER):
        raise StoreFormatError(f"{path}: unexpected parameters")
    salt = h[32:64]
    kek = hashlib.scrypt(secret.encode(), salt=salt, n=1 << log2n, r=r, p=p, maxmem=256 << 20, dklen=32)
    try:
        data_key = AESGCM(kek).decrypt(h[64:76], h[76:108] + h[108:124], h[:64])
    except InvalidTag:
        raise StoreFormatError(f"{path}: wrong key") from None
    return _hkdf(data_key, b"mirrorgate store v1 page key"), _hkdf(data_key, b"mirrorgate store v1 wal checksum mask")


def _open_page(aead: AESGCM, stored: bytes, aad: bytes, where: str) -> bytes:
    try:
        plain = aead.decrypt(stored[USABLE : USABLE + 12], stored[:USABLE] + stored[USABLE + 12 :], aad)
    except InvalidTag:
        raise StoreFormatError(f"{where} does not verify") from None
    return plain + bytes(RESERVE)


def decrypt_store(path, secret: str, out) -> None:
    path, out = Path(path), Path(out)
    page_key, mask_key = keys(path, secret)
    aead = AESGCM(page_key)
    data = path.read_bytes()
    pages = []
    for i in range((len(data) - HEADER) // PAGE):
        stored = data[HEADER + i * PAGE : HEADER + (i + 1) * PAGE]
        pages.append(_open_page(aead, stored, b"D" + struct.pack(">I", i + 1), f"{path} page {i + 1}"))
    out.write_bytes(b"".join(pages))
    wal = Path(str(path) + "-wal")
    out_wal = Path(str(out) + "-wal")
    out_wal.unlink(missing_ok=True)
    if not wal.exists() or wal.stat().st_size < WAL_HEADER:
        return
    raw = wal.read_bytes()
    plain = bytearray(raw[:WAL_HEADER])
    salts = raw[16:24]
    offset = WAL_HEADER
    while offset + FRAME <= len(raw):
        header = bytearray(raw[offset : offset + 24])
        if bytes(header[8:16]) != salts:  # a frame of an earlier WAL generation: the log ends here
            break
        block = bytes(header[8:16]) + struct.pack(">Q", offset)
        mask = Cipher(algorithms.AES(mask_key), modes.ECB()).encryptor().update(block)
        for k in range(8):
            header[16 + k] ^= mask[k]
        page = _open_page(
            aead, raw[offset + 24 : offset + FRAME], b"W" + struct.pack(">Q", offset) + bytes(header), f"{wal} frame at {offset}"
        )
        plain += header + page
        offset += FRAME
    out_wal.write_bytes(bytes(plain))


def open_store(path, secret: str | None = None) -> sqlite3.Connection:
    """A read-only connection to the store at `path`: directly when plaintext, else to a decrypted copy
    (of a store a running gateway may be writing: a copy caught mid-write is taken again, 5 tries)."""
    path = Path(path)
    if not is_encrypted(path):
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    if secret is None:
        from harness import TEST_STORE_KEY

        secret = TEST_STORE_KEY
    copy = Path(tempfile.mkdtemp(prefix="mg-decrypted-")) / path.name
    for attempt in range(5):
        try:
            decrypt_store(path, secret, copy)
            break
        except StoreFormatError:
            if attempt == 4:
                raise
            time.sleep(0.05)
    return sqlite3.connect(str(copy), timeout=5)
