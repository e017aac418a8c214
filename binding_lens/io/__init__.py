"""Writing files so that a reader never sees half of one: the bottom layer, importing nothing of binding_lens.

write_atomic(path, data)          bytes: a temporary sibling, fsync, then os.replace
write_atomic_chunks(path, parts)  the same for data in pieces, hashed as written: (bytes, sha256)
write_json_atomic(path, obj)      the same for JSON (sorted keys, indented)
staging_dir(out) / publish_dir()  a whole directory built beside `out` and renamed into place
sha256_file(path)                 the checksum recorded beside what was written
"""

from .atomic import (
    publish_dir,
    sha256_bytes,
    sha256_file,
    staging_dir,
    write_atomic,
    write_atomic_chunks,
    write_json_atomic,
    write_text_atomic,
)

__all__ = [
    "publish_dir",
    "sha256_bytes",
    "sha256_file",
    "staging_dir",
    "write_atomic",
    "write_atomic_chunks",
    "write_json_atomic",
    "write_text_atomic",
]
