// The answers behind the archive's web page, computed in the browser by the reader: the same requests
// and the same JSON as ``zs serve``'s API (zsarchive/frontends/webapi.py), so one page reads an archive
// served by ``zs serve`` or lying on any static host. Every answer is bounded: an array's heatmap is
// at most MAX_BINS chunk bins by MAX_COLUMNS commit columns, whatever the array's size.
import { ZSError } from "../errors.js";
import { openArchive } from "../archive/repoarchive.js";

export const MAX_BINS = 512;
export const MAX_COLUMNS = 256;
export const CELL_CHUNKS = 100;
const CACHED_ARRAYS = 4;

/** A request missing a parameter or giving one of the wrong form. */
export class BadRequest extends ZSError {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "BadRequest";
  }
}

/** @param {Record<string, string>} params @param {string} name */
function required(params, name) {
  const value = params[name];
  if (!value) throw new BadRequest(`missing parameter ${JSON.stringify(name)}`);
  return value;
}

/**
 * @param {Record<string, string>} params @param {string} name @param {number | null} fallback
 * @param {number} low @param {number} high
 */
function integer(params, name, fallback, low, high) {
  const text = params[name];
  if ((text === undefined || text === null) && fallback !== null) return fallback;
  const value = /^[+-]?\d+$/.test(String(text ?? "").trim()) ? Number(text) : NaN;
  if (Number.isNaN(value)) throw new BadRequest(`parameter ${JSON.stringify(name)} must be an integer, not ${JSON.stringify(text ?? "")}`);
  if (!(low <= value && value <= high)) throw new BadRequest(`parameter ${JSON.stringify(name)} must be in [${low}, ${high}], not ${value}`);
  return value;
}

/**
 * The chunks in the array's grid, the first C-order chunk index of each bin, and each change's bin (-1
 * beyond the grid): bin b holds chunk indexes [floor(b * total / bins), floor((b + 1) * total / bins)).
 * @param {{num_chunks: number[], ndim: number, coords: Float64Array, commit: Int32Array}} changes @param {number} most
 * @returns {[number, number[], Int32Array]}
 */
function chunkBins(changes, most) {
  const grid = changes.num_chunks, ndim = changes.ndim;
  const total = grid.reduce((n, k) => n * k, 1);
  const bins = Math.max(1, Math.min(most, total));
  const starts = [];
  for (let b = 0; b <= bins; b++) starts.push(Math.floor(b * (total / bins)));  // as numpy's float64 arithmetic
  const binOf = new Int32Array(changes.commit.length);
  for (let i = 0; i < binOf.length; i++) {
    let linear = 0, inside = true;
    for (let d = 0; d < ndim; d++) {
      const c = changes.coords[i * ndim + d];
      inside &&= c < grid[d];  // a chunk beyond a shrunk grid: none
      linear = linear * grid[d] + c;
    }
    if (!inside) {
      binOf[i] = -1;
      continue;
    }
    let lo = 0, hi = starts.length;  // the first start > linear (numpy's searchsorted, side="right")
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid] <= linear) lo = mid + 1;
      else hi = mid;
    }
    binOf[i] = Math.min(Math.max(lo - 1, 0), bins - 1);
  }
  return [total, starts.slice(0, -1), binOf];
}

/** The page's answers over one archive; requests run one at a time (the reader's caches are shared). */
export class PageAPI {
  /** @param {import("../archive/repoarchive.js").RepoArchive} archive */
  constructor(archive) {
    this.archive = archive;
    /** @type {Map<string, any>} */
    this.changes = new Map();
    /** @type {Promise<unknown>} */
    this.queue = Promise.resolve();
    /** @type {Record<string, (params: Record<string, string>) => Promise<any>>} */
    this.routes = {
      summary: () => this.summary(), graph: () => this.archive.graph({ all: true }),
      log: (p) => this.archive.log(p.ref || null, { since: p.since || null, until: p.until || null, refs: false }),
      show: (p) => this.archive.show(required(p, "ref")), ls: (p) => this.ls(p), heatmap: (p) => this.heatmap(p),
      cell: (p) => this.cell(p), "chunk-log": (p) => this.chunkLog(p),
    };
  }

  /**
   * Open the archive at ``source`` (a URL or a File) for the page.
   * @param {string | Blob} source @param {object} [options]
   */
  static async open(source, options) {
    return new PageAPI(await openArchive(source, options));
  }

  /**
   * The answer to ``api/NAME?params``.
   * @param {string} name @param {Record<string, string>} params
   */
  answer(name, params) {
    const route = this.routes[name];
    if (!route) return Promise.reject(new BadRequest(`no such request: ${JSON.stringify(name)}`));
    const run = this.queue.then(() => route(params));
    this.queue = run.catch(() => undefined);
    return run;
  }

