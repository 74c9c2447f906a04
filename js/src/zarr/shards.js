// Zarr v3 shards (``sharding_indexed``): where a shard keeps its index (zsarchive/archive/format/shards.py),
// so that a request for a shard's index is answered from the copy the archive keeps.

/**
 * @typedef {{atEnd: boolean, indexSize: number}} ShardLayout
 */

/**
 * The shard layout of an array from its zarr.json, or null: not sharded, sharded with codecs after the
 * sharding codec, or with an index whose size cannot be known ahead.
 * @param {any} meta the parsed zarr.json
 * @returns {ShardLayout | null}
 */
export function shardLayout(meta) {
  try {
    const codecs = meta.codecs;
    const sharding = codecs[codecs.length - 1];
    if (sharding === null || typeof sharding !== "object" || sharding.name !== "sharding_indexed") return null;
    const config = sharding.configuration;
    const shardShape = meta.chunk_grid.configuration.chunk_shape;
    const innerShape = config.chunk_shape;
    const indexCodecs = (config.index_codecs ?? []).map((/** @type {any} */ c) => (typeof c === "object" && c !== null ? c : { name: c }));
    const location = config.index_location ?? "end";
    const names = indexCodecs.map((/** @type {any} */ c) => c.name).join(",");
    if ((names !== "bytes" && names !== "bytes,crc32c") || (location !== "start" && location !== "end")) return null;
    if (!Array.isArray(shardShape) || !Array.isArray(innerShape) || shardShape.length !== innerShape.length ||
        ![...shardShape, ...innerShape].every((n) => Number.isInteger(n) && n > 0) ||
        !shardShape.every((s, i) => s % innerShape[i] === 0)) {
      return null;
    }
    const inner = shardShape.reduce((n, s, i) => n * (s / innerShape[i]), 1);
    if (inner > 2 ** 24) return null;
    return { atEnd: location === "end", indexSize: 16 * inner + (names.endsWith("crc32c") ? 4 : 0) };
  } catch {
    return null;
  }
}

/** ``[start, stop)`` of the index within a shard of ``length`` bytes. @param {ShardLayout} layout @param {number} length */
export function indexSpan(layout, length) {
  return layout.atEnd ? [length - layout.indexSize, length] : [0, layout.indexSize];
}
