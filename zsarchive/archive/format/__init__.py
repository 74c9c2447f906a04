"""The archive's on-disk contract, shared by reading and writing: tuple keys, families and record
versions, pieces of stored chunk bytes, virtual shard layouts and fragment descriptions."""