  async summary() {
    return { name: this.archive.name, header: await this.archive.header(), refs: await this.archive.refs() };
  }

  /** @param {Record<string, string>} params */
  async ls(params) {
    const ref = required(params, "ref");
    const nodes = (await this.archive.nodeInfos(ref)).map((node) => {
      /** @type {Record<string, any>} */
      const row = { path: node.path, node_type: node.nodeType, id: node.id };
      if (node.nodeType === "array") {
        Object.assign(row, { shape: node.shape, num_chunks: node.numChunks, dimension_names: node.dimensionNames,
          dtype: node.dtype, chunk_shape: node.chunkShape });
      }
      const meta = node.zarrJson;
      row.attributes = meta !== null && typeof meta === "object" && !Array.isArray(meta) ? meta.attributes ?? {} : {};
      return row;
    });
    return { snapshot_id: await this.archive.resolve(ref), nodes };
  }

  /** @param {string} ref @param {string} path */
  async chunkChanges(ref, path) {
    const key = JSON.stringify([await this.archive.resolve(ref), path]);
    let changes = this.changes.get(key);
    this.changes.delete(key);
    changes ??= await this.archive.chunkChanges(ref, path);
    this.changes.set(key, changes);
    while (this.changes.size > CACHED_ARRAYS) this.changes.delete(this.changes.keys().next().value);
    return changes;
  }

  /** @param {Record<string, string>} params */
  async cells(params) {
    const changes = await this.chunkChanges(required(params, "ref"), required(params, "path"));
    const [total, starts, binOf] = chunkBins(changes, integer(params, "bins", MAX_BINS, 1, MAX_BINS));
    const commits = changes.commits.length;
    const column = changes.commit.map((c) => Math.floor(c * Math.min(commits, MAX_COLUMNS) / Math.max(commits, 1)));
    return { changes, total, starts, binOf, column };
  }

  /** Chunk index (C order, in bins) by commit (oldest first, in columns). @param {Record<string, string>} params */
  async heatmap(params) {
    const { changes, total, starts, binOf, column } = await this.cells(params);
    const bins = starts.length, commits = changes.commits;
    const ncols = Math.min(commits.length, MAX_COLUMNS);
    const counts = Array.from({ length: ncols }, () => new Array(bins).fill(0));
    let outside = 0;
    binOf.forEach((b, i) => {
      if (b < 0) outside += 1;
      else counts[column[i]][b] += 1;
    });
    /** @type {any[][]} */
    const groups = Array.from({ length: ncols }, () => []);
    commits.forEach((/** @type {any} */ commit, /** @type {number} */ i) => groups[Math.floor(i * ncols / commits.length)].push(commit));
    return {
      path: changes.path, node_id: changes.node_id, num_chunks: changes.num_chunks, total_chunks: total, bin_starts: starts,
      columns: groups.map((g) => ({ first: g[0], last: g[g.length - 1], commits: g.length })), counts,
      changes: changes.commit.length, outside,
    };
  }

  /** The chunks (at most CELL_CHUNKS, in order) of heatmap bin BIN that column COLUMN's commits changed. @param {Record<string, string>} params */
  async cell(params) {
    const { changes, starts, binOf, column } = await this.cells(params);
    const ncols = Math.min(changes.commits.length, MAX_COLUMNS);
    const bin = integer(params, "bin", null, 0, starts.length - 1);
    const col = integer(params, "column", null, 0, Math.max(ncols - 1, 0));
    const coords = [];
    let last = null;
    for (let i = 0; i < binOf.length; i++) {
      if (binOf[i] !== bin || column[i] !== col) continue;
      const chunk = Array.from(changes.coords.subarray(i * changes.ndim, (i + 1) * changes.ndim));
      const text = chunk.join(",");
      if (text !== last) coords.push(chunk);  // a chunk's changes are next to each other
      last = text;
    }
    return { path: changes.path, coords: coords.slice(0, CELL_CHUNKS), more: Math.max(coords.length - CELL_CHUNKS, 0) };
  }

  /** @param {Record<string, string>} params */
  async chunkLog(params) {
    const text = params.coords ?? "";
    const coords = text.trim() ? text.split(",").map((c) => (/^\s*[+-]?\d+\s*$/.test(c) ? Number(c) : NaN)) : [];
    if (coords.some(Number.isNaN)) throw new BadRequest(`coords must be integers separated by commas, not ${JSON.stringify(text)}`);
    return this.archive.chunkLog(required(params, "ref"), required(params, "path"), coords);
  }
}
