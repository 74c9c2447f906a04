// ``RepoArchive``: questions about an exported repository answered from the archive alone, each as the
// objects ``zs ... --json`` prints. Open one with ``openArchive(urlOrPathOrBlob)``.
import { asZSError } from "../errors.js";
import { CommitQueries } from "./commits.js";
import { openRecords } from "./reader.js";
import { summarize } from "./summary.js";

/** Queries over a repo archive (a URL, a File or Blob, or in Node a path). */
export class RepoArchive extends CommitQueries {
  /** ``zs summary --json``: what the archive holds, at a glance. */
  async summary() {
    return summarize(this);
  }
}

/** Methods whose failures on a record of the wrong shape become ZSCorrupt naming the archive. */
const GUARDED = ["header", "chain", "repoFacts", "refs", "snapshot", "resolve", "ancestryOf", "log", "ls", "nodeInfos", "node",
  "chunkInfoAt", "chunkRef", "arrayChunk", "readChunk", "shardIndex", "chunkLog", "diff", "ops", "reachedBy", "summary",
  "refNames", "graph", "show", "chunkChanges"];
for (const name of GUARDED) {
  const method = /** @type {any} */ (RepoArchive.prototype)[name];
  Object.defineProperty(RepoArchive.prototype, name, {
    value: async function (/** @type {any[]} */ ...args) {
      try {
        return await method.apply(this, args);
      } catch (err) {
        throw asZSError(this.name, err);
      }
    },
    writable: true, configurable: true,
  });
}
for (const name of ["chunkRefs", "arrayChunks"]) {
  const method = /** @type {any} */ (RepoArchive.prototype)[name];
  Object.defineProperty(RepoArchive.prototype, name, {
    value: async function* (/** @type {any[]} */ ...args) {
      try {
        yield* method.apply(this, args);
      } catch (err) {
        throw asZSError(this.name, err);
      }
    },
    writable: true, configurable: true,
  });
}

/**
 * Open a repo archive: an http(s) URL (or one relative to the page), a File or Blob, or in Node a path
 * or file:// URL. A fragment is opened with the archives it builds on.
 * @param {string | URL | Blob} source
 * @param {{authorize?: string[], fetch?: typeof fetch, headers?: Record<string, string>, timeout?: number}} [options]
 *   ``authorize``: location prefixes under which virtual chunk refs may be read; ``timeout``: milliseconds an
 *   answer may take to begin (30 s; then its body must come at 64 KiB/s)
 * @returns {Promise<RepoArchive>}
 */
export async function openArchive(source, options = {}) {
  const [zs, name, version] = await openRecords(source, options);
  try {
    return new RepoArchive(zs, name, version, options);
  } catch (err) {
    await zs.close();
    throw err;
  }
}
