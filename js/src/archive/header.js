// The archive's identity: the header record (format version, source spec version, export time,
// exporter, record counts and, in a fragment, what it holds) and the marker in the ZS header metadata.
import { ZSCorrupt } from "../errors.js";
import { FragmentInfo } from "./fragments.js";
import { FRAGMENT_FORMAT, HEADER, METADATA_KEY, keyPrefix, split } from "./schema.js";

/**
 * The archive marker in a ZS file's header metadata, or null when it is not a repo archive.
 * @param {{metadata: Record<string, unknown>}} zs
 * @returns {Record<string, any> | null}
 */
export function archiveMetadata(zs) {
  const marker = zs.metadata?.[METADATA_KEY];
  return marker !== null && typeof marker === "object" && !Array.isArray(marker) ? /** @type {any} */ (marker) : null;
}

/** An archive's header record. */
export class ArchiveHeader {
  /**
   * @param {number} formatVersion @param {number} specVersion @param {number} exportTime @param {string} exporter
   * @param {Record<string, number>} counts @param {FragmentInfo | null} fragment
   */
  constructor(formatVersion, specVersion, exportTime, exporter, counts, fragment) {
    this.formatVersion = formatVersion;
    this.specVersion = specVersion;
    this.exportTime = exportTime;
    this.exporter = exporter;
    this.counts = counts;
    this.fragment = fragment;
  }

  /**
   * The header from the header record's value elements; ZSCorrupt naming ``where`` when malformed.
   * @param {any[]} value @param {string} where
   */
  static decode(value, where) {
    if (value.length < 5 || !Array.isArray(value[4]) || !value[4].every((c) => Array.isArray(c) && c.length === 2)) {
      throw new ZSCorrupt(`${where}: malformed archive header record`);
    }
    const [formatVersion, specVersion, exportTime, exporter, counts] = value;
    const fragment = formatVersion === FRAGMENT_FORMAT && value.length > 5 ? FragmentInfo.decode(value[5], where) : null;
    return new ArchiveHeader(formatVersion, specVersion, exportTime, exporter, Object.fromEntries(counts), fragment);
  }

  /**
   * The header record of an archive (a ZS, or a chain: its newest archive's record).
   * @param {{search: Function}} zs @param {string} where
   */
  static async read(zs, where) {
    for await (const rec of zs.search({ prefix: keyPrefix(HEADER) })) return ArchiveHeader.decode(split(rec)[2], where);
    throw new ZSCorrupt(`${where}: archive has no header record`);
  }
}

/** Whether an archive keeps chunk refs per manifest (format 1), not as a per-chunk timeline. @param {number} v */
export const refsByManifest = (v) => v < 2;
/** Whether an archive keeps chunk bytes in pieces and shard indexes (format 3 on). @param {number} v */
export const hasChunkPieces = (v) => v >= 3;
/** Whether an archive may keep the bytes of virtual chunk refs (family E, format 7 on). @param {number} v */
export const keepsVirtualData = (v) => v >= 7;
/** Whether an archive's per-chunk history is its chunk ref timeline with H exceptions (format 5 on). @param {number} v */
export const historyFromTimeline = (v) => v >= 5;
