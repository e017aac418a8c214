"""Writing files so that a reader never sees half of one: near the bottom, importing only binding_lens.errors.

write_atomic(path, data)          bytes: a temporary sibling, fsync, then os.replace
write_atomic_chunks(path, parts)  the same for data in pieces, hashed as written: (bytes, sha256)
write_json_atomic(path, obj)      the same for JSON (sorted keys, indented)
staging_dir(out) / publish_dir()  a whole directory built beside `out` and renamed into place
sha256_file(path)                 the checksum recorded beside what was written
check_writable_dir(out)           refuse an output folder that cannot be written, before any compute
file_mode() / adopt_files(dir)    the mode written files get (0o666 less the umask, as open() gives)
FolderLock(out, command)          one run per output folder: a flock naming its holder (io/lock.py)

An OS error while writing (permission, a file in the way, a full disk) raises errors.WriteError.
"""
