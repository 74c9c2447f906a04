// How an array spells its chunks' store keys: zarr's chunk key encodings ``default`` and ``v2``
// (zsarchive/archive/format/chunkkeys.py).
import { ZSError } from "../errors.js";

export class ChunkKeys {
  /**
   * The array at ``path`` whose zarr.json is ``zarrJson`` and chunk grid ``grid``, keyed under ``base``.
   * @param {string} path @param {any} zarrJson @param {number[]} grid @param {string} base
   */
  constructor(path, zarrJson, grid, base) {
    const encoding = (zarrJson && zarrJson.chunk_key_encoding) || { name: "default" };
    const name = encoding.name ?? "default";
    if (name !== "default" && name !== "v2") throw new ZSError(`array ${JSON.stringify(path)}: unknown chunk key encoding ${JSON.stringify(name)}`);
    this.path = path;
    this.base = base;
    this.default = name === "default";
    this.sep = (encoding.configuration || {}).separator ?? (this.default ? "/" : ".");
    this.grid = grid;
  }

  /** The store key of the chunk at ``coords``. @param {number[]} coords */
  key(coords) {
    const text = coords.join(this.sep);
    if (this.default) return text ? `${this.base}c${this.sep}${text}` : `${this.base}c`;
    return `${this.base}${text || "0"}`;
  }

  /** Chunk coordinates spelled by the part of a key after ``base``; null if it spells none. @param {string} rest */
  coords(rest) {
    if (this.default) {
      if (rest === "c") return this.grid.length === 0 ? [] : null;
      if (!rest.startsWith("c" + this.sep)) return null;
      rest = rest.slice(1 + this.sep.length);
    } else if (this.grid.length === 0) {
      return rest === "0" ? [] : null;
    }
    const parts = rest.split(this.sep);
    if (parts.length !== this.grid.length) return null;
    const coords = [];
    for (let i = 0; i < parts.length; i++) {
      // only the canonical spelling is a key: "01" or "+1" name nothing, as in icechunk
      if (!/^\d+$/.test(parts[i]) || (parts[i].length > 1 && parts[i][0] === "0") || Number(parts[i]) >= this.grid[i]) return null;
      coords.push(Number(parts[i]));
    }
    return coords;
  }
}
