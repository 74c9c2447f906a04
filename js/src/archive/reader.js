// Opening a repo archive and reading its records: what every query of RepoArchive stands on. Every
// answer is a handful of prefix lookups or one range scan, so a cold lookup reads only the index path
// and the data block of each record family it touches.
import { ZSCorrupt, ZSError } from "../errors.js";
import { ZS } from "../zs/reader.js";
import { Chain, Member, openChain } from "./chain.js";
import { ArchiveHeader, archiveMetadata } from "./header.js";
import { FAMILY_NAMES, FORMAT_VERSION, METADATA_KEY, REPO, familyStop, keyPrefix, split } from "./schema.js";
import { formatTime } from "./times.js";
import { startsWith } from "./tuples.js";

/**
 * @typedef {import("./tuples.js").Element} Element
 * @typedef {{authorize?: string[], fetch?: typeof fetch, headers?: Record<string, string>, timeout?: number}} OpenOptions
 */

/**
 * A reader (ZS or Chain) of a repo archive, the name it goes by and its format version.
 * @param {string | Blob | URL | ZS} source @param {OpenOptions} [options]
 * @returns {Promise<[ZS | Chain, string, number]>}
 */
export async function openRecords(source, options = {}) {
  const zs = source instanceof ZS ? source : await ZS.open(/** @type {any} */ (source), options);
  const name = zs.name;
  try {
    const marker = archiveMetadata(zs);
    if (marker === null) {
      throw new ZSError(`${name}: a ZS file but not a repo archive (no ${JSON.stringify(METADATA_KEY)} object in its ` +
        "metadata); make one with `zs export`");
    }
    const version = marker.format_version;
    if (!Number.isInteger(version) || version > FORMAT_VERSION) {
      throw new ZSError(`${name}: archive format version ${JSON.stringify(version)} is newer than this reader reads ` +
        `(${FORMAT_VERSION}): upgrade zsarchive`);
    }
    const records = marker.fragment !== undefined && marker.fragment !== null ? await openChain(zs, name, options) : zs;
    return [records, name, version];
  } catch (err) {
    await zs.close();
    throw err;
  }
}

/**
 * The archive header record of a ZS as a JSON-ready object, or null if it is no archive.
 * @param {ZS | Chain} zs
 */
export async function headerSummary(zs) {
  if (archiveMetadata(zs) === null) return null;
  const header = await ArchiveHeader.read(zs, zs.name);
  return {
    format_version: header.formatVersion, source_spec_version: header.specVersion,
    export_time: formatTime(header.exportTime), exporter: header.exporter, counts: header.counts,
  };
}

/** An open repo archive: its records by family and key, its header, chain and repository facts. */
export class ArchiveReader {
  /** @param {ZS | Chain} zs @param {string} name @param {number} formatVersion */
  constructor(zs, name, formatVersion) {
    this.zs = zs;
    this.name = name;
    this.formatVersion = formatVersion;
    /** The format version the records follow (of a chain: that of its view). */
    this.recordsFormat = zs instanceof Chain ? /** @type {any} */ (zs.members[0].info).recordsFormat : formatVersion;
    /** @type {Promise<any> | null} */
    this.headerPromise = null;
  }

  async close() {
    await this.zs.close();
  }

  /**
   * [key, value, record] of every record of ``family`` whose key starts with the elements ``key``.
   * @param {string} family @param {Element[]} [key]
   * @returns {AsyncGenerator<[Element[], Element[], Uint8Array]>}
   */
  async *records(family, key = []) {
    for await (const rec of this.zs.search({ prefix: keyPrefix(family, key) })) {
      const [, k, v] = split(rec);
      if (startsWith(k, key)) yield [k, v, rec];
    }
  }

  /**
   * [key, value] of the records of ``family`` from the key ``start`` up to (not including) ``stop`` (null:
   * the family's end).
   * @param {string} family @param {Element[]} start @param {Element[] | null} stop
   * @returns {AsyncGenerator<[Element[], Element[]]>}
   */
  async *range(family, start, stop) {
    const stopKey = stop === null ? familyStop(family) : keyPrefix(family, stop);
    for await (const rec of this.zs.search({ start: keyPrefix(family, start), stop: stopKey })) {
      const [, k, v] = split(rec);
      yield [k, v];
    }
  }

  /**
   * The value of the record of ``family`` whose key is exactly ``key``, or null.
   * @param {string} family @param {Element[]} key
   */
  async one(family, key) {
    for await (const [k, v] of this.records(family, key)) {
      if (k.length === key.length) return v;
    }
    return null;
  }

  /** The archive header record: format version, source spec version, export time, counts. */
  async header() {
    this.headerPromise ??= headerSummary(this.zs);
    return this.headerPromise;
  }

  /** The archives read as this one, newest first (location, format version, export time, SHA-256, ...). */
  async chain() {
    const members = this.zs instanceof Chain ? this.zs.members : [new Member(/** @type {ZS} */ (this.zs), this.name, null, null)];
    const out = [];
    for (const member of members) {
      /** @type {Record<string, any>} */
      const header = (await headerSummary(member.zs)) ?? {};
      /** @type {Record<string, any>} */
      const entry = {
        location: member.location, format_version: header.format_version ?? null, export_time: header.export_time ?? null,
        sha256: Array.from(member.zs.dataSha256, (b) => b.toString(16).padStart(2, "0")).join(""),
      };
      if (member.info) {
        entry.covers = member.info.covers.map(formatTime);
        entry.records = Object.fromEntries([...member.info.holdings].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([tag, h]) => [FAMILY_NAMES[tag], h.records]));
        entry.tombstones = [...member.info.holdings.values()].reduce((n, h) => n + h.tombstones, 0);
      }
      out.push(entry);
    }
    return out;
  }

  /** Repository-level facts: spec_version, metadata, config, status, feature_flags. */
  async repoFacts() {
    /** @type {Record<string, unknown>} */
    const out = {};
    for await (const [k, v] of this.records(REPO)) {
      const name = /** @type {string} */ (k[0]);
      out[name] = loadJson(/** @type {string} */ (v[0]), `${this.name}: archive repo record ${JSON.stringify(name)}`);
    }
    return out;
  }

  /** Whether the archive holds any record of ``family`` (its header's counts say, no lookup). @param {string} family */
  async counted(family) {
    return Boolean((await this.header()).counts[FAMILY_NAMES[family]]);
  }
}

/**
 * Parse JSON from an archive; ZSCorrupt naming ``where`` if it is not JSON.
 * @param {string} text @param {string} where
 */
export function loadJson(text, where) {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ZSCorrupt(`${where}: not valid JSON (${err.message})`);
  }
}
