// How much an archive may make the reader decode and hold: the same ceilings as the Python package
// (zsarchive/limits.py), so that a few kilobytes of hostile input never claim gigabytes.

/** Most bytes one ZS block (data or index) may decode to. */
export const MAX_BLOCK = 64 << 20;
/**
 * Most bytes one framed block may take in the file: a block that decodes within MAX_BLOCK is at most that
 * long stored (the framing of stored deflate and raw zstd blocks adds 5 bytes per 64 KiB, the block's own
 * under 20), so a longer extent is refused before any of it is read.
 */
export const MAX_FRAMED_BLOCK = MAX_BLOCK + (MAX_BLOCK >> 10) + 64;
/** Most bytes of parsed data blocks a reader keeps for lookups. */
export const DATA_BLOCK_CACHE = 128 << 20;
/** Index blocks a reader keeps. */
export const INDEX_BLOCK_CACHE = 32;
/** Most bytes a server may send for a whole object it sends instead of the range asked for. */
export const MAX_UNRANGED = 16 << 20;

/**
 * The error for a payload that decodes beyond ``limit`` bytes.
 * @param {number} limit
 * @returns {string}
 */
export function tooLarge(limit) {
  return `decodes to more than ${limit} bytes, the block ceiling of this reader`;
}
