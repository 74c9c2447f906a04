// What an archive holds, at a glance (``zs summary --json``), as zsarchive/archive/read/summary.py says it.
import { Chain } from "./chain.js";
import { keepsVirtualData } from "./header.js";
import { CHUNK_DATA, CHUNK_REF, FAMILY_NAMES, SNAPSHOT, VIRTUAL, VIRTUAL_DATA, familyStop, keyPrefix, split } from "./schema.js";

/**
 * The summary of an archive as a JSON-ready object.
 * @param {import("./repoarchive.js").RepoArchive} archive
 */
export async function summarize(archive) {
  const header = await archive.header();
  const facts = await archive.repoFacts();
  const config = facts.config !== null && typeof facts.config === "object" ? /** @type {any} */ (facts.config) : {};
  const containers = config !== null && typeof config === "object" && !Array.isArray(config) ? config.virtual_chunk_containers : null;
  const refs = await archive.refs();
  const reached = await archive.reachedBy();
  const branches = [];
  /** @type {Record<string, any[]>} */
  const arrays = {};
  for (const ref of refs) {
    if (ref.type !== "branch") continue;
    const history = await archive.ancestryOf(`branch:${ref.name}`);
    branches.push({ name: ref.name, snapshot_id: ref.snapshot_id, commits: history.length,
      first: history[history.length - 1].flushed_at, last: history[0].flushed_at });
    arrays[ref.name] = (await archive.nodeInfos(`branch:${ref.name}`)).filter((n) => n.nodeType === "array")
      .map((n) => ({ path: n.path, shape: n.shape, dtype: n.dtype, chunk_shape: n.chunkShape }));
  }
  const tags = [];
  for (const r of refs) {
    if (r.type === "tag") tags.push({ name: r.name, snapshot_id: r.snapshot_id, flushed_at: (await archive.snapshot(r.snapshot_id)).flushed_at });
  }
  const snapshots = header.counts[FAMILY_NAMES[SNAPSHOT]] ?? 0;
  const readers = archive.zs instanceof Chain ? archive.zs.members.map((m) => m.zs) : [archive.zs];
  const chain = await archive.chain();
  chain.forEach((entry, i) => {
    entry.size = readers[i].totalFileLength;
  });
  const chunkRecords = header.counts[FAMILY_NAMES[CHUNK_DATA]] ?? 0;
  let chunkBytes = 0;
  if (chunkRecords) {
    for (const zs of readers) chunkBytes += await /** @type {any} */ (zs).blockBytes(keyPrefix(CHUNK_DATA), familyStop(CHUNK_DATA));
  }
  return {
    archive: { location: archive.name, size: readers.reduce((n, zs) => n + /** @type {any} */ (zs).totalFileLength, 0),
      format_version: header.format_version, export_time: header.export_time, exporter: header.exporter, chain },
    source: { spec_version: header.source_spec_version, metadata: facts.metadata ?? null,
      virtual_chunk_containers: containers !== null && typeof containers === "object" && !Array.isArray(containers)
        ? Object.keys(containers).sort() : [] },
    snapshots: { total: snapshots, unreachable: snapshots - reached.size },
    branches, tags,
    deleted_tags: refs.filter((r) => r.type === "deleted_tag").map((r) => r.name),
    arrays,
    virtual_bytes: keepsVirtualData(archive.recordsFormat) ? await virtualBytes(archive, readers) : null,
    chunk_bytes: { embedded: Boolean(chunkRecords), records: chunkRecords, bytes: chunkBytes },
  };
}

/**
 * Of an archive that may keep virtual chunk bytes (format 7): its virtual refs, those whose bytes it keeps
 * (in how many ranges and bytes of the archive), and per prefix the refs that stay references.
 * @param {import("./repoarchive.js").RepoArchive} archive @param {any[]} readers
 */
async function virtualBytes(archive, readers) {
  /** @type {Set<string>} */
  const kept = new Set();
  let keptRanges = 0;
  for await (const rec of archive.zs.search({ prefix: keyPrefix(VIRTUAL_DATA) })) {
    const [, key] = split(rec);
    if (key.length === 6 && key[5] === key[1]) keptRanges += 1;  // a range's first piece
    kept.add(JSON.stringify(key.slice(0, 5)));
  }
  let refs = 0, keptRefs = 0;
  /** @type {Map<string, number>} */
  const notKept = new Map();
  for await (const rec of archive.zs.search({ prefix: keyPrefix(CHUNK_REF) })) {
    const value = split(rec)[2];
    if (value[0] !== VIRTUAL) continue;
    refs += 1;
    if (kept.has(JSON.stringify(value.slice(1, 6)))) {
      keptRefs += 1;
    } else {
      const location = /** @type {string} */ (value[1]);
      const cut = location.lastIndexOf("/");
      const prefix = cut < 0 ? `${location}/` : location.slice(0, cut + 1);
      notKept.set(prefix, (notKept.get(prefix) ?? 0) + 1);
    }
  }
  let bytes = 0;
  for (const zs of readers) bytes += await zs.blockBytes(keyPrefix(VIRTUAL_DATA), familyStop(VIRTUAL_DATA));
  return { refs, kept_refs: keptRefs, kept_ranges: keptRanges, bytes,
    not_kept: [...notKept.keys()].sort().map((prefix) => ({ prefix, refs: notKept.get(prefix) })) };
}
