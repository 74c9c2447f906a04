// zsarchive's reader of repo archives, for browsers and Node: ``openArchive(urlOrPathOrBlob)`` mirrors
// Python's ``RepoArchive``; ``ZS`` reads any ZS v0.10 file; ``ArchiveStore`` serves a snapshot to zarrita.
export { openArchive, RepoArchive } from "./archive/repoarchive.js";
export { ZS } from "./zs/reader.js";
export { ZSError, ZSCorrupt, NotFound } from "./errors.js";
export { ArchiveStore, openStore } from "./zarr/store.js";
